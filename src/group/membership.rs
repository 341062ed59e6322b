//! This process's membership in the group: a Kafka consumer in a consumer group, on a thread
//! of its own, whose partition assignment says which connectors this member runs.
//!
//! Each connector has a coordination topic of one partition (see [`super::topics`]); every
//! member subscribes to the topics of the connectors it has a configuration for, and the
//! client-side `cooperative-sticky` assignor (KIP-429) spreads those partitions over the
//! members: a join or a leave moves only what must move, and a member only ever gets
//! connectors it knows. The consumer never reads records for their content.
//!
//! The group coordinator decides; this module reports its decisions as [`Change`]s:
//! * an assignment (`post_rebalance`, Assign) is reported and the callback returns;
//! * a revocation (`pre_rebalance`, Revoke) is reported and the callback **waits** until the
//!   member says the connectors have stopped (drained, final commit) or [`REVOKE_WAIT`] has
//!   passed: only after the callback returns does the coordinator hand them to another member,
//!   so two members never run one connector knowingly. A member that lost its membership
//!   without knowing (frozen, cut off from Kafka past the session timeout) learns it within
//!   about a second of waking up (librdkafka checks the session once a second, and the next
//!   heartbeat is refused): the assignment is then marked lost and revoked. Its connectors'
//!   Kafka writes are fenced by their successors' `transactional.id` in any case.
//!
//! Each assignment of a connector comes with a fresh [`Lease`]; the lease is revoked here,
//! on this thread, the moment the connector is revoked or the assignment is found lost —
//! before the member is even told — so that nothing of the connector's restarts, reconnects
//! or fences another producer after that (see [`crate::lease`]).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc as std_mpsc, Arc, Mutex};
use std::time::Duration;

use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext, Rebalance};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::{ClientContext, TopicPartitionList};
use tokio::sync::mpsc;

use super::topics;
use crate::config::KafkaConfig;
use crate::lease::Lease;
use crate::sink::client::CreateClient;
use crate::sink::client_log;
use crate::sink::{client, KafkaLink};

/// Longest a revocation waits for the member to stop the revoked connectors: their shutdown
/// grace (10 s) plus a final checkpoint.
pub const REVOKE_WAIT: Duration = Duration::from_secs(15);

/// Why connectors were taken away from this member.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RevokeReason {
    /// A rebalance moved them to another member (one joined, or the assignor rebalanced).
    Rebalance,
    /// This member lost its membership without leaving (its session timed out: it was frozen
    /// or cut off from Kafka); another member may already run them.
    Lost,
    /// This member is leaving the group.
    Leaving,
}

impl RevokeReason {
    /// The reason in words, for the log line. `members`: the group's member count at the
    /// last look (this member included; 0 when not known yet), which decides who takes over
    /// a connector after a lost session: another member, or, when this one was alone, no one
    /// until this member rejoins and takes it back.
    pub fn describe(self, members: usize) -> String {
        const LOST: &str = "lost session: this member lost its group membership (its session \
                            timed out: frozen, or cut off from Kafka)";
        match self {
            RevokeReason::Rebalance => {
                "rebalance: the group coordinator moves it to another member (one joined)".into()
            }
            RevokeReason::Lost if members == 1 => format!(
                "{LOST} while it was the group's only member: no other member takes it over; \
                 nothing is relayed until this member rejoins the group, once Kafka answers it \
                 again, and takes the connector back from its last committed checkpoint"
            ),
            RevokeReason::Lost if members > 1 => format!(
                "{LOST}; another member takes it over ({} other member(s) at the last count), or \
                 this member takes it back when it rejoins",
                members - 1
            ),
            RevokeReason::Lost => format!(
                "{LOST}; another member takes it over, or, with no other member, this member \
                 takes it back when it rejoins the group"
            ),
            RevokeReason::Leaving => "handed over on shutdown: this member leaves the group".into(),
        }
    }

