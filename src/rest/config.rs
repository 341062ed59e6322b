//! Connector configurations as Kafka Connect's REST API shows and stores them: a flat map of
//! string keys to string values (`GET /connectors/{name}/config`), read back from the file a
//! connector was defined in, and the files the API writes for connectors it creates.
//!
//! * A Debezium connector JSON gives its `config` object (or, flat, the object itself);
//!   an outboxd TOML connector gives its table flattened with `.` (arrays joined with `,`).
//! * Secrets are never shown: a value of a key that holds one (`*password*`, `*secret*`,
//!   `*.jaas.config`, `*token*`, `*.key` material) is `[hidden]` unless it is a reference
//!   (`${file:...}`, `${env:...}`), shown as written — what Connect shows for values that
//!   came through a `ConfigProvider`.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

/// A connector's configuration in Connect's shape: key to value, in file order.
pub type ConfigMap = Map<String, Value>;

/// What Connect's REST API shows in place of a secret's value.
pub const HIDDEN: &str = "[hidden]";

/// Whether `key` holds a secret (a password, a JAAS configuration with one, a token, a key).
pub fn is_secret_key(key: &str) -> bool {
    let k = key.to_ascii_lowercase();
    k.contains("password")
        || k.contains("secret")
        || k.contains("token")
        || k.ends_with("jaas.config")
        || k.ends_with("ssl.key")
        || k.ends_with("keystore.key")
        || k.ends_with("nkey")
        || k.ends_with("creds")
}

/// `map` with every secret's value replaced by [`HIDDEN`], references kept as written.
pub fn masked(map: &ConfigMap) -> ConfigMap {
    map.iter()
        .map(|(k, v)| {
            let v = match v {
                Value::String(s) if is_secret_key(k) && !s.trim_start().starts_with("${") => {
                    Value::String(HIDDEN.into())
                }
                other => other.clone(),
            };
            (k.clone(), v)
        })
        .collect()
}

/// The configuration of connector `name` as written in `path` (a Debezium JSON or an outboxd
/// TOML), or `None` when the file does not define it (or cannot be read).
pub fn read(path: &Path, name: &str) -> Option<ConfigMap> {
    let text = std::fs::read_to_string(path).ok()?;
    if path.extension().is_some_and(|e| e == "toml") {
        return from_toml(&text, name);
    }
    let doc: Value = serde_json::from_str(&text).ok()?;
    let (doc_name, config) = match (doc.get("name"), doc.get("config")) {
        (n, Some(Value::Object(c))) => (n.and_then(Value::as_str).map(str::to_string), c.clone()),
        (n, _) => (
            n.and_then(Value::as_str).map(str::to_string),
            doc.as_object()?.clone(),
        ),
    };
    let doc_name = doc_name.or_else(|| {
        path.file_stem().map(|s| {
            s.to_string_lossy()
                .trim_end_matches(".debezium")
                .to_string()
        })
    })?;
    (doc_name == name).then(|| with_name(name, as_strings(config)))
}

/// The TOML connector `name` of `text`, flattened.
fn from_toml(text: &str, name: &str) -> Option<ConfigMap> {
    let doc: toml::Value = toml::from_str(text).ok()?;
    let connectors = doc.get("connectors")?.as_array()?;
    let table = connectors
        .iter()
        .find(|c| c.get("name").and_then(toml::Value::as_str) == Some(name))?;
    let mut out = ConfigMap::new();
    flatten("", table, &mut out);
    Some(with_name(name, out))
}

fn flatten(prefix: &str, v: &toml::Value, out: &mut ConfigMap) {
    match v {
        toml::Value::Table(t) => {
            for (k, v) in t {
                let key = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                flatten(&key, v, out);
            }
        }
        toml::Value::Array(items) if items.iter().all(|i| !i.is_table()) => {
            let joined: Vec<String> = items.iter().map(scalar).collect();
            out.insert(prefix.into(), Value::String(joined.join(",")));
        }
        toml::Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                flatten(&format!("{prefix}.{i}"), item, out);
            }
        }
        other => {
            out.insert(prefix.into(), Value::String(scalar(other)));
        }
    }
}

