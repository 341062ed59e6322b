//! pgoutput column values (text output format) to [`ColumnValue`]s, by type OID.
//!
//! The replication session pins the settings that shape the text forms
//! (`DateStyle=ISO`, `TimeZone=UTC`, `bytea_output=hex`, `extra_float_digits=3`), so the
//! forms parsed here are the ISO ones. Mapping:
//!
//! | PostgreSQL type (OID) | [`ColumnValue`] |
//! |---|---|
//! | text 25, varchar 1043, bpchar 1042, name 19, "char" 18 | `Text` |
//! | uuid 2950 | `Uuid` (lower case) |
//! | int2 21, int4 23, int8 20, oid 26 | `Int` |
//! | json 114, jsonb 3802 | `Json`, the text exactly as the server sends it (for jsonb that is jsonb's normalised form) |
//! | bytea 17 | `Bytes` (`\x` hex, or the legacy escape format) |
//! | timestamptz 1184 | `Timestamp` (µs since the Unix epoch) |
//! | timestamp 1114 | `DateTime` (µs, wall clock read as UTC) |
//! | date 1082 | `Date` (days since 1970-01-01) |
//! | time 1083 | `Time` (µs) |
//! | numeric 1700 | `Decimal` (text as sent, `NaN` included) |
//! | bool 16 | `Bool` |
//! | float4 700, float8 701 | `Float` |
//! | anything else (enums, arrays, domains, …) | `Text` as sent |
//!
//! Temporal values the types cannot hold (`infinity`, `-infinity`) stay `Text` (the type
//! mapping writes them as Debezium does: [`crate::typemap`]). A value that
//! does not parse as its declared type is a [`ValueError`] naming the type, never the value.

use crate::value::{days_from_civil, ColumnValue};

/// Built-in type OIDs (`pg_type.oid`, fixed across PostgreSQL versions).
pub mod oid {
    /// `bool`
    pub const BOOL: u32 = 16;
    /// `bytea`
    pub const BYTEA: u32 = 17;
    /// `"char"`
    pub const CHAR: u32 = 18;
    /// `name`
    pub const NAME: u32 = 19;
    /// `int8`
    pub const INT8: u32 = 20;
    /// `int2`
    pub const INT2: u32 = 21;
    /// `int4`
    pub const INT4: u32 = 23;
    /// `text`
    pub const TEXT: u32 = 25;
    /// `oid`
    pub const OID: u32 = 26;
    /// `json`
    pub const JSON: u32 = 114;
    /// `float4`
    pub const FLOAT4: u32 = 700;
    /// `float8`
    pub const FLOAT8: u32 = 701;
    /// `bpchar` (`char(n)`)
    pub const BPCHAR: u32 = 1042;
    /// `varchar`
    pub const VARCHAR: u32 = 1043;
    /// `date`
    pub const DATE: u32 = 1082;
    /// `time`
    pub const TIME: u32 = 1083;
    /// `timestamp`
    pub const TIMESTAMP: u32 = 1114;
    /// `timestamptz`
    pub const TIMESTAMPTZ: u32 = 1184;
    /// `numeric`
    pub const NUMERIC: u32 = 1700;
    /// `uuid`
    pub const UUID: u32 = 2950;
    /// `jsonb`
    pub const JSONB: u32 = 3802;
}

/// A column value that does not parse as its declared type.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a {type_name} value (type oid {type_oid}) could not be decoded: {reason}")]
pub struct ValueError {
    /// Type OID.
    pub type_oid: u32,
    /// Type name.
    pub type_name: &'static str,
    /// What is wrong (never the value itself).
    pub reason: &'static str,
}

/// Name of a built-in type, for messages.
pub fn type_name(type_oid: u32) -> &'static str {
    match type_oid {
        oid::BOOL => "bool",
        oid::BYTEA => "bytea",
        oid::CHAR => "\"char\"",
        oid::NAME => "name",
        oid::INT8 => "int8",
        oid::INT2 => "int2",
        oid::INT4 => "int4",
        oid::TEXT => "text",
        oid::OID => "oid",
        oid::JSON => "json",
        oid::FLOAT4 => "float4",
        oid::FLOAT8 => "float8",
        oid::BPCHAR => "bpchar",
        oid::VARCHAR => "varchar",
        oid::DATE => "date",
        oid::TIME => "time",
        oid::TIMESTAMP => "timestamp",
        oid::TIMESTAMPTZ => "timestamptz",
        oid::NUMERIC => "numeric",
        oid::UUID => "uuid",
        oid::JSONB => "jsonb",
        _ => "non-built-in type",
    }
}

