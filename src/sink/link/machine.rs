//! The connection state of [`KafkaLink`](super::KafkaLink) as a pure state machine: typed
//! observations in (what a client callback said, already classified, stamped with the
//! instant it was seen), the new state and what to report out. No clock, no logging, no
//! metrics, no locks: the link reads the clock, holds the machine behind its mutex, writes
//! the [`Report`]s as log lines and wakes its waiters.

use std::collections::BTreeMap;
use std::time::{Duration, Instant, SystemTime};

use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use tracing::Level;

use super::{LinkFailure, MISMATCH_SIGHTINGS};
use crate::sink::librdkafka_text::{self as text, LogLine, Mismatch, TokenReason};

/// When an observation was made: the monotonic instant for durations, the wall-clock time
/// for the lines that say since when.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct At {
    /// For durations.
    pub instant: Instant,
    /// For "since" in the lines.
    pub wall: SystemTime,
}

/// What librdkafka's error callback reported, typed (see [`ErrorKind::of`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ErrorKind {
    /// `_AUTHENTICATION` about an OAUTHBEARER token.
    Token(TokenReason),
    /// `_AUTHENTICATION`: refused credentials (SCRAM, PLAIN, ...).
    Authentication,
    /// `_SSL`: the TLS handshake failed (certificate verification, protocol).
    Ssl,
    /// `_ALL_BROKERS_DOWN`.
    AllBrokersDown,
    /// `_TRANSPORT`, `_RESOLVE`: one broker connection failed.
    Connection,
    /// `_FENCED` (`error`: the error as librdkafka's crate shows it).
    Fenced {
        /// The error, displayed.
        error: String,
    },
    /// Anything else.
    Other {
        /// The error, displayed.
        error: String,
    },
}

impl ErrorKind {
    /// The kind of `error` with librdkafka's description `reason`: its code decides, and
    /// for `_AUTHENTICATION` whether the connection cut the handshake short (a connection
    /// failure: [`text::handshake_transport_failure`]) or `reason` is about an OAUTHBEARER
    /// token ([`text::token_reason`]).
    pub(crate) fn of(error: &KafkaError, reason: &str) -> Self {
        match error.rdkafka_error_code() {
            // A handshake the connection cut short refused nothing: an outage.
            Some(RDKafkaErrorCode::Authentication) if text::handshake_transport_failure(reason) => {
                ErrorKind::Connection
            }
            Some(RDKafkaErrorCode::Authentication) => match text::token_reason(reason) {
                Some(t) => ErrorKind::Token(t),
                None => ErrorKind::Authentication,
            },
            Some(RDKafkaErrorCode::SSL) => ErrorKind::Ssl,
            Some(RDKafkaErrorCode::AllBrokersDown) => ErrorKind::AllBrokersDown,
            Some(RDKafkaErrorCode::BrokerTransportFailure | RDKafkaErrorCode::Resolve) => {
                ErrorKind::Connection
            }
            Some(RDKafkaErrorCode::Fenced) => ErrorKind::Fenced {
                error: error.to_string(),
            },
            _ => ErrorKind::Other {
                error: error.to_string(),
            },
        }
    }
}

/// What a client callback (or outboxd's own watch) observed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Observation<'a> {
    /// librdkafka's error callback: the error's kind and librdkafka's description.
    Error {
        /// The kind.
        kind: ErrorKind,
        /// librdkafka's description.
        reason: &'a str,
    },
    /// A librdkafka log line, read ([`text::log_line`]); the outcome says whether the link
    /// covers it ([`Outcome::covers`]).
    Log(LogLine<'a>),
    /// A statistics sample: each broker's state by `host:port` ([`broker_states`]).
    Brokers(BTreeMap<String, String>),
    /// The cluster answered one of the connector's own requests (a delivery report, a
    /// committed transaction, a metadata request).
    Answered,
    /// The cluster does not answer although librdkafka reports no trouble (`what`: records
    /// without a delivery report, a new client's metadata request unanswered) since `since`.
    Unresponsive {
        /// What got no answer.
        what: &'a str,
        /// Since when.
        since: At,
    },
}

/// What an OAUTHBEARER token failure means for the connector.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TokenTrouble {
    /// Refused: the same settings meet the same answer (a definite failure).
    Refused,
    /// Not reachable right now (the token endpoint did not answer, answered 5xx or 429;
    /// outboxd's token source said it retries): librdkafka asks again 10 s later.
    Retried,
}

