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

pub mod configs;
pub mod definitions;
pub mod membership;
pub mod owners;
pub mod plan;
pub mod topics;
pub mod view;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::join_all;
use tokio::sync::{mpsc, watch};

pub use self::plan::GroupPlan;

use self::configs::{ConfigMap, Shared, SharedConfigs};
use self::definitions::{Definition, Registry, Verdict};
use self::membership::{Change, Membership, MembershipSettings, RevokeReason};
use self::owners::{MemberList, OwnerLog, RELEASE_WAIT};
use self::topics::TopicsError;
use self::view::GroupView;
use crate::config::{Config, ConnectorConfig, KafkaConfig};
use crate::connector::{Connector, RunningConnector};
use crate::health::{ConnectorState, Health};
use crate::lease::Lease;
use crate::metrics as m;
use crate::pipeline::Error;
use crate::retry::{sleep_before_retry, Retry};
use crate::sink::KafkaLink;
use crate::supervisor::{Listed, Target};

/// How often the member count is read from the group coordinator.
const MEMBERS_EVERY: Duration = Duration::from_secs(5);

/// How often a connector whose coordination topic Kafka did not create is tried again.
const SUBSCRIBE_RETRY: Duration = Duration::from_secs(10);

/// Longest wait between attempts to create the coordination topics.
const TOPICS_MAX_BACKOFF: Duration = Duration::from_secs(30);

/// This member's id: `outboxd-<host>-<pid>`.
pub fn member_id() -> String {
    format!("outboxd-{}-{}", topics::host_name(), std::process::id())
}

/// What a member runs with besides its connector files.
pub struct MemberSetup {
    /// The group's Kafka cluster (the connectors' own settings, or the process-wide ones for
    /// a member started without connector files).
    pub kafka: KafkaConfig,
    /// The group's connectors as this member sees them, shared with its REST API.
    pub view: Arc<GroupView>,
    /// Loads a connector of the config topic (name, Connect's map) as `run` loads a
    /// connector file, with this member's worker file and environment (the flag: without
    /// resolving the source's secrets, to show a connector this member cannot run): `Err`
    /// says why not.
    pub load: SharedLoader,
    /// This member's REST address (`host:port`), when it serves the REST API.
    pub worker_id: Option<String>,
    /// The connectors of this member's Debezium connector JSON files, as Connect's
    /// configuration maps: they seed the group's config topic (TOML connectors do not).
    pub seeds: BTreeMap<String, ConfigMap>,
}

/// See [`MemberSetup::load`].
pub type SharedLoader =
    Box<dyn Fn(&str, &ConfigMap, bool) -> Result<ConnectorConfig, String> + Send + Sync>;

/// A connector of the group's config topic as this member loaded it.
struct SharedConnector {
    /// Its configuration as the topic holds it.
    map: ConfigMap,
    /// Loaded as `run` loads it (`Err`: why this member cannot run it).
    runs: Result<ConnectorConfig, String>,
    /// What the REST API shows of it: the loaded configuration, else the one loaded without
    /// the source's secrets (an `${env:...}` this member lacks), else nothing.
    shown: Option<ConnectorConfig>,
}

/// Who runs a connector this member does not, from its ownership record.
#[derive(Debug, Clone)]
struct Seen {
    /// The member's REST address, else its member id.
    worker: String,
    /// Why it stopped there, when it failed definitely (it stays assigned there).
    failure: Option<String>,
}

/// A connector assigned to this member.
struct Slot {
    lease: Lease,
    /// `None` once it ended by itself (a definite failure keeps it stopped here), or while
    /// its target state is stopped.
    running: Option<RunningConnector>,
    /// Pauses and resumes the run (Kafka Connect's target state).
    pause: Option<watch::Sender<bool>>,
    /// The configuration it runs with.
    cfg: ConnectorConfig,
    /// The restart requests it has seen (a new one restarts it).
    restarts: u64,
}

