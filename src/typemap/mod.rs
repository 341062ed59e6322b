//! Debezium's type mapping: how a column of MySQL/MariaDB or PostgreSQL becomes a Kafka
//! Connect schema and value.
//!
//! One mapping for both sources, used wherever a column reaches a record through Connect
//! data: the key (`table.field.event.key`), the value (the payload column), header and
//! envelope placements, and the schemas JsonConverter writes. It follows Debezium's value
//! converters (`JdbcValueConverters`, the binlog connectors' `BinlogValueConverters`,
//! `PostgresValueConverter`) under the connector options that change them:
//! `time.precision.mode`, `decimal.handling.mode`, `binary.handling.mode`,
//! `bigint.unsigned.handling.mode` (MySQL/MariaDB) and `interval.handling.mode`
//! (PostgreSQL). The sources describe each column as a [`ColumnType`] (a source-neutral
//! [`SqlType`], nullability, default); this module never looks at a source.
//!
//! | column | Connect schema (default modes) | value |
//! |---|---|---|
//! | BIT(1), boolean | boolean | |
//! | BIT(n), bit(n) | bytes `io.debezium.data.Bits` {length} | little-endian, ⌈n/8⌉ bytes (PostgreSQL: as few as the set bits need) |
//! | TINYINT, SMALLINT | int16 | |
//! | SMALLINT UNSIGNED, MEDIUMINT, INT, int4 | int32 | |
//! | INT UNSIGNED, BIGINT, int8 | int64 | |
//! | BIGINT UNSIGNED | int64 (`long`: wraps), Decimal(20,0) (`precise`) | |
//! | FLOAT, real | float | |
//! | DOUBLE, double precision | double | |
//! | DECIMAL(p,s), numeric(p,s) | Decimal {scale, connect.decimal.precision} (`precise`), double, string | |
//! | numeric | `io.debezium.data.VariableScaleDecimal` struct {scale, value} | trailing zeros stripped |
//! | money | Decimal {scale 2} | |
//! | CHAR, VARCHAR, TEXT, MariaDB JSON (LONGTEXT) | string | |
//! | BINARY, VARBINARY, BLOB, bytea | bytes (`bytes`), or base64 / base64-url-safe / hex string | BINARY(n) padded with zero bytes |
//! | MySQL JSON, json, jsonb | string `io.debezium.data.Json` | |
//! | ENUM / SET | string `io.debezium.data.Enum` / `EnumSet` {allowed} | |
//! | YEAR | int32 `io.debezium.time.Year` | |
//! | DATE | int32 `io.debezium.time.Date` | days |
//! | TIME(p) | `MicroTime` (MySQL), `Time`/`MicroTime` by p (PostgreSQL, `adaptive`) | |
//! | DATETIME(p), timestamp(p) | `io.debezium.time.Timestamp` (p ≤ 3, ms), `MicroTimestamp` (p ≤ 6, µs) | |
//! | TIMESTAMP(p), timestamptz | string `io.debezium.time.ZonedTimestamp` | ISO-8601 in UTC |
//! | timetz | string `io.debezium.time.ZonedTime` | |
//! | interval | int64 `io.debezium.time.MicroDuration` (`numeric`), string `io.debezium.time.Interval` (`string`) | 30.4375 days a month |
//! | uuid | string `io.debezium.data.Uuid` | |
//! | arrays | array of the element's schema (optional elements) | |

mod temporal;
mod text;

#[cfg(test)]
mod tests;

use std::sync::Arc;

use base64::Engine as _;

use crate::connect::{BigDecimal, Schema, Type, Value};
use crate::value::ColumnValue;

