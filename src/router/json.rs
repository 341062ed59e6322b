//! Debezium-compatible JSON: Jackson-like parsing, `JsonSchemaData` schema inference and
//! conversion, JsonConverter-like writing (`schemas.enable=false`), for
//! `table.expand.json.payload` and envelope placements.

use base64::Engine as _;

use super::config::{JsonEmptyArrayBehavior, JsonNullBehavior};
use crate::value::ColumnValue;

/// A JSON value to write, in the shape JsonConverter writes it.
#[derive(Debug, Clone, PartialEq)]
pub enum Out {
    /// `null`.
    Null,
    /// `true` / `false`.
    Bool(bool),
    /// An integer.
    Int(i128),
    /// A double, written in Java `Double.toString` form.
    Float(f64),
    /// A string.
    Str(String),
    /// An array.
    Arr(Vec<Out>),
    /// An object, members in order.
    Obj(Vec<(String, Out)>),
}

/// A parsed JSON number, classified as Jackson's `readTree` does.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Num {
    Int(i32),
    Long(i64),
    BigInteger,
    Double(f64),
}

#[derive(Debug, Clone, PartialEq)]
enum Node {
    Null,
    Bool(bool),
    Num(Num),
    Str(String),
    Arr(Vec<Node>),
    Obj(Vec<(String, Node)>),
}

impl Node {
    fn type_name(&self) -> &'static str {
        match self {
            Node::Null => "null",
            Node::Bool(_) => "boolean",
            Node::Num(_) => "number",
            Node::Str(_) => "string",
            Node::Arr(_) => "array",
            Node::Obj(_) => "object",
        }
    }
}

/// Connect schema types as `JsonSchemaData` infers them.
#[derive(Debug, Clone, PartialEq)]
enum Schema {
    Str,
    Bool,
    I32,
    I64,
    F64,
    OptBytes,
    Array(Box<Schema>),
    Struct(Vec<(String, Schema)>),
}

const MAX_DEPTH: usize = 1000;

/// Expands a payload as Debezium's `table.expand.json.payload` does and returns what
/// JsonConverter (`schemas.enable=false`) would write. Errors (with a reason that never
/// quotes the payload) where Debezium's expansion fails or would fail the task.
pub fn expand(
    text: &str,
    nulls: JsonNullBehavior,
    empty_arrays: JsonEmptyArrayBehavior,
) -> Result<Out, String> {
    if !text.starts_with('{') {
        return Err(if text.starts_with('[') {
            "a top-level JSON array cannot become a Connect struct".into()
        } else {
            "the payload does not start with '{'".into()
        });
    }
    let node = Parser {
        b: text.as_bytes(),
        i: 0,
        depth: 0,
    }
    .value()?;
    let inf = Infer {
        nulls,
        empty_arrays,
    };
    let schema = inf
        .schema(&node)?
        .ok_or_else(|| "the payload has no schema".to_string())?;
    convert(&node, &schema)
}

struct Infer {
    nulls: JsonNullBehavior,
    empty_arrays: JsonEmptyArrayBehavior,
}

impl Infer {
    /// `JsonSchemaData.toConnectSchema`.
    fn schema(&self, node: &Node) -> Result<Option<Schema>, String> {
        Ok(match node {
            Node::Str(_) => Some(Schema::Str),
            Node::Bool(_) => Some(Schema::Bool),
            Node::Num(n) => Some(num_schema(*n)?),
            Node::Arr(items) if items.is_empty() => match self.empty_arrays {
                JsonEmptyArrayBehavior::OptionalString => {
                    Some(Schema::Array(Box::new(Schema::Str)))
                }
                JsonEmptyArrayBehavior::Ignore => None,
            },
            Node::Arr(items) => Some(Schema::Array(Box::new(self.element_schema(items)?))),
            Node::Obj(members) => {
                let mut fields: Vec<(String, Schema)> = Vec::with_capacity(members.len());
                for (k, v) in members {
                    if let Some(s) = self.schema(v)? {
                        if !fields.iter().any(|(n, _)| n == k) {
                            fields.push((k.clone(), s));
                        }
                    }
                }
                Some(Schema::Struct(fields))
            }
            Node::Null => match self.nulls {
                JsonNullBehavior::OptionalBytes => Some(Schema::OptBytes),
                JsonNullBehavior::Ignore => None,
            },
        })
    }

