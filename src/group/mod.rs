//! High availability: several `outboxd run --group NAME` processes (members) share the
//! connectors through Kafka's group coordinator; each connector runs in exactly one member at
//! a time, and another member takes it over when its owner dies, freezes, or leaves.
//!
//! * [`plan`]: whether a configuration can run as a group.
//! * [`membership`]: the member's Kafka consumer in consumer group `outboxd.group.<name>`;
//!   the coordinator's partition assignment (cooperative-sticky) is the connector assignment,
//!   and each assignment comes with a [`Lease`] revoked the moment it ends.
//! * [`topics`]: one coordination topic per connector (its single partition is what gets
//!   assigned).
//! * [`owners`]: the ownership records in those topics, for the log and `status`.
//! * this module: the member itself, starting a connector when it is assigned and stopping it
//!   before the revocation completes: drained with a final commit when it is handed over
//!   (rebalance, shutdown), abandoned at once when this member lost it without knowing.
//!
//! Exactly once across a takeover rests on Kafka, not on this module: the new owner's
//! transactional producer (the connector's `transactional.id`; in at-least-once mode the one
//! that writes its checkpoints, `checkpoint::fenced`) fences every older instance at
//! `init_transactions`, aborting its open transaction, and only then reads the last committed
//! checkpoint. A member that lost its membership without knowing can therefore never write a
//! record (exactly-once) or a checkpoint (both modes) after its successor started; when it
//! notices (within about a second of waking) its leases are revoked, so it neither restarts
//! nor reconnects nor fences anybody, and it abandons those connectors — no drain, no final
//! checkpoint, no last status update to the server — and stays a standby. PostgreSQL allows
//! one walsender per slot: a newly assigned connector ends the previous owner's walsender if
//! it is still attached (`pg_terminate_backend`). MySQL/MariaDB: successive owners register
//! with the connector's `server_id`, and the server drops the older replica connection.
//!
//! A connector that ends by itself while this member owns it: fenced while its lease is held
//! is restarted by the connector itself (it is the owner); a definite failure keeps it
//! stopped here — `failed` in `/health` (so `/ready` is false) and in `status`, released in
//! the ownership record, `outboxd_connector_owned` 0, one ERROR line — without giving up the
//! assignment: another member would meet the same failure. Restarting this member (after the
//! fix) hands it over.

pub mod definitions;
pub mod membership;
pub mod owners;
pub mod plan;
pub mod topics;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::join_all;
use tokio::sync::{mpsc, watch};

pub use self::plan::GroupPlan;

use self::definitions::{Definition, Registry, Verdict};
use self::membership::{Change, Membership, MembershipSettings, RevokeReason};
use self::owners::{MemberList, OwnerLog, RELEASE_WAIT};
use self::topics::TopicsError;
use crate::config::{Config, ConnectorConfig, KafkaConfig};
use crate::connector::{Connector, RunningConnector};
use crate::health::{ConnectorState, Health};
use crate::lease::Lease;
use crate::metrics as m;
use crate::pipeline::Error;
use crate::retry::{sleep_before_retry, Retry};
use crate::sink::KafkaLink;

/// How often the member count is read from the group coordinator.
const MEMBERS_EVERY: Duration = Duration::from_secs(5);

/// Longest wait between attempts to create the coordination topics.
const TOPICS_MAX_BACKOFF: Duration = Duration::from_secs(30);

/// This member's id: `outboxd-<host>-<pid>`.
pub fn member_id() -> String {
    format!("outboxd-{}-{}", topics::host_name(), std::process::id())
}

/// A connector assigned to this member.
struct Slot {
    lease: Lease,
    /// `None` once it ended by itself (a definite failure keeps it stopped here).
    running: Option<RunningConnector>,
}

/// The member: its connectors, and what it reports.
struct Member {
    group: String,
    id: String,
    configs: BTreeMap<String, ConnectorConfig>,
    health: Health,
    owners: Option<OwnerLog>,
    slots: BTreeMap<String, Slot>,
    /// Whether a connector failed (the exit status shows it).
    failed: bool,
    /// The group's member count at the last look ([`watch_group`]; 0: not known yet), for
    /// the words of a lost session.
    members: Arc<AtomicUsize>,
}

