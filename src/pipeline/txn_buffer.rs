//! The records of the source transaction being read, held back until its commit.
//!
//! A delivery loop sends a source transaction's records only once its commit has been read,
//! so that an event of it that cannot be delivered (the router refuses it, or its record is
//! too large) stops the connector before anything of that transaction was sent: everything
//! ahead of it is delivered and checkpointed, nothing of it is (no half-delivered source
//! transaction). A transaction with more records than the buffer holds
//! ([`TxnBuffer::new`]'s bounds) is *spilled*: its records so far are sent, and the rest go
//! straight through; such a transaction can end up partly delivered, which the stop's error
//! then says (and memory stays bounded however large the transaction).

use super::poison::Poison;
use super::stage::{At, Stage, Step};
use crate::checkpoint::Checkpoint;
use crate::event::RowChange;
use crate::pipeline::Error;
use crate::position::SourcePosition;
use crate::sink::KafkaRecord;

/// Where a delivery loop stands in the source stream: the position before the source
/// transaction being read, its outbox rows so far, and its records held back
/// ([`TxnBuffer`]) until its commit.
#[derive(Debug)]
pub struct SourceTxn {
    /// The position after the last complete source transaction (or the resume position).
    pub position: Option<SourcePosition>,
    /// Outbox rows of the current transaction seen so far (those dropped on resume too).
    pub rows: u64,
    /// Rows of the first transaction to drop on resume (a checkpoint inside it).
    pub skip: u64,
    /// Records of the current transaction were sent already (it was larger than the
    /// buffer, or an earlier run delivered part of it): the rest goes straight through.
    pub spilled: bool,
    /// The resumed checkpoint's connector, for the warning about a `skip` larger than the
    /// transaction it applies to.
    connector: String,
    buffer: TxnBuffer,
    /// The current transaction's ignored UPDATEs, logged at its commit.
    ignored: super::ignored::IgnoredOps,
}

/// What an outbox row change asks of the delivery loop.
#[derive(Debug)]
pub enum Admitted {
    /// Nothing now (held back, skipped, or delivered by an earlier run).
    Nothing,
    /// Send these, in order.
    Send(Vec<Pending>),
    /// Stop at this event, after delivering what is ahead of its source transaction.
    Stop(Box<Poison>),
}

impl SourceTxn {
    /// At `resume` (the checkpoint the source starts at), holding back at most
    /// `max_records` records or `max_bytes` bytes of a transaction.
    pub fn new(resume: Option<&Checkpoint>, max_records: usize, max_bytes: usize) -> Self {
        let skip = resume.map_or(0, |c| c.skip);
        Self {
            position: resume.map(|c| c.position.clone()),
            rows: 0,
            skip,
            spilled: skip > 0,
            connector: resume.map(|c| c.connector.clone()).unwrap_or_default(),
            buffer: TxnBuffer::new(max_records, max_bytes),
            ignored: Default::default(),
        }
    }

    /// One outbox row change of the current transaction, routed by `stage`; `sent` is the
    /// number of records sent since the plan's ordinals start.
    ///
    /// Errors as [`Stage::route`] does.
    pub fn admit(
        &mut self,
        stage: &Stage<'_>,
        mut change: RowChange,
        sent: u64,
    ) -> Result<Admitted, Error> {
        self.rows += 1;
        if self.rows <= self.skip {
            return Ok(Admitted::Nothing);
        }
        let at = At {
            before: self.position.as_ref(),
            row: self.rows,
            partly_delivered: self.spilled,
        };
        let ordinal = sent + self.buffer.len() as u64;
        let (record, dead) = match stage.route(&mut change, ordinal, &at)? {
            Step::Skipped => return Ok(Admitted::Nothing),
            Step::Ignored(reason) => {
                self.ignored.note(stage.connector(), &change.table, reason);
                return Ok(Admitted::Nothing);
            }
            Step::Stop(poison) => return Ok(Admitted::Stop(poison)),
            Step::Record(r) => (r, false),
            Step::DeadLetter(r) => (r, true),
        };
        if self.spilled {
            return Ok(Admitted::Send(vec![Pending { record, dead }]));
        }
        if self.buffer.push(self.rows, record, dead) {
            // Larger than the buffer: what is held goes now, the rest as it comes.
            self.spilled = true;
            return Ok(Admitted::Send(self.buffer.take()));
        }
        Ok(Admitted::Nothing)
    }

    /// The current transaction committed at `position`: its held records, to send now. Its
    /// ignored UPDATEs are logged, one line per table with the count.
    ///
    /// The resumed checkpoint's `skip` applies to this transaction only: the first one with
    /// outbox rows after the checkpoint's position (a stored position may lag behind the
    /// transactions without outbox rows before it, which the source hands on only now and
    /// then as progress); a `skip` beyond its rows is logged, never carried to a later one.
    pub fn commit(&mut self, position: SourcePosition) -> Vec<Pending> {
        if self.skip > self.rows {
            tracing::warn!(
                connector = %self.connector,
                skip = self.skip,
                rows = self.rows,
                "the checkpoint skips {} row(s) of the first source transaction with outbox \
                 rows after {}, which has only {}: all of them were skipped, nothing of the \
                 transactions after it (it ends at {position})",
                self.skip,
                self.position
                    .as_ref()
                    .map_or_else(|| "the start".to_string(), |p| p.to_string()),
                self.rows
            );
        }
        self.ignored.finish(&position);
        self.position = Some(position);
        self.rows = 0;
        self.skip = 0;
        self.spilled = false;
        self.buffer.take()
    }

