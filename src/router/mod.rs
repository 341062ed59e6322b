//! The outbox router: turns an outbox row change into the Kafka record Debezium's Outbox Event
//! Router SMT (`io.debezium.transforms.outbox.EventRouter`, `EventRouterDelegate`) makes in a
//! Kafka Connect worker.
//!
//! Routing builds the Connect data Debezium builds (key, value and headers, each a schema and
//! a value from the type mapping, [`crate::typemap`]); the connector's converters
//! ([`crate::connect`]) then write it, as Connect's worker does.
//!
//! * **Operations**: only INSERTs make records. DELETEs are dropped silently (the
//!   insert-then-delete cleanup pattern). UPDATEs follow `table.op.invalid.behavior`:
//!   `warn` (default) and `error` log the table name (never values) and skip, `fatal` is an error.
//! * **Topic**: the `route.by.field` value must match `route.topic.regex` *entirely*
//!   (Java `Matcher.matches()`, as Kafka's `RegexRouter`); the topic is then
//!   `route.topic.replacement` with `$n` / `${name}` replaced by the groups. When the regex does
//!   not match, the topic is the value itself (RegexRouter leaves the topic unchanged).
//! * **Key**: the `table.field.event.key` column, with its column schema.
//! * **Value**: the `table.field.event.payload` column with its schema; with
//!   `table.expand.json.payload` the struct Debezium infers from it (see [`json`]); with
//!   `envelope` placements a struct named `<topic.prefix>.<schema>.<table>.<route-by value>.Value`
//!   (the name of the first record of each payload schema sticks, as Debezium caches it) of
//!   `payload` and the placed columns, versioned by `table.field.event.schema.version`.
//!   A NULL or blank (Java `trim().isEmpty()`) payload gives a tombstone (no value, no
//!   schema) with `route.tombstone.on.empty.payload=true`; otherwise the null payload is
//!   written by the value converter (no bytes with StringConverter, `null` or the envelope
//!   with JsonConverter).
//! * **Headers**: Debezium 3's `__debezium.context.*` (`extended.headers.enabled`), then
//!   `id` = the event id column, then every `col:header[:alias]` placement in order, each
//!   with its column schema; a NULL column gives a header without value.
//! * **Partition**: a `col:partition` placement gives the partition from an integer column
//!   (0..=2147483647; NULL: the producer's partitioner decides); otherwise `None`.
//! * **Timestamp**: the `table.field.event.timestamp` column in epoch milliseconds when set and
//!   not NULL, else the change's source timestamp. (Debezium falls back to the time the
//!   connector processed the event; outboxd uses the source commit time, which is deterministic
//!   and repeatable after a restart.)
//! * A value a converter cannot write (JsonConverter on a payload whose expansion failed
//!   after its schema was inferred, ByteArrayConverter on text, StringConverter on bytes) is
//!   an event that cannot be delivered ([`RouteError::Convert`]), where Debezium's task
//!   would fail.

mod columns;
mod config;
pub(crate) mod json;
mod record;
mod topic;

use std::fmt;

pub use self::columns::{ColumnMapper, ColumnRules};
pub(crate) use self::config::parse_bool;
pub use self::config::RecordFormat;
pub use self::config::{
    AdditionalField, InvalidOpBehavior, JsonEmptyArrayBehavior, JsonNullBehavior,
    MissingFieldBehavior, Placement, RouterConfig, UnknownOption, DEFAULT_ROUTE_TOPIC_REGEX,
    DEFAULT_ROUTE_TOPIC_REPLACEMENT,
};
use self::json::Expansion;
pub(crate) use self::topic::is_valid_topic;
use self::topic::TopicRoute;
use std::borrow::Cow;

use crate::connect::{Converters, Schema, Type, Value};
use crate::event::{Op, RowChange, TableName};
use crate::record::KafkaRecord;
use crate::typemap::{self, ColumnType};
use crate::value::ColumnValue;