/// A column type, in the terms Debezium's value converters distinguish.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SqlType {
    /// PostgreSQL `boolean`.
    Boolean,
    /// An integer of `bits` (8, 16, 24, 32, 64) bits.
    Integer {
        /// Storage width in bits (MySQL TINYINT 8, SMALLINT 16, MEDIUMINT 24, INT 32, BIGINT 64).
        bits: u8,
        /// MySQL `UNSIGNED`.
        unsigned: bool,
    },
    /// MySQL `FLOAT`, PostgreSQL `real`.
    Float32,
    /// MySQL `DOUBLE`, PostgreSQL `double precision`.
    Float64,
    /// MySQL/MariaDB `FLOAT(M,D)`: stored in single precision, typed a double by Debezium's
    /// DDL parser; the value is the single-precision one widened (`123.4567` →
    /// `123.45670318603516`).
    Float32AsDouble,
    /// `DECIMAL(p,s)` / `numeric(p,s)`; PostgreSQL `numeric` without a type modifier has neither.
    Decimal {
        /// Precision, when declared.
        precision: Option<u32>,
        /// Scale, when declared.
        scale: Option<u32>,
    },
    /// PostgreSQL `money` (two fraction digits).
    Money,
    /// Character data: CHAR, VARCHAR, TEXT, MariaDB's JSON alias, PostgreSQL text types,
    /// and types Debezium writes as strings (inet, cidr, macaddr, ranges, ...).
    Text,
    /// Binary data; `pad_to`: MySQL `BINARY(n)` values are padded with zero bytes to `n`.
    Binary {
        /// Fixed length to pad to.
        pad_to: Option<u32>,
    },
    /// `BIT(n)` / `bit(n)`; `n = 1` is a boolean.
    Bits {
        /// Declared length in bits.
        length: u32,
        /// PostgreSQL's form: as few little-endian bytes as the set bits need (Debezium's
        /// `BitSet.toByteArray`); MySQL's: always ⌈n/8⌉ bytes.
        minimal: bool,
    },
    /// MySQL `JSON`, PostgreSQL `json` / `jsonb`.
    Json,
    /// MySQL `ENUM` or a PostgreSQL enum type: the allowed labels.
    Enum(Vec<String>),
    /// MySQL `SET`: the allowed labels.
    Set(Vec<String>),
    /// MySQL `YEAR`.
    Year,
    /// `DATE`.
    Date,
    /// `TIME(p)`; MySQL times may be negative or beyond 24 h.
    Time {
        /// Fractional-second digits.
        precision: u32,
    },
    /// PostgreSQL `timetz`.
    TimeTz,
    /// MySQL `DATETIME(p)`, PostgreSQL `timestamp(p)`.
    DateTime {
        /// Fractional-second digits.
        precision: u32,
    },
    /// MySQL `TIMESTAMP(p)`, PostgreSQL `timestamptz(p)`.
    Timestamp {
        /// Fractional-second digits.
        precision: u32,
        /// Debezium writes exactly `precision` fraction digits (when it is above 0), on both
        /// sources; `false` (a value without a column type): as few as the value needs.
        fixed_fraction: bool,
    },
    /// PostgreSQL `interval`.
    Interval,
    /// PostgreSQL `uuid`.
    Uuid,
    /// PostgreSQL `xml`: Debezium's `io.debezium.data.Xml` string.
    Xml,
    /// PostgreSQL `tsvector`: Debezium's `io.debezium.data.Tsvector` string.
    Tsvector,
    /// A PostgreSQL array of the element type.
    Array(Box<SqlType>),
    /// A type Debezium maps to something outboxd does not build (geometry, hstore, vectors,
    /// ...): naming it (its database type name) in the error when it must be converted.
    Unsupported(String),
}

/// A column's type as its source declares it, in the terms of Debezium's relational
/// `Column` (`typeName`, `length`, `scale`): what `column.propagate.source.type` /
/// `datatype.propagate.source.type` write into the field schema's
/// `__debezium.source.column.*` parameters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceType {
    /// The type name, upper-cased (MariaDB `INT UNSIGNED`, `VARCHAR`; PostgreSQL `INT4`,
    /// `_TEXT`, an enum type's name).
    pub name: String,
    /// The declared length (MariaDB: the DDL's first dimension; PostgreSQL: the JDBC
    /// driver's column size), when there is one.
    pub length: Option<i64>,
    /// The declared scale (fraction digits), when there is one.
    pub scale: Option<i64>,
}

/// One column as the type mapping needs it.
#[derive(Debug, Clone, PartialEq)]
pub struct ColumnType {
    /// The type.
    pub sql: SqlType,
    /// The column accepts NULL (the Connect schema is optional).
    pub nullable: bool,
    /// The column's literal default (for the schema's `default`), when it has one Debezium
    /// would carry.
    pub default: Option<ColumnValue>,
    /// The source's own name and dimensions of the type, when known.
    pub source: Option<SourceType>,
}

impl ColumnType {
    /// A nullable column of `sql` without default.
    pub fn nullable(sql: SqlType) -> Self {
        Self {
            sql,
            nullable: true,
            default: None,
            source: None,
        }
    }
}

