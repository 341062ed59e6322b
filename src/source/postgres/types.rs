//! pgoutput column types in the terms of the type mapping ([`crate::typemap`]): the
//! Relation message's type OID and `atttypmod`, plus what only the catalog knows and
//! Debezium's schemas carry (NOT NULL, literal defaults, enum labels), read once per session
//! for the outbox tables ([`column_catalog`]).

use std::collections::HashMap;

use super::values;
use crate::event::TableName;
use crate::typemap::{ColumnType, SourceType, SqlType};
use crate::value::ColumnValue;

/// What the catalog says about one column.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CatalogColumn {
    /// `pg_attribute.attnotnull`.
    pub not_null: bool,
    /// `pg_get_expr(adbin, adrelid)`: the default expression, e.g. `'PENDING'::character varying`.
    pub default: Option<String>,
    /// The labels of an enum type (or of an array of an enum type's element), in order.
    pub enum_labels: Option<Vec<String>>,
    /// `pg_type.typname` (`int4`, `_text`, an enum type's name).
    pub type_name: Option<String>,
}

/// Columns of one table by name.
pub type TableCatalog = HashMap<String, CatalogColumn>;

/// Reads NOT NULL, defaults and enum labels of `tables`' columns. A table the catalog does
/// not show (not created yet) is left out; a failed query gives what was read so far,
/// logged at DEBUG (the types then carry neither defaults nor NOT NULL).
pub async fn column_catalog(
    client: &tokio_postgres::Client,
    tables: &[TableName],
) -> HashMap<TableName, TableCatalog> {
    let mut out = HashMap::new();
    for t in tables {
        let rows = client
            .query(
                "SELECT a.attname::text, a.attnotnull, pg_get_expr(d.adbin, d.adrelid), \
                        (SELECT array_agg(e.enumlabel::text ORDER BY e.enumsortorder) FROM pg_enum e \
                          WHERE e.enumtypid = CASE WHEN ty.typelem <> 0 THEN ty.typelem ELSE ty.oid END), \
                        ty.typname::text \
                 FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid \
                 JOIN pg_namespace n ON n.oid = c.relnamespace \
                 JOIN pg_type ty ON ty.oid = a.atttypid \
                 LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum \
                 WHERE n.nspname = $1 AND c.relname = $2 AND a.attnum > 0 AND NOT a.attisdropped",
                &[&t.schema, &t.name],
            )
            .await;
        match rows {
            Ok(rows) => {
                let cols = rows
                    .iter()
                    .map(|r| {
                        (
                            r.get::<_, String>(0),
                            CatalogColumn {
                                not_null: r.get(1),
                                default: r.get(2),
                                enum_labels: r.get(3),
                                type_name: r.get(4),
                            },
                        )
                    })
                    .collect();
                out.insert(t.clone(), cols);
            }
            Err(e) => {
                tracing::debug!(table = %t, error = %e, "column catalog not readable; schemas carry no defaults");
            }
        }
    }
    out
}

/// The type mapping's view of a Relation column (`type_oid`, `atttypmod`), completed by the
/// catalog's facts when known (without them the column counts as nullable, as pgoutput does
/// not say).
pub fn column_type(type_oid: u32, typmod: i32, catalog: Option<&CatalogColumn>) -> ColumnType {
    let mut sql = sql_type(type_oid, typmod);
    if let Some(labels) = catalog.and_then(|c| c.enum_labels.clone()) {
        sql = match sql {
            SqlType::Array(_) => SqlType::Array(Box::new(SqlType::Enum(labels))),
            _ => SqlType::Enum(labels),
        };
    }
    let default = catalog
        .and_then(|c| c.default.as_deref())
        .and_then(|d| parse_default(&sql, d));
    let source = catalog.and_then(|c| c.type_name.as_deref()).map(|name| {
        let (length, scale) = jdbc_size(type_oid, typmod, &sql);
        SourceType {
            name: name.to_uppercase(),
            length: Some(length),
            scale: Some(scale),
        }
    });
    ColumnType {
        nullable: !catalog.is_some_and(|c| c.not_null),
        default,
        sql,
        source,
    }
}