/// Decodes one value in text output format.
pub fn decode_text(type_oid: u32, raw: &[u8]) -> Result<ColumnValue, ValueError> {
    let err = |reason| ValueError {
        type_oid,
        type_name: type_name(type_oid),
        reason,
    };
    if type_oid == oid::BYTEA {
        return decode_bytea(raw).map(ColumnValue::Bytes).map_err(err);
    }
    let text = std::str::from_utf8(raw).map_err(|_| err("not UTF-8"))?;
    let v = match type_oid {
        oid::TEXT | oid::VARCHAR | oid::BPCHAR | oid::CHAR => ColumnValue::Text(text.to_owned()),
        // Debezium's PostgreSQL connector writes a `name` column's value as null (seen with
        // pgoutput in 3.x: header and envelope field alike).
        oid::NAME => ColumnValue::Null,
        oid::UUID => {
            let ok = text.len() == 36
                && text.bytes().enumerate().all(|(i, b)| {
                    if matches!(i, 8 | 13 | 18 | 23) {
                        b == b'-'
                    } else {
                        b.is_ascii_hexdigit()
                    }
                });
            if !ok {
                return Err(err("not a hyphenated UUID"));
            }
            ColumnValue::Uuid(text.to_ascii_lowercase())
        }
        oid::INT2 | oid::INT4 | oid::INT8 | oid::OID => {
            ColumnValue::Int(text.parse().map_err(|_| err("not an integer"))?)
        }
        oid::JSON | oid::JSONB => ColumnValue::Json(text.to_owned()),
        oid::BOOL => match text {
            "t" => ColumnValue::Bool(true),
            "f" => ColumnValue::Bool(false),
            _ => return Err(err("not t or f")),
        },
        oid::FLOAT4 | oid::FLOAT8 => ColumnValue::Float(
            text.parse()
                .map_err(|_| err("not a floating-point number"))?,
        ),
        oid::NUMERIC => {
            let ok = text == "NaN"
                || text == "Infinity"
                || text == "-Infinity"
                || (!text.is_empty()
                    && text.bytes().all(|b| {
                        b.is_ascii_digit() || matches!(b, b'-' | b'+' | b'.' | b'e' | b'E')
                    }));
            if !ok {
                return Err(err("not a decimal number"));
            }
            ColumnValue::Decimal(text.to_owned())
        }
        oid::DATE => match parse_date(text) {
            Some(d) => ColumnValue::Date(i32::try_from(d).map_err(|_| err("date out of range"))?),
            None if is_infinity(text) => ColumnValue::Text(text.to_owned()),
            None => return Err(err("not an ISO date")),
        },
        oid::TIME => ColumnValue::Time(parse_time(text).ok_or_else(|| err("not an ISO time"))?),
        oid::TIMESTAMP => match parse_timestamp(text, false) {
            Some(us) => ColumnValue::DateTime(us),
            None if is_infinity(text) => ColumnValue::Text(text.to_owned()),
            None => return Err(err("not an ISO timestamp")),
        },
        oid::TIMESTAMPTZ => match parse_timestamp(text, true) {
            Some(us) => ColumnValue::Timestamp(us),
            None if is_infinity(text) => ColumnValue::Text(text.to_owned()),
            None => return Err(err("not an ISO timestamp with time zone")),
        },
        _ => ColumnValue::Text(text.to_owned()),
    };
    Ok(v)
}

fn is_infinity(text: &str) -> bool {
    text == "infinity" || text == "-infinity"
}

/// `\x` hex, or the legacy escape format (`\\` and `\ooo` octal escapes).
fn decode_bytea(raw: &[u8]) -> Result<Vec<u8>, &'static str> {
    if let Some(hex) = raw.strip_prefix(b"\\x") {
        if hex.len() % 2 != 0 {
            return Err("odd number of hex digits");
        }
        let nibble = |c: u8| -> Result<u8, &'static str> {
            match c {
                b'0'..=b'9' => Ok(c - b'0'),
                b'a'..=b'f' => Ok(c - b'a' + 10),
                b'A'..=b'F' => Ok(c - b'A' + 10),
                _ => Err("not a hex digit"),
            }
        };
        return hex
            .chunks_exact(2)
            .map(|p| Ok((nibble(p[0])? << 4) | nibble(p[1])?))
            .collect();
    }
    let mut out = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        if raw[i] != b'\\' {
            out.push(raw[i]);
            i += 1;
        } else if raw.get(i + 1) == Some(&b'\\') {
            out.push(b'\\');
            i += 2;
        } else {
            let oct = raw.get(i + 1..i + 4).ok_or("truncated escape")?;
            if !oct.iter().all(|c| (b'0'..=b'7').contains(c)) {
                return Err("bad escape");
            }
            let v = u32::from(oct[0] - b'0') * 64
                + u32::from(oct[1] - b'0') * 8
                + u32::from(oct[2] - b'0');
            out.push(u8::try_from(v).map_err(|_| "bad escape")?);
            i += 4;
        }
    }
    Ok(out)
}

