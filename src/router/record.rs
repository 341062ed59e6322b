//! What the router adds around the EventRouter's own output: Debezium 3's extended headers,
//! and a column type for values whose source gave none.

use crate::connect::{HeaderConverter, Schema, Type, Value};
use crate::typemap::{ColumnType, SqlType};
use crate::value::ColumnValue;

use super::RecordFormat;

/// Debezium 3's context headers (`DebeziumHeaderProducer.contextHeaders`), in order:
/// `__debezium.context.connectorLogicalName` (`topic.prefix`), `.taskId` (`0`: outboxd runs
/// one task), `.connectorName` (the plugin: `postgresql`, `mariadb`, `mysql`) and `.runId`
/// (a UUID v7 made when the connector starts, as Debezium makes one per task start), each a
/// string written by `header`. A header converter that cannot write strings gives them
/// without value.
pub fn extended_headers(
    format: &RecordFormat,
    header: &HeaderConverter,
) -> Vec<(String, Option<Vec<u8>>)> {
    let run_id = uuid::Uuid::now_v7().to_string();
    [
        (
            "__debezium.context.connectorLogicalName",
            format.logical_name.clone(),
        ),
        ("__debezium.context.taskId", "0".to_string()),
        (
            "__debezium.context.connectorName",
            format.connector_type.clone(),
        ),
        ("__debezium.context.runId", run_id),
    ]
    .into_iter()
    .map(|(name, v)| {
        let schema = Schema::new(Type::String);
        let bytes = header
            .serialize(Some(&schema), Value::String(v))
            .ok()
            .flatten();
        (name.to_string(), bytes)
    })
    .collect()
}

/// A column type for a value whose source described none (a logical decoding message's
/// field, a test row): what its value is.
pub fn inferred_type(v: &ColumnValue) -> ColumnType {
    ColumnType::nullable(match v {
        ColumnValue::Null | ColumnValue::Text(_) => SqlType::Text,
        ColumnValue::Int(_) => SqlType::Integer {
            bits: 64,
            unsigned: false,
        },
        ColumnValue::UInt(_) => SqlType::Integer {
            bits: 64,
            unsigned: true,
        },
        ColumnValue::Float(_) => SqlType::Float64,
        ColumnValue::Decimal(_) => SqlType::Decimal {
            precision: None,
            scale: None,
        },
        ColumnValue::Bytes(_) => SqlType::Binary { pad_to: None },
        ColumnValue::Json(_) => SqlType::Json,
        ColumnValue::Uuid(_) => SqlType::Uuid,
        ColumnValue::Timestamp(_) => SqlType::Timestamp {
            precision: 6,
            fixed_fraction: false,
        },
        ColumnValue::DateTime(_) => SqlType::DateTime { precision: 6 },
        ColumnValue::Date(_) => SqlType::Date,
        ColumnValue::Time(_) => SqlType::Time { precision: 6 },
        ColumnValue::Bool(_) => SqlType::Boolean,
    })
}
