//! The binlog adapter: from decoded binlog messages to outbox [`SourceEvent`]s.
//!
//! The decoder only decodes the rows of the outbox tables (its table filter) and frames every
//! transaction, ending it with a `Commit` that carries the position after it; the adapter
//! turns those rows into changes and the commit of a transaction that had some into a
//! [`SourceEvent::Commit`]. Transactions without outbox rows produce a throttled
//! [`SourceEvent::Progress`] (every [`PROGRESS_EVERY`] of them), and so do heartbeats, so the
//! checkpoint follows a busy (or idle) server whose outbox is quiet.

use super::decode::BinlogMessage;
use crate::event::{RowChange, SourceEvent, TableName};
use crate::source::PROGRESS_EVERY;

/// An XA transaction wrote outbox rows: whether it commits is only decided by a later
/// `XA COMMIT` / `XA ROLLBACK`, so its rows can be neither published nor dropped yet.
#[derive(Debug, Clone, thiserror::Error)]
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

/// Transaction state between binlog messages.
#[derive(Debug, Default)]
pub struct OutboxAdapter {
    /// Outbox rows of the open transaction handed on.
    txn_rows: u64,
    filtered_since_progress: u64,
    /// The open transaction is an XA transaction.
    xa: bool,
}

impl OutboxAdapter {
    /// An adapter between transactions.
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds one decoded message (rows of outbox tables only: the decoder filters the others
    /// out); the events it makes are appended to `out`.
    ///
    /// Errors when an XA transaction writes outbox rows ([`XaOutboxRows`]), before any of
    /// them is handed on.
    pub fn on_message(
        &mut self,
        msg: BinlogMessage,
        out: &mut Vec<SourceEvent>,
    ) -> Result<(), XaOutboxRows> {
        match msg {
            BinlogMessage::XaStart => self.xa = true,
            BinlogMessage::XaPrepare { position, .. } => {
                // Nothing of ours in it (rows would have stopped us): like a filtered commit.
                self.xa = false;
                self.filtered(position, out);
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
                if self.xa {
                    return Err(XaOutboxRows { table });
                }
                for row in rows {
                    self.txn_rows += 1;
                    out.push(SourceEvent::Change(RowChange {
                        table: table.clone(),
                        op,
                        row,
                        source_ts_ms: ts_ms,
                        undecodable: None,
                    }));
                }
            }
            BinlogMessage::Commit {
                ts_ms, position, ..
            } => {
                if self.txn_rows > 0 {
                    out.push(SourceEvent::Commit {
                        position,
                        commit_ts_ms: ts_ms,
                    });
                    self.filtered_since_progress = 0;
                } else {
                    self.filtered(position, out);
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
            BinlogMessage::Heartbeat { position } => {
                if self.txn_rows == 0 {
                    self.filtered_since_progress = 0;
                    out.push(SourceEvent::Progress { position });
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

    /// A transaction without outbox rows ended at `position`: progress, now and then.
    fn filtered(&mut self, position: crate::position::SourcePosition, out: &mut Vec<SourceEvent>) {
        self.filtered_since_progress += 1;
        if self.filtered_since_progress >= PROGRESS_EVERY {
            self.filtered_since_progress = 0;
            out.push(SourceEvent::Progress { position });
        }
    }
}