/// Runs this process as a member of `plan`'s group until `shutdown` turns true: connectors
/// start when the coordinator assigns them and stop when it revokes them; on shutdown the
/// member stops its connectors (drain, final commit, all at once), then leaves the group so
/// that the others take them over at once. Returns whether a connector failed definitely or
/// the membership could not be kept.
pub async fn run_member(
    cfg: Config,
    plan: GroupPlan,
    health: Health,
    mut shutdown: watch::Receiver<bool>,
) -> bool {
    let Some(first) = cfg.connectors.first() else {
        return false;
    };
    // Every connector reaches the cluster with these settings (`GroupPlan` checks it).
    let kafka = first.kafka.clone();
    let id = member_id();
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
    health.watch_group(link.clone());

    // The coordination topics must exist before the consumer subscribes to them, and this
    // member's definitions must agree with the other members' before it takes a connector.
    let names: Vec<String> = configs.keys().cloned().collect();
    let definitions: BTreeMap<String, Definition> = configs
        .iter()
        .map(|(n, c)| (n.clone(), Definition::of(c)))
        .collect();
    for name in configs.keys() {
        metrics::gauge!(m::CONNECTOR_STANDBYS, m::LABEL_CONNECTOR => name.clone()).set(0.0);
    }
    let mut retry = Retry::new(TOPICS_MAX_BACKOFF);
    let (registry, verdict) = loop {
        retry.attempt();
        // A refused login or certificate (the link's definite failure) ends the wait at once:
        // the admin request would only time out, and every retry be refused the same way.
        let e = tokio::select! {
            r = prepare(&kafka, &plan.name, &names, &definitions, &id, &link) => match r {
                Ok(ready) => break ready,
                Err(e) => e,
            },
            f = link.wait_definite() => {
                tracing::error!(group = %plan.name, "cannot join the group: {f}");
                return true;
            }
        };
        let Some(wait) = retry.after_failure(e.class(), false) else {
            tracing::error!(group = %plan.name, "cannot join the group: {e}");
            return true;
        };
        tracing::warn!(group = %plan.name, retry_in = ?wait, "cannot prepare the group's topics yet: {e}");
        if !sleep_before_retry(wait, &shutdown).await {
            // Stopped before it ever joined: a failure to run, as a signal during any retry.
            tracing::error!(group = %plan.name, "stopped before joining the group, while waiting to retry after: {e}");
            return true;
        }
    };
    // Two definitions of one connector that differ: refused before this member takes
    // anything (a takeover would switch the connector's routing mid-stream).
    if !verdict.conflicts.is_empty() {
        for c in &verdict.conflicts {
            tracing::error!(group = %plan.name, connector = %c.connector, member = %c.member, "cannot join the group: {c}; every member of a group must define a connector alike (the same connector files): fix this member's files, or stop the members that run the other definition first");
        }
        registry.withdraw(definitions.keys()).await;
        return true;
    }
    if !verdict.present.is_empty() {
        tracing::info!(group = %plan.name, members = ?verdict.present, "compared this member's connector definitions with those of the other members present: the connectors both define are defined alike");
    }
    let mut reported = BTreeMap::new();
    report_definitions(&plan.name, &verdict, &mut reported);
    let registry = std::sync::Arc::new(registry);
    let owners = match OwnerLog::start(&kafka, &plan.name, &id, link.clone()) {
        Ok(o) => Some(o),
        Err(e) => {
            tracing::warn!(group = %plan.name, "ownership records for `status` are off: {e}");
            None
        }
    };
    let members = Arc::new(AtomicUsize::new(0));
    let counting = tokio::spawn(watch_group(
        kafka.clone(),
        plan.name.clone(),
        link.clone(),
        GroupWatch {
            members: members.clone(),
            registry: registry.clone(),
            definitions: definitions.clone(),
            member: id.clone(),
            reported,
        },
    ));
    let (changes_tx, mut changes) = mpsc::unbounded_channel();
    let membership = Membership::join(
        MembershipSettings {
            group: plan.name.clone(),
            kafka: kafka.clone(),
            connectors: names,
            session_timeout: plan.settings.session_timeout,
            heartbeat_interval: plan.settings.heartbeat_interval,
            member: id.clone(),
            link,
        },
        changes_tx,
    );

    let mut member = Member {
        group: plan.name.clone(),
        id,
        configs,
        health: health.clone(),
        owners,
        slots: BTreeMap::new(),
        failed: false,
        members,
    };
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
                Some(Change::Assigned(granted)) => {
                    for (name, lease) in granted {
                        member.assigned(name, lease).await;
                    }
                }
                Some(Change::Revoked { connectors, reason, done }) => {
                    member.revoked(connectors.into_iter().collect(), reason).await;
                    let _ = done.send(());
                }
                Some(Change::InGroup(joined)) => health.set_member(joined),
                Some(Change::Ended(result)) => {
                    if let Err(e) = result {
                        tracing::error!(group = %plan.name, "the group membership ended: {e}");
                        member.failed = true;
                    }
                    health.set_member(false);
                    break;
                }
            },
            _ = tick.tick() => member.reap().await,
        }
    }

    // Shutdown: stop what this member runs (drain, final commit; all at once, so the whole
    // handover fits the process's stop deadline), then leave, so that the coordinator hands
    // them over at once.
    let running: Vec<String> = member.slots.keys().cloned().collect();
    member.revoked(running, RevokeReason::Leaving).await;
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
    counting.abort();
    health.set_member(false);
    // Out of the group: its definitions no longer count.
    registry.withdraw(definitions.keys()).await;
    member.failed
}

