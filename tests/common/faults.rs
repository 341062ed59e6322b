//! Faults injected into the real services while writers insert on both sources and two relays
//! (one per source, exactly-once) deliver: the Kafka broker frozen (SIGSTOP, then SIGCONT),
//! killed (`kill -9`, then started again), and both databases stopped for a while.
//!
//! Shared by `tests/faults.rs` (nothing lost, nothing duplicated, per-aggregate order) and
//! `benches/faults` (the time from a fault's end to the first delivered record written after
//! it). The scenario stops the shared test services, so its users run alone (a test binary of
//! its own; the benchmark under `scripts/bench.sh`'s lock).

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::kafka::Consumed;
use super::mariadb::{self, MariaDb};
use super::postgres::{self, Postgres};
use super::relay::Relay;
use super::suite::{self, SourceDb, EXACTLY_ONCE};
use super::OutboxEvent;

/// Aggregate type of the events the writers insert (their topic is `<db>.Ledger`).
pub const AGGREGATE: &str = "Ledger";

/// Aggregates per source: records of one aggregate must arrive in commit order.
const AGGREGATES: usize = 16;

/// A fault the scenario applies to the test services.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Fault {
    /// The broker process frozen with SIGSTOP for that long, then woken with SIGCONT.
    BrokerFrozen(Duration),
    /// The broker killed with SIGKILL and started again at once (`scripts/services.sh up kafka`,
    /// which returns when it answers).
    BrokerKilled,
    /// MariaDB and PostgreSQL stopped (`scripts/services.sh stop`) for that long, then
    /// started again.
    DatabasesDown(Duration),
}

impl Fault {
    /// A short label for reports, e.g. `broker SIGSTOP 30 s`.
    pub fn label(&self) -> String {
        match self {
            Fault::BrokerFrozen(d) => format!("broker SIGSTOP {} s, SIGCONT", d.as_secs()),
            Fault::BrokerKilled => "broker kill -9, restart".into(),
            Fault::DatabasesDown(d) => format!("databases down {} s", d.as_secs()),
        }
    }

    /// Applies the fault; returns the instant it ended (the broker woken, or the service back
    /// and answering).
    pub fn apply(&self) -> Instant {
        match *self {
            Fault::BrokerFrozen(d) => {
                let pid = service_pid("kafka");
                signal(pid, "STOP");
                // Woken whatever happens, or every later test would hang on a frozen broker.
                let wake = suite::scopeguard(move || signal(pid, "CONT"));
                std::thread::sleep(d);
                drop(wake);
                Instant::now()
            }
            Fault::BrokerKilled => {
                let pid = service_pid("kafka");
                signal(pid, "KILL");
                while std::path::Path::new(&format!("/proc/{pid}")).exists() {
                    std::thread::sleep(Duration::from_millis(20));
                }
                suite::services(&["up", "kafka"]);
                Instant::now()
            }
            Fault::DatabasesDown(d) => {
                suite::services(&["stop", "mariadb", "postgres"]);
                let restart = suite::scopeguard(|| suite::services(&["up", "mariadb", "postgres"]));
                std::thread::sleep(d);
                drop(restart);
                Instant::now()
            }
        }
    }
}

/// The pid `scripts/services.sh` recorded for `service` (it must be running).
fn service_pid(service: &str) -> u32 {
    let file = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join(".state")
        .join(service)
        .join("pid");
    std::fs::read_to_string(&file)
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or_else(|| panic!("{service} is not running (no pid in {})", file.display()))
}

fn signal(pid: u32, sig: &str) {
    let ok = Command::new("kill")
        .args([&format!("-{sig}"), &pid.to_string()])
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "kill -{sig} {pid} failed");
}

/// An event a writer committed (`certain`), or tried to commit when the database went away
/// (the commit's outcome unknown: it may or may not be in the source).
#[derive(Debug, Clone)]
pub struct Written {
    pub event: OutboxEvent,
    /// When the transaction's commit returned (or failed).
    pub at: Instant,
    pub certain: bool,
}

/// When each record arrived at a `read_committed` consumer that reads all along.
#[derive(Default)]
pub struct Arrivals(Mutex<Vec<(String, Instant)>>);

