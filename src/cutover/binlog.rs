//! The MySQL / MariaDB side of a switch: Debezium's binlog offset and outboxd's checkpoint
//! are the same point of the binlog in two counts, and reading the transaction there tells
//! one from the other.
//!
//! Debezium (`BinlogStreamingChangeEventSource`, `BinlogOffsetContext`) restarts at its
//! `gtids` (the transactions completed; else `file`/`pos`), then, in the first transaction
//! it meets, skips `event` events — counted from that transaction's MariaDB GTID event or
//! MySQL `BEGIN` query, each event its binlog client receives counted once: table maps,
//! rows events of every table, MariaDB `ANNOTATE_ROWS` when `include.query` asked for them,
//! a MySQL compressed transaction's inner events and then the payload event itself — and
//! then `row` rows of the next event. Its committed offset names the record it last
//! delivered: after a transaction's last row it is still `event` = the events before that
//! rows event, `row` = its rows (Debezium records no offset at the XID event). outboxd's
//! checkpoint is the position before the transaction plus `skip`, the outbox rows of it
//! already delivered. [`import`] turns the first into the second by reading that
//! transaction from the server (a non-blocking binlog dump, the way Debezium's own
//! non-blocking client asks); [`export`] the second into the first.
//!
//! Whether Debezium still reads the binlog: its binlog client does not register as a
//! replica (`COM_REGISTER_SLAVE`), so its `database.server.id` is not listed by `SHOW
//! SLAVE HOSTS`; what shows is a `Binlog Dump` thread of its account in the process list
//! ([`dump_threads`]). A session sees other accounts' threads only with the `PROCESS`
//! privilege; the import connects with the connector's own account (the same JSON), which
//! sees its own threads without it.

use std::collections::BTreeSet;

use futures_util::StreamExt;
use mysql_async::prelude::*;
use mysql_async::BinlogStreamRequest;

use super::offsets::BinlogOffset;
use super::CutoverError;
use crate::config::MysqlSourceConfig;
use crate::error::Class;
use crate::event::TableName;
use crate::position::{BinlogFilePosition, GtidSet, MariadbGtidPosition, SourcePosition};
use crate::source::mysql::server::{self, TrackingMode};
use crate::source::mysql::{BinlogDecoder, BinlogMessage, MissingColumnNames, MysqlError, TxnGtid};

/// MySQL GTID_LOG_EVENT.
const GTID_EVENT: u8 = 33;
/// MySQL ANONYMOUS_GTID_LOG_EVENT.
const ANONYMOUS_GTID_EVENT: u8 = 34;
/// MySQL TRANSACTION_PAYLOAD_EVENT (a compressed transaction).
const TRANSACTION_PAYLOAD_EVENT: u8 = 40;

/// What a failure of the MySQL/MariaDB side means for the step.
fn from_mysql(what: &str, e: MysqlError) -> CutoverError {
    match e.class() {
        Class::Transient => CutoverError::unavailable(what.to_string(), e.to_string()),
        Class::Definite => CutoverError::refused(format!("{what}: {e}")),
    }
}

/// A transaction as Debezium's binlog client sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Txn {
    /// The position before it, in the reading's position kind.
    pub before: SourcePosition,
    /// Where its first event (MariaDB GTID, MySQL GTID or `BEGIN`) starts.
    pub begin_at: BinlogFilePosition,
    /// Its GTID.
    pub gtid: Option<TxnGtid>,
    /// For each event Debezium counts (from the MariaDB GTID / MySQL `BEGIN` event, up to
    /// the commit), the outbox rows in it.
    pub counted: Vec<u64>,
    /// Where each counted event starts in the file (0 for a compressed transaction's inner
    /// events).
    pub counted_at: Vec<u64>,
    /// It is an XA transaction (prepared, committed by a later `XA COMMIT`).
    pub xa: bool,
    /// Its time (the last event's), epoch ms.
    pub ts_ms: i64,
}

impl Txn {
    /// Outbox rows in it.
    pub fn rows(&self) -> u64 {
        self.counted.iter().sum()
    }

