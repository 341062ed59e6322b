//! The pure binlog decoder: `mysql_common` [`Event`]s in, typed [`BinlogMessage`]s out.
//!
//! No I/O happens here. The same decoder serves the live session (events from `mysql_async`'s
//! binlog stream) and `outboxd binlog decode` (events from [`super::framing::BinlogFileReader`]).
//!
//! What the decoder adds on top of `mysql_common`:
//!
//! * **CRC32 verification** of every event when the FORMAT_DESCRIPTION_EVENT announces CRC32
//!   (`mysql_common` parses but never checks checksums).
//! * **MariaDB events** `mysql_common` leaves unparsed: GTID, GTID_LIST, BINLOG_CHECKPOINT,
//!   ANNOTATE_ROWS; encrypted and compressed MariaDB binlogs are reported as unsupported.
//! * **Transaction boundaries** made explicit and balanced: every transaction is
//!   `Begin … Commit` (or `Rollback`), whatever the server wrote — MySQL's GTID + `BEGIN` query +
//!   XID, MariaDB's GTID event standing in for `BEGIN`, a DDL whose implicit commit is its own
//!   statement (MySQL GTID without `BEGIN`, MariaDB `FL_STANDALONE`), or old servers with
//!   neither GTIDs nor `BEGIN` around a DDL.
//! * **Rows** decoded against the TABLE_MAP into named `Row`s of `ColumnValue`s, with column
//!   names from `binlog_row_metadata=FULL`, an explicit column list from the configuration, or
//!   (offline) positional names `@1, @2, …`.
//! * **Positions**: the `file:pos` after each event, and the GTID set / MariaDB GTID position
//!   after each committed transaction.
//! * **No panics, no unbounded allocations** on bytes from outside: TABLE_MAP and
//!   PREVIOUS_GTIDS bodies are parsed here with every count checked against the bytes present
//!   (`mysql_common` sizes vectors from such counts first); every call into `mysql_common` that
//!   parses event bodies runs under [`std::panic::catch_unwind`], a panic becoming
//!   [`DecodeError::Malformed`] (the default panic hook is kept quiet for those).
//!
//! Events inside a MySQL compressed transaction (TRANSACTION_PAYLOAD_EVENT) are expected to be
//! fed to [`BinlogDecoder::decode_event`] after the payload event itself, as `mysql_async`'s
//! stream and [`super::framing::BinlogFileReader`] both do; they are recognised by their
//! disabled checksum and do not move the `file:pos`.
//!
//! [`ColumnValue`]: crate::value::ColumnValue

use std::collections::{BTreeMap, BTreeSet, HashMap};

use mysql_common::binlog::consts::{BinlogChecksumAlg, EventFlags, EventType};
use mysql_common::binlog::events::{
    Event, ExecuteLoadQueryEvent, FormatDescriptionEvent, GtidEvent, IncidentEvent, QueryEvent,
    RotateEvent, XidEvent,
};

mod message;
mod parse;
mod rows;
pub mod statement;

pub use message::{BinlogMessage, DecodeError, MissingColumnNames, PositionKind, TxnGtid};
use parse::{
    commit_ts_ms, malformed, parse_previous_gtids, parse_xa_prepare, rotate_file_name, sql_mode_of,
    trim_statement,
};
pub(crate) use parse::{guarded, quietly};
pub use statement::{SqlMode, WriteVerb, Xid};

use super::mariadb_events as mariadb;
use super::table::TableInfo;
use super::types::CatalogColumn;
use crate::event::TableName;
use crate::position::{BinlogFilePosition, GtidSet, MariadbGtidPosition, SourcePosition, Uuid};

/// Largest table-map cache before it is flushed (table ids are re-announced before every rows
/// event group, so flushing only costs a re-parse).
const MAX_CACHED_TABLES: usize = 10_000;

/// Event type of MySQL's HEARTBEAT_LOG_EVENT_V2 (not in `mysql_common`'s enum).
const HEARTBEAT_LOG_EVENT_V2: u8 = 0x29;

/// A message that needs the position after its event, held until that position is known.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Terminal {
    Commit { xid: Option<u64>, ts_ms: i64 },
    XaPrepare { xid: Option<Xid>, ts_ms: i64 },
    Heartbeat,
}

