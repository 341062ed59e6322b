//! Opening the RabbitMQ sink (connect with TLS for `amqps://`, log in, open the channel),
//! and the episodes a connector lives through with it: the broker down, a queue full. Each
//! is one WARN when it begins and one INFO when it ends, however many reconnects or
//! replays it takes: [`RabbitMqOpener::open`] waits for a broker that is down, and
//! [`RabbitMqOpener::retry_quietly`] tells the connector's RabbitMQ arm to run again
//! without the connector's restart WARN when a run ended in an episode already reported.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use lapin::tcp::{OwnedIdentity, OwnedTLSConfig};
use lapin::uri::AMQPUri;
use lapin::{Connection, ConnectionProperties};
use tokio::sync::watch;

use super::errors::{self, Target, BROKER};
use super::RabbitMqSink;
use crate::config::sinks::RabbitMqSinkConfig;
use crate::error::Class;
use crate::retry::Backoff;
use crate::sink::SinkError;

/// The connect timeout when the URL does not set one (`connection_timeout`, ms).
const CONNECT_TIMEOUT_MS: u64 = 10_000;
/// The longest wait between connection attempts while the broker is down.
const MAX_RECONNECT_WAIT: Duration = Duration::from_secs(10);

/// What a connector is going through with its broker.
#[derive(Debug, Default)]
pub(crate) struct Episodes {
    /// The broker unreachable (or the connection lost) since.
    outage: Option<Instant>,
    /// A queue full (publishes nacked) since.
    full: Option<Instant>,
    /// How the last run ended, as its sink saw it (set by `close`).
    last_end: Option<End>,
}

/// How a run ended, for [`RabbitMqOpener::retry_quietly`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    /// The connection was lost.
    Lost,
    /// A publish was nacked (a queue full).
    Nacked,
}

/// A connector's [`Episodes`], shared by its opener and its sinks' confirm tasks.
#[derive(Debug, Clone)]
pub(crate) struct EpisodeLog {
    connector: String,
    state: Arc<Mutex<Episodes>>,
}

impl EpisodeLog {
    fn lock(&self) -> std::sync::MutexGuard<'_, Episodes> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A publish was nacked: one WARN when a queue-full episode begins (`what` says which
    /// queue), DEBUG after.
    pub(crate) fn nacked(&self, what: &str) {
        let mut e = self.lock();
        e.last_end = Some(End::Nacked);
        if e.full.is_none() {
            e.full = Some(Instant::now());
            drop(e);
            tracing::warn!(connector = %self.connector, "{what}; nothing after it is checkpointed, and it is sent again from the checkpoint every few seconds until the queue takes it (one INFO then)");
        } else {
            tracing::debug!(connector = %self.connector, "still full: {what}");
        }
    }

    /// A publish was confirmed: ends a queue-full episode (one INFO).
    pub(crate) fn confirmed(&self) {
        let mut e = self.lock();
        if let Some(since) = e.full.take() {
            drop(e);
            tracing::info!(connector = %self.connector, "RabbitMQ takes messages again: the queue that was full has room (full for {:.1}s)", since.elapsed().as_secs_f64());
        }
    }

    /// The broker is down (`failure`); true when this starts an outage.
    fn outage_begins(&self) -> bool {
        let mut e = self.lock();
        if e.outage.is_some() {
            return false;
        }
        e.outage = Some(Instant::now());
        true
    }

    /// The broker answered: ends an outage (one INFO).
    fn outage_ends(&self) {
        let since = self.lock().outage.take();
        if let Some(since) = since {
            tracing::info!(connector = %self.connector, "RabbitMQ is reachable again (down for {:.1}s); resuming from the checkpoint", since.elapsed().as_secs_f64());
        }
    }
}

/// Opens a connector's RabbitMQ sink for the at-least-once loop (the connector wraps it as
/// its `OpenSink`).
pub(crate) struct RabbitMqOpener<'a> {
    cfg: &'a RabbitMqSinkConfig,
    connector: &'a str,
    episodes: EpisodeLog,
}

impl<'a> RabbitMqOpener<'a> {
    /// The opener of connector `connector`'s sink with settings `cfg`.
    pub(crate) fn new(cfg: &'a RabbitMqSinkConfig, connector: &'a str) -> Self {
        Self {
            cfg,
            connector,
            episodes: EpisodeLog {
                connector: connector.to_string(),
                state: Arc::default(),
            },
        }
    }

    /// Whether the run that ended with `failure` (`transient` or not) ended in an episode
    /// that is reported on its own (the connection lost: one WARN now, unless the outage was
    /// reported already; a queue full: its WARN was written): then the connector runs again
    /// after a short wait without its restart WARN.
    pub(crate) fn retry_quietly(&self, transient: bool, failure: &dyn std::fmt::Display) -> bool {
        if !transient {
            return false;
        }
        let end = self.episodes.lock().last_end.take();
        match end {
            Some(End::Nacked) => true,
            Some(End::Lost) => {
                if self.episodes.outage_begins() {
                    tracing::warn!(connector = self.connector, "lost the connection to RabbitMQ: {failure}; reconnecting (nothing after the last confirmed record is checkpointed; one INFO when it is back)");
                }
                true
            }
            None => false,
        }
    }

