//! `table.expand.json.payload` as Debezium does it: Jackson-like parsing of the payload text,
//! `JsonSchemaData.toConnectSchema` (schema inference) and `toConnectData` (the struct
//! value), giving Connect data that the value converter then writes.
//!
//! Debezium (`EventRouterDelegate`) expands a payload that is a string starting with `{` or
//! `[`. When parsing or schema inference fails it logs a warning and keeps the string (and
//! its schema): [`Expansion::Unchanged`]. When inference succeeds but the document does not
//! become a struct of that schema (a top-level array, an integer beyond 64 bits, an array of
//! objects whose members differ in type), it keeps the string but with the inferred schema:
//! [`Expansion::SchemaOnly`], which JsonConverter then refuses (the Debezium task fails)
//! and StringConverter writes as the text.
//!
//! Inference: strings, booleans, int32 / int64 / double by Jackson's number kind (an integer
//! beyond 64 bits is a double schema whose value does not fit), objects as optional structs
//! named by their path (`payload`, `payload.o`), arrays by their first non-null element
//! (every element of the same JSON type, numbers of the same kind), arrays of objects by the
//! merged member set (one distinct element schema: that schema; several: merged, the merge
//! required — `SchemaUtil.copySchemaBasics` drops optionality), `null` and `[]` members
//! dropped (`table.json.payload.null.behavior=optional_bytes` keeps nulls as optional
//! bytes). Debezium merges distinct element schemas in `HashSet` order, which varies from
//! run to run; outboxd merges them in array order.

use crate::connect::{Schema, Type, Value};

use super::config::{JsonEmptyArrayBehavior, JsonNullBehavior};

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

const MAX_DEPTH: usize = 1000;

/// The outcome of expanding a payload.
#[derive(Debug, Clone, PartialEq)]
pub enum Expansion {
    /// The payload became a struct of this schema.
    Expanded {
        /// The inferred schema.
        schema: Schema,
        /// The struct.
        value: Value,
    },
    /// The schema was inferred but the document does not fit it: the payload stays a
    /// string, with this schema. Why (never quoting the payload).
    SchemaOnly {
        /// The inferred schema.
        schema: Schema,
        /// Why the document does not fit it.
        reason: String,
    },
    /// Not expanded; the payload stays as it is. Why (never quoting the payload).
    Unchanged {
        /// Why.
        reason: String,
    },
}

/// Expands `text` as `EventRouterDelegate` does, naming the top-level struct `field` (the
/// payload column's name, Debezium's schema key).
///
/// `empty_arrays` is outboxd's `table.json.payload.empty.array.behavior` (Debezium 3.6 drops
/// `[]` members, the default `ignore`; `optional_string` keeps them as arrays of strings).
pub fn expand(
    text: &str,
    field: &str,
    nulls: JsonNullBehavior,
    empty_arrays: JsonEmptyArrayBehavior,
) -> Expansion {
    if !(text.starts_with('{') || text.starts_with('[')) {
        return Expansion::Unchanged {
            reason: "the payload does not start with '{' or '['".into(),
        };
    }
    let node = match (Parser {
        b: text.as_bytes(),
        i: 0,
        depth: 0,
    })
    .value()
    {
        Ok(n) => n,
        Err(reason) => return Expansion::Unchanged { reason },
    };
    let inf = Infer {
        nulls,
        empty_arrays,
    };
    let schema = match inf.schema(Some(field), &node) {
        Ok(Some(s)) => s,
        Ok(None) => {
            return Expansion::Unchanged {
                reason: "the payload has no schema".into(),
            }
        }
        Err(reason) => return Expansion::Unchanged { reason },
    };
    if schema.ty != Type::Struct {
        return Expansion::SchemaOnly {
            schema,
            reason: "a top-level JSON array cannot become a Connect struct".into(),
        };
    }
    match to_struct(&node, &schema) {
        Ok(value) => Expansion::Expanded { schema, value },
        Err(reason) => Expansion::SchemaOnly { schema, reason },
    }
}

/// A logical decoding message's content as Debezium's `DecodeLogicalDecodingMessageContent`
/// makes it: `JsonSchemaData.toConnectSchema(null, content)` (a struct without name, nested
/// structs named by their field path) and `toConnectData`. Errors (never quoting the content)
/// where Debezium's transformation throws and its task fails.
pub fn message_struct(text: &str, nulls: JsonNullBehavior) -> Result<(Schema, Value), String> {
    if !(text.starts_with('{') || text.starts_with('[')) {
        return Err("the message content does not start with '{' or '['".into());
    }
    let node = Parser {
        b: text.as_bytes(),
        i: 0,
        depth: 0,
    }
    .value()?;
    let inf = Infer {
        nulls,
        empty_arrays: JsonEmptyArrayBehavior::Ignore,
    };
    let schema = inf
        .schema(None, &node)?
        .ok_or_else(|| "the message content has no schema".to_string())?;
    let value = to_struct(&node, &schema)?;
    Ok((schema, value))
}

