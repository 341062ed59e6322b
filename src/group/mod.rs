//! High availability: several `outboxd run --group NAME` processes (members) share the
//! connectors through Kafka's group coordinator; each connector runs in exactly one member at
//! a time, and another member takes it over when its owner dies, freezes, or leaves.
//!
//! * [`membership`]: the member's Kafka consumer in consumer group `outboxd.group.<name>`;
//!   the coordinator's partition assignment (cooperative-sticky) is the connector assignment.
//! * [`topics`]: one coordination topic per connector (its single partition is what gets
//!   assigned) that also keeps the connector's ownership record for `status`.
//! * this module: the member itself, starting a connector when it is assigned and stopping it
//!   (drain, final commit) before the revocation completes.
//!
//! Exactly once across a takeover rests on Kafka, not on this module: the new owner's
//! transactional producer (the connector's `transactional.id`) fences every older instance at
//! `init_transactions`, aborting its open transaction, and then reads the last committed
//! checkpoint. A member that lost its membership without knowing can therefore never write a
//! record or a checkpoint after its successor started; when it notices (its next heartbeat),
//! it stops those connectors and stays a standby. PostgreSQL allows one walsender per slot: a
//! newly assigned connector ends the previous owner's walsender if it is still attached
//! (`pg_terminate_backend`). MySQL/MariaDB: successive owners register with the connector's
//! `server_id`, and the server drops the older replica connection.

pub mod membership;
pub mod topics;

use std::collections::BTreeMap;
use std::time::Duration;

use tokio::sync::{mpsc, watch};

use self::membership::{Change, Membership, MembershipSettings, RevokeReason};
use self::topics::{Owner, OwnerLog};
use crate::checkpoint::now_ms;
use crate::config::{CheckpointConfig, Config, ConnectorConfig, GroupConfig};
use crate::connector::{Connector, RunningConnector};
use crate::error::Error;
use crate::health::{ConnectorState, Health};
use crate::metrics as m;
use crate::sink::KafkaLink;
use crate::source::supervise::{sleep_before_retry, Backoff};

/// Why a group cannot be formed with this configuration (definite: change the configuration).
#[derive(Debug, Clone, thiserror::Error)]
pub enum GroupError {
    /// The group name has characters a Kafka group id / topic name cannot hold.
    #[error("group name {name:?} must be 1 to 128 characters of A-Z a-z 0-9 . _ - (it names a Kafka consumer group and topics)")]
    Name {
        /// The name given.
        name: String,
    },
    /// A connector keeps its checkpoint in a local file, which the other members cannot read.
    #[error("connector {connector} uses the file checkpoint store, which the other members of group {group} cannot read: a takeover would start without its checkpoint. Use the Kafka store ([connectors.checkpoint] store = \"kafka\", the default) with --group")]
    FileStore {
        /// The connector.
        connector: String,
        /// The group.
        group: String,
    },
    /// The connectors do not all use one Kafka cluster (the group lives on one).
    #[error("connectors {first} and {other} use different Kafka clusters ({first_bootstrap} and {other_bootstrap}); a group's members and connectors share one cluster")]
    Clusters {
        /// A connector.
        first: String,
        /// Its bootstrap servers.
        first_bootstrap: String,
        /// Another connector.
        other: String,
        /// Its bootstrap servers.
        other_bootstrap: String,
    },
    /// The heartbeat is too slow for the session timeout.
    #[error("group heartbeat_interval {heartbeat:?} must be at most a third of session_timeout {session:?}")]
    Timing {
        /// `heartbeat_interval`.
        heartbeat: Duration,
        /// `session_timeout`.
        session: Duration,
    },
}

/// The group settings of a process that runs in a group, checked against its connectors.
#[derive(Debug, Clone)]
pub struct GroupPlan {
    /// The group's name.
    pub name: String,
    /// Its timing.
    pub settings: GroupConfig,
}

