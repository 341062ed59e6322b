//! The state of the connection to one Kafka cluster, as librdkafka's callbacks tell it, shared
//! by every client a connector (or a command) makes.
//!
//! librdkafka reports broker trouble through its error callback (`error_cb`: `_ALL_BROKERS_DOWN`,
//! `_TRANSPORT`, `_RESOLVE`, `_AUTHENTICATION`, `_SSL`, ...) and its log callback, once per
//! client and per retry: left as they are, an unreachable cluster printed hundreds of lines in
//! seconds. [`KafkaLink`] collapses them into outboxd's own lines: one WARN when the cluster
//! becomes unreachable (which brokers, since when, what waits), a reminder every
//! [`REMINDER_INTERVAL`], one INFO when a broker is up again (seen in the statistics callback,
//! `statistics.interval.ms`, which lists each broker's state). It also keeps what a caller
//! needs to decide: whether the cluster is reachable (readiness), and a failure a retry cannot
//! cure (a refused SASL authentication, a TLS handshake that fails verification, a
//! `security.protocol` the listener does not speak), so that such a connector stops with a
//! definite error instead of retrying forever.
//!
//! A `security.protocol` mismatch has no error code of its own: librdkafka reports the
//! broker closing the connection (`_TRANSPORT`, logged as a `FAIL` line) — during the TLS
//! handshake when TLS is asked of a PLAINTEXT listener, at the first request (ApiVersion)
//! when a plaintext client talks to an SSL listener. Such a closure is taken for a mismatch
//! only while no broker was ever up for the link and [`MISMATCH_SIGHTINGS`] times in a row
//! (a broker that closes one connection while it shuts down is not one).
//!
//! A connector's link logs those lines; a command's link ([`KafkaLink::quiet`]: `check`,
//! `status`, `checkpoint`) keeps the same state without logging, and the command reports the
//! outcome itself (`check` prints a FAIL line), so a command's output stays a few lines.
//!
//! Two halves: [`machine`] is the state machine, pure (typed observations stamped with the
//! instant they were made at; the new state and the [`Report`](machine::Report)s out), and
//! [`KafkaLink`] its side effects: it reads the clock, classifies what librdkafka's callbacks
//! hand it (error codes here, text in [`super::librdkafka_text`] only), holds the machine
//! behind a mutex, writes the reports as log lines, keeps the lock-free reachability flag and
//! wakes those waiting for a definite failure.

pub(crate) mod machine;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use rdkafka::error::KafkaError;
use tokio::sync::Notify;
use tracing::Level;

use self::machine::{At, ErrorKind, Machine, Observation, Outcome, Report, Voice};
use super::librdkafka_text::{self as text, TokenSource};

/// How often a reminder is logged while the cluster stays unreachable.
pub const REMINDER_INTERVAL: Duration = Duration::from_secs(60);

/// How many broker connection closures in a row, each looking like a `security.protocol`
/// mismatch ([`text::protocol_mismatch`]), make one before any broker was up: librdkafka
/// reconnects after `reconnect.backoff.ms` (100 ms), so the second comes at once when the
/// cause stays.
pub const MISMATCH_SIGHTINGS: u32 = 2;

/// `statistics.interval.ms` for the long-lived clients: how often broker states are sampled
/// (the INFO "reachable again" and readiness follow them within this).
pub const STATISTICS_INTERVAL_MS: u32 = 1000;

/// A failure of the connection to the cluster that a retry cannot cure.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LinkFailure {
    /// The brokers refused the SASL credentials (librdkafka `_AUTHENTICATION`).
    #[error("SASL authentication failed at {bootstrap}: {reason}; check sasl.jaas.config / the SASL username and password")]
    Authentication {
        /// The bootstrap servers.
        bootstrap: String,
        /// librdkafka's description (no secrets: it names the mechanism, not the password).
        reason: String,
    },
    /// The TLS handshake failed (librdkafka `_SSL`): certificate verification, protocol, or a
    /// plaintext listener.
    #[error("TLS with Kafka at {bootstrap} failed: {reason}; {}", crate::tls::expiry::advice(reason, || "check security.protocol, the truststore (ssl.truststore.* / ssl.ca.location) and ssl.endpoint.identification.algorithm (librdkafka says `certificate verify failed` for an expired broker certificate too: `outboxd check` verifies the certificate itself and names that)".into()))]
    Tls {
        /// The bootstrap servers.
        bootstrap: String,
        /// librdkafka's description (e.g. `certificate verify failed`).
        reason: String,
    },
    /// No OAUTHBEARER token could be had (the token endpoint refused the client, outboxd's
    /// own token source failed for good), or the brokers refused the token (expired,
    /// unsigned, another audience or issuer): see [`machine::token_trouble`].
    #[error(
        "the OAUTHBEARER login at Kafka {bootstrap} failed: {reason}; check {}",
        token_settings(reason)
    )]
    Token {
        /// The bootstrap servers.
        bootstrap: String,
        /// librdkafka's description, or outboxd's token source's (never a token or secret:
        /// librdkafka's names the endpoint and the provider's answer).
        reason: String,
    },
    /// The broker closed the connection during the TLS handshake: `security.protocol` asks
    /// for TLS (`SSL`, `SASL_SSL`) of a listener that does not speak it.
    #[error("Kafka at {bootstrap} closed the connection during the TLS handshake: the listener there does not speak TLS (a PLAINTEXT or SASL_PLAINTEXT listener?) ({reason}); check security.protocol (SSL and SASL_SSL ask for TLS) and that bootstrap.servers names the brokers' TLS listener")]
    TlsToPlaintextListener {
        /// The bootstrap servers.
        bootstrap: String,
        /// librdkafka's description of the closed connection.
        reason: String,
    },
    /// The broker closed the connection at the first request of a client without TLS:
    /// `security.protocol` (`PLAINTEXT`, `SASL_PLAINTEXT`) does not match a TLS listener.
    #[error("Kafka at {bootstrap} closed the connection at the first request: the listener there expects TLS (an SSL or SASL_SSL listener?) ({reason}); check security.protocol (PLAINTEXT and SASL_PLAINTEXT send no TLS) and that bootstrap.servers names the listener meant")]
    PlaintextToTlsListener {
        /// The bootstrap servers.
        bootstrap: String,
        /// librdkafka's description of the closed connection.
        reason: String,
    },
}

