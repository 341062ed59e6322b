//! Outbox Event Router settings: the options of Debezium's
//! `io.debezium.transforms.outbox.EventRouter` SMT, under their Debezium names and outboxd's
//! snake_case names.
//!
//! Both configuration formats funnel every router option through [`RouterConfig::set_option`],
//! so a TOML file and a Debezium connector JSON that say the same thing give equal
//! [`RouterConfig`]s (and therefore the same Kafka records).

use std::collections::BTreeMap;
use std::fmt;

use crate::connect::{Converter, ConverterSource, Converters, JsonOptions};
use crate::typemap::TypeModes;

/// What the router does with an UPDATE on an outbox table.
///
/// Debezium option `table.op.invalid.behavior` (`warn` | `error` | `fatal`, default `warn`;
/// Debezium 1.x spelled it `debezium.op.invalid.behavior`). DELETEs are always dropped silently.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum InvalidOpBehavior {
    /// Log a warning (table name only, never values) and skip the change. Debezium `warn`.
    #[default]
    Warn,
    /// Log an error and skip the change. Debezium `error`.
    Error,
    /// Stop the connector with an error. Debezium `fatal`.
    Fatal,
}

/// Where an additional outbox column goes in the Kafka record
/// (the middle part of a `table.fields.additional.placement` entry).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// A Kafka header named by the alias (or the column name); value = the column as text.
    Header,
    /// A field of a JSON envelope `{"payload": ..., "<alias>": ...}` that becomes the value.
    Envelope,
    /// The record's partition: the column's integer value. An alias has no effect.
    Partition,
}

impl Placement {
    fn parse(s: &str) -> Option<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "header" => Some(Placement::Header),
            "envelope" => Some(Placement::Envelope),
            "partition" => Some(Placement::Partition),
            _ => None,
        }
    }

    /// The Debezium spelling: `header`, `envelope`, `partition`.
    pub fn as_str(self) -> &'static str {
        match self {
            Placement::Header => "header",
            Placement::Envelope => "envelope",
            Placement::Partition => "partition",
        }
    }
}

/// One entry of `table.fields.additional.placement`: `column:placement[:alias]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdditionalField {
    /// Outbox table column to read.
    pub column: String,
    /// Where the value goes.
    pub placement: Placement,
    /// Header or envelope field name; `None` means the column name (Debezium's rule).
    pub alias: Option<String>,
}

impl AdditionalField {
    /// The header / envelope field name: the alias, or the column name without one.
    pub fn name(&self) -> &str {
        self.alias.as_deref().unwrap_or(&self.column)
    }

    /// Parses Debezium's comma-separated list, e.g. `"type:header:eventType,seq:envelope,p:partition"`.
    ///
    /// Each entry is two or three colon-separated parts (column, placement, optional alias);
    /// parts are trimmed. As Debezium reads the list (the value split at commas the Java
    /// way, which drops trailing empty entries, and not trimmed first), trailing commas are
    /// allowed and any other empty or blank entry is an error (Debezium's task fails on it:
    /// `a:header, ` too). Errors name the bad entry and the expected form.
    pub fn parse_list(list: &str) -> Result<Vec<AdditionalField>, String> {
        let mut out = Vec::new();
        let kept = list.trim_end_matches(',');
        if kept.trim().is_empty() && !kept.contains(',') {
            return Ok(out);
        }
        let entries: Vec<&str> = kept.split(',').collect();
        for entry in entries {
            if entry.trim().is_empty() {
                return Err(format!(
                    "has an empty entry in {list:?} (Debezium's EventRouter fails its task on \
                     one): remove the extra comma"
                ));
            }
            let parts: Vec<&str> = entry.split(':').map(str::trim).collect();
            if parts.len() != 2 && parts.len() != 3 {
                return Err(format!(
                    "entry {entry:?} is not column:placement or column:placement:alias \
                     (e.g. \"event_type:header:eventType\")"
                ));
            }
            if parts[0].is_empty() {
                return Err(format!("entry {entry:?} has an empty column name"));
            }
            let placement = Placement::parse(parts[1]).ok_or_else(|| {
                format!(
                    "entry {entry:?}: placement {:?} is not one of header, envelope, partition",
                    parts[1]
                )
            })?;
            let alias = match parts.get(2) {
                Some(&"") => {
                    return Err(format!(
                        "entry {entry:?} has an empty alias; drop the trailing ':' to use the \
                         column name"
                    ))
                }
                Some(a) => Some((*a).to_string()),
                None => None,
            };
            out.push(AdditionalField {
                column: parts[0].to_string(),
                placement,
                alias,
            });
        }
        Ok(out)
    }
}

