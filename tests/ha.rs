//! High availability: three members of one group share a MariaDB and a PostgreSQL connector
//! while writers insert on both. The owners are killed (`kill -9`) four times, one is frozen
//! (SIGSTOP) for 40 s, every member is restarted in turn (SIGTERM), and the Kafka broker is
//! restarted; a `read_committed` consumer must see every event exactly once, in per-aggregate
//! order. The failover times are printed (`-- --nocapture`); the benchmark
//! (`benches/failover`) is where they are measured. This binary restarts the shared broker,
//! so its one test runs the scenario from start to end.

mod common;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::kafka::{read_topics, Consumed};
use common::mariadb::MariaDb;
use common::postgres::Postgres;
use common::relay::{free_port, test_dir, Relay};
use common::suite::{self, SourceDb};
use common::OutboxEvent;

/// One member: the relay process (its `/ready` is 200 for a healthy standby too).
struct Member {
    relay: Relay,
}

impl Member {
    /// Whether this member runs `connector` (`outboxd_connector_owned` = 1).
    fn owns(&self, connector: &str) -> bool {
        self.relay.pid().is_some()
            && self.relay.metrics().contains(&format!(
                "outboxd_connector_owned{{connector=\"{connector}\"}} 1"
            ))
    }
}

/// A connector config without `[metrics]` (each member gets its own `--metrics-listen`).
fn connector_file<S: SourceDb>(db: &S, file: &str) -> PathBuf {
    let (path, _) = suite::write_config_with(db, &db.outbox_table(), "", suite::EXACTLY_ONCE, file);
    let text = std::fs::read_to_string(&path).unwrap();
    let body = text
        .split_once("[[connectors]]")
        .map(|(_, rest)| format!("[[connectors]]{rest}"))
        .unwrap();
    std::fs::write(&path, body).unwrap();
    path
}

/// Writes events of a few aggregates, one to three per transaction, until `stop`; returns
/// what it wrote.
async fn write_until<S: SourceDb>(db: &S, agg: &str, stop: Arc<AtomicBool>) -> Vec<OutboxEvent> {
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
        db.insert(&batch, false).await;
        written.extend(batch);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    written
}

/// When records of each topic arrived, read continuously by a `read_committed` consumer.
#[derive(Default)]
struct Arrivals(Mutex<HashMap<String, Vec<Instant>>>);

impl Arrivals {
    /// The first arrival on `topic` after `after`, if any.
    fn first_after(&self, topic: &str, after: Instant) -> Option<Instant> {
        let m = self.0.lock().unwrap();
        m.get(topic)?.iter().copied().find(|t| *t > after)
    }
}