/// `time.precision.mode` (Debezium `TemporalPrecisionMode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimePrecision {
    /// `adaptive` (PostgreSQL's default): by the column's precision.
    Adaptive,
    /// `adaptive_time_microseconds` (the MySQL/MariaDB default): TIME always in µs.
    AdaptiveTimeMicroseconds,
    /// `connect`: Kafka Connect's `Date`, `Time`, `Timestamp`.
    Connect,
    /// `isostring`: ISO-8601 strings.
    IsoString,
    /// `microseconds`.
    Microseconds,
    /// `nanoseconds`.
    Nanoseconds,
}

/// `decimal.handling.mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DecimalHandling {
    /// `precise` (default): Connect `Decimal`.
    #[default]
    Precise,
    /// `double`.
    Double,
    /// `string`: plain decimal text.
    String,
}

/// `binary.handling.mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BinaryHandling {
    /// `bytes` (default).
    #[default]
    Bytes,
    /// `base64`.
    Base64,
    /// `base64-url-safe`.
    Base64UrlSafe,
    /// `hex` (lower case).
    Hex,
}

/// `bigint.unsigned.handling.mode` (MySQL/MariaDB).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BigIntUnsigned {
    /// `long` (default): int64, values above 2^63-1 wrap.
    #[default]
    Long,
    /// `precise`: `Decimal(20,0)`.
    Precise,
}

/// `interval.handling.mode` (PostgreSQL).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IntervalHandling {
    /// `numeric` (default): `MicroDuration` µs.
    #[default]
    Numeric,
    /// `string`: ISO-8601 `io.debezium.time.Interval`.
    String,
}

/// The connector options that change the mapping, with the connector's defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TypeModes {
    /// `time.precision.mode`.
    pub time_precision: TimePrecision,
    /// `decimal.handling.mode`.
    pub decimal: DecimalHandling,
    /// `binary.handling.mode`.
    pub binary: BinaryHandling,
    /// `bigint.unsigned.handling.mode`.
    pub bigint_unsigned: BigIntUnsigned,
    /// `interval.handling.mode`.
    pub interval: IntervalHandling,
}

impl TypeModes {
    /// Debezium's defaults for the MySQL and MariaDB connectors.
    pub const MYSQL: TypeModes = TypeModes {
        time_precision: TimePrecision::AdaptiveTimeMicroseconds,
        decimal: DecimalHandling::Precise,
        binary: BinaryHandling::Bytes,
        bigint_unsigned: BigIntUnsigned::Long,
        interval: IntervalHandling::Numeric,
    };

    /// Debezium's defaults for the PostgreSQL connector.
    pub const POSTGRES: TypeModes = TypeModes {
        time_precision: TimePrecision::Adaptive,
        ..TypeModes::MYSQL
    };

    /// Sets one option by its Debezium name. `Ok(false)` when `key` is not one of these
    /// options; an error (the accepted values) when the value is not one Debezium accepts.
    pub fn set_option(&mut self, key: &str, value: &str) -> Result<bool, String> {
        let v = value.trim().to_ascii_lowercase();
        let bad = |accepted: &str| Err(format!("{value:?} is not one of {accepted}"));
        match key {
            "time.precision.mode" => {
                self.time_precision = match v.as_str() {
                    "adaptive" => TimePrecision::Adaptive,
                    "adaptive_time_microseconds" => TimePrecision::AdaptiveTimeMicroseconds,
                    "connect" => TimePrecision::Connect,
                    "isostring" => TimePrecision::IsoString,
                    "microseconds" => TimePrecision::Microseconds,
                    "nanoseconds" => TimePrecision::Nanoseconds,
                    _ => return bad("adaptive, adaptive_time_microseconds, connect, isostring, microseconds, nanoseconds"),
                }
            }
            "decimal.handling.mode" => {
                self.decimal = match v.as_str() {
                    "precise" => DecimalHandling::Precise,
                    "double" => DecimalHandling::Double,
                    "string" => DecimalHandling::String,
                    _ => return bad("precise, double, string"),
                }
            }
            "binary.handling.mode" => {
                self.binary = match v.as_str() {
                    "bytes" => BinaryHandling::Bytes,
                    "base64" => BinaryHandling::Base64,
                    "base64-url-safe" => BinaryHandling::Base64UrlSafe,
                    "hex" => BinaryHandling::Hex,
                    _ => return bad("bytes, base64, base64-url-safe, hex"),
                }
            }
            "bigint.unsigned.handling.mode" => {
                self.bigint_unsigned = match v.as_str() {
                    "long" => BigIntUnsigned::Long,
                    "precise" => BigIntUnsigned::Precise,
                    _ => return bad("long, precise"),
                }
            }
            "interval.handling.mode" => {
                self.interval = match v.as_str() {
                    "numeric" => IntervalHandling::Numeric,
                    "string" => IntervalHandling::String,
                    _ => return bad("numeric, string"),
                }
            }
            _ => return Ok(false),
        }
        Ok(true)
    }
}

