//! MariaDB binlog -> Kafka, end to end through the real `outboxd` binary, against the real
//! MariaDB 10.11 and Kafka started by `scripts/services.sh up`.
//!
//! The shared acceptance cases live in `common/suite.rs`; MariaDB-only cases (binlog
//! rotation, BLACKHOLE outbox, config import) are here.

mod common;

use std::collections::HashSet;
use std::time::Duration;

use common::kafka::{read_expecting, read_topics};
use common::mariadb::MariaDb;
use common::relay::{free_port, run_cli, test_dir, Relay};
use common::suite::{self, start_relay, topic, SourceDb};
use common::OutboxEvent;

#[tokio::test(flavor = "multi_thread")]
async fn single_insert() {
    suite::single_insert(&MariaDb::new("it_single").await).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn order_saga_flow() {
    suite::order_saga_flow(&MariaDb::new("it_saga").await).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn rolled_back_emits_nothing() {
    suite::rolled_back_emits_nothing(&MariaDb::new("it_rollback").await).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn aggregate_types_get_own_topics() {
    suite::aggregate_types_get_own_topics(&MariaDb::new("it_aggs").await).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn ten_thousand_keep_order() {
    suite::ten_thousand_keep_order(&MariaDb::new("it_10k").await).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn restart_mid_stream_loses_nothing() {
    suite::restart_mid_stream_loses_nothing(&MariaDb::new("it_restart").await).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn delete_and_update_make_no_records() {
    suite::delete_and_update_make_no_records(&MariaDb::new("it_delupd").await).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn update_with_fatal_behavior_stops() {
    suite::update_with_fatal_behavior_stops(&MariaDb::new("it_fatal").await).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn null_payload_tombstone() {
    suite::null_payload_tombstone(&MariaDb::new("it_tomb").await).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn utf8_and_large_payloads() {
    suite::utf8_and_large_payloads(&MariaDb::new("it_utf8").await).await;
}

/// FLUSH BINARY LOGS between (and while) transactions loses nothing and the relay keeps
/// streaming into the new file.
#[tokio::test(flavor = "multi_thread")]
async fn binlog_rotation_mid_stream() {
    let db = MariaDb::new("it_rotate").await;
    let _relay = start_relay(&db, "");
    let events = suite::sequenced_events("Order", 5, 300, 0);
    for (i, chunk) in events.chunks(10).enumerate() {
        db.insert(chunk, false).await;
        if i % 7 == 3 {
            db.exec("FLUSH BINARY LOGS").await;
        }
    }
    let got = read_topics(
        &[topic(&db, "Order")],
        events.len(),
        Duration::from_secs(120),
        Duration::from_secs(2),
    );
    suite::assert_records(&db, &events, &got);
    suite::assert_per_key_order(&got);
}

/// An `ENGINE=BLACKHOLE` outbox (rows go only to the binlog) works like an InnoDB one.
#[tokio::test(flavor = "multi_thread")]
async fn blackhole_outbox() {
    let db = MariaDb::new("it_blackhole").await;
    db.exec(
        "CREATE TABLE outbox_bh (id CHAR(36) NOT NULL, aggregate_type VARCHAR(64) NOT NULL, \
         aggregate_id VARCHAR(255) NOT NULL, event_type VARCHAR(128) NOT NULL, payload JSON NULL, \
         idempotency_key VARCHAR(255) NULL, created_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)) ENGINE=BLACKHOLE",
    )
    .await;
    let table = format!("{}.outbox_bh", db.db);
    let (path, port) = suite::write_config(&db, &table, "");
    let _relay = Relay::start(path, port);
    let events: Vec<OutboxEvent> = (0..5)
        .map(|i| {
            OutboxEvent::new(
                "Order",
                &format!("bh-{i}"),
                "OrderCreated",
                Some(&format!(r#"{{"i":{i}}}"#)),
            )
        })
        .collect();
    db.insert_into(&table, &events[..2], false).await;
    db.insert_into(&table, &events[2..], false).await;
    let mut c = db.pool.get_conn().await.unwrap();
    let n: Option<i64> =
        mysql_async::prelude::Queryable::query_first(&mut c, "SELECT COUNT(*) FROM outbox_bh")
            .await
            .unwrap();
    assert_eq!(n, Some(0), "BLACKHOLE keeps no rows");
    let got = read_expecting(&[topic(&db, "Order")], events.len());
    suite::assert_records(&db, &events, &got);
}

/// The same routing written as outboxd TOML and as a Debezium MariaDbConnector JSON gives the
/// same records (keys, values, headers, partitions).
#[tokio::test(flavor = "multi_thread")]
async fn debezium_json_and_toml_give_same_records() {
    let db = MariaDb::new("it_dbzjson").await;
    let (host, port, user, password) = common::mariadb::replication_user();
    // TOML relay routes to <db>.toml.<aggregate>, the Debezium JSON one to <db>.dbz.<aggregate>.
    let dir = test_dir(&db.db);
    let toml_port = free_port();
    let toml = format!(
        r#"[metrics]
listen = "127.0.0.1:{toml_port}"

[[connectors]]
name = "{db}_toml"
tables = ["{db}.outbox_events"]

[connectors.source]
kind = "mariadb"
host = "{host}"
port = {port}
user = "{user}"
password = "{password}"
server_id = {sid}

[connectors.router]
route_by_field = "aggregate_type"
"route.topic.replacement" = "{db}.toml.${{routedByValue}}"
"table.field.event.key" = "aggregate_id"
"table.fields.additional.placement" = "event_type:header:eventType,status:header:eventStatus"

[connectors.checkpoint]
store = "file"
path = "{dir}/toml.checkpoint.json"
"#,
        db = db.db,
        sid = common::unique_server_id(),
        dir = dir.display(),
    );
    let toml_path = dir.join("same.toml");
    std::fs::write(&toml_path, toml).unwrap();
    let dbz_port = free_port();
    let json = serde_json::json!({
        "name": format!("{}_dbz", db.db),
        "config": {
            "connector.class": "io.debezium.connector.mariadb.MariaDbConnector",
            "database.hostname": host,
            "database.port": port.to_string(),
            "database.user": user,
            "database.password": password,
            "database.server.id": common::unique_server_id().to_string(),
            "topic.prefix": "outbox_server",
            "table.include.list": format!("{}.outbox_events", db.db),
            "snapshot.mode": "no_data",
            // The records a Kafka Connect worker with StringConverter and Debezium's extended
            // headers off writes: what outboxd's TOML default writes for text columns.
            "key.converter": "org.apache.kafka.connect.storage.StringConverter",
            "value.converter": "org.apache.kafka.connect.storage.StringConverter",
            "extended.headers.enabled": "false",
            "transforms": "outbox",
            "transforms.outbox.type": "io.debezium.transforms.outbox.EventRouter",
            "transforms.outbox.route.by.field": "aggregate_type",
            "transforms.outbox.route.topic.replacement": format!("{}.dbz.${{routedByValue}}", db.db),
            "transforms.outbox.table.field.event.id": "id",
            "transforms.outbox.table.field.event.key": "aggregate_id",
            "transforms.outbox.table.field.event.type": "event_type",
            "transforms.outbox.table.field.event.payload": "payload",
            "transforms.outbox.table.fields.additional.placement": "event_type:header:eventType,status:header:eventStatus"
        }
    });
    let json_path = dir.join("same.debezium.json");
    std::fs::write(&json_path, serde_json::to_string_pretty(&json).unwrap()).unwrap();
    // A Debezium JSON has no place for the metrics endpoint: --metrics-listen gives it.
    let _a = Relay::start(toml_path, toml_port);
    let listen = format!("127.0.0.1:{dbz_port}");
    let mut b = Relay::start_with_args(
        &[json_path.to_str().unwrap(), "--metrics-listen", &listen],
        dbz_port,
        dir.join("dbz.log"),
    );
    let events: Vec<OutboxEvent> = (0..12)
        .map(|i| {
            OutboxEvent::new(
                ["Order", "Payment"][i % 2],
                &format!("agg-{}", i % 4),
                "Happened",
                Some(&format!(r#"{{"i":{i},"s":"ü😀"}}"#)),
            )
        })
        .collect();
    db.insert(&events[..6], false).await;
    db.insert(&events[6..], false).await;
    let t = |kind: &str| {
        vec![
            format!("{}.{kind}.Order", db.db),
            format!("{}.{kind}.Payment", db.db),
        ]
    };
    let got_toml = read_expecting(&t("toml"), events.len());
    let got_dbz = read_expecting(&t("dbz"), events.len());
    assert_eq!(got_toml.len(), events.len());
    suite::same_records(&got_toml, &got_dbz);
    assert!(got_dbz
        .iter()
        .all(|r| r.header("eventStatus").as_deref() == Some("PENDING")));
    b.stop();
}

/// `outboxd check` passes against the test services, and names the fix when the outbox
/// table is missing.
#[tokio::test(flavor = "multi_thread")]
async fn check_preflight() {
    let db = MariaDb::new("it_check").await;
    let (path, _) = suite::write_config(&db, &db.outbox_table(), "");
    let (code, out, err) = run_cli(&["check", "--config", path.to_str().unwrap()]);
    assert_eq!(code, 0, "check should pass:\n{out}\n{err}");
    assert!(
        out.contains("binlog_format") && out.contains("all checks passed"),
        "{out}"
    );
    let (bad, _) = suite::write_config(&db, &format!("{}.no_such_outbox", db.db), "");
    let (code, out, _) = run_cli(&["check", "--config", bad.to_str().unwrap()]);
    assert_ne!(code, 0);
    assert!(
        out.contains("no_such_outbox") && out.contains("not found"),
        "{out}"
    );
}

/// A checkpoint file is written after delivery and a restarted relay resumes from it
/// without re-delivering (clean stop = final checkpoint).
#[tokio::test(flavor = "multi_thread")]
async fn clean_restart_resumes_without_duplicates() {
    let db = MariaDb::new("it_resume").await;
    let mut relay = start_relay(&db, "");
    let first = suite::sequenced_range("Order", 3, 0..20, 0);
    db.insert(&first, false).await;
    let got = read_expecting(&[topic(&db, "Order")], first.len());
    assert_eq!(got.len(), first.len());
    assert_eq!(relay.stop(), Some(0));
    let checkpoint = std::fs::read_to_string(test_dir(&db.db).join("checkpoint.json")).unwrap();
    assert!(checkpoint.contains("mariadb_gtid"), "{checkpoint}");
    let second = suite::sequenced_range("Order", 3, 20..40, 0);
    db.insert(&second, false).await;
    relay.spawn();
    relay.wait_ready(Duration::from_secs(60));
    let all: Vec<OutboxEvent> = first.into_iter().chain(second).collect();
    let got = read_expecting(&[topic(&db, "Order")], all.len());
    let ids: HashSet<String> = got.iter().filter_map(|r| r.header("id")).collect();
    assert_eq!(ids.len(), all.len());
    suite::assert_records(&db, &all, &got);
    suite::assert_per_key_order(&got);
}

/// `start = "earliest"` without a checkpoint replays the oldest binlog the server has, so
/// events written before the relay first started are delivered too.
#[tokio::test(flavor = "multi_thread")]
async fn start_earliest_replays_existing_binlog() {
    let db = MariaDb::new("it_earliest").await;
    let before: Vec<OutboxEvent> = (0..5)
        .map(|i| {
            OutboxEvent::new(
                "Order",
                &format!("e-{i}"),
                "Early",
                Some(&format!(r#"{{"seq":{i}}}"#)),
            )
        })
        .collect();
    db.insert(&before, false).await;
    let (path, port) = suite::write_config(&db, &db.outbox_table(), "");
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(
        &path,
        text.replace(
            "heartbeat_interval = \"1s\"",
            "heartbeat_interval = \"1s\"\nstart = \"earliest\"",
        ),
    )
    .unwrap();
    let _relay = Relay::start(path, port);
    let after = OutboxEvent::new("Order", "e-late", "Late", Some(r#"{"seq":99}"#));
    db.insert(std::slice::from_ref(&after), false).await;
    let all: Vec<OutboxEvent> = before.into_iter().chain(std::iter::once(after)).collect();
    let got = read_topics(
        &[topic(&db, "Order")],
        all.len(),
        Duration::from_secs(180),
        Duration::from_secs(2),
    );
    suite::assert_records(&db, &all, &got);
}

/// `outboxd binlog decode` on real MariaDB binlog files: one JSON line per row change, the
/// Kafka record with --config, and a clean error (exit 1, no panic) on a damaged file.
#[test]
fn binlog_decode_cli() {
    let fixtures =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures/mysql-binlogs");
    if !fixtures.is_dir() {
        println!("skipping: {} is absent", fixtures.display());
        return;
    }
    let dir = test_dir("binlog_decode_cli");
    let cfg = dir.join("toddy.toml");
    std::fs::write(
        &cfg,
        r#"[[connectors]]
name = "toddy"
tables = ["toddy_test.outbox"]
[connectors.source]
kind = "mariadb"
host = "127.0.0.1"
user = "x"
password = "x"
server_id = 99
[connectors.router]
"route.by.field" = "topic"
"table.field.event.key" = "id"
"table.field.event.payload" = "event"
"#,
    )
    .unwrap();
    let file = fixtures.join("mariadb-bin.000001");
    let (code, out, err) = run_cli(&[
        "binlog",
        "decode",
        file.to_str().unwrap(),
        "--config",
        cfg.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let lines: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let rows: Vec<&serde_json::Value> = lines.iter().filter(|l| l.get("table").is_some()).collect();
    let records: Vec<&serde_json::Value> = lines
        .iter()
        .filter(|l| l.get("kafka_record").is_some())
        .collect();
    assert_eq!(rows.len(), 2, "{out}");
    assert_eq!(rows[0]["table"], "toddy_test.outbox");
    assert_eq!(rows[0]["op"], "insert");
    assert!(
        rows[0]["gtid"].as_str().unwrap().starts_with("0-1-"),
        "{out}"
    );
    assert_eq!(records.len(), 2, "{out}");
    assert!(
        records[0]["kafka_record"]["topic"]
            .as_str()
            .unwrap()
            .starts_with("outbox.event."),
        "{out}"
    );
    let damaged = fixtures.join("binlog_truncated_event.000001");
    let (code, _out, err) = run_cli(&["binlog", "decode", damaged.to_str().unwrap()]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("truncated") || err.contains("Truncated"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
}

/// XA: `XA COMMIT ... ONE PHASE` is an ordinary commit and is delivered; a prepared XA
/// transaction with outbox rows rolled back later publishes nothing, and the relay goes on
/// (issue 25: prepared XA transactions are held until their outcome; see
/// `tests/silent_loss_mariadb.rs` for their delivery at `XA COMMIT`).
#[tokio::test(flavor = "multi_thread")]
async fn xa_transactions() {
    use mysql_async::prelude::Queryable;
    let db = MariaDb::new("it_xa").await;
    let mut relay = start_relay(&db, "");
    let ok = OutboxEvent::new("Order", "xa-1", "OnePhase", Some(r#"{"xa":"one phase"}"#));
    let mut c = db.pool.get_conn().await.unwrap();
    c.query_drop("XA START 'op1'").await.unwrap();
    common::mariadb::insert_events(&mut c, "outbox_events", std::slice::from_ref(&ok)).await;
    c.query_drop("XA END 'op1'").await.unwrap();
    c.query_drop("XA COMMIT 'op1' ONE PHASE").await.unwrap();
    let got = read_expecting(&[topic(&db, "Order")], 1);
    suite::assert_records(&db, std::slice::from_ref(&ok), &got);

    let prepared = OutboxEvent::new("Order", "xa-2", "Prepared", Some(r#"{"xa":"prepared"}"#));
    c.query_drop("XA START 'tp1'").await.unwrap();
    common::mariadb::insert_events(&mut c, "outbox_events", std::slice::from_ref(&prepared)).await;
    c.query_drop("XA END 'tp1'").await.unwrap();
    c.query_drop("XA PREPARE 'tp1'").await.unwrap();
    c.query_drop("XA ROLLBACK 'tp1'").await.unwrap();
    let after = OutboxEvent::new("Order", "xa-3", "After", Some(r#"{"xa":"after"}"#));
    db.insert(std::slice::from_ref(&after), false).await;
    let got = read_expecting(&[topic(&db, "Order")], 2);
    suite::assert_records(&db, &[ok, after], &got);
    assert_eq!(relay.stop(), Some(0), "log:\n{}", relay.log_text());
}

/// SIGTERM while Kafka is unreachable: the relay stops within its 10 s shutdown grace
/// instead of waiting out the delivery timeout, checkpoints nothing undelivered, exits 1, and
/// a restart against the real broker delivers the event.
#[tokio::test(flavor = "multi_thread")]
async fn sigterm_with_kafka_down_stops_promptly_and_loses_nothing() {
    let db = MariaDb::new("it_termdown").await;
    let (path, port) = suite::write_config(&db, &db.outbox_table(), "");
    let dead = format!("127.0.0.1:{}", free_port());
    let log = test_dir(&db.db).join("dead.log");
    // Not ready (Kafka is unreachable), but streaming the binlog.
    let mut relay = Relay::launch_with_args(
        &[path.to_str().unwrap(), "--kafka-bootstrap", &dead],
        port,
        log,
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while !relay.log_text().contains("requesting the binlog") {
        assert!(
            std::time::Instant::now() < deadline,
            "log:
{}",
            relay.log_text()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_secs(1));
    let e = OutboxEvent::new("Order", "td-1", "Stuck", Some(r#"{"n":1}"#));
    db.insert(std::slice::from_ref(&e), false).await;
    std::thread::sleep(Duration::from_secs(2));
    let started = std::time::Instant::now();
    // Exit 1: the event read was never acknowledged, so the final checkpoint excludes it.
    assert_eq!(relay.stop(), Some(1), "log:\n{}", relay.log_text());
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "stopped after {:?}",
        started.elapsed()
    );
    drop(relay);
    let _relay = Relay::start(path, port);
    let got = read_expecting(&[topic(&db, "Order")], 1);
    suite::assert_records(&db, &[e], &got);
}

/// SIGTERM while the connector waits to retry after a transient failure (here its Kafka
/// checkpoint store is unreachable at start): the process exits 1 at once and names the
/// failure, instead of reporting a clean stop.
#[tokio::test(flavor = "multi_thread")]
async fn sigterm_while_waiting_to_retry_exits_1() {
    let db = MariaDb::new("it_termretry").await;
    let (path, port) = suite::write_config_with(
        &db,
        &db.outbox_table(),
        "",
        suite::AT_LEAST_ONCE_KAFKA,
        "connector.toml",
    );
    let dead = format!("127.0.0.1:{}", free_port());
    let log = test_dir(&db.db).join("dead.log");
    let mut relay = Relay::launch_with_args(
        &[path.to_str().unwrap(), "--kafka-bootstrap", &dead],
        port,
        log,
    );
    // The checkpoint store's first Kafka request times out after 30 s; the connector then
    // waits 1 s before its next try, and this test signals within that second.
    let deadline = std::time::Instant::now() + Duration::from_secs(90);
    while !relay
        .log_text()
        .contains("transient failure, restarting from the checkpoint")
    {
        assert!(
            std::time::Instant::now() < deadline,
            "no transient failure after 90 s; log:\n{}",
            relay.log_text()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let started = std::time::Instant::now();
    assert_eq!(relay.stop(), Some(1), "log:\n{}", relay.log_text());
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "stopped after {:?}; log:\n{}",
        started.elapsed(),
        relay.log_text()
    );
    let log = relay.log_text();
    assert!(
        log.contains("stopped without a final checkpoint")
            && log.contains("shut down while waiting"),
        "log:\n{log}"
    );
}

/// Two connectors registering with the same replica server_id keep disconnecting each
/// other; after a few rounds one stops with a message naming the setting.
#[tokio::test(flavor = "multi_thread")]
async fn duplicate_server_id_stops_with_clear_error() {
    let db = MariaDb::new("it_sameid").await;
    let (path_a, port_a) = suite::write_config_with(
        &db,
        &db.outbox_table(),
        "",
        &format!(
            "store = \"file\"\npath = \"{}\"",
            test_dir(&db.db).join("a.json").display()
        ),
        "a.toml",
    );
    let (path_b, port_b) = suite::write_config_with(
        &db,
        &db.outbox_table(),
        "",
        &format!(
            "store = \"file\"\npath = \"{}\"",
            test_dir(&db.db).join("b.json").display()
        ),
        "b.toml",
    );
    let a_text = std::fs::read_to_string(&path_a).unwrap();
    let sid = a_text
        .lines()
        .find(|l| l.starts_with("server_id"))
        .unwrap()
        .to_string();
    let b_text = std::fs::read_to_string(&path_b).unwrap();
    let b_sid = b_text
        .lines()
        .find(|l| l.starts_with("server_id"))
        .unwrap()
        .to_string();
    let b_text = b_text.replace(&b_sid, &sid).replace(
        &format!("name = \"{}\"", db.db),
        &format!("name = \"{}_twin\"", db.db),
    );
    std::fs::write(&path_b, b_text).unwrap();
    let mut a = Relay::start(path_a, port_a);
    let mut b = Relay::start(path_b, port_b);
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    loop {
        let ea = a.wait_exit(Duration::from_millis(500));
        let eb = b.wait_exit(Duration::from_millis(500));
        if ea.is_some() || eb.is_some() {
            let log = format!("{}\n{}", a.log_text(), b.log_text());
            assert!(
                log.contains("give every connector its own server_id"),
                "{log}"
            );
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "neither relay stopped:\n{}",
            a.log_text()
        );
    }
}

/// An outbox row that cannot be routed (NULL route-by value) stops the relay and stays in the
/// binlog; `outboxd checkpoint set` moves the checkpoint past it, and the restarted relay
/// delivers what follows.
#[tokio::test(flavor = "multi_thread")]
async fn checkpoint_set_steps_past_a_poisoned_row() {
    use mysql_async::prelude::Queryable;
    let db = MariaDb::new("it_poison").await;
    let mut relay = start_relay(&db, "");
    let mut c = db.pool.get_conn().await.unwrap();
    c.query_drop("ALTER TABLE outbox_events MODIFY aggregate_type VARCHAR(64) NULL")
        .await
        .unwrap();
    c.query_drop(
        "INSERT INTO outbox_events (id, aggregate_type, aggregate_id, event_type, payload) \
         VALUES ('poison-1', NULL, 'p', 'Bad', '{}')",
    )
    .await
    .unwrap();
    let after_poison: Option<String> = c.query_first("SELECT @@gtid_binlog_pos").await.unwrap();
    let code = relay.wait_exit(Duration::from_secs(60));
    assert!(
        matches!(code, Some(c) if c != 0),
        "log:\n{}",
        relay.log_text()
    );
    assert!(
        relay.log_text().contains("poison-1"),
        "the error names the event id"
    );
    let cfg = relay.configs[0].to_str().unwrap().to_string();
    let pos = format!("mariadb_gtid:{}", after_poison.unwrap());
    let (code, out, err) = run_cli(&["checkpoint", "set", "--config", &cfg, "--position", &pos]);
    assert_eq!(code, 0, "{out}\n{err}");
    let (code, out, _) = run_cli(&["checkpoint", "show", "--config", &cfg]);
    assert_eq!(code, 0);
    assert!(out.contains(&pos[pos.find(':').unwrap() + 1..]), "{out}");
    let good = OutboxEvent::new("Order", "g-1", "Good", Some(r#"{"ok":true}"#));
    db.insert(std::slice::from_ref(&good), false).await;
    relay.spawn();
    relay.wait_ready(Duration::from_secs(60));
    let got = read_expecting(&[topic(&db, "Order")], 1);
    suite::assert_records(&db, &[good], &got);
}

#[tokio::test(flavor = "multi_thread")]
async fn kafka_refusal_stops_then_resumes() {
    let db = MariaDb::new("it_refused").await;
    suite::kafka_refusal_stops_then_resumes(&db, &suite::file_checkpoint(&db), false).await;
}
