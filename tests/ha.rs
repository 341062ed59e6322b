//! High availability, with the real services.
//!
//! * Exactly once: three members of one group share a MariaDB and a PostgreSQL connector
//!   while writers insert on both. The owners are killed (`kill -9`) four times, one is
//!   frozen (SIGSTOP) for 40 s, every member is restarted in turn (SIGTERM: a handover), and
//!   the Kafka broker is restarted briefly (5 s, within the session timeout). A
//!   `read_committed` consumer must see every event exactly once, in per-aggregate order.
//! * At least once with the Kafka checkpoint store: two members share a PostgreSQL
//!   connector; its owner is frozen past its session and woken (a zombie), the next takeover
//!   must still find its checkpoint (never moved backward), and the broker stays down longer
//!   than the session timeout (every member's session is lost during the outage). Nothing
//!   may be lost.
//!
//! Throughout, every member's `outboxd_connector_owned` is polled: no connector may have two
//! owners for longer than the instant a woken member takes to notice its lost session
//! ([`OVERLAP_ALLOWED`]); connectors spread over the members; a member that joins moves and
//! restarts nothing. Failover and handover times (from the fault to the first record
//! *written after it*) are printed (`-- --nocapture`); `benches/failover` measures them. Both
//! tests restart the broker, so they run one after the other.

mod common;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::kafka::{read_topics, Consumed};
use common::mariadb::MariaDb;
use common::postgres::Postgres;
use common::relay::{free_port, http_get_within, test_dir, Relay};
use common::suite::{self, SourceDb};
use common::OutboxEvent;

/// The tests restart the broker: one at a time.
static BROKER: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Longest two members may both show a connector as owned: a member woken from a freeze
/// still shows it until its membership notices the lost session (librdkafka checks the
/// session once a second), plus one poll.
const OVERLAP_ALLOWED: Duration = Duration::from_millis(2500);

/// One member: the relay process (its `/ready` is 200 for a healthy standby too).
struct Member {
    relay: Relay,
}

impl Member {
    fn metrics(&self) -> Option<String> {
        self.relay.pid()?;
        http_get_within(self.relay.metrics_port, "/metrics", Duration::from_secs(1)).map(|(_, b)| b)
    }

    /// Whether this member runs `connector` (`outboxd_connector_owned` = 1).
    fn owns(&self, connector: &str) -> bool {
        self.metrics().is_some_and(|m| owned_in(&m, connector))
    }

    /// The value of the series `name` with labels `labels` (0 when absent).
    fn value(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.metrics()
            .map(|m| series_value(&m, name, labels))
            .unwrap_or(0.0)
    }

    fn signal(&self, sig: &str) {
        let pid = self.relay.pid().unwrap().to_string();
        std::process::Command::new("kill")
            .args([&format!("-{sig}"), &pid])
            .status()
            .unwrap();
    }
}

fn owned_in(metrics: &str, connector: &str) -> bool {
    metrics.contains(&format!(
        "outboxd_connector_owned{{connector=\"{connector}\"}} 1"
    ))
}

/// The value of a Prometheus series `name{labels...}` in `metrics` (0 when absent).
fn series_value(metrics: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    metrics
        .lines()
        .filter(|l| l.starts_with(&format!("{name}{{")))
        .find(|l| {
            labels
                .iter()
                .all(|(k, v)| l.contains(&format!("{k}=\"{v}\"")))
        })
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
        .unwrap_or(0.0)
}

