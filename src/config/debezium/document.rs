//! The connector JSON as a document: Kafka Connect's REST shape `{"name": .., "config":
//! {..}}` or the bare config map, every value as the string Connect would see, config
//! provider references resolved.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::Keys;
use crate::config::providers::substitute_providers;
use crate::config::{ConfigError, LoadCtx};

/// Reads `text` into the connector's keys: the outer `"name"` (REST shape only) and the
/// config map as [`Keys`], already holding what the wrapper's other keys are reported for.
/// Errors: not JSON, not an object, a non-string `"name"` or non-object `"config"`, a value
/// that is no string, number or boolean, a config provider reference that does not resolve.
pub(super) fn read(text: &str, ctx: &LoadCtx<'_>) -> Result<(Option<String>, Keys), ConfigError> {
    let root: Value = serde_json::from_str(text).map_err(|source| ConfigError::Json {
        path: ctx.path.to_path_buf(),
        source,
    })?;
    let Value::Object(root) = root else {
        return Err(ctx.invalid("file", "a Debezium connector JSON must be an object"));
    };
    let doc = unwrap_rest_shape(root, ctx)?;
    Ok((
        doc.name,
        Keys::new(string_values(doc.config, ctx)?, doc.ignored),
    ))
}

/// A connector JSON's parts: the REST shape's outer `"name"`, the config map, the wrapper's
/// keys that are reported.
struct Document {
    name: Option<String>,
    config: Map<String, Value>,
    ignored: Vec<(String, String)>,
}

/// The REST shape's `"name"` and `"config"`, its other keys reported (`tasks` and `type`
/// are Connect's REST metadata); a bare config map as it is.
fn unwrap_rest_shape(root: Map<String, Value>, ctx: &LoadCtx<'_>) -> Result<Document, ConfigError> {
    let mut ignored = Vec::new();
    match root.get("config") {
        Some(Value::Object(cfg)) => {
            let name = match root.get("name") {
                Some(Value::String(n)) => Some(n.clone()),
                None => None,
                Some(_) => return Err(ctx.invalid("name", "must be a string")),
            };
            for k in root.keys() {
                match k.as_str() {
                    "name" | "config" => {}
                    "tasks" | "type" => ignored.push((
                        k.clone(),
                        "Kafka Connect REST metadata, not configuration".to_string(),
                    )),
                    _ => ignored.push((
                        k.clone(),
                        "unknown key next to \"config\"; only \"name\" and \"config\" are read"
                            .to_string(),
                    )),
                }
            }
            Ok(Document {
                name,
                config: cfg.clone(),
                ignored,
            })
        }
        Some(_) => Err(ctx.invalid("config", "must be an object of string values")),
        None => Ok(Document {
            name: None,
            config: root,
            ignored,
        }),
    }
}

/// Every config value as a string (numbers and booleans as their JSON text), config
/// provider references resolved. Offline (nothing connects) `database.password` is not
/// resolved: an unset variable or a file only the relay's host has is no error then.
fn string_values(
    config: Map<String, Value>,
    ctx: &LoadCtx<'_>,
) -> Result<BTreeMap<String, String>, ConfigError> {
    let mut map = BTreeMap::new();
    for (k, v) in config {
        let s = match v {
            Value::String(s) => s,
            Value::Number(n) => n.to_string(),
            Value::Bool(b) => b.to_string(),
            _ => return Err(ctx.invalid(
                format!("config key {k:?}"),
                "Kafka Connect config values are strings (numbers and booleans are accepted too)",
            )),
        };
        let s = if ctx.offline && k == "database.password" {
            String::new()
        } else {
            substitute_providers(&s, ctx.env)
                .map_err(|m| ctx.invalid(format!("config key {k:?}"), m))?
        };
        map.insert(k, s);
    }
    Ok(map)
}
