//! `[connectors.sink] type = "redis"`: records appended to Redis streams (`XADD`, the routed
//! topic as the stream key), the checkpoint written in the same `MULTI`/`EXEC`.

use serde::Deserialize;

use super::auth::{AuthToml, SinkAuth};
use crate::config::error::ConfigError;
use crate::config::load::LoadCtx;

/// Raw TOML of a Redis Streams sink.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RedisToml {
    url: String,
    #[serde(default)]
    checkpoint_key: Option<String>,
}

/// A Redis Streams sink.
#[derive(Debug, Clone, PartialEq)]
pub struct RedisSinkConfig {
    /// Server URL: `redis://host:6379` (`rediss://` for TLS), optionally `/<db>`.
    pub url: String,
    /// The key holding the connector's checkpoint (`checkpoint_key`); `None`:
    /// `outboxd:checkpoint:<connector>` ([`RedisSinkConfig::checkpoint_key`]).
    pub checkpoint_key: Option<String>,
    /// Login and TLS.
    pub auth: SinkAuth,
}

impl RedisToml {
    /// Checks `[here]`. Errors: an empty URL, a bad login or TLS
    /// setting.
    pub(crate) fn build(
        self,
        auth: AuthToml,
        here: &str,
        ctx: &LoadCtx<'_>,
    ) -> Result<RedisSinkConfig, ConfigError> {
        if self.url.trim().is_empty() {
            return Err(ctx.invalid(format!("{here}.url"), "must not be empty"));
        }
        Ok(RedisSinkConfig {
            url: self.url,
            checkpoint_key: self.checkpoint_key,
            auth: auth.build(here, ctx)?,
        })
    }
}

impl RedisSinkConfig {
    /// The key holding connector `connector`'s checkpoint.
    pub fn checkpoint_key(&self, connector: &str) -> String {
        self.checkpoint_key
            .clone()
            .unwrap_or_else(|| format!("outboxd:checkpoint:{connector}"))
    }
}
