//! Connect schemas (`org.apache.kafka.connect.data.Schema`, `SchemaBuilder`).

use std::sync::Arc;

use super::data::Value;

/// A Connect schema type (`Schema.Type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Type {
    /// `INT8` (Java `Byte`).
    Int8,
    /// `INT16` (Java `Short`).
    Int16,
    /// `INT32` (Java `Integer`).
    Int32,
    /// `INT64` (Java `Long`).
    Int64,
    /// `FLOAT32` (Java `Float`).
    Float32,
    /// `FLOAT64` (Java `Double`).
    Float64,
    /// `BOOLEAN`.
    Boolean,
    /// `STRING`.
    String,
    /// `BYTES` (Java `byte[]`; also the `Decimal` logical type).
    Bytes,
    /// `ARRAY` of [`Schema::items`].
    Array,
    /// `MAP` from [`Schema::keys`] to [`Schema::items`].
    Map,
    /// `STRUCT` of [`Schema::fields`].
    Struct,
}

impl Type {
    /// The name JsonConverter writes in a schema's `"type"`: `int8` ... `struct`
    /// (`JsonSchema.*_TYPE_NAME`; `FLOAT32` is `float`, `FLOAT64` is `double`).
    pub fn json_name(self) -> &'static str {
        match self {
            Type::Int8 => "int8",
            Type::Int16 => "int16",
            Type::Int32 => "int32",
            Type::Int64 => "int64",
            Type::Float32 => "float",
            Type::Float64 => "double",
            Type::Boolean => "boolean",
            Type::String => "string",
            Type::Bytes => "bytes",
            Type::Array => "array",
            Type::Map => "map",
            Type::Struct => "struct",
        }
    }

    /// Connect's upper-case name (`Schema.Type.toString()`), for error messages.
    pub fn connect_name(self) -> &'static str {
        match self {
            Type::Int8 => "INT8",
            Type::Int16 => "INT16",
            Type::Int32 => "INT32",
            Type::Int64 => "INT64",
            Type::Float32 => "FLOAT32",
            Type::Float64 => "FLOAT64",
            Type::Boolean => "BOOLEAN",
            Type::String => "STRING",
            Type::Bytes => "BYTES",
            Type::Array => "ARRAY",
            Type::Map => "MAP",
            Type::Struct => "STRUCT",
        }
    }
}

/// One field of a struct schema.
#[derive(Debug, Clone, PartialEq)]
pub struct Field {
    /// The field name.
    pub name: String,
    /// The field's schema.
    pub schema: Arc<Schema>,
}

/// A Connect schema: type, optionality, and the optional name, version, doc, parameters and
/// default value, in the shape `SchemaBuilder` builds (JsonConverter writes them in this
/// order: type, items/keys/fields, `optional`, `name`, `version`, `doc`, `parameters`,
/// `default`).
#[derive(Debug, Clone, PartialEq)]
pub struct Schema {
    /// The type.
    pub ty: Type,
    /// `isOptional()`: the value may be null.
    pub optional: bool,
    /// A logical or record name, e.g. `io.debezium.time.MicroTimestamp`.
    pub name: Option<String>,
    /// `version()`.
    pub version: Option<i32>,
    /// `doc()`.
    pub doc: Option<String>,
    /// `parameters()`, in insertion order (e.g. Decimal's `scale`).
    pub parameters: Vec<(String, String)>,
    /// `defaultValue()`.
    pub default: Option<Value>,
    /// Struct fields, in order.
    pub fields: Vec<Field>,
    /// Array element schema, or map value schema.
    pub items: Option<Arc<Schema>>,
    /// Map key schema.
    pub keys: Option<Arc<Schema>>,
}

impl Schema {
    /// A schema of `ty`, required, without name or parameters.
    pub fn new(ty: Type) -> Self {
        Self {
            ty,
            optional: false,
            name: None,
            version: None,
            doc: None,
            parameters: Vec::new(),
            default: None,
            fields: Vec::new(),
            items: None,
            keys: None,
        }
    }

