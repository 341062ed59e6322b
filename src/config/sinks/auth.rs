//! The settings every non-Kafka sink shares: a user and password (given literally, from an
//! environment variable or from a file, as the source's `password`) and TLS files (PEM).

use std::path::PathBuf;

use serde::Deserialize;

use crate::config::error::ConfigError;
use crate::config::load::LoadCtx;
use crate::secret::Secret;

/// Raw TOML: `user`, `password`/`password_env`/`password_file`, `tls_ca`, `tls_cert`,
/// `tls_key`, flattened into each sink's table.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(crate) struct AuthToml {
    #[serde(default)]
    pub(crate) user: Option<String>,
    #[serde(default)]
    pub(crate) password: Option<String>,
    #[serde(default)]
    pub(crate) password_env: Option<String>,
    #[serde(default)]
    pub(crate) password_file: Option<PathBuf>,
    #[serde(default)]
    pub(crate) tls_ca: Option<PathBuf>,
    #[serde(default)]
    pub(crate) tls_cert: Option<PathBuf>,
    #[serde(default)]
    pub(crate) tls_key: Option<PathBuf>,
}

/// A sink's login and TLS files.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SinkAuth {
    /// The user to log in as (`None`: no user/password login).
    pub user: Option<String>,
    /// Its password (never printed).
    pub password: Option<Secret>,
    /// PEM file of the CA certificates that verify the server (`None`: the system's roots
    /// when the URL asks for TLS).
    pub tls_ca: Option<PathBuf>,
    /// PEM client certificate and key for mutual TLS (both or neither).
    pub tls_cert: Option<PathBuf>,
    /// See `tls_cert`.
    pub tls_key: Option<PathBuf>,
}

impl AuthToml {
    /// Checks and resolves the settings of `[here]`. Errors: a password without a user, more
    /// than one of `password*`, an unset variable or unreadable file, a certificate without
    /// its key (or the reverse).
    pub(crate) fn build(self, here: &str, ctx: &LoadCtx<'_>) -> Result<SinkAuth, ConfigError> {
        // `ctx` is the sink's (`LoadCtx::for_sink`): resolved even when the source's secrets
        // are not (`checkpoint show/set/reset`: the checkpoint may live in the sink, which
        // needs its login).
        let password = crate::config::native::secret_setting(
            "password",
            (&self.password, &self.password_env, &self.password_file),
            here,
            ctx,
        )?;
        if password.is_some() && self.user.is_none() {
            return Err(ctx.invalid(
                format!("{here}.password"),
                "is set without `user`; set the user the password belongs to",
            ));
        }
        if self.tls_cert.is_some() != self.tls_key.is_some() {
            return Err(ctx.invalid(
                format!("{here}.tls_cert"),
                "tls_cert and tls_key go together (the client certificate and its private key)",
            ));
        }
        Ok(SinkAuth {
            user: self.user,
            password,
            tls_ca: self.tls_ca,
            tls_cert: self.tls_cert,
            tls_key: self.tls_key,
        })
    }
}