/// What a token failure `reason` means, `oidc_status` being the HTTP status of librdkafka's
/// last failed OIDC token request (its log line comes before the error).
pub(crate) fn token_trouble(reason: TokenReason, oidc_status: Option<i32>) -> TokenTrouble {
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

/// Something to report: a log line of the link's (its level: [`Report::level`], its text:
/// [`Report::text`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Report {
    /// No OAUTHBEARER token yet, librdkafka retries (a connector's link only).
    TokenRetried {
        /// librdkafka's description.
        reason: String,
    },
    /// A failure a retry cannot cure, the first of its kind since a broker was up.
    Definite(LinkFailure),
    /// librdkafka's `_ALL_BROKERS_DOWN` ("N/M brokers are down", which counts bootstrap and
    /// learned brokers alike: DEBUG only).
    AllBrokersDown {
        /// librdkafka's description.
        reason: String,
    },
    /// One broker connection failed (or an idle one was closed by the broker, which happens
    /// every `connections.max.idle.ms`): only all of them down is unreachable.
    ConnectionError {
        /// librdkafka's description.
        reason: String,
    },
    /// The producer was fenced: it reports that itself (a definite failure, or in a group
    /// the handover to the connector's new owner).
    Fenced {
        /// The error, displayed.
        error: String,
        /// librdkafka's description.
        reason: String,
    },
    /// Any other client error.
    ClientError {
        /// The error, displayed.
        error: String,
        /// librdkafka's description.
        reason: String,
    },
    /// Connections closed like a `security.protocol` mismatch, `sightings` times in a row.
    MismatchSeen {
        /// How many in a row.
        sightings: u32,
        /// Which side.
        mismatch: Mismatch,
    },
    /// The first WARN of an outage (a connector's link only).
    Unreachable {
        /// Since when.
        since: SystemTime,
        /// The last broker connection error, if any.
        last_error: Option<String>,
    },
    /// The first WARN of a cluster that does not answer (a connector's link only).
    Silent {
        /// Since when.
        since: SystemTime,
        /// What got no answer.
        what: String,
        /// The brokers' states ([`describe_brokers`]).
        brokers: String,
    },
    /// A reminder: still unreachable.
    StillUnreachable {
        /// Since when.
        since: SystemTime,
        /// For how long, in seconds.
        for_s: u64,
        /// The brokers' states ([`describe_brokers`]).
        brokers: String,
        /// The last broker connection error, if any.
        last_error: Option<String>,
    },
    /// A reminder: still no answer.
    StillSilent {
        /// Since when.
        since: SystemTime,
        /// For how long, in seconds.
        for_s: u64,
        /// What got no answer.
        what: String,
        /// The brokers' states ([`describe_brokers`]).
        brokers: String,
    },
    /// Reachable again after `after_s` seconds.
    Reachable {
        /// For how long it was not, in seconds.
        after_s: u64,
    },
}

/// What the link's lines say beside a report: whose link it is and how it speaks.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Voice<'a> {
    /// The bootstrap servers.
    pub bootstrap: &'a str,
    /// How often reminders come.
    pub reminder: Duration,
    /// A connector's link (logs), or a command's (quiet).
    pub logs: bool,
}

impl Report {
    /// The level the report is logged at by a link that logs (`logs`: a connector's) or a
    /// quiet one (a command's, whose lines are DEBUG; its WARNs are never reported).
    pub(crate) fn level(&self, logs: bool) -> Level {
        match self {
            Report::TokenRetried { .. }
            | Report::Unreachable { .. }
            | Report::Silent { .. }
            | Report::StillUnreachable { .. }
            | Report::StillSilent { .. } => Level::WARN,
            Report::Definite(_) if logs => Level::ERROR,
            Report::ClientError { .. } if logs => Level::WARN,
            Report::Reachable { .. } if logs => Level::INFO,
            Report::Definite(_)
            | Report::ClientError { .. }
            | Report::Reachable { .. }
            | Report::AllBrokersDown { .. }
            | Report::ConnectionError { .. }
            | Report::Fenced { .. }
            | Report::MismatchSeen { .. } => Level::DEBUG,
        }
    }

    /// Whether the line tells what waits for the cluster (the producer's backlog): the
    /// outage's WARN and reminders.
    pub(crate) fn says_what_waits(&self) -> bool {
        matches!(
            self,
            Report::Unreachable { .. }
                | Report::Silent { .. }
                | Report::StillUnreachable { .. }
                | Report::StillSilent { .. }
        )
    }

    /// The line's text; `waiting`: what waits for the cluster, in words (for the lines of
    /// [`says_what_waits`](Self::says_what_waits)).
    pub(crate) fn text(&self, voice: Voice<'_>, waiting: &str) -> String {
        let last = |e: &Option<String>| {
            e.as_deref()
                .map(|e| format!(" (last error: {e})"))
                .unwrap_or_default()
        };
        let reminder = voice.reminder.as_secs();
        match self {
            Report::TokenRetried { reason } => {
                format!("no OAUTHBEARER token yet, librdkafka asks again in 10 s: {reason}")
            }
            Report::Definite(failure) => failure.to_string(),
            Report::AllBrokersDown { reason } => format!("all brokers down: {reason}"),
            Report::ConnectionError { reason } => format!("Kafka connection error: {reason}"),
            Report::Fenced { error, reason } => format!("{error}: {reason}"),
            Report::ClientError { error, reason } => {
                format!("Kafka client error: {error}: {reason}")
            }
            Report::MismatchSeen {
                sightings,
                mismatch,
            } => format!(
                "{sightings} connection(s) closed like a security.protocol mismatch ({mismatch:?})"
            ),
            Report::Unreachable { since, last_error } => format!(
                "Kafka is unreachable since {}: no broker of {} answers{}; {waiting}; \
                 librdkafka keeps reconnecting (a reminder follows every {reminder}s while this \
                 lasts)",
                utc(*since),
                voice.bootstrap,
                last(last_error)
            ),
            Report::Silent {
                since,
                what,
                brokers,
            } => format!(
                "Kafka does not answer since {}: {what} ({brokers}: connections open, no reply; \
                 a frozen or hung broker?); counted as unreachable; {waiting} (a reminder \
                 follows every {reminder}s while this lasts)",
                utc(*since)
            ),
            Report::StillSilent {
                since,
                for_s,
                what,
                brokers,
            } => format!(
                "Kafka still does not answer, for {for_s}s (since {}): {what}; {brokers}; \
                 {waiting}",
                utc(*since)
            ),
            Report::StillUnreachable {
                since,
                for_s,
                brokers,
                last_error,
            } => format!(
                "Kafka is still unreachable, for {for_s}s (since {}): {brokers}{}; {waiting}",
                utc(*since),
                last(last_error)
            ),
            Report::Reachable { after_s } if voice.logs => {
                format!("Kafka is reachable again after {after_s}s; delivery resumes")
            }
            Report::Reachable { .. } => "Kafka is reachable again".into(),
        }
    }
}