/// Where the decoder is inside a transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TxnState {
    /// Between transactions.
    Idle,
    /// After a MySQL (anonymous) GTID event: a `BEGIN` query or a single DDL follows.
    AfterGtid,
    /// A single-statement group (MariaDB `FL_STANDALONE`): the next statement commits.
    Standalone,
    /// Inside `BEGIN … COMMIT` (or a MariaDB transactional group).
    Open,
}

/// Decodes binlog events into [`BinlogMessage`]s; holds the table-map cache, the transaction
/// state and the positions.
#[derive(Debug)]
pub struct BinlogDecoder {
    position: BinlogFilePosition,
    /// `position` as of the last event that left no transaction open.
    idle_position: BinlogFilePosition,
    tables: HashMap<u64, TableInfo>,
    columns: BTreeMap<TableName, Vec<String>>,
    missing_names: MissingColumnNames,
    table_filter: Option<BTreeSet<TableName>>,
    verify_checksums: bool,
    server_version: Option<String>,
    txn: TxnState,
    txn_gtid: Option<TxnGtid>,
    txn_commit_ts_ms: Option<i64>,
    gtid_set: GtidSet,
    mariadb_position: MariadbGtidPosition,
    position_kind: Option<PositionKind>,
    last_committed_gtid: Option<TxnGtid>,
    /// The event being decoded ends a transaction (or is a heartbeat): its message, which
    /// carries the position after the event, is added once that position is known.
    terminal: Option<Terminal>,
    notes: Vec<String>,
    noted_tables: BTreeSet<TableName>,
    /// The server's catalog of the tables' columns (defaults, declared types), per table.
    catalog: Option<BTreeMap<TableName, HashMap<String, CatalogColumn>>>,
}

impl Default for BinlogDecoder {
    fn default() -> Self {
        Self::new()
    }
}

impl BinlogDecoder {
    /// A decoder at the start of an unnamed binlog, decoding every table, failing on missing
    /// column names, verifying checksums.
    pub fn new() -> Self {
        Self {
            position: BinlogFilePosition::new("", 4),
            idle_position: BinlogFilePosition::new("", 4),
            tables: HashMap::new(),
            columns: BTreeMap::new(),
            missing_names: MissingColumnNames::Error,
            table_filter: None,
            verify_checksums: true,
            server_version: None,
            txn: TxnState::Idle,
            txn_gtid: None,
            txn_commit_ts_ms: None,
            gtid_set: GtidSet::new(),
            mariadb_position: MariadbGtidPosition::new(),
            position_kind: None,
            last_committed_gtid: None,
            terminal: None,
            notes: Vec::new(),
            noted_tables: BTreeSet::new(),
            catalog: None,
        }
    }

    /// Explicit column lists (`columns.<table>` in the connector config), used for tables whose
    /// TABLE_MAP has no COLUMN_NAME metadata.
    pub fn with_columns(mut self, columns: BTreeMap<TableName, Vec<String>>) -> Self {
        self.columns = columns;
        self
    }

    /// The columns of each table as the server's catalog describes them
    /// (`information_schema.COLUMNS`: defaults, declared types), which the type mapping adds
    /// to what the TABLE_MAP says ([`super::types::with_catalog`]).
    pub(crate) fn with_catalog(
        mut self,
        catalog: BTreeMap<TableName, HashMap<String, CatalogColumn>>,
    ) -> Self {
        self.catalog = Some(catalog);
        self
    }

    /// What to do about tables without column names.
    pub fn with_missing_names(mut self, policy: MissingColumnNames) -> Self {
        self.missing_names = policy;
        self
    }

    /// Decode rows of these tables only; rows events of other tables become
    /// [`BinlogMessage::Other`] without their rows being read (`None`: all tables).
    pub fn with_table_filter(mut self, tables: Option<BTreeSet<TableName>>) -> Self {
        self.table_filter = tables;
        self
    }

    /// Turns CRC32 verification off (only for input already verified elsewhere).
    pub fn with_checksum_verification(mut self, verify: bool) -> Self {
        self.verify_checksums = verify;
        self
    }