    /// Outbox rows Debezium's `event` / `row` skip in it. Errors when the counts reach past
    /// its end (the offset names another transaction).
    pub fn skipped(&self, event: u64, row: u64) -> Result<u64, String> {
        let n = self.counted.len() as u64;
        if event > n || (event == n && row > 0) {
            return Err(format!(
                "Debezium's offset skips {event} event(s) and {row} row(s) of transaction \
                 {}, which has only {n} event(s) Debezium counts",
                self.gtid
                    .as_ref()
                    .map_or_else(|| self.begin_at.to_string(), |g| g.to_string())
            ));
        }
        let full: u64 = self.counted[..event as usize].iter().sum();
        let partial = match self.counted.get(event as usize) {
            // An outbox rows event: `row` counts its rows, so it cannot exceed them (the
            // offset names another transaction, or was edited by hand). Other events' rows
            // are not counted here.
            Some(rows) if *rows > 0 && row > *rows => {
                return Err(format!(
                    "Debezium's offset skips {row} row(s) of event {} of transaction {}, \
                     which holds only {rows} row(s): the offset is inconsistent (another \
                     transaction's, or edited by hand)",
                    event + 1,
                    self.gtid
                        .as_ref()
                        .map_or_else(|| self.begin_at.to_string(), |g| g.to_string())
                ));
            }
            Some(rows) => row.min(*rows),
            None => 0,
        };
        Ok(full + partial)
    }

    /// Debezium's `event` / `row` for `skip` outbox rows of it already delivered (at most
    /// all of them).
    pub fn counts_for(&self, skip: u64) -> (u64, u64) {
        let skip = skip.min(self.rows());
        let mut done = 0;
        for (i, rows) in self.counted.iter().enumerate() {
            if *rows > 0 && done + rows >= skip {
                return (i as u64, skip - done);
            }
            done += rows;
        }
        (0, 0)
    }
}

/// What a reading found.
#[derive(Debug, Clone)]
pub(crate) struct Scan {
    /// The first (complete) transaction after the start (with outbox rows, when asked).
    pub txn: Option<Txn>,
    /// The `file:pos` where the reading stopped (the end of the binlog, or after the
    /// transaction).
    pub end: BinlogFilePosition,
}

