//! The pgoutput adapter: from decoded pgoutput messages to outbox [`SourceEvent`]s.
//!
//! * Keeps a relation cache (OID -> table, column names, type OIDs) fed by Relation messages.
//!   A partition of a partitioned outbox table maps to that table
//!   ([`PgOutboxAdapter::set_partitions`]): with `publish_via_partition_root` (how outboxd
//!   creates its publications) pgoutput already sends the partitions' rows as the partitioned
//!   table's, but WAL decoded from before that option was on has them under the partitions'
//!   own names.
//! * Keeps the changes of the configured outbox tables (INSERTs; UPDATEs and DELETEs too when
//!   the publication sends them, for the router's `table.op.invalid.behavior`), decoding their
//!   values with [`super::values`]. Rows of other tables are not even decoded.
//! * Turns logical decoding messages whose prefix is configured into an INSERT of a pseudo
//!   table `pg_logical_emit_message.<prefix>` whose columns are the fields of the message's
//!   JSON object ([`message_row`]), so the same router applies. A message whose content is
//!   not such an object is handed on all the same, as a change carrying the decode failure
//!   and the raw content ([`crate::event::RowChange::undecodable`]): whether it stops the
//!   connector or becomes a dead letter is the delivery loops' error policy, not the
//!   decoder's. Transactional messages are part of their transaction, in order with its rows;
//!   a non-transactional one is a transaction of its own, positioned just after its WAL
//!   record (`lsn + 1`).
//! * Frames transactions: a `Commit` at the commit's `end_lsn` (the position after the
//!   transaction) after its kept changes. Transactions with nothing kept, and
//!   keepalives while between transactions, become [`SourceEvent::Progress`] so the
//!   checkpoint — and with it the slot's `confirmed_flush_lsn` — follows an idle or filtered
//!   outbox.
//! * Skips what was delivered before a restart: a transaction whose commit record starts
//!   before the resume position (its `end_lsn` is at or before it), and non-transactional
//!   messages before it. The server skips them too (it starts decoding at
//!   `max(start, confirmed_flush)`); this is the guard for a slot that replays.
//!
//! Positions handed on never go backwards.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::Arc;

use serde::de::{Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;

use super::pgoutput::{pg_micros_to_unix_ms, PgOutputMessage, Relation, TupleData, TupleValue};
use super::values::{self, ValueError};
use crate::event::{
    MessageDecodeError, Op, Row, RowChange, SourceEvent, TableName, Undecodable, UndecodableMessage,
};
use crate::position::{Lsn, SourcePosition};
use crate::source::PROGRESS_EVERY;
use crate::value::ColumnValue;

pub use crate::event::MESSAGE_SCHEMA;

/// Why the stream cannot be turned into events. All of them are definite: the same bytes
/// would fail again after a restart.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AdapterError {
    /// Messages arrived in an order the protocol does not allow.
    #[error("pgoutput protocol violation: {0}")]
    Protocol(String),
    /// A change names a relation no Relation message described.
    #[error("pgoutput {message} for relation oid {oid} before any Relation message for it")]
    UnknownRelation {
        /// Message kind.
        message: &'static str,
        /// Relation OID.
        oid: u32,
    },
    /// A row has a different number of columns than its relation.
    #[error("outbox table {table}: a row has {found} column(s) but the relation has {expected}")]
    ColumnCount {
        /// Table.
        table: TableName,
        /// Columns in the Relation message.
        expected: usize,
        /// Columns in the row.
        found: usize,
    },
    /// A value does not decode as its column's type.
    #[error("outbox table {table}, column {column}: {source}")]
    Value {
        /// Table.
        table: TableName,
        /// Column.
        column: String,
        /// Why.
        source: ValueError,
    },
    /// A value arrived in a form an INSERT never has (unchanged TOAST, binary).
    #[error("outbox table {table}, column {column}: unexpected {what} value in a row")]
    UnexpectedValue {
        /// Table.
        table: TableName,
        /// Column.
        column: String,
        /// What arrived.
        what: &'static str,
    },
}

#[derive(Debug)]
struct CachedRelation {
    /// The table the Relation message named.
    named: TableName,
    /// The table its rows are rows of: `named`, or the partitioned outbox table it is a
    /// partition of.
    table: TableName,
    outbox: bool,
    columns: Arc<[Arc<str>]>,
    type_oids: Vec<u32>,
    /// The columns' types for the type mapping.
    types: Arc<[crate::typemap::ColumnType]>,
}

#[derive(Debug)]
struct OpenTxn {
    final_lsn: Lsn,
    commit_ts_ms: i64,
    /// Changes handed on.
    rows: u64,
    /// Delivered before the resume position: drop everything.
    skip: bool,
}