fn scalar(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Connect keeps every value as a string: numbers and booleans of a JSON file become their text.
fn as_strings(map: ConfigMap) -> ConfigMap {
    map.into_iter()
        .map(|(k, v)| {
            let v = match v {
                Value::String(s) => Value::String(s),
                Value::Null => Value::Null,
                other => Value::String(other.to_string()),
            };
            (k, v)
        })
        .collect()
}

/// `map` with its `name` key set to `name` (Connect adds it to every stored configuration).
fn with_name(name: &str, mut map: ConfigMap) -> ConfigMap {
    map.insert("name".into(), Value::String(name.into()));
    map
}

/// Checks a connector name the REST API is to write a file for: outboxd's connector name
/// rule (`A-Z a-z 0-9 . _ -`, 1 to 128), and not starting with `.` (no `.`, `..` or hidden
/// file). Checked before anything touches the directory.
pub fn check_name(name: &str) -> Result<(), String> {
    crate::config::validate_connector_name(name)?;
    if name.starts_with('.') {
        return Err(format!(
            "connector name {name:?} starts with '.': not a name the REST API keeps a file for"
        ));
    }
    Ok(())
}

/// The file the REST API keeps connector `name` in, under `dir`.
pub fn stored_path(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!("{name}.json"))
}

/// Every connector file the REST API wrote under `dir` (`*.json`), sorted; none when the
/// directory does not exist yet.
pub fn stored_files(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        // Not outboxd's own state beside them (`.target-states.json`, temporary files).
        .filter(|p| {
            !p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with('.'))
        })
        .collect();
    files.sort();
    files
}

/// Writes connector `name` with `config` to its file under `dir` (a Debezium connector JSON,
/// `{"name": ..., "config": {...}}`), replacing it atomically (a temporary file renamed);
/// returns what the file held before, to put back when the configuration is refused.
///
/// Errors: the directory or file cannot be written.
pub fn store(dir: &Path, name: &str, config: &ConfigMap) -> std::io::Result<Option<Vec<u8>>> {
    std::fs::create_dir_all(dir)?;
    let path = stored_path(dir, name);
    let before = std::fs::read(&path).ok();
    let mut config = config.clone();
    config.remove("name");
    let doc = serde_json::json!({ "name": name, "config": config });
    let tmp = dir.join(format!(".{name}.json.tmp"));
    std::fs::write(
        &tmp,
        serde_json::to_vec_pretty(&doc).map_err(std::io::Error::other)?,
    )?;
    // It may hold a password: readable by its owner only.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o600))?;
    std::fs::rename(&tmp, &path)?;
    Ok(before)
}

/// Puts connector `name`'s file back as it was (`before`: its bytes, or no file).
pub fn restore(dir: &Path, name: &str, before: Option<Vec<u8>>) -> std::io::Result<()> {
    let path = stored_path(dir, name);
    match before {
        Some(bytes) => std::fs::write(path, bytes),
        None => match std::fs::remove_file(path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        },
    }
}

/// `config` with every secret given as [`HIDDEN`] (a configuration read with `GET .../config`
/// and sent back) replaced by the value `stored` holds for it; `Err` names a hidden key
/// `stored` has no value for.
pub fn unhide(config: &mut ConfigMap, stored: Option<&ConfigMap>) -> Result<(), String> {
    for (k, v) in config.iter_mut() {
        if v.as_str() == Some(HIDDEN) {
            match stored.and_then(|s| s.get(k)) {
                Some(kept) => *v = kept.clone(),
                None => {
                    return Err(format!(
                        "{k} is \"{HIDDEN}\" (as GET .../config shows a secret), and there is no \
                         stored value to keep: give its value"
                    ))
                }
            }
        }
    }
    Ok(())
}

/// Which of `files` defines connector `name` (the first), with its configuration.
pub fn find(files: &[PathBuf], name: &str) -> Option<(PathBuf, ConfigMap)> {
    files
        .iter()
        .find_map(|f| read(f, name).map(|c| (f.clone(), c)))
}

