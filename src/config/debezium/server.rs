//! Import of a Debezium Server `application.properties` (Debezium Server's "Configuration"
//! chapter): the connector under `debezium.source.*`, the transforms under
//! `debezium.transforms*`, the formats under `debezium.format.*` and the sink under
//! `debezium.sink.type` + `debezium.sink.<type>.*`.
//!
//! The keys are turned into what Debezium Server hands its embedded engine — `source.` keys
//! unprefixed, `debezium.format.key|value|header` as `key|value|header.converter` with their
//! options — and read by the connector JSON import (`super::from_keys`), so every rule of
//! that import holds here too. The sink's keys become a `[connectors.sink]` table
//! (`crate::config::sinks`). As MicroProfile Config does for Debezium Server, an environment
//! variable named after a key (`DEBEZIUM_SOURCE_DATABASE_PASSWORD` for
//! `debezium.source.database.password`: upper case, every character that is not a letter or
//! digit as `_`) overrides the file's value, and `${NAME}` / `${NAME:default}` in a value is
//! replaced by that environment variable.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::{from_keys, Destination, Keys};
use crate::config::{CheckpointConfig, ConfigError, ConnectorConfig, LoadCtx, SinkConfig};

/// Whether `text` (read from `path`) is a Debezium Server properties file: named
/// `*.properties`, or a line sets `debezium.sink.type` / a `debezium.source.` key (a TOML
/// file cannot: its top level takes no `debezium` table).
pub(crate) fn looks_like_server_properties(path: &Path, text: &str) -> bool {
    path.extension().is_some_and(|e| e == "properties")
        || text.lines().map(str::trim_start).any(|l| {
            l.starts_with("debezium.sink.type") || l.starts_with("debezium.source.connector.class")
        })
}

/// Debezium Server's key and value format names (`debezium.format.key|value`), as the
/// Kafka Connect converter each stands for; `None`: a format outboxd does not write.
fn converter(format: &str) -> Option<&'static str> {
    match format {
        "json" | "jsonbytearray" => Some("org.apache.kafka.connect.json.JsonConverter"),
        "simplestring" => Some("org.apache.kafka.connect.storage.StringConverter"),
        "binary" => Some("io.debezium.converters.BinaryDataConverter"),
        _ => None,
    }
}