/// Filter, relation cache and framing state between pgoutput messages.
#[derive(Debug)]
pub struct PgOutboxAdapter {
    tables: HashSet<TableName>,
    /// Partition -> the partitioned outbox table it belongs to.
    partitions: HashMap<TableName, TableName>,
    prefixes: Vec<String>,
    /// Every prefix counts (`all_message_prefixes`).
    all_prefixes: bool,
    relations: HashMap<u32, CachedRelation>,
    txn: Option<OpenTxn>,
    resume_after: Lsn,
    last_position: Lsn,
    filtered_since_progress: u64,
    /// The catalog's facts about the outbox tables' columns (NOT NULL, defaults, enum labels).
    catalog: HashMap<TableName, super::types::TableCatalog>,
}

impl PgOutboxAdapter {
    /// An adapter keeping the changes of outbox `tables` and the messages with one of
    /// `prefixes`, that skips what lies before `resume_after` (the checkpoint, or the slot's
    /// `confirmed_flush_lsn` without one).
    pub fn new(tables: HashSet<TableName>, prefixes: Vec<String>, resume_after: Lsn) -> Self {
        Self {
            tables,
            partitions: HashMap::new(),
            prefixes,
            all_prefixes: false,
            relations: HashMap::new(),
            txn: None,
            resume_after,
            last_position: resume_after,
            filtered_since_progress: 0,
            catalog: HashMap::new(),
        }
    }

    /// Every logical decoding message is an outbox event, whatever its prefix.
    pub fn with_all_prefixes(mut self, all: bool) -> Self {
        self.all_prefixes = all;
        self
    }

    /// The catalog's facts about the outbox tables' columns ([`super::types::column_catalog`]),
    /// which complete the Relation messages' types for the type mapping.
    pub fn with_catalog(mut self, catalog: HashMap<TableName, super::types::TableCatalog>) -> Self {
        self.catalog = catalog;
        self
    }

    /// The partitions of the partitioned outbox tables, each with its outbox table (as the
    /// catalog lists them now: `catalog::coverage::Coverage::partitions`); relations already
    /// described are mapped again.
    pub fn set_partitions(&mut self, partitions: HashMap<TableName, TableName>) {
        self.partitions = partitions;
        let relations = std::mem::take(&mut self.relations);
        self.relations = relations
            .into_iter()
            .map(|(oid, mut r)| {
                (r.table, r.outbox) = self.outbox_of(&r.named);
                (oid, r)
            })
            .collect();
    }

    /// The table whose rows a relation named `named` holds, and whether it is an outbox.
    fn outbox_of(&self, named: &TableName) -> (TableName, bool) {
        match self.partitions.get(named) {
            Some(root) => (root.clone(), true),
            None => (named.clone(), self.tables.contains(named)),
        }
    }

    /// The last position handed on (or the resume position).
    pub fn last_position(&self) -> Lsn {
        self.last_position
    }

    /// A server keepalive: everything before `wal_end` has been sent. Between transactions it
    /// is progress. `wal_end` (the walsender's read position) can lie inside a transaction
    /// whose commit is not yet decoded, its rows flushed early by another commit or the WAL
    /// writer; resuming there is safe, since PostgreSQL (and this adapter's resume guard)
    /// skip only transactions whose commit lies before the resume position
    /// (tests/postgres_e2e.rs `checkpoint_inside_an_open_transaction_loses_nothing`).
    pub fn on_keepalive(&mut self, wal_end: Lsn, out: &mut Vec<SourceEvent>) {
        if self.txn.is_none() && wal_end > self.last_position {
            self.progress(wal_end, out);
        }
    }

    fn progress(&mut self, position: Lsn, out: &mut Vec<SourceEvent>) {
        self.filtered_since_progress = 0;
        self.last_position = position;
        out.push(SourceEvent::Progress {
            position: SourcePosition::Lsn(position),
        });
    }

    fn open(&mut self, message: &'static str) -> Result<&mut OpenTxn, AdapterError> {
        self.txn
            .as_mut()
            .ok_or_else(|| AdapterError::Protocol(format!("{message} outside a transaction")))
    }

    /// A transaction starts (pgoutput Begin): its commit record is at `final_lsn`; its commit
    /// time is `commit_ts` (µs since 2000-01-01 UTC).
    ///
    /// Errors when a transaction is already open (a protocol violation).
    pub fn on_begin(&mut self, final_lsn: Lsn, commit_ts: i64) -> Result<(), AdapterError> {
        if self.txn.is_some() {
            return Err(AdapterError::Protocol(
                "Begin inside an open transaction".into(),
            ));
        }
        self.txn = Some(OpenTxn {
            final_lsn,
            commit_ts_ms: pg_micros_to_unix_ms(commit_ts),
            rows: 0,
            skip: final_lsn < self.resume_after,
        });
        Ok(())
    }

