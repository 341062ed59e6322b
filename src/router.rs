//! The outbox router: turns an outbox row change into the Kafka record Debezium's Outbox Event
//! Router SMT (`io.debezium.transforms.outbox.EventRouter`, `EventRouterDelegate`) would make.
//!
//! # What a record looks like
//!
//! The byte format is that of a Kafka Connect worker with `key.converter=StringConverter`,
//! the default `SimpleHeaderConverter`, and `value.converter=StringConverter` for plain payloads
//! or `JsonConverter` (`schemas.enable=false`) when the payload is expanded or an envelope is
//! configured — the combinations that make Debezium write what the application wrote.
//!
//! * **Operations**: only INSERTs make records. DELETEs are dropped silently (the
//!   insert-then-delete cleanup pattern). UPDATEs follow `table.op.invalid.behavior`:
//!   `warn` (default) and `error` log the table name (never values) and skip, `fatal` is an error.
//! * **Topic**: the `route.by.field` value must match `route.topic.regex` *entirely*
//!   (Java `Matcher.matches()`, as Kafka's `RegexRouter`); the topic is then
//!   `route.topic.replacement` with `$n` / `${name}` replaced by the groups. When the regex does
//!   not match, the topic is the value itself (RegexRouter leaves the topic unchanged).
//! * **Key**: the `table.field.event.key` column as UTF-8 text (binary columns: their bytes);
//!   NULL gives no key.
//! * **Value**: the `table.field.event.payload` column's bytes, verbatim. With
//!   `route.tombstone.on.empty.payload=true` a NULL or blank (Java `trim().isEmpty()`) payload
//!   gives a tombstone (no value). With it `false` (Debezium's default) a NULL payload still
//!   gives a record without value and a blank one a record with the blank bytes: Debezium
//!   writes the payload as it is.
//! * **`table.expand.json.payload`**: a payload starting with `{` (Debezium requires `{` or `[`
//!   and fails later on a top-level array; outboxd keeps such payloads unchanged) is parsed as
//!   Debezium does (Jackson, first value, trailing text ignored), its schema inferred as
//!   `JsonSchemaData` does (`null` members and `[]` members dropped by default; arrays of objects
//!   merged, missing members written as `null`) and written as `JsonConverter` writes it
//!   (compact, doubles in Java `Double.toString` form such as `1.0E7`). A payload that is not
//!   such JSON is written unchanged with a warning, as Debezium does.
//! * **Envelope** (`col:envelope[:alias]` placements): the value is the JSON object
//!   `{"payload": P, "<alias>": V, ...}` in placement order, where `P` is the expanded payload,
//!   or else the payload as a JSON *string* (what JsonConverter writes for a string field),
//!   and `V` is the column as JSON (see [`column_json`]).
//! * **Headers**: `id` = the event id column as text, then every `col:header[:alias]` placement
//!   in order. A NULL column gives no header (Debezium writes a header with a null value, which
//!   [`KafkaRecord::headers`] cannot carry). No event-type header is added by default
//!   (Debezium does not either; place `event_type:header:eventType`).
//! * **Partition**: a `col:partition` placement gives the partition from an integer column
//!   (0..=2147483647; NULL: the producer's partitioner decides); otherwise `None`.
//! * **Timestamp**: the `table.field.event.timestamp` column in epoch milliseconds when set and
//!   not NULL, else the change's source timestamp. (Debezium falls back to the time the
//!   connector processed the event; outboxd uses the source commit time, which is deterministic
//!   and repeatable after a restart.)

use std::borrow::Cow;
use std::fmt;

use base64::Engine as _;
use regex::Regex;

use crate::config::{InvalidOpBehavior, MissingFieldBehavior, Placement, RouterConfig};
use crate::event::{Op, RowChange, TableName};
use crate::value::ColumnValue;

const OPT_ID: &str = "table.field.event.id";
const OPT_KEY: &str = "table.field.event.key";
const OPT_PAYLOAD: &str = "table.field.event.payload";
const OPT_TIMESTAMP: &str = "table.field.event.timestamp";
const OPT_ROUTE_BY: &str = "route.by.field";
const OPT_PLACEMENT: &str = "table.fields.additional.placement";

/// A record ready for the Kafka producer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KafkaRecord {
    /// Destination topic.
    pub topic: String,
    /// Record key bytes (the aggregate id as UTF-8); `None` for a NULL key.
    pub key: Option<Vec<u8>>,
    /// Record value bytes; `None` is a tombstone (or a NULL payload).
    pub value: Option<Vec<u8>>,
    /// Headers in order: `id` first, then the header placements.
    pub headers: Vec<(String, Vec<u8>)>,
    /// Record timestamp, milliseconds since the Unix epoch (CreateTime).
    pub timestamp_ms: Option<i64>,
    /// Explicit partition; `None` lets the producer's partitioner (`murmur2_random`) decide.
    pub partition: Option<i32>,
}

impl KafkaRecord {
    /// Approximate size in bytes: topic, key, value and header names and values. Kafka's own
    /// per-record framing (a few dozen bytes) is not counted. Used for batching limits and
    /// `kafka.max_record_bytes`.
    pub fn approx_size(&self) -> usize {
        self.topic.len()
            + self.key.as_ref().map_or(0, Vec::len)
            + self.value.as_ref().map_or(0, Vec::len)
            + self
                .headers
                .iter()
                .map(|(k, v)| k.len() + v.len())
                .sum::<usize>()
    }
}

/// Outcome of routing one row change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Routed {
    /// The change becomes this record.
    Record(KafkaRecord),
    /// The change produces nothing.
    Skipped(SkipReason),
}

/// Why a change produced no record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SkipReason {
    /// A DELETE on the outbox table (dropped silently, as Debezium does).
    Delete,
    /// An UPDATE, logged as a warning (`table.op.invalid.behavior=warn`).
    InvalidOpWarned,
    /// An UPDATE, logged as an error (`table.op.invalid.behavior=error`).
    InvalidOpErrorLogged,
}

impl SkipReason {
    /// Short label for the `reason` metric label: `delete`, `update`.
    pub fn label(self) -> &'static str {
        match self {
            SkipReason::Delete => "delete",
            SkipReason::InvalidOpWarned | SkipReason::InvalidOpErrorLogged => "update",
        }
    }
}

impl fmt::Display for SkipReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SkipReason::Delete => "delete on the outbox table (ignored)",
            SkipReason::InvalidOpWarned => {
                "update on the outbox table (ignored with a warning: table.op.invalid.behavior=warn)"
            }
            SkipReason::InvalidOpErrorLogged => {
                "update on the outbox table (ignored with an error: table.op.invalid.behavior=error)"
            }
        })
    }
}

/// Router settings that cannot work; found when the router is built.
#[derive(Debug, thiserror::Error)]
pub enum RouterConfigError {
    /// `route.topic.regex` does not compile.
    #[error("route.topic.regex {regex:?} does not compile ({source}); outboxd uses Rust regex syntax, which accepts Java's (?<name>...) groups but not look-around or back-references")]
    Regex {
        /// The configured regex.
        regex: String,
        /// The compiler's error.
        source: Box<regex::Error>,
    },
    /// `route.topic.replacement` is not a valid Java replacement for the regex.
    #[error("route.topic.replacement {replacement:?}: {message}")]
    Replacement {
        /// The configured replacement.
        replacement: String,
        /// What is wrong.
        message: String,
    },
    /// A column option is empty.
    #[error("{option} is empty; set it to an outbox table column name")]
    EmptyColumn {
        /// Debezium option name.
        option: &'static str,
    },
    /// Two envelope fields would have the same name.
    #[error("table.fields.additional.placement: envelope field {name:?} is used twice (\"payload\" is taken by the payload); give one of them another alias")]
    DuplicateEnvelopeField {
        /// The clashing name.
        name: String,
    },
}

