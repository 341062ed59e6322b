//! Debezium's source offsets as Kafka Connect stores them: the key (connector name and
//! source partition) and the value (where the connector is in the binlog or the WAL).
//!
//! Kafka Connect stores a source task's offsets under a key that is the JSON array
//! `["<connector name>", <source partition>]`, serialized with its internal, schemaless
//! JsonConverter whatever converters the worker sets (Kafka Connect `OffsetStorageWriter`,
//! `OffsetUtils`); Debezium's binlog and PostgreSQL connectors use the partition
//! `{"server": "<topic.prefix>"}`. The value is the JSON object of the connector's offset:
//!
//! | connector | keys (Debezium `BinlogOffsetContext`, `PostgresOffsetContext`) |
//! |---|---|
//! | MySQL / MariaDB | `file`, `pos` (where the transaction being read starts, or the position after the last one), `gtids` (the GTID set / MariaDB GTID position of the transactions completed), `event` (events of the current transaction to skip, its `BEGIN`/GTID event counted), `row` (rows of the next event to skip), `server_id`, `ts_sec`, `snapshot` |
//! | PostgreSQL | `lsn` (the last event processed; alone, without `lsn_proc` and `lsn_commit`, where a new connector started streaming: nothing processed yet), `lsn_proc` (the last LSN whose events were all processed), `lsn_commit` (the end of the last transaction committed), `txId`, `messageType` (`INSERT`, `COMMIT`, ...), `ts_usec`, `snapshot` |
//!
//! LSNs are decimal integers here. [`OffsetKey::to_bytes`] writes the key exactly as Kafka
//! Connect does (Jackson's compact JSON, which `serde_json` writes alike), since Connect
//! matches keys by their bytes and places them in the offsets topic by the Java producer's
//! hash of those bytes ([`OffsetKey::partition`]).

use std::fmt;

use serde_json::{Map, Value};

use crate::position::Lsn;

/// Why an offset key or value is not Debezium's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OffsetError {
    /// Not JSON.
    #[error("{what} is not JSON ({cause})")]
    NotJson {
        /// Key or value.
        what: &'static str,
        /// serde_json's words.
        cause: String,
    },
    /// JSON of another shape.
    #[error("{what} is not {expected}: {found}")]
    Shape {
        /// Key or value.
        what: &'static str,
        /// The shape Debezium writes.
        expected: &'static str,
        /// What was found (shortened).
        found: String,
    },
    /// A field missing or of the wrong type.
    #[error("Debezium offset field `{field}` {problem}")]
    Field {
        /// The offset field.
        field: &'static str,
        /// What is wrong with it.
        problem: String,
    },
    /// The offset was written during a snapshot.
    #[error(
        "Debezium's offset was written during an initial snapshot (`snapshot` = {value}): it \
         names no streaming position to resume from; let Debezium finish its snapshot, or \
         start outboxd fresh"
    )]
    Snapshot {
        /// The `snapshot` value.
        value: String,
    },
}

/// The key of a connector's offsets: its name and its source partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetKey {
    /// The Kafka Connect connector name.
    pub connector: String,
    /// The source partition, `{"server": "<topic.prefix>"}` for Debezium.
    pub partition: Map<String, Value>,
}

impl OffsetKey {
    /// Debezium's key for connector `connector` with `topic.prefix` `server`.
    pub fn debezium(connector: &str, server: &str) -> Self {
        let mut partition = Map::new();
        partition.insert("server".into(), Value::String(server.into()));
        Self {
            connector: connector.into(),
            partition,
        }
    }

    /// The `server` of the partition, when it has one.
    pub fn server(&self) -> Option<&str> {
        self.partition.get("server").and_then(Value::as_str)
    }

    /// The bytes Kafka Connect stores the key as: compact JSON `["<name>",{"server":"..."}]`.
    pub fn to_bytes(&self) -> Vec<u8> {
        let v = Value::Array(vec![
            Value::String(self.connector.clone()),
            Value::Object(self.partition.clone()),
        ]);
        v.to_string().into_bytes()
    }

