//! What a source yields: row changes and transaction boundaries, in commit order.
//!
//! A source streams a transaction as its `Change`s (outbox rows only), then `Commit` carrying
//! the position *after* the transaction, so memory never has to hold a whole transaction.

use std::fmt;
use std::sync::Arc;

use crate::position::{Lsn, SourcePosition};
use crate::typemap::ColumnType;
use crate::value::ColumnValue;

/// Schema of the pseudo table a PostgreSQL logical decoding message (`pg_logical_emit_message`)
/// is routed as: table `pg_logical_emit_message.<prefix>`, whose columns are the fields of the
/// message's JSON content.
pub const MESSAGE_SCHEMA: &str = "pg_logical_emit_message";

/// A fully qualified table: MySQL `database.table`, PostgreSQL `schema.table`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TableName {
    /// MySQL database (schema) or PostgreSQL schema name.
    pub schema: String,
    /// Table name.
    pub name: String,
}

impl TableName {
    /// Builds a table name from its two parts.
    pub fn new(schema: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            schema: schema.into(),
            name: name.into(),
        }
    }

    /// Parses `schema.table` (the form of Debezium's `table.include.list` entries).
    ///
    /// Errors when there is no dot or either part is empty.
    pub fn parse(s: &str) -> Result<Self, String> {
        match s.trim().split_once('.') {
            Some((schema, name)) if !schema.is_empty() && !name.is_empty() => {
                Ok(Self::new(schema, name))
            }
            _ => Err(format!(
                "table name {s:?} is not of the form schema.table (e.g. shop.outbox_events)"
            )),
        }
    }
}

impl fmt::Display for TableName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.schema, self.name)
    }
}

/// The kind of row change, as in Debezium's `op` field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    /// INSERT (binlog WRITE_ROWS, pgoutput Insert) or a logical decoding message.
    Insert,
    /// UPDATE (binlog UPDATE_ROWS, pgoutput Update).
    Update,
    /// DELETE (binlog DELETE_ROWS, pgoutput Delete).
    Delete,
}

impl Op {
    /// Lower-case name used in logs and `binlog decode` output: `insert`, `update`, `delete`.
    pub fn as_str(self) -> &'static str {
        match self {
            Op::Insert => "insert",
            Op::Update => "update",
            Op::Delete => "delete",
        }
    }
}

/// One row image: column names (shared by every row of a table map / relation) and values.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    columns: Arc<[Arc<str>]>,
    values: Vec<ColumnValue>,
    /// Columns of the table that this image leaves out (a MySQL/MariaDB binlog row image
    /// under `binlog_row_image=MINIMAL` or `NOBLOB`); `None` when the image is complete.
    omitted: Option<Arc<[Arc<str>]>>,
    /// The columns' types for the type mapping (one per column, shared by every row of a
    /// table map / relation); `None` when the source did not describe them (logical
    /// decoding messages, tests).
    types: Option<Arc<[ColumnType]>>,
}

impl Row {
    /// Builds a row. `values` must have one entry per column name.
    ///
    /// Panics never: a length mismatch is truncated to the shorter of the two.
    pub fn new(columns: Arc<[Arc<str>]>, mut values: Vec<ColumnValue>) -> Self {
        values.truncate(columns.len());
        Self {
            columns,
            values,
            omitted: None,
            types: None,
        }
    }

    /// The same row with its columns' types (one per column; ignored when the count differs).
    pub fn with_types(mut self, types: Arc<[ColumnType]>) -> Self {
        if types.len() == self.columns.len() {
            self.types = Some(types);
        }
        self
    }

    /// The type of column `name`, when the source described it.
    pub fn column_type(&self, name: &str) -> Option<&ColumnType> {
        let i = self.columns.iter().position(|c| &**c == name)?;
        self.types.as_ref().and_then(|t| t.get(i))
    }

    /// The same row, noting that the table's columns `omitted` exist but are not in this
    /// image (MySQL "binlog_row_image": MINIMAL and NOBLOB images leave out the columns an
    /// INSERT did not set). An empty list means the image is complete.
    pub fn with_omitted(mut self, omitted: Arc<[Arc<str>]>) -> Self {
        self.omitted = (!omitted.is_empty()).then_some(omitted);
        self
    }

    /// True when the table has column `name` but this row image leaves it out
    /// ([`with_omitted`](Self::with_omitted)).
    pub fn is_omitted(&self, name: &str) -> bool {
        self.omitted
            .as_ref()
            .is_some_and(|o| o.iter().any(|c| &**c == name))
    }

    /// The value of column `name` (exact, case-sensitive match), or `None` when the row has
    /// no such column.
    pub fn get(&self, name: &str) -> Option<&ColumnValue> {
        self.columns
            .iter()
            .position(|c| &**c == name)
            .and_then(|i| self.values.get(i))
    }

    /// Takes the value of column `name` out of the row, leaving NULL in its place; `None`
    /// when the row has no such column.
    pub fn take(&mut self, name: &str) -> Option<ColumnValue> {
        let i = self.columns.iter().position(|c| &**c == name)?;
        self.values.get_mut(i).map(std::mem::take)
    }

    /// Puts `value` back into column `name` (after [`take`](Self::take)); nothing when the
    /// row has no such column.
    pub fn put(&mut self, name: &str, value: ColumnValue) {
        if let Some(i) = self.columns.iter().position(|c| &**c == name) {
            if let Some(slot) = self.values.get_mut(i) {
                *slot = value;
            }
        }
    }