impl Arrivals {
    /// The first arrival, after `after`, of an event of `ids`.
    pub fn first_of(&self, ids: &HashSet<String>, after: Instant) -> Option<Instant> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .filter(|(id, at)| *at > after && ids.contains(id))
            .map(|(_, at)| *at)
            .min()
    }
}

/// One side of the scenario: a source database, its writer's log, its relay.
pub struct Side {
    pub label: &'static str,
    pub topic: String,
    pub relay: Relay,
    pub written: Arc<Mutex<Vec<Written>>>,
}

impl Side {
    /// Ids of the events whose commit returned after `t`.
    pub fn written_after(&self, t: Instant) -> HashSet<String> {
        self.written
            .lock()
            .unwrap()
            .iter()
            .filter(|w| w.at > t)
            .map(|w| w.event.id.clone())
            .collect()
    }

    /// Asserts what a `read_committed` consumer of the side's topic sees: every certainly
    /// committed event once, an uncertain one at most once, nothing else, per-aggregate order.
    pub fn assert_exactly_once(&self) {
        let written = self.written.lock().unwrap().clone();
        let certain: Vec<OutboxEvent> = written
            .iter()
            .filter(|w| w.certain)
            .map(|w| w.event.clone())
            .collect();
        let got = super::kafka::read_topics(
            std::slice::from_ref(&self.topic),
            certain.len(),
            Duration::from_secs(300),
            Duration::from_secs(5),
        );
        let log = self.relay.log_text();
        let known: HashSet<&str> = written.iter().map(|w| w.event.id.as_str()).collect();
        let certain_ids: HashSet<&str> = certain.iter().map(|e| e.id.as_str()).collect();
        let mut seen: HashMap<String, usize> = HashMap::new();
        for r in &got {
            *seen.entry(r.header("id").unwrap_or_default()).or_default() += 1;
        }
        let strangers: Vec<&String> = seen
            .keys()
            .filter(|id| !known.contains(id.as_str()))
            .collect();
        assert!(
            strangers.is_empty(),
            "{}: records of no written event: {strangers:?}",
            self.label
        );
        let (certain_got, uncertain): (Vec<Consumed>, Vec<Consumed>) = got
            .iter()
            .cloned()
            .partition(|r| certain_ids.contains(r.header("id").unwrap_or_default().as_str()));
        let twice: Vec<&String> = uncertain
            .iter()
            .filter_map(|r| r.header("id"))
            .filter_map(|id| {
                seen.get_key_value(&id)
                    .filter(|(_, n)| **n > 1)
                    .map(|(k, _)| k)
            })
            .collect();
        assert!(
            twice.is_empty(),
            "{}: events of unknown outcome delivered twice: {twice:?}",
            self.label
        );
        suite::assert_exactly_once(&certain, &certain_got, &log);
        suite::assert_per_key_order(&got);
        println!(
            "{}: {} events committed ({} more of unknown outcome, {} of them delivered), each delivered once, in order",
            self.label,
            certain.len(),
            written.len() - certain.len(),
            uncertain.len()
        );
    }
}

/// The running scenario: both sources, their writers and relays, and (for the benchmark) a
/// consumer noting arrivals.
pub struct Scenario {
    pub maria: MariaDb,
    pub pg: Postgres,
    pub sides: Vec<Side>,
    stop: Arc<AtomicBool>,
    writers: Vec<tokio::task::JoinHandle<()>>,
    watcher: Option<std::thread::JoinHandle<()>>,
    pub arrivals: Arc<Arrivals>,
}

