//! Delivery reports of a connector's producer, counted instead of awaited one by one.
//!
//! librdkafka reports every record's outcome (its delivery report, `dr_msg_cb`) on the
//! producer's polling thread. The delivery loops do not need a future per record: the
//! exactly-once loop needs how much is still unacknowledged and when all of it is, the
//! at-least-once loop needs the longest prefix of records, in the order they were sent, that
//! Kafka acknowledged (a checkpoint may only name a position whose past is all delivered).
//! Both are kept here as counters the loops read, plus the first failure. Per-record
//! futures (a oneshot channel, a boxed opaque, a waker per record) were about a tenth of the
//! relay's CPU in backlog drains (benches/results/profile.md §8).
//!
//! Records are numbered by the sender from 0 in send order; the number (its low
//! [`SEQ_BITS`] bits) and the record's size travel packed in the record's delivery opaque
//! ([`opaque`]), so a report costs no lookup and no allocation. One task sends on a
//! producer.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{BorrowedMessage, Headers, Message};
use rdkafka::producer::{DeliveryResult, ProducerContext};
use rdkafka::ClientContext;
use tokio::sync::Notify;

use crate::error::Failure;

/// Bits of a record's number in its delivery opaque; the full number is recovered from the
/// acknowledged prefix, which is never 2^40 records behind.
const SEQ_BITS: u32 = 40;
/// Bits of a record's size in its delivery opaque: sizes count up to 16 MiB - 1 (larger
/// records count as that, on the sending and the acknowledging side alike).
const SIZE_BITS: u32 = 24;
const _: () = assert!(SEQ_BITS + SIZE_BITS == usize::BITS, "a 64-bit target");

/// A record's size as the loops count it: `approx_size` clamped to what the opaque holds.
pub fn counted_size(approx_size: usize) -> u64 {
    approx_size.min((1 << SIZE_BITS) - 1) as u64
}

/// The delivery opaque of record number `seq` of `counted` bytes ([`counted_size`]).
pub fn opaque(seq: u64, counted: u64) -> usize {
    ((seq & ((1 << SEQ_BITS) - 1)) << SIZE_BITS | counted) as usize
}

/// Delivery state of one producer: what was sent, what Kafka acknowledged, the first
/// failure. The producer's context ([`ProducerContext`]), so librdkafka's polling thread
/// updates it; the delivery loop reads it and waits on [`changed`](Self::changed).
#[derive(Default)]
pub struct DeliveryTracker {
    /// Records enqueued (the next record's number).
    sent: AtomicU64,
    /// Their sizes summed, in bytes ([`counted_size`]).
    sent_bytes: AtomicU64,
    /// Records acknowledged.
    acked: AtomicU64,
    /// Their sizes summed, in bytes.
    acked_bytes: AtomicU64,
    /// Every record numbered below this is acknowledged.
    acked_below: AtomicU64,
    /// Acknowledgements above `acked_below`, for advancing it.
    window: Mutex<Window>,
    failed: AtomicBool,
    failure: Mutex<Option<Failure>>,
    notify: Notify,
}

/// Which records at and above the contiguous acknowledged prefix are acknowledged.
#[derive(Default)]
struct Window {
    /// The first record not acknowledged.
    low: u64,
    /// `done[i]`: record `low + i` is acknowledged (never true for `i == 0`).
    done: VecDeque<bool>,
}

impl Window {
    /// The full number of a record whose number's low [`SEQ_BITS`] bits are `bits`: the one
    /// at or above `low` (records in flight are far fewer than 2^40).
    fn unwrap_seq(&self, bits: u64) -> u64 {
        let mask = (1u64 << SEQ_BITS) - 1;
        self.low + (bits.wrapping_sub(self.low) & mask)
    }

    /// Marks record `seq` acknowledged; returns the new `low`.
    fn ack(&mut self, seq: u64) -> u64 {
        if seq < self.low {
            return self.low; // reported twice: librdkafka does not, but stay consistent
        }
        let i = (seq - self.low) as usize;
        if self.done.len() <= i {
            self.done.resize(i + 1, false);
        }
        self.done[i] = true;
        while self.done.front() == Some(&true) {
            self.done.pop_front();
            self.low += 1;
        }
        self.low
    }
}