fn watch_arrivals(topics: Vec<String>, arrivals: Arc<Arrivals>, stop: Arc<AtomicBool>) {
    use rdkafka::config::ClientConfig;
    use rdkafka::consumer::{BaseConsumer, Consumer};
    use rdkafka::message::Message;
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", common::kafka_bootstrap())
        .set("group.id", common::unique("ha_watch"))
        .set("isolation.level", "read_committed")
        .set("auto.offset.reset", "earliest")
        .set("enable.auto.commit", "false")
        .set("topic.metadata.refresh.interval.ms", "1000")
        .create()
        .unwrap();
    let refs: Vec<&str> = topics.iter().map(String::as_str).collect();
    consumer.subscribe(&refs).unwrap();
    while !stop.load(Ordering::Acquire) {
        if let Some(Ok(m)) = consumer.poll(Duration::from_millis(100)) {
            arrivals
                .0
                .lock()
                .unwrap()
                .entry(m.topic().to_string())
                .or_default()
                .push(Instant::now());
        }
    }
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

/// Waits until a record of `topic` arrives after `after` (the connector delivers again).
fn wait_delivery(arrivals: &Arrivals, topic: &str, after: Instant, members: &[Member]) -> Duration {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        if let Some(t) = arrivals.first_after(topic, after) {
            return t.duration_since(after);
        }
        assert!(
            Instant::now() < deadline,
            "no record of {topic} arrived within 90 s; logs:\n{}",
            logs(members)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn three_members_share_two_connectors_exactly_once() {
    let my = MariaDb::new("ha_maria").await;
    let pg = Postgres::new("ha_pg").await;
    let files = [
        connector_file(&my, "member.toml"),
        connector_file(&pg, "member.toml"),
    ];
    let group = common::unique("hag");
    let dir = test_dir(&group);
    let mut members: Vec<Member> = (0..3)
        .map(|i| {
            let port = free_port();
            let listen = format!("127.0.0.1:{port}");
            let args = [
                files[0].to_str().unwrap(),
                files[1].to_str().unwrap(),
                "--group",
                &group,
                "--metrics-listen",
                &listen,
            ];
            let relay = Relay::launch_with_args(&args, port, dir.join(format!("member{i}.log")));
            Member { relay }
        })
        .collect();
    for m in &mut members {
        m.relay.wait_ready(Duration::from_secs(60));
    }
    let (cm, cp) = (my.name().to_string(), pg.name().to_string());
    let (tm, tp) = (suite::topic(&my, "Ledger"), suite::topic(&pg, "Ledger"));
    wait_owner(&members, &cm, Duration::from_secs(60));
    wait_owner(&members, &cp, Duration::from_secs(60));
    // Ready again once the owners stream: a first start begins at the sources' current
    // positions, so only what is written after that is delivered.
    for m in &mut members {
        m.relay.wait_ready(Duration::from_secs(60));
    }

    let arrivals = Arc::new(Arrivals::default());
    let stop_watch = Arc::new(AtomicBool::new(false));
    let watcher = {
        let (a, s, t) = (
            arrivals.clone(),
            stop_watch.clone(),
            vec![tm.clone(), tp.clone()],
        );
        std::thread::spawn(move || watch_arrivals(t, a, s))
    };
    let stop_writing = Arc::new(AtomicBool::new(false));
    let writers = async {
        tokio::join!(
            write_until(&my, "Ledger", stop_writing.clone()),
            write_until(&pg, "Ledger", stop_writing.clone())
        )
    };
    let scenario = tokio::task::spawn_blocking({
        let (arrivals, stop_writing) = (arrivals.clone(), stop_writing.clone());
        let (tm, tp) = (tm.clone(), tp.clone());
        move || {
            let started = Instant::now();
            wait_delivery(&arrivals, &tm, started, &members);
            wait_delivery(&arrivals, &tp, started, &members);

            // kill -9 the owner of each connector in turn; the killed member comes back as a
            // standby.
            for (i, (connector, topic)) in [(&cm, &tm), (&cp, &tp), (&cm, &tm), (&cp, &tp)]
                .into_iter()
                .enumerate()
            {
                let owner = wait_owner(&members, connector, Duration::from_secs(60));
                std::thread::sleep(Duration::from_secs(2));
                let killed = Instant::now();
                members[owner].relay.kill9();
                // Records the old owner committed just before its death may still become
                // visible; the new owner's first records come seconds later.
                let failover = wait_delivery(
                    &arrivals,
                    topic,
                    killed + Duration::from_millis(500),
                    &members,
                ) + Duration::from_millis(500);
                println!(
                    "kill {} ({connector}): next record {failover:?} after the kill",
                    i + 1
                );
                members[owner].relay.spawn();
                members[owner].relay.wait_ready(Duration::from_secs(60));
            }

            // Freeze the PostgreSQL connector's owner past its session: another member takes
            // over (ending its walsender); woken, it stops the connector and stays a standby.
            let frozen = wait_owner(&members, &cp, Duration::from_secs(60));
            let pid = members[frozen].relay.pid().unwrap().to_string();
            let stopped = Instant::now();
            std::process::Command::new("kill")
                .args(["-STOP", &pid])
                .status()
                .unwrap();
            let takeover =
                wait_delivery(&arrivals, &tp, stopped + Duration::from_secs(1), &members)
                    + Duration::from_secs(1);
            println!("SIGSTOP ({cp}): next record {takeover:?} after the freeze");
            let rest = Duration::from_secs(40).saturating_sub(stopped.elapsed());
            std::thread::sleep(rest);
            std::process::Command::new("kill")
                .args(["-CONT", &pid])
                .status()
                .unwrap();
            let deadline = Instant::now() + Duration::from_secs(30);
            while members[frozen].owns(&cp) {
                assert!(
                    Instant::now() < deadline,
                    "the woken member still runs {cp}:\n{}",
                    logs(&members)
                );
                std::thread::sleep(Duration::from_millis(200));
            }
            // Woken, it finds itself fenced (its next commit) or its membership lost (its next
            // heartbeat), whichever comes first, and stops the connector.
            let woken = members[frozen].relay.log_text();
            assert!(
                woken.contains("lost its group membership")
                    || woken.contains("fenced by the connector's new owner"),
                "{woken}"
            );
            members[frozen].relay.wait_ready(Duration::from_secs(60));

            // Rolling restart: SIGTERM hands a member's connectors over (exit 0).
            for i in 0..members.len() {
                let before = Instant::now();
                let code = members[i].relay.stop();
                assert_eq!(
                    code,
                    Some(0),
                    "member {i} SIGTERM exit:\n{}",
                    members[i].relay.log_text()
                );
                wait_delivery(&arrivals, &tm, before, &members);
                wait_delivery(&arrivals, &tp, before, &members);
                members[i].relay.spawn();
                members[i].relay.wait_ready(Duration::from_secs(60));
            }

            // The broker restarts under the group.
            suite::services(&["stop", "kafka"]);
            std::thread::sleep(Duration::from_secs(5));
            suite::services(&["start", "kafka"]);
            let back = Instant::now();
            wait_delivery(&arrivals, &tm, back, &members);
            wait_delivery(&arrivals, &tp, back, &members);
            std::thread::sleep(Duration::from_secs(3));
            stop_writing.store(true, Ordering::Release);
            members
        }
    });
    let ((mine, theirs), members) = tokio::join!(writers, scenario);
    let members = members.unwrap();
    let read = |topic: &str, n: usize| -> Vec<Consumed> {
        read_topics(
            &[topic.to_string()],
            n,
            Duration::from_secs(120),
            Duration::from_secs(4),
        )
    };
    let got_m = read(&tm, mine.len());
    let got_p = read(&tp, theirs.len());
    stop_watch.store(true, Ordering::Release);
    let _ = watcher.join();
    let all_logs = logs(&members);
    println!(
        "MariaDB: {} events; PostgreSQL: {} events",
        mine.len(),
        theirs.len()
    );
    suite::assert_exactly_once(&mine, &got_m, &all_logs);
    suite::assert_exactly_once(&theirs, &got_p, &all_logs);
    drop(members);
}