impl Scenario {
    /// Creates a database on each server, starts one exactly-once relay per source and a
    /// writer per source committing `rows_per_txn` events every `every`; with `watch`, a
    /// consumer notes when each record arrives.
    pub async fn start(tag: &str, rows_per_txn: usize, every: Duration, watch: bool) -> Scenario {
        let maria = MariaDb::new(&format!("{tag}_m")).await;
        let pg = Postgres::new(&format!("{tag}_p")).await;
        let stop = Arc::new(AtomicBool::new(false));
        let mut sides = Vec::new();
        let mut writers = Vec::new();
        for (label, name, source) in [
            (
                "MariaDB",
                maria.db.clone(),
                Source::Maria(maria.pool.clone()),
            ),
            ("PostgreSQL", pg.db.clone(), Source::Pg(pg.db.clone(), None)),
        ] {
            let (path, port) = if label == "MariaDB" {
                relay_config(&maria)
            } else {
                relay_config(&pg)
            };
            let relay = Relay::start(path, port);
            let written = Arc::new(Mutex::new(Vec::new()));
            writers.push(tokio::spawn(write(
                source,
                name.clone(),
                rows_per_txn,
                every,
                written.clone(),
                stop.clone(),
            )));
            sides.push(Side {
                label,
                topic: format!("{name}.{AGGREGATE}"),
                relay,
                written,
            });
        }
        let arrivals = Arc::new(Arrivals::default());
        let watcher = watch.then(|| {
            let topics = sides.iter().map(|s| s.topic.clone()).collect();
            let (arrivals, stop) = (arrivals.clone(), stop.clone());
            std::thread::spawn(move || watch_arrivals(topics, arrivals, stop))
        });
        Scenario {
            maria,
            pg,
            sides,
            stop,
            writers,
            watcher,
            arrivals,
        }
    }

