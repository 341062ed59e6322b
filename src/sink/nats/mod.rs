//! Delivery to NATS JetStream: each routed record published to its topic as the subject
//! ([`message`] for the layout), every publish acknowledgement (PubAck) awaited.
//!
//! Publishes are pipelined: [`NatsSink::send`] hands the message to the client and returns;
//! a task of the sink awaits the acknowledgements in send order (all in flight at once,
//! bounded by the context's in-flight limit, which makes `send` wait) and reports each
//! record's outcome into the [`DeliveryTracker`]. A PubAck marked `duplicate` (JetStream
//! already holds a message with the record's `Nats-Msg-Id` within the stream's duplicate
//! window: a record delivered again after a restart) counts as delivered.
//!
//! Failures: no stream captures the subject (definite, naming the subject and how to create
//! one — once JetStream confirms it: a publish also finds "no responders" while the server
//! shuts down or JetStream is not ready yet, which is transient); a message over the server's `max_payload` or the stream's `max_msg_size` (refused,
//! can be dead-lettered); no acknowledgement within `ack_timeout`, a lost connection, a
//! stream out of resources (transient: the connector restarts from its checkpoint, and the
//! duplicate window drops what JetStream already holds).

pub mod check;
pub mod connect;
pub mod message;
pub mod open;
mod streams;

use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::context::{
    GetStreamByNameErrorKind, PublishAckFuture, PublishError, PublishErrorKind,
};
use async_nats::jetstream::message::PublishMessage;
use async_nats::jetstream::ErrorCode;
use futures_util::stream::{FuturesOrdered, StreamExt};
use tokio::sync::mpsc;

use super::tracker::counted_size;
use super::{DeliveryTracker, KafkaLink, KafkaRecord, RecordSink, Refusal, SinkError};
use crate::error::Class;

pub use connect::BROKER;
pub use open::NatsAcked;
pub use streams::StreamNotes;

/// A record published and waiting for its acknowledgement.
struct Pending {
    seq: u64,
    counted: u64,
    id: String,
    subject: String,
    ack: PublishAckFuture,
}

/// A connector's JetStream publisher; see the module docs.
pub struct NatsSink {
    js: async_nats::jetstream::Context,
    deliveries: Arc<DeliveryTracker>,
    pending: mpsc::UnboundedSender<Pending>,
    acker: tokio::task::JoinHandle<()>,
    max_payload: usize,
    ack_timeout: Duration,
}

impl NatsSink {
    /// A sink publishing through `js` (its client connected), for `connector`; the streams
    /// acknowledging its records are noted in `notes` (their duplicate windows logged once).
    pub fn new(
        js: async_nats::jetstream::Context,
        connector: &str,
        ack_timeout: Duration,
        notes: Arc<StreamNotes>,
    ) -> Self {
        let deliveries = Arc::new(DeliveryTracker::new(KafkaLink::quiet(connector, "")));
        let (tx, rx) = mpsc::unbounded_channel();
        let acker = tokio::spawn(acknowledge(rx, deliveries.clone(), notes, js.clone()));
        let max_payload = js.client().server_info().max_payload;
        Self {
            js,
            deliveries,
            pending: tx,
            acker,
            max_payload: if max_payload == 0 {
                1024 * 1024
            } else {
                max_payload
            },
            ack_timeout,
        }
    }