/// A connector config without `[metrics]` (each member gets its own `--metrics-listen`).
fn connector_file<S: SourceDb>(db: &S, checkpoint: &str) -> PathBuf {
    let (path, _) = suite::write_config_with(db, &db.outbox_table(), "", checkpoint, "member.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    let body = text
        .split_once("[[connectors]]")
        .map(|(_, rest)| format!("[[connectors]]{rest}"))
        .unwrap();
    std::fs::write(&path, body).unwrap();
    path
}

/// Starts `n` members of `group` running the connectors of `files`; waits until each is in
/// the group (ready) and every connector has an owner.
fn start_members(n: usize, files: &[PathBuf], group: &str, dir: &Path) -> Vec<Member> {
    let mut members: Vec<Member> = (0..n)
        .map(|i| {
            let port = free_port();
            let listen = format!("127.0.0.1:{port}");
            let mut args: Vec<&str> = files.iter().map(|f| f.to_str().unwrap()).collect();
            args.extend(["--group", group, "--metrics-listen", &listen]);
            let relay = Relay::launch_with_args(&args, port, dir.join(format!("member{i}.log")));
            Member { relay }
        })
        .collect();
    for m in &mut members {
        m.relay.wait_ready(Duration::from_secs(60));
    }
    members
}

/// When each record was written (by its writer) and when it arrived (at a
/// `read_committed` consumer), per topic; records are numbered by their payload's `seq`.
#[derive(Default)]
struct Timeline {
    written: Mutex<HashMap<String, Vec<Instant>>>,
    arrived: Mutex<HashMap<String, Vec<(Instant, u64)>>>,
}

impl Timeline {
    /// When the first record written after `t` arrived on `topic`, if one did.
    fn first_written_after(&self, topic: &str, t: Instant) -> Option<Instant> {
        let written = self.written.lock().unwrap();
        let written = written.get(topic)?;
        // The first seq whose insert began after t.
        let first = written.iter().position(|w| *w > t)? as u64 + 1;
        let arrived = self.arrived.lock().unwrap();
        arrived
            .get(topic)?
            .iter()
            .filter(|(_, seq)| *seq >= first)
            .map(|(at, _)| *at)
            .min()
    }
}

/// Writes events of a few aggregates, one to three per transaction, until `stop`; notes
/// when each was written; returns what it wrote.
async fn write_until<S: SourceDb>(
    db: &S,
    agg: &str,
    timeline: Arc<Timeline>,
    stop: Arc<AtomicBool>,
) -> Vec<OutboxEvent> {
    let topic = suite::topic(db, agg);
    let mut written = Vec::new();
    let mut seq = 0u64;
    while !stop.load(Ordering::Acquire) {
        let n = 1 + rand::random::<u32>() as usize % 3;
        let batch: Vec<OutboxEvent> = (0..n)
            .map(|_| {
                seq += 1;
                let key = format!("{agg}-{}", seq % 8);
                OutboxEvent::new(agg, &key, "Step", Some(&format!("{{\"seq\":{seq}}}")))
            })
            .collect();
        {
            let mut w = timeline.written.lock().unwrap();
            let at = Instant::now();
            w.entry(topic.clone())
                .or_default()
                .extend((0..n).map(|_| at));
        }
        db.insert(&batch, false).await;
        written.extend(batch);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    written
}

/// Notes the arrival of every record of `topics` until `stop`. The partitions are assigned,
/// not subscribed to: after the broker restart, a subscribed reader (its consumer group
/// rejoining) once read nothing for the 90 s the test waits while a member committed
/// records; an assigned reader needs no group coordinator.
fn watch_arrivals(topics: Vec<String>, timeline: Arc<Timeline>, stop: Arc<AtomicBool>) {
    use rdkafka::message::Message;
    let consumer = common::kafka::consumer();
    let mut assigned: HashMap<String, bool> = topics.iter().map(|t| (t.clone(), false)).collect();
    while !stop.load(Ordering::Acquire) {
        common::kafka::assign_from_beginning(&consumer, &mut assigned);
        if let Some(Ok(m)) = consumer.poll(Duration::from_millis(100)) {
            let seq = m
                .payload()
                .and_then(|p| serde_json::from_slice::<serde_json::Value>(p).ok())
                .and_then(|v| v["seq"].as_u64())
                .unwrap_or(0);
            timeline
                .arrived
                .lock()
                .unwrap()
                .entry(m.topic().to_string())
                .or_default()
                .push((Instant::now(), seq));
        }
    }
}

/// Polls every member's `outboxd_connector_owned` every 200 ms until `stop`; returns, per
/// connector, the longest time two or more members showed it as owned at once.
fn watch_owners(
    ports: Vec<u16>,
    connectors: Vec<String>,
    stop: Arc<AtomicBool>,
) -> HashMap<String, Duration> {
    let mut since: HashMap<String, Instant> = HashMap::new();
    let mut longest: HashMap<String, Duration> = connectors
        .iter()
        .map(|c| (c.clone(), Duration::ZERO))
        .collect();
    while !stop.load(Ordering::Acquire) {
        let texts: Vec<String> = ports
            .iter()
            .filter_map(|p| {
                http_get_within(*p, "/metrics", Duration::from_millis(300)).map(|(_, b)| b)
            })
            .collect();
        let now = Instant::now();
        for c in &connectors {
            let owners = texts.iter().filter(|t| owned_in(t, c)).count();
            if owners > 1 {
                let from = *since.entry(c.clone()).or_insert(now);
                let l = longest.get_mut(c).unwrap();
                *l = (*l).max(now - from + Duration::from_millis(200));
            } else {
                since.remove(c);
            }
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    longest
}

/// Waits until some live member owns `connector`; returns its index.
fn wait_owner(members: &[Member], connector: &str, timeout: Duration) -> usize {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(i) = members.iter().position(|m| m.owns(connector)) {
            return i;
        }
        assert!(
            Instant::now() < deadline,
            "nobody owns {connector} after {timeout:?}; logs:\n{}",
            logs(members)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Waits until `connectors` are owned by as many different members as there are of them.
fn assert_spread(members: &[Member], connectors: &[&String]) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let owners: Vec<Option<usize>> = connectors
            .iter()
            .map(|c| members.iter().position(|m| m.owns(c)))
            .collect();
        let mut distinct: Vec<usize> = owners.iter().flatten().copied().collect();
        distinct.sort();
        distinct.dedup();
        if distinct.len() == connectors.len() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "connectors not spread over the members: owners {owners:?}; logs:\n{}",
            logs(members)
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// What each connector's owner says of it: (owner, restarts, revocations).
fn snapshot(members: &[Member], connectors: &[&String]) -> Vec<(usize, f64, f64)> {
    connectors
        .iter()
        .map(|c| {
            let i = wait_owner(members, c, Duration::from_secs(60));
            let m = &members[i];
            let restarts = m.value("outboxd_connector_restarts_total", &[("connector", c)]);
            let revoked = m.value(
                "outboxd_group_assignments_total",
                &[("connector", c), ("change", "revoked")],
            );
            (i, restarts, revoked)
        })
        .collect()
}

/// Starts member `i` again and waits until it is in the group; the owners of `connectors`
/// must stay the same, neither restarting nor revoking anything.
fn rejoin(members: &mut [Member], i: usize, connectors: &[&String]) {
    let before = snapshot(members, connectors);
    members[i].relay.spawn();
    members[i].relay.wait_ready(Duration::from_secs(60));
    // Ready means its first assignment completed; let a second cooperative round pass.
    std::thread::sleep(Duration::from_secs(2));
    let after = snapshot(members, connectors);
    assert_eq!(
        before, after,
        "member {i} joining moved or restarted a connector ((owner, restarts, revocations) per connector); logs:\n{}",
        logs(members)
    );
}

fn logs(members: &[Member]) -> String {
    members
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let t = m.relay.log_text();
            format!("--- member {i}:\n{}", &t[t.len().saturating_sub(4000)..])
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Waits until a record of `topic` written after `after` arrives; returns how long after
/// `after` it arrived.
fn wait_delivery(timeline: &Timeline, topic: &str, after: Instant, members: &[Member]) -> Duration {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        if let Some(t) = timeline.first_written_after(topic, after) {
            return t.duration_since(after);
        }
        assert!(
            Instant::now() < deadline,
            "no record of {topic} written after the fault arrived within 90 s; logs:\n{}",
            logs(members)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Freezes the owner of `connector` (SIGSTOP) for `frozen`: another member takes over;
/// woken, the member abandons the connector (its log says its session was lost) and stays
/// in the group. Returns the frozen member.
fn freeze_owner(
    members: &mut [Member],
    connector: &str,
    topic: &str,
    frozen: Duration,
    timeline: &Timeline,
) -> usize {
    let owner = wait_owner(members, connector, Duration::from_secs(60));
    std::thread::sleep(Duration::from_secs(2));
    let stopped = Instant::now();
    members[owner].signal("STOP");
    let takeover = wait_delivery(timeline, topic, stopped, members);
    println!("SIGSTOP ({connector}): first record written after the freeze arrived {takeover:?} after it");
    std::thread::sleep(frozen.saturating_sub(stopped.elapsed()));
    members[owner].signal("CONT");
    let deadline = Instant::now() + Duration::from_secs(30);
    while members[owner].owns(connector) {
        assert!(
            Instant::now() < deadline,
            "the woken member still runs {connector}:\n{}",
            logs(members)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    members[owner].relay.wait_ready(Duration::from_secs(60));
    let woken = members[owner].relay.log_text();
    assert!(woken.contains("revoked (lost session"), "{woken}");
    owner
}

/// Asserts that `outboxd status --group` names the member that runs `connector` now (by
/// its pid), not a member that let go of it.
fn assert_status_names_owner(files: &[PathBuf], group: &str, members: &[Member], connector: &str) {
    let owner = wait_owner(members, connector, Duration::from_secs(60));
    let pid = members[owner].relay.pid().unwrap();
    let mut args = vec!["status", "--group", group];
    for f in files {
        args.extend(["--config", f.to_str().unwrap()]);
    }
    let (_, out, err) = common::relay::run_cli(&args);
    let line = out
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|v| v["connector"] == connector)
        .unwrap_or_else(|| panic!("no status line for {connector}:\n{out}\n{err}"));
    assert_eq!(
        line["owner"]["pid"].as_u64(),
        Some(u64::from(pid)),
        "status names the member running {connector} (pid {pid}): {line}"
    );
}

/// Asserts that no connector had two owners for longer than [`OVERLAP_ALLOWED`].
fn assert_one_owner(overlaps: &HashMap<String, Duration>, log: &str) {
    println!("longest time with two owners shown, per connector: {overlaps:?}");
    for (c, d) in overlaps {
        assert!(
            *d <= OVERLAP_ALLOWED,
            "{c} was shown as owned by two members for {d:?}; logs:\n{log}"
        );
    }
}

/// What watches a scenario: the arrival of records, and ownership on every member.
struct Watch {
    timeline: Arc<Timeline>,
    stop: Arc<AtomicBool>,
    arrivals: std::thread::JoinHandle<()>,
    owners: std::thread::JoinHandle<HashMap<String, Duration>>,
}

impl Watch {
    fn start(members: &[Member], topics: &[&String], connectors: &[&String]) -> Self {
        let timeline = Arc::new(Timeline::default());
        let stop = Arc::new(AtomicBool::new(false));
        let arrivals = {
            let (t, s) = (timeline.clone(), stop.clone());
            let topics = topics.iter().map(|t| t.to_string()).collect();
            std::thread::spawn(move || watch_arrivals(topics, t, s))
        };
        let owners = {
            let ports = members.iter().map(|m| m.relay.metrics_port).collect();
            let s = stop.clone();
            let connectors = connectors.iter().map(|c| c.to_string()).collect();
            std::thread::spawn(move || watch_owners(ports, connectors, s))
        };
        Self {
            timeline,
            stop,
            arrivals,
            owners,
        }
    }

    /// Reads each of `expected`'s topics until it holds at least its count of records
    /// (`read_committed`), stops watching and checks there was one owner at a time. Returns
    /// the records per topic and the members' logs.
    fn finish(
        self,
        members: &[Member],
        expected: &[(&String, usize)],
    ) -> (Vec<Vec<Consumed>>, String) {
        let got = expected
            .iter()
            .map(|(topic, n)| {
                read_topics(
                    &[topic.to_string()],
                    *n,
                    Duration::from_secs(120),
                    Duration::from_secs(4),
                )
            })
            .collect();
        self.stop.store(true, Ordering::Release);
        let _ = self.arrivals.join();
        let overlaps = self.owners.join().unwrap();
        let all_logs = logs(members);
        assert_one_owner(&overlaps, &all_logs);
        (got, all_logs)
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn three_members_share_two_connectors_exactly_once() {
    let _broker = BROKER.lock().await;
    let my = MariaDb::new("ha_maria").await;
    let pg = Postgres::new("ha_pg").await;
    let files = [
        connector_file(&my, suite::EXACTLY_ONCE),
        connector_file(&pg, suite::EXACTLY_ONCE),
    ];
    let group = common::unique("hag");
    let mut members = start_members(3, &files, &group, &test_dir(&group));
    let (cm, cp) = (my.name().to_string(), pg.name().to_string());
    let (tm, tp) = (suite::topic(&my, "Ledger"), suite::topic(&pg, "Ledger"));
    wait_owner(&members, &cm, Duration::from_secs(60));
    wait_owner(&members, &cp, Duration::from_secs(60));
    // Ready again once the owners stream: a first start begins at the sources' current
    // positions, so only what is written after that is delivered.
    for m in &mut members {
        m.relay.wait_ready(Duration::from_secs(60));
    }

    let watch = Watch::start(&members, &[&tm, &tp], &[&cm, &cp]);
    let timeline = watch.timeline.clone();
    let stop_writing = Arc::new(AtomicBool::new(false));
    let writers = async {
        tokio::join!(
            write_until(&my, "Ledger", timeline.clone(), stop_writing.clone()),
            write_until(&pg, "Ledger", timeline.clone(), stop_writing.clone())
        )
    };
    let scenario = tokio::task::spawn_blocking({
        let (timeline, stop_writing) = (timeline.clone(), stop_writing.clone());
        // The writers stop however the scenario ends: a failed assertion in it must fail the
        // test, not leave the writers (and the test) waiting for ever.
        let stops_writers = StopOnDrop(stop_writing.clone());
        let (cm, cp, tm, tp) = (cm.clone(), cp.clone(), tm.clone(), tp.clone());
        let (files, group) = (files.clone(), group.clone());
        move || {
            let _stops_writers = stops_writers;
            let both = [&cm, &cp];
            let started = Instant::now();
            wait_delivery(&timeline, &tm, started, &members);
            wait_delivery(&timeline, &tp, started, &members);
            assert_spread(&members, &both);

            // kill -9 the owner of each connector in turn; the killed member comes back as a
            // standby, moving nothing.
            for (i, (connector, topic)) in [(&cm, &tm), (&cp, &tp), (&cm, &tm), (&cp, &tp)]
                .into_iter()
                .enumerate()
            {
                let owner = wait_owner(&members, connector, Duration::from_secs(60));
                std::thread::sleep(Duration::from_secs(2));
                let killed = Instant::now();
                members[owner].relay.kill9();
                let failover = wait_delivery(&timeline, topic, killed, &members);
                println!(
                    "kill {} ({connector}): first record written after the kill arrived {failover:?} after it",
                    i + 1
                );
                rejoin(&mut members, owner, &both);
                assert_spread(&members, &both);
            }

            // Freeze the PostgreSQL connector's owner past its session: another member takes
            // over (ending its walsender); woken, it abandons the connector and stays a
            // standby.
            freeze_owner(&mut members, &cp, &tp, Duration::from_secs(40), &timeline);
            assert_spread(&members, &both);
            // The woken member wrote nothing over its successor's ownership record.
            assert_status_names_owner(&files, &group, &members, &cp);

            // Rolling restart: SIGTERM hands a member's connectors over (exit 0); the next
            // owner delivers what is written after the signal.
            for i in 0..members.len() {
                let owned: Vec<(&String, &String)> = [(&cm, &tm), (&cp, &tp)]
                    .into_iter()
                    .filter(|(c, _)| members[i].owns(c))
                    .collect();
                let before = Instant::now();
                let code = members[i].relay.stop();
                assert_eq!(
                    code,
                    Some(0),
                    "member {i} SIGTERM exit:\n{}",
                    members[i].relay.log_text()
                );
                for (connector, topic) in owned {
                    let next = wait_owner(&members, connector, Duration::from_secs(30));
                    assert_ne!(next, i);
                    let handover = wait_delivery(&timeline, topic, before, &members);
                    println!("SIGTERM handover ({connector}): first record written after the signal arrived {handover:?} after it");
                }
                rejoin(&mut members, i, &both);
            }
            assert_spread(&members, &both);

            // The broker restarts under the group, within the session timeout.
            suite::services(&["stop", "kafka"]);
            std::thread::sleep(Duration::from_secs(5));
            suite::services(&["start", "kafka"]);
            let back = Instant::now();
            wait_delivery(&timeline, &tm, back, &members);
            wait_delivery(&timeline, &tp, back, &members);
            std::thread::sleep(Duration::from_secs(3));
            stop_writing.store(true, Ordering::Release);
            members
        }
    });
    let ((mine, theirs), members) = tokio::join!(writers, scenario);
    let members = members.unwrap();
    let (got, all_logs) = watch.finish(&members, &[(&tm, mine.len()), (&tp, theirs.len())]);
    println!(
        "MariaDB: {} events; PostgreSQL: {} events",
        mine.len(),
        theirs.len()
    );
    suite::assert_exactly_once(&mine, &got[0], &all_logs);
    suite::assert_exactly_once(&theirs, &got[1], &all_logs);
    drop(members);
}

/// The LSNs of the checkpoints in `topic`, in the order they were committed.
fn checkpoint_lsns(topic: &str) -> Vec<u64> {
    read_topics(
        &[topic.to_string()],
        1,
        Duration::from_secs(30),
        Duration::from_secs(3),
    )
    .iter()
    .filter_map(|r| {
        let v: serde_json::Value = serde_json::from_slice(r.value.as_ref()?).ok()?;
        let (hi, lo) = v["position"]["value"].as_str()?.split_once('/')?;
        Some((u64::from_str_radix(hi, 16).ok()? << 32) | u64::from_str_radix(lo, 16).ok()?)
    })
    .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn at_least_once_group_survives_a_zombie_and_a_long_outage() {
    let _broker = BROKER.lock().await;
    let pg = Postgres::new("ha_alo").await;
    let files = [connector_file(&pg, suite::AT_LEAST_ONCE_KAFKA)];
    let group = common::unique("haa");
    let mut members = start_members(2, &files, &group, &test_dir(&group));
    let (cp, tp) = (pg.name().to_string(), suite::topic(&pg, "Ledger"));
    wait_owner(&members, &cp, Duration::from_secs(60));
    for m in &mut members {
        m.relay.wait_ready(Duration::from_secs(60));
    }

    let watch = Watch::start(&members, &[&tp], &[&cp]);
    let timeline = watch.timeline.clone();
    let stop_writing = Arc::new(AtomicBool::new(false));
    let writer = write_until(&pg, "Ledger", timeline.clone(), stop_writing.clone());
    let scenario = tokio::task::spawn_blocking({
        let (timeline, stop_writing) = (timeline.clone(), stop_writing.clone());
        // The writers stop however the scenario ends: a failed assertion in it must fail the
        // test, not leave the writers (and the test) waiting for ever.
        let stops_writers = StopOnDrop(stop_writing.clone());
        let (cp, tp) = (cp.clone(), tp.clone());
        move || {
            let _stops_writers = stops_writers;
            wait_delivery(&timeline, &tp, Instant::now(), &members);

            // A zombie: frozen past its session (the other member takes over), then woken.
            let zombie = freeze_owner(&mut members, &cp, &tp, Duration::from_secs(15), &timeline);

            // The next takeover goes back to the woken member: it must find a checkpoint the
            // slot can serve (the zombie moved nothing backward) and stream.
            let owner = wait_owner(&members, &cp, Duration::from_secs(30));
            assert_ne!(owner, zombie);
            let before = Instant::now();
            assert_eq!(members[owner].relay.stop(), Some(0));
            let handover = wait_delivery(&timeline, &tp, before, &members);
            assert_eq!(wait_owner(&members, &cp, Duration::from_secs(30)), zombie);
            println!("SIGTERM handover back to the woken member ({cp}): {handover:?}");
            let woken = members[zombie].relay.log_text();
            assert!(
                !woken.contains("definite failure") && !woken.contains("are lost for connector"),
                "{woken}"
            );
            members[owner].relay.spawn();
            members[owner].relay.wait_ready(Duration::from_secs(60));

            // Kafka away for longer than the session timeout: every member finds its session
            // lost; after the outage one of them takes the connector again.
            suite::services(&["stop", "kafka"]);
            std::thread::sleep(Duration::from_secs(12));
            suite::services(&["start", "kafka"]);
            let back = Instant::now();
            let resumed = wait_delivery(&timeline, &tp, back, &members);
            println!("Kafka down 12 s: first record written after it came back arrived {resumed:?} after");
            wait_owner(&members, &cp, Duration::from_secs(30));
            std::thread::sleep(Duration::from_secs(3));
            stop_writing.store(true, Ordering::Release);
            members
        }
    });
    let (written, members) = tokio::join!(writer, scenario);
    let members = members.unwrap();
    let (got, all_logs) = watch.finish(&members, &[(&tp, written.len())]);
    println!(
        "PostgreSQL at least once: {} events written, {} records read",
        written.len(),
        got[0].len()
    );
    suite::assert_none_lost(&written, &got[0], &all_logs);
    let lsns = checkpoint_lsns(&format!("outboxd.checkpoints.{cp}"));
    assert!(lsns.len() > 1, "{lsns:?}");
    assert!(
        lsns.windows(2).all(|w| w[0] <= w[1]),
        "a checkpoint went backward: {lsns:?}; logs:\n{all_logs}"
    );
    drop(members);
}

/// Sets its flag when dropped: the writers of a scenario stop whether it returns or panics.
struct StopOnDrop(Arc<AtomicBool>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Release);
    }
}
