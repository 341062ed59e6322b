//! One test per column type, with the schemas and header texts Debezium 3.6.1 (PostgreSQL)
//! and 3.5.0 (MariaDB) wrote for the same values on this project's machines.

use super::*;
use crate::connect::header::simple_header;
use crate::connect::json::write_schema;
use crate::connect::JsonOptions;

fn schema_json(sql: SqlType, modes: &TypeModes) -> String {
    let mut out = String::new();
    write_schema(
        &column_schema(&ColumnType::nullable(sql), modes).unwrap(),
        &JsonOptions::default(),
        &mut out,
    )
    .unwrap();
    out
}

fn header(sql: SqlType, v: ColumnValue, modes: &TypeModes) -> String {
    let value = column_value(&sql, &v, modes).unwrap();
    String::from_utf8(simple_header(&value).unwrap()).unwrap()
}

const M: &TypeModes = &TypeModes::MYSQL;
const P: &TypeModes = &TypeModes::POSTGRES;

#[test]
fn mariadb_integers() {
    let int = |bits, unsigned| SqlType::Integer { bits, unsigned };
    assert_eq!(
        schema_json(int(8, false), M),
        r#"{"type":"int16","optional":true}"#
    );
    assert_eq!(
        schema_json(int(8, true), M),
        r#"{"type":"int16","optional":true}"#
    );
    assert_eq!(
        schema_json(int(16, true), M),
        r#"{"type":"int32","optional":true}"#
    );
    assert_eq!(
        schema_json(int(24, false), M),
        r#"{"type":"int32","optional":true}"#
    );
    assert_eq!(
        schema_json(int(32, true), M),
        r#"{"type":"int64","optional":true}"#
    );
    assert_eq!(
        schema_json(int(64, true), M),
        r#"{"type":"int64","optional":true}"#
    );
    assert_eq!(header(int(64, true), ColumnValue::UInt(u64::MAX), M), "-1");
    let precise = TypeModes {
        bigint_unsigned: BigIntUnsigned::Precise,
        ..TypeModes::MYSQL
    };
    assert_eq!(
        schema_json(int(64, true), &precise),
        r#"{"type":"bytes","optional":true,"name":"org.apache.kafka.connect.data.Decimal","version":1,"parameters":{"scale":"0","connect.decimal.precision":"20"}}"#
    );
    assert_eq!(
        header(int(64, true), ColumnValue::UInt(u64::MAX), &precise),
        "18446744073709551615"
    );
}

#[test]
fn mariadb_temporals() {
    let us = 1_796_221_327_468_343;
    assert_eq!(
        schema_json(SqlType::DateTime { precision: 6 }, M),
        r#"{"type":"int64","optional":true,"name":"io.debezium.time.MicroTimestamp","version":1}"#
    );
    assert_eq!(
        header(
            SqlType::DateTime { precision: 6 },
            ColumnValue::DateTime(us),
            M
        ),
        "1796221327468343"
    );
    assert_eq!(
        header(
            SqlType::DateTime { precision: 0 },
            ColumnValue::DateTime(us - 468_343),
            M
        ),
        "1796221327000"
    );
    assert_eq!(
        header(
            SqlType::Timestamp {
                precision: 6,
                fixed_fraction: true
            },
            ColumnValue::Timestamp(us),
            M
        ),
        "2026-12-02T14:22:07.468343Z"
    );
    assert_eq!(header(SqlType::Date, ColumnValue::Date(20_789), M), "20789");
    assert_eq!(
        schema_json(SqlType::Time { precision: 0 }, M),
        r#"{"type":"int64","optional":true,"name":"io.debezium.time.MicroTime","version":1}"#
    );
    assert_eq!(
        header(
            SqlType::Time { precision: 6 },
            ColumnValue::Time(-3_020_399_000_000),
            M
        ),
        "-3020399000000"
    );
    assert_eq!(header(SqlType::Year, ColumnValue::UInt(2026), M), "2026");
}