/// A column value the mapping cannot convert: the type is one outboxd does not map, or the
/// value does not fit it (a MySQL TIME beyond a day under `time.precision.mode=connect`, a
/// NaN numeric without `decimal.handling.mode=string`). Names the type, never the value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct MappingError(pub String);

/// The Connect schema Debezium gives `column` under `modes`.
pub fn column_schema(column: &ColumnType, modes: &TypeModes) -> Result<Schema, MappingError> {
    let mut schema = base_schema(&column.sql, modes)?.with_optional(column.nullable);
    if let Some(d) = &column.default {
        if !d.is_null() {
            // A default that does not convert, or converts to null (a MySQL TIME beyond a
            // day as a Connect Time), is left out, as Debezium's default-value converters
            // drop what they cannot parse.
            if let Ok(v) = column_value(&column.sql, d, modes) {
                if !v.is_null() {
                    schema.default = Some(v);
                }
            }
        }
    }
    Ok(schema)
}

/// [`column_schema`] behind an `Arc`, for schemas shared by every row of a table.
pub fn shared_schema(column: &ColumnType, modes: &TypeModes) -> Result<Arc<Schema>, MappingError> {
    column_schema(column, modes).map(Arc::new)
}

fn base_schema(sql: &SqlType, modes: &TypeModes) -> Result<Schema, MappingError> {
    Ok(match sql {
        SqlType::Boolean | SqlType::Bits { length: 0 | 1, .. } => Schema::new(Type::Boolean),
        SqlType::Bits { length, .. } => Schema::new(Type::Bytes)
            .named("io.debezium.data.Bits")
            .with_version(1)
            .with_parameter("length", length.to_string()),
        SqlType::Integer { bits, unsigned } => Schema::new(match (bits, unsigned) {
            (8, _) | (16, false) => Type::Int16,
            (16, true) | (24, _) | (32, false) => Type::Int32,
            (32, true) => Type::Int64,
            // Always a Connect Decimal, whatever decimal.handling.mode says (Debezium's
            // `SpecialValueDecimal.builder(DecimalMode.PRECISE, 20, 0)`).
            (_, true) if modes.bigint_unsigned == BigIntUnsigned::Precise => {
                return Ok(decimal_schema(DecimalHandling::Precise, Some(20), 0));
            }
            _ => Type::Int64,
        }),
        SqlType::Float32 => Schema::new(Type::Float32),
        SqlType::Float64 | SqlType::Float32AsDouble => Schema::new(Type::Float64),
        SqlType::Decimal {
            precision: None,
            scale: None | Some(0),
        } if modes.decimal == DecimalHandling::Precise => variable_scale_schema(),
        SqlType::Decimal { precision, scale } => {
            decimal_schema(modes.decimal, *precision, scale.unwrap_or(0))
        }
        SqlType::Money => match modes.decimal {
            DecimalHandling::Precise => Schema::decimal(2),
            DecimalHandling::Double => Schema::new(Type::Float64),
            DecimalHandling::String => Schema::new(Type::String),
        },
        SqlType::Text => Schema::new(Type::String),
        SqlType::Binary { .. } => match modes.binary {
            BinaryHandling::Bytes => Schema::new(Type::Bytes),
            _ => Schema::new(Type::String),
        },
        SqlType::Json => Schema::new(Type::String)
            .named("io.debezium.data.Json")
            .with_version(1),
        SqlType::Enum(labels) => Schema::new(Type::String)
            .named("io.debezium.data.Enum")
            .with_version(1)
            .with_parameter("allowed", labels.join(",")),
        SqlType::Set(labels) => Schema::new(Type::String)
            .named("io.debezium.data.EnumSet")
            .with_version(1)
            .with_parameter("allowed", labels.join(",")),
        SqlType::Year => Schema::new(Type::Int32)
            .named("io.debezium.time.Year")
            .with_version(1),
        SqlType::Date => temporal::date_schema(modes.time_precision),
        SqlType::Time { precision } => temporal::time_schema(modes.time_precision, *precision),
        SqlType::DateTime { precision } => {
            temporal::timestamp_schema(modes.time_precision, *precision)
        }
        SqlType::Timestamp { .. } => Schema::new(Type::String)
            .named("io.debezium.time.ZonedTimestamp")
            .with_version(1),
        SqlType::TimeTz => Schema::new(Type::String)
            .named("io.debezium.time.ZonedTime")
            .with_version(1),
        SqlType::Interval => match modes.interval {
            IntervalHandling::Numeric => Schema::new(Type::Int64)
                .named("io.debezium.time.MicroDuration")
                .with_version(1),
            IntervalHandling::String => Schema::new(Type::String)
                .named("io.debezium.time.Interval")
                .with_version(1),
        },
        SqlType::Uuid => Schema::new(Type::String)
            .named("io.debezium.data.Uuid")
            .with_version(1),
        SqlType::Xml => Schema::new(Type::String)
            .named("io.debezium.data.Xml")
            .with_version(1),
        SqlType::Tsvector => Schema::new(Type::String)
            .named("io.debezium.data.Tsvector")
            .with_version(1),
        SqlType::Array(elem) => Schema::array(base_schema(elem, modes)?.with_optional(true)),
        SqlType::Unsupported(name) => return Err(unsupported(name)),
    })
}