    /// `toConnectSchemaWithCycles` + `getFirstArrayElement`: homogeneous arrays only;
    /// arrays of objects get the merged member set.
    fn element_schema(&self, items: &[Node]) -> Result<Schema, String> {
        let mut sample: Option<&Node> = None;
        let mut sample_num: Option<Schema> = None;
        for e in items {
            if matches!(e, Node::Null) {
                continue;
            }
            let s = *sample.get_or_insert(e);
            if s.type_name() != e.type_name() {
                return Err(format!(
                    "an array mixes {} and {} elements",
                    s.type_name(),
                    e.type_name()
                ));
            }
            if let (Node::Num(a), Node::Num(b)) = (s, e) {
                let ref_schema = match &sample_num {
                    Some(r) => r.clone(),
                    None => sample_num.insert(num_schema(*a)?).clone(),
                };
                if num_schema(*b)? != ref_schema {
                    return Err("an array mixes number types (int, long, double)".into());
                }
            }
        }
        match sample {
            Some(Node::Obj(_)) => {
                let mut merged: Option<Vec<(String, Schema)>> = None;
                for e in items.iter().filter(|e| matches!(e, Node::Obj(_))) {
                    if let Some(Schema::Struct(fields)) = self.schema(e)? {
                        merged = Some(match merged {
                            None => fields,
                            Some(m) => merge(m, fields),
                        });
                    }
                }
                merged
                    .map(Schema::Struct)
                    .ok_or_else(|| "an array of objects has no schema".to_string())
            }
            Some(s) => self
                .schema(s)?
                .ok_or_else(|| "an array has an unrecognized member schema".to_string()),
            None => self
                .schema(&Node::Null)?
                .ok_or_else(|| "an array has only null members".to_string()),
        }
    }
}

fn num_schema(n: Num) -> Result<Schema, String> {
    match n {
        Num::Int(_) => Ok(Schema::I32),
        Num::Long(_) => Ok(Schema::I64),
        Num::Double(_) => Ok(Schema::F64),
        Num::BigInteger => Err("an integer does not fit in 64 bits".into()),
    }
}

/// `JsonSchemaData.mergeSchema` on struct fields: left's fields, then right's new ones; a
/// bytes field is replaced by a non-bytes one of the same name.
fn merge(mut left: Vec<(String, Schema)>, right: Vec<(String, Schema)>) -> Vec<(String, Schema)> {
    for (name, s) in right {
        match left.iter_mut().find(|(n, _)| *n == name) {
            None => left.push((name, s)),
            Some((_, old)) => {
                if *old != s && *old == Schema::OptBytes {
                    *old = s;
                }
            }
        }
    }
    left
}

/// `toConnectData` + `Struct.put` validation + JsonConverter output.
fn convert(node: &Node, schema: &Schema) -> Result<Out, String> {
    if matches!(node, Node::Null) {
        return Ok(Out::Null);
    }
    let mismatch = || {
        Err(format!(
            "a {} value does not fit the schema inferred for it",
            node.type_name()
        ))
    };
    match (schema, node) {
        (Schema::Struct(fields), Node::Obj(members)) => {
            let mut out = Vec::with_capacity(fields.len());
            for (name, s) in fields {
                let v = match members.iter().find(|(k, _)| k == name) {
                    Some((_, v)) => convert(v, s)?,
                    None => Out::Null,
                };
                out.push((name.clone(), v));
            }
            Ok(Out::Obj(out))
        }
        (Schema::Array(elem), Node::Arr(items)) => items
            .iter()
            .map(|e| convert(e, elem))
            .collect::<Result<Vec<_>, _>>()
            .map(Out::Arr),
        (Schema::Str, Node::Str(s)) => Ok(Out::Str(s.clone())),
        (Schema::Bool, Node::Bool(b)) => Ok(Out::Bool(*b)),
        (Schema::I32, Node::Num(Num::Int(i))) => Ok(Out::Int(i128::from(*i))),
        (Schema::I64, Node::Num(Num::Long(i))) => Ok(Out::Int(i128::from(*i))),
        (Schema::F64, Node::Num(Num::Double(d))) => Ok(Out::Float(*d)),
        _ => mismatch(),
    }
}

