//! Connect values and the Java text forms converters write for them.

use std::fmt;

use num_bigint::{BigInt, Sign};

/// A Connect value. Which Java object it stands for is decided by its [`Schema`](super::Schema):
/// [`Value::Int`] is a `Byte`, `Short`, `Integer` or `Long` by the schema's type, and
/// [`Value::Date`] a `java.util.Date` of the `Date`, `Time` or `Timestamp` logical type.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// Java `null`.
    Null,
    /// `Boolean`.
    Bool(bool),
    /// `Byte`, `Short`, `Integer` or `Long`.
    Int(i64),
    /// `Float`.
    Float32(f32),
    /// `Double`.
    Float64(f64),
    /// `String`.
    String(String),
    /// `byte[]`.
    Bytes(Vec<u8>),
    /// `BigDecimal` (the `Decimal` logical type).
    Decimal(BigDecimal),
    /// `java.util.Date`: milliseconds since the Unix epoch (the `Date`, `Time` and
    /// `Timestamp` logical types).
    Date(i64),
    /// `List`.
    Array(Vec<Value>),
    /// `Map`, entries in order.
    Map(Vec<(Value, Value)>),
    /// `Struct`: field names and values in the schema's field order.
    Struct(Vec<(String, Value)>),
}

impl Value {
    /// True for `null`.
    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }

    /// A short description of the Java class this value is, for error messages
    /// (`java.lang.String`, ...).
    pub fn java_class(&self) -> &'static str {
        match self {
            Value::Null => "null",
            Value::Bool(_) => "java.lang.Boolean",
            Value::Int(_) => "java.lang.Long",
            Value::Float32(_) => "java.lang.Float",
            Value::Float64(_) => "java.lang.Double",
            Value::String(_) => "java.lang.String",
            Value::Bytes(_) => "[B",
            Value::Decimal(_) => "java.math.BigDecimal",
            Value::Date(_) => "java.util.Date",
            Value::Array(_) => "java.util.ArrayList",
            Value::Map(_) => "java.util.HashMap",
            Value::Struct(_) => "org.apache.kafka.connect.data.Struct",
        }
    }
}

/// `java.math.BigDecimal`: an arbitrary-precision unscaled integer and a scale
/// (value = unscaled × 10^-scale).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BigDecimal {
    /// The unscaled value.
    pub unscaled: BigInt,
    /// Digits after the decimal point (negative: trailing zeros before it).
    pub scale: i32,
}

impl BigDecimal {
    /// Parses plain decimal text (`-12.340`, `7`, `.5`, `1e3`, `1.5E-7`) as `new
    /// BigDecimal(String)` does: the scale is the number of fractional digits minus the
    /// exponent. `None` for anything else (`NaN`, `Infinity`, empty).
    pub fn parse(text: &str) -> Option<Self> {
        let t = text.trim();
        let (mantissa, exp) = match t.find(['e', 'E']) {
            Some(i) => (&t[..i], t[i + 1..].parse::<i64>().ok()?),
            None => (t, 0),
        };
        let (neg, digits) = match mantissa.as_bytes().first()? {
            b'-' => (true, &mantissa[1..]),
            b'+' => (false, &mantissa[1..]),
            _ => (false, mantissa),
        };
        let (int, frac) = digits.split_once('.').unwrap_or((digits, ""));
        if int.is_empty() && frac.is_empty() {
            return None;
        }
        if !int.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit()) {
            return None;
        }
        let all = format!("{int}{frac}");
        let mut unscaled = BigInt::parse_bytes(all.as_bytes(), 10)?;
        if neg {
            unscaled = -unscaled;
        }
        let scale = i64::try_from(frac.len()).ok()? - exp;
        Some(Self {
            unscaled,
            scale: i32::try_from(scale).ok()?,
        })
    }

    /// `BigInteger.toByteArray()` of the unscaled value: minimal two's-complement,
    /// big-endian (Connect's `Decimal.fromLogical`).
    pub fn unscaled_bytes(&self) -> Vec<u8> {
        self.unscaled.to_signed_bytes_be()
    }

    /// Builds a decimal from Connect's serialized form: two's-complement big-endian bytes
    /// of the unscaled value and a scale (`Decimal.toLogical`).
    pub fn from_unscaled_bytes(bytes: &[u8], scale: i32) -> Self {
        Self {
            unscaled: BigInt::from_signed_bytes_be(bytes),
            scale,
        }
    }

    /// `BigDecimal.toPlainString()`: no exponent.
    pub fn to_plain_string(&self) -> String {
        let (neg, digits) = self.sign_and_digits();
        let mut out = String::new();
        if neg {
            out.push('-');
        }
        if self.scale <= 0 {
            out.push_str(&digits);
            if digits != "0" || self.scale == 0 {
                out.extend(std::iter::repeat_n('0', self.scale.unsigned_abs() as usize));
            }
            return out;
        }
        let scale = self.scale as usize;
        if digits.len() > scale {
            out.push_str(&digits[..digits.len() - scale]);
            out.push('.');
            out.push_str(&digits[digits.len() - scale..]);
        } else {
            out.push_str("0.");
            out.extend(std::iter::repeat_n('0', scale - digits.len()));
            out.push_str(&digits);
        }
        out
    }

    fn sign_and_digits(&self) -> (bool, String) {
        let (sign, mag) = (self.unscaled.sign(), self.unscaled.magnitude());
        (sign == Sign::Minus, mag.to_str_radix(10))
    }
}