    /// The open transaction committed (pgoutput Commit): its commit record is at
    /// `commit_lsn`, the position after it `end_lsn`.
    ///
    /// Errors without an open transaction, or for another transaction's commit.
    pub fn on_commit(
        &mut self,
        commit_lsn: Lsn,
        end_lsn: Lsn,
        commit_ts: i64,
        out: &mut Vec<SourceEvent>,
    ) -> Result<(), AdapterError> {
        let txn = self
            .txn
            .take()
            .ok_or_else(|| AdapterError::Protocol("Commit without Begin".into()))?;
        if txn.final_lsn != commit_lsn {
            return Err(AdapterError::Protocol(format!(
                "Commit at {commit_lsn} for a transaction that began with final_lsn {}",
                txn.final_lsn
            )));
        }
        if txn.skip || end_lsn <= self.resume_after {
            // Delivered before the restart.
        } else if txn.rows > 0 {
            self.filtered_since_progress = 0;
            self.last_position = self.last_position.max(end_lsn);
            out.push(SourceEvent::Commit {
                position: SourcePosition::Lsn(end_lsn),
                commit_ts_ms: pg_micros_to_unix_ms(commit_ts),
            });
        } else {
            self.filtered_since_progress += 1;
            if self.filtered_since_progress >= PROGRESS_EVERY && end_lsn > self.last_position {
                self.progress(end_lsn, out);
            }
        }
        Ok(())
    }

    /// A logical decoding message (`pg_logical_emit_message`; pgoutput Message) of WAL record
    /// `lsn`. One with a configured prefix is an outbox event: inside its transaction when
    /// `transactional`, else a transaction of its own. One whose content is not a JSON object
    /// is handed on all the same, as a change carrying the failure
    /// ([`RowChange::undecodable`], with the raw content): the delivery loops apply the
    /// connector's error policy to it, as to a row the router refuses.
    ///
    /// Errors when the message is where the protocol does not allow it.
    pub fn on_logical_message(
        &mut self,
        transactional: bool,
        lsn: Lsn,
        prefix: &str,
        content: &[u8],
        out: &mut Vec<SourceEvent>,
    ) -> Result<(), AdapterError> {
        if !self.all_prefixes && !self.prefixes.iter().any(|p| p == prefix) {
            if transactional {
                self.open("transactional Message")?;
            }
            return Ok(());
        }
        if transactional {
            let txn = self.open("transactional Message")?;
            if txn.skip {
                return Ok(());
            }
            let ts = txn.commit_ts_ms;
            txn.rows += 1;
            out.push(SourceEvent::Change(message_change(
                prefix, lsn, content, ts,
            )));
            return Ok(());
        }
        if self.txn.is_some() {
            return Err(AdapterError::Protocol(
                "non-transactional Message inside a transaction".into(),
            ));
        }
        // The position after the message's record: a restart from it does not decode the
        // message again (the server skips records starting before the start point), and
        // every later record starts after it.
        let after = Lsn(lsn.0.saturating_add(1));
        if after <= self.resume_after || after <= self.last_position {
            return Ok(());
        }
        let ts = crate::checkpoint::now_ms();
        self.filtered_since_progress = 0;
        self.last_position = after;
        out.push(SourceEvent::Change(message_change(
            prefix, lsn, content, ts,
        )));
        out.push(SourceEvent::Commit {
            position: SourcePosition::Lsn(after),
            commit_ts_ms: ts,
        });
        Ok(())
    }

    /// Feeds one decoded pgoutput message (Relation, Insert, Update, Delete, Truncate, Type,
    /// Origin); kept changes are appended to `out`.
    pub fn on_message(
        &mut self,
        msg: PgOutputMessage,
        out: &mut Vec<SourceEvent>,
    ) -> Result<(), AdapterError> {
        match msg {
            PgOutputMessage::Relation(r) => self.cache_relation(r),
            PgOutputMessage::Insert(i) => {
                self.change("Insert", i.relation_oid, Op::Insert, &i.new, out)?
            }
            PgOutputMessage::Update(u) => {
                self.change("Update", u.relation_oid, Op::Update, &u.new, out)?
            }
            PgOutputMessage::Delete(d) => {
                self.change("Delete", d.relation_oid, Op::Delete, &d.old.1, out)?
            }
            PgOutputMessage::Truncate(t) => {
                self.open("Truncate")?;
                for oid in t.relation_oids {
                    if let Some(rel) = self.relations.get(&oid).filter(|r| r.outbox) {
                        tracing::info!(table = %rel.table, "TRUNCATE of an outbox table: nothing to deliver");
                    }
                }
            }
            PgOutputMessage::Type(_) | PgOutputMessage::Origin(_) => {}
        }
        Ok(())
    }