    /// Whether the stream is between transactions (a progress report may move the
    /// position then).
    pub fn between(&self) -> bool {
        self.rows == 0 && self.buffer.is_empty()
    }

    /// Rows of the current transaction settled (sent, skipped or dropped, none held back
    /// before them): what a checkpoint taken now counts as delivered (its `skip`). Never
    /// less than what the resumed checkpoint skips: those rows were delivered before, also
    /// while they have not been read again yet (a commit right after resuming inside a
    /// split transaction must keep its `skip`).
    pub fn settled(&self) -> u64 {
        let settled = self.buffer.first_row().map_or(self.rows, |first| first - 1);
        settled.max(self.skip)
    }

    /// Drops what is held for a stop at the transaction's row `row`, and returns the
    /// checkpoint's `skip` there: the rows before it when the transaction is partly
    /// delivered, else what the checkpoint already skips.
    pub fn stop_at(&mut self, row: u64) -> u64 {
        self.buffer.clear();
        if self.spilled {
            row - 1
        } else {
            self.skip
        }
    }
}

/// A record waiting for its source transaction's commit.
#[derive(Debug, Clone)]
pub struct Pending {
    /// The record: an outbox event's, or a dead letter.
    pub record: KafkaRecord,
    /// Whether it is a dead letter (for the dead-letter topic).
    pub dead: bool,
}

/// The records of the current source transaction not sent yet, in order.
#[derive(Debug)]
pub struct TxnBuffer {
    items: Vec<Pending>,
    bytes: usize,
    /// The transaction's outbox row (1-based) of the first record held.
    first_row: u64,
    max_records: usize,
    max_bytes: usize,
}

impl TxnBuffer {
    /// A buffer that asks to be spilled past `max_records` records or `max_bytes` bytes
    /// (`KafkaRecord::approx_size`).
    pub fn new(max_records: usize, max_bytes: usize) -> Self {
        Self {
            items: Vec::new(),
            bytes: 0,
            first_row: 0,
            max_records: max_records.max(1),
            max_bytes: max_bytes.max(1),
        }
    }

    /// Holds `record`, made from outbox row `row` (1-based) of the transaction. Returns true
    /// when the buffer is past its bounds: spill it ([`take`](Self::take)).
    pub fn push(&mut self, row: u64, record: KafkaRecord, dead: bool) -> bool {
        if self.items.is_empty() {
            self.first_row = row;
        }
        self.bytes += record.approx_size();
        self.items.push(Pending { record, dead });
        self.items.len() >= self.max_records || self.bytes >= self.max_bytes
    }

    /// Records held.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether nothing is held.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// The outbox row of the first record held, if any: rows before it are settled (sent or
    /// skipped), so a checkpoint inside the transaction may count them as delivered.
    pub fn first_row(&self) -> Option<u64> {
        (!self.items.is_empty()).then_some(self.first_row)
    }

    /// Hands out what is held, in order, and empties the buffer.
    pub fn take(&mut self) -> Vec<Pending> {
        self.bytes = 0;
        std::mem::take(&mut self.items)
    }