/// A non-blocking binlog reading from `start`: the first complete transaction after it
/// (skipping those without outbox rows when `with_outbox_rows`), as Debezium counts its
/// events. `annotate`: MariaDB sends `ANNOTATE_ROWS` events (Debezium's `include.query`).
///
/// Errors: definite when the server refuses to send its binlog from `start` (purged, or
/// not in its binlog), transient when it cannot be reached.
pub(crate) async fn scan(
    cfg: &MysqlSourceConfig,
    tables: &[TableName],
    start: &SourcePosition,
    with_outbox_rows: bool,
    annotate: bool,
) -> Result<Scan, CutoverError> {
    let what = format!(
        "reading the binlog of {}:{} from {start}",
        cfg.host, cfg.port
    );
    let mut conn = server::connect(cfg)
        .await
        .map_err(|e| from_mysql(&what, e))?;
    let info = server::server_info(&mut conn, cfg)
        .await
        .map_err(|e| from_mysql(&what, e))?;
    let driver = |e| from_mysql(&what, MysqlError::from_driver(e, cfg));
    // A replica id of its own, never the connector's (Debezium's, or a running outboxd's):
    // a second dump with one id makes the server end the first.
    let server_id = 0xF000_0000 | (rand_u32() & 0x0FFF_FFFF);
    let mut request = BinlogStreamRequest::new(server_id).with_non_blocking();
    if info.mariadb {
        conn.query_drop("SET @mariadb_slave_capability = 4")
            .await
            .map_err(driver)?;
    }
    let file_name: Vec<u8>;
    let sids;
    match start.read_from() {
        SourcePosition::MariadbGtid(pos) => {
            conn.exec_drop("SET @slave_connect_state = ?", (pos.to_string(),))
                .await
                .map_err(driver)?;
            conn.query_drop("SET @slave_gtid_strict_mode = 0, @slave_gtid_ignore_duplicates = 0")
                .await
                .map_err(driver)?;
        }
        SourcePosition::MysqlGtidSet(set) => {
            sids = set.to_sids();
            request = request.with_gtid().with_gtid_set(sids);
        }
        SourcePosition::BinlogFile(fp) => {
            file_name = fp.file.clone().into_bytes();
            request = request.with_filename(&file_name).with_pos(fp.pos);
        }
        other => {
            return Err(CutoverError::refused(format!(
                "{other} is not a binlog position"
            )))
        }
    }
    let mut stream = conn.get_binlog_stream(request).await.map_err(|e| {
        CutoverError::refused(format!(
            "the server no longer serves position {start}: {} (the binlogs holding it were \
             purged, or it is not this server's position). To start anyway, accept the gap: \
             `outboxd checkpoint reset`, then run (it starts at the current position)",
            MysqlError::from_driver(e, cfg)
        ))
    })?;
    let mut decoder = BinlogDecoder::new()
        .with_columns(cfg.columns.clone())
        .with_missing_names(MissingColumnNames::Error)
        .with_table_filter(Some(tables.iter().cloned().collect::<BTreeSet<_>>()))
        .with_start(start);
    let mut open: Option<Txn> = None;
    // A compressed transaction's payload event, counted after its inner events.
    let mut payload_pending = false;
    let mut messages = Vec::new();
    while let Some(event) = stream.next().await {
        let event = event.map_err(|e| {
            CutoverError::refused(format!(
                "the server stopped sending its binlog from {start}: {}",
                MysqlError::from_driver(e, cfg)
            ))
        })?;
        let header = event.header();
        let raw_type = header.event_type_raw();
        let inner = !event.footer().get_checksum_enabled();
        let begin_pos = u64::from(header.log_pos()).saturating_sub(u64::from(header.event_size()));
        messages.clear();
        decoder
            .decode_event_into(&event, None, &mut messages)
            .map_err(|e| {
                CutoverError::refused(format!("cannot decode the binlog after {start}: {e}"))
            })?;
        let rows: u64 = messages
            .iter()
            .map(|m| match m {
                BinlogMessage::Rows { rows, .. } => rows.len() as u64,
                _ => 0,
            })
            .sum();
        if payload_pending && !inner {
            if let Some(t) = &mut open {
                t.counted.push(0);
                t.counted_at.push(0);
            }
            payload_pending = false;
        }
        let at = if inner { 0 } else { begin_pos };
        let mut began = false;
        let mut ended = false;
        for m in &messages {
            match m {
                BinlogMessage::Begin {
                    gtid,
                    before,
                    standalone,
                    ts_ms,
                } => {
                    if *standalone {
                        continue;
                    }
                    began = true;
                    open = Some(Txn {
                        before: before.clone(),
                        begin_at: BinlogFilePosition::new(
                            decoder.position().file.clone(),
                            begin_pos,
                        ),
                        gtid: gtid.clone(),
                        counted: Vec::new(),
                        counted_at: Vec::new(),
                        xa: false,
                        ts_ms: *ts_ms,
                    });
                }
                BinlogMessage::XaStart => {
                    if let Some(t) = &mut open {
                        t.xa = true;
                    }
                }
                BinlogMessage::Commit { .. } | BinlogMessage::XaPrepare { .. } => ended = true,
                BinlogMessage::Rollback => {
                    open = None;
                }
                _ => {}
            }
        }
        if let Some(t) = &mut open {
            if ended {
                if matches!(messages.last(), Some(BinlogMessage::XaPrepare { .. })) {
                    t.xa = true;
                }
                let mut done = open.take().expect("open");
                if !with_outbox_rows || done.rows() > 0 {
                    let end = decoder.position().clone();
                    drop(stream);
                    if annotate && info.mariadb {
                        add_annotations(cfg, &mut done, end.pos).await?;
                    }
                    return Ok(Scan {
                        txn: Some(done),
                        end,
                    });
                }
                continue;
            }
            if began {
                // MySQL: the GTID event is not counted, the BEGIN after it is.
                if !matches!(raw_type, GTID_EVENT | ANONYMOUS_GTID_EVENT) {
                    t.counted.push(rows);
                    t.counted_at.push(at);
                }
            } else if raw_type == TRANSACTION_PAYLOAD_EVENT {
                payload_pending = true;
            } else {
                t.counted.push(rows);
                t.counted_at.push(at);
            }
            t.ts_ms = t.ts_ms.max(header.timestamp() as i64 * 1000);
        }
    }
    Ok(Scan {
        txn: None,
        end: decoder.position().clone(),
    })
}