impl GroupPlan {
    /// The plan for `cfg` with group `name` (`--group`, else `[group] name`); `Ok(None)`
    /// without a group.
    ///
    /// Errors when the name is not usable, a connector uses the file checkpoint store, the
    /// connectors use different Kafka clusters, or the heartbeat is too slow.
    pub fn for_config(cfg: &Config, name: Option<&str>) -> Result<Option<Self>, GroupError> {
        let Some(name) = name.or(cfg.group.name.as_deref()) else {
            return Ok(None);
        };
        if name.is_empty()
            || name.len() > 128
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
        {
            return Err(GroupError::Name {
                name: name.to_string(),
            });
        }
        let settings = cfg.group.clone();
        if settings.heartbeat_interval * 3 > settings.session_timeout {
            return Err(GroupError::Timing {
                heartbeat: settings.heartbeat_interval,
                session: settings.session_timeout,
            });
        }
        for c in &cfg.connectors {
            if let CheckpointConfig::File { .. } = c.checkpoint {
                return Err(GroupError::FileStore {
                    connector: c.name.clone(),
                    group: name.to_string(),
                });
            }
        }
        if let Some(first) = cfg.connectors.first() {
            if let Some(other) = cfg
                .connectors
                .iter()
                .find(|c| c.kafka.bootstrap_servers != first.kafka.bootstrap_servers)
            {
                return Err(GroupError::Clusters {
                    first: first.name.clone(),
                    first_bootstrap: first.kafka.bootstrap_servers.clone(),
                    other: other.name.clone(),
                    other_bootstrap: other.kafka.bootstrap_servers.clone(),
                });
            }
        }
        Ok(Some(Self {
            name: name.to_string(),
            settings,
        }))
    }
}

/// This member's id: `outboxd-<host>-<pid>`.
pub fn member_id() -> String {
    format!("outboxd-{}-{}", topics::host_name(), std::process::id())
}

/// A connector this member runs.
struct Owned {
    running: RunningConnector,
}

