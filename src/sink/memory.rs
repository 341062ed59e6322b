//! An in-memory [`RecordSink`] with fault injection, for the delivery loops' unit tests
//! (built with `cfg(test)` only: the loops and the traits they use are crate-private): it keeps every record sent, in
//! order, and answers each one when the test says so — acknowledged, failed (transient) or
//! refused for good — or at once (`auto_ack`). Sends can be made to fail. As a
//! [`TransactionalSink`] it keeps transactions: records become visible
//! ([`MemorySink::committed`]) at commit, an abort purges what is unanswered, and commits
//! can be made to fail or the producer fatal (fenced).

use std::sync::Mutex;
use std::time::{Duration, Instant};

use rdkafka::error::{KafkaError, RDKafkaErrorCode};

use super::tracker::counted_size;
use super::{
    DeliveryTracker, KafkaLink, KafkaRecord, RecordSink, Refusal, SinkError, TransactionalSink,
};

/// What the memory sink does with the next record sent.
#[derive(Debug, Clone)]
pub(crate) enum OnSend {
    /// Keep it unanswered until [`MemorySink::answer`] (or acknowledge it at once when
    /// auto-acknowledging).
    Keep,
    /// Fail the send itself with this error.
    Fail(SinkError),
}

#[derive(Debug, Default)]
struct State {
    /// Every record enqueued, with its number and counted size.
    sent: Vec<(u64, u64, KafkaRecord)>,
    /// Numbers of the records not answered yet, in send order.
    unanswered: Vec<u64>,
    /// What the next sends do, first first; empty: keep.
    next: std::collections::VecDeque<OnSend>,
    /// Where the open transaction's records start in `sent`, while one is open.
    txn_from: Option<usize>,
    /// Records of committed transactions, in order.
    committed: Vec<KafkaRecord>,
    /// What the next commits fail with, first first.
    failing_commits: std::collections::VecDeque<SinkError>,
    /// The producer's fatal error (fenced), once set.
    fatal: Option<SinkError>,
    /// Transactions aborted.
    aborts: u32,
}

/// An in-memory sink; see the module docs.
pub(crate) struct MemorySink {
    deliveries: DeliveryTracker,
    max_record_bytes: usize,
    auto_ack: bool,
    state: Mutex<State>,
}