/// Writes JSON as Jackson does: compact, `\uXXXX` escapes in upper-case hex for control
/// characters other than `\b \t \n \f \r`, doubles in Java form, infinities quoted.
pub fn write(v: &Out) -> Vec<u8> {
    let mut s = String::new();
    write_into(v, &mut s);
    s.into_bytes()
}

fn write_into(v: &Out, s: &mut String) {
    match v {
        Out::Null => s.push_str("null"),
        Out::Bool(b) => s.push_str(if *b { "true" } else { "false" }),
        Out::Int(i) => s.push_str(&i.to_string()),
        Out::Float(d) if d.is_infinite() => s.push_str(if *d > 0.0 {
            "\"Infinity\""
        } else {
            "\"-Infinity\""
        }),
        Out::Float(d) if d.is_nan() => s.push_str("\"NaN\""),
        Out::Float(d) => s.push_str(&java_double(*d)),
        Out::Str(t) => write_str(t, s),
        Out::Arr(items) => {
            s.push('[');
            for (i, e) in items.iter().enumerate() {
                if i > 0 {
                    s.push(',');
                }
                write_into(e, s);
            }
            s.push(']');
        }
        Out::Obj(members) => {
            s.push('{');
            for (i, (k, e)) in members.iter().enumerate() {
                if i > 0 {
                    s.push(',');
                }
                write_str(k, s);
                s.push(':');
                write_into(e, s);
            }
            s.push('}');
        }
    }
}

fn write_str(t: &str, s: &mut String) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    s.push('"');
    for c in t.chars() {
        match c {
            '"' => s.push_str("\\\""),
            '\\' => s.push_str("\\\\"),
            '\u{08}' => s.push_str("\\b"),
            '\t' => s.push_str("\\t"),
            '\n' => s.push_str("\\n"),
            '\u{0C}' => s.push_str("\\f"),
            '\r' => s.push_str("\\r"),
            c if (c as u32) < 0x20 => {
                let b = c as u32 as usize;
                s.push_str("\\u00");
                s.push(HEX[b >> 4] as char);
                s.push(HEX[b & 0xF] as char);
            }
            c => s.push(c),
        }
    }
    s.push('"');
}