/// What one observation did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Outcome {
    /// What to report, in order.
    pub reports: Vec<Report>,
    /// Whether those waiting for a change (a definite failure, reachability) should look
    /// again.
    pub changed: bool,
    /// For a log line: whether the link reports what it says itself (librdkafka's line then
    /// goes to DEBUG only).
    pub covers: bool,
}

/// The state of one link: what the observations have said so far.
#[derive(Debug)]
pub(crate) struct Machine {
    /// The bootstrap servers (for the failures' messages).
    bootstrap: String,
    /// Whether the link logs its WARN/INFO lines (a connector's) or only keeps the state (a
    /// command's, which reports the outcome itself).
    logs: bool,
    /// How often the WARN is repeated while the cluster stays unreachable.
    reminder: Duration,
    /// Whether a broker was ever seen up: before that, a broker's connection failure is no
    /// news of its own (it becomes the last error the WARN names).
    seen_up: bool,
    /// Since when no broker is known to be up (an `_ALL_BROKERS_DOWN` or connection errors
    /// without a broker up since): the monotonic instant for durations, the wall-clock time
    /// for the lines that say since when.
    unreachable_since: Option<(Instant, SystemTime)>,
    /// When the last WARN or reminder was reported.
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
    /// reports nothing). Only an answer clears it ([`Observation::Answered`]), not a broker
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

impl Machine {
    /// The state of a new link to `bootstrap`, logging (`logs`) with a reminder every
    /// `reminder`.
    pub(crate) fn new(bootstrap: &str, logs: bool, reminder: Duration) -> Self {
        Self {
            bootstrap: bootstrap.to_string(),
            logs,
            reminder,
            seen_up: false,
            unreachable_since: None,
            warned_at: None,
            brokers: BTreeMap::new(),
            last_error: None,
            definite: None,
            silent: None,
            fail_logged: BTreeMap::new(),
            mismatch: None,
            oidc_status: None,
            token_failure: None,
        }
    }

    /// The transition for `observation`, made at `at`.
    pub(crate) fn observe(&mut self, observation: Observation<'_>, at: At) -> Outcome {
        let mut out = Outcome::default();
        match observation {
            Observation::Error { kind, reason } => self.error(kind, reason, at, &mut out),
            Observation::Log(line) => out.covers = self.log_line(&line, at, &mut out),
            Observation::Brokers(brokers) => self.brokers(brokers, at, &mut out),
            Observation::Answered => self.up(at, &mut out),
            Observation::Unresponsive { what, since } => {
                self.unresponsive(what, since, at, &mut out)
            }
        }
        out
    }

    /// Whether a broker was seen up and the cluster is not unreachable since.
    pub(crate) fn reachable(&self) -> bool {
        self.seen_up && self.unreachable_since.is_none()
    }

    /// How long the cluster has been unreachable at `now`, if it is.
    pub(crate) fn unreachable_for(&self, now: Instant) -> Option<Duration> {
        self.unreachable_since
            .map(|(at, _)| now.saturating_duration_since(at))
    }

    /// Why the cluster is unreachable at `now`: for how long, the brokers' last states and
    /// the last connection error; `None` while it is reachable.
    pub(crate) fn unreachable_reason(&self, now: Instant) -> Option<String> {
        let (since, at) = self.unreachable_since?;
        Some(format!(
            "Kafka at {} unreachable for {}s, since {} ({}{}{})",
            self.bootstrap,
            now.saturating_duration_since(since).as_secs(),
            utc(at),
            self.silent
                .as_deref()
                .map(|s| format!("it does not answer: {s}; "))
                .unwrap_or_default(),
            describe_brokers(&self.brokers),
            self.last_error
                .as_deref()
                .map(|e| format!("; last error: {e}"))
                .unwrap_or_default()
        ))
    }

    /// A failure a retry cannot cure, seen since a broker was last up.
    pub(crate) fn definite(&self) -> Option<&LinkFailure> {
        self.definite.as_ref()
    }

    /// The last OAUTHBEARER token failure that librdkafka retries, if any.
    pub(crate) fn token_failure(&self) -> Option<&str> {
        self.token_failure.as_deref()
    }

    /// The last broker connection error, if any since a broker was up.
    pub(crate) fn last_error(&self) -> Option<&str> {
        self.last_error.as_deref()
    }

