//! The checkpoint kept in Redis, beside the streams (`[connectors.checkpoint] store =
//! "sink"` with a Redis sink): the JSON document (see [`super`]) in a string key,
//! `outboxd:checkpoint:<connector>` unless `checkpoint_key` says otherwise, and the fencing
//! epoch in `<checkpoint_key>:epoch`.
//!
//! While the connector runs the key is written only by the sink's commit script, together
//! with the records ([`crate::sink::redis`]): this store's [`CheckpointRecords::record`] is
//! the record carrying the document into that script. [`CheckpointStore::store`] and
//! [`CheckpointStore::clear`] are for the commands (`checkpoint reset`, imports) and bump
//! the epoch first, so an instance still running is fenced and cannot write over them.

use redis::aio::MultiplexedConnection;

use super::{Checkpoint, CheckpointError, CheckpointRecords, CheckpointStore};
use crate::config::sinks::redis::RedisSinkConfig;
use crate::error::Class;
use crate::sink::redis::{connect, BROKER};
use crate::sink::RedisSink;

/// A connector's checkpoint in Redis.
#[derive(Debug, Clone)]
pub struct RedisCheckpointStore {
    cfg: RedisSinkConfig,
    key: String,
}

impl RedisCheckpointStore {
    /// The store of connector `connector` whose sink is `cfg`.
    pub fn new(cfg: &RedisSinkConfig, connector: &str) -> Self {
        Self {
            key: cfg.checkpoint_key(connector),
            cfg: cfg.clone(),
        }
    }

    async fn conn(&self) -> Result<MultiplexedConnection, CheckpointError> {
        connect(&self.cfg, std::time::Duration::ZERO)
            .await
            .map_err(|(class, detail)| CheckpointError::Broker {
                broker: BROKER,
                detail,
                class,
            })
    }

    fn failed(&self, e: &redis::RedisError, doing: &str) -> CheckpointError {
        let (class, detail) = crate::sink::redis::classify(e, &format!("{doing} {}", self.key));
        CheckpointError::Broker {
            broker: BROKER,
            detail,
            class,
        }
    }
}

impl CheckpointRecords for RedisCheckpointStore {
    fn record(
        &self,
        checkpoint: &Checkpoint,
    ) -> Result<crate::record::KafkaRecord, CheckpointError> {
        let json = serde_json::to_vec(checkpoint).map_err(|e| CheckpointError::Serialise {
            source: std::sync::Arc::new(e),
        })?;
        Ok(RedisSink::checkpoint_record(&self.key, json))
    }
}

#[async_trait::async_trait]
impl CheckpointStore for RedisCheckpointStore {
    /// `GET <key>`. Errors: Redis unreachable (transient), the login refused, the key not
    /// holding a checkpoint document (definite).
    async fn load(&self) -> Result<Option<Checkpoint>, CheckpointError> {
        let mut conn = self.conn().await?;
        let got: Option<Vec<u8>> = redis::cmd("GET")
            .arg(&self.key)
            .query_async(&mut conn)
            .await
            .map_err(|e| self.failed(&e, "reading the checkpoint"))?;
        match got {
            None => Ok(None),
            Some(bytes) => serde_json::from_slice(&bytes).map(Some).map_err(|e| {
                CheckpointError::Broker {
                    broker: BROKER,
                    detail: format!(
                        "the key {} does not hold an outboxd checkpoint ({e}); delete it or set another checkpoint_key",
                        self.key
                    ),
                    class: Class::Definite,
                }
            }),
        }
    }

    /// `INCR <key>:epoch` (fencing a running instance), then `SET <key>`.
    async fn store(&mut self, checkpoint: &Checkpoint) -> Result<(), CheckpointError> {
        let json = serde_json::to_vec(checkpoint).map_err(|e| CheckpointError::Serialise {
            source: std::sync::Arc::new(e),
        })?;
        let mut conn = self.conn().await?;
        redis::pipe()
            .atomic()
            .cmd("INCR")
            .arg(format!("{}:epoch", self.key))
            .ignore()
            .cmd("SET")
            .arg(&self.key)
            .arg(json)
            .ignore()
            .query_async::<()>(&mut conn)
            .await
            .map_err(|e| self.failed(&e, "writing the checkpoint"))
    }

    /// `INCR <key>:epoch` (fencing a running instance), then `DEL <key>`.
    async fn clear(&mut self) -> Result<(), CheckpointError> {
        let mut conn = self.conn().await?;
        redis::pipe()
            .atomic()
            .cmd("INCR")
            .arg(format!("{}:epoch", self.key))
            .ignore()
            .cmd("DEL")
            .arg(&self.key)
            .ignore()
            .query_async::<()>(&mut conn)
            .await
            .map_err(|e| self.failed(&e, "removing the checkpoint"))
    }
}
