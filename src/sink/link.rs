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

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use tokio::sync::Notify;

use super::librdkafka_text::{self as text, Mismatch, TokenReason, TokenSource};

/// How often a reminder is logged while the cluster stays unreachable.
pub const REMINDER_INTERVAL: Duration = Duration::from_secs(60);

/// How many broker connection closures in a row, each looking like a `security.protocol`
/// mismatch ([`text::protocol_mismatch`]), make one before any broker was up: librdkafka reconnects after
/// `reconnect.backoff.ms` (100 ms), so the second comes at once when the cause stays.
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
    #[error("TLS with Kafka at {bootstrap} failed: {reason}; check security.protocol, the truststore (ssl.truststore.* / ssl.ca.location) and ssl.endpoint.identification.algorithm")]
    Tls {
        /// The bootstrap servers.
        bootstrap: String,
        /// librdkafka's description (e.g. `certificate verify failed`).
        reason: String,
    },
    /// No OAUTHBEARER token could be had (the token endpoint refused the client, outboxd's
    /// own token source failed for good), or the brokers refused the token (expired,
    /// unsigned, another audience or issuer): see [`token_trouble`].
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

/// What the callbacks have said so far.
#[derive(Debug, Default)]
struct State {
    /// Whether a broker was ever seen up: before that, a broker's connection failure is no
    /// news of its own (it becomes the last error the WARN names).
    seen_up: bool,
    /// Since when no broker is known to be up (an `_ALL_BROKERS_DOWN` or connection errors
    /// without a broker up since): the monotonic instant for durations, the wall-clock time
    /// for the lines that say since when.
    unreachable_since: Option<(Instant, SystemTime)>,
    /// When the last WARN or reminder was logged.
    warned_at: Option<Instant>,
    /// The last state of each broker, from the statistics.
    brokers: BTreeMap<String, String>,
    /// The last broker connection error's description (`_TRANSPORT`, `_RESOLVE`).
    last_error: Option<String>,
    /// A failure a retry cannot cure, until a broker is up again.
    definite: Option<LinkFailure>,
    /// Why the cluster counts as unreachable although librdkafka reports a broker up: it
    /// does not answer (records without a delivery report, a new client's metadata request
    /// unanswered: a frozen or hung broker keeps its TCP connections open, so librdkafka
    /// reports nothing). Only an answer clears it ([`KafkaLink::answered`]), not a broker
    /// `UP` in the statistics.
    silent: Option<String>,
    /// When a broker's connection failure (librdkafka `FAIL` line) was last let through, per
    /// broker.
    fail_logged: BTreeMap<String, Instant>,
    /// The last broker connection failures in a row that looked like one
    /// `security.protocol` mismatch, and how many (before any broker was up).
    mismatch: Option<(Mismatch, u32)>,
    /// The HTTP status of librdkafka's last failed OIDC token request (-1: no answer), from
    /// its `OIDC`/`JWT` log line.
    oidc_status: Option<i32>,
    /// The last OAUTHBEARER token failure that is retried (librdkafka's `OIDC`/`JWT` line
    /// about a failed token request, or a retried token error): while there is no token no
    /// broker is asked, so a command that found no broker answering names this instead.
    token_failure: Option<String>,
}