impl MemorySink {
    /// A sink taking records up to `max_record_bytes`, answering each at once with an
    /// acknowledgement when `auto_ack`, else only when told ([`answer`](Self::answer)).
    pub(crate) fn new(max_record_bytes: usize, auto_ack: bool) -> Self {
        Self {
            deliveries: DeliveryTracker::new(KafkaLink::quiet("memory", "memory")),
            max_record_bytes,
            auto_ack,
            state: Mutex::default(),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The next send does `what` (queued behind earlier instructions).
    pub(crate) fn on_next_send(&self, what: OnSend) {
        self.state().next.push_back(what);
    }

    /// Every record enqueued so far, in send order.
    pub(crate) fn records(&self) -> Vec<KafkaRecord> {
        self.state()
            .sent
            .iter()
            .map(|(_, _, r)| r.clone())
            .collect()
    }

    /// Numbers of the records not answered yet.
    pub(crate) fn unanswered(&self) -> Vec<u64> {
        self.state().unanswered.clone()
    }

    /// Answers record `seq` (the broker's acknowledgement, or failure).
    ///
    /// Panics when `seq` was not sent or was answered already (a mistake in the test).
    pub(crate) fn answer(&self, seq: u64, outcome: Result<(), SinkError>) {
        let counted = {
            let mut st = self.state();
            let i = st
                .unanswered
                .iter()
                .position(|s| *s == seq)
                .unwrap_or_else(|| panic!("record {seq} is not waiting for an answer"));
            st.unanswered.remove(i);
            st.sent
                .iter()
                .find(|(s, _, _)| *s == seq)
                .map(|(_, c, _)| *c)
                .expect("sent")
        };
        self.deliveries.report(seq, counted, outcome);
    }

    /// Acknowledges every record waiting.
    pub(crate) fn ack_all(&self) {
        for seq in self.unanswered() {
            self.answer(seq, Ok(()));
        }
    }

    /// A transient delivery failure of `record` (a request timed out).
    pub(crate) fn timed_out(record: &KafkaRecord) -> SinkError {
        SinkError::Delivery {
            id: record.event_id(),
            topic: record.topic.clone(),
            source: Box::new(KafkaError::MessageProduction(
                RDKafkaErrorCode::RequestTimedOut,
            )),
        }
    }

    /// A refusal for good of `record` (no WRITE permission on its topic).
    pub(crate) fn refused(record: &KafkaRecord) -> SinkError {
        SinkError::Refused {
            reason: Refusal::Other,
            id: record.event_id(),
            topic: record.topic.clone(),
            source: Box::new(KafkaError::MessageProduction(
                RDKafkaErrorCode::TopicAuthorizationFailed,
            )),
        }
    }

    /// The records of committed transactions, in order (checkpoint records among them).
    pub(crate) fn committed(&self) -> Vec<KafkaRecord> {
        self.state().committed.clone()
    }

    /// How many transactions were aborted.
    pub(crate) fn aborts(&self) -> u32 {
        self.state().aborts
    }

    /// The next commit fails with `error`.
    pub(crate) fn fail_next_commit(&self, error: SinkError) {
        self.state().failing_commits.push_back(error);
    }

    /// The producer becomes fatally failed with `error` (fenced by another instance).
    pub(crate) fn set_fatal(&self, error: SinkError) {
        self.state().fatal = Some(error);
    }

    /// A transient failure of a transaction step `what` (the coordinator did not answer).
    pub(crate) fn coordinator_timed_out(what: &'static str) -> SinkError {
        SinkError::Transaction {
            what,
            fatal: false,
            source: Box::new(KafkaError::MessageProduction(
                RDKafkaErrorCode::RequestTimedOut,
            )),
        }
    }

    /// Record number `seq` as sent.
    pub(crate) fn record(&self, seq: u64) -> KafkaRecord {
        self.state()
            .sent
            .iter()
            .find(|(s, _, _)| *s == seq)
            .map(|(_, _, r)| r.clone())
            .unwrap_or_else(|| panic!("record {seq} was not sent"))
    }
}

impl RecordSink for MemorySink {
    fn deliveries(&self) -> &DeliveryTracker {
        &self.deliveries
    }

    fn max_record_bytes(&self) -> usize {
        self.max_record_bytes
    }

    async fn send(&self, record: &KafkaRecord) -> Result<(), SinkError> {
        let size = record.approx_size();
        if size > self.max_record_bytes {
            return Err(SinkError::RecordTooLarge {
                id: record.event_id(),
                topic: record.topic.clone(),
                size,
                limit: self.max_record_bytes,
                limit_of: crate::sink::RecordLimit::Kafka,
            });
        }
        let next = self.state().next.pop_front().unwrap_or(OnSend::Keep);
        if let OnSend::Fail(e) = next {
            return Err(e);
        }
        let counted = counted_size(size);
        let seq = {
            let mut st = self.state();
            let seq = self.deliveries.enqueue(&record.topic, counted);
            st.sent.push((seq, counted, record.clone()));
            st.unanswered.push(seq);
            seq
        };
        if self.auto_ack {
            self.answer(seq, Ok(()));
        }
        Ok(())
    }

    async fn missing_topics(&self, _cause: &SinkError) -> Option<SinkError> {
        None
    }
}

impl TransactionalSink for MemorySink {
    fn begin(&self) -> Result<(), SinkError> {
        let mut st = self.state();
        if let Some(f) = &st.fatal {
            return Err(f.clone());
        }
        assert!(st.txn_from.is_none(), "begin with a transaction open");
        st.txn_from = Some(st.sent.len());
        Ok(())
    }

    fn kick(&self) {}

    async fn flush_now(&self, timeout: Duration) -> Result<(), SinkError> {
        let until = Instant::now() + timeout;
        while !self.state().unanswered.is_empty() {
            if Instant::now() >= until {
                return Err(SinkError::Flush {
                    source: Box::new(KafkaError::Flush(RDKafkaErrorCode::OperationTimedOut)),
                });
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        Ok(())
    }

    async fn commit(&self) -> Result<(), SinkError> {
        let mut st = self.state();
        if let Some(f) = &st.fatal {
            return Err(f.clone());
        }
        if let Some(e) = st.failing_commits.pop_front() {
            return Err(e);
        }
        let from = st.txn_from.take().expect("commit with a transaction open");
        let records: Vec<KafkaRecord> = st.sent[from..].iter().map(|(_, _, r)| r.clone()).collect();
        st.committed.extend(records);
        Ok(())
    }

    fn fatal(&self) -> Option<SinkError> {
        self.state().fatal.clone()
    }

    fn abort(&self) {
        let unanswered = {
            let mut st = self.state();
            st.txn_from = None;
            st.aborts += 1;
            st.unanswered.clone()
        };
        for seq in unanswered {
            let record = self.record(seq);
            self.answer(
                seq,
                Err(SinkError::Delivery {
                    id: record.event_id(),
                    topic: record.topic.clone(),
                    source: Box::new(KafkaError::MessageProduction(RDKafkaErrorCode::PurgeQueue)),
                }),
            );
        }
    }
}
