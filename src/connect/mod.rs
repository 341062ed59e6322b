//! Kafka Connect's data model and converters, as a Kafka Connect worker running Debezium
//! writes records.
//!
//! Debezium's EventRouter hands Kafka Connect a record of Connect *data*: a key, a value and
//! headers, each a [`Schema`] with a [`Value`]. The worker's converters then turn those into
//! bytes: `key.converter` / `value.converter` (StringConverter, ByteArrayConverter,
//! Debezium's BinaryDataConverter, JsonConverter with or without schemas) and
//! `header.converter` (SimpleHeaderConverter by default). To write the bytes a Debezium
//! deployment writes, outboxd builds the same Connect data (`router`) and serializes it with
//! the same converter rules (this module).
//!
//! - [`schema`]: `org.apache.kafka.connect.data.Schema` (types, optionality, names, versions,
//!   parameters, defaults, struct fields).
//! - [`data`]: Connect values, including the logical types (`Decimal`, `Date`, `Time`,
//!   `Timestamp`) and Java's text forms of numbers (`Float.toString`, `Double.toString`,
//!   `BigDecimal.toString`).
//! - [`json`]: `org.apache.kafka.connect.json.JsonConverter` (schemas on or off,
//!   `decimal.format`, `replace.null.with.default`) and the JSON text Jackson writes.
//! - [`header`]: `SimpleHeaderConverter` (Connect's `Values.convertToString`).
//! - [`converter`]: the converter settings of a connector, resolved as Kafka Connect resolves
//!   them (connector, then worker file), and serialization of a key, value or header.
//!
//! This module imports nothing from the rest of the crate: it is Connect's knowledge only.

pub mod converter;
pub mod data;
pub mod header;
pub mod json;
pub mod schema;

pub use converter::{
    ConvertError, Converter, ConverterSource, Converters, DecimalFormat, HeaderConverter,
    JsonOptions,
};
pub use data::{BigDecimal, Value};
pub use schema::{Field, Schema, Type};
