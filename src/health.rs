//! Liveness and readiness of the connectors, shared between them and the HTTP endpoints.
//!
//! Every connector reports its state ([`ConnectorState`]) with the reason for it, and hands
//! its [`KafkaLink`] over ([`Health::watch_kafka`]). A connector is *ready* while its source
//! streams and Kafka answers: it is not ready while it starts, while its source is
//! disconnected and retrying, after it stopped or failed, and while its Kafka cluster has been
//! unreachable for more than [`KAFKA_GRACE`] (delivery and checkpoints wait then, although
//! the source may still be connected). `/ready` answers 200 only while every connector is
//! ready, `/health` (liveness) 200 while the process runs; both carry [`Report`] as JSON,
//! one entry per connector with its state, readiness and why.
//!
//! In a group (`--group`), connectors another member runs are `standby` here and count as
//! ready, and the member itself must be in the group: in it from its first completed
//! assignment (an empty one for a standby), out of it while its session is found lost or a
//! rebalance failed, and while the group's Kafka cluster has been unreachable for more than
//! [`KAFKA_GRACE`]. A healthy standby is ready.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use crate::active_topics::ActiveTopics;
use crate::sink::KafkaLink;

/// How long Kafka may be unreachable before a streaming connector stops being ready: a
/// broker restart or a leader election passes within it without flapping readiness.
pub const KAFKA_GRACE: Duration = Duration::from_secs(5);

/// The state of one connector.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ConnectorState {
    /// Connecting to the source or Kafka.
    Starting,
    /// Source connected and streaming.
    Streaming,
    /// Waiting to retry after a transient failure (the source disconnected or could not
    /// connect, or the connector restarts from its checkpoint).
    Retrying,
    /// Stopped after a definite failure.
    Failed,
    /// Stopped on shutdown.
    Stopped,
    /// Runs in another member of the group (or is not assigned yet).
    Standby,
}

/// One connector as `/health`, `/ready` and `outboxd status` show it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ConnectorHealth {
    /// The connector's state.
    pub state: ConnectorState,
    /// True while the source streams and Kafka answers (unreachable for at most
    /// [`KAFKA_GRACE`]).
    pub ready: bool,
    /// Why it is not ready, or what it last recovered from; `None` while all is well.
    pub reason: Option<String>,
    /// When it entered `state`, milliseconds since the Unix epoch.
    pub since_ms: i64,
    /// Seconds its Kafka cluster has been unreachable, while it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kafka_unreachable_s: Option<u64>,
}

/// The JSON body of `/health` and `/ready`: `{"ready": bool, "connectors": {name: ...}}`,
/// plus `"member": bool` in a group.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Report {
    /// True when there is at least one connector and every one is ready (in a group: and
    /// this member is in it).
    pub ready: bool,
    /// In a group: whether this member is in it (and its cluster reachable). Absent without
    /// a group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub member: Option<bool>,
    /// In a group, while this member is not in it: why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub member_reason: Option<String>,
    /// Each connector by name.
    pub connectors: BTreeMap<String, ConnectorHealth>,
}

#[derive(Debug)]
struct Entry {
    state: ConnectorState,
    reason: Option<String>,
    since: SystemTime,
    link: Option<Arc<KafkaLink>>,
}

/// Shared registry of connector states.
#[derive(Debug, Clone, Default)]
pub struct Health {
    inner: Arc<Mutex<BTreeMap<String, Entry>>>,
    /// In a group: whether this member is in it. `None` without a group.
    member: Arc<Mutex<Option<bool>>>,
    /// In a group: the membership's connection to the cluster.
    group_link: Arc<Mutex<Option<Arc<KafkaLink>>>>,
    /// The topics the connectors used (Kafka Connect's topic tracking).
    topics: ActiveTopics,
}

