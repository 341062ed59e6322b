//! Metric names and labels, in one place (Prometheus naming: `_total` counters, base units).
//!
//! Labels stay low-cardinality: the connector name and a small closed set of kinds. Row
//! values and payloads are never labels.
//!
//! Beside outboxd's own series, every connector exports the Debezium streaming metrics that
//! Debezium's Grafana dashboards and alerts use ([`DBZ_MILLISECONDS_BEHIND_SOURCE`], ...),
//! under the names the Prometheus JMX exporter gives them in Debezium's own monitoring
//! example (debezium/debezium-examples, `monitoring/debezium-jmx-exporter/config.yml`: the
//! MBean `debezium.<plugin>:type=connector-metrics,context=<context>,server=<name>` attribute
//! `A` becomes `debezium_metrics_A{plugin, name, context}`), so such a dashboard keeps
//! working when outboxd replaces the connector. Values derived from time (lag, ages) and
//! readiness are computed when `/metrics` is scraped ([`refresh`]).

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use crate::clock::now_ms;
use crate::health::Health;

/// Label: the connector's name.
pub const LABEL_CONNECTOR: &str = "connector";
/// Label: failure kind, `transient` or `definite`.
pub const LABEL_KIND: &str = "kind";
/// Label: why an outbox row change made no record (`delete`, `update`, ...).
pub const LABEL_REASON: &str = "reason";
/// `reason` of [`EVENTS_SKIPPED`] for an event Debezium had delivered before a switch to
/// outboxd (`outboxd checkpoint import-debezium`).
pub const REASON_DEBEZIUM: &str = "debezium";
/// Label: an assignment change in a group, `assigned` or `revoked`.
pub const LABEL_CHANGE: &str = "change";

/// Counter: outbox row changes read from the source.
pub const EVENTS_READ: &str = "outboxd_events_read_total";
/// Counter: records Kafka acknowledged.
pub const EVENTS_PRODUCED: &str = "outboxd_events_produced_total";
/// Counter: outbox row changes that made no record, by reason.
pub const EVENTS_SKIPPED: &str = "outboxd_events_skipped_total";
/// Counter: outbox events written to the dead-letter topic instead (`errors.tolerance=all`).
pub const EVENTS_DEAD_LETTERED: &str = "outboxd_events_dead_lettered_total";
/// Counter: bytes (key + value + headers) of records Kafka acknowledged.
pub const BYTES_PRODUCED: &str = "outboxd_bytes_produced_total";
/// Counter: failures, by kind.
pub const ERRORS: &str = "outboxd_errors_total";
/// Counter: checkpoints written.
pub const CHECKPOINT_WRITES: &str = "outboxd_checkpoint_writes_total";
/// Gauge: seconds since the checkpointed position last moved forward.
pub const CHECKPOINT_AGE: &str = "outboxd_checkpoint_age_seconds";
/// Gauge: the age, in seconds, of the oldest source transaction read but not yet delivered
/// and checkpointed (now minus its commit time); 0 when everything read is delivered, so a
/// quiet outbox reads 0, not a growing number. Computed at scrape time.
pub const CHECKPOINT_LAG: &str = "outboxd_checkpoint_lag_seconds";
/// Gauge: seconds since the source last handed on an outbox row change (since the connector
/// started, before the first): how long the outbox has been quiet. Computed at scrape time.
pub const LAST_EVENT_AGE: &str = "outboxd_last_event_age_seconds";
/// Gauge: 1 while the connector is ready (`/ready`: source streaming, Kafka answering), else 0.
pub const CONNECTOR_READY: &str = "outboxd_connector_ready";
/// Gauge: 1 while the source is connected and streaming, else 0.
pub const SOURCE_CONNECTED: &str = "outboxd_source_connected";
/// Counter: connector restarts after transient failures.
pub const RESTARTS: &str = "outboxd_connector_restarts_total";
/// Gauge: 1 in the member of a group that runs the connector, 0 in the others (and 1 for
/// every connector of a process without a group).
pub const CONNECTOR_OWNED: &str = "outboxd_connector_owned";
/// Gauge: other members of this process's group that define the connector as this member
/// does, so could take it over (its standbys); 0: none can (a connector only this member's
/// files define).
pub const CONNECTOR_STANDBYS: &str = "outboxd_connector_standbys";
/// Gauge: members of this process's group, as the group coordinator last described it.
pub const GROUP_MEMBERS: &str = "outboxd_group_members";
/// Counter: connectors assigned to or revoked from this member, by `change`.
pub const GROUP_ASSIGNMENTS: &str = "outboxd_group_assignments_total";

