//! `org.apache.kafka.connect.json.JsonConverter` (`fromConnectData`) and the JSON text its
//! Jackson serializer writes.
//!
//! - With `schemas.enable=true` (the converter's default) the bytes are the envelope
//!   `{"schema":<schema>,"payload":<value>}`; with `false`, the value alone.
//! - A schema is written as `asJsonSchema` writes it: `type`, then `items` / `keys`+`values` /
//!   `fields` (each field's schema followed by `"field":<name>`), then `optional`, `name`,
//!   `version`, `doc`, `parameters`, `default`.
//! - Values: integers as JSON numbers; `float` and `double` in Java's `Float.toString` /
//!   `Double.toString` form (`NaN` and the infinities as strings, Jackson's
//!   `WRITE_NAN_AS_STRINGS`); bytes as base64 strings; `Decimal` as base64 of the unscaled
//!   two's-complement bytes (`decimal.format=BASE64`, the default) or as a JSON number in
//!   `BigDecimal.toString()` form (`NUMERIC`); `Date`/`Time`/`Timestamp` as int days / int
//!   milliseconds of the day / long milliseconds; a null value with a schema default is the
//!   default when `replace.null.with.default` is on (its default).
//! - Strings as Jackson's `UTF8JsonGenerator` writes them: `"` and `\` escaped, control
//!   characters as `\b \t \n \f \r` or `\u00XX` (upper-case hex), characters outside the
//!   Basic Multilingual Plane as their UTF-16 surrogate pair escapes (`\uD83D\uDE00`, as
//!   Jackson does unless `COMBINE_UNICODE_SURROGATES_IN_UTF8` is on), everything else raw
//!   UTF-8.
//!
//! Where JsonConverter throws a `DataException` (a value that does not fit its schema, a
//! required field that is null), [`serialize`] returns a [`ConvertError`].

use base64::Engine as _;

use super::converter::{ConvertError, DecimalFormat, JsonOptions};
use super::data::{java_double, java_float, Value};
use super::schema::{Logical, Schema, Type};

const MILLIS_PER_DAY: i64 = 86_400_000;

/// `JsonConverter.fromConnectData(topic, schema, value)`: `Ok(None)` (no bytes: a
/// tombstone or a null header) when both schema and value are null.
///
/// Errors where JsonConverter throws: a value of another Java type than its schema's, a null
/// for a required schema without default, a `Date`/`Time` not on a day boundary.
pub fn serialize(
    schema: Option<&Schema>,
    value: &Value,
    opts: &JsonOptions,
) -> Result<Option<Vec<u8>>, ConvertError> {
    if schema.is_none() && value.is_null() {
        return Ok(None);
    }
    let mut out = String::new();
    if opts.schemas_enable {
        out.push_str("{\"schema\":");
        match schema {
            Some(s) => write_schema(s, opts, &mut out)?,
            None => out.push_str("null"),
        }
        out.push_str(",\"payload\":");
        write_value(schema, value, opts, &mut out)?;
        out.push('}');
    } else {
        write_value(schema, value, opts, &mut out)?;
    }
    Ok(Some(out.into_bytes()))
}

/// Writes `asJsonSchema(schema)`.
pub fn write_schema(
    schema: &Schema,
    opts: &JsonOptions,
    out: &mut String,
) -> Result<(), ConvertError> {
    out.push_str("{\"type\":\"");
    out.push_str(schema.ty.json_name());
    out.push('"');
    match schema.ty {
        Type::Array => {
            out.push_str(",\"items\":");
            write_child(schema.items.as_deref(), opts, out)?;
        }
        Type::Map => {
            out.push_str(",\"keys\":");
            write_child(schema.keys.as_deref(), opts, out)?;
            out.push_str(",\"values\":");
            write_child(schema.items.as_deref(), opts, out)?;
        }
        Type::Struct => {
            out.push_str(",\"fields\":[");
            for (i, f) in schema.fields.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_schema(&f.schema, opts, out)?;
                // `"field":<name>` goes after the field schema's own members.
                out.pop();
                out.push_str(",\"field\":");
                write_str(&f.name, out);
                out.push('}');
            }
            out.push(']');
        }
        _ => {}
    }
    out.push_str(",\"optional\":");
    out.push_str(if schema.optional { "true" } else { "false" });
    if let Some(name) = &schema.name {
        out.push_str(",\"name\":");
        write_str(name, out);
    }
    if let Some(v) = schema.version {
        out.push_str(",\"version\":");
        out.push_str(&v.to_string());
    }
    if let Some(doc) = &schema.doc {
        out.push_str(",\"doc\":");
        write_str(doc, out);
    }
    if !schema.parameters.is_empty() {
        out.push_str(",\"parameters\":{");
        for (i, (k, v)) in schema.parameters.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            write_str(k, out);
            out.push(':');
            write_str(v, out);
        }
        out.push('}');
    }
    if let Some(d) = &schema.default {
        out.push_str(",\"default\":");
        write_value(Some(schema), d, opts, out)?;
    }
    out.push('}');
    Ok(())
}

