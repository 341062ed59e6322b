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
//! `SEQ_BITS` bits) and the record's size travel packed in the record's delivery opaque
//! ([`opaque`]), so a report costs no lookup and no allocation. One task sends on a
//! producer.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use rdkafka::message::{BorrowedMessage, Headers, Message};
use rdkafka::producer::{DeliveryResult, ProducerContext};
use rdkafka::ClientContext;
use tokio::sync::Notify;

use super::error::{Refusal, SinkError};
use super::link::KafkaLink;
use crate::error::Class;

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
pub struct DeliveryTracker {
    /// The connection state the client's error, log and statistics callbacks feed.
    link: Arc<KafkaLink>,
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
    /// Records whose delivery failed.
    failed_count: AtomicU64,
    failure: Mutex<Option<Recorded>>,
    notify: Notify,
}

/// The failure kept: the most telling one ([`Telling`]), the first among equals, except that
/// of several records refused as too large (a whole produce request fails together) the
/// largest is named.
struct Recorded {
    telling: Telling,
    size: u64,
    failure: SinkError,
}

/// How much a failed delivery says about the cause, least first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Telling {
    /// Purged by the producer (an abort, a fatal error): a consequence of another failure.
    Purged,
    /// A transient failure (timeout, broker unreachable).
    Transient,
    /// Refused for good (ACLs, topic, ...).
    Refused,
    /// Refused as too large for the topic.
    TooLarge,
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
    /// A tracker with nothing sent yet, whose client reports to `link`.
    pub fn new(link: Arc<KafkaLink>) -> Self {
        Self {
            link,
            sent: AtomicU64::default(),
            sent_bytes: AtomicU64::default(),
            acked: AtomicU64::default(),
            acked_bytes: AtomicU64::default(),
            acked_below: AtomicU64::default(),
            window: Mutex::default(),
            failed: AtomicBool::default(),
            failed_count: AtomicU64::default(),
            failure: Mutex::default(),
            notify: Notify::new(),
        }
    }

    /// The connection state of this producer's cluster.
    pub fn link(&self) -> &Arc<KafkaLink> {
        &self.link
    }

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

    /// The delivery failure that best tells the cause, if a record failed: a refusal (too
    /// large: the largest refused record; no ACL, ...) before a transient failure before a
    /// record purged as a consequence (an aborted transaction); the first among equals.
    /// Classified (definite for what Kafka refuses, transient otherwise) and naming the
    /// record's topic and event id, never its payload.
    pub fn failure(&self) -> Option<SinkError> {
        if !self.failed.load(Ordering::Acquire) {
            return None;
        }
        let f = self.failure.lock().unwrap_or_else(|e| e.into_inner());
        f.as_ref().map(|r| r.failure.clone())
    }

    /// How long the delivery loops let the remaining reports arrive before they name a
    /// failure's cause ([`settled_failure`](Self::settled_failure)).
    pub const SETTLE_WITHIN: std::time::Duration = std::time::Duration::from_secs(2);

    /// The cause among the delivery failures once every record sent has been reported, or
    /// `within` has passed: a refused produce request fails several records and an abort
    /// purges the rest, and their reports arrive one after another. Records only purged are
    /// no cause (the abort that purged them had one of its own): `None` then. Blocks the
    /// calling thread (off the async workers); for the failure path only.
    pub fn settled_failure(&self, within: std::time::Duration) -> Option<SinkError> {
        let until = std::time::Instant::now() + within;
        tokio::task::block_in_place(|| {
            while !self.settled() && std::time::Instant::now() < until {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
        });
        let kept = self.failure.lock().unwrap_or_else(|e| e.into_inner());
        kept.as_ref()
            .filter(|r| r.telling > Telling::Purged)
            .map(|r| r.failure.clone())
    }

    /// True when every record sent has been reported (acknowledged or failed).
    pub fn settled(&self) -> bool {
        self.acked.load(Ordering::Acquire) + self.failed_count.load(Ordering::Acquire)
            >= self.sent()
    }

    /// Resolves after the next delivery report (or at once if one came since the last
    /// call): re-read the counters then. Meant for one waiting task.
    pub async fn changed(&self) {
        self.notify.notified().await
    }

    /// Waits until every record sent so far is acknowledged; `Err` with the first failure
    /// as soon as a record failed.
    pub async fn all_acked(&self) -> Result<(), SinkError> {
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

    fn on_failed(&self, failure: SinkError, size: u64) {
        let telling = Telling::of(&failure);
        let mut kept = self.failure.lock().unwrap_or_else(|e| e.into_inner());
        let better = match kept.as_ref() {
            None => true,
            Some(k) => {
                telling > k.telling
                    || (telling == Telling::TooLarge && k.telling == telling && size > k.size)
            }
        };
        if better {
            *kept = Some(Recorded {
                telling,
                size,
                failure,
            });
            self.failed.store(true, Ordering::Release);
        }
        drop(kept);
        self.failed_count.fetch_add(1, Ordering::AcqRel);
        self.notify.notify_one();
    }
}

impl ClientContext for DeliveryTracker {
    fn log(&self, level: rdkafka::config::RDKafkaLogLevel, fac: &str, message: &str) {
        super::client_log::log_via(&self.link, level, fac, message);
    }

    fn error(&self, error: rdkafka::error::KafkaError, reason: &str) {
        self.link.on_error(&error, reason);
    }

    fn stats_raw(&self, statistics: &[u8]) {
        self.link.on_statistics(statistics);
    }
}

impl ProducerContext for DeliveryTracker {
    type DeliveryOpaque = usize;

    fn delivery(&self, result: &DeliveryResult<'_>, opaque: usize) {
        let (seq_bits, size) = (
            opaque as u64 >> SIZE_BITS,
            opaque as u64 & ((1 << SIZE_BITS) - 1),
        );
        match result {
            Ok(_) => self.on_delivered(seq_bits, size),
            Err((e, m)) => {
                self.on_failed(SinkError::on_delivery(e, event_id(m), m.topic()), size);
            }
        }
    }
}

impl Telling {
    /// How much `failure` tells about the cause.
    fn of(failure: &SinkError) -> Self {
        match failure.refusal() {
            Some(Refusal::TooLarge) => Telling::TooLarge,
            Some(_) => Telling::Refused,
            None if failure.is_purged() => Telling::Purged,
            None if failure.class() == Class::Transient => Telling::Transient,
            None => Telling::Refused,
        }
    }
}

#[cfg(test)]
mod tests {
    use rdkafka::error::{KafkaError, RDKafkaErrorCode as C};

    use super::*;

    /// A failed delivery report of event `id` with librdkafka error `code`.
    fn failed(code: C, id: &str) -> SinkError {
        SinkError::on_delivery(&KafkaError::MessageProduction(code), id.into(), "t")
    }

    fn id_of(f: &SinkError) -> &str {
        match f {
            SinkError::Refused { id, .. } | SinkError::Delivery { id, .. } => id,
            other => panic!("not a delivery failure: {other}"),
        }
    }

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
    fn counters_follow_reports_and_the_most_telling_failure_is_kept() {
        let t = DeliveryTracker::new(KafkaLink::new("test", "test:1"));
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
        assert!(!t.settled());
        t.on_failed(failed(C::PurgeQueue, "purged"), 10);
        t.on_failed(failed(C::MessageTimedOut, "timed out"), 10);
        t.on_failed(failed(C::MessageTimedOut, "timed out too"), 10);
        assert_eq!(id_of(&t.failure().expect("kept")), "timed out");
        t.on_failed(failed(C::MessageSizeTooLarge, "small"), 10);
        t.on_failed(failed(C::TopicAuthorizationFailed, "acl"), 10);
        t.on_failed(failed(C::MessageSizeTooLarge, "large"), 30);
        t.on_failed(failed(C::PurgeInflight, "purged later"), 99);
        let f = t.failure().expect("failure kept");
        assert_eq!(
            id_of(&f),
            "large",
            "the largest record refused as too large"
        );
        assert_eq!(f.class(), Class::Definite);
        assert_eq!(t.acked_below(), 1, "a failed record holds the prefix back");
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn purged_records_are_no_cause() {
        let t = DeliveryTracker::new(KafkaLink::new("test", "test:1"));
        t.enqueued(1);
        t.on_failed(failed(C::PurgeQueue, "purged"), 1);
        assert!(t.failure().is_some());
        assert!(t
            .settled_failure(std::time::Duration::from_millis(10))
            .is_none());
        t.on_failed(failed(C::MessageTimedOut, "timed out"), 1);
        let f = t
            .settled_failure(std::time::Duration::from_millis(10))
            .expect("a cause");
        assert_eq!(id_of(&f), "timed out");
    }

    #[tokio::test]
    async fn all_acked_waits_for_the_last_report_or_a_failure() {
        let t = std::sync::Arc::new(DeliveryTracker::new(KafkaLink::new("test", "test:1")));
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
        t.on_failed(failed(C::TopicAuthorizationFailed, "refused"), 1);
        assert_eq!(id_of(&waiter.await.unwrap().unwrap_err()), "refused");
    }
}