    /// Reads a key as Kafka Connect wrote it.
    ///
    /// Errors when the bytes are not a JSON array of a string and an object.
    pub fn parse(bytes: &[u8]) -> Result<Self, OffsetError> {
        let v: Value = serde_json::from_slice(bytes).map_err(|e| OffsetError::NotJson {
            what: "the offset key",
            cause: e.to_string(),
        })?;
        match v {
            Value::Array(items) => match items.as_slice() {
                [Value::String(name), Value::Object(partition)] => Ok(Self {
                    connector: name.clone(),
                    partition: partition.clone(),
                }),
                _ => Err(shape(
                    "the offset key",
                    "[\"<connector>\", {partition}]",
                    bytes,
                )),
            },
            _ => Err(shape(
                "the offset key",
                "[\"<connector>\", {partition}]",
                bytes,
            )),
        }
    }

    /// The partition of an offsets topic with `partitions` partitions that Kafka Connect
    /// writes this key to: the Java producer's default partitioner, `murmur2(key) & 0x7fffffff
    /// % partitions` (librdkafka's `murmur2_random`).
    pub fn partition(&self, partitions: i32) -> i32 {
        (java_murmur2(&self.to_bytes()) & 0x7fff_ffff) % partitions.max(1)
    }
}

impl fmt::Display for OffsetKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&String::from_utf8_lossy(&self.to_bytes()))
    }
}

fn shape(what: &'static str, expected: &'static str, bytes: &[u8]) -> OffsetError {
    let text = String::from_utf8_lossy(bytes);
    let found: String = text.chars().take(120).collect();
    OffsetError::Shape {
        what,
        expected,
        found,
    }
}

/// Kafka's Java `Utils.murmur2`, the hash of the default partitioner.
pub fn java_murmur2(data: &[u8]) -> i32 {
    const SEED: u32 = 0x9747_b28c;
    const M: u32 = 0x5bd1_e995;
    let len = data.len();
    let mut h: u32 = SEED ^ (len as u32);
    let mut chunks = data.chunks_exact(4);
    for c in &mut chunks {
        let mut k = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> 24;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let tail = chunks.remainder();
    if tail.len() >= 3 {
        h ^= u32::from(tail[2]) << 16;
    }
    if tail.len() >= 2 {
        h ^= u32::from(tail[1]) << 8;
    }
    if !tail.is_empty() {
        h ^= u32::from(tail[0]);
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h as i32
}

/// A MySQL / MariaDB connector's offset (Debezium `BinlogOffsetContext`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BinlogOffset {
    /// `file`: the binlog file of `pos`.
    pub file: String,
    /// `pos`: where the transaction being read starts (its GTID / `BEGIN` event), or the
    /// position after the last transaction completed.
    pub pos: u64,
    /// `gtids`: the transactions completed, as a MySQL GTID set or a MariaDB GTID position;
    /// `None` without GTIDs.
    pub gtids: Option<String>,
    /// `event`: events of the transaction after `gtids` / at `pos` already processed,
    /// counted from its `BEGIN` (MySQL) or GTID (MariaDB) event.
    pub event: u64,
    /// `row`: rows of the next event already processed.
    pub row: u64,
    /// `server_id`: the server id of the last event.
    pub server_id: Option<u64>,
    /// `ts_sec`: the time of the last event, seconds since the epoch.
    pub ts_sec: Option<i64>,
}

/// A PostgreSQL connector's offset (Debezium `PostgresOffsetContext`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PgOffset {
    /// `lsn`: the last event processed.
    pub lsn: Option<Lsn>,
    /// `lsn_proc`: the last LSN all of whose events were processed.
    pub lsn_proc: Option<Lsn>,
    /// `lsn_commit`: the end of the last transaction whose COMMIT was processed.
    pub lsn_commit: Option<Lsn>,
    /// `txId`: the transaction of the last event.
    pub tx_id: Option<i64>,
    /// `messageType`: the kind of the last event (`INSERT`, `UPDATE`, `DELETE`, `BEGIN`,
    /// `COMMIT`, `MESSAGE`, ...).
    pub message_type: Option<String>,
    /// `ts_usec`: the commit time of the last event's transaction, µs since the epoch.
    pub ts_usec: Option<i64>,
}