/// A row change that cannot be routed: a definite error, the connector halts without
/// advancing its checkpoint. Messages name the table, the column and the option to change;
/// they never contain payloads.
#[derive(Debug, thiserror::Error)]
pub enum RouteError {
    /// A configured column is not in the row.
    #[error("outbox table {table} has no column `{column}`; set {option} to the column holding {what}, or add the column")]
    MissingColumn {
        /// The table.
        table: TableName,
        /// The configured column.
        column: String,
        /// Debezium option naming it.
        option: &'static str,
        /// What the column should hold.
        what: &'static str,
    },
    /// The `route.by.field` column is NULL.
    #[error("outbox table {table}: column `{column}` (route.by.field) is NULL, so the row has no topic; make the column NOT NULL or point route.by.field at another column")]
    NullRouteValue {
        /// The table.
        table: TableName,
        /// The route-by column.
        column: String,
    },
    /// The `route.by.field` column is binary data that is not UTF-8.
    #[error("outbox table {table}: column `{column}` (route.by.field) holds binary data that is not UTF-8, so it cannot name a topic; use a text column")]
    RouteValueNotText {
        /// The table.
        table: TableName,
        /// The route-by column.
        column: String,
    },
    /// The derived topic is not a legal Kafka topic name.
    #[error("outbox table {table}: topic {topic:?} (from column `{column}` through route.topic.regex/route.topic.replacement) is not a valid Kafka topic name (1-249 characters of a-z A-Z 0-9 . _ -); fix the row's value or the route.topic.* options")]
    InvalidTopic {
        /// The table.
        table: TableName,
        /// The route-by column.
        column: String,
        /// The rejected topic.
        topic: String,
    },
    /// An UPDATE with `table.op.invalid.behavior=fatal`.
    #[error("{op} on outbox table {table} with table.op.invalid.behavior=fatal: outbox rows must only be inserted (and optionally deleted); fix the writer, or set table.op.invalid.behavior=warn to skip such changes")]
    InvalidOperation {
        /// The table.
        table: TableName,
        /// The operation (`update`).
        op: &'static str,
    },
    /// The timestamp column holds something that is not a point in time.
    #[error("outbox table {table}: column `{column}` (table.field.event.timestamp) holds {found}, not a date-time or an epoch-milliseconds integer; point the option at a DATETIME/TIMESTAMP/timestamptz column or unset it")]
    TimestampType {
        /// The table.
        table: TableName,
        /// The timestamp column.
        column: String,
        /// Kind of value found.
        found: &'static str,
    },
    /// The partition column holds something that is not a partition number.
    #[error("outbox table {table}: column `{column}` (partition placement) holds {found}; a partition is an integer from 0 to 2147483647")]
    PartitionValue {
        /// The table.
        table: TableName,
        /// The partition column.
        column: String,
        /// What was found.
        found: String,
    },
}

/// One piece of a parsed `route.topic.replacement`.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    Literal(String),
    Group(usize),
}

/// The outbox router, built once per connector from its [`RouterConfig`].
#[derive(Debug, Clone)]
pub struct EventRouter {
    cfg: RouterConfig,
    /// `route.topic.regex` anchored at both ends (Java `matches()`).
    regex: Regex,
    replacement: Vec<Piece>,
    envelope: bool,
    topics: TopicCache,
}

/// Topics already worked out per `route.by.field` value: the regex ran on every event
/// otherwise, and aggregate types are few. Holds at most [`TopicCache::LIMIT`] values; past
/// that (a high-cardinality routing column) topics are computed each time.
#[derive(Debug, Default)]
struct TopicCache(std::sync::Mutex<std::collections::HashMap<String, String>>);

impl TopicCache {
    const LIMIT: usize = 1024;

    fn get_or_insert(&self, value: &str, compute: impl FnOnce() -> String) -> String {
        let mut map = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(t) = map.get(value) {
            return t.clone();
        }
        let topic = compute();
        if map.len() < Self::LIMIT {
            map.insert(value.to_string(), topic.clone());
        }
        topic
    }
}

impl Clone for TopicCache {
    fn clone(&self) -> Self {
        Self::default()
    }
}

impl EventRouter {
    /// Compiles the routing rules.
    ///
    /// Errors when a column option is empty, the regex does not compile, the replacement
    /// refers to a group the regex does not have (Java would fail on the first record), or
    /// two envelope fields share a name.
    pub fn new(cfg: &RouterConfig) -> Result<Self, RouterConfigError> {
        for (option, v) in [
            (OPT_ID, &cfg.field_event_id),
            (OPT_KEY, &cfg.field_event_key),
            (OPT_PAYLOAD, &cfg.field_event_payload),
            (OPT_ROUTE_BY, &cfg.route_by_field),
        ] {
            if v.trim().is_empty() {
                return Err(RouterConfigError::EmptyColumn { option });
            }
        }
        let compile = |re: &str| {
            Regex::new(re).map_err(|e| RouterConfigError::Regex {
                regex: cfg.route_topic_regex.clone(),
                source: Box::new(e),
            })
        };
        // Compile alone first so an unbalanced ')' cannot escape the anchoring group.
        compile(&cfg.route_topic_regex)?;
        let regex = compile(&format!(r"\A(?:{})\z", cfg.route_topic_regex))?;
        let replacement =
            parse_replacement(&cfg.route_topic_replacement, &regex).map_err(|message| {
                RouterConfigError::Replacement {
                    replacement: cfg.route_topic_replacement.clone(),
                    message,
                }
            })?;
        let mut names = vec!["payload"];
        for f in &cfg.additional_placement {
            if f.placement == Placement::Envelope {
                if names.contains(&f.name()) {
                    return Err(RouterConfigError::DuplicateEnvelopeField {
                        name: f.name().to_string(),
                    });
                }
                names.push(f.name());
            }
        }
        let envelope = names.len() > 1;
        Ok(Self {
            cfg: cfg.clone(),
            regex,
            replacement,
            envelope,
            topics: TopicCache::default(),
        })
    }

    /// The settings this router was built from.
    pub fn config(&self) -> &RouterConfig {
        &self.cfg
    }

    /// Routes one row change of an outbox table.
    ///
    /// `Ok(Routed::Skipped)` for DELETEs and (unless `fatal`) UPDATEs; `Err` for a row that
    /// cannot become a record (a definite error: the connector must halt without
    /// checkpointing past it).
    pub fn route(&self, change: &RowChange) -> Result<Routed, RouteError> {
        self.route_taking(&mut change.clone())
    }

    /// [`route`](Self::route) for the delivery loops: when the record's value is the payload
    /// column as written (no envelope, no expansion), its buffer is moved out of `change`
    /// (the column is left NULL) instead of copied. On `Err` `change` is unchanged.
    pub fn route_taking(&self, change: &mut RowChange) -> Result<Routed, RouteError> {
        match change.op {
            Op::Insert => self.route_insert(change).map(Routed::Record),
            Op::Delete => Ok(Routed::Skipped(SkipReason::Delete)),
            Op::Update => match self.cfg.op_invalid_behavior {
                InvalidOpBehavior::Warn => {
                    tracing::warn!(table = %change.table, op = change.op.as_str(),
                        "unexpected change on the outbox table ignored (table.op.invalid.behavior=warn)");
                    Ok(Routed::Skipped(SkipReason::InvalidOpWarned))
                }
                InvalidOpBehavior::Error => {
                    tracing::error!(table = %change.table, op = change.op.as_str(),
                        "unexpected change on the outbox table ignored (table.op.invalid.behavior=error)");
                    Ok(Routed::Skipped(SkipReason::InvalidOpErrorLogged))
                }
                InvalidOpBehavior::Fatal => Err(RouteError::InvalidOperation {
                    table: change.table.clone(),
                    op: change.op.as_str(),
                }),
            },
        }
    }