fn digits(s: &str) -> Option<u32> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// `YYYY-MM-DD` (4+ digit year) with an optional ` BC` suffix, to days since 1970-01-01.
fn parse_date(s: &str) -> Option<i64> {
    let (s, bc) = match s.strip_suffix(" BC") {
        Some(rest) => (rest, true),
        None => (s, false),
    };
    let mut parts = s.splitn(3, '-');
    let y = i64::from(digits(parts.next()?)?);
    let m = digits(parts.next()?)?;
    let d = digits(parts.next()?)?;
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) {
        return None;
    }
    // 1 BC is year 0 in the proleptic Gregorian calendar.
    let y = if bc { 1 - y } else { y };
    Some(days_from_civil(y, m, d))
}

/// `HH:MM:SS[.ffffff]` to microseconds (24:00:00 allowed, as PostgreSQL does).
fn parse_time(s: &str) -> Option<i64> {
    let mut parts = s.splitn(3, ':');
    let h = i64::from(digits(parts.next()?)?);
    let m = i64::from(digits(parts.next()?)?);
    let sec = parts.next()?;
    let (sec, frac) = match sec.split_once('.') {
        Some((a, b)) => (a, b),
        None => (sec, ""),
    };
    let s = i64::from(digits(sec)?);
    let frac_us = if frac.is_empty() {
        0
    } else {
        if frac.len() > 6 {
            return None;
        }
        i64::from(digits(frac)?) * 10_i64.pow(6 - frac.len() as u32)
    };
    if h > 24 || m > 59 || s > 60 {
        return None;
    }
    Some(((h * 60 + m) * 60 + s) * 1_000_000 + frac_us)
}