    /// Keeps the columns whose entry in `keep` (one per column, in table order) is true,
    /// with their values and types (Debezium's `column.include.list`/`column.exclude.list`).
    pub fn retain_columns(&mut self, keep: &[bool]) {
        let k = |i: usize| keep.get(i).copied().unwrap_or(true);
        self.columns = self
            .columns
            .iter()
            .enumerate()
            .filter(|(i, _)| k(*i))
            .map(|(_, c)| c.clone())
            .collect();
        let values = std::mem::take(&mut self.values);
        self.values = values
            .into_iter()
            .enumerate()
            .filter(|(i, _)| k(*i))
            .map(|(_, v)| v)
            .collect();
        if let Some(t) = &self.types {
            self.types = Some(
                t.iter()
                    .enumerate()
                    .filter(|(i, _)| k(*i))
                    .map(|(_, t)| t.clone())
                    .collect(),
            );
        }
    }

    /// Column names and values in table order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &ColumnValue)> {
        self.columns.iter().map(|c| &**c).zip(self.values.iter())
    }

    /// Column names in table order.
    pub fn column_names(&self) -> &[Arc<str>] {
        &self.columns
    }

    /// Approximate size in bytes of the values, used for batching and memory accounting.
    pub fn approx_size(&self) -> usize {
        self.values
            .iter()
            .map(|v| match v {
                ColumnValue::Text(s)
                | ColumnValue::Json(s)
                | ColumnValue::Decimal(s)
                | ColumnValue::Uuid(s) => s.len(),
                ColumnValue::Bytes(b) => b.len(),
                _ => 8,
            })
            .sum()
    }
}

/// One changed row of one table.
#[derive(Debug, Clone, PartialEq)]
pub struct RowChange {
    /// The table the row belongs to.
    pub table: TableName,
    /// INSERT, UPDATE or DELETE.
    pub op: Op,
    /// The row after the change (INSERT, UPDATE) or before it (DELETE).
    pub row: Row,
    /// Source timestamp of the change in milliseconds since the Unix epoch (binlog event
    /// header timestamp, pgoutput commit timestamp), Debezium's `source.ts_ms`.
    pub source_ts_ms: i64,
    /// The change was read but its content does not decode into a row (then `row` is
    /// empty): a PostgreSQL logical decoding message with a configured prefix whose content
    /// is not a JSON object. The source hands it on in its place in the stream all the same;
    /// the delivery loops treat it as an event that cannot be delivered (stop before it, or
    /// dead-letter it), like a row the router refuses.
    pub undecodable: Option<Box<Undecodable>>,
}

/// Why a logical decoding message's content is not a row (its JSON object's fields). Never
/// contains the content; a field name at most.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MessageDecodeError {
    /// The content is not JSON at all.
    #[error("the content is not valid JSON (error at line {line} column {column})")]
    NotJson {
        /// Line of the first error, from 1.
        line: usize,
        /// Column of the first error, from 1.
        column: usize,
    },
    /// The content ends inside a JSON value.
    #[error("the content is truncated JSON")]
    Truncated,
    /// The content is JSON, but an array, a string, a number, ... instead of an object.
    #[error("the content is JSON but not an object")]
    NotAnObject,
    /// The object has a field twice: which one counts is ambiguous.
    #[error("field {0:?} appears more than once")]
    DuplicateField(String),
    /// A string field does not decode (an invalid escape).
    #[error("field {0:?} is not a valid JSON string")]
    InvalidString(String),
}

impl MessageDecodeError {
    /// The stable short name of the failure (`outboxd.message.not_json`, ...), for
    /// dead-letter headers.
    pub fn kind(&self) -> &'static str {
        match self {
            MessageDecodeError::NotJson { .. } => "outboxd.message.not_json",
            MessageDecodeError::Truncated => "outboxd.message.truncated_json",
            MessageDecodeError::NotAnObject => "outboxd.message.not_an_object",
            MessageDecodeError::DuplicateField(_) => "outboxd.message.duplicate_field",
            MessageDecodeError::InvalidString(_) => "outboxd.message.invalid_string",
        }
    }
}

/// A logical decoding message with a configured prefix whose content does not decode: names
/// the prefix and the message's LSN, never the content.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("logical decoding message with prefix {prefix:?} at LSN {lsn}: {reason}; such messages must carry a JSON object with the outbox fields (id, aggregate_type, aggregate_id, event_type, payload, ...)")]
pub struct UndecodableMessage {
    /// The message's prefix.
    pub prefix: String,
    /// The LSN of its WAL record.
    pub lsn: Lsn,
    /// What is wrong with its content.
    pub reason: MessageDecodeError,
}

/// A change that does not decode ([`RowChange::undecodable`]): why, and its raw content (for
/// a dead letter; never for logs or errors, and left out of `Debug`).
#[derive(Clone, PartialEq)]
pub struct Undecodable {
    /// Why it does not decode.
    pub error: UndecodableMessage,
    /// The content exactly as read.
    pub content: Vec<u8>,
}

impl fmt::Debug for Undecodable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Undecodable")
            .field("error", &self.error)
            .field("content_bytes", &self.content.len())
            .finish()
    }
}

/// An item of a source's ordered stream.
#[derive(Debug, Clone, PartialEq)]
pub enum SourceEvent {
    /// A row change of the current transaction that concerns an outbox table.
    Change(RowChange),
    /// The current transaction committed; `position` is the position *after* it, from which a
    /// restart resumes. `commit_ts_ms` is the commit time in epoch milliseconds.
    Commit {
        /// Position after this transaction.
        position: SourcePosition,
        /// Commit timestamp, milliseconds since the Unix epoch.
        commit_ts_ms: i64,
    },
    /// The source moved forward with nothing for us (heartbeat, a transaction on other
    /// tables, rotation). The position may be checkpointed once everything before it is
    /// delivered, so an idle outbox does not hold the source back.
    Progress {
        /// Position the source has reached.
        position: SourcePosition,
    },
}
