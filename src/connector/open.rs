//! How a connector opens its sink: once per run of the delivery loop, and anew for a replay
//! (a fresh producer or connection carries nothing of the refused records' state).
//!
//! One implementation per broker: Kafka's at-least-once and transactional producers here,
//! the other brokers' next to their sinks (`crate::sink`).

use std::future::Future;
use std::time::Duration;

use tokio::sync::watch;

use crate::pipeline::Error;
use crate::sink::{KafkaSink, RecordSink};

use super::Connector;

/// Opens a connector's sink.
pub(crate) trait OpenSink: Sync {
    /// The opened sink.
    type Sink: RecordSink + Send;

    /// Opens the sink (connects, logs in, and for a transactional sink fences older
    /// instances). `Ok(None)` when `shutdown` turned true first: nothing was read yet.
    /// Errors: a refused login or certificate (definite), the broker unreachable (transient).
    fn open(
        &self,
        shutdown: &watch::Receiver<bool>,
    ) -> impl Future<Output = Result<Option<Self::Sink>, Error>> + Send;

    /// Ends a run on `sink`: sends what is still queued (bounded wait). Errors: what could
    /// not be sent (it is not checkpointed).
    fn close(&self, sink: Self::Sink) -> impl Future<Output = Result<(), Error>> + Send;
}

/// Kafka's idempotent producer, for the at-least-once loop.
pub(super) struct KafkaAcked<'a>(pub(super) &'a Connector);

impl OpenSink for KafkaAcked<'_> {
    type Sink = KafkaSink;

    async fn open(&self, shutdown: &watch::Receiver<bool>) -> Result<Option<KafkaSink>, Error> {
        let c = self.0;
        let sink = KafkaSink::new(&c.cfg.kafka, &c.cfg.name, c.link.clone())?
            .with_shutdown(shutdown.clone())
            .with_own_topics(c.own_topics())
            .with_topic_prefix(c.cfg.router.topic_prefix.clone());
        // A refused login or an unverifiable broker certificate stops the connector now, not
        // after the first records' delivery timeout; a shutdown meanwhile stops at once
        // (nothing was read yet).
        let mut sd = shutdown.clone();
        tokio::select! {
            r = sink.refuse_definite(Duration::from_secs(5)) => r?,
            _ = sd.wait_for(|v| *v) => return Ok(None),
        }
        Ok(Some(sink))
    }

    async fn close(&self, sink: KafkaSink) -> Result<(), Error> {
        tokio::task::block_in_place(|| sink.flush(Duration::from_secs(2))).map_err(Error::from)
    }
}

/// Kafka's transactional producer with `transactional_id`, for the exactly-once loop.
pub(super) struct KafkaTransactional<'a> {
    pub(super) connector: &'a Connector,
    pub(super) transactional_id: &'a str,
}

impl OpenSink for KafkaTransactional<'_> {
    type Sink = KafkaSink;

    /// A transactional producer, initialised: older instances with the id are fenced (their
    /// open transaction is aborted), so the checkpoint read next is the last one anybody
    /// will ever commit before us. With Kafka unreachable this waits up to a minute.
    async fn open(&self, shutdown: &watch::Receiver<bool>) -> Result<Option<KafkaSink>, Error> {
        let c = self.connector;
        c.still_owned()?;
        let sink = KafkaSink::new_transactional(
            &c.cfg.kafka,
            &c.cfg.name,
            self.transactional_id,
            c.link.clone(),
        )?
        .with_shutdown(shutdown.clone())
        .with_own_topics(c.own_topics())
        .with_topic_prefix(c.cfg.router.topic_prefix.clone());
        let mut sd = shutdown.clone();
        tokio::select! {
            r = sink.init_transactions() => r?,
            _ = sd.wait_for(|v| *v) => return Ok(None),
        }
        Ok(Some(sink))
    }

    /// Every transaction is committed or aborted by the loop: nothing is left queued.
    async fn close(&self, _sink: KafkaSink) -> Result<(), Error> {
        Ok(())
    }
}
