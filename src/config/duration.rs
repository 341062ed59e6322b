//! Durations in outboxd's TOML: `"10s"`, `"500ms"`, `"2m"`, `"1h"`, or an integer number of
//! milliseconds.

use std::time::Duration;

/// Parses a duration written as an integer followed by a unit: `ms`, `s`, `m` or `h`
/// (`"500ms"`, `"10s"`, `"2m"`, `"1h"`). A bare integer string is milliseconds (`"1500"`).
///
/// Errors with a message naming the accepted forms.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let digits_end = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(digits_end);
    let bad = || {
        format!(
            "{text:?} is not a duration: write an integer with a unit, e.g. \"500ms\", \"10s\", \
             \"2m\", \"1h\", or an integer number of milliseconds"
        )
    };
    if num.is_empty() {
        return Err(bad());
    }
    let n: u64 = num.parse().map_err(|_| bad())?;
    let ms_per_unit: u64 = match unit.trim() {
        "" | "ms" => 1,
        "s" => 1_000,
        "m" | "min" => 60_000,
        "h" => 3_600_000,
        _ => return Err(bad()),
    };
    n.checked_mul(ms_per_unit)
        .map(Duration::from_millis)
        .ok_or_else(bad)
}

/// Serde helper: a duration as a string with unit or an integer of milliseconds.
pub(crate) fn deserialize<'de, D>(d: D) -> Result<Duration, D::Error>
where
    D: serde::Deserializer<'de>,
{
    struct V;
    impl serde::de::Visitor<'_> for V {
        type Value = Duration;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a duration such as \"10s\" or \"500ms\", or an integer of milliseconds")
        }
        fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Duration, E> {
            u64::try_from(v)
                .map(Duration::from_millis)
                .map_err(|_| E::custom("a duration cannot be negative"))
        }
        fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Duration, E> {
            Ok(Duration::from_millis(v))
        }
        fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Duration, E> {
            parse_duration(v).map_err(E::custom)
        }
    }
    d.deserialize_any(V)
}

/// Serde helper for `Option<Duration>` fields.
pub(crate) fn deserialize_opt<'de, D>(d: D) -> Result<Option<Duration>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    deserialize(d).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms() {
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("10s").unwrap(), Duration::from_secs(10));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("1h").unwrap(), Duration::from_secs(3600));
        assert_eq!(parse_duration("1500").unwrap(), Duration::from_millis(1500));
        for bad in ["", "s", "1.5s", "10 days", "-1s", "99999999999999999999h"] {
            let e = parse_duration(bad).unwrap_err();
            assert!(e.contains("not a duration"), "{bad}: {e}");
        }
    }
}
