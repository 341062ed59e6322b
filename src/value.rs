//! Typed column values, source-independent.
//!
//! Binlog row images (MySQL/MariaDB) and pgoutput tuples (PostgreSQL) are both turned into
//! [`ColumnValue`]s, so the router never sees source-specific encodings.

use std::borrow::Cow;
use std::fmt;

/// One column value of a row change.
///
/// Temporal values are normalised to microseconds so that the router can derive a Kafka
/// timestamp (milliseconds since the Unix epoch) from any of them.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum ColumnValue {
    /// SQL NULL.
    #[default]
    Null,
    /// Signed integer (TINYINT..BIGINT, int2/int4/int8).
    Int(i64),
    /// Unsigned integer (MySQL `UNSIGNED` columns, BIT, YEAR).
    UInt(u64),
    /// Floating point (FLOAT, DOUBLE, float4/float8).
    Float(f64),
    /// Exact decimal in its canonical text form (DECIMAL, numeric), e.g. `"-12.340"`.
    Decimal(String),
    /// Character data, already decoded to UTF-8 (CHAR, VARCHAR, TEXT, ENUM/SET labels, text).
    Text(String),
    /// Binary data (BINARY, VARBINARY, BLOB, bytea) or text in a charset we do not decode.
    Bytes(Vec<u8>),
    /// JSON document as JSON text (MySQL binary JSON converted to text, MariaDB's JSON alias of
    /// LONGTEXT, PostgreSQL json/jsonb).
    Json(String),
    /// A UUID in its canonical hyphenated lower-case form (PostgreSQL `uuid`).
    Uuid(String),
    /// A point in time with a zone: MySQL TIMESTAMP (stored in UTC), PostgreSQL timestamptz.
    /// Microseconds since 1970-01-01T00:00:00Z.
    Timestamp(i64),
    /// A wall-clock date-time without zone (MySQL DATETIME, PostgreSQL timestamp),
    /// read as UTC the way Debezium does. Microseconds since 1970-01-01T00:00:00.
    DateTime(i64),
    /// A calendar date: days since 1970-01-01.
    Date(i32),
    /// A time of day or duration (MySQL TIME may be negative or exceed 24h): microseconds.
    Time(i64),
    /// PostgreSQL `boolean`.
    Bool(bool),
}

impl ColumnValue {
    /// True for SQL NULL.
    pub fn is_null(&self) -> bool {
        matches!(self, ColumnValue::Null)
    }

    /// The value as text, used for Kafka keys, header values and topic routing
    /// (Debezium's EventRouter calls `toString()` on the field value).
    ///
    /// Returns `None` for NULL and for binary data that is not valid UTF-8.
    pub fn as_text(&self) -> Option<Cow<'_, str>> {
        match self {
            ColumnValue::Null => None,
            ColumnValue::Int(v) => Some(Cow::Owned(v.to_string())),
            ColumnValue::UInt(v) => Some(Cow::Owned(v.to_string())),
            ColumnValue::Float(v) => Some(Cow::Owned(v.to_string())),
            ColumnValue::Bool(v) => Some(Cow::Owned(v.to_string())),
            ColumnValue::Decimal(s)
            | ColumnValue::Text(s)
            | ColumnValue::Json(s)
            | ColumnValue::Uuid(s) => Some(Cow::Borrowed(s.as_str())),
            ColumnValue::Bytes(b) => std::str::from_utf8(b).ok().map(Cow::Borrowed),
            ColumnValue::Timestamp(_)
            | ColumnValue::DateTime(_)
            | ColumnValue::Date(_)
            | ColumnValue::Time(_) => Some(Cow::Owned(self.to_string())),
        }
    }

    /// The value's raw bytes for a Kafka record value (the outbox payload): JSON and text as
    /// their UTF-8 bytes, binary as is. `None` for NULL.
    pub fn as_payload_bytes(&self) -> Option<Cow<'_, [u8]>> {
        match self {
            ColumnValue::Null => None,
            ColumnValue::Bytes(b) => Some(Cow::Borrowed(b.as_slice())),
            ColumnValue::Json(s)
            | ColumnValue::Text(s)
            | ColumnValue::Decimal(s)
            | ColumnValue::Uuid(s) => Some(Cow::Borrowed(s.as_bytes())),
            other => other
                .as_text()
                .map(|t| Cow::Owned(t.into_owned().into_bytes())),
        }
    }

    /// [`as_payload_bytes`](Self::as_payload_bytes), taking the value: text and binary
    /// values hand over their buffer instead of copying it.
    pub fn into_payload_bytes(self) -> Option<Vec<u8>> {
        match self {
            ColumnValue::Bytes(b) => Some(b),
            ColumnValue::Json(s)
            | ColumnValue::Text(s)
            | ColumnValue::Decimal(s)
            | ColumnValue::Uuid(s) => Some(s.into_bytes()),
            other => other.as_payload_bytes().map(Cow::into_owned),
        }
    }

    /// Milliseconds since the Unix epoch, for `table.field.event.timestamp`.
    ///
    /// Temporal values convert directly; integers are taken as epoch milliseconds (Debezium's
    /// `int64` timestamp fields). Anything else gives `None`.
    pub fn as_epoch_millis(&self) -> Option<i64> {
        match self {
            ColumnValue::Timestamp(us) | ColumnValue::DateTime(us) => Some(us.div_euclid(1000)),
            ColumnValue::Date(days) => Some(i64::from(*days) * 86_400_000),
            ColumnValue::Int(v) => Some(*v),
            ColumnValue::UInt(v) => i64::try_from(*v).ok(),
            _ => None,
        }
    }
}