/// The connector of a Debezium Server `application.properties` `text`. Errors: the syntax,
/// a missing or unknown `debezium.sink.type`, a format outboxd does not write, a sink key
/// whose effect outboxd cannot reproduce, and every error of the connector JSON import.
pub(crate) fn parse_server(text: &str, ctx: &LoadCtx<'_>) -> Result<ConnectorConfig, ConfigError> {
    let raw = java_properties::read(text.as_bytes())
        .map_err(|e| ctx.invalid("file", format!("not a properties file: {e}")))?;
    let mut props = BTreeMap::new();
    for (k, v) in raw {
        let v = overridden(&k, v, ctx.env);
        let v = expand(&v, ctx.env).map_err(|m| ctx.invalid(k.clone(), m))?;
        props.insert(k, v);
    }
    let sink_type = props
        .remove("debezium.sink.type")
        .map(|s| s.trim().to_string())
        .ok_or_else(|| {
            ctx.invalid(
                "debezium.sink.type",
                "is missing: a Debezium Server file names its sink (kafka, nats-jetstream, \
                 redis, rabbitmq)",
            )
        })?;
    let mut map = BTreeMap::new();
    let mut ignored = Vec::new();
    let mut sink_keys = BTreeMap::new();
    for (k, v) in std::mem::take(&mut props) {
        if let Some(rest) = k.strip_prefix("debezium.source.") {
            map.insert(rest.to_string(), v);
        } else if ["transforms", "predicates"].iter().any(|t| {
            k.strip_prefix("debezium.")
                .is_some_and(|r| r == *t || r.starts_with(&format!("{t}.")))
        }) {
            map.insert(k["debezium.".len()..].to_string(), v);
        } else if let Some(rest) = k.strip_prefix("debezium.format.") {
            format_key(rest, v, &mut map).map_err(|m| ctx.invalid(k.clone(), m))?;
        } else if let Some(rest) = k.strip_prefix(&format!("debezium.sink.{sink_type}.")) {
            sink_keys.insert(rest.to_string(), v);
        } else if k.starts_with("quarkus.") {
            ignored.push((
                k,
                "Debezium Server's runtime (HTTP, logging): not used".into(),
            ));
        } else {
            ignored.push((k, "not a Debezium Server setting outboxd reads".into()));
        }
    }
    // Debezium Server's default format is JSON (with schemas, Connect's JsonConverter
    // default) for the key, the value and the headers.
    for side in ["key", "value", "header"] {
        map.entry(format!("{side}.converter"))
            .or_insert_with(|| "org.apache.kafka.connect.json.JsonConverter".to_string());
    }
    let name = map
        .get("name")
        .or_else(|| map.get("topic.prefix"))
        .cloned()
        .unwrap_or_default();
    if !map.contains_key("name") && !name.is_empty() {
        map.insert("name".into(), name.clone());
    }
    let offsets = map
        .get("offset.storage.file.filename")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("data/offsets.dat"));
    let here = format!("debezium.sink.{sink_type}");
    let dest = match sink_type.as_str() {
        "kafka" => {
            for (k, v) in sink_keys {
                match k.strip_prefix("producer.") {
                    Some(p) => {
                        map.insert(format!("producer.override.{p}"), v);
                    }
                    None => ignored.push((format!("{here}.{k}"), "not used by outboxd".into())),
                }
            }
            Destination::kafka()
        }
        kind => {
            let table = super::server_sinks::sink_table(kind, sink_keys, &here, &mut ignored)
                .map_err(|(k, m)| ctx.invalid(k, m))?;
            let sink = crate::config::sinks::from_toml(table, &here, ctx)?;
            let checkpoint = match sink {
                SinkConfig::RabbitMq(_) => {
                    let path = offsets
                        .parent()
                        .unwrap_or(Path::new(""))
                        .join(format!("outboxd.{name}.checkpoint.json"));
                    if map.remove("offset.storage.file.filename").is_some() {
                        ignored.push((
                            "debezium.source.offset.storage.file.filename".into(),
                            format!(
                                "places outboxd's checkpoint file beside it: {} (relative to \
                                 the working directory, as Debezium Server's offsets file)",
                                path.display()
                            ),
                        ));
                    }
                    Some(CheckpointConfig::File { path })
                }
                _ => None,
            };
            Destination { sink, checkpoint }
        }
    };
    let mut c = from_keys(None, Keys::new(map, ignored), dest, ctx)?;
    c.ignored_keys.sort();
    Ok(c)
}

/// One `debezium.format.<rest>` key into the converter settings: `key`/`value`/`header`
/// choose the converter, `key.X`/`value.X`/`header.X` are its options, and a bare `X`
/// applies to all three (as Debezium Server does).
fn format_key(rest: &str, v: String, map: &mut BTreeMap<String, String>) -> Result<(), String> {
    for side in ["key", "value", "header"] {
        if rest == side {
            let class = converter(v.trim()).filter(|_| side != "header" || v.trim() == "json");
            let Some(class) = class else {
                return Err(format!(
                    "format {:?} is not one outboxd writes; use json (default), simplestring \
                     or binary{}",
                    v.trim(),
                    if side == "header" {
                        " (headers: json)"
                    } else {
                        ""
                    }
                ));
            };
            map.insert(format!("{side}.converter"), class.to_string());
            return Ok(());
        }
        if let Some(opt) = rest.strip_prefix(&format!("{side}.")) {
            map.insert(format!("{side}.converter.{opt}"), v);
            return Ok(());
        }
    }
    for side in ["key", "value", "header"] {
        map.entry(format!("{side}.converter.{rest}"))
            .or_insert_with(|| v.clone());
    }
    Ok(())
}

/// The value of key `k`: the environment variable named after it when set (MicroProfile
/// Config's environment source), else `v`.
fn overridden(k: &str, v: String, env: &dyn Fn(&str) -> Option<String>) -> String {
    let var: String = k
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect();
    env(&var).unwrap_or(v)
}

/// The EventRouter's own placeholders (`route.topic.replacement`), kept as written when no
/// environment variable of the name is set.
const ROUTER_PLACEHOLDERS: [&str; 1] = ["routedByValue"];

