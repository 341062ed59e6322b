//! `[connectors.sink] type = "rabbitmq"`: records published over AMQP 0-9-1 with publisher
//! confirms, the routed topic as the routing key; the checkpoint in a file
//! (`[connectors.checkpoint] store = "file"`).
//!
//! Keys (besides the shared `user`, `password*`, `tls_*`):
//! `url`, `exchange`, `exchange_from_topic`, `routing_key`, `exchange_type`,
//! `confirm_timeout_ms`, `max_message_bytes`. They follow Debezium Server's RabbitMQ sink
//! (`debezium.sink.rabbitmq.exchange`, `.routingKey`, `.ackTimeout`) where it has one.

use serde::Deserialize;

use super::auth::{AuthToml, SinkAuth};
use crate::config::error::ConfigError;
use crate::config::load::LoadCtx;

/// The default `confirm_timeout_ms`: Debezium Server's `debezium.sink.rabbitmq.ackTimeout`.
pub const DEFAULT_CONFIRM_TIMEOUT_MS: u64 = 30_000;
/// The default `max_message_bytes`: RabbitMQ 4's default `max_message_size` (16 MiB; 3.x
/// defaults to 128 MiB).
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;
/// The exchange types `exchange_type` takes (RabbitMQ's built-in ones).
const EXCHANGE_TYPES: [&str; 4] = ["direct", "topic", "fanout", "headers"];

/// Raw TOML of a RabbitMQ sink.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RabbitMqToml {
    url: String,
    #[serde(default)]
    exchange: Option<String>,
    #[serde(default)]
    exchange_from_topic: bool,
    #[serde(default)]
    routing_key: Option<String>,
    #[serde(default)]
    exchange_type: Option<String>,
    #[serde(default)]
    confirm_timeout_ms: Option<u64>,
    #[serde(default)]
    max_message_bytes: Option<usize>,
}

/// A RabbitMQ sink.
#[derive(Debug, Clone, PartialEq)]
pub struct RabbitMqSinkConfig {
    /// Server URL without credentials: `amqp://host:5672/<vhost>` (`amqps://` for TLS; the
    /// vhost percent-encoded, `%2f` for `/`). Query options of the AMQP URI spec
    /// (`heartbeat`, `connection_timeout`, `auth_mechanism=external`) are honoured.
    pub url: String,
    /// The exchange records are published to, the routed topic as the routing key; default
    /// `""` (the default exchange: the topic names the queue).
    pub exchange: String,
    /// Each record goes to the exchange named by its routed topic (Debezium Server's
    /// RabbitMQ sink when `debezium.sink.rabbitmq.exchange` is unset); `exchange` is then
    /// unset.
    pub exchange_from_topic: bool,
    /// A fixed routing key for every record instead of the routed topic (Debezium Server's
    /// `routingKey`); `None`: the topic.
    pub routing_key: Option<String>,
    /// When set, `exchange` is declared (durable) with this type (`direct`, `topic`,
    /// `fanout`, `headers`) when the sink opens; when not, it must exist (checked at open).
    pub exchange_type: Option<String>,
    /// How long a published message may wait for its confirm before the run fails
    /// (transient), in milliseconds (default 30,000; a broker blocked by a memory or disk
    /// alarm confirms nothing).
    pub confirm_timeout_ms: u64,
    /// The largest record (`KafkaRecord::approx_size`) sent; larger ones are refused before
    /// sending (dead-lettered without their value under `errors.tolerance = "all"`). Set it
    /// to the broker's `max_message_size` (default 16 MiB).
    pub max_message_bytes: usize,
    /// Login and TLS.
    pub auth: SinkAuth,
}

impl RabbitMqToml {
    /// Checks `[here]`. Errors: an empty or unparsable URL (or one with credentials in it),
    /// an unknown exchange type, `exchange_type` for the default exchange, zero limits, a
    /// name over AMQP's 255 bytes, a bad login or TLS setting.
    pub(crate) fn build(
        self,
        auth: AuthToml,
        here: &str,
        ctx: &LoadCtx<'_>,
    ) -> Result<RabbitMqSinkConfig, ConfigError> {
        if self.url.trim().is_empty() {
            return Err(ctx.invalid(format!("{here}.url"), "must not be empty"));
        }
        match self.url.parse::<lapin::uri::AMQPUri>() {
            Err(e) => {
                return Err(ctx.invalid(
                    format!("{here}.url"),
                    format!(
                        "is not an AMQP URI ({e}); write amqp://host:5672/vhost (amqps:// for \
                         TLS, %2f for the vhost /)"
                    ),
                ))
            }
            Ok(_) if has_userinfo(&self.url) => {
                return Err(ctx.invalid(
                    format!("{here}.url"),
                    "carries a user or password; set `user` and `password` (or \
                     password_env/password_file) instead, so the password is never printed",
                ))
            }
            Ok(_) => {}
        }
        let exchange = self.exchange.unwrap_or_default();
        for (key, name) in [
            ("exchange", Some(&exchange)),
            ("routing_key", self.routing_key.as_ref()),
        ] {
            if name.is_some_and(|n| n.len() > 255) {
                return Err(ctx.invalid(format!("{here}.{key}"), "is longer than AMQP's 255 bytes"));
            }
        }
        if self.exchange_from_topic && (!exchange.is_empty() || self.exchange_type.is_some()) {
            return Err(ctx.invalid(
                format!("{here}.exchange_from_topic"),
                "names each record's exchange by its topic: remove `exchange` and \
                 `exchange_type` (declare one exchange per topic yourself)",
            ));
        }
        if let Some(t) = &self.exchange_type {
            if !EXCHANGE_TYPES.contains(&t.as_str()) {
                return Err(ctx.invalid(
                    format!("{here}.exchange_type"),
                    format!("must be one of {}", EXCHANGE_TYPES.join(", ")),
                ));
            }
            if exchange.is_empty() {
                return Err(ctx.invalid(
                    format!("{here}.exchange_type"),
                    "declares `exchange`, which is not set (the default exchange \"\" always \
                     exists); set exchange = \"...\" or remove exchange_type",
                ));
            }
        }
        if self.confirm_timeout_ms == Some(0) || self.max_message_bytes == Some(0) {
            return Err(ctx.invalid(
                here,
                "confirm_timeout_ms and max_message_bytes must be greater than 0",
            ));
        }
        Ok(RabbitMqSinkConfig {
            url: self.url,
            exchange,
            exchange_from_topic: self.exchange_from_topic,
            routing_key: self.routing_key,
            exchange_type: self.exchange_type,
            confirm_timeout_ms: self
                .confirm_timeout_ms
                .unwrap_or(DEFAULT_CONFIRM_TIMEOUT_MS),
            max_message_bytes: self.max_message_bytes.unwrap_or(DEFAULT_MAX_MESSAGE_BYTES),
            auth: auth.build(here, ctx)?,
        })
    }
}

/// Whether `url` has a `user[:password]@` part.
fn has_userinfo(url: &str) -> bool {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split(['/', '?']).next().unwrap_or("");
    authority.contains('@')
}

#[cfg(test)]
mod tests {
    use super::has_userinfo;

    #[test]
    fn credentials_in_the_url_are_seen() {
        assert!(has_userinfo("amqp://u:p@h:5672/%2f"));
        assert!(has_userinfo("amqps://u@h"));
        assert!(!has_userinfo("amqp://h:5672/%2f"));
        assert!(!has_userinfo("amqp://h:5672/v@x"));
    }
}