/// Runs this process as a member of `plan`'s group until `shutdown` turns true: connectors
/// start when the coordinator assigns them and stop (drain, final commit) when it revokes
/// them; on shutdown the member stops its connectors, then leaves the group so that the
/// others take them over at once. Returns whether a connector failed definitely or the
/// membership could not be kept.
pub async fn run_member(
    cfg: Config,
    plan: GroupPlan,
    health: Health,
    mut shutdown: watch::Receiver<bool>,
) -> bool {
    let Some(first) = cfg.connectors.first() else {
        return false;
    };
    let kafka = first.kafka.clone();
    let member = member_id();
    let configs: BTreeMap<String, ConnectorConfig> = cfg
        .connectors
        .iter()
        .map(|c| (c.name.clone(), c.clone()))
        .collect();
    for name in configs.keys() {
        health.set(name, ConnectorState::Standby);
        metrics::gauge!(m::CONNECTOR_OWNED, m::LABEL_CONNECTOR => name.clone()).set(0.0);
        for change in ["assigned", "revoked"] {
            metrics::counter!(m::GROUP_ASSIGNMENTS, m::LABEL_CONNECTOR => name.clone(), m::LABEL_CHANGE => change).increment(0);
        }
    }
    health.set_member(false);
    let link = KafkaLink::new(&format!("group {}", plan.name), &kafka.bootstrap_servers);

    // The coordination topics must exist before the consumer subscribes to them.
    let names: Vec<String> = configs.keys().cloned().collect();
    let mut backoff = Backoff::new(Duration::from_secs(30));
    loop {
        match topics::ensure(&kafka, &plan.name, &names, &link).await {
            Ok(()) => break,
            Err(e) if link.definite_failure().is_some() => {
                tracing::error!(group = %plan.name, "cannot join the group: {e}");
                return true;
            }
            Err(e) => {
                let wait = backoff.next_wait();
                tracing::warn!(group = %plan.name, retry_in = ?wait, "cannot create the group's coordination topics yet: {e}");
                if !sleep_before_retry(wait, &shutdown).await {
                    return false;
                }
            }
        }
    }
    let owners = match OwnerLog::new(&kafka, &plan.name, link.clone()) {
        Ok(o) => Some(o),
        Err(e) => {
            tracing::warn!(group = %plan.name, "ownership records for `status` are off: {e}");
            None
        }
    };
    let (changes_tx, mut changes) = mpsc::unbounded_channel();
    let membership = Membership::join(
        MembershipSettings {
            group: plan.name.clone(),
            kafka: kafka.clone(),
            connectors: names,
            session_timeout: plan.settings.session_timeout,
            heartbeat_interval: plan.settings.heartbeat_interval,
            member: member.clone(),
        },
        changes_tx,
    );
    health.set_member(true);

    let mut owned: BTreeMap<String, Owned> = BTreeMap::new();
    let mut failed = false;
    let mut tick = tokio::time::interval(Duration::from_millis(500));
    loop {
        tokio::select! {
            changed = shutdown.changed() => {
                if changed.is_err() || *shutdown.borrow() {
                    break;
                }
            }
            change = changes.recv() => match change {
                None => break,
                Some(Change::Assigned(connectors)) => {
                    for name in connectors {
                        let Some(c) = configs.get(&name) else { continue };
                        if owned.contains_key(&name) {
                            continue;
                        }
                        match Connector::new(c.clone()) {
                            Ok(connector) => {
                                tracing::info!(group = %plan.name, connector = %name, member = %member, "assigned to this member by the group coordinator: starting it");
                                metrics::gauge!(m::CONNECTOR_OWNED, m::LABEL_CONNECTOR => name.clone()).set(1.0);
                                metrics::counter!(m::GROUP_ASSIGNMENTS, m::LABEL_CONNECTOR => name.clone(), m::LABEL_CHANGE => "assigned").increment(1);
                                let running = connector.taking_over().start(health.clone());
                                owned.insert(name.clone(), Owned { running });
                                if let Some(o) = &owners {
                                    o.record(&name, &Owner {
                                        member: member.clone(),
                                        host: topics::host_name(),
                                        pid: std::process::id(),
                                        since_ms: now_ms(),
                                    }).await;
                                }
                            }
                            Err(e) => {
                                tracing::error!(connector = %name, "cannot build the connector: {e}");
                                health.set(&name, ConnectorState::Failed);
                                failed = true;
                            }
                        }
                    }
                }
                Some(Change::Revoked { connectors, reason, done }) => {
                    for name in &connectors {
                        if let Some(o) = owned.remove(name) {
                            tracing::info!(group = %plan.name, connector = %name, member = %member, "revoked: {}; stopping it here", reason.describe());
                            failed |= stop(name, o, &health, reason).await;
                        }
                        health.set(name, ConnectorState::Standby);
                        metrics::gauge!(m::CONNECTOR_OWNED, m::LABEL_CONNECTOR => name.clone()).set(0.0);
                        metrics::counter!(m::GROUP_ASSIGNMENTS, m::LABEL_CONNECTOR => name.clone(), m::LABEL_CHANGE => "revoked").increment(1);
                    }
                    let _ = done.send(());
                }
                Some(Change::Members(n)) => {
                    metrics::gauge!(m::GROUP_MEMBERS).set(n as f64);
                }
                Some(Change::Ended(result)) => {
                    if let Err(e) = result {
                        tracing::error!(group = %plan.name, "the group membership ended: {e}");
                        failed = true;
                    }
                    health.set_member(false);
                    break;
                }
            },
            _ = tick.tick() => {
                // A connector that stopped by itself (a definite failure, or fenced).
                let ended: Vec<String> = owned
                    .iter()
                    .filter(|(_, o)| o.running.is_finished())
                    .map(|(n, _)| n.clone())
                    .collect();
                for name in ended {
                    if let Some(o) = owned.remove(&name) {
                        failed |= ended_by_itself(&name, o, &health).await;
                    }
                }
            }
        }
    }

    // Shutdown: stop what this member runs (drain, final commit), then leave, so that the
    // coordinator hands them over at once.
    for (name, o) in std::mem::take(&mut owned) {
        tracing::info!(group = %plan.name, connector = %name, "shutting down: stopping it before leaving the group");
        failed |= stop(&name, o, &health, RevokeReason::Leaving).await;
        metrics::gauge!(m::CONNECTOR_OWNED, m::LABEL_CONNECTOR => name.clone()).set(0.0);
    }
    // Serve the last revocation while the consumer closes.
    let leaving = membership.leave();
    tokio::pin!(leaving);
    loop {
        tokio::select! {
            () = &mut leaving => break,
            change = changes.recv() => {
                if let Some(Change::Revoked { done, .. }) = change {
                    let _ = done.send(());
                }
            }
        }
    }
    health.set_member(false);
    failed
}