    fn error(&mut self, kind: ErrorKind, reason: &str, at: At, out: &mut Outcome) {
        let bootstrap = self.bootstrap.clone();
        let reason_s = reason.to_string();
        match kind {
            ErrorKind::Token(t) => match token_trouble(t, self.oidc_status) {
                TokenTrouble::Retried => {
                    if self.logs {
                        out.reports.push(Report::TokenRetried {
                            reason: reason_s.clone(),
                        });
                    }
                    self.last_error = Some(reason_s.clone());
                    self.token_failure = Some(reason_s);
                }
                TokenTrouble::Refused => self.fail(
                    LinkFailure::Token {
                        bootstrap,
                        reason: reason_s,
                    },
                    out,
                ),
            },
            ErrorKind::Authentication => self.fail(
                LinkFailure::Authentication {
                    bootstrap,
                    reason: reason_s,
                },
                out,
            ),
            ErrorKind::Ssl => self.fail(
                LinkFailure::Tls {
                    bootstrap,
                    reason: reason_s,
                },
                out,
            ),
            ErrorKind::AllBrokersDown => {
                out.reports
                    .push(Report::AllBrokersDown { reason: reason_s });
                self.unreachable_since.get_or_insert((at.instant, at.wall));
                self.warn_if_due(at, out);
                out.changed = true;
            }
            ErrorKind::Connection => {
                out.reports.push(Report::ConnectionError {
                    reason: reason_s.clone(),
                });
                self.last_error = Some(reason_s);
            }
            ErrorKind::Fenced { error } => out.reports.push(Report::Fenced {
                error,
                reason: reason_s,
            }),
            ErrorKind::Other { error } => out.reports.push(Report::ClientError {
                error,
                reason: reason_s,
            }),
        }
    }

    /// A failure that will not go away on a retry: reported once per kind (librdkafka
    /// reports it again for each broker connection, each time in other words) and kept.
    fn fail(&mut self, failure: LinkFailure, out: &mut Outcome) {
        let known = self
            .definite
            .as_ref()
            .is_some_and(|d| std::mem::discriminant(d) == std::mem::discriminant(&failure));
        if !known {
            out.reports.push(Report::Definite(failure.clone()));
            self.definite = Some(failure);
            out.changed = true;
        }
    }

    /// While the cluster is unreachable: the WARN the first time, then a reminder when the
    /// last one is `reminder` old (a connector's link only).
    fn warn_if_due(&mut self, at: At, out: &mut Outcome) {
        let Some((since, since_wall)) = self.unreachable_since else {
            return;
        };
        // Refused credentials or certificates are no outage: their ERROR says it all, and
        // the connector stops on it.
        if self.definite.is_some() {
            return;
        }
        let now = at.instant;
        let first = self.warned_at.is_none();
        let due = self
            .warned_at
            .is_none_or(|w| now.saturating_duration_since(w) >= self.reminder);
        if !due || !self.logs {
            return;
        }
        self.warned_at = Some(now);
        let brokers = describe_brokers(&self.brokers);
        let for_s = now.saturating_duration_since(since).as_secs();
        out.reports.push(match (first, self.silent.clone()) {
            (true, Some(what)) => Report::Silent {
                since: since_wall,
                what,
                brokers,
            },
            (true, None) => Report::Unreachable {
                since: since_wall,
                last_error: self.last_error.clone(),
            },
            (false, Some(what)) => Report::StillSilent {
                since: since_wall,
                for_s,
                what,
                brokers,
            },
            (false, None) => Report::StillUnreachable {
                since: since_wall,
                for_s,
                brokers,
                last_error: self.last_error.clone(),
            },
        });
    }

    /// A broker answered (a statistics sample shows one up, or a request succeeded): the
    /// cluster is reachable; reported when it was not.
    fn up(&mut self, at: At, out: &mut Outcome) {
        let was = self.unreachable_since.take();
        self.silent = None;
        self.seen_up = true;
        self.warned_at = None;
        self.definite = None;
        self.last_error = None;
        self.mismatch = None;
        if let Some((since, _)) = was {
            out.reports.push(Report::Reachable {
                after_s: at.instant.saturating_duration_since(since).as_secs(),
            });
        }
        out.changed = true;
    }

    /// The cluster does not answer although librdkafka reports no trouble: unreachable since
    /// `since` until it answers — a broker `UP` in the statistics does not clear it. An
    /// outage librdkafka already reported keeps its own WARN.
    fn unresponsive(&mut self, what: &str, since: At, at: At, out: &mut Outcome) {
        match self.unreachable_since {
            Some(_) if self.silent.is_none() => return,
            Some(_) => {}
            None => self.unreachable_since = Some((since.instant, since.wall)),
        }
        self.silent = Some(what.to_string());
        self.warn_if_due(at, out);
        out.changed = true;
    }

    /// A statistics sample: a broker `UP` means the cluster is reachable (unless it was
    /// found not to answer); otherwise the reminders go on (librdkafka may not report all
    /// brokers down again while it lasts).
    fn brokers(&mut self, brokers: BTreeMap<String, String>, at: At, out: &mut Outcome) {
        let any_up = brokers.values().any(|s| s == "UP");
        self.brokers = brokers;
        if any_up && self.silent.is_none() {
            self.up(at, out);
        } else {
            self.warn_if_due(at, out);
        }
    }

