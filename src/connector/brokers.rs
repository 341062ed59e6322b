//! A connector whose records go to a broker other than Kafka: which sink opener, checkpoint
//! store and delivery loop each one takes (ARCHITECTURE.md, "Adding a sink").
//!
//! | sink | loop | checkpoint |
//! |---|---|---|
//! | NATS JetStream | at-least-once, `Nats-Msg-Id` dedupe window | KV bucket, revision-fenced |
//! | Redis Streams | exactly-once: `XADD`s and checkpoint in one `MULTI`/`EXEC` | a key, fenced by `WATCH` |
//! | RabbitMQ | at-least-once, publisher confirms | file |

use tokio::sync::watch;

use crate::checkpoint::CheckpointStore;
use crate::config::SinkConfig;
use crate::error::Class;
use crate::health::Health;
use crate::pipeline::Error;
use crate::sink::SinkError;

use super::Connector;
use crate::metrics as m;

/// The wait before a RabbitMQ connector runs again after a run ended with the connection
/// lost (the opener then waits for the broker itself) or a queue full.
const RABBITMQ_RETRY_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// The checkpoint store a non-Kafka sink keeps itself (`[connectors.checkpoint] store =
/// "sink"`), for reading it (`status`, `checkpoint show`) or the at-least-once loop. A
/// RabbitMQ sink has none (its checkpoint is a file: the configuration requires it).
pub(super) fn sink_store(cfg: &crate::config::ConnectorConfig) -> Box<dyn CheckpointStore> {
    match &cfg.sink {
        SinkConfig::Nats(n) => Box::new(crate::checkpoint::NatsCheckpointStore::new(
            n,
            &cfg.name,
            crate::sink::nats::StreamNotes::of(&cfg.name),
        )),
        // Never asked: the configuration gives a RabbitMQ sink a file store.
        SinkConfig::RabbitMq(_) => Box::new(Unavailable("RabbitMQ (its checkpoint is a file)")),
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
        if let SinkConfig::Nats(n) = &self.cfg.sink {
            let opener = crate::sink::nats::NatsAcked {
                cfg: n,
                connector: &self.cfg.name,
                notes: crate::sink::nats::StreamNotes::of(&self.cfg.name),
            };
            return self.run_acked(&opener, store, health, shutdown).await;
        }
        if let SinkConfig::RabbitMq(rabbit) = &self.cfg.sink {
            // No transactions in AMQP 0-9-1 that could hold the checkpoint: records are
            // confirmed, then the checkpoint is written to its file (at-least-once).
            let opener = crate::sink::rabbitmq::RabbitMqOpener::new(rabbit, &self.cfg.name);
            loop {
                let ended = self
                    .run_acked(&opener, store, health, shutdown.clone())
                    .await;
                // A run that ended with the connection lost or a queue full is run again
                // here, its episode reported once by the sink (not one restart WARN per
                // retry by the connector).
                let failure = match ended {
                    Err(f) if !*shutdown.borrow() && opener.retry_quietly(&f) => f,
                    other => return other,
                };
                let name = self.cfg.name.as_str();
                health.set_because(
                    name,
                    crate::health::ConnectorState::Retrying,
                    format!("running again from the checkpoint after: {failure}"),
                );
                metrics::counter!(m::ERRORS, m::LABEL_CONNECTOR => name.to_string(), m::LABEL_KIND => Class::Transient.label()).increment(1);
                metrics::counter!(m::RESTARTS, m::LABEL_CONNECTOR => name.to_string()).increment(1);
                let mut sd = shutdown.clone();
                tokio::select! {
                    _ = tokio::time::sleep(RABBITMQ_RETRY_WAIT) => {}
                    _ = sd.wait_for(|v| *v) => return Err(failure),
                }
            }
        }
        let _ = (store, health, shutdown);
        Err(SinkError::broker(
            "outboxd",
            Class::Definite,
            format!("sink type {} is not built yet", self.cfg.sink.kind()),
        )
        .into())
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