/// Java's `Double.toString` (JDK 19+, shortest repr): plain notation with at least one
/// fractional digit for 1e-3 <= |d| < 1e7, else `d.dddE±n`.
pub fn java_double(d: f64) -> String {
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
    let (mant, exp) = sci.split_once('e').unwrap_or((sci.as_str(), "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let mut digits: String = mant.chars().filter(|c| *c != '.').collect();
    while digits.len() > 1 && digits.ends_with('0') {
        digits.pop();
    }
    let mut out = String::new();
    if d < 0.0 {
        out.push('-');
    }
    if (1e-3..1e7).contains(&abs) {
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

/// Strict RFC 8259 parser that reads the first value and ignores what follows it (Jackson
/// `readTree` without `FAIL_ON_TRAILING_TOKENS`). Duplicate object keys: the last value
/// wins at the first key's position (Jackson `ObjectNode`). Errors give a byte offset only.
struct Parser<'a> {
    b: &'a [u8],
    i: usize,
    depth: usize,
}

impl Parser<'_> {
    fn err<T>(&self, what: &str) -> Result<T, String> {
        Err(format!("invalid JSON at byte {}: {what}", self.i))
    }

    fn ws(&mut self) {
        while matches!(self.b.get(self.i), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.i += 1;
        }
    }

    fn value(&mut self) -> Result<Node, String> {
        self.ws();
        match self.b.get(self.i) {
            Some(b'{') => self.nested(Self::object),
            Some(b'[') => self.nested(Self::array),
            Some(b'"') => self.string().map(Node::Str),
            Some(b't') => self.literal("true", Node::Bool(true)),
            Some(b'f') => self.literal("false", Node::Bool(false)),
            Some(b'n') => self.literal("null", Node::Null),
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(_) => self.err("expected a value"),
            None => self.err("unexpected end of input"),
        }
    }

    fn nested(&mut self, f: fn(&mut Self) -> Result<Node, String>) -> Result<Node, String> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return self.err("nesting deeper than 1000 levels");
        }
        let r = f(self);
        self.depth -= 1;
        r
    }

    fn literal(&mut self, word: &str, node: Node) -> Result<Node, String> {
        if self.b[self.i..].starts_with(word.as_bytes()) {
            self.i += word.len();
            Ok(node)
        } else {
            self.err("unrecognized token")
        }
    }

    fn object(&mut self) -> Result<Node, String> {
        self.i += 1; // '{'
        let mut members: Vec<(String, Node)> = Vec::new();
        self.ws();
        if self.b.get(self.i) == Some(&b'}') {
            self.i += 1;
            return Ok(Node::Obj(members));
        }
        loop {
            self.ws();
            if self.b.get(self.i) != Some(&b'"') {
                return self.err("expected a member name");
            }
            let k = self.string()?;
            self.ws();
            if self.b.get(self.i) != Some(&b':') {
                return self.err("expected ':'");
            }
            self.i += 1;
            let v = self.value()?;
            match members.iter_mut().find(|(n, _)| *n == k) {
                Some((_, old)) => *old = v,
                None => members.push((k, v)),
            }
            self.ws();
            match self.b.get(self.i) {
                Some(b',') => self.i += 1,
                Some(b'}') => {
                    self.i += 1;
                    return Ok(Node::Obj(members));
                }
                _ => return self.err("expected ',' or '}'"),
            }
        }
    }

    fn array(&mut self) -> Result<Node, String> {
        self.i += 1; // '['
        let mut items = Vec::new();
        self.ws();
        if self.b.get(self.i) == Some(&b']') {
            self.i += 1;
            return Ok(Node::Arr(items));
        }
        loop {
            items.push(self.value()?);
            self.ws();
            match self.b.get(self.i) {
                Some(b',') => self.i += 1,
                Some(b']') => {
                    self.i += 1;
                    return Ok(Node::Arr(items));
                }
                _ => return self.err("expected ',' or ']'"),
            }
        }
    }

    fn hex4(&mut self) -> Result<u32, String> {
        let Some(h) = self.b.get(self.i..self.i + 4) else {
            return self.err("truncated \\u escape");
        };
        let s = std::str::from_utf8(h).map_err(|_| "invalid \\u escape".to_string())?;
        let v = u32::from_str_radix(s, 16);
        match v {
            Ok(v) if s.bytes().all(|c| c.is_ascii_hexdigit()) => {
                self.i += 4;
                Ok(v)
            }
            _ => self.err("invalid \\u escape"),
        }
    }

    fn string(&mut self) -> Result<String, String> {
        self.i += 1; // '"'
        let mut out = String::new();
        loop {
            let start = self.i;
            while let Some(&c) = self.b.get(self.i) {
                if c == b'"' || c == b'\\' || c < 0x20 {
                    break;
                }
                self.i += 1;
            }
            // The input is a &str and we stop only at ASCII bytes, so this slice is UTF-8.
            out.push_str(
                std::str::from_utf8(&self.b[start..self.i])
                    .map_err(|_| "invalid UTF-8".to_string())?,
            );
            match self.b.get(self.i) {
                Some(b'"') => {
                    self.i += 1;
                    return Ok(out);
                }
                Some(b'\\') => {
                    self.i += 1;
                    let Some(&e) = self.b.get(self.i) else {
                        return self.err("unterminated escape");
                    };
                    self.i += 1;
                    match e {
                        b'"' => out.push('"'),
                        b'\\' => out.push('\\'),
                        b'/' => out.push('/'),
                        b'b' => out.push('\u{08}'),
                        b'f' => out.push('\u{0C}'),
                        b'n' => out.push('\n'),
                        b'r' => out.push('\r'),
                        b't' => out.push('\t'),
                        b'u' => {
                            let hi = self.hex4()?;
                            let cp = if (0xD800..0xDC00).contains(&hi) {
                                if self.b.get(self.i..self.i + 2) != Some(b"\\u") {
                                    return self.err("unpaired surrogate");
                                }
                                self.i += 2;
                                let lo = self.hex4()?;
                                if !(0xDC00..0xE000).contains(&lo) {
                                    return self.err("unpaired surrogate");
                                }
                                0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00)
                            } else {
                                hi
                            };
                            match char::from_u32(cp) {
                                Some(c) => out.push(c),
                                None => return self.err("unpaired surrogate"),
                            }
                        }
                        _ => return self.err("invalid escape"),
                    }
                }
                Some(_) => return self.err("control character in a string"),
                None => return self.err("unterminated string"),
            }
        }
    }

    fn number(&mut self) -> Result<Node, String> {
        let start = self.i;
        if self.b.get(self.i) == Some(&b'-') {
            self.i += 1;
        }
        let int_start = self.i;
        let digits = |p: &mut Self| {
            let s = p.i;
            while matches!(p.b.get(p.i), Some(b'0'..=b'9')) {
                p.i += 1;
            }
            p.i - s
        };
        let n = digits(self);
        if n == 0 {
            return self.err("expected digits");
        }
        if n > 1 && self.b[int_start] == b'0' {
            return self.err("leading zeroes are not allowed");
        }
        let mut integral = true;
        if self.b.get(self.i) == Some(&b'.') {
            self.i += 1;
            integral = false;
            if digits(self) == 0 {
                return self.err("expected digits after '.'");
            }
        }
        if matches!(self.b.get(self.i), Some(b'e' | b'E')) {
            self.i += 1;
            integral = false;
            if matches!(self.b.get(self.i), Some(b'+' | b'-')) {
                self.i += 1;
            }
            if digits(self) == 0 {
                return self.err("expected exponent digits");
            }
        }
        let text = std::str::from_utf8(&self.b[start..self.i])
            .map_err(|_| "invalid number".to_string())?;
        let num = if integral {
            match text.parse::<i64>() {
                Ok(v) => match i32::try_from(v) {
                    Ok(i) => Num::Int(i),
                    Err(_) => Num::Long(v),
                },
                Err(_) => Num::BigInteger,
            }
        } else {
            Num::Double(
                text.parse::<f64>()
                    .map_err(|_| "invalid number".to_string())?,
            )
        };
        Ok(Node::Num(num))
    }
}

