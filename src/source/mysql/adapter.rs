//! The binlog adapter: from decoded binlog messages to outbox [`SourceEvent`]s.
//!
//! The decoder only decodes the rows of the outbox tables (its table filter) and frames every
//! transaction, ending it with a `Commit` that carries the position after it; the adapter
//! turns those rows into changes and the commit of a transaction that had some into a
//! [`SourceEvent::Commit`]. Transactions without outbox rows produce a throttled
//! [`SourceEvent::Progress`] (every [`PROGRESS_EVERY`] of them), and so do heartbeats, so the
//! checkpoint follows a busy (or idle) server whose outbox is quiet.
//!
//! **XA transactions.** An XA transaction's rows are in the binlog at its `XA PREPARE`, but
//! whether it commits is decided by a later `XA COMMIT` / `XA ROLLBACK` group, possibly from
//! another session. The adapter holds a prepared XA transaction's outbox rows (at most
//! `max_held_bytes` in all, [`Halt::XaTooLarge`] beyond) and hands them on at its `XA COMMIT`,
//! as a transaction committed at that group's position; `XA ROLLBACK` drops them. While such a
//! transaction waits, every position handed on is an [`XaPendingPosition`]: resume before the
//! oldest waiting PREPARE, delivered up to here. A session resumed at such a position reads
//! the PREPAREs again (and holds them again), and hands on nothing of the transactions the
//! delivered position covers: exactly once. `XA COMMIT ... ONE PHASE` is an ordinary
//! transaction (MariaDB logs it as one; MySQL's one-phase XA_PREPARE_LOG_EVENT is decoded as
//! a commit).
//!
//! **Stops.** A statement that writes an outbox table ([`BinlogMessage::StatementWrite`]:
//! the rows are not in the binlog) and a DDL that removes an outbox table
//! ([`BinlogMessage::TablesGone`]) are reported to the session as a [`Halt`] once the
//! transaction's end (and so the position after it) is read.

use super::decode::{BinlogMessage, TxnGtid, WriteVerb, Xid};
use crate::event::{RowChange, SourceEvent, TableName};
use crate::position::{SourcePosition, XaPendingPosition};
use crate::source::PROGRESS_EVERY;

/// Bytes counted for a held row besides its values (its change's table, column list, ...).
const HELD_ROW_OVERHEAD: usize = 64;

/// What the session must act on: the adapter stops handing on events at it.
#[derive(Debug, Clone, PartialEq)]
pub enum Halt {
    /// A transaction wrote an outbox table with a statement (its session's `binlog_format`
    /// was STATEMENT or MIXED): its rows cannot be decoded. Nothing of the transaction was
    /// handed on (unless outbox rows of it came before the statement, which are handed on
    /// without a commit: the delivery loop drops them).
    StatementWrite {
        /// The position before the transaction (as handed on).
        before: SourcePosition,
        /// The position after it (as it would be handed on).
        after: SourcePosition,
        /// The transaction's GTID.
        gtid: Option<TxnGtid>,
        /// The outbox table written.
        table: TableName,
        /// How.
        verb: WriteVerb,
        /// Whether the transaction is a prepared XA transaction.
        xa: bool,
    },
    /// A DDL statement removed outbox tables under their names; everything up to and
    /// including it was handed on. The session stops here unless the tables exist again.
    TablesGone {
        /// The position after the DDL (as handed on, or as it would be).
        at: SourcePosition,
        /// The DDL's GTID.
        gtid: Option<TxnGtid>,
        /// The tables and what happened to each.
        tables: Vec<(TableName, String)>,
    },
    /// The outbox rows of prepared XA transactions waiting for their `XA COMMIT` would exceed
    /// the bound: nothing of the transaction being read was handed on.
    XaTooLarge {
        /// The position before that transaction (as handed on).
        before: SourcePosition,
        /// Its GTID.
        gtid: Option<TxnGtid>,
        /// Rows held with it, of every waiting XA transaction.
        rows: usize,
        /// The bound, `xa_max_held_bytes`.
        limit: usize,
    },
}

/// A prepared XA transaction with outbox rows, waiting for its outcome.
#[derive(Debug)]
struct PreparedXa {
    xid: Option<Xid>,
    /// The position before its PREPARE group (raw, as the decoder gave it).
    before: SourcePosition,
    rows: Vec<RowChange>,
    bytes: usize,
}