impl fmt::Display for AdditionalField {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.column, self.placement.as_str())?;
        if let Some(a) = &self.alias {
            write!(f, ":{a}")?;
        }
        Ok(())
    }
}

/// What to do when a column named in `table.fields.additional.placement` is not in the row.
///
/// Debezium option `table.field.additional.missing` (`error` | `ignore`, default `error`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MissingFieldBehavior {
    /// The change fails to route (the connector halts).
    #[default]
    Error,
    /// The placement is skipped for that row.
    Ignore,
}

/// How `table.expand.json.payload` treats JSON `null` object members.
///
/// Debezium option `table.json.payload.null.behavior` (`ignore` | `optional_bytes`, default
/// `ignore`): with `ignore` a member whose value is `null` is dropped from the expanded payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum JsonNullBehavior {
    /// Drop `null` members (Debezium default).
    #[default]
    Ignore,
    /// Keep them as `null`.
    OptionalBytes,
}

/// How `table.expand.json.payload` treats empty JSON arrays in object members.
///
/// Debezium option `table.json.payload.empty.array.behavior` (`ignore` | `optional_string`,
/// default `ignore`): with `ignore` a member whose value is `[]` is dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum JsonEmptyArrayBehavior {
    /// Drop `[]` members (Debezium default).
    #[default]
    Ignore,
    /// Keep them as `[]`.
    OptionalString,
}

/// Settings of the Outbox Event Router (Debezium `io.debezium.transforms.outbox.EventRouter`).
///
/// Column names are exact, case-sensitive outbox table column names. [`RouterConfig::default`]
/// follows outboxd's outbox schema (`id`, `aggregate_type`, `aggregate_id`, `event_type`,
/// `payload`); [`RouterConfig::debezium_defaults`] follows Debezium's (`id`, `aggregatetype`,
/// `aggregateid`, `type`, `payload`) and is the starting point of a Debezium JSON import, so a
/// migrating user who left options unset gets exactly Debezium's behaviour.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouterConfig {
    /// Column with the event id, sent as header `id`. `table.field.event.id`.
    pub field_event_id: String,
    /// Column with the record key (the aggregate id). `table.field.event.key`.
    pub field_event_key: String,
    /// Column with the event type. `table.field.event.type`. As in Debezium it is not placed in
    /// the record unless listed in `additional_placement` (e.g. `event_type:header:eventType`).
    pub field_event_type: String,
    /// Column with the payload, the record value. `table.field.event.payload`.
    pub field_event_payload: String,
    /// Column whose value becomes the record timestamp (epoch milliseconds); `None` uses the
    /// source commit time. `table.field.event.timestamp`.
    pub field_event_timestamp: Option<String>,
    /// Extra columns placed as headers, envelope fields or the partition.
    /// `table.fields.additional.placement`.
    pub additional_placement: Vec<AdditionalField>,
    /// Missing additional column: error or skip. `table.field.additional.missing`.
    pub additional_field_missing: MissingFieldBehavior,
    /// Debezium's `table.fields.additional.error.on.missing` (default true): with false, a
    /// header placement of a column the row lacks is left out; an envelope or partition
    /// placement of one still fails the event, as in Debezium.
    pub additional_error_on_missing: bool,
    /// Parse the payload as JSON and re-serialise it as Debezium's JsonConverter would write
    /// the expanded struct. `table.expand.json.payload`.
    pub expand_json_payload: bool,
    /// `null` members in an expanded payload. `table.json.payload.null.behavior`.
    pub json_payload_null_behavior: JsonNullBehavior,
    /// `[]` members in an expanded payload. `table.json.payload.empty.array.behavior`.
    pub json_payload_empty_array_behavior: JsonEmptyArrayBehavior,
    /// Column whose value chooses the topic. `route.by.field`.
    pub route_by_field: String,
    /// Java-style regex the `route_by_field` value must match entirely (named groups
    /// `(?<name>...)`). `route.topic.regex`.
    pub route_topic_regex: String,
    /// Topic template with `$1` / `${name}` group references. `route.topic.replacement`.
    pub route_topic_replacement: String,
    /// A NULL or blank payload gives a tombstone (null value). `route.tombstone.on.empty.payload`.
    pub tombstone_on_empty_payload: bool,
    /// What to do with UPDATEs on the outbox table. `table.op.invalid.behavior`.
    pub op_invalid_behavior: InvalidOpBehavior,
    /// Column whose (integer) value is the envelope schema's version.
    /// `table.field.event.schema.version`.
    pub field_schema_version: Option<String>,
    /// How records become bytes: converters, Debezium's extended headers, type mapping.
    pub format: RecordFormat,
    /// outboxd's own, set by `--shadow NAME`: a prefix put before every routed topic (after
    /// `route.topic.regex`/`replacement`), e.g. `shadow.`.
    pub topic_prefix: Option<String>,
}

