//! A connector's converters, resolved as Kafka Connect resolves them, and serialization of
//! Connect data to record bytes.
//!
//! Kafka Connect (`Worker.startTask`, `Plugins.newConverter`) takes a connector's
//! `key.converter` / `value.converter` / `header.converter` when the connector config names
//! one, configured with the connector's options under that prefix (`value.converter.
//! schemas.enable`, ...); otherwise the worker's, with the worker's options. A connector's
//! options without its own converter class are ignored. The worker file must name key and
//! value converters (Connect refuses to start without); the header converter defaults to
//! `SimpleHeaderConverter`.
//!
//! Supported: `org.apache.kafka.connect.storage.StringConverter`,
//! `org.apache.kafka.connect.converters.ByteArrayConverter`,
//! `io.debezium.converters.BinaryDataConverter` (with `delegate.converter.type`), and
//! `org.apache.kafka.connect.json.JsonConverter` (`schemas.enable`, `decimal.format`,
//! `replace.null.with.default`); as header converters also `SimpleHeaderConverter`.

use std::collections::BTreeMap;
use std::fmt;

use super::data::{java_double, java_float, Value};
use super::schema::{Schema, Type};
use super::{header, json};

/// `org.apache.kafka.connect.storage.StringConverter`.
pub const STRING_CONVERTER: &str = "org.apache.kafka.connect.storage.StringConverter";
/// `org.apache.kafka.connect.converters.ByteArrayConverter`.
pub const BYTE_ARRAY_CONVERTER: &str = "org.apache.kafka.connect.converters.ByteArrayConverter";
/// `io.debezium.converters.BinaryDataConverter`.
pub const BINARY_DATA_CONVERTER: &str = "io.debezium.converters.BinaryDataConverter";
/// `org.apache.kafka.connect.json.JsonConverter`.
pub const JSON_CONVERTER: &str = "org.apache.kafka.connect.json.JsonConverter";
/// `org.apache.kafka.connect.storage.SimpleHeaderConverter`.
pub const SIMPLE_HEADER_CONVERTER: &str = "org.apache.kafka.connect.storage.SimpleHeaderConverter";

/// Where JsonConverter writes a `Decimal` (`decimal.format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DecimalFormat {
    /// Base64 of the unscaled value's two's-complement bytes (the default).
    #[default]
    Base64,
    /// A JSON number.
    Numeric,
}

/// JsonConverter's options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonOptions {
    /// `schemas.enable` (default true): the `{"schema":..,"payload":..}` envelope.
    pub schemas_enable: bool,
    /// `decimal.format` (default `BASE64`).
    pub decimal_format: DecimalFormat,
    /// `replace.null.with.default` (default true).
    pub replace_null_with_default: bool,
}

impl Default for JsonOptions {
    fn default() -> Self {
        Self {
            schemas_enable: true,
            decimal_format: DecimalFormat::Base64,
            replace_null_with_default: true,
        }
    }
}

/// A key or value converter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Converter {
    /// `StringConverter`: `value.toString()` as UTF-8.
    String,
    /// `ByteArrayConverter`: bytes as they are; any other schema type is refused.
    ByteArray,
    /// Debezium's `BinaryDataConverter`: bytes as they are, anything else through the
    /// delegate (`delegate.converter.type`), or refused without one.
    BinaryData {
        /// The delegate converter.
        delegate: Option<Box<Converter>>,
    },
    /// `JsonConverter`.
    Json(JsonOptions),
}

/// A header converter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeaderConverter {
    /// `SimpleHeaderConverter` (Connect's default): `Values.convertToString`.
    Simple,
    /// A data converter used for headers (`fromConnectHeader` = `fromConnectData`).
    Data(Converter),
}

