//! `[connectors.sink] type = "nats-jetstream"`: records published to JetStream, the routed
//! topic as the subject, the checkpoint in a JetStream key-value bucket.
//!
//! Keys besides the shared login/TLS ones (`user`, `password*`, `tls_ca`, `tls_cert`,
//! `tls_key`): `url`, `checkpoint_bucket`, `ack_timeout`, `token[_env|_file]`, `creds_file`,
//! `nkey_seed[_env|_file]`, `tls_required`, `stream`, `subjects`, `create_stream`, `storage`,
//! `duplicate_window`. Debezium Server's `debezium.sink.nats-jetstream.*` keys map onto them:
//! `url`, `stream-name` (`stream`), `create-stream`, `subjects`, `storage`, `auth.user`,
//! `auth.password`, `auth.seed` (`nkey_seed`).

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use super::auth::{AuthToml, SinkAuth};
use crate::config::duration;
use crate::config::error::ConfigError;
use crate::config::load::LoadCtx;
use crate::secret::Secret;

/// Raw TOML of a NATS JetStream sink.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct NatsToml {
    url: String,
    #[serde(default)]
    checkpoint_bucket: Option<String>,
    #[serde(default, deserialize_with = "duration::deserialize_opt")]
    ack_timeout: Option<Duration>,
    #[serde(default)]
    token: Option<String>,
    #[serde(default)]
    token_env: Option<String>,
    #[serde(default)]
    token_file: Option<PathBuf>,
    #[serde(default)]
    creds_file: Option<PathBuf>,
    #[serde(default)]
    nkey_seed: Option<String>,
    #[serde(default)]
    nkey_seed_env: Option<String>,
    #[serde(default)]
    nkey_seed_file: Option<PathBuf>,
    #[serde(default)]
    tls_required: bool,
    #[serde(default)]
    stream: Option<String>,
    #[serde(default)]
    subjects: Vec<String>,
    #[serde(default)]
    create_stream: bool,
    #[serde(default)]
    storage: Option<String>,
    #[serde(default, deserialize_with = "duration::deserialize_opt")]
    duplicate_window: Option<Duration>,
}

/// How a JetStream stream the relay creates keeps its messages (JetStream's `storage`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum NatsStorage {
    /// On disk (`file`, the default).
    #[default]
    File,
    /// In memory (`memory`: lost when the server restarts).
    Memory,
}

/// The stream the routed subjects go to, when configured (`stream`): checked at start,
/// created when `create_stream` says so.
#[derive(Debug, Clone, PartialEq)]
pub struct NatsStreamConfig {
    /// The stream's name.
    pub name: String,
    /// The subjects it captures when created (`subjects`; NATS wildcards `*` and `>`).
    pub subjects: Vec<String>,
    /// Whether the relay creates it when missing (`create_stream`, as Debezium Server's
    /// `create-stream`).
    pub create: bool,
    /// Storage of a created stream.
    pub storage: NatsStorage,
    /// Duplicate window of a created stream (default 2 min, JetStream's own default).
    pub duplicate_window: Duration,
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
    /// A token login (`token`, `token_env`, `token_file`; never printed).
    pub token: Option<Secret>,
    /// A credentials file (`creds_file`: the user JWT and its NKey seed, as `nsc` writes it).
    pub creds_file: Option<PathBuf>,
    /// An NKey seed login (`nkey_seed`, `nkey_seed_env`, `nkey_seed_file`; never printed).
    pub nkey_seed: Option<Secret>,
    /// TLS even with a `nats://` URL (`tls_required`; a `tls://` URL always uses TLS).
    pub tls_required: bool,
    /// The stream the routed subjects go to, when named (`stream`).
    pub stream: Option<NatsStreamConfig>,
}

impl NatsToml {
    /// Checks `[here]`. Errors: an empty URL, a bad login or TLS setting, more than one
    /// login kind, `create_stream` without `stream` and `subjects`.
    pub(crate) fn build(
        self,
        auth: AuthToml,
        here: &str,
        ctx: &LoadCtx<'_>,
    ) -> Result<NatsSinkConfig, ConfigError> {
        use crate::config::native::secret_setting;
        if self.url.trim().is_empty() {
            return Err(ctx.invalid(format!("{here}.url"), "must not be empty"));
        }
        let auth = auth.build(here, ctx)?;
        let token = secret_setting(
            "token",
            (&self.token, &self.token_env, &self.token_file),
            here,
            ctx,
        )?;
        let nkey_seed = secret_setting(
            "nkey_seed",
            (&self.nkey_seed, &self.nkey_seed_env, &self.nkey_seed_file),
            here,
            ctx,
        )?;
        let logins = [
            auth.user.is_some(),
            token.is_some() || self.token.is_some() || self.token_env.is_some(),
            self.creds_file.is_some(),
            nkey_seed.is_some() || self.nkey_seed.is_some() || self.nkey_seed_env.is_some(),
        ];
        if logins.iter().filter(|l| **l).count() > 1 {
            return Err(ctx.invalid(
                here,
                "set one login: user + password, token, creds_file or nkey_seed",
            ));
        }
        let stream = match self.stream {
            None => {
                if self.create_stream || !self.subjects.is_empty() {
                    return Err(ctx.invalid(
                        format!("{here}.stream"),
                        "is missing: create_stream and subjects need the stream's name",
                    ));
                }
                None
            }
            Some(name) => {
                if name.is_empty() || name.contains(['.', '*', '>', ' ', '/', '\\']) {
                    return Err(ctx.invalid(
                        format!("{here}.stream"),
                        "must be a JetStream stream name (no '.', '*', '>', '/', '\\' or spaces)",
                    ));
                }
                if self.create_stream && self.subjects.is_empty() {
                    return Err(ctx.invalid(
                        format!("{here}.subjects"),
                        "is missing: create_stream needs the subjects the stream captures, \
                         e.g. subjects = [\"outbox.>\"]",
                    ));
                }
                let storage = match self.storage.as_deref() {
                    None | Some("file") => NatsStorage::File,
                    Some("memory") => NatsStorage::Memory,
                    Some(other) => {
                        return Err(ctx.invalid(
                            format!("{here}.storage"),
                            format!("\"{other}\" is not \"file\" or \"memory\""),
                        ))
                    }
                };
                Some(NatsStreamConfig {
                    name,
                    subjects: self.subjects,
                    create: self.create_stream,
                    storage,
                    duplicate_window: self.duplicate_window.unwrap_or(Duration::from_secs(120)),
                })
            }
        };
        Ok(NatsSinkConfig {
            url: self.url,
            checkpoint_bucket: self
                .checkpoint_bucket
                .unwrap_or_else(|| "outboxd_checkpoints".into()),
            ack_timeout: self.ack_timeout.unwrap_or(Duration::from_secs(10)),
            auth,
            token,
            creds_file: self.creds_file,
            nkey_seed,
            tls_required: self.tls_required,
            stream,
        })
    }
}