/// The open transaction.
#[derive(Debug, Default)]
struct Txn {
    gtid: Option<TxnGtid>,
    /// The position before it (raw).
    before: Option<SourcePosition>,
    /// Outbox rows handed on.
    rows: u64,
    /// An XA group: its rows are held until it ends.
    xa: bool,
    held: Vec<RowChange>,
    held_bytes: usize,
    /// A statement of it wrote this outbox table.
    statement: Option<(TableName, WriteVerb)>,
    /// Outbox tables it removed.
    gone: Vec<(TableName, String)>,
    /// The XA transaction whose outcome this group is.
    outcome: Option<(Xid, bool)>,
    /// The delivered position of a resumed checkpoint covers it: hand on nothing of it.
    delivered: bool,
}

/// Transaction state between binlog messages.
#[derive(Debug)]
pub struct OutboxAdapter {
    txn: Txn,
    filtered_since_progress: u64,
    /// The position after the last transaction that ended (raw).
    last: SourcePosition,
    /// Prepared XA transactions with outbox rows waiting for their outcome, oldest first.
    prepared: Vec<PreparedXa>,
    prepared_bytes: usize,
    max_held_bytes: usize,
    /// Resumed at an [`XaPendingPosition`]: its delivered position, until the stream passes
    /// it; the transactions it covers are not handed on again.
    replay_until: Option<SourcePosition>,
}

impl OutboxAdapter {
    /// An adapter between transactions, for a session that starts at `start` (as handed
    /// on, or checkpointed: an [`XaPendingPosition`] makes it skip what was delivered),
    /// holding at most `max_held_bytes` of prepared XA transactions' outbox rows.
    pub fn new(start: &SourcePosition, max_held_bytes: usize) -> Self {
        let replay_until = match start {
            SourcePosition::XaPending(x) => Some((*x.delivered).clone()),
            _ => None,
        };
        Self {
            txn: Txn::default(),
            filtered_since_progress: 0,
            last: start.read_from().clone(),
            prepared: Vec::new(),
            prepared_bytes: 0,
            max_held_bytes,
            replay_until,
        }
    }

    /// The prepared XA transactions whose outbox rows are held, and their size in bytes.
    #[cfg(test)]
    pub fn held(&self) -> (usize, usize) {
        (self.prepared.len(), self.prepared_bytes)
    }

    /// `raw` as handed on: an [`XaPendingPosition`] while prepared XA transactions wait.
    fn emitted(&self, raw: SourcePosition) -> SourcePosition {
        match self.prepared.first() {
            None => raw,
            Some(oldest) => XaPendingPosition::new(oldest.before.clone(), raw.clone())
                .map(SourcePosition::XaPending)
                // Both come from one decoder, so they are of one kind.
                .unwrap_or(raw),
        }
    }