/// Where a converter setting came from, for `check` and the startup log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConverterSource {
    /// The connector's own config.
    Connector,
    /// The Kafka Connect worker file (`--kafka-config`).
    Worker,
    /// Kafka's stock worker files (`config/connect-*.properties`: JsonConverter with
    /// schemas), used when neither names one: Kafka Connect itself refuses to start then.
    StockWorker,
    /// outboxd's own default for TOML connectors (StringConverter).
    Outboxd,
    /// Connect's built-in default (the header converter: SimpleHeaderConverter).
    ConnectDefault,
}

impl fmt::Display for ConverterSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ConverterSource::Connector => "the connector config",
            ConverterSource::Worker => "the worker file",
            ConverterSource::StockWorker => {
                "Kafka's stock worker files (neither the connector nor a worker file names one)"
            }
            ConverterSource::Outboxd => "outboxd's default",
            ConverterSource::ConnectDefault => "Kafka Connect's default",
        })
    }
}

/// The three converters of a connector and where each came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Converters {
    /// `key.converter`.
    pub key: Converter,
    /// `value.converter`.
    pub value: Converter,
    /// `header.converter`.
    pub header: HeaderConverter,
    /// Where `key`, `value` and `header` came from.
    pub sources: [ConverterSource; 3],
}

impl Default for Converters {
    /// outboxd's own default (TOML connectors): StringConverter for key and value,
    /// SimpleHeaderConverter.
    fn default() -> Self {
        Self {
            key: Converter::String,
            value: Converter::String,
            header: HeaderConverter::Simple,
            sources: [
                ConverterSource::Outboxd,
                ConverterSource::Outboxd,
                ConverterSource::ConnectDefault,
            ],
        }
    }
}

/// Connect data that a converter cannot write: where Kafka Connect's converter throws a
/// `DataException` (the Debezium task then fails), or where its output would be meaningless
/// (StringConverter on bytes). Never contains a value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ConvertError {
    /// What the converter says.
    pub message: String,
}

impl ConvertError {
    /// An error with `message`.
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
        }
    }
}

/// A converter setting that cannot work: names the key and says what to change.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{key}: {message}")]
pub struct ConverterConfigError {
    /// The config key.
    pub key: String,
    /// What is wrong and what to do.
    pub message: String,
}

impl Converters {
    /// Resolves the converters of a connector as Kafka Connect does: the connector's
    /// `key.converter` / `value.converter` / `header.converter` (with its options under that
    /// prefix) when it names one, else the worker file's, else `fallback` (key, value) and
    /// SimpleHeaderConverter for headers.
    ///
    /// `connector` and `worker` are the raw properties (`value.converter.schemas.enable` =
    /// `false`, ...). Errors on an unsupported class or an option value it does not accept.
    pub fn resolve(
        connector: &BTreeMap<String, String>,
        worker: Option<&BTreeMap<String, String>>,
        fallback: [(Converter, ConverterSource); 2],
    ) -> Result<Self, ConverterConfigError> {
        let pick = |prefix: &str| -> Option<(&BTreeMap<String, String>, ConverterSource)> {
            if connector.contains_key(prefix) {
                Some((connector, ConverterSource::Connector))
            } else {
                worker
                    .filter(|w| w.contains_key(prefix))
                    .map(|w| (w, ConverterSource::Worker))
            }
        };
        let data = |prefix: &str,
                    fallback: &(Converter, ConverterSource)|
         -> Result<(Converter, ConverterSource), ConverterConfigError> {
            match pick(prefix) {
                Some((props, source)) => Ok((Converter::from_props(props, prefix)?, source)),
                None => Ok(fallback.clone()),
            }
        };
        let (key, key_source) = data("key.converter", &fallback[0])?;
        let (value, value_source) = data("value.converter", &fallback[1])?;
        let (header, header_source) = match pick("header.converter") {
            Some((props, source)) => (HeaderConverter::from_props(props)?, source),
            None => (HeaderConverter::Simple, ConverterSource::ConnectDefault),
        };
        Ok(Self {
            key,
            value,
            header,
            sources: [key_source, value_source, header_source],
        })
    }