    /// Waits, at most the ack timeout, until every record sent is answered. Errors: records
    /// still unanswered (transient) or the failure that ended them.
    pub async fn flush(&self) -> Result<(), SinkError> {
        let until = tokio::time::Instant::now() + self.ack_timeout;
        loop {
            if let Some(f) = self.deliveries.failure() {
                return Err(f);
            }
            if self.deliveries.unacked().0 == 0 {
                return Ok(());
            }
            if tokio::time::Instant::now() >= until {
                return Err(SinkError::broker(
                    BROKER,
                    Class::Transient,
                    format!(
                        "{} records still without an acknowledgement after {:?}",
                        self.deliveries.unacked().0,
                        self.ack_timeout
                    ),
                ));
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

impl Drop for NatsSink {
    fn drop(&mut self) {
        self.acker.abort();
    }
}

/// Awaits the acknowledgements of `rx`'s records in order and reports them.
async fn acknowledge(
    mut rx: mpsc::UnboundedReceiver<Pending>,
    deliveries: Arc<DeliveryTracker>,
    notes: Arc<StreamNotes>,
    js: async_nats::jetstream::Context,
) {
    let mut waiting = FuturesOrdered::new();
    let mut open = true;
    let mut duplicates = 0u64;
    loop {
        tokio::select! {
            p = rx.recv(), if open => match p {
                Some(p) => {
                    let Pending { seq, counted, id, subject, ack } = p;
                    waiting.push_back(async move { (seq, counted, id, subject, ack.await) });
                }
                None => open = false,
            },
            Some((seq, counted, id, subject, outcome)) = waiting.next(), if !waiting.is_empty() => {
                let outcome = match outcome {
                    Ok(ack) => {
                        notes.acknowledged_by(&ack.stream, &js);
                        if ack.duplicate {
                            duplicates += 1;
                            if duplicates == 1 {
                                tracing::info!(connector = %notes.connector(), "JetStream stream {} already holds event {id} (its Nats-Msg-Id, within the duplicate window): the copies this run publishes again are dropped, as after a restart", ack.stream);
                            }
                        }
                        Ok(())
                    }
                    Err(e) => Err(ack_failure(&e, &id, &subject, notes.server_said())),
                };
                deliveries.report(seq, counted, outcome);
            }
            else => break,
        }
    }
}

/// The server's JetStream error code behind a publish failure, when it gave one.
fn error_code(e: &PublishError) -> Option<ErrorCode> {
    std::error::Error::source(e)
        .and_then(|s| s.downcast_ref::<async_nats::jetstream::Error>())
        .map(async_nats::jetstream::Error::error_code)
}

/// What a failed publish of the record with event id `id` to `subject` means; `said`: the
/// last error the server reported on the connection (a publish it refused, e.g. for
/// permissions, is never acknowledged: the failure is a timeout, explained by it).
fn ack_failure(e: &PublishError, id: &str, subject: &str, said: Option<String>) -> SinkError {
    match (e.kind(), error_code(e)) {
        // "No responders": no stream captures the subject, or JetStream does not answer
        // (the server shutting down, JetStream not ready yet). Transient here;
        // `missing_topics` asks JetStream which it is.
        (PublishErrorKind::StreamNotFound, _) => SinkError::broker_record(
            BROKER,
            id,
            subject,
            None,
            format!(
                "no responders for subject {subject}: no JetStream stream captures it, or \
                 JetStream is not answering"
            ),
        ),
        (PublishErrorKind::MaxPayloadExceeded, _)
        | (
            _,
            Some(
                ErrorCode::STREAM_MESSAGE_EXCEEDS_MAXIMUM
                | ErrorCode::STREAM_HEADER_EXCEEDS_MAXIMUM,
            ),
        ) => SinkError::broker_record(
            BROKER,
            id,
            subject,
            Some(Refusal::TooLarge),
            format!("the message is larger than the stream or server allows ({e})"),
        ),
        _ => SinkError::broker_record(
            BROKER,
            id,
            subject,
            None,
            match said {
                Some(said) => format!(
                    "publish not acknowledged ({e}); the server last reported: {said} (check \
                     the user's publish permissions on the subject)"
                ),
                None => format!("publish not acknowledged ({e})"),
            },
        ),
    }
}

/// No stream captures `subject`: definite, with how to create one.
fn stream_missing(id: &str, subject: &str) -> SinkError {
    SinkError::Broker {
        broker: BROKER,
        detail: format!(
            "no JetStream stream captures subject {subject}: create one, e.g. `nats stream add \
             OUTBOX --subjects '{subject}' --dupe-window 2m` (a wildcard such as '{}.>' takes \
             every topic below it), or set stream, subjects and create_stream = true in \
             [connectors.sink]",
            subject.split('.').next().unwrap_or(subject)
        ),
        class: Class::Definite,
        record: Some((id.to_string(), subject.to_string())),
        refusal: None,
    }
}

impl RecordSink for NatsSink {
    fn deliveries(&self) -> &DeliveryTracker {
        &self.deliveries
    }

    fn max_record_bytes(&self) -> usize {
        self.max_payload
    }

    fn record_limit(&self) -> crate::sink::RecordLimit {
        crate::sink::RecordLimit::Nats
    }

    async fn send(&self, record: &KafkaRecord) -> Result<(), SinkError> {
        let (headers, payload) = message::message(record)?;
        let id = record.event_id();
        let publish = PublishMessage::build().payload(payload).headers(headers);
        let ack = self
            .js
            .send_publish(record.topic.clone(), publish)
            .await
            .map_err(|e| match e.kind() {
                PublishErrorKind::MaxPayloadExceeded => SinkError::broker_record(
                    BROKER,
                    &id,
                    &record.topic,
                    Some(Refusal::TooLarge),
                    format!(
                        "the message is larger than the server's max_payload ({} bytes): {e}",
                        self.max_payload
                    ),
                ),
                _ => SinkError::broker_record(
                    BROKER,
                    &id,
                    &record.topic,
                    None,
                    format!("cannot publish ({e})"),
                ),
            })?;
        let counted = counted_size(record.approx_size());
        let seq = self.deliveries.enqueue(&record.topic, counted);
        let pending = Pending {
            seq,
            counted,
            id,
            subject: record.topic.clone(),
            ack,
        };
        if self.pending.send(pending).is_err() {
            let e = SinkError::broker(
                BROKER,
                Class::Transient,
                "the acknowledgement task ended (the sink is closing)",
            );
            self.deliveries.report(seq, counted, Err(e));
        }
        Ok(())
    }

    /// When `cause` is about a record whose subject no stream captures, JetStream saying so
    /// (asked twice, a second apart): the definite error with how to create one. `None`
    /// when a stream captures it or JetStream does not answer (transient).
    async fn missing_topics(&self, cause: &SinkError) -> Option<SinkError> {
        let (id, subject) = cause.record()?;
        for attempt in 0..2 {
            if attempt > 0 {
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            match self.js.stream_by_subject(subject).await {
                Err(e) if e.kind() == GetStreamByNameErrorKind::NotFound => {}
                _ => return None,
            }
        }
        Some(stream_missing(id, subject))
    }
}