/// What a member does before it joins: creates the group's topics ([`topics::ensure`]),
/// publishes `definitions` (this member `member`'s) and compares them with the other
/// members' ([`definitions::Verdict`]), deleting records killed members left behind.
async fn prepare(
    kafka: &KafkaConfig,
    group: &str,
    connectors: &[String],
    definitions: &BTreeMap<String, Definition>,
    member: &str,
    link: &std::sync::Arc<KafkaLink>,
) -> Result<(Registry, Verdict), TopicsError> {
    topics::ensure(kafka, group, connectors, link).await?;
    let fail = |what: &str, e: String| {
        TopicsError::Kafka(format!("{what} the group's definitions topic: {e}"))
    };
    let registry =
        Registry::open(kafka, group, member, link.clone()).map_err(|e| fail("opening", e))?;
    let mine = registry
        .publish(definitions)
        .await
        .map_err(|e| fail("publishing this member's definitions in", e))?;
    let catalog = registry
        .catalog(Duration::from_secs(10))
        .await
        .map_err(|e| fail("reading", e))?;
    // Without the member list nothing can be compared (and every record would look left
    // behind): retried like the rest.
    let live = live_members(kafka, group, link)
        .await
        .map_err(|e| TopicsError::Kafka(format!("listing the group's members: {e}")))?;
    let now = crate::checkpoint::now_ms();
    let verdict = Verdict::of(definitions, member, &catalog, &live, Some(mine), now);
    registry.delete(&catalog.stale(member, &live, now)).await;
    Ok((registry, verdict))
}

/// The group's members as the coordinator lists them (their `client.id`s), at most 2 s.
async fn live_members(
    kafka: &KafkaConfig,
    group: &str,
    link: &std::sync::Arc<KafkaLink>,
) -> Result<BTreeSet<String>, String> {
    let list = MemberList::new(kafka, group, link.clone())?;
    tokio::task::spawn_blocking(move || list.members(Duration::from_secs(2)))
        .await
        .map_err(|e| e.to_string())?
        .map(|m| m.into_iter().collect())
}

/// Logs (WARN) each connector some present member cannot run, and each connector a present
/// member defines differently, once per change of what is said (`reported`: what was said
/// last, by connector and kind), and sets `outboxd_connector_standbys` of this member's
/// connectors.
fn report_definitions(group: &str, verdict: &Verdict, reported: &mut BTreeMap<String, String>) {
    for (name, coverage) in &verdict.mine {
        metrics::gauge!(m::CONNECTOR_STANDBYS, m::LABEL_CONNECTOR => name.clone())
            .set(coverage.same.len() as f64);
    }
    let mut now = BTreeMap::new();
    for (name, words) in verdict.gaps() {
        if reported.get(&format!("gap {name}")) != Some(&words) {
            tracing::warn!(group, connector = %name, "{words}");
        }
        now.insert(format!("gap {name}"), words);
    }
    for c in &verdict.conflicts {
        let words = c.to_string();
        let key = format!("conflict {} {}", c.connector, c.member);
        if reported.get(&key) != Some(&words) {
            tracing::warn!(group, connector = %c.connector, member = %c.member, "{words} (that member joined at the same moment as this one, or it would have been refused; stop it and fix its files: a takeover between the two switches the connector's definition)");
        }
        now.insert(key, words);
    }
    *reported = now;
}