/// Debezium label: the connector plugin (`mysql`, `mariadb`, `postgres`: the `<plugin>` of
/// Debezium's MBean domain `debezium.<plugin>`).
pub const DBZ_LABEL_PLUGIN: &str = "plugin";
/// Debezium label: the MBean's `server`: a Debezium JSON's `topic.prefix` (as Debezium's own
/// MBeans, so its alerts match), a TOML connector's name.
pub const DBZ_LABEL_NAME: &str = "name";
/// Debezium label: the MBean's `context`; always `streaming` (outboxd takes no snapshot).
pub const DBZ_LABEL_CONTEXT: &str = "context";
/// The `context` label's value.
pub const DBZ_CONTEXT_STREAMING: &str = "streaming";
/// Debezium `MilliSecondsBehindSource`: for outboxd, [`CHECKPOINT_LAG`] in milliseconds (the
/// oldest undelivered source commit's age; 0 when caught up), where Debezium reports the
/// delay of the last event it read.
pub const DBZ_MILLISECONDS_BEHIND_SOURCE: &str = "debezium_metrics_MilliSecondsBehindSource";
/// Debezium `MilliSecondsSinceLastEvent`: milliseconds since the last outbox row change was
/// read; -1 before the first (as Debezium).
pub const DBZ_MILLISECONDS_SINCE_LAST_EVENT: &str = "debezium_metrics_MilliSecondsSinceLastEvent";
/// Debezium `TotalNumberOfEventsSeen`: outbox row changes read since the process started.
pub const DBZ_TOTAL_NUMBER_OF_EVENTS_SEEN: &str = "debezium_metrics_TotalNumberOfEventsSeen";
/// Debezium `NumberOfCommittedTransactions`: source transactions with outbox rows read since
/// the process started (transactions on other tables are not decoded, so not counted).
pub const DBZ_NUMBER_OF_COMMITTED_TRANSACTIONS: &str =
    "debezium_metrics_NumberOfCommittedTransactions";
/// Debezium `Connected`: 1 while the source streams, else 0 ([`SOURCE_CONNECTED`]).
pub const DBZ_CONNECTED: &str = "debezium_metrics_Connected";
/// Debezium `NumberOfDisconnects`: source connections lost after streaming, since the
/// process started.
pub const DBZ_NUMBER_OF_DISCONNECTS: &str = "debezium_metrics_NumberOfDisconnects";

/// Not set (an epoch-ms slot holding no time).
const NONE_MS: i64 = i64::MIN;

/// What one connector's streaming figures are made of, updated by its source and delivery
/// loop and turned into gauges at scrape time ([`refresh`]).
#[derive(Debug)]
pub struct StreamingStats {
    connector: String,
    plugin: Mutex<&'static str>,
    /// The `name` label of the Debezium series ([`DBZ_LABEL_NAME`]).
    server: Mutex<String>,
    started_ms: i64,
    events_seen: AtomicU64,
    committed_transactions: AtomicU64,
    disconnects: AtomicU64,
    connected: AtomicBool,
    /// Epoch ms of the last outbox row change read.
    last_event_ms: AtomicI64,
    /// Commit time (epoch ms) of the oldest source transaction read and not yet checkpointed.
    oldest_pending_ms: AtomicI64,
    /// Commit times (epoch ms) of the source transactions handed on by the source and not yet
    /// taken by the delivery loop, oldest first (at most the channel's capacity): while the
    /// loop waits for Kafka they wait in the channel, and are lag as well.
    handed_on: Mutex<VecDeque<i64>>,
}

/// Every connector's [`StreamingStats`], by name.
fn registry() -> &'static Mutex<BTreeMap<String, Arc<StreamingStats>>> {
    static REGISTRY: OnceLock<Mutex<BTreeMap<String, Arc<StreamingStats>>>> = OnceLock::new();
    REGISTRY.get_or_init(Default::default)
}