#[test]
fn mariadb_bits_binaries_decimals_enums() {
    assert_eq!(
        header(
            SqlType::Bits {
                length: 1,
                minimal: false
            },
            ColumnValue::UInt(1),
            M
        ),
        "true"
    );
    assert_eq!(
        schema_json(
            SqlType::Bits {
                length: 10,
                minimal: false
            },
            M
        ),
        r#"{"type":"bytes","optional":true,"name":"io.debezium.data.Bits","version":1,"parameters":{"length":"10"}}"#
    );
    assert_eq!(
        header(
            SqlType::Bits {
                length: 10,
                minimal: false
            },
            ColumnValue::UInt(0b10_1010_1010),
            M
        ),
        "qgI="
    );
    assert_eq!(
        header(
            SqlType::Binary { pad_to: Some(4) },
            ColumnValue::Bytes(b"ab".to_vec()),
            M
        ),
        "YWIAAA=="
    );
    let dec = SqlType::Decimal {
        precision: Some(10),
        scale: Some(2),
    };
    assert_eq!(
        schema_json(dec.clone(), M),
        r#"{"type":"bytes","optional":true,"name":"org.apache.kafka.connect.data.Decimal","version":1,"parameters":{"scale":"2","connect.decimal.precision":"10"}}"#
    );
    assert_eq!(
        header(dec.clone(), ColumnValue::Decimal("1.50".into()), M),
        "1.50"
    );
    assert_eq!(
        header(dec, ColumnValue::Decimal("12345.67".into()), M),
        "12345.67"
    );
    let e = SqlType::Enum(vec!["PENDING".into(), "SENT".into()]);
    assert_eq!(
        schema_json(e, M),
        r#"{"type":"string","optional":true,"name":"io.debezium.data.Enum","version":1,"parameters":{"allowed":"PENDING,SENT"}}"#
    );
    let hex = TypeModes {
        binary: BinaryHandling::Hex,
        ..TypeModes::MYSQL
    };
    assert_eq!(
        header(
            SqlType::Binary { pad_to: None },
            ColumnValue::Bytes(vec![0xde, 0xad]),
            &hex
        ),
        "dead"
    );
}

