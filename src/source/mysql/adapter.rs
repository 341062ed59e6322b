//! The binlog adapter: from decoded binlog messages to outbox [`SourceEvent`]s.
//!
//! Keeps only row changes of the configured outbox tables and frames them as transactions.
//! Positions come from the decoder, which tracks them per [`super::decode::PositionKind`]:
//! the adapter asks for the position after a transaction only when it hands one on.
//! Transactions touching no outbox table produce a throttled [`SourceEvent::Progress`], and so
//! do heartbeats, so the checkpoint follows a busy (or idle) server whose outbox is quiet.

use std::collections::HashSet;

use super::decode::BinlogMessage;
use crate::event::{RowChange, SourceEvent, TableName};
use crate::position::SourcePosition;

/// An XA transaction wrote outbox rows: whether it commits is only decided by a later
/// `XA COMMIT` / `XA ROLLBACK`, so its rows can be neither published nor dropped yet.
#[derive(Debug, thiserror::Error)]
#[error(
    "an XA transaction writes outbox rows to {table}: whether it commits is decided only by a \
     later XA COMMIT / XA ROLLBACK, so outboxd stops rather than publish events that may never \
     happen (nothing of it is published and nothing after it is checkpointed); write outbox \
     rows in ordinary transactions (XA COMMIT ... ONE PHASE is fine)"
)]
pub struct XaOutboxRows {
    /// The outbox table written.
    pub table: TableName,
}

/// Filtered transactions between two progress reports, at most.
const PROGRESS_EVERY: u64 = 1000;

/// Filter and framing state between binlog events.
#[derive(Debug)]
pub struct OutboxAdapter {
    tables: HashSet<TableName>,
    txn_rows: u64,
    filtered_since_progress: u64,
    /// The open transaction is an XA transaction.
    xa: bool,
}

impl OutboxAdapter {
    /// An adapter keeping the rows of outbox `tables`.
    pub fn new(tables: HashSet<TableName>) -> Self {
        Self {
            tables,
            txn_rows: 0,
            filtered_since_progress: 0,
            xa: false,
        }
    }

    /// True while outbox rows of an unfinished source transaction have been handed on: a
    /// reconnect now would replay them, so the caller must restart from the checkpoint.
    pub fn mid_transaction(&self) -> bool {
        self.txn_rows > 0
    }

    /// Feeds one decoded message. `position` gives the position after the last committed
    /// transaction (called only when it is needed).
    ///
    /// Errors when an XA transaction writes outbox rows ([`XaOutboxRows`]), before any of
    /// them is handed on.
    pub fn on_message(
        &mut self,
        msg: BinlogMessage,
        position: impl FnOnce() -> SourcePosition,
        out: &mut Vec<SourceEvent>,
    ) -> Result<(), XaOutboxRows> {
        match msg {
            BinlogMessage::XaStart => self.xa = true,
            BinlogMessage::XaPrepare { ts_ms } => {
                // Nothing of ours in it (rows would have stopped us): like a filtered commit.
                self.xa = false;
                return self.on_message(BinlogMessage::Commit { xid: None, ts_ms }, position, out);
            }
            BinlogMessage::Begin { .. } => {
                self.txn_rows = 0;
                self.xa = false;
            }
            BinlogMessage::Rows {
                table,
                op,
                rows,
                ts_ms,
            } => {
                if !self.tables.contains(&table) {
                    return Ok(());
                }
                if self.xa {
                    return Err(XaOutboxRows { table });
                }
                if self.txn_rows == 0 {
                    out.push(SourceEvent::Begin);
                }
                for row in rows {
                    self.txn_rows += 1;
                    out.push(SourceEvent::Change(RowChange {
                        table: table.clone(),
                        op,
                        row,
                        source_ts_ms: ts_ms,
                    }));
                }
            }
            BinlogMessage::Commit { ts_ms, .. } => {
                if self.txn_rows > 0 {
                    out.push(SourceEvent::Commit {
                        position: position(),
                        commit_ts_ms: ts_ms,
                    });
                    self.filtered_since_progress = 0;
                } else {
                    self.filtered_since_progress += 1;
                    if self.filtered_since_progress >= PROGRESS_EVERY {
                        self.filtered_since_progress = 0;
                        out.push(SourceEvent::Progress {
                            position: position(),
                        });
                    }
                }
                self.txn_rows = 0;
            }
            BinlogMessage::Rollback => {
                // The decoder reports ROLLBACK (and a transaction cut short by a new one);
                // rows of it that were already handed on stay handed on: non-transactional
                // tables keep their changes despite a ROLLBACK, so those events happened.
                if self.txn_rows > 0 {
                    tracing::warn!(rows = self.txn_rows, "an event group with outbox rows ended in ROLLBACK; its rows were delivered (non-transactional outbox table?)");
                }
                self.txn_rows = 0;
            }
            BinlogMessage::Heartbeat => {
                if self.txn_rows == 0 {
                    self.filtered_since_progress = 0;
                    out.push(SourceEvent::Progress {
                        position: position(),
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
}