/// The payload inside an envelope when it is not expanded: a JSON string of its text (what
/// JsonConverter writes for a string field); non-UTF-8 binary as base64 (JsonConverter's bytes).
pub(crate) fn payload_json(v: &ColumnValue) -> Out {
    match v {
        ColumnValue::Null => Out::Null,
        ColumnValue::Bytes(b) => match std::str::from_utf8(b) {
            Ok(s) => Out::Str(s.to_string()),
            Err(_) => Out::Str(base64::engine::general_purpose::STANDARD.encode(b)),
        },
        other => match other.as_text() {
            Some(t) => Out::Str(t.into_owned()),
            None => Out::Null,
        },
    }
}

/// A column as an envelope field, in the JSON Debezium's default column mapping produces with
/// JsonConverter (`schemas.enable=false`): integers and booleans as JSON numbers/booleans,
/// floats in Java form, text/JSON/UUID/decimal as strings (decimals as with
/// `decimal.handling.mode=string`), binary as base64, zoned timestamps as ISO-8601 strings
/// (`ZonedTimestamp`), DATETIME / timestamp as epoch milliseconds (`Timestamp`), dates as days
/// since the epoch (`Date`), times as microseconds (`MicroTime`).
pub fn column_json(v: &ColumnValue) -> Out {
    match v {
        ColumnValue::Null => Out::Null,
        ColumnValue::Int(i) => Out::Int(i128::from(*i)),
        ColumnValue::UInt(u) => Out::Int(i128::from(*u)),
        ColumnValue::Float(f) => Out::Float(*f),
        ColumnValue::Bool(b) => Out::Bool(*b),
        ColumnValue::Decimal(s)
        | ColumnValue::Text(s)
        | ColumnValue::Json(s)
        | ColumnValue::Uuid(s) => Out::Str(s.clone()),
        ColumnValue::Bytes(b) => Out::Str(base64::engine::general_purpose::STANDARD.encode(b)),
        ColumnValue::Timestamp(_) => Out::Str(v.to_string()),
        ColumnValue::DateTime(us) => Out::Int(i128::from(us.div_euclid(1000))),
        ColumnValue::Date(d) => Out::Int(i128::from(*d)),
        ColumnValue::Time(us) => Out::Int(i128::from(*us)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ex(s: &str) -> Result<String, String> {
        expand(s, JsonNullBehavior::Ignore, JsonEmptyArrayBehavior::Ignore)
            .map(|o| String::from_utf8(write(&o)).unwrap())
    }

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
        ] {
            assert_eq!(java_double(d), s, "{d}");
        }
    }

    #[test]
    fn expansion_like_debezium() {
        assert_eq!(ex(r#"{"a": 1, "b": "x"}"#).unwrap(), r#"{"a":1,"b":"x"}"#);
        // null and [] members dropped by default
        assert_eq!(ex(r#"{"a":null,"b":[],"c":{}}"#).unwrap(), r#"{"c":{}}"#);
        // doubles in Java form, longs kept
        assert_eq!(
            ex(r#"{"p":39.98,"big":3000000000,"e":1e2,"x":1.5e10}"#).unwrap(),
            r#"{"p":39.98,"big":3000000000,"e":100.0,"x":1.5E10}"#
        );
        // arrays of objects: merged members, missing ones null
        assert_eq!(
            ex(r#"{"l":[{"a":1},{"b":"x"}]}"#).unwrap(),
            r#"{"l":[{"a":1,"b":null},{"a":null,"b":"x"}]}"#
        );
        // trailing text ignored, duplicate keys: last wins in first position
        assert_eq!(
            ex(r#"{"a":1,"b":2,"a":3} trailing"#).unwrap(),
            r#"{"a":3,"b":2}"#
        );
        // escapes as Jackson writes them; non-ASCII raw
        assert_eq!(
            ex("{\"s\":\"q\\\"\\u0001\\n\\/é😀\"}").unwrap(),
            "{\"s\":\"q\\\"\\u0001\\n/é😀\"}"
        );
        let keep = expand(
            r#"{"a":null,"b":[]}"#,
            JsonNullBehavior::OptionalBytes,
            JsonEmptyArrayBehavior::OptionalString,
        )
        .unwrap();
        assert_eq!(write(&keep), br#"{"a":null,"b":[]}"#);
    }

    #[test]
    fn expansion_failures() {
        for bad in [
            "",
            " {\"a\":1}",
            "\"str\"",
            "[1,2]",
            "{\"a\":",
            "{\"a\":01}",
            "{\"a\":[1,\"x\"]}",
            "{\"a\":[1,3000000000]}",
            "{\"a\":[{\"b\":1},{\"b\":\"x\"}]}",
            "{\"a\":123456789012345678901234567890}",
            "{\"a\":\"\\ud800\"}",
            "{\"a\":[null]}",
        ] {
            assert!(ex(bad).is_err(), "{bad:?} should not expand");
        }
        let deep = "{\"a\":".repeat(2000);
        assert!(ex(&deep).unwrap_err().contains("nesting"));
    }
}