/// Formats temporal values in ISO-8601 (UTC, `Z` suffix for zoned values), others as text.
impl fmt::Display for ColumnValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ColumnValue::Null => f.write_str("NULL"),
            ColumnValue::Timestamp(us) => {
                write_datetime(f, *us)?;
                f.write_str("Z")
            }
            ColumnValue::DateTime(us) => write_datetime(f, *us),
            ColumnValue::Date(days) => {
                let (y, m, d) = civil_from_days(i64::from(*days));
                write!(f, "{y:04}-{m:02}-{d:02}")
            }
            ColumnValue::Time(us) => {
                let sign = if *us < 0 { "-" } else { "" };
                let a = us.unsigned_abs();
                let (h, rem) = (a / 3_600_000_000, a % 3_600_000_000);
                let (m, rem) = (rem / 60_000_000, rem % 60_000_000);
                let (s, frac) = (rem / 1_000_000, rem % 1_000_000);
                write!(f, "{sign}{h:02}:{m:02}:{s:02}")?;
                if frac != 0 {
                    write!(f, ".{frac:06}")?;
                }
                Ok(())
            }
            ColumnValue::Bytes(b) => match std::str::from_utf8(b) {
                Ok(s) => f.write_str(s),
                Err(_) => {
                    for byte in b {
                        write!(f, "{byte:02x}")?;
                    }
                    Ok(())
                }
            },
            other => match other.as_text() {
                Some(t) => f.write_str(&t),
                None => Ok(()),
            },
        }
    }
}

fn write_datetime(f: &mut fmt::Formatter<'_>, micros: i64) -> fmt::Result {
    let secs = micros.div_euclid(1_000_000);
    let frac = micros.rem_euclid(1_000_000);
    let days = secs.div_euclid(86_400);
    let sod = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    write!(
        f,
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}",
        sod / 3600,
        (sod % 3600) / 60,
        sod % 60
    )?;
    if frac != 0 {
        write!(f, ".{frac:06}")?;
    }
    Ok(())
}

/// Seconds since the Unix epoch as UTC in ISO-8601, `YYYY-MM-DDTHH:MM:SSZ` (for log lines
/// that say since when).
pub fn utc_seconds(secs: i64) -> String {
    ColumnValue::Timestamp(secs.saturating_mul(1_000_000)).to_string()
}

/// Days since 1970-01-01 to a proleptic Gregorian (year, month, day).
/// Howard Hinnant's `civil_from_days` algorithm.
pub fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// A proleptic Gregorian date to days since 1970-01-01 (inverse of [`civil_from_days`]).
pub fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = i64::from((m + 9) % 12);
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_round_trip() {
        for days in [-719_468_i64, -1, 0, 1, 19_000, 2_932_896] {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days);
        }
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(utc_seconds(0), "1970-01-01T00:00:00Z");
        assert_eq!(utc_seconds(1_764_650_096), "2025-12-02T04:34:56Z");
        assert_eq!(civil_from_days(19_723), (2024, 1, 1));
    }

    #[test]
    fn display_temporal() {
        let us = days_from_civil(2024, 2, 29) * 86_400_000_000 + 3_723_000_123;
        assert_eq!(
            ColumnValue::Timestamp(us).to_string(),
            "2024-02-29T01:02:03.000123Z"
        );
        assert_eq!(ColumnValue::DateTime(0).to_string(), "1970-01-01T00:00:00");
        assert_eq!(ColumnValue::Time(-3_723_000_000).to_string(), "-01:02:03");
        assert_eq!(ColumnValue::Timestamp(1_500).as_epoch_millis(), Some(1));
    }

    #[test]
    fn text_forms() {
        assert_eq!(ColumnValue::Int(-5).as_text().unwrap(), "-5");
        assert!(ColumnValue::Bytes(vec![0xff]).as_text().is_none());
        assert!(ColumnValue::Null.as_payload_bytes().is_none());
        assert_eq!(
            ColumnValue::Json("{\"a\":1}".into())
                .as_payload_bytes()
                .unwrap()
                .as_ref(),
            b"{\"a\":1}"
        );
    }
}
