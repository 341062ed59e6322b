//! TABLE_MAP column types in the terms of the type mapping ([`crate::typemap`]): what
//! Debezium's binlog connectors read from a table's DDL, read here from the TABLE_MAP's type
//! bytes, metadata, NULL bitmap and optional metadata (`binlog_row_metadata=FULL`: signedness,
//! charsets, ENUM/SET labels).
//!
//! Column defaults and declared FLOAT(M,D) precisions are not in the binlog;
//! [`with_catalog`] adds what the server's catalog reports ([`CatalogColumn`]).

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

/// One column as the server's catalog describes it (`information_schema.COLUMNS`): what
/// Debezium's binlog connectors read from the table's DDL and the binlog does not carry.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct CatalogColumn {
    /// `COLUMN_DEFAULT`, as text (`None`: no default).
    pub default: Option<String>,
    /// `COLUMN_TYPE`, e.g. `float(7,4)`, `int(10) unsigned`.
    pub column_type: String,
}

/// Adds what `catalog` (column name → [`CatalogColumn`]) says to `columns`:
/// * the literal default, parsed for each column's type as Debezium's binlog default-value
///   converter reads it: quoted strings unquoted, numbers as numbers; expressions
///   (`current_timestamp()`, `uuid()`) and `NULL` give none;
/// * a FLOAT declared with a scale (`FLOAT(M,D)`) is a double, as Debezium's MySQL/MariaDB
///   DDL parser maps it (the binlog stores it in 4 bytes like any FLOAT; the value keeps its
///   single precision, widened: `123.4567` is written `123.45670318603516`, as Debezium does).
pub(crate) fn with_catalog(
    columns: &mut [Column],
    names: &[std::sync::Arc<str>],
    catalog: &HashMap<String, CatalogColumn>,
) {
    for (col, name) in columns.iter_mut().zip(names) {
        let Some(c) = catalog.get(&**name) else {
            continue;
        };
        if col.sql == SqlType::Float32 && float_with_scale(&c.column_type) {
            col.sql = SqlType::Float32AsDouble;
        }
        col.default = c
            .default
            .as_deref()
            .and_then(|d| parse_default(&col.sql, d));
    }
}

/// `float(M,D)` (any case, spaces allowed), not `float` or `float(p)`.
fn float_with_scale(column_type: &str) -> bool {
    let t = column_type.trim().to_ascii_lowercase();
    t.strip_prefix("float")
        .map(str::trim_start)
        .and_then(|r| r.strip_prefix('('))
        .and_then(|r| r.split_once(')'))
        .is_some_and(|(inside, _)| inside.contains(','))
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
        SqlType::Float32 | SqlType::Float64 | SqlType::Float32AsDouble => {
            ColumnValue::Float(literal.parse().ok()?)
        }
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

    /// break26 finding 4: Debezium maps MariaDB `FLOAT(M,D)` to a double; plain FLOAT and
    /// FLOAT(p) stay single precision.
    #[test]
    fn a_float_with_a_scale_is_a_double() {
        let names: Vec<std::sync::Arc<str>> = vec!["a".into(), "b".into(), "c".into()];
        let float = || Column {
            sql: SqlType::Float32,
            nullable: true,
            default: None,
        };
        let mut cols = vec![float(), float(), float()];
        let catalog: HashMap<String, CatalogColumn> = [
            ("a", "float(7,4)", Some("1.5")),
            ("b", "float", None),
            ("c", "FLOAT(10) unsigned", None),
        ]
        .into_iter()
        .map(|(n, t, d)| {
            (
                n.to_string(),
                CatalogColumn {
                    default: d.map(str::to_string),
                    column_type: t.to_string(),
                },
            )
        })
        .collect();
        with_catalog(&mut cols, &names, &catalog);
        assert_eq!(cols[0].sql, SqlType::Float32AsDouble);
        assert_eq!(cols[0].default, Some(ColumnValue::Float(1.5)));
        assert_eq!(cols[1].sql, SqlType::Float32);
        assert_eq!(cols[2].sql, SqlType::Float32);
        assert!(!float_with_scale("double(7,4)"));
        assert!(float_with_scale(" FLOAT (7, 4) unsigned"));
    }

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