/// What waits for the cluster, as (records, bytes) not yet acknowledged: asked when a WARN
/// is written. `None` once the producer it looks at is gone.
type Backlog = Box<dyn Fn() -> Option<(u64, u64)> + Send + Sync>;

/// The settings to look at for a failed OAUTHBEARER login described by `reason`.
fn token_settings(reason: &str) -> &'static str {
    match text::token_source(reason) {
        TokenSource::MskIam => "the AWS credentials and region of MSK IAM (sasl.jaas.config awsRegion, awsProfileName, awsRoleArn; AWS_* environment) and the principal's kafka-cluster:Connect permission",
        TokenSource::TokenFile => "sasl.oauthbearer.token.endpoint.url (file:) and whatever keeps that file current",
        TokenSource::Oidc => "sasl.oauthbearer.token.endpoint.url, the client id and secret (sasl.jaas.config clientId/clientSecret, sasl.oauthbearer.client.credentials.*), sasl.oauthbearer.scope and extensions, and that the provider's tokens carry the audience and issuer the brokers expect",
    }
}

/// What the clock says now, for an observation: the link reads the clock (here, and for
/// [`KafkaLink::unreachable_for`] / [`KafkaLink::unreachable_reason`]); the machine never does.
fn now() -> At {
    At {
        instant: Instant::now(),
        wall: SystemTime::now(),
    }
}

/// The connection state of one Kafka cluster for one connector (or one command).
pub struct KafkaLink {
    /// Who waits for the cluster: a connector's name, or a command.
    owner: String,
    bootstrap: String,
    /// Whether the link logs its WARN/INFO lines (a connector's) or only keeps the state
    /// (a command's, which reports the outcome itself).
    logs: bool,
    /// How often the WARN is repeated while the cluster stays unreachable
    /// ([`REMINDER_INTERVAL`]; shorter in tests).
    reminder: Duration,
    state: Mutex<Machine>,
    /// Whether a broker was seen up and the cluster is not unreachable since
    /// ([`Machine::reachable`]): lets [`answered`](Self::answered), called on every delivery
    /// report, return without a lock.
    reachable: AtomicBool,
    changed: Notify,
    backlog: Mutex<Option<Backlog>>,
}

impl std::fmt::Debug for KafkaLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KafkaLink")
            .field("owner", &self.owner)
            .field("bootstrap", &self.bootstrap)
            .field("logs", &self.logs)
            .field("state", &*self.state())
            .finish_non_exhaustive()
    }
}

impl KafkaLink {
    /// The link of connector `owner` to the cluster at `bootstrap`: logs one WARN when the
    /// cluster becomes unreachable, a reminder every [`REMINDER_INTERVAL`], one INFO when it
    /// is back.
    pub fn new(owner: &str, bootstrap: &str) -> Arc<Self> {
        Self::build(owner, bootstrap, true, REMINDER_INTERVAL)
    }

    /// The link of a command (`check`, `status`, `checkpoint`): the same state, logged at
    /// DEBUG only; the command reports what failed in its own output.
    pub fn quiet(owner: &str, bootstrap: &str) -> Arc<Self> {
        Self::build(owner, bootstrap, false, REMINDER_INTERVAL)
    }

    /// A link that logs (`logs`) with a reminder every `reminder` while the cluster stays
    /// unreachable.
    fn build(owner: &str, bootstrap: &str, logs: bool, reminder: Duration) -> Arc<Self> {
        Arc::new(Self {
            owner: owner.to_string(),
            bootstrap: bootstrap.to_string(),
            logs,
            reminder,
            state: Mutex::new(Machine::new(bootstrap, logs, reminder)),
            reachable: AtomicBool::new(false),
            changed: Notify::new(),
            backlog: Mutex::new(None),
        })
    }