/// What waits for the cluster, as (records, bytes) not yet acknowledged: asked when a WARN
/// is written. `None` once the producer it looks at is gone.
type Backlog = Box<dyn Fn() -> Option<(u64, u64)> + Send + Sync>;

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
    state: Mutex<State>,
    /// Whether a broker was seen up and the cluster is not unreachable since: lets
    /// [`answered`](Self::answered), called on every delivery report, return without a lock.
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
            state: Mutex::new(State::default()),
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
        let st = self.state();
        let (since, at) = st.unreachable_since?;
        Some(format!(
            "Kafka at {} unreachable for {}s, since {} ({}{}{})",
            self.bootstrap,
            since.elapsed().as_secs(),
            utc(at),
            st.silent
                .as_deref()
                .map(|s| format!("it does not answer: {s}; "))
                .unwrap_or_default(),
            describe_brokers(&st.brokers),
            st.last_error
                .as_deref()
                .map(|e| format!("; last error: {e}"))
                .unwrap_or_default()
        ))
    }

    /// The last OAUTHBEARER token failure that librdkafka retries (a token endpoint that
    /// answered 5xx or not at all, or with something that is not a token; a token source of
    /// outboxd that retries), if any.
    pub fn token_failure(&self) -> Option<String> {
        self.state().token_failure.clone()
    }

    /// The last broker connection error librdkafka reported, if any since a broker was up.
    pub fn last_error(&self) -> Option<String> {
        self.state().last_error.clone()
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// How long the cluster has been unreachable, if it is.
    pub fn unreachable_for(&self) -> Option<Duration> {
        self.state().unreachable_since.map(|(at, _)| at.elapsed())
    }

    /// A failure a retry cannot cure (refused credentials, failed TLS verification), seen
    /// since a broker was last up.
    pub fn definite_failure(&self) -> Option<LinkFailure> {
        self.state().definite.clone()
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

    /// librdkafka's error callback (`error_cb`).
    pub(crate) fn on_error(&self, error: &KafkaError, reason: &str) {
        let code = error.rdkafka_error_code();
        let token = text::token_reason(reason);
        match code {
            Some(RDKafkaErrorCode::Authentication) if token.is_some() => {
                let status = self.state().oidc_status;
                match token_trouble(token.expect("a token reason"), status) {
                    TokenTrouble::Retried => {
                        if self.logs {
                            tracing::warn!(connector = %self.owner, "no OAUTHBEARER token yet, librdkafka asks again in 10 s: {reason}");
                        }
                        let mut st = self.state();
                        st.last_error = Some(reason.to_string());
                        st.token_failure = Some(reason.to_string());
                    }
                    TokenTrouble::Refused => self.definite(LinkFailure::Token {
                        bootstrap: self.bootstrap.clone(),
                        reason: reason.to_string(),
                    }),
                }
            }
            Some(RDKafkaErrorCode::Authentication) => self.definite(LinkFailure::Authentication {
                bootstrap: self.bootstrap.clone(),
                reason: reason.to_string(),
            }),
            Some(RDKafkaErrorCode::SSL) => self.definite(LinkFailure::Tls {
                bootstrap: self.bootstrap.clone(),
                reason: reason.to_string(),
            }),
            Some(RDKafkaErrorCode::AllBrokersDown) => self.down(reason),
            // One broker connection failed (or an idle one was closed by the broker, which
            // happens every connections.max.idle.ms): only all of them down is unreachable.
            Some(RDKafkaErrorCode::BrokerTransportFailure | RDKafkaErrorCode::Resolve) => {
                tracing::debug!(target: "librdkafka", owner = %self.owner, "Kafka connection error: {reason}");
                self.state().last_error = Some(reason.to_string());
            }
            // The producer reports a fencing itself (a definite failure, or in a group the
            // handover to the connector's new owner).
            Some(RDKafkaErrorCode::Fenced) => {
                tracing::debug!(target: "librdkafka", owner = %self.owner, "{error}: {reason}")
            }
            _ if self.logs => {
                tracing::warn!(target: "librdkafka", connector = %self.owner, "Kafka client error: {error}: {reason}")
            }
            _ => {
                tracing::debug!(target: "librdkafka", owner = %self.owner, "Kafka client error: {error}: {reason}")
            }
        }
    }

    /// A failure that will not go away on a retry: logged once (per kind) and kept.
    fn definite(&self, failure: LinkFailure) {
        let mut st = self.state();
        // Once per kind: librdkafka reports it again for each broker connection, each time
        // in other words.
        let known = st
            .definite
            .as_ref()
            .is_some_and(|d| std::mem::discriminant(d) == std::mem::discriminant(&failure));
        if !known {
            if self.logs {
                tracing::error!(connector = %self.owner, "{failure}");
            } else {
                tracing::debug!(owner = %self.owner, "{failure}");
            }
            st.definite = Some(failure);
            drop(st);
            self.changed.notify_waiters();
        }
    }

    /// No broker could be reached (librdkafka's `_ALL_BROKERS_DOWN`; its `reason`, "N/M
    /// brokers are down", counts bootstrap and learned brokers alike, so it is logged at
    /// DEBUG only): the first time, a WARN; then a reminder at most every `reminder`.
    fn down(&self, reason: &str) {
        tracing::debug!(target: "librdkafka", owner = %self.owner, "all brokers down: {reason}");
        let mut st = self.state();
        st.unreachable_since
            .get_or_insert_with(|| (Instant::now(), SystemTime::now()));
        self.reachable.store(false, Ordering::Release);
        drop(st);
        self.warn_if_due();
        self.changed.notify_waiters();
    }

    /// While the cluster is unreachable: the WARN the first time, then a reminder when the
    /// last one is `reminder` old (a connector's link only).
    fn warn_if_due(&self) {
        let mut st = self.state();
        let Some((since, at)) = st.unreachable_since else {
            return;
        };
        // Refused credentials or certificates are no outage: their ERROR says it all, and
        // the connector stops on it.
        if st.definite.is_some() {
            return;
        }
        let now = Instant::now();
        let first = st.warned_at.is_none();
        let due = st
            .warned_at
            .is_none_or(|w| now.duration_since(w) >= self.reminder);
        if !due || !self.logs {
            return;
        }
        st.warned_at = Some(now);
        let last = st
            .last_error
            .as_deref()
            .map(|e| format!(" (last error: {e})"))
            .unwrap_or_default();
        let brokers = describe_brokers(&st.brokers);
        let silent = st.silent.clone();
        drop(st);
        let waiting = self.waiting();
        let since_utc = utc(at);
        if let (true, Some(silent)) = (first, &silent) {
            tracing::warn!(connector = %self.owner, bootstrap = %self.bootstrap, since = %since_utc,
                "Kafka does not answer since {since_utc}: {silent} ({brokers}: connections open, \
                 no reply; a frozen or hung broker?); counted as unreachable; {waiting} (a \
                 reminder follows every {}s while this lasts)",
                self.reminder.as_secs());
        } else if first {
            tracing::warn!(connector = %self.owner, bootstrap = %self.bootstrap, since = %since_utc,
                "Kafka is unreachable since {since_utc}: no broker of {} answers{last}; {waiting}; \
                 librdkafka keeps reconnecting (a reminder follows every {}s while this lasts)",
                self.bootstrap, self.reminder.as_secs());
        } else if let Some(silent) = &silent {
            let for_s = now.duration_since(since).as_secs();
            tracing::warn!(connector = %self.owner, bootstrap = %self.bootstrap, since = %since_utc,
                unreachable_for_s = for_s,
                "Kafka still does not answer, for {for_s}s (since {since_utc}): {silent}; {brokers}; {waiting}");
        } else {
            let for_s = now.duration_since(since).as_secs();
            tracing::warn!(connector = %self.owner, bootstrap = %self.bootstrap, since = %since_utc,
                unreachable_for_s = for_s,
                "Kafka is still unreachable, for {for_s}s (since {since_utc}): {brokers}{last}; {waiting}");
        }
    }

    /// A broker answered (a statistics sample shows one up, or a request succeeded): the
    /// cluster is reachable; an INFO says so when it was not.
    pub(crate) fn up(&self) {
        let mut st = self.state();
        let was = st.unreachable_since.take();
        st.silent = None;
        self.reachable.store(true, Ordering::Release);
        st.seen_up = true;
        st.warned_at = None;
        st.definite = None;
        st.last_error = None;
        st.mismatch = None;
        drop(st);
        if let Some((at, _)) = was {
            let after_s = at.elapsed().as_secs();
            if self.logs {
                tracing::info!(connector = %self.owner, bootstrap = %self.bootstrap, unreachable_for_s = after_s,
                    "Kafka is reachable again after {after_s}s; delivery resumes");
            } else {
                tracing::debug!(owner = %self.owner, "Kafka is reachable again");
            }
        }
        self.changed.notify_waiters();
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
        let mut st = self.state();
        match st.unreachable_since {
            Some(_) if st.silent.is_none() => return,
            Some(_) => {}
            None => st.unreachable_since = Some(since),
        }
        st.silent = Some(what.to_string());
        self.reachable.store(false, Ordering::Release);
        drop(st);
        self.warn_if_due();
        self.changed.notify_waiters();
    }

    /// librdkafka's statistics callback (`stats_cb`, JSON): records each broker's state; a
    /// broker `UP` means the cluster is reachable (unless it was found not to answer, see
    /// [`unresponsive`](Self::unresponsive)).
    pub(crate) fn on_statistics(&self, json: &[u8]) {
        let Ok(stats) = serde_json::from_slice::<Stats>(json) else {
            return;
        };
        // librdkafka's internal and logical brokers (the coordinators) are not connections;
        // a bootstrap broker and the broker it turned out to be share a `host:port`, which
        // is up when either connection is. So do a decommissioned broker and its successor
        // (see [`Stats`]).
        let mut brokers: BTreeMap<String, String> = BTreeMap::new();
        for b in stats.brokers {
            if b.source != "learned" && b.source != "configured" {
                continue;
            }
            match brokers.get(&b.nodename) {
                Some(state) if state == "UP" => {}
                _ => {
                    brokers.insert(b.nodename, b.state);
                }
            }
        }
        let any_up = brokers.values().any(|s| s == "UP");
        let mut st = self.state();
        st.brokers = brokers;
        let silent = st.silent.is_some();
        drop(st);
        if any_up && !silent {
            self.up();
        } else {
            // librdkafka may not report all brokers down again while it lasts: the
            // statistics keep the reminder going.
            self.warn_if_due();
        }
    }

    /// Whether librdkafka's log line (`fac`, `message`) only repeats what this link reports
    /// itself: connection failures while the cluster is known to be unreachable (or before
    /// any broker was ever up), the authentication/TLS failures it logs once, and every one
    /// of them for a command's link.
    ///
    /// A broker's connection failure (`FAIL`) is let through once per broker and reminder
    /// interval while the cluster as a whole is reachable (one broker of several is worth
    /// knowing about), and kept as the last error for the link's own WARN. Before any broker
    /// was up, [`MISMATCH_SIGHTINGS`] failures in a row that mean a `security.protocol`
    /// mismatch ([`text::protocol_mismatch`]) are a definite failure.
    pub(crate) fn covers_log_line(&self, fac: &str, message: &str) -> bool {
        let line = text::log_line(fac, message);
        let mut st = self.state();
        if let Some(status) = line.oidc_status {
            st.oidc_status = Some(status);
            st.token_failure = Some(message.to_string());
        }
        let down = st.unreachable_since.is_some();
        let failed = st.definite.is_some();
        if let Some(failure) = line.failure {
            // Without librdkafka's thread prefix (`[thrd:host:port/id]: `).
            let error = failure.error;
            st.last_error = Some(error.to_string());
            let mismatch = failure.mismatch.filter(|_| !st.seen_up);
            st.mismatch = match (mismatch, st.mismatch) {
                (Some(m), Some((last, n))) if m == last => Some((m, n + 1)),
                (Some(m), _) => Some((m, 1)),
                (None, _) => None,
            };
            if let Some((m, n)) = st.mismatch.filter(|(_, n)| *n >= MISMATCH_SIGHTINGS) {
                tracing::debug!(owner = %self.owner, "{n} connection(s) closed like a security.protocol mismatch ({m:?})");
                drop(st);
                let (bootstrap, reason) = (self.bootstrap.clone(), error.to_string());
                self.definite(match m {
                    Mismatch::TlsToPlaintext => {
                        LinkFailure::TlsToPlaintextListener { bootstrap, reason }
                    }
                    Mismatch::PlaintextToTls => {
                        LinkFailure::PlaintextToTlsListener { bootstrap, reason }
                    }
                });
                return true;
            }
            if down || failed || !st.seen_up || !self.logs {
                return true;
            }
            let broker = failure.broker.to_string();
            let now = Instant::now();
            let recent = st
                .fail_logged
                .get(&broker)
                .is_some_and(|at| now.duration_since(*at) < self.reminder);
            if !recent {
                st.fail_logged.insert(broker, now);
            }
            return recent;
        }
        // The producer reports a fencing itself, once, with what it means.
        line.fenced
            || (down && line.all_brokers_down)
            || (failed && line.sasl_or_tls)
            || (!self.logs && (down || failed || !st.seen_up))
    }
}

// ---- OAUTHBEARER tokens (issue 31): what a retry may cure. ----

/// What an OAUTHBEARER token failure means for the connector.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TokenTrouble {
    /// Refused: the same settings meet the same answer (a definite failure).
    Refused,
    /// Not reachable right now (the token endpoint did not answer, answered 5xx or 429;
    /// outboxd's token source said it retries): librdkafka asks again 10 s later.
    Retried,
}

