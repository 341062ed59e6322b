//! The PostgreSQL side of a switch: Debezium's LSN offset and outboxd's checkpoint are the
//! same point of the slot's stream in two forms, and peeking at the slot tells one from the
//! other.
//!
//! Debezium (`PostgresStreamingChangeEventSource`, `WalPositionLocator`) keeps `lsn_commit`,
//! the end of the last transaction whose COMMIT it processed (what it confirms to the slot
//! as flushed), and `lsn_proc` / `lsn`, the last change it processed, possibly inside the
//! next transaction: on restart it streams from `lsn_proc` and drops that transaction's
//! changes up to and including it. Its committed offset names the record it delivered last,
//! so it is inside a transaction even after that transaction's last change. outboxd's
//! checkpoint is the end of the last transaction delivered (`end_lsn`, what `lsn_commit` is)
//! plus `skip`, the outbox changes of the next transaction with outbox changes already
//! delivered. [`import`] turns the first into the second by peeking at the transaction in
//! the slot (`pg_logical_slot_peek_binary_changes`: reads without consuming; the slot must
//! not be in use); [`export`] the second into the first. Both keep Debezium's slot and
//! publication (`slot.name`, `publication.name` of the same connector JSON): the slot is
//! never dropped or advanced, so no WAL is released in between.

use bytes::Bytes;

use super::offsets::PgOffset;
use super::CutoverError;
use crate::config::PostgresSourceConfig;
use crate::error::Class;
use crate::event::TableName;
use crate::position::Lsn;
use crate::source::postgres::catalog::{self, slot};
use crate::source::postgres::error::PgError;
use crate::source::postgres::pgoutput::{self, PgOutputMessage};

/// Rows a peek asks for first (doubled until the transaction is complete).
const FIRST_PEEK: i64 = 1_000;
/// Most rows a peek asks for.
const MAX_PEEK: i64 = 4_096_000;

fn from_pg(what: &str, e: PgError) -> CutoverError {
    match e.class() {
        Class::Transient => CutoverError::unavailable(what.to_string(), e.to_string()),
        Class::Definite => CutoverError::refused(format!("{what}: {e}")),
    }
}

/// A change of a transaction in the slot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Change {
    /// Its LSN (the WAL record's).
    pub lsn: Lsn,
    /// Whether outboxd delivers it: an INSERT/UPDATE/DELETE of an outbox table, or a
    /// transactional logical decoding message with a configured prefix.
    pub outbox: bool,
    /// `INSERT`, `UPDATE`, `DELETE`, `MESSAGE` (Debezium's `messageType`).
    pub kind: &'static str,
}

/// A transaction as the slot sends it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Txn {
    /// Its xid.
    pub xid: u32,
    /// Where its commit record starts (`commit_lsn`).
    pub commit_lsn: Lsn,
    /// The end of its commit record (`end_lsn`): the position after it.
    pub end_lsn: Lsn,
    /// Commit time, µs since 2000-01-01.
    pub commit_ts: i64,
    /// Its changes, in order.
    pub changes: Vec<Change>,
}

impl Txn {
    /// Its changes outboxd delivers.
    pub fn outbox_changes(&self) -> impl Iterator<Item = &Change> {
        self.changes.iter().filter(|c| c.outbox)
    }
}