struct Infer {
    nulls: JsonNullBehavior,
    empty_arrays: JsonEmptyArrayBehavior,
}

impl Infer {
    /// `JsonSchemaData.toConnectSchema(key, node)`; `Ok(None)` for a member to drop.
    fn schema(&self, key: Option<&str>, node: &Node) -> Result<Option<Schema>, String> {
        Ok(match node {
            Node::Str(_) => Some(Schema::optional(Type::String)),
            Node::Bool(_) => Some(Schema::optional(Type::Boolean)),
            Node::Num(n) => Some(Schema::optional(num_type(*n))),
            Node::Arr(items) if items.is_empty() => match self.empty_arrays {
                JsonEmptyArrayBehavior::Ignore => None,
                JsonEmptyArrayBehavior::OptionalString => {
                    Some(Schema::array(Schema::optional(Type::String)).with_optional(true))
                }
            },
            Node::Arr(items) => {
                Some(Schema::array(self.element_schema(key, items)?).with_optional(true))
            }
            Node::Obj(members) => {
                let mut s = Schema::structure(Vec::new()).with_optional(true);
                s.name = key.map(str::to_string);
                for (k, v) in members {
                    let field_key = match key {
                        Some(p) if !p.trim().is_empty() => format!("{p}.{k}"),
                        _ => k.clone(),
                    };
                    if let Some(fs) = self.schema(Some(&field_key), v)? {
                        if s.field(k).is_none() {
                            s.fields.push(crate::connect::Field {
                                name: k.clone(),
                                schema: std::sync::Arc::new(fs),
                            });
                        }
                    }
                }
                Some(s)
            }
            Node::Null => match self.nulls {
                JsonNullBehavior::OptionalBytes => Some(Schema::optional(Type::Bytes)),
                JsonNullBehavior::Ignore => None,
            },
        })
    }

    /// `toConnectSchemaWithCycles` + `getFirstArrayElement`.
    fn element_schema(&self, key: Option<&str>, items: &[Node]) -> Result<Schema, String> {
        let mut sample: Option<&Node> = None;
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
                if num_type(*a) != num_type(*b) {
                    return Err("an array mixes number types (int, long, double)".into());
                }
            }
        }
        match sample {
            Some(Node::Obj(_)) => {
                let mut distinct: Vec<Schema> = Vec::new();
                for e in items.iter().filter(|e| matches!(e, Node::Obj(_))) {
                    if let Some(s) = self.schema(key, e)? {
                        if !distinct.contains(&s) {
                            distinct.push(s);
                        }
                    }
                }
                let mut merged: Option<Schema> = None;
                for s in distinct {
                    merged = Some(match merged {
                        None => s,
                        Some(m) => merge(m, s),
                    });
                }
                merged.ok_or_else(|| "an array of objects has no schema".to_string())
            }
            Some(s) => self
                .schema(None, s)?
                .ok_or_else(|| "an array has an unrecognized member schema".to_string()),
            None => self
                .schema(None, &Node::Null)?
                .ok_or_else(|| "an array has an unrecognized member schema".to_string()),
        }
    }
}

/// The schema type of a number node: Jackson's int, long; anything else (doubles and
/// integers beyond 64 bits) a double.
fn num_type(n: Num) -> Type {
    match n {
        Num::Int(_) => Type::Int32,
        Num::Long(_) => Type::Int64,
        Num::Double(_) | Num::BigInteger => Type::Float64,
    }
}

/// `JsonSchemaData.mergeSchema`: left's basics (name, version, doc, parameters; not
/// optionality), left's fields, then right's new ones; a bytes field is replaced by a
/// non-bytes one of the same name.
fn merge(left: Schema, right: Schema) -> Schema {
    let mut out = Schema::structure(Vec::new());
    out.name = left.name.clone();
    out.version = left.version;
    out.doc = left.doc.clone();
    out.parameters = left.parameters.clone();
    out.fields = left.fields;
    for f in right.fields {
        match out.fields.iter_mut().find(|o| o.name == f.name) {
            None => out.fields.push(f),
            Some(old) => {
                if *old.schema != *f.schema
                    && old.schema.ty == Type::Bytes
                    && f.schema.ty != Type::Bytes
                {
                    *old = f;
                }
            }
        }
    }
    out
}

/// `toConnectData` with `Struct.put`'s validation.
fn to_struct(node: &Node, schema: &Schema) -> Result<Value, String> {
    let Node::Obj(members) = node else {
        return Err(format!(
            "a {} does not fit a struct schema",
            node.type_name()
        ));
    };
    let mut out = Vec::with_capacity(schema.fields.len());
    for f in &schema.fields {
        let v = match members.iter().find(|(k, _)| *k == f.name) {
            Some((_, v)) => field_value(v, &f.schema)?,
            None => Value::Null,
        };
        out.push((f.name.clone(), v));
    }
    Ok(Value::Struct(out))
}