/// `YYYY-MM-DD HH:MM:SS[.ffffff][±HH[:MM[:SS]]][ BC]` to µs since the Unix epoch (UTC when
/// `zoned`, the wall clock otherwise).
fn parse_timestamp(s: &str, zoned: bool) -> Option<i64> {
    let (s, bc) = match s.strip_suffix(" BC") {
        Some(rest) => (rest, true),
        None => (s, false),
    };
    let (date, rest) = s.split_once(' ')?;
    let (time, offset_secs) = if zoned {
        let at = rest.rfind(['+', '-'])?;
        let (t, off) = rest.split_at(at);
        let sign: i64 = if off.starts_with('-') { -1 } else { 1 };
        let mut secs = 0_i64;
        for (i, part) in off[1..].split(':').enumerate() {
            if i > 2 || part.len() != 2 {
                return None;
            }
            secs += i64::from(digits(part)?) * [3600, 60, 1][i];
        }
        (t, sign * secs)
    } else {
        (rest, 0)
    };
    let date = if bc {
        format!("{date} BC")
    } else {
        date.to_owned()
    };
    let days = parse_date(&date)?;
    let tod = parse_time(time)?;
    days.checked_mul(86_400_000_000)?
        .checked_add(tod)?
        .checked_sub(offset_secs * 1_000_000)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(t: u32, s: &str) -> ColumnValue {
        decode_text(t, s.as_bytes()).unwrap()
    }

    #[test]
    fn text_like_and_uuid() {
        for t in [oid::TEXT, oid::VARCHAR, oid::BPCHAR, 999_999] {
            assert_eq!(d(t, "héllo 😀"), ColumnValue::Text("héllo 😀".into()));
        }
        // break26 finding 7: Debezium writes null for a `name` column.
        assert_eq!(d(oid::NAME, "nm"), ColumnValue::Null);
        assert_eq!(
            d(oid::UUID, "A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11"),
            ColumnValue::Uuid("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11".into())
        );
        assert!(decode_text(oid::UUID, b"a0eebc999c0b4ef8bb6d6bb9bd380a11").is_err());
        assert!(decode_text(oid::TEXT, b"\xff").is_err());
    }

    #[test]
    fn numbers_bool_json() {
        assert_eq!(d(oid::INT2, "-32768"), ColumnValue::Int(-32768));
        assert_eq!(
            d(oid::INT8, "9223372036854775807"),
            ColumnValue::Int(i64::MAX)
        );
        assert!(decode_text(oid::INT4, b"12x").is_err());
        assert_eq!(d(oid::BOOL, "t"), ColumnValue::Bool(true));
        assert_eq!(d(oid::BOOL, "f"), ColumnValue::Bool(false));
        assert!(decode_text(oid::BOOL, b"true").is_err());
        assert_eq!(d(oid::FLOAT8, "1.5e-07"), ColumnValue::Float(1.5e-7));
        assert!(matches!(d(oid::FLOAT4, "NaN"), ColumnValue::Float(f) if f.is_nan()));
        assert_eq!(
            d(oid::FLOAT8, "-Infinity"),
            ColumnValue::Float(f64::NEG_INFINITY)
        );
        assert_eq!(
            d(oid::NUMERIC, "-12.340"),
            ColumnValue::Decimal("-12.340".into())
        );
        assert_eq!(d(oid::NUMERIC, "NaN"), ColumnValue::Decimal("NaN".into()));
        assert!(decode_text(oid::NUMERIC, b"12;drop").is_err());
        assert_eq!(
            d(oid::JSONB, r#"{"a": 1, "b": [true, null]}"#),
            ColumnValue::Json(r#"{"a": 1, "b": [true, null]}"#.into())
        );
        assert_eq!(
            d(oid::JSON, "{\"a\":1}  "),
            ColumnValue::Json("{\"a\":1}  ".into())
        );
    }

    #[test]
    fn bytea() {
        assert_eq!(
            d(oid::BYTEA, "\\x00ff10Ab"),
            ColumnValue::Bytes(vec![0, 0xff, 0x10, 0xab])
        );
        assert_eq!(d(oid::BYTEA, "\\x"), ColumnValue::Bytes(vec![]));
        assert_eq!(
            d(oid::BYTEA, "ab\\\\c\\000\\377"),
            ColumnValue::Bytes(vec![b'a', b'b', b'\\', b'c', 0, 255])
        );
        assert!(decode_text(oid::BYTEA, b"\\x0").is_err());
        assert!(decode_text(oid::BYTEA, b"\\xzz").is_err());
        assert!(decode_text(oid::BYTEA, b"a\\9").is_err());
        assert!(decode_text(oid::BYTEA, b"a\\777").is_err());
    }

    #[test]
    fn temporal() {
        let day = days_from_civil(2024, 2, 29);
        let us = day * 86_400_000_000 + 3_723_000_123;
        assert_eq!(
            d(oid::TIMESTAMPTZ, "2024-02-29 01:02:03.000123+00"),
            ColumnValue::Timestamp(us)
        );
        assert_eq!(
            d(oid::TIMESTAMPTZ, "2024-02-29 03:32:03.000123+02:30"),
            ColumnValue::Timestamp(us)
        );
        assert_eq!(
            d(oid::TIMESTAMPTZ, "2024-02-28 23:02:03.000123-02"),
            ColumnValue::Timestamp(us)
        );
        assert_eq!(
            d(oid::TIMESTAMP, "2024-02-29 01:02:03.000123"),
            ColumnValue::DateTime(us)
        );
        assert_eq!(
            d(oid::TIMESTAMP, "1970-01-01 00:00:00"),
            ColumnValue::DateTime(0)
        );
        assert_eq!(d(oid::DATE, "2024-02-29"), ColumnValue::Date(day as i32));
        assert_eq!(
            d(oid::DATE, "0001-01-01 BC"),
            ColumnValue::Date(days_from_civil(0, 1, 1) as i32)
        );
        assert_eq!(d(oid::TIME, "01:02:03.5"), ColumnValue::Time(3_723_500_000));
        assert_eq!(
            d(oid::TIMESTAMPTZ, "infinity"),
            ColumnValue::Text("infinity".into())
        );
        assert_eq!(
            d(oid::DATE, "-infinity"),
            ColumnValue::Text("-infinity".into())
        );
        for bad in [
            "2024-13-01 00:00:00+00",
            "2024-02-29T01:02:03+00",
            "2024-02-29 01:02:03",
            "2024-02-29 01:02+00",
            "2024-02-29 01:02:03.1234567+00",
            "",
        ] {
            assert!(
                decode_text(oid::TIMESTAMPTZ, bad.as_bytes()).is_err(),
                "{bad}"
            );
        }
    }
}