    /// Starts from a checkpoint: seeds the GTID set / MariaDB position / `file:pos` and makes
    /// [`current_position`](Self::current_position) report that kind.
    pub fn with_start(mut self, start: &SourcePosition) -> Self {
        match start {
            SourcePosition::MysqlGtidSet(set) => {
                self.gtid_set = set.clone();
                self.position_kind = Some(PositionKind::MysqlGtidSet);
            }
            SourcePosition::MariadbGtid(pos) => {
                self.mariadb_position = pos.clone();
                self.position_kind = Some(PositionKind::MariadbGtid);
            }
            SourcePosition::BinlogFile(fp) => {
                self.position = fp.clone();
                self.idle_position = fp.clone();
                self.position_kind = Some(PositionKind::BinlogFile);
            }
            SourcePosition::XaPending(x) => return self.with_start(&x.resume),
            SourcePosition::Lsn(_) => {}
        }
        self
    }

    /// Sets the current binlog file and position (offline decoding of a named file; the live
    /// stream learns it from the first, fake, ROTATE_EVENT).
    pub fn set_file(&mut self, file: impl Into<String>, pos: u64) {
        self.position = BinlogFilePosition::new(file, pos);
        if self.txn == TxnState::Idle {
            self.idle_position = self.position.clone();
        }
    }

    /// The `file:pos` after the last decoded event (events inside a compressed transaction do
    /// not move it; the payload event already did).
    pub fn position(&self) -> &BinlogFilePosition {
        &self.position
    }

    /// GTIDs of all transactions committed so far (seeded by [`with_start`](Self::with_start)
    /// or PREVIOUS_GTIDS).
    pub fn gtid_set(&self) -> &GtidSet {
        &self.gtid_set
    }

    /// MariaDB GTID position after the last committed transaction.
    pub fn mariadb_position(&self) -> &MariadbGtidPosition {
        &self.mariadb_position
    }

    /// The GTID of the last committed transaction.
    pub fn last_committed_gtid(&self) -> Option<&TxnGtid> {
        self.last_committed_gtid.as_ref()
    }

    /// Server version from the last FORMAT_DESCRIPTION_EVENT.
    pub fn server_version(&self) -> Option<&str> {
        self.server_version.as_deref()
    }

    /// True while inside a transaction.
    pub fn in_transaction(&self) -> bool {
        self.txn != TxnState::Idle
    }

    /// The position to checkpoint: where a restart resumes without losing or repeating a
    /// transaction, i.e. the state after the last transaction that ended (never a point inside
    /// an open one). Its kind is the one given to [`with_start`](Self::with_start), else
    /// MariaDB GTID when MariaDB GTIDs were seen, MySQL GTID set when MySQL GTIDs were seen,
    /// otherwise `file:pos`.
    pub fn current_position(&self) -> SourcePosition {
        let kind = self.position_kind.unwrap_or_else(|| {
            if !self.mariadb_position.is_empty() {
                PositionKind::MariadbGtid
            } else if !self.gtid_set.is_empty() {
                PositionKind::MysqlGtidSet
            } else {
                PositionKind::BinlogFile
            }
        });
        match kind {
            PositionKind::MysqlGtidSet => SourcePosition::MysqlGtidSet(self.gtid_set.clone()),
            PositionKind::MariadbGtid => SourcePosition::MariadbGtid(self.mariadb_position.clone()),
            PositionKind::BinlogFile => SourcePosition::BinlogFile(self.idle_position.clone()),
        }
    }

    /// Notes collected since the last call (e.g. tables shown with positional column names).
    pub fn take_notes(&mut self) -> Vec<String> {
        std::mem::take(&mut self.notes)
    }

    /// Decodes one event.
    pub fn decode_event(&mut self, event: &Event) -> Result<Vec<BinlogMessage>, DecodeError> {
        let mut out = Vec::new();
        self.decode_event_into(event, None, &mut out)?;
        Ok(out)
    }

