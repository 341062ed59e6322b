//! Dates and times under `time.precision.mode` (Debezium `TemporalPrecisionMode`), and the
//! ISO-8601 texts of `ZonedTimestamp`, `ZonedTime`, `IsoDate`, `IsoTime`, `IsoTimestamp`.

use super::{MappingError, TimePrecision};
use crate::connect::{Schema, Type, Value};
use crate::value::civil_from_days;

const MICROS_PER_DAY: i64 = 86_400_000_000;

/// PostgreSQL's `infinity` / `-infinity` of a `timestamp` or `date` column, as Debezium's
/// PostgreSQL connector stands them in.
///
/// Debezium reads pgjdbc's sentinels `PGStatement.DATE_POSITIVE_INFINITY`
/// (`9223372036825200000`) and `DATE_NEGATIVE_INFINITY` (`-9223372036832400000`) — meant as
/// milliseconds — as microseconds since the epoch for a `timestamp`
/// (`PostgresValueConverter.POSITIVE_INFINITY_INSTANT`), and stands a `date`'s in by the
/// dates `-5877611-06-21` (`infinity`) and `-5877611-06-22` (`-infinity`)
/// (`POSITIVE_INFINITY_LOCAL_DATE`). Each `time.precision.mode` then converts that instant
/// or date as any other: a `MicroTimestamp` `infinity` is `9223372036825200000`, a
/// `Timestamp` (ms) `9223372036825200`, a `NanoTimestamp` `Long.MAX_VALUE`, an
/// `IsoTimestamp` `+294247-01-10T04:00:25.2Z`, a `Date` `-2147472692` days. (`timestamptz`
/// keeps the text `infinity`: its `ZonedTimestamp` is the string.)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PgInfinity {
    /// `infinity`.
    Positive,
    /// `-infinity`.
    Negative,
}

impl PgInfinity {
    /// `infinity` / `-infinity` as pgoutput sends them; `None` for any other text.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "infinity" => Some(Self::Positive),
            "-infinity" => Some(Self::Negative),
            _ => None,
        }
    }

    /// The timestamp Debezium stands in, in µs since the epoch.
    pub fn epoch_micros(self) -> i64 {
        match self {
            Self::Positive => 9_223_372_036_825_200_000,
            Self::Negative => -9_223_372_036_832_400_000,
        }
    }

    /// The date Debezium stands in, in days since 1970-01-01 (`-5877611-06-21` and
    /// `-5877611-06-22`: both infinities are dates before the epoch, the positive one first).
    pub fn epoch_days(self) -> i32 {
        match self {
            Self::Positive => -2_147_472_692,
            Self::Negative => -2_147_472_691,
        }
    }
}

fn named(ty: Type, name: &str) -> Schema {
    Schema::new(ty).named(name).with_version(1)
}

/// The schema of a DATE column.
pub fn date_schema(mode: TimePrecision) -> Schema {
    match mode {
        TimePrecision::Connect => named(Type::Int32, crate::connect::schema::DATE),
        TimePrecision::IsoString => named(Type::String, "io.debezium.time.IsoDate"),
        _ => named(Type::Int32, "io.debezium.time.Date"),
    }
}

/// The schema of a TIME(precision) column.
pub fn time_schema(mode: TimePrecision, precision: u32) -> Schema {
    match mode {
        TimePrecision::Adaptive if precision <= 3 => named(Type::Int32, "io.debezium.time.Time"),
        TimePrecision::Adaptive if precision <= 6 => {
            named(Type::Int64, "io.debezium.time.MicroTime")
        }
        TimePrecision::Adaptive | TimePrecision::Nanoseconds => {
            named(Type::Int64, "io.debezium.time.NanoTime")
        }
        TimePrecision::AdaptiveTimeMicroseconds | TimePrecision::Microseconds => {
            named(Type::Int64, "io.debezium.time.MicroTime")
        }
        TimePrecision::Connect => named(Type::Int32, crate::connect::schema::TIME),
        TimePrecision::IsoString => named(Type::String, "io.debezium.time.IsoTime"),
    }
}

