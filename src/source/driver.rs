//! One face per source for what the commands ask of a connector's database, whatever it
//! is: `check`'s requirement checks, `status`'s read, where a connector without checkpoint
//! starts, and which positions are its own. Commands orchestrate through it instead of matching on the source
//! configuration; a new source adds an arm here and its own `check` module.

use super::check::StoredCheckpoint;
use crate::config::{
    ConnectorConfig, MysqlSourceConfig, PostgresSourceConfig, SourceConfig, StartPosition,
};
use crate::position::SourcePosition;
use crate::requirement::CheckResult;

/// A connector's source, as the commands see it.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Driver<'a> {
    /// MySQL/MariaDB: the ROW binlog.
    Mysql(&'a MysqlSourceConfig),
    /// PostgreSQL: a logical replication slot with pgoutput.
    Postgres(&'a PostgresSourceConfig),
}

impl<'a> Driver<'a> {
    /// The source of connector `c`.
    pub(crate) fn of(c: &'a ConnectorConfig) -> Self {
        match &c.source {
            SourceConfig::Mysql(s) => Driver::Mysql(s),
            SourceConfig::Postgres(s) => Driver::Postgres(s),
        }
    }

    /// `outboxd check`'s lines for connector `c`'s source: connection, server settings,
    /// privileges, tables, slot and publication, TLS, and the stored checkpoint against
    /// what the source still has (read after the source's state, see [`StoredCheckpoint`]).
    pub(crate) async fn check(
        self,
        c: &ConnectorConfig,
        stored: &StoredCheckpoint,
    ) -> Vec<CheckResult> {
        match self {
            Driver::Mysql(src) => super::mysql::check::check(c, src, stored).await,
            Driver::Postgres(src) => super::postgres::check::check(c, src, stored).await,
        }
    }

    /// What `status` reads of connector `c`'s source: its current position, the fields the
    /// source adds to the line (PostgreSQL: `slot`, `publication`) and what it still has of
    /// its change stream. Errors: the source could not be read (the text says why).
    pub(crate) async fn status(
        self,
        c: &ConnectorConfig,
    ) -> Result<
        (
            SourcePosition,
            serde_json::Map<String, serde_json::Value>,
            Serving,
        ),
        String,
    > {
        match self {
            Driver::Mysql(src) => super::mysql::server::status(src)
                .await
                .map(|r| (r.current, Default::default(), Serving::Mysql(r.retained)))
                .map_err(|e| e.to_string()),
            Driver::Postgres(src) => super::postgres::catalog::slot::status(src, &c.tables)
                .await
                .map(|r| {
                    let mut fields = serde_json::Map::new();
                    fields.insert("slot".into(), r.figures);
                    fields.insert("publication".into(), r.publication);
                    (r.current, fields, Serving::Postgres(r.slot, r.uncovered))
                })
                .map_err(|e| e.to_string()),
        }
    }

    /// Where a connector without checkpoint starts, in words (for `checkpoint reset`).
    pub(crate) fn fresh_start(self) -> &'static str {
        match self {
            Driver::Mysql(src) if src.start == StartPosition::Earliest => {
                "the oldest binlog the server has"
            }
            Driver::Mysql(_) => "the server's current binlog position",
            Driver::Postgres(_) => {
                "the slot's confirmed_flush_lsn (or, if the slot is missing, the WAL position \
                 where the connector creates it)"
            }
        }
    }

    /// Whether `position` is a position of this source's kind: a MariaDB GTID position, a
    /// MySQL GTID set, a `file:pos` or an `xa_pending` position for a binlog; an LSN for
    /// PostgreSQL.
    pub(crate) fn accepts(self, position: &SourcePosition) -> bool {
        fits(matches!(self, Driver::Mysql(_)), position)
    }
}

/// What a source still has of its change stream, read before the checkpoint: a relay that
/// runs meanwhile only moves its checkpoint forward, and confirms to a PostgreSQL slot only
/// what it has stored, so a checkpoint read after this is never behind what this shows
/// unless the source really lost what follows it.
pub(crate) enum Serving {
    /// The binlogs a MySQL/MariaDB server still has.
    Mysql(super::mysql::server::Retained),
    /// The PostgreSQL slot, and why the publication does not carry the outbox rows (if so).
    Postgres(super::postgres::catalog::slot::SlotState, Option<String>),
}

impl Serving {
    /// Why the source cannot serve a checkpoint at `checkpoint`, if it cannot.
    pub(crate) fn gap(&self, checkpoint: &SourcePosition) -> Option<String> {
        match self {
            Serving::Mysql(retained) => retained.gap(checkpoint),
            Serving::Postgres(slot, _) => slot.gap(checkpoint),
        }
    }

    /// Why the source does not carry the outbox rows now, if it does not.
    pub(crate) fn uncovered(&self) -> Option<&str> {
        match self {
            Serving::Mysql(_) => None,
            Serving::Postgres(_, uncovered) => uncovered.as_deref(),
        }
    }
}

/// Whether `position` is a binlog's position (`binlog`) or a WAL's.
fn fits(binlog: bool, position: &SourcePosition) -> bool {
    match position {
        SourcePosition::Lsn(_) => !binlog,
        SourcePosition::MariadbGtid(_)
        | SourcePosition::MysqlGtidSet(_)
        | SourcePosition::BinlogFile(_)
        | SourcePosition::XaPending(_) => binlog,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::position::Lsn;

    #[test]
    fn positions_fit_their_source_only() {
        let lsn = SourcePosition::Lsn(Lsn(16));
        let gtid = SourcePosition::MariadbGtid("0-1-5".parse().unwrap());
        let file = SourcePosition::BinlogFile("b.000001:4".parse().unwrap());
        assert!(fits(false, &lsn));
        assert!(!fits(false, &gtid) && !fits(false, &file));
        assert!(fits(true, &gtid) && fits(true, &file));
        assert!(!fits(true, &lsn));
    }
}