fn write_child(
    s: Option<&Schema>,
    opts: &JsonOptions,
    out: &mut String,
) -> Result<(), ConvertError> {
    match s {
        Some(s) => write_schema(s, opts, out),
        None => {
            out.push_str("null");
            Ok(())
        }
    }
}

/// Writes `convertToJson(schema, value)`.
pub fn write_value(
    schema: Option<&Schema>,
    value: &Value,
    opts: &JsonOptions,
    out: &mut String,
) -> Result<(), ConvertError> {
    let Some(schema) = schema else {
        return write_schemaless(value, out);
    };
    if value.is_null() {
        if let (Some(d), true) = (&schema.default, opts.replace_null_with_default) {
            return write_value(Some(schema), d, opts, out);
        }
        if schema.optional {
            out.push_str("null");
            return Ok(());
        }
        return Err(ConvertError::new(
            "Conversion error: null value for field that is required and has no default value",
        ));
    }
    if let Some(logical) = schema.logical() {
        return write_logical(logical, schema, value, opts, out);
    }
    let mismatch = || {
        ConvertError::new(format!(
            "Invalid type for {}: class {}",
            schema.ty.connect_name(),
            value.java_class()
        ))
    };
    match (schema.ty, value) {
        (Type::Int8 | Type::Int16 | Type::Int32 | Type::Int64, Value::Int(i)) => {
            out.push_str(&i.to_string())
        }
        (Type::Float32, Value::Float32(f)) => write_float(&java_float(*f), f.is_finite(), out),
        (Type::Float64, Value::Float64(d)) => write_float(&java_double(*d), d.is_finite(), out),
        (Type::Boolean, Value::Bool(b)) => out.push_str(if *b { "true" } else { "false" }),
        (Type::String, Value::String(s)) => write_str(s, out),
        (Type::Bytes, Value::Bytes(b)) => write_base64(b, out),
        (Type::Array, Value::Array(items)) => {
            out.push('[');
            for (i, e) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_value(schema.items.as_deref(), e, opts, out)?;
            }
            out.push(']');
        }
        (Type::Map, Value::Map(entries)) => {
            let object_mode = schema.keys.as_deref().map(|k| k.ty) == Some(Type::String);
            out.push(if object_mode { '{' } else { '[' });
            for (i, (k, v)) in entries.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                if object_mode {
                    let Value::String(k) = k else {
                        return Err(mismatch());
                    };
                    write_str(k, out);
                    out.push(':');
                    write_value(schema.items.as_deref(), v, opts, out)?;
                } else {
                    out.push('[');
                    write_value(schema.keys.as_deref(), k, opts, out)?;
                    out.push(',');
                    write_value(schema.items.as_deref(), v, opts, out)?;
                    out.push(']');
                }
            }
            out.push(if object_mode { '}' } else { ']' });
        }
        (Type::Struct, Value::Struct(values)) => {
            if values.len() != schema.fields.len()
                || values
                    .iter()
                    .zip(&schema.fields)
                    .any(|((n, _), f)| *n != f.name)
            {
                return Err(ConvertError::new("Mismatching schema."));
            }
            out.push('{');
            for (i, ((name, v), f)) in values.iter().zip(&schema.fields).enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_str(name, out);
                out.push(':');
                write_value(Some(&f.schema), v, opts, out)?;
            }
            out.push('}');
        }
        _ => return Err(mismatch()),
    }
    Ok(())
}

