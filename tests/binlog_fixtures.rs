//! The offline binlog decoder on real MySQL / MariaDB binlog files
//! (`../shared/fixtures/mysql-binlogs`, from `mysql_common`'s test data), on synthetic files for
//! what the fixtures lack (compressed transactions, tagged GTIDs, MariaDB standalone groups,
//! encrypted/compressed MariaDB binlogs), and on damaged input: every file must give `Ok` or
//! `Err`, never a panic.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use mysql_common::binlog::consts::TransactionPayloadCompressionType;
use mysql_common::binlog::events::{
    GtidEvent, PreviousGtidsEvent, PreviousGtidsSid, QueryEvent, TransactionPayloadEvent,
};
use mysql_common::packets::{GnoInterval, Tag};
use mysql_common::proto::MySerialize;

use outboxd::event::{Op, TableName};
use outboxd::position::{BinlogFilePosition, GtidSet, SourcePosition, Uuid};
use outboxd::source::mysql::{
    decode_file_to_json, BinlogDecoder, BinlogFileReader, BinlogMessage, DecodeError,
    MissingColumnNames, TxnGtid,
};
use outboxd::value::ColumnValue;

const DAMAGED: [&str; 3] = [
    "binlog_truncated_event.000001",
    "binlog_truncated_prev_gtid_event.000001",
    "corrupt-relay-bin.000624",
];

/// Files from MySQL development releases with formats the decoder rejects on purpose.
const UNSUPPORTED: [(&str, &str); 2] = [
    // MySQL 5.2 development tree: pre-GA rows events (types 20-22).
    ("ver_5_1-wl2325_s.001", "pre-GA rows event"),
    // Same tree: an XID_EVENT with 19 bytes of body instead of 8.
    ("ver_5_1-wl2325_r.001", "malformed XID_EVENT"),
];

/// The fixtures: `$OUTBOXD_TEST_BINLOG_FIXTURES`, else `../shared/fixtures/mysql-binlogs`
/// beside the checkout (a git worktree elsewhere names the folder with the variable).
fn fixtures() -> Option<PathBuf> {
    let dir = std::env::var_os("OUTBOXD_TEST_BINLOG_FIXTURES")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures/mysql-binlogs")
        });
    if dir.is_dir() {
        Some(dir)
    } else {
        println!("skipping: {} is absent", dir.display());
        None
    }
}

fn fixture_bytes(name: &str) -> Option<Vec<u8>> {
    let path = fixtures()?.join(name);
    Some(std::fs::read(path).expect("fixture readable"))
}

/// Decodes a whole file, returning the JSON lines and the summary.
fn decode_json(
    path: &Path,
    columns: &BTreeMap<TableName, Vec<String>>,
) -> (
    Vec<serde_json::Value>,
    Result<outboxd::source::mysql::DecodeSummary, DecodeError>,
) {
    let mut out = Vec::new();
    let result = decode_file_to_json(path, &mut out, columns, None);
    let lines = String::from_utf8(out)
        .expect("output is UTF-8")
        .lines()
        .map(|l| serde_json::from_str(l).expect("each line is JSON"))
        .collect();
    (lines, result)
}

/// Decodes bytes with a decoder, collecting every message; stops at the first error.
fn decode_bytes(
    bytes: &[u8],
    mut decoder: BinlogDecoder,
) -> (Vec<BinlogMessage>, Result<BinlogDecoder, DecodeError>) {
    let mut messages = Vec::new();
    let mut reader = match BinlogFileReader::new(bytes, "test-bin.000001") {
        Ok(r) => r,
        Err(e) => return (messages, Err(e)),
    };
    decoder.set_file("test-bin.000001", 4);
    loop {
        match reader.next_event() {
            Ok(Some(framed)) => {
                let at = BinlogFilePosition::new("test-bin.000001", framed.offset);
                if let Err(e) = decoder.decode_event_into(&framed.event, Some(&at), &mut messages) {
                    return (messages, Err(e));
                }
            }
            Ok(None) => return (messages, Ok(decoder)),
            Err(e) => return (messages, Err(e)),
        }
    }
}

fn offline_decoder() -> BinlogDecoder {
    BinlogDecoder::new().with_missing_names(MissingColumnNames::Positional)
}

#[test]
fn every_fixture_decodes_or_fails_cleanly() {
    let Some(dir) = fixtures() else { return };
    let mut names: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("fixture dir readable")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_none_or(|e| e != "md"))
        .collect();
    names.sort();
    assert!(
        names.len() >= 30,
        "expected the fixture set, found {}",
        names.len()
    );
    for path in names {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let (_, result) = decode_json(&path, &BTreeMap::new());
        if DAMAGED.contains(&name.as_str()) {
            let err = result.expect_err(&format!("{name} is damaged and must not decode"));
            println!("{name}: {err}");
            assert!(
                err.to_string().contains(&name),
                "{name}: error names the file: {err}"
            );
        } else if let Some((_, expected)) = UNSUPPORTED.iter().find(|(n, _)| *n == name) {
            let err = result.expect_err(&format!("{name} must be rejected"));
            println!("{name}: {err}");
            assert!(err.to_string().contains(expected), "{name}: {err}");
        } else {
            let summary = result.unwrap_or_else(|e| panic!("{name} must decode: {e}"));
            assert!(summary.events > 0, "{name}");
        }
    }
}

