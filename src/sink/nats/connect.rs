//! Connecting to NATS: the login and TLS of `[connectors.sink]` as async-nats options, and
//! what a failed connection means (ARCHITECTURE.md invariant 4: classified from the client's
//! error kinds, not its text).
//!
//! The client reconnects on its own after an outage (without limit); [`connect`]'s `events`
//! label names the client in the one WARN per outage its event callback logs.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_nats::{Client, ConnectErrorKind, ConnectOptions, Event};

use super::StreamNotes;
use crate::config::sinks::NatsSinkConfig;
use crate::error::Class;

/// The broker name in messages.
pub const BROKER: &str = "NATS JetStream";

/// How long one connection attempt may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// A failed connection: transient (unreachable, timed out) or definite (refused login, TLS,
/// a bad URL), with what to check; never a password, token or seed.
#[derive(Debug, Clone)]
pub struct ConnectFailure {
    /// Transient or definite.
    pub class: Class,
    /// What failed and what to check.
    pub detail: String,
}

/// Which login `cfg` uses, for messages: `user "u"`, `a token`, `creds file F`, `an NKey
/// seed`, `no login`.
pub fn login_kind(cfg: &NatsSinkConfig) -> String {
    if let Some(u) = &cfg.auth.user {
        format!("user {u:?} and its password")
    } else if cfg.token.is_some() {
        "the token".into()
    } else if let Some(f) = &cfg.creds_file {
        format!("the credentials file {}", f.display())
    } else if cfg.nkey_seed.is_some() {
        "the NKey seed".into()
    } else {
        "no login".into()
    }
}

/// The servers of `cfg.url` (comma-separated).
fn servers(cfg: &NatsSinkConfig) -> Vec<String> {
    cfg.url
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

/// Connects to the servers of `cfg` as `name` (the client name the server shows, e.g.
/// `outboxd:shop`). With `notes` (the sink's client): one WARN when the connection is lost
/// and one INFO when it is back, and the server's errors noted there; without (the
/// checkpoint store's, `check`'s): quiet. Errors: see [`ConnectFailure`].
pub async fn connect(
    cfg: &NatsSinkConfig,
    name: &str,
    notes: Option<Arc<StreamNotes>>,
) -> Result<Client, ConnectFailure> {
    let mut opts = ConnectOptions::new()
        .name(name)
        .connection_timeout(CONNECT_TIMEOUT)
        .request_timeout(Some(cfg.ack_timeout))
        .max_reconnects(None);
    if let (Some(user), Some(password)) = (&cfg.auth.user, &cfg.auth.password) {
        opts = opts.user_and_password(user.clone(), password.expose().to_string());
    } else if let Some(token) = &cfg.token {
        opts = opts.token(token.expose().to_string());
    } else if let Some(seed) = &cfg.nkey_seed {
        opts = opts.nkey(seed.expose().trim().to_string());
    } else if let Some(path) = &cfg.creds_file {
        opts = opts
            .credentials_file(path)
            .await
            .map_err(|e| ConnectFailure {
                class: Class::Definite,
                detail: format!(
                    "cannot read the credentials file {} ({e}); check creds_file",
                    path.display()
                ),
            })?;
    }
    if let Some(ca) = &cfg.auth.tls_ca {
        opts = opts.add_root_certificates(ca.clone());
    }
    if let (Some(cert), Some(key)) = (&cfg.auth.tls_cert, &cfg.auth.tls_key) {
        opts = opts.add_client_certificate(cert.clone(), key.clone());
    }
    if cfg.tls_required {
        opts = opts.require_tls(true);
    }
    if let Some(notes) = notes {
        let url = cfg.url.clone();
        let connector = name.to_string();
        let down = Arc::new(AtomicBool::new(false));
        opts = opts.event_callback(move |event| {
            let (url, connector, down, notes) =
                (url.clone(), connector.clone(), down.clone(), notes.clone());
            async move { on_event(&event, &url, &connector, &down, &notes) }
        });
    }
    let servers = servers(cfg);
    opts.connect(servers.as_slice()).await.map_err(|e| {
        // A certificate that does not verify reaches us as an I/O error: rustls's error
        // inside the io::Error.
        let kind = match e.kind() {
            ConnectErrorKind::Io if tls_refused(&e) => ConnectErrorKind::Tls,
            k => k,
        };
        failure(cfg, kind, &e.to_string())
    })
}

/// Whether `e`'s sources hold a TLS failure (rustls's error: an unverifiable or refused
/// certificate, a handshake the server refused).
fn tls_refused(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cur = Some(e);
    while let Some(e) = cur {
        if e.downcast_ref::<rustls::Error>().is_some() {
            return true;
        }
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            if io
                .get_ref()
                .is_some_and(|inner| inner.downcast_ref::<rustls::Error>().is_some())
            {
                return true;
            }
        }
        cur = e.source();
    }
    false
}