    /// `Schema.OPTIONAL_STRING_SCHEMA` and friends: an optional schema of `ty`.
    pub fn optional(ty: Type) -> Self {
        Self::new(ty).with_optional(true)
    }

    /// An array of `items`.
    pub fn array(items: Schema) -> Self {
        let mut s = Self::new(Type::Array);
        s.items = Some(Arc::new(items));
        s
    }

    /// A map from `keys` to `values`.
    pub fn map(keys: Schema, values: Schema) -> Self {
        let mut s = Self::new(Type::Map);
        s.keys = Some(Arc::new(keys));
        s.items = Some(Arc::new(values));
        s
    }

    /// A struct of `fields` (name, schema), in order.
    pub fn structure(fields: Vec<(String, Schema)>) -> Self {
        let mut s = Self::new(Type::Struct);
        s.fields = fields
            .into_iter()
            .map(|(name, schema)| Field {
                name,
                schema: Arc::new(schema),
            })
            .collect();
        s
    }

    /// Sets optionality.
    pub fn with_optional(mut self, optional: bool) -> Self {
        self.optional = optional;
        self
    }

    /// Sets the name (a logical type name such as `org.apache.kafka.connect.data.Decimal`).
    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Sets the version.
    pub fn with_version(mut self, version: i32) -> Self {
        self.version = Some(version);
        self
    }

    /// Adds a parameter.
    pub fn with_parameter(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.parameters.push((key.into(), value.into()));
        self
    }

    /// Sets the default value.
    pub fn with_default(mut self, default: Value) -> Self {
        self.default = Some(default);
        self
    }

    /// The struct field called `name`.
    pub fn field(&self, name: &str) -> Option<&Field> {
        self.fields.iter().find(|f| f.name == name)
    }

    /// `org.apache.kafka.connect.data.Decimal.schema(scale)`: bytes named
    /// `org.apache.kafka.connect.data.Decimal`, version 1, parameter `scale`.
    pub fn decimal(scale: i32) -> Self {
        Self::new(Type::Bytes)
            .named(DECIMAL)
            .with_version(1)
            .with_parameter("scale", scale.to_string())
    }

    /// The logical type of this schema, from its name.
    pub fn logical(&self) -> Option<Logical> {
        match self.name.as_deref()? {
            DECIMAL if self.ty == Type::Bytes => Some(Logical::Decimal),
            DATE if self.ty == Type::Int32 => Some(Logical::Date),
            TIME if self.ty == Type::Int32 => Some(Logical::Time),
            TIMESTAMP if self.ty == Type::Int64 => Some(Logical::Timestamp),
            _ => None,
        }
    }
}

/// `org.apache.kafka.connect.data.Decimal.LOGICAL_NAME`.
pub const DECIMAL: &str = "org.apache.kafka.connect.data.Decimal";
/// `org.apache.kafka.connect.data.Date.LOGICAL_NAME` (int32 days).
pub const DATE: &str = "org.apache.kafka.connect.data.Date";
/// `org.apache.kafka.connect.data.Time.LOGICAL_NAME` (int32 milliseconds of the day).
pub const TIME: &str = "org.apache.kafka.connect.data.Time";
/// `org.apache.kafka.connect.data.Timestamp.LOGICAL_NAME` (int64 epoch milliseconds).
pub const TIMESTAMP: &str = "org.apache.kafka.connect.data.Timestamp";

/// Connect's own logical types, which converters treat specially.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Logical {
    /// `Decimal`: a `BigDecimal`, serialized as the unscaled value's two's-complement bytes.
    Decimal,
    /// `Date`: a `java.util.Date` at midnight UTC; int32 days since the epoch.
    Date,
    /// `Time`: a `java.util.Date` on 1970-01-01; int32 milliseconds of the day.
    Time,
    /// `Timestamp`: a `java.util.Date`; int64 milliseconds since the epoch.
    Timestamp,
}