/// A big-endian reader over a pgoutput message, every read checked.
struct Reader<'a> {
    data: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], String> {
        let end = self
            .at
            .checked_add(n)
            .filter(|e| *e <= self.data.len())
            .ok_or_else(|| format!("message ends at byte {}", self.data.len()))?;
        let s = &self.data[self.at..end];
        self.at = end;
        Ok(s)
    }
    fn u8(&mut self) -> Result<u8, String> {
        Ok(self.take(1)?[0])
    }
    fn u32(&mut self) -> Result<u32, String> {
        let b = self.take(4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn u64(&mut self) -> Result<u64, String> {
        let b = self.take(8)?;
        let mut a = [0; 8];
        a.copy_from_slice(b);
        Ok(u64::from_be_bytes(a))
    }
    fn cstring(&mut self) -> Result<String, String> {
        let rest = &self.data[self.at..];
        let n = rest
            .iter()
            .position(|b| *b == 0)
            .ok_or("string without terminator")?;
        let s = String::from_utf8_lossy(&rest[..n]).into_owned();
        self.at += n + 1;
        Ok(s)
    }
}

/// Groups peeked pgoutput messages (`(lsn, data)` rows) into transactions, outbox changes
/// marked by `tables` and `prefixes`. Returns the complete transactions and whether the
/// last one was left open (the peek ended inside it).
pub(crate) fn transactions(
    rows: &[(Lsn, Vec<u8>)],
    tables: &[TableName],
    prefixes: &[String],
) -> Result<(Vec<Txn>, bool), String> {
    let mut relations: std::collections::HashMap<u32, bool> = Default::default();
    let mut done = Vec::new();
    let mut open: Option<Txn> = None;
    for (lsn, data) in rows {
        let tag = *data.first().ok_or("an empty pgoutput message")?;
        let mut r = Reader { data, at: 1 };
        match tag {
            b'B' => {
                let final_lsn = Lsn(r.u64()?);
                let ts = r.u64()? as i64;
                let xid = r.u32()?;
                open = Some(Txn {
                    xid,
                    commit_lsn: final_lsn,
                    end_lsn: final_lsn,
                    commit_ts: ts,
                    changes: Vec::new(),
                });
            }
            b'C' => {
                let _flags = r.u8()?;
                let commit_lsn = Lsn(r.u64()?);
                let end_lsn = Lsn(r.u64()?);
                let mut t = open.take().ok_or("a Commit without Begin")?;
                t.commit_lsn = commit_lsn;
                t.end_lsn = end_lsn;
                done.push(t);
            }
            b'M' => {
                let transactional = r.u8()? & 1 == 1;
                let _lsn = r.u64()?;
                let prefix = r.cstring()?;
                if let (true, Some(t)) = (transactional, &mut open) {
                    t.changes.push(Change {
                        lsn: *lsn,
                        outbox: prefixes.contains(&prefix),
                        kind: "MESSAGE",
                    });
                }
            }
            _ => {
                let msg =
                    pgoutput::decode(&Bytes::copy_from_slice(data)).map_err(|e| e.to_string())?;
                let (oid, kind) = match &msg {
                    PgOutputMessage::Relation(rel) => {
                        let schema = if rel.namespace.is_empty() {
                            "pg_catalog"
                        } else {
                            rel.namespace.as_str()
                        };
                        let t = TableName::new(schema, rel.name.clone());
                        relations.insert(rel.oid, tables.contains(&t));
                        continue;
                    }
                    PgOutputMessage::Insert(i) => (i.relation_oid, "INSERT"),
                    PgOutputMessage::Update(u) => (u.relation_oid, "UPDATE"),
                    PgOutputMessage::Delete(d) => (d.relation_oid, "DELETE"),
                    _ => continue,
                };
                if let Some(t) = &mut open {
                    t.changes.push(Change {
                        lsn: *lsn,
                        outbox: relations.get(&oid).copied().unwrap_or(false),
                        kind,
                    });
                }
            }
        }
    }
    Ok((done, open.is_some()))
}

/// Peeks at the connector's slot (without consuming) until a complete transaction meets
/// `wanted`; returns the first that does (`None` when the slot holds none).
async fn find_txn(
    client: &tokio_postgres::Client,
    cfg: &PostgresSourceConfig,
    tables: &[TableName],
    prefixes: &[String],
    wanted: impl Fn(&Txn) -> bool,
) -> Result<Option<Txn>, CutoverError> {
    let what = format!("peeking at replication slot {:?}", cfg.slot_name);
    let mut n = FIRST_PEEK;
    loop {
        let rows = client
            .query(
                "SELECT lsn::text, data FROM pg_logical_slot_peek_binary_changes($1, NULL, \
                 $2::int, 'proto_version', '1', 'publication_names', $3, 'messages', 'true')",
                &[&cfg.slot_name, &(n as i32), &cfg.publication_name],
            )
            .await
            .map_err(|e| from_pg(&what, PgError::from_sql(&e, cfg)))?;
        let mut peeked = Vec::with_capacity(rows.len());
        for row in &rows {
            let lsn: String = row.get(0);
            let lsn: Lsn = lsn
                .parse()
                .map_err(|e| CutoverError::refused(format!("{what}: LSN {lsn:?}: {e}")))?;
            peeked.push((lsn, row.get::<_, Vec<u8>>(1)));
        }
        let (txns, _) = transactions(&peeked, tables, prefixes)
            .map_err(|m| CutoverError::refused(format!("{what}: cannot decode: {m}")))?;
        if let Some(t) = txns.into_iter().find(|t| wanted(t)) {
            return Ok(Some(t));
        }
        if (rows.len() as i64) < n || n >= MAX_PEEK {
            return Ok(None);
        }
        n *= 2;
    }
}

/// Where a Debezium offset is, as far as the offset alone tells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Located {
    /// At a transaction boundary: the checkpoint's position.
    Boundary(Lsn),
    /// Inside the first transaction that commits after `after` (`None`: no COMMIT processed
    /// since Debezium started streaming; the transaction is the one holding `processed`),
    /// its change at `processed` delivered.
    Inside {
        /// `lsn_commit`.
        after: Option<Lsn>,
        /// `lsn_proc` (else `lsn`).
        processed: Lsn,
    },
}