#[test]
fn damaged_fixtures_give_typed_errors() {
    let Some(dir) = fixtures() else { return };
    let (_, r) = decode_json(&dir.join("binlog_truncated_event.000001"), &BTreeMap::new());
    assert!(matches!(r, Err(DecodeError::Truncated { .. })), "{r:?}");
    let (_, r) = decode_json(
        &dir.join("binlog_truncated_prev_gtid_event.000001"),
        &BTreeMap::new(),
    );
    match r {
        Err(DecodeError::Truncated { at, .. }) => assert_eq!(at.pos, 120),
        other => panic!("{other:?}"),
    }
    let (_, r) = decode_json(&dir.join("corrupt-relay-bin.000624"), &BTreeMap::new());
    match r {
        Err(DecodeError::Malformed { what, at, .. }) => {
            assert_eq!(what, "QUERY_EVENT");
            assert_eq!(at.file, "corrupt-relay-bin.000624");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn mariadb_outbox_rows_with_names_and_gtids() {
    let Some(dir) = fixtures() else { return };
    let (lines, r) = decode_json(&dir.join("mariadb-bin.000001"), &BTreeMap::new());
    let summary = r.expect("decodes");
    assert_eq!(summary.rows, 2);
    assert_eq!(summary.transactions, 2);
    assert_eq!(summary.last_gtid.as_deref(), Some("0-1-2"));
    assert_eq!(
        summary
            .end_position
            .as_ref()
            .map(|p| p.to_string())
            .as_deref(),
        Some("mariadb_gtid:0-1-2")
    );
    assert!(summary.notes.is_empty(), "{:?}", summary.notes);
    let first = &lines[0];
    assert_eq!(first["table"], "toddy_test.outbox");
    assert_eq!(first["op"], "insert");
    assert_eq!(first["gtid"], "0-1-1");
    assert_eq!(first["file"], "mariadb-bin.000001");
    let row = first["row"].as_object().unwrap();
    let names: Vec<&str> = row.keys().map(String::as_str).collect();
    assert_eq!(names, ["id", "topic", "event_type", "event", "created"]);
    assert_eq!(row["id"], 62);
    assert_eq!(row["topic"], "foo");
    // `event` is a LONGBLOB (binary collation): base64 of {"foo":1}.
    assert_eq!(row["event"], "eyJmb28iOjF9");
    assert_eq!(row["created"], "2022-04-20T22:18:04Z");
    assert_eq!(lines[1]["row"]["id"], 63);
    assert_eq!(lines[1]["gtid"], "0-1-2");
}

#[test]
fn mariadb_messages_and_positions() {
    let Some(bytes) = fixture_bytes("mariadb-bin.000001") else {
        return;
    };
    let (messages, r) = decode_bytes(&bytes, BinlogDecoder::new());
    let decoder = r.expect("decodes with the strict decoder: names are in the binlog");
    assert!(matches!(
        &messages[0],
        BinlogMessage::FormatDescription { server_version, checksum: true }
            if server_version.contains("MariaDB")
    ));
    assert!(messages
        .iter()
        .any(|m| matches!(m, BinlogMessage::MariadbGtidList(_))));
    let begins: Vec<&Option<TxnGtid>> = messages
        .iter()
        .filter_map(|m| match m {
            BinlogMessage::Begin {
                gtid, standalone, ..
            } => {
                assert!(!standalone);
                Some(gtid)
            }
            _ => None,
        })
        .collect();
    assert_eq!(begins.len(), 2);
    assert_eq!(
        begins[1],
        &Some(TxnGtid::Mariadb {
            domain: 0,
            server: 1,
            seq: 2
        })
    );
    let rows = messages
        .iter()
        .find_map(|m| match m {
            BinlogMessage::Rows {
                table, op, rows, ..
            } => Some((table, *op, rows)),
            _ => None,
        })
        .unwrap();
    assert_eq!(rows.0, &TableName::new("toddy_test", "outbox"));
    assert_eq!(rows.1, Op::Insert);
    assert_eq!(rows.2[0].get("id"), Some(&ColumnValue::Int(62)));
    assert_eq!(
        rows.2[0].get("event"),
        Some(&ColumnValue::Bytes(b"{\"foo\":1}".to_vec()))
    );
    assert_eq!(
        rows.2[0]
            .get("event")
            .unwrap()
            .as_payload_bytes()
            .unwrap()
            .as_ref(),
        b"{\"foo\":1}"
    );
    assert_eq!(decoder.current_position().to_string(), "mariadb_gtid:0-1-2");
    assert_eq!(
        decoder.position().to_string(),
        format!("test-bin.000001:{}", bytes.len())
    );
    // Balanced: every Begin is closed.
    let opens = messages
        .iter()
        .filter(|m| matches!(m, BinlogMessage::Begin { .. }))
        .count();
    let closes = messages
        .iter()
        .filter(|m| matches!(m, BinlogMessage::Commit { .. } | BinlogMessage::Rollback))
        .count();
    assert_eq!(opens, closes);
}

#[test]
fn previous_gtids_without_tag() {
    let Some(bytes) = fixture_bytes("binlog_transaction_previous_GTID_no_tag.000001") else {
        return;
    };
    let (messages, r) = decode_bytes(&bytes, BinlogDecoder::new());
    let decoder = r.expect("decodes");
    let set = messages
        .iter()
        .find_map(|m| match m {
            BinlogMessage::PreviousGtids(s) => Some(s.clone()),
            _ => None,
        })
        .expect("PREVIOUS_GTIDS");
    let uuid: Uuid = "b9b88c66-0755-11f1-9899-4a9da94c4d71".parse().unwrap();
    assert_eq!(set.to_string(), "b9b88c66-0755-11f1-9899-4a9da94c4d71:1-2");
    assert!(set.contains(uuid, None, 2));
    assert!(!set.contains(uuid, None, 3));
    assert_eq!(decoder.gtid_set(), &set);
}

#[test]
fn mysql_gtid_transactions_and_ddl_commits() {
    let Some(bytes) = fixture_bytes("rpl_atomic_ddl_rollback_full.000001") else {
        return;
    };
    let (messages, r) = decode_bytes(&bytes, BinlogDecoder::new());
    let decoder = r.expect("decodes");
    // GTID, then a DDL statement without BEGIN: the statement commits the group.
    let kinds: Vec<&str> = messages
        .iter()
        .map(|m| match m {
            BinlogMessage::Begin { .. } => "begin",
            BinlogMessage::Ddl { .. } => "ddl",
            BinlogMessage::Commit { .. } => "commit",
            _ => "other",
        })
        .filter(|k| *k != "other")
        .collect();
    assert_eq!(kinds, ["begin", "ddl", "commit"].repeat(4));
    assert_eq!(
        decoder.current_position().to_string(),
        "mysql_gtid_set:a0205340-db2c-11e7-babd-340286faf52d:1-4"
    );

    // MySQL 5.6 with GTIDs: a BEGIN … COMMIT transaction between two DDLs.
    let Some(bytes) = fixture_bytes("binlog_transaction_with_GTID.000001") else {
        return;
    };
    let (messages, r) = decode_bytes(&bytes, BinlogDecoder::new());
    r.expect("decodes");
    let gtids: Vec<String> = messages
        .iter()
        .filter_map(|m| match m {
            BinlogMessage::Begin { gtid: Some(g), .. } => Some(g.to_string()),
            _ => None,
        })
        .collect();
    assert_eq!(
        gtids,
        (1..=3)
            .map(|n| format!("006c2cf2-b1ea-11e4-9057-8c705a3d3e78:{n}"))
            .collect::<Vec<_>>()
    );
}

#[test]
fn anonymous_gtids_and_file_positions() {
    let Some(bytes) = fixture_bytes("binlog_transaction_with_anonymous_GTID.000001") else {
        return;
    };
    let (messages, r) = decode_bytes(&bytes, BinlogDecoder::new());
    let decoder = r.expect("decodes");
    assert!(messages
        .iter()
        .any(|m| matches!(m, BinlogMessage::Begin { gtid: None, .. })));
    // The file ends with a ROTATE_EVENT: resume in the next file at 4.
    let rotate = messages
        .iter()
        .find_map(|m| match m {
            BinlogMessage::Rotate { next_file, pos } => Some((next_file.clone(), *pos)),
            _ => None,
        })
        .expect("rotate");
    assert_eq!(rotate.1, 4);
    assert_eq!(
        decoder.current_position(),
        SourcePosition::BinlogFile(BinlogFilePosition::new(rotate.0, 4))
    );
}

#[test]
fn file_position_only_moves_at_transaction_boundaries() {
    // MySQL 5.1, no GTIDs: BEGIN, statements, SAVEPOINTs, XID.
    let Some(bytes) = fixture_bytes("binlog_savepoint.000001") else {
        return;
    };
    let mut reader = BinlogFileReader::new(&bytes[..], "binlog_savepoint.000001").unwrap();
    let mut decoder = BinlogDecoder::new();
    decoder.set_file("binlog_savepoint.000001", 4);
    let mut before_txn = None;
    let mut saw_inside = false;
    while let Some(framed) = reader.next_event().unwrap() {
        let at = BinlogFilePosition::new("binlog_savepoint.000001", framed.offset);
        let was_idle = !decoder.in_transaction();
        let checkpoint = decoder.current_position();
        let mut out = Vec::new();
        decoder
            .decode_event_into(&framed.event, Some(&at), &mut out)
            .unwrap();
        if was_idle && decoder.in_transaction() {
            before_txn = Some(checkpoint);
        }
        if decoder.in_transaction() {
            saw_inside = true;
            // Inside the transaction the checkpoint stays where it started.
            assert_eq!(Some(decoder.current_position()), before_txn);
            assert_eq!(decoder.position().pos, framed.offset + framed.size);
        }
    }
    assert!(saw_inside);
    assert_eq!(
        decoder.current_position().to_string(),
        format!("binlog_file:binlog_savepoint.000001:{}", bytes.len())
    );
}

#[test]
fn mysql_binary_json_columns() {
    let Some(dir) = fixtures() else { return };
    let (lines, r) = decode_json(&dir.join("json.binlog.000001"), &BTreeMap::new());
    r.expect("decodes");
    let first = &lines[0]["row"];
    // No column names in this binlog (MINIMAL metadata): positional names.
    assert_eq!(first["@1"], 1);
    assert_eq!(
        first["@2"],
        serde_json::json!({"age": 24, "data": "xxxxxxxxxx", "name": "Joe"})
    );
    assert!(lines.iter().any(|l| l["op"] == "update"));
    // Partial JSON updates (binlog_row_value_options=PARTIAL_JSON) show the operations.
    assert!(lines
        .iter()
        .any(|l| l["row"]["@2"]
            == serde_json::json!([{"op": "replace", "path": "$.age", "value": 26}])));

    let Some(bytes) = fixture_bytes("json.binlog.000001") else {
        return;
    };
    let (messages, r) = decode_bytes(&bytes, offline_decoder());
    r.expect("decodes");
    let json = messages
        .iter()
        .find_map(|m| match m {
            BinlogMessage::Rows { rows, .. } => rows[0].get("@2").cloned(),
            _ => None,
        })
        .unwrap();
    match json {
        ColumnValue::Json(text) => {
            let v: serde_json::Value = serde_json::from_str(&text).unwrap();
            assert_eq!(v["name"], "Joe");
        }
        other => panic!("expected Json, got {other:?}"),
    }
}

#[test]
fn enum_set_labels_and_update_delete_images() {
    let Some(dir) = fixtures() else { return };
    let (lines, r) = decode_json(&dir.join("mysql-enum-string-set.000001"), &BTreeMap::new());
    r.expect("decodes");
    let ops: Vec<&str> = lines.iter().map(|l| l["op"].as_str().unwrap()).collect();
    assert_eq!(ops, ["insert", "update", "delete"]);
    assert_eq!(lines[0]["row"]["f3"], "var1");
    assert_eq!(lines[0]["row"]["f4"], "one,three");
    // UPDATE shows the after image, DELETE the before image.
    assert_eq!(lines[1]["row"]["f1"], "field1");
    assert_eq!(lines[1]["row"]["f3"], "variant2");
    assert_eq!(lines[2]["row"]["f4"], "two,four");
}

#[test]
fn bit_time_and_unsigned_values() {
    let Some(dir) = fixtures() else { return };
    let (lines, r) = decode_json(&dir.join("mysql_type_bit.000001"), &BTreeMap::new());
    r.expect("decodes");
    assert_eq!(
        lines[0]["row"],
        serde_json::json!({"a": 4, "b": "foo", "c": 32})
    );

    let (lines, r) = decode_json(&dir.join("time_issue.000001"), &BTreeMap::new());
    r.expect("decodes");
    assert_eq!(lines[0]["row"]["@1"], "-507:48:27");

    let (lines, r) = decode_json(&dir.join("vector.binlog"), &BTreeMap::new());
    r.expect("decodes");
    assert_eq!(lines.len(), 10);
}

#[test]
fn minimal_row_metadata_positional_names_or_configured_columns() {
    let Some(dir) = fixtures() else { return };
    let path = dir.join("minimal_row_metadata.000001");
    // Offline without configuration: positional names and a note.
    let (lines, r) = decode_json(&path, &BTreeMap::new());
    let summary = r.expect("decodes");
    assert!(
        summary.notes.iter().any(|n| n.contains("noria.t1")),
        "{:?}",
        summary.notes
    );
    let row = lines[0]["row"].as_object().unwrap();
    // binlog_row_image=MINIMAL: only some columns are in the image; @5 is an INT UNSIGNED.
    assert_eq!(row["@1"], 1);
    assert_eq!(row["@5"], 3_230_202_323u64);

    // With configured columns the names come from the configuration.
    let table = TableName::new("noria", "t1");
    let columns = BTreeMap::from([(
        table.clone(),
        ["id", "name", "label", "flag", "big"]
            .map(String::from)
            .to_vec(),
    )]);
    let (lines, r) = decode_json(&path, &columns);
    r.expect("decodes");
    assert_eq!(lines[0]["row"]["id"], 1);
    assert_eq!(lines[0]["row"]["big"], 3_230_202_323u64);

    // A configured list of the wrong length is an error naming both counts.
    let wrong = BTreeMap::from([(table.clone(), vec!["id".to_owned()])]);
    let (_, r) = decode_json(&path, &wrong);
    match r {
        Err(
            e @ DecodeError::ColumnCountMismatch {
                configured: 1,
                actual: 5,
                ..
            },
        ) => {
            assert!(e.to_string().contains("noria.t1"), "{e}");
        }
        other => panic!("{other:?}"),
    }

    // The relay (no configuration, strict policy) refuses with the operator's fix.
    let bytes = std::fs::read(&path).unwrap();
    let (_, r) = decode_bytes(&bytes, BinlogDecoder::new());
    let err = r.expect_err("no names");
    assert_eq!(
        err.to_string(),
        "table noria.t1 has no column names in the binlog; set binlog_row_metadata=FULL on the \
         server (SET GLOBAL binlog_row_metadata=FULL) or list the columns in the connector \
         config (columns.<table> = [...])"
    );

    // A table filter that leaves the table out skips its rows without needing names.
    let filter = [TableName::new("shop", "outbox_events")]
        .into_iter()
        .collect();
    let (messages, r) = decode_bytes(&bytes, BinlogDecoder::new().with_table_filter(Some(filter)));
    r.expect("filtered tables are not decoded");
    assert!(!messages
        .iter()
        .any(|m| matches!(m, BinlogMessage::Rows { .. })));
}

#[test]
fn old_row_formats_decode() {
    let Some(dir) = fixtures() else { return };
    for (name, rows) in [
        ("ver_5_1_23.001", 5),
        ("ver_trunk_row_v2.001", 5),
        ("write-full-row.binlog", 7),
        ("update-full-row.binlog", 7),
        ("update-partial-row.binlog", 7),
        ("binlog-invisible-columns.000001", 3),
    ] {
        let (lines, r) = decode_json(&dir.join(name), &BTreeMap::new());
        let s = r.unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(s.rows, rows, "{name}");
        assert_eq!(lines.len() as u64, rows, "{name}");
    }
}

#[test]
fn checksum_mismatch_is_detected() {
    let Some(mut bytes) = fixture_bytes("mariadb-bin.000001") else {
        return;
    };
    // Flip a bit in the body of the second event (right after the FDE).
    let fde_size = u32::from_le_bytes(bytes[4 + 9..4 + 13].try_into().unwrap()) as usize;
    let second = 4 + fde_size;
    bytes[second + 19 + 2] ^= 0x10;
    let (_, r) = decode_bytes(&bytes, BinlogDecoder::new());
    match r {
        Err(DecodeError::Checksum {
            at,
            stored,
            computed,
        }) => {
            assert_eq!(at.pos, second as u64);
            assert_ne!(stored, computed);
        }
        other => panic!("expected a checksum error, got {other:?}"),
    }
}

// ---------------------------------------------------------------------------------------------
// Synthetic binlogs: compressed transactions, tagged GTIDs, MariaDB specifics
// ---------------------------------------------------------------------------------------------

/// A raw event of a real file: header fields and body (checksum removed).
#[derive(Clone)]
struct RawEvent {
    timestamp: u32,
    event_type: u8,
    server_id: u32,
    flags: u16,
    body: Vec<u8>,
    /// The event exactly as in the file (for the FDE, which is copied verbatim).
    original: Vec<u8>,
}

/// Splits a file into events (no validation: fixtures known to be well-formed).
fn raw_events(bytes: &[u8], checksummed: bool) -> Vec<RawEvent> {
    let mut out = Vec::new();
    let mut pos = 4;
    while pos + 19 <= bytes.len() {
        let h = &bytes[pos..pos + 19];
        let size = u32::from_le_bytes(h[9..13].try_into().unwrap()) as usize;
        let ev = &bytes[pos..pos + size];
        let event_type = h[4];
        let crc = if checksummed && event_type != 15 {
            4
        } else {
            0
        };
        out.push(RawEvent {
            timestamp: u32::from_le_bytes(h[0..4].try_into().unwrap()),
            event_type,
            server_id: u32::from_le_bytes(h[5..9].try_into().unwrap()),
            flags: u16::from_le_bytes(h[17..19].try_into().unwrap()),
            body: ev[19..size - crc].to_vec(),
            original: ev.to_vec(),
        });
        pos += size;
    }
    out
}

/// Builds a binlog file event by event, with sizes, positions and CRC32s filled in.
struct FileBuilder {
    bytes: Vec<u8>,
    crc: bool,
}

impl FileBuilder {
    fn new(fde: &RawEvent, crc: bool) -> Self {
        let mut bytes = vec![0xfe, b'b', b'i', b'n'];
        bytes.extend_from_slice(&fde.original);
        Self { bytes, crc }
    }

    fn push(&mut self, event_type: u8, server_id: u32, flags: u16, body: &[u8]) -> u64 {
        let offset = self.bytes.len() as u64;
        let event = encode_event(
            1_700_000_000,
            event_type,
            server_id,
            flags,
            body,
            offset,
            self.crc,
        );
        self.bytes.extend_from_slice(&event);
        offset
    }

    fn push_raw(&mut self, ev: &RawEvent) -> u64 {
        let offset = self.bytes.len() as u64;
        let mut event = encode_event(
            ev.timestamp,
            ev.event_type,
            ev.server_id,
            ev.flags,
            &ev.body,
            offset,
            self.crc,
        );
        // Keep the original timestamp.
        event[0..4].copy_from_slice(&ev.timestamp.to_le_bytes());
        if self.crc {
            let n = event.len() - 4;
            let crc = crc32fast::hash(&event[..n]);
            event[n..].copy_from_slice(&crc.to_le_bytes());
        }
        self.bytes.extend_from_slice(&event);
        offset
    }
}

/// One event: header, body, optional CRC32; `log_pos` is the end of the event when `offset` is
/// non-zero (0 for events inside a transaction payload).
fn encode_event(
    timestamp: u32,
    event_type: u8,
    server_id: u32,
    flags: u16,
    body: &[u8],
    offset: u64,
    crc: bool,
) -> Vec<u8> {
    let size = 19 + body.len() + if crc { 4 } else { 0 };
    let log_pos = if offset == 0 {
        0
    } else {
        offset as u32 + size as u32
    };
    let mut ev = Vec::with_capacity(size);
    ev.extend_from_slice(&timestamp.to_le_bytes());
    ev.push(event_type);
    ev.extend_from_slice(&server_id.to_le_bytes());
    ev.extend_from_slice(&(size as u32).to_le_bytes());
    ev.extend_from_slice(&log_pos.to_le_bytes());
    ev.extend_from_slice(&flags.to_le_bytes());
    ev.extend_from_slice(body);
    if crc {
        let c = crc32fast::hash(&ev);
        ev.extend_from_slice(&c.to_le_bytes());
    }
    ev
}

/// A zstd frame holding `data` in raw (stored) blocks: valid zstd without a compressor.
fn zstd_stored_frame(data: &[u8]) -> Vec<u8> {
    const MAX_BLOCK: usize = 128 * 1024;
    let mut f = vec![0x28, 0xb5, 0x2f, 0xfd];
    // Frame header descriptor: 8-byte content size, single segment, no checksum, no dictionary.
    f.push(0xe0);
    f.extend_from_slice(&(data.len() as u64).to_le_bytes());
    let chunks: Vec<&[u8]> = if data.is_empty() {
        vec![&[]]
    } else {
        data.chunks(MAX_BLOCK).collect()
    };
    for (i, chunk) in chunks.iter().enumerate() {
        let last = u32::from(i + 1 == chunks.len());
        // Block header: last flag, type 0 (raw), size.
        let header = ((chunk.len() as u32) << 3) | last;
        f.extend_from_slice(&header.to_le_bytes()[..3]);
        f.extend_from_slice(chunk);
    }
    f
}

fn serialize(v: &impl MySerialize) -> Vec<u8> {
    let mut b = Vec::new();
    v.serialize(&mut b);
    b
}

/// mysql_type_bit.000001 (MySQL 8.0.26, CRC32, full row metadata): FDE and the events of its
/// one transaction with rows (GTID, BEGIN, TABLE_MAP, WRITE_ROWS, XID).
fn mysql8_transaction() -> Option<(RawEvent, Vec<RawEvent>)> {
    let bytes = fixture_bytes("mysql_type_bit.000001")?;
    let events = raw_events(&bytes, true);
    let fde = events[0].clone();
    let rows_idx = events
        .iter()
        .position(|e| e.event_type == 30)
        .expect("WRITE_ROWS");
    let txn = events[rows_idx - 3..=rows_idx + 1].to_vec();
    assert_eq!(
        txn.iter().map(|e| e.event_type).collect::<Vec<_>>(),
        [33, 2, 19, 30, 16],
        "GTID, BEGIN, TABLE_MAP, WRITE_ROWS, XID"
    );
    Some((fde, txn))
}

/// A decoded row change: table, operation, column name and value pairs.
type FlatRow = (TableName, Op, Vec<(String, ColumnValue)>);

fn rows_of(messages: &[BinlogMessage]) -> Vec<FlatRow> {
    messages
        .iter()
        .filter_map(|m| match m {
            BinlogMessage::Rows {
                table, op, rows, ..
            } => Some(rows.iter().map(|r| {
                (
                    table.clone(),
                    *op,
                    r.iter().map(|(k, v)| (k.to_owned(), v.clone())).collect(),
                )
            })),
            _ => None,
        })
        .flatten()
        .collect()
}

#[test]
fn compressed_transactions_expand_to_rows() {
    let Some((fde, txn)) = mysql8_transaction() else {
        return;
    };

    // Reference: the transaction as the server wrote it.
    let mut plain = FileBuilder::new(&fde, true);
    for ev in &txn {
        plain.push_raw(ev);
    }
    let (expected_msgs, r) = decode_bytes(&plain.bytes, BinlogDecoder::new());
    r.expect("plain file decodes");
    let expected = rows_of(&expected_msgs);
    assert_eq!(expected.len(), 1);

    // The inner events of a payload: no checksums, log_pos 0.
    let mut inner = Vec::new();
    for ev in &txn[1..] {
        inner.extend(encode_event(
            ev.timestamp,
            ev.event_type,
            ev.server_id,
            ev.flags,
            &ev.body,
            0,
            false,
        ));
    }

    for (algorithm, payload) in [
        (TransactionPayloadCompressionType::NONE, inner.clone()),
        (
            TransactionPayloadCompressionType::ZSTD,
            zstd_stored_frame(&inner),
        ),
    ] {
        let tpe = TransactionPayloadEvent::new(
            payload.len() as u64,
            algorithm,
            inner.len() as u64,
            payload.as_slice(),
        );
        let mut file = FileBuilder::new(&fde, true);
        file.push_raw(&txn[0]); // GTID stays outside the payload
        let tpe_offset = file.push(40, 1, 0, &serialize(&tpe));
        let (messages, r) = decode_bytes(&file.bytes, BinlogDecoder::new());
        let decoder = r.unwrap_or_else(|e| panic!("{algorithm:?}: {e}"));
        assert_eq!(rows_of(&messages), expected, "{algorithm:?}");
        assert!(matches!(
            messages.last(),
            Some(BinlogMessage::Commit { xid: Some(_), .. })
        ));
        // Position: after the payload event (inner events do not move it).
        assert_eq!(decoder.position().pos, file.bytes.len() as u64);
        assert!(decoder
            .current_position()
            .to_string()
            .starts_with("mysql_gtid_set:"));

        // Offline output points rows inside the payload at the payload event.
        let dir = std::env::temp_dir().join(format!("outboxd-tpe-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(format!("compressed-{algorithm:?}.000001"));
        std::fs::write(&path, &file.bytes).unwrap();
        let (lines, r) = decode_json(&path, &BTreeMap::new());
        r.expect("offline decode");
        assert_eq!(lines.len(), 1);
        assert_eq!(lines[0]["pos"], tpe_offset);
        assert_eq!(
            lines[0]["row"],
            serde_json::json!({"a": 4, "b": "foo", "c": 32})
        );
        let _ = std::fs::remove_file(&path);
    }

    // A payload that lies about its size, or is cut short, is an error.
    let bad = TransactionPayloadEvent::new(
        inner.len() as u64,
        TransactionPayloadCompressionType::NONE,
        inner.len() as u64,
        &inner[..inner.len() - 3],
    );
    let mut file = FileBuilder::new(&fde, true);
    file.push(40, 1, 0, &serialize(&bad));
    let (_, r) = decode_bytes(&file.bytes, BinlogDecoder::new());
    assert!(r.is_err());
    let truncated = TransactionPayloadEvent::new(
        (inner.len() - 3) as u64,
        TransactionPayloadCompressionType::NONE,
        inner.len() as u64,
        &inner[..inner.len() - 3],
    );
    let mut file = FileBuilder::new(&fde, true);
    file.push(40, 1, 0, &serialize(&truncated));
    let (_, r) = decode_bytes(&file.bytes, BinlogDecoder::new());
    assert!(r.is_err(), "{r:?}");
}

#[test]
fn tagged_gtids() {
    let Some((fde, txn)) = mysql8_transaction() else {
        return;
    };
    let uuid: Uuid = "55778904-0299-11f1-b1b8-4ef0c4956feb".parse().unwrap();
    let prev = PreviousGtidsEvent::new(vec![
        PreviousGtidsSid::new(uuid.0, None, vec![GnoInterval::new(1, 14)]),
        PreviousGtidsSid::new(
            uuid.0,
            Some(Tag::new("mytag").unwrap()),
            vec![GnoInterval::new(1, 3)],
        ),
    ]);
    let gtid = GtidEvent::new_tagged(uuid.0, Tag::new("mytag").unwrap(), 3);
    let mut file = FileBuilder::new(&fde, true);
    file.push(35, 1, 0, &serialize(&prev));
    file.push(42, 1, 0, &serialize(&gtid));
    for ev in &txn[1..] {
        file.push_raw(ev);
    }
    let (messages, r) = decode_bytes(&file.bytes, BinlogDecoder::new());
    let decoder = r.expect("decodes");
    let prev_set = messages
        .iter()
        .find_map(|m| match m {
            BinlogMessage::PreviousGtids(s) => Some(s.to_string()),
            _ => None,
        })
        .unwrap();
    assert_eq!(prev_set, format!("{uuid}:1-13:mytag:1-2"));
    let begin = messages
        .iter()
        .find_map(|m| match m {
            BinlogMessage::Begin { gtid: Some(g), .. } => Some(g.to_string()),
            _ => None,
        })
        .unwrap();
    assert_eq!(begin, format!("{uuid}:mytag:3"));
    let expected: GtidSet = format!("{uuid}:1-13:mytag:1-3").parse().unwrap();
    assert_eq!(decoder.gtid_set(), &expected);
    assert_eq!(
        decoder.current_position(),
        SourcePosition::MysqlGtidSet(expected.clone())
    );
    // And it goes back to the server as SIDs with the tag.
    let sids = expected.to_sids();
    assert_eq!(sids[1].tag().map(|t| t.as_str()), Some("mytag"));
    assert_eq!(rows_of(&messages).len(), 1);
}

/// MariaDB GTID_EVENT body.
fn mariadb_gtid(seq: u64, domain: u32, flags: u8) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&seq.to_le_bytes());
    b.extend_from_slice(&domain.to_le_bytes());
    b.push(flags);
    b.extend_from_slice(&[0; 6]);
    b
}

#[test]
fn mariadb_standalone_ddl_gtid_list_and_unsupported_events() {
    let Some(bytes) = fixture_bytes("mariadb-bin.000001") else {
        return;
    };
    let events = raw_events(&bytes, true);
    let fde = &events[0];

    let mut list = Vec::new();
    list.extend_from_slice(&2u32.to_le_bytes());
    for (domain, server, seq) in [(0u32, 1u32, 10u64), (1, 2, 20)] {
        list.extend_from_slice(&domain.to_le_bytes());
        list.extend_from_slice(&server.to_le_bytes());
        list.extend_from_slice(&seq.to_le_bytes());
    }
    let ddl = QueryEvent::new(&b""[..], &b"shop"[..]).with_query(&b"CREATE TABLE t (id INT)"[..]);

    let mut file = FileBuilder::new(fde, true);
    file.push(163, 1, 0, &list);
    file.push(162, 7, 0, &mariadb_gtid(11, 0, 0x01 | 0x20)); // FL_STANDALONE | FL_DDL
    file.push(2, 7, 0, &serialize(&ddl));
    let (messages, r) = decode_bytes(&file.bytes, BinlogDecoder::new());
    let decoder = r.expect("decodes");
    let tail: Vec<&BinlogMessage> = messages.iter().rev().take(3).rev().collect();
    assert!(matches!(
        tail[0],
        BinlogMessage::Begin {
            gtid: Some(TxnGtid::Mariadb {
                domain: 0,
                server: 7,
                seq: 11
            }),
            standalone: true,
            ..
        }
    ));
    assert!(
        matches!(tail[1], BinlogMessage::Ddl { database, query_len: 23 } if database == "shop")
    );
    assert!(matches!(tail[2], BinlogMessage::Commit { xid: None, .. }));
    assert_eq!(
        decoder.current_position().to_string(),
        "mariadb_gtid:0-7-11,1-2-20"
    );

    // A group cut short by the next GTID is rolled back, its GTID not executed.
    let mut file = FileBuilder::new(fde, true);
    file.push(162, 7, 0, &mariadb_gtid(12, 0, 0));
    file.push(162, 7, 0, &mariadb_gtid(13, 0, 0x01));
    file.push(2, 7, 0, &serialize(&ddl));
    let (messages, r) = decode_bytes(&file.bytes, BinlogDecoder::new());
    let decoder = r.expect("decodes");
    assert!(messages
        .iter()
        .any(|m| matches!(m, BinlogMessage::Rollback)));
    assert_eq!(decoder.mariadb_position().to_string(), "0-7-13");

    // Encrypted and compressed MariaDB binlogs are refused with what to change.
    for (event_type, expected) in [
        (164u8, "encrypt_binlog=OFF"),
        (166u8, "log_bin_compress=OFF"),
    ] {
        let mut file = FileBuilder::new(fde, true);
        file.push(event_type, 1, 0, &[1, 2, 3, 4]);
        let (_, r) = decode_bytes(&file.bytes, BinlogDecoder::new());
        let err = r.expect_err("unsupported");
        assert!(matches!(err, DecodeError::Unsupported { .. }), "{err}");
        assert!(err.to_string().contains(expected), "{err}");
    }

    // A GTID event too short to hold its fields.
    let mut file = FileBuilder::new(fde, true);
    file.push(162, 1, 0, &[1, 2, 3]);
    let (_, r) = decode_bytes(&file.bytes, BinlogDecoder::new());
    assert!(matches!(r, Err(DecodeError::Malformed { .. })), "{r:?}");
}

#[test]
fn live_stream_positions_follow_the_server() {
    // As mysql_async delivers them: a fake ROTATE before any FORMAT_DESCRIPTION_EVENT (its CRC
    // still attached, since the reader does not know yet that events are checksummed), then
    // the file's events; positions come from the headers.
    let Some(bytes) = fixture_bytes("mariadb-bin.000001") else {
        return;
    };
    let mut fake_rotate_body = 4u64.to_le_bytes().to_vec();
    fake_rotate_body.extend_from_slice(b"mariadb-bin.000001");
    let fake_rotate = encode_event(0, 4, 1, 0x20, &fake_rotate_body, 0, true);

    let mut reader = mysql_common::binlog::EventStreamReader::new(
        mysql_common::binlog::consts::BinlogVersion::Version4,
    );
    let mut decoder = BinlogDecoder::new();
    let ev = reader.read(&fake_rotate[..]).unwrap().unwrap();
    let messages = decoder.decode_event(&ev).unwrap();
    assert_eq!(
        messages,
        [BinlogMessage::Rotate {
            next_file: "mariadb-bin.000001".into(),
            pos: 4
        }]
    );
    assert_eq!(decoder.position().to_string(), "mariadb-bin.000001:4");

    let mut pos = 4;
    while pos < bytes.len() {
        let size = u32::from_le_bytes(bytes[pos + 9..pos + 13].try_into().unwrap()) as usize;
        let ev = reader.read(&bytes[pos..pos + size]).unwrap().unwrap();
        decoder.decode_event(&ev).unwrap();
        pos += size;
        assert_eq!(decoder.position().pos, ev.header().log_pos() as u64);
    }
    assert_eq!(decoder.current_position().to_string(), "mariadb_gtid:0-1-2");
    assert_eq!(
        decoder
            .last_committed_gtid()
            .map(|g| g.to_string())
            .as_deref(),
        Some("0-1-2")
    );
}

#[test]
fn not_a_binlog() {
    let (_, r) = decode_bytes(b"hello world", BinlogDecoder::new());
    assert!(matches!(r, Err(DecodeError::NotABinlog { .. })), "{r:?}");
    let (_, r) = decode_bytes(b"", BinlogDecoder::new());
    assert!(matches!(r, Err(DecodeError::NotABinlog { .. })), "{r:?}");
    // Magic only: an empty binlog.
    let (messages, r) = decode_bytes(&[0xfe, b'b', b'i', b'n'], BinlogDecoder::new());
    assert!(r.is_ok() && messages.is_empty());
}

// ---------------------------------------------------------------------------------------------
// Damaged input: truncations and bit flips must never panic
// ---------------------------------------------------------------------------------------------

/// Deterministic xorshift, so failures reproduce.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
}

fn decode_damaged(bytes: &[u8]) {
    // With checksums (most flips stop there) and without (flips reach the parsers).
    for verify in [true, false] {
        let decoder = offline_decoder().with_checksum_verification(verify);
        let (_, _result) = decode_bytes(bytes, decoder);
    }
}

#[test]
fn truncated_and_bit_flipped_files_never_panic() {
    let Some(dir) = fixtures() else { return };
    let mut rng = XorShift(0x9e37_79b9_7f4a_7c15);
    for name in [
        "mariadb-bin.000001",
        "json.binlog.000001",
        "mysql-enum-string-set.000001",
        "binlog-invisible-columns.000001",
        "minimal_row_metadata.000001",
        "mysql_type_bit.000001",
        "time_issue.000001",
        "vector.binlog",
        "update-partial-row.binlog",
        "binlog_56_gtid_reserved_word.000001",
        "ver_5_1_23.001",
    ] {
        let bytes = std::fs::read(dir.join(name)).unwrap();
        // Truncations: every length for small files, a stride for large ones.
        let stride = (bytes.len() / 1500).max(1);
        for len in (0..bytes.len()).step_by(stride) {
            let (_, r) = decode_bytes(&bytes[..len], offline_decoder());
            if len < bytes.len() && len > 4 {
                // Cutting a file anywhere but at an event boundary is an error.
                let _ = r;
            }
        }
        // Single bit flips at random offsets, and bytes replaced by random values.
        let flips = if bytes.len() > 20_000 { 300 } else { 1500 };
        for i in 0..flips {
            let mut damaged = bytes.clone();
            let at = (rng.next() as usize) % damaged.len();
            if i % 2 == 0 {
                damaged[at] ^= 1 << (rng.next() % 8);
            } else {
                damaged[at] = rng.next() as u8;
            }
            decode_damaged(&damaged);
        }
    }
}

#[test]
fn truncation_inside_an_event_is_an_error() {
    let Some(bytes) = fixture_bytes("mariadb-bin.000001") else {
        return;
    };
    let events = raw_events(&bytes, true);
    let mut boundaries = vec![4usize];
    for e in &events {
        boundaries.push(boundaries.last().unwrap() + e.original.len());
    }
    for len in 4..bytes.len() {
        let (_, r) = decode_bytes(&bytes[..len], offline_decoder());
        if boundaries.contains(&len) {
            assert!(
                r.is_ok(),
                "cut at an event boundary ({len}) is a shorter binlog: {r:?}"
            );
        } else {
            assert!(
                matches!(r, Err(DecodeError::Truncated { .. })),
                "cut at {len}: {r:?}"
            );
        }
    }
}

/// Issue 25 on synthetic MariaDB events (with the fixture's FORMAT_DESCRIPTION_EVENT): a
/// statement that writes an outbox table (INSERT, LOAD DATA's EXECUTE_LOAD_QUERY) is
/// reported without its text, DDL that removes an outbox table is reported (a swap by RENAME
/// is not), an XA PREPARE carries its xid, an `XA COMMIT` group names the xid it commits,
/// and MySQL's one-phase XA_PREPARE_LOG_EVENT is a commit.
#[test]
fn statements_dropped_tables_and_xa_groups() {
    use mysql_common::binlog::consts::LoadDuplicateHandling;
    use mysql_common::binlog::events::ExecuteLoadQueryEvent;
    let Some(bytes) = fixture_bytes("mariadb-bin.000001") else {
        return;
    };
    let events = raw_events(&bytes, true);
    let query = |sql: &str| {
        serialize(&QueryEvent::new(&b""[..], &b"shop"[..]).with_query(sql.as_bytes().to_vec()))
    };
    let xid_event = |n: u64| n.to_le_bytes().to_vec();
    let xa_prepare = |one_phase: u8, gtrid: &[u8]| {
        let mut b = vec![one_phase];
        b.extend_from_slice(&1u32.to_le_bytes());
        b.extend_from_slice(&(gtrid.len() as u32).to_le_bytes());
        b.extend_from_slice(&0u32.to_le_bytes());
        b.extend_from_slice(gtrid);
        b
    };
    let outbox = TableName::new("shop", "outbox");

    let mut file = FileBuilder::new(&events[0], true);
    // 20: a transaction whose INSERT into the outbox is a statement.
    file.push(162, 1, 0, &mariadb_gtid(20, 0, 0));
    file.push(
        2,
        1,
        0,
        &query("INSERT /* x */ INTO `outbox` VALUES ('secret-value')"),
    );
    file.push(16, 1, 0, &xid_event(1));
    // 21: LOAD DATA as a statement.
    let load = ExecuteLoadQueryEvent::new(
        1,
        LoadDuplicateHandling::LOAD_DUP_ERROR,
        &b""[..],
        &b"shop"[..],
    )
    .with_query(&b"LOAD DATA INFILE '/tmp/SQL_LOAD-1' INTO TABLE `outbox` (id)"[..]);
    file.push(162, 1, 0, &mariadb_gtid(21, 0, 0));
    file.push(18, 1, 0, &serialize(&load));
    file.push(16, 1, 0, &xid_event(2));
    // 22: XA PREPARE (FL_PREPARED_XA); 23: its XA COMMIT (FL_STANDALONE | FL_COMPLETED_XA).
    file.push(162, 1, 0, &mariadb_gtid(22, 0, 0x40));
    file.push(38, 1, 0, &xa_prepare(0, b"xa1"));
    file.push(162, 1, 0, &mariadb_gtid(23, 0, 0x80 | 0x01));
    file.push(2, 1, 0, &query("XA COMMIT X'786131',X'',1"));
    // 24: a swap by RENAME; 25: a DROP.
    file.push(162, 1, 0, &mariadb_gtid(24, 0, 0x01));
    file.push(
        2,
        1,
        0,
        &query("RENAME TABLE outbox TO o_old, o_new TO outbox"),
    );
    file.push(162, 1, 0, &mariadb_gtid(25, 0, 0x01));
    file.push(
        2,
        1,
        0,
        &query("DROP TABLE `shop`.`outbox` /* generated by server */"),
    );
    // 26: MySQL's XA COMMIT ... ONE PHASE: XA START query, XA_PREPARE_LOG_EVENT one_phase.
    file.push(162, 1, 0, &mariadb_gtid(26, 0, 0));
    file.push(2, 1, 0, &query("XA START X'7862',X'',1"));
    file.push(38, 1, 0, &xa_prepare(1, b"xb"));

    let decoder = BinlogDecoder::new().with_table_filter(Some([outbox.clone()].into()));
    let (messages, r) = decode_bytes(&file.bytes, decoder);
    r.expect("decodes");
    let tail: Vec<String> = messages
        .iter()
        .skip_while(|m| {
            !matches!(
                m,
                BinlogMessage::Begin {
                    gtid: Some(TxnGtid::Mariadb { seq: 20, .. }),
                    ..
                }
            )
        })
        .filter_map(|m| match m {
            BinlogMessage::Begin { gtid: Some(g), .. } => Some(format!("begin {g}")),
            BinlogMessage::StatementWrite { table, verb } => {
                Some(format!("write {table} {}", verb.as_str()))
            }
            BinlogMessage::TablesGone { tables } => Some(format!("gone {tables:?}")),
            BinlogMessage::XaStart => Some("xa start".into()),
            BinlogMessage::XaPrepare { xid: Some(x), .. } => Some(format!("prepare {x}")),
            BinlogMessage::XaOutcome { xid, committed } => {
                Some(format!("outcome {xid} {committed}"))
            }
            BinlogMessage::Commit { .. } => Some("commit".into()),
            BinlogMessage::Rollback => Some("rollback".into()),
            _ => None,
        })
        .collect();
    assert_eq!(
        tail,
        vec![
            "begin 0-1-20",
            "write shop.outbox INSERT",
            "commit",
            "begin 0-1-21",
            "write shop.outbox LOAD DATA",
            "commit",
            "begin 0-1-22",
            "xa start",
            "prepare X'786131',X'',1",
            "begin 0-1-23",
            "outcome X'786131',X'',1 true",
            "commit",
            "begin 0-1-24",
            "commit",
            "begin 0-1-25",
            r#"gone [(TableName { schema: "shop", name: "outbox" }, "dropped")]"#,
            "commit",
            "begin 0-1-26",
            "xa start",
            "commit",
        ]
    );
    assert!(
        !format!("{messages:?}").contains("secret-value"),
        "no statement text kept"
    );
}

/// A real statement-based binlog (MySQL 5.2, `ver_5_1-wl2325_s.001`): its INSERT statements
/// are reported as statement writes of their tables, the default database resolving
/// unqualified names; with a table filter, only the filter's tables.
#[test]
fn statement_based_fixture_reports_its_inserts() {
    let Some(bytes) = fixture_bytes("ver_5_1-wl2325_s.001") else {
        return;
    };
    let writes = |decoder: BinlogDecoder| -> Vec<String> {
        // The file goes on with pre-GA rows events, which end decoding with an error.
        let (messages, _) = decode_bytes(&bytes, decoder);
        messages
            .iter()
            .filter_map(|m| match m {
                BinlogMessage::StatementWrite { table, verb } => {
                    Some(format!("{table} {}", verb.as_str()))
                }
                _ => None,
            })
            .collect()
    };
    let all = writes(BinlogDecoder::new().with_missing_names(MissingColumnNames::Positional));
    assert!(all.iter().any(|w| w.ends_with(".t1 INSERT")), "{all:?}");
    assert!(all.iter().any(|w| w.ends_with(".t2 INSERT")), "{all:?}");
    let t1 = all
        .iter()
        .find(|w| w.ends_with(".t1 INSERT"))
        .unwrap()
        .trim_end_matches(" INSERT")
        .to_string();
    let only = writes(
        BinlogDecoder::new()
            .with_missing_names(MissingColumnNames::Positional)
            .with_table_filter(Some([TableName::parse(&t1).unwrap()].into())),
    );
    assert!(
        !only.is_empty() && only.iter().all(|w| *w == format!("{t1} INSERT")),
        "{only:?}"
    );
}
