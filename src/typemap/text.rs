//! PostgreSQL text output forms the type mapping reads itself: `interval` (IntervalStyle
//! `postgres`), `money`, and one-dimensional arrays.

use super::{MappingError, SqlType};
use crate::value::ColumnValue;

/// An interval's fields as the PostgreSQL JDBC driver's `PGInterval` holds them: years,
/// months, days, and a signed time part.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Interval {
    years: i32,
    months: i32,
    days: i32,
    hours: i32,
    minutes: i32,
    /// Seconds with their fraction, signed like the time part.
    seconds: f64,
}

impl Interval {
    /// Parses `1 year 2 mons 3 days 04:05:06.789`, `-1 days +02:00:00`, `00:00:00.5`,
    /// `-00:00:01`, `3 days`. `None` for anything else.
    pub fn parse(text: &str) -> Option<Self> {
        let mut iv = Interval {
            years: 0,
            months: 0,
            days: 0,
            hours: 0,
            minutes: 0,
            seconds: 0.0,
        };
        let tokens: Vec<&str> = text.split_whitespace().collect();
        let mut i = 0;
        while i < tokens.len() {
            let t = tokens[i];
            if t.contains(':') {
                let neg = t.starts_with('-');
                let body = t.trim_start_matches(['-', '+']);
                let mut parts = body.split(':');
                let h: i32 = parts.next()?.parse().ok()?;
                let m: i32 = parts.next()?.parse().ok()?;
                let s: f64 = parts.next().map_or(Some(0.0), |s| s.parse().ok())?;
                let sign = if neg { -1 } else { 1 };
                iv.hours = sign * h;
                iv.minutes = sign * m;
                iv.seconds = f64::from(sign) * s;
                i += 1;
                continue;
            }
            let n: i32 = t.parse().ok()?;
            let unit = tokens.get(i + 1)?;
            match unit.trim_end_matches('s') {
                "year" => iv.years = n,
                "mon" => iv.months = n,
                "day" => iv.days = n,
                _ => return None,
            }
            i += 2;
        }
        Some(iv)
    }

    /// `MicroDuration.durationMicros` with 365.25 / 12 days a month, in Java's double
    /// arithmetic.
    pub fn micro_duration(&self) -> i64 {
        let days_per_month = 365.25 / 12.0_f64;
        let number_of_days =
            f64::from(self.years * 12 + self.months) * days_per_month + f64::from(self.days);
        let seconds = ((number_of_days * 24.0 + f64::from(self.hours)) * 60.0
            + f64::from(self.minutes))
            * 60.0
            + self.seconds;
        (seconds * 1e6) as i64
    }

    /// `io.debezium.time.Interval.toIsoString`: `P<y>Y<m>M<d>DT<h>H<m>M<s>S`, seconds as
    /// `BigDecimal.valueOf(double).stripTrailingZeros().toPlainString()`.
    pub fn iso8601(&self) -> String {
        let secs = crate::connect::data::java_double(self.seconds);
        let secs = crate::connect::BigDecimal::parse(&secs)
            .map(|d| {
                let mut p = d.to_plain_string();
                if p.contains('.') {
                    p = p.trim_end_matches('0').trim_end_matches('.').to_string();
                }
                if p == "-0" {
                    p = "0".into();
                }
                p
            })
            .unwrap_or_else(|| "0".into());
        format!(
            "P{}Y{}M{}DT{}H{}M{}S",
            self.years, self.months, self.days, self.hours, self.minutes, secs
        )
    }
}