/// The column size and decimal digits the PostgreSQL JDBC driver reports for a column
/// (`DatabaseMetaData.getColumns`), which Debezium's PostgreSQL connector keeps as the
/// column's length and scale: integers their decimal digits (5, 10, 19), floats 8/8 and
/// 17/17, numeric(p,s) p/s (unconstrained: 131089/0), dates and times the length of their
/// text (`timestamp(6)` 29/6, `timestamptz(3)` 32/3, `time` 15/6, `date` 13/0), interval
/// 49/6, bit(n) n/0, varchar(n) / char(n) n/0, an array its element's, anything else
/// 2147483647/0.
pub fn jdbc_size(type_oid: u32, typmod: i32, sql: &SqlType) -> (i64, i64) {
    let frac = |p: u32| if p > 0 { i64::from(p) + 1 } else { 0 };
    match (type_oid, sql) {
        (1042 | 1043 | 1014 | 1015, _) if typmod >= 4 => (i64::from(typmod - 4), 0),
        (16 | 1000, _) => (1, 0),
        (_, SqlType::Array(elem)) => jdbc_size(0, typmod, elem),
        (_, SqlType::Integer { bits: 16, .. }) => (5, 0),
        (26, _) | (_, SqlType::Integer { bits: 32, .. }) => (10, 0),
        (_, SqlType::Integer { .. }) => (19, 0),
        (_, SqlType::Float32) => (8, 8),
        (_, SqlType::Float64) => (17, 17),
        (
            _,
            SqlType::Decimal {
                precision: Some(p),
                scale,
            },
        ) => (i64::from(*p), i64::from(scale.unwrap_or(0))),
        (_, SqlType::Decimal { .. }) => (131_089, 0),
        (_, SqlType::Date) => (13, 0),
        (_, SqlType::Time { precision }) => (8 + frac(*precision), i64::from(*precision)),
        (_, SqlType::TimeTz) => {
            let p = time_precision(typmod);
            (14 + frac(p), i64::from(p))
        }
        (_, SqlType::DateTime { precision }) => (22 + frac(*precision), i64::from(*precision)),
        (_, SqlType::Timestamp { precision, .. }) => (28 + frac(*precision), i64::from(*precision)),
        (_, SqlType::Interval) => (49, 6),
        (_, SqlType::Bits { length, .. }) => (i64::from(*length), 0),
        _ => (2_147_483_647, 0),
    }
}

/// Fractional-second digits of a time type's `atttypmod` (-1: the default, 6).
fn time_precision(typmod: i32) -> u32 {
    if typmod < 0 {
        6
    } else {
        typmod as u32
    }
}

