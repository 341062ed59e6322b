//! `[connectors.sink] type = "redis"`: records appended to Redis streams (`XADD`, the routed
//! topic as the stream key), the checkpoint written by the same Lua script as the records
//! (`crate::sink::redis`).
//!
//! TOML (every key but `url` optional):
//! ```toml
//! [connectors.sink]
//! type = "redis"
//! url = "redis://127.0.0.1:6379/0"     # rediss:// for TLS
//! user = "outboxd"                      # ACL user; password / password_env / password_file
//! password_env = "REDIS_PASSWORD"
//! tls_ca = "/etc/outboxd/redis-ca.pem"  # tls_cert + tls_key for mutual TLS
//! checkpoint_key = "outboxd:checkpoint:shop"
//! message_format = "extended"           # or "compact" (default, as Debezium Server)
//! null_key = "default"                  # field text for a record without key / value
//! null_value = "default"
//! maxlen = 1000000                      # XADD MAXLEN ~ n (approximate trimming)
//! wait_replicas = 1                     # WAIT 1 <wait_timeout> after every commit
//! wait_timeout = 1000                   # ms
//! batch_max_events = 5000               # records per commit script
//! batch_max_bytes = 8388608
//! ```

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
    #[serde(default)]
    message_format: Option<String>,
    #[serde(default)]
    null_key: Option<String>,
    #[serde(default)]
    null_value: Option<String>,
    #[serde(default)]
    maxlen: Option<u64>,
    #[serde(default)]
    allow_default_user_off: bool,
    #[serde(default)]
    wait_replicas: Option<u32>,
    #[serde(default)]
    wait_timeout: Option<u64>,
    #[serde(default)]
    batch_max_events: Option<usize>,
    #[serde(default)]
    batch_max_bytes: Option<usize>,
}

/// How a record is laid out in a stream entry (Debezium Server's
/// `debezium.sink.redis.message.format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MessageFormat {
    /// One field: the record key is the field name, the value its value (Debezium Server's
    /// default). Headers are not written.
    #[default]
    Compact,
    /// Fields `key` and `value`, then one field per header, its name upper-cased (as
    /// Debezium Server writes them: `ID`, and the placements' names).
    Extended,
}

/// A Redis Streams sink.
#[derive(Debug, Clone, PartialEq)]
pub struct RedisSinkConfig {
    /// Server URL: `redis://host:6379` (`rediss://` for TLS), optionally `/<db>`; a user and
    /// password in the URL are used unless `user`/`password*` are set.
    pub url: String,
    /// The key holding the connector's checkpoint (`checkpoint_key`); `None`:
    /// `outboxd:checkpoint:<connector>` ([`RedisSinkConfig::checkpoint_key`]). Its fencing
    /// epoch is kept in `<checkpoint_key>:epoch`.
    pub checkpoint_key: Option<String>,
    /// Entry layout (`message_format`: `"compact"`, the default, or `"extended"`).
    pub message_format: MessageFormat,
    /// The text written for a record without a key (`null_key`, default `default`, as
    /// Debezium Server's `debezium.sink.redis.null.key`).
    pub null_key: String,
    /// The text written for a record without a value, a tombstone (`null_value`, default
    /// `default`, as Debezium Server's `debezium.sink.redis.null.value`).
    pub null_value: String,
    /// `XADD ... MAXLEN ~ n`: approximate trimming of each stream to about `n` entries
    /// (`maxlen`); `None`: no trimming.
    pub maxlen: Option<u64>,
    /// After every commit, `WAIT <wait_replicas> <wait_timeout>`: the commit counts only once
    /// that many replicas acknowledged it (`wait_replicas`, 0 = no WAIT).
    pub wait_replicas: u32,
    /// How long `WAIT` waits, in milliseconds (`wait_timeout`, default 1000; at least 1).
    pub wait_timeout_ms: u64,
    /// Most records per commit script (`batch_max_events`, default 5,000). Redis serves no
    /// other client while the script runs: about 50 ms for 5,000 entries of 400 bytes.
    pub batch_max_events: usize,
    /// Most record bytes per commit script (`batch_max_bytes`, default 8 MiB).
    pub batch_max_bytes: usize,
    /// Run against a server whose `default` user is off (`allow_default_user_off`, default
    /// false): Redis 7.0 replays the append-only file's transactions as `default` and drops
    /// them with it off (redis/redis#14541), so the exactly-once sink refuses such a server
    /// unless its Redis is known to have the fix.
    pub allow_default_user_off: bool,
    /// Login and TLS.
    pub auth: SinkAuth,
}

impl RedisToml {
    /// Checks `[here]`. Errors: an empty URL or one that is not `redis://`/`rediss://`, an
    /// unknown `message_format`, `maxlen = 0`, `wait_timeout = 0`, a bad login or TLS
    /// setting.
    pub(crate) fn build(
        self,
        auth: AuthToml,
        here: &str,
        ctx: &LoadCtx<'_>,
    ) -> Result<RedisSinkConfig, ConfigError> {
        let url = self.url.trim();
        if url.is_empty() {
            return Err(ctx.invalid(format!("{here}.url"), "must not be empty"));
        }
        if !(url.starts_with("redis://") || url.starts_with("rediss://")) {
            return Err(ctx.invalid(
                format!("{here}.url"),
                "must start with redis:// (or rediss:// for TLS), e.g. redis://127.0.0.1:6379/0",
            ));
        }
        let message_format = match self.message_format.as_deref() {
            None | Some("compact") => MessageFormat::Compact,
            Some("extended") => MessageFormat::Extended,
            Some(other) => {
                return Err(ctx.invalid(
                    format!("{here}.message_format"),
                    format!("\"{other}\" is not a format: use \"compact\" or \"extended\""),
                ))
            }
        };
        if self.maxlen == Some(0) {
            return Err(ctx.invalid(
                format!("{here}.maxlen"),
                "must be at least 1 (leave it out for no trimming)",
            ));
        }
        if self.wait_timeout == Some(0) {
            return Err(ctx.invalid(
                format!("{here}.wait_timeout"),
                "must be at least 1 ms (WAIT with 0 would block for ever)",
            ));
        }
        if self.batch_max_events == Some(0) || self.batch_max_bytes == Some(0) {
            return Err(ctx.invalid(
                format!("{here}.batch_max_events"),
                "batch_max_events and batch_max_bytes must be at least 1",
            ));
        }
        if self.checkpoint_key.as_deref().is_some_and(|k| k.is_empty()) {
            return Err(ctx.invalid(format!("{here}.checkpoint_key"), "must not be empty"));
        }
        Ok(RedisSinkConfig {
            url: url.to_string(),
            checkpoint_key: self.checkpoint_key,
            message_format,
            null_key: self.null_key.unwrap_or_else(|| "default".into()),
            null_value: self.null_value.unwrap_or_else(|| "default".into()),
            maxlen: self.maxlen,
            allow_default_user_off: self.allow_default_user_off,
            wait_replicas: self.wait_replicas.unwrap_or(0),
            wait_timeout_ms: self.wait_timeout.unwrap_or(1000),
            batch_max_events: self.batch_max_events.unwrap_or(5_000),
            batch_max_bytes: self.batch_max_bytes.unwrap_or(8 * 1024 * 1024),
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