const OPT_ID: &str = "table.field.event.id";
const OPT_KEY: &str = "table.field.event.key";
const OPT_PAYLOAD: &str = "table.field.event.payload";
const OPT_TIMESTAMP: &str = "table.field.event.timestamp";
const OPT_ROUTE_BY: &str = "route.by.field";
const OPT_PLACEMENT: &str = "table.fields.additional.placement";

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
#[derive(Debug, Clone, thiserror::Error)]
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
    /// A configured field is not in a PostgreSQL logical decoding message's JSON content.
    #[error("a logical decoding message with prefix `{prefix}` has no field `{column}` ({what}); put `{column}` into the message's JSON content (a message has no column defaults), or set {option} to the field that holds it")]
    MissingMessageField {
        /// The message prefix.
        prefix: String,
        /// The configured field.
        column: String,
        /// Debezium option naming it.
        option: &'static str,
        /// What the field should hold.
        what: &'static str,
    },
    /// A configured column exists in the table but is not in the row's binlog image
    /// (`binlog_row_image=MINIMAL` or `NOBLOB` leave out the columns an INSERT did not set).
    #[error("outbox table {table} has column `{column}` ({option}), but this row's binlog row image leaves it out: binlog_row_image is MINIMAL or NOBLOB on the server, which omits columns an INSERT left to their defaults; set binlog_row_image=FULL on the server (SET GLOBAL binlog_row_image = 'FULL', and in its configuration file)")]
    NotInRowImage {
        /// The table.
        table: TableName,
        /// The configured column.
        column: String,
        /// Debezium option naming it.
        option: &'static str,
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
    /// The connector's converter cannot write a part of the record (where Kafka Connect's
    /// converter throws and the Debezium task fails, or where its output would be
    /// meaningless).
    #[error("outbox table {table}: {message}; change the connector's {setting}")]
    Convert {
        /// The table.
        table: TableName,
        /// Which part (`key`, `value`, `header <name>`), which converter, and what it says.
        message: String,
        /// The setting to change (`value.converter`, ...).
        setting: &'static str,
    },
    /// A column's value cannot be mapped to Connect data (Debezium's type mapping).
    #[error("outbox table {table}: column `{column}`: {message}")]
    Mapping {
        /// The table.
        table: TableName,
        /// The column.
        column: String,
        /// Why (never the value).
        message: String,
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

impl RouteError {
    /// A stable short name of the failure, for dead-letter headers
    /// (`__connect.errors.exception.class.name`): `outboxd.route.<kind>`.
    pub fn kind(&self) -> &'static str {
        match self {
            RouteError::MissingColumn { .. } | RouteError::MissingMessageField { .. } => {
                "outboxd.route.missing_column"
            }
            RouteError::NotInRowImage { .. } => "outboxd.route.not_in_row_image",
            RouteError::NullRouteValue { .. } => "outboxd.route.null_route_value",
            RouteError::RouteValueNotText { .. } => "outboxd.route.route_value_not_text",
            RouteError::InvalidTopic { .. } => "outboxd.route.invalid_topic",
            RouteError::InvalidOperation { .. } => "outboxd.route.invalid_operation",
            RouteError::TimestampType { .. } => "outboxd.route.timestamp_type",
            RouteError::PartitionValue { .. } => "outboxd.route.partition_value",
            RouteError::Convert { .. } => "outboxd.route.converter",
            RouteError::Mapping { .. } => "outboxd.route.type_mapping",
        }
    }
}

/// The outbox router, built once per connector from its [`RouterConfig`].
#[derive(Debug)]
pub struct EventRouter {
    cfg: RouterConfig,
    topics: TopicRoute,
    envelope: bool,
    /// The converters records are written with.
    converters: Converters,
    /// The converters need schemas (JsonConverter checks and writes them, ByteArray and
    /// BinaryData look at the type); StringConverter and SimpleHeaderConverter do not.
    needs_schemas: bool,
    /// Debezium's extended headers, serialized once (their values do not change in a run).
    extended: Vec<(String, Option<Vec<u8>>)>,
    /// Envelope schema names by payload schema (Debezium's `payloadSchemaCache`) or by
    /// schema version (`versionedValueSchema`): the first record's route-by value sticks.
    envelope_names: std::sync::Mutex<std::collections::HashMap<String, String>>,
}

impl Clone for EventRouter {
    fn clone(&self) -> Self {
        Self {
            cfg: self.cfg.clone(),
            topics: self.topics.clone(),
            envelope: self.envelope,
            converters: self.converters.clone(),
            needs_schemas: self.needs_schemas,
            extended: self.extended.clone(),
            envelope_names: std::sync::Mutex::new(
                self.envelope_names
                    .lock()
                    .map(|m| m.clone())
                    .unwrap_or_default(),
            ),
        }
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
        let topics = TopicRoute::new(&cfg.route_topic_regex, &cfg.route_topic_replacement)?;
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
        let converters = cfg.format.converters(envelope || cfg.expand_json_payload);
        let needs_schemas = converters.key.needs_schema()
            || converters.value.needs_schema()
            || converters.header.needs_schema();
        let extended = if cfg.format.extended_headers {
            record::extended_headers(&cfg.format, &converters.header)
        } else {
            Vec::new()
        };
        Ok(Self {
            cfg: cfg.clone(),
            topics,
            envelope,
            converters,
            needs_schemas,
            extended,
            envelope_names: std::sync::Mutex::new(std::collections::HashMap::new()),
        })
    }

    /// The converters records are written with (for `check` and the startup log).
    pub fn converters(&self) -> &Converters {
        &self.converters
    }

    /// One line on how records become bytes, for `check` and the startup log: the
    /// converters and where each came from, the extended headers, the type-mapping modes.
    pub fn describe_format(&self) -> String {
        let f = &self.cfg.format;
        let t = &f.types;
        format!(
            "{}; Debezium extended headers {}; time.precision.mode={:?}, decimal.handling.mode={:?}, binary.handling.mode={:?}, bigint.unsigned.handling.mode={:?}, interval.handling.mode={:?}",
            self.converters.describe(),
            if f.extended_headers { "on" } else { "off" },
            t.time_precision,
            t.decimal,
            t.binary,
            t.bigint_unsigned,
            t.interval
        )
    }

    /// The settings this router was built from.
    pub fn config(&self) -> &RouterConfig {
        &self.cfg
    }

    /// The one topic this router sends events to when `route.topic.replacement` refers to no
    /// group of `route.topic.regex` (`shop.events` rather than `outbox.event.${routedByValue}`:
    /// every value the regex matches goes there); `None` when the topic depends on the
    /// `route.by.field` value, so the topics cannot be known before the events.
    pub fn fixed_topic(&self) -> Option<String> {
        self.topics.fixed_topic()
    }

    /// The topic for a `route.by.field` value: the replacement when the regex matches the whole
    /// value, else the value itself (Kafka `RegexRouter` semantics).
    pub fn topic_for(&self, routed_by_value: &str) -> String {
        let topic = self.topics.topic_for(routed_by_value);
        match &self.cfg.topic_prefix {
            Some(p) => format!("{p}{topic}"),
            None => topic,
        }
    }

    /// Routes one row change of an outbox table.
    ///
    /// `Ok(Routed::Skipped)` for DELETEs and (unless `fatal`) UPDATEs, not logged here (the
    /// delivery loop logs UPDATEs once per source transaction); `Err` for a row that
    /// cannot become a record (a definite error: the connector must halt without
    /// checkpointing past it).
    pub fn route(&self, change: &RowChange) -> Result<Routed, RouteError> {
        self.route_taking(&mut change.clone())
    }

    /// [`route`](Self::route) for the delivery loops: when the record's value is the payload
    /// column as written (no envelope, no expansion), its buffer is moved out of `change`
    /// (the column is left NULL) instead of copied. On `Err` `change` is unchanged but for
    /// Debezium's column options (masking, truncation, column lists), which are applied to
    /// the row first, as Debezium applies them before the EventRouter (so a dead letter
    /// carries the masked row too).
    pub fn route_taking(&self, change: &mut RowChange) -> Result<Routed, RouteError> {
        self.apply_column_options(change);
        match change.op {
            Op::Insert => self.route_insert(change).map(Routed::Record),
            Op::Delete => Ok(Routed::Skipped(SkipReason::Delete)),
            // Logged by the delivery loop once per source transaction, with the count
            // (`pipeline::ignored`), not once per row.
            Op::Update => match self.cfg.op_invalid_behavior {
                InvalidOpBehavior::Warn => Ok(Routed::Skipped(SkipReason::InvalidOpWarned)),
                InvalidOpBehavior::Error => Ok(Routed::Skipped(SkipReason::InvalidOpErrorLogged)),
                InvalidOpBehavior::Fatal => Err(RouteError::InvalidOperation {
                    table: change.table.clone(),
                    op: change.op.as_str(),
                }),
            },
        }
    }

    /// Applies Debezium's column options to the row of an outbox table (not to a logical
    /// decoding message, which Debezium's column options do not reach). Idempotent.
    pub fn apply_column_options(&self, change: &mut RowChange) {
        if change.table.schema != crate::event::MESSAGE_SCHEMA {
            self.cfg
                .format
                .columns
                .apply(&change.table, &mut change.row);
        }
    }

    /// The event id of `change` as text (`table.field.event.id`), for naming it in errors
    /// and dead letters; `(none)` when the row has no such column or it is NULL.
    pub fn event_id(&self, change: &RowChange) -> String {
        change
            .row
            .get(&self.cfg.field_event_id)
            .and_then(|v| v.as_text().map(|t| t.into_owned()))
            .unwrap_or_else(|| "(none)".into())
    }

    /// The key and value a dead letter of `change` carries when it cannot be routed: the
    /// `table.field.event.key` column as text and the `table.field.event.payload` column's
    /// bytes as written (no expansion, no envelope), each `None` when the row lacks it or it
    /// is NULL.
    pub fn dead_letter_parts(&self, change: &RowChange) -> (Option<Vec<u8>>, Option<Vec<u8>>) {
        let key = change
            .row
            .get(&self.cfg.field_event_key)
            .and_then(text_bytes);
        let value = change
            .row
            .get(&self.cfg.field_event_payload)
            .and_then(|v| v.as_payload_bytes().map(|b| b.into_owned()));
        (key, value)
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
            .ok_or_else(|| missing_column(change, column, option, what))
    }

    fn route_insert(&self, change: &mut RowChange) -> Result<KafkaRecord, RouteError> {
        let cfg = &self.cfg;
        // Checked in Debezium's order: payload, timestamp, id.
        self.column(
            change,
            &cfg.field_event_payload,
            OPT_PAYLOAD,
            "the event payload",
        )?;
        let timestamp_ms = self.timestamp(change)?;
        let id = self.column(change, &cfg.field_event_id, OPT_ID, "the event id")?;

        let msg = self.message_struct(change)?;
        let msg = msg.as_ref();
        let mut headers =
            Vec::with_capacity(self.extended.len() + 1 + cfg.additional_placement.len());
        // Debezium adds its context headers to change events, not to message events.
        if msg.is_none() {
            headers.extend(self.extended.iter().cloned());
        }
        let (schema, value) = self.datum(change, &cfg.field_event_id, id, msg)?;
        headers.push((
            "id".to_string(),
            self.header_bytes(change, "id", schema.as_ref(), value)?,
        ));

        let mut partition = None;
        let mut envelope_fields: Vec<(String, Option<Schema>, Value)> = Vec::new();
        for f in &cfg.additional_placement {
            let v = match change.row.get(&f.column) {
                Some(v) => v,
                None if cfg.additional_field_missing == MissingFieldBehavior::Ignore => continue,
                None if !cfg.additional_error_on_missing && f.placement == Placement::Header => {
                    continue
                }
                None => {
                    return Err(missing_column(
                        change,
                        &f.column,
                        OPT_PLACEMENT,
                        "a value to place (or set table.field.additional.missing=ignore)",
                    ))
                }
            };
            match f.placement {
                Placement::Header => {
                    let (schema, value) = self.datum(change, &f.column, v, msg)?;
                    let bytes = self.header_bytes(change, f.name(), schema.as_ref(), value)?;
                    headers.push((f.name().to_string(), bytes));
                }
                Placement::Envelope => {
                    let (schema, value) = self.datum_with_schema(change, &f.column, v, msg)?;
                    envelope_fields.push((f.name().to_string(), Some(schema), value));
                }
                Placement::Partition => partition = partition_of(change, &f.column, v)?,
            }
        }
        // Debezium reads the version only to build an envelope (`getInt32`): a NULL gives an
        // unversioned envelope, a column of another type fails it; without an envelope the
        // column is not read.
        let version = match &cfg.field_schema_version {
            Some(col) if self.envelope => self.schema_version(change, col)?,
            _ => None,
        };
        let route_value = self.route_value(change)?;
        let topic = self.topic(change, &route_value)?;

        let key_column = self.column(
            change,
            &cfg.field_event_key,
            OPT_KEY,
            "the record key (aggregate id)",
        )?;
        let (key_schema, key_value) = self.datum(change, &cfg.field_event_key, key_column, msg)?;
        let key = self
            .converters
            .key
            .serialize(key_schema.as_ref(), key_value)
            .map_err(|e| {
                self.convert_error(
                    change,
                    "key".into(),
                    "key.converter",
                    &self.converters.key.to_string(),
                    e,
                )
            })?;

        // The payload, moved out of the row once nothing before it can fail.
        let payload_type = self
            .column_type(change, &cfg.field_event_payload)
            .into_owned();
        let payload_cv = change
            .row
            .take(&cfg.field_event_payload)
            .unwrap_or(ColumnValue::Null);
        let restore = |change: &mut RowChange, cv: ColumnValue| {
            change.row.put(&cfg.field_event_payload, cv);
        };
        let (mut payload_schema, mut payload) = if let Some(m) = msg {
            match m.field(&cfg.field_event_payload) {
                Some((schema, value)) => (Some(schema.clone()), value.clone()),
                None => {
                    restore(change, payload_cv);
                    return Err(missing_column(
                        change,
                        &cfg.field_event_payload,
                        OPT_PAYLOAD,
                        "the event payload",
                    ));
                }
            }
        } else {
            match typemap::column_value_into(
                &payload_type.sql,
                payload_cv.clone(),
                &cfg.format.types,
            ) {
                Ok(v) => (
                    self.schema_of(change, &cfg.field_event_payload, &payload_type)?,
                    v,
                ),
                Err(e) => {
                    restore(change, payload_cv);
                    return Err(self.mapping_error(change, &cfg.field_event_payload, e));
                }
            }
        };
        if cfg.expand_json_payload {
            if let Value::String(text) = &payload {
                match json::expand(
                    text,
                    &cfg.field_event_payload,
                    cfg.json_payload_null_behavior,
                    cfg.json_payload_empty_array_behavior,
                ) {
                    Expansion::Expanded { schema, value } => {
                        payload_schema = Some(schema);
                        payload = value;
                    }
                    Expansion::SchemaOnly { schema, reason } => {
                        tracing::warn!(table = %change.table, %reason,
                            "table.expand.json.payload: the payload's inferred schema does not fit it; the payload stays text with that schema (as in Debezium, a schema-checking converter then refuses it)");
                        payload_schema = Some(schema);
                    }
                    Expansion::Unchanged { reason } => {
                        tracing::warn!(table = %change.table, %reason,
                            "table.expand.json.payload: JSON expansion failed; payload written unchanged");
                    }
                }
            } else if !payload.is_null() {
                tracing::warn!(table = %change.table,
                    "table.expand.json.payload is on but the payload is not text; written unchanged");
            }
        }

        let is_delete = match &payload {
            Value::Null => true,
            Value::String(s) => s.bytes().all(|c| c <= b' '),
            _ => false,
        };
        let (value_schema, value) = if is_delete && cfg.tombstone_on_empty_payload {
            if self.envelope && msg.is_none() {
                // Debezium computes (and caches) the envelope's schema name before it
                // decides on a tombstone: the first record of a payload schema names the
                // envelopes after it even when it is a tombstone.
                let payload = payload_schema.unwrap_or_else(|| Schema::optional(Type::String));
                self.envelope_name(change, &route_value, &payload, version);
            }
            (None, Value::Null)
        } else if !self.envelope {
            (payload_schema, payload)
        } else {
            let payload_schema = payload_schema.unwrap_or_else(|| Schema::optional(Type::String));
            let name = if msg.is_some() {
                // The message struct has no name: Debezium names the envelope by the route
                // value alone.
                route_value.clone()
            } else {
                self.envelope_name(change, &route_value, &payload_schema, version)
            };
            let mut fields = Vec::with_capacity(1 + envelope_fields.len());
            let mut values = Vec::with_capacity(1 + envelope_fields.len());
            fields.push(("payload".to_string(), payload_schema));
            values.push(("payload".to_string(), payload));
            for (name, schema, v) in envelope_fields {
                fields.push((
                    name.clone(),
                    schema.unwrap_or_else(|| Schema::optional(Type::String)),
                ));
                values.push((name, v));
            }
            let mut schema = Schema::structure(fields);
            schema.version = version;
            schema.name = Some(name);
            (Some(schema), Value::Struct(values))
        };
        let value = match self
            .converters
            .value
            .serialize(value_schema.as_ref(), value)
        {
            Ok(v) => v,
            Err(e) => {
                // The payload may have moved into the value: put the row's column back so a
                // dead letter or a replay still has it.
                restore(change, payload_cv);
                return Err(self.convert_error(
                    change,
                    "value".into(),
                    "value.converter",
                    &self.converters.value.to_string(),
                    e,
                ));
            }
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

    /// A logical decoding message's content as Debezium's `DecodeLogicalDecodingMessageContent`
    /// makes it, when that transform is configured and `change` is such a message: its
    /// fields, read back from the row's values (the JSON text of each field, which parses
    /// to the same tree).
    fn message_struct(&self, change: &RowChange) -> Result<Option<MessageStruct>, RouteError> {
        let Some(null_include) = self.cfg.format.decode_messages else {
            return Ok(None);
        };
        if change.table.schema != crate::event::MESSAGE_SCHEMA {
            return Ok(None);
        }
        let mut text = String::from("{");
        for (i, (name, v)) in change.row.iter().enumerate() {
            if i > 0 {
                text.push(',');
            }
            crate::connect::json::write_str(name, &mut text);
            text.push(':');
            match v {
                ColumnValue::Null => text.push_str("null"),
                ColumnValue::Text(s) => crate::connect::json::write_str(s, &mut text),
                ColumnValue::Json(raw) | ColumnValue::Decimal(raw) => text.push_str(raw),
                ColumnValue::Bool(b) => text.push_str(if *b { "true" } else { "false" }),
                ColumnValue::Int(i) => text.push_str(&i.to_string()),
                other => crate::connect::json::write_str(&other.to_string(), &mut text),
            }
        }
        text.push('}');
        let nulls = if null_include {
            JsonNullBehavior::OptionalBytes
        } else {
            JsonNullBehavior::Ignore
        };
        let (schema, value) =
            json::message_struct(&text, nulls).map_err(|message| RouteError::Mapping {
                table: change.table.clone(),
                column: "(message content)".into(),
                message,
            })?;
        let Value::Struct(values) = value else {
            return Ok(None);
        };
        Ok(Some(MessageStruct {
            fields: schema
                .fields
                .iter()
                .zip(values)
                .map(|(f, (_, v))| (f.name.clone(), (*f.schema).clone(), v))
                .collect(),
        }))
    }

    /// The type of column `name`: the source's description, or one inferred from the value
    /// (logical decoding messages, tests).
    fn column_type<'c>(&self, change: &'c RowChange, name: &str) -> Cow<'c, ColumnType> {
        match change.row.column_type(name) {
            Some(t) => Cow::Borrowed(t),
            None => Cow::Owned(record::inferred_type(
                change.row.get(name).unwrap_or(&ColumnValue::Null),
            )),
        }
    }

    /// The column's schema, when the converters need schemas.
    fn schema_of(
        &self,
        change: &RowChange,
        name: &str,
        t: &ColumnType,
    ) -> Result<Option<Schema>, RouteError> {
        if !self.needs_schemas {
            return Ok(None);
        }
        self.column_schema(change, name, t).map(Some)
    }

    /// The column's schema with the parameters of Debezium's column options. A NULL of a type
    /// outboxd does not map gets an optional string schema rather than stopping the connector
    /// (Debezium's own schema for the type is not known to outboxd).
    fn column_schema(
        &self,
        change: &RowChange,
        name: &str,
        t: &ColumnType,
    ) -> Result<Schema, RouteError> {
        let schema = match typemap::column_schema(t, &self.cfg.format.types) {
            Ok(s) => s,
            Err(_)
                if matches!(t.sql, crate::typemap::SqlType::Unsupported(_))
                    && change.row.get(name).is_none_or(ColumnValue::is_null) =>
            {
                Schema::new(crate::connect::Type::String).with_optional(true)
            }
            Err(e) => return Err(self.mapping_error(change, name, e)),
        };
        Ok(self.with_column_parameters(change, name, t, schema))
    }

    /// `schema` with the parameters Debezium's column options add to the field's schema.
    fn with_column_parameters(
        &self,
        change: &RowChange,
        name: &str,
        t: &ColumnType,
        mut schema: Schema,
    ) -> Schema {
        if change.table.schema != crate::event::MESSAGE_SCHEMA {
            schema
                .parameters
                .extend(self.cfg.format.columns.schema_parameters(
                    &change.table,
                    name,
                    t.source.as_ref(),
                ));
        }
        schema
    }

    /// Column `name` (value `v`) as Connect data: its schema (when the converters need one)
    /// and value.
    fn datum(
        &self,
        change: &RowChange,
        name: &str,
        v: &ColumnValue,
        msg: Option<&MessageStruct>,
    ) -> Result<(Option<Schema>, Value), RouteError> {
        if let Some(m) = msg {
            let (schema, value) = m
                .field(name)
                .ok_or_else(|| missing_column(change, name, OPT_PLACEMENT, "a value"))?;
            return Ok((Some(schema.clone()), value.clone()));
        }
        let t = self.column_type(change, name);
        let value = typemap::column_value(&t.sql, v, &self.cfg.format.types)
            .map_err(|e| self.mapping_error(change, name, e))?;
        Ok((self.schema_of(change, name, &t)?, value))
    }

    /// [`datum`](Self::datum) with the schema always built (envelope fields).
    fn datum_with_schema(
        &self,
        change: &RowChange,
        name: &str,
        v: &ColumnValue,
        msg: Option<&MessageStruct>,
    ) -> Result<(Schema, Value), RouteError> {
        if let Some(m) = msg {
            let (schema, value) = m
                .field(name)
                .ok_or_else(|| missing_column(change, name, OPT_PLACEMENT, "a value"))?;
            return Ok((schema.clone(), value.clone()));
        }
        let t = self.column_type(change, name);
        let value = typemap::column_value(&t.sql, v, &self.cfg.format.types)
            .map_err(|e| self.mapping_error(change, name, e))?;
        Ok((self.column_schema(change, name, &t)?, value))
    }

    fn header_bytes(
        &self,
        change: &RowChange,
        name: &str,
        schema: Option<&Schema>,
        value: Value,
    ) -> Result<Option<Vec<u8>>, RouteError> {
        self.converters
            .header
            .serialize(schema, value)
            .map_err(|e| {
                self.convert_error(
                    change,
                    format!("header {name}"),
                    "header.converter",
                    &self.converters.header.to_string(),
                    e,
                )
            })
    }

    fn convert_error(
        &self,
        change: &RowChange,
        part: String,
        setting: &'static str,
        converter: &str,
        e: crate::connect::ConvertError,
    ) -> RouteError {
        RouteError::Convert {
            table: change.table.clone(),
            message: format!("the {part} cannot be written by {converter}: {}", e.message),
            setting,
        }
    }

    fn mapping_error(
        &self,
        change: &RowChange,
        column: &str,
        e: typemap::MappingError,
    ) -> RouteError {
        RouteError::Mapping {
            table: change.table.clone(),
            column: column.to_string(),
            message: e.0,
        }
    }

    /// The envelope schema's version from column `col` (`table.field.event.schema.version`).
    /// `None` for NULL (Debezium's `getInt32` gives null: an unversioned envelope).
    fn schema_version(&self, change: &RowChange, col: &str) -> Result<Option<i32>, RouteError> {
        let v = self.column(
            change,
            col,
            "table.field.event.schema.version",
            "the schema version",
        )?;
        match v {
            ColumnValue::Null => return Ok(None),
            ColumnValue::Int(i) => i32::try_from(*i).ok(),
            ColumnValue::UInt(u) => i32::try_from(*u).ok(),
            _ => None,
        }
        .map(Some)
        .ok_or_else(|| RouteError::Mapping {
            table: change.table.clone(),
            column: col.to_string(),
            message:
                "table.field.event.schema.version must name an integer column when the record has an envelope (Debezium's task fails on it too)"
                    .into(),
        })
    }

    /// `EventRouterDelegate.getSchemaName` for an envelope whose payload has schema `payload`:
    /// the connector's value schema name
    /// `<topic.prefix>.<schema>.<table>.Value` with the route-by value before `Value`; the
    /// first name given to a payload schema (or, versioned, to a version) sticks.
    fn envelope_name(
        &self,
        change: &RowChange,
        route_value: &str,
        payload: &Schema,
        version: Option<i32>,
    ) -> String {
        let key = match version {
            Some(v) => format!("v{v}"),
            None => {
                let mut k = String::from("p");
                let _ = crate::connect::json::write_schema(
                    payload,
                    &crate::connect::JsonOptions::default(),
                    &mut k,
                );
                k
            }
        };
        let fresh = || {
            let prefix = &self.cfg.format.logical_name;
            let base = if prefix.is_empty() {
                format!("{}.{}", change.table.schema, change.table.name)
            } else {
                format!("{prefix}.{}.{}", change.table.schema, change.table.name)
            };
            format!("{base}.{route_value}.Value")
        };
        let Ok(mut names) = self.envelope_names.lock() else {
            return fresh();
        };
        if names.len() > 10_000 {
            names.clear();
        }
        names.entry(key).or_insert_with(fresh).clone()
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

    /// The `route.by.field` value as text.
    fn route_value(&self, change: &RowChange) -> Result<String, RouteError> {
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
        v.as_text()
            .map(|t| t.into_owned())
            .ok_or_else(|| RouteError::RouteValueNotText {
                table: change.table.clone(),
                column: col.clone(),
            })
    }

    fn topic(&self, change: &RowChange, value: &str) -> Result<String, RouteError> {
        let mut topic = self.topics.topic(value);
        if let Some(p) = &self.cfg.topic_prefix {
            topic.insert_str(0, p);
        }
        if !is_valid_topic(&topic) {
            return Err(RouteError::InvalidTopic {
                table: change.table.clone(),
                column: self.cfg.route_by_field.clone(),
                topic,
            });
        }
        Ok(topic)
    }
}

/// A logical decoding message's fields as Debezium's transformation makes them: name,
/// Connect schema, value.
struct MessageStruct {
    fields: Vec<(String, Schema, Value)>,
}

impl MessageStruct {
    fn field(&self, name: &str) -> Option<(&Schema, &Value)> {
        self.fields
            .iter()
            .find(|(n, _, _)| n == name)
            .map(|(_, s, v)| (s, v))
    }
}

/// The error for a configured `column` that `change`'s row does not carry: left out of a
/// partial binlog row image, or not a column of the table at all.
fn missing_column(
    change: &RowChange,
    column: &str,
    option: &'static str,
    what: &'static str,
) -> RouteError {
    if change.table.schema == crate::event::MESSAGE_SCHEMA {
        RouteError::MissingMessageField {
            prefix: change.table.name.clone(),
            column: column.to_string(),
            option,
            what,
        }
    } else if change.row.is_omitted(column) {
        RouteError::NotInRowImage {
            table: change.table.clone(),
            column: column.to_string(),
            option,
        }
    } else {
        RouteError::MissingColumn {
            table: change.table.clone(),
            column: column.to_string(),
            option,
            what,
        }
    }
}

/// A column as header/key bytes: text forms as UTF-8, binary as is; `None` for NULL.
fn text_bytes(v: &ColumnValue) -> Option<Vec<u8>> {
    match v {
        ColumnValue::Null => None,
        ColumnValue::Bytes(b) => Some(b.clone()),
        other => other.as_text().map(|t| t.into_owned().into_bytes()),
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

#[cfg(test)]
mod tests;