    /// Whether librdkafka's log line only repeats what this link reports itself: connection
    /// failures while the cluster is known to be unreachable (or before any broker was ever
    /// up), the authentication/TLS failures it reports once, a fencing (the producer reports
    /// it), and every one of them for a command's link.
    ///
    /// A broker's connection failure (`FAIL`) is let through once per broker and reminder
    /// interval while the cluster as a whole is reachable (one broker of several is worth
    /// knowing about), and kept as the last error for the link's own WARN. Before any broker
    /// was up, [`MISMATCH_SIGHTINGS`] failures in a row that mean a `security.protocol`
    /// mismatch ([`text::protocol_mismatch`]) are a definite failure.
    fn log_line(&mut self, line: &LogLine<'_>, at: At, out: &mut Outcome) -> bool {
        if let Some(status) = line.oidc_status {
            self.oidc_status = Some(status);
            self.token_failure = Some(line.message.to_string());
        }
        let down = self.unreachable_since.is_some();
        let failed = self.definite.is_some();
        if let Some(failure) = &line.failure {
            self.last_error = Some(failure.error.to_string());
            let mismatch = failure.mismatch.filter(|_| !self.seen_up);
            self.mismatch = match (mismatch, self.mismatch) {
                (Some(m), Some((last, n))) if m == last => Some((m, n + 1)),
                (Some(m), _) => Some((m, 1)),
                (None, _) => None,
            };
            if let Some((m, n)) = self.mismatch.filter(|(_, n)| *n >= MISMATCH_SIGHTINGS) {
                out.reports.push(Report::MismatchSeen {
                    sightings: n,
                    mismatch: m,
                });
                let (bootstrap, reason) = (self.bootstrap.clone(), failure.error.to_string());
                self.fail(
                    match m {
                        Mismatch::TlsToPlaintext => {
                            LinkFailure::TlsToPlaintextListener { bootstrap, reason }
                        }
                        Mismatch::PlaintextToTls => {
                            LinkFailure::PlaintextToTlsListener { bootstrap, reason }
                        }
                    },
                    out,
                );
                return true;
            }
            if down || failed || !self.seen_up || !self.logs {
                return true;
            }
            let now = at.instant;
            let recent = self
                .fail_logged
                .get(failure.broker)
                .is_some_and(|t| now.saturating_duration_since(*t) < self.reminder);
            if !recent {
                self.fail_logged.insert(failure.broker.to_string(), now);
            }
            return recent;
        }
        line.fenced
            || (down && line.all_brokers_down)
            || (failed && line.sasl_or_tls)
            || (!self.logs && (down || failed || !self.seen_up))
    }
}

/// What a statistics sample (librdkafka's `stats_cb` JSON) says of the brokers.
#[derive(serde::Deserialize)]
struct Stats {
    /// Every entry of the `brokers` object, duplicates included: the object is keyed by
    /// broker name, and a broker librdkafka decommissioned (a metadata response without it,
    /// as from a KRaft broker fenced for an instant after a freeze) stays in its list, under
    /// the same name, as long as something holds a reference to it (the transaction
    /// coordinator's current broker, until the coordinator is looked up again), beside the
    /// broker it learned again. librdkafka adds brokers at the head of its list, so the
    /// stale entry came last, and a map keyed by name kept it: the link saw the broker
    /// `INIT` and the cluster unreachable for as long as the stale broker lived, while
    /// records were delivered.
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

/// The brokers' states in a statistics sample (`json`: librdkafka's `stats_cb`), by
/// `host:port`; `None` when it does not parse. librdkafka's internal and logical brokers
/// (the coordinators) are not connections; a bootstrap broker and the broker it turned out
/// to be share a `host:port`, which is up when either connection is. So do a decommissioned
/// broker and its successor (see [`Stats`]).
pub(crate) fn broker_states(json: &[u8]) -> Option<BTreeMap<String, String>> {
    let stats = serde_json::from_slice::<Stats>(json).ok()?;
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
    Some(brokers)
}

/// `at` as UTC, `YYYY-MM-DDTHH:MM:SSZ`.
pub(crate) fn utc(at: SystemTime) -> String {
    let secs = at
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    crate::value::utc_seconds(secs)
}

/// `brokers host:port STATE, ...` (librdkafka's broker states: `INIT`, `CONNECT`, `DOWN`,
/// `UP`, ...), or `no broker state known yet`.
pub(crate) fn describe_brokers(brokers: &BTreeMap<String, String>) -> String {
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

    /// A clock of the test's own: `t(s)` is `s` seconds after a fixed start, on the wall
    /// clock 2026-01-01T00:00:00Z + `s`.
    struct Clock(Instant);

    impl Clock {
        fn new() -> Self {
            Self(Instant::now())
        }
        fn t(&self, secs: f64) -> At {
            let d = Duration::from_secs_f64(secs);
            At {
                instant: self.0 + d,
                wall: SystemTime::UNIX_EPOCH + Duration::from_secs(1_767_225_600) + d,
            }
        }
    }

    const REMINDER: Duration = Duration::from_secs(60);

    fn connector() -> Machine {
        Machine::new("k1:9092", true, REMINDER)
    }

    fn command() -> Machine {
        Machine::new("k1:9092", false, REMINDER)
    }

    fn down() -> Observation<'static> {
        Observation::Error {
            kind: ErrorKind::AllBrokersDown,
            reason: "1/1 brokers are down",
        }
    }

    fn states(pairs: &[(&str, &str)]) -> Observation<'static> {
        Observation::Brokers(
            pairs
                .iter()
                .map(|(n, s)| (n.to_string(), s.to_string()))
                .collect(),
        )
    }