/// Where `offset` is. An offset with `lsn` alone (neither `lsn_proc` nor `lsn_commit`) is
/// the position Debezium took when it started streaming, before it processed any change (a
/// new connector's heartbeat offset): it names no delivered change. Debezium resumes from it
/// by streaming from `lsn` and, with no `lsn_commit` to look for (`WalPositionLocator`: "last
/// commit LSN null" resumes at the first LSN received), passes every transaction the server
/// sends from there, whole: the boundary `lsn`, nothing skipped. A COMMIT (or BEGIN) offset
/// is at the boundary `lsn_commit`; a non-transactional message just after its record (where
/// outboxd positions it); any change is inside the next transaction — even when `lsn_proc`
/// equals `lsn_commit` (the change's record starts where the last commit's ends) or lies
/// before it (the transaction began before the last one committed): Debezium counts that
/// change as delivered.
pub(crate) fn locate(offset: &PgOffset) -> Option<Located> {
    if let (Some(start), None, None) = (offset.lsn, offset.lsn_proc, offset.lsn_commit) {
        return Some(Located::Boundary(start));
    }
    let processed = offset.processed()?;
    Some(match (offset.lsn_commit, offset.message_type.as_deref()) {
        (Some(c), Some("MESSAGE")) if c == processed => {
            Located::Boundary(Lsn(c.0.saturating_add(1)))
        }
        (Some(c), Some("COMMIT" | "BEGIN")) => Located::Boundary(c),
        (after, _) => Located::Inside { after, processed },
    })
}

/// The checkpoint for an offset [`Located::Inside`] transaction `t` (the first committing
/// after `after`, holding the change at `processed`): the position before it, and its outbox
/// changes up to and including `processed`. Errors when `t` does not hold that change or is
/// another transaction than `tx_id`.
pub(crate) fn inside(
    t: &Txn,
    after: Option<Lsn>,
    processed: Lsn,
    tx_id: Option<i64>,
) -> Result<Imported, String> {
    if !t.changes.iter().any(|c| c.lsn == processed) {
        return Err(format!(
            "transaction {} holds no change at LSN {processed}",
            t.xid
        ));
    }
    if let Some(x) = tx_id {
        if (x as u64 & 0xFFFF_FFFF) != u64::from(t.xid) {
            return Err(format!(
                "Debezium's offset names transaction {x} at LSN {processed}, but the slot's \
                 transaction there is {}",
                t.xid
            ));
        }
    }
    Ok(Imported {
        // Without `lsn_commit`: the start of this transaction's commit record, which the
        // adapter does not skip and every earlier commit lies before.
        position: after.unwrap_or(t.commit_lsn),
        skip: t.outbox_changes().filter(|c| c.lsn <= processed).count() as u64,
        txn: Some((t.xid, t.outbox_changes().count() as u64)),
    })
}

/// A Debezium PostgreSQL offset as an outboxd checkpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Imported {
    /// The checkpoint's position: the end of the last transaction Debezium completed (or
    /// the start of the commit record of the one it was in).
    pub position: Lsn,
    /// Outbox changes of the next transaction Debezium delivered.
    pub skip: u64,
    /// The transaction the skip applies to and its outbox changes in all (for the report).
    pub txn: Option<(u32, u64)>,
}

