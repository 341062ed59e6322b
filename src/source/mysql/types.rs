//! TABLE_MAP column types in the terms of the type mapping ([`crate::typemap`]): what
//! Debezium's binlog connectors read from a table's DDL, read here from the TABLE_MAP's type
//! bytes, metadata, NULL bitmap and optional metadata (`binlog_row_metadata=FULL`: signedness,
//! charsets, ENUM/SET labels).
//!
//! Column defaults are not in the binlog; [`with_defaults`] adds those the server's catalog
//! reports.

use std::collections::HashMap;

use mysql_common::constants::ColumnType;

use super::table::ColumnInfo;
use crate::typemap::{ColumnType as Column, SqlType};
use crate::value::ColumnValue;

/// The binary collation (`binary`, id 63): BINARY, VARBINARY and BLOB columns carry it.
const BINARY_COLLATION: u16 = 63;

/// The type mapping's view of one TABLE_MAP column.
pub(crate) fn column_type(info: &ColumnInfo) -> Column {
    let sql = match &info.spec {
        Some(spec) => sql_type(spec.ty, info.meta.as_deref().unwrap_or(&[]), spec),
        None => SqlType::Unsupported("an unknown binlog column type".into()),
    };
    Column {
        sql,
        nullable: info.nullable,
        default: None,
    }
}

fn sql_type(ty: ColumnType, meta: &[u8], spec: &super::values::ColumnSpec) -> SqlType {
    use ColumnType::*;
    let m = |i: usize| u32::from(meta.get(i).copied().unwrap_or(0));
    let binary = spec.collation == Some(BINARY_COLLATION);
    match ty {
        MYSQL_TYPE_TINY => SqlType::Integer {
            bits: 8,
            unsigned: spec.unsigned,
        },
        MYSQL_TYPE_SHORT => SqlType::Integer {
            bits: 16,
            unsigned: spec.unsigned,
        },
        MYSQL_TYPE_INT24 => SqlType::Integer {
            bits: 24,
            unsigned: spec.unsigned,
        },
        MYSQL_TYPE_LONG => SqlType::Integer {
            bits: 32,
            unsigned: spec.unsigned,
        },
        MYSQL_TYPE_LONGLONG => SqlType::Integer {
            bits: 64,
            unsigned: spec.unsigned,
        },
        MYSQL_TYPE_FLOAT => SqlType::Float32,
        MYSQL_TYPE_DOUBLE => SqlType::Float64,
        MYSQL_TYPE_NEWDECIMAL | MYSQL_TYPE_DECIMAL => SqlType::Decimal {
            precision: Some(m(0)),
            scale: Some(m(1)),
        },
        MYSQL_TYPE_YEAR => SqlType::Year,
        MYSQL_TYPE_DATE | MYSQL_TYPE_NEWDATE => SqlType::Date,
        MYSQL_TYPE_DATETIME => SqlType::DateTime { precision: 0 },
        MYSQL_TYPE_DATETIME2 => SqlType::DateTime { precision: m(0) },
        MYSQL_TYPE_TIMESTAMP => SqlType::Timestamp {
            precision: 0,
            fixed_fraction: true,
        },
        MYSQL_TYPE_TIMESTAMP2 => SqlType::Timestamp {
            precision: m(0),
            fixed_fraction: true,
        },
        MYSQL_TYPE_TIME => SqlType::Time { precision: 0 },
        MYSQL_TYPE_TIME2 => SqlType::Time { precision: m(0) },
        // Metadata: bits beyond whole bytes, then whole bytes.
        MYSQL_TYPE_BIT => SqlType::Bits {
            length: m(1) * 8 + m(0),
            minimal: false,
        },
        MYSQL_TYPE_ENUM => SqlType::Enum(spec.labels.clone().unwrap_or_default()),
        MYSQL_TYPE_SET => SqlType::Set(spec.labels.clone().unwrap_or_default()),
        MYSQL_TYPE_JSON => SqlType::Json,
        // CHAR / BINARY: the field length in bytes is split over the two metadata bytes.
        MYSQL_TYPE_STRING if binary => SqlType::Binary {
            pad_to: Some((((m(0) & 0x30) ^ 0x30) << 4) | m(1)),
        },
        MYSQL_TYPE_VARCHAR
        | MYSQL_TYPE_VAR_STRING
        | MYSQL_TYPE_BLOB
        | MYSQL_TYPE_TINY_BLOB
        | MYSQL_TYPE_MEDIUM_BLOB
        | MYSQL_TYPE_LONG_BLOB
            if binary =>
        {
            SqlType::Binary { pad_to: None }
        }
        // Without charset metadata a BLOB cannot be told from a TEXT: bytes it is.
        MYSQL_TYPE_BLOB | MYSQL_TYPE_TINY_BLOB | MYSQL_TYPE_MEDIUM_BLOB | MYSQL_TYPE_LONG_BLOB
            if spec.collation.is_none() =>
        {
            SqlType::Binary { pad_to: None }
        }
        MYSQL_TYPE_STRING
        | MYSQL_TYPE_VARCHAR
        | MYSQL_TYPE_VAR_STRING
        | MYSQL_TYPE_BLOB
        | MYSQL_TYPE_TINY_BLOB
        | MYSQL_TYPE_MEDIUM_BLOB
        | MYSQL_TYPE_LONG_BLOB => SqlType::Text,
        MYSQL_TYPE_GEOMETRY => SqlType::Unsupported("GEOMETRY".into()),
        MYSQL_TYPE_VECTOR => SqlType::Unsupported("VECTOR".into()),
        other => SqlType::Unsupported(format!("{other:?}")),
    }
}