/// The schema of a DATETIME(precision) / timestamp(precision) column.
pub fn timestamp_schema(mode: TimePrecision, precision: u32) -> Schema {
    match mode {
        TimePrecision::Adaptive | TimePrecision::AdaptiveTimeMicroseconds if precision <= 3 => {
            named(Type::Int64, "io.debezium.time.Timestamp")
        }
        TimePrecision::Adaptive | TimePrecision::AdaptiveTimeMicroseconds if precision <= 6 => {
            named(Type::Int64, "io.debezium.time.MicroTimestamp")
        }
        TimePrecision::Adaptive
        | TimePrecision::AdaptiveTimeMicroseconds
        | TimePrecision::Nanoseconds => named(Type::Int64, "io.debezium.time.NanoTimestamp"),
        TimePrecision::Microseconds => named(Type::Int64, "io.debezium.time.MicroTimestamp"),
        TimePrecision::Connect => named(Type::Int64, crate::connect::schema::TIMESTAMP),
        TimePrecision::IsoString => named(Type::String, "io.debezium.time.IsoTimestamp"),
    }
}

/// A DATE value (days since 1970-01-01).
pub fn date_value(mode: TimePrecision, days: i32) -> Value {
    let days = i64::from(days);
    match mode {
        TimePrecision::Connect => Value::Date(days * 86_400_000),
        TimePrecision::IsoString => Value::String(format!("{}Z", date_text(days))),
        _ => Value::Int(days),
    }
}

/// A TIME value (µs, possibly negative or beyond a day on MySQL).
pub fn time_value(mode: TimePrecision, precision: u32, us: i64) -> Result<Value, MappingError> {
    Ok(match time_schema(mode, precision).name.as_deref() {
        Some("io.debezium.time.Time") => Value::Int(us.div_euclid(1000)),
        Some("io.debezium.time.MicroTime") => Value::Int(us),
        Some("io.debezium.time.NanoTime") => Value::Int(us.saturating_mul(1000)),
        Some("io.debezium.time.IsoTime") => {
            // A MySQL TIME outside a day has no time of day: Debezium's conversion gives up
            // and writes null (seen with TIME '-838:59:59').
            if !(0..MICROS_PER_DAY).contains(&us) {
                return Ok(Value::Null);
            }
            Value::String(format!("{}Z", time_text(us, None)))
        }
        _ => {
            // Kafka Connect's Time holds a time of day: Debezium writes null for a MySQL
            // TIME outside one (seen with TIME '-838:59:59').
            if !(0..MICROS_PER_DAY).contains(&us) {
                return Ok(Value::Null);
            }
            Value::Date(us.div_euclid(1000))
        }
    })
}

/// A DATETIME / timestamp value (µs since the epoch, wall clock read as UTC).
pub fn timestamp_value(mode: TimePrecision, precision: u32, us: i64) -> Value {
    match timestamp_schema(mode, precision).name.as_deref() {
        Some("io.debezium.time.Timestamp") => Value::Int(us.div_euclid(1000)),
        Some("io.debezium.time.MicroTimestamp") => Value::Int(us),
        Some("io.debezium.time.NanoTimestamp") => Value::Int(us.saturating_mul(1000)),
        Some("io.debezium.time.IsoTimestamp") => {
            Value::String(format!("{}Z", date_time_text(us, None)))
        }
        _ => Value::Date(us.div_euclid(1000)),
    }
}

/// `ZonedTimestamp.toIsoString`: `yyyy-MM-ddTHH:mm:ss[.fraction]Z` in UTC; the fraction has
/// exactly `fixed` digits when given and above 0, else as few as the value needs.
pub fn zoned_timestamp(us: i64, fixed: Option<u32>) -> String {
    format!("{}Z", date_time_text(us, fixed.filter(|p| *p > 0)))
}

/// `ZonedTime` from PostgreSQL's `timetz` text (`14:22:07.5+02`, `01:02:03-05:30`): the time
/// at UTC (`OffsetTime.withOffsetSameInstant(UTC)`, wrapping around midnight) in ISO form.
pub fn zoned_time_from_text(t: &str) -> Option<String> {
    let split = t.rfind(['+', '-'])?;
    let (time, offset) = (&t[..split], &t[split..]);
    let us = parse_time_of_day(time)?;
    let sign = if offset.starts_with('-') { -1 } else { 1 };
    let mut parts = offset[1..].split(':');
    let oh: i64 = parts.next()?.parse().ok()?;
    let om: i64 = parts.next().map_or(Some(0), |m| m.parse().ok())?;
    let os: i64 = parts.next().map_or(Some(0), |s| s.parse().ok())?;
    let offset_us = sign * ((oh * 60 + om) * 60 + os) * 1_000_000;
    let utc = (us - offset_us).rem_euclid(MICROS_PER_DAY);
    Some(format!("{}Z", time_text(utc, None)))
}