    fn cache_relation(&mut self, r: Relation) {
        // pgoutput sends pg_catalog as the empty namespace.
        let schema = if r.namespace.is_empty() {
            "pg_catalog".to_string()
        } else {
            r.namespace
        };
        let named = TableName::new(schema, r.name);
        let (table, outbox) = self.outbox_of(&named);
        let columns: Arc<[Arc<str>]> = r
            .columns
            .iter()
            .map(|c| Arc::<str>::from(c.name.as_str()))
            .collect();
        let type_oids = r.columns.iter().map(|c| c.type_oid).collect();
        let known = self.catalog.get(&table);
        let types = r
            .columns
            .iter()
            .map(|c| {
                super::types::column_type(
                    c.type_oid,
                    c.type_modifier,
                    known.and_then(|k| k.get(&c.name)),
                )
            })
            .collect();
        self.relations.insert(
            r.oid,
            CachedRelation {
                named,
                table,
                outbox,
                columns,
                type_oids,
                types,
            },
        );
    }

    fn change(
        &mut self,
        message: &'static str,
        oid: u32,
        op: Op,
        tuple: &TupleData,
        out: &mut Vec<SourceEvent>,
    ) -> Result<(), AdapterError> {
        let txn = self
            .txn
            .as_mut()
            .ok_or_else(|| AdapterError::Protocol(format!("{message} outside a transaction")))?;
        let rel = self
            .relations
            .get(&oid)
            .ok_or(AdapterError::UnknownRelation { message, oid })?;
        if !rel.outbox || txn.skip {
            return Ok(());
        }
        if tuple.0.len() != rel.columns.len() {
            return Err(AdapterError::ColumnCount {
                table: rel.table.clone(),
                expected: rel.columns.len(),
                found: tuple.0.len(),
            });
        }
        let mut values = Vec::with_capacity(tuple.0.len());
        for ((v, name), type_oid) in tuple.0.iter().zip(rel.columns.iter()).zip(&rel.type_oids) {
            let value = match v {
                TupleValue::Null => ColumnValue::Null,
                // Only an UPDATE's new row leaves out unchanged TOASTed values; the router
                // does not read UPDATE rows.
                TupleValue::UnchangedToast if op == Op::Update => ColumnValue::Null,
                TupleValue::UnchangedToast => {
                    return Err(AdapterError::UnexpectedValue {
                        table: rel.table.clone(),
                        column: name.to_string(),
                        what: "unchanged-TOAST",
                    })
                }
                TupleValue::Binary(_) => {
                    return Err(AdapterError::UnexpectedValue {
                        table: rel.table.clone(),
                        column: name.to_string(),
                        what: "binary-format",
                    })
                }
                TupleValue::Text(raw) => {
                    values::decode_text(*type_oid, raw).map_err(|source| AdapterError::Value {
                        table: rel.table.clone(),
                        column: name.to_string(),
                        source,
                    })?
                }
            };
            values.push(value);
        }
        txn.rows += 1;
        out.push(SourceEvent::Change(RowChange {
            table: rel.table.clone(),
            op,
            row: Row::new(rel.columns.clone(), values).with_types(rel.types.clone()),
            source_ts_ms: txn.commit_ts_ms,
            undecodable: None,
        }));
        Ok(())
    }
}

/// The top-level fields of a JSON object, in order, as raw JSON text.
struct RawFields(Vec<(String, Box<RawValue>)>);

impl<'de> Deserialize<'de> for RawFields {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = RawFields;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RawFields, A::Error> {
                let mut fields = Vec::new();
                while let Some((k, v)) = map.next_entry::<String, Box<RawValue>>()? {
                    fields.push((k, v));
                }
                Ok(RawFields(fields))
            }
        }
        d.deserialize_map(V)
    }
}

/// The change a logical decoding message with a configured prefix becomes: an INSERT of
/// `pg_logical_emit_message.<prefix>` with the content's fields ([`message_row`]), or, when
/// the content is not such an object, an empty row carrying the failure and the content.
fn message_change(prefix: &str, lsn: Lsn, content: &[u8], source_ts_ms: i64) -> RowChange {
    let (row, undecodable) = match message_row(content) {
        Ok(row) => (row, None),
        Err(reason) => (
            Row::new(Arc::from(Vec::<Arc<str>>::new()), Vec::new()),
            Some(Box::new(Undecodable {
                error: UndecodableMessage {
                    prefix: prefix.to_string(),
                    lsn,
                    reason,
                },
                content: content.to_vec(),
            })),
        ),
    };
    RowChange {
        table: TableName::new(MESSAGE_SCHEMA, prefix),
        op: Op::Insert,
        row,
        source_ts_ms,
        undecodable,
    }
}