    /// Decodes one event, appending its messages to `out`.
    ///
    /// `at` is where the event starts in the file it was read from, when known (file decoding;
    /// for events inside a compressed transaction, the payload event's position): errors name
    /// it and the position after the event is `at + size` in that file. Without it (the live
    /// stream) the position comes from the event header's `log_pos` in the file named by the
    /// last ROTATE_EVENT.
    pub fn decode_event_into(
        &mut self,
        event: &Event,
        at_in_file: Option<&BinlogFilePosition>,
        out: &mut Vec<BinlogMessage>,
    ) -> Result<(), DecodeError> {
        self.terminal = None;
        let header = event.header();
        let inner = !event.footer().get_checksum_enabled();
        let size = u64::from(header.event_size());
        let log_pos = u64::from(header.log_pos());
        let from_file = at_in_file.is_some();
        let at = match at_in_file {
            Some(at) => at.clone(),
            None => BinlogFilePosition::new(
                self.position.file.clone(),
                if log_pos >= size {
                    log_pos - size
                } else {
                    self.position.pos
                },
            ),
        };
        let ts_ms = i64::from(header.timestamp()) * 1000;
        let event_type = header.event_type_raw();

        self.verify_checksum(event, &at)?;

        // The position after this event is applied at the end, unless the event sets it itself
        // (ROTATE) or does not move it (heartbeats; events inside a compressed transaction,
        // whose payload event already moved it; artificial events).
        let artificial = header.flags().contains(EventFlags::LOG_EVENT_ARTIFICIAL_F);
        let mut set_pos = !inner && (from_file || (log_pos != 0 && !artificial));

        match event_type {
            t if t == EventType::FORMAT_DESCRIPTION_EVENT as u8 => {
                let fde: FormatDescriptionEvent<'_> =
                    guarded("FORMAT_DESCRIPTION_EVENT", &at, || event.read_event())?;
                let server_version = fde.server_version().trim_end_matches('\0').to_owned();
                let checksum = matches!(
                    event.footer().get_checksum_alg(),
                    Ok(Some(BinlogChecksumAlg::BINLOG_CHECKSUM_ALG_CRC32))
                );
                // A new file (or server restart) cannot continue an open transaction; a
                // stream's artificial FDE (log_pos 0) can.
                if self.txn != TxnState::Idle && log_pos != 0 {
                    self.abort_txn(out);
                }
                self.server_version = Some(server_version.clone());
                out.push(BinlogMessage::FormatDescription {
                    server_version,
                    checksum,
                });
            }
            t if t == EventType::ROTATE_EVENT as u8 => {
                let rotate: RotateEvent<'_> = guarded("ROTATE_EVENT", &at, || event.read_event())?;
                let next_file = rotate_file_name(event, rotate.name_raw());
                let pos = rotate.position();
                if !(log_pos == 0 || artificial) {
                    // A real rotation: table ids of the old file are gone.
                    self.tables.clear();
                }
                if !inner {
                    self.position = BinlogFilePosition::new(next_file.clone(), pos);
                    set_pos = false;
                }
                out.push(BinlogMessage::Rotate { next_file, pos });
            }
            t if t == EventType::PREVIOUS_GTIDS_EVENT as u8 => {
                let set = guarded("PREVIOUS_GTIDS_EVENT", &at, || {
                    parse_previous_gtids(event.data())
                })?;
                self.gtid_set.union_with(&set);
                out.push(BinlogMessage::PreviousGtids(set));
            }
            t if t == EventType::GTID_EVENT as u8
                || t == EventType::GTID_TAGGED_LOG_EVENT as u8 =>
            {
                let gtid: GtidEvent = guarded("GTID_EVENT", &at, || event.read_event())?;
                let txn_gtid = TxnGtid::Mysql {
                    sid: Uuid(gtid.sid()),
                    tag: gtid.tag().map(|t| t.as_str().to_ascii_lowercase()),
                    gno: gtid.gno(),
                };
                let commit_ts = commit_ts_ms(gtid.immediate_commit_timestamp());
                self.begin(Some(txn_gtid), TxnState::AfterGtid, ts_ms, commit_ts, out);
            }
            t if t == EventType::ANONYMOUS_GTID_EVENT as u8 => {
                let commit_ts = guarded("ANONYMOUS_GTID_EVENT", &at, || {
                    event.read_event::<GtidEvent>()
                })?;
                let commit_ts = commit_ts_ms(commit_ts.immediate_commit_timestamp());
                // Anonymous transactions: GTIDs are off, `file:pos` is the position to keep.
                self.position_kind.get_or_insert(PositionKind::BinlogFile);
                self.begin(None, TxnState::AfterGtid, ts_ms, commit_ts, out);
            }
            t if t == EventType::QUERY_EVENT as u8 => {
                let query: QueryEvent<'_> = guarded("QUERY_EVENT", &at, || event.read_event())?;
                self.on_query(&query, ts_ms, out);
            }
            t if t == EventType::XID_EVENT as u8 => {
                let xid: XidEvent = guarded("XID_EVENT", &at, || event.read_event())?;
                self.commit(Some(xid.xid), ts_ms, out);
            }
            t if t == EventType::XA_PREPARE_LOG_EVENT as u8 => {
                let (one_phase, xid) = parse_xa_prepare(event.data())
                    .map_err(|e| malformed("XA_PREPARE_LOG_EVENT", &at, e))?;
                if one_phase {
                    // MySQL's `XA COMMIT ... ONE PHASE`: the group commits here.
                    self.commit(None, ts_ms, out);
                } else {
                    // The prepared group is final in the binlog (its GTID is executed), but
                    // whether it commits is decided later by an `XA COMMIT` / `XA ROLLBACK`
                    // group of its own.
                    if self.txn == TxnState::Idle {
                        self.begin(None, TxnState::Open, ts_ms, None, out);
                    }
                    let ts_ms = self.txn_commit_ts_ms.unwrap_or(ts_ms);
                    self.finish_txn();
                    self.terminal = Some(Terminal::XaPrepare {
                        xid: Some(xid),
                        ts_ms,
                    });
                }
            }
            t if t == EventType::EXECUTE_LOAD_QUERY_EVENT as u8 => {
                // `LOAD DATA` logged as a statement (its file travelled in
                // BEGIN_LOAD_QUERY / APPEND_BLOCK events before it).
                let load: ExecuteLoadQueryEvent<'_> =
                    guarded("EXECUTE_LOAD_QUERY_EVENT", &at, || event.read_event())?;
                let mode = sql_mode_of(load.status_vars());
                let effects = statement::effects(load.query_raw(), &load.schema(), mode);
                self.on_effects(effects, out);
                out.push(BinlogMessage::Other { event_type });
            }
            t if t == EventType::TABLE_MAP_EVENT as u8 => {
                self.on_table_map(event, &at)?;
                out.push(BinlogMessage::Other { event_type });
            }
            t if (EventType::WRITE_ROWS_EVENT_V1 as u8..=EventType::DELETE_ROWS_EVENT_V1 as u8)
                .contains(&t)
                || (EventType::WRITE_ROWS_EVENT as u8..=EventType::DELETE_ROWS_EVENT as u8)
                    .contains(&t)
                || t == EventType::PARTIAL_UPDATE_ROWS_EVENT as u8 =>
            {
                self.on_rows(event, &at, ts_ms, out)?;
            }
            t if (EventType::PRE_GA_WRITE_ROWS_EVENT as u8
                ..=EventType::PRE_GA_DELETE_ROWS_EVENT as u8)
                .contains(&t) =>
            {
                return Err(DecodeError::Unsupported {
                    what: format!(
                        "pre-GA rows event (type {t}) written by a MySQL 5.1 development \
                         release; only rows events v1 and v2 are decoded"
                    ),
                    at,
                });
            }
            t if t == EventType::HEARTBEAT_EVENT as u8 || t == HEARTBEAT_LOG_EVENT_V2 => {
                // Heartbeats repeat the position already reached; do not move it.
                set_pos = false;
                self.terminal = Some(Terminal::Heartbeat);
            }
            t if t == EventType::INCIDENT_EVENT as u8 => {
                let incident: IncidentEvent<'_> =
                    guarded("INCIDENT_EVENT", &at, || event.read_event())?;
                out.push(BinlogMessage::Incident {
                    message: incident.message().into_owned(),
                });
            }
            mariadb::GTID_EVENT => {
                let g = mariadb::parse_gtid_event(event.data(), header.server_id())
                    .map_err(|e| malformed("MariaDB GTID_EVENT", &at, e))?;
                let gtid = TxnGtid::Mariadb {
                    domain: g.domain_id,
                    server: g.server_id,
                    seq: g.seq_no,
                };
                let state = if g.is_standalone() {
                    TxnState::Standalone
                } else {
                    TxnState::Open
                };
                self.begin(Some(gtid), state, ts_ms, None, out);
                if g.flags & mariadb::FL_PREPARED_XA != 0 {
                    out.push(BinlogMessage::XaStart);
                }
            }
            mariadb::GTID_LIST_EVENT => {
                let list = mariadb::parse_gtid_list_event(event.data())
                    .map_err(|e| malformed("MariaDB GTID_LIST_EVENT", &at, e))?;
                for g in list.iter() {
                    self.mariadb_position.advance(g.domain, g.server, g.seq);
                }
                out.push(BinlogMessage::MariadbGtidList(list));
            }
            mariadb::BINLOG_CHECKPOINT_EVENT => {
                mariadb::parse_binlog_checkpoint_event(event.data())
                    .map_err(|e| malformed("MariaDB BINLOG_CHECKPOINT_EVENT", &at, e))?;
                out.push(BinlogMessage::Other { event_type });
            }
            mariadb::START_ENCRYPTION_EVENT => {
                return Err(DecodeError::Unsupported {
                    what: "encrypted binlog (MariaDB START_ENCRYPTION_EVENT): outboxd reads \
                           unencrypted binlogs only; set encrypt_binlog=OFF"
                        .to_owned(),
                    at,
                });
            }
            t if (mariadb::QUERY_COMPRESSED_EVENT..=mariadb::DELETE_ROWS_COMPRESSED_EVENT)
                .contains(&t) =>
            {
                return Err(DecodeError::Unsupported {
                    what: format!(
                        "compressed MariaDB binlog event (type {t}): set log_bin_compress=OFF \
                         on the server"
                    ),
                    at,
                });
            }
            _ => out.push(BinlogMessage::Other { event_type }),
        }

        if set_pos {
            if from_file {
                if self.position.file != at.file {
                    self.position.file.clone_from(&at.file);
                }
                self.position.pos = at.pos + size;
            } else {
                self.position.pos = log_pos;
            }
        }
        if self.txn == TxnState::Idle {
            if self.idle_position.file != self.position.file {
                self.idle_position.file.clone_from(&self.position.file);
            }
            self.idle_position.pos = self.position.pos;
        }
        if let Some(terminal) = self.terminal.take() {
            let position = self.current_position();
            out.push(match terminal {
                Terminal::Commit { xid, ts_ms } => BinlogMessage::Commit {
                    xid,
                    ts_ms,
                    position,
                },
                Terminal::XaPrepare { xid, ts_ms } => BinlogMessage::XaPrepare {
                    xid,
                    ts_ms,
                    position,
                },
                Terminal::Heartbeat => BinlogMessage::Heartbeat { position },
            });
        }
        Ok(())
    }