fn write_logical(
    logical: Logical,
    schema: &Schema,
    value: &Value,
    opts: &JsonOptions,
    out: &mut String,
) -> Result<(), ConvertError> {
    match (logical, value) {
        (Logical::Decimal, Value::Decimal(d)) => {
            match opts.decimal_format {
                DecimalFormat::Base64 => write_base64(&d.unscaled_bytes(), out),
                DecimalFormat::Numeric => out.push_str(&d.to_string()),
            }
            Ok(())
        }
        (Logical::Decimal, other) => Err(ConvertError::new(format!(
            "Invalid type for Decimal, expected BigDecimal but was class {}",
            other.java_class()
        ))),
        (Logical::Date, Value::Date(ms)) => {
            if ms.rem_euclid(MILLIS_PER_DAY) != 0 {
                return Err(ConvertError::new(
                    "Kafka Connect Date type should not have any time fields set to non-zero values.",
                ));
            }
            out.push_str(&ms.div_euclid(MILLIS_PER_DAY).to_string());
            Ok(())
        }
        (Logical::Time, Value::Date(ms)) => {
            if !(0..MILLIS_PER_DAY).contains(ms) {
                return Err(ConvertError::new(
                    "Kafka Connect Time type should not have any date fields set to non-zero values.",
                ));
            }
            out.push_str(&ms.to_string());
            Ok(())
        }
        (Logical::Timestamp, Value::Date(ms)) => {
            out.push_str(&ms.to_string());
            Ok(())
        }
        (_, other) => Err(ConvertError::new(format!(
            "Invalid type for {}, underlying representation should be java.util.Date but was class {}",
            schema.name.as_deref().unwrap_or("a logical type"),
            other.java_class()
        ))),
    }
}

/// `convertToJson(null, value)`: the value's own type decides.
fn write_schemaless(value: &Value, out: &mut String) -> Result<(), ConvertError> {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Int(i) => out.push_str(&i.to_string()),
        Value::Float32(f) => write_float(&java_float(*f), f.is_finite(), out),
        Value::Float64(d) => write_float(&java_double(*d), d.is_finite(), out),
        Value::String(s) => write_str(s, out),
        Value::Bytes(b) => write_base64(b, out),
        Value::Array(items) => {
            out.push('[');
            for (i, e) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_schemaless(e, out)?;
            }
            out.push(']');
        }
        Value::Map(entries) => {
            let object_mode = entries.iter().all(|(k, _)| matches!(k, Value::String(_)));
            out.push(if object_mode { '{' } else { '[' });
            for (i, (k, v)) in entries.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                if let (true, Value::String(k)) = (object_mode, k) {
                    write_str(k, out);
                    out.push(':');
                    write_schemaless(v, out)?;
                } else {
                    out.push('[');
                    write_schemaless(k, out)?;
                    out.push(',');
                    write_schemaless(v, out)?;
                    out.push(']');
                }
            }
            out.push(if object_mode { '}' } else { ']' });
        }
        Value::Decimal(_) | Value::Date(_) | Value::Struct(_) => {
            return Err(ConvertError::new(format!(
                "Java class {} does not have corresponding schema type.",
                value.java_class()
            )))
        }
    }
    Ok(())
}

fn write_float(text: &str, finite: bool, out: &mut String) {
    if finite {
        out.push_str(text);
    } else {
        out.push('"');
        out.push_str(text);
        out.push('"');
    }
}

fn write_base64(b: &[u8], out: &mut String) {
    out.push('"');
    base64::engine::general_purpose::STANDARD.encode_string(b, out);
    out.push('"');
}