    /// Tells the link what waits for the cluster (the producer's unacknowledged records and
    /// bytes), for its WARN lines to say.
    pub(crate) fn set_backlog(&self, backlog: Backlog) {
        *self.backlog.lock().unwrap_or_else(|e| e.into_inner()) = Some(backlog);
    }

    /// What waits, in words.
    fn waiting(&self) -> String {
        let backlog = self.backlog.lock().unwrap_or_else(|e| e.into_inner());
        match backlog.as_ref().and_then(|b| b()) {
            Some((0, _)) => "no record is waiting; delivery resumes when a broker answers".into(),
            Some((records, bytes)) => format!(
                "{records} record(s) ({} KiB) wait for acknowledgement, and the checkpoint with \
                 them",
                bytes.div_ceil(1024)
            ),
            None => "delivery and checkpoints wait for it".into(),
        }
    }

    /// Why the cluster is unreachable, for a command's or a readiness report: for how long,
    /// the brokers' last states and the last connection error; `None` while it is reachable.
    pub fn unreachable_reason(&self) -> Option<String> {
        self.state().unreachable_reason(Instant::now())
    }

    /// The last OAUTHBEARER token failure that librdkafka retries (a token endpoint that
    /// answered 5xx or not at all, or with something that is not a token; a token source of
    /// outboxd that retries), if any.
    pub fn token_failure(&self) -> Option<String> {
        self.state().token_failure().map(str::to_string)
    }

    /// The last broker connection error librdkafka reported, if any since a broker was up.
    pub fn last_error(&self) -> Option<String> {
        self.state().last_error().map(str::to_string)
    }

    fn state(&self) -> std::sync::MutexGuard<'_, Machine> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// How long the cluster has been unreachable, if it is.
    pub fn unreachable_for(&self) -> Option<Duration> {
        self.state().unreachable_for(Instant::now())
    }

    /// A failure a retry cannot cure (refused credentials, failed TLS verification), seen
    /// since a broker was last up.
    pub fn definite_failure(&self) -> Option<LinkFailure> {
        self.state().definite().cloned()
    }

    /// Resolves with the first [`definite_failure`](Self::definite_failure) (at once if there
    /// is one): to race a call that would otherwise wait out its own timeout.
    pub async fn wait_definite(&self) -> LinkFailure {
        loop {
            let notified = self.changed.notified();
            if let Some(f) = self.definite_failure() {
                return f;
            }
            notified.await;
        }
    }

    /// Feeds `observation`, made now, to the machine; then writes its reports (outside the
    /// lock: the backlog a WARN names is asked of the producer) and wakes the waiters when
    /// something changed. Returns whether the link covers a log line.
    fn observe(&self, observation: Observation<'_>) -> bool {
        let outcome = {
            let mut st = self.state();
            let outcome = st.observe(observation, now());
            self.reachable.store(st.reachable(), Ordering::Release);
            outcome
        };
        let Outcome {
            reports,
            changed,
            covers,
        } = outcome;
        for report in &reports {
            self.emit(report);
        }
        if changed {
            self.changed.notify_waiters();
        }
        covers
    }

    /// Writes `report` as the link's log line.
    fn emit(&self, report: &Report) {
        let voice = Voice {
            bootstrap: &self.bootstrap,
            reminder: self.reminder,
            logs: self.logs,
        };
        let waiting = if report.says_what_waits() {
            self.waiting()
        } else {
            String::new()
        };
        let line = report.text(voice, &waiting);
        let owner = &self.owner;
        let bootstrap = &self.bootstrap;
        match (report, report.level(self.logs)) {
            (Report::Unreachable { since, .. } | Report::Silent { since, .. }, _) => {
                let since = machine::utc(*since);
                tracing::warn!(connector = %owner, bootstrap = %bootstrap, since = %since, "{line}")
            }
            (
                Report::StillUnreachable { since, for_s, .. }
                | Report::StillSilent { since, for_s, .. },
                _,
            ) => {
                let since = machine::utc(*since);
                tracing::warn!(connector = %owner, bootstrap = %bootstrap, since = %since,
                    unreachable_for_s = for_s, "{line}")
            }
            (Report::Reachable { after_s }, Level::INFO) => {
                tracing::info!(connector = %owner, bootstrap = %bootstrap,
                    unreachable_for_s = after_s, "{line}")
            }
            (Report::TokenRetried { .. }, _) => tracing::warn!(connector = %owner, "{line}"),
            (Report::Definite(_), Level::ERROR) => tracing::error!(connector = %owner, "{line}"),
            (Report::ClientError { .. }, Level::WARN) => {
                tracing::warn!(target: "librdkafka", connector = %owner, "{line}")
            }
            (
                Report::AllBrokersDown { .. }
                | Report::ConnectionError { .. }
                | Report::Fenced { .. }
                | Report::ClientError { .. },
                _,
            ) => tracing::debug!(target: "librdkafka", owner = %owner, "{line}"),
            (Report::Definite(_) | Report::MismatchSeen { .. } | Report::Reachable { .. }, _) => {
                tracing::debug!(owner = %owner, "{line}")
            }
        }
    }

