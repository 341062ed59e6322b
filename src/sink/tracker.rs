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

/// How many topics [`DeliveryTracker::sent_to`] notes before it forgets those whose
/// records are all acknowledged.
const MAX_TOPICS_NOTED: usize = 256;

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
    /// A record failed for another reason than Kafka refusing it for good.
    failed_otherwise: AtomicBool,
    /// Records whose delivery failed.
    failed_count: AtomicU64,
    /// Delivery reports received, acknowledgements and failures alike (never reset).
    reports: AtomicU64,
    failure: Mutex<Option<Recorded>>,
    /// Records Kafka refused for good, in report order.
    refused: Mutex<Vec<Refused>>,
    /// Records purged from the producer's queues (an abort, an abortable transaction
    /// error), in report order, with the refusal a [`TxnRefusal`] of their topic makes of
    /// them ([`take_txn_refused`](Self::take_txn_refused)).
    purged: Mutex<Vec<Purged>>,
    /// Topics the transaction coordinator would not add to the open transaction.
    txn_refusals: Mutex<Vec<TxnRefusal>>,
    /// Each topic records were sent to, with the number of the last one sent there: the
    /// topics records wait for ([`waiting_topics`](Self::waiting_topics)).
    topics: Mutex<Vec<(String, u64)>>,
    /// Records sent to a partition of their own choosing (`column:partition`), until their
    /// report: only for them is "unknown partition" a refusal for good.
    explicit: Mutex<std::collections::BTreeSet<u64>>,
    /// Whether any record ever named its partition: until then no report locks `explicit`.
    any_explicit: AtomicBool,
    /// Reports of records numbered below this are from before the last
    /// [`rebase`](DeliveryTracker::rebase) and are ignored.
    base: AtomicU64,
    notify: Notify,
}

/// A record purged from the producer's queues.
#[derive(Debug, Clone)]
struct Purged {
    seq: u64,
    size: u64,
    id: String,
    topic: String,
}

/// A topic the transaction coordinator would not add to the open Kafka transaction for good
/// (no WRITE ACL for it, an invalid topic): exactly-once, Kafka refuses a topic's records
/// this way, for the whole transaction (`AddPartitionsToTxn`), not in their delivery reports.
/// librdkafka logs it (facility `ADDPARTS`), fails the transaction with an abortable error
/// and purges what was queued (rdkafka_txnmgr.c); the purged records of that topic are the
/// refused ones.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnRefusal {
    /// The topic.
    pub topic: String,
    /// Kafka's error (`TopicAuthorizationFailed`, `InvalidTopic`).
    pub code: rdkafka::error::RDKafkaErrorCode,
}

impl TxnRefusal {
    /// The refusal in a librdkafka log line of facility `fac`, when it is one: `ADDPARTS`
    /// "Failed to add partition "<topic>" [<n>] to transaction: Broker: Topic authorization
    /// failed" (or "Broker: Invalid topic"), as librdkafka 2.x writes it (read by
    /// [`super::librdkafka_text::txn_refusal`]).
    pub fn from_log(fac: &str, message: &str) -> Option<Self> {
        super::librdkafka_text::txn_refusal(fac, message).map(|(topic, code)| Self { topic, code })
    }
}