    /// The URI to connect to: the configured one with the login set.
    pub(super) fn uri(&self) -> Result<AMQPUri, SinkError> {
        let mut uri: AMQPUri = self
            .cfg
            .url
            .parse()
            .map_err(|e| SinkError::broker(BROKER, Class::Definite, format!("url: {e}")))?;
        if let Some(user) = &self.cfg.auth.user {
            uri.authority.userinfo.username = user.clone();
            uri.authority.userinfo.password = self
                .cfg
                .auth
                .password
                .as_ref()
                .map(|p| p.expose().to_string())
                .unwrap_or_default();
        }
        uri.query
            .connection_timeout
            .get_or_insert(CONNECT_TIMEOUT_MS);
        Ok(uri)
    }

    /// The TLS settings: `tls_ca` trusted besides the system's roots, the client
    /// certificate and key (PEM). Errors: an unreadable file (definite).
    pub(super) fn tls(&self) -> Result<OwnedTLSConfig, SinkError> {
        let auth = &self.cfg.auth;
        let read = |p: &std::path::Path| {
            std::fs::read(p).map_err(|e| {
                SinkError::broker(
                    BROKER,
                    Class::Definite,
                    format!("cannot read {}: {e}", p.display()),
                )
            })
        };
        let cert_chain = match &auth.tls_ca {
            Some(p) => Some(String::from_utf8_lossy(&read(p)?).into_owned()),
            None => None,
        };
        let identity = match (&auth.tls_cert, &auth.tls_key) {
            (Some(c), Some(k)) => Some(OwnedIdentity::PKCS8 {
                pem: read(c)?,
                key: read(k)?,
            }),
            _ => None,
        };
        Ok(OwnedTLSConfig {
            identity,
            cert_chain,
        })
    }

    /// One attempt: connect, log in, open the channel.
    async fn attempt(&self) -> Result<RabbitMqSink, SinkError> {
        let uri = self.uri()?;
        let target = Target {
            server: format!("{}:{}", uri.authority.host, uri.authority.port),
            vhost: uri.vhost.clone(),
            user: uri.authority.userinfo.username.clone(),
            exchange: self.cfg.exchange.clone(),
            declares: self.cfg.exchange_type.is_some(),
            per_topic: self.cfg.exchange_from_topic,
        };
        let runtime = lapin::runtime::default_runtime()
            .map_err(|e| errors::on_open(&e, &target, "connect"))?;
        let properties = ConnectionProperties::default()
            .with_connection_name(format!("outboxd {}", self.connector).into());
        let connection = Connection::connect_uri_with_config(uri, properties, self.tls()?, runtime)
            .await
            .map_err(|e| errors::on_open(&e, &target, "connect"))?;
        RabbitMqSink::start(
            connection,
            self.cfg,
            self.connector,
            target,
            self.episodes.clone(),
        )
        .await
    }
}

impl RabbitMqOpener<'_> {
    /// Connects, waiting for a broker that is down (transient failures: one WARN per
    /// outage) until it is back or `shutdown` (`Ok(None)`); a refused login, a TLS failure,
    /// a missing exchange stop at once.
    pub(crate) async fn open(
        &self,
        shutdown: &watch::Receiver<bool>,
    ) -> Result<Option<RabbitMqSink>, SinkError> {
        let mut backoff = Backoff::new(MAX_RECONNECT_WAIT);
        loop {
            let mut sd = shutdown.clone();
            let attempt = tokio::select! {
                r = self.attempt() => r,
                _ = sd.wait_for(|v| *v) => return Ok(None),
            };
            let failure = match attempt {
                Ok(sink) => {
                    self.episodes.outage_ends();
                    return Ok(Some(sink));
                }
                Err(f) if f.class() == Class::Transient => f,
                Err(f) => return Err(f),
            };
            let wait = backoff.next_wait();
            if self.episodes.outage_begins() {
                tracing::warn!(connector = self.connector, "{failure}; waiting for it, retrying every few seconds (nothing is read meanwhile; one INFO when it is back)");
            } else {
                tracing::debug!(connector = self.connector, retry_in = ?wait, "{failure}");
            }
            let mut sd = shutdown.clone();
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = sd.wait_for(|v| *v) => return Ok(None),
            }
        }
    }

    /// Ends a run on `sink`: notes whether it ended with the connection lost, closes it.
    pub(crate) async fn close(&self, sink: RabbitMqSink) {
        if sink.deliveries.failure().is_some() && !sink.connection.status().connected() {
            self.episodes.lock().last_end = Some(End::Lost);
        }
        sink.close().await;
    }
}