    /// librdkafka's error callback (`error_cb`).
    pub(crate) fn on_error(&self, error: &KafkaError, reason: &str) {
        self.observe(Observation::Error {
            kind: ErrorKind::of(error, reason),
            reason,
        });
    }

    /// A broker answered (a statistics sample shows one up, or a request succeeded): the
    /// cluster is reachable; an INFO says so when it was not.
    pub(crate) fn up(&self) {
        self.observe(Observation::Answered);
    }

    /// The cluster answered one of the connector's own requests (a delivery report, a
    /// committed transaction, a metadata request): it is reachable, whatever the statistics
    /// say. Without a lock while it is known reachable: every delivery report calls it.
    pub(crate) fn answered(&self) {
        if !self.reachable.load(Ordering::Acquire) {
            self.up();
        }
    }

    /// The cluster does not answer although librdkafka reports no trouble (`what`: records
    /// without a delivery report since `since`, a new client's metadata request unanswered).
    /// A frozen or hung broker keeps its TCP connections open, so librdkafka sees no outage;
    /// the link counts the cluster unreachable since `since` (the WARN, its reminders,
    /// readiness after the grace) until it answers ([`answered`](Self::answered)) — a broker
    /// `UP` in the statistics does not clear it. An outage librdkafka already reported keeps
    /// its own WARN.
    pub(crate) fn unresponsive(&self, what: &str, since: (Instant, SystemTime)) {
        self.observe(Observation::Unresponsive {
            what,
            since: At {
                instant: since.0,
                wall: since.1,
            },
        });
    }

    /// librdkafka's statistics callback (`stats_cb`, JSON): records each broker's state; a
    /// broker `UP` means the cluster is reachable (unless it was found not to answer, see
    /// [`unresponsive`](Self::unresponsive)).
    pub(crate) fn on_statistics(&self, json: &[u8]) {
        if let Some(brokers) = machine::broker_states(json) {
            self.observe(Observation::Brokers(brokers));
        }
    }