    /// Verifies the event's CRC32 when the stream is checksummed.
    fn verify_checksum(&self, event: &Event, at: &BinlogFilePosition) -> Result<(), DecodeError> {
        let footer = event.footer();
        // Events inside a TRANSACTION_PAYLOAD_EVENT carry no checksum (WL#3549).
        if !self.verify_checksums || !footer.get_checksum_enabled() {
            return Ok(());
        }
        let is_fde = event.header().event_type_raw() == EventType::FORMAT_DESCRIPTION_EVENT as u8;
        let alg = match footer.get_checksum_alg() {
            Ok(Some(alg)) => alg,
            Ok(None) => return Ok(()),
            Err(e) => {
                return Err(DecodeError::Unsupported {
                    what: format!("binlog checksum algorithm {}", e.0),
                    at: at.clone(),
                })
            }
        };
        // With binlog_checksum=NONE only the FORMAT_DESCRIPTION_EVENT carries a checksum.
        if alg == BinlogChecksumAlg::BINLOG_CHECKSUM_ALG_OFF && !is_fde {
            return Ok(());
        }
        let Some(stored) = event.checksum() else {
            return Ok(());
        };
        let stored = u32::from_le_bytes(stored);
        let computed = event.calc_checksum(alg);
        if stored != computed {
            // MySQL writes the FDE of a checksum-less binlog with a zero checksum.
            if is_fde && alg == BinlogChecksumAlg::BINLOG_CHECKSUM_ALG_OFF && stored == 0 {
                return Ok(());
            }
            return Err(DecodeError::Checksum {
                at: at.clone(),
                stored,
                computed,
            });
        }
        Ok(())
    }