    /// Drops what is held (the transaction will not be delivered in this run).
    pub fn clear(&mut self) {
        self.items.clear();
        self.bytes = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ErrorPolicy;
    use crate::event::{Op, Row, TableName};
    use crate::position::Lsn;
    use crate::router::{EventRouter, RouterConfig};
    use crate::value::ColumnValue;

    fn change(id: &str, aggregate_type: &str) -> RowChange {
        let names: std::sync::Arc<[std::sync::Arc<str>]> =
            ["id", "aggregate_type", "aggregate_id", "payload"]
                .into_iter()
                .map(std::sync::Arc::from)
                .collect();
        let values = [id, aggregate_type, "a-1", "{}"]
            .into_iter()
            .map(|v| ColumnValue::Text(v.into()))
            .collect();
        RowChange {
            table: TableName::new("shop", "outbox_events"),
            op: Op::Insert,
            row: Row::new(names, values),
            source_ts_ms: 1,
            undecodable: None,
        }
    }

    #[test]
    fn the_stage_notes_the_topic_of_each_record_it_lets_through() {
        let router = EventRouter::new(&RouterConfig::default()).unwrap();
        let policy = ErrorPolicy::default();
        let topics = crate::active_topics::ActiveTopics::default();
        let stage = Stage::new("c", &router, &policy, 1 << 20, Default::default())
            .with_topics(Some(&topics));
        let before = SourcePosition::Lsn(Lsn(0x10));
        let at = super::super::stage::At {
            before: Some(&before),
            row: 1,
            partly_delivered: false,
        };
        for (i, t) in ["Order", "Cart", "Order"].into_iter().enumerate() {
            let step = stage.route(&mut change(&format!("e{i}"), t), i as u64, &at);
            assert!(matches!(step, Ok(Step::Record(_))));
        }
        assert_eq!(
            topics.list("c"),
            ["outbox.event.Cart", "outbox.event.Order"]
        );
        // Refused before sending (too large) and dead-lettered: its topic is not one it used.
        let dead = ErrorPolicy {
            tolerance: crate::config::ErrorTolerance::All,
            dead_letter_topic: Some("d.dlq".into()),
            context_headers: true,
        };
        let small =
            Stage::new("d", &router, &dead, 8, Default::default()).with_topics(Some(&topics));
        let step = small.route(&mut change("e9", "Order"), 0, &at);
        assert!(matches!(step, Ok(Step::DeadLetter(_))), "{step:?}");
        assert!(topics.list("d").is_empty());
    }

    #[test]
    fn resumed_inside_a_split_transaction_the_skip_holds_until_rows_pass_it() {
        let router = EventRouter::new(&RouterConfig::default()).unwrap();
        let policy = ErrorPolicy::default();
        let stage = Stage::new("c", &router, &policy, 1 << 20, Default::default());
        let resume = Checkpoint {
            connector: "c".into(),
            position: SourcePosition::Lsn(Lsn(0x10)),
            skip: 3,
            updated_at_ms: 0,
            cutover: None,
        };
        let mut txn = SourceTxn::new(Some(&resume), 10, 1 << 20);
        assert!(txn.spilled);
        assert_eq!(
            txn.settled(),
            3,
            "a commit before any row must keep the skip"
        );
        for i in 0..3 {
            let a = txn
                .admit(&stage, change(&format!("e{i}"), "Order"), 0)
                .unwrap();
            assert!(
                matches!(a, Admitted::Nothing),
                "row {i} was delivered before"
            );
        }
        assert_eq!(txn.settled(), 3);
        let a = txn.admit(&stage, change("e3", "Order"), 0).unwrap();
        assert!(
            matches!(a, Admitted::Send(ref p) if p.len() == 1),
            "spilled: straight on"
        );
        assert_eq!(txn.settled(), 4);
        let stop = txn.admit(&stage, change("e4", "bad topic"), 1).unwrap();
        let Admitted::Stop(poison) = stop else {
            panic!("{stop:?}")
        };
        assert_eq!((poison.row, poison.partly_delivered), (5, true));
        assert_eq!(txn.stop_at(poison.row), 4);
    }

    #[test]
    fn a_transaction_is_held_until_its_commit_or_spilled_past_the_bound() {
        let router = EventRouter::new(&RouterConfig::default()).unwrap();
        let policy = ErrorPolicy::default();
        let stage = Stage::new("c", &router, &policy, 1 << 20, Default::default());
        let mut txn = SourceTxn::new(None, 2, 1 << 20);
        assert!(matches!(
            txn.admit(&stage, change("e0", "Order"), 0).unwrap(),
            Admitted::Nothing
        ));
        assert_eq!(txn.settled(), 0, "held back: not delivered yet");
        let held = txn.commit(SourcePosition::Lsn(Lsn(0x20)));
        assert_eq!(held.len(), 1);
        assert!(txn.between());
        // Past two records: what is held goes out, and then straight on.
        assert!(matches!(
            txn.admit(&stage, change("e1", "Order"), 1).unwrap(),
            Admitted::Nothing
        ));
        let a = txn.admit(&stage, change("e2", "Order"), 1).unwrap();
        assert!(matches!(a, Admitted::Send(ref p) if p.len() == 2), "{a:?}");
        assert!(txn.spilled);
        // Stopping at a poison row of a transaction not spilled: nothing of it was sent.
        txn.commit(SourcePosition::Lsn(Lsn(0x30)));
        assert!(matches!(
            txn.admit(&stage, change("e5", "Order"), 3).unwrap(),
            Admitted::Nothing
        ));
        let Admitted::Stop(poison) = txn.admit(&stage, change("e6", "bad topic"), 3).unwrap()
        else {
            panic!("a stop")
        };
        assert!(!poison.partly_delivered);
        assert_eq!(txn.stop_at(poison.row), 0);
    }

    fn record(n: usize) -> KafkaRecord {
        KafkaRecord {
            topic: "t".into(),
            key: None,
            value: Some(vec![b'x'; n]),
            headers: Vec::new(),
            timestamp_ms: None,
            partition: None,
        }
    }

    #[test]
    fn holds_in_order_and_asks_to_spill_at_its_bounds() {
        let mut b = TxnBuffer::new(3, 1_000);
        assert_eq!(b.first_row(), None);
        assert!(!b.push(2, record(10), false));
        assert!(!b.push(4, record(10), true));
        assert_eq!(b.first_row(), Some(2));
        assert!(b.push(5, record(10), false), "three records");
        let taken = b.take();
        assert_eq!(taken.len(), 3);
        assert!(taken[1].dead);
        assert!(b.is_empty() && b.first_row().is_none());
        assert!(b.push(9, record(2_000), false), "bytes");
        b.clear();
        assert_eq!(b.len(), 0);
    }
}