    /// Whether librdkafka's log line (`fac`, `message`) only repeats what this link reports
    /// itself (see [`Machine`]'s reading of log lines): then it is logged at DEBUG only.
    pub(crate) fn covers_log_line(&self, fac: &str, message: &str) -> bool {
        self.observe(Observation::Log(text::log_line(fac, message)))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use rdkafka::error::RDKafkaErrorCode;

    use super::machine::{token_trouble, TokenTrouble};
    use super::text::Mismatch;
    use super::*;

    /// The HTTP status of an OIDC/JWT log line, as the link reads it.
    fn oidc_status(fac: &str, line: &str) -> Option<i32> {
        text::log_line(fac, line).oidc_status
    }

    /// Whether an `_AUTHENTICATION` error is about an OAUTHBEARER token.
    fn is_token_reason(reason: &str) -> bool {
        text::token_reason(reason).is_some()
    }

    /// What a token failure `reason` means after an OIDC request answered `status`.
    fn trouble(reason: &str, status: Option<i32>) -> TokenTrouble {
        token_trouble(text::token_reason(reason).expect("a token reason"), status)
    }

    fn mismatch_in(error: &str) -> Option<Mismatch> {
        text::protocol_mismatch(error)
    }

    #[test]
    fn token_failures_a_retry_may_cure_are_not_definite() {
        let line = r#"[thrd:background]: Failed to retrieve OIDC token from "http://idp/token": {"error":"invalid_client"} (401)"#;
        assert_eq!(oidc_status("OIDC", line), Some(401));
        assert_eq!(
            oidc_status(
                "OIDC",
                r#"Failed to retrieve OIDC token from "u": Couldn't connect to server (-1)"#
            ),
            Some(-1)
        );
        assert_eq!(oidc_status("FAIL", line), None);
        let acquire = r#"Failed to acquire SASL OAUTHBEARER token: {"error":"invalid_client"}"#;
        assert!(is_token_reason(acquire));
        assert_eq!(trouble(acquire, Some(401)), TokenTrouble::Refused);
        assert_eq!(trouble(acquire, Some(503)), TokenTrouble::Retried);
        assert_eq!(trouble(acquire, Some(-1)), TokenTrouble::Retried);
        let ours = format!(
            "Failed to acquire SASL OAUTHBEARER token: no AWS credentials for MSK IAM ... {}",
            crate::sink::oauth::RETRIED
        );
        assert_eq!(trouble(&ours, None), TokenTrouble::Retried);
        // An expired token in a token file: definite (README: exit 1), not retried.
        let file = "Failed to acquire SASL OAUTHBEARER token: the token in the token file /t (sasl.oauthbearer.token.endpoint.url) expired at 2026-12-03T06:33:30Z (exp claim): whatever writes the file is not keeping it current; it must replace the token before it expires";
        assert_eq!(trouble(file, None), TokenTrouble::Refused);
        assert!(token_settings(file).contains("whatever keeps that file current"));
        let expired =
            "Failed to acquire SASL OAUTHBEARER token: Must supply an unexpired token: now 2 > 1";
        assert_eq!(trouble(expired, None), TokenTrouble::Refused);
        let broker = "SASL authentication error: {\"status\":\"invalid_token\"} (after 1ms in state AUTH_REQ)";
        assert_eq!(trouble(broker, None), TokenTrouble::Refused);
        let link = KafkaLink::quiet("shop", "k:9092");
        link.covers_log_line(
            "OIDC",
            r#"Failed to retrieve OIDC token from "u": <html>502</html> (502)"#,
        );
        link.on_error(
            &KafkaError::Global(RDKafkaErrorCode::Authentication),
            "Failed to acquire SASL OAUTHBEARER token: <html>502</html>",
        );
        assert_eq!(link.definite_failure(), None, "a 502 is retried");
        assert!(
            link.token_failure()
                .is_some_and(|t| t.contains("<html>502</html>")),
            "a command names the token failure: {:?}",
            link.token_failure()
        );
        link.covers_log_line(
            "OIDC",
            r#"Failed to retrieve OIDC token from "u": denied (401)"#,
        );
        link.on_error(
            &KafkaError::Global(RDKafkaErrorCode::Authentication),
            "Failed to acquire SASL OAUTHBEARER token: denied",
        );
        let f = link
            .definite_failure()
            .expect("a 401 is definite")
            .to_string();
        assert!(
            f.contains("OAUTHBEARER login") && f.contains("sasl.oauthbearer.token.endpoint.url"),
            "{f}"
        );
    }

    /// The log lines `run` writes (at INFO and above), as text.
    fn logged(run: impl FnOnce()) -> Vec<String> {
        #[derive(Clone, Default)]
        struct Lines(Arc<Mutex<Vec<u8>>>);
        impl std::io::Write for Lines {
            fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(buf);
                Ok(buf.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let lines = Lines::default();
        let writer = lines.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .with_max_level(tracing::Level::INFO)
            .finish();
        tracing::subscriber::with_default(subscriber, run);
        let text = String::from_utf8(lines.0.lock().unwrap().clone()).unwrap();
        text.lines().map(str::to_string).collect()
    }

    fn all_down(link: &KafkaLink) {
        link.on_error(
            &KafkaError::Global(RDKafkaErrorCode::AllBrokersDown),
            "1/1 brokers are down",
        );
    }

    #[test]
    fn one_warn_a_reminder_per_interval_and_one_info() {
        let link = KafkaLink::build("shop", "k1:9092,k2:9092", true, Duration::from_millis(300));
        link.set_backlog(Box::new(|| Some((3, 2048))));
        let first = logged(|| {
            all_down(&link);
            // Down again within the interval: nothing new.
            all_down(&link);
            link.on_statistics(br#"{"brokers":{"k1:9092/1":{"nodename":"k1:9092","source":"learned","state":"DOWN"}}}"#);
        });
        assert_eq!(first.len(), 1, "{first:#?}");
        let warn = &first[0];
        assert!(warn.contains("WARN"), "{warn}");
        assert!(
            warn.contains("Kafka is unreachable since ")
                && warn.contains("Z: no broker of k1:9092,k2:9092 answers")
                && warn.contains("connector=shop"),
            "names the brokers, since when, the connector: {warn}"
        );
        assert!(
            warn.contains("3 record(s) (2 KiB) wait for acknowledgement"),
            "says what waits: {warn}"
        );
        std::thread::sleep(Duration::from_millis(1100));
        let reminder = logged(|| all_down(&link));
        assert_eq!(reminder.len(), 1, "{reminder:#?}");
        assert!(
            reminder[0].contains("WARN")
                && reminder[0].contains("Kafka is still unreachable, for 1s (since ")
                && reminder[0].contains("brokers k1:9092 DOWN"),
            "{}",
            reminder[0]
        );
        // The statistics alone keep the reminders going.
        std::thread::sleep(Duration::from_millis(350));
        let by_stats = logged(|| {
            link.on_statistics(br#"{"brokers":{"k1:9092/1":{"nodename":"k1:9092","source":"learned","state":"DOWN"}}}"#)
        });
        assert_eq!(by_stats.len(), 1, "{by_stats:#?}");
        assert!(by_stats[0].contains("still unreachable"), "{by_stats:#?}");
        let back = logged(|| {
            let up = br#"{"brokers":{"k1:9092/1":{"nodename":"k1:9092","source":"learned","state":"UP"}}}"#;
            link.on_statistics(up);
            link.on_statistics(up);
        });
        assert_eq!(back.len(), 1, "{back:#?}");
        assert!(
            back[0].contains("INFO") && back[0].contains("Kafka is reachable again after 1s"),
            "{}",
            back[0]
        );
        assert!(link.unreachable_reason().is_none());
        // A quiet link keeps the state and logs nothing.
        let quiet = KafkaLink::build("check", "k1:9092", false, Duration::ZERO);
        assert!(logged(|| {
            all_down(&quiet);
            all_down(&quiet);
        })
        .is_empty());
        let why = quiet.unreachable_reason().unwrap();
        assert!(
            why.starts_with("Kafka at k1:9092 unreachable for 0s, since ") && why.contains("Z ("),
            "{why}"
        );
    }

    /// librdkafka's lines for a plaintext client on the SASL_SSL listener and an SSL client on
    /// the PLAINTEXT listener, as the test broker produced them.
    const PLAINTEXT_ON_TLS: &str = "[thrd:localhost:42094/bootstrap]: localhost:42094/bootstrap: Disconnected: connection closed by peer: receive 0 after POLLIN (after 4ms in state APIVERSION_QUERY)";
    const TLS_ON_PLAINTEXT: &str = "[thrd:ssl://127.0.0.1:42092/bootstrap]: ssl://127.0.0.1:42092/bootstrap: Disconnected: SSL connection closed by peer (after 0ms in state SSL_HANDSHAKE)";

    #[test]
    fn protocol_mismatches_are_recognised() {
        let strip = |l: &'static str| l.split_once("]: ").unwrap().1;
        assert_eq!(
            mismatch_in(strip(PLAINTEXT_ON_TLS)),
            Some(Mismatch::PlaintextToTls)
        );
        assert_eq!(
            mismatch_in(strip(TLS_ON_PLAINTEXT)),
            Some(Mismatch::TlsToPlaintext)
        );
        assert_eq!(
            mismatch_in("b:1/bootstrap: SSL handshake failed: Disconnected: connecting to a PLAINTEXT broker listener?"),
            Some(Mismatch::TlsToPlaintext)
        );
        assert_eq!(
            mismatch_in("b:1/bootstrap: Disconnected while requesting ApiVersion: might be caused by incorrect security.protocol configuration (connecting to a SSL listener?) or broker version is < 0.10 (see api.version.request)"),
            Some(Mismatch::PlaintextToTls)
        );
        // A TLS client closed at its first request, a refused connection, an idle close.
        for other in [
            "sasl_ssl://b:1/bootstrap: Disconnected: connection closed by peer (after 3ms in state APIVERSION_QUERY)",
            "b:1/bootstrap: Connect to ipv4#127.0.0.1:1 failed: Connection refused (after 0ms in state CONNECT)",
            "b:1/1: Disconnected (after 600000ms in state UP)",
        ] {
            assert_eq!(mismatch_in(other), None, "{other}");
        }
    }

    #[test]
    fn a_mismatch_seen_twice_before_any_broker_was_up_is_definite() {
        let link = KafkaLink::quiet("c", "localhost:42094");
        assert!(link.covers_log_line("FAIL", PLAINTEXT_ON_TLS));
        assert!(link.definite_failure().is_none(), "once is no proof");
        assert!(link.covers_log_line("FAIL", PLAINTEXT_ON_TLS));
        let f = link.definite_failure().expect("twice in a row");
        assert!(
            matches!(f, LinkFailure::PlaintextToTlsListener { .. }),
            "{f}"
        );
        let text = f.to_string();
        assert!(
            text.contains("Kafka at localhost:42094")
                && text.contains("expects TLS")
                && text.contains("security.protocol")
                && text.contains("in state APIVERSION_QUERY"),
            "{text}"
        );

        // Another failure in between starts the count again.
        let link = KafkaLink::quiet("c", "127.0.0.1:42092");
        link.covers_log_line("FAIL", TLS_ON_PLAINTEXT);
        link.covers_log_line("FAIL", "[thrd:x]: ssl://127.0.0.1:42092/bootstrap: Connect to ipv4#127.0.0.1:42092 failed: Connection refused");
        link.covers_log_line("FAIL", TLS_ON_PLAINTEXT);
        assert!(link.definite_failure().is_none());
        link.covers_log_line("FAIL", TLS_ON_PLAINTEXT);
        let f = link.definite_failure().expect("twice in a row");
        assert!(f.to_string().contains("does not speak TLS"), "{f}");

        // Once a broker was up, a closed connection is an outage, never a mismatch.
        let link = KafkaLink::quiet("c", "localhost:42094");
        link.up();
        for _ in 0..3 {
            link.covers_log_line("FAIL", PLAINTEXT_ON_TLS);
        }
        assert!(link.definite_failure().is_none());
    }

    #[test]
    fn down_then_up() {
        let link = KafkaLink::new("c", "127.0.0.1:1");
        assert!(link.unreachable_for().is_none());
        link.on_error(
            &KafkaError::Global(RDKafkaErrorCode::AllBrokersDown),
            "1/1 brokers are down",
        );
        assert!(link.unreachable_for().is_some());
        assert!(link.covers_log_line("FAIL", "b: Connect to ipv4#127.0.0.1:1 failed"));
        link.on_statistics(
            br#"{"brokers":{"127.0.0.1:1/1":{"nodename":"127.0.0.1:1","source":"learned","state":"UP"},"GroupCoordinator":{"nodename":"x","source":"logical","state":"UP"}}}"#,
        );
        assert!(link.unreachable_for().is_none());
        // Reachable again: one broker's failure is let through once, then held back.
        assert!(!link.covers_log_line("FAIL", "b: Connect to ipv4#127.0.0.1:1 failed"));
        assert!(link.covers_log_line("FAIL", "b: Connect to ipv4#127.0.0.1:1 failed"));
        assert!(!link.covers_log_line("FAIL", "c: Connect to ipv4#127.0.0.1:2 failed"));
    }

    #[test]
    fn before_any_broker_was_up_and_for_commands_failures_are_held_back() {
        let link = KafkaLink::new("c", "127.0.0.1:1");
        let fail = "[thrd:127.0.0.1:1/bootstrap]: 127.0.0.1:1/bootstrap: Connect to ipv4#127.0.0.1:1 failed: Connection refused";
        assert!(
            link.covers_log_line("FAIL", fail),
            "never up: the WARN says it"
        );
        assert_eq!(
            link.last_error().as_deref(),
            Some("127.0.0.1:1/bootstrap: Connect to ipv4#127.0.0.1:1 failed: Connection refused"),
            "kept without librdkafka's thread prefix"
        );
        let quiet = KafkaLink::quiet("check", "127.0.0.1:1");
        quiet.up();
        assert!(
            quiet.covers_log_line("FAIL", fail),
            "a command's link logs nothing"
        );
        quiet.on_error(
            &KafkaError::Global(RDKafkaErrorCode::AllBrokersDown),
            "1/1 brokers are down",
        );
        assert!(quiet.covers_log_line("ERROR", "1/1 brokers are down"));
        let why = quiet.unreachable_reason().expect("unreachable");
        assert!(
            why.starts_with("Kafka at 127.0.0.1:1 unreachable for 0s"),
            "{why}"
        );
    }

    #[test]
    fn internal_brokers_are_not_connections() {
        let link = KafkaLink::new("c", "b:1");
        link.on_error(
            &KafkaError::Global(RDKafkaErrorCode::AllBrokersDown),
            "down",
        );
        link.on_statistics(
            br#"{"brokers":{"GroupCoordinator":{"nodename":"GroupCoordinator","source":"logical","state":"UP"},"b:1/bootstrap":{"nodename":"b:1","source":"configured","state":"DOWN"}}}"#,
        );
        assert!(
            link.unreachable_for().is_some(),
            "only the logical broker is up"
        );
    }

    #[test]
    fn a_definite_failure_is_logged_once_per_kind() {
        let link = KafkaLink::build("shop", "k1:9092", true, Duration::from_secs(60));
        let lines = logged(|| {
            // librdkafka says it once per broker connection, in other words each time.
            for reason in [
                "sasl_ssl://k1:9092/bootstrap: SASL authentication error: Authentication failed",
                "sasl_ssl://k1:9092/1: SASL authentication error: Authentication failed",
            ] {
                link.on_error(
                    &KafkaError::Global(RDKafkaErrorCode::Authentication),
                    reason,
                );
            }
        });
        assert!(
            matches!(
                link.definite_failure(),
                Some(LinkFailure::Authentication { .. })
            ),
            "{:?}",
            link.definite_failure()
        );
        assert_eq!(
            lines.iter().filter(|l| l.contains("ERROR")).count(),
            1,
            "{lines:#?}"
        );
    }

    #[test]
    fn refused_credentials_are_no_outage() {
        let link = KafkaLink::build("shop", "k1:9092", true, Duration::from_secs(60));
        let lines = logged(|| {
            link.on_error(
                &KafkaError::Global(RDKafkaErrorCode::Authentication),
                "SASL authentication error: Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512",
            );
            all_down(&link);
        });
        assert!(
            lines
                .iter()
                .any(|l| l.contains("ERROR") && l.contains("SASL authentication failed")),
            "{lines:#?}"
        );
        assert!(
            !lines.iter().any(|l| l.contains("unreachable")),
            "no outage WARN beside the refusal: {lines:#?}"
        );
    }

    /// A statistics sample after a single-node KRaft broker was frozen and woken: the
    /// broker librdkafka decommissioned (still referenced as the transaction coordinator)
    /// listed after its successor under the same name, and the re-added bootstrap broker.
    const STALE_BESIDE_LIVE: &[u8] = br#"{"brokers":{
        "127.0.0.1:44092/1":{"name":"127.0.0.1:44092/1","nodeid":1,"nodename":"127.0.0.1:44092","source":"learned","state":"UP"},
        "127.0.0.1:44092/bootstrap":{"name":"127.0.0.1:44092/bootstrap","nodeid":-1,"nodename":"127.0.0.1:44092","source":"configured","state":"INIT"},
        "TxnCoordinator":{"name":"TxnCoordinator","nodeid":-1,"nodename":"127.0.0.1:44092","source":"logical","state":"UP"},
        "127.0.0.1:44092/1":{"name":"127.0.0.1:44092/1","nodeid":1,"nodename":"127.0.0.1:44092","source":"learned","state":"INIT"}
    }}"#;

    #[test]
    fn a_decommissioned_broker_beside_its_successor_hides_no_broker_up() {
        // The cause: keyed by name, the stale entry (last) replaced the live one.
        let by_name: BTreeMap<String, serde_json::Value> =
            serde_json::from_slice::<serde_json::Value>(STALE_BESIDE_LIVE)
                .map(|v| serde_json::from_value(v["brokers"].clone()).unwrap())
                .unwrap();
        assert_eq!(by_name["127.0.0.1:44092/1"]["state"], "INIT");

        let link = KafkaLink::build("shop", "127.0.0.1:44092", true, Duration::from_secs(60));
        let lines = logged(|| {
            all_down(&link);
            link.on_statistics(STALE_BESIDE_LIVE);
        });
        assert!(
            link.unreachable_for().is_none(),
            "the live broker is up: {lines:#?}"
        );
        assert!(
            lines
                .iter()
                .any(|l| l.contains("INFO") && l.contains("Kafka is reachable again")),
            "{lines:#?}"
        );
        // Without the live one, the stale entries say what they say.
        all_down(&link);
        link.on_statistics(
            br#"{"brokers":{"127.0.0.1:44092/1":{"nodename":"127.0.0.1:44092","source":"learned","state":"INIT"},"127.0.0.1:44092/1":{"nodename":"127.0.0.1:44092","source":"learned","state":"DOWN"}}}"#,
        );
        assert!(link.unreachable_for().is_some());
    }

    #[test]
    fn a_delivery_report_or_a_commit_is_an_answer() {
        let link = KafkaLink::build("shop", "127.0.0.1:44092", true, Duration::from_secs(60));
        let lines = logged(|| {
            all_down(&link);
            // The statistics show no broker up (whatever the reason) ...
            link.on_statistics(
                br#"{"brokers":{"127.0.0.1:44092/bootstrap":{"nodename":"127.0.0.1:44092","source":"configured","state":"INIT"}}}"#,
            );
            // ... but records are acknowledged.
            link.answered();
            link.answered();
        });
        assert!(link.unreachable_for().is_none(), "{lines:#?}");
        let infos: Vec<_> = lines.iter().filter(|l| l.contains("INFO")).collect();
        assert_eq!(infos.len(), 1, "{lines:#?}");
        assert!(infos[0].contains("Kafka is reachable again after 0s"));
        // Reachable: an answer takes no lock and logs nothing.
        assert!(link.reachable.load(Ordering::Acquire));
        assert!(logged(|| link.answered()).is_empty());
    }

    #[test]
    fn a_silent_cluster_is_unreachable_until_it_answers() {
        let link = KafkaLink::build("shop", "127.0.0.1:44092", true, Duration::from_secs(60));
        link.set_backlog(Box::new(|| Some((40, 4096))));
        let up = br#"{"brokers":{"127.0.0.1:44092/1":{"nodename":"127.0.0.1:44092","source":"learned","state":"UP"}}}"#;
        link.on_statistics(up);
        let since = (
            Instant::now() - Duration::from_secs(6),
            SystemTime::now() - Duration::from_secs(6),
        );
        let lines = logged(|| {
            link.unresponsive("40 record(s) got no delivery report for 4s", since);
            // The frozen broker's connection stays UP in the statistics: no answer.
            link.on_statistics(up);
            link.unresponsive("40 record(s) got no delivery report for 6s", since);
        });
        assert_eq!(lines.len(), 1, "one WARN: {lines:#?}");
        assert!(
            lines[0].contains("WARN")
                && lines[0].contains("Kafka does not answer since ")
                && lines[0].contains("40 record(s) got no delivery report for 4s")
                && lines[0].contains("brokers 127.0.0.1:44092 UP")
                && lines[0].contains("40 record(s) (4 KiB) wait for acknowledgement")
                && lines[0].contains("connector=shop"),
            "{}",
            lines[0]
        );
        assert!(link.unreachable_for().unwrap() >= Duration::from_secs(6));
        let why = link.unreachable_reason().unwrap();
        assert!(
            why.starts_with("Kafka at 127.0.0.1:44092 unreachable for 6s, since ")
                && why.contains("it does not answer: 40 record(s) got no delivery report for 6s"),
            "{why}"
        );
        let back = logged(|| link.answered());
        assert_eq!(back.len(), 1, "{back:#?}");
        assert!(back[0].contains("INFO") && back[0].contains("Kafka is reachable again after 6s"));
        assert!(link.unreachable_reason().is_none());

        // An outage librdkafka reported keeps its own WARN, and the statistics end it.
        let link = KafkaLink::build("shop", "127.0.0.1:44092", true, Duration::from_secs(60));
        let lines = logged(|| {
            all_down(&link);
            link.unresponsive("no report", since);
        });
        assert_eq!(lines.len(), 1, "{lines:#?}");
        assert!(
            lines[0].contains("Kafka is unreachable since"),
            "{lines:#?}"
        );
        link.on_statistics(up);
        assert!(link.unreachable_for().is_none());
    }

    #[tokio::test]
    async fn authentication_failures_are_definite_until_a_broker_is_up() {
        let link = KafkaLink::new("c", "b:1");
        let waiting = tokio::spawn({
            let link = link.clone();
            async move { link.wait_definite().await }
        });
        link.on_error(
            &KafkaError::Global(RDKafkaErrorCode::Authentication),
            "SASL authentication error: Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512",
        );
        let f = tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .expect("the waiter wakes")
            .unwrap();
        assert!(matches!(f, LinkFailure::Authentication { .. }));
        assert!(f.to_string().contains("SASL authentication failed"), "{f}");
        link.up();
        assert!(link.definite_failure().is_none());
    }
}