/// The `id` header of a record (the outbox event id), for naming it in errors.
fn event_id(m: &BorrowedMessage<'_>) -> String {
    m.headers()
        .and_then(|h| {
            h.iter()
                .find(|h| h.key == "id")
                .and_then(|h| h.value)
                .map(|v| String::from_utf8_lossy(v).into_owned())
        })
        .unwrap_or_else(|| "(no id)".to_string())
}

impl DeliveryTracker {
    /// Records enqueued so far; the next record sent gets this number.
    pub fn sent(&self) -> u64 {
        self.sent.load(Ordering::Acquire)
    }

    /// Counts a record as enqueued: `size` in bytes as [`counted_size`] measures it.
    /// Called by the sender right after librdkafka accepted record number [`sent`](Self::sent).
    pub(super) fn enqueued(&self, size: u64) {
        self.sent_bytes.fetch_add(size, Ordering::AcqRel);
        self.sent.fetch_add(1, Ordering::AcqRel);
    }

    /// Records and bytes sent but not acknowledged yet.
    pub fn unacked(&self) -> (u64, u64) {
        let acked = self.acked.load(Ordering::Acquire);
        let acked_bytes = self.acked_bytes.load(Ordering::Acquire);
        (
            self.sent().saturating_sub(acked),
            self.sent_bytes
                .load(Ordering::Acquire)
                .saturating_sub(acked_bytes),
        )
    }

    /// Records acknowledged so far, and their bytes.
    pub fn acked(&self) -> (u64, u64) {
        (
            self.acked.load(Ordering::Acquire),
            self.acked_bytes.load(Ordering::Acquire),
        )
    }

    /// Every record numbered below the returned one is acknowledged.
    pub fn acked_below(&self) -> u64 {
        self.acked_below.load(Ordering::Acquire)
    }

    /// The first delivery failure, if a record failed: classified (definite for what Kafka
    /// refuses, such as a too-large record or a missing ACL; transient otherwise) and
    /// naming the record's topic and event id, never its payload.
    pub fn failure(&self) -> Option<Failure> {
        if !self.failed.load(Ordering::Acquire) {
            return None;
        }
        let f = self.failure.lock().unwrap_or_else(|e| e.into_inner());
        f.as_ref().map(|f| Failure {
            severity: f.severity,
            message: f.message.clone(),
        })
    }

    /// Resolves after the next delivery report (or at once if one came since the last
    /// call): re-read the counters then. Meant for one waiting task.
    pub async fn changed(&self) {
        self.notify.notified().await
    }

    /// Waits until every record sent so far is acknowledged; `Err` with the first failure
    /// as soon as a record failed.
    pub async fn all_acked(&self) -> Result<(), Failure> {
        loop {
            if let Some(f) = self.failure() {
                return Err(f);
            }
            if self.acked_below() >= self.sent() {
                return Ok(());
            }
            self.changed().await;
        }
    }

    /// Record with opaque `seq_bits << SIZE_BITS | size` was acknowledged.
    fn on_delivered(&self, seq_bits: u64, size: u64) {
        let low = {
            let mut w = self.window.lock().unwrap_or_else(|e| e.into_inner());
            let seq = w.unwrap_seq(seq_bits);
            w.ack(seq)
        };
        self.acked_bytes.fetch_add(size, Ordering::AcqRel);
        self.acked.fetch_add(1, Ordering::AcqRel);
        self.acked_below.store(low, Ordering::Release);
        self.notify.notify_one();
    }

    fn on_failed(&self, f: Failure) {
        let mut first = self.failure.lock().unwrap_or_else(|e| e.into_inner());
        if first.is_none() {
            *first = Some(f);
            self.failed.store(true, Ordering::Release);
        }
        drop(first);
        self.notify.notify_one();
    }
}

impl ClientContext for DeliveryTracker {}

impl ProducerContext for DeliveryTracker {
    type DeliveryOpaque = usize;

    fn delivery(&self, result: &DeliveryResult<'_>, opaque: usize) {
        let (seq_bits, size) = (
            opaque as u64 >> SIZE_BITS,
            opaque as u64 & ((1 << SIZE_BITS) - 1),
        );
        match result {
            Ok(_) => self.on_delivered(seq_bits, size),
            Err((e, m)) => self.on_failed(classify_delivery(e, m.topic(), &event_id(m))),
        }
    }
}