/// A built-in type OID (`pg_type.oid`) with its `atttypmod`.
pub fn sql_type(type_oid: u32, typmod: i32) -> SqlType {
    let int = |bits| SqlType::Integer {
        bits,
        unsigned: false,
    };
    match type_oid {
        16 => SqlType::Boolean,
        17 => SqlType::Binary { pad_to: None },
        18 | 19 | 25 | 1042 | 1043 => SqlType::Text,
        20 | 26 => int(64),
        21 => int(16),
        23 => int(32),
        114 | 3802 => SqlType::Json,
        700 => SqlType::Float32,
        701 => SqlType::Float64,
        790 => SqlType::Money,
        // inet, cidr, macaddr, macaddr8, ranges: strings in Debezium.
        869 | 650 | 829 | 774 | 3904 | 3906 | 3908 | 3910 | 3912 | 3926 => SqlType::Text,
        1082 => SqlType::Date,
        1083 => SqlType::Time {
            precision: time_precision(typmod),
        },
        1114 => SqlType::DateTime {
            precision: time_precision(typmod),
        },
        1184 => SqlType::Timestamp {
            precision: time_precision(typmod),
            fixed_fraction: true,
        },
        1186 => SqlType::Interval,
        1266 => SqlType::TimeTz,
        1560 | 1562 => SqlType::Bits {
            length: if typmod > 0 { typmod as u32 } else { 1 },
            minimal: true,
        },
        1700 => {
            if typmod < 4 {
                SqlType::Decimal {
                    precision: None,
                    scale: None,
                }
            } else {
                let t = (typmod - 4) as u32;
                SqlType::Decimal {
                    precision: Some(t >> 16),
                    scale: Some(t & 0xffff),
                }
            }
        }
        2950 => SqlType::Uuid,
        142 => SqlType::Xml,
        3614 => SqlType::Tsvector,
        // Arrays of the types above.
        1000 => SqlType::Array(Box::new(SqlType::Boolean)),
        1005 => SqlType::Array(Box::new(int(16))),
        1007 => SqlType::Array(Box::new(int(32))),
        1016 => SqlType::Array(Box::new(int(64))),
        1002 | 1009 | 1014 | 1015 | 1041 | 651 | 1040 => SqlType::Array(Box::new(SqlType::Text)),
        1021 => SqlType::Array(Box::new(SqlType::Float32)),
        1022 => SqlType::Array(Box::new(SqlType::Float64)),
        1231 => SqlType::Array(Box::new(sql_type(1700, typmod))),
        2951 => SqlType::Array(Box::new(SqlType::Uuid)),
        199 | 3807 => SqlType::Array(Box::new(SqlType::Json)),
        // Enum types (and their arrays) are recognised from the catalog's labels; other
        // user-defined and extension types (geometry, hstore, ltree, vectors, ...) are not mapped.
        other => SqlType::Unsupported(match builtin_name(other) {
            Some(name) => format!("{name} (oid {other})"),
            None => format!("oid {other} (a user-defined or extension type: see pg_type)"),
        }),
    }
}

/// The name of a built-in PostgreSQL type outboxd does not map, for its error messages.
fn builtin_name(oid: u32) -> Option<&'static str> {
    Some(match oid {
        22 => "int2vector",
        24 => "regproc",
        27 => "tid",
        28 => "xid",
        29 => "cid",
        30 => "oidvector",
        143 => "xml[]",
        194 => "pg_node_tree",
        600 => "point",
        601 => "lseg",
        602 => "path",
        603 => "box",
        604 => "polygon",
        628 => "line",
        629 => "line[]",
        718 => "circle",
        719 => "circle[]",
        791 => "money[]",
        1001 => "bytea[]",
        1003 => "name[]",
        1006 => "int2vector[]",
        1010 => "tid[]",
        1011 => "xid[]",
        1012 => "cid[]",
        1013 => "oidvector[]",
        1017 => "point[]",
        1018 => "lseg[]",
        1019 => "path[]",
        1020 => "box[]",
        1027 => "polygon[]",
        1028 => "oid[]",
        1033 => "aclitem",
        1034 => "aclitem[]",
        1115 => "timestamp[]",
        1182 => "date[]",
        1183 => "time[]",
        1185 => "timestamptz[]",
        1187 => "interval[]",
        1263 => "cstring[]",
        1270 => "timetz[]",
        1561 => "bit[]",
        1563 => "varbit[]",
        2202 => "regprocedure",
        2203 => "regoper",
        2204 => "regoperator",
        2205 => "regclass",
        2206 => "regtype",
        2211 => "regtype[]",
        2970 => "txid_snapshot",
        3220 => "pg_lsn",
        3221 => "pg_lsn[]",
        3615 => "tsquery",
        3643 => "tsvector[]",
        3645 => "tsquery[]",
        3734 => "regconfig",
        3769 => "regdictionary",
        3905 | 3907 | 3909 | 3911 | 3913 | 3927 => "range[]",
        4072 => "jsonpath",
        4089 => "regnamespace",
        4096 => "regrole",
        4451 | 4532 | 4533 | 4534 | 4535 | 4536 => "multirange",
        5038 => "pg_snapshot",
        _ => return None,
    })
}