impl Health {
    fn entries(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Entry>> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The topics the connectors used since created or reset (Kafka Connect's topic
    /// tracking): each connector notes them as it routes records, the REST API lists them.
    pub fn topics(&self) -> &ActiveTopics {
        &self.topics
    }

    /// Records connector `name`'s state, with no particular reason.
    pub fn set(&self, name: &str, state: ConnectorState) {
        self.set_state(name, state, None);
    }

    /// Records connector `name`'s state and why (a failure's message: never a secret or a
    /// payload).
    pub fn set_because(&self, name: &str, state: ConnectorState, reason: impl std::fmt::Display) {
        self.set_state(name, state, Some(reason.to_string()));
    }

    /// Forgets connector `name` (removed from the configuration).
    pub fn remove(&self, name: &str) {
        self.entries().remove(name);
    }

    fn set_state(&self, name: &str, state: ConnectorState, reason: Option<String>) {
        let mut m = self.entries();
        let e = m.entry(name.to_string()).or_insert_with(|| Entry {
            state,
            reason: None,
            since: SystemTime::now(),
            link: None,
        });
        if e.state != state {
            e.since = SystemTime::now();
        }
        e.state = state;
        e.reason = reason;
    }

    /// Connector `name`'s readiness follows `link` too: not ready while its cluster has been
    /// unreachable for more than [`KAFKA_GRACE`].
    pub fn watch_kafka(&self, name: &str, link: Arc<KafkaLink>) {
        let mut m = self.entries();
        let e = m.entry(name.to_string()).or_insert_with(|| Entry {
            state: ConnectorState::Starting,
            reason: None,
            since: SystemTime::now(),
            link: None,
        });
        e.link = Some(link);
    }

    /// Records whether this member is in its group (a process in a group calls it; one
    /// without a group never does).
    pub fn set_member(&self, joined: bool) {
        if let Ok(mut m) = self.member.lock() {
            *m = Some(joined);
        }
    }

    /// The member's readiness follows `link` (its group membership's connection) too: not in
    /// the group while the cluster has been unreachable for more than [`KAFKA_GRACE`].
    pub fn watch_group(&self, link: Arc<KafkaLink>) {
        if let Ok(mut l) = self.group_link.lock() {
            *l = Some(link);
        }
    }

    /// Every connector as it stands now.
    pub fn report(&self) -> Report {
        let connectors: BTreeMap<String, ConnectorHealth> = self
            .entries()
            .iter()
            .map(|(name, e)| (name.clone(), e.health()))
            .collect();
        let joined = self.member.lock().ok().and_then(|m| *m);
        let link = self.group_link.lock().ok().and_then(|l| l.clone());
        let unreachable = link
            .as_ref()
            .and_then(|l| l.unreachable_for().map(|d| (d, l)));
        let (member, member_reason) = match joined {
            None => (None, None),
            Some(joined) => member_state(
                joined,
                unreachable.map(|(d, l)| (d, l.unreachable_reason())),
            ),
        };
        Report {
            // A group member with no connector yet (they come from the group's config topic)
            // is ready once in the group; a process without a group needs one.
            ready: member.unwrap_or(true)
                && (!connectors.is_empty() || member.is_some())
                && connectors.values().all(|c| c.ready),
            member,
            member_reason,
            connectors,
        }
    }
}

/// Whether a member is in its group, and why not: `joined` (a completed assignment, not
/// lost since), and its cluster unreachable for how long and why.
fn member_state(
    joined: bool,
    unreachable: Option<(Duration, Option<String>)>,
) -> (Option<bool>, Option<String>) {
    match unreachable {
        Some((d, why)) if d > KAFKA_GRACE => (
            Some(false),
            Some(format!(
                "the group's Kafka cluster has been unreachable for {}s{}",
                d.as_secs(),
                why.map(|w| format!(": {w}")).unwrap_or_default()
            )),
        ),
        _ if !joined => (
            Some(false),
            Some("not in the group: joining, rebalancing, or its session was found lost".into()),
        ),
        _ => (Some(true), None),
    }
}

impl Entry {
    fn health(&self) -> ConnectorHealth {
        let unreachable = self
            .link
            .as_ref()
            .and_then(|l| l.unreachable_for().map(|d| (d, l)));
        let live = matches!(
            self.state,
            ConnectorState::Starting | ConnectorState::Streaming | ConnectorState::Retrying
        );
        let kafka_down = unreachable.filter(|(d, _)| live && *d > KAFKA_GRACE);
        let reason = match kafka_down {
            // While Kafka is away, that is the reason that matters (a restart it causes is
            // its consequence).
            Some((_, link)) => link.unreachable_reason(),
            None => self.reason.clone(),
        };
        ConnectorHealth {
            state: self.state,
            ready: match self.state {
                ConnectorState::Streaming => kafka_down.is_none(),
                // Another member runs it: nothing of this process's to wait for.
                ConnectorState::Standby => true,
                _ => false,
            },
            reason,
            since_ms: self
                .since
                .duration_since(SystemTime::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as i64),
            kafka_unreachable_s: unreachable.filter(|_| live).map(|(d, _)| d.as_secs()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_only_when_every_connector_streams() {
        let h = Health::default();
        assert!(!h.report().ready, "no connector: not ready");
        let m = Health::default();
        m.set_member(false);
        assert!(
            !m.report().ready,
            "a member with no connector, not in the group"
        );
        m.set_member(true);
        assert!(m.report().ready, "a member with no connector, in the group");
        h.set("a", ConnectorState::Streaming);
        h.set("b", ConnectorState::Starting);
        assert!(!h.report().ready);
        h.set("b", ConnectorState::Streaming);
        assert!(h.report().ready);
        h.set_because("b", ConnectorState::Retrying, "binlog: cannot connect");
        let r = h.report();
        assert!(!r.ready);
        assert_eq!(
            r.connectors["b"].reason.as_deref(),
            Some("binlog: cannot connect")
        );
        assert!(r.connectors["a"].ready);
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["connectors"]["b"]["state"], "retrying");
        assert_eq!(json["ready"], false);
    }

    #[test]
    fn kafka_unreachable_within_the_grace_keeps_readiness() {
        let h = Health::default();
        let link = KafkaLink::quiet("a", "127.0.0.1:1");
        h.watch_kafka("a", link.clone());
        h.set("a", ConnectorState::Streaming);
        link.on_error(
            &rdkafka::error::KafkaError::Global(rdkafka::types::RDKafkaErrorCode::AllBrokersDown),
            "1/1 brokers are down",
        );
        let a = &h.report().connectors["a"];
        assert!(a.ready, "within the grace: {a:?}");
        assert_eq!(a.kafka_unreachable_s, Some(0));
    }

    #[test]
    fn in_a_group_a_standby_is_ready_while_the_member_is_in_the_group() {
        let h = Health::default();
        h.set_member(false);
        h.set("a", ConnectorState::Standby);
        assert!(!h.report().ready, "not in the group yet");
        h.set_member(true);
        let r = h.report();
        assert!(r.ready, "{r:?}");
        assert_eq!(r.member, Some(true));
        h.set("a", ConnectorState::Starting);
        assert!(!h.report().ready, "assigned and starting");
    }

    #[test]
    fn a_member_is_out_of_the_group_while_its_cluster_is_away_past_the_grace() {
        assert_eq!(member_state(true, None), (Some(true), None));
        let brief = Some((KAFKA_GRACE / 2, Some("1/1 brokers are down".into())));
        assert_eq!(member_state(true, brief), (Some(true), None));
        let (member, why) = member_state(
            true,
            Some((KAFKA_GRACE * 2, Some("1/1 brokers are down".into()))),
        );
        assert_eq!(member, Some(false));
        assert!(why
            .unwrap()
            .contains("unreachable for 10s: 1/1 brokers are down"));
        let (member, why) = member_state(false, None);
        assert_eq!(member, Some(false));
        assert!(why.unwrap().contains("not in the group"));
    }
}
