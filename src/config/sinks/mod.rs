//! `[connectors.sink]`: where a connector's records go. Kafka (the default, configured by
//! `[connectors.kafka]` and the process-wide `[kafka]`), NATS JetStream, Redis Streams or
//! RabbitMQ. Each non-Kafka sink has its own settings module; they share the secret and TLS
//! settings' shapes with the source (`password`, `password_env`, `password_file`).
//!
//! TOML:
//! ```toml
//! [connectors.sink]
//! type = "nats-jetstream"   # or "redis", "rabbitmq"; "kafka" (default) takes no keys here
//! url = "nats://127.0.0.1:4222"
//! ```

mod auth;
pub mod nats;
pub mod rabbitmq;
pub mod redis;

pub use auth::SinkAuth;
pub use nats::NatsSinkConfig;
pub use rabbitmq::RabbitMqSinkConfig;
pub use redis::RedisSinkConfig;

/// Where a connector's records go.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum SinkConfig {
    /// Kafka, through librdkafka: `[connectors.kafka]` (TOML `type = "kafka"`, the default).
    #[default]
    Kafka,
    /// NATS JetStream (TOML `type = "nats-jetstream"`).
    Nats(NatsSinkConfig),
    /// Redis Streams (TOML `type = "redis"`).
    Redis(RedisSinkConfig),
    /// RabbitMQ, AMQP 0-9-1 (TOML `type = "rabbitmq"`).
    RabbitMq(RabbitMqSinkConfig),
}

impl SinkConfig {
    /// The TOML `type` of this sink (also the Debezium Server `debezium.sink.type`, except
    /// Kafka's).
    pub fn kind(&self) -> &'static str {
        match self {
            SinkConfig::Kafka => "kafka",
            SinkConfig::Nats(_) => "nats-jetstream",
            SinkConfig::Redis(_) => "redis",
            SinkConfig::RabbitMq(_) => "rabbitmq",
        }
    }

    /// Whether records go to Kafka.
    pub fn is_kafka(&self) -> bool {
        matches!(self, SinkConfig::Kafka)
    }

    /// Whether the sink keeps the connector's checkpoint itself (`[connectors.checkpoint]
    /// store = "sink"`, the default for NATS JetStream and Redis), and where, for messages.
    pub fn own_checkpoint(&self, connector: &str) -> Option<String> {
        match self {
            SinkConfig::Kafka | SinkConfig::RabbitMq(_) => None,
            SinkConfig::Nats(n) => Some(format!("NATS KV bucket {}", n.checkpoint_bucket)),
            SinkConfig::Redis(r) => Some(format!("Redis key {}", r.checkpoint_key(connector))),
        }
    }
}

/// The keys every non-Kafka sink's table shares ([`auth::AuthToml`]).
const AUTH_KEYS: [&str; 7] = [
    "user",
    "password",
    "password_env",
    "password_file",
    "tls_ca",
    "tls_cert",
    "tls_key",
];

/// Checks the TOML `[connectors.sink]` table (`here`): `type`
/// picks the sink; its other keys are the sink's (unknown ones are errors naming the
/// accepted keys).
pub(crate) fn from_toml(
    mut table: toml::Table,
    here: &str,
    ctx: &crate::config::load::LoadCtx<'_>,
) -> Result<SinkConfig, crate::config::error::ConfigError> {
    // The checkpoint commands load without the source's secrets, not the sink's: a sink that
    // keeps the checkpoint is reached with its login.
    let ctx = &ctx.for_sink();
    let kind =
        match table.remove("type") {
            Some(toml::Value::String(s)) => s,
            Some(_) => return Err(ctx.invalid(format!("{here}.type"), "must be a string")),
            None => return Err(ctx.invalid(
                format!("{here}.type"),
                "is missing: set type = \"kafka\", \"nats-jetstream\", \"redis\" or \"rabbitmq\"",
            )),
        };
    let mut auth = toml::Table::new();
    if kind != "kafka" {
        for k in AUTH_KEYS {
            if let Some(v) = table.remove(k) {
                auth.insert(k.to_string(), v);
            }
        }
    }
    let bad = |e: toml::de::Error| ctx.invalid(here, unknown_key_message(e.message()));
    let auth: auth::AuthToml = toml::Value::Table(auth).try_into().map_err(bad)?;
    let rest = toml::Value::Table(table);
    Ok(match kind.as_str() {
        "kafka" => {
            if let toml::Value::Table(t) = &rest {
                if let Some(k) = t.keys().next() {
                    return Err(ctx.invalid(
                        format!("{here}.{k}"),
                        "a Kafka sink takes its settings from [connectors.kafka]; remove it",
                    ));
                }
            }
            SinkConfig::Kafka
        }
        "nats-jetstream" => {
            let t: nats::NatsToml = rest.try_into().map_err(bad)?;
            SinkConfig::Nats(t.build(auth, here, ctx)?)
        }
        "redis" => {
            let t: redis::RedisToml = rest.try_into().map_err(bad)?;
            SinkConfig::Redis(t.build(auth, here, ctx)?)
        }
        "rabbitmq" => {
            let t: rabbitmq::RabbitMqToml = rest.try_into().map_err(bad)?;
            SinkConfig::RabbitMq(t.build(auth, here, ctx)?)
        }
        other => {
            return Err(ctx.invalid(
                format!("{here}.type"),
                format!(
                    "unknown sink type \"{other}\"; outboxd delivers to \"kafka\" (default), \
                     \"nats-jetstream\", \"redis\" and \"rabbitmq\""
                ),
            ))
        }
    })
}