/// How a routed record becomes bytes, beyond the EventRouter's own options: Kafka
/// Connect's converters, Debezium 3's extended headers, and the connector options of
/// Debezium's type mapping.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordFormat {
    /// The key, value and header converters; `None`: outboxd's own default (see
    /// [`RecordFormat::converters`]).
    pub converters: Option<Converters>,
    /// The connector's own converter keys (`key.converter`, `value.converter.schemas.enable`,
    /// ...), resolved against the worker file when the configuration is loaded.
    pub converter_keys: BTreeMap<String, String>,
    /// Debezium's `extended.headers.enabled`: the `__debezium.context.*` headers before `id`.
    pub extended_headers: bool,
    /// Debezium's logical name (`topic.prefix`): the `connectorLogicalName` header and the
    /// first part of the envelope schema's name.
    pub logical_name: String,
    /// The connector plugin name Debezium puts in the `connectorName` header:
    /// `postgresql`, `mariadb` or `mysql`.
    pub connector_type: String,
    /// `time.precision.mode`, `decimal.handling.mode`, ... .
    pub types: TypeModes,
    /// Debezium's `DecodeLogicalDecodingMessageContent` transform precedes the EventRouter:
    /// a PostgreSQL logical decoding message is routed as the struct it makes of the
    /// message's JSON content, without extended headers; the value is its
    /// `fields.null.include` (null fields kept as optional bytes instead of dropped).
    pub decode_messages: Option<bool>,
    /// Debezium's column options (`column.include.list`, `column.exclude.list`,
    /// `column.truncate.to.N.chars`, `column.mask.with.N.chars`), applied to the row first.
    pub columns: super::columns::ColumnRules,
}

impl Default for RecordFormat {
    /// outboxd's defaults (a TOML connector): outboxd's converters, no extended headers,
    /// MySQL's type modes (the loader sets the source's).
    fn default() -> Self {
        Self {
            converters: None,
            converter_keys: BTreeMap::new(),
            extended_headers: false,
            logical_name: String::new(),
            connector_type: String::new(),
            types: TypeModes::MYSQL,
            decode_messages: None,
            columns: Default::default(),
        }
    }
}

impl RecordFormat {
    /// Resolves [`converters`](Self::converters) from the connector's converter keys: for a
    /// Debezium connector JSON (`debezium`) as Kafka Connect does (connector, then the
    /// `worker` file's, then Kafka's stock worker files: JsonConverter with schemas); for a
    /// TOML connector from its own keys over outboxd's default (the worker file's converters
    /// are not applied to TOML connectors). `structured`: the value is an expanded payload
    /// or an envelope.
    pub fn resolve_converters(
        &mut self,
        debezium: bool,
        worker: &BTreeMap<String, String>,
        structured: bool,
    ) -> Result<(), crate::connect::converter::ConverterConfigError> {
        if debezium {
            let stock = (
                Converter::Json(JsonOptions::default()),
                ConverterSource::StockWorker,
            );
            self.converters = Some(Converters::resolve(
                &self.converter_keys,
                Some(worker),
                [stock.clone(), stock],
            )?);
        } else if !self.converter_keys.is_empty() {
            let d = self.converters(structured);
            self.converters = Some(Converters::resolve(
                &self.converter_keys,
                None,
                [
                    (d.key, ConverterSource::Outboxd),
                    (d.value, ConverterSource::Outboxd),
                ],
            )?);
        }
        Ok(())
    }