    /// One line for `check` and the startup log: which converters apply and where from.
    pub fn describe(&self) -> String {
        format!(
            "key.converter {} (from {}), value.converter {} (from {}), header.converter {} (from {})",
            self.key, self.sources[0], self.value, self.sources[1], self.header, self.sources[2]
        )
    }
}

/// The options under `prefix.` in `props`, prefix stripped.
fn options<'a>(props: &'a BTreeMap<String, String>, prefix: &str) -> BTreeMap<&'a str, &'a str> {
    let p = format!("{prefix}.");
    props
        .iter()
        .filter_map(|(k, v)| k.strip_prefix(&p).map(|o| (o, v.trim())))
        .collect()
}

fn bool_option(key: String, v: &str) -> Result<bool, ConverterConfigError> {
    match v.to_ascii_lowercase().as_str() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(ConverterConfigError {
            key,
            message: format!("{v:?} is not a boolean (true or false)"),
        }),
    }
}

impl Converter {
    /// The converter named by `props[prefix]`, configured with `props[prefix.*]`.
    pub fn from_props(
        props: &BTreeMap<String, String>,
        prefix: &str,
    ) -> Result<Self, ConverterConfigError> {
        let class = props.get(prefix).map(|s| s.trim()).unwrap_or_default();
        let opts = options(props, prefix);
        let key = |o: &str| format!("{prefix}.{o}");
        match class {
            STRING_CONVERTER => {
                if let Some(enc) = opts.get("converter.encoding").or(opts.get("encoding")) {
                    if !enc.eq_ignore_ascii_case("UTF-8") && !enc.eq_ignore_ascii_case("UTF8") {
                        return Err(ConverterConfigError {
                            key: key("converter.encoding"),
                            message: format!(
                                "{enc:?}: outboxd writes UTF-8 only; remove the setting"
                            ),
                        });
                    }
                }
                Ok(Converter::String)
            }
            BYTE_ARRAY_CONVERTER => Ok(Converter::ByteArray),
            BINARY_DATA_CONVERTER => {
                let dprefix = format!("{prefix}.delegate.converter.type");
                let delegate = if props.contains_key(&dprefix) {
                    Some(Box::new(Converter::from_props(props, &dprefix)?))
                } else {
                    None
                };
                Ok(Converter::BinaryData { delegate })
            }
            JSON_CONVERTER => {
                let mut o = JsonOptions::default();
                if let Some(v) = opts.get("schemas.enable") {
                    o.schemas_enable = bool_option(key("schemas.enable"), v)?;
                }
                if let Some(v) = opts.get("replace.null.with.default") {
                    o.replace_null_with_default = bool_option(key("replace.null.with.default"), v)?;
                }
                if let Some(v) = opts.get("decimal.format") {
                    o.decimal_format = match v.to_ascii_uppercase().as_str() {
                        "BASE64" => DecimalFormat::Base64,
                        "NUMERIC" => DecimalFormat::Numeric,
                        _ => {
                            return Err(ConverterConfigError {
                                key: key("decimal.format"),
                                message: format!("{v:?} is not BASE64 or NUMERIC"),
                            })
                        }
                    };
                }
                Ok(Converter::Json(o))
            }
            "" => Err(ConverterConfigError {
                key: prefix.to_string(),
                message: "is empty; name a converter class".into(),
            }),
            other => Err(ConverterConfigError {
                key: prefix.to_string(),
                message: format!(
                    "{other:?} is not supported; outboxd writes with {STRING_CONVERTER}, \
                     {BYTE_ARRAY_CONVERTER}, {BINARY_DATA_CONVERTER} or {JSON_CONVERTER} \
                     (schemas on or off)"
                ),
            }),
        }
    }