/// `HH:MM:SS[.ffffff]` to µs of the day.
fn parse_time_of_day(t: &str) -> Option<i64> {
    let (hms, frac) = t.split_once('.').unwrap_or((t, ""));
    let mut p = hms.split(':');
    let h: i64 = p.next()?.parse().ok()?;
    let m: i64 = p.next()?.parse().ok()?;
    let s: i64 = p.next().map_or(Some(0), |s| s.parse().ok())?;
    if frac.len() > 6 || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let micros: i64 = if frac.is_empty() {
        0
    } else {
        format!("{frac:0<6}").parse().ok()?
    };
    Some(((h * 60 + m) * 60 + s) * 1_000_000 + micros)
}

/// `DateTimeFormatter.ISO_LOCAL_DATE`: the year has at least four digits, a `+` beyond
/// 9999 and a `-` before year 0.
fn date_text(days: i64) -> String {
    let (y, m, d) = civil_from_days(days);
    if y > 9999 {
        format!("+{y}-{m:02}-{d:02}")
    } else if y < 0 {
        format!("-{:04}-{m:02}-{d:02}", -y)
    } else {
        format!("{y:04}-{m:02}-{d:02}")
    }
}

/// `HH:mm:ss` plus the fraction: `fixed` digits, or as few as needed (Java's ISO formatter).
fn time_text(us_of_day: i64, fixed: Option<u32>) -> String {
    let secs = us_of_day.div_euclid(1_000_000);
    let frac = us_of_day.rem_euclid(1_000_000);
    let mut out = format!("{:02}:{:02}:{:02}", secs / 3600, secs / 60 % 60, secs % 60);
    match fixed {
        Some(p) => {
            let digits = format!("{frac:06}");
            let p = p as usize;
            out.push('.');
            if p <= 6 {
                out.push_str(&digits[..p]);
            } else {
                out.push_str(&digits);
                out.extend(std::iter::repeat_n('0', p - 6));
            }
        }
        None if frac != 0 => {
            let digits = format!("{frac:06}");
            out.push('.');
            out.push_str(digits.trim_end_matches('0'));
        }
        None => {}
    }
    out
}

fn date_time_text(us: i64, fixed: Option<u32>) -> String {
    let days = us.div_euclid(MICROS_PER_DAY);
    let of_day = us.rem_euclid(MICROS_PER_DAY);
    format!("{}T{}", date_text(days), time_text(of_day, fixed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zoned_texts() {
        let us = 1_796_221_327_468_343;
        assert_eq!(zoned_timestamp(us, Some(6)), "2026-12-02T14:22:07.468343Z");
        assert_eq!(
            zoned_timestamp(us - 468_343 + 500_000, None),
            "2026-12-02T14:22:07.5Z"
        );
        assert_eq!(
            zoned_timestamp(us - 468_343 + 100_000, Some(3)),
            "2026-12-02T14:22:07.100Z"
        );
        assert_eq!(
            zoned_timestamp(us - 468_343, Some(0)),
            "2026-12-02T14:22:07Z"
        );
        assert_eq!(
            zoned_time_from_text("14:22:07.5+02").unwrap(),
            "12:22:07.5Z"
        );
        assert_eq!(zoned_time_from_text("01:00:00-05:30").unwrap(), "06:30:00Z");
        assert_eq!(zoned_time_from_text("01:00:00+02").unwrap(), "23:00:00Z");
        assert!(zoned_time_from_text("nonsense").is_none());
    }

    #[test]
    fn adaptive_and_connect_values() {
        assert_eq!(
            time_value(TimePrecision::Adaptive, 3, 51_727_468_000).unwrap(),
            Value::Int(51_727_468)
        );
        assert_eq!(
            time_value(TimePrecision::Adaptive, 6, 51_727_468_343).unwrap(),
            Value::Int(51_727_468_343)
        );
        assert_eq!(
            time_value(TimePrecision::Connect, 6, -1).unwrap(),
            Value::Null
        );
        assert_eq!(
            time_value(TimePrecision::IsoString, 6, -1).unwrap(),
            Value::Null
        );
        assert_eq!(
            timestamp_value(TimePrecision::Connect, 6, 1_500),
            Value::Date(1)
        );
        assert_eq!(
            date_value(TimePrecision::IsoString, 20_789),
            Value::String("2026-12-02Z".into())
        );
    }
}
