//! Opening a connector's NATS JetStream sink: connect and log in, check (or create) the
//! configured stream and log its duplicate window.

use std::sync::Arc;

use async_nats::jetstream::context::{CreateStreamErrorKind, GetStreamErrorKind};
use async_nats::jetstream::stream::{Config as StreamConfig, StorageType};
use async_nats::jetstream::ErrorCode;
use tokio::sync::watch;

use super::connect::{connect, BROKER};
use super::{NatsSink, StreamNotes};
use crate::config::sinks::nats::{NatsStorage, NatsStreamConfig};
use crate::config::sinks::NatsSinkConfig;
use crate::error::Class;
use crate::sink::SinkError;

/// Most publishes awaiting their acknowledgement at once; `send` waits beyond.
const MAX_IN_FLIGHT: usize = 4096;

/// Opens the NATS JetStream sink of connector `connector` for the at-least-once loop.
pub struct NatsAcked<'a> {
    /// The sink's settings.
    pub cfg: &'a NatsSinkConfig,
    /// The connector's name (the client name `outboxd:<name>`).
    pub connector: &'a str,
    /// The run's stream notes (shared with the checkpoint store).
    pub notes: Arc<StreamNotes>,
}

impl NatsAcked<'_> {
    /// Connects (a refused login or TLS: definite; unreachable: transient), then checks the
    /// configured stream: missing, it is created when `create_stream` says so, else a
    /// definite error saying how to create it.
    /// `Ok(None)`: `shutdown` came first.
    pub async fn open(
        &self,
        shutdown: &watch::Receiver<bool>,
    ) -> Result<Option<NatsSink>, SinkError> {
        let name = format!("outboxd:{}", self.connector);
        let mut sd = shutdown.clone();
        let client = tokio::select! {
            c = connect(self.cfg, &name, Some(self.notes.clone())) => c.map_err(|f| SinkError::broker(BROKER, f.class, f.detail))?,
            _ = sd.wait_for(|v| *v) => return Ok(None),
        };
        let js = async_nats::jetstream::ContextBuilder::new()
            .timeout(self.cfg.ack_timeout)
            .max_ack_inflight(MAX_IN_FLIGHT)
            .backpressure_on_inflight(true)
            .build(client);
        if let Some(stream) = &self.cfg.stream {
            check_stream(&js, stream, &self.notes).await?;
        }
        Ok(Some(NatsSink::new(
            js,
            self.connector,
            self.cfg.ack_timeout,
            self.notes.clone(),
        )))
    }

    /// Ends a run: waits for the acknowledgements still due.
    pub async fn close(&self, sink: NatsSink) -> Result<(), SinkError> {
        sink.flush().await
    }
}

/// Checks that `stream` exists (creating it when configured to) and logs its window.
async fn check_stream(
    js: &async_nats::jetstream::Context,
    stream: &NatsStreamConfig,
    notes: &StreamNotes,
) -> Result<(), SinkError> {
    let name = &stream.name;
    let missing = match js.get_stream(name).await {
        Ok(s) => {
            let cfg = &s.cached_info().config;
            tracing::info!(
                "JetStream stream {name} captures {:?}",
                cfg.subjects
            );
            notes.window(name, cfg.duplicate_window);
            return Ok(());
        }
        Err(e) => match e.kind() {
            GetStreamErrorKind::JetStream(j) if j.error_code() == ErrorCode::STREAM_NOT_FOUND => e,
            GetStreamErrorKind::JetStream(j) => {
                return Err(SinkError::broker(
                    BROKER,
                    Class::Definite,
                    format!("cannot read JetStream stream {name} ({j}); is JetStream enabled for this account, and may the user read $JS.API.STREAM.INFO.{name}?"),
                ))
            }
            _ => {
                return Err(SinkError::broker(
                    BROKER,
                    Class::Transient,
                    format!("cannot read JetStream stream {name} ({e})"),
                ))
            }
        },
    };
    if !stream.create {
        return Err(SinkError::broker(
            BROKER,
            Class::Definite,
            format!(
                "JetStream stream {name} does not exist ({missing}): create it, e.g. `nats stream \
                 add {name} --subjects '<the routed subjects, e.g. outbox.>>' --dupe-window 2m \
                 --storage file`, or set create_stream = true and subjects = [...] in \
                 [connectors.sink]"
            ),
        ));
    }
    let config = StreamConfig {
        name: name.clone(),
        subjects: stream.subjects.clone(),
        storage: match stream.storage {
            NatsStorage::File => StorageType::File,
            NatsStorage::Memory => StorageType::Memory,
        },
        duplicate_window: stream.duplicate_window,
        description: Some("outboxd: outbox events".into()),
        ..Default::default()
    };
    match js.create_stream(config).await {
        Ok(_) => {
            tracing::info!(
                "created JetStream stream {name} capturing {:?} ({:?} storage)",
                stream.subjects,
                stream.storage
            );
            notes.window(name, stream.duplicate_window);
            Ok(())
        }
        Err(e) => {
            let class = if e.kind() == CreateStreamErrorKind::TimedOut {
                Class::Transient
            } else {
                Class::Definite
            };
            Err(SinkError::broker(
                BROKER,
                class,
                format!(
                    "cannot create JetStream stream {name} for subjects {:?} ({e}); subjects \
                     another stream captures already cannot be captured twice; or create it \
                     yourself",
                    stream.subjects
                ),
            ))
        }
    }
}