impl StreamingStats {
    /// Connector `connector`'s figures (created at first use, shared afterwards).
    pub fn of(connector: &str) -> Arc<Self> {
        let mut reg = registry().lock().unwrap_or_else(|e| e.into_inner());
        reg.entry(connector.to_string())
            .or_insert_with(|| {
                Arc::new(Self {
                    connector: connector.to_string(),
                    plugin: Mutex::new("unknown"),
                    server: Mutex::new(connector.to_string()),
                    started_ms: now_ms(),
                    events_seen: AtomicU64::new(0),
                    committed_transactions: AtomicU64::new(0),
                    disconnects: AtomicU64::new(0),
                    connected: AtomicBool::new(false),
                    last_event_ms: AtomicI64::new(NONE_MS),
                    oldest_pending_ms: AtomicI64::new(NONE_MS),
                    handed_on: Mutex::new(VecDeque::new()),
                })
            })
            .clone()
    }

    /// Names the Debezium labels of the connector's series: `plugin` (`mysql`, `mariadb`,
    /// `postgres`) and `name` (`server`: Debezium's `topic.prefix`, or the connector name).
    /// A `server` another connector of the process already labels its series with would
    /// mix the two connectors' figures: the connector's name is used then, with a warning.
    pub fn set_debezium_labels(&self, plugin: &'static str, server: &str) {
        let taken = registry()
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .filter(|s| s.connector != self.connector)
            .any(|s| *s.server.lock().unwrap_or_else(|e| e.into_inner()) == server);
        let server = if taken {
            tracing::warn!(connector = %self.connector, "another connector's Debezium series are already labelled name=\"{server}\" (its topic.prefix): this connector's are labelled with its own name instead");
            self.connector.as_str()
        } else {
            server
        };
        *self.plugin.lock().unwrap_or_else(|e| e.into_inner()) = plugin;
        *self.server.lock().unwrap_or_else(|e| e.into_inner()) = server.to_string();
    }

    /// An outbox row change was read.
    pub fn event_seen(&self, n: u64) {
        self.events_seen.fetch_add(n, Ordering::Relaxed);
        self.last_event_ms.store(now_ms(), Ordering::Relaxed);
    }

    /// The source handed on the commit of a transaction committed at `commit_ts_ms`: it is
    /// lag from now, while it waits for the delivery loop.
    pub fn commit_handed_on(&self, commit_ts_ms: i64) {
        self.handed_on().push_back(commit_ts_ms);
    }

    /// A new channel between source and delivery loop: nothing handed on before waits any
    /// more (the source reads it again from the checkpoint).
    pub fn channel_opened(&self) {
        self.handed_on().clear();
    }

    fn handed_on(&self) -> std::sync::MutexGuard<'_, VecDeque<i64>> {
        self.handed_on.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The delivery loop read the commit of a source transaction committed at
    /// `commit_ts_ms` (the oldest one handed on): it is pending until a checkpoint covers it.
    pub fn commit_read(&self, commit_ts_ms: i64) {
        self.handed_on().pop_front();
        self.committed_transactions.fetch_add(1, Ordering::Relaxed);
        let _ = self.oldest_pending_ms.compare_exchange(
            NONE_MS,
            commit_ts_ms,
            Ordering::Relaxed,
            Ordering::Relaxed,
        );
    }

    /// What is still pending after a checkpoint: the commit time of the oldest source
    /// transaction read and not covered by it, `None` when it covers everything read.
    pub fn pending_since(&self, commit_ts_ms: Option<i64>) {
        self.oldest_pending_ms
            .store(commit_ts_ms.unwrap_or(NONE_MS), Ordering::Relaxed);
    }

    /// The source connected (`true`, streaming) or its connection ended (`false`; counted
    /// as a disconnect when it had been streaming).
    pub fn set_connected(&self, connected: bool) {
        let was = self.connected.swap(connected, Ordering::Relaxed);
        if was && !connected {
            self.disconnects.fetch_add(1, Ordering::Relaxed);
        }
        metrics::gauge!(SOURCE_CONNECTED, LABEL_CONNECTOR => self.connector.clone())
            .set(f64::from(u8::from(connected)));
    }

    /// The age of the oldest undelivered source commit, in milliseconds (0 when none): read
    /// by the delivery loop and not checkpointed, or still waiting in the channel.
    fn lag_ms(&self, now: i64) -> i64 {
        let pending = match self.oldest_pending_ms.load(Ordering::Relaxed) {
            NONE_MS => None,
            ts => Some(ts),
        };
        let waiting = self.handed_on().front().copied();
        match pending.into_iter().chain(waiting).min() {
            None => 0,
            Some(ts) => (now - ts).max(0),
        }
    }