/// What a token failure `reason` means, `oidc_status` being the HTTP status of librdkafka's
/// last failed OIDC token request (its log line comes before the error).
fn token_trouble(reason: TokenReason, oidc_status: Option<i32>) -> TokenTrouble {
    match reason {
        TokenReason::Refused => TokenTrouble::Refused,
        TokenReason::NotAcquired {
            outboxd_retries: true,
        } => TokenTrouble::Retried,
        TokenReason::NotAcquired {
            outboxd_retries: false,
        } => match oidc_status {
            Some(s) if !(400..500).contains(&s) || s == 429 => TokenTrouble::Retried,
            _ => TokenTrouble::Refused,
        },
    }
}

/// The settings to look at for a failed OAUTHBEARER login described by `reason`.
fn token_settings(reason: &str) -> &'static str {
    match text::token_source(reason) {
        TokenSource::MskIam => "the AWS credentials and region of MSK IAM (sasl.jaas.config awsRegion, awsProfileName, awsRoleArn; AWS_* environment) and the principal's kafka-cluster:Connect permission",
        TokenSource::TokenFile => "sasl.oauthbearer.token.endpoint.url (file:) and whatever keeps that file current",
        TokenSource::Oidc => "sasl.oauthbearer.token.endpoint.url, the client id and secret (sasl.jaas.config clientId/clientSecret, sasl.oauthbearer.client.credentials.*), sasl.oauthbearer.scope and extensions, and that the provider's tokens carry the audience and issuer the brokers expect",
    }
}