/// `v` with every `${NAME}` / `${NAME:default}` replaced by the environment variable (or
/// the default). `$${` and `\${` stand for a literal `${` (MicroProfile Config's escapes;
/// the properties syntax has already turned a written `\\${` into `\${`), and the
/// EventRouter's `${routedByValue}` is kept when no variable of that name is set. Errors:
/// another unset variable without default, an unclosed `${`.
fn expand(v: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<String, String> {
    let mut out = String::with_capacity(v.len());
    let mut rest = v;
    while let Some(at) = rest.find("${") {
        if rest[..at].ends_with(['$', '\\']) {
            // Escaped: the `${` itself, without the escape character.
            out.push_str(&rest[..at - 1]);
            out.push_str("${");
            rest = &rest[at + 2..];
            continue;
        }
        out.push_str(&rest[..at]);
        let Some(end) = rest[at..].find('}') else {
            return Err(format!("an expression `${{` is not closed in {v:?}"));
        };
        let expr = &rest[at + 2..at + end];
        let (name, default) = match expr.split_once(':') {
            Some((n, d)) => (n, Some(d)),
            None => (expr, None),
        };
        match (env(name), default) {
            (Some(val), _) => out.push_str(&val),
            (None, Some(d)) => out.push_str(d),
            (None, None) if ROUTER_PLACEHOLDERS.contains(&name) => {
                out.push_str(&rest[at..at + end + 1]);
            }
            (None, None) => {
                return Err(format!(
                    "environment variable {name} is not set (the value refers to ${{{name}}}); \
                     export it or give a default: ${{{name}:default}}"
                ))
            }
        }
        rest = &rest[at + end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expressions_take_the_environment_or_the_default() {
        let env = |n: &str| (n == "DB_PW").then(|| "s3cret".to_string());
        assert_eq!(expand("${DB_PW}", &env).unwrap(), "s3cret");
        assert_eq!(expand("a-${NOPE:x}-b", &env).unwrap(), "a-x-b");
        assert!(expand("${NOPE}", &env)
            .unwrap_err()
            .contains("NOPE is not set"));
        assert!(expand("${DB_PW", &env).is_err());
        // The EventRouter's placeholder, and the escapes, stay as `${...}`.
        assert_eq!(
            expand("outbox.${routedByValue}", &env).unwrap(),
            "outbox.${routedByValue}"
        );
        assert_eq!(expand("a$${DB_PW}", &env).unwrap(), "a${DB_PW}");
        assert_eq!(expand("a\\${NOPE}", &env).unwrap(), "a${NOPE}");
        assert_eq!(expand("é${DB_PW}", &env).unwrap(), "és3cret");
    }

    #[test]
    fn an_environment_variable_named_after_a_key_overrides_it() {
        let env =
            |n: &str| (n == "DEBEZIUM_SOURCE_DATABASE_PASSWORD").then(|| "from-env".to_string());
        assert_eq!(
            overridden("debezium.source.database.password", "file".into(), &env),
            "from-env"
        );
        assert_eq!(
            overridden("debezium.source.database.user", "file".into(), &env),
            "file"
        );
    }

    #[test]
    fn formats_become_converters() {
        let mut m = BTreeMap::new();
        format_key("value", "simplestring".into(), &mut m).unwrap();
        format_key("value.schemas.enable", "false".into(), &mut m).unwrap();
        format_key("schemas.enable", "false".into(), &mut m).unwrap();
        assert_eq!(
            m["value.converter"],
            "org.apache.kafka.connect.storage.StringConverter"
        );
        assert_eq!(m["key.converter.schemas.enable"], "false");
        assert!(format_key("value", "avro".into(), &mut m)
            .unwrap_err()
            .contains("not one outboxd writes"));
    }

    const REDIS: &str = r"
# Debezium Server, PostgreSQL outbox to Redis Streams
debezium.sink.type=redis
debezium.sink.redis.address=127.0.0.1:6379
debezium.sink.redis.user=outboxd
debezium.sink.redis.password=${REDIS_PW}
debezium.sink.redis.batch.size=500
debezium.source.connector.class=io.debezium.connector.postgresql.PostgresConnector
debezium.source.offset.storage=io.debezium.storage.redis.offset.RedisOffsetBackingStore
debezium.source.database.hostname=127.0.0.1
debezium.source.database.port=5432
debezium.source.database.user=outboxd
debezium.source.database.password=pg-file
debezium.source.database.dbname=shop
debezium.source.topic.prefix=shop
debezium.source.plugin.name=pgoutput
debezium.source.table.include.list=public.outbox_events
debezium.source.snapshot.mode=never
debezium.transforms=outbox
debezium.transforms.outbox.type=io.debezium.transforms.outbox.EventRouter
debezium.format.value=simplestring
debezium.format.key=simplestring
quarkus.log.console.json=false
";

    fn load(text: &str, env: &[(&str, &str)]) -> Result<ConnectorConfig, ConfigError> {
        let vars: BTreeMap<String, String> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let env = move |k: &str| vars.get(k).cloned();
        let mut cfg = crate::config::parse(text, Path::new("application.properties"), None, &env)?;
        Ok(cfg.connectors.remove(0))
    }

    #[test]
    fn a_redis_server_files_entry_layout_imports() {
        let text = format!(
            "{REDIS}debezium.sink.redis.message.format=extended\n\
             debezium.sink.redis.null.key=nokey\ndebezium.sink.redis.null.value=tombstone\n"
        );
        let c = load(&text, &[("REDIS_PW", "x")]).unwrap_or_else(|e| panic!("{e}"));
        let SinkConfig::Redis(r) = &c.sink else {
            panic!("{:?}", c.sink)
        };
        assert_eq!(
            r.message_format,
            crate::config::sinks::redis::MessageFormat::Extended
        );
        assert_eq!(
            (r.null_key.as_str(), r.null_value.as_str()),
            ("nokey", "tombstone")
        );
        let d = load(REDIS, &[("REDIS_PW", "x")]).unwrap_or_else(|e| panic!("{e}"));
        let SinkConfig::Redis(r) = &d.sink else {
            panic!("{:?}", d.sink)
        };
        // Debezium Server's defaults.
        assert_eq!(
            r.message_format,
            crate::config::sinks::redis::MessageFormat::Compact
        );
        assert_eq!(
            (r.null_key.as_str(), r.null_value.as_str()),
            ("default", "default")
        );
    }

    #[test]
    fn a_redis_server_file_imports_with_its_sink_and_secrets() {
        let env = [
            ("REDIS_PW", "redis-secret"),
            ("DEBEZIUM_SOURCE_DATABASE_PASSWORD", "pg-env"),
        ];
        let c = load(REDIS, &env).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(c.name, "shop");
        let SinkConfig::Redis(r) = &c.sink else {
            panic!("{:?}", c.sink)
        };
        assert_eq!(r.url, "redis://127.0.0.1:6379");
        assert_eq!(r.auth.user.as_deref(), Some("outboxd"));
        assert_eq!(
            r.auth.password.as_ref().map(|p| p.expose()),
            Some("redis-secret")
        );
        assert_eq!(c.checkpoint, CheckpointConfig::Sink {});
        let crate::config::SourceConfig::Postgres(pg) = &c.source else {
            panic!()
        };
        assert_eq!(pg.password.expose(), "pg-env");
        assert!(c.kafka.bootstrap_servers.is_empty());
        let ignored: Vec<&str> = c.ignored_keys.iter().map(|(k, _)| k.as_str()).collect();
        assert!(
            ignored.contains(&"debezium.sink.redis.batch.size"),
            "{ignored:?}"
        );
        assert!(ignored.contains(&"quarkus.log.console.json"), "{ignored:?}");
    }

    #[test]
    fn a_nats_jetstream_server_file_imports_with_its_stream() {
        let text = REDIS
            .replace("debezium.sink.type=redis", "debezium.sink.type=nats-jetstream")
            .replace(
                "debezium.sink.redis.address=127.0.0.1:6379",
                "debezium.sink.nats-jetstream.url=nats://nats:4222\n\
                 debezium.sink.nats-jetstream.create-stream=true\n\
                 debezium.sink.nats-jetstream.subjects=shop.>,audit.*",
            )
            .replace("debezium.sink.redis.user", "debezium.sink.nats-jetstream.auth.user")
            .replace("debezium.sink.redis.password", "debezium.sink.nats-jetstream.auth.password")
            .replace("debezium.sink.redis.batch.size=500\n", "debezium.sink.nats-jetstream.async.enabled=true\n")
            .replace(
                "debezium.source.offset.storage=io.debezium.storage.redis.offset.RedisOffsetBackingStore\n",
                "",
            );
        let c = load(&text, &[("REDIS_PW", "nats-secret")]).unwrap_or_else(|e| panic!("{e}"));
        let SinkConfig::Nats(n) = &c.sink else {
            panic!("{:?}", c.sink)
        };
        assert_eq!(n.url, "nats://nats:4222");
        assert_eq!(n.auth.user.as_deref(), Some("outboxd"));
        assert_eq!(
            n.auth.password.as_ref().map(|p| p.expose()),
            Some("nats-secret")
        );
        let s = n.stream.as_ref().expect("a stream");
        assert_eq!(s.name, "DebeziumStream", "Debezium Server's default name");
        assert!(s.create);
        assert_eq!(s.subjects, ["shop.>", "audit.*"]);
        assert_eq!(
            s.storage,
            crate::config::sinks::nats::NatsStorage::Memory,
            "Debezium Server's default storage"
        );
        assert_eq!(c.checkpoint, CheckpointConfig::Sink {});
    }

    #[test]
    fn a_rabbitmq_server_file_keeps_its_checkpoint_beside_the_offsets() {
        let text = REDIS
            .replace("debezium.sink.type=redis", "debezium.sink.type=rabbitmq")
            .replace("debezium.sink.redis.address=127.0.0.1:6379", "debezium.sink.rabbitmq.connection.host=mq\ndebezium.sink.rabbitmq.connection.port=5673\ndebezium.sink.rabbitmq.exchange=outbox")
            .replace("debezium.sink.redis.user", "debezium.sink.rabbitmq.connection.username")
            .replace("debezium.sink.redis.password", "debezium.sink.rabbitmq.connection.password")
            .replace("debezium.sink.redis.batch.size=500\n", "")
            .replace(
                "debezium.source.offset.storage=io.debezium.storage.redis.offset.RedisOffsetBackingStore",
                "debezium.source.offset.storage.file.filename=/var/lib/dbz/offsets.dat",
            );
        let c = load(&text, &[("REDIS_PW", "x")]).unwrap_or_else(|e| panic!("{e}"));
        let SinkConfig::RabbitMq(r) = &c.sink else {
            panic!("{:?}", c.sink)
        };
        assert_eq!(r.url, "amqp://mq:5673/%2f");
        assert_eq!(r.exchange, "outbox");
        let keyed = text.replace(
            "rabbitmq.exchange=outbox",
            "rabbitmq.exchange=outbox\ndebezium.sink.rabbitmq.routingKey=events\n\
             debezium.sink.rabbitmq.ackTimeout=5000\ndebezium.sink.rabbitmq.autoCreateRoutingKey=true",
        );
        let c = load(&keyed, &[("REDIS_PW", "x")]).unwrap_or_else(|e| panic!("{e}"));
        let SinkConfig::RabbitMq(k) = &c.sink else {
            panic!("{:?}", c.sink)
        };
        assert_eq!(k.routing_key.as_deref(), Some("events"));
        assert_eq!(k.confirm_timeout_ms, 5000);
        assert_eq!(
            r.routing_key.as_deref(),
            Some(""),
            "Debezium Server's default key"
        );
        assert!(!r.exchange_from_topic);
        let by_topic = text
            .replace("debezium.sink.rabbitmq.exchange=outbox\n", "")
            .replace(
                "connection.port=5673",
                "connection.port=5673\ndebezium.sink.rabbitmq.routingKeyFromTopicName=true",
            );
        let c = load(&by_topic, &[("REDIS_PW", "x")]).unwrap_or_else(|e| panic!("{e}"));
        let SinkConfig::RabbitMq(t) = &c.sink else {
            panic!("{:?}", c.sink)
        };
        assert!(
            t.exchange_from_topic,
            "no exchange: the topic's, as Debezium Server does"
        );
        assert_eq!(t.exchange, "");
        assert_eq!(t.routing_key, None, "the topic");
        assert_eq!(
            c.checkpoint,
            CheckpointConfig::File {
                path: "/var/lib/dbz/outboxd.shop.checkpoint.json".into()
            }
        );
    }

    #[test]
    fn what_outboxd_cannot_honour_is_refused_with_the_key() {
        let e = |text: String| match load(&text, &[("REDIS_PW", "x")]) {
            Ok(c) => panic!("expected an error, got {c:?}"),
            Err(e) => e.to_string(),
        };
        let unknown = e(REDIS.replace("=redis\n", "=pubsub\n"));
        assert!(unknown.contains("not one outboxd delivers to"), "{unknown}");
        let avro = e(REDIS.replace("format.value=simplestring", "format.value=avro"));
        assert!(avro.contains("debezium.format.value"), "{avro}");
        let odd = e(format!("{REDIS}debezium.sink.redis.message.mystery=1\n"));
        assert!(odd.contains("debezium.sink.redis.message.mystery"), "{odd}");
        let unset = load(REDIS, &[]).map(|_| ()).unwrap_err().to_string();
        assert!(unset.contains("REDIS_PW is not set"), "{unset}");
    }
}