    /// Sets the connector's time-derived gauges and its Debezium series.
    fn refresh(&self, now: i64) {
        let c = self.connector.clone();
        let lag_ms = self.lag_ms(now);
        metrics::gauge!(CHECKPOINT_LAG, LABEL_CONNECTOR => c.clone()).set(lag_ms as f64 / 1000.0);
        let last = self.last_event_ms.load(Ordering::Relaxed);
        let quiet_since = if last == NONE_MS {
            self.started_ms
        } else {
            last
        };
        metrics::gauge!(LAST_EVENT_AGE, LABEL_CONNECTOR => c.clone())
            .set((now - quiet_since).max(0) as f64 / 1000.0);
        let plugin = *self.plugin.lock().unwrap_or_else(|e| e.into_inner());
        let server = self
            .server
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let labels = [
            (DBZ_LABEL_PLUGIN, plugin.to_string()),
            (DBZ_LABEL_NAME, server),
            (DBZ_LABEL_CONTEXT, DBZ_CONTEXT_STREAMING.to_string()),
        ];
        let since_last = if last == NONE_MS {
            -1
        } else {
            (now - last).max(0)
        };
        for (name, value) in [
            (DBZ_MILLISECONDS_BEHIND_SOURCE, lag_ms as f64),
            (DBZ_MILLISECONDS_SINCE_LAST_EVENT, since_last as f64),
            (
                DBZ_TOTAL_NUMBER_OF_EVENTS_SEEN,
                self.events_seen.load(Ordering::Relaxed) as f64,
            ),
            (
                DBZ_NUMBER_OF_COMMITTED_TRANSACTIONS,
                self.committed_transactions.load(Ordering::Relaxed) as f64,
            ),
            (
                DBZ_CONNECTED,
                f64::from(u8::from(self.connected.load(Ordering::Relaxed))),
            ),
            (
                DBZ_NUMBER_OF_DISCONNECTS,
                self.disconnects.load(Ordering::Relaxed) as f64,
            ),
        ] {
            metrics::gauge!(name, &labels).set(value);
        }
    }
}

/// Computes what is derived at scrape time: every connector's lag and ages, its Debezium
/// series, and [`CONNECTOR_READY`] from `health`. Called by `/metrics` before rendering.
pub fn refresh(health: &Health) {
    let now = now_ms();
    let all: Vec<Arc<StreamingStats>> = registry()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .values()
        .cloned()
        .collect();
    for stats in all {
        stats.refresh(now);
    }
    for (name, c) in health.report().connectors {
        metrics::gauge!(CONNECTOR_READY, LABEL_CONNECTOR => name).set(f64::from(u8::from(c.ready)));
    }
}

/// [`EVENTS_READ`] feeding [`StreamingStats::event_seen`] too.
struct SeenCounter {
    read: metrics::Counter,
    stats: Arc<StreamingStats>,
}

impl metrics::CounterFn for SeenCounter {
    fn increment(&self, value: u64) {
        self.read.increment(value);
        self.stats.event_seen(value);
    }

    fn absolute(&self, value: u64) {
        self.read.absolute(value);
    }
}