/// Adds the MariaDB `ANNOTATE_ROWS` events of `txn` (which end before `end`) to its counted
/// events: Debezium receives them when `include.query` asks the server for them (the
/// binlog dump flag `BINLOG_SEND_ANNOTATE_ROWS_EVENT`), and counts them; the dump here does
/// not get them, `SHOW BINLOG EVENTS` lists them (`BINLOG MONITOR` privilege).
async fn add_annotations(
    cfg: &MysqlSourceConfig,
    txn: &mut Txn,
    end: u64,
) -> Result<(), CutoverError> {
    let what = "listing the transaction's events (SHOW BINLOG EVENTS)";
    let mut conn = server::connect(cfg)
        .await
        .map_err(|e| from_mysql(what, e))?;
    let limit = txn.counted.len() * 2 + 4;
    let rows: Vec<mysql_async::Row> = conn
        .exec(
            format!(
                "SHOW BINLOG EVENTS IN ? FROM {} LIMIT {limit}",
                txn.begin_at.pos
            ),
            (txn.begin_at.file.clone(),),
        )
        .await
        .map_err(|e| from_mysql(what, MysqlError::from_driver(e, cfg)))?;
    let annotations: Vec<u64> = rows
        .iter()
        .filter_map(|r| {
            let pos: u64 = r.get_opt::<u64, _>(1)?.ok()?;
            let kind: String = r.get_opt::<String, _>(2)?.ok()?;
            (kind.eq_ignore_ascii_case("Annotate_rows") && pos < end).then_some(pos)
        })
        .collect();
    for pos in annotations {
        let i = txn.counted_at.partition_point(|p| *p < pos);
        txn.counted.insert(i, 0);
        txn.counted_at.insert(i, pos);
    }
    Ok(())
}

fn rand_u32() -> u32 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    h.finish() as u32
}

/// A Debezium binlog offset as an outboxd checkpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Imported {
    /// The checkpoint's position: before the transaction Debezium was in.
    pub position: SourcePosition,
    /// Its outbox rows Debezium delivered.
    pub skip: u64,
    /// The transaction the skip applies to, its outbox rows in all (for the report).
    pub txn: Option<(String, u64)>,
}

/// The position Debezium's offset resumes at, in the connector's tracking mode: its `gtids`
/// (MariaDB GTID position or MySQL GTID set), else `file:pos` (MariaDB with GTIDs: the GTID
/// state there, `BINLOG_GTID_POS`).
async fn offset_position(
    conn: &mut mysql_async::Conn,
    cfg: &MysqlSourceConfig,
    mode: TrackingMode,
    offset: &BinlogOffset,
) -> Result<SourcePosition, CutoverError> {
    let file = SourcePosition::BinlogFile(BinlogFilePosition::new(offset.file.clone(), offset.pos));
    match (mode, &offset.gtids) {
        (TrackingMode::File, _) => Ok(file),
        (TrackingMode::MariadbGtid, Some(g)) => Ok(SourcePosition::MariadbGtid(
            mariadb_gtids(g).map_err(|m| {
                CutoverError::refused(format!(
                    "Debezium's offset `gtids` {g:?} is not a MariaDB GTID position: {m}"
                ))
            })?,
        )),
        (TrackingMode::MariadbGtid, None) => {
            let what = "BINLOG_GTID_POS of Debezium's file:pos";
            let state: Option<String> = conn
                .exec_first::<Option<String>, _, _>(
                    "SELECT BINLOG_GTID_POS(?, ?)",
                    (offset.file.clone(), offset.pos),
                )
                .await
                .map_err(|e| from_mysql(what, MysqlError::from_driver(e, cfg)))?
                .flatten();
            match state {
                Some(s) => Ok(SourcePosition::MariadbGtid(s.parse().map_err(|e| {
                    CutoverError::refused(format!("{what} is {s:?}: {e}"))
                })?)),
                None => Err(CutoverError::refused(format!(
                    "Debezium's position is no longer served: the server has no binlog \
                     position {file} (BINLOG_GTID_POS is NULL): the binlog was purged, or the \
                     offset is not this server's. To start anyway, accept the gap: `outboxd \
                     checkpoint reset`, then run (it starts at the current position)"
                ))),
            }
        }
        (TrackingMode::MysqlGtid, Some(g)) => Ok(SourcePosition::MysqlGtidSet(
            g.parse::<GtidSet>().map_err(|e| {
                CutoverError::refused(format!(
                    "Debezium's offset `gtids` is not a MySQL GTID set: {e}"
                ))
            })?,
        )),
        (TrackingMode::MysqlGtid, None) => Err(CutoverError::refused(format!(
            "Debezium's offset has no `gtids` (it ran without GTIDs) but the server has \
             gtid_mode=ON, where outboxd keeps GTID sets: set `position_mode = \"file\"` \
             (TOML) to resume at {file}"
        ))),
    }
}

