//! Debezium Server's sink keys (`debezium.sink.<type>.*`, from each sink's
//! `*ChangeConsumerConfig` in Debezium Server) as outboxd's `[connectors.sink]` table
//! (`crate::config::sinks`): renamed where outboxd has the setting, reported where it has
//! no effect on what is delivered, refused where outboxd cannot do what it asks.

use std::collections::BTreeMap;

/// What becomes of one Debezium Server sink key.
enum Map {
    /// Refused: what to set instead.
    Refuse(&'static str),
    /// The outboxd TOML key, same value.
    To(&'static str),
    /// Not used: the reason (it has no effect on what is delivered, or outboxd does it its
    /// own way).
    Ignore(&'static str),
}

const RETRIES: &str = "outboxd retries with its own backoff from the checkpoint";
const BATCHING: &str = "outboxd batches by its own bounds";

/// The mapping of sink `kind`'s keys.
fn rule(kind: &str, key: &str) -> Option<Map> {
    use Map::{Ignore, Refuse, To};
    Some(match (kind, key) {
        ("nats-jetstream", "url") => To("url"),
        ("nats-jetstream", "auth.user") => To("user"),
        ("nats-jetstream", "auth.password") => To("password"),
        ("nats-jetstream", "async.enabled" | "async.timeout.ms") => {
            Ignore("outboxd always publishes asynchronously and awaits every acknowledgement")
        }
        ("nats-jetstream", k) if k.starts_with("sync.") => Ignore(RETRIES),
        ("nats-jetstream", "auth.seed") => To("nkey_seed"),
        ("redis", "user") => To("user"),
        ("redis", "password") => To("password"),
        ("redis", "message.format") => To("message_format"),
        ("redis", "null.key") => To("null_key"),
        ("redis", "null.value") => To("null_value"),
        ("redis", "batch.size") => Ignore(BATCHING),
        ("redis", "connection.timeout.ms" | "socket.timeout.ms") => {
            Ignore("outboxd's own timeouts apply")
        }
        ("redis", k) if k.starts_with("retry.") => Ignore(RETRIES),
        ("redis", k) if k.starts_with("wait.") => Refuse(
            "outboxd waits for replicas by count: set wait_replicas and wait_timeout in \
             [connectors.sink] (TOML) instead",
        ),
        ("redis", k) if k.starts_with("memory.") || k == "buffer.fill.rate" => Ignore(
            "outboxd does not throttle on Redis memory; Redis refuses writes at maxmemory and \
             outboxd retries",
        ),
        ("rabbitmq", "exchange") => To("exchange"),
        ("rabbitmq", "connection.username") => To("user"),
        ("rabbitmq", "connection.password") => To("password"),
        ("rabbitmq", "routingKey") => To("routing_key"),
        ("rabbitmq", "autoCreateRoutingKey" | "routingKeyDurable") => Ignore(
            "outboxd declares no queues: declare and bind them yourself (a message no queue is \
             bound for is refused, never dropped)",
        ),
        ("rabbitmq", "null.value") => Ignore(
            "a tombstone (NULL payload) is published with an empty body and the header \
                 outboxd.tombstone = true",
        ),
        _ => return None,
    })
}

/// The `[connectors.sink]` table of a Debezium Server sink `kind` with `keys` (the part
/// after `debezium.sink.<kind>.`), `here` = `debezium.sink.<kind>`. Keys without effect
/// are added to `ignored`. Errors: (key, message) for a key outboxd cannot honour or an
/// unknown sink type.
pub(super) fn sink_table(
    kind: &str,
    mut keys: BTreeMap<String, String>,
    here: &str,
    ignored: &mut Vec<(String, String)>,
) -> Result<toml::Table, (String, String)> {
    if !["nats-jetstream", "redis", "rabbitmq"].contains(&kind) {
        return Err((
            "debezium.sink.type".into(),
            format!(
                "sink type {kind:?} is not one outboxd delivers to; it delivers to kafka, \
                 nats-jetstream, redis and rabbitmq"
            ),
        ));
    }
    let mut t = toml::Table::new();
    t.insert("type".into(), toml::Value::String(kind.into()));
    let at = |k: &str| format!("{here}.{k}");
    match kind {
        "redis" => {
            let address = keys
                .remove("address")
                .ok_or_else(|| (at("address"), "is missing: host:port of Redis".to_string()))?;
            let tls = keys
                .remove("ssl.enabled")
                .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"));
            let db = keys.remove("db.index").filter(|d| d.trim() != "0");
            let scheme = if tls { "rediss" } else { "redis" };
            let url = match db {
                Some(db) => format!("{scheme}://{}/{}", address.trim(), db.trim()),
                None => format!("{scheme}://{}", address.trim()),
            };
            t.insert("url".into(), toml::Value::String(url));
        }
        "rabbitmq" => {
            let host = keys
                .remove("connection.host")
                .unwrap_or_else(|| "localhost".into());
            let port = keys
                .remove("connection.port")
                .unwrap_or_else(|| "5672".into());
            let vhost = keys
                .remove("connection.virtual.host")
                .or_else(|| keys.remove("connection.virtualHost"))
                .unwrap_or_else(|| "/".into());
            let vhost = vhost.replace('%', "%25").replace('/', "%2f");
            let url = format!("amqp://{}:{}/{vhost}", host.trim(), port.trim());
            t.insert("url".into(), toml::Value::String(url));
            if let Some(ms) = keys.remove("ackTimeout") {
                let ms: i64 = ms.trim().parse().ok().filter(|ms| *ms > 0).ok_or_else(|| {
                    (
                        at("ackTimeout"),
                        "must be a positive number of milliseconds".to_string(),
                    )
                })?;
                t.insert("confirm_timeout_ms".into(), toml::Value::Integer(ms));
            }
            // Debezium Server publishes to the exchange named by the topic unless `exchange`
            // is set, and with the routing key "" unless `routingKey` is set or
            // `routingKeyFromTopicName=true` (the topic): the same here.
            if !keys.contains_key("exchange") {
                t.insert("exchange_from_topic".into(), toml::Value::Boolean(true));
            }
            let from_topic = keys
                .remove("routingKeyFromTopicName")
                .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"));
            if !from_topic && !keys.contains_key("routingKey") {
                t.insert("routing_key".into(), toml::Value::String(String::new()));
            }
            if let Some(mode) = keys.remove("deliveryMode") {
                if mode.trim() != "2" {
                    return Err((
                        at("deliveryMode"),
                        format!(
                            "is {}; outboxd always publishes persistent messages (2), which \
                             outbox events need; remove it",
                            mode.trim()
                        ),
                    ));
                }
            }
        }
        "nats-jetstream" => nats_stream(&mut keys, &mut t, ignored, &at)?,
        _ => {}
    }
    for (k, v) in keys {
        match rule(kind, &k) {
            Some(Map::To(to)) => {
                t.insert(to.into(), toml::Value::String(v));
            }
            Some(Map::Ignore(why)) => ignored.push((at(&k), why.into())),
            Some(Map::Refuse(what)) => return Err((at(&k), format!("is refused: {what}"))),
            None => {
                return Err((
                    at(&k),
                    format!(
                        "is not a setting outboxd can reproduce for the {kind} sink; remove it \
                         or set the sink in TOML ([connectors.sink], see README \"Other brokers\")"
                    ),
                ))
            }
        }
    }
    Ok(t)
}

/// Debezium Server's NATS JetStream stream keys: with `create-stream=true` the stream
/// `stream-name` (default `DebeziumStream`) capturing `subjects` (comma-separated, default
/// `*.*.*`) with `storage` (default `memory`) is created when missing, as there; without, a
/// given `stream-name` is checked at start and `subjects`/`storage` have no effect.
fn nats_stream(
    keys: &mut BTreeMap<String, String>,
    t: &mut toml::Table,
    ignored: &mut Vec<(String, String)>,
    at: &dyn Fn(&str) -> String,
) -> Result<(), (String, String)> {
    let create = keys
        .remove("create-stream")
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"));
    let name = keys.remove("stream-name");
    let subjects = keys.remove("subjects");
    let storage = keys.remove("storage");
    if create {
        let name = name.unwrap_or_else(|| "DebeziumStream".into());
        let subjects = subjects.unwrap_or_else(|| "*.*.*".into());
        t.insert("stream".into(), toml::Value::String(name.trim().into()));
        t.insert("create_stream".into(), toml::Value::Boolean(true));
        t.insert(
            "subjects".into(),
            toml::Value::Array(
                subjects
                    .split(',')
                    .map(|s| toml::Value::String(s.trim().into()))
                    .filter(|v| v.as_str().is_some_and(|s| !s.is_empty()))
                    .collect(),
            ),
        );
        let storage = storage.unwrap_or_else(|| "memory".into());
        t.insert("storage".into(), toml::Value::String(storage.trim().into()));
    } else {
        if let Some(name) = name {
            t.insert("stream".into(), toml::Value::String(name.trim().into()));
        }
        for (k, v) in [("subjects", subjects), ("storage", storage)] {
            if v.is_some() {
                ignored.push((at(k), "used only with create-stream=true".into()));
            }
        }
    }
    Ok(())
}