/// serde's message for a sink table (`message`), with the shared login and TLS keys (read
/// apart, so not in serde's list of accepted keys) added to that list, and for an unknown
/// key the closest accepted one (`did you mean`), as for the rest of the file.
fn unknown_key_message(message: &str) -> String {
    let hint = super::hint::did_you_mean_also(message, &AUTH_KEYS);
    let listed =
        match message.starts_with("unknown field `") && message.contains("expected one of ") {
            true => {
                let shared: Vec<String> = AUTH_KEYS.iter().map(|k| format!("`{k}`")).collect();
                format!("{message}, {}", shared.join(", "))
            }
            false => message.to_string(),
        };
    format!("{listed}{hint}")
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::SinkConfig;
    use crate::config::CheckpointConfig;

    fn toml(sink: &str, checkpoint: &str) -> String {
        format!(
            r#"
[[connectors]]
name = "shop"
tables = ["public.outbox_events"]
[connectors.source]
kind = "postgres"
host = "127.0.0.1"
user = "outboxd"
password = "pw"
dbname = "shop"
{sink}
{checkpoint}
"#
        )
    }

    fn load(text: &str) -> Result<crate::config::ConnectorConfig, String> {
        let env = |_: &str| None;
        crate::config::parse(text, Path::new("t.toml"), None, &env)
            .map(|mut c| c.connectors.remove(0))
            .map_err(|e| e.to_string())
    }

    #[test]
    fn a_non_kafka_sink_needs_no_bootstrap_and_keeps_its_own_checkpoint() {
        let c = load(&toml(
            "[connectors.sink]\ntype = \"redis\"\nurl = \"redis://127.0.0.1:6379\"\nuser = \"u\"\npassword = \"p\"",
            "",
        ))
        .unwrap();
        assert!(matches!(c.sink, SinkConfig::Redis(_)));
        assert_eq!(c.checkpoint, CheckpointConfig::Sink {});
        assert_eq!(
            c.sink.own_checkpoint("shop").as_deref(),
            Some("Redis key outboxd:checkpoint:shop")
        );
    }

    #[test]
    fn sink_and_checkpoint_settings_that_do_not_fit_are_refused() {
        let nats = "[connectors.sink]\ntype = \"nats-jetstream\"\nurl = \"nats://127.0.0.1:4222\"";
        let rabbit = "[connectors.sink]\ntype = \"rabbitmq\"\nurl = \"amqp://127.0.0.1:5672/%2f\"";
        let kafka_store = "[connectors.checkpoint]\nstore = \"kafka\"";
        for (text, says) in [
            (toml(nats, kafka_store), "not in Kafka"),
            (
                toml(rabbit, ""),
                "RabbitMQ sink keeps its checkpoint in a file",
            ),
            (
                toml("[connectors.sink]\ntype = \"pulsar\"", ""),
                "unknown sink type",
            ),
            (
                toml(&format!("{nats}\nstreem = 1"), ""),
                "unknown field `streem`",
            ),
            (
                toml(&format!("{nats}\npassword = \"p\""), ""),
                "without `user`",
            ),
            (
                toml("[connectors.sink]\ntype = \"kafka\"\nurl = \"x\"", ""),
                "[connectors.kafka]",
            ),
            (
                toml(
                    "[connectors.kafka]\nbootstrap_servers = \"127.0.0.1:9092\"",
                    "[connectors.checkpoint]\nstore = \"sink\"",
                ),
                "non-Kafka [connectors.sink]",
            ),
        ] {
            let e = load(&text).map(|c| format!("{c:?}")).unwrap_err();
            assert!(e.contains(says), "{says}: {e}");
        }
        let file = "[connectors.checkpoint]\nstore = \"file\"\npath = \"/tmp/x.json\"";
        let c = load(&toml(rabbit, file)).unwrap();
        assert!(matches!(c.checkpoint, CheckpointConfig::File { .. }));
    }

    #[test]
    fn an_unknown_sink_key_names_the_closest_accepted_one() {
        let sink = |kind: &str, url: &str, extra: &str| {
            toml(
                &format!("[connectors.sink]\ntype = \"{kind}\"\nurl = \"{url}\"\n{extra}"),
                "[connectors.checkpoint]\nstore = \"file\"\npath = \"/tmp/x.json\"",
            )
        };
        for (text, unknown, hint) in [
            // A sink's own key.
            (
                sink("nats-jetstream", "nats://h:4222", "streem = \"S\""),
                "streem",
                "stream",
            ),
            (
                sink("redis", "redis://h:6379", "maxlenn = 5"),
                "maxlenn",
                "maxlen",
            ),
            (
                sink("rabbitmq", "amqp://h:5672/%2f", "exchang = \"x\""),
                "exchang",
                "exchange",
            ),
            // A login or TLS key, read apart from the sink's own but listed and hinted too.
            (
                sink(
                    "redis",
                    "redis://h:6379",
                    "user = \"u\"\npasword_env = \"P\"",
                ),
                "pasword_env",
                "password_env",
            ),
            (
                sink("nats-jetstream", "nats://h:4222", "tls_cacert = \"ca.pem\""),
                "tls_cacert",
                "tls_cert",
            ),
        ] {
            let e = load(&text).map(|c| format!("{c:?}")).unwrap_err();
            assert!(e.contains(&format!("unknown field `{unknown}`")), "{e}");
            assert!(
                e.contains(&format!("hint: did you mean `{hint}`?")),
                "{hint}: {e}"
            );
            assert!(
                e.contains("`password_file`"),
                "the shared keys are listed: {e}"
            );
        }
        let e = load(&sink("redis", "redis://h:6379", "zzzzzz = 1")).unwrap_err();
        assert!(
            e.contains("unknown field `zzzzzz`") && !e.contains("did you mean"),
            "{e}"
        );
    }

    /// A `[connectors.checkpoint]` table without `store` takes the sink's default store, as
    /// connectors/README.md documents (it failed with a bare "missing field `store`"); where
    /// no default fits, the message names the choice.
    #[test]
    fn a_checkpoint_table_without_store_takes_the_sinks_default() {
        let kafka = "[connectors.kafka]\nbootstrap_servers = \"127.0.0.1:9092\"";
        let c = load(&toml(
            kafka,
            "[connectors.checkpoint]\ndelivery = \"at_least_once\"",
        ))
        .unwrap();
        match c.checkpoint {
            CheckpointConfig::Kafka {
                topic, delivery, ..
            } => {
                assert_eq!(topic, "outboxd.checkpoints.shop");
                assert_eq!(delivery, crate::config::DeliveryMode::AtLeastOnce);
            }
            other => panic!("{other:?}"),
        }
        let redis = "[connectors.sink]\ntype = \"redis\"\nurl = \"redis://127.0.0.1:6379\"";
        let nats = "[connectors.sink]\ntype = \"nats-jetstream\"\nurl = \"nats://127.0.0.1:4222\"";
        for sink in [redis, nats] {
            let c = load(&toml(sink, "[connectors.checkpoint]")).unwrap();
            assert_eq!(c.checkpoint, CheckpointConfig::Sink {});
        }
        let rabbit = "[connectors.sink]\ntype = \"rabbitmq\"\nurl = \"amqp://127.0.0.1:5672/%2f\"";
        for (sink, checkpoint, says) in [
            (
                rabbit,
                "[connectors.checkpoint]",
                "store = \"file\" and path",
            ),
            (
                kafka,
                "[connectors.checkpoint]\npath = \"/tmp/x.json\"",
                "`path` is for store = \"file\"",
            ),
            (
                kafka,
                "[connectors.checkpoint]\ndelivry = \"at_least_once\"",
                "did you mean `delivery`?",
            ),
        ] {
            let e = load(&toml(sink, checkpoint))
                .map(|c| format!("{c:?}"))
                .unwrap_err();
            assert!(e.contains(says), "{says}: {e}");
            assert!(!e.contains("missing field"), "{e}");
        }
    }
}