/// The slot, refused when it is gone, in use or has lost WAL.
async fn usable_slot(
    client: &tokio_postgres::Client,
    cfg: &PostgresSourceConfig,
    who: &str,
) -> Result<slot::SlotInfo, CutoverError> {
    let info = slot::slot_info(client, cfg, &cfg.slot_name)
        .await
        .map_err(|e| from_pg("reading pg_replication_slots", e))?;
    let Some(info) = info else {
        return Err(CutoverError::refused(format!(
            "replication slot {:?} (`slot.name`) does not exist: the WAL after {who}'s \
             position was not kept for it (the slot was dropped, or this server is a standby \
             or restore without it). The position is no longer served; to start anyway, \
             accept the gap: `outboxd checkpoint reset`, then run (a new slot is created)",
            cfg.slot_name
        )));
    };
    if let Some(pid) = info.active_pid {
        let holder = slot::describe_pid(client, pid).await;
        return Err(CutoverError::refused(in_use(&cfg.slot_name, &holder, who)));
    }
    Ok(info)
}

/// The refusal for a slot in use by `holder` (`pid N (application_name "...", ...)`), when
/// `who` was expected to have stopped: the holder named by its application name (Debezium's
/// walsender says `Debezium Streaming`, outboxd's `outboxd <connector>`), else `who` or
/// another client.
fn in_use(slot: &str, holder: &str, who: &str) -> String {
    let (what, stop) = if holder.contains("application_name \"Debezium") {
        (
            "Debezium still streams from it",
            "Stop it first (Kafka Connect: PUT /connectors/<name>/stop, or stop the worker)",
        )
    } else if holder.contains("application_name \"outboxd") {
        (
            "outboxd still streams from it",
            "Stop it first (SIGTERM: it writes its final checkpoint)",
        )
    } else {
        return format!(
            "replication slot {slot:?} is in use by {holder}: {who}, or another client of the \
             slot, still streams from it. Stop it first"
        );
    };
    format!("replication slot {slot:?} is in use by {holder}: {what}. {stop}")
}

/// Refuses when the connector's slot is in use (`who` still streams from it) or gone.
///
/// Errors: definite with what to do; transient when the server cannot be reached.
pub(crate) async fn refuse_if_in_use(
    cfg: &PostgresSourceConfig,
    who: &str,
) -> Result<(), CutoverError> {
    let client = catalog::connect(cfg)
        .await
        .map_err(|e| from_pg("connecting to PostgreSQL", e))?;
    usable_slot(&client, cfg, who).await.map(|_| ())
}

/// Turns Debezium's offset into outboxd's checkpoint; refuses when the slot is gone, in use,
/// or no longer serves the position.
///
/// Errors: definite with what to do; transient when the server cannot be reached.
pub(crate) async fn import(
    cfg: &PostgresSourceConfig,
    tables: &[TableName],
    prefixes: &[String],
    offset: &PgOffset,
) -> Result<Imported, CutoverError> {
    let client = catalog::connect(cfg)
        .await
        .map_err(|e| from_pg("connecting to PostgreSQL", e))?;
    let info = usable_slot(&client, cfg, "Debezium").await?;
    let Some(located) = locate(offset) else {
        return Err(CutoverError::refused("Debezium's offset names no LSN"));
    };
    let imported = match located {
        Located::Boundary(position) => Imported {
            position,
            skip: 0,
            txn: None,
        },
        Located::Inside { after, processed } => {
            let t = find_txn(&client, cfg, tables, prefixes, |t| match after {
                Some(a) => t.end_lsn > a,
                None => t.changes.iter().any(|c| c.lsn == processed),
            })
            .await?;
            if let Some(reason) =
                after.and_then(|a| slot::checkpoint_gap(&cfg.slot_name, Some(&info), a))
            {
                return Err(CutoverError::refused(format!(
                    "Debezium's position is no longer served: {reason}. To start anyway, \
                     accept the gap: `outboxd checkpoint reset`, then run"
                )));
            }
            let refused = |why: String| {
                CutoverError::refused(format!(
                    "Debezium's offset says it delivered the change at LSN {processed} (txId \
                     {}) of the transaction after LSN {}, but replication slot {:?} does not \
                     hold it ({why}): the offset is not this slot's, or the slot was advanced \
                     past it. If the slot was advanced, the changes in between are gone: to \
                     start anyway, accept the gap: `outboxd checkpoint reset`, then run",
                    offset.tx_id.map_or_else(|| "?".into(), |x| x.to_string()),
                    after.map_or_else(|| "?".into(), |a| a.to_string()),
                    cfg.slot_name
                ))
            };
            let t = t.ok_or_else(|| refused("no such transaction".into()))?;
            inside(&t, after, processed, offset.tx_id).map_err(refused)?
        }
    };
    if let Some(reason) = slot::checkpoint_gap(&cfg.slot_name, Some(&info), imported.position) {
        return Err(CutoverError::refused(format!(
            "Debezium's position is no longer served: {reason}. To start anyway, accept the \
             gap: `outboxd checkpoint reset`, then run"
        )));
    }
    // A position the server has not written yet would be taken by the slot as confirmed:
    // everything committed before the server reaches it would never be sent.
    let written = written_lsn(&client, cfg).await?;
    if imported.position > written {
        return Err(CutoverError::refused(format!(
            "Debezium's offset names LSN {}, past the end of this server's WAL ({written}): \
             the offset is not this server's (or the server was restored to an earlier \
             point). Nothing was changed",
            imported.position
        )));
    }
    Ok(imported)
}