impl PgOffset {
    /// The last LSN Debezium processed: `lsn_proc`, else `lsn`.
    pub fn processed(&self) -> Option<Lsn> {
        self.lsn_proc.or(self.lsn)
    }
}

fn object<'a>(value: &'a Value, bytes: &[u8]) -> Result<&'a Map<String, Value>, OffsetError> {
    value
        .as_object()
        .ok_or_else(|| shape("the offset value", "a JSON object", bytes))
}

fn parse_value(bytes: &[u8]) -> Result<Value, OffsetError> {
    serde_json::from_slice(bytes).map_err(|e| OffsetError::NotJson {
        what: "the offset value",
        cause: e.to_string(),
    })
}

/// A non-negative integer field (JSON number, or a decimal string as some tools write).
fn uint(m: &Map<String, Value>, field: &'static str) -> Result<Option<u64>, OffsetError> {
    match m.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => n.as_u64().map(Some).ok_or_else(|| OffsetError::Field {
            field,
            problem: format!("is {n}, not a non-negative integer"),
        }),
        Some(Value::String(s)) if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) => {
            s.parse().map(Some).map_err(|_| OffsetError::Field {
                field,
                problem: format!("is {s:?}, too large"),
            })
        }
        Some(other) => Err(OffsetError::Field {
            field,
            problem: format!("is {other}, not a non-negative integer"),
        }),
    }
}

fn int(m: &Map<String, Value>, field: &'static str) -> Result<Option<i64>, OffsetError> {
    match m.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => n.as_i64().map(Some).ok_or_else(|| OffsetError::Field {
            field,
            problem: format!("is {n}, not an integer"),
        }),
        Some(other) => Err(OffsetError::Field {
            field,
            problem: format!("is {other}, not an integer"),
        }),
    }
}

fn string(m: &Map<String, Value>, field: &'static str) -> Result<Option<String>, OffsetError> {
    match m.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(other) => Err(OffsetError::Field {
            field,
            problem: format!("is {other}, not a string"),
        }),
    }
}

/// Refuses an offset written during a snapshot (`snapshot` present and not false), unless
/// it says the snapshot finished: `snapshot_completed` true (Debezium's
/// `CommonOffsetContext`: a snapshot runs while `snapshot` is set and `snapshot_completed`
/// is not) or, PostgreSQL, `last_snapshot_record` true (its offset context then counts the
/// snapshot complete). Debezium streams from such an offset's position, and so does outboxd.
fn no_snapshot(m: &Map<String, Value>) -> Result<(), OffsetError> {
    let yes = |k: &str| match m.get(k) {
        Some(Value::Bool(b)) => *b,
        Some(Value::String(s)) => s.eq_ignore_ascii_case("true"),
        _ => false,
    };
    if yes("snapshot_completed") || yes("last_snapshot_record") {
        return Ok(());
    }
    match m.get("snapshot") {
        None | Some(Value::Null) | Some(Value::Bool(false)) => Ok(()),
        Some(Value::String(s)) if s.eq_ignore_ascii_case("false") => Ok(()),
        Some(v) => Err(OffsetError::Snapshot {
            value: v.to_string(),
        }),
    }
}

impl BinlogOffset {
    /// Reads a MySQL/MariaDB connector's offset value.
    ///
    /// Errors when it is not a JSON object with a `file` and a `pos`, a field has the wrong
    /// type, or it was written during a snapshot.
    pub fn parse(bytes: &[u8]) -> Result<Self, OffsetError> {
        let v = parse_value(bytes)?;
        let m = object(&v, bytes)?;
        no_snapshot(m)?;
        let file = string(m, "file")?
            .filter(|f| !f.is_empty())
            .ok_or(OffsetError::Field {
                field: "file",
                problem: "is missing (a MySQL/MariaDB connector's offset names its binlog file)"
                    .into(),
            })?;
        let pos = uint(m, "pos")?.ok_or(OffsetError::Field {
            field: "pos",
            problem: "is missing".into(),
        })?;
        let gtids = string(m, "gtids")?.map(|g| g.replace(['\n', '\r'], ""));
        Ok(Self {
            file,
            pos,
            gtids: gtids.filter(|g| !g.trim().is_empty()),
            event: uint(m, "event")?.unwrap_or(0),
            row: uint(m, "row")?.unwrap_or(0),
            server_id: uint(m, "server_id")?,
            ts_sec: int(m, "ts_sec")?,
        })
    }

