//! `[connectors.sink] type = "rabbitmq"`: records published over AMQP 0-9-1 with publisher
//! confirms, the routed topic as the routing key; the checkpoint in a file
//! (`[connectors.checkpoint] store = "file"`).

use serde::Deserialize;

use super::auth::{AuthToml, SinkAuth};
use crate::config::error::ConfigError;
use crate::config::load::LoadCtx;

/// Raw TOML of a RabbitMQ sink.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RabbitMqToml {
    url: String,
    #[serde(default)]
    exchange: Option<String>,
}

/// A RabbitMQ sink.
#[derive(Debug, Clone, PartialEq)]
pub struct RabbitMqSinkConfig {
    /// Server URL without credentials: `amqp://host:5672/<vhost>` (`amqps://` for TLS).
    pub url: String,
    /// The exchange records are published to, the routed topic as the routing key; default
    /// `""` (the default exchange: the topic names the queue).
    pub exchange: String,
    /// Login and TLS.
    pub auth: SinkAuth,
}

impl RabbitMqToml {
    /// Checks `[here]`. Errors: an empty URL, a bad login or TLS setting.
    pub(crate) fn build(
        self,
        auth: AuthToml,
        here: &str,
        ctx: &LoadCtx<'_>,
    ) -> Result<RabbitMqSinkConfig, ConfigError> {
        if self.url.trim().is_empty() {
            return Err(ctx.invalid(format!("{here}.url"), "must not be empty"));
        }
        Ok(RabbitMqSinkConfig {
            url: self.url,
            exchange: self.exchange.unwrap_or_default(),
            auth: auth.build(here, ctx)?,
        })
    }
}