fn unsupported(name: &str) -> MappingError {
    MappingError(format!(
        "columns of type {name} are not mapped by outboxd (Debezium gives them a schema of its own); \
         place only columns of other types in headers or the envelope, or use StringConverter"
    ))
}

fn decimal_schema(mode: DecimalHandling, precision: Option<u32>, scale: u32) -> Schema {
    match mode {
        DecimalHandling::Precise => {
            let s = Schema::decimal(scale as i32);
            match precision {
                Some(p) => s.with_parameter("connect.decimal.precision", p.to_string()),
                None => s,
            }
        }
        DecimalHandling::Double => Schema::new(Type::Float64),
        DecimalHandling::String => Schema::new(Type::String),
    }
}

/// `io.debezium.data.VariableScaleDecimal`.
fn variable_scale_schema() -> Schema {
    let mut s = Schema::structure(vec![
        ("scale".into(), Schema::new(Type::Int32)),
        ("value".into(), Schema::new(Type::Bytes)),
    ])
    .named("io.debezium.data.VariableScaleDecimal")
    .with_version(1);
    s.doc = Some("Variable scaled decimal".into());
    s
}

/// The Connect value Debezium gives `value` of a column of `sql` under `modes`.
///
/// Errors where Debezium cannot convert it either, or where outboxd does not map the type.
pub fn column_value(
    sql: &SqlType,
    value: &ColumnValue,
    modes: &TypeModes,
) -> Result<Value, MappingError> {
    if value.is_null() {
        return Ok(Value::Null);
    }
    let mismatch = || {
        MappingError(format!(
            "a {} value does not fit the column's type ({sql:?})",
            kind(value)
        ))
    };
    Ok(match sql {
        SqlType::Boolean => match value {
            ColumnValue::Bool(b) => Value::Bool(*b),
            ColumnValue::Int(i) => Value::Bool(*i != 0),
            ColumnValue::UInt(u) => Value::Bool(*u != 0),
            ColumnValue::Text(t) => Value::Bool(matches!(t.as_str(), "t" | "true" | "1")),
            _ => return Err(mismatch()),
        },
        SqlType::Bits { length, minimal } => {
            let bits = match value {
                ColumnValue::UInt(u) => *u,
                ColumnValue::Int(i) => *i as u64,
                ColumnValue::Bool(b) => u64::from(*b),
                ColumnValue::Bytes(b) => b.iter().fold(0u64, |acc, x| (acc << 8) | u64::from(*x)),
                ColumnValue::Text(t) => u64::from_str_radix(t, 2).map_err(|_| mismatch())?,
                _ => return Err(mismatch()),
            };
            if *length <= 1 {
                Value::Bool(bits != 0)
            } else {
                let n = if *minimal {
                    (64 - bits.leading_zeros()).div_ceil(8) as usize
                } else {
                    length.div_ceil(8) as usize
                };
                Value::Bytes(bits.to_le_bytes()[..n.min(8)].to_vec())
            }
        }
        SqlType::Integer { bits, unsigned } => {
            if let ColumnValue::Decimal(text) = value {
                // A MySQL/MariaDB column default of a 64-bit integer column (only defaults
                // come as text): exact under `precise`, else `Math.round(Double.parseDouble)`
                // as Debezium's binlog converter reads it, which saturates
                // (`18446744073709551615` → `9223372036854775807`).
                if *unsigned && modes.bigint_unsigned == BigIntUnsigned::Precise {
                    return decimal_value(DecimalHandling::Precise, text, Some(0), sql);
                }
                let d: f64 = text.trim().parse().map_err(|_| mismatch())?;
                return Ok(Value::Int((d + 0.5).floor() as i64));
            }
            let as_i64 = match value {
                ColumnValue::Int(i) => *i,
                // BIGINT UNSIGNED under `long` wraps, as Java's long does.
                ColumnValue::UInt(u) => *u as i64,
                ColumnValue::Bool(b) => i64::from(*b),
                _ => return Err(mismatch()),
            };
            if *bits == 64 && *unsigned && modes.bigint_unsigned == BigIntUnsigned::Precise {
                let text = match value {
                    ColumnValue::UInt(u) => u.to_string(),
                    _ => as_i64.to_string(),
                };
                return decimal_value(DecimalHandling::Precise, &text, Some(0), sql);
            }
            Value::Int(as_i64)
        }
        SqlType::Float32 => match value {
            ColumnValue::Float(f) => Value::Float32(*f as f32),
            ColumnValue::Int(i) => Value::Float32(*i as f32),
            _ => return Err(mismatch()),
        },
        SqlType::Float32AsDouble => match value {
            ColumnValue::Float(f) => Value::Float64(f64::from(*f as f32)),
            ColumnValue::Int(i) => Value::Float64(f64::from(*i as f32)),
            _ => return Err(mismatch()),
        },
        SqlType::Float64 => match value {
            ColumnValue::Float(f) => Value::Float64(*f),
            ColumnValue::Int(i) => Value::Float64(*i as f64),
            _ => return Err(mismatch()),
        },
        SqlType::Decimal { precision, scale } => {
            let text = match value {
                ColumnValue::Decimal(t) | ColumnValue::Text(t) => t.clone(),
                ColumnValue::Int(i) => i.to_string(),
                ColumnValue::UInt(u) => u.to_string(),
                _ => return Err(mismatch()),
            };
            if precision.is_none()
                && matches!(scale, None | Some(0))
                && modes.decimal == DecimalHandling::Precise
            {
                // Debezium's VariableScaleDecimal has no form for NaN or ±Infinity: it
                // writes null.
                if matches!(text.trim(), "NaN" | "Infinity" | "-Infinity") {
                    return Ok(Value::Null);
                }
                let d = parse_decimal(&text, sql)?;
                let d = strip_trailing_zeros(d);
                Value::Struct(vec![
                    ("scale".into(), Value::Int(i64::from(d.scale))),
                    ("value".into(), Value::Bytes(d.unscaled_bytes())),
                ])
            } else {
                return decimal_value(modes.decimal, &text, *scale, sql);
            }
        }
        SqlType::Money => {
            let text = match value {
                ColumnValue::Decimal(t) | ColumnValue::Text(t) => text::money_digits(t),
                _ => return Err(mismatch()),
            };
            return decimal_value(modes.decimal, &text, Some(2), sql);
        }
        SqlType::Text => match value {
            ColumnValue::Text(t)
            | ColumnValue::Json(t)
            | ColumnValue::Decimal(t)
            | ColumnValue::Uuid(t) => Value::String(t.clone()),
            ColumnValue::Bytes(b) => Value::String(String::from_utf8_lossy(b).into_owned()),
            other => Value::String(other.to_string()),
        },
        SqlType::Binary { pad_to } => {
            let mut bytes = match value {
                ColumnValue::Bytes(b) => b.clone(),
                ColumnValue::Text(t) => t.as_bytes().to_vec(),
                _ => return Err(mismatch()),
            };
            if let Some(n) = pad_to {
                if bytes.len() < *n as usize {
                    bytes.resize(*n as usize, 0);
                }
            }
            match modes.binary {
                BinaryHandling::Bytes => Value::Bytes(bytes),
                BinaryHandling::Base64 => {
                    Value::String(base64::engine::general_purpose::STANDARD.encode(bytes))
                }
                BinaryHandling::Base64UrlSafe => {
                    Value::String(base64::engine::general_purpose::URL_SAFE.encode(bytes))
                }
                BinaryHandling::Hex => {
                    Value::String(bytes.iter().map(|b| format!("{b:02x}")).collect())
                }
            }
        }
        SqlType::Json
        | SqlType::Enum(_)
        | SqlType::Set(_)
        | SqlType::Uuid
        | SqlType::Xml
        | SqlType::Tsvector => match value {
            ColumnValue::Json(t) | ColumnValue::Text(t) | ColumnValue::Uuid(t) => {
                Value::String(t.clone())
            }
            ColumnValue::Bytes(b) => Value::String(String::from_utf8_lossy(b).into_owned()),
            _ => return Err(mismatch()),
        },
        SqlType::Year => match value {
            ColumnValue::Int(i) => Value::Int(*i),
            ColumnValue::UInt(u) => Value::Int(*u as i64),
            ColumnValue::Date(d) => Value::Int(crate::value::civil_from_days(i64::from(*d)).0),
            _ => return Err(mismatch()),
        },
        SqlType::Date => match value {
            ColumnValue::Date(days) => temporal::date_value(modes.time_precision, *days),
            ColumnValue::Text(t) => match temporal::PgInfinity::parse(t) {
                Some(inf) => temporal::date_value(modes.time_precision, inf.epoch_days()),
                None => return Err(mismatch()),
            },
            _ => return Err(mismatch()),
        },
        SqlType::Time { precision } => match value {
            ColumnValue::Time(us) => temporal::time_value(modes.time_precision, *precision, *us)?,
            _ => return Err(mismatch()),
        },
        SqlType::DateTime { precision } => match value {
            ColumnValue::DateTime(us) | ColumnValue::Timestamp(us) => {
                temporal::timestamp_value(modes.time_precision, *precision, *us)
            }
            ColumnValue::Text(t) => match temporal::PgInfinity::parse(t) {
                Some(inf) => {
                    temporal::timestamp_value(modes.time_precision, *precision, inf.epoch_micros())
                }
                None => return Err(mismatch()),
            },
            _ => return Err(mismatch()),
        },
        SqlType::Timestamp {
            precision,
            fixed_fraction,
        } => match value {
            ColumnValue::Timestamp(us) | ColumnValue::DateTime(us) => Value::String(
                temporal::zoned_timestamp(*us, fixed_fraction.then_some(*precision)),
            ),
            ColumnValue::Text(t) => Value::String(t.clone()),
            _ => return Err(mismatch()),
        },
        SqlType::TimeTz => match value {
            ColumnValue::Text(t) => Value::String(
                temporal::zoned_time_from_text(t)
                    .ok_or_else(|| MappingError("a timetz value does not parse".into()))?,
            ),
            _ => return Err(mismatch()),
        },
        SqlType::Interval => match value {
            ColumnValue::Text(t) => {
                let iv = text::Interval::parse(t)
                    .ok_or_else(|| MappingError("an interval value does not parse".into()))?;
                match modes.interval {
                    IntervalHandling::Numeric => Value::Int(iv.micro_duration()),
                    IntervalHandling::String => Value::String(iv.iso8601()),
                }
            }
            _ => return Err(mismatch()),
        },
        SqlType::Array(elem) => match value {
            ColumnValue::Text(t) => {
                let items = text::parse_array(t)
                    .ok_or_else(|| MappingError("an array value does not parse".into()))?;
                let mut out = Vec::with_capacity(items.len());
                for item in items {
                    let cv = match item {
                        None => ColumnValue::Null,
                        Some(s) => text::element_value(elem, s)?,
                    };
                    out.push(column_value(elem, &cv, modes)?);
                }
                Value::Array(out)
            }
            _ => return Err(mismatch()),
        },
        SqlType::Unsupported(name) => return Err(unsupported(name)),
    })
}