/// A MariaDB GTID position as Debezium writes it: its `MariadbGtidSet` may list a domain
/// once per server id; the highest sequence number of a domain is where it is.
fn mariadb_gtids(text: &str) -> Result<MariadbGtidPosition, String> {
    let mut pos = MariadbGtidPosition::new();
    for entry in text.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let g: crate::position::MariadbGtid = entry.parse().map_err(|e| format!("{e}"))?;
        if pos.get(g.domain).is_none_or(|c| c.seq < g.seq) {
            pos.update(g.domain, g.server, g.seq);
        }
    }
    Ok(pos)
}

/// Why a MariaDB GTID position `offset` is not a position of the server whose
/// `@@gtid_binlog_pos` is `server`: a domain the server's binlog never had, or a sequence
/// number beyond the server's last one in its domain. `None` when every domain is known and
/// not ahead. (MariaDB's non-strict replication accepts such a start and waits for
/// transactions that never come; a cutover must not.)
pub(crate) fn foreign_mariadb_gtids(
    offset: &MariadbGtidPosition,
    server: &MariadbGtidPosition,
) -> Option<String> {
    let found: Vec<String> = offset
        .iter()
        .filter_map(|g| match server.get(g.domain) {
            None => Some(format!(
                "GTID {g} is in domain {}, which this server's binlog never had \
                 (gtid_binlog_pos is {server})",
                g.domain
            )),
            Some(last) if last.seq < g.seq => Some(format!(
                "GTID {g} is beyond this server's last GTID {last} in domain {}",
                g.domain
            )),
            Some(_) => None,
        })
        .collect();
    (!found.is_empty()).then(|| found.join("; "))
}

