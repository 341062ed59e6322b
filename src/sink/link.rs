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
//! cure (a refused SASL authentication, a TLS handshake that fails verification), so that such
//! a connector stops with a definite error instead of retrying forever.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use tokio::sync::Notify;

/// How often a reminder is logged while the cluster stays unreachable.
pub const REMINDER_INTERVAL: Duration = Duration::from_secs(60);

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
}

/// What the callbacks have said so far.
#[derive(Debug, Default)]
struct State {
    /// Since when no broker is known to be up (an `_ALL_BROKERS_DOWN` or connection errors
    /// without a broker up since).
    unreachable_since: Option<(Instant, SystemTime)>,
    /// When the last WARN or reminder was logged.
    warned_at: Option<Instant>,
    /// The last state of each broker, from the statistics.
    brokers: BTreeMap<String, String>,
    /// The last broker connection error's description (`_TRANSPORT`, `_RESOLVE`).
    last_error: Option<String>,
    /// A failure a retry cannot cure, until a broker is up again.
    definite: Option<LinkFailure>,
    /// When a broker's connection failure (librdkafka `FAIL` line) was last let through, per
    /// broker.
    fail_logged: BTreeMap<String, Instant>,
}

/// The connection state of one Kafka cluster for one connector (or one command).
#[derive(Debug)]
pub struct KafkaLink {
    /// Who waits for the cluster: a connector's name, or a command.
    owner: String,
    bootstrap: String,
    state: Mutex<State>,
    changed: Notify,
}

impl KafkaLink {
    /// The link of `owner` (connector name, or `check`) to the cluster at `bootstrap`.
    pub fn new(owner: &str, bootstrap: &str) -> Arc<Self> {
        Arc::new(Self {
            owner: owner.to_string(),
            bootstrap: bootstrap.to_string(),
            state: Mutex::new(State::default()),
            changed: Notify::new(),
        })
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
        match code {
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
            _ => {
                tracing::warn!(target: "librdkafka", owner = %self.owner, "Kafka client error: {error}: {reason}")
            }
        }
    }

    /// A failure that will not go away on a retry: logged once (per distinct reason) and kept.
    fn definite(&self, failure: LinkFailure) {
        let mut st = self.state();
        if st.definite.as_ref() != Some(&failure) {
            tracing::error!(owner = %self.owner, "{failure}");
            st.definite = Some(failure);
            drop(st);
            self.changed.notify_waiters();
        }
    }

    /// No broker could be reached (`reason` from librdkafka): the first time, a WARN;
    /// then a reminder at most every [`REMINDER_INTERVAL`].
    fn down(&self, reason: &str) {
        let mut st = self.state();
        let reason = match &st.last_error {
            Some(last) => format!("{reason}; last error: {last}"),
            None => reason.to_string(),
        };
        let now = Instant::now();
        let since = *st.unreachable_since.get_or_insert((now, SystemTime::now()));
        let due = st
            .warned_at
            .is_none_or(|w| now.duration_since(w) >= REMINDER_INTERVAL);
        if due {
            st.warned_at = Some(now);
            let brokers = describe_brokers(&st.brokers);
            if now.duration_since(since.0) < Duration::from_secs(1) {
                tracing::warn!(owner = %self.owner, bootstrap = %self.bootstrap, brokers = %brokers,
                    "Kafka is unreachable ({reason}); delivery and checkpoints wait for it (librdkafka retries on its own)");
            } else {
                tracing::warn!(owner = %self.owner, bootstrap = %self.bootstrap, brokers = %brokers,
                    unreachable_for = ?now.duration_since(since.0),
                    "Kafka is still unreachable ({reason}); delivery and checkpoints wait for it");
            }
        }
        drop(st);
        self.changed.notify_waiters();
    }

    /// A broker answered (a statistics sample shows one up, or a request succeeded): the
    /// cluster is reachable; an INFO says so when it was not.
    pub(crate) fn up(&self) {
        let mut st = self.state();
        let was = st.unreachable_since.take();
        st.warned_at = None;
        st.definite = None;
        st.last_error = None;
        drop(st);
        if let Some((at, _)) = was {
            tracing::info!(owner = %self.owner, bootstrap = %self.bootstrap, after = ?at.elapsed(), "Kafka is reachable again");
        }
        self.changed.notify_waiters();
    }

    /// librdkafka's statistics callback (`stats_cb`, JSON): records each broker's state; a
    /// broker `UP` means the cluster is reachable.
    pub(crate) fn on_statistics(&self, json: &[u8]) {
        #[derive(serde::Deserialize)]
        struct Stats {
            #[serde(default)]
            brokers: BTreeMap<String, BrokerStats>,
        }
        #[derive(serde::Deserialize)]
        struct BrokerStats {
            #[serde(default)]
            nodename: String,
            #[serde(default)]
            source: String,
            #[serde(default)]
            state: String,
        }
        let Ok(stats) = serde_json::from_slice::<Stats>(json) else {
            return;
        };
        let brokers: BTreeMap<String, String> = stats
            .brokers
            .into_values()
            // librdkafka's internal and logical brokers (the coordinators) are not connections.
            .filter(|b| b.source == "learned" || b.source == "configured")
            .map(|b| (b.nodename, b.state))
            .collect();
        let any_up = brokers.values().any(|s| s == "UP");
        self.state().brokers = brokers;
        if any_up {
            self.up();
        }
    }

    /// Whether librdkafka's log line (`fac`, `message`) only repeats what this link reports
    /// itself: connection failures while the cluster is known to be unreachable, and the
    /// authentication/TLS failures it logs once.
    ///
    /// A broker's connection failure (`FAIL`) is let through once per broker and
    /// [`REMINDER_INTERVAL`] while the cluster as a whole is reachable (one broker of several
    /// is worth knowing about), and kept as the last error for the link's own WARN.
    pub(crate) fn covers_log_line(&self, fac: &str, message: &str) -> bool {
        let mut st = self.state();
        let down = st.unreachable_since.is_some();
        let failed = st.definite.is_some();
        if fac == "FAIL" {
            st.last_error = Some(message.to_string());
            if down || failed {
                return true;
            }
            let broker = message.split(": ").next().unwrap_or_default().to_string();
            let now = Instant::now();
            let recent = st
                .fail_logged
                .get(&broker)
                .is_some_and(|at| now.duration_since(*at) < REMINDER_INTERVAL);
            if !recent {
                st.fail_logged.insert(broker, now);
            }
            return recent;
        }
        // The producer reports a fencing itself, once, with what it means.
        message.contains("has been fenced by a newer instance")
            || message.contains("Producer attempted an operation with an old epoch")
            || (down && message.contains("brokers are down"))
            || (failed && (message.contains("SASL") || message.contains("SSL")))
    }
}

/// `host:port STATE, ...` of the brokers, or `(no broker state known yet)`.
fn describe_brokers(brokers: &BTreeMap<String, String>) -> String {
    if brokers.is_empty() {
        return "(no broker state known yet)".into();
    }
    brokers
        .iter()
        .map(|(n, s)| format!("{n} {s}"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

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