/// What [`watch_group`] follows of the group's definitions.
struct GroupWatch {
    /// The member count, shared with the [`Member`].
    members: Arc<AtomicUsize>,
    registry: std::sync::Arc<Registry>,
    /// This member's definitions.
    definitions: BTreeMap<String, Definition>,
    /// This member.
    member: String,
    /// What was last said of each connector ([`report_definitions`]).
    reported: BTreeMap<String, String>,
}

impl Member {
    /// Starts `name`, assigned to this member under `lease`.
    async fn assigned(&mut self, name: String, lease: Lease) {
        let Some(cfg) = self.configs.get(&name) else {
            return;
        };
        if let Some(old) = self.slots.remove(&name) {
            // An assignment the member never saw revoked: its lease is gone, so it is not
            // this member's to finish.
            old.lease.revoke();
            if let Some(r) = old.running {
                r.abandon().await;
            }
        }
        metrics::counter!(m::GROUP_ASSIGNMENTS, m::LABEL_CONNECTOR => name.clone(), m::LABEL_CHANGE => "assigned").increment(1);
        match &self.owners {
            // Logs the assignment with what the ownership record says of the previous owner.
            Some(o) => o.assigned(&name),
            None => {
                tracing::info!(group = %self.group, connector = %name, member = %self.id, "assigned to this member by the group coordinator (previous owner unknown: ownership records are off): starting it")
            }
        }
        match Connector::new(cfg.clone()) {
            Ok(connector) => {
                let running = connector
                    .with_lease(lease.clone())
                    .start(self.health.clone());
                self.slots.insert(
                    name,
                    Slot {
                        lease,
                        running: Some(running),
                    },
                );
            }
            Err(e) => {
                let e = format!("cannot build the connector: {e}");
                self.keep_failed(&name, &lease, &e).await;
                self.slots.insert(
                    name,
                    Slot {
                        lease,
                        running: None,
                    },
                );
            }
        }
    }

    /// Stops `connectors` (all at once) because the coordinator revoked them, or because the
    /// member leaves (`Leaving`): one INFO line each, with the reason and what is done.
    async fn revoked(&mut self, connectors: Vec<String>, reason: RevokeReason) {
        let mut stopping = Vec::new();
        for name in connectors {
            metrics::counter!(m::GROUP_ASSIGNMENTS, m::LABEL_CONNECTOR => name.clone(), m::LABEL_CHANGE => "revoked").increment(1);
            let Some(slot) = self.slots.remove(&name) else {
                continue;
            };
            slot.lease.revoke();
            let what = match (&slot.running, reason) {
                (None, _) => "it had already stopped here",
                (Some(_), RevokeReason::Lost) => {
                    "abandoning it: no drain, no final checkpoint (the next owner resumes from the \
                     last committed checkpoint)"
                }
                (Some(_), _) => "stopping it: drain, final checkpoint",
            };
            tracing::info!(group = %self.group, connector = %name, member = %self.id, "revoked ({}): {what}", reason.describe(self.members.load(Ordering::Relaxed)));
            self.health.set(&name, ConnectorState::Standby);
            if let Some(running) = slot.running {
                stopping.push(async move {
                    let result = if reason == RevokeReason::Lost {
                        running.abandon().await;
                        Ok(())
                    } else {
                        running.stop_handle().stop();
                        running.join().await
                    };
                    (name, result)
                });
            } else {
                self.release(&name, reason.short(), reason).await;
            }
        }
        let stopped = join_all(stopping).await;
        for (name, result) in &stopped {
            self.failed |= judge(name, result, &self.health);
            self.health.set(name, ConnectorState::Standby);
        }
        join_all(
            stopped
                .iter()
                .map(|(name, _)| self.release(name, reason.short(), reason)),
        )
        .await;
    }

    /// Writes `name`'s release record, waited for (briefly), so that the next owner's log
    /// line can say it was handed over. Not after a lost session: by then the coordinator
    /// may have given the connector to another member, whose ownership record a late
    /// release would overwrite (`status` would show nobody running it).
    async fn release(&self, name: &str, why: &str, reason: RevokeReason) {
        if reason == RevokeReason::Lost {
            return;
        }
        if let Some(o) = &self.owners {
            o.released(name, why, RELEASE_WAIT).await;
        }
    }