/// Turns Debezium's offset into outboxd's checkpoint, reading the transaction it is in
/// from the server; refuses a position the server no longer serves.
///
/// Errors: definite (with what to do) for a position the server does not serve, counts
/// that do not fit the transaction there, an XA transaction; transient when the server
/// cannot be reached.
pub(crate) async fn import(
    cfg: &MysqlSourceConfig,
    tables: &[TableName],
    offset: &BinlogOffset,
    annotate: bool,
) -> Result<Imported, CutoverError> {
    let what = format!("connecting to {}:{}", cfg.host, cfg.port);
    let mut conn = server::connect(cfg)
        .await
        .map_err(|e| from_mysql(&what, e))?;
    let info = server::server_info(&mut conn, cfg)
        .await
        .map_err(|e| from_mysql(&what, e))?;
    let mode = server::tracking_mode(&info, cfg);
    let position = offset_position(&mut conn, cfg, mode, offset).await?;
    if let Some(reason) = server::checkpoint_gap(&mut conn, cfg, mode, &position)
        .await
        .map_err(|e| from_mysql("reading the binlogs the server has", e))?
    {
        return Err(CutoverError::refused(format!(
            "Debezium's position is no longer served: {reason}. Debezium could not resume \
             there either; to start outboxd anyway, accept the gap: run outboxd without \
             importing (it starts at the current position) after `outboxd checkpoint reset`"
        )));
    }
    if let SourcePosition::MariadbGtid(pos) = &position {
        let current: String = conn
            .query_first("SELECT @@GLOBAL.gtid_binlog_pos")
            .await
            .map_err(|e| from_mysql("reading gtid_binlog_pos", MysqlError::from_driver(e, cfg)))?
            .unwrap_or_default();
        let current: MariadbGtidPosition = current.parse().map_err(|e| {
            CutoverError::refused(format!("the server's gtid_binlog_pos {current:?}: {e}"))
        })?;
        if let Some(reason) = foreign_mariadb_gtids(pos, &current) {
            return Err(CutoverError::refused(format!(
                "Debezium's position is not served by this server: {reason}. Is the connector \
                 JSON's database.hostname the server Debezium read? To start anyway, accept \
                 the gap: run outboxd without importing (it starts at the current position) \
                 after `outboxd checkpoint reset`"
            )));
        }
    }
    drop(conn);
    // The reading also proves the server still sends its binlog from there.
    let scan = scan(cfg, tables, &position, false, annotate).await?;
    if offset.event == 0 && offset.row == 0 {
        return Ok(Imported {
            position,
            skip: 0,
            txn: None,
        });
    }
    let Some(txn) = scan.txn else {
        return Err(CutoverError::refused(format!(
            "Debezium's offset is inside a transaction ({} event(s), {} row(s) in) but the \
             binlog after {position} holds no transaction: the offset is not this server's",
            offset.event, offset.row
        )));
    };
    if txn.xa {
        return Err(CutoverError::refused(format!(
            "Debezium's offset is inside XA transaction {} ({} event(s) in); Debezium counts \
             XA groups differently from outboxd, which delivers them at their XA COMMIT: \
             let Debezium run until it is past it, then import",
            txn.gtid
                .as_ref()
                .map_or_else(String::new, |g| g.to_string()),
            offset.event
        )));
    }
    // With GTIDs the offset's file:pos names the same transaction's first event.
    if offset.gtids.is_some()
        && mode != TrackingMode::File
        && txn.begin_at.file == offset.file
        && txn.begin_at.pos != offset.pos
    {
        return Err(CutoverError::refused(format!(
            "Debezium's offset names GTID position {} and file:pos {}:{}, but the \
             transaction after that GTID position starts at {}: the offset does not \
             describe one point of this server's binlog",
            offset.gtids.as_deref().unwrap_or_default(),
            offset.file,
            offset.pos,
            txn.begin_at
        )));
    }
    let skip = txn.skipped(offset.event, offset.row).map_err(|m| {
        CutoverError::refused(format!("{m}: the offset is not this server's binlog"))
    })?;
    Ok(Imported {
        position: txn.before.clone(),
        skip,
        txn: Some((
            txn.gtid
                .as_ref()
                .map_or_else(|| txn.begin_at.to_string(), |g| g.to_string()),
            txn.rows(),
        )),
    })
}

