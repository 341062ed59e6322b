//! A RabbitMQ connector: the at-least-once loop on [`RabbitMqOpener`]'s sink with the
//! configured file store (AMQP 0-9-1 has no transaction that could hold the checkpoint:
//! records are confirmed, then the checkpoint is written). A run that ended with the
//! connection lost or a queue full is run again here, its episode reported once by the
//! sink, not with the connector's restart WARN at each retry.

use std::time::Duration;

use tokio::sync::watch;

use crate::checkpoint::CheckpointStore;
use crate::config::sinks::RabbitMqSinkConfig;
use crate::error::Class;
use crate::health::{ConnectorState, Health};
use crate::metrics as m;
use crate::pipeline::Error;
use crate::sink::rabbitmq::{RabbitMqOpener, RabbitMqSink};

use super::super::open::OpenSink;
use super::super::Connector;

/// The wait before a RabbitMQ connector runs again after a run ended with the connection
/// lost (the opener then waits for the broker itself) or a queue full.
const RETRY_WAIT: Duration = Duration::from_secs(2);

/// [`RabbitMqOpener`] as a connector's [`OpenSink`]: in a group, only while this member
/// owns the connector.
struct RabbitMqOpen<'a> {
    inner: RabbitMqOpener<'a>,
    connector: &'a Connector,
}

impl OpenSink for RabbitMqOpen<'_> {
    type Sink = RabbitMqSink;

    async fn open(&self, shutdown: &watch::Receiver<bool>) -> Result<Option<RabbitMqSink>, Error> {
        self.connector.still_owned()?;
        Ok(self.inner.open(shutdown).await?)
    }

    async fn close(&self, sink: RabbitMqSink) -> Result<(), Error> {
        self.inner.close(sink).await;
        Ok(())
    }
}

impl Connector {
    /// One attempt of a RabbitMQ connector (with quiet re-runs after a reported episode).
    pub(super) async fn run_on_rabbitmq(
        &self,
        r: &RabbitMqSinkConfig,
        store: &mut dyn CheckpointStore,
        health: &Health,
        shutdown: watch::Receiver<bool>,
    ) -> Result<(), Error> {
        let opener = RabbitMqOpen {
            inner: RabbitMqOpener::new(r, &self.cfg.name),
            connector: self,
        };
        loop {
            let ended = self
                .run_acked(&opener, store, health, shutdown.clone())
                .await;
            let failure = match ended {
                Err(f)
                    if !*shutdown.borrow() && opener.inner.retry_quietly(f.is_transient(), &f) =>
                {
                    f
                }
                other => return other,
            };
            let name = self.cfg.name.as_str();
            health.set_because(
                name,
                ConnectorState::Retrying,
                format!("running again from the checkpoint after: {failure}"),
            );
            metrics::counter!(m::ERRORS, m::LABEL_CONNECTOR => name.to_string(), m::LABEL_KIND => Class::Transient.label()).increment(1);
            metrics::counter!(m::RESTARTS, m::LABEL_CONNECTOR => name.to_string()).increment(1);
            let mut sd = shutdown.clone();
            tokio::select! {
                _ = tokio::time::sleep(RETRY_WAIT) => {}
                _ = sd.wait_for(|v| *v) => return Err(failure),
            }
            self.still_owned()?;
        }
    }
}