    /// The reason in a few words, for the ownership record.
    pub fn short(self) -> &'static str {
        match self {
            RevokeReason::Rebalance => "moved by a rebalance",
            RevokeReason::Lost => "lost session",
            RevokeReason::Leaving => "handed over on shutdown",
        }
    }
}

/// A decision of the group coordinator about this member.
#[derive(Debug)]
pub enum Change {
    /// These connectors are now this member's, each with its lease.
    Assigned(Vec<(String, Lease)>),
    /// These connectors are no longer this member's: stop them, then answer on `done`.
    Revoked {
        /// The connectors.
        connectors: BTreeSet<String>,
        /// Why.
        reason: RevokeReason,
        /// Answer (anything) once they have stopped.
        done: std_mpsc::Sender<()>,
    },
    /// Whether this member is in the group with a completed assignment (possibly empty):
    /// true after each assignment, false when its session is found lost or a rebalance
    /// failed.
    InGroup(bool),
    /// The membership thread ended (it was asked to leave, or failed to start): `Err` says why.
    Ended(Result<(), String>),
}

/// The leases of the connectors assigned to this member, by connector.
type Leases = Mutex<BTreeMap<String, Lease>>;

/// The consumer's context: reports rebalances as [`Change`]s, keeps the leases, and feeds
/// the Kafka link.
struct GroupContext {
    group: String,
    changes: mpsc::UnboundedSender<Change>,
    link: Arc<KafkaLink>,
    leaving: Arc<AtomicBool>,
    leases: Leases,
    /// A refusal the membership cannot go on after (a session timeout the brokers refuse).
    fatal: Mutex<Option<String>>,
    session_timeout: Duration,
}

impl GroupContext {
    fn connectors(&self, tpl: &TopicPartitionList) -> BTreeSet<String> {
        tpl.elements()
            .iter()
            .filter_map(|e| topics::connector_of(&self.group, e.topic()))
            .collect()
    }