/// The member: its connectors, and what it reports.
struct Member {
    group: String,
    id: String,
    /// The connectors of this member's files.
    files: BTreeMap<String, ConnectorConfig>,
    /// The connectors of the group's config topic, as loaded here (a file's of the same name
    /// wins).
    shared: BTreeMap<String, SharedConnector>,
    /// Target states other than running, from the config topic.
    targets: BTreeMap<String, Target>,
    /// Restart requests by connector since this member started: (how many, only failed).
    restarts: BTreeMap<String, (u64, bool)>,
    health: Health,
    owners: Option<OwnerLog>,
    slots: BTreeMap<String, Slot>,
    /// Whether a connector failed (the exit status shows it).
    failed: bool,
    /// The group's member count at the last look ([`watch_group`]; 0: not known yet), for
    /// the words of a lost session.
    members: Arc<AtomicUsize>,
    /// The connectors this member subscribes to (the membership follows it).
    names: watch::Sender<Vec<String>>,
    /// When to try again to subscribe to the connectors left out because their topics could
    /// not be created; `None`: none is left out.
    subscribe_pending: Option<tokio::time::Instant>,
    setup: MemberSetup,
    link: Arc<KafkaLink>,
    /// Who runs the connectors this member does not (their REST address or member id), as
    /// [`watch_group`] last read their ownership records.
    seen_owners: Arc<std::sync::Mutex<BTreeMap<String, Seen>>>,
}