/// Turns outboxd's checkpoint (`position`, `skip`) into Debezium's offset, reading the
/// binlog from there: `gtids` (MariaDB: always, as Debezium's MariaDB connector resumes by
/// them), `file`/`pos` of the transaction to resume in (at a boundary: where the next
/// transaction begins, or where the binlog ended before the reading when none follows), and
/// `event`/`row` when `skip` outbox rows of that transaction are delivered.
///
/// Errors: definite for an `xa_pending` position or one the server does not serve;
/// transient when the server cannot be reached.
pub(crate) async fn export(
    cfg: &MysqlSourceConfig,
    tables: &[TableName],
    position: &SourcePosition,
    skip: u64,
    annotate: bool,
) -> Result<BinlogOffset, CutoverError> {
    if let SourcePosition::XaPending(x) = position {
        return Err(CutoverError::refused(format!(
            "outboxd's checkpoint waits for prepared XA transactions ({x}): Debezium has no \
             such position. Let outboxd run until they are committed or rolled back (the \
             checkpoint is then a plain position), then export"
        )));
    }
    // Where the binlog ends before the reading: when no transaction follows the checkpoint
    // then, the checkpoint's transaction ends here.
    let end_before = if skip == 0 {
        let what = "the end of the binlog (SHOW MASTER STATUS)";
        let mut conn = server::connect(cfg)
            .await
            .map_err(|e| from_mysql(what, e))?;
        match server::current_position(&mut conn, cfg, TrackingMode::File)
            .await
            .map_err(|e| from_mysql(what, e))?
        {
            SourcePosition::BinlogFile(fp) => Some(fp),
            _ => None,
        }
    } else {
        None
    };
    let scan = scan(cfg, tables, position, skip > 0, annotate).await?;
    let (start, event, row, begin) = match (&scan.txn, skip) {
        (Some(t), s) if s > 0 => {
            let (event, row) = t.counts_for(s);
            (t.before.clone(), event, row, t.begin_at.clone())
        }
        (None, s) if s > 0 => {
            return Err(CutoverError::refused(format!(
                "outboxd's checkpoint skips {s} outbox row(s) of the first transaction with \
                 outbox rows after {position}, but the binlog holds none there"
            )))
        }
        // Debezium's file:pos at a transaction boundary: where the next transaction begins.
        (Some(t), _) => (position.clone(), 0, 0, t.begin_at.clone()),
        (None, _) => (
            position.clone(),
            0,
            0,
            end_before.unwrap_or_else(|| scan.end.clone()),
        ),
    };
    let gtids = match &start {
        SourcePosition::MariadbGtid(p) => Some(p.to_string()),
        SourcePosition::MysqlGtidSet(s) => Some(s.to_string()),
        SourcePosition::BinlogFile(fp) => {
            let what = "BINLOG_GTID_POS of the checkpoint";
            let mut conn = server::connect(cfg)
                .await
                .map_err(|e| from_mysql(what, e))?;
            let info = server::server_info(&mut conn, cfg)
                .await
                .map_err(|e| from_mysql(what, e))?;
            if info.mariadb {
                let state: Option<String> = conn
                    .exec_first::<Option<String>, _, _>(
                        "SELECT BINLOG_GTID_POS(?, ?)",
                        (fp.file.clone(), fp.pos),
                    )
                    .await
                    .map_err(|e| from_mysql(what, MysqlError::from_driver(e, cfg)))?
                    .flatten();
                state.filter(|s| !s.is_empty())
            } else {
                None
            }
        }
        _ => None,
    };
    let (file, pos) = match &start {
        SourcePosition::BinlogFile(fp) if event == 0 => (fp.file.clone(), fp.pos),
        _ => (begin.file.clone(), begin.pos),
    };
    Ok(BinlogOffset {
        file,
        pos,
        gtids,
        event,
        row,
        server_id: None,
        ts_sec: Some(crate::checkpoint::now_ms() / 1000),
    })
}

/// A `Binlog Dump` thread in the server's process list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DumpThread {
    /// The connection id.
    pub id: u64,
    /// Its account.
    pub user: String,
    /// Its client address.
    pub host: String,
    /// Seconds in its state.
    pub time: u64,
}

/// The binlog dump threads of account `user` connected now (this session's own excluded).
/// Without the `PROCESS` privilege a session sees only its own account's threads.
///
/// Errors: transient when the server cannot be reached.
pub(crate) async fn dump_threads(
    cfg: &MysqlSourceConfig,
    user: &str,
) -> Result<Vec<DumpThread>, CutoverError> {
    let what = "reading the process list (binlog dump threads)";
    let mut conn = server::connect(cfg)
        .await
        .map_err(|e| from_mysql(what, e))?;
    type ProcessRow = (Option<u64>, Option<String>, Option<String>, Option<u64>);
    let rows: Vec<ProcessRow> = conn
        .exec(
            "SELECT ID, USER, HOST, TIME FROM information_schema.PROCESSLIST \
             WHERE COMMAND LIKE 'Binlog Dump%' AND USER = ? AND ID <> CONNECTION_ID()",
            (user,),
        )
        .await
        .map_err(|e| from_mysql(what, MysqlError::from_driver(e, cfg)))?;
    Ok(rows
        .into_iter()
        .map(|(id, user, host, time)| DumpThread {
            id: id.unwrap_or(0),
            user: user.unwrap_or_default(),
            host: host.unwrap_or_default(),
            time: time.unwrap_or(0),
        })
        .collect())
}

