//! The UPDATEs on an outbox table that one source transaction made, logged once per
//! transaction with their count (`table.op.invalid.behavior` `warn` or `error`): a worker
//! that marks 5,000 rows sent in one statement gives one line, not 5,000. Each one is counted
//! as it is read, in `outboxd_events_skipped_total{reason="update"}`.

use crate::event::TableName;
use crate::position::SourcePosition;
use crate::router::SkipReason;

/// The ignored UPDATEs of the source transaction being read, by table and behaviour.
#[derive(Debug, Default)]
pub struct IgnoredOps {
    connector: String,
    /// (table, reason, count), in the order first seen; a transaction touches few tables.
    seen: Vec<(TableName, SkipReason, u64)>,
}

/// One line of [`IgnoredOps::finish`]: what it logs, for tests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IgnoredLine {
    /// ERROR (`table.op.invalid.behavior=error`) rather than WARN.
    pub error: bool,
    /// The message.
    pub message: String,
}

impl IgnoredOps {
    /// One more ignored change of `connector` on `table` (an UPDATE: `reason` is
    /// [`SkipReason::InvalidOpWarned`] or [`SkipReason::InvalidOpErrorLogged`]; a DELETE,
    /// which Debezium drops silently, is not noted).
    pub fn note(&mut self, connector: &str, table: &TableName, reason: SkipReason) {
        if reason == SkipReason::Delete {
            return;
        }
        if self.connector != connector {
            self.connector = connector.to_string();
        }
        match self
            .seen
            .iter_mut()
            .find(|(t, r, _)| t == table && *r == reason)
        {
            Some((_, _, n)) => *n += 1,
            None => self.seen.push((table.clone(), reason, 1)),
        }
    }

    /// The transaction committed at `position`: one line per table and behaviour, logged
    /// (WARN, or ERROR with `table.op.invalid.behavior=error`) and returned; the tally starts
    /// again.
    pub fn finish(&mut self, position: &SourcePosition) -> Vec<IgnoredLine> {
        let mut lines = Vec::with_capacity(self.seen.len());
        for (table, reason, count) in self.seen.drain(..) {
            let error = reason == SkipReason::InvalidOpErrorLogged;
            let behavior = if error { "error" } else { "warn" };
            let message = format!(
                "{count} UPDATE(s) of outbox table {table} in the source transaction committed \
                 at {position} ignored (table.op.invalid.behavior={behavior}: only INSERTs \
                 become events; an UPDATE is typically a worker marking rows sent, which \
                 needs no relay); counted in outboxd_events_skipped_total{{reason=\"update\"}}; \
                 set op_invalid_behavior = \"fatal\" (table.op.invalid.behavior) to stop at one \
                 instead"
            );
            if error {
                tracing::error!(connector = %self.connector, table = %table, op = "update", count, "{message}");
            } else {
                tracing::warn!(connector = %self.connector, table = %table, op = "update", count, "{message}");
            }
            lines.push(IgnoredLine { error, message });
        }
        lines
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::position::Lsn;

    #[test]
    fn one_line_per_table_and_behaviour_with_the_count() {
        let mut ig = IgnoredOps::default();
        let a = TableName::parse("shop.outbox").unwrap();
        let b = TableName::parse("shop.outbox2").unwrap();
        for _ in 0..5000 {
            ig.note("c", &a, SkipReason::InvalidOpWarned);
        }
        ig.note("c", &b, SkipReason::InvalidOpErrorLogged);
        ig.note("c", &a, SkipReason::Delete);
        let lines = ig.finish(&SourcePosition::Lsn(Lsn(0x10)));
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert!(!lines[0].error);
        assert!(lines[0]
            .message
            .starts_with("5000 UPDATE(s) of outbox table shop.outbox "));
        assert!(lines[1].error);
        assert!(lines[1]
            .message
            .starts_with("1 UPDATE(s) of outbox table shop.outbox2 "));
        assert!(ig.finish(&SourcePosition::Lsn(Lsn(0x20))).is_empty());
    }
}