/// A record Kafka refused for good.
#[derive(Debug, Clone)]
pub struct Refused {
    /// The record's number.
    pub seq: u64,
    /// Its size as counted ([`counted_size`]).
    pub size: u64,
    /// Why.
    pub refusal: SinkError,
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
    /// at or above `low` (records in flight are far fewer than 2^40), or `None` for a record
    /// from before `low` (a late report after a [`DeliveryTracker::rebase`]).
    fn unwrap_seq(&self, bits: u64) -> Option<u64> {
        let mask = (1u64 << SEQ_BITS) - 1;
        let ahead = bits.wrapping_sub(self.low) & mask;
        (ahead < 1 << (SEQ_BITS - 1)).then_some(self.low + ahead)
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
            reports: AtomicU64::default(),
            failure: Mutex::default(),
            failed_otherwise: AtomicBool::default(),
            refused: Mutex::default(),
            purged: Mutex::default(),
            txn_refusals: Mutex::default(),
            topics: Mutex::default(),
            explicit: Mutex::default(),
            any_explicit: AtomicBool::default(),
            base: AtomicU64::default(),
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

    /// For a sink that is not librdkafka's producer (another broker's client, the delivery
    /// loops' in-memory sink): counts a record of `counted` bytes ([`counted_size`]) to
    /// `topic` as enqueued and returns its number, which its [`report`](Self::report) names.
    pub(crate) fn enqueue(&self, topic: &str, counted: u64) -> u64 {
        let seq = self.sent();
        self.enqueued(counted);
        self.sent_to(topic, seq);
        seq
    }

    /// For a sink that is not librdkafka's producer: the broker's answer for record `seq`
    /// of `counted` bytes, as [`enqueue`](Self::enqueue) numbered it: acknowledged, or
    /// failed with `outcome`'s error (a refusal when [`SinkError::refusal`] says so).
    pub(crate) fn report(&self, seq: u64, counted: u64, outcome: Result<(), SinkError>) {
        self.reports.fetch_add(1, Ordering::AcqRel);
        match outcome {
            Ok(()) => {
                self.link.answered();
                self.on_delivered(seq & ((1 << SEQ_BITS) - 1), counted);
            }
            Err(e) => self.on_failed(seq, e, counted),
        }
    }

    /// Notes that record number `seq` went to `topic`. Called by the sender right after
    /// librdkafka accepted it; a lookup among the few topics a connector writes to.
    /// Notes that record number `seq` names its partition itself (a `column:partition`
    /// placement), which its topic may not have: see [`on_delivery_failed`](Self::on_delivery_failed).
    pub(super) fn sent_to_partition(&self, seq: u64) {
        self.any_explicit.store(true, Ordering::Release);
        self.explicit
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(seq);
    }

    /// Whether record `seq` named its partition itself (forgotten once asked).
    pub(super) fn took_explicit(&self, seq: u64) -> bool {
        if !self.any_explicit.load(Ordering::Acquire) {
            return false;
        }
        self.explicit
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&seq)
    }

    /// A failed delivery of record `seq`, as `on_delivery` read it: "unknown partition" is a
    /// refusal for good only for a record that named its partition itself; for one the
    /// partitioner placed it means the topic has fewer partitions than the producer knew
    /// (deleted and created again with fewer): transient, a restart places it again
    /// (brk30 F4: such records were dead-lettered or stopped the connector).
    fn on_delivery_failed(&self, seq: u64, failure: SinkError) -> SinkError {
        match failure {
            SinkError::Refused {
                reason: super::error::Refusal::UnknownPartition,
                id,
                topic,
                source,
            } if !self.took_explicit(seq) => SinkError::Delivery { id, topic, source },
            other => other,
        }
    }

    pub(super) fn sent_to(&self, topic: &str, seq: u64) {
        let mut topics = self.topics.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(t) = topics.iter_mut().rev().find(|(name, _)| name == topic) {
            t.1 = seq;
            return;
        }
        if topics.len() >= MAX_TOPICS_NOTED {
            let acked_below = self.acked_below();
            topics.retain(|(_, last)| *last >= acked_below);
        }
        topics.push((topic.to_string(), seq));
    }