/// A logical decoding message's content (a JSON object) as a row: one column per field.
///
/// Field values become: strings `Text` (a `payload` given as a string is its text), objects
/// and arrays `Json` with their text exactly as written in the message, integers `Int`, other
/// numbers `Decimal` (their text), booleans `Bool`, `null` `Null`.
///
/// Errors say what is wrong and where, never what the content is.
pub fn message_row(content: &[u8]) -> Result<Row, MessageDecodeError> {
    let fields: RawFields = serde_json::from_slice(content).map_err(|e| match e.classify() {
        serde_json::error::Category::Data => MessageDecodeError::NotAnObject,
        serde_json::error::Category::Eof => MessageDecodeError::Truncated,
        _ => MessageDecodeError::NotJson {
            line: e.line(),
            column: e.column(),
        },
    })?;
    let mut names: Vec<Arc<str>> = Vec::with_capacity(fields.0.len());
    let mut values = Vec::with_capacity(fields.0.len());
    for (name, raw) in fields.0 {
        if names.iter().any(|n| **n == *name) {
            return Err(MessageDecodeError::DuplicateField(name));
        }
        let text = raw.get();
        let value = match text.as_bytes().first() {
            Some(b'"') => ColumnValue::Text(
                serde_json::from_str::<String>(text)
                    .map_err(|_| MessageDecodeError::InvalidString(name.clone()))?,
            ),
            Some(b'{' | b'[') => ColumnValue::Json(text.to_owned()),
            Some(b't') => ColumnValue::Bool(true),
            Some(b'f') => ColumnValue::Bool(false),
            Some(b'n') => ColumnValue::Null,
            _ => match text.parse::<i64>() {
                Ok(i) => ColumnValue::Int(i),
                Err(_) => ColumnValue::Decimal(text.to_owned()),
            },
        };
        names.push(Arc::from(name.as_str()));
        values.push(value);
    }
    Ok(Row::new(names.into(), values))
}

#[cfg(test)]
mod tests {
    use super::super::pgoutput::decode;
    use super::super::pgoutput::tests::{insert, relation, Msg};
    use super::super::values::oid;
    use super::*;

    /// What the session feeds the adapter: a pgoutput message's bytes (decoded here), or one
    /// of the messages pgwire-replication parses itself.
    enum In {
        Data(bytes::Bytes),
        Begin(u64, i64),
        Commit(u64, u64, i64),
        Msg(bool, u64, &'static str, &'static [u8]),
    }

    fn begin(final_lsn: u64, ts: i64) -> In {
        In::Begin(final_lsn, ts)
    }

    fn commit(commit_lsn: u64, end_lsn: u64, ts: i64) -> In {
        In::Commit(commit_lsn, end_lsn, ts)
    }

    fn message(transactional: bool, lsn: u64, prefix: &'static str, content: &'static [u8]) -> In {
        In::Msg(transactional, lsn, prefix, content)
    }

    fn data(b: bytes::Bytes) -> In {
        In::Data(b)
    }

    fn apply(
        a: &mut PgOutboxAdapter,
        m: &In,
        out: &mut Vec<SourceEvent>,
    ) -> Result<(), AdapterError> {
        match m {
            In::Data(b) => a.on_message(decode(b).unwrap(), out),
            In::Begin(l, ts) => a.on_begin(Lsn(*l), *ts),
            In::Commit(c, e, ts) => a.on_commit(Lsn(*c), Lsn(*e), *ts, out),
            In::Msg(t, l, p, c) => a.on_logical_message(*t, Lsn(*l), p, c, out),
        }
    }

    fn outbox() -> TableName {
        TableName::new("public", "outbox_events")
    }

    fn adapter(resume: u64) -> PgOutboxAdapter {
        PgOutboxAdapter::new(
            [outbox()].into_iter().collect(),
            vec!["outbox".into()],
            Lsn(resume),
        )
    }

    fn feed(a: &mut PgOutboxAdapter, msgs: &[In]) -> Vec<SourceEvent> {
        let mut out = Vec::new();
        for m in msgs {
            apply(a, m, &mut out).unwrap();
        }
        out
    }

    fn rel() -> In {
        data(relation(
            100,
            "public",
            "outbox_events",
            &[
                ("id", oid::UUID as i32),
                ("aggregate_type", oid::VARCHAR as i32),
                ("payload", oid::JSONB as i32),
                ("created_at", oid::TIMESTAMPTZ as i32),
            ],
        ))
    }