    fn column<'r>(
        &self,
        change: &'r RowChange,
        column: &str,
        option: &'static str,
        what: &'static str,
    ) -> Result<&'r ColumnValue, RouteError> {
        change
            .row
            .get(column)
            .ok_or_else(|| RouteError::MissingColumn {
                table: change.table.clone(),
                column: column.to_string(),
                option,
                what,
            })
    }

    fn route_insert(&self, change: &mut RowChange) -> Result<KafkaRecord, RouteError> {
        let cfg = &self.cfg;
        // Checked in Debezium's order: payload, timestamp, id.
        let payload = self.column(
            change,
            &cfg.field_event_payload,
            OPT_PAYLOAD,
            "the event payload",
        )?;
        let timestamp_ms = self.timestamp(change)?;
        let id = self.column(change, &cfg.field_event_id, OPT_ID, "the event id")?;

        let mut headers = Vec::with_capacity(1 + cfg.additional_placement.len());
        if let Some(b) = text_bytes(id) {
            headers.push(("id".to_string(), b));
        }

        let expanded = if cfg.expand_json_payload {
            self.expand(change, payload)
        } else {
            None
        };

        let mut partition = None;
        let mut envelope_fields = Vec::new();
        for f in &cfg.additional_placement {
            let v = match change.row.get(&f.column) {
                Some(v) => v,
                None if cfg.additional_field_missing == MissingFieldBehavior::Ignore => continue,
                None => {
                    return Err(RouteError::MissingColumn {
                        table: change.table.clone(),
                        column: f.column.clone(),
                        option: OPT_PLACEMENT,
                        what: "a value to place (or set table.field.additional.missing=ignore)",
                    })
                }
            };
            match f.placement {
                Placement::Header => {
                    if let Some(b) = text_bytes(v) {
                        headers.push((f.name().to_string(), b));
                    }
                }
                Placement::Envelope => {
                    envelope_fields.push((f.name().to_string(), column_json(v)));
                }
                Placement::Partition => partition = partition_of(change, &f.column, v)?,
            }
        }

        // `None`: the payload column as written, taken once nothing can fail any more.
        let value = if is_blank(payload) && cfg.tombstone_on_empty_payload {
            Some(None)
        } else if !self.envelope {
            expanded.as_ref().map(|doc| Some(json::write(doc)))
        } else {
            let p = expanded.unwrap_or_else(|| payload_json(payload));
            let mut fields = Vec::with_capacity(1 + envelope_fields.len());
            fields.push(("payload".to_string(), p));
            fields.extend(envelope_fields);
            Some(Some(json::write(&json::Out::Obj(fields))))
        };

        let key = text_bytes(self.column(
            change,
            &cfg.field_event_key,
            OPT_KEY,
            "the record key (aggregate id)",
        )?);
        let topic = self.topic(change)?;
        let value = match value {
            Some(v) => v,
            None => change
                .row
                .take(&cfg.field_event_payload)
                .and_then(ColumnValue::into_payload_bytes),
        };
        Ok(KafkaRecord {
            topic,
            key,
            value,
            headers,
            timestamp_ms: Some(timestamp_ms),
            partition,
        })
    }

    fn timestamp(&self, change: &RowChange) -> Result<i64, RouteError> {
        let Some(col) = &self.cfg.field_event_timestamp else {
            return Ok(change.source_ts_ms);
        };
        let v = self.column(change, col, OPT_TIMESTAMP, "the event time")?;
        if v.is_null() {
            return Ok(change.source_ts_ms);
        }
        v.as_epoch_millis()
            .ok_or_else(|| RouteError::TimestampType {
                table: change.table.clone(),
                column: col.clone(),
                found: kind_name(v),
            })
    }

    fn topic(&self, change: &RowChange) -> Result<String, RouteError> {
        let col = &self.cfg.route_by_field;
        let v = self.column(
            change,
            col,
            OPT_ROUTE_BY,
            "the value that picks the topic (the aggregate type)",
        )?;
        if v.is_null() {
            return Err(RouteError::NullRouteValue {
                table: change.table.clone(),
                column: col.clone(),
            });
        }
        let value = v.as_text().ok_or_else(|| RouteError::RouteValueNotText {
            table: change.table.clone(),
            column: col.clone(),
        })?;
        let topic = self.topics.get_or_insert(&value, || self.topic_for(&value));
        if !is_valid_topic(&topic) {
            return Err(RouteError::InvalidTopic {
                table: change.table.clone(),
                column: col.clone(),
                topic,
            });
        }
        Ok(topic)
    }

    /// The topic for a `route.by.field` value: the replacement when the regex matches the whole
    /// value, else the value itself (Kafka `RegexRouter` semantics).
    pub fn topic_for(&self, routed_by_value: &str) -> String {
        let Some(caps) = self.regex.captures(routed_by_value) else {
            return routed_by_value.to_string();
        };
        let mut out = String::new();
        for p in &self.replacement {
            match p {
                Piece::Literal(s) => out.push_str(s),
                Piece::Group(i) => {
                    if let Some(m) = caps.get(*i) {
                        out.push_str(m.as_str());
                    }
                }
            }
        }
        out
    }

    fn expand(&self, change: &RowChange, payload: &ColumnValue) -> Option<json::Out> {
        let text: Cow<'_, str> = match payload {
            ColumnValue::Null => return None,
            ColumnValue::Bytes(b) => match std::str::from_utf8(b) {
                Ok(s) => Cow::Borrowed(s),
                Err(_) => {
                    tracing::warn!(table = %change.table,
                        "table.expand.json.payload is on but the payload is binary, not text; written unchanged");
                    return None;
                }
            },
            other => other.as_text()?,
        };
        match json::expand(
            &text,
            self.cfg.json_payload_null_behavior,
            self.cfg.json_payload_empty_array_behavior,
        ) {
            Ok(doc) => Some(doc),
            Err(reason) => {
                tracing::warn!(table = %change.table, %reason,
                    "table.expand.json.payload: JSON expansion failed; payload written unchanged");
                None
            }
        }
    }
}

/// Parses a Java `Matcher.appendReplacement` string: `\x` is a literal `x`, `$n` a group number
/// (digits taken while the number stays a valid group), `${name}` a named group.
fn parse_replacement(rep: &str, regex: &Regex) -> Result<Vec<Piece>, String> {
    let group_count = regex.captures_len() - 1;
    let mut pieces = Vec::new();
    let mut lit = String::new();
    let mut chars = rep.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some(n) => lit.push(n),
                None => return Err("ends with a lone '\\' (escape a backslash as \\\\)".into()),
            },
            '$' => {
                let group = match chars.peek().copied() {
                    Some('{') => {
                        chars.next();
                        let mut name = String::new();
                        loop {
                            match chars.next() {
                                Some('}') => break,
                                Some(ch) if ch.is_ascii_alphanumeric() => name.push(ch),
                                _ => {
                                    return Err(
                                        "a named group reference must look like ${name} (letters and digits)"
                                            .into(),
                                    )
                                }
                            }
                        }
                        if !name.starts_with(|ch: char| ch.is_ascii_alphabetic()) {
                            return Err(format!("group name {name:?} must start with a letter"));
                        }
                        regex
                            .capture_names()
                            .position(|n| n == Some(name.as_str()))
                            .ok_or_else(|| {
                                format!("route.topic.regex has no group named {name:?}")
                            })?
                    }
                    Some(d) if d.is_ascii_digit() => {
                        chars.next();
                        let mut n = d as usize - '0' as usize;
                        if n > group_count {
                            return Err(format!("route.topic.regex has no group {n}"));
                        }
                        while let Some(d) = chars.peek().copied().filter(char::is_ascii_digit) {
                            let next = n * 10 + (d as usize - '0' as usize);
                            if next > group_count {
                                break;
                            }
                            n = next;
                            chars.next();
                        }
                        n
                    }
                    _ => {
                        return Err(
                            "'$' must start a group reference ($1 or ${name}); write \\$ for a literal dollar"
                                .into(),
                        )
                    }
                };
                if !lit.is_empty() {
                    pieces.push(Piece::Literal(std::mem::take(&mut lit)));
                }
                pieces.push(Piece::Group(group));
            }
            c => lit.push(c),
        }
    }
    if !lit.is_empty() {
        pieces.push(Piece::Literal(lit));
    }
    Ok(pieces)
}

/// Kafka topic name rules: 1-249 characters of `a-z A-Z 0-9 . _ -`, not `.` or `..`.
fn is_valid_topic(t: &str) -> bool {
    !t.is_empty()
        && t.len() <= 249
        && t != "."
        && t != ".."
        && t.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// A column as header/key bytes: text forms as UTF-8, binary as is; `None` for NULL.
fn text_bytes(v: &ColumnValue) -> Option<Vec<u8>> {
    match v {
        ColumnValue::Null => None,
        ColumnValue::Bytes(b) => Some(b.clone()),
        other => other.as_text().map(|t| t.into_owned().into_bytes()),
    }
}

/// Java `String.trim().isEmpty()` on the payload (NULL counts as empty). Bytes at or below
/// U+0020 are exactly the characters `trim` removes; multi-byte UTF-8 never contains them.
fn is_blank(v: &ColumnValue) -> bool {
    match v.as_payload_bytes() {
        None => true,
        Some(b) => b.iter().all(|&c| c <= b' '),
    }
}

fn kind_name(v: &ColumnValue) -> &'static str {
    match v {
        ColumnValue::Null => "NULL",
        ColumnValue::Int(_) | ColumnValue::UInt(_) => "an integer",
        ColumnValue::Float(_) => "a floating-point number",
        ColumnValue::Decimal(_) => "a decimal",
        ColumnValue::Text(_) => "text",
        ColumnValue::Bytes(_) => "binary data",
        ColumnValue::Json(_) => "JSON",
        ColumnValue::Uuid(_) => "a UUID",
        ColumnValue::Timestamp(_) | ColumnValue::DateTime(_) => "a date-time",
        ColumnValue::Date(_) => "a date",
        ColumnValue::Time(_) => "a time of day",
        ColumnValue::Bool(_) => "a boolean",
    }
}

fn partition_of(
    change: &RowChange,
    column: &str,
    v: &ColumnValue,
) -> Result<Option<i32>, RouteError> {
    let err = |found: String| RouteError::PartitionValue {
        table: change.table.clone(),
        column: column.to_string(),
        found,
    };
    match v {
        ColumnValue::Null => Ok(None),
        ColumnValue::Int(i) => i32::try_from(*i)
            .ok()
            .filter(|p| *p >= 0)
            .map(Some)
            .ok_or_else(|| err(format!("the out-of-range value {i}"))),
        ColumnValue::UInt(u) => i32::try_from(*u)
            .map(Some)
            .map_err(|_| err(format!("the out-of-range value {u}"))),
        other => Err(err(kind_name(other).to_string())),
    }
}