/// [`column_value`], taking the value: text and binary values of text, JSON and binary
/// columns become the Connect string or bytes without a copy (the payload's path).
pub fn column_value_into(
    sql: &SqlType,
    value: ColumnValue,
    modes: &TypeModes,
) -> Result<Value, MappingError> {
    match (sql, value) {
        (SqlType::Text | SqlType::Json, ColumnValue::Text(t) | ColumnValue::Json(t)) => {
            Ok(Value::String(t))
        }
        (SqlType::Binary { pad_to: None }, ColumnValue::Bytes(b))
            if modes.binary == BinaryHandling::Bytes =>
        {
            Ok(Value::Bytes(b))
        }
        (sql, value) => column_value(sql, &value, modes),
    }
}

fn parse_decimal(text: &str, sql: &SqlType) -> Result<BigDecimal, MappingError> {
    BigDecimal::parse(text).ok_or_else(|| {
        MappingError(format!(
            "a {sql:?} value is not a finite number (NaN or infinity): under \
             decimal.handling.mode=precise Debezium's task fails on it too for a numeric column \
             with a declared precision (an unconstrained numeric gets null); \
             set decimal.handling.mode=string or double to write it"
        ))
    })
}

/// `SpecialValueDecimal.fromLogical` under `mode`, with the column's scale applied
/// (`withScaleAdjustedIfNeeded`).
fn decimal_value(
    mode: DecimalHandling,
    text: &str,
    scale: Option<u32>,
    sql: &SqlType,
) -> Result<Value, MappingError> {
    let special = match text.trim() {
        "NaN" => Some(f64::NAN),
        "Infinity" => Some(f64::INFINITY),
        "-Infinity" => Some(f64::NEG_INFINITY),
        _ => None,
    };
    if let Some(f) = special {
        return match mode {
            DecimalHandling::String => Ok(Value::String(text.trim().to_string())),
            DecimalHandling::Double => Ok(Value::Float64(f)),
            DecimalHandling::Precise => Err(parse_decimal("", sql).unwrap_err()),
        };
    }
    let mut d = parse_decimal(text, sql)?;
    if let Some(s) = scale {
        d = set_scale(d, s as i32);
    }
    Ok(match mode {
        DecimalHandling::Precise => Value::Decimal(d),
        DecimalHandling::Double => Value::Float64(d.to_plain_string().parse().unwrap_or(f64::NAN)),
        DecimalHandling::String => Value::String(d.to_plain_string()),
    })
}