    fn row(n: u8) -> In {
        let id = format!("00000000-0000-0000-0000-0000000000{n:02}");
        data(insert(
            100,
            &[
                Some(id.as_bytes()),
                Some(b"Order"),
                Some(br#"{"n": 1}"#),
                Some(b"2024-01-01 00:00:00+00"),
            ],
        ))
    }

    fn changes(out: &[SourceEvent]) -> Vec<&RowChange> {
        out.iter()
            .filter_map(|e| match e {
                SourceEvent::Change(c) => Some(c),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn outbox_insert_becomes_a_transaction() {
        let mut a = adapter(0);
        let other = data(relation(
            200,
            "public",
            "orders",
            &[("id", oid::INT8 as i32)],
        ));
        let out = feed(
            &mut a,
            &[
                rel(),
                other,
                begin(0x500, 0),
                data(insert(200, &[Some(b"not-even-a-number")])),
                row(1),
                row(2),
                commit(0x500, 0x540, 0),
            ],
        );
        assert_eq!(out.len(), 3, "{out:?}");
        let c = changes(&out);
        assert_eq!(c[0].table, outbox());
        assert_eq!(c[0].op, Op::Insert);
        assert_eq!(
            c[0].row.get("id"),
            Some(&ColumnValue::Uuid(
                "00000000-0000-0000-0000-000000000001".into()
            ))
        );
        assert_eq!(
            c[0].row.get("payload"),
            Some(&ColumnValue::Json(r#"{"n": 1}"#.into()))
        );
        assert_eq!(
            c[0].row.get("created_at"),
            Some(&ColumnValue::Timestamp(1_704_067_200_000_000))
        );
        assert_eq!(c[0].source_ts_ms, 946_684_800_000);
        assert_eq!(
            out[2],
            SourceEvent::Commit {
                position: SourcePosition::Lsn(Lsn(0x540)),
                commit_ts_ms: 946_684_800_000
            }
        );
        assert_eq!(a.last_position(), Lsn(0x540));
    }

    /// Rows of a partition (pgoutput without `publish_via_partition_root`) are rows of the
    /// partitioned outbox table, whether the mapping was known before the partition's
    /// Relation message or learnt after it; a partition no longer listed is not an outbox.
    #[test]
    fn partitions_are_rows_of_their_outbox_table() {
        let partition = |oid: i32, name: &str| {
            data(relation(
                oid,
                "public",
                name,
                &[
                    ("id", oid::UUID as i32),
                    ("aggregate_type", oid::VARCHAR as i32),
                    ("payload", oid::JSONB as i32),
                    ("created_at", oid::TIMESTAMPTZ as i32),
                ],
            ))
        };
        let row_of = |oid: i32| {
            data(insert(
                oid,
                &[
                    Some(b"00000000-0000-0000-0000-000000000001"),
                    Some(b"Order"),
                    Some(b"{}"),
                    Some(b"2024-01-01 00:00:00+00"),
                ],
            ))
        };
        let p2024 = TableName::new("public", "outbox_events_2024");
        let p2025 = TableName::new("public", "outbox_events_2025");
        let mut a = adapter(0);
        let out = feed(
            &mut a,
            &[
                partition(300, "outbox_events_2024"),
                begin(0x500, 0),
                row_of(300),
                commit(0x500, 0x540, 0),
            ],
        );
        assert!(changes(&out).is_empty(), "not known as a partition yet");
        a.set_partitions([(p2024.clone(), outbox()), (p2025, outbox())].into());
        let out = feed(
            &mut a,
            &[
                partition(301, "outbox_events_2025"),
                begin(0x600, 0),
                row_of(300),
                row_of(301),
                commit(0x600, 0x640, 0),
            ],
        );
        let c = changes(&out);
        assert_eq!(c.len(), 2, "{out:?}");
        assert!(c.iter().all(|c| c.table == outbox()), "{c:?}");
        a.set_partitions(HashMap::new());
        let out = feed(
            &mut a,
            &[begin(0x700, 0), row_of(300), commit(0x700, 0x740, 0)],
        );
        assert!(changes(&out).is_empty(), "{p2024} is no partition any more");
    }

    #[test]
    fn filtered_transactions_and_keepalives_are_progress() {
        let mut a = adapter(0x10);
        let mut out = Vec::new();
        a.on_keepalive(Lsn(0x8), &mut out);
        assert!(out.is_empty(), "never behind the resume point");
        a.on_keepalive(Lsn(0x20), &mut out);
        assert_eq!(
            out,
            vec![SourceEvent::Progress {
                position: SourcePosition::Lsn(Lsn(0x20))
            }]
        );
        out.clear();
        a.on_keepalive(Lsn(0x20), &mut out);
        assert!(out.is_empty(), "no repeat");
        // Inside a transaction keepalives are not progress.
        apply(&mut a, &begin(0x30, 0), &mut out).unwrap();
        a.on_keepalive(Lsn(0x40), &mut out);
        assert!(out.is_empty());
        apply(&mut a, &commit(0x30, 0x38, 0), &mut out).unwrap();
        assert!(out.is_empty(), "one empty transaction is not reported");
        let mut msgs = Vec::new();
        for i in 0..PROGRESS_EVERY {
            let l = 0x100 + i * 0x10;
            msgs.push(begin(l, 0));
            msgs.push(message(true, l - 1, "other", b"not json"));
            msgs.push(commit(l, l + 8, 0));
        }
        let out = feed(&mut a, &msgs);
        assert_eq!(out.len(), 1, "{out:?}");
        assert!(matches!(out[0], SourceEvent::Progress { .. }));
    }

    #[test]
    fn replayed_transactions_are_skipped() {
        let mut a = adapter(0x540);
        let out = feed(
            &mut a,
            &[
                rel(),
                begin(0x500, 0),
                row(1),
                message(true, 0x510, "outbox", br#"{"id":"x"}"#),
                commit(0x500, 0x540, 0),
                message(false, 0x530, "outbox", br#"{"id":"y"}"#),
                begin(0x540, 0),
                row(2),
                commit(0x540, 0x580, 0),
            ],
        );
        let c = changes(&out);
        assert_eq!(c.len(), 1);
        assert_eq!(
            c[0].row.get("id"),
            Some(&ColumnValue::Uuid(
                "00000000-0000-0000-0000-000000000002".into()
            ))
        );
        // A new session resumes at the last handed-on position and skips what came before.
        let mut b = adapter(0x580);
        let out = feed(
            &mut b,
            &[rel(), begin(0x540, 0), row(2), commit(0x540, 0x580, 0)],
        );
        assert!(out.is_empty());
    }

    #[test]
    fn messages_keep_their_place_in_the_transaction() {
        let mut a = adapter(0);
        let out = feed(
            &mut a,
            &[
                rel(),
                begin(0x900, 0),
                row(1),
                message(
                    true,
                    0x880,
                    "outbox",
                    br#"{"id":"m1","aggregate_type":"Order","aggregate_id":"o-1","event_type":"E","payload":{"a":1,  "b":[1,2]},"seq":3,"f":1.50,"ok":true,"none":null}"#,
                ),
                message(true, 0x890, "ignored", b"garbage"),
                row(2),
                commit(0x900, 0x940, 0),
            ],
        );
        let c = changes(&out);
        assert_eq!(c.len(), 3);
        assert_eq!(c[0].table, outbox());
        assert_eq!(
            c[1].table,
            TableName::new(MESSAGE_SCHEMA, "outbox".to_string())
        );
        assert_eq!(c[2].table, outbox());
        let m = &c[1].row;
        assert_eq!(m.get("id"), Some(&ColumnValue::Text("m1".into())));
        assert_eq!(
            m.get("payload"),
            Some(&ColumnValue::Json(r#"{"a":1,  "b":[1,2]}"#.into())),
            "payload text kept exactly"
        );
        assert_eq!(m.get("seq"), Some(&ColumnValue::Int(3)));
        assert_eq!(m.get("f"), Some(&ColumnValue::Decimal("1.50".into())));
        assert_eq!(m.get("ok"), Some(&ColumnValue::Bool(true)));
        assert_eq!(m.get("none"), Some(&ColumnValue::Null));
        assert_eq!(c[1].source_ts_ms, c[0].source_ts_ms);
    }

    #[test]
    fn non_transactional_message_is_its_own_transaction() {
        let mut a = adapter(0);
        let out = feed(
            &mut a,
            &[message(
                false,
                0x700,
                "outbox",
                br#"{"id":"n","payload":"{\"s\":1}"}"#,
            )],
        );
        assert_eq!(out.len(), 2);
        let c = changes(&out);
        assert_eq!(
            c[0].row.get("payload"),
            Some(&ColumnValue::Text(r#"{"s":1}"#.into()))
        );
        assert!(matches!(
            &out[1],
            SourceEvent::Commit { position: SourcePosition::Lsn(l), .. } if *l == Lsn(0x701)
        ));
        // Replayed after a restart at that position: skipped.
        let mut b = adapter(0x701);
        assert!(feed(&mut b, &[message(false, 0x700, "outbox", b"{}")]).is_empty());
    }

    #[test]
    fn malformed_message_names_the_lsn_not_the_content() {
        for (content, want) in [
            (&b"{\"id\": secret-value"[..], "not valid JSON"),
            (b"[\"secret-value\"]", "not an object"),
            (b"\"secret-value\"", "not an object"),
            (b"42", "not an object"),
            (b"", "truncated"),
            (b"{\"id\":\"secret-value\"", "truncated"),
            (b"{\"a\":1,\"a\":2}", "more than once"),
            (b"{} secret-value", "not valid JSON"),
            (b"\xff\xfe", "not valid JSON"),
        ] {
            let mut a = adapter(0);
            let mut out = Vec::new();
            a.on_logical_message(false, Lsn(0x16_B374_D848), "outbox", content, &mut out)
                .unwrap();
            // Handed on in its place, as a transaction of its own, carrying the failure.
            assert_eq!(out.len(), 2, "{out:?}");
            let c = changes(&out)[0];
            assert_eq!(c.table, TableName::new(MESSAGE_SCHEMA, "outbox"));
            assert_eq!(c.row.iter().count(), 0);
            let u = c.undecodable.as_deref().expect("the decode failure");
            assert_eq!(u.content, content, "the raw content, for a dead letter");
            assert_eq!(u.error.lsn, Lsn(0x16_B374_D848));
            let text = u.error.to_string();
            assert!(text.contains("16/B374D848"), "{text}");
            assert!(text.contains("\"outbox\""), "{text}");
            assert!(text.contains(want), "{text}");
            assert!(!text.contains("secret-value"), "{text}");
            assert!(!format!("{out:?}").contains("secret-value"), "{out:?}");
            assert!(matches!(
                &out[1],
                SourceEvent::Commit { position: SourcePosition::Lsn(l), .. }
                    if *l == Lsn(0x16_B374_D849)
            ));
        }
    }

    #[test]
    fn malformed_transactional_message_keeps_its_place() {
        let mut a = adapter(0);
        let out = feed(
            &mut a,
            &[
                rel(),
                begin(0x900, 0),
                row(1),
                message(true, 0x880, "outbox", b"[1,2]"),
                row(2),
                commit(0x900, 0x940, 0),
            ],
        );
        let c = changes(&out);
        assert_eq!(c.len(), 3);
        assert!(c[0].undecodable.is_none() && c[2].undecodable.is_none());
        let u = c[1].undecodable.as_deref().unwrap();
        assert_eq!(u.error.reason, MessageDecodeError::NotAnObject);
        assert_eq!(u.error.lsn, Lsn(0x880));
        assert_eq!(c[1].source_ts_ms, c[0].source_ts_ms);
        assert!(matches!(out.last(), Some(SourceEvent::Commit { .. })));
        // Replayed before the resume position: dropped like any other change.
        let mut b = adapter(0x940);
        let out = feed(
            &mut b,
            &[
                begin(0x900, 0),
                message(true, 0x880, "outbox", b"not json"),
                commit(0x900, 0x940, 0),
                message(false, 0x920, "outbox", b"not json"),
            ],
        );
        assert!(out.is_empty(), "{out:?}");
    }

    #[test]
    fn protocol_errors() {
        let mut a = adapter(0);
        let mut out = Vec::new();
        assert!(apply(&mut a, &row(1), &mut out).is_err());
        assert!(apply(&mut a, &commit(1, 2, 0), &mut out).is_err());
        apply(&mut a, &begin(1, 0), &mut out).unwrap();
        assert!(matches!(
            apply(&mut a, &row(1), &mut out),
            Err(AdapterError::UnknownRelation { oid: 100, .. })
        ));
        assert!(apply(&mut a, &begin(1, 0), &mut out).is_err());
        assert!(apply(&mut a, &message(false, 1, "outbox", b"{}"), &mut out).is_err());
        assert!(apply(&mut a, &commit(9, 10, 0), &mut out).is_err());
    }

    #[test]
    fn bad_values_name_table_column_and_type() {
        let mut a = adapter(0);
        let mut out = Vec::new();
        for m in [rel(), begin(1, 0)] {
            apply(&mut a, &m, &mut out).unwrap();
        }
        let bad = data(insert(
            100,
            &[
                Some(b"secret"),
                Some(b"Order"),
                None,
                Some(b"2024-01-01 00:00:00+00"),
            ],
        ));
        let err = apply(&mut a, &bad, &mut out).unwrap_err().to_string();
        assert!(
            err.contains("outbox_events") && err.contains("column id") && err.contains("uuid"),
            "{err}"
        );
        assert!(!err.contains("secret"), "{err}");
        let short = data(insert(100, &[None]));
        assert!(matches!(
            apply(&mut a, &short, &mut out),
            Err(AdapterError::ColumnCount { .. })
        ));
        let toast = data(
            Msg::tag(b'I')
                .i32(100)
                .u8(b'N')
                .i16(4)
                .u8(b'u')
                .u8(b'n')
                .u8(b'n')
                .u8(b'n')
                .bytes(),
        );
        assert!(matches!(
            apply(&mut a, &toast, &mut out),
            Err(AdapterError::UnexpectedValue { .. })
        ));
    }
}
