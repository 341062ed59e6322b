//! Offline decoding of binlog files (`outboxd binlog decode FILE...`).
//!
//! Prints one JSON object per row change, one per line:
//!
//! ```json
//! {"file":"mariadb-bin.000001","pos":1234,"gtid":"0-1-5","table":"shop.outbox_events","op":"insert","ts_ms":1700000000000,"row":{"id":1,"payload":{"a":1}}}
//! ```
//!
//! * `pos`: byte offset of the rows event in the file (for a row inside a MySQL compressed
//!   transaction, the offset of its TRANSACTION_PAYLOAD_EVENT), what `mysqlbinlog` prints as
//!   `# at`.
//! * `gtid`: the transaction's GTID (`uuid:gno`, `uuid:tag:gno`, MariaDB `domain-server-seq`),
//!   `null` for anonymous transactions.
//! * `op`: `insert`, `update` (the row is the after image) or `delete` (the before image).
//! * `row` values: integers and floats as JSON numbers, DECIMAL as a string (exact), text as a
//!   string, JSON columns embedded as JSON (as a string when not valid JSON), binary data as a
//!   base64 string (standard alphabet, padded — what Debezium's JSON converter does for bytes),
//!   temporal values as ISO-8601 strings (`2024-02-29T01:02:03.000123`, TIMESTAMP with `Z`,
//!   DATE `2024-02-29`, TIME `-01:02:03`), NULL as `null`.
//!
//! Tables without column names in the binlog (`binlog_row_metadata=MINIMAL`) use the
//! configured column list when there is one, else positional names `@1, @2, …` (recorded in
//! [`DecodeSummary::notes`]).

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::path::Path;

use base64::Engine as _;
use serde::Serialize;

use super::decode::{BinlogDecoder, BinlogMessage, DecodeError, MissingColumnNames};
use super::framing::BinlogFileReader;
use crate::event::{RowChange, TableName};
use crate::position::{BinlogFilePosition, SourcePosition};
use crate::value::ColumnValue;

/// Called for each row change after its JSON line, with the output (the CLI prints the Kafka
/// record an outbox insert becomes).
pub type OnRow<'a> = &'a mut dyn FnMut(&RowChange, &mut dyn Write) -> io::Result<()>;

/// What decoding a file found.
#[derive(Debug, Clone, Default, Serialize)]
pub struct DecodeSummary {
    /// File name.
    pub file: String,
    /// Server version from the FORMAT_DESCRIPTION_EVENT.
    pub server_version: Option<String>,
    /// Events read (events inside compressed transactions included).
    pub events: u64,
    /// Row changes printed.
    pub rows: u64,
    /// Transactions committed (or rolled back) in the file.
    pub transactions: u64,
    /// GTID of the last transaction that committed.
    pub last_gtid: Option<String>,
    /// Position after the last complete transaction (GTID set, MariaDB GTID position, or
    /// `file:pos` when the file has no GTIDs).
    pub end_position: Option<SourcePosition>,
    /// Things worth knowing (positional column names, incidents).
    pub notes: Vec<String>,
}

/// One line for the operator: `N events, N rows in N transactions (server ...), last GTID ...,
/// ends at ...`, then the notes.
impl std::fmt::Display for DecodeSummary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} events, {} rows in {} transactions",
            self.events, self.rows, self.transactions
        )?;
        if let Some(v) = &self.server_version {
            write!(f, " (server {v})")?;
        }
        if let Some(g) = &self.last_gtid {
            write!(f, ", last GTID {g}")?;
        }
        if let Some(p) = &self.end_position {
            write!(f, ", ends at {p}")?;
        }
        for n in &self.notes {
            write!(f, "\n  note: {n}")?;
        }
        Ok(())
    }
}