    /// Feeds one decoded message (rows of outbox tables only: the decoder filters the others
    /// out); the events it makes are appended to `out`.
    ///
    /// A [`Halt`] says where the session must act; the events in `out` come before it.
    pub fn on_message(
        &mut self,
        msg: BinlogMessage,
        out: &mut Vec<SourceEvent>,
    ) -> Result<(), Box<Halt>> {
        match msg {
            BinlogMessage::Begin { gtid, before, .. } => {
                let delivered = match &self.replay_until {
                    Some(d) if d.is_at_or_before(&before) != Some(true) => {
                        // Incomparable positions end the replay: delivering again is
                        // better than skipping.
                        d.is_at_or_before(&before).is_some()
                    }
                    _ => false,
                };
                if !delivered {
                    self.replay_until = None;
                }
                self.last = before.clone();
                self.txn = Txn {
                    gtid,
                    before: Some(before),
                    delivered,
                    ..Txn::default()
                };
            }
            BinlogMessage::XaStart => self.txn.xa = true,
            BinlogMessage::Rows {
                table,
                op,
                rows,
                ts_ms,
            } => {
                if self.txn.statement.is_some() || (self.txn.delivered && !self.txn.xa) {
                    return Ok(());
                }
                for row in rows {
                    let change = RowChange {
                        table: table.clone(),
                        op,
                        row,
                        source_ts_ms: ts_ms,
                        undecodable: None,
                    };
                    if self.txn.xa {
                        self.hold(change)?;
                    } else {
                        self.txn.rows += 1;
                        out.push(SourceEvent::Change(change));
                    }
                }
            }
            BinlogMessage::StatementWrite { table, verb } => {
                if self.txn.statement.is_none() && !self.txn.delivered {
                    self.txn.statement = Some((table, verb));
                }
            }
            BinlogMessage::TablesGone { tables } => self.txn.gone.extend(tables),
            BinlogMessage::XaOutcome { xid, committed } => {
                self.txn.outcome = Some((xid, committed));
            }
            BinlogMessage::XaPrepare { xid, position, .. } => {
                let txn = std::mem::take(&mut self.txn);
                let before = txn.before.clone().unwrap_or_else(|| self.last.clone());
                if let Some((table, verb)) = txn.statement {
                    return Err(Box::new(Halt::StatementWrite {
                        before: self.emitted(before),
                        after: self.emitted(position),
                        gtid: txn.gtid,
                        table,
                        verb,
                        xa: true,
                    }));
                }
                if !txn.held.is_empty() {
                    self.prepared_bytes += txn.held_bytes;
                    self.prepared.push(PreparedXa {
                        xid,
                        before,
                        rows: txn.held,
                        bytes: txn.held_bytes,
                    });
                }
                self.ended(position, false, out);
            }
            BinlogMessage::Commit {
                ts_ms, position, ..
            } => {
                let mut txn = std::mem::take(&mut self.txn);
                if let Some((table, verb)) = txn.statement.take() {
                    let before = txn.before.clone().unwrap_or_else(|| self.last.clone());
                    return Err(Box::new(Halt::StatementWrite {
                        before: self.emitted(before),
                        after: self.emitted(position),
                        gtid: txn.gtid,
                        table,
                        verb,
                        xa: txn.xa,
                    }));
                }
                // The rows this commit hands on: its own held ones (a one-phase XA group),
                // or those of the prepared XA transaction it commits.
                let mut held = std::mem::take(&mut txn.held);
                if let Some((xid, committed)) = &txn.outcome {
                    if let Some(i) = self
                        .prepared
                        .iter()
                        .position(|p| p.xid.as_ref() == Some(xid))
                    {
                        let p = self.prepared.remove(i);
                        self.prepared_bytes -= p.bytes;
                        if *committed {
                            held = p.rows;
                        }
                    }
                }
                if txn.delivered {
                    held.clear();
                }
                if !held.is_empty() {
                    for change in held {
                        txn.rows += 1;
                        out.push(SourceEvent::Change(change));
                    }
                }
                if txn.rows > 0 {
                    out.push(SourceEvent::Commit {
                        position: self.emitted(position.clone()),
                        commit_ts_ms: ts_ms,
                    });
                    self.filtered_since_progress = 0;
                    self.ended(position.clone(), true, out);
                } else {
                    self.ended(position.clone(), false, out);
                }
                if !txn.gone.is_empty() && !txn.delivered {
                    return Err(Box::new(Halt::TablesGone {
                        at: self.emitted(position),
                        gtid: txn.gtid,
                        tables: txn.gone,
                    }));
                }
            }
            BinlogMessage::Rollback => {
                // The decoder reports ROLLBACK (and a transaction cut short by a new one);
                // rows of it that were already handed on stay handed on: non-transactional
                // tables keep their changes despite a ROLLBACK, so those events happened.
                let txn = std::mem::take(&mut self.txn);
                if txn.rows > 0 {
                    tracing::warn!(rows = txn.rows, "an event group with outbox rows ended in ROLLBACK; its rows were delivered (non-transactional outbox table?)");
                }
                if let Some((table, _)) = txn.statement {
                    tracing::warn!(%table, gtid = ?txn.gtid.map(|g| g.to_string()), "an event group that wrote the outbox table with a statement ended in ROLLBACK: nothing of it is delivered (a transactional outbox table keeps nothing of it)");
                }
            }
            BinlogMessage::Heartbeat { position } => {
                if let Some(d) = &self.replay_until {
                    if d.is_at_or_before(&position) == Some(false) {
                        return Ok(());
                    }
                    self.replay_until = None;
                }
                if self.txn.rows == 0 {
                    self.filtered_since_progress = 0;
                    out.push(SourceEvent::Progress {
                        position: self.emitted(position),
                    });
                }
            }
            BinlogMessage::FormatDescription { .. }
            | BinlogMessage::Rotate { .. }
            | BinlogMessage::PreviousGtids(_)
            | BinlogMessage::MariadbGtidList(_)
            | BinlogMessage::Ddl { .. }
            | BinlogMessage::Incident { .. }
            | BinlogMessage::Other { .. } => {}
        }
        Ok(())
    }