    fn leases(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Lease>> {
        self.leases.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Notes a refusal the membership cannot go on after: a session timeout the brokers do
    /// not accept (JoinGroup answers `INVALID_SESSION_TIMEOUT`).
    fn note_refusal(&self, error: &KafkaError) {
        if error.rdkafka_error_code() == Some(RDKafkaErrorCode::InvalidSessionTimeout) {
            *self.fatal.lock().unwrap_or_else(|e| e.into_inner()) = Some(format!(
                "the brokers refuse group session_timeout {:?} ({error}): it must lie between \
                 their group.min.session.timeout.ms and group.max.session.timeout.ms (6 s and \
                 30 min by default); set [group] session_timeout accordingly",
                self.session_timeout
            ));
        }
    }

    /// Revokes every lease this member holds (its assignment was found lost), keeping them
    /// listed until the revocation itself arrives.
    fn revoke_all(&self) {
        for lease in self.leases().values() {
            lease.revoke();
        }
    }
}

impl ClientContext for GroupContext {
    const ENABLE_REFRESH_OAUTH_TOKEN: bool = true;

    fn log(&self, level: rdkafka::config::RDKafkaLogLevel, fac: &str, message: &str) {
        client_log::log_via(&self.link, level, fac, message);
    }

    fn error(&self, error: KafkaError, reason: &str) {
        self.note_refusal(&error);
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
        crate::sink::oauth::generate(oauthbearer_config)
    }
}

impl ConsumerContext for GroupContext {
    fn pre_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        let Rebalance::Revoke(tpl) = rebalance else {
            return;
        };
        let connectors = self.connectors(tpl);
        if connectors.is_empty() {
            return;
        }
        let reason = if self.leaving.load(Ordering::Acquire) {
            RevokeReason::Leaving
        } else if consumer.assignment_lost() {
            RevokeReason::Lost
        } else {
            RevokeReason::Rebalance
        };
        // No longer this member's, from this instant: nothing of these connectors restarts,
        // reconnects or fences another producer while the member stops them.
        {
            let mut leases = self.leases();
            for c in &connectors {
                if let Some(lease) = leases.remove(c) {
                    lease.revoke();
                }
            }
        }
        if reason == RevokeReason::Lost {
            let _ = self.changes.send(Change::InGroup(false));
        }
        let (done, stopped) = std_mpsc::channel();
        if self
            .changes
            .send(Change::Revoked {
                connectors: connectors.clone(),
                reason,
                done,
            })
            .is_err()
        {
            return;
        }
        // Only once this returns does the coordinator give them to another member.
        if stopped.recv_timeout(REVOKE_WAIT).is_err() {
            tracing::error!(connectors = ?connectors, "revoked connectors did not stop within {REVOKE_WAIT:?}; handing them over anyway (their Kafka writes are fenced by the next owner)");
        }
    }

    fn post_rebalance(&self, _consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        match rebalance {
            Rebalance::Assign(tpl) => {
                let connectors = self.connectors(tpl);
                if !connectors.is_empty() {
                    let mut leases = self.leases();
                    let granted: Vec<(String, Lease)> = connectors
                        .into_iter()
                        .map(|c| {
                            let lease = Lease::granted(&c);
                            leases.insert(c.clone(), lease.clone());
                            (c, lease)
                        })
                        .collect();
                    let _ = self.changes.send(Change::Assigned(granted));
                }
                // Called after every rebalance, with an empty list for a member that gets
                // nothing new: a standby is in the group from here on.
                let _ = self.changes.send(Change::InGroup(true));
            }
            Rebalance::Revoke(_) => {}
            Rebalance::Error(e) => {
                tracing::warn!(group = %self.group, "group rebalance failed: {e} (the coordinator retries)");
                let _ = self.changes.send(Change::InGroup(false));
            }
        }
    }
}

/// What starts the membership.
pub struct MembershipSettings {
    /// The group's name.
    pub group: String,
    /// The Kafka cluster (the settings every client of the process uses).
    pub kafka: KafkaConfig,
    /// The connectors this member has a configuration for; when they change (a connector
    /// created or deleted through the REST API), the member subscribes again, and the
    /// coordinator rebalances.
    pub connectors: tokio::sync::watch::Receiver<Vec<String>>,
    /// `session.timeout.ms`.
    pub session_timeout: Duration,
    /// `heartbeat.interval.ms`.
    pub heartbeat_interval: Duration,
    /// This member's id in logs and in the coordinator's member list (`client.id`).
    pub member: String,
    /// Where the membership's connection trouble goes (readiness watches it).
    pub link: Arc<KafkaLink>,
}

/// A running membership: the consumer thread.
pub struct Membership {
    leaving: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Membership {
    /// Joins the group on a thread of its own; decisions arrive on `changes`.
    pub fn join(settings: MembershipSettings, changes: mpsc::UnboundedSender<Change>) -> Self {
        let leaving = Arc::new(AtomicBool::new(false));
        let flag = leaving.clone();
        let thread = std::thread::Builder::new()
            .name("outboxd-group".into())
            .spawn(move || {
                let ended = member_loop(&settings, &changes, &flag);
                let _ = changes.send(Change::Ended(ended));
            })
            .expect("spawning the group membership thread");
        Self {
            leaving,
            thread: Some(thread),
        }
    }

    /// Leaves the group: the coordinator moves this member's connectors to the others at once
    /// (stop them first: the revocation waits for them otherwise). Returns once the consumer
    /// has closed.
    pub async fn leave(mut self) {
        self.leaving.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = tokio::task::spawn_blocking(move || t.join()).await;
        }
    }
}

/// The consumer's life: subscribe, poll until asked to leave, close (leaving the group).
fn member_loop(
    settings: &MembershipSettings,
    changes: &mpsc::UnboundedSender<Change>,
    leaving: &Arc<AtomicBool>,
) -> Result<(), String> {
    let context = GroupContext {
        group: settings.group.clone(),
        changes: changes.clone(),
        link: settings.link.clone(),
        leaving: leaving.clone(),
        leases: Mutex::default(),
        fatal: Mutex::default(),
        session_timeout: settings.session_timeout,
    };
    let consumer: BaseConsumer<GroupContext> = client::config(&settings.kafka)
        .set("group.id", topics::group_id(&settings.group))
        .set("client.id", &settings.member)
        .set("partition.assignment.strategy", "cooperative-sticky")
        .set(
            "session.timeout.ms",
            settings.session_timeout.as_millis().to_string(),
        )
        .set(
            "heartbeat.interval.ms",
            settings.heartbeat_interval.as_millis().to_string(),
        )
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("auto.offset.reset", "latest")
        .set(
            "statistics.interval.ms",
            crate::sink::link::STATISTICS_INTERVAL_MS.to_string(),
        )
        .create_client(context)
        .map_err(|e| format!("cannot create the group's Kafka consumer: {e}"))?;
    let mut connectors = settings.connectors.clone();
    let subscribe = |names: &[String]| {
        let subscribed: Vec<String> = names
            .iter()
            .map(|c| topics::coordination_topic(&settings.group, c))
            .collect();
        let refs: Vec<&str> = subscribed.iter().map(String::as_str).collect();
        if refs.is_empty() {
            // Subscribed to nothing, a consumer leaves the group: this member stays in it
            // (a standby for the connectors to come) through the group's config topic.
            consumer.subscribe(&[&super::configs::configs_topic(&settings.group)])
        } else {
            consumer.subscribe(&refs)
        }
        .map_err(|e| format!("cannot subscribe to the group's coordination topics: {e}"))
    };
    let names = connectors.borrow_and_update().clone();
    subscribe(&names)?;
    tracing::info!(group = %settings.group, member = %settings.member, connectors = ?names, "joining the group");
    let mut lost = false;
    while !leaving.load(Ordering::Acquire) {
        if connectors.has_changed().unwrap_or(false) {
            let names = connectors.borrow_and_update().clone();
            tracing::info!(group = %settings.group, member = %settings.member, connectors = ?names, "the group's connectors changed: subscribing to their coordination topics");
            subscribe(&names)?;
        }
        // Serves the rebalance callbacks, heartbeats are librdkafka's own thread's.
        if let Some(Err(e)) = consumer.poll(Duration::from_millis(100)) {
            consumer.context().note_refusal(&e);
        }
        // librdkafka marks the assignment lost as soon as it finds the session timed out
        // (its revocation callback follows): the leases go at once.
        if consumer.assignment_lost() {
            if !lost {
                lost = true;
                consumer.context().revoke_all();
                let _ = changes.send(Change::InGroup(false));
            }
        } else {
            lost = false;
        }
        let fatal = consumer.context().fatal.lock().ok().and_then(|f| f.clone());
        if let Some(why) = fatal {
            consumer.context().revoke_all();
            leaving.store(true, Ordering::Release);
            return Err(why);
        }
    }
    tracing::info!(group = %settings.group, member = %settings.member, "leaving the group");
    // Dropping the consumer closes it: a last revocation (the connectors are already stopped),
    // then LeaveGroup, so the coordinator rebalances at once instead of after the session.
    drop(consumer);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::RevokeReason;

    /// A lone member that lost its session is not told that another member takes its
    /// connectors over: there is none; it takes them back itself when it rejoins.
    #[test]
    fn a_lost_session_says_who_takes_over() {
        let alone = RevokeReason::Lost.describe(1);
        assert!(alone.contains("group's only member"), "{alone}");
        assert!(alone.contains("no other member takes it over"), "{alone}");
        assert!(!alone.contains("another member takes it over"), "{alone}");
        assert!(alone.contains("takes the connector back"), "{alone}");
        let three = RevokeReason::Lost.describe(3);
        assert!(
            three.contains("another member takes it over (2 other member(s)"),
            "{three}"
        );
        let unknown = RevokeReason::Lost.describe(0);
        assert!(
            unknown.contains("with no other member, this member"),
            "{unknown}"
        );
        assert!(RevokeReason::Rebalance.describe(1).starts_with("rebalance"));
    }
}