/// Whether a replica registered with `server_id` is connected (`SHOW SLAVE HOSTS`): an
/// outboxd connector registers its binlog session. `None` when the account may not ask
/// (MariaDB: `REPLICATION MASTER ADMIN`; MySQL: `REPLICATION SLAVE`).
///
/// Errors: transient when the server cannot be reached.
pub(crate) async fn registered(
    cfg: &MysqlSourceConfig,
    server_id: u32,
) -> Result<Option<bool>, CutoverError> {
    let what = "reading the registered replicas (SHOW SLAVE HOSTS)";
    let mut conn = server::connect(cfg)
        .await
        .map_err(|e| from_mysql(what, e))?;
    let rows: Result<Vec<mysql_async::Row>, _> = conn.query("SHOW SLAVE HOSTS").await;
    let rows = match rows {
        Ok(r) => r,
        Err(mysql_async::Error::Server(_)) => return Ok(None),
        Err(e) => return Err(from_mysql(what, MysqlError::from_driver(e, cfg))),
    };
    Ok(Some(rows.iter().any(|r| {
        r.get_opt::<u32, _>(0).and_then(Result::ok) == Some(server_id)
    })))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn txn(counted: &[u64]) -> Txn {
        Txn {
            before: SourcePosition::MariadbGtid("0-1-5".parse().unwrap()),
            begin_at: BinlogFilePosition::new("b.000001", 100),
            gtid: None,
            counted: counted.to_vec(),
            counted_at: (0..counted.len() as u64).collect(),
            xa: false,
            ts_ms: 0,
        }
    }

    #[test]
    fn gtids_of_another_server_are_named() {
        let server: MariadbGtidPosition = "0-1-50,3-2-7".parse().unwrap();
        let at = |s: &str| foreign_mariadb_gtids(&s.parse().unwrap(), &server);
        assert_eq!(at("0-1-50"), None);
        assert_eq!(at("0-1-5,3-9-7"), None);
        assert_eq!(at(""), None);
        let unknown = at("0-1-5,77-7-100").unwrap();
        assert!(
            unknown.contains("77-7-100") && unknown.contains("never had"),
            "{unknown}"
        );
        let ahead = at("0-1-51").unwrap();
        assert!(
            ahead.contains("beyond") && ahead.contains("0-1-50"),
            "{ahead}"
        );
        assert_eq!(
            foreign_mariadb_gtids(&"0-1-1".parse().unwrap(), &MariadbGtidPosition::new())
                .map(|r| r.contains("never had")),
            Some(true)
        );
    }

    #[test]
    fn debezium_counts_to_outbox_rows_and_back() {
        // GTID, table map + rows of another table, table map + 2 outbox rows, table map +
        // 1 outbox row, table map + 3 outbox rows.
        let t = txn(&[0, 0, 0, 0, 2, 0, 1, 0, 3]);
        assert_eq!(t.rows(), 6);
        // Debezium's offset after the 1st outbox row: 4 events done, 1 row of the 5th.
        assert_eq!(t.skipped(4, 1), Ok(1));
        assert_eq!(t.skipped(4, 2), Ok(2));
        assert_eq!(t.skipped(6, 1), Ok(3));
        // After the last row (Debezium records no offset at the XID event).
        assert_eq!(t.skipped(8, 3), Ok(6));
        assert_eq!(t.skipped(9, 0), Ok(6));
        assert!(t.skipped(9, 1).is_err());
        assert!(t.skipped(12, 0).is_err());
        // A row count beyond an outbox rows event's rows: inconsistent, refused.
        assert!(t.skipped(4, 9).unwrap_err().contains("holds only 2 row(s)"));
        assert!(t.skipped(6, 99).is_err());
        for skip in 1..=6 {
            let (e, r) = t.counts_for(skip);
            assert_eq!(t.skipped(e, r), Ok(skip), "skip {skip} -> {e}/{r}");
        }
        assert_eq!(t.counts_for(1), (4, 1));
        assert_eq!(t.counts_for(3), (6, 1));
        assert_eq!(t.counts_for(99), (8, 3));
    }

    #[test]
    fn mariadb_gtids_keep_each_domains_highest() {
        assert_eq!(
            mariadb_gtids("0-1-5,0-2-9,1-1-3").unwrap().to_string(),
            "0-2-9,1-1-3"
        );
        assert_eq!(mariadb_gtids("").unwrap().to_string(), "");
        assert!(mariadb_gtids("x").is_err());
    }
}