    /// Starts a transaction. `commit_ts_ms` is the commit time when the server recorded it
    /// (MySQL 8 GTID events), used for the `Begin` and `Commit` timestamps.
    fn begin(
        &mut self,
        gtid: Option<TxnGtid>,
        state: TxnState,
        ts_ms: i64,
        commit_ts_ms: Option<i64>,
        out: &mut Vec<BinlogMessage>,
    ) {
        if self.txn != TxnState::Idle {
            self.abort_txn(out);
        }
        if let Some(TxnGtid::Mysql { .. }) = gtid {
            self.position_kind.get_or_insert(PositionKind::MysqlGtidSet);
        }
        if let Some(TxnGtid::Mariadb { .. }) = gtid {
            self.position_kind.get_or_insert(PositionKind::MariadbGtid);
        }
        let before = self.current_position();
        self.txn = state;
        self.txn_gtid = gtid.clone();
        self.txn_commit_ts_ms = commit_ts_ms;
        out.push(BinlogMessage::Begin {
            gtid,
            before,
            standalone: state == TxnState::Standalone,
            ts_ms: commit_ts_ms.unwrap_or(ts_ms),
        });
    }

    /// Ends the transaction normally: its GTID is now executed. A terminator with no open
    /// transaction (decoding started mid-transaction) gets a `Begin` first, so messages always
    /// come in balanced pairs.
    fn commit(&mut self, xid: Option<u64>, ts_ms: i64, out: &mut Vec<BinlogMessage>) {
        if self.txn == TxnState::Idle {
            self.begin(None, TxnState::Open, ts_ms, None, out);
        }
        let ts_ms = self.txn_commit_ts_ms.unwrap_or(ts_ms);
        self.finish_txn();
        self.terminal = Some(Terminal::Commit { xid, ts_ms });
    }