/// A failed delivery as a [`Failure`]: definite when Kafka refuses the record for good
/// (size, ACLs, topic, partition), transient otherwise (timeouts, brokers unreachable).
fn classify_delivery(e: &KafkaError, topic: &str, id: &str) -> Failure {
    use RDKafkaErrorCode as C;
    match e.rdkafka_error_code() {
        Some(C::MessageSizeTooLarge | C::MessageBatchTooLarge) => Failure::definite(format!(
            "Kafka refused outbox event {id} for topic {topic} as too large ({e}); raise the \
             topic's max.message.bytes (and the broker's message.max.bytes) or shrink the \
             event, then restart (nothing after the last delivered event was checkpointed)"
        )),
        Some(
            C::InvalidRecord
            | C::TopicAuthorizationFailed
            | C::ClusterAuthorizationFailed
            | C::InvalidTopic
            | C::UnknownPartition
            | C::UnsupportedForMessageFormat,
        ) => Failure::definite(format!(
            "Kafka refused outbox event {id} for topic {topic}: {e}; fix the topic or its \
             ACLs/limits, then restart (nothing after the last delivered event was \
             checkpointed)"
        )),
        Some(C::Fatal) => Failure::definite(format!(
            "fatal Kafka producer error for topic {topic}: {e}; restart the relay (nothing \
             after the last delivered event was checkpointed)"
        )),
        _ => Failure::transient(format!(
            "delivery of outbox event {id} to topic {topic} failed: {e}"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_prefix_advances_only_over_contiguous_acknowledgements() {
        let mut w = Window::default();
        assert_eq!(w.ack(1), 0);
        assert_eq!(w.ack(3), 0);
        assert_eq!(w.ack(0), 2);
        assert_eq!(w.ack(2), 4);
        assert!(w.done.is_empty());
        assert_eq!(w.ack(2), 4, "a repeated report changes nothing");
    }

    #[test]
    fn numbers_and_sizes_survive_the_opaque() {
        let mut w = Window::default();
        let seq = (1u64 << SEQ_BITS) + 5; // past the bits the opaque keeps
        w.low = seq - 2;
        let o = opaque(seq, counted_size(1024)) as u64;
        assert_eq!(w.unwrap_seq(o >> SIZE_BITS), seq);
        assert_eq!(o & ((1 << SIZE_BITS) - 1), 1024);
        assert_eq!(counted_size(usize::MAX), (1 << SIZE_BITS) - 1);
        let w0 = Window::default();
        assert_eq!(w0.unwrap_seq(opaque(7, 1) as u64 >> SIZE_BITS), 7);
    }

    #[test]
    fn counters_follow_reports_and_the_first_failure_sticks() {
        let t = DeliveryTracker::default();
        for size in [10, 20, 30] {
            t.enqueued(size);
        }
        assert_eq!(t.unacked(), (3, 60));
        t.on_delivered(2, 30);
        assert_eq!(t.unacked(), (2, 30));
        assert_eq!(t.acked_below(), 0);
        t.on_delivered(0, 10);
        assert_eq!(t.acked_below(), 1);
        assert!(t.failure().is_none());
        t.on_failed(Failure::transient("first"));
        t.on_failed(Failure::definite("second"));
        let f = t.failure().expect("failure kept");
        assert_eq!(f.message, "first");
        assert!(f.is_transient());
        assert_eq!(t.acked_below(), 1, "a failed record holds the prefix back");
    }

    #[tokio::test]
    async fn all_acked_waits_for_the_last_report_or_a_failure() {
        let t = std::sync::Arc::new(DeliveryTracker::default());
        t.enqueued(1);
        t.enqueued(1);
        let waiter = tokio::spawn({
            let t = t.clone();
            async move { t.all_acked().await }
        });
        t.on_delivered(1, 1);
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished());
        t.on_delivered(0, 1);
        assert!(waiter.await.unwrap().is_ok());

        t.enqueued(1);
        let waiter = tokio::spawn({
            let t = t.clone();
            async move { t.all_acked().await }
        });
        t.on_failed(Failure::definite("refused"));
        assert_eq!(waiter.await.unwrap().unwrap_err().message, "refused");
    }
}