/// `BigDecimal.toString()`: plain notation when the scale is not negative and the adjusted
/// exponent is at least -6, else scientific (`1.23E+5`, `1E-7`).
impl fmt::Display for BigDecimal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (neg, digits) = self.sign_and_digits();
        let adjusted = -i64::from(self.scale) + (digits.len() as i64 - 1);
        if self.scale >= 0 && adjusted >= -6 {
            return f.write_str(&self.to_plain_string());
        }
        if neg {
            f.write_str("-")?;
        }
        f.write_str(&digits[..1])?;
        if digits.len() > 1 {
            f.write_str(".")?;
            f.write_str(&digits[1..])?;
        }
        f.write_str("E")?;
        if adjusted >= 0 {
            f.write_str("+")?;
        }
        write!(f, "{adjusted}")
    }
}

/// Java's `Double.toString`: plain notation with at least one fractional digit for
/// 1e-3 <= |d| < 1e7, else `d.dddE±n` (shortest digits that round-trip); `NaN`,
/// `Infinity`, `-Infinity`.
pub fn java_double(d: f64) -> String {
    if d.is_nan() {
        return "NaN".into();
    }
    if d.is_infinite() {
        return if d > 0.0 { "Infinity" } else { "-Infinity" }.into();
    }
    if d == 0.0 {
        return if d.is_sign_negative() { "-0.0" } else { "0.0" }.into();
    }
    let abs = d.abs();
    // Shortest round-trip digits; Java prints at least two significant digits, choosing the
    // two-digit decimal closest to the value (which differs from padding with 0 only for
    // the least precise subnormals, e.g. 4.9E-324).
    let mut sci = format!("{abs:e}");
    if !sci.contains('.') {
        let two = format!("{abs:.1e}");
        if two.parse::<f64>() == Ok(abs) {
            sci = two;
        }
    }
    java_form(d < 0.0, &sci, (1e-3..1e7).contains(&abs))
}

/// Java's `Float.toString` for a `float`: the same layout as [`java_double`], with the
/// shortest digits that round-trip as a 32-bit float.
pub fn java_float(f: f32) -> String {
    if f.is_nan() {
        return "NaN".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "Infinity" } else { "-Infinity" }.into();
    }
    if f == 0.0 {
        return if f.is_sign_negative() { "-0.0" } else { "0.0" }.into();
    }
    let abs = f.abs();
    let sci = format!("{abs:e}");
    java_form(f < 0.0, &sci, (1e-3..1e7).contains(&abs))
}