    fn log(fac: &'static str, message: &'static str) -> Observation<'static> {
        Observation::Log(text::log_line(fac, message))
    }

    /// The reports at WARN or above a link that logs (`logs`) would write.
    fn loud(out: &Outcome, logs: bool) -> Vec<&Report> {
        out.reports
            .iter()
            .filter(|r| r.level(logs) <= Level::WARN)
            .collect()
    }

    fn voice(logs: bool) -> Voice<'static> {
        Voice {
            bootstrap: "k1:9092",
            reminder: REMINDER,
            logs,
        }
    }

    #[test]
    fn an_outage_is_one_warn_repeats_are_silent_a_reminder_follows_and_recovery_is_one_info() {
        let c = Clock::new();
        let mut m = connector();
        let first = m.observe(down(), c.t(0.0));
        assert!(first.changed);
        assert!(!m.reachable());
        assert_eq!(
            first.reports,
            vec![
                Report::AllBrokersDown {
                    reason: "1/1 brokers are down".into()
                },
                Report::Unreachable {
                    since: c.t(0.0).wall,
                    last_error: None
                }
            ]
        );
        assert_eq!(
            first.reports[1].text(voice(true), "3 record(s) wait"),
            "Kafka is unreachable since 2026-01-01T00:00:00Z: no broker of k1:9092 answers; \
             3 record(s) wait; librdkafka keeps reconnecting (a reminder follows every 60s \
             while this lasts)"
        );
        // Repeats within the interval: nothing at WARN, by error or by statistics.
        for (i, obs) in [down(), states(&[("k1:9092", "DOWN")]), down()]
            .into_iter()
            .enumerate()
        {
            let out = m.observe(obs, c.t(1.0 + i as f64));
            assert!(loud(&out, true).is_empty(), "{out:?}");
        }
        // The statistics alone bring the reminder once the interval has passed.
        let reminder = m.observe(states(&[("k1:9092", "DOWN")]), c.t(61.0));
        assert_eq!(
            reminder.reports,
            vec![Report::StillUnreachable {
                since: c.t(0.0).wall,
                for_s: 61,
                brokers: "brokers k1:9092 DOWN".into(),
                last_error: None
            }]
        );
        assert!(reminder.reports[0]
            .text(voice(true), "w")
            .starts_with("Kafka is still unreachable, for 61s (since 2026-01-01T00:00:00Z): brokers k1:9092 DOWN; w"));
        assert!(loud(&m.observe(down(), c.t(62.0)), true).is_empty());
        assert_eq!(
            m.unreachable_for(c.t(70.0).instant),
            Some(Duration::from_secs(70))
        );
        assert_eq!(
            m.unreachable_reason(c.t(70.0).instant).as_deref(),
            Some("Kafka at k1:9092 unreachable for 70s, since 2026-01-01T00:00:00Z (brokers k1:9092 DOWN)")
        );
        // A broker up: one INFO, then nothing.
        let back = m.observe(states(&[("k1:9092", "UP")]), c.t(75.0));
        assert_eq!(back.reports, vec![Report::Reachable { after_s: 75 }]);
        assert_eq!(back.reports[0].level(true), Level::INFO);
        assert_eq!(
            back.reports[0].text(voice(true), ""),
            "Kafka is reachable again after 75s; delivery resumes"
        );
        assert!(m.reachable());
        assert!(m.unreachable_reason(c.t(76.0).instant).is_none());
        assert!(m
            .observe(states(&[("k1:9092", "UP")]), c.t(76.0))
            .reports
            .is_empty());
        // A new outage is a new first WARN.
        let again = m.observe(down(), c.t(80.0));
        assert!(matches!(
            loud(&again, true)[..],
            [Report::Unreachable { .. }]
        ));
    }

    #[test]
    fn the_last_connection_error_is_named() {
        let c = Clock::new();
        let mut m = connector();
        let refused = Observation::Error {
            kind: ErrorKind::Connection,
            reason: "b:1/bootstrap: Connect to ipv4#127.0.0.1:1 failed: Connection refused",
        };
        let out = m.observe(refused, c.t(0.0));
        assert!(loud(&out, true).is_empty(), "one broker is no outage");
        assert!(!out.changed);
        let out = m.observe(down(), c.t(1.0));
        let text = loud(&out, true)[0].text(voice(true), "w");
        assert!(
            text.contains("answers (last error: b:1/bootstrap: Connect to ipv4#127.0.0.1:1 failed: Connection refused); w"),
            "{text}"
        );
    }

    #[test]
    fn definite_failures_are_reported_once_per_kind_and_end_at_a_broker_up() {
        let c = Clock::new();
        let mut m = connector();
        let refused = |reason| Observation::Error {
            kind: ErrorKind::Authentication,
            reason,
        };
        let out = m.observe(
            refused(
                "sasl_ssl://k1:9092/bootstrap: SASL authentication error: Authentication failed",
            ),
            c.t(0.0),
        );
        assert!(out.changed);
        assert!(matches!(
            &out.reports[..],
            [Report::Definite(LinkFailure::Authentication { .. })]
        ));
        assert_eq!(out.reports[0].level(true), Level::ERROR);
        assert_eq!(out.reports[0].level(false), Level::DEBUG);
        // In other words, for another broker connection: nothing new.
        let out = m.observe(
            refused("sasl_ssl://k1:9092/1: SASL authentication error: Authentication failed"),
            c.t(1.0),
        );
        assert!(out.reports.is_empty() && !out.changed, "{out:?}");
        // Another kind is reported.
        let tls = m.observe(
            Observation::Error {
                kind: ErrorKind::Ssl,
                reason: "certificate verify failed",
            },
            c.t(2.0),
        );
        assert!(matches!(
            &tls.reports[..],
            [Report::Definite(LinkFailure::Tls { .. })]
        ));
        // No outage WARN beside it, and librdkafka's SASL/SSL lines are covered.
        assert!(loud(&m.observe(down(), c.t(3.0)), true)
            .iter()
            .all(|r| matches!(r, Report::Definite(_))));
        assert!(
            m.observe(
                log(
                    "ERROR",
                    "sasl_ssl://k1:9092/1: SASL authentication error: Authentication failed"
                ),
                c.t(4.0)
            )
            .covers
        );
        // A broker up ends it.
        m.observe(states(&[("k1:9092", "UP")]), c.t(5.0));
        assert!(m.definite().is_none());
    }

    #[test]
    fn token_failures_follow_the_oidc_status() {
        let c = Clock::new();
        let mut m = connector();
        let acquire = |reason| Observation::Error {
            kind: ErrorKind::Token(text::token_reason(reason).unwrap()),
            reason,
        };
        // A 502 from the endpoint: retried, one WARN each time librdkafka says so; a
        // connector's link lets librdkafka's own line through.
        let oidc = m.observe(
            log(
                "OIDC",
                r#"Failed to retrieve OIDC token from "u": <html>502</html> (502)"#,
            ),
            c.t(0.0),
        );
        assert!(!oidc.covers && oidc.reports.is_empty(), "{oidc:?}");
        let out = m.observe(
            acquire("Failed to acquire SASL OAUTHBEARER token: <html>502</html>"),
            c.t(0.1),
        );
        assert!(matches!(&out.reports[..], [Report::TokenRetried { .. }]));
        assert!(m.definite().is_none());
        assert_eq!(
            m.token_failure(),
            Some("Failed to acquire SASL OAUTHBEARER token: <html>502</html>")
        );
        // A 401: definite.
        m.observe(
            log(
                "OIDC",
                r#"Failed to retrieve OIDC token from "u": denied (401)"#,
            ),
            c.t(1.0),
        );
        let out = m.observe(
            acquire("Failed to acquire SASL OAUTHBEARER token: denied"),
            c.t(1.1),
        );
        assert!(matches!(
            &out.reports[..],
            [Report::Definite(LinkFailure::Token { .. })]
        ));
        // A command's link keeps the state without the WARN.
        let mut quiet = command();
        let out = quiet.observe(
            acquire("Failed to acquire SASL OAUTHBEARER token: no AWS credentials for MSK IAM (outboxd retries)"),
            c.t(0.0),
        );
        assert!(out.reports.is_empty(), "{out:?}");
        assert!(quiet.token_failure().is_some());
        assert_eq!(
            token_trouble(TokenReason::Refused, Some(503)),
            TokenTrouble::Refused
        );
        let not_acquired = TokenReason::NotAcquired {
            outboxd_retries: false,
        };
        for (status, trouble) in [
            (Some(401), TokenTrouble::Refused),
            (Some(429), TokenTrouble::Retried),
            (Some(503), TokenTrouble::Retried),
            (Some(-1), TokenTrouble::Retried),
            (None, TokenTrouble::Refused),
        ] {
            assert_eq!(token_trouble(not_acquired, status), trouble, "{status:?}");
        }
    }

    const PLAINTEXT_ON_TLS: &str = "[thrd:localhost:42094/bootstrap]: localhost:42094/bootstrap: Disconnected: connection closed by peer: receive 0 after POLLIN (after 4ms in state APIVERSION_QUERY)";

    #[test]
    fn a_mismatch_twice_in_a_row_before_any_broker_was_up_is_definite() {
        let c = Clock::new();
        let mut m = connector();
        let once = m.observe(log("FAIL", PLAINTEXT_ON_TLS), c.t(0.0));
        assert!(once.covers && once.reports.is_empty());
        let twice = m.observe(log("FAIL", PLAINTEXT_ON_TLS), c.t(0.1));
        assert!(twice.covers && twice.changed);
        assert_eq!(
            twice.reports[0],
            Report::MismatchSeen {
                sightings: 2,
                mismatch: Mismatch::PlaintextToTls
            }
        );
        assert!(matches!(
            &twice.reports[1],
            Report::Definite(LinkFailure::PlaintextToTlsListener { .. })
        ));
        // Once a broker was up, a closed connection is no mismatch.
        let mut m = connector();
        m.observe(Observation::Answered, c.t(0.0));
        for i in 0..3 {
            m.observe(log("FAIL", PLAINTEXT_ON_TLS), c.t(1.0 + i as f64));
        }
        assert!(m.definite().is_none());
    }

    #[test]
    fn a_broker_failure_is_let_through_once_per_broker_and_interval_while_reachable() {
        let c = Clock::new();
        let mut m = connector();
        let fail = "[thrd:b:1/1]: b:1/1: Connect to ipv4#127.0.0.1:1 failed: Connection refused";
        // Never up: the WARN will say it.
        assert!(m.observe(log("FAIL", fail), c.t(0.0)).covers);
        assert_eq!(
            m.last_error(),
            Some("b:1/1: Connect to ipv4#127.0.0.1:1 failed: Connection refused")
        );
        m.observe(states(&[("b:1", "UP")]), c.t(1.0));
        assert!(!m.observe(log("FAIL", fail), c.t(2.0)).covers);
        assert!(m.observe(log("FAIL", fail), c.t(3.0)).covers);
        assert!(
            !m.observe(log("FAIL", fail), c.t(62.0)).covers,
            "a reminder later"
        );
        assert!(
            !m.observe(
                log(
                    "FAIL",
                    "[thrd:c:2/2]: c:2/2: Connect to ipv4#127.0.0.1:2 failed"
                ),
                c.t(63.0)
            )
            .covers
        );
        // Unreachable: covered.
        m.observe(down(), c.t(64.0));
        assert!(m.observe(log("FAIL", fail), c.t(200.0)).covers);
        assert!(
            m.observe(log("ERROR", "1/1 brokers are down"), c.t(200.0))
                .covers
        );
    }

    #[test]
    fn a_command_s_link_keeps_the_state_and_warns_of_nothing() {
        let c = Clock::new();
        let mut m = command();
        for i in 0..3 {
            let out = m.observe(down(), c.t(i as f64 * 100.0));
            assert!(loud(&out, false).is_empty(), "{out:?}");
        }
        assert!(m.unreachable_reason(c.t(300.0).instant).is_some());
        // Every librdkafka line about it is covered, before and during the outage.
        assert!(m.observe(log("ERROR", "anything"), c.t(301.0)).covers);
        let back = m.observe(Observation::Answered, c.t(302.0));
        assert_eq!(back.reports, vec![Report::Reachable { after_s: 302 }]);
        assert_eq!(back.reports[0].level(false), Level::DEBUG);
        assert_eq!(
            back.reports[0].text(voice(false), ""),
            "Kafka is reachable again"
        );
        let e = Observation::Error {
            kind: ErrorKind::Other {
                error: "Local: Broker transport failure".into(),
            },
            reason: "x",
        };
        let out = m.observe(e.clone(), c.t(303.0));
        assert_eq!(out.reports[0].level(false), Level::DEBUG);
        assert_eq!(
            connector().observe(e, c.t(0.0)).reports[0].level(true),
            Level::WARN
        );
    }

    #[test]
    fn a_silent_cluster_is_unreachable_until_it_answers() {
        let c = Clock::new();
        let mut m = connector();
        m.observe(states(&[("b:1", "UP")]), c.t(0.0));
        let out = m.observe(
            Observation::Unresponsive {
                what: "40 record(s) got no delivery report for 4s",
                since: c.t(4.0),
            },
            c.t(10.0),
        );
        assert_eq!(
            out.reports,
            vec![Report::Silent {
                since: c.t(4.0).wall,
                what: "40 record(s) got no delivery report for 4s".into(),
                brokers: "brokers b:1 UP".into()
            }]
        );
        assert!(!m.reachable());
        // Its connections stay UP in the statistics: no answer, no news.
        let out = m.observe(states(&[("b:1", "UP")]), c.t(11.0));
        assert!(out.reports.is_empty() && !m.reachable(), "{out:?}");
        let reminder = m.observe(states(&[("b:1", "UP")]), c.t(70.0));
        assert!(matches!(
            &reminder.reports[..],
            [Report::StillSilent { for_s: 66, .. }]
        ));
        let back = m.observe(Observation::Answered, c.t(71.0));
        assert_eq!(back.reports, vec![Report::Reachable { after_s: 67 }]);
        // An outage librdkafka reported keeps its own WARN.
        let mut m = connector();
        m.observe(down(), c.t(0.0));
        let out = m.observe(
            Observation::Unresponsive {
                what: "no report",
                since: c.t(0.0),
            },
            c.t(1.0),
        );
        assert!(out.reports.is_empty() && !out.changed, "{out:?}");
        m.observe(states(&[("b:1", "UP")]), c.t(2.0));
        assert!(m.reachable());
    }

    #[test]
    fn errors_are_kinds_by_code() {
        use RDKafkaErrorCode as C;
        let kind = |code, reason| ErrorKind::of(&KafkaError::Global(code), reason);
        assert_eq!(
            kind(
                C::Authentication,
                "SASL authentication error: Authentication failed"
            ),
            ErrorKind::Authentication
        );
        assert_eq!(
            kind(
                C::Authentication,
                "Failed to acquire SASL OAUTHBEARER token: x"
            ),
            ErrorKind::Token(TokenReason::NotAcquired {
                outboxd_retries: false
            })
        );
        assert_eq!(kind(C::SSL, "x"), ErrorKind::Ssl);
        assert_eq!(kind(C::AllBrokersDown, "x"), ErrorKind::AllBrokersDown);
        assert_eq!(kind(C::BrokerTransportFailure, "x"), ErrorKind::Connection);
        assert_eq!(kind(C::Resolve, "x"), ErrorKind::Connection);
        assert!(matches!(kind(C::Fenced, "x"), ErrorKind::Fenced { .. }));
        assert!(matches!(
            kind(C::MessageTimedOut, "x"),
            ErrorKind::Other { .. }
        ));
    }

    #[test]
    fn broker_states_keep_a_host_up_when_any_of_its_connections_is() {
        let states = broker_states(
            br#"{"brokers":{
                "h:1/1":{"nodename":"h:1","source":"learned","state":"UP"},
                "h:1/bootstrap":{"nodename":"h:1","source":"configured","state":"INIT"},
                "TxnCoordinator":{"nodename":"h:1","source":"logical","state":"UP"},
                "h:1/1":{"nodename":"h:1","source":"learned","state":"INIT"},
                "h:2/2":{"nodename":"h:2","source":"learned","state":"DOWN"}
            }}"#,
        )
        .unwrap();
        assert_eq!(states["h:1"], "UP");
        assert_eq!(states["h:2"], "DOWN");
        assert_eq!(states.len(), 2);
        assert_eq!(broker_states(b"not json"), None);
    }
}