    /// The topics of the records sent and not acknowledged yet, in the order first sent to
    /// (perhaps with a few whose records are all acknowledged, when one sent before them is
    /// not: every topic whose last record is not below the acknowledged prefix).
    pub fn waiting_topics(&self) -> Vec<String> {
        let acked_below = self.acked_below();
        let topics = self.topics.lock().unwrap_or_else(|e| e.into_inner());
        topics
            .iter()
            .filter(|(_, last)| *last >= acked_below)
            .map(|(name, _)| name.clone())
            .collect()
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

    /// Delivery reports received so far (acknowledgements and failures; a rebase does not
    /// reset it): whether the producer makes progress.
    pub fn reports(&self) -> u64 {
        self.reports.load(Ordering::Acquire)
    }

    /// Fails the records waiting with `failure` (transient), as a delivery report would: the
    /// producer holds them although Kafka answers ([`super::stall`]).
    pub(super) fn stalled(&self, failure: SinkError) {
        self.failed_otherwise.store(true, Ordering::Release);
        let mut kept = self.failure.lock().unwrap_or_else(|e| e.into_inner());
        if kept.as_ref().is_none_or(|k| k.telling < Telling::Transient) {
            *kept = Some(Recorded {
                telling: Telling::Transient,
                size: 0,
                failure,
            });
            self.failed.store(true, Ordering::Release);
        }
        drop(kept);
        self.notify.notify_one();
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

    /// True when records failed and every failure is a refusal for good (too large, ACLs,
    /// unknown partition, ...): no transient failure and no record purged.
    pub fn only_refusals(&self) -> bool {
        self.failed.load(Ordering::Acquire) && !self.failed_otherwise.load(Ordering::Acquire)
    }

    /// The records Kafka refused for good since the last call (or rebase), in the order
    /// they were reported.
    pub fn take_refused(&self) -> Vec<Refused> {
        std::mem::take(&mut *self.refused.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// The records purged since the last call (or rebase) whose topic the transaction
    /// coordinator refused ([`TxnRefusal`]), as that topic's refusal of each (in report
    /// order), and the refused topics themselves. Both empty when no topic was refused.
    pub fn take_txn_refused(&self) -> (Vec<Refused>, Vec<TxnRefusal>) {
        let topics =
            std::mem::take(&mut *self.txn_refusals.lock().unwrap_or_else(|e| e.into_inner()));
        let purged = std::mem::take(&mut *self.purged.lock().unwrap_or_else(|e| e.into_inner()));
        let refused = purged
            .into_iter()
            .filter_map(|p| {
                let t = topics.iter().find(|t| t.topic == p.topic)?;
                let e = rdkafka::error::KafkaError::MessageProduction(t.code);
                Some(Refused {
                    seq: p.seq,
                    size: p.size,
                    refusal: SinkError::on_delivery(&e, p.id, &p.topic),
                })
            })
            .collect();
        (refused, topics)
    }

    /// Starts afresh from the records sent so far, for a loop that runs again on this
    /// producer (after an aborted transaction, or to replay from a checkpoint): they count as
    /// settled, failures and refusals are forgotten, and reports still to come for them are
    /// ignored. Then [`acked_below`](Self::acked_below) is [`sent`](Self::sent) and nothing
    /// is unacknowledged.
    pub fn rebase(&self) {
        let mut w = self.window.lock().unwrap_or_else(|e| e.into_inner());
        let mut kept = self.failure.lock().unwrap_or_else(|e| e.into_inner());
        let sent = self.sent();
        self.base.store(sent, Ordering::Release);
        w.low = sent;
        w.done.clear();
        self.acked.store(sent, Ordering::Release);
        self.acked_bytes
            .store(self.sent_bytes.load(Ordering::Acquire), Ordering::Release);
        self.acked_below.store(sent, Ordering::Release);
        self.failed_count.store(0, Ordering::Release);
        self.failed.store(false, Ordering::Release);
        self.failed_otherwise.store(false, Ordering::Release);
        *kept = None;
        self.refused
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
        self.purged
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
        self.txn_refusals
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
        self.explicit
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
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

    /// The full number of the record whose number's low bits are `seq_bits`, `None` when it
    /// was sent before the last rebase.
    fn seq_of(&self, seq_bits: u64) -> Option<u64> {
        let w = self.window.lock().unwrap_or_else(|e| e.into_inner());
        w.unwrap_seq(seq_bits)
            .filter(|s| *s >= self.base.load(Ordering::Acquire))
    }

    /// Record with opaque `seq_bits << SIZE_BITS | size` was acknowledged.
    fn on_delivered(&self, seq_bits: u64, size: u64) {
        let low = {
            let mut w = self.window.lock().unwrap_or_else(|e| e.into_inner());
            let Some(seq) = w.unwrap_seq(seq_bits) else {
                return;
            };
            self.took_explicit(seq);
            if seq < self.base.load(Ordering::Acquire) {
                return;
            }
            w.ack(seq)
        };
        self.acked_bytes.fetch_add(size, Ordering::AcqRel);
        self.acked.fetch_add(1, Ordering::AcqRel);
        self.acked_below.store(low, Ordering::Release);
        self.notify.notify_one();
    }

    /// librdkafka's success report for the record with opaque bits `seq_bits`, written at
    /// `offset`. Without an offset (negative: `RD_KAFKA_OFFSET_INVALID`) the broker did not
    /// answer for this record: librdkafka inferred it from a later batch's acknowledgement
    /// ([`SinkError::Unconfirmed`]), so it counts as a transient failure, never as delivered.
    /// `record` names it (event id, topic, partition) only then.
    fn on_acknowledged(
        &self,
        seq_bits: u64,
        size: u64,
        offset: i64,
        record: impl FnOnce() -> (String, String, i32),
    ) {
        if offset >= 0 {
            return self.on_delivered(seq_bits, size);
        }
        if let Some(seq) = self.seq_of(seq_bits) {
            let (id, topic, partition) = record();
            self.on_failed(
                seq,
                SinkError::Unconfirmed {
                    id,
                    topic,
                    partition,
                },
                size,
            );
        }
    }

    fn on_failed(&self, seq: u64, failure: SinkError, size: u64) {
        if let (true, Some((id, topic))) = (failure.is_purged(), failure.record()) {
            self.purged
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(Purged {
                    seq,
                    size,
                    id: id.to_string(),
                    topic: topic.to_string(),
                });
        }
        if failure.refusal().is_some() {
            self.refused
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(Refused {
                    seq,
                    size,
                    refusal: failure.clone(),
                });
        } else {
            self.failed_otherwise.store(true, Ordering::Release);
        }
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
    const ENABLE_REFRESH_OAUTH_TOKEN: bool = true;

    fn log(&self, level: rdkafka::config::RDKafkaLogLevel, fac: &str, message: &str) {
        if let Some(refusal) = TxnRefusal::from_log(fac, message) {
            let mut topics = self.txn_refusals.lock().unwrap_or_else(|e| e.into_inner());
            if !topics.contains(&refusal) {
                topics.push(refusal);
            }
        }
        super::client_log::log_via(&self.link, level, fac, message);
    }

    fn error(&self, error: rdkafka::error::KafkaError, reason: &str) {
        self.link.on_error(&error, reason);
    }

    fn stats_raw(&self, statistics: &[u8]) {
        self.link.on_statistics(statistics);
    }

    /// OAUTHBEARER tokens outboxd makes itself (AWS MSK IAM, a token file); OIDC clients
    /// never ask (librdkafka refreshes their tokens itself).
    fn generate_oauth_token(
        &self,
        oauthbearer_config: Option<&str>,
    ) -> Result<rdkafka::client::OAuthToken, Box<dyn std::error::Error>> {
        super::oauth::generate(oauthbearer_config)
    }
}

impl ProducerContext for DeliveryTracker {
    type DeliveryOpaque = usize;

    fn delivery(&self, result: &DeliveryResult<'_>, opaque: usize) {
        self.reports.fetch_add(1, Ordering::AcqRel);
        let (seq_bits, size) = (
            opaque as u64 >> SIZE_BITS,
            opaque as u64 & ((1 << SIZE_BITS) - 1),
        );
        match result {
            Ok(m) => {
                // An acknowledgement is the cluster answering, whatever the statistics say.
                self.link.answered();
                self.on_acknowledged(seq_bits, size, m.offset(), || {
                    (event_id(m), m.topic().to_string(), m.partition())
                })
            }
            Err((e, m)) => {
                if let Some(seq) = self.seq_of(seq_bits) {
                    let failure = SinkError::on_delivery(e, event_id(m), m.topic());
                    let failure = self.on_delivery_failed(seq, failure);
                    self.on_failed(seq, failure, size);
                }
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
    fn the_topics_records_wait_for_are_known() {
        let t = DeliveryTracker::new(KafkaLink::new("test", "test:1"));
        for (seq, topic) in ["a", "b", "a", "c"].into_iter().enumerate() {
            t.enqueued(1);
            t.sent_to(topic, seq as u64);
        }
        assert_eq!(t.waiting_topics(), vec!["a", "b", "c"]);
        t.on_delivered(0, 1);
        t.on_delivered(1, 1);
        assert_eq!(
            t.waiting_topics(),
            vec!["a", "c"],
            "b's only record is acknowledged"
        );
        t.on_delivered(3, 1);
        assert_eq!(
            t.waiting_topics(),
            vec!["a", "c"],
            "c's record is acknowledged, but one sent before it is not"
        );
        t.on_delivered(2, 1);
        assert!(t.waiting_topics().is_empty());
    }

    #[test]
    fn an_unknown_partition_is_a_refusal_only_for_a_record_that_named_it() {
        use rdkafka::error::{KafkaError, RDKafkaErrorCode as C};
        let t = DeliveryTracker::new(KafkaLink::new("test", "test:1"));
        let unknown = || {
            SinkError::on_delivery(
                &KafkaError::MessageProduction(C::UnknownPartition),
                "e".into(),
                "t",
            )
        };
        t.sent_to_partition(1);
        // Placed by the partitioner: the topic shrank under the producer, a restart cures it.
        let placed = t.on_delivery_failed(0, unknown());
        assert!(matches!(placed, SinkError::Delivery { .. }), "{placed}");
        assert_eq!(placed.class(), Class::Transient);
        assert!(placed.refusal().is_none());
        // Named by a partition placement: refused for good (it can be dead-lettered).
        let named = t.on_delivery_failed(1, unknown());
        assert!(named.refusal().is_some(), "{named}");
        assert!(
            t.explicit.lock().unwrap().is_empty(),
            "forgotten once asked"
        );
    }

    #[test]
    fn a_success_without_an_offset_is_not_a_delivery() {
        let t = DeliveryTracker::new(KafkaLink::new("test", "test:1"));
        for seq in 0..3 {
            t.enqueued(1);
            t.sent_to("t", seq);
        }
        let named = || ("e-1".to_string(), "t".to_string(), 0);
        t.on_acknowledged(0, 1, 7, named);
        // librdkafka's implicit ack: record 1 inferred from record 2's acknowledgement.
        t.on_acknowledged(1, 1, -1001, named);
        t.on_acknowledged(2, 1, 8, named);
        assert_eq!(
            t.acked_below(),
            1,
            "nothing at or after the inferred record counts"
        );
        let failure = t.failure().expect("the inferred record is a failure");
        assert!(
            matches!(failure, SinkError::Unconfirmed { ref id, partition: 0, .. } if id == "e-1"),
            "{failure}"
        );
        assert_eq!(failure.class(), Class::Transient);
        assert!(!failure.is_purged() && failure.refusal().is_none());
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
        assert_eq!(w.unwrap_seq(o >> SIZE_BITS), Some(seq));
        assert_eq!(o & ((1 << SIZE_BITS) - 1), 1024);
        assert_eq!(counted_size(usize::MAX), (1 << SIZE_BITS) - 1);
        let w0 = Window::default();
        assert_eq!(w0.unwrap_seq(opaque(7, 1) as u64 >> SIZE_BITS), Some(7));
        let late = Window {
            low: 100,
            ..Window::default()
        };
        assert_eq!(late.unwrap_seq(opaque(99, 1) as u64 >> SIZE_BITS), None);
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
        t.on_failed(0, failed(C::PurgeQueue, "purged"), 10);
        t.on_failed(0, failed(C::MessageTimedOut, "timed out"), 10);
        t.on_failed(0, failed(C::MessageTimedOut, "timed out too"), 10);
        assert_eq!(id_of(&t.failure().expect("kept")), "timed out");
        t.on_failed(0, failed(C::MessageSizeTooLarge, "small"), 10);
        t.on_failed(0, failed(C::TopicAuthorizationFailed, "acl"), 10);
        t.on_failed(0, failed(C::MessageSizeTooLarge, "large"), 30);
        t.on_failed(0, failed(C::PurgeInflight, "purged later"), 99);
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
        t.on_failed(0, failed(C::PurgeQueue, "purged"), 1);
        assert!(t.failure().is_some());
        assert!(t
            .settled_failure(std::time::Duration::from_millis(10))
            .is_none());
        t.on_failed(0, failed(C::MessageTimedOut, "timed out"), 1);
        let f = t
            .settled_failure(std::time::Duration::from_millis(10))
            .expect("a cause");
        assert_eq!(id_of(&f), "timed out");
    }

    #[test]
    fn refusals_are_listed_and_a_rebase_forgets_the_past() {
        let t = DeliveryTracker::new(KafkaLink::new("test", "test:1"));
        for _ in 0..4 {
            t.enqueued(5);
        }
        t.on_delivered(0, 5);
        t.on_failed(1, failed(C::MessageSizeTooLarge, "big"), 5);
        t.on_failed(3, failed(C::TopicAuthorizationFailed, "acl"), 5);
        assert!(t.only_refusals());
        let refused: Vec<u64> = t.take_refused().into_iter().map(|r| r.seq).collect();
        assert_eq!(refused, vec![1, 3]);
        assert!(t.take_refused().is_empty());
        t.on_failed(2, failed(C::MessageTimedOut, "slow"), 5);
        assert!(!t.only_refusals(), "a transient failure too");
        t.rebase();
        assert!(t.failure().is_none() && !t.only_refusals());
        assert_eq!(t.acked_below(), 4);
        assert_eq!(t.unacked(), (0, 0));
        assert!(t.settled());
        // Late reports of records sent before the rebase change nothing.
        t.on_delivered(2, 5);
        assert_eq!(t.acked(), (4, 20));
        t.enqueued(5);
        t.on_delivered(4, 5);
        assert_eq!(t.acked_below(), 5);
    }

    #[test]
    fn a_topic_refused_for_the_transaction_is_read_from_librdkafka_s_log() {
        // As librdkafka 2.12 logs it (rd_rkb_log: thread and broker prefixes).
        let line = "[thrd:sasl_ssl://localhost:41094/bootstrap]: \
                    sasl_ssl://localhost:41094/1: Failed to add partition \"shop.Denied\" [2] \
                    to transaction: Broker: Topic authorization failed";
        assert_eq!(
            TxnRefusal::from_log("ADDPARTS", line),
            Some(TxnRefusal {
                topic: "shop.Denied".into(),
                code: C::TopicAuthorizationFailed
            })
        );
        assert_eq!(
            TxnRefusal::from_log(
                "ADDPARTS",
                &line.replace("Topic authorization failed", "Invalid topic")
            )
            .map(|r| r.code),
            Some(C::InvalidTopic)
        );
        // The partitions not attempted because of it, other errors, other facilities: none.
        for (fac, l) in [
            (
                "ADDPARTS",
                line.replace("Topic authorization failed", "Operation not attempted"),
            ),
            (
                "ADDPARTS",
                line.replace("Topic authorization failed", "Coordinator not available"),
            ),
            ("TXNERR", line.to_string()),
        ] {
            assert_eq!(TxnRefusal::from_log(fac, &l), None, "{fac} {l}");
        }
    }

    #[test]
    fn the_purged_records_of_a_refused_topic_are_its_refusals() {
        let t = DeliveryTracker::new(KafkaLink::new("test", "test:1"));
        let purged = |id: &str, topic: &str| {
            SinkError::on_delivery(
                &KafkaError::MessageProduction(C::PurgeQueue),
                id.into(),
                topic,
            )
        };
        for _ in 0..4 {
            t.enqueued(5);
        }
        t.on_delivered(0, 5);
        t.on_failed(1, purged("e1", "shop.Order"), 5);
        t.on_failed(2, purged("e2", "shop.Denied"), 5);
        t.on_failed(3, purged("e3", "shop.Denied"), 7);
        let (none, topics) = t.take_txn_refused();
        assert!(
            none.is_empty() && topics.is_empty(),
            "purges alone are no refusal"
        );
        t.rebase();
        for _ in 0..3 {
            t.enqueued(5);
        }
        t.on_failed(4, purged("e1", "shop.Order"), 5);
        t.on_failed(5, purged("e2", "shop.Denied"), 5);
        t.on_failed(6, purged("e3", "shop.Denied"), 7);
        t.log(
            rdkafka::config::RDKafkaLogLevel::Error,
            "ADDPARTS",
            "b/1: Failed to add partition \"shop.Denied\" [0] to transaction: Broker: Topic authorization failed",
        );
        let (refused, topics) = t.take_txn_refused();
        assert_eq!(topics.len(), 1);
        let got: Vec<(u64, u64, &str)> = refused
            .iter()
            .map(|r| (r.seq, r.size, r.refusal.refused_record().unwrap().0))
            .collect();
        assert_eq!(got, vec![(5, 5, "e2"), (6, 7, "e3")]);
        assert!(refused.iter().all(|r| r.refusal.class() == Class::Definite));
        assert!(refused[0].refusal.to_string().contains("shop.Denied"));
        assert!(t.take_txn_refused().0.is_empty(), "taken");
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
        t.on_failed(0, failed(C::TopicAuthorizationFailed, "refused"), 1);
        assert_eq!(id_of(&waiter.await.unwrap().unwrap_err()), "refused");
    }
}