/// Lays out Rust's `{:e}` digits (`d.ddde±n`) as Java does.
fn java_form(negative: bool, sci: &str, plain: bool) -> String {
    let (mant, exp) = sci.split_once('e').unwrap_or((sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let mut digits: String = mant.chars().filter(|c| *c != '.').collect();
    while digits.len() > 1 && digits.ends_with('0') {
        digits.pop();
    }
    let mut out = String::new();
    if negative {
        out.push('-');
    }
    if plain {
        let point = exp + 1;
        if point <= 0 {
            out.push_str("0.");
            out.extend(std::iter::repeat_n('0', (-point) as usize));
            out.push_str(&digits);
        } else if point as usize >= digits.len() {
            out.push_str(&digits);
            out.extend(std::iter::repeat_n('0', point as usize - digits.len()));
            out.push_str(".0");
        } else {
            out.push_str(&digits[..point as usize]);
            out.push('.');
            out.push_str(&digits[point as usize..]);
        }
    } else {
        out.push_str(&digits[..1]);
        out.push('.');
        out.push_str(if digits.len() > 1 { &digits[1..] } else { "0" });
        out.push('E');
        out.push_str(&exp.to_string());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_doubles() {
        for (d, s) in [
            (1.0, "1.0"),
            (100.0, "100.0"),
            (0.001, "0.001"),
            (0.0001, "1.0E-4"),
            (1234567.0, "1234567.0"),
            (12345678.9, "1.23456789E7"),
            (1e7, "1.0E7"),
            (1e23, "1.0E23"),
            (-2.5, "-2.5"),
            (0.1, "0.1"),
            (39.98, "39.98"),
            (-0.0, "-0.0"),
            (5e-324, "4.9E-324"),
            (f64::INFINITY, "Infinity"),
        ] {
            assert_eq!(java_double(d), s, "{d}");
        }
    }

    #[test]
    fn java_floats() {
        for (f, s) in [
            (1.5f32, "1.5"),
            (0.1, "0.1"),
            (1.1, "1.1"),
            (3.4028235e38, "3.4028235E38"),
            (1e7, "1.0E7"),
            (-0.001, "-0.001"),
        ] {
            assert_eq!(java_float(f), s, "{f}");
        }
    }

    #[test]
    fn big_decimal_text_forms() {
        for (input, display, plain, scale) in [
            ("12345.67", "12345.67", "12345.67", 2),
            ("-12.340", "-12.340", "-12.340", 3),
            ("0.0000001", "1E-7", "0.0000001", 7),
            ("0.000001", "0.000001", "0.000001", 6),
            ("1E+3", "1E+3", "1000", -3),
            ("1.5E-7", "1.5E-7", "0.00000015", 8),
            ("7", "7", "7", 0),
            ("0", "0", "0", 0),
            ("-0.5", "-0.5", "-0.5", 1),
            (".5", "0.5", "0.5", 1),
        ] {
            let d = BigDecimal::parse(input).unwrap();
            assert_eq!(d.to_string(), display, "{input}");
            assert_eq!(d.to_plain_string(), plain, "{input}");
            assert_eq!(d.scale, scale, "{input}");
        }
        assert!(BigDecimal::parse("NaN").is_none());
        assert!(BigDecimal::parse("").is_none());
        assert!(BigDecimal::parse("-").is_none());
        assert!(BigDecimal::parse("1.2.3").is_none());
    }

    #[test]
    fn unscaled_bytes_are_javas() {
        // BigInteger.toByteArray(): minimal two's complement.
        for (text, bytes) in [
            ("1.50", vec![0x00, 0x96]),
            ("-1", vec![0xff]),
            ("127", vec![0x7f]),
            ("128", vec![0x00, 0x80]),
            ("0", vec![0x00]),
            ("12345.67", vec![0x12, 0xd6, 0x87]),
        ] {
            let d = BigDecimal::parse(text).unwrap();
            assert_eq!(d.unscaled_bytes(), bytes, "{text}");
            assert_eq!(BigDecimal::from_unscaled_bytes(&bytes, d.scale), d);
        }
    }
}
