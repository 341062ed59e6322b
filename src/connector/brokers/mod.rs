//! A connector whose records go to a broker other than Kafka: which sink opener, checkpoint
//! store and delivery loop each one takes (ARCHITECTURE.md, "Adding a sink").
//!
//! | sink | loop | checkpoint |
//! |---|---|---|
//! | NATS JetStream | at-least-once, `Nats-Msg-Id` dedupe window | KV bucket, revision-fenced |
//! | Redis Streams | exactly-once: `XADD`s and checkpoint in one Lua script (`EVAL`) | a key, fenced by an epoch key the script checks |
//! | RabbitMQ | at-least-once, publisher confirms | file |

mod nats;
mod rabbitmq;
mod redis;

use tokio::sync::watch;

use crate::checkpoint::{
    Checkpoint, CheckpointError, CheckpointStore, NatsCheckpointStore, RedisCheckpointStore,
};
use crate::config::{ConnectorConfig, SinkConfig};
use crate::error::Class;
use crate::health::Health;
use crate::pipeline::Error;
use crate::sink::SinkError;

use super::Connector;

/// The checkpoint store a non-Kafka sink keeps itself (`[connectors.checkpoint] store =
/// "sink"`), for reading it (`status`, `checkpoint show`) or the at-least-once loop.
/// Kafka and RabbitMQ keep none (configuration refuses `store = "sink"` for them): a
/// store that says so.
pub(super) fn sink_store(cfg: &ConnectorConfig) -> Box<dyn CheckpointStore> {
    match &cfg.sink {
        SinkConfig::Nats(n) => Box::new(NatsCheckpointStore::new(
            n,
            &cfg.name,
            crate::sink::nats::StreamNotes::of(&cfg.name),
        )),
        SinkConfig::Redis(r) => Box::new(RedisCheckpointStore::new(r, &cfg.name)),
        SinkConfig::Kafka | SinkConfig::RabbitMq(_) => Box::new(NoSinkStore(cfg.sink.kind())),
    }
}

/// `store = "sink"` for a sink that keeps no checkpoint: every use is a definite error.
struct NoSinkStore(&'static str);

impl NoSinkStore {
    fn refused(&self) -> CheckpointError {
        CheckpointError::Broker {
            broker: self.0,
            detail: format!(
                "a {} sink keeps no checkpoint (store = \"sink\" is for NATS JetStream and \
                 Redis); set [connectors.checkpoint] store = \"file\" or \"kafka\"",
                self.0
            ),
            class: Class::Definite,
        }
    }
}

#[async_trait::async_trait]
impl CheckpointStore for NoSinkStore {
    async fn load(&self) -> Result<Option<Checkpoint>, CheckpointError> {
        Err(self.refused())
    }
    async fn store(&mut self, _: &Checkpoint) -> Result<(), CheckpointError> {
        Err(self.refused())
    }
    async fn clear(&mut self) -> Result<(), CheckpointError> {
        Err(self.refused())
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
            SinkConfig::Nats(n) => self.run_on_nats(n, store, health, shutdown).await,
            SinkConfig::Redis(r) => self.run_on_redis(r, store, health, shutdown).await,
            SinkConfig::RabbitMq(r) => self.run_on_rabbitmq(r, store, health, shutdown).await,
            other => Err(SinkError::broker(
                "outboxd",
                Class::Definite,
                format!("sink type {} has no delivery here", other.kind()),
            )
            .into()),
        }
    }
}
