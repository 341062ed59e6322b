//! A connector whose records go to a broker other than Kafka: which sink opener, checkpoint
//! store and delivery loop each one takes (ARCHITECTURE.md, "Adding a sink").
//!
//! | sink | loop | checkpoint |
//! |---|---|---|
//! | NATS JetStream | at-least-once, `Nats-Msg-Id` dedupe window | KV bucket, revision-fenced |
//! | Redis Streams | exactly-once: `XADD`s and checkpoint in one Lua script (`EVAL`) | a key, fenced by an epoch key the script checks |
//! | RabbitMQ | at-least-once, publisher confirms | file |

use tokio::sync::watch;

use crate::checkpoint::{CheckpointStore, RedisCheckpointStore};
use crate::config::sinks::RedisSinkConfig;
use crate::config::{CheckpointConfig, SinkConfig};
use crate::error::Class;
use crate::health::Health;
use crate::pipeline::transactional::BatchOptions;
use crate::pipeline::Error;
use crate::sink::redis::Mode;
use crate::sink::RedisSink;
use crate::sink::SinkError;

use super::open::OpenSink;
use super::Connector;

/// The checkpoint store a non-Kafka sink keeps itself (`[connectors.checkpoint] store =
/// "sink"`), for reading it (`status`, `checkpoint show`) or the at-least-once loop.
pub(super) fn sink_store(cfg: &crate::config::ConnectorConfig) -> Box<dyn CheckpointStore> {
    match &cfg.sink {
        SinkConfig::Redis(r) => Box::new(RedisCheckpointStore::new(r, &cfg.name)),
        other => Box::new(Unavailable(other.kind())),
    }
}

impl Connector {
    /// Runs one attempt of a connector whose records go to a non-Kafka broker, with `store`
    /// (the configured store: the sink's own or a file).
    pub(super) async fn run_on_broker(
        &self,
        store: &mut dyn CheckpointStore,
        health: &Health,
        shutdown: watch::Receiver<bool>,
    ) -> Result<(), Error> {
        match &self.cfg.sink {
            SinkConfig::Redis(r) => self.run_on_redis(r, store, health, shutdown).await,
            _ => self.not_built(store, health, shutdown),
        }
    }

    /// A Redis Streams sink: the exactly-once loop with the checkpoint in Redis (`store =
    /// "sink"`), else the at-least-once loop with the configured store.
    async fn run_on_redis(
        &self,
        r: &RedisSinkConfig,
        store: &mut dyn CheckpointStore,
        health: &Health,
        shutdown: watch::Receiver<bool>,
    ) -> Result<(), Error> {
        match &self.cfg.checkpoint {
            CheckpointConfig::Sink {} => {
                let opener = RedisOpen {
                    cfg: r,
                    connector: self,
                    mode: Mode::Transactional,
                };
                let store = RedisCheckpointStore::new(r, &self.cfg.name);
                self.run_transactional(&opener, &store, &redis_batch(r), health, shutdown)
                    .await
            }
            _ => {
                let opener = RedisOpen {
                    cfg: r,
                    connector: self,
                    mode: Mode::Acked,
                };
                self.run_acked(&opener, store, health, shutdown).await
            }
        }
    }

    /// Placeholder for the sinks not built yet.
    fn not_built(
        &self,
        store: &mut dyn CheckpointStore,
        health: &Health,
        shutdown: watch::Receiver<bool>,
    ) -> Result<(), Error> {
        let _ = (store, health, shutdown);
        Err(SinkError::broker(
            "outboxd",
            Class::Definite,
            format!("sink type {} is not built yet", self.cfg.sink.kind()),
        )
        .into())
    }
}

/// The bounds of one Redis batch (one commit script): `batch_max_events` and
/// `batch_max_bytes` of the sink, smaller than a Kafka transaction's because Redis runs the
/// script to its end before it serves any other client (about 50 ms for 5,000 entries of
/// 400 bytes with `appendfsync always`).
fn redis_batch(r: &RedisSinkConfig) -> BatchOptions {
    BatchOptions {
        max_events: r.batch_max_events,
        max_bytes: r.batch_max_bytes,
        ..BatchOptions::default()
    }
}

/// Opens a connector's Redis sink ([`RedisSink::open`]): for the exactly-once loop fenced by
/// a new epoch, for the at-least-once loop (a file checkpoint) appending record by record.
struct RedisOpen<'a> {
    cfg: &'a RedisSinkConfig,
    connector: &'a Connector,
    mode: Mode,
}

impl OpenSink for RedisOpen<'_> {
    type Sink = RedisSink;

    /// In a group, only while this member owns the connector: taking an epoch fences the
    /// owner.
    async fn open(&self, shutdown: &watch::Receiver<bool>) -> Result<Option<RedisSink>, Error> {
        self.connector.still_owned()?;
        let name = self.connector.cfg.name.as_str();
        Ok(RedisSink::open(self.cfg, name, self.mode, shutdown).await?)
    }

    /// Every batch is committed or dropped by the loop, every record answered when sent.
    async fn close(&self, _sink: RedisSink) -> Result<(), Error> {
        Ok(())
    }
}

/// Placeholder while the sinks are built.
struct Unavailable(&'static str);

#[async_trait::async_trait]
impl CheckpointStore for Unavailable {
    async fn load(
        &self,
    ) -> Result<Option<crate::checkpoint::Checkpoint>, crate::checkpoint::CheckpointError> {
        Err(crate::checkpoint::CheckpointError::Broker {
            broker: self.0,
            detail: "not built yet".into(),
            class: Class::Definite,
        })
    }
    async fn store(
        &mut self,
        _c: &crate::checkpoint::Checkpoint,
    ) -> Result<(), crate::checkpoint::CheckpointError> {
        Err(crate::checkpoint::CheckpointError::Broker {
            broker: self.0,
            detail: "not built yet".into(),
            class: Class::Definite,
        })
    }
    async fn clear(&mut self) -> Result<(), crate::checkpoint::CheckpointError> {
        Ok(())
    }
}

#[allow(dead_code)]
fn _kinds(s: &SinkConfig) -> &'static str {
    s.kind()
}