/// A default expression as `pg_get_expr` prints it (`'PENDING'::character varying`, `0`,
/// `'{}'::jsonb`, `42.5`, `'2020-02-03 04:05:06'::timestamp without time zone`,
/// `B'101'::"bit"`), read as Debezium's `PostgresDefaultValueConverter` reads it:
///
/// * a generated default (a function call such as `now()`, `nextval(...)`,
///   `(gen_random_uuid())::text`, or `CURRENT_TIMESTAMP` / `CURRENT_DATE` / `LOCALTIME` ...)
///   stands for its type's placeholder: 0, `0.0`, false, `""`, `{}`, the nil UUID, the epoch
///   (1970-01-01, 00:00);
/// * dates, times, timestamps and timestamptz as pgoutput's text forms; intervals as text;
///   bits as their digits (one digit: a boolean);
/// * `money`, `bytea`, `timetz` and other types without one of Debezium's default-value
///   mappers give none, and so does a timestamp or date `infinity` default (Debezium's
///   overflows: see README, "Deliberate differences from Debezium").
pub fn parse_default(sql: &SqlType, expr: &str) -> Option<ColumnValue> {
    let e = expr.trim();
    if generated(e) {
        return placeholder(sql);
    }
    let literal = if let Some(rest) = e.strip_prefix('\'') {
        let end = rest.rfind('\'')?;
        let tail = &rest[end + 1..];
        if !(tail.is_empty() || tail.starts_with("::")) {
            return None;
        }
        rest[..end].replace("''", "'")
    } else if let Some(rest) = e.strip_prefix("B'") {
        // B'101'::"bit"
        rest.split('\'').next()?.to_string()
    } else if e.contains('(') {
        return None;
    } else {
        e.split("::")
            .next()?
            .trim()
            .trim_start_matches('(')
            .trim_end_matches(')')
            .to_string()
    };
    let temporal = |type_oid| match values::decode_text(type_oid, literal.as_bytes()) {
        Ok(ColumnValue::Text(_)) | Err(_) => None,
        Ok(v) => Some(v),
    };
    Some(match sql {
        SqlType::Integer { .. } => ColumnValue::Int(literal.parse().ok()?),
        SqlType::Float32 | SqlType::Float64 => ColumnValue::Float(literal.parse().ok()?),
        SqlType::Decimal { .. } => ColumnValue::Decimal(literal),
        SqlType::Boolean => ColumnValue::Bool(matches!(literal.as_str(), "true" | "t")),
        SqlType::Text | SqlType::Enum(_) => ColumnValue::Text(literal),
        SqlType::Json => ColumnValue::Json(literal),
        SqlType::Uuid => ColumnValue::Uuid(literal),
        SqlType::Date => temporal(values::oid::DATE)?,
        SqlType::Time { .. } => temporal(values::oid::TIME)?,
        SqlType::DateTime { .. } => temporal(values::oid::TIMESTAMP)?,
        SqlType::Timestamp { .. } => temporal(values::oid::TIMESTAMPTZ)?,
        SqlType::Interval => ColumnValue::Text(literal),
        SqlType::Bits { .. } if literal.len() == 1 => ColumnValue::Bool(literal == "1"),
        SqlType::Bits { .. } => ColumnValue::UInt(u64::from_str_radix(&literal, 2).ok()?),
        // Debezium has no default-value mapper for money, bytea, timetz, arrays, ...
        _ => return None,
    })
}

/// Debezium's test for a generated default: `FUNCTION_DEFAULT_PATTERN`
/// (`^[(]?[A-Za-z0-9_.]+\(...\)`) or one of the SQL date-time value functions.
fn generated(e: &str) -> bool {
    let lower = e.to_ascii_lowercase();
    if matches!(
        lower.as_str(),
        "current_timestamp" | "current_time" | "current_date" | "localtime" | "localtimestamp"
    ) {
        return true;
    }
    let body = e.strip_prefix('(').unwrap_or(e);
    let name_len = body
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.'))
        .unwrap_or(body.len());
    name_len > 0 && body[name_len..].starts_with('(') && body[name_len + 1..].contains(')')
}

