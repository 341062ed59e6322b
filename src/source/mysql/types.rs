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
use crate::typemap::{ColumnType as Column, SourceType, SqlType};
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
        source: None,
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
            .and_then(|d| parse_default(&col.sql, d, col.nullable));
        col.source = source_type(&c.column_type);
    }
}

/// `COLUMN_TYPE` (`int(11) unsigned`, `decimal(10,2)`, `enum('a','b')`, `longtext`) as
/// Debezium's MariaDB DDL parser describes the column: the type name upper-cased with
/// `UNSIGNED` / `ZEROFILL`, the first dimension as length and the second as scale; an ENUM's
/// length is 1 and a SET's the number of its labels and commas.
pub(crate) fn source_type(column_type: &str) -> Option<SourceType> {
    let t = column_type.trim();
    let base_end = t.find(['(', ' ']).unwrap_or(t.len());
    let base = t[..base_end].to_ascii_uppercase();
    if base.is_empty() {
        return None;
    }
    let (dims, rest) = match t[base_end..].strip_prefix('(') {
        Some(r) => {
            // The closing parenthesis outside quotes.
            let mut quoted = false;
            let mut close = None;
            for (i, c) in r.char_indices() {
                match c {
                    '\'' => quoted = !quoted,
                    ')' if !quoted => {
                        close = Some(i);
                        break;
                    }
                    _ => {}
                }
            }
            let close = close?;
            (Some(&r[..close]), &r[close + 1..])
        }
        None => (None, &t[base_end..]),
    };
    let mut name = base.clone();
    for word in rest.split_whitespace() {
        let w = word.to_ascii_uppercase();
        if w == "UNSIGNED" || w == "ZEROFILL" {
            name.push(' ');
            name.push_str(&w);
        }
    }
    let (length, scale) = match (base.as_str(), dims) {
        ("ENUM", _) => (Some(1), None),
        ("SET", Some(d)) => {
            let labels = d.matches('\'').count() as i64 / 2;
            (Some((labels * 2 - 1).max(0)), None)
        }
        (_, Some(d)) => {
            let mut p = d.split(',').map(|x| x.trim().parse::<i64>().ok());
            (p.next().flatten(), p.next().flatten())
        }
        (_, None) => (None, None),
    };
    Some(SourceType {
        name,
        length,
        scale,
    })
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

/// One `information_schema.COLUMNS.COLUMN_DEFAULT` text (MariaDB 10.2+ writes it as
/// `SHOW CREATE TABLE` does: string literals quoted, `b'101'` for BIT, numbers and
/// expressions bare) as a value of `sql`, read the way Debezium's DDL parser
/// (`DefaultValueParserListener`) and `BinlogDefaultValueConverter` read the DDL's default:
///
/// * a quoted literal is the text between the quotes (binary columns take it as it is,
///   escapes included: `BINARY(4) DEFAULT 'ab'` is shown `'ab\0\0'` and Debezium writes
///   those six bytes); `NULL` and expressions (`uuid()`, `curdate()`) give none;
/// * `current_timestamp(...)` stands for `1970-01-01 00:00:00`;
/// * DATETIME / DATE: the literal as a wall-clock time read as UTC; a zero date
///   (`0000-00-00`, a zero month or day) is no default on a nullable column and the epoch
///   otherwise; TIMESTAMP likewise, and its epoch default on a NOT NULL column is the
///   string `1970-01-01T00:00:00Z` (no fraction, whatever the column's precision);
/// * TIME: `[-]H:MM:SS[.f]` as a duration, beyond a day or negative;
/// * BIT: the bits of `b'...'`, a boolean for BIT(1);
/// * a 64-bit integer keeps its text ([`ColumnValue::Decimal`]): the type mapping rounds it
///   through a double as Debezium does (`Math.round(Double.parseDouble(..))`, so
///   `18446744073709551615` is `9223372036854775807` under
///   `bigint.unsigned.handling.mode=long`), or keeps it exact under `precise`.
pub(crate) fn parse_default(sql: &SqlType, text: &str, nullable: bool) -> Option<ColumnValue> {
    let t = text.trim();
    if t.eq_ignore_ascii_case("NULL") {
        return None;
    }
    let lower = t.to_ascii_lowercase();
    if lower.starts_with("current_timestamp") || lower.starts_with("now(") {
        return temporal_default(sql, "1970-01-01 00:00:00", nullable);
    }
    if let Some(bits) = t
        .strip_prefix("b'")
        .or_else(|| t.strip_prefix("B'"))
        .and_then(|x| x.strip_suffix('\''))
    {
        return bits_default(sql, bits);
    }
    let quoted = t.strip_prefix('\'').and_then(|x| x.strip_suffix('\''));
    if let (Some(raw), SqlType::Binary { .. }) = (quoted, sql) {
        return Some(ColumnValue::Bytes(raw.as_bytes().to_vec()));
    }
    let literal = if let Some(inner) = quoted {
        inner.replace("''", "'").replace("\\\\", "\\")
    } else if t.contains('(')
        || t.chars()
            .any(|c| c.is_ascii_alphabetic() && c != 'e' && c != 'E')
    {
        // An expression: uuid(), curdate(), ...
        return None;
    } else {
        t.to_string()
    };
    Some(match sql {
        SqlType::Integer { bits: 64, .. } => {
            literal.parse::<f64>().ok()?;
            ColumnValue::Decimal(literal)
        }
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
        SqlType::Bits { .. } => return bits_default(sql, &literal),
        SqlType::Date
        | SqlType::DateTime { .. }
        | SqlType::Timestamp { .. }
        | SqlType::Time { .. } => return temporal_default(sql, &literal, nullable),
        _ => return None,
    })
}

/// A BIT default's digits (`1010`): a boolean for BIT(1) (any digit other than 0), else the
/// bits (at most 64).
fn bits_default(sql: &SqlType, digits: &str) -> Option<ColumnValue> {
    match sql {
        SqlType::Bits { length: 0 | 1, .. } => {
            Some(ColumnValue::Bool(digits.parse::<i16>().ok()? != 0))
        }
        SqlType::Bits { .. } => Some(ColumnValue::UInt(u64::from_str_radix(digits, 2).ok()?)),
        _ => None,
    }
}

/// `YYYY-MM-DD` with a zero month or day, or year 0 (MariaDB's zero dates).
fn zero_date(date: &str) -> bool {
    let mut p = date.split('-');
    let (y, m, d) = (p.next(), p.next(), p.next());
    [y, m, d]
        .iter()
        .any(|x| x.is_some_and(|x| x.chars().all(|c| c == '0')))
        || date == "0"
}

/// A DATE, DATETIME, TIMESTAMP or TIME default literal.
fn temporal_default(sql: &SqlType, literal: &str, nullable: bool) -> Option<ColumnValue> {
    let (date, time) = match literal.split_once(' ') {
        Some((d, t)) => (d, Some(t)),
        None => (literal, None),
    };
    if let SqlType::Time { .. } = sql {
        // A date-time literal's time part counts (Debezium's TIMESTAMP_PATTERN).
        return Some(ColumnValue::Time(duration_micros(time.unwrap_or(date))?));
    }
    if zero_date(date) {
        if nullable {
            return None;
        }
        return epoch_default(sql);
    }
    let days = date_days(date)?;
    let of_day = match time {
        Some(t) => duration_micros(t).filter(|us| (0..86_400_000_000).contains(us))?,
        None => 0,
    };
    let us = days * 86_400_000_000 + of_day;
    match sql {
        SqlType::Date => Some(ColumnValue::Date(i32::try_from(days).ok()?)),
        SqlType::DateTime { .. } => Some(ColumnValue::DateTime(us)),
        // Debezium compares the TIMESTAMP literal with the epoch first.
        SqlType::Timestamp { .. } if us == 0 => (!nullable).then(|| epoch_default(sql)).flatten(),
        SqlType::Timestamp { .. } => Some(ColumnValue::Timestamp(us)),
        _ => None,
    }
}

/// The default a NOT NULL temporal column's zero or epoch default stands for.
fn epoch_default(sql: &SqlType) -> Option<ColumnValue> {
    Some(match sql {
        SqlType::Date => ColumnValue::Date(0),
        SqlType::DateTime { .. } => ColumnValue::DateTime(0),
        // `Timestamp.from(Instant.EPOCH)`, written without fraction.
        SqlType::Timestamp { .. } => ColumnValue::Text("1970-01-01T00:00:00Z".into()),
        _ => return None,
    })
}

/// `YYYY-MM-DD` to days since 1970-01-01.
fn date_days(date: &str) -> Option<i64> {
    let mut p = date.split('-');
    let y: i64 = p.next()?.parse().ok()?;
    let m: u32 = p.next()?.parse().ok()?;
    let d: u32 = p.next()?.parse().ok()?;
    if p.next().is_some() || !(1..=12).contains(&m) || !(1..=31).contains(&d) {
        return None;
    }
    Some(crate::value::days_from_civil(y, m, d))
}

/// `[-]H:MM[:SS[.ffffff]]` (hours beyond 24 allowed) to µs.
fn duration_micros(t: &str) -> Option<i64> {
    let (neg, body) = match t.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, t),
    };
    let (hms, frac) = body.split_once('.').unwrap_or((body, ""));
    let mut p = hms.split(':');
    let h: i64 = p.next()?.parse().ok()?;
    let m: i64 = p.next().map_or(Some(0), |x| x.parse().ok())?;
    let s: i64 = p.next().map_or(Some(0), |x| x.parse().ok())?;
    if frac.len() > 9 || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let micros: i64 = format!("{frac:0<6}")[..6].parse().ok()?;
    let us = ((h * 60 + m) * 60 + s) * 1_000_000 + micros;
    Some(if neg { -us } else { us })
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
            source: None,
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
            parse_default(&SqlType::Text, "'PENDING'", true),
            Some(ColumnValue::Text("PENDING".into()))
        );
        assert_eq!(
            parse_default(&SqlType::Text, "'it''s'", true),
            Some(ColumnValue::Text("it's".into()))
        );
        assert_eq!(
            parse_default(
                &SqlType::Integer {
                    bits: 32,
                    unsigned: false
                },
                "7",
                true
            ),
            Some(ColumnValue::Int(7))
        );
        assert_eq!(parse_default(&SqlType::Text, "NULL", true), None);
        assert_eq!(
            parse_default(&SqlType::DateTime { precision: 6 }, "uuid()", true),
            None
        );
        assert_eq!(parse_default(&SqlType::Text, "uuid()", true), None);
        assert_eq!(
            parse_default(
                &SqlType::Decimal {
                    precision: Some(10),
                    scale: Some(2)
                },
                "0.00",
                true
            ),
            Some(ColumnValue::Decimal("0.00".into()))
        );
    }

    /// The catalog's default texts of temporal, bit, binary and BIGINT columns (as MariaDB
    /// 10.11 shows them), read as Debezium 3.5.0's DDL parser reads them.
    #[test]
    fn temporal_bit_binary_defaults() {
        let dt = SqlType::DateTime { precision: 6 };
        let ts = SqlType::Timestamp {
            precision: 6,
            fixed_fraction: true,
        };
        assert_eq!(
            parse_default(&dt, "'2020-02-03 04:05:06.789000'", true),
            Some(ColumnValue::DateTime(1_580_702_706_789_000))
        );
        // CURRENT_TIMESTAMP stands for the epoch: a nullable TIMESTAMP then has none.
        assert_eq!(
            parse_default(&dt, "current_timestamp()", true),
            Some(ColumnValue::DateTime(0))
        );
        assert_eq!(parse_default(&ts, "current_timestamp(6)", true), None);
        assert_eq!(
            parse_default(&ts, "current_timestamp(6)", false),
            Some(ColumnValue::Text("1970-01-01T00:00:00Z".into()))
        );
        assert_eq!(
            parse_default(&ts, "'2020-02-03 04:05:06.500'", true),
            Some(ColumnValue::Timestamp(1_580_702_706_500_000))
        );
        // Zero dates: none on a nullable column, the epoch on a NOT NULL one.
        assert_eq!(parse_default(&SqlType::Date, "'0000-00-00'", true), None);
        assert_eq!(
            parse_default(&SqlType::Date, "'2020-00-01'", false),
            Some(ColumnValue::Date(0))
        );
        assert_eq!(
            parse_default(&SqlType::Date, "'1969-12-31'", false),
            Some(ColumnValue::Date(-1))
        );
        let time = SqlType::Time { precision: 6 };
        assert_eq!(
            parse_default(&time, "'-01:02:03.500000'", true),
            Some(ColumnValue::Time(-3_723_500_000))
        );
        assert_eq!(
            parse_default(&time, "'100:00:00'", true),
            Some(ColumnValue::Time(360_000_000_000))
        );
        let bits = |length| SqlType::Bits {
            length,
            minimal: false,
        };
        assert_eq!(
            parse_default(&bits(1), "b'1'", true),
            Some(ColumnValue::Bool(true))
        );
        assert_eq!(
            parse_default(&bits(10), "b'1010101010'", true),
            Some(ColumnValue::UInt(0x2aa))
        );
        // Binary literals keep their escapes, as Debezium's parser does.
        assert_eq!(
            parse_default(&SqlType::Binary { pad_to: Some(4) }, r"'ab\0\0'", true),
            Some(ColumnValue::Bytes(br"ab\0\0".to_vec()))
        );
        // 64-bit integers keep their text for the type mapping to round or keep exact.
        assert_eq!(
            parse_default(
                &SqlType::Integer {
                    bits: 64,
                    unsigned: true
                },
                "18446744073709551615",
                true
            ),
            Some(ColumnValue::Decimal("18446744073709551615".into()))
        );
    }

    /// COLUMN_TYPE as Debezium 3.5.0's MariaDB DDL parser describes the column (parity case
    /// `propagate_source_type`).
    #[test]
    fn source_types_as_debezium_names_them() {
        let st = |t: &str| source_type(t).unwrap();
        let s = |name: &str, length: Option<i64>, scale: Option<i64>| SourceType {
            name: name.into(),
            length,
            scale,
        };
        assert_eq!(st("int(11)"), s("INT", Some(11), None));
        assert_eq!(st("int(10) unsigned"), s("INT UNSIGNED", Some(10), None));
        assert_eq!(
            st("decimal(10,2) unsigned"),
            s("DECIMAL UNSIGNED", Some(10), Some(2))
        );
        assert_eq!(st("float(7,4)"), s("FLOAT", Some(7), Some(4)));
        assert_eq!(st("datetime(6)"), s("DATETIME", Some(6), None));
        assert_eq!(st("datetime"), s("DATETIME", None, None));
        assert_eq!(st("longtext"), s("LONGTEXT", None, None));
        assert_eq!(st("enum('PENDING','SENT')"), s("ENUM", Some(1), None));
        assert_eq!(st("set('a','b','c')"), s("SET", Some(5), None));
        assert_eq!(st("set('a,(b)','c')"), s("SET", Some(3), None));
        assert_eq!(st("tinyint(1)"), s("TINYINT", Some(1), None));
        assert_eq!(st("year(4)"), s("YEAR", Some(4), None));
    }
}