/// The number in a `money` text (`$1,234.56`, `-$12.34`, `12.34`): digits, sign and point.
pub fn money_digits(text: &str) -> String {
    let neg = text.contains('-') || (text.starts_with('(') && text.ends_with(')'));
    let mut out: String = text
        .chars()
        .filter(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    if neg {
        out.insert(0, '-');
    }
    out
}

/// A PostgreSQL array literal (`{a,"b,c",NULL}`) into its top-level elements (`None` for
/// NULL). A multi-dimensional array's elements are sub-arrays, each `None`: Debezium's
/// PostgreSQL connector writes them as nulls (`{{1,2},{3,4}}` → `[null,null]`, observed with
/// 3.6.1). `None` for anything else (explicit bounds `[1:2]={...}`, bad quoting or nesting).
pub fn parse_array(text: &str) -> Option<Vec<Option<String>>> {
    let inner = text.strip_prefix('{')?.strip_suffix('}')?;
    let mut items = Vec::new();
    if inner.is_empty() {
        return Some(items);
    }
    let b = inner.as_bytes();
    let mut i = 0;
    loop {
        if b.get(i) == Some(&b'{') {
            i = skip_sub_array(b, i)?;
            items.push(None);
        } else if b.get(i) == Some(&b'"') {
            i += 1;
            let mut s = Vec::new();
            loop {
                match b.get(i)? {
                    b'\\' => {
                        s.push(*b.get(i + 1)?);
                        i += 2;
                    }
                    b'"' => {
                        i += 1;
                        break;
                    }
                    c => {
                        s.push(*c);
                        i += 1;
                    }
                }
            }
            items.push(Some(String::from_utf8(s).ok()?));
        } else {
            let start = i;
            while i < b.len() && b[i] != b',' {
                i += 1;
            }
            let raw = inner[start..i].trim();
            items.push(if raw.eq_ignore_ascii_case("NULL") {
                None
            } else {
                Some(raw.to_string())
            });
        }
        match b.get(i) {
            None => return Some(items),
            Some(b',') => i += 1,
            Some(_) => return None,
        }
    }
}

/// The index just after the sub-array that opens at `b[start]` (`{`), quotes and nesting
/// respected; `None` when it does not close.
fn skip_sub_array(b: &[u8], start: usize) -> Option<usize> {
    let mut depth = 0usize;
    let mut i = start;
    let mut quoted = false;
    loop {
        match (*b.get(i)?, quoted) {
            (b'\\', true) => i += 1,
            (b'"', _) => quoted = !quoted,
            (b'{', false) => depth += 1,
            (b'}', false) => {
                depth -= 1;
                if depth == 0 {
                    return Some(i + 1);
                }
            }
            _ => {}
        }
        i += 1;
    }
}

/// One array element's text as the [`ColumnValue`] its element type's column would carry.
pub fn element_value(elem: &SqlType, text: String) -> Result<ColumnValue, MappingError> {
    let bad = || MappingError(format!("an array element does not parse as {elem:?}"));
    Ok(match elem {
        SqlType::Integer { .. } => ColumnValue::Int(text.parse().map_err(|_| bad())?),
        SqlType::Float32 | SqlType::Float64 | SqlType::Float32AsDouble => match text.as_str() {
            "NaN" => ColumnValue::Float(f64::NAN),
            "Infinity" => ColumnValue::Float(f64::INFINITY),
            "-Infinity" => ColumnValue::Float(f64::NEG_INFINITY),
            t => ColumnValue::Float(t.parse().map_err(|_| bad())?),
        },
        SqlType::Decimal { .. } | SqlType::Money => ColumnValue::Decimal(text),
        SqlType::Boolean => ColumnValue::Bool(text == "t" || text == "true"),
        SqlType::Text | SqlType::Enum(_) => ColumnValue::Text(text),
        SqlType::Uuid => ColumnValue::Uuid(text),
        SqlType::Json => ColumnValue::Json(text),
        _ => {
            return Err(MappingError(format!(
                "arrays of {elem:?} are not mapped by outboxd; place only arrays of numbers, \
                 booleans, text, uuid or json"
            )))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_like_pginterval() {
        let iv = Interval::parse("1 year 2 mons 3 days 04:05:06.789").unwrap();
        assert_eq!(iv.micro_duration(), 37_091_106_789_000);
        assert_eq!(iv.iso8601(), "P1Y2M3DT4H5M6.789S");
        let neg = Interval::parse("-1 days +02:00:00").unwrap();
        assert_eq!(neg.micro_duration(), -79_200_000_000);
        assert_eq!(
            Interval::parse("-00:00:01.5").unwrap().iso8601(),
            "P0Y0M0DT0H0M-1.5S"
        );
        assert_eq!(
            Interval::parse("3 days").unwrap().iso8601(),
            "P0Y0M3DT0H0M0S"
        );
        assert!(Interval::parse("P1D").is_none());
    }

    #[test]
    fn arrays_and_money() {
        assert_eq!(
            parse_array(r#"{a,"b,c",NULL,"q\"x"}"#).unwrap(),
            vec![
                Some("a".into()),
                Some("b,c".into()),
                None,
                Some("q\"x".into())
            ]
        );
        assert_eq!(parse_array("{}").unwrap(), Vec::<Option<String>>::new());
        // Sub-arrays are nulls, as Debezium writes them.
        assert_eq!(parse_array("{{1,2},{3,4}}").unwrap(), vec![None, None]);
        assert_eq!(
            parse_array(r#"{{"a}",b},{NULL,"c\"{"}}"#).unwrap(),
            vec![None, None]
        );
        assert!(parse_array("{{1,2},{3,4}").is_none());
        assert!(parse_array("{{1,2}x}").is_none());
        assert!(parse_array("[1:2]={1,2}").is_none());
        assert_eq!(money_digits("$1,234.56"), "1234.56");
        assert_eq!(money_digits("-$12.34"), "-12.34");
    }
}