/// How far the server's WAL is written: `pg_current_wal_insert_lsn()` on a primary,
/// `pg_last_wal_replay_lsn()` on a standby (PostgreSQL "System Administration Functions").
///
/// Errors: transient when the server cannot be reached.
async fn written_lsn(
    client: &tokio_postgres::Client,
    cfg: &PostgresSourceConfig,
) -> Result<Lsn, CutoverError> {
    let what = "reading the server's WAL position";
    let row = client
        .query_one(
            "SELECT (CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn() \
             ELSE pg_current_wal_insert_lsn() END)::text",
            &[],
        )
        .await
        .map_err(|e| from_pg(what, PgError::from_sql(&e, cfg)))?;
    let text: Option<String> = row.get(0);
    text.as_deref()
        .unwrap_or_default()
        .parse()
        .map_err(|e| CutoverError::refused(format!("{what}: {text:?}: {e}")))
}

/// Turns outboxd's checkpoint (`position`, `skip`) into Debezium's offset: at a transaction
/// boundary `lsn` = `lsn_commit` = the position (the server skips every transaction that
/// commits before it); inside one, `lsn_proc` = `lsn` = its `skip`-th outbox change, with
/// `lsn_commit` the position, as Debezium's own offset after that change reads.
///
/// `live`: the connector may be streaming from the slot now (the REST API's `GET
/// .../offsets`); a slot in use is then read as it is, and refused only when the offset
/// needs the transaction after the position (`skip` > 0), which a slot in use cannot show.
///
/// Errors: definite when the slot is gone or in use (outboxd still running; with `live`,
/// only when `skip` > 0), or does not hold the transaction; transient when the server
/// cannot be reached.
pub(crate) async fn export(
    cfg: &PostgresSourceConfig,
    tables: &[TableName],
    prefixes: &[String],
    position: Lsn,
    skip: u64,
    live: bool,
) -> Result<PgOffset, CutoverError> {
    let client = catalog::connect(cfg)
        .await
        .map_err(|e| from_pg("connecting to PostgreSQL", e))?;
    let info = if live && skip == 0 {
        slot::slot_info(&client, cfg, &cfg.slot_name)
            .await
            .map_err(|e| from_pg("reading pg_replication_slots", e))?
            .ok_or_else(|| {
                CutoverError::refused(format!(
                    "replication slot {:?} (`slot.name`) does not exist",
                    cfg.slot_name
                ))
            })?
    } else {
        usable_slot(&client, cfg, "outboxd").await?
    };
    if let Some(reason) = slot::checkpoint_gap(&cfg.slot_name, Some(&info), position) {
        return Err(CutoverError::refused(format!(
            "outboxd's checkpoint is no longer served: {reason}. If Debezium ran from this \
             slot after outboxd stopped, its own offset is the current one: keep it (or \
             switch to outboxd again with `outboxd checkpoint import-debezium`) instead of \
             exporting"
        )));
    }
    let now_us = crate::checkpoint::now_ms() * 1000;
    if skip == 0 {
        return Ok(PgOffset {
            lsn: Some(position),
            lsn_proc: None,
            lsn_commit: Some(position),
            tx_id: None,
            message_type: None,
            ts_usec: Some(now_us),
        });
    }
    let t = find_txn(&client, cfg, tables, prefixes, |t| {
        t.end_lsn > position && t.outbox_changes().next().is_some()
    })
    .await?
    .ok_or_else(|| {
        CutoverError::refused(format!(
            "outboxd's checkpoint skips {skip} outbox change(s) of the first transaction \
                 with outbox changes after LSN {position}, but replication slot {:?} holds \
                 none",
            cfg.slot_name
        ))
    })?;
    let outbox: Vec<&Change> = t.outbox_changes().collect();
    let last = outbox[(skip as usize).min(outbox.len()) - 1];
    Ok(PgOffset {
        lsn: Some(last.lsn),
        lsn_proc: Some(last.lsn),
        lsn_commit: Some(position),
        tx_id: Some(i64::from(t.xid)),
        message_type: Some(last.kind.to_string()),
        ts_usec: Some(pgoutput::pg_micros_to_unix_ms(t.commit_ts).saturating_mul(1000)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn begin(final_lsn: u64, xid: u32) -> Vec<u8> {
        let mut v = vec![b'B'];
        v.extend_from_slice(&final_lsn.to_be_bytes());
        v.extend_from_slice(&0i64.to_be_bytes());
        v.extend_from_slice(&xid.to_be_bytes());
        v
    }

    fn commit(commit_lsn: u64, end_lsn: u64) -> Vec<u8> {
        let mut v = vec![b'C', 0];
        v.extend_from_slice(&commit_lsn.to_be_bytes());
        v.extend_from_slice(&end_lsn.to_be_bytes());
        v.extend_from_slice(&0i64.to_be_bytes());
        v
    }

    fn relation(oid: u32, ns: &str, name: &str) -> Vec<u8> {
        let mut v = vec![b'R'];
        v.extend_from_slice(&oid.to_be_bytes());
        v.extend_from_slice(ns.as_bytes());
        v.push(0);
        v.extend_from_slice(name.as_bytes());
        v.push(0);
        v.push(b'd');
        v.extend_from_slice(&1u16.to_be_bytes());
        v.push(0);
        v.extend_from_slice(b"id\0");
        v.extend_from_slice(&25u32.to_be_bytes());
        v.extend_from_slice(&(-1i32).to_be_bytes());
        v
    }

    fn insert(oid: u32) -> Vec<u8> {
        let mut v = vec![b'I'];
        v.extend_from_slice(&oid.to_be_bytes());
        v.push(b'N');
        v.extend_from_slice(&1u16.to_be_bytes());
        v.push(b't');
        v.extend_from_slice(&1u32.to_be_bytes());
        v.push(b'x');
        v
    }

    fn message(prefix: &str) -> Vec<u8> {
        let mut v = vec![b'M', 1];
        v.extend_from_slice(&7u64.to_be_bytes());
        v.extend_from_slice(prefix.as_bytes());
        v.push(0);
        v.extend_from_slice(&2u32.to_be_bytes());
        v.extend_from_slice(b"{}");
        v
    }

    #[test]
    fn groups_changes_by_transaction_and_marks_the_outbox() {
        let tables = [TableName::new("public", "outbox")];
        let rows = vec![
            (Lsn(100), begin(180, 7)),
            (Lsn(100), relation(1, "public", "outbox")),
            (Lsn(100), insert(1)),
            (Lsn(120), relation(2, "public", "other")),
            (Lsn(120), insert(2)),
            (Lsn(140), insert(1)),
            (Lsn(150), message("ob")),
            (Lsn(160), message("zz")),
            (Lsn(200), commit(180, 200)),
            (Lsn(210), begin(260, 8)),
            (Lsn(210), insert(1)),
        ];
        let (txns, open) = transactions(&rows, &tables, &["ob".to_string()]).unwrap();
        assert!(open);
        assert_eq!(txns.len(), 1);
        let t = &txns[0];
        assert_eq!((t.xid, t.commit_lsn, t.end_lsn), (7, Lsn(180), Lsn(200)));
        let outbox: Vec<u64> = t.outbox_changes().map(|c| c.lsn.0).collect();
        assert_eq!(outbox, vec![100, 140, 150]);
        assert_eq!(t.changes.len(), 5);
    }

    fn offset(proc_: u64, commit: Option<u64>, kind: &str) -> PgOffset {
        PgOffset {
            lsn: Some(Lsn(proc_)),
            lsn_proc: Some(Lsn(proc_)),
            lsn_commit: commit.map(Lsn),
            tx_id: Some(7),
            message_type: Some(kind.into()),
            ts_usec: None,
        }
    }

    #[test]
    fn debezium_offsets_located() {
        use Located::*;
        assert_eq!(
            locate(&offset(500, Some(500), "COMMIT")),
            Some(Boundary(Lsn(500)))
        );
        assert_eq!(
            locate(&offset(90, Some(80), "BEGIN")),
            Some(Boundary(Lsn(80)))
        );
        assert_eq!(
            locate(&offset(70, Some(70), "MESSAGE")),
            Some(Boundary(Lsn(71)))
        );
        // The change right where the last commit ended, and one before it: inside.
        for (p, c) in [(100, 100), (90, 100), (120, 100)] {
            assert_eq!(
                locate(&offset(p, Some(c), "INSERT")),
                Some(Inside {
                    after: Some(Lsn(c)),
                    processed: Lsn(p)
                })
            );
        }
        assert_eq!(
            locate(&offset(120, None, "INSERT")),
            Some(Inside {
                after: None,
                processed: Lsn(120)
            })
        );
        // `lsn` alone (a heartbeat before any change): where streaming starts, nothing
        // delivered — even when it is the LSN of the next transaction's first change.
        let heartbeat = PgOffset {
            lsn: Some(Lsn(100)),
            lsn_proc: None,
            lsn_commit: None,
            tx_id: Some(2664),
            message_type: None,
            ts_usec: Some(1),
        };
        assert_eq!(locate(&heartbeat), Some(Boundary(Lsn(100))));
    }

    #[test]
    fn skip_counts_the_outbox_changes_up_to_the_processed_one() {
        let t = Txn {
            xid: 7,
            commit_lsn: Lsn(300),
            end_lsn: Lsn(320),
            commit_ts: 0,
            changes: [
                (90, true),
                (100, false),
                (110, true),
                (120, true),
                (130, true),
            ]
            .into_iter()
            .map(|(l, outbox)| Change {
                lsn: Lsn(l),
                outbox,
                kind: "INSERT",
            })
            .collect(),
        };
        let i = inside(&t, Some(Lsn(100)), Lsn(110), Some(7)).unwrap();
        assert_eq!((i.position, i.skip, i.txn), (Lsn(100), 2, Some((7, 4))));
        // The first change delivered although it starts before the last commit's end.
        assert_eq!(inside(&t, Some(Lsn(100)), Lsn(90), None).unwrap().skip, 1);
        // Without lsn_commit: before the transaction's commit record.
        assert_eq!(inside(&t, None, Lsn(130), None).unwrap().position, Lsn(300));
        assert!(inside(&t, Some(Lsn(100)), Lsn(115), None).is_err());
        assert!(inside(&t, Some(Lsn(100)), Lsn(110), Some(8)).is_err());
    }

    #[test]
    fn a_slot_in_use_names_its_holder() {
        let dbz = in_use(
            "s",
            r#"pid 6859 (application_name "Debezium Streaming", client local, user u)"#,
            "outboxd",
        );
        assert!(
            dbz.contains("Debezium still streams") && !dbz.contains("outboxd"),
            "{dbz}"
        );
        let ours = in_use(
            "s",
            r#"pid 7 (application_name "outboxd shop", client local, user u)"#,
            "Debezium",
        );
        assert!(ours.contains("outboxd still streams"), "{ours}");
        let other = in_use(
            "s",
            r#"pid 7 (application_name "psql", client local, user u)"#,
            "outboxd",
        );
        assert!(other.contains("outboxd, or another client"), "{other}");
    }

    #[test]
    fn bad_messages_are_errors() {
        let tables = [TableName::new("public", "outbox")];
        for bad in [vec![], vec![b'B', 0], vec![b'C', 0, 0], vec![b'X', 1, 2]] {
            assert!(
                transactions(&[(Lsn(1), bad.clone())], &tables, &[]).is_err(),
                "{bad:?}"
            );
        }
        assert!(transactions(&[(Lsn(1), commit(1, 2))], &tables, &[]).is_err());
    }
}