/// The payload inside an envelope when it is not expanded: a JSON string of its text (what
/// JsonConverter writes for a string field); non-UTF-8 binary as base64 (JsonConverter's bytes).
fn payload_json(v: &ColumnValue) -> json::Out {
    match v {
        ColumnValue::Null => json::Out::Null,
        ColumnValue::Bytes(b) => match std::str::from_utf8(b) {
            Ok(s) => json::Out::Str(s.to_string()),
            Err(_) => json::Out::Str(base64::engine::general_purpose::STANDARD.encode(b)),
        },
        other => match other.as_text() {
            Some(t) => json::Out::Str(t.into_owned()),
            None => json::Out::Null,
        },
    }
}

/// A column as an envelope field, in the JSON Debezium's default column mapping produces with
/// JsonConverter (`schemas.enable=false`): integers and booleans as JSON numbers/booleans,
/// floats in Java form, text/JSON/UUID/decimal as strings (decimals as with
/// `decimal.handling.mode=string`), binary as base64, zoned timestamps as ISO-8601 strings
/// (`ZonedTimestamp`), DATETIME / timestamp as epoch milliseconds (`Timestamp`), dates as days
/// since the epoch (`Date`), times as microseconds (`MicroTime`).
pub fn column_json(v: &ColumnValue) -> json::Out {
    use json::Out;
    match v {
        ColumnValue::Null => Out::Null,
        ColumnValue::Int(i) => Out::Int(i128::from(*i)),
        ColumnValue::UInt(u) => Out::Int(i128::from(*u)),
        ColumnValue::Float(f) => Out::Float(*f),
        ColumnValue::Bool(b) => Out::Bool(*b),
        ColumnValue::Decimal(s)
        | ColumnValue::Text(s)
        | ColumnValue::Json(s)
        | ColumnValue::Uuid(s) => Out::Str(s.clone()),
        ColumnValue::Bytes(b) => Out::Str(base64::engine::general_purpose::STANDARD.encode(b)),
        ColumnValue::Timestamp(_) => Out::Str(v.to_string()),
        ColumnValue::DateTime(us) => Out::Int(i128::from(us.div_euclid(1000))),
        ColumnValue::Date(d) => Out::Int(i128::from(*d)),
        ColumnValue::Time(us) => Out::Int(i128::from(*us)),
    }
}

/// Debezium-compatible JSON: Jackson-like parsing, `JsonSchemaData` schema inference and
/// conversion, JsonConverter-like writing.
pub mod json {
    use crate::config::{JsonEmptyArrayBehavior, JsonNullBehavior};

    /// A JSON value to write, in the shape JsonConverter writes it.
    #[derive(Debug, Clone, PartialEq)]
    pub enum Out {
        /// `null`.
        Null,
        /// `true` / `false`.
        Bool(bool),
        /// An integer.
        Int(i128),
        /// A double, written in Java `Double.toString` form.
        Float(f64),
        /// A string.
        Str(String),
        /// An array.
        Arr(Vec<Out>),
        /// An object, members in order.
        Obj(Vec<(String, Out)>),
    }

    /// A parsed JSON number, classified as Jackson's `readTree` does.
    #[derive(Debug, Clone, Copy, PartialEq)]
    enum Num {
        Int(i32),
        Long(i64),
        BigInteger,
        Double(f64),
    }

    #[derive(Debug, Clone, PartialEq)]
    enum Node {
        Null,
        Bool(bool),
        Num(Num),
        Str(String),
        Arr(Vec<Node>),
        Obj(Vec<(String, Node)>),
    }

