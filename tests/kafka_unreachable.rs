//! What the relay says while Kafka is unreachable: instead of librdkafka's repeats (hundreds
//! of `AllBrokersDown` lines), one WARN of outboxd's own when Kafka goes away and one INFO
//! when it is back; `/ready` at 503 past the grace with the reason, and 200 again after;
//! `check` with one FAIL line and a quiet stderr. Kafka at a closed port, the broker stopped
//! before `check`, and stopped mid-stream.
//!
//! This binary stops the shared test broker, so its one test runs the cases one after the
//! other (cargo runs test binaries one at a time).

mod common;

use std::time::{Duration, Instant};

use common::kafka::read_expecting;
use common::mariadb::MariaDb;
use common::relay::{free_port, http_get, metric, run_cli, test_dir, wait_ready_code, Relay};
use common::suite::{self, services, topic, write_config_with, SourceDb};
use common::OutboxEvent;

/// Restarts Kafka when dropped (also when the test panics).
struct KafkaBack;

impl Drop for KafkaBack {
    fn drop(&mut self) {
        services(&["start", "kafka"]);
    }
}

/// Lines of `log` written by librdkafka (target `librdkafka`, as logged at INFO and above).
fn librdkafka_lines(log: &str) -> Vec<&str> {
    log.lines()
        .filter(|l| l.contains(" librdkafka: ") && !l.contains("DEBUG"))
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn kafka_unreachable_says_it_once() {
    let db = MariaDb::new("ops_unreachable").await;
    closed_port(&db).await;
    check_with_kafka_stopped(&db);
    stopped_mid_stream(&db).await;
}

/// `--kafka-bootstrap` at a closed port: `check` fails with one line and nothing on stderr
/// from librdkafka; `run` logs one WARN and is not ready, with the reason.
async fn closed_port(db: &MariaDb) {
    let closed = format!("127.0.0.1:{}", free_port());
    let (path, port) = write_config_with(
        db,
        &db.outbox_table(),
        "",
        suite::EXACTLY_ONCE,
        "closed.toml",
    );
    let (code, out, err) = run_cli(&[
        "check",
        "--config",
        path.to_str().unwrap(),
        "--kafka-bootstrap",
        &closed,
    ]);
    assert_eq!(code, 1, "{out}\n{err}");
    let fail = out
        .lines()
        .find(|l| l.starts_with("[FAIL]") && l.contains(": kafka:"))
        .unwrap_or_else(|| panic!("no kafka FAIL line:\n{out}"));
    assert!(
        fail.contains(&format!("no broker of {closed} answered"))
            && fail.contains("Connection refused"),
        "{fail}"
    );
    assert!(
        librdkafka_lines(&err).is_empty() && err.lines().count() <= 1,
        "check's stderr should be quiet:\n{err}"
    );

    let log = test_dir(db.name()).join("closed.log");
    let mut relay = Relay::launch_with_args(
        &[path.to_str().unwrap(), "--kafka-bootstrap", &closed],
        port,
        log,
    );
    let body = wait_ready_code(port, 503, Duration::from_secs(30));
    // Past the grace, the reason is Kafka.
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut body = body;
    while !body.contains("unreachable for") {
        assert!(Instant::now() < deadline, "{body}");
        std::thread::sleep(Duration::from_millis(500));
        body = http_get(port, "/ready").unwrap().1;
    }
    assert!(
        body.contains(&format!("Kafka at {closed} unreachable for")),
        "{body}"
    );
    std::thread::sleep(Duration::from_secs(3));
    relay.stop();
    let text = relay.log_text();
    assert_eq!(
        text.matches("Kafka is unreachable").count(),
        1,
        "one WARN; log:\n{text}"
    );
    let rd = librdkafka_lines(&text);
    println!("closed port: {} librdkafka line(s)", rd.len());
    assert!(
        rd.len() <= 2,
        "librdkafka's repeats are collapsed; log:\n{text}"
    );
}

/// The broker stopped: `check` fails its Kafka line within its 10 s probe, stderr quiet.
fn check_with_kafka_stopped(db: &MariaDb) {
    let (path, _) = write_config_with(
        db,
        &db.outbox_table(),
        "",
        suite::EXACTLY_ONCE,
        "stopped.toml",
    );
    services(&["stop", "kafka"]);
    let _back = KafkaBack;
    let started = Instant::now();
    let (code, out, err) = run_cli(&["check", "--config", path.to_str().unwrap()]);
    let took = started.elapsed();
    println!("check with Kafka stopped took {took:?}");
    assert_eq!(code, 1, "{out}\n{err}");
    assert!(
        out.lines()
            .any(|l| l.starts_with("[FAIL]") && l.contains(": kafka: no broker of")),
        "{out}"
    );
    // The Kafka checkpoint store is not read when its brokers did not answer the probe:
    // one 10 s wait, not another 30 s for the same brokers (it took 40 s).
    assert!(
        out.lines().any(|l| l.starts_with("[FAIL]")
            && l.contains(": checkpoint: ")
            && l.contains("its Kafka cluster did not answer")),
        "{out}"
    );
    assert!(
        took < Duration::from_secs(25),
        "check took {took:?}:\n{out}"
    );
    let progress = |l: &&str| l.starts_with("checking connector ");
    assert_eq!(err.lines().filter(progress).count(), 1, "progress:\n{err}");
    assert!(
        librdkafka_lines(&err).is_empty() && err.lines().filter(|l| !progress(l)).count() <= 1,
        "check's stderr should be quiet:\n{err}"
    );
}

/// Kafka stops while the relay streams: one WARN, `/ready` 503 with the reason, few
/// librdkafka lines, the lag gauges (outboxd's and Debezium's) above 0; back: one INFO,
/// `/ready` 200, everything written meanwhile delivered, the lag back to 0.
async fn stopped_mid_stream(db: &MariaDb) {
    let (path, port) = write_config_with(
        db,
        &db.outbox_table(),
        "",
        suite::EXACTLY_ONCE,
        "connector.toml",
    );
    let mut relay = Relay::start(path, port);
    let before = suite::sequenced_range("Outage", 3, 0..20, 0);
    db.insert(&before, false).await;
    read_expecting(&[topic(db, "Outage")], before.len());
    let mark = relay.log_text().len();

    services(&["stop", "kafka"]);
    let back = KafkaBack;
    let body = wait_ready_code(port, 503, Duration::from_secs(30));
    let report: serde_json::Value = serde_json::from_str(&body).unwrap();
    let c = &report["connectors"][db.name()];
    assert_eq!(c["ready"], false, "{body}");
    assert!(
        c["reason"].as_str().unwrap().contains("unreachable for"),
        "{body}"
    );
    let during = suite::sequenced_range("Outage", 3, 20..40, 0);
    db.insert(&during, false).await;
    std::thread::sleep(Duration::from_secs(8));
    // Undelivered events are lag, in outboxd's gauge and Debezium's.
    let (c, dbz) = (
        format!("connector=\"{}\"", db.name()),
        format!("name=\"{}\"", db.name()),
    );
    let text = relay.metrics();
    let lag = metric(&text, "outboxd_checkpoint_lag_seconds", &c).unwrap_or_default();
    let behind =
        metric(&text, "debezium_metrics_MilliSecondsBehindSource", &dbz).unwrap_or_default();
    assert!(
        lag > 0.0 && behind > 0.0,
        "lag {lag} s, behind {behind} ms:\n{text}"
    );
    let outage_log = relay.log_text()[mark..].to_string();
    assert_eq!(
        outage_log.matches("Kafka is unreachable").count(),
        1,
        "one WARN; log:\n{outage_log}"
    );
    let rd = librdkafka_lines(&outage_log);
    println!("mid-stream outage: {} librdkafka line(s)", rd.len());
    assert!(
        rd.len() <= 3,
        "librdkafka's repeats are collapsed; log:\n{outage_log}"
    );

    drop(back);
    wait_ready_code(port, 200, Duration::from_secs(120));
    let all: Vec<OutboxEvent> = before.into_iter().chain(during).collect();
    let got = read_expecting(&[topic(db, "Outage")], all.len());
    suite::assert_exactly_once(&all, &got, &relay.log_text());
    // Delivered and checkpointed: no lag left.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let text = relay.metrics();
        let lag = metric(&text, "outboxd_checkpoint_lag_seconds", &c);
        let behind = metric(&text, "debezium_metrics_MilliSecondsBehindSource", &dbz);
        if lag == Some(0.0) && behind == Some(0.0) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "lag {lag:?} s, behind {behind:?} ms after recovery:\n{text}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    let text = relay.log_text()[mark..].to_string();
    assert_eq!(
        text.matches("Kafka is reachable again").count(),
        1,
        "one INFO; log:\n{text}"
    );
    assert_eq!(relay.stop(), Some(0), "{}", relay.log_text());
}
