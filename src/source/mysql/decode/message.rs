//! The decoder's output and error types: what one binlog event means, and why it could not be
//! decoded.

use std::fmt;

use super::statement::{WriteVerb, Xid};
use crate::event::{Op, Row, TableName};
use crate::position::{BinlogFilePosition, GtidSet, MariadbGtidPosition, SourcePosition, Uuid};

/// The GTID of a transaction.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum TxnGtid {
    /// MySQL: `uuid:gno` or, tagged (8.4+), `uuid:tag:gno`.
    Mysql {
        /// Source server UUID.
        sid: Uuid,
        /// GTID tag, lower case.
        tag: Option<String>,
        /// Transaction number.
        gno: u64,
    },
    /// MariaDB: `domain-server-seq`.
    Mariadb {
        /// Replication domain id.
        domain: u32,
        /// Originating server id.
        server: u32,
        /// Sequence number.
        seq: u64,
    },
}

impl fmt::Display for TxnGtid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TxnGtid::Mysql {
                sid,
                tag: None,
                gno,
            } => write!(f, "{sid}:{gno}"),
            TxnGtid::Mysql {
                sid,
                tag: Some(tag),
                gno,
            } => write!(f, "{sid}:{tag}:{gno}"),
            TxnGtid::Mariadb {
                domain,
                server,
                seq,
            } => write!(f, "{domain}-{server}-{seq}"),
        }
    }
}

/// What one binlog event means, in the order it must be applied.
#[derive(Debug, Clone, PartialEq)]
pub enum BinlogMessage {
    /// FORMAT_DESCRIPTION_EVENT: start of a binlog file (or of a stream).
    FormatDescription {
        /// Server version string, e.g. `8.0.40` or `10.11.6-MariaDB-log`.
        server_version: String,
        /// True when events carry a CRC32 checksum (which the decoder verifies).
        checksum: bool,
    },
    /// ROTATE_EVENT: continue in `next_file` at `pos` (also sent, "fake", at stream start).
    Rotate {
        /// Next binlog file name.
        next_file: String,
        /// Position in that file.
        pos: u64,
    },
    /// MySQL PREVIOUS_GTIDS_EVENT: GTIDs executed before this binlog file.
    PreviousGtids(GtidSet),
    /// MariaDB GTID_LIST_EVENT: the last GTID of each domain before this binlog file.
    MariadbGtidList(MariadbGtidPosition),
    /// A transaction starts: MySQL GTID / anonymous GTID event or `BEGIN`, MariaDB GTID event.
    Begin {
        /// The transaction's GTID; `None` for anonymous transactions (GTIDs off).
        gtid: Option<TxnGtid>,
        /// The position before the transaction (`BinlogDecoder::current_position` as it
        /// starts): the end of the last transaction that ended, rolled back ones included.
        before: SourcePosition,
        /// True when the group is known up front to be a single statement with an implicit
        /// commit (MariaDB `FL_STANDALONE`, or a statement outside `BEGIN` on old servers). A
        /// MySQL GTID group that turns out to be a DDL is closed by `Ddl` then `Commit`.
        standalone: bool,
        /// Event timestamp (commit time when the server records it), epoch milliseconds.
        ts_ms: i64,
    },
    /// Rows of one rows event: after images for INSERT/UPDATE, before images for DELETE.
    Rows {
        /// The table.
        table: TableName,
        /// INSERT, UPDATE or DELETE.
        op: Op,
        /// The rows, each with its column names.
        rows: Vec<Row>,
        /// Event timestamp, epoch milliseconds.
        ts_ms: i64,
    },
    /// The transaction committed: XID_EVENT, `COMMIT` query, or the implicit commit of a DDL.
    /// Always the last message of its event.
    Commit {
        /// XID of an XID_EVENT.
        xid: Option<u64>,
        /// Event timestamp, epoch milliseconds.
        ts_ms: i64,
        /// The position after the transaction: where a restart resumes without losing or
        /// repeating it (`BinlogDecoder::current_position` after the event).
        position: SourcePosition,
    },
    /// The open transaction is an XA transaction (MySQL `XA START` query, MariaDB GTID event
    /// with FL_PREPARED_XA): it will end in [`BinlogMessage::XaPrepare`].
    XaStart,
    /// XA_PREPARE_LOG_EVENT: an XA transaction was prepared. Its rows are in the binlog, but
    /// it commits or rolls back only at a later `XA COMMIT` / `XA ROLLBACK` group. Always the
    /// last message of its event. (A one-phase commit, MySQL's `XA COMMIT ... ONE PHASE`
    /// logged as an XA_PREPARE_LOG_EVENT with its one-phase flag, is a [`BinlogMessage::Commit`]
    /// instead.)
    XaPrepare {
        /// The XA transaction's id, from the event.
        xid: Option<Xid>,
        /// Event timestamp, epoch milliseconds.
        ts_ms: i64,
        /// The position after the prepared group.
        position: SourcePosition,
    },
    /// The statement of an `XA COMMIT <xid>` / `XA ROLLBACK <xid>` group (MariaDB: a
    /// standalone group whose GTID event has FL_COMPLETED_XA; MySQL: a GTID and the query):
    /// the prepared XA transaction `xid` commits or rolls back here. The group's `Commit`
    /// follows.
    XaOutcome {
        /// The XA transaction's id.
        xid: Xid,
        /// True for `XA COMMIT`, false for `XA ROLLBACK`.
        committed: bool,
    },
    /// A statement (QUERY_EVENT, or EXECUTE_LOAD_QUERY_EVENT for `LOAD DATA`) that writes
    /// rows into an outbox table (one the decoder's table filter keeps): the writing session's
    /// `binlog_format` was `STATEMENT` or `MIXED`, so the rows are not in the binlog as rows
    /// and cannot be decoded. The statement text is never kept (it holds row values).
    StatementWrite {
        /// The outbox table written.
        table: TableName,
        /// `INSERT`, `REPLACE` or `LOAD DATA`.
        verb: WriteVerb,
    },
    /// A DDL statement removed outbox tables (ones the decoder's table filter keeps) under
    /// their names: `DROP TABLE`, `DROP DATABASE`, a `RENAME TABLE` / `ALTER TABLE ... RENAME`
    /// that moves them away without putting another table in their place in the same
    /// statement. The group's `Commit` follows.
    TablesGone {
        /// The tables, each with what happened to it (`dropped`, `renamed to db.t`).
        tables: Vec<(TableName, String)>,
    },
    /// The transaction ended with `ROLLBACK` (non-transactional changes were logged), or was
    /// cut short (a new transaction or file started before it ended).
    Rollback,
    /// A statement other than BEGIN/COMMIT/ROLLBACK: DDL, SAVEPOINT, or statement-based DML.
    /// Only its length is kept (statements may hold row values).
    Ddl {
        /// Default database of the statement.
        database: String,
        /// Length of the statement text in bytes.
        query_len: usize,
    },
    /// Heartbeat (the source is alive and has nothing new).
    Heartbeat {
        /// The position reached (unchanged by the heartbeat).
        position: SourcePosition,
    },
    /// INCIDENT_EVENT: the server says events may be missing from the binlog here.
    Incident {
        /// The server's message.
        message: String,
    },
    /// Any other event (TABLE_MAP, INTVAR, ROWS_QUERY, ANNOTATE_ROWS, STOP, …), or a rows event
    /// of a table outside the decoder's table filter.
    Other {
        /// Raw event type.
        event_type: u8,
    },
}

