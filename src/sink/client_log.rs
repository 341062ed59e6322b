//! librdkafka's log lines as tracing events (target `librdkafka`), for every Kafka client the
//! relay creates.
//!
//! Each line keeps the syslog level librdkafka gives it (its `log_cb`, see librdkafka's
//! CONFIGURATION.md `log_level`), as rdkafka's default context does, with one exception: a
//! warning about a coordinator that is still loading or not yet available, which librdkafka
//! retries on its own (the line ends in "retrying"), is logged at INFO within [`STARTUP`] of
//! the first line. Every freshly started broker answers so while it creates
//! `__transaction_state` or loads it, and a WARN there sent first-time users looking for a
//! fault; a coordinator that never comes is warned about again after that. A warning repeated
//! word for word is logged once per [`REPEAT_WINDOW`].

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use rdkafka::config::RDKafkaLogLevel;
use rdkafka::consumer::ConsumerContext;
use rdkafka::error::KafkaError;
use rdkafka::ClientContext;
use tracing::Level;

use super::librdkafka_text;
use super::link::KafkaLink;

/// How long after the first librdkafka line a starting coordinator is INFO; past it the
/// warning is a WARN again (a coordinator that never comes, e.g. for an idempotent producer
/// outside a transaction, whose own error would not name the cause).
pub const STARTUP: Duration = Duration::from_secs(60);

/// When the first librdkafka line was logged.
static FIRST_LINE: OnceLock<Instant> = OnceLock::new();

/// The tracing level for a librdkafka log line of syslog `level` with text `message`,
/// `starting` while within [`STARTUP`]: a warning about a retried request to a coordinator
/// that is still starting (loading, or not available yet:
/// [`librdkafka_text::starting_coordinator_retried`]) is INFO then. An error that is a SASL
/// handshake the connection cut short ([`librdkafka_text::handshake_transport_failure`]) is
/// a WARN: librdkafka reconnects and logs in again, nothing is refused.
pub fn level(level: RDKafkaLogLevel, message: &str, starting: bool) -> Level {
    match level {
        RDKafkaLogLevel::Error if librdkafka_text::handshake_transport_failure(message) => {
            Level::WARN
        }
        RDKafkaLogLevel::Emerg
        | RDKafkaLogLevel::Alert
        | RDKafkaLogLevel::Critical
        | RDKafkaLogLevel::Error => Level::ERROR,
        RDKafkaLogLevel::Warning
            if starting && librdkafka_text::starting_coordinator_retried(message) =>
        {
            Level::INFO
        }
        RDKafkaLogLevel::Warning => Level::WARN,
        RDKafkaLogLevel::Notice | RDKafkaLogLevel::Info => Level::INFO,
        RDKafkaLogLevel::Debug => Level::DEBUG,
    }
}

/// How long a warning librdkafka repeats word for word is held back (logged at DEBUG): while
/// a broker restarts, every client warns "new leader-1 not found in cache" for each of its
/// partitions several times a second.
pub const REPEAT_WINDOW: Duration = Duration::from_secs(60);

/// When each warning was last logged at its own level, for [`REPEAT_WINDOW`].
static WARNED: Mutex<BTreeMap<String, Instant>> = Mutex::new(BTreeMap::new());

/// Whether the warning `fac` `message` was logged within [`REPEAT_WINDOW`] before `now`
/// (else it counts as logged now). Entries older than the window are forgotten.
fn repeated(fac: &str, message: &str, now: Instant) -> bool {
    let mut warned = WARNED.lock().unwrap_or_else(|e| e.into_inner());
    warned.retain(|_, at| now.duration_since(*at) < REPEAT_WINDOW);
    let key = format!("{fac} {message}");
    if warned.contains_key(&key) {
        return true;
    }
    warned.insert(key, now);
    false
}

/// Logs one librdkafka line (`fac`: its facility, e.g. `GETPID`) at [`level`]'s level; a
/// warning repeated word for word within [`REPEAT_WINDOW`] at DEBUG.
pub fn log(rd_level: RDKafkaLogLevel, fac: &str, message: &str) {
    let starting = FIRST_LINE.get_or_init(Instant::now).elapsed() < STARTUP;
    let mut level = level(rd_level, message, starting);
    if level == Level::WARN && repeated(fac, message, Instant::now()) {
        level = Level::DEBUG;
    }
    match level {
        Level::ERROR => tracing::error!(target: "librdkafka", "librdkafka: {fac} {message}"),
        Level::WARN => tracing::warn!(target: "librdkafka", "librdkafka: {fac} {message}"),
        Level::INFO => tracing::info!(target: "librdkafka", "librdkafka: {fac} {message}"),
        _ => tracing::debug!(target: "librdkafka", "librdkafka: {fac} {message}"),
    }
}