/// Logs a lost connection once per outage (WARN) and its return (INFO); notes the server's
/// errors.
fn on_event(event: &Event, url: &str, client: &str, down: &AtomicBool, notes: &StreamNotes) {
    match event {
        Event::Disconnected if !down.swap(true, Ordering::AcqRel) => {
            tracing::warn!(client, "NATS server {url} unreachable: the client reconnects on its own; records wait (and fail after ack_timeout, the connector then restarts from its checkpoint)");
        }
        Event::Connected if down.swap(false, Ordering::AcqRel) => {
            tracing::info!(client, "NATS server {url} reachable again");
        }
        Event::ServerError(e) => notes.server_error(&e.to_string()),
        _ => {}
    }
}

/// What a connection failure of kind `kind` (with the client's text `text`, which never
/// holds a secret) means for `cfg`.
pub fn failure(cfg: &NatsSinkConfig, kind: ConnectErrorKind, text: &str) -> ConnectFailure {
    let url = &cfg.url;
    let (class, detail) = match kind {
        ConnectErrorKind::AuthorizationViolation | ConnectErrorKind::Authentication => (
            Class::Definite,
            format!(
                "the NATS server at {url} refused the login with {} ({text}); check the \
                 user/password (or token, creds_file, nkey_seed) in [connectors.sink] and the \
                 server's authorization block",
                login_kind(cfg)
            ),
        ),
        ConnectErrorKind::Tls => (
            Class::Definite,
            format!(
                "TLS with the NATS server at {url} failed ({text}); check tls_ca (the CA that \
                 signed the server's certificate), tls_cert/tls_key, and that the server has \
                 TLS enabled"
            ),
        ),
        ConnectErrorKind::ServerParse => (
            Class::Definite,
            format!("cannot parse the NATS url {url:?} ({text}); use nats://host:port or tls://host:port"),
        ),
        ConnectErrorKind::Dns
        | ConnectErrorKind::Io
        | ConnectErrorKind::TimedOut
        | ConnectErrorKind::MaxReconnects => (
            Class::Transient,
            format!("cannot connect to the NATS server at {url} ({text}); is it running and reachable?"),
        ),
    };
    ConnectFailure { class, detail }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> NatsSinkConfig {
        NatsSinkConfig {
            url: "nats://h:4222".into(),
            checkpoint_bucket: "b".into(),
            ack_timeout: Duration::from_secs(1),
            auth: crate::config::sinks::SinkAuth {
                user: Some("u".into()),
                password: Some(crate::secret::Secret::new("hunter2")),
                ..Default::default()
            },
            token: None,
            creds_file: None,
            nkey_seed: None,
            tls_required: false,
            stream: None,
        }
    }

    #[test]
    fn a_refused_login_is_definite_and_names_the_user_not_the_password() {
        let f = failure(
            &cfg(),
            ConnectErrorKind::AuthorizationViolation,
            "authorization violation",
        );
        assert_eq!(f.class, Class::Definite);
        assert!(f.detail.contains("user \"u\""), "{}", f.detail);
        assert!(!f.detail.contains("hunter2"));
    }

    #[test]
    fn an_unreachable_server_is_transient() {
        for kind in [ConnectErrorKind::Io, ConnectErrorKind::TimedOut] {
            assert_eq!(failure(&cfg(), kind, "x").class, Class::Transient);
        }
    }
}