    /// `Converter.fromConnectData(topic, schema, value)`: `Ok(None)` for no bytes (a null
    /// value; JsonConverter only when the schema is null too).
    ///
    /// Takes the value so that a string or byte array becomes the record's bytes without a
    /// copy. Errors where the Kafka Connect converter throws, or would write something
    /// meaningless (StringConverter on a byte array: Java's `[B@<hash>`).
    pub fn serialize(
        &self,
        schema: Option<&Schema>,
        value: Value,
    ) -> Result<Option<Vec<u8>>, ConvertError> {
        match self {
            Converter::String => match value {
                Value::Null => Ok(None),
                Value::String(s) => Ok(Some(s.into_bytes())),
                // Debezium hands a binary column's value over as a `java.nio.ByteBuffer`
                // wrapping the bytes, whose `toString()` StringConverter writes; a BIT(n)
                // value is a `byte[]` (`[B@<hash>`, different in every JVM run).
                Value::Bytes(b)
                    if schema.and_then(|s| s.name.as_deref()) != Some("io.debezium.data.Bits") =>
                {
                    Ok(Some(heap_byte_buffer(b.len()).into_bytes()))
                }
                other => java_to_string(&other).map(|s| Some(s.into_bytes())),
            },
            Converter::ByteArray => {
                if let Some(s) = schema {
                    if s.ty != Type::Bytes {
                        return Err(ConvertError::new(format!(
                            "Invalid schema type for ByteArrayConverter: {}",
                            s.ty.connect_name()
                        )));
                    }
                }
                match value {
                    Value::Null => Ok(None),
                    Value::Bytes(b) => Ok(Some(b)),
                    other => Err(ConvertError::new(format!(
                        "ByteArrayConverter is not compatible with objects of type class {}",
                        other.java_class()
                    ))),
                }
            }
            Converter::BinaryData { delegate } => {
                let is_bytes = schema.is_none_or(|s| s.ty == Type::Bytes);
                match (is_bytes, value) {
                    (true, Value::Bytes(b)) => Ok(Some(b)),
                    (true, Value::Null) => Ok(None),
                    (_, v) => match delegate {
                        Some(d) => d.serialize(schema, v),
                        None => Err(ConvertError::new(
                            "BinaryDataConverter got a value that is not bytes and no \
                             delegate.converter.type is configured",
                        )),
                    },
                }
            }
            Converter::Json(opts) => json::serialize(schema, &value, opts),
        }
    }

    /// True when this converter looks at the schema (JsonConverter writes it and checks the
    /// value against it; ByteArrayConverter refuses other types than BYTES); StringConverter
    /// and BinaryDataConverter with such a delegate write a value without it.
    pub fn needs_schema(&self) -> bool {
        match self {
            Converter::String => false,
            Converter::ByteArray | Converter::Json(_) => true,
            Converter::BinaryData { delegate } => {
                delegate.as_deref().is_some_and(Converter::needs_schema)
            }
        }
    }

    /// True when this converter writes the value's bytes or text unchanged (StringConverter,
    /// ByteArrayConverter, BinaryDataConverter without JSON delegate).
    pub fn is_raw(&self) -> bool {
        match self {
            Converter::String | Converter::ByteArray => true,
            Converter::BinaryData { delegate } => delegate.as_deref().is_none_or(Converter::is_raw),
            Converter::Json(_) => false,
        }
    }
}

impl HeaderConverter {
    /// True when the header converter looks at the schema (see [`Converter::needs_schema`]).
    pub fn needs_schema(&self) -> bool {
        match self {
            HeaderConverter::Simple => false,
            HeaderConverter::Data(c) => c.needs_schema(),
        }
    }

    fn from_props(props: &BTreeMap<String, String>) -> Result<Self, ConverterConfigError> {
        match props.get("header.converter").map(|s| s.trim()) {
            Some(SIMPLE_HEADER_CONVERTER) => Ok(HeaderConverter::Simple),
            _ => Converter::from_props(props, "header.converter").map(HeaderConverter::Data),
        }
    }