    /// The converters records are written with: the resolved ones, or outboxd's default —
    /// key and value through Debezium's BinaryDataConverter with a StringConverter delegate
    /// (text as UTF-8, binary columns as their bytes), a `structured` value (expanded
    /// payload, envelope) through JsonConverter without schemas, SimpleHeaderConverter.
    pub fn converters(&self, structured: bool) -> Converters {
        if let Some(c) = &self.converters {
            return c.clone();
        }
        let raw = Converter::BinaryData {
            delegate: Some(Box::new(Converter::String)),
        };
        Converters {
            key: raw.clone(),
            value: if structured {
                Converter::Json(JsonOptions {
                    schemas_enable: false,
                    ..JsonOptions::default()
                })
            } else {
                raw
            },
            header: crate::connect::HeaderConverter::Simple,
            sources: [
                ConverterSource::Outboxd,
                ConverterSource::Outboxd,
                ConverterSource::ConnectDefault,
            ],
        }
    }
}

/// Debezium's default `route.topic.regex`.
pub const DEFAULT_ROUTE_TOPIC_REGEX: &str = "(?<routedByValue>.*)";
/// Debezium's default `route.topic.replacement`.
pub const DEFAULT_ROUTE_TOPIC_REPLACEMENT: &str = "outbox.event.${routedByValue}";

impl Default for RouterConfig {
    /// outboxd's defaults: the seeds' outbox schema (`id`, `aggregate_type`, `aggregate_id`,
    /// `event_type`, `payload`); everything else as in Debezium.
    fn default() -> Self {
        Self {
            field_event_id: "id".into(),
            field_event_key: "aggregate_id".into(),
            field_event_type: "event_type".into(),
            field_event_payload: "payload".into(),
            field_event_timestamp: None,
            additional_placement: Vec::new(),
            additional_field_missing: MissingFieldBehavior::Error,
            additional_error_on_missing: true,
            expand_json_payload: false,
            json_payload_null_behavior: JsonNullBehavior::Ignore,
            json_payload_empty_array_behavior: JsonEmptyArrayBehavior::Ignore,
            route_by_field: "aggregate_type".into(),
            route_topic_regex: DEFAULT_ROUTE_TOPIC_REGEX.into(),
            route_topic_replacement: DEFAULT_ROUTE_TOPIC_REPLACEMENT.into(),
            tombstone_on_empty_payload: false,
            op_invalid_behavior: InvalidOpBehavior::Warn,
            field_schema_version: None,
            format: RecordFormat::default(),
            topic_prefix: None,
        }
    }
}

/// The router options: (canonical Debezium name, outboxd snake_case name).
const OPTIONS: &[(Opt, &str, &str)] = &[
    (Opt::EventId, "table.field.event.id", "field_event_id"),
    (Opt::EventKey, "table.field.event.key", "field_event_key"),
    (Opt::EventType, "table.field.event.type", "field_event_type"),
    (
        Opt::EventPayload,
        "table.field.event.payload",
        "field_event_payload",
    ),
    (
        Opt::EventTimestamp,
        "table.field.event.timestamp",
        "field_event_timestamp",
    ),
    (
        Opt::AdditionalPlacement,
        "table.fields.additional.placement",
        "additional_placement",
    ),
    (
        Opt::AdditionalMissing,
        "table.field.additional.missing",
        "additional_field_missing",
    ),
    (
        Opt::AdditionalErrorOnMissing,
        "table.fields.additional.error.on.missing",
        "additional_error_on_missing",
    ),
    (
        Opt::ExpandJson,
        "table.expand.json.payload",
        "expand_json_payload",
    ),
    (
        Opt::JsonNull,
        "table.json.payload.null.behavior",
        "json_payload_null_behavior",
    ),
    (
        Opt::JsonEmptyArray,
        "table.json.payload.empty.array.behavior",
        "json_payload_empty_array_behavior",
    ),
    (Opt::RouteByField, "route.by.field", "route_by_field"),
    (
        Opt::RouteTopicRegex,
        "route.topic.regex",
        "route_topic_regex",
    ),
    (
        Opt::RouteTopicReplacement,
        "route.topic.replacement",
        "route_topic_replacement",
    ),
    (
        Opt::Tombstone,
        "route.tombstone.on.empty.payload",
        "tombstone_on_empty_payload",
    ),
    (
        Opt::OpInvalid,
        "table.op.invalid.behavior",
        "op_invalid_behavior",
    ),
    (
        Opt::SchemaVersion,
        "table.field.event.schema.version",
        "field_schema_version",
    ),
];