/// The placeholder Debezium's default-value mapper of `sql` gives a generated default.
fn placeholder(sql: &SqlType) -> Option<ColumnValue> {
    Some(match sql {
        SqlType::Integer { .. } => ColumnValue::Int(0),
        SqlType::Float32 | SqlType::Float64 => ColumnValue::Float(0.0),
        SqlType::Decimal { .. } => ColumnValue::Decimal("0.0".into()),
        SqlType::Boolean => ColumnValue::Bool(false),
        SqlType::Text => ColumnValue::Text(String::new()),
        SqlType::Json => ColumnValue::Json("{}".into()),
        SqlType::Uuid => ColumnValue::Uuid("00000000-0000-0000-0000-000000000000".into()),
        SqlType::Date => ColumnValue::Date(0),
        SqlType::Time { .. } => ColumnValue::Time(0),
        SqlType::DateTime { .. } => ColumnValue::DateTime(0),
        SqlType::Timestamp { .. } => ColumnValue::Timestamp(0),
        SqlType::Bits { length, .. } if *length > 1 => ColumnValue::UInt(0),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn oids_and_typmods() {
        assert_eq!(
            sql_type(1700, (10 << 16 | 2) + 4),
            SqlType::Decimal {
                precision: Some(10),
                scale: Some(2)
            }
        );
        assert_eq!(
            sql_type(1700, -1),
            SqlType::Decimal {
                precision: None,
                scale: None
            }
        );
        assert_eq!(sql_type(1114, 3), SqlType::DateTime { precision: 3 });
        assert_eq!(sql_type(1114, -1), SqlType::DateTime { precision: 6 });
        assert!(matches!(sql_type(99999, -1), SqlType::Unsupported(_)));
        // Unmapped types are named, not only numbered (break26 finding 6).
        assert_eq!(
            sql_type(3615, -1),
            SqlType::Unsupported("tsquery (oid 3615)".into())
        );
        assert_eq!(sql_type(3614, -1), SqlType::Tsvector);
        assert_eq!(
            sql_type(1115, -1),
            SqlType::Unsupported("timestamp[] (oid 1115)".into())
        );
        assert!(
            matches!(sql_type(99999, -1), SqlType::Unsupported(n) if n.contains("user-defined"))
        );
        assert_eq!(sql_type(142, -1), SqlType::Xml);
    }

    #[test]
    fn defaults_as_pg_get_expr_prints_them() {
        assert_eq!(
            parse_default(&SqlType::Text, "'PENDING'::character varying"),
            Some(ColumnValue::Text("PENDING".into()))
        );
        assert_eq!(
            parse_default(
                &SqlType::Integer {
                    bits: 32,
                    unsigned: false
                },
                "0"
            ),
            Some(ColumnValue::Int(0))
        );
        assert_eq!(
            parse_default(&SqlType::Json, "'{}'::jsonb"),
            Some(ColumnValue::Json("{}".into()))
        );
        // Generated defaults stand for their type's placeholder, as in Debezium.
        assert_eq!(
            parse_default(&SqlType::DateTime { precision: 6 }, "now()"),
            Some(ColumnValue::DateTime(0))
        );
        assert_eq!(
            parse_default(&SqlType::Uuid, "gen_random_uuid()"),
            Some(ColumnValue::Uuid(
                "00000000-0000-0000-0000-000000000000".into()
            ))
        );
        assert_eq!(
            parse_default(&SqlType::Text, "(gen_random_uuid())::text"),
            Some(ColumnValue::Text(String::new()))
        );
        assert_eq!(
            parse_default(
                &SqlType::Integer {
                    bits: 32,
                    unsigned: false
                },
                "nextval('t_id_seq'::regclass)"
            ),
            Some(ColumnValue::Int(0))
        );
        assert_eq!(
            parse_default(&SqlType::Date, "CURRENT_DATE"),
            Some(ColumnValue::Date(0))
        );
        // Temporal, interval and bit literals; money and infinity give none.
        assert_eq!(
            parse_default(
                &SqlType::DateTime { precision: 6 },
                "'2020-02-03 04:05:06.789'::timestamp without time zone"
            ),
            Some(ColumnValue::DateTime(1_580_702_706_789_000))
        );
        assert_eq!(
            parse_default(
                &SqlType::Timestamp {
                    precision: 6,
                    fixed_fraction: true
                },
                "'2020-02-03 02:05:06.789+00'::timestamp with time zone"
            ),
            Some(ColumnValue::Timestamp(1_580_695_506_789_000))
        );
        assert_eq!(
            parse_default(&SqlType::Date, "'2020-02-03'::date"),
            Some(ColumnValue::Date(18_295))
        );
        assert_eq!(
            parse_default(
                &SqlType::Time { precision: 3 },
                "'23:59:59.5'::time without time zone"
            ),
            Some(ColumnValue::Time(86_399_500_000))
        );
        assert_eq!(
            parse_default(&SqlType::Interval, "'-1 days'::interval"),
            Some(ColumnValue::Text("-1 days".into()))
        );
        let bits = |length| SqlType::Bits {
            length,
            minimal: true,
        };
        assert_eq!(
            parse_default(&bits(1), "B'1'::\"bit\""),
            Some(ColumnValue::Bool(true))
        );
        assert_eq!(
            parse_default(&bits(10), "B'1010101010'::\"bit\""),
            Some(ColumnValue::UInt(0x2aa))
        );
        assert_eq!(parse_default(&SqlType::Money, "12.34"), None);
        assert_eq!(
            parse_default(
                &SqlType::DateTime { precision: 6 },
                "'infinity'::timestamp without time zone"
            ),
            None
        );
        let col = column_type(
            1043,
            24,
            Some(&CatalogColumn {
                not_null: true,
                default: Some("'x'::character varying".into()),
                enum_labels: None,
                type_name: Some("varchar".into()),
            }),
        );
        assert!(!col.nullable);
        assert_eq!(col.default, Some(ColumnValue::Text("x".into())));
        assert_eq!(
            col.source,
            Some(SourceType {
                name: "VARCHAR".into(),
                length: Some(20),
                scale: Some(0)
            })
        );
    }

    /// Column sizes and digits as Debezium 3.6.1 (through the JDBC driver) reports them
    /// (parity case `propagate_source_type`).
    #[test]
    fn jdbc_sizes() {
        let size = |oid, typmod| jdbc_size(oid, typmod, &sql_type(oid, typmod));
        assert_eq!(size(23, -1), (10, 0));
        assert_eq!(size(21, -1), (5, 0));
        assert_eq!(size(20, -1), (19, 0));
        assert_eq!(size(700, -1), (8, 8));
        assert_eq!(size(701, -1), (17, 17));
        assert_eq!(size(16, -1), (1, 0));
        assert_eq!(size(1700, (10 << 16 | 2) + 4), (10, 2));
        assert_eq!(size(1700, -1), (131_089, 0));
        assert_eq!(size(1114, -1), (29, 6));
        assert_eq!(size(1114, 0), (22, 0));
        assert_eq!(size(1114, 3), (26, 3));
        assert_eq!(size(1184, -1), (35, 6));
        assert_eq!(size(1184, 3), (32, 3));
        assert_eq!(size(1082, -1), (13, 0));
        assert_eq!(size(1083, -1), (15, 6));
        assert_eq!(size(1083, 3), (12, 3));
        assert_eq!(size(1266, -1), (21, 6));
        assert_eq!(size(1186, -1), (49, 6));
        assert_eq!(size(1560, 10), (10, 0));
        assert_eq!(size(1043, 14), (10, 0));
        assert_eq!(size(1042, 7), (3, 0));
        assert_eq!(size(25, -1), (2_147_483_647, 0));
        assert_eq!(size(1007, -1), (10, 0));
        assert_eq!(size(1009, -1), (2_147_483_647, 0));
    }
}