    impl Node {
        fn type_name(&self) -> &'static str {
            match self {
                Node::Null => "null",
                Node::Bool(_) => "boolean",
                Node::Num(_) => "number",
                Node::Str(_) => "string",
                Node::Arr(_) => "array",
                Node::Obj(_) => "object",
            }
        }
    }

    /// Connect schema types as `JsonSchemaData` infers them.
    #[derive(Debug, Clone, PartialEq)]
    enum Schema {
        Str,
        Bool,
        I32,
        I64,
        F64,
        OptBytes,
        Array(Box<Schema>),
        Struct(Vec<(String, Schema)>),
    }

    const MAX_DEPTH: usize = 1000;

    /// Expands a payload as Debezium's `table.expand.json.payload` does and returns what
    /// JsonConverter (`schemas.enable=false`) would write. Errors (with a reason that never
    /// quotes the payload) where Debezium's expansion fails or would fail the task.
    pub fn expand(
        text: &str,
        nulls: JsonNullBehavior,
        empty_arrays: JsonEmptyArrayBehavior,
    ) -> Result<Out, String> {
        if !text.starts_with('{') {
            return Err(if text.starts_with('[') {
                "a top-level JSON array cannot become a Connect struct".into()
            } else {
                "the payload does not start with '{'".into()
            });
        }
        let node = Parser {
            b: text.as_bytes(),
            i: 0,
            depth: 0,
        }
        .value()?;
        let inf = Infer {
            nulls,
            empty_arrays,
        };
        let schema = inf
            .schema(&node)?
            .ok_or_else(|| "the payload has no schema".to_string())?;
        convert(&node, &schema)
    }

    struct Infer {
        nulls: JsonNullBehavior,
        empty_arrays: JsonEmptyArrayBehavior,
    }

    impl Infer {
        /// `JsonSchemaData.toConnectSchema`.
        fn schema(&self, node: &Node) -> Result<Option<Schema>, String> {
            Ok(match node {
                Node::Str(_) => Some(Schema::Str),
                Node::Bool(_) => Some(Schema::Bool),
                Node::Num(n) => Some(num_schema(*n)?),
                Node::Arr(items) if items.is_empty() => match self.empty_arrays {
                    JsonEmptyArrayBehavior::OptionalString => {
                        Some(Schema::Array(Box::new(Schema::Str)))
                    }
                    JsonEmptyArrayBehavior::Ignore => None,
                },
                Node::Arr(items) => Some(Schema::Array(Box::new(self.element_schema(items)?))),
                Node::Obj(members) => {
                    let mut fields: Vec<(String, Schema)> = Vec::with_capacity(members.len());
                    for (k, v) in members {
                        if let Some(s) = self.schema(v)? {
                            if !fields.iter().any(|(n, _)| n == k) {
                                fields.push((k.clone(), s));
                            }
                        }
                    }
                    Some(Schema::Struct(fields))
                }
                Node::Null => match self.nulls {
                    JsonNullBehavior::OptionalBytes => Some(Schema::OptBytes),
                    JsonNullBehavior::Ignore => None,
                },
            })
        }

        /// `toConnectSchemaWithCycles` + `getFirstArrayElement`: homogeneous arrays only;
        /// arrays of objects get the merged member set.
        fn element_schema(&self, items: &[Node]) -> Result<Schema, String> {
            let mut sample: Option<&Node> = None;
            let mut sample_num: Option<Schema> = None;
            for e in items {
                if matches!(e, Node::Null) {
                    continue;
                }
                let s = *sample.get_or_insert(e);
                if s.type_name() != e.type_name() {
                    return Err(format!(
                        "an array mixes {} and {} elements",
                        s.type_name(),
                        e.type_name()
                    ));
                }
                if let (Node::Num(a), Node::Num(b)) = (s, e) {
                    let ref_schema = match &sample_num {
                        Some(r) => r.clone(),
                        None => sample_num.insert(num_schema(*a)?).clone(),
                    };
                    if num_schema(*b)? != ref_schema {
                        return Err("an array mixes number types (int, long, double)".into());
                    }
                }
            }
            match sample {
                Some(Node::Obj(_)) => {
                    let mut merged: Option<Vec<(String, Schema)>> = None;
                    for e in items.iter().filter(|e| matches!(e, Node::Obj(_))) {
                        if let Some(Schema::Struct(fields)) = self.schema(e)? {
                            merged = Some(match merged {
                                None => fields,
                                Some(m) => merge(m, fields),
                            });
                        }
                    }
                    merged
                        .map(Schema::Struct)
                        .ok_or_else(|| "an array of objects has no schema".to_string())
                }
                Some(s) => self
                    .schema(s)?
                    .ok_or_else(|| "an array has an unrecognized member schema".to_string()),
                None => self
                    .schema(&Node::Null)?
                    .ok_or_else(|| "an array has only null members".to_string()),
            }
        }
    }

    fn num_schema(n: Num) -> Result<Schema, String> {
        match n {
            Num::Int(_) => Ok(Schema::I32),
            Num::Long(_) => Ok(Schema::I64),
            Num::Double(_) => Ok(Schema::F64),
            Num::BigInteger => Err("an integer does not fit in 64 bits".into()),
        }
    }

    /// `JsonSchemaData.mergeSchema` on struct fields: left's fields, then right's new ones; a
    /// bytes field is replaced by a non-bytes one of the same name.
    fn merge(
        mut left: Vec<(String, Schema)>,
        right: Vec<(String, Schema)>,
    ) -> Vec<(String, Schema)> {
        for (name, s) in right {
            match left.iter_mut().find(|(n, _)| *n == name) {
                None => left.push((name, s)),
                Some((_, old)) => {
                    if *old != s && *old == Schema::OptBytes {
                        *old = s;
                    }
                }
            }
        }
        left
    }

    /// `toConnectData` + `Struct.put` validation + JsonConverter output.
    fn convert(node: &Node, schema: &Schema) -> Result<Out, String> {
        if matches!(node, Node::Null) {
            return Ok(Out::Null);
        }
        let mismatch = || {
            Err(format!(
                "a {} value does not fit the schema inferred for it",
                node.type_name()
            ))
        };
        match (schema, node) {
            (Schema::Struct(fields), Node::Obj(members)) => {
                let mut out = Vec::with_capacity(fields.len());
                for (name, s) in fields {
                    let v = match members.iter().find(|(k, _)| k == name) {
                        Some((_, v)) => convert(v, s)?,
                        None => Out::Null,
                    };
                    out.push((name.clone(), v));
                }
                Ok(Out::Obj(out))
            }
            (Schema::Array(elem), Node::Arr(items)) => items
                .iter()
                .map(|e| convert(e, elem))
                .collect::<Result<Vec<_>, _>>()
                .map(Out::Arr),
            (Schema::Str, Node::Str(s)) => Ok(Out::Str(s.clone())),
            (Schema::Bool, Node::Bool(b)) => Ok(Out::Bool(*b)),
            (Schema::I32, Node::Num(Num::Int(i))) => Ok(Out::Int(i128::from(*i))),
            (Schema::I64, Node::Num(Num::Long(i))) => Ok(Out::Int(i128::from(*i))),
            (Schema::F64, Node::Num(Num::Double(d))) => Ok(Out::Float(*d)),
            _ => mismatch(),
        }
    }

    /// Writes JSON as Jackson does: compact, `\uXXXX` escapes in upper-case hex for control
    /// characters other than `\b \t \n \f \r`, doubles in Java form, infinities quoted.
    pub fn write(v: &Out) -> Vec<u8> {
        let mut s = String::new();
        write_into(v, &mut s);
        s.into_bytes()
    }

    fn write_into(v: &Out, s: &mut String) {
        match v {
            Out::Null => s.push_str("null"),
            Out::Bool(b) => s.push_str(if *b { "true" } else { "false" }),
            Out::Int(i) => s.push_str(&i.to_string()),
            Out::Float(d) if d.is_infinite() => s.push_str(if *d > 0.0 {
                "\"Infinity\""
            } else {
                "\"-Infinity\""
            }),
            Out::Float(d) if d.is_nan() => s.push_str("\"NaN\""),
            Out::Float(d) => s.push_str(&java_double(*d)),
            Out::Str(t) => write_str(t, s),
            Out::Arr(items) => {
                s.push('[');
                for (i, e) in items.iter().enumerate() {
                    if i > 0 {
                        s.push(',');
                    }
                    write_into(e, s);
                }
                s.push(']');
            }
            Out::Obj(members) => {
                s.push('{');
                for (i, (k, e)) in members.iter().enumerate() {
                    if i > 0 {
                        s.push(',');
                    }
                    write_str(k, s);
                    s.push(':');
                    write_into(e, s);
                }
                s.push('}');
            }
        }
    }

    fn write_str(t: &str, s: &mut String) {
        const HEX: &[u8; 16] = b"0123456789ABCDEF";
        s.push('"');
        for c in t.chars() {
            match c {
                '"' => s.push_str("\\\""),
                '\\' => s.push_str("\\\\"),
                '\u{08}' => s.push_str("\\b"),
                '\t' => s.push_str("\\t"),
                '\n' => s.push_str("\\n"),
                '\u{0C}' => s.push_str("\\f"),
                '\r' => s.push_str("\\r"),
                c if (c as u32) < 0x20 => {
                    let b = c as u32 as usize;
                    s.push_str("\\u00");
                    s.push(HEX[b >> 4] as char);
                    s.push(HEX[b & 0xF] as char);
                }
                c => s.push(c),
            }
        }
        s.push('"');
    }

    /// Java's `Double.toString` (JDK 19+, shortest repr): plain notation with at least one
    /// fractional digit for 1e-3 <= |d| < 1e7, else `d.dddE±n`.
    pub fn java_double(d: f64) -> String {
        if d == 0.0 {
            return if d.is_sign_negative() { "-0.0" } else { "0.0" }.into();
        }
        let abs = d.abs();
        // Shortest round-trip digits; Java prints at least two significant digits, choosing the
        // two-digit decimal closest to the value (which differs from padding with 0 only for
        // the least precise subnormals, e.g. 4.9E-324).
        let mut sci = format!("{abs:e}");
        if !sci.contains('.') {
            let two = format!("{abs:.1e}");
            if two.parse::<f64>() == Ok(abs) {
                sci = two;
            }
        }
        let (mant, exp) = sci.split_once('e').unwrap_or((sci.as_str(), "0"));
        let exp: i32 = exp.parse().unwrap_or(0);
        let mut digits: String = mant.chars().filter(|c| *c != '.').collect();
        while digits.len() > 1 && digits.ends_with('0') {
            digits.pop();
        }
        let mut out = String::new();
        if d < 0.0 {
            out.push('-');
        }
        if (1e-3..1e7).contains(&abs) {
            let point = exp + 1;
            if point <= 0 {
                out.push_str("0.");
                out.extend(std::iter::repeat_n('0', (-point) as usize));
                out.push_str(&digits);
            } else if point as usize >= digits.len() {
                out.push_str(&digits);
                out.extend(std::iter::repeat_n('0', point as usize - digits.len()));
                out.push_str(".0");
            } else {
                out.push_str(&digits[..point as usize]);
                out.push('.');
                out.push_str(&digits[point as usize..]);
            }
        } else {
            out.push_str(&digits[..1]);
            out.push('.');
            out.push_str(if digits.len() > 1 { &digits[1..] } else { "0" });
            out.push('E');
            out.push_str(&exp.to_string());
        }
        out
    }

    /// Strict RFC 8259 parser that reads the first value and ignores what follows it (Jackson
    /// `readTree` without `FAIL_ON_TRAILING_TOKENS`). Duplicate object keys: the last value
    /// wins at the first key's position (Jackson `ObjectNode`). Errors give a byte offset only.
    struct Parser<'a> {
        b: &'a [u8],
        i: usize,
        depth: usize,
    }

    impl Parser<'_> {
        fn err<T>(&self, what: &str) -> Result<T, String> {
            Err(format!("invalid JSON at byte {}: {what}", self.i))
        }

        fn ws(&mut self) {
            while matches!(self.b.get(self.i), Some(b' ' | b'\t' | b'\n' | b'\r')) {
                self.i += 1;
            }
        }

        fn value(&mut self) -> Result<Node, String> {
            self.ws();
            match self.b.get(self.i) {
                Some(b'{') => self.nested(Self::object),
                Some(b'[') => self.nested(Self::array),
                Some(b'"') => self.string().map(Node::Str),
                Some(b't') => self.literal("true", Node::Bool(true)),
                Some(b'f') => self.literal("false", Node::Bool(false)),
                Some(b'n') => self.literal("null", Node::Null),
                Some(b'-' | b'0'..=b'9') => self.number(),
                Some(_) => self.err("expected a value"),
                None => self.err("unexpected end of input"),
            }
        }

        fn nested(&mut self, f: fn(&mut Self) -> Result<Node, String>) -> Result<Node, String> {
            self.depth += 1;
            if self.depth > MAX_DEPTH {
                return self.err("nesting deeper than 1000 levels");
            }
            let r = f(self);
            self.depth -= 1;
            r
        }

        fn literal(&mut self, word: &str, node: Node) -> Result<Node, String> {
            if self.b[self.i..].starts_with(word.as_bytes()) {
                self.i += word.len();
                Ok(node)
            } else {
                self.err("unrecognized token")
            }
        }

        fn object(&mut self) -> Result<Node, String> {
            self.i += 1; // '{'
            let mut members: Vec<(String, Node)> = Vec::new();
            self.ws();
            if self.b.get(self.i) == Some(&b'}') {
                self.i += 1;
                return Ok(Node::Obj(members));
            }
            loop {
                self.ws();
                if self.b.get(self.i) != Some(&b'"') {
                    return self.err("expected a member name");
                }
                let k = self.string()?;
                self.ws();
                if self.b.get(self.i) != Some(&b':') {
                    return self.err("expected ':'");
                }
                self.i += 1;
                let v = self.value()?;
                match members.iter_mut().find(|(n, _)| *n == k) {
                    Some((_, old)) => *old = v,
                    None => members.push((k, v)),
                }
                self.ws();
                match self.b.get(self.i) {
                    Some(b',') => self.i += 1,
                    Some(b'}') => {
                        self.i += 1;
                        return Ok(Node::Obj(members));
                    }
                    _ => return self.err("expected ',' or '}'"),
                }
            }
        }

        fn array(&mut self) -> Result<Node, String> {
            self.i += 1; // '['
            let mut items = Vec::new();
            self.ws();
            if self.b.get(self.i) == Some(&b']') {
                self.i += 1;
                return Ok(Node::Arr(items));
            }
            loop {
                items.push(self.value()?);
                self.ws();
                match self.b.get(self.i) {
                    Some(b',') => self.i += 1,
                    Some(b']') => {
                        self.i += 1;
                        return Ok(Node::Arr(items));
                    }
                    _ => return self.err("expected ',' or ']'"),
                }
            }
        }

        fn hex4(&mut self) -> Result<u32, String> {
            let Some(h) = self.b.get(self.i..self.i + 4) else {
                return self.err("truncated \\u escape");
            };
            let s = std::str::from_utf8(h).map_err(|_| "invalid \\u escape".to_string())?;
            let v = u32::from_str_radix(s, 16);
            match v {
                Ok(v) if s.bytes().all(|c| c.is_ascii_hexdigit()) => {
                    self.i += 4;
                    Ok(v)
                }
                _ => self.err("invalid \\u escape"),
            }
        }

        fn string(&mut self) -> Result<String, String> {
            self.i += 1; // '"'
            let mut out = String::new();
            loop {
                let start = self.i;
                while let Some(&c) = self.b.get(self.i) {
                    if c == b'"' || c == b'\\' || c < 0x20 {
                        break;
                    }
                    self.i += 1;
                }
                // The input is a &str and we stop only at ASCII bytes, so this slice is UTF-8.
                out.push_str(
                    std::str::from_utf8(&self.b[start..self.i])
                        .map_err(|_| "invalid UTF-8".to_string())?,
                );
                match self.b.get(self.i) {
                    Some(b'"') => {
                        self.i += 1;
                        return Ok(out);
                    }
                    Some(b'\\') => {
                        self.i += 1;
                        let Some(&e) = self.b.get(self.i) else {
                            return self.err("unterminated escape");
                        };
                        self.i += 1;
                        match e {
                            b'"' => out.push('"'),
                            b'\\' => out.push('\\'),
                            b'/' => out.push('/'),
                            b'b' => out.push('\u{08}'),
                            b'f' => out.push('\u{0C}'),
                            b'n' => out.push('\n'),
                            b'r' => out.push('\r'),
                            b't' => out.push('\t'),
                            b'u' => {
                                let hi = self.hex4()?;
                                let cp = if (0xD800..0xDC00).contains(&hi) {
                                    if self.b.get(self.i..self.i + 2) != Some(b"\\u") {
                                        return self.err("unpaired surrogate");
                                    }
                                    self.i += 2;
                                    let lo = self.hex4()?;
                                    if !(0xDC00..0xE000).contains(&lo) {
                                        return self.err("unpaired surrogate");
                                    }
                                    0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00)
                                } else {
                                    hi
                                };
                                match char::from_u32(cp) {
                                    Some(c) => out.push(c),
                                    None => return self.err("unpaired surrogate"),
                                }
                            }
                            _ => return self.err("invalid escape"),
                        }
                    }
                    Some(_) => return self.err("control character in a string"),
                    None => return self.err("unterminated string"),
                }
            }
        }

        fn number(&mut self) -> Result<Node, String> {
            let start = self.i;
            if self.b.get(self.i) == Some(&b'-') {
                self.i += 1;
            }
            let int_start = self.i;
            let digits = |p: &mut Self| {
                let s = p.i;
                while matches!(p.b.get(p.i), Some(b'0'..=b'9')) {
                    p.i += 1;
                }
                p.i - s
            };
            let n = digits(self);
            if n == 0 {
                return self.err("expected digits");
            }
            if n > 1 && self.b[int_start] == b'0' {
                return self.err("leading zeroes are not allowed");
            }
            let mut integral = true;
            if self.b.get(self.i) == Some(&b'.') {
                self.i += 1;
                integral = false;
                if digits(self) == 0 {
                    return self.err("expected digits after '.'");
                }
            }
            if matches!(self.b.get(self.i), Some(b'e' | b'E')) {
                self.i += 1;
                integral = false;
                if matches!(self.b.get(self.i), Some(b'+' | b'-')) {
                    self.i += 1;
                }
                if digits(self) == 0 {
                    return self.err("expected exponent digits");
                }
            }
            let text = std::str::from_utf8(&self.b[start..self.i])
                .map_err(|_| "invalid number".to_string())?;
            let num = if integral {
                match text.parse::<i64>() {
                    Ok(v) => match i32::try_from(v) {
                        Ok(i) => Num::Int(i),
                        Err(_) => Num::Long(v),
                    },
                    Err(_) => Num::BigInteger,
                }
            } else {
                Num::Double(
                    text.parse::<f64>()
                        .map_err(|_| "invalid number".to_string())?,
                )
            };
            Ok(Node::Num(num))
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        fn ex(s: &str) -> Result<String, String> {
            expand(s, JsonNullBehavior::Ignore, JsonEmptyArrayBehavior::Ignore)
                .map(|o| String::from_utf8(write(&o)).unwrap())
        }

        #[test]
        fn java_doubles() {
            for (d, s) in [
                (1.0, "1.0"),
                (100.0, "100.0"),
                (0.001, "0.001"),
                (0.0001, "1.0E-4"),
                (1234567.0, "1234567.0"),
                (12345678.9, "1.23456789E7"),
                (1e7, "1.0E7"),
                (1e23, "1.0E23"),
                (-2.5, "-2.5"),
                (0.1, "0.1"),
                (39.98, "39.98"),
                (-0.0, "-0.0"),
                (5e-324, "4.9E-324"),
            ] {
                assert_eq!(java_double(d), s, "{d}");
            }
        }

        #[test]
        fn expansion_like_debezium() {
            assert_eq!(ex(r#"{"a": 1, "b": "x"}"#).unwrap(), r#"{"a":1,"b":"x"}"#);
            // null and [] members dropped by default
            assert_eq!(ex(r#"{"a":null,"b":[],"c":{}}"#).unwrap(), r#"{"c":{}}"#);
            // doubles in Java form, longs kept
            assert_eq!(
                ex(r#"{"p":39.98,"big":3000000000,"e":1e2,"x":1.5e10}"#).unwrap(),
                r#"{"p":39.98,"big":3000000000,"e":100.0,"x":1.5E10}"#
            );
            // arrays of objects: merged members, missing ones null
            assert_eq!(
                ex(r#"{"l":[{"a":1},{"b":"x"}]}"#).unwrap(),
                r#"{"l":[{"a":1,"b":null},{"a":null,"b":"x"}]}"#
            );
            // trailing text ignored, duplicate keys: last wins in first position
            assert_eq!(
                ex(r#"{"a":1,"b":2,"a":3} trailing"#).unwrap(),
                r#"{"a":3,"b":2}"#
            );
            // escapes as Jackson writes them; non-ASCII raw
            assert_eq!(
                ex("{\"s\":\"q\\\"\\u0001\\n\\/é😀\"}").unwrap(),
                "{\"s\":\"q\\\"\\u0001\\n/é😀\"}"
            );
            let keep = expand(
                r#"{"a":null,"b":[]}"#,
                JsonNullBehavior::OptionalBytes,
                JsonEmptyArrayBehavior::OptionalString,
            )
            .unwrap();
            assert_eq!(write(&keep), br#"{"a":null,"b":[]}"#);
        }

        #[test]
        fn expansion_failures() {
            for bad in [
                "",
                " {\"a\":1}",
                "\"str\"",
                "[1,2]",
                "{\"a\":",
                "{\"a\":01}",
                "{\"a\":[1,\"x\"]}",
                "{\"a\":[1,3000000000]}",
                "{\"a\":[{\"b\":1},{\"b\":\"x\"}]}",
                "{\"a\":123456789012345678901234567890}",
                "{\"a\":\"\\ud800\"}",
                "{\"a\":[null]}",
            ] {
                assert!(ex(bad).is_err(), "{bad:?} should not expand");
            }
            let deep = "{\"a\":".repeat(2000);
            assert!(ex(&deep).unwrap_err().contains("nesting"));
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::config::AdditionalField;
    use crate::event::Row;

    fn row(cols: &[(&str, ColumnValue)]) -> Row {
        let names: Arc<[Arc<str>]> = cols.iter().map(|(n, _)| Arc::<str>::from(*n)).collect();
        Row::new(names, cols.iter().map(|(_, v)| v.clone()).collect())
    }

    fn text(s: &str) -> ColumnValue {
        ColumnValue::Text(s.into())
    }

    fn outbox_row(payload: ColumnValue) -> Row {
        row(&[
            ("id", ColumnValue::Int(42)),
            ("aggregate_type", text("Order")),
            ("aggregate_id", text("order-7")),
            ("event_type", text("OrderCreated")),
            ("payload", payload),
            ("created_at", ColumnValue::DateTime(1_700_000_000_123_456)),
        ])
    }

    fn change(op: Op, row: Row) -> RowChange {
        RowChange {
            table: TableName::new("shop", "outbox_events"),
            op,
            row,
            source_ts_ms: 1_700_000_999_000,
        }
    }

    fn insert(payload: ColumnValue) -> RowChange {
        change(Op::Insert, outbox_row(payload))
    }

    fn router(f: impl FnOnce(&mut RouterConfig)) -> EventRouter {
        let mut cfg = RouterConfig::default();
        f(&mut cfg);
        EventRouter::new(&cfg).unwrap()
    }

    fn record(r: &EventRouter, c: &RowChange) -> KafkaRecord {
        match r.route(c).unwrap() {
            Routed::Record(rec) => rec,
            other => panic!("expected a record, got {other:?}"),
        }
    }

    #[test]
    fn insert_makes_the_debezium_record() {
        let r = router(|_| {});
        let rec = record(&r, &insert(ColumnValue::Json(r#"{"orderId": 7}"#.into())));
        assert_eq!(rec.topic, "outbox.event.Order");
        assert_eq!(rec.key.as_deref(), Some(&b"order-7"[..]));
        assert_eq!(rec.value.as_deref(), Some(&br#"{"orderId": 7}"#[..]));
        assert_eq!(rec.headers, vec![("id".to_string(), b"42".to_vec())]);
        assert_eq!(rec.timestamp_ms, Some(1_700_000_999_000));
        assert_eq!(rec.partition, None);
        assert_eq!(rec.approx_size(), 18 + 7 + 14 + 2 + 2);
    }

    #[test]
    fn route_taking_moves_the_payload_and_leaves_a_failed_row_alone() {
        let r = router(|_| {});
        let payload = r#"{"orderId": 7}"#;
        let mut c = insert(ColumnValue::Json(payload.into()));
        let expected = record(&r, &c);
        match r.route_taking(&mut c).unwrap() {
            Routed::Record(rec) => assert_eq!(rec, expected),
            other => panic!("expected a record, got {other:?}"),
        }
        assert_eq!(c.row.get("payload"), Some(&ColumnValue::Null), "moved out");

        // The route-by column is NULL: no topic, so the row must stay whole for the error.
        let r = router(|cfg| cfg.route_by_field = "event_type".into());
        let mut c = insert(ColumnValue::Json(payload.into()));
        c.row = row(&[
            ("id", ColumnValue::Int(42)),
            ("aggregate_type", text("Order")),
            ("aggregate_id", text("order-7")),
            ("event_type", ColumnValue::Null),
            ("payload", ColumnValue::Json(payload.into())),
        ]);
        assert!(r.route_taking(&mut c).is_err());
        assert_eq!(
            c.row.get("payload"),
            Some(&ColumnValue::Json(payload.into()))
        );
    }

    #[test]
    fn deletes_skip_silently_and_updates_follow_the_behaviour() {
        let r = router(|_| {});
        let del = change(Op::Delete, outbox_row(ColumnValue::Null));
        assert_eq!(r.route(&del).unwrap(), Routed::Skipped(SkipReason::Delete));
        let upd = change(Op::Update, outbox_row(ColumnValue::Null));
        assert_eq!(
            r.route(&upd).unwrap(),
            Routed::Skipped(SkipReason::InvalidOpWarned)
        );
        let r = router(|c| c.op_invalid_behavior = InvalidOpBehavior::Error);
        assert_eq!(
            r.route(&upd).unwrap(),
            Routed::Skipped(SkipReason::InvalidOpErrorLogged)
        );
        assert_eq!(r.route(&del).unwrap(), Routed::Skipped(SkipReason::Delete));
        let r = router(|c| c.op_invalid_behavior = InvalidOpBehavior::Fatal);
        let e = r.route(&upd).unwrap_err();
        assert!(matches!(e, RouteError::InvalidOperation { .. }));
        assert!(e.to_string().contains("table.op.invalid.behavior"), "{e}");
        assert!(SkipReason::Delete.to_string().contains("delete"));
    }

    #[test]
    fn topic_regex_and_replacement() {
        let r = router(|c| {
            c.route_topic_regex = "(?<kind>[A-Z][a-z]+)(?<rest>.*)".into();
            c.route_topic_replacement = "events.${kind}.$2x\\$".into();
        });
        assert_eq!(r.topic_for("OrderLine"), "events.Order.Linex$");
        // No match (starts lower-case): the value itself, as RegexRouter leaves the topic.
        assert_eq!(r.topic_for("order"), "order");
        // Java's matches() is a full match: a partial match does not count.
        let r = router(|c| {
            c.route_topic_regex = "Ord".into();
            c.route_topic_replacement = "x".into();
        });
        assert_eq!(r.topic_for("Order"), "Order");
        // $12 with one group is group 1 then "2" (Java's greedy-while-valid rule).
        let r = router(|c| {
            c.route_topic_regex = "(.*)".into();
            c.route_topic_replacement = "t.$12".into();
        });
        assert_eq!(r.topic_for("a"), "t.a2");

        for (re, rep) in [
            ("(.*)", "x.${nope}"),
            ("(.*)", "x.$2"),
            ("(.*)", "x.$"),
            ("(.*)", "x.\\"),
            ("(.*)", "x.$a"),
        ] {
            let cfg = RouterConfig {
                route_topic_regex: re.into(),
                route_topic_replacement: rep.into(),
                ..RouterConfig::default()
            };
            let e = EventRouter::new(&cfg).unwrap_err();
            assert!(
                matches!(e, RouterConfigError::Replacement { .. }),
                "{rep}: {e}"
            );
        }
        let mut cfg = RouterConfig {
            route_topic_regex: "(?<=a)b".into(),
            ..RouterConfig::default()
        };
        assert!(matches!(
            EventRouter::new(&cfg).unwrap_err(),
            RouterConfigError::Regex { .. }
        ));
        cfg.route_topic_regex = "a)(b".into();
        assert!(EventRouter::new(&cfg).is_err());
    }

    #[test]
    fn route_value_problems_are_errors() {
        let r = router(|_| {});
        let mut c = insert(text("{}"));
        c.row = row(&[
            ("id", ColumnValue::Int(1)),
            ("aggregate_type", ColumnValue::Null),
            ("aggregate_id", text("a")),
            ("payload", text("{}")),
        ]);
        let e = r.route(&c).unwrap_err();
        assert!(matches!(e, RouteError::NullRouteValue { .. }), "{e}");
        assert!(e.to_string().contains("aggregate_type"));

        c.row = row(&[
            ("id", ColumnValue::Int(1)),
            ("aggregate_id", text("a")),
            ("payload", text("{}")),
        ]);
        let e = r.route(&c).unwrap_err();
        assert!(e.to_string().contains("route.by.field"), "{e}");
        assert!(e.to_string().contains("aggregate_type"), "{e}");

        c.row = row(&[
            ("id", ColumnValue::Int(1)),
            ("aggregate_type", text("has space")),
            ("aggregate_id", text("a")),
            ("payload", text("{}")),
        ]);
        let e = r.route(&c).unwrap_err();
        assert!(matches!(e, RouteError::InvalidTopic { .. }), "{e}");

        c.row = row(&[
            ("id", ColumnValue::Int(1)),
            ("aggregate_type", ColumnValue::Bytes(vec![0xff, 0xfe])),
            ("aggregate_id", text("a")),
            ("payload", text("{}")),
        ]);
        assert!(matches!(
            r.route(&c).unwrap_err(),
            RouteError::RouteValueNotText { .. }
        ));
    }

    #[test]
    fn missing_payload_id_and_key_columns_name_the_option() {
        let r = router(|_| {});
        for (missing, option) in [
            ("payload", "table.field.event.payload"),
            ("id", "table.field.event.id"),
            ("aggregate_id", "table.field.event.key"),
        ] {
            let cols: Vec<(&str, ColumnValue)> = [
                ("id", ColumnValue::Int(1)),
                ("aggregate_type", text("Order")),
                ("aggregate_id", text("a")),
                ("payload", text("{}")),
            ]
            .into_iter()
            .filter(|(n, _)| *n != missing)
            .collect();
            let e = r.route(&change(Op::Insert, row(&cols))).unwrap_err();
            let msg = e.to_string();
            assert!(msg.contains(option) && msg.contains(missing), "{msg}");
        }
    }

    #[test]
    fn null_key_gives_no_key() {
        let r = router(|_| {});
        let mut c = insert(text("{}"));
        c.row = row(&[
            (
                "id",
                ColumnValue::Uuid("4d47e190-0402-4048-bc2c-89dd54343cdc".into()),
            ),
            ("aggregate_type", text("Order")),
            ("aggregate_id", ColumnValue::Null),
            ("payload", text("{}")),
        ]);
        let rec = record(&r, &c);
        assert_eq!(rec.key, None);
        assert_eq!(rec.headers[0].1, b"4d47e190-0402-4048-bc2c-89dd54343cdc");
    }

    #[test]
    fn empty_and_null_payloads() {
        let plain = router(|_| {});
        let tomb = router(|c| c.tombstone_on_empty_payload = true);
        // NULL: no value either way (Debezium passes the null payload through).
        assert_eq!(record(&plain, &insert(ColumnValue::Null)).value, None);
        assert_eq!(record(&tomb, &insert(ColumnValue::Null)).value, None);
        // Blank: tombstone only when enabled; otherwise the bytes as they are.
        assert_eq!(record(&tomb, &insert(text(" \n\t"))).value, None);
        assert_eq!(
            record(&plain, &insert(text(" \n\t"))).value.as_deref(),
            Some(&b" \n\t"[..])
        );
        assert_eq!(
            record(&plain, &insert(text(""))).value.as_deref(),
            Some(&b""[..])
        );
        assert_eq!(record(&tomb, &insert(text(""))).value, None);
        // Tombstones keep topic, key and id header.
        let rec = record(&tomb, &insert(ColumnValue::Null));
        assert_eq!(rec.topic, "outbox.event.Order");
        assert_eq!(rec.key.as_deref(), Some(&b"order-7"[..]));
        assert_eq!(rec.headers.len(), 1);
    }

    #[test]
    fn payload_bytes_pass_through_verbatim() {
        let r = router(|_| {});
        let utf8 = "{\"emoji\":\"😀𝄞\",\"han\":\"汉字\"}";
        assert_eq!(utf8.chars().filter(|c| c.len_utf8() == 4).count(), 2);
        let rec = record(&r, &insert(ColumnValue::Json(utf8.into())));
        assert_eq!(rec.value.as_deref(), Some(utf8.as_bytes()));

        let mut big = String::with_capacity(1 << 20);
        big.push_str("{\"blob\":\"");
        while big.len() < (1 << 20) - 2 {
            big.push_str("abcdefghij😀");
        }
        big.truncate((1 << 20) - 2);
        while !big.is_char_boundary(big.len()) {
            big.pop();
        }
        big.push_str("\"}");
        let rec = record(&r, &insert(ColumnValue::Json(big.clone())));
        assert_eq!(rec.value.as_deref(), Some(big.as_bytes()));
        let bin: Vec<u8> = (0..=255u8).cycle().take(1 << 20).collect();
        let rec = record(&r, &insert(ColumnValue::Bytes(bin.clone())));
        assert_eq!(rec.value, Some(bin));
    }

    #[test]
    fn expand_json_payload() {
        let r = router(|c| c.expand_json_payload = true);
        let rec = record(
            &r,
            &insert(ColumnValue::Json(
                r#"{"a": 1, "n": null, "p": 39.98}"#.into(),
            )),
        );
        assert_eq!(rec.value.as_deref(), Some(&br#"{"a":1,"p":39.98}"#[..]));
        // Not JSON: unchanged (Debezium warns and emits the record unchanged).
        let rec = record(&r, &insert(text("not json")));
        assert_eq!(rec.value.as_deref(), Some(&b"not json"[..]));
        let rec = record(&r, &insert(text("{broken")));
        assert_eq!(rec.value.as_deref(), Some(&b"{broken"[..]));
        assert_eq!(record(&r, &insert(ColumnValue::Null)).value, None);
    }

    #[test]
    fn envelope_placement() {
        let r = router(|c| {
            c.additional_placement = AdditionalField::parse_list(
                "event_type:envelope:type,id:envelope,created_at:envelope:at",
            )
            .unwrap();
        });
        let rec = record(&r, &insert(ColumnValue::Json(r#"{"a":1}"#.into())));
        assert_eq!(
            String::from_utf8(rec.value.unwrap()).unwrap(),
            r#"{"payload":"{\"a\":1}","type":"OrderCreated","id":42,"at":1700000000123}"#
        );
        let r = router(|c| {
            c.expand_json_payload = true;
            c.additional_placement =
                AdditionalField::parse_list("event_type:envelope:type").unwrap();
        });
        let rec = record(&r, &insert(ColumnValue::Json(r#"{"a":1}"#.into())));
        assert_eq!(
            String::from_utf8(rec.value.unwrap()).unwrap(),
            r#"{"payload":{"a":1},"type":"OrderCreated"}"#
        );
        let rec = record(&r, &insert(ColumnValue::Null));
        assert_eq!(
            String::from_utf8(rec.value.unwrap()).unwrap(),
            r#"{"payload":null,"type":"OrderCreated"}"#
        );
        let cfg = RouterConfig {
            additional_placement: AdditionalField::parse_list("event_type:envelope:payload")
                .unwrap(),
            ..RouterConfig::default()
        };
        assert!(matches!(
            EventRouter::new(&cfg).unwrap_err(),
            RouterConfigError::DuplicateEnvelopeField { .. }
        ));
    }

    #[test]
    fn header_placement_and_no_default_type_header() {
        let r = router(|_| {});
        let rec = record(&r, &insert(text("{}")));
        assert_eq!(rec.headers.len(), 1, "no eventType header unless placed");

        let r = router(|c| {
            c.additional_placement = AdditionalField::parse_list(
                "event_type:header:eventType,aggregate_type:header,nothing:header",
            )
            .unwrap();
            c.additional_field_missing = MissingFieldBehavior::Ignore;
        });
        let mut c = insert(text("{}"));
        let rec = record(&r, &c);
        assert_eq!(
            rec.headers,
            vec![
                ("id".to_string(), b"42".to_vec()),
                ("eventType".to_string(), b"OrderCreated".to_vec()),
                ("aggregate_type".to_string(), b"Order".to_vec()),
            ]
        );
        // NULL header column: no header.
        c.row = row(&[
            ("id", ColumnValue::Int(1)),
            ("aggregate_type", text("Order")),
            ("aggregate_id", text("a")),
            ("event_type", ColumnValue::Null),
            ("payload", text("{}")),
        ]);
        assert_eq!(record(&r, &c).headers.len(), 2);
        // Missing column with the default `error`.
        let r = router(|c| {
            c.additional_placement = AdditionalField::parse_list("nothing:header").unwrap()
        });
        let e = r.route(&insert(text("{}"))).unwrap_err();
        assert!(
            e.to_string().contains("table.fields.additional.placement"),
            "{e}"
        );
    }

    #[test]
    fn partition_placement() {
        let r = router(|c| {
            c.additional_placement = AdditionalField::parse_list("p:partition").unwrap()
        });
        let mk = |p: ColumnValue| {
            change(
                Op::Insert,
                row(&[
                    ("id", ColumnValue::Int(1)),
                    ("aggregate_type", text("Order")),
                    ("aggregate_id", text("a")),
                    ("payload", text("{}")),
                    ("p", p),
                ]),
            )
        };
        assert_eq!(record(&r, &mk(ColumnValue::Int(3))).partition, Some(3));
        assert_eq!(record(&r, &mk(ColumnValue::UInt(5))).partition, Some(5));
        assert_eq!(record(&r, &mk(ColumnValue::Null)).partition, None);
        assert!(matches!(
            r.route(&mk(ColumnValue::Int(-1))).unwrap_err(),
            RouteError::PartitionValue { .. }
        ));
        assert!(r.route(&mk(ColumnValue::Int(1 << 40))).is_err());
        assert!(r.route(&mk(text("3"))).is_err());
    }

    #[test]
    fn timestamp_column() {
        let r = router(|c| c.field_event_timestamp = Some("created_at".into()));
        assert_eq!(
            record(&r, &insert(text("{}"))).timestamp_ms,
            Some(1_700_000_000_123)
        );
        let r = router(|c| c.field_event_timestamp = Some("event_type".into()));
        assert!(matches!(
            r.route(&insert(text("{}"))).unwrap_err(),
            RouteError::TimestampType { .. }
        ));
        let r = router(|c| c.field_event_timestamp = Some("nope".into()));
        assert!(r
            .route(&insert(text("{}")))
            .unwrap_err()
            .to_string()
            .contains("table.field.event.timestamp"));
        // NULL falls back to the source timestamp.
        let r = router(|c| c.field_event_timestamp = Some("ts".into()));
        let c = change(
            Op::Insert,
            row(&[
                ("id", ColumnValue::Int(1)),
                ("aggregate_type", text("Order")),
                ("aggregate_id", text("a")),
                ("payload", text("{}")),
                ("ts", ColumnValue::Null),
            ]),
        );
        assert_eq!(record(&r, &c).timestamp_ms, Some(1_700_000_999_000));
    }

    #[test]
    fn empty_column_option_is_a_config_error() {
        let cfg = RouterConfig {
            field_event_payload: String::new(),
            ..RouterConfig::default()
        };
        assert!(matches!(
            EventRouter::new(&cfg).unwrap_err(),
            RouterConfigError::EmptyColumn {
                option: "table.field.event.payload"
            }
        ));
    }
}