/// Runs this process as a member of `plan`'s group until `shutdown` turns true: connectors
/// (those of its files and those of the group's config topic) start when the coordinator
/// assigns them and stop when it revokes them; on shutdown the member stops its connectors
/// (drain, final commit, all at once), then leaves the group so that the others take them
/// over at once. Returns whether a connector failed definitely or the membership could not
/// be kept.
pub async fn run_member(
    cfg: Config,
    plan: GroupPlan,
    setup: MemberSetup,
    health: Health,
    mut shutdown: watch::Receiver<bool>,
) -> bool {
    let kafka = setup.kafka.clone();
    let id = setup.view.member.clone();
    let files: BTreeMap<String, ConnectorConfig> = cfg
        .connectors
        .iter()
        .map(|c| (c.name.clone(), c.clone()))
        .collect();
    for name in files.keys() {
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
    let names: Vec<String> = files.keys().cloned().collect();
    let definitions: BTreeMap<String, Definition> = files
        .iter()
        .map(|(n, c)| (n.clone(), Definition::of(c)))
        .collect();
    for name in files.keys() {
        metrics::gauge!(m::CONNECTOR_STANDBYS, m::LABEL_CONNECTOR => name.clone()).set(0.0);
    }
    let mut retry = Retry::new(TOPICS_MAX_BACKOFF);
    let (registry, verdict, shared) = loop {
        retry.attempt();
        // A refused login or certificate (the link's definite failure) ends the wait at once:
        // the admin request would only time out, and every retry be refused the same way.
        let e = tokio::select! {
            r = prepare(&kafka, &plan.name, &names, &definitions, &id, &link, health.topics()) => match r {
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
    let in_topic: BTreeSet<String> = shared
        .current()
        .connectors
        .into_keys()
        .chain(setup.seeds.keys().cloned())
        .collect();
    report_definitions(&plan.name, &verdict, &mut reported, &|n| {
        in_topic.contains(n)
    });
    let registry = std::sync::Arc::new(registry);
    let owners = match OwnerLog::start(
        &kafka,
        &plan.name,
        &id,
        setup.worker_id.clone(),
        link.clone(),
    ) {
        Ok(o) => Some(o),
        Err(e) => {
            tracing::warn!(group = %plan.name, "ownership records for `status` are off: {e}");
            None
        }
    };
    // This member's files seed the config topic: a Debezium connector JSON the topic lacks is
    // written there (the other members become its standbys, files or not); one the topic
    // holds differently, or a TOML connector the topic holds, is two definitions of one
    // connector (a takeover would switch between them): refused, as differing files are.
    let current = shared.current();
    let mut seeding = Vec::new();
    let mut refused = false;
    for name in files.keys() {
        match (current.connectors.get(name), setup.seeds.get(name)) {
            (None, Some(map)) => seeding.push(configs::connector_record(name, Some(map))),
            (None, None) => {}
            (Some(topic), Some(map)) if topic == map => {}
            (Some(_), seed) => {
                refused = true;
                let how = if seed.is_some() { "differently " } else { "" };
                tracing::error!(group = %plan.name, connector = %name, "cannot join the group: connector {name} is defined {how}in this member's connector files and in the group's config topic (created through the REST API, or seeded by another member's files); one definition per connector: make this member's file the same as the config topic's (GET /connectors/{name}/config), take it out of this member's files, or delete it through the REST API (DELETE /connectors/{name}) first");
            }
        }
    }
    if refused {
        registry.withdraw(definitions.keys()).await;
        return true;
    }
    if !seeding.is_empty() {
        match shared.write(&seeding).await {
            Ok(_) => {
                tracing::info!(group = %plan.name, connectors = ?seeding.iter().map(|(k, _)| k.trim_start_matches("connector-")).collect::<Vec<_>>(), "seeded the group's config topic with this member's connector files: every member can run them")
            }
            Err(e) => {
                tracing::warn!(group = %plan.name, "could not seed the group's config topic with this member's connector files (they run from the files; the next member to join seeds them): {e}")
            }
        }
    }
    let shared = Arc::new(shared);
    setup.view.set_shared(shared.clone());
    let mut shared_rx = shared.subscribe();
    // Topic tracking: noted in the config topic, listed as every member reads it there
    // (its reader gives the records to the registry as it reads them).
    health.topics().keep_with(
        Arc::new(configs::TopicKeeper(shared.clone())),
        crate::active_topics::Used::new(),
    );
    let members = Arc::new(AtomicUsize::new(0));
    let seen_owners = Arc::new(std::sync::Mutex::new(BTreeMap::new()));
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
            view: setup.view.clone(),
            owners: seen_owners.clone(),
        },
    ));
    let (names_tx, names_rx) = watch::channel(names.clone());
    let mut member = Member {
        group: plan.name.clone(),
        id: id.clone(),
        files,
        shared: BTreeMap::new(),
        targets: BTreeMap::new(),
        restarts: BTreeMap::new(),
        health: health.clone(),
        owners,
        slots: BTreeMap::new(),
        failed: false,
        members,
        names: names_tx,
        subscribe_pending: None,
        setup,
        link: link.clone(),
        seen_owners,
    };
    let first = shared_rx.borrow_and_update().clone();
    member.shared_changed(first).await;
    let (changes_tx, mut changes) = mpsc::unbounded_channel();
    let membership = Membership::join(
        MembershipSettings {
            group: plan.name.clone(),
            kafka: kafka.clone(),
            connectors: names_rx,
            session_timeout: plan.settings.session_timeout,
            heartbeat_interval: plan.settings.heartbeat_interval,
            member: id,
            link,
        },
        changes_tx,
    );

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
                    member.publish();
                }
                Some(Change::Revoked { connectors, reason, done }) => {
                    member.revoked(connectors.into_iter().collect(), reason).await;
                    let _ = done.send(());
                    member.publish();
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
            changed = shared_rx.changed() => {
                if changed.is_ok() {
                    let now = shared_rx.borrow_and_update().clone();
                    member.shared_changed(now).await;
                }
            }
            _ = tick.tick() => {
                member.reap().await;
                member.retry_subscription().await;
                member.publish();
            }
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
/// members' ([`definitions::Verdict`]), deleting records killed members left behind, and
/// reads the group's config topic to its end ([`configs::SharedConfigs`]).
async fn prepare(
    kafka: &KafkaConfig,
    group: &str,
    connectors: &[String],
    definitions: &BTreeMap<String, Definition>,
    member: &str,
    link: &std::sync::Arc<KafkaLink>,
    topics: &crate::active_topics::ActiveTopics,
) -> Result<(Registry, Verdict, SharedConfigs), TopicsError> {
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
    let shared = SharedConfigs::open(kafka, group, link.clone(), topics.clone())
        .map_err(TopicsError::Kafka)?;
    shared
        .caught_up(Duration::from_secs(15))
        .await
        .map_err(TopicsError::Kafka)?;
    Ok((registry, verdict, shared))
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
///
/// A connector of the group's config topic (`shared`) is no gap: every member that loads it
/// from there can take it over.
fn report_definitions(
    group: &str,
    verdict: &Verdict,
    reported: &mut BTreeMap<String, String>,
    shared: &dyn Fn(&str) -> bool,
) {
    for (name, coverage) in &verdict.mine {
        metrics::gauge!(m::CONNECTOR_STANDBYS, m::LABEL_CONNECTOR => name.clone())
            .set(coverage.same.len() as f64);
    }
    let mut now = BTreeMap::new();
    for (name, words) in verdict.gaps() {
        if shared(&name) {
            continue;
        }
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
    /// The REST API's view: which connectors the members' files define.
    view: Arc<GroupView>,
    /// Who runs each connector, from its ownership record (REST address, else member id).
    owners: Arc<std::sync::Mutex<BTreeMap<String, Seen>>>,
}

impl Member {
    /// The configuration of `name`: its file's, else the config topic's (when it loads here).
    fn config(&self, name: &str) -> Option<ConnectorConfig> {
        self.files.get(name).cloned().or_else(|| {
            self.shared
                .get(name)
                .and_then(|c| c.runs.as_ref().ok().cloned())
        })
    }

    /// The connectors this member can run, by name.
    fn names(&self) -> Vec<String> {
        let mut all: BTreeSet<String> = self.files.keys().cloned().collect();
        all.extend(
            self.shared
                .iter()
                .filter(|(_, c)| c.runs.is_ok())
                .map(|(n, _)| n.clone()),
        );
        all.into_iter().collect()
    }

    fn target(&self, name: &str) -> Target {
        self.targets.get(name).copied().unwrap_or(Target::Running)
    }

    /// Tells the REST API what this member knows of the group's connectors.
    fn publish(&self) {
        let report = self.health.report().connectors;
        let seen = self
            .seen_owners
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        // The connectors this member cannot run are shown too: another member may.
        let mut shown: BTreeSet<String> = self.names().into_iter().collect();
        shown.extend(
            self.shared
                .iter()
                .filter(|(_, c)| c.shown.is_some())
                .map(|(n, _)| n.clone()),
        );
        let listed = shown
            .into_iter()
            .filter_map(|name| {
                let cfg = self
                    .config(&name)
                    .or_else(|| self.shared.get(&name).and_then(|c| c.shown.clone()))?;
                let slot = self.slots.get(&name);
                let running = slot
                    .and_then(|s| s.running.as_ref())
                    .is_some_and(|r| !r.is_finished());
                let mut failed = report
                    .get(&name)
                    .is_some_and(|h| h.state == ConnectorState::Failed);
                let (worker, trace) = match (slot, seen.get(&name)) {
                    (None, Some(s)) => {
                        failed = s.failure.is_some();
                        (Some(s.worker.clone()), s.failure.clone())
                    }
                    _ => (None, None),
                };
                Some((
                    name.clone(),
                    Listed {
                        cfg,
                        target: self.target(&name),
                        running,
                        failed,
                        worker,
                        trace,
                    },
                ))
            })
            .collect();
        self.setup.view.set_listed(listed);
    }

    /// Applies a new state of the config topic: connectors created, changed or deleted,
    /// target states, restart requests.
    async fn shared_changed(&mut self, now: Shared) {
        if !now.caught_up {
            return;
        }
        let gone: Vec<String> = self
            .shared
            .keys()
            .filter(|n| !now.connectors.contains_key(*n))
            .cloned()
            .collect();
        for name in gone {
            self.shared.remove(&name);
            if self.files.contains_key(&name) {
                continue;
            }
            // Deleted: its owner stops it here and now (drained, final checkpoint, released),
            // before the subscription changes (the coordinator's revocation that follows may
            // be reported as a lost assignment, which would abandon it).
            let Some(slot) = self.slots.remove(&name) else {
                tracing::info!(group = %self.group, connector = %name, "connector deleted from the group's config topic (another member runs it, or nobody)");
                continue;
            };
            tracing::info!(group = %self.group, connector = %name, "connector deleted from the group's config topic: stopping it here: drain, final checkpoint");
            slot.lease.revoke();
            if let Some(running) = slot.running {
                self.drain(&name, running).await;
            }
            if let Some(o) = &self.owners {
                o.released(&name, "deleted through the REST API", RELEASE_WAIT)
                    .await;
            }
            self.health.remove(&name);
            metrics::gauge!(m::CONNECTOR_OWNED, m::LABEL_CONNECTOR => name.clone()).set(0.0);
        }
        for (name, map) in &now.connectors {
            if self.shared.get(name).is_some_and(|c| &c.map == map) {
                continue;
            }
            if self.files.contains_key(name) && self.setup.seeds.get(name) != Some(map) {
                tracing::error!(group = %self.group, connector = %name, "the group's config topic now defines connector {name} differently from this member's connector files: this member keeps running its file's definition; make the two the same, or delete one (DELETE /connectors/{name}, or take it out of the files and restart this member)");
            }
            let runs = (self.setup.load)(name, map, false);
            let shown = match &runs {
                Ok(c) => {
                    tracing::info!(group = %self.group, connector = %name, "connector configuration read from the group's config topic");
                    Some(c.clone())
                }
                Err(e) => {
                    tracing::error!(group = %self.group, connector = %name, "cannot load connector {name} of the group's config topic on this member, so this member does not run it (the other members may): {e}");
                    (self.setup.load)(name, map, true).ok()
                }
            };
            let shared = SharedConnector {
                map: map.clone(),
                runs,
                shown,
            };
            self.shared.insert(name.clone(), shared);
        }
        self.targets = now.targets.clone();
        let names = self.names();
        let known = self.health.report().connectors;
        for name in &names {
            if !self.files.contains_key(name) && !known.contains_key(name) {
                self.health.set(name, ConnectorState::Standby);
                metrics::gauge!(m::CONNECTOR_OWNED, m::LABEL_CONNECTOR => name.clone()).set(0.0);
            }
        }
        self.subscribe_names(names).await;
        // What the owner applies.
        let owned: Vec<String> = self.slots.keys().cloned().collect();
        for name in owned {
            let Some(cfg) = self.config(&name) else {
                // Deleted: the coming revocation stops it.
                continue;
            };
            let target = self.target(&name);
            let asked = now.restarts.get(&name).copied().unwrap_or((0, false));
            let Some(slot) = self.slots.get_mut(&name) else {
                continue;
            };
            let restart_asked = asked.0 > slot.restarts;
            slot.restarts = asked.0;
            let failed = slot.running.is_none() && target != Target::Stopped;
            if slot.cfg != cfg {
                tracing::info!(group = %self.group, connector = %name, "configuration changed in the group's config topic: restarting it with the new one");
                self.restart_slot(&name, cfg).await;
            } else if restart_asked && target != Target::Stopped && (!asked.1 || failed) {
                tracing::info!(group = %self.group, connector = %name, "restart asked through the REST API: restarting it");
                self.restart_slot(&name, cfg).await;
            } else {
                self.apply_target(&name, target).await;
            }
        }
        self.restarts = now.restarts;
        self.publish();
    }

    /// Has the membership subscribe to the coordination topics of `wanted` (this member's
    /// connectors now), once those topics exist. A connector whose topic Kafka does not
    /// create (unreachable, or refusing that name) is left out of the subscription, and the
    /// others go ahead; the left-out ones are tried again every [`SUBSCRIBE_RETRY`] (the
    /// member loop goes on serving revocations meanwhile).
    async fn subscribe_names(&mut self, wanted: Vec<String>) {
        if *self.names.borrow() == wanted {
            self.subscribe_pending = None;
            return;
        }
        let current: BTreeSet<String> = self.names.borrow().iter().cloned().collect();
        let new: Vec<String> = wanted
            .iter()
            .filter(|n| !current.contains(*n))
            .cloned()
            .collect();
        let mut left_out = BTreeSet::new();
        if !new.is_empty() {
            let (kafka, group, link) = (&self.setup.kafka, &self.group, &self.link);
            if let Err(e) = topics::ensure(kafka, group, &new, link).await {
                // One name Kafka refuses must not keep the others out: one by one.
                let one_by_one = new.len() > 1 && e.to_string().contains("refused");
                for n in &new {
                    let result = if one_by_one {
                        topics::ensure(kafka, group, std::slice::from_ref(n), link).await
                    } else {
                        Err(e.clone())
                    };
                    if let Err(e) = result {
                        if self.subscribe_pending.is_none() {
                            tracing::error!(group = %self.group, connector = %n, "cannot create the connector's coordination topic, so no member of this group runs it yet (tried again every {SUBSCRIBE_RETRY:?}): {e}");
                        }
                        left_out.insert(n.clone());
                    }
                }
            }
        }
        self.subscribe_pending =
            (!left_out.is_empty()).then(|| tokio::time::Instant::now() + SUBSCRIBE_RETRY);
        let names: Vec<String> = wanted
            .into_iter()
            .filter(|n| !left_out.contains(n))
            .collect();
        for gone in self.names.borrow().iter().filter(|n| !names.contains(n)) {
            if !self.slots.contains_key(gone) {
                self.health.remove(gone);
            }
        }
        if *self.names.borrow() != names {
            self.names.send_replace(names);
        }
    }

    /// Retries a subscription Kafka did not take ([`Member::subscribe_names`]).
    async fn retry_subscription(&mut self) {
        if self
            .subscribe_pending
            .is_some_and(|at| tokio::time::Instant::now() >= at)
        {
            let names = self.names();
            self.subscribe_names(names).await;
        }
    }

    /// Stops `running` (connector `name`, still this member's): drained, final checkpoint;
    /// a failure of its own counts in the exit status.
    async fn drain(&mut self, name: &str, running: RunningConnector) {
        running.stop_handle().stop();
        let result = running.join().await;
        self.failed |= judge(name, &result, &self.health);
    }

    /// Brings owned connector `name` to `target`.
    async fn apply_target(&mut self, name: &str, target: Target) {
        let Some(slot) = self.slots.get_mut(name) else {
            return;
        };
        match (target, slot.running.is_some()) {
            (Target::Stopped, true) => {
                tracing::info!(group = %self.group, connector = %name, "stopping it (its target state): drain, final checkpoint");
                if let Some(running) = slot.running.take() {
                    self.drain(name, running).await;
                }
                self.health.set(name, ConnectorState::Stopped);
            }
            (Target::Paused | Target::Running, true) => {
                if let Some(p) = &slot.pause {
                    if *p.borrow() != (target == Target::Paused) {
                        tracing::info!(group = %self.group, connector = %name, ?target, "connector target state set");
                        p.send_replace(target == Target::Paused);
                    }
                }
            }
            (Target::Paused | Target::Running, false) => {
                // Started again after a stop; a failed one waits for a restart.
                if self.health.report().connectors.get(name).map(|h| h.state)
                    == Some(ConnectorState::Stopped)
                {
                    let cfg = slot.cfg.clone();
                    self.restart_slot(name, cfg).await;
                }
            }
            (Target::Stopped, false) => {}
        }
    }

    /// Stops owned connector `name` (drained) and starts it again with `cfg`, under the
    /// same lease.
    async fn restart_slot(&mut self, name: &str, cfg: ConnectorConfig) {
        let Some(slot) = self.slots.remove(name) else {
            return;
        };
        if let Some(running) = slot.running {
            self.drain(name, running).await;
        }
        let restarts = slot.restarts;
        let mut fresh = self.start_slot(name, cfg, slot.lease).await;
        fresh.restarts = restarts;
        if fresh.running.is_some() {
            if let Some(o) = &self.owners {
                o.started_again(name);
            }
        }
        self.slots.insert(name.to_string(), fresh);
    }

    /// Starts `name` with `cfg` under `lease`, in its target state.
    async fn start_slot(&mut self, name: &str, cfg: ConnectorConfig, lease: Lease) -> Slot {
        // Not while an offsets change is being made (it started from a stopped connector).
        let view = self.setup.view.clone();
        let _offsets = view.offsets.lock().await;
        let target = self.target(name);
        let restarts = self.restarts.get(name).map(|r| r.0).unwrap_or(0);
        if target == Target::Stopped {
            tracing::info!(group = %self.group, connector = %name, "not started: its target state is stopped");
            self.health.set(name, ConnectorState::Stopped);
            return Slot {
                lease,
                running: None,
                pause: None,
                cfg,
                restarts,
            };
        }
        match Connector::new(cfg.clone()) {
            Ok(connector) => {
                let (pause, paused) = watch::channel(target == Target::Paused);
                let running = connector
                    .with_lease(lease.clone())
                    .paused_by(paused)
                    .start(self.health.clone());
                Slot {
                    lease,
                    running: Some(running),
                    pause: Some(pause),
                    cfg,
                    restarts,
                }
            }
            Err(e) => {
                let e = format!("cannot build the connector: {e}");
                self.keep_failed(name, &lease, &e).await;
                Slot {
                    lease,
                    running: None,
                    pause: None,
                    cfg,
                    restarts,
                }
            }
        }
    }

    /// Starts `name`, assigned to this member under `lease`.
    async fn assigned(&mut self, name: String, lease: Lease) {
        let Some(cfg) = self.config(&name) else {
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
        let slot = self.start_slot(&name, cfg, lease).await;
        self.slots.insert(name, slot);
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
        // Deleted from the group's config topic: no longer shown at all.
        for (name, _) in &stopped {
            if self.config(name).is_none() {
                self.health.remove(name);
            }
        }
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
        let mut in_files = catalog.defined_by(&live);
        for name in watch.definitions.keys() {
            in_files.insert(name.clone(), watch.member.clone());
        }
        watch.view.set_in_files(in_files);
        let connectors: Vec<String> = watch.view.list().into_keys().collect();
        let (k, g, l) = (kafka.clone(), group.clone(), live.clone());
        if let Ok(seen) = tokio::task::spawn_blocking(move || {
            connectors
                .into_iter()
                .filter_map(|c| {
                    let r = owners::read_record(&k, &g, &c, Duration::from_secs(2)).ok()??;
                    // Released on a definite failure, the member keeps the assignment.
                    let failure = match &r.released {
                        None => None,
                        Some(rel) => Some(rel.reason.strip_prefix("failed: ")?.to_string()),
                    };
                    l.contains(&r.owner.member).then(|| {
                        let worker = r.owner.worker_id.unwrap_or(r.owner.member);
                        (c, Seen { worker, failure })
                    })
                })
                .collect::<BTreeMap<_, _>>()
        })
        .await
        {
            *watch.owners.lock().unwrap_or_else(|e| e.into_inner()) = seen;
        }
        let verdict = Verdict::of(
            &watch.definitions,
            &watch.member,
            &catalog,
            &live,
            None,
            crate::checkpoint::now_ms(),
        );
        let view = watch.view.clone();
        report_definitions(&group, &verdict, &mut watch.reported, &|n| {
            view.config_map(n).is_some()
        });
    }
}