/// Adds the literal defaults of `defaults` (column name → the catalog's `COLUMN_DEFAULT` text)
/// to `columns`, parsed for each column's type as Debezium's binlog default-value converter
/// reads them: quoted strings unquoted, numbers as numbers; expressions (`current_timestamp()`,
/// `uuid()`) and `NULL` give none.
pub(crate) fn with_defaults(
    columns: &mut [Column],
    names: &[std::sync::Arc<str>],
    defaults: &HashMap<String, String>,
) {
    for (col, name) in columns.iter_mut().zip(names) {
        col.default = defaults
            .get(&**name)
            .and_then(|d| parse_default(&col.sql, d));
    }
}

/// One `information_schema.COLUMNS.COLUMN_DEFAULT` text (MariaDB 10.2+ quotes string
/// literals: `'PENDING'`; numbers and expressions are bare) as a value of `sql`.
pub(crate) fn parse_default(sql: &SqlType, text: &str) -> Option<ColumnValue> {
    let t = text.trim();
    if t.eq_ignore_ascii_case("NULL") {
        return None;
    }
    let literal = if let Some(inner) = t.strip_prefix('\'').and_then(|x| x.strip_suffix('\'')) {
        inner.replace("''", "'").replace("\\\\", "\\")
    } else if t.contains('(')
        || t.chars()
            .any(|c| c.is_ascii_alphabetic() && c != 'e' && c != 'E')
    {
        // An expression: CURRENT_TIMESTAMP, current_timestamp(6), uuid(), ...
        return None;
    } else {
        t.to_string()
    };
    Some(match sql {
        SqlType::Integer { unsigned: true, .. } => ColumnValue::UInt(literal.parse().ok()?),
        SqlType::Integer { .. } => ColumnValue::Int(literal.parse().ok()?),
        SqlType::Float32 | SqlType::Float64 => ColumnValue::Float(literal.parse().ok()?),
        SqlType::Decimal { .. } => ColumnValue::Decimal(literal),
        SqlType::Text | SqlType::Enum(_) | SqlType::Set(_) | SqlType::Json => {
            ColumnValue::Text(literal)
        }
        SqlType::Year => ColumnValue::UInt(literal.parse().ok()?),
        // Temporal, binary and bit defaults are left out (not carried by outboxd).
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_as_the_catalog_writes_them() {
        assert_eq!(
            parse_default(&SqlType::Text, "'PENDING'"),
            Some(ColumnValue::Text("PENDING".into()))
        );
        assert_eq!(
            parse_default(&SqlType::Text, "'it''s'"),
            Some(ColumnValue::Text("it's".into()))
        );
        assert_eq!(
            parse_default(
                &SqlType::Integer {
                    bits: 32,
                    unsigned: false
                },
                "7"
            ),
            Some(ColumnValue::Int(7))
        );
        assert_eq!(parse_default(&SqlType::Text, "NULL"), None);
        assert_eq!(
            parse_default(&SqlType::DateTime { precision: 6 }, "current_timestamp(6)"),
            None
        );
        assert_eq!(parse_default(&SqlType::Text, "uuid()"), None);
        assert_eq!(
            parse_default(
                &SqlType::Decimal {
                    precision: Some(10),
                    scale: Some(2)
                },
                "0.00"
            ),
            Some(ColumnValue::Decimal("0.00".into()))
        );
    }
}