/// `BigDecimal.setScale(scale)` for a scale at least the value's (more zeros), or a
/// rounding-free reduction when only zeros are dropped; otherwise the value as it is.
fn set_scale(d: BigDecimal, scale: i32) -> BigDecimal {
    use num_bigint::BigInt;
    if scale == d.scale {
        return d;
    }
    if scale > d.scale {
        let factor = BigInt::from(10u32).pow((scale - d.scale) as u32);
        return BigDecimal {
            unscaled: d.unscaled * factor,
            scale,
        };
    }
    let factor = BigInt::from(10u32).pow((d.scale - scale) as u32);
    if (&d.unscaled % &factor) == BigInt::from(0) {
        BigDecimal {
            unscaled: d.unscaled / factor,
            scale,
        }
    } else {
        d
    }
}

/// `BigDecimal.stripTrailingZeros()`, then a negative scale raised to 0.
fn strip_trailing_zeros(mut d: BigDecimal) -> BigDecimal {
    use num_bigint::BigInt;
    let ten = BigInt::from(10u32);
    let zero = BigInt::from(0);
    if d.unscaled == zero {
        return BigDecimal {
            unscaled: zero,
            scale: 0,
        };
    }
    while d.scale > 0 && (&d.unscaled % &ten) == zero {
        d.unscaled /= &ten;
        d.scale -= 1;
    }
    d
}

fn kind(v: &ColumnValue) -> &'static str {
    match v {
        ColumnValue::Null => "NULL",
        ColumnValue::Int(_) | ColumnValue::UInt(_) => "integer",
        ColumnValue::Float(_) => "floating-point",
        ColumnValue::Decimal(_) => "decimal",
        ColumnValue::Text(_) => "text",
        ColumnValue::Bytes(_) => "binary",
        ColumnValue::Json(_) => "JSON",
        ColumnValue::Uuid(_) => "UUID",
        ColumnValue::Timestamp(_) | ColumnValue::DateTime(_) => "date-time",
        ColumnValue::Date(_) => "date",
        ColumnValue::Time(_) => "time",
        ColumnValue::Bool(_) => "boolean",
    }
}
