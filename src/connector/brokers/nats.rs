//! A NATS JetStream connector: the at-least-once loop on [`NatsAcked`]'s sink, with the
//! configured store (the KV bucket or a file).

use tokio::sync::watch;

use crate::checkpoint::CheckpointStore;
use crate::config::sinks::NatsSinkConfig;
use crate::health::Health;
use crate::pipeline::Error;
use crate::sink::nats::{NatsAcked, NatsSink, StreamNotes};

use super::super::open::OpenSink;
use super::super::Connector;

/// [`NatsAcked`] as a connector's [`OpenSink`]: in a group, only while this member owns the
/// connector.
struct NatsOpen<'a> {
    inner: NatsAcked<'a>,
    connector: &'a Connector,
}

impl OpenSink for NatsOpen<'_> {
    type Sink = NatsSink;

    async fn open(&self, shutdown: &watch::Receiver<bool>) -> Result<Option<NatsSink>, Error> {
        self.connector.still_owned()?;
        Ok(self.inner.open(shutdown).await?)
    }

    async fn close(&self, sink: NatsSink) -> Result<(), Error> {
        Ok(self.inner.close(sink).await?)
    }
}

impl Connector {
    /// One attempt of a NATS JetStream connector.
    pub(super) async fn run_on_nats(
        &self,
        n: &NatsSinkConfig,
        store: &mut dyn CheckpointStore,
        health: &Health,
        shutdown: watch::Receiver<bool>,
    ) -> Result<(), Error> {
        let opener = NatsOpen {
            inner: NatsAcked {
                cfg: n,
                connector: &self.cfg.name,
                notes: StreamNotes::of(&self.cfg.name),
            },
            connector: self,
        };
        self.run_acked(&opener, store, health, shutdown).await
    }
}