#[test]
fn postgres_types() {
    let us = 1_796_221_327_468_343;
    assert_eq!(
        header(
            SqlType::DateTime { precision: 3 },
            ColumnValue::DateTime(us - 343),
            P
        ),
        "1796221327468"
    );
    assert_eq!(
        header(
            SqlType::Timestamp {
                precision: 6,
                fixed_fraction: false
            },
            ColumnValue::Timestamp(us - 7_200_000_000),
            P
        ),
        "2026-12-02T12:22:07.468343Z"
    );
    assert_eq!(
        header(
            SqlType::Time { precision: 6 },
            ColumnValue::Time(51_727_468_343),
            P
        ),
        "51727468343"
    );
    assert_eq!(
        header(
            SqlType::TimeTz,
            ColumnValue::Text("14:22:07.5+02".into()),
            P
        ),
        "12:22:07.5Z"
    );
    assert_eq!(
        header(
            SqlType::Decimal {
                precision: None,
                scale: None
            },
            ColumnValue::Decimal("3.14159265358979".into()),
            P
        ),
        r#"{"scale":14,"value":"AR2552okgw=="}"#
    );
    assert_eq!(
        schema_json(
            SqlType::Decimal {
                precision: None,
                scale: None
            },
            P
        ),
        r#"{"type":"struct","fields":[{"type":"int32","optional":false,"field":"scale"},{"type":"bytes","optional":false,"field":"value"}],"optional":true,"name":"io.debezium.data.VariableScaleDecimal","version":1,"doc":"Variable scaled decimal"}"#
    );
    assert_eq!(
        header(
            SqlType::Binary { pad_to: None },
            ColumnValue::Bytes(vec![0xde, 0xad, 0xbe, 0xef]),
            P
        ),
        "3q2+7w=="
    );
    assert_eq!(
        header(
            SqlType::Interval,
            ColumnValue::Text("1 year 2 mons 3 days 04:05:06.789".into()),
            P
        ),
        "37091106789000"
    );
    assert_eq!(
        header(SqlType::Money, ColumnValue::Text("$12.34".into()), P),
        "12.34"
    );
    assert_eq!(
        schema_json(SqlType::Money, P),
        r#"{"type":"bytes","optional":true,"name":"org.apache.kafka.connect.data.Decimal","version":1,"parameters":{"scale":"2"}}"#
    );
    assert_eq!(
        header(
            SqlType::Array(Box::new(SqlType::Text)),
            ColumnValue::Text(r#"{a,"b,c"}"#.into()),
            P
        ),
        r#"["a","b,c"]"#
    );
    assert_eq!(
        header(
            SqlType::Array(Box::new(SqlType::Integer {
                bits: 32,
                unsigned: false
            })),
            ColumnValue::Text("{1,2,3}".into()),
            P
        ),
        "[1,2,3]"
    );
    assert_eq!(
        schema_json(
            SqlType::Array(Box::new(SqlType::Integer {
                bits: 32,
                unsigned: false
            })),
            P
        ),
        r#"{"type":"array","items":{"type":"int32","optional":true},"optional":true}"#
    );
    assert_eq!(
        schema_json(SqlType::Uuid, P),
        r#"{"type":"string","optional":true,"name":"io.debezium.data.Uuid","version":1}"#
    );
}

#[test]
fn defaults_and_required_columns() {
    let col = ColumnType {
        sql: SqlType::Text,
        nullable: false,
        default: Some(ColumnValue::Text("PENDING".into())),
        source: None,
    };
    let mut out = String::new();
    write_schema(
        &column_schema(&col, M).unwrap(),
        &JsonOptions::default(),
        &mut out,
    )
    .unwrap();
    assert_eq!(
        out,
        r#"{"type":"string","optional":false,"default":"PENDING"}"#
    );
}

#[test]
fn modes_parse_and_refuse() {
    let mut m = TypeModes::MYSQL;
    assert_eq!(m.set_option("decimal.handling.mode", "STRING"), Ok(true));
    assert_eq!(m.decimal, DecimalHandling::String);
    assert!(m.set_option("time.precision.mode", "weird").is_err());
    assert_eq!(m.set_option("table.include.list", "x"), Ok(false));
    let dec = SqlType::Decimal {
        precision: Some(10),
        scale: Some(2),
    };
    assert_eq!(
        column_value(&dec, &ColumnValue::Decimal("1.5".into()), &m).unwrap(),
        Value::String("1.50".into())
    );
    assert!(column_value(
        &SqlType::Unsupported("geometry".into()),
        &ColumnValue::Text("x".into()),
        &m
    )
    .is_err());
}

/// break26 finding 6: a numeric 'NaN'/'Infinity' in precise mode is null for an unconstrained
/// numeric (VariableScaleDecimal), refused (as Debezium's task fails) for numeric(p,s); xml is
/// `io.debezium.data.Xml`.
#[test]
fn postgres_numeric_specials_and_xml() {
    let var = SqlType::Decimal {
        precision: None,
        scale: None,
    };
    for t in ["NaN", "Infinity", "-Infinity"] {
        let v = ColumnValue::Decimal(t.into());
        assert_eq!(column_value(&var, &v, P).unwrap(), Value::Null);
    }
    let fixed = SqlType::Decimal {
        precision: Some(7),
        scale: Some(2),
    };
    let e = column_value(&fixed, &ColumnValue::Decimal("NaN".into()), P).unwrap_err();
    assert!(e.0.contains("Debezium's task fails on it too"), "{e}");
    let s = TypeModes {
        decimal: DecimalHandling::String,
        ..*P
    };
    assert_eq!(
        column_value(&var, &ColumnValue::Decimal("NaN".into()), &s).unwrap(),
        Value::String("NaN".into())
    );
    assert_eq!(
        schema_json(SqlType::Xml, P),
        r#"{"type":"string","optional":true,"name":"io.debezium.data.Xml","version":1}"#
    );
    assert_eq!(
        header(SqlType::Xml, ColumnValue::Text("<a>x</a>".into()), P),
        "<a>x</a>"
    );
    assert_eq!(
        schema_json(SqlType::Tsvector, P),
        r#"{"type":"string","optional":true,"name":"io.debezium.data.Tsvector","version":1}"#
    );
}

/// break26 finding 4: MariaDB `FLOAT(7,4)` = 123.4567, as Debezium 3.5.0 wrote it: a double
/// schema and the single-precision value widened.
#[test]
fn mariadb_float_with_scale_is_a_widened_double() {
    assert_eq!(
        schema_json(SqlType::Float32AsDouble, M),
        r#"{"type":"double","optional":true}"#
    );
    assert_eq!(
        header(SqlType::Float32AsDouble, ColumnValue::Float(123.4567), M),
        "123.45670318603516"
    );
    assert_eq!(
        header(SqlType::Float32, ColumnValue::Float(123.4567), M),
        "123.4567"
    );
}

/// PostgreSQL `infinity` / `-infinity` of timestamp and date columns under each
/// `time.precision.mode`, as Debezium 3.6.1 wrote them (parity cases `infinity_*`): pgjdbc's
/// sentinels read as µs for a timestamp, the dates -5877611-06-21 / -22 for a date, the text
/// for a timestamptz.
#[test]
fn postgres_infinite_timestamps_and_dates() {
    let inf = || ColumnValue::Text("infinity".into());
    let neg = || ColumnValue::Text("-infinity".into());
    let ts = |precision| SqlType::DateTime { precision };
    let mode = |time_precision| TypeModes {
        time_precision,
        ..*P
    };
    let cases: &[(TimePrecision, u32, &str, &str)] = &[
        (
            TimePrecision::Adaptive,
            6,
            "9223372036825200000",
            "-9223372036832400000",
        ),
        (
            TimePrecision::Adaptive,
            3,
            "9223372036825200",
            "-9223372036832400",
        ),
        (
            TimePrecision::Adaptive,
            0,
            "9223372036825200",
            "-9223372036832400",
        ),
        (
            TimePrecision::AdaptiveTimeMicroseconds,
            6,
            "9223372036825200000",
            "-9223372036832400000",
        ),
        (
            TimePrecision::Microseconds,
            3,
            "9223372036825200000",
            "-9223372036832400000",
        ),
        (
            TimePrecision::Nanoseconds,
            6,
            "9223372036854775807",
            "-9223372036854775808",
        ),
        (
            TimePrecision::IsoString,
            6,
            "+294247-01-10T04:00:25.2Z",
            "-290308-12-21T19:59:27.6Z",
        ),
        // Connect's Timestamp through SimpleDateFormat: before 1970-01-02 only the time.
        (
            TimePrecision::Connect,
            6,
            "294247-01-10T04:00:25.200Z",
            "19:59:27.600Z",
        ),
    ];
    for (tp, p, pos, negative) in cases {
        let m = mode(*tp);
        assert_eq!(header(ts(*p), inf(), &m), *pos, "{tp:?} {p}");
        assert_eq!(header(ts(*p), neg(), &m), *negative, "{tp:?} {p}");
    }
    assert_eq!(
        column_value(&ts(6), &inf(), &mode(TimePrecision::Connect)).unwrap(),
        Value::Date(9_223_372_036_825_200)
    );
    for tp in [
        TimePrecision::Adaptive,
        TimePrecision::AdaptiveTimeMicroseconds,
        TimePrecision::Microseconds,
        TimePrecision::Nanoseconds,
    ] {
        assert_eq!(header(SqlType::Date, inf(), &mode(tp)), "-2147472692");
        assert_eq!(header(SqlType::Date, neg(), &mode(tp)), "-2147472691");
    }
    let iso = mode(TimePrecision::IsoString);
    assert_eq!(header(SqlType::Date, inf(), &iso), "-5877611-06-21Z");
    assert_eq!(header(SqlType::Date, neg(), &iso), "-5877611-06-22Z");
    let connect = mode(TimePrecision::Connect);
    assert_eq!(
        column_value(&SqlType::Date, &inf(), &connect).unwrap(),
        Value::Date(-2_147_472_692 * 86_400_000)
    );
    let tstz = SqlType::Timestamp {
        precision: 6,
        fixed_fraction: true,
    };
    assert_eq!(header(tstz.clone(), inf(), P), "infinity");
    assert_eq!(header(tstz, neg(), &connect), "-infinity");
    // Other text still does not fit a timestamp or a date.
    assert!(column_value(&ts(6), &ColumnValue::Text("epoch".into()), P).is_err());
    assert!(column_value(&SqlType::Date, &ColumnValue::Text("today".into()), P).is_err());
}

/// The `"default":...` a column's schema carries under JsonConverter (None: no default).
fn default_json(sql: SqlType, default: ColumnValue, modes: &TypeModes) -> Option<String> {
    let col = ColumnType {
        sql,
        nullable: true,
        default: Some(default),
        source: None,
    };
    let mut out = String::new();
    write_schema(
        &column_schema(&col, modes).unwrap(),
        &JsonOptions::default(),
        &mut out,
    )
    .unwrap();
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    v.get("default").map(|d| d.to_string())
}

/// Temporal, bit, binary and 64-bit integer column defaults as Debezium 3.5.0 (MariaDB) and
/// 3.6.1 (PostgreSQL) wrote them in envelope schemas (parity cases `defaults_*`), the
/// sources having parsed the catalog's default text into these values.
#[test]
fn column_defaults_as_debezium_writes_them() {
    let mode = |base: &TypeModes, time_precision| TypeModes {
        time_precision,
        ..*base
    };
    let connect = mode(M, TimePrecision::Connect);
    let iso = mode(M, TimePrecision::IsoString);
    let nano = mode(M, TimePrecision::Nanoseconds);
    let dt = |precision| SqlType::DateTime { precision };
    let d = |v: ColumnValue, sql: SqlType, m: &TypeModes| default_json(sql, v, m);
    let some = |s: &str| Some(s.to_string());
    // MariaDB DATETIME '2020-02-03 04:05:06' / DATETIME(6) '... .789' / DATETIME(3)
    // '1969-07-20 20:17:40.5'.
    let dt0 = ColumnValue::DateTime(1_580_702_706_000_000);
    let dt6 = ColumnValue::DateTime(1_580_702_706_789_000);
    let dt3 = ColumnValue::DateTime(-14_182_939_500_000);
    assert_eq!(d(dt0.clone(), dt(0), M), some("1580702706000"));
    assert_eq!(d(dt6.clone(), dt(6), M), some("1580702706789000"));
    assert_eq!(d(dt3.clone(), dt(3), M), some("-14182939500"));
    assert_eq!(d(dt6.clone(), dt(6), &connect), some("1580702706789"));
    assert_eq!(d(dt6, dt(6), &nano), some("1580702706789000000"));
    assert_eq!(d(dt0, dt(0), &iso), some("\"2020-02-03T04:05:06Z\""));
    assert_eq!(d(dt3, dt(3), &iso), some("\"1969-07-20T20:17:40.5Z\""));
    // TIMESTAMP(3) '2020-02-03 04:05:06.5'; a NOT NULL TIMESTAMP's epoch default.
    let ts3 = SqlType::Timestamp {
        precision: 3,
        fixed_fraction: true,
    };
    assert_eq!(
        d(
            ColumnValue::Timestamp(1_580_702_706_500_000),
            ts3.clone(),
            M
        ),
        some("\"2020-02-03T04:05:06.500Z\"")
    );
    assert_eq!(
        d(ColumnValue::Text("1970-01-01T00:00:00Z".into()), ts3, &iso),
        some("\"1970-01-01T00:00:00Z\"")
    );
    // DATE '1969-12-31'.
    assert_eq!(d(ColumnValue::Date(-1), SqlType::Date, M), some("-1"));
    assert_eq!(
        d(ColumnValue::Date(-1), SqlType::Date, &iso),
        some("\"1969-12-31Z\"")
    );
    // TIME '04:05:06', TIME(6) '-01:02:03.5': a Connect Time or IsoTime has no form for a
    // negative one: no default.
    let t = |precision| SqlType::Time { precision };
    assert_eq!(
        d(ColumnValue::Time(14_706_000_000), t(0), M),
        some("14706000000")
    );
    assert_eq!(
        d(ColumnValue::Time(14_706_000_000), t(0), &connect),
        some("14706000")
    );
    assert_eq!(
        d(ColumnValue::Time(14_706_000_000), t(0), &iso),
        some("\"04:05:06Z\"")
    );
    assert_eq!(
        d(ColumnValue::Time(-3_723_500_000), t(6), M),
        some("-3723500000")
    );
    assert_eq!(d(ColumnValue::Time(-3_723_500_000), t(6), &connect), None);
    assert_eq!(d(ColumnValue::Time(360_000_000_000), t(0), &iso), None);
    // BIT(1) b'1', BIT(10) b'1010101010', BIT(64) b'1'.
    let bits = |length| SqlType::Bits {
        length,
        minimal: false,
    };
    assert_eq!(d(ColumnValue::Bool(true), bits(1), M), some("true"));
    assert_eq!(d(ColumnValue::UInt(0x2aa), bits(10), M), some("\"qgI=\""));
    assert_eq!(
        d(ColumnValue::UInt(1), bits(64), M),
        some("\"AQAAAAAAAAA=\"")
    );
    // BINARY(4) DEFAULT 'ab', shown 'ab\0\0': the six bytes of the text.
    let bin = SqlType::Binary { pad_to: Some(4) };
    let ab = ColumnValue::Bytes(b"ab\\0\\0".to_vec());
    assert_eq!(d(ab.clone(), bin.clone(), M), some("\"YWJcMFww\""));
    let hex = TypeModes {
        binary: BinaryHandling::Hex,
        ..*M
    };
    assert_eq!(d(ab, bin, &hex), some("\"61625c305c30\""));
    // BIGINT UNSIGNED 18446744073709551615: Math.round(double) saturates under `long`,
    // exact under `precise`.
    let biu = SqlType::Integer {
        bits: 64,
        unsigned: true,
    };
    let max = || ColumnValue::Decimal("18446744073709551615".into());
    assert_eq!(d(max(), biu.clone(), M), some("9223372036854775807"));
    let precise = TypeModes {
        bigint_unsigned: BigIntUnsigned::Precise,
        ..*M
    };
    assert_eq!(d(max(), biu, &precise), some("\"AP//////////\""));
    // PostgreSQL: interval, timestamptz, time(3), bit(10), varbit B'101'.
    let iv = || ColumnValue::Text("1 year 2 mons 3 days 04:05:06.5".into());
    assert_eq!(d(iv(), SqlType::Interval, P), some("37091106500000"));
    let iv_string = TypeModes {
        interval: IntervalHandling::String,
        ..*P
    };
    assert_eq!(
        d(iv(), SqlType::Interval, &iv_string),
        some("\"P1Y2M3DT4H5M6.5S\"")
    );
    let tstz = SqlType::Timestamp {
        precision: 6,
        fixed_fraction: true,
    };
    assert_eq!(
        d(ColumnValue::Timestamp(1_580_695_506_789_000), tstz, P),
        some("\"2020-02-03T02:05:06.789000Z\"")
    );
    assert_eq!(
        d(ColumnValue::Time(86_399_500_000), t(3), P),
        some("86399500")
    );
    let pbits = |length| SqlType::Bits {
        length,
        minimal: true,
    };
    assert_eq!(d(ColumnValue::UInt(0b101), pbits(16), P), some("\"BQ==\""));
    assert_eq!(d(ColumnValue::UInt(0x2aa), pbits(10), P), some("\"qgI=\""));
}