/// What a statistics sample (librdkafka's `stats_cb` JSON) says of the brokers.
#[derive(serde::Deserialize)]
struct Stats {
    /// Every entry of the `brokers` object, duplicates included: the object is keyed by
    /// broker name, and a broker librdkafka decommissioned (a metadata response without it,
    /// as from a KRaft broker fenced for an instant after a freeze) stays in its list, under
    /// the same name, as long as something holds a reference to it (the transaction
    /// coordinator's current broker, until the coordinator is looked up again), beside the broker it learned again. librdkafka adds brokers at the head
    /// of its list, so the stale entry came last, and a map keyed by name kept it: the link
    /// saw the broker `INIT` and the cluster unreachable for as long as the stale broker
    /// lived, while records were delivered.
    #[serde(default, deserialize_with = "every_entry")]
    brokers: Vec<BrokerStats>,
}

/// One broker of a statistics sample.
#[derive(serde::Deserialize)]
struct BrokerStats {
    #[serde(default)]
    nodename: String,
    #[serde(default)]
    source: String,
    #[serde(default)]
    state: String,
}

/// The values of a JSON object, in order, duplicate keys included.
fn every_entry<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<BrokerStats>, D::Error> {
    struct Entries;
    impl<'de> serde::de::Visitor<'de> for Entries {
        type Value = Vec<BrokerStats>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("an object of brokers")
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(
            self,
            mut map: A,
        ) -> Result<Self::Value, A::Error> {
            let mut entries = Vec::new();
            while let Some((_, b)) = map.next_entry::<serde::de::IgnoredAny, BrokerStats>()? {
                entries.push(b);
            }
            Ok(entries)
        }
    }
    d.deserialize_map(Entries)
}

/// `at` as UTC, `YYYY-MM-DDTHH:MM:SSZ`.
fn utc(at: SystemTime) -> String {
    let secs = at
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    crate::value::utc_seconds(secs)
}

/// `brokers host:port STATE, ...` (librdkafka's broker states: `INIT`, `CONNECT`, `DOWN`,
/// `UP`, ...), or `no broker state known yet`.
fn describe_brokers(brokers: &BTreeMap<String, String>) -> String {
    if brokers.is_empty() {
        return "no broker state known yet".into();
    }
    let states = brokers
        .iter()
        .map(|(n, s)| format!("{n} {s}"))
        .collect::<Vec<_>>()
        .join(", ");
    format!("brokers {states}")
}

#[cfg(test)]
mod tests {
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