/// `getStructFieldValue`, validated against `schema` (`ConnectSchema.validateValue`).
fn field_value(node: &Node, schema: &Schema) -> Result<Value, String> {
    let bad = || {
        Err(format!(
            "a {} value does not fit a {} field",
            node.type_name(),
            schema.ty.connect_name()
        ))
    };
    Ok(match (node, schema.ty) {
        (Node::Null, _) if schema.optional => Value::Null,
        (Node::Str(s), Type::String) => Value::String(s.clone()),
        (Node::Bool(b), Type::Boolean) => Value::Bool(*b),
        (Node::Num(Num::Int(i)), Type::Int32) => Value::Int(i64::from(*i)),
        (Node::Num(Num::Long(i)), Type::Int64) => Value::Int(*i),
        (Node::Num(Num::Double(d)), Type::Float64) => Value::Float64(*d),
        (Node::Arr(items), Type::Array) => {
            let elem = schema
                .items
                .as_deref()
                .ok_or("an array schema without items")?;
            let mut out = Vec::with_capacity(items.len());
            for e in items {
                out.push(field_value(e, elem)?);
            }
            Value::Array(out)
        }
        (Node::Obj(_), Type::Struct) => to_struct(node, schema)?,
        _ => return bad(),
    })
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::connect::{json, JsonOptions};

    fn ex(s: &str) -> Result<String, String> {
        match expand(
            s,
            "payload",
            JsonNullBehavior::Ignore,
            JsonEmptyArrayBehavior::Ignore,
        ) {
            Expansion::Expanded { schema, value } => Ok(String::from_utf8(
                json::serialize(
                    Some(&schema),
                    &value,
                    &JsonOptions {
                        schemas_enable: false,
                        ..JsonOptions::default()
                    },
                )
                .unwrap()
                .unwrap(),
            )
            .unwrap()),
            Expansion::SchemaOnly { reason, .. } => Err(format!("schema only: {reason}")),
            Expansion::Unchanged { reason } => Err(reason),
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
        // escapes as Jackson writes them; astral characters as surrogate pairs
        assert_eq!(
            ex("{\"s\":\"q\\\"\\u0001\\n\\/é😀\"}").unwrap(),
            "{\"s\":\"q\\\"\\u0001\\n/é\\uD83D\\uDE00\"}"
        );
        assert_eq!(ex(r#"{"d":1e400}"#).unwrap(), r#"{"d":"Infinity"}"#);
        let keep = expand(
            r#"{"a":null}"#,
            "payload",
            JsonNullBehavior::OptionalBytes,
            JsonEmptyArrayBehavior::Ignore,
        );
        assert!(matches!(keep, Expansion::Expanded { .. }));
    }

    #[test]
    fn schema_names_follow_the_path() {
        let Expansion::Expanded { schema, .. } = expand(
            r#"{"o":{"z":true},"l":[{"a":1},{"b":2}],"m":[{"a":1}]}"#,
            "payload",
            JsonNullBehavior::Ignore,
            JsonEmptyArrayBehavior::Ignore,
        ) else {
            panic!("not expanded")
        };
        assert_eq!(schema.name.as_deref(), Some("payload"));
        assert!(schema.optional);
        let o = schema.field("o").unwrap();
        assert_eq!(o.schema.name.as_deref(), Some("payload.o"));
        let l = schema.field("l").unwrap().schema.items.clone().unwrap();
        assert_eq!(l.name.as_deref(), Some("payload.l"));
        assert!(!l.optional, "a merged element struct is required");
        let m = schema.field("m").unwrap().schema.items.clone().unwrap();
        assert!(m.optional, "a single element schema keeps its optionality");
    }

    #[test]
    fn unchanged_or_schema_only_like_debezium() {
        for bad in [
            "",
            " {\"a\":1}",
            "\"str\"",
            "42",
            "{\"a\":",
            "{\"a\":01}",
            "{\"a\":[1,\"x\"]}",
            "{\"a\":[1,3000000000]}",
            "{\"a\":\"\\ud800\"}",
            "{\"a\":[null]}",
        ] {
            assert!(
                matches!(
                    expand(
                        bad,
                        "payload",
                        JsonNullBehavior::Ignore,
                        JsonEmptyArrayBehavior::Ignore
                    ),
                    Expansion::Unchanged { .. }
                ),
                "{bad:?} should stay unchanged"
            );
        }
        for fails in [
            "[1,2]",
            "{\"a\":123456789012345678901234567890}",
            "{\"a\":[{\"b\":1},{\"b\":\"x\"}]}",
        ] {
            assert!(
                matches!(
                    expand(
                        fails,
                        "payload",
                        JsonNullBehavior::Ignore,
                        JsonEmptyArrayBehavior::Ignore
                    ),
                    Expansion::SchemaOnly { .. }
                ),
                "{fails:?} should fail in the converter"
            );
        }
        let deep = "{\"a\":".repeat(2000);
        assert!(
            matches!(expand(&deep, "payload", JsonNullBehavior::Ignore, JsonEmptyArrayBehavior::Ignore), Expansion::Unchanged { reason } if reason.contains("nesting"))
        );
    }
}