    /// Waits until every side has delivered an event written after `t` (the pipeline flows);
    /// returns, per side, the time from `t` to that record's arrival. Needs `watch`.
    pub fn wait_flowing(&self, t: Instant, timeout: Duration) -> Vec<(&'static str, Duration)> {
        let deadline = Instant::now() + timeout;
        let mut out = Vec::new();
        for side in &self.sides {
            loop {
                let ids = side.written_after(t);
                if let Some(at) = self.arrivals.first_of(&ids, t) {
                    out.push((side.label, at.duration_since(t)));
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "{}: nothing written after the fault arrived within {timeout:?}; log tail:\n{}",
                    side.label,
                    tail(&side.relay.log_text())
                );
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        out
    }

    /// Stops the writers (and the consumer) and returns the relays' logs' tails if a relay
    /// exited on its own.
    pub async fn stop_writers(&mut self) {
        self.stop.store(true, Ordering::Release);
        for w in self.writers.drain(..) {
            w.await.expect("writer");
        }
        if let Some(w) = self.watcher.take() {
            let _ = w.join();
        }
    }
}

impl Drop for Scenario {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
    }
}

/// A writer's connection: MariaDB's pool reconnects by itself; PostgreSQL's client is made
/// again after the server went away.
enum Source {
    Maria(mysql_async::Pool),
    Pg(String, Option<tokio_postgres::Client>),
}

impl Source {
    async fn insert(&mut self, events: &[OutboxEvent]) -> Result<(), String> {
        match self {
            Source::Maria(pool) => {
                let mut c = pool.get_conn().await.map_err(|e| e.to_string())?;
                let mut tx = c
                    .start_transaction(Default::default())
                    .await
                    .map_err(|e| e.to_string())?;
                mariadb::try_insert_events(&mut tx, "outbox_events", events).await?;
                tx.commit().await.map_err(|e| e.to_string())
            }
            Source::Pg(db, client) => {
                if client.as_ref().is_none_or(|c| c.is_closed()) {
                    *client = Some(postgres::try_admin_connect(db).await?);
                }
                let c = client.as_ref().expect("connected");
                let r = async {
                    c.batch_execute("BEGIN")
                        .await
                        .map_err(|e| postgres::db_error(&e))?;
                    postgres::try_insert_events(c, "public.outbox_events", events).await?;
                    c.batch_execute("COMMIT")
                        .await
                        .map_err(|e| postgres::db_error(&e))
                }
                .await;
                if r.is_err() {
                    *client = None;
                }
                r
            }
        }
    }
}

/// Commits `rows` sequenced events of [`AGGREGATE`] every `every` until `stop`, noting each in
/// `written`; a failed transaction (the database down) is noted as uncertain and the writer
/// goes on after a pause.
async fn write(
    mut source: Source,
    name: String,
    rows: usize,
    every: Duration,
    written: Arc<Mutex<Vec<Written>>>,
    stop: Arc<AtomicBool>,
) {
    let (mut seq, mut failing) = (0, 0);
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    while !stop.load(Ordering::Acquire) {
        tick.tick().await;
        let events = suite::sequenced_range(AGGREGATE, AGGREGATES, seq..seq + rows, 40);
        seq += rows;
        let result = source.insert(&events).await;
        let at = Instant::now();
        let certain = result.is_ok();
        written
            .lock()
            .unwrap()
            .extend(
                events
                    .into_iter()
                    .map(|event| Written { event, at, certain }),
            );
        match result {
            Err(e) => {
                if failing == 0 {
                    eprintln!("[faults] {name}: write failed ({e}); retrying");
                }
                failing += 1;
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Ok(()) if failing > 0 => {
                eprintln!("[faults] {name}: writing again after {failing} failed attempts");
                failing = 0;
            }
            Ok(()) => {}
        }
    }
}

/// The connector config of one side: exactly-once, the tests' routing.
fn relay_config<S: SourceDb>(db: &S) -> (PathBuf, u16) {
    suite::write_config_with(db, &db.outbox_table(), "", EXACTLY_ONCE, "connector.toml")
}

/// Reads `topics` with `read_committed` from the start, noting each record's arrival. The
/// partitions are assigned, not subscribed to: a consumer group would have to rejoin after a
/// broker restart, and its delay would count as the relay's. A consumer that reads nothing for
/// a second is replaced by a new one resuming at the same offsets: after a broker fault
/// librdkafka's client itself sometimes stays stuck for tens of seconds (the relay's
/// producers are watched for that: `src/sink/stall.rs`), and the benchmark measures the relay,
/// not its own consumer.
fn watch_arrivals(topics: Vec<String>, arrivals: Arc<Arrivals>, stop: Arc<AtomicBool>) {
    use rdkafka::consumer::{BaseConsumer, Consumer};
    use rdkafka::message::{Headers, Message};
    let new_consumer = || -> BaseConsumer {
        rdkafka::ClientConfig::new()
            .set("bootstrap.servers", super::kafka_bootstrap())
            .set("group.id", super::unique("faults_watch"))
            .set("isolation.level", "read_committed")
            .set("enable.auto.commit", "false")
            .create()
            .expect("kafka consumer")
    };
    let mut consumer = new_consumer();
    // Where each partition's reading resumes.
    let mut next: Vec<(String, i32, rdkafka::Offset)> = Vec::new();
    for topic in &topics {
        loop {
            if stop.load(Ordering::Acquire) {
                return;
            }
            let md = consumer.fetch_metadata(Some(topic), Duration::from_secs(2));
            if let Some(ids) = md.ok().and_then(|m| partition_ids(&m)) {
                next.extend(
                    ids.into_iter()
                        .map(|p| (topic.clone(), p, rdkafka::Offset::Beginning)),
                );
                break;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    let assign = |consumer: &BaseConsumer, next: &[(String, i32, rdkafka::Offset)]| {
        let mut tpl = rdkafka::TopicPartitionList::new();
        for (topic, p, offset) in next {
            tpl.add_partition_offset(topic, *p, *offset)
                .expect("partition");
        }
        consumer.assign(&tpl).expect("assign");
    };
    assign(&consumer, &next);
    let mut last = Instant::now();
    while !stop.load(Ordering::Acquire) {
        match consumer.poll(Duration::from_millis(50)) {
            Some(Ok(m)) => {
                last = Instant::now();
                if let Some(n) = next
                    .iter_mut()
                    .find(|(t, p, _)| t == m.topic() && *p == m.partition())
                {
                    n.2 = rdkafka::Offset::Offset(m.offset() + 1);
                }
                let id = m.headers().and_then(|h| {
                    h.iter()
                        .find(|h| h.key == "id")
                        .and_then(|h| h.value.map(|v| String::from_utf8_lossy(v).into_owned()))
                });
                if let Some(id) = id {
                    arrivals.0.lock().unwrap().push((id, Instant::now()));
                }
            }
            _ if last.elapsed() >= Duration::from_secs(1) => {
                consumer = new_consumer();
                assign(&consumer, &next);
                last = Instant::now();
            }
            _ => {}
        }
    }
}

/// The partition ids of the one topic in `md`, once it exists with partitions.
fn partition_ids(md: &rdkafka::metadata::Metadata) -> Option<Vec<i32>> {
    let t = md.topics().first()?;
    (t.error().is_none() && !t.partitions().is_empty())
        .then(|| t.partitions().iter().map(|p| p.id()).collect())
}

/// The last 6,000 bytes of a log.
pub fn tail(log: &str) -> &str {
    let mut start = log.len().saturating_sub(6000);
    while !log.is_char_boundary(start) {
        start += 1;
    }
    &log[start..]
}