/// The Kafka Connect connector class a source kind stands for (`SourceConfig::plugin`).
pub fn connector_class(plugin: &str) -> &'static str {
    match plugin {
        "postgres" => "io.debezium.connector.postgresql.PostgresConnector",
        "mysql" => "io.debezium.connector.mysql.MySqlConnector",
        _ => "io.debezium.connector.mariadb.MariaDbConnector",
    }
}

/// The Debezium version of a source kind's connector class (`SourceConfig::plugin`), as
/// Connect 4.1's statuses carry it.
pub fn plugin_version(plugin: &str) -> &'static str {
    let class = connector_class(plugin);
    PLUGINS
        .iter()
        .find(|(c, _)| *c == class)
        .map_or("", |(_, v)| *v)
}

/// The connector classes outboxd runs, with the Debezium version whose records it writes:
/// `(class, version)`.
pub const PLUGINS: [(&str, &str); 3] = [
    (
        "io.debezium.connector.mariadb.MariaDbConnector",
        "3.5.0.Final",
    ),
    ("io.debezium.connector.mysql.MySqlConnector", "3.5.0.Final"),
    (
        "io.debezium.connector.postgresql.PostgresConnector",
        "3.6.1.Final",
    ),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_hidden_references_shown() {
        let m: ConfigMap = serde_json::from_str(
            r#"{"database.password":"s3cret","database.user":"u",
                "sasl.jaas.config":"x required password=\"p\";",
                "ssl.truststore.password":"${file:/etc/p.properties:pw}"}"#,
        )
        .unwrap();
        let out = masked(&m);
        assert_eq!(out["database.password"], HIDDEN);
        assert_eq!(out["sasl.jaas.config"], HIDDEN);
        assert_eq!(out["database.user"], "u");
        assert_eq!(
            out["ssl.truststore.password"],
            "${file:/etc/p.properties:pw}"
        );
    }

    #[test]
    fn hidden_secrets_sent_back_keep_the_stored_value() {
        let stored: ConfigMap = serde_json::from_str(r#"{"database.password":"s3cret"}"#).unwrap();
        let mut sent: ConfigMap =
            serde_json::from_str(r#"{"database.password":"[hidden]","a":"b"}"#).unwrap();
        unhide(&mut sent, Some(&stored)).unwrap();
        assert_eq!(sent["database.password"], "s3cret");
        let mut sent: ConfigMap =
            serde_json::from_str(r#"{"database.password":"[hidden]"}"#).unwrap();
        let e = unhide(&mut sent, None).unwrap_err();
        assert!(
            e.contains("database.password") && e.contains("give its value"),
            "{e}"
        );
    }

    #[test]
    fn names_that_are_paths_are_refused() {
        for bad in ["", ".", "..", "./../../tmp/x", "a/b", ".hidden", "a b"] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
        check_name("shop-mariadb.v2_1").unwrap();
    }

    #[test]
    fn toml_connectors_flatten() {
        let text = r#"
[[connectors]]
name = "a"
tables = ["shop.outbox", "shop.outbox2"]
[connectors.source]
kind = "mariadb"
port = 3306
password_env = "PW"
[[connectors]]
name = "b"
"#;
        let m = from_toml(text, "a").unwrap();
        assert_eq!(m["tables"], "shop.outbox,shop.outbox2");
        assert_eq!(m["source.kind"], "mariadb");
        assert_eq!(m["source.port"], "3306");
        assert_eq!(m["name"], "a");
        assert!(from_toml(text, "c").is_none());
    }

    #[test]
    fn stored_files_round_trip() {
        let dir = std::env::temp_dir().join(format!("outboxd-rest-{}", std::process::id()));
        let mut c = ConfigMap::new();
        c.insert("topic.prefix".into(), Value::String("p".into()));
        let before = store(&dir, "x", &c).unwrap();
        assert!(before.is_none());
        let read_back = read(&stored_path(&dir, "x"), "x").unwrap();
        assert_eq!(read_back["topic.prefix"], "p");
        assert_eq!(stored_files(&dir).len(), 1);
        restore(&dir, "x", None).unwrap();
        assert!(stored_files(&dir).is_empty());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