    /// The JSON Debezium writes for this offset (keys with a zero `event` / `row` left out,
    /// as `BinlogOffsetContext` does).
    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        if let Some(t) = self.ts_sec {
            m.insert("ts_sec".into(), t.into());
        }
        m.insert("file".into(), self.file.clone().into());
        m.insert("pos".into(), self.pos.into());
        if let Some(g) = &self.gtids {
            m.insert("gtids".into(), g.clone().into());
        }
        if self.row != 0 {
            m.insert("row".into(), self.row.into());
        }
        if let Some(s) = self.server_id {
            m.insert("server_id".into(), s.into());
        }
        if self.event != 0 {
            m.insert("event".into(), self.event.into());
        }
        Value::Object(m)
    }
}

impl PgOffset {
    /// Reads a PostgreSQL connector's offset value.
    ///
    /// Errors when it is not a JSON object with `lsn` or `lsn_proc`, a field has the wrong
    /// type, or it was written during a snapshot.
    pub fn parse(bytes: &[u8]) -> Result<Self, OffsetError> {
        let v = parse_value(bytes)?;
        let m = object(&v, bytes)?;
        no_snapshot(m)?;
        let lsn = |f| uint(m, f).map(|o| o.map(Lsn));
        let o = Self {
            lsn: lsn("lsn")?,
            lsn_proc: lsn("lsn_proc")?,
            lsn_commit: lsn("lsn_commit")?,
            tx_id: int(m, "txId")?,
            message_type: string(m, "messageType")?,
            ts_usec: int(m, "ts_usec")?,
        };
        if o.processed().is_none() {
            return Err(OffsetError::Field {
                field: "lsn",
                problem: "is missing, and so is `lsn_proc` (a PostgreSQL connector's offset \
                          names an LSN)"
                    .into(),
            });
        }
        Ok(o)
    }