/// Older Debezium spellings accepted as aliases.
const LEGACY_ALIASES: &[(&str, Opt)] = &[
    // Debezium 1.x names.
    ("debezium.op.invalid.behavior", Opt::OpInvalid),
    ("table.field.payload", Opt::EventPayload),
];

/// Debezium EventRouter options that exist but change nothing in the bytes outboxd writes.
const NO_EFFECT_OPTIONS: &[(&str, &str)] = &[
    (
        "tracing.span.context.field",
        "OpenTelemetry tracing of the SMT is not supported",
    ),
    (
        "tracing.operation.name",
        "OpenTelemetry tracing of the SMT is not supported",
    ),
    (
        "tracing.with.context.field.only",
        "OpenTelemetry tracing of the SMT is not supported",
    ),
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Opt {
    EventId,
    EventKey,
    EventType,
    EventPayload,
    EventTimestamp,
    AdditionalPlacement,
    AdditionalMissing,
    AdditionalErrorOnMissing,
    ExpandJson,
    JsonNull,
    JsonEmptyArray,
    RouteByField,
    RouteTopicRegex,
    RouteTopicReplacement,
    Tombstone,
    OpInvalid,
    SchemaVersion,
}

/// Result of [`RouterConfig::set_option`] for a name that is not a router option.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UnknownOption {
    /// A Debezium EventRouter option with no effect on outboxd's output; the string says why.
    NoEffect(&'static str),
    /// Not an EventRouter option at all.
    Unknown,
}

impl RouterConfig {
    /// Every outbox column the router needs (event id, key, payload, route-by, timestamp and
    /// additional placements), for preflight checks that the outbox table has them. Placements
    /// the router leaves out when their column is missing are not needed:
    /// every one under `table.field.additional.missing=ignore`, header placements under
    /// `table.fields.additional.error.on.missing=false`.
    pub fn columns_read(&self) -> Vec<&str> {
        let mut cols = vec![
            self.field_event_id.as_str(),
            self.field_event_key.as_str(),
            self.field_event_payload.as_str(),
            self.route_by_field.as_str(),
        ];
        if let Some(ts) = &self.field_event_timestamp {
            cols.push(ts);
        }
        cols.extend(
            self.additional_placement
                .iter()
                .filter(|f| {
                    self.additional_field_missing == MissingFieldBehavior::Error
                        && (self.additional_error_on_missing || f.placement != Placement::Header)
                })
                .map(|f| f.column.as_str()),
        );
        cols
    }

    /// Debezium's own defaults (`id`, `aggregateid`, `type`, `payload`, `aggregatetype`,
    /// `(?<routedByValue>.*)`, `outbox.event.${routedByValue}`, no tombstones, `warn`): the
    /// starting point of a Debezium connector JSON import.
    pub fn debezium_defaults() -> Self {
        Self {
            field_event_key: "aggregateid".into(),
            field_event_type: "type".into(),
            route_by_field: "aggregatetype".into(),
            ..Self::default()
        }
    }

    /// Every accepted option name: `(Debezium name, outboxd name)`.
    pub fn option_names() -> impl Iterator<Item = (&'static str, &'static str)> {
        OPTIONS.iter().map(|(_, d, s)| (*d, *s))
    }

    /// Every option with its value in Debezium's text form (what [`set_option`](Self::set_option)
    /// reads back to the same settings), by Debezium name, in [`OPTIONS`] order: how two
    /// definitions of one connector are compared (`group::definitions`). An unset
    /// `table.field.event.timestamp` is empty.
    pub fn options(&self) -> Vec<(&'static str, String)> {
        OPTIONS
            .iter()
            .map(|(opt, name, _)| {
                let value = match opt {
                    Opt::EventId => self.field_event_id.clone(),
                    Opt::EventKey => self.field_event_key.clone(),
                    Opt::EventType => self.field_event_type.clone(),
                    Opt::EventPayload => self.field_event_payload.clone(),
                    Opt::EventTimestamp => self.field_event_timestamp.clone().unwrap_or_default(),
                    Opt::AdditionalPlacement => self
                        .additional_placement
                        .iter()
                        .map(|f| f.to_string())
                        .collect::<Vec<_>>()
                        .join(","),
                    Opt::AdditionalMissing => match self.additional_field_missing {
                        MissingFieldBehavior::Error => "error",
                        MissingFieldBehavior::Ignore => "ignore",
                    }
                    .into(),
                    Opt::ExpandJson => self.expand_json_payload.to_string(),
                    Opt::JsonNull => match self.json_payload_null_behavior {
                        JsonNullBehavior::Ignore => "ignore",
                        JsonNullBehavior::OptionalBytes => "optional_bytes",
                    }
                    .into(),
                    Opt::JsonEmptyArray => match self.json_payload_empty_array_behavior {
                        JsonEmptyArrayBehavior::Ignore => "ignore",
                        JsonEmptyArrayBehavior::OptionalString => "optional_string",
                    }
                    .into(),
                    Opt::RouteByField => self.route_by_field.clone(),
                    Opt::RouteTopicRegex => self.route_topic_regex.clone(),
                    Opt::RouteTopicReplacement => self.route_topic_replacement.clone(),
                    Opt::Tombstone => self.tombstone_on_empty_payload.to_string(),
                    Opt::AdditionalErrorOnMissing => self.additional_error_on_missing.to_string(),
                    Opt::OpInvalid => match self.op_invalid_behavior {
                        InvalidOpBehavior::Warn => "warn",
                        InvalidOpBehavior::Error => "error",
                        InvalidOpBehavior::Fatal => "fatal",
                    }
                    .into(),
                    Opt::SchemaVersion => self.field_schema_version.clone().unwrap_or_default(),
                };
                (*name, value)
            })
            .collect()
    }

    /// The record format's settings in text form (converters, extended headers, logical
    /// name, type-mapping modes, shadow prefix): they change the bytes as much as the
    /// router's [`options`](Self::options) do (`group::definitions` compares both).
    pub fn format_options(&self) -> Vec<(&'static str, String)> {
        let f = &self.format;
        let converters = match &f.converters {
            Some(c) => format!("{} / {} / {}", c.key, c.value, c.header),
            None => "outboxd's default".to_string(),
        };
        let t = &f.types;
        vec![
            ("converters", converters),
            ("extended.headers.enabled", f.extended_headers.to_string()),
            ("topic.prefix", f.logical_name.clone()),
            ("time.precision.mode", format!("{:?}", t.time_precision)),
            ("decimal.handling.mode", format!("{:?}", t.decimal)),
            ("binary.handling.mode", format!("{:?}", t.binary)),
            (
                "bigint.unsigned.handling.mode",
                format!("{:?}", t.bigint_unsigned),
            ),
            ("interval.handling.mode", format!("{:?}", t.interval)),
            (
                "shadow topic prefix",
                self.topic_prefix.clone().unwrap_or_default(),
            ),
        ]
    }

    /// Sets one option from its text form, by Debezium name (`route.by.field`), outboxd name
    /// (`route_by_field`) or a Debezium 1.x alias.
    ///
    /// Values are Debezium's text forms: booleans `true`/`false` (any case), enums by their
    /// Debezium value (`warn`, `ignore`, `optional_bytes`, ...), the additional placement as
    /// `col:placement[:alias],...`. An empty `table.field.event.timestamp` unsets it.
    ///
    /// Returns `Ok(None)` when set, `Ok(Some(UnknownOption))` when `name` is not a router option
    /// (the caller decides whether that is an error), `Err(message)` for a bad value.
    pub fn set_option(&mut self, name: &str, value: &str) -> Result<Option<UnknownOption>, String> {
        if let Some(done) = self.set_format_option(name, value)? {
            return Ok(done);
        }
        let opt = OPTIONS
            .iter()
            .find(|(_, d, s)| *d == name || *s == name)
            .map(|(o, _, _)| *o)
            .or_else(|| {
                LEGACY_ALIASES
                    .iter()
                    .find(|(n, _)| *n == name)
                    .map(|(_, o)| *o)
            });
        let Some(opt) = opt else {
            return Ok(Some(
                NO_EFFECT_OPTIONS
                    .iter()
                    .find(|(n, _)| *n == name)
                    .map(|(_, why)| UnknownOption::NoEffect(why))
                    .unwrap_or(UnknownOption::Unknown),
            ));
        };
        let v = value.trim();
        let column = |what: &str| -> Result<String, String> {
            if v.is_empty() {
                Err(format!("{what} column name must not be empty"))
            } else {
                Ok(v.to_string())
            }
        };
        match opt {
            Opt::EventId => self.field_event_id = column("event id")?,
            Opt::EventKey => self.field_event_key = column("event key")?,
            Opt::EventType => self.field_event_type = column("event type")?,
            Opt::EventPayload => self.field_event_payload = column("payload")?,
            Opt::EventTimestamp => {
                self.field_event_timestamp = (!v.is_empty()).then(|| v.to_string())
            }
            Opt::AdditionalPlacement => {
                self.additional_placement = AdditionalField::parse_list(v)?;
            }
            Opt::AdditionalMissing => {
                self.additional_field_missing = match v.to_ascii_lowercase().as_str() {
                    "error" => MissingFieldBehavior::Error,
                    "ignore" => MissingFieldBehavior::Ignore,
                    _ => return Err(format!("{value:?} is not one of error, ignore")),
                }
            }
            Opt::ExpandJson => self.expand_json_payload = parse_bool(v)?,
            Opt::JsonNull => {
                self.json_payload_null_behavior = match v.to_ascii_lowercase().as_str() {
                    "ignore" => JsonNullBehavior::Ignore,
                    "optional_bytes" => JsonNullBehavior::OptionalBytes,
                    _ => return Err(format!("{value:?} is not one of ignore, optional_bytes")),
                }
            }
            Opt::JsonEmptyArray => {
                self.json_payload_empty_array_behavior = match v.to_ascii_lowercase().as_str() {
                    "ignore" => JsonEmptyArrayBehavior::Ignore,
                    "optional_string" => JsonEmptyArrayBehavior::OptionalString,
                    _ => return Err(format!("{value:?} is not one of ignore, optional_string")),
                }
            }
            Opt::RouteByField => self.route_by_field = column("route-by")?,
            // Regex and replacement are kept verbatim (whitespace may matter).
            Opt::RouteTopicRegex => self.route_topic_regex = value.to_string(),
            Opt::RouteTopicReplacement => self.route_topic_replacement = value.to_string(),
            Opt::Tombstone => self.tombstone_on_empty_payload = parse_bool(v)?,
            Opt::AdditionalErrorOnMissing => self.additional_error_on_missing = parse_bool(v)?,
            Opt::SchemaVersion => {
                self.field_schema_version = (!v.is_empty()).then(|| v.to_string())
            }
            Opt::OpInvalid => {
                self.op_invalid_behavior = match v.to_ascii_lowercase().as_str() {
                    "warn" => InvalidOpBehavior::Warn,
                    "error" => InvalidOpBehavior::Error,
                    "fatal" => InvalidOpBehavior::Fatal,
                    _ => return Err(format!("{value:?} is not one of warn, error, fatal")),
                }
            }
        }
        Ok(None)
    }
}

impl RouterConfig {
    /// The connector-level options that shape the record bytes, accepted beside the router's:
    /// Kafka Connect's `key.converter` / `value.converter` / `header.converter` (and their
    /// `.`-prefixed options), Debezium's `extended.headers.enabled`, and the type-mapping
    /// options (`time.precision.mode`, `decimal.handling.mode`, `binary.handling.mode`,
    /// `bigint.unsigned.handling.mode`, `interval.handling.mode`). `Ok(None)` when `name` is
    /// none of them.
    fn set_format_option(
        &mut self,
        name: &str,
        value: &str,
    ) -> Result<Option<Option<UnknownOption>>, String> {
        let f = &mut self.format;
        if ["key.converter", "value.converter", "header.converter"]
            .iter()
            .any(|p| name == *p || name.starts_with(&format!("{p}.")))
        {
            f.converter_keys
                .insert(name.to_string(), value.trim().to_string());
            return Ok(Some(None));
        }
        if name == "extended.headers.enabled" {
            f.extended_headers = parse_bool(value)?;
            return Ok(Some(None));
        }
        if f.types.set_option(name, value)? {
            return Ok(Some(None));
        }
        Ok(None)
    }
}

/// Kafka Connect's boolean parsing: `true` / `false`, case-insensitive.
pub(crate) fn parse_bool(v: &str) -> Result<bool, String> {
    match v.trim().to_ascii_lowercase().as_str() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(format!("{v:?} is not a boolean (true or false)")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_read_back_to_the_same_settings() {
        let mut cfg = RouterConfig::debezium_defaults();
        for (name, value) in [
            ("table.field.event.timestamp", "created_at"),
            (
                "table.fields.additional.placement",
                "type:header:eventType,seq:envelope",
            ),
            ("table.field.additional.missing", "ignore"),
            ("table.expand.json.payload", "true"),
            ("table.json.payload.null.behavior", "optional_bytes"),
            ("table.json.payload.empty.array.behavior", "optional_string"),
            ("route.topic.replacement", "shop.${routedByValue}"),
            ("route.tombstone.on.empty.payload", "true"),
            ("table.op.invalid.behavior", "fatal"),
        ] {
            cfg.set_option(name, value).unwrap();
        }
        for start in [RouterConfig::default(), cfg] {
            let mut back = RouterConfig::default();
            for (name, value) in start.options() {
                assert_eq!(back.set_option(name, &value), Ok(None), "{name}={value}");
            }
            assert_eq!(back, start);
        }
    }

    #[test]
    fn additional_placement_parsing() {
        let f = AdditionalField::parse_list(
            " event_type:header:eventType, seq:ENVELOPE ,p:partition:ignored,",
        )
        .unwrap();
        assert_eq!(
            f,
            vec![
                AdditionalField {
                    column: "event_type".into(),
                    placement: Placement::Header,
                    alias: Some("eventType".into())
                },
                AdditionalField {
                    column: "seq".into(),
                    placement: Placement::Envelope,
                    alias: None
                },
                AdditionalField {
                    column: "p".into(),
                    placement: Placement::Partition,
                    alias: Some("ignored".into())
                },
            ]
        );
        assert_eq!(f[1].name(), "seq");
        assert_eq!(f[0].to_string(), "event_type:header:eventType");
        assert!(AdditionalField::parse_list("").unwrap().is_empty());

        let e = AdditionalField::parse_list("a").unwrap_err();
        assert!(e.contains("column:placement"), "{e}");
        let e = AdditionalField::parse_list("a:b:c:d").unwrap_err();
        assert!(e.contains("column:placement"), "{e}");
        let e = AdditionalField::parse_list("a:body").unwrap_err();
        assert!(e.contains("header, envelope, partition"), "{e}");
        let e = AdditionalField::parse_list(":header").unwrap_err();
        assert!(e.contains("empty column"), "{e}");
        let e = AdditionalField::parse_list("a:header:").unwrap_err();
        assert!(e.contains("empty alias"), "{e}");
    }

    #[test]
    fn options_by_either_name() {
        let mut a = RouterConfig::default();
        let mut b = RouterConfig::default();
        a.set_option("route.by.field", "kind").unwrap();
        b.set_option("route_by_field", "kind").unwrap();
        a.set_option("route.tombstone.on.empty.payload", "TRUE")
            .unwrap();
        b.set_option("tombstone_on_empty_payload", "true").unwrap();
        a.set_option("debezium.op.invalid.behavior", "fatal")
            .unwrap();
        b.set_option("op_invalid_behavior", "Fatal").unwrap();
        assert_eq!(a, b);
        assert_eq!(a.op_invalid_behavior, InvalidOpBehavior::Fatal);
        assert_eq!(
            a.set_option("table.field.event.schema.version", "v")
                .unwrap(),
            None
        );
        assert_eq!(a.field_schema_version.as_deref(), Some("v"));
        assert_eq!(
            a.set_option("tracing.operation.name", "x").unwrap(),
            Some(UnknownOption::NoEffect(NO_EFFECT_OPTIONS[1].1))
        );
        assert_eq!(
            a.set_option("value.converter.schemas.enable", "false")
                .unwrap(),
            None
        );
        assert_eq!(
            a.set_option("decimal.handling.mode", "string").unwrap(),
            None
        );
        assert!(a.set_option("decimal.handling.mode", "fancy").is_err());
        assert_eq!(
            a.set_option("nope", "x").unwrap(),
            Some(UnknownOption::Unknown)
        );
        assert!(a.set_option("route.by.field", " ").is_err());
        assert!(a
            .set_option("table.expand.json.payload", "yes")
            .unwrap_err()
            .contains("boolean"));
        assert!(a.set_option("table.op.invalid.behavior", "skip").is_err());
    }

    #[test]
    fn debezium_defaults_differ_only_in_column_names() {
        let d = RouterConfig::debezium_defaults();
        assert_eq!(d.field_event_key, "aggregateid");
        assert_eq!(d.route_by_field, "aggregatetype");
        assert_eq!(d.field_event_type, "type");
        assert_eq!(d.field_event_id, "id");
        assert_eq!(d.route_topic_replacement, "outbox.event.${routedByValue}");
    }
}
