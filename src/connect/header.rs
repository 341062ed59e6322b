//! `org.apache.kafka.connect.storage.SimpleHeaderConverter`, Kafka Connect's default
//! `header.converter`: a header value is `Values.convertToString(schema, value)` as UTF-8,
//! and a null value is a header without value.
//!
//! `Values.convertToString` writes, at the top level: numbers and booleans in Java's
//! `toString` form (`Float.toString`, `Double.toString`, `BigDecimal.toString`), strings as
//! they are, bytes as base64, lists as `[a,b]` and maps as `{k:v}` with embedded strings
//! quoted (only `\` and `"` escaped), structs as `{"field":value,...}`, and a
//! `java.util.Date` through `SimpleDateFormat` in the worker JVM's time zone (UTC here):
//! `HH:mm:ss.SSS'Z'` before 1970-01-02, `yyyy-MM-dd` on a day boundary, else
//! `yyyy-MM-dd'T'HH:mm:ss.SSS'Z'`.

use base64::Engine as _;

use super::data::{java_double, java_float, Value};

const MILLIS_PER_DAY: i64 = 86_400_000;

/// `SimpleHeaderConverter.fromConnectHeader`: `None` for a null value.
pub fn simple_header(value: &Value) -> Option<Vec<u8>> {
    if value.is_null() {
        return None;
    }
    let mut out = String::new();
    append(value, false, &mut out);
    Some(out.into_bytes())
}

/// `Values.convertToString(schema, value)`; `None` for a null value.
pub fn convert_to_string(value: &Value) -> Option<String> {
    if value.is_null() {
        return None;
    }
    let mut out = String::new();
    append(value, false, &mut out);
    Some(out)
}

/// `Values.append(sb, value, embedded)`.
fn append(value: &Value, embedded: bool, out: &mut String) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Int(i) => out.push_str(&i.to_string()),
        Value::Float32(f) => out.push_str(&java_float(*f)),
        Value::Float64(d) => out.push_str(&java_double(*d)),
        Value::Decimal(d) => out.push_str(&d.to_string()),
        Value::String(s) => {
            if embedded {
                out.push('"');
                for c in s.chars() {
                    if c == '\\' || c == '"' {
                        out.push('\\');
                    }
                    out.push(c);
                }
                out.push('"');
            } else {
                out.push_str(s);
            }
        }
        Value::Bytes(b) => {
            if embedded {
                out.push('"');
            }
            base64::engine::general_purpose::STANDARD.encode_string(b, out);
            if embedded {
                out.push('"');
            }
        }
        Value::Array(items) => {
            out.push('[');
            for (i, e) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                append(e, true, out);
            }
            out.push(']');
        }
        Value::Map(entries) => {
            out.push('{');
            for (i, (k, v)) in entries.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                append(k, true, out);
                out.push(':');
                append(v, true, out);
            }
            out.push('}');
        }
        Value::Struct(fields) => {
            out.push('{');
            for (i, (name, v)) in fields.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                append(&Value::String(name.clone()), true, out);
                out.push(':');
                append(v, true, out);
            }
            out.push('}');
        }
        Value::Date(ms) => out.push_str(&date_text(*ms)),
    }
}

/// `Values.dateFormatFor(date).format(date)` in UTC.
fn date_text(ms: i64) -> String {
    let days = ms.div_euclid(MILLIS_PER_DAY);
    let of_day = ms.rem_euclid(MILLIS_PER_DAY);
    let (h, m, s, milli) = (
        of_day / 3_600_000,
        of_day / 60_000 % 60,
        of_day / 1000 % 60,
        of_day % 1000,
    );
    let time = format!("{h:02}:{m:02}:{s:02}.{milli:03}Z");
    // Connect tests `getTime() < MILLIS_PER_DAY`: dates before 1970 print as a time too.
    if ms < MILLIS_PER_DAY {
        return time;
    }
    let (y, mo, d) = civil_from_days(days);
    let date = format!("{y:04}-{mo:02}-{d:02}");
    if of_day == 0 {
        date
    } else {
        format!("{date}T{time}")
    }
}

/// Days since 1970-01-01 to a proleptic Gregorian (year, month, day) (Howard Hinnant's
/// `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::connect::data::BigDecimal;

    fn h(v: Value) -> String {
        String::from_utf8(simple_header(&v).unwrap()).unwrap()
    }

    #[test]
    fn scalars_as_debezium_headers_show_them() {
        assert_eq!(h(Value::Int(1_796_221_327_468_343)), "1796221327468343");
        assert_eq!(h(Value::Bool(true)), "true");
        assert_eq!(h(Value::Float32(1.5)), "1.5");
        assert_eq!(h(Value::Float64(2.25)), "2.25");
        assert_eq!(h(Value::Bytes(vec![0xde, 0xad, 0xbe, 0xef])), "3q2+7w==");
        assert_eq!(
            h(Value::Decimal(BigDecimal::parse("1.50").unwrap())),
            "1.50"
        );
        assert_eq!(h(Value::String("hello 😀".into())), "hello 😀");
        assert!(simple_header(&Value::Null).is_none());
    }

    #[test]
    fn containers_quote_embedded_strings() {
        assert_eq!(
            h(Value::Array(vec![
                Value::String("a".into()),
                Value::String("b,c".into())
            ])),
            r#"["a","b,c"]"#
        );
        assert_eq!(h(Value::Array(vec![Value::Int(1), Value::Int(2)])), "[1,2]");
        assert_eq!(
            h(Value::Struct(vec![
                ("scale".into(), Value::Int(14)),
                ("value".into(), Value::Bytes(vec![1, 29, 185])),
            ])),
            r#"{"scale":14,"value":"AR25"}"#
        );
        assert_eq!(
            h(Value::Array(vec![
                Value::String("q\"\\".into()),
                Value::Null
            ])),
            r#"["q\"\\",null]"#
        );
    }

    #[test]
    fn dates_follow_simple_date_format() {
        assert_eq!(h(Value::Date(0)), "00:00:00.000Z");
        assert_eq!(h(Value::Date(51_727_468)), "14:22:07.468Z");
        assert_eq!(h(Value::Date(20_789 * MILLIS_PER_DAY)), "2026-12-02");
        // Before 1970-01-02 (negative too) Connect prints the time of day only.
        assert_eq!(h(Value::Date(-MILLIS_PER_DAY)), "00:00:00.000Z");
        assert_eq!(h(Value::Date(-14_182_940_000)), "20:17:40.000Z");
        assert_eq!(
            h(Value::Date(1_796_221_327_468)),
            "2026-12-02T14:22:07.468Z"
        );
    }
}
