//! `[connectors.sink] type = "nats-jetstream"`: records published to JetStream, the routed
//! topic as the subject, the checkpoint in a JetStream key-value bucket.

use std::time::Duration;

use serde::Deserialize;

use super::auth::{AuthToml, SinkAuth};
use crate::config::duration;
use crate::config::error::ConfigError;
use crate::config::load::LoadCtx;

/// Raw TOML of a NATS JetStream sink.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct NatsToml {
    url: String,
    #[serde(default)]
    checkpoint_bucket: Option<String>,
    #[serde(default, deserialize_with = "duration::deserialize_opt")]
    ack_timeout: Option<Duration>,
}

/// A NATS JetStream sink.
#[derive(Debug, Clone, PartialEq)]
pub struct NatsSinkConfig {
    /// Server URL(s), comma-separated: `nats://host:4222` (`tls://` for TLS).
    pub url: String,
    /// The JetStream key-value bucket holding the checkpoint (key: the connector name);
    /// default `outboxd_checkpoints`.
    pub checkpoint_bucket: String,
    /// Longest wait for a publish acknowledgement (default 10 s).
    pub ack_timeout: Duration,
    /// Login and TLS.
    pub auth: SinkAuth,
}

impl NatsToml {
    /// Checks `[here]`. Errors: an empty URL, a bad login or TLS setting.
    pub(crate) fn build(
        self,
        auth: AuthToml,
        here: &str,
        ctx: &LoadCtx<'_>,
    ) -> Result<NatsSinkConfig, ConfigError> {
        if self.url.trim().is_empty() {
            return Err(ctx.invalid(format!("{here}.url"), "must not be empty"));
        }
        Ok(NatsSinkConfig {
            url: self.url,
            checkpoint_bucket: self
                .checkpoint_bucket
                .unwrap_or_else(|| "outboxd_checkpoints".into()),
            ack_timeout: self.ack_timeout.unwrap_or(Duration::from_secs(10)),
            auth: auth.build(here, ctx)?,
        })
    }
}