/// Decodes one binlog file, writing one JSON line per row change to `out`.
///
/// `columns` are explicit column lists for tables whose binlog has no column names. `on_row` is
/// called after each row's line (the CLI prints the Kafka record an outbox insert becomes).
/// Stops at the first damaged event with the error (lines before it are already written).
pub fn decode_file_to_json(
    path: &Path,
    out: &mut dyn Write,
    columns: &BTreeMap<TableName, Vec<String>>,
    mut on_row: Option<OnRow<'_>>,
) -> Result<DecodeSummary, DecodeError> {
    let mut reader = BinlogFileReader::open(path)?;
    let file = reader.file_name().to_owned();
    let mut decoder = BinlogDecoder::new()
        .with_columns(columns.clone())
        .with_missing_names(MissingColumnNames::Positional);
    decoder.set_file(file.clone(), reader.offset());

    let mut summary = DecodeSummary {
        file: file.clone(),
        ..DecodeSummary::default()
    };
    let mut messages = Vec::new();
    let mut gtid_text: Option<String> = None;
    let mut line = Vec::with_capacity(512);

    while let Some(framed) = reader.next_event()? {
        summary.events += 1;
        messages.clear();
        let at = BinlogFilePosition::new(file.clone(), framed.offset);
        decoder.decode_event_into(&framed.event, Some(&at), &mut messages)?;
        summary.notes.extend(decoder.take_notes());
        for message in messages.drain(..) {
            match message {
                BinlogMessage::FormatDescription { server_version, .. } => {
                    summary.server_version = Some(server_version);
                }
                BinlogMessage::Begin { gtid, .. } => {
                    gtid_text = gtid.map(|g| g.to_string());
                }
                BinlogMessage::Commit { .. } | BinlogMessage::Rollback => {
                    summary.transactions += 1;
                    if let Some(g) = decoder.last_committed_gtid() {
                        summary.last_gtid = Some(g.to_string());
                    }
                }
                BinlogMessage::Incident { message } => {
                    summary.notes.push(format!(
                        "INCIDENT_EVENT at {file}:{}: {message}",
                        framed.offset
                    ));
                }
                BinlogMessage::Rows {
                    table,
                    op,
                    rows,
                    ts_ms,
                } => {
                    let at = EventAt {
                        file: &file,
                        pos: framed.offset,
                        gtid: gtid_text.as_deref(),
                    };
                    for row in rows {
                        let change = RowChange {
                            table: table.clone(),
                            op,
                            row,
                            source_ts_ms: ts_ms,
                            undecodable: None,
                        };
                        line.clear();
                        write_row_line(&mut line, &at, &change);
                        out.write_all(&line).map_err(DecodeError::Output)?;
                        summary.rows += 1;
                        if let Some(cb) = on_row.as_mut() {
                            cb(&change, out).map_err(DecodeError::Output)?;
                        }
                    }
                }
                _ => {}
            }
        }
        if !decoder.in_transaction() {
            summary.end_position = Some(decoder.current_position());
        }
    }
    Ok(summary)
}

/// Where a row change was read: the event's file and offset, and its transaction's GTID.
struct EventAt<'a> {
    file: &'a str,
    pos: u64,
    gtid: Option<&'a str>,
}

fn write_row_line(line: &mut Vec<u8>, at: &EventAt<'_>, change: &RowChange) {
    let mut obj = serde_json::Map::new();
    obj.insert("file".into(), at.file.into());
    obj.insert("pos".into(), at.pos.into());
    obj.insert(
        "gtid".into(),
        at.gtid.map_or(serde_json::Value::Null, Into::into),
    );
    obj.insert("table".into(), change.table.to_string().into());
    obj.insert("op".into(), change.op.as_str().into());
    obj.insert("ts_ms".into(), change.source_ts_ms.into());
    let mut values = serde_json::Map::new();
    for (name, value) in change.row.iter() {
        values.insert(name.to_owned(), column_value_json(value));
    }
    obj.insert("row".into(), serde_json::Value::Object(values));
    // Writing JSON into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *line, &serde_json::Value::Object(obj));
    line.push(b'\n');
}

/// A column value as JSON (see the module docs).
pub fn column_value_json(value: &ColumnValue) -> serde_json::Value {
    use serde_json::Value as J;
    match value {
        ColumnValue::Null => J::Null,
        ColumnValue::Int(v) => J::from(*v),
        ColumnValue::UInt(v) => J::from(*v),
        ColumnValue::Float(v) => serde_json::Number::from_f64(*v).map_or(J::Null, J::Number),
        ColumnValue::Bool(v) => J::Bool(*v),
        ColumnValue::Decimal(s) | ColumnValue::Text(s) | ColumnValue::Uuid(s) => {
            J::String(s.clone())
        }
        ColumnValue::Json(s) => serde_json::from_str(s).unwrap_or_else(|_| J::String(s.clone())),
        ColumnValue::Bytes(b) => J::String(base64::engine::general_purpose::STANDARD.encode(b)),
        ColumnValue::Timestamp(_)
        | ColumnValue::DateTime(_)
        | ColumnValue::Date(_)
        | ColumnValue::Time(_) => J::String(value.to_string()),
    }
}