    /// Marks the transaction's GTID executed and returns to idle.
    fn finish_txn(&mut self) {
        if let Some(gtid) = self.txn_gtid.take() {
            match &gtid {
                TxnGtid::Mysql { sid, tag, gno } => {
                    // Only fails for GNO 0 / invalid tags, which the server never logs.
                    let _ = self.gtid_set.add(*sid, tag.as_deref(), *gno);
                }
                TxnGtid::Mariadb {
                    domain,
                    server,
                    seq,
                } => self.mariadb_position.update(*domain, *server, *seq),
            }
            self.last_committed_gtid = Some(gtid);
        }
        self.txn = TxnState::Idle;
        self.txn_commit_ts_ms = None;
    }

    /// The open transaction can never complete (cut short): roll it back, GTID not executed.
    fn abort_txn(&mut self, out: &mut Vec<BinlogMessage>) {
        self.txn = TxnState::Idle;
        self.txn_gtid = None;
        self.txn_commit_ts_ms = None;
        out.push(BinlogMessage::Rollback);
    }

    /// Reports what a statement does to the tables the filter keeps (every table without a
    /// filter): rows it writes ([`BinlogMessage::StatementWrite`]), and those it removes
    /// under their names without putting another in their place
    /// ([`BinlogMessage::TablesGone`]). Names are compared without regard to ASCII case
    /// (`lower_case_table_names` may make them so), which at worst reports too much.
    fn on_effects(&mut self, effects: Vec<statement::Effect>, out: &mut Vec<BinlogMessage>) {
        use statement::Effect;
        if effects.is_empty() {
            return;
        }
        let same = |a: &TableName, b: &TableName| {
            a.schema.eq_ignore_ascii_case(&b.schema) && a.name.eq_ignore_ascii_case(&b.name)
        };
        let kept = |t: &TableName| -> Option<TableName> {
            match &self.table_filter {
                None => Some(t.clone()),
                Some(filter) => filter.iter().find(|f| same(f, t)).cloned(),
            }
        };
        // The kept tables this statement removed (what happened to each), in order.
        let mut gone: Vec<(TableName, String)> = Vec::new();
        let mut set_gone = |table: TableName, how: Option<String>| {
            gone.retain(|(t, _)| *t != table);
            if let Some(how) = how {
                gone.push((table, how));
            }
        };
        for effect in effects {
            match effect {
                Effect::Writes { table, verb } => {
                    if let Some(table) = kept(&table) {
                        out.push(BinlogMessage::StatementWrite { table, verb });
                    }
                }
                Effect::Drops(t) => {
                    if let (Some(t), true) = (kept(&t), self.table_filter.is_some()) {
                        set_gone(t, Some("dropped".into()));
                    }
                }
                Effect::DropsDatabase(db) => {
                    for t in self.table_filter.iter().flatten() {
                        if t.schema.eq_ignore_ascii_case(&db) {
                            set_gone(t.clone(), Some(format!("dropped with database {db}")));
                        }
                    }
                }
                Effect::Renames { from, to } => {
                    if self.table_filter.is_some() {
                        if let Some(f) = kept(&from) {
                            set_gone(f, Some(format!("renamed to {to}")));
                        }
                        if let Some(t) = kept(&to) {
                            set_gone(t, None);
                        }
                    }
                }
                Effect::Creates(t) => {
                    if let (Some(t), true) = (kept(&t), self.table_filter.is_some()) {
                        set_gone(t, None);
                    }
                }
            }
        }
        if !gone.is_empty() {
            out.push(BinlogMessage::TablesGone { tables: gone });
        }
    }