    /// The JSON Debezium writes for this offset.
    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        let mut lsn = |k: &str, v: Option<Lsn>| {
            if let Some(l) = v {
                m.insert(k.into(), l.0.into());
            }
        };
        lsn("lsn_proc", self.lsn_proc);
        lsn("lsn_commit", self.lsn_commit);
        lsn("lsn", self.lsn);
        if let Some(t) = &self.message_type {
            m.insert("messageType".into(), t.clone().into());
        }
        if let Some(t) = self.tx_id {
            m.insert("txId".into(), t.into());
        }
        if let Some(t) = self.ts_usec {
            m.insert("ts_usec".into(), t.into());
        }
        Value::Object(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_bytes_are_connects() {
        let k = OffsetKey::debezium("shop-outbox", "shop");
        assert_eq!(k.to_bytes(), br#"["shop-outbox",{"server":"shop"}]"#);
        assert_eq!(OffsetKey::parse(&k.to_bytes()).unwrap(), k);
        assert_eq!(k.server(), Some("shop"));
        // Escapes as Jackson writes them.
        let odd = OffsetKey::debezium("a\"b\\c", "é\u{1}");
        assert_eq!(
            String::from_utf8(odd.to_bytes()).unwrap(),
            "[\"a\\\"b\\\\c\",{\"server\":\"é\\u0001\"}]"
        );
        for bad in [&b"{}"[..], b"[1,{}]", b"[\"a\"]", b"nope"] {
            assert!(OffsetKey::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn partition_is_the_java_default_partitioners() {
        // Kafka's Utils.murmur2 test vectors (clients/src/test/.../UtilsTest.java).
        assert_eq!(java_murmur2(b"21"), -973_932_308);
        assert_eq!(java_murmur2(b"foobar"), -790_332_482);
        assert_eq!(java_murmur2(b"a-little-bit-long-string"), -985_981_536);
        assert_eq!(java_murmur2(b"a-little-bit-longer-string"), -1_486_304_829);
        assert_eq!(
            java_murmur2(b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8"),
            -58_897_971
        );
        let k = OffsetKey::debezium("x", "y");
        assert!((0..25).contains(&k.partition(25)));
    }

    #[test]
    fn binlog_offsets_as_debezium_writes_them() {
        let o = BinlogOffset::parse(br#"{"ts_sec":1796237002,"file":"mariadb-bin.000006","pos":351704341,"gtids":"0-1-12622","row":1,"server_id":1,"event":40004}"#).unwrap();
        assert_eq!(o.file, "mariadb-bin.000006");
        assert_eq!(o.pos, 351_704_341);
        assert_eq!(o.gtids.as_deref(), Some("0-1-12622"));
        assert_eq!((o.event, o.row), (40004, 1));
        assert_eq!(
            BinlogOffset::parse(o.to_json().to_string().as_bytes()).unwrap(),
            o
        );
        let plain = BinlogOffset::parse(br#"{"file":"b.000001","pos":4}"#).unwrap();
        assert_eq!((plain.event, plain.row, plain.gtids.clone()), (0, 0, None));
        assert_eq!(
            plain.to_json().to_string(),
            r#"{"file":"b.000001","pos":4}"#
        );
    }

    #[test]
    fn malformed_offsets_are_refused_by_field() {
        for (bytes, needle) in [
            (&b"[1]"[..], "not a JSON object"),
            (b"{\"pos\":4}", "`file` is missing"),
            (b"{\"file\":\"f\",\"pos\":-4}", "`pos` is -4"),
            (b"{\"file\":\"f\",\"pos\":4,\"event\":\"x\"}", "`event`"),
            (
                b"{\"file\":\"f\",\"pos\":4,\"snapshot\":\"INITIAL\"}",
                "snapshot",
            ),
            (b"{\"file\":", "not JSON"),
        ] {
            let e = BinlogOffset::parse(bytes).unwrap_err().to_string();
            assert!(e.contains(needle), "{e}");
        }
        assert!(PgOffset::parse(b"{\"txId\":5}")
            .unwrap_err()
            .to_string()
            .contains("lsn"));
        assert!(PgOffset::parse(b"{\"lsn\":\"16/AB\"}").is_err());
    }

    #[test]
    fn finished_snapshots_are_streaming_positions() {
        // Debezium streams from these (its snapshot is complete).
        let o = BinlogOffset::parse(
            br#"{"file":"b.000001","pos":4,"gtids":"0-1-534","snapshot":true,"snapshot_completed":true}"#,
        )
        .unwrap();
        assert_eq!(o.gtids.as_deref(), Some("0-1-534"));
        for bytes in [
            &br#"{"last_snapshot_record":true,"lsn":100,"snapshot":true,"txId":5}"#[..],
            br#"{"snapshot":true,"snapshot_completed":true,"lsn":100}"#,
        ] {
            assert_eq!(PgOffset::parse(bytes).unwrap().lsn, Some(Lsn(100)));
        }
        // A snapshot still running is refused.
        for bytes in [
            &br#"{"last_snapshot_record":false,"lsn":100,"snapshot":true}"#[..],
            br#"{"snapshot":true,"snapshot_completed":false,"lsn":100}"#,
        ] {
            let e = PgOffset::parse(bytes).unwrap_err().to_string();
            assert!(e.contains("initial snapshot"), "{e}");
        }
    }

    #[test]
    fn pg_offsets_as_debezium_writes_them() {
        let o = PgOffset::parse(br#"{"lsn_proc":656162800,"messageType":"INSERT","lsn_commit":656162048,"lsn":656162800,"txId":12970,"ts_usec":1796237075978953}"#).unwrap();
        assert_eq!(o.lsn_commit, Some(Lsn(656_162_048)));
        assert_eq!(o.processed(), Some(Lsn(656_162_800)));
        assert_eq!(o.message_type.as_deref(), Some("INSERT"));
        assert_eq!(
            PgOffset::parse(o.to_json().to_string().as_bytes()).unwrap(),
            o
        );
    }
}