/// Why an event could not be decoded. Every variant is definite: the same bytes give the same
/// error, so a relay must stop rather than retry.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    /// Reading a binlog file failed.
    #[error("cannot read {file}: {source}")]
    Io {
        /// The file.
        file: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// Writing decoded output failed.
    #[error("cannot write decoded output: {0}")]
    Output(#[source] std::io::Error),
    /// The file does not start with the binlog magic bytes.
    #[error("{file} is not a binlog file (it does not start with the bytes fe 62 69 6e)")]
    NotABinlog {
        /// The file.
        file: String,
    },
    /// The input ends in the middle of an event, or an event's size field is impossible.
    #[error("truncated or damaged binlog at {at}: {detail}")]
    Truncated {
        /// Where the event starts.
        at: BinlogFilePosition,
        /// What is missing.
        detail: String,
    },
    /// The event's CRC32 does not match its bytes.
    #[error(
        "checksum mismatch at {at}: the event says {stored:08x}, its bytes give {computed:08x}"
    )]
    Checksum {
        /// Where the event starts.
        at: BinlogFilePosition,
        /// CRC32 stored in the event.
        stored: u32,
        /// CRC32 computed over the event.
        computed: u32,
    },
    /// An event body could not be parsed.
    #[error("malformed {what} at {at}: {detail}")]
    Malformed {
        /// The kind of event or structure.
        what: String,
        /// Where the event starts.
        at: BinlogFilePosition,
        /// What is wrong.
        detail: String,
    },
    /// A feature of the binlog this decoder does not support.
    #[error("unsupported {what} at {at}")]
    Unsupported {
        /// What it is, and what to change.
        what: String,
        /// Where the event starts.
        at: BinlogFilePosition,
    },
    /// A rows event refers to a table id with no TABLE_MAP_EVENT before it.
    #[error(
        "rows event at {at} refers to table id {table_id}, which no TABLE_MAP_EVENT announced \
         (did decoding start in the middle of a transaction?)"
    )]
    UnknownTableId {
        /// The table id.
        table_id: u64,
        /// Where the rows event starts.
        at: BinlogFilePosition,
    },
    /// Column names are needed but neither the binlog nor the configuration has them.
    #[error(
        "table {table} has no column names in the binlog; set binlog_row_metadata=FULL on the \
         server (SET GLOBAL binlog_row_metadata=FULL) or list the columns in the connector \
         config (columns.<table> = [...])"
    )]
    MissingColumnNames {
        /// The table.
        table: TableName,
    },
    /// The configured column list does not match the binlog's column count.
    #[error(
        "the connector config lists {configured} columns for {table} but its binlog rows have \
         {actual}; list every column in table order, invisible ones included"
    )]
    ColumnCountMismatch {
        /// The table.
        table: TableName,
        /// Columns in the configuration.
        configured: usize,
        /// Columns in the TABLE_MAP_EVENT.
        actual: usize,
    },
}

/// What to do when a table's rows must be decoded and the binlog has no column names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MissingColumnNames {
    /// Fail with [`DecodeError::MissingColumnNames`] (the relay: outbox columns are looked up by
    /// name, guessing would route garbage).
    #[default]
    Error,
    /// Name columns `@1, @2, …` and record a note (offline decoding).
    Positional,
}

/// Which kind of position `BinlogDecoder::current_position` reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PositionKind {
    /// MySQL GTID set.
    MysqlGtidSet,
    /// MariaDB GTID position.
    MariadbGtid,
    /// `file:pos`.
    BinlogFile,
}