/// Writes a JSON string as Jackson's `UTF8JsonGenerator` does (see the module docs).
pub fn write_str(t: &str, out: &mut String) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let hex4 = |u: u32, out: &mut String| {
        out.push_str("\\u");
        for shift in [12, 8, 4, 0] {
            out.push(HEX[((u >> shift) & 0xF) as usize] as char);
        }
    };
    out.push('"');
    for c in t.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{08}' => out.push_str("\\b"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\u{0C}' => out.push_str("\\f"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x20 => hex4(c as u32, out),
            c if (c as u32) > 0xFFFF => {
                let mut units = [0u16; 2];
                for u in c.encode_utf16(&mut units) {
                    hex4(u32::from(*u), out);
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::connect::data::BigDecimal;

    fn json(schemas: bool) -> JsonOptions {
        JsonOptions {
            schemas_enable: schemas,
            ..JsonOptions::default()
        }
    }

    fn s(schema: Option<&Schema>, v: &Value, o: &JsonOptions) -> String {
        String::from_utf8(serialize(schema, v, o).unwrap().unwrap()).unwrap()
    }

    #[test]
    fn envelope_of_a_string_key() {
        let schema = Schema::new(Type::String);
        assert_eq!(
            s(Some(&schema), &Value::String("o-1".into()), &json(true)),
            r#"{"schema":{"type":"string","optional":false},"payload":"o-1"}"#
        );
        assert_eq!(
            s(Some(&schema), &Value::String("o-1".into()), &json(false)),
            r#""o-1""#
        );
    }

    #[test]
    fn named_versioned_and_struct_schemas() {
        let json_schema = Schema::optional(Type::String)
            .named("io.debezium.data.Json")
            .with_version(1);
        assert_eq!(
            s(Some(&json_schema), &Value::Null, &json(true)),
            r#"{"schema":{"type":"string","optional":true,"name":"io.debezium.data.Json","version":1},"payload":null}"#
        );
        let inner = Schema::structure(vec![("z".into(), Schema::optional(Type::Boolean))])
            .with_optional(true)
            .named("payload.o");
        let outer = Schema::structure(vec![
            ("a".into(), Schema::optional(Type::Int32)),
            (
                "arr".into(),
                Schema::array(Schema::optional(Type::Int32)).with_optional(true),
            ),
            ("o".into(), inner),
        ])
        .with_optional(true)
        .named("payload");
        let v = Value::Struct(vec![
            ("a".into(), Value::Int(1)),
            (
                "arr".into(),
                Value::Array(vec![Value::Int(1), Value::Int(2)]),
            ),
            (
                "o".into(),
                Value::Struct(vec![("z".into(), Value::Bool(true))]),
            ),
        ]);
        assert_eq!(
            s(Some(&outer), &v, &json(true)),
            concat!(
                r#"{"schema":{"type":"struct","fields":[{"type":"int32","optional":true,"field":"a"},"#,
                r#"{"type":"array","items":{"type":"int32","optional":true},"optional":true,"field":"arr"},"#,
                r#"{"type":"struct","fields":[{"type":"boolean","optional":true,"field":"z"}],"optional":true,"name":"payload.o","field":"o"}],"#,
                r#""optional":true,"name":"payload"},"payload":{"a":1,"arr":[1,2],"o":{"z":true}}}"#
            )
        );
    }

    #[test]
    fn decimals_both_formats_and_defaults() {
        let schema = Schema::decimal(2).with_optional(true);
        let v = Value::Decimal(BigDecimal::parse("12345.67").unwrap());
        assert_eq!(
            s(Some(&schema), &v, &json(true)),
            r#"{"schema":{"type":"bytes","optional":true,"name":"org.apache.kafka.connect.data.Decimal","version":1,"parameters":{"scale":"2"}},"payload":"EtaH"}"#
        );
        let numeric = JsonOptions {
            schemas_enable: false,
            decimal_format: DecimalFormat::Numeric,
            ..JsonOptions::default()
        };
        assert_eq!(s(Some(&schema), &v, &numeric), "12345.67");
        let with_default =
            Schema::optional(Type::String).with_default(Value::String("PENDING".into()));
        assert_eq!(
            s(Some(&with_default), &Value::Null, &json(false)),
            r#""PENDING""#
        );
        let keep_null = JsonOptions {
            schemas_enable: false,
            replace_null_with_default: false,
            ..JsonOptions::default()
        };
        assert_eq!(s(Some(&with_default), &Value::Null, &keep_null), "null");
        assert_eq!(
            s(Some(&with_default), &Value::Null, &json(true)),
            r#"{"schema":{"type":"string","optional":true,"default":"PENDING"},"payload":"PENDING"}"#
        );
    }

    #[test]
    fn strings_as_jackson_writes_them() {
        let mut out = String::new();
        write_str("q\"\\\u{1}\n/é😀", &mut out);
        assert_eq!(out, "\"q\\\"\\\\\\u0001\\n/é\\uD83D\\uDE00\"");
    }

    #[test]
    fn mismatches_and_required_nulls_fail() {
        let st = Schema::structure(vec![("a".into(), Schema::optional(Type::Int32))]);
        assert!(serialize(Some(&st), &Value::String("[1,2]".into()), &json(true)).is_err());
        assert!(serialize(Some(&Schema::new(Type::String)), &Value::Null, &json(false)).is_err());
        assert_eq!(serialize(None, &Value::Null, &json(true)).unwrap(), None);
    }

    #[test]
    fn non_finite_doubles_are_strings() {
        let st = Schema::optional(Type::Float64);
        assert_eq!(
            s(Some(&st), &Value::Float64(f64::INFINITY), &json(false)),
            "\"Infinity\""
        );
        assert_eq!(s(Some(&st), &Value::Float64(1e7), &json(false)), "1.0E7");
    }
}