/// Registers descriptions so `/metrics` documents each series.
pub fn describe() {
    use metrics::{describe_counter, describe_gauge, Unit};
    describe_counter!(EVENTS_READ, "Outbox row changes read from the source");
    describe_counter!(EVENTS_PRODUCED, "Records acknowledged by Kafka");
    describe_counter!(EVENTS_SKIPPED, "Outbox row changes that produced no record");
    describe_counter!(
        EVENTS_DEAD_LETTERED,
        "Outbox events written to the dead-letter topic"
    );
    describe_counter!(BYTES_PRODUCED, Unit::Bytes, "Bytes acknowledged by Kafka");
    describe_counter!(ERRORS, "Connector failures by kind");
    describe_counter!(CHECKPOINT_WRITES, "Checkpoints written");
    describe_gauge!(
        CHECKPOINT_AGE,
        Unit::Seconds,
        "Seconds since the checkpoint last advanced"
    );
    describe_gauge!(
        CHECKPOINT_LAG,
        Unit::Seconds,
        "Age of the oldest source commit read but not yet delivered; 0 when caught up"
    );
    describe_gauge!(
        LAST_EVENT_AGE,
        Unit::Seconds,
        "Seconds since the last outbox row change was read"
    );
    describe_gauge!(SOURCE_CONNECTED, "1 while the source is streaming");
    describe_gauge!(
        CONNECTOR_READY,
        "1 while the connector is ready (source streaming, Kafka answering)"
    );
    describe_counter!(RESTARTS, "Connector restarts after transient failures");
    describe_gauge!(
        CONNECTOR_OWNED,
        "1 in the group member that runs the connector, 0 in the others"
    );
    describe_gauge!(GROUP_MEMBERS, "Members of this process's group");
    describe_gauge!(
        CONNECTOR_STANDBYS,
        "Other members of the group that define the connector as this member does (could take it over)"
    );
    describe_counter!(
        GROUP_ASSIGNMENTS,
        "Connectors assigned to or revoked from this member"
    );
    describe_gauge!(
        DBZ_MILLISECONDS_BEHIND_SOURCE,
        "Debezium MilliSecondsBehindSource: age of the oldest undelivered source commit, ms"
    );
    describe_gauge!(
        DBZ_MILLISECONDS_SINCE_LAST_EVENT,
        "Debezium MilliSecondsSinceLastEvent: ms since the last outbox row change (-1: none yet)"
    );
    describe_gauge!(
        DBZ_TOTAL_NUMBER_OF_EVENTS_SEEN,
        "Debezium TotalNumberOfEventsSeen: outbox row changes read"
    );
    describe_gauge!(
        DBZ_NUMBER_OF_COMMITTED_TRANSACTIONS,
        "Debezium NumberOfCommittedTransactions: source transactions with outbox rows read"
    );
    describe_gauge!(
        DBZ_CONNECTED,
        "Debezium Connected: 1 while the source streams"
    );
    describe_gauge!(
        DBZ_NUMBER_OF_DISCONNECTS,
        "Debezium NumberOfDisconnects: source connections lost after streaming"
    );
}

/// The per-event counters of one connector, looked up once.
///
/// `metrics::counter!` with a label hashes the key and searches the registry on every call;
/// per event (tens of thousands a second) that was measurable in the delivery loops.
#[derive(Clone)]
pub struct EventCounters {
    /// [`EVENTS_READ`] for the connector (also counting [`StreamingStats::event_seen`]).
    pub read: metrics::Counter,
    /// [`EVENTS_PRODUCED`] for the connector.
    pub produced: metrics::Counter,
    /// [`BYTES_PRODUCED`] for the connector.
    pub bytes: metrics::Counter,
    /// [`EVENTS_DEAD_LETTERED`] for the connector.
    pub dead_lettered: metrics::Counter,
    /// The connector's streaming figures: commits read, what is pending.
    pub stream: Arc<StreamingStats>,
}