/// Stops a connector this member runs and waits for its end. Returns whether it failed in a
/// way the exit status must show (not a fencing: that is the takeover working).
async fn stop(name: &str, o: Owned, health: &Health, reason: RevokeReason) -> bool {
    o.running.stop_handle().stop();
    let result = o.running.join().await;
    judge(name, result, health, Some(reason))
}

/// A connector that ended without being asked to.
async fn ended_by_itself(name: &str, o: Owned, health: &Health) -> bool {
    let result = o.running.join().await;
    judge(name, result, health, None)
}

fn judge(
    name: &str,
    result: Result<(), Error>,
    health: &Health,
    revoked: Option<RevokeReason>,
) -> bool {
    match result {
        Ok(()) => false,
        Err(e) if e.is_fenced() => {
            // Another member took the connector over and its producer fenced ours: the
            // handover, seen from the old owner.
            tracing::info!(
                connector = name,
                "fenced by the connector's new owner: it runs in another member now"
            );
            health.set(name, ConnectorState::Standby);
            false
        }
        Err(e) if e.is_transient() && revoked == Some(RevokeReason::Lost) => {
            // Stopped without a final checkpoint after losing the membership: the new owner
            // resumes from the last committed one.
            false
        }
        Err(_) => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(text: &str) -> Config {
        crate::config::parse(
            text,
            std::path::Path::new("t.toml"),
            Some("k:9092"),
            &|_| None,
        )
        .unwrap()
    }

    const CONNECTOR: &str = r#"
[[connectors]]
name = "a"
tables = ["s.outbox"]
[connectors.source]
kind = "mariadb"
host = "h"
user = "u"
password = "p"
server_id = 7
"#;

    #[test]
    fn a_group_needs_the_kafka_store_and_a_fast_enough_heartbeat() {
        let cfg = config(CONNECTOR);
        assert!(GroupPlan::for_config(&cfg, None).unwrap().is_none());
        let plan = GroupPlan::for_config(&cfg, Some("prod")).unwrap().unwrap();
        assert_eq!(plan.name, "prod");
        assert!(matches!(
            GroupPlan::for_config(&cfg, Some("bad name")),
            Err(GroupError::Name { .. })
        ));
        let file = config(&format!(
            "{CONNECTOR}[connectors.checkpoint]\nstore = \"file\"\npath = \"x.json\"\n"
        ));
        let e = GroupPlan::for_config(&file, Some("prod")).unwrap_err();
        assert!(matches!(e, GroupError::FileStore { .. }), "{e}");
        assert!(e.to_string().contains("store = \"kafka\""), "{e}");
        let slow = config(&format!(
            "[group]\nname = \"g\"\nsession_timeout = \"6s\"\nheartbeat_interval = \"3s\"\n{CONNECTOR}"
        ));
        assert!(matches!(
            GroupPlan::for_config(&slow, None),
            Err(GroupError::Timing { .. })
        ));
    }
}