    /// `HeaderConverter.fromConnectHeader(topic, name, schema, value)`; `Ok(None)` is a
    /// header without value.
    pub fn serialize(
        &self,
        schema: Option<&Schema>,
        value: Value,
    ) -> Result<Option<Vec<u8>>, ConvertError> {
        match self {
            HeaderConverter::Simple => Ok(header::simple_header(&value)),
            HeaderConverter::Data(c) => c.serialize(schema, value),
        }
    }
}

impl fmt::Display for Converter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Converter::String => f.write_str("StringConverter"),
            Converter::ByteArray => f.write_str("ByteArrayConverter"),
            Converter::BinaryData { delegate: None } => f.write_str("BinaryDataConverter"),
            Converter::BinaryData { delegate: Some(d) } => {
                write!(f, "BinaryDataConverter (delegate {d})")
            }
            Converter::Json(o) => write!(
                f,
                "JsonConverter (schemas.enable={}, decimal.format={}, replace.null.with.default={})",
                o.schemas_enable,
                match o.decimal_format {
                    DecimalFormat::Base64 => "BASE64",
                    DecimalFormat::Numeric => "NUMERIC",
                },
                o.replace_null_with_default
            ),
        }
    }
}

impl fmt::Display for HeaderConverter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HeaderConverter::Simple => f.write_str("SimpleHeaderConverter"),
            HeaderConverter::Data(c) => c.fmt(f),
        }
    }
}

/// `toString()` of the `java.nio.HeapByteBuffer` Debezium wraps a binary value of `len` bytes
/// in (position 0, limit and capacity its length).
fn heap_byte_buffer(len: usize) -> String {
    format!("java.nio.HeapByteBuffer[pos=0 lim={len} cap={len}]")
}

