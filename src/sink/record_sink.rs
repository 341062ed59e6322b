//! The seam between the delivery loops and a broker: what the at-least-once loop
//! (`pipeline::run`) needs of a sink, so the loop runs on Kafka's producer
//! ([`super::KafkaSink`]) and on any other implementation — another broker's client, or the
//! loop's in-memory sink with fault injection in its unit tests — alike.
//!
//! Delivery accounting is one piece for every sink: a [`DeliveryTracker`] numbers the
//! records in send order and keeps the acknowledged prefix, the first failure and the
//! refusals; a sink reports each record's outcome into it (librdkafka's delivery callback
//! for Kafka, [`DeliveryTracker::report`] for others). The loop checkpoints a position only
//! once the tracker's acknowledged prefix covers every record sent before it.
//!
//! [`TransactionalSink`] adds what the exactly-once loop (`pipeline::transactional::run`)
//! needs: transactions whose records (and the checkpoint record among them) become visible
//! together at commit, or not at all.

use std::future::Future;
use std::time::Duration;

use super::{DeliveryTracker, KafkaRecord, KafkaSink, RecordLimit, SinkError};

/// A sink the at-least-once delivery loop sends records to.
pub(crate) trait RecordSink: Sync {
    /// The delivery accounting of this sink's records.
    fn deliveries(&self) -> &DeliveryTracker;

    /// The largest record, in bytes (`KafkaRecord::approx_size`), the sink takes; a larger
    /// one is refused when sent (and dead-lettered without its value under a dead-letter
    /// policy).
    fn max_record_bytes(&self) -> usize;

    /// What sets [`max_record_bytes`](Self::max_record_bytes), for the error that names it
    /// (default: Kafka's `kafka.max_record_bytes`).
    fn record_limit(&self) -> RecordLimit {
        RecordLimit::Kafka
    }

    /// Sends `record`: on `Ok` it is numbered [`DeliveryTracker::sent`] (as it was before
    /// the call) and its outcome comes later through the tracker. Waits while the sink's
    /// queue is full (backpressure). Errors: a refusal known at once (too large, unknown
    /// partition: [`SinkError::refusal`]), or a failure to enqueue.
    fn send(&self, record: &KafkaRecord) -> impl Future<Output = Result<(), SinkError>> + Send;

    /// When a delivery failed with `cause` and the records concerned went to destinations
    /// that do not exist: the definite error naming them; `None` otherwise.
    fn missing_topics(&self, cause: &SinkError) -> impl Future<Output = Option<SinkError>> + Send;
}

impl RecordSink for KafkaSink {
    fn deliveries(&self) -> &DeliveryTracker {
        KafkaSink::deliveries(self)
    }

    fn max_record_bytes(&self) -> usize {
        KafkaSink::max_record_bytes(self)
    }

    fn send(&self, record: &KafkaRecord) -> impl Future<Output = Result<(), SinkError>> + Send {
        KafkaSink::send(self, record)
    }

    fn missing_topics(&self, cause: &SinkError) -> impl Future<Output = Option<SinkError>> + Send {
        KafkaSink::missing_topics(self, cause)
    }
}

/// A sink with transactions: what the exactly-once delivery loop needs (Kafka's
/// transactional producer, KIP-98; `init_transactions` done before the loop starts).
pub(crate) trait TransactionalSink: RecordSink {
    /// Opens a transaction. Errors: the producer cannot (fenced, fatal, or a transaction
    /// already open).
    fn begin(&self) -> Result<(), SinkError>;

    /// Starts sending what is queued without lingering, returning at once (the loop waits
    /// for acknowledgements at its in-flight bound).
    fn kick(&self);

    /// Sends everything queued now and waits, at most `timeout`, until all is answered;
    /// `Err` (transient) when records are still unanswered at the timeout.
    fn flush_now(&self, timeout: Duration) -> impl Future<Output = Result<(), SinkError>> + Send;

    /// Commits the open transaction: its records become visible to `read_committed`
    /// readers, all together. Errors: transient (the coordinator did not answer; the
    /// transaction is aborted by the broker at its timeout) or definite (fenced, fatal).
    fn commit(&self) -> impl Future<Output = Result<(), SinkError>> + Send;

    /// The producer's fatal error, if it has one (fenced by a newer instance): then nothing
    /// more may be sent, not even an abort.
    fn fatal(&self) -> Option<SinkError>;

    /// Aborts the open transaction: nothing of it becomes visible; what is still queued is
    /// purged (its delivery reports fail).
    fn abort(&self);
}

impl TransactionalSink for KafkaSink {
    fn begin(&self) -> Result<(), SinkError> {
        KafkaSink::begin(self)
    }

    fn kick(&self) {
        KafkaSink::kick(self)
    }

    fn flush_now(&self, timeout: Duration) -> impl Future<Output = Result<(), SinkError>> + Send {
        KafkaSink::flush_now(self, timeout)
    }

    fn commit(&self) -> impl Future<Output = Result<(), SinkError>> + Send {
        KafkaSink::commit(self)
    }

    fn fatal(&self) -> Option<SinkError> {
        KafkaSink::fatal(self)
    }

    fn abort(&self) {
        KafkaSink::abort(self)
    }
}
