//! The cutover's source side, one arm per source: whether Debezium (or outboxd) still reads
//! the source, a Debezium offset mapped onto a checkpoint, and a checkpoint mapped back onto
//! a Debezium offset. `commands/debezium.rs` orchestrates the steps and never matches on the
//! source itself; a new source adds its arm here (its offset format in `offsets`).

use serde_json::{json, Value};

use super::offsets::{BinlogOffset, PgOffset};
use super::{binlog, wal, CutoverError};
use crate::checkpoint::Checkpoint;
use crate::config::{ConnectorConfig, SourceConfig};
use crate::position::SourcePosition;

/// A Debezium offset mapped onto connector's terms ([`import`]).
#[derive(Debug)]
pub(crate) struct Imported {
    /// The checkpoint's position: before the transaction the offset is inside, or after the
    /// last one it completed.
    pub position: SourcePosition,
    /// Outbox rows of the transaction after `position` Debezium already delivered.
    pub skip: u64,
    /// The transaction the offset is inside, for the report (`{"transaction", "outbox_rows"}`).
    pub txn: Option<Value>,
    /// The offset's own time (`ts_sec` / `ts_usec`), ms since the epoch, when it has one.
    pub offset_ms: Option<i64>,
}

/// Refuses while Debezium may still read the connector's source: a PostgreSQL slot that is
/// active; MySQL/MariaDB binlog dump threads of the connector's account (Debezium's binlog
/// client does not register its server id), unless `debezium_stopped` says they are other
/// readers (then a note in `notes`).
///
/// Errors: [`CutoverError::Refused`] naming what reads and what to do; `Unavailable` when the
/// database does not answer.
pub(crate) async fn refuse_if_debezium_reads(
    c: &ConnectorConfig,
    debezium_stopped: bool,
    notes: &mut Vec<String>,
) -> Result<(), CutoverError> {
    match &c.source {
        SourceConfig::Postgres(p) => wal::refuse_if_in_use(p, "Debezium").await,
        SourceConfig::Mysql(m) => {
            let threads = binlog::dump_threads(m, &m.user).await?;
            if threads.is_empty() {
                return Ok(());
            }
            if !debezium_stopped {
                return Err(CutoverError::refused(format!(
                    "{} binlog dump thread(s) of account {} are connected to {}:{} ({}): \
                     Debezium (whose binlog client does not register its database.server.id) \
                     may still be reading. Stop it first. If these are other readers that \
                     share the account (an `outboxd run --shadow`, a replica), stop them, or \
                     pass --debezium-stopped. (Other accounts' threads are visible only with \
                     the PROCESS privilege.)",
                    threads.len(),
                    m.user,
                    m.host,
                    m.port,
                    threads
                        .iter()
                        .map(|t| format!("id {} from {} for {}s", t.id, t.host, t.time))
                        .collect::<Vec<_>>()
                        .join(", ")
                )));
            }
            notes.push(format!(
                "{} binlog dump thread(s) of account {} connected; --debezium-stopped says \
                 they are not Debezium's",
                threads.len(),
                m.user
            ));
            Ok(())
        }
    }
}

/// Debezium's committed offset `value` (its JSON bytes, read from `at`) mapped onto a
/// checkpoint by reading the transaction it is in from the source (`annotate`: Debezium's
/// `include.query`, which adds a binlog event per statement it counts).
///
/// Errors: `Refused` for a malformed offset or a position the source no longer serves;
/// `Unavailable` when the database does not answer.
pub(crate) async fn import(
    c: &ConnectorConfig,
    value: &[u8],
    at: &str,
    annotate: bool,
) -> Result<Imported, CutoverError> {
    let malformed = |e: super::offsets::OffsetError| {
        CutoverError::refused(format!(
            "Debezium's offset in {at} is malformed; nothing was changed: {e}"
        ))
    };
    Ok(match &c.source {
        SourceConfig::Mysql(m) => {
            let o = BinlogOffset::parse(value).map_err(malformed)?;
            let i = binlog::import(m, &c.tables, &o, annotate).await?;
            Imported {
                position: i.position,
                skip: i.skip,
                txn: i
                    .txn
                    .map(|(id, rows)| json!({"transaction": id, "outbox_rows": rows})),
                offset_ms: o.ts_sec.map(|s| s * 1000),
            }
        }
        SourceConfig::Postgres(p) => {
            let o = PgOffset::parse(value).map_err(malformed)?;
            let i = wal::import(p, &c.tables, &p.message_prefixes, &o).await?;
            Imported {
                position: SourcePosition::Lsn(i.position),
                skip: i.skip,
                txn: i
                    .txn
                    .map(|(xid, rows)| json!({"transaction": xid, "outbox_rows": rows})),
                offset_ms: o.ts_usec.map(|u| u / 1000),
            }
        }
    })
}

/// Refuses while outboxd may still run the connector: a MySQL/MariaDB replica registered
/// with the connector's server id (a note in `notes` when the account cannot list replicas).
/// PostgreSQL's slot is checked by [`export`] itself.
///
/// Errors: `Refused` when it runs; `Unavailable` when the database does not answer.
pub(crate) async fn refuse_if_outboxd_reads(
    c: &ConnectorConfig,
    notes: &mut Vec<String>,
) -> Result<(), CutoverError> {
    let SourceConfig::Mysql(m) = &c.source else {
        return Ok(());
    };
    match binlog::registered(m, m.server_id).await? {
        Some(true) => Err(CutoverError::refused(format!(
            "a replica with server id {} (the connector's) is connected to {}:{}: outboxd \
             still runs the connector. Stop it first (SIGTERM: it writes its final \
             checkpoint)",
            m.server_id, m.host, m.port
        ))),
        Some(false) => Ok(()),
        None => {
            notes.push(format!(
                "account {} may not list the replicas (SHOW SLAVE HOSTS needs REPLICATION \
                 MASTER ADMIN on MariaDB): not checked whether outboxd still runs; make sure it \
                 is stopped",
                m.user
            ));
            Ok(())
        }
    }
}

/// The checkpoint `cp` as Debezium's offset value (the JSON Debezium's connector for the
/// source commits), by reading the transaction after it from the source (`annotate`: as in
/// [`import`]; `live`: the connector may be running, see `wal::export`).
///
/// Errors: `Refused` when the checkpoint is not of the source's kind or the source no longer
/// serves it; `Unavailable` when the database does not answer.
pub(crate) async fn export(
    c: &ConnectorConfig,
    cp: &Checkpoint,
    annotate: bool,
    live: bool,
) -> Result<Value, CutoverError> {
    Ok(match &c.source {
        SourceConfig::Mysql(m) => binlog::export(m, &c.tables, &cp.position, cp.skip, annotate)
            .await?
            .to_json(),
        SourceConfig::Postgres(p) => {
            let SourcePosition::Lsn(lsn) = &cp.position else {
                return Err(CutoverError::refused(format!(
                    "checkpoint {} is not an LSN",
                    cp.position
                )));
            };
            wal::export(p, &c.tables, &p.message_prefixes, *lsn, cp.skip, live)
                .await?
                .to_json()
        }
    })
}