/// Java's `Object.toString()` of a Connect value, as StringConverter writes it.
fn java_to_string(v: &Value) -> Result<String, ConvertError> {
    Ok(match v {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Int(i) => i.to_string(),
        Value::Float32(f) => java_float(*f),
        Value::Float64(d) => java_double(*d),
        Value::String(s) => s.clone(),
        Value::Decimal(d) => d.to_string(),
        Value::Bytes(_) => {
            return Err(ConvertError::new(
                "StringConverter writes a BIT(n) value (a Java byte[]) as `[B@<hash>`, which \
                 carries none of its bits and changes from one JVM run to the next; use \
                 JsonConverter, or place the column elsewhere",
            ))
        }
        Value::Date(_) => {
            return Err(ConvertError::new(
                "StringConverter writes a java.util.Date in the worker JVM's locale and zone; \
                 use JsonConverter for Connect Date/Time/Timestamp values",
            ))
        }
        Value::Array(items) => {
            let parts = items
                .iter()
                .map(java_to_string)
                .collect::<Result<Vec<_>, _>>()?;
            format!("[{}]", parts.join(", "))
        }
        Value::Map(entries) => {
            let mut parts = Vec::with_capacity(entries.len());
            for (k, v) in entries {
                parts.push(format!("{}={}", java_to_string(k)?, java_to_string(v)?));
            }
            format!("{{{}}}", parts.join(", "))
        }
        Value::Struct(fields) => {
            let mut parts = Vec::with_capacity(fields.len());
            for (name, v) in fields {
                if !v.is_null() {
                    parts.push(format!("{name}={}", java_to_string(v)?));
                }
            }
            format!("Struct{{{}}}", parts.join(","))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn props(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn connector_wins_then_worker_then_fallback() {
        let worker = props(&[
            ("key.converter", JSON_CONVERTER),
            ("value.converter", JSON_CONVERTER),
            ("value.converter.schemas.enable", "false"),
        ]);
        let connector = props(&[
            ("key.converter", STRING_CONVERTER),
            // ignored: the connector names no value.converter
            ("value.converter.schemas.enable", "true"),
        ]);
        let c = Converters::resolve(
            &connector,
            Some(&worker),
            [
                (Converter::String, ConverterSource::Outboxd),
                (Converter::String, ConverterSource::Outboxd),
            ],
        )
        .unwrap();
        assert_eq!(c.key, Converter::String);
        assert_eq!(
            c.value,
            Converter::Json(JsonOptions {
                schemas_enable: false,
                ..JsonOptions::default()
            })
        );
        assert_eq!(c.header, HeaderConverter::Simple);
        assert_eq!(
            c.sources,
            [
                ConverterSource::Connector,
                ConverterSource::Worker,
                ConverterSource::ConnectDefault
            ]
        );
        let stock = Converters::resolve(
            &BTreeMap::new(),
            None,
            [
                (
                    Converter::Json(JsonOptions::default()),
                    ConverterSource::StockWorker,
                ),
                (
                    Converter::Json(JsonOptions::default()),
                    ConverterSource::StockWorker,
                ),
            ],
        )
        .unwrap();
        assert_eq!(stock.value, Converter::Json(JsonOptions::default()));
        assert_eq!(stock.sources[0], ConverterSource::StockWorker);
    }

    #[test]
    fn unsupported_and_bad_options_are_refused() {
        let avro = props(&[("value.converter", "io.confluent.connect.avro.AvroConverter")]);
        let fb = [
            (Converter::String, ConverterSource::Outboxd),
            (Converter::String, ConverterSource::Outboxd),
        ];
        assert!(Converters::resolve(&avro, None, fb.clone()).is_err());
        let bad = props(&[
            ("value.converter", JSON_CONVERTER),
            ("value.converter.decimal.format", "hex"),
        ]);
        let e = Converters::resolve(&bad, None, fb).unwrap_err();
        assert_eq!(e.key, "value.converter.decimal.format");
    }

    #[test]
    fn string_converter_uses_java_to_string() {
        let c = Converter::String;
        assert_eq!(
            c.serialize(None, Value::String("x".into()))
                .unwrap()
                .unwrap(),
            b"x"
        );
        assert_eq!(c.serialize(None, Value::Int(42)).unwrap().unwrap(), b"42");
        assert_eq!(
            c.serialize(
                None,
                Value::Struct(vec![
                    ("a".into(), Value::Int(1)),
                    ("n".into(), Value::Null),
                    ("b".into(), Value::String("x".into()))
                ])
            )
            .unwrap()
            .unwrap(),
            b"Struct{a=1,b=x}"
        );
        // break26 finding 11: Debezium's binary values are ByteBuffers.
        assert_eq!(
            c.serialize(None, Value::Bytes(vec![1, 2, 3]))
                .unwrap()
                .unwrap(),
            b"java.nio.HeapByteBuffer[pos=0 lim=3 cap=3]"
        );
        let bits = Schema::new(Type::Bytes).named("io.debezium.data.Bits");
        assert!(c.serialize(Some(&bits), Value::Bytes(vec![1])).is_err());
        assert_eq!(c.serialize(None, Value::Null).unwrap(), None);
    }

    #[test]
    fn byte_array_and_binary_data() {
        let bytes = Schema::optional(Type::Bytes);
        let text = Schema::optional(Type::String);
        assert_eq!(
            Converter::ByteArray
                .serialize(Some(&bytes), Value::Bytes(vec![1, 2]))
                .unwrap()
                .unwrap(),
            vec![1, 2]
        );
        assert!(Converter::ByteArray
            .serialize(Some(&text), Value::String("x".into()))
            .is_err());
        let bin = Converter::BinaryData {
            delegate: Some(Box::new(Converter::String)),
        };
        assert_eq!(
            bin.serialize(Some(&text), Value::String("x".into()))
                .unwrap()
                .unwrap(),
            b"x"
        );
        assert!(Converter::BinaryData { delegate: None }
            .serialize(Some(&text), Value::String("x".into()))
            .is_err());
    }
}