    fn on_query(&mut self, query: &QueryEvent<'_>, ts_ms: i64, out: &mut Vec<BinlogMessage>) {
        let text = query.query_raw();
        let trimmed = trim_statement(text);
        let is = |kw: &[u8]| trimmed.eq_ignore_ascii_case(kw);
        let starts =
            |kw: &[u8]| trimmed.len() >= kw.len() && trimmed[..kw.len()].eq_ignore_ascii_case(kw);

        if is(b"BEGIN") || starts(b"XA START") {
            match self.txn {
                TxnState::AfterGtid | TxnState::Standalone => self.txn = TxnState::Open,
                TxnState::Open => {}
                TxnState::Idle => self.begin(None, TxnState::Open, ts_ms, None, out),
            }
            if starts(b"XA START") {
                out.push(BinlogMessage::XaStart);
            }
            return;
        }
        if is(b"COMMIT") {
            self.commit(None, ts_ms, out);
            return;
        }
        if is(b"ROLLBACK") {
            if self.txn == TxnState::Idle {
                self.begin(None, TxnState::Open, ts_ms, None, out);
            }
            // Logged because non-transactional tables changed; the GTID is consumed.
            self.finish_txn();
            out.push(BinlogMessage::Rollback);
            return;
        }

        let mode = sql_mode_of(query.status_vars());
        // What the statement does, reported inside its transaction (after its `Begin`).
        let mut noted = Vec::new();
        if starts(b"XA ") {
            if let Some(xa) = statement::xa_outcome(text, mode) {
                if xa.one_phase && self.txn == TxnState::Open {
                    // The end of this XA group, committed in one phase.
                    self.commit(None, ts_ms, out);
                    return;
                }
                noted.push(BinlogMessage::XaOutcome {
                    xid: xa.xid,
                    committed: xa.committed,
                });
            }
        } else {
            let effects = statement::effects(text, &query.schema(), mode);
            self.on_effects(effects, &mut noted);
        }
        let ddl = BinlogMessage::Ddl {
            database: query.schema().into_owned(),
            query_len: text.len(),
        };
        match self.txn {
            TxnState::Open => {
                out.append(&mut noted);
                out.push(ddl);
            }
            TxnState::AfterGtid | TxnState::Standalone => {
                // The statement is the whole group: it commits implicitly.
                out.append(&mut noted);
                out.push(ddl);
                self.commit(None, ts_ms, out);
            }
            TxnState::Idle => {
                // Old servers: a statement outside BEGIN/COMMIT is its own transaction.
                self.begin(None, TxnState::Standalone, ts_ms, None, out);
                out.append(&mut noted);
                out.push(ddl);
                self.commit(None, ts_ms, out);
            }
        }
    }
}