    /// Holds a row of an XA group, within the bound.
    fn hold(&mut self, change: RowChange) -> Result<(), Box<Halt>> {
        let bytes = change.row.approx_size() + HELD_ROW_OVERHEAD;
        if self.prepared_bytes + self.txn.held_bytes + bytes > self.max_held_bytes {
            let before = self.txn.before.clone().unwrap_or_else(|| self.last.clone());
            return Err(Box::new(Halt::XaTooLarge {
                before: self.emitted(before),
                gtid: self.txn.gtid.clone(),
                rows: self.txn.held.len()
                    + 1
                    + self.prepared.iter().map(|p| p.rows.len()).sum::<usize>(),
                limit: self.max_held_bytes,
            }));
        }
        self.txn.held_bytes += bytes;
        self.txn.held.push(change);
        Ok(())
    }

    /// A transaction ended at `position` (raw); `handed_on` when its commit was.
    /// Otherwise, progress now and then.
    fn ended(&mut self, position: SourcePosition, handed_on: bool, out: &mut Vec<SourceEvent>) {
        self.last = position;
        if handed_on || self.replay_until.is_some() {
            return;
        }
        self.filtered_since_progress += 1;
        if self.filtered_since_progress >= PROGRESS_EVERY {
            self.filtered_since_progress = 0;
            out.push(SourceEvent::Progress {
                position: self.emitted(self.last.clone()),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::event::{Op, Row};
    use crate::value::ColumnValue;

    fn pos(seq: u64) -> SourcePosition {
        format!("mariadb_gtid:0-1-{seq}").parse().unwrap()
    }

    fn gtid(seq: u64) -> Option<TxnGtid> {
        Some(TxnGtid::Mariadb {
            domain: 0,
            server: 1,
            seq,
        })
    }

    fn begin(seq: u64) -> BinlogMessage {
        BinlogMessage::Begin {
            gtid: gtid(seq),
            before: pos(seq - 1),
            standalone: false,
            ts_ms: 0,
        }
    }

    fn rows(id: &str) -> BinlogMessage {
        let cols: Arc<[Arc<str>]> = vec![Arc::from("id")].into();
        BinlogMessage::Rows {
            table: TableName::new("s", "outbox"),
            op: Op::Insert,
            rows: vec![Row::new(cols, vec![ColumnValue::Text(id.into())])],
            ts_ms: 0,
        }
    }

    fn commit(seq: u64) -> BinlogMessage {
        BinlogMessage::Commit {
            xid: None,
            ts_ms: 0,
            position: pos(seq),
        }
    }

    fn xid(name: &str) -> Xid {
        Xid {
            format_id: 1,
            gtrid: name.as_bytes().to_vec(),
            bqual: Vec::new(),
        }
    }

    fn prepare(seq: u64, name: &str, ids: &[&str]) -> Vec<BinlogMessage> {
        let mut m = vec![begin(seq), BinlogMessage::XaStart];
        m.extend(ids.iter().map(|i| rows(i)));
        m.push(BinlogMessage::XaPrepare {
            xid: Some(xid(name)),
            ts_ms: 0,
            position: pos(seq),
        });
        m
    }

    fn outcome(seq: u64, name: &str, committed: bool) -> Vec<BinlogMessage> {
        vec![
            begin(seq),
            BinlogMessage::XaOutcome {
                xid: xid(name),
                committed,
            },
            commit(seq),
        ]
    }

    fn plain(seq: u64, ids: &[&str]) -> Vec<BinlogMessage> {
        let mut m = vec![begin(seq)];
        m.extend(ids.iter().map(|i| rows(i)));
        m.push(commit(seq));
        m
    }

    /// What `messages` give: row ids and commit/progress positions, in order.
    fn feed(a: &mut OutboxAdapter, messages: Vec<BinlogMessage>) -> Vec<String> {
        let mut out = Vec::new();
        for m in messages {
            a.on_message(m, &mut out).expect("no halt");
        }
        out.into_iter()
            .map(|e| match e {
                SourceEvent::Change(c) => match c.row.get("id") {
                    Some(ColumnValue::Text(t)) => t.clone(),
                    _ => "?".into(),
                },
                SourceEvent::Commit { position, .. } => format!("commit {position}"),
                SourceEvent::Progress { position } => format!("progress {position}"),
            })
            .collect()
    }

    #[test]
    fn a_prepared_xa_transaction_is_delivered_at_its_commit_and_holds_the_resume_position() {
        let mut a = OutboxAdapter::new(&pos(9), 1 << 20);
        let mut m = prepare(10, "x", &["a", "b"]);
        m.extend(plain(11, &["c"]));
        m.extend(outcome(12, "x", true));
        m.extend(plain(13, &["d"]));
        assert_eq!(
            feed(&mut a, m),
            vec![
                "c",
                "commit xa_pending:mariadb_gtid:0-1-9@0-1-11",
                "a",
                "b",
                "commit mariadb_gtid:0-1-12",
                "d",
                "commit mariadb_gtid:0-1-13",
            ]
        );
        assert_eq!(a.held(), (0, 0));
    }

    #[test]
    fn a_rolled_back_xa_transaction_delivers_nothing() {
        let mut a = OutboxAdapter::new(&pos(9), 1 << 20);
        let mut m = prepare(10, "x", &["a"]);
        m.extend(outcome(11, "x", false));
        m.extend(plain(12, &["d"]));
        assert_eq!(feed(&mut a, m), vec!["d", "commit mariadb_gtid:0-1-12"]);
    }

    #[test]
    fn resuming_at_a_pending_position_delivers_each_transaction_once() {
        // Delivered before the restart: c (11); x prepared at 10, y at 12 and committed at
        // 13 (delivered). The checkpoint: resume before x, delivered up to 13.
        let checkpoint: SourcePosition = "xa_pending:mariadb_gtid:0-1-9@0-1-13".parse().unwrap();
        let mut a = OutboxAdapter::new(&checkpoint, 1 << 20);
        let mut m = prepare(10, "x", &["a"]);
        m.extend(plain(11, &["c"]));
        m.extend(prepare(12, "y", &["y1"]));
        m.extend(outcome(13, "y", true));
        m.extend(plain(14, &["e"]));
        m.extend(outcome(15, "x", true));
        assert_eq!(
            feed(&mut a, m),
            vec![
                "e",
                "commit xa_pending:mariadb_gtid:0-1-9@0-1-14",
                "a",
                "commit mariadb_gtid:0-1-15",
            ]
        );
    }

    #[test]
    fn positions_handed_on_while_an_xa_transaction_waits_read_its_prepare_again() {
        // Progress over filtered transactions while x waits resumes before its PREPARE.
        let mut a = OutboxAdapter::new(&pos(9), 1 << 20);
        let mut m = prepare(10, "x", &["a"]);
        for seq in 11..(11 + PROGRESS_EVERY) {
            m.extend(plain(seq, &[]));
        }
        let last = 11 + PROGRESS_EVERY;
        m.extend(outcome(last, "x", true));
        assert_eq!(
            feed(&mut a, m),
            vec![
                format!("progress xa_pending:mariadb_gtid:0-1-9@0-1-{}", last - 2),
                "a".to_string(),
                format!("commit mariadb_gtid:0-1-{last}"),
            ]
        );
    }

    #[test]
    fn a_statement_write_halts_with_the_positions_around_its_transaction() {
        let mut a = OutboxAdapter::new(&pos(9), 1 << 20);
        let mut out = Vec::new();
        for m in [
            begin(10),
            BinlogMessage::StatementWrite {
                table: TableName::new("s", "outbox"),
                verb: WriteVerb::Insert,
            },
            rows("ignored"),
        ] {
            a.on_message(m, &mut out).unwrap();
        }
        assert!(out.is_empty());
        let halt = a.on_message(commit(10), &mut out).unwrap_err();
        assert_eq!(
            *halt,
            Halt::StatementWrite {
                before: pos(9),
                after: pos(10),
                gtid: gtid(10),
                table: TableName::new("s", "outbox"),
                verb: WriteVerb::Insert,
                xa: false
            }
        );
    }

    #[test]
    fn held_xa_rows_beyond_the_bound_halt() {
        let mut a = OutboxAdapter::new(&pos(9), 150);
        let mut out = Vec::new();
        let mut halted = None;
        for m in prepare(10, "x", &["a", "b", "c"]) {
            if let Err(h) = a.on_message(m, &mut out) {
                halted = Some(*h);
                break;
            }
        }
        assert!(
            matches!(
                halted,
                Some(Halt::XaTooLarge {
                    limit: 150,
                    rows: 3,
                    ..
                })
            ),
            "{halted:?}"
        );
    }

    #[test]
    fn a_dropped_outbox_table_halts_after_its_ddl() {
        let mut a = OutboxAdapter::new(&pos(9), 1 << 20);
        let mut out = Vec::new();
        let gone = vec![(TableName::new("s", "outbox"), "dropped".to_string())];
        a.on_message(begin(10), &mut out).unwrap();
        a.on_message(
            BinlogMessage::TablesGone {
                tables: gone.clone(),
            },
            &mut out,
        )
        .unwrap();
        assert_eq!(
            a.on_message(commit(10), &mut out),
            Err(Box::new(Halt::TablesGone {
                at: pos(10),
                gtid: gtid(10),
                tables: gone
            }))
        );
    }
}