impl EventCounters {
    /// Registers (or finds) the counters labelled with `connector`. What a failed run left
    /// pending stays pending: the restarted run reads those transactions again.
    pub fn new(connector: &str) -> Self {
        let stream = StreamingStats::of(connector);
        let read = metrics::counter!(EVENTS_READ, LABEL_CONNECTOR => connector.to_string());
        Self {
            read: metrics::Counter::from_arc(Arc::new(SeenCounter {
                read,
                stats: stream.clone(),
            })),
            stream,
            produced: metrics::counter!(EVENTS_PRODUCED, LABEL_CONNECTOR => connector.to_string()),
            bytes: metrics::counter!(BYTES_PRODUCED, LABEL_CONNECTOR => connector.to_string()),
            dead_lettered: metrics::counter!(EVENTS_DEAD_LETTERED, LABEL_CONNECTOR => connector.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lag counts commits waiting in the channel (the loop blocked on Kafka) as well as those
    /// read and not checkpointed; 0 once a checkpoint covers everything handed on.
    #[test]
    fn lag_counts_commits_waiting_for_the_delivery_loop() {
        let s = StreamingStats::of("lag-waiting");
        s.channel_opened();
        assert_eq!(s.lag_ms(10_000), 0);
        s.commit_handed_on(1_000);
        s.commit_handed_on(2_000);
        assert_eq!(s.lag_ms(10_000), 9_000, "waiting in the channel is lag");
        s.commit_read(1_000);
        assert_eq!(s.lag_ms(10_000), 9_000, "read, not checkpointed");
        s.pending_since(None);
        assert_eq!(s.lag_ms(10_000), 8_000, "the second still waits");
        s.commit_read(2_000);
        s.pending_since(None);
        assert_eq!(s.lag_ms(10_000), 0);
        // A new channel (a restart) forgets what the old one held.
        s.commit_handed_on(3_000);
        s.channel_opened();
        assert_eq!(s.lag_ms(10_000), 0);
    }

    /// The Debezium series are labelled with the server name a Debezium JSON gives
    /// (`topic.prefix`), unless another connector already is.
    #[test]
    fn debezium_series_are_labelled_with_the_server_name() {
        let a = StreamingStats::of("labels-a");
        a.set_debezium_labels("mariadb", "shop");
        assert_eq!(*a.server.lock().unwrap(), "shop");
        let b = StreamingStats::of("labels-b");
        b.set_debezium_labels("postgres", "shop");
        assert_eq!(*b.server.lock().unwrap(), "labels-b", "taken: its own name");
        // Set again (a restart of the same connector): still its own.
        a.set_debezium_labels("mariadb", "shop");
        assert_eq!(*a.server.lock().unwrap(), "shop");
    }

    /// Every series the shipped Grafana dashboard queries is one outboxd exports, and it shows
    /// readiness, lag, dead letters and who owns each connector in a group.
    #[test]
    fn the_dashboard_queries_exported_series() {
        let known = [
            EVENTS_READ,
            EVENTS_PRODUCED,
            EVENTS_SKIPPED,
            BYTES_PRODUCED,
            ERRORS,
            CHECKPOINT_WRITES,
            CHECKPOINT_AGE,
            CHECKPOINT_LAG,
            LAST_EVENT_AGE,
            CONNECTOR_READY,
            SOURCE_CONNECTED,
            RESTARTS,
            DBZ_MILLISECONDS_BEHIND_SOURCE,
            DBZ_MILLISECONDS_SINCE_LAST_EVENT,
            DBZ_TOTAL_NUMBER_OF_EVENTS_SEEN,
            DBZ_NUMBER_OF_COMMITTED_TRANSACTIONS,
            DBZ_CONNECTED,
            DBZ_NUMBER_OF_DISCONNECTS,
            EVENTS_DEAD_LETTERED,
            CONNECTOR_OWNED,
            CONNECTOR_STANDBYS,
            GROUP_MEMBERS,
            GROUP_ASSIGNMENTS,
        ];
        let dashboard: serde_json::Value =
            serde_json::from_str(include_str!("../docker/grafana/dashboards/outboxd.json"))
                .expect("the dashboard is JSON");
        let mut exprs = Vec::new();
        for panel in dashboard["panels"].as_array().unwrap() {
            for t in panel["targets"].as_array().into_iter().flatten() {
                exprs.push(t["expr"].as_str().unwrap().to_string());
            }
        }
        assert!(exprs.len() > 10, "{exprs:?}");
        let name = regex::Regex::new(r"\b(outboxd_[a-z_]+|debezium_metrics_[A-Za-z]+)").unwrap();
        let mut used = std::collections::BTreeSet::new();
        for e in &exprs {
            for m in name.find_iter(e) {
                assert!(
                    known.contains(&m.as_str()),
                    "{} in {e} is not exported",
                    m.as_str()
                );
                used.insert(m.as_str().to_string());
            }
        }
        for k in [
            CONNECTOR_READY,
            CHECKPOINT_LAG,
            DBZ_MILLISECONDS_BEHIND_SOURCE,
            EVENTS_DEAD_LETTERED,
            CONNECTOR_OWNED,
            GROUP_MEMBERS,
        ] {
            assert!(used.contains(k), "the dashboard shows {k}");
        }
    }

    /// Lag is the age of the oldest pending commit, 0 when nothing is pending.
    #[test]
    fn lag_is_zero_when_nothing_is_pending() {
        let s = StreamingStats::of("metrics-test-lag");
        assert_eq!(s.lag_ms(now_ms()), 0);
        s.commit_read(1_000);
        s.commit_read(2_000);
        assert_eq!(s.lag_ms(11_000), 10_000, "the oldest pending commit counts");
        s.pending_since(Some(2_000));
        assert_eq!(s.lag_ms(11_000), 9_000);
        s.pending_since(None);
        assert_eq!(s.lag_ms(11_000), 0);
        s.set_connected(true);
        s.set_connected(false);
        assert_eq!(s.disconnects.load(Ordering::Relaxed), 1);
    }
}