/// The client context of every Kafka client that needs no callback of its own (the
/// checkpoint store's admin client, consumers and producer): its log lines go through [`log`]
/// unless the connector's [`KafkaLink`] reports the same itself, and its error and statistics
/// callbacks feed that link.
#[derive(Debug, Clone)]
pub struct ClientLog {
    link: Arc<KafkaLink>,
}

impl ClientLog {
    /// A context reporting to `link`.
    pub fn new(link: Arc<KafkaLink>) -> Self {
        Self { link }
    }
}

/// librdkafka's log line through `link` (which may cover it) or [`log`].
pub fn log_via(link: &KafkaLink, level: RDKafkaLogLevel, fac: &str, message: &str) {
    if link.covers_log_line(fac, message) {
        tracing::debug!(target: "librdkafka", "librdkafka: {fac} {message}");
    } else {
        log(level, fac, message);
    }
}

impl ClientContext for ClientLog {
    const ENABLE_REFRESH_OAUTH_TOKEN: bool = true;

    fn log(&self, level: RDKafkaLogLevel, fac: &str, message: &str) {
        log_via(&self.link, level, fac, message);
    }

    fn error(&self, error: KafkaError, reason: &str) {
        self.link.on_error(&error, reason);
    }

    fn stats_raw(&self, statistics: &[u8]) {
        self.link.on_statistics(statistics);
    }

    /// OAUTHBEARER tokens outboxd makes itself (AWS MSK IAM, a token file); OIDC clients
    /// never ask (librdkafka refreshes their tokens itself).
    fn generate_oauth_token(
        &self,
        oauthbearer_config: Option<&str>,
    ) -> Result<rdkafka::client::OAuthToken, Box<dyn std::error::Error>> {
        super::oauth::generate(oauthbearer_config)
    }
}

impl ConsumerContext for ClientLog {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_warning_repeated_within_the_window_is_held_back() {
        let t0 = Instant::now();
        let m = "Partition t[0]: new leader-1 not found in cache (test)";
        assert!(!repeated("METADATAUPDATE", m, t0));
        assert!(repeated("METADATAUPDATE", m, t0 + Duration::from_secs(1)));
        assert!(!repeated(
            "METADATAUPDATE",
            "Partition t[1]: other (test)",
            t0
        ));
        assert!(!repeated("METADATAUPDATE", m, t0 + REPEAT_WINDOW));
    }

    #[test]
    fn a_starting_coordinator_retried_is_info() {
        for m in [
            "Failed to acquire idempotence PID from broker 127.0.0.1:39092/1: Broker: \
             Coordinator load in progress: retrying",
            "Failed to acquire transactional PID from broker TxnCoordinator/1: Broker: \
             Coordinator not available: retrying",
        ] {
            assert_eq!(level(RDKafkaLogLevel::Warning, m, true), Level::INFO, "{m}");
            // Past the startup window it is a fault worth a warning.
            assert_eq!(
                level(RDKafkaLogLevel::Warning, m, false),
                Level::WARN,
                "{m}"
            );
        }
    }

    #[test]
    fn other_warnings_and_errors_keep_their_level() {
        // Not retried: stays a warning.
        assert_eq!(
            level(
                RDKafkaLogLevel::Warning,
                "Failed to acquire idempotence PID: Coordinator load in progress",
                true
            ),
            Level::WARN
        );
        // Retried, but not a starting coordinator.
        assert_eq!(
            level(
                RDKafkaLogLevel::Warning,
                "Failed to acquire idempotence PID from broker 1: Broker: Cluster \
                 authorization failed: retrying",
                true
            ),
            Level::WARN
        );
        assert_eq!(
            level(
                RDKafkaLogLevel::Error,
                "Coordinator load in progress: retrying",
                true
            ),
            Level::ERROR
        );
        // A healthy SASL_SSL start logged this at ERROR once in ten starts.
        assert_eq!(
            level(
                RDKafkaLogLevel::Error,
                "sasl_ssl://b:9093/1: SASL SCRAM-SHA-512 mechanism handshake failed: Local: \
                 Broker transport failure: broker's supported mechanisms: ",
                false
            ),
            Level::WARN
        );
        assert_eq!(
            level(
                RDKafkaLogLevel::Error,
                "sasl_ssl://b:9093/1: SASL authentication error: Authentication failed \
                 during authentication due to invalid credentials with SASL mechanism \
                 SCRAM-SHA-512",
                false
            ),
            Level::ERROR,
            "refused credentials stay an error"
        );
        assert_eq!(level(RDKafkaLogLevel::Notice, "x", true), Level::INFO);
        assert_eq!(level(RDKafkaLogLevel::Debug, "x", true), Level::DEBUG);
    }
}