    /// Looks after the connectors that ended by themselves.
    async fn reap(&mut self) {
        let ended: Vec<String> = self
            .slots
            .iter()
            .filter(|(_, s)| {
                s.running
                    .as_ref()
                    .is_some_and(RunningConnector::is_finished)
            })
            .map(|(n, _)| n.clone())
            .collect();
        for name in ended {
            let Some(slot) = self.slots.get_mut(&name) else {
                continue;
            };
            let Some(running) = slot.running.take() else {
                continue;
            };
            let lease = slot.lease.clone();
            match running.join().await {
                Err(e) if e.is_handed_over() || !lease.held() => {
                    // The group gave it to another member (its revocation follows, or came).
                    tracing::info!(group = %self.group, connector = %name, "stopped here: another member of the group runs it now ({e})");
                    self.health.set(&name, ConnectorState::Standby);
                }
                Ok(()) => {
                    let e = Error::TaskLost {
                        detail: "it ended without being asked to".into(),
                    };
                    self.keep_failed(&name, &lease, &e).await;
                }
                Err(e) => self.keep_failed(&name, &lease, &e).await,
            }
        }
    }

    /// A connector this member owns stopped on definite failure `e`: it stays stopped here,
    /// visible (`failed`), and nobody runs it until this member restarts.
    async fn keep_failed(&mut self, name: &str, lease: &Lease, e: &(dyn std::fmt::Display + Sync)) {
        self.failed = true;
        lease.show_running(false);
        self.health
            .set_because(name, ConnectorState::Failed, e.to_string());
        tracing::error!(group = %self.group, connector = %name, member = %self.id, "stopped after a definite failure while this member owns it: nobody runs it now. It stays assigned here, stopped and shown as failed (/health, outboxd status), since another member would meet the same failure; fix the cause, then restart this member to hand it over: {e}");
        if let Some(o) = &self.owners {
            o.released(name, &format!("failed: {e}"), Duration::ZERO)
                .await;
        }
    }
}

/// Whether a connector's end after it was asked to stop is a failure the exit status must
/// show (not a fencing: that is the takeover working).
fn judge(name: &str, result: &Result<(), Error>, health: &Health) -> bool {
    match result {
        Ok(()) => false,
        Err(e) if e.is_handed_over() => {
            // Another member took the connector over and its producer fenced ours: the
            // handover, seen from the old owner.
            tracing::info!(
                connector = name,
                "fenced by the connector's new owner: it runs in another member now"
            );
            health.set(name, ConnectorState::Standby);
            false
        }
        Err(_) => true,
    }
}

/// Keeps `outboxd_group_members` up to date from the group coordinator's member list, and
/// what the members' definitions say (`outboxd_connector_standbys`, a WARN for each connector
/// a member that joined later cannot run), every [`MEMBERS_EVERY`], off the membership's
/// thread (a slow answer never delays a rebalance). This member's definitions are published
/// again should they have gone from the topic.
async fn watch_group(
    kafka: KafkaConfig,
    group: String,
    link: std::sync::Arc<KafkaLink>,
    mut watch: GroupWatch,
) {
    let list = match MemberList::new(&kafka, &group, link) {
        Ok(l) => std::sync::Arc::new(l),
        Err(e) => {
            tracing::warn!(group = %group, "the member count is off: {e}");
            return;
        }
    };
    let mut every = tokio::time::interval(MEMBERS_EVERY);
    loop {
        every.tick().await;
        let l = list.clone();
        let Ok(Ok(members)) =
            tokio::task::spawn_blocking(move || l.members(Duration::from_secs(2))).await
        else {
            continue;
        };
        if !members.is_empty() {
            metrics::gauge!(m::GROUP_MEMBERS).set(members.len() as f64);
            watch.members.store(members.len(), Ordering::Relaxed);
        }
        let Ok(catalog) = watch.registry.catalog(Duration::from_secs(2)).await else {
            continue;
        };
        if catalog.count_of(&watch.member) < watch.definitions.len() {
            let _ = watch.registry.publish(&watch.definitions).await;
        }
        let live: BTreeSet<String> = members.into_iter().collect();
        let verdict = Verdict::of(
            &watch.definitions,
            &watch.member,
            &catalog,
            &live,
            None,
            crate::checkpoint::now_ms(),
        );
        report_definitions(&group, &verdict, &mut watch.reported);
    }
}
