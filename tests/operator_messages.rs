//! What an operator sees when something is off, against the real services (Kafka stays up
//! here; `tests/kafka_unreachable.rs` stops it): connection-refused messages and exit codes
//! for both sources, readiness while the source retries, the lag of an idle caught-up
//! connector and the Debezium streaming metrics, two checkpoint stores for one connector,
//! configuration mistakes (a missing file, a TOML typo), `[log] format` and list fields in
//! JSON logs, `binlog decode --config` without a password, and one warning (with a count)
//! for a source transaction that UPDATEs many outbox rows.

mod common;

use std::time::{Duration, Instant};

use common::kafka::read_expecting;
use common::mariadb::MariaDb;
use common::postgres::Postgres;
use common::relay::{free_port, http_get, metric, run_cli, test_dir, wait_ready_code, Relay};
use common::suite::{self, topic, write_config_with, SourceDb};
use common::OutboxEvent;

/// The source TOML of `db` with its port replaced by a closed one.
fn with_closed_port<S: SourceDb>(db: &S, real_port: u16) -> (String, u16) {
    let closed = free_port();
    let toml = db.source_toml(&db.outbox_table()).replace(
        &format!("port = {real_port}\n"),
        &format!("port = {closed}\n"),
    );
    assert!(toml.contains(&format!("port = {closed}")), "{toml}");
    (toml, closed)
}

/// A wrong port: `check` says "cannot connect to HOST:PORT (connection refused); check
/// host/port" and exits 1; `run` says the stream could not start (not "connection lost"),
/// keeps retrying with `/ready` at 503 and the reason, and a SIGTERM then exits 1.
async fn connection_refused<S: SourceDb>(db: &S, real_port: u16) {
    let (source, closed) = with_closed_port(db, real_port);
    let dir = test_dir(db.name());
    let port = free_port();
    let path = dir.join("refused.toml");
    std::fs::write(
        &path,
        format!(
            "[metrics]\nlisten = \"127.0.0.1:{port}\"\n\n[[connectors]]\nname = \"{}\"\n{source}\n\
             [connectors.kafka]\nbootstrap_servers = \"{}\"\n\n[connectors.checkpoint]\n{}\n",
            db.name(),
            common::kafka_bootstrap(),
            suite::file_checkpoint(db)
        ),
    )
    .unwrap();
    let (code, out, err) = run_cli(&["check", "--config", path.to_str().unwrap()]);
    assert_eq!(code, 1, "{out}\n{err}");
    let want = format!("at 127.0.0.1:{closed}");
    let line = out
        .lines()
        .find(|l| l.contains("[FAIL]") && l.contains("connect"))
        .unwrap_or_else(|| panic!("no connect FAIL line:\n{out}"));
    assert!(
        line.contains("cannot connect to")
            && line.contains(&want)
            && line.contains("(connection refused)")
            && line.contains("check host/port"),
        "{line}"
    );
    assert!(!out.contains("Input/output error"), "{out}");

    let mut relay =
        Relay::launch_with_args(&[path.to_str().unwrap()], port, dir.join("refused.log"));
    let body = wait_ready_code(port, 503, Duration::from_secs(30));
    let deadline = Instant::now() + Duration::from_secs(30);
    while !relay.log_text().contains("could not start, retrying") {
        assert!(Instant::now() < deadline, "log:\n{}", relay.log_text());
        std::thread::sleep(Duration::from_millis(200));
    }
    let body = if body.contains("retrying") {
        body
    } else {
        std::thread::sleep(Duration::from_secs(1));
        http_get(port, "/ready").unwrap().1
    };
    let report: serde_json::Value = serde_json::from_str(&body).unwrap();
    let c = &report["connectors"][db.name()];
    assert_eq!(c["state"], "retrying", "{body}");
    assert_eq!(c["ready"], false, "{body}");
    assert!(
        c["reason"]
            .as_str()
            .unwrap()
            .contains("(connection refused)"),
        "{body}"
    );
    // `status` shows what the relay says of the connector (its `metrics.listen` is in the
    // file): retrying, with the reason; the source itself cannot be read either.
    let (code, out, err) = run_cli(&["status", "--config", path.to_str().unwrap()]);
    assert_eq!(code, 1, "{out}\n{err}");
    let line: serde_json::Value = serde_json::from_str(out.lines().next().unwrap_or_default())
        .unwrap_or_else(|e| panic!("status prints JSON ({e}):\n{out}\n{err}"));
    assert_eq!(line["connector"], db.name(), "{line}");
    assert_eq!(line["relay"]["state"], "retrying", "{line}");
    assert_eq!(line["relay"]["ready"], false, "{line}");
    let reason = line["relay"]["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("could not start, retrying in ") && reason.contains("(connection refused)"),
        "{line}"
    );
    assert!(
        line["error"]
            .as_str()
            .unwrap_or_default()
            .contains("(connection refused)"),
        "{line}"
    );

    let code = relay.stop();
    let log = relay.log_text();
    assert_eq!(
        code,
        Some(1),
        "a signal during a retry exits 1; log:\n{log}"
    );
    assert!(
        !log.contains("connection lost"),
        "never connected; log:\n{log}"
    );
    assert!(
        log.contains("while waiting to retry") && log.contains("(connection refused)"),
        "log:\n{log}"
    );
    assert!(!log.contains("what was read is delivered"), "log:\n{log}");
}

#[tokio::test(flavor = "multi_thread")]
async fn connection_refused_mariadb() {
    let db = MariaDb::new("ops_refused").await;
    let (_, real, _, _) = common::mariadb::replication_user();
    connection_refused(&db, real).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn connection_refused_postgres() {
    let db = Postgres::new("ops_pg_refused").await;
    let (_, real, _, _) = common::postgres::replication_user();
    connection_refused(&db, real).await;
}

/// A caught-up connector with a quiet outbox: the lag gauges read 0 (not the time since the
/// last event), the last-event age grows, and the Debezium streaming series count what
/// happened, in both delivery modes.
#[tokio::test(flavor = "multi_thread")]
async fn idle_caught_up_connector_has_zero_lag() {
    for mode in ["eos", "alo"] {
        // A database (and connector name) per mode: one name with two stores is refused.
        let db = MariaDb::new(&format!("ops_idle_{mode}")).await;
        let checkpoint = match mode {
            "eos" => suite::EXACTLY_ONCE.to_string(),
            _ => suite::file_checkpoint(&db),
        };
        let (path, port) = write_config_with(
            &db,
            &db.outbox_table(),
            "",
            &checkpoint,
            &format!("{mode}.toml"),
        );
        let mut relay = Relay::start(path, port);
        let events = [
            OutboxEvent::new("Idle", "a-1", "Created", Some(r#"{"n":1}"#)),
            OutboxEvent::new("Idle", "a-2", "Created", Some(r#"{"n":2}"#)),
        ];
        db.insert(&events, false).await;
        let got = read_expecting(&[topic(&db, "Idle")], events.len());
        assert_eq!(got.len(), events.len(), "{mode}");
        // Idle for longer than the lag used to grow before anyone noticed.
        std::thread::sleep(Duration::from_secs(4));
        let text = relay.metrics();
        let c = format!("connector=\"{}\"", db.name());
        let dbz = format!("name=\"{}\"", db.name());
        assert_eq!(
            metric(&text, "outboxd_checkpoint_lag_seconds", &c),
            Some(0.0),
            "{mode}: idle and caught up is no lag:\n{text}"
        );
        assert_eq!(
            metric(&text, "debezium_metrics_MilliSecondsBehindSource", &dbz),
            Some(0.0),
            "{mode}:\n{text}"
        );
        assert!(
            metric(&text, "outboxd_last_event_age_seconds", &c).unwrap() >= 3.0,
            "{mode}:\n{text}"
        );
        assert!(
            metric(&text, "debezium_metrics_MilliSecondsSinceLastEvent", &dbz).unwrap() >= 3000.0,
            "{mode}:\n{text}"
        );
        assert!(text.contains(&format!(
            "debezium_metrics_TotalNumberOfEventsSeen{{plugin=\"mariadb\",name=\"{}\",context=\"streaming\"}}",
            db.name()
        )), "{text}");
        assert_eq!(
            metric(&text, "debezium_metrics_TotalNumberOfEventsSeen", &dbz),
            Some(2.0),
            "{mode}:\n{text}"
        );
        assert_eq!(
            metric(
                &text,
                "debezium_metrics_NumberOfCommittedTransactions",
                &dbz
            ),
            Some(1.0),
            "{mode}:\n{text}"
        );
        assert_eq!(metric(&text, "debezium_metrics_Connected", &dbz), Some(1.0));
        assert_eq!(metric(&text, "outboxd_connector_ready", &c), Some(1.0));
        assert_eq!(relay.stop(), Some(0), "{}", relay.log_text());
    }
}

/// The same connector name with two stores (a TOML with the file store, a Debezium JSON or
/// TOML with the Kafka store): starting from the store the other has overtaken is refused,
/// naming both; `checkpoint set` carries the position over, and then the other way round is
/// refused too.
#[tokio::test(flavor = "multi_thread")]
async fn two_stores_for_one_connector_are_refused() {
    let db = MariaDb::new("ops_two_stores").await;
    let (kafka_cfg, kafka_port) = write_config_with(
        &db,
        &db.outbox_table(),
        "",
        suite::EXACTLY_ONCE,
        "kafka.toml",
    );
    let file_path = test_dir(db.name()).join("checkpoint.json");
    let (file_cfg, file_port) = write_config_with(
        &db,
        &db.outbox_table(),
        "",
        &suite::file_checkpoint(&db),
        "file.toml",
    );
    let mut relay = Relay::start(kafka_cfg.clone(), kafka_port);
    let first = [OutboxEvent::new("Two", "k", "One", Some("{}"))];
    db.insert(&first, false).await;
    read_expecting(&[topic(&db, "Two")], 1);
    assert_eq!(relay.stop(), Some(0), "{}", relay.log_text());

    // The file store has nothing; the Kafka store is ahead: refused.
    let mut refused = Relay::launch_with_args(
        &[file_cfg.to_str().unwrap()],
        file_port,
        test_dir(db.name()).join("refused-file.log"),
    );
    let code = refused.wait_exit(Duration::from_secs(60));
    let log = refused.log_text();
    assert_eq!(code, Some(1), "log:\n{log}");
    assert!(
        log.contains("has checkpoints in two stores")
            && log.contains(&format!("topic outboxd.checkpoints.{}", db.name()))
            && log.contains(&format!("file store {}", file_path.display()))
            && log.contains("outboxd checkpoint set"),
        "log:\n{log}"
    );

    // Carry the Kafka store's position over, as the message says; then the file store runs.
    let (code, out, err) = run_cli(&[
        "checkpoint",
        "show",
        "--config",
        kafka_cfg.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let shown: serde_json::Value = serde_json::from_str(out.lines().next().unwrap()).unwrap();
    let position = format!(
        "{}:{}",
        shown["checkpoint"]["position"]["kind"].as_str().unwrap(),
        shown["checkpoint"]["position"]["value"].as_str().unwrap()
    );
    let (code, _, err) = run_cli(&[
        "checkpoint",
        "set",
        "--config",
        file_cfg.to_str().unwrap(),
        "--position",
        &position,
    ]);
    assert_eq!(code, 0, "{err}");
    let mut relay = Relay::start(file_cfg.clone(), file_port);
    let second = [OutboxEvent::new("Two", "k", "Two", Some("{}"))];
    db.insert(&second, false).await;
    let got = read_expecting(&[topic(&db, "Two")], 2);
    assert_eq!(
        got.len(),
        2,
        "the carried-over position re-delivers nothing"
    );
    assert_eq!(relay.stop(), Some(0), "{}", relay.log_text());

    // Now the file store is ahead: the Kafka-store configuration is refused, naming the file.
    let mut refused = Relay::launch_with_args(
        &[kafka_cfg.to_str().unwrap()],
        kafka_port,
        test_dir(db.name()).join("refused-kafka.log"),
    );
    let code = refused.wait_exit(Duration::from_secs(90));
    let log = refused.log_text();
    assert_eq!(code, Some(1), "log:\n{log}");
    assert!(
        log.contains("has checkpoints in two stores")
            && log.contains(&format!("the file store {}", file_path.display())),
        "log:\n{log}"
    );
}

/// A Kafka store in a topic of its own registers in the connector's default checkpoint
/// topic: a file-store configuration and one with the default Kafka store (a Debezium
/// JSON's) of the same connector see its checkpoint and are refused, naming its topic.
#[tokio::test(flavor = "multi_thread")]
async fn a_kafka_store_in_its_own_topic_is_compared_too() {
    let db = MariaDb::new("ops_own_topic").await;
    let own_topic = format!("{}.own-checkpoints", db.name());
    let (custom_cfg, custom_port) = write_config_with(
        &db,
        &db.outbox_table(),
        "",
        &format!("{}\ntopic = \"{own_topic}\"", suite::EXACTLY_ONCE),
        "own-topic.toml",
    );
    let mut relay = Relay::start(custom_cfg, custom_port);
    db.insert(&[OutboxEvent::new("Own", "k", "One", Some("{}"))], false)
        .await;
    read_expecting(&[topic(&db, "Own")], 1);
    assert_eq!(relay.stop(), Some(0), "{}", relay.log_text());

    let others = [
        (suite::file_checkpoint(&db), "file.toml"),
        (suite::EXACTLY_ONCE.to_string(), "default-topic.toml"),
    ];
    for (checkpoint, file) in others {
        let (cfg, port) = write_config_with(&db, &db.outbox_table(), "", &checkpoint, file);
        let mut refused = Relay::launch_with_args(
            &[cfg.to_str().unwrap()],
            port,
            test_dir(db.name()).join(format!("{file}.log")),
        );
        let code = refused.wait_exit(Duration::from_secs(60));
        let log = refused.log_text();
        assert_eq!(code, Some(1), "{file}: log:\n{log}");
        assert!(
            log.contains("has checkpoints in two stores")
                && log.contains(&format!("the Kafka store (topic {own_topic})")),
            "{file}: log:\n{log}"
        );
    }
}

/// A missing file prints its OS error once; a TOML typo prints the parse error once, with
/// the closest key; a Debezium key in a TOML file is pointed at its TOML name.
#[test]
fn configuration_mistakes_say_it_once() {
    let (code, out, err) = run_cli(&["check", "--config", "/nonexistent/outboxd.toml"]);
    assert_eq!(code, 1, "{out}{err}");
    assert_eq!(err.matches("No such file or directory").count(), 1, "{err}");
    assert!(
        err.contains("cannot read /nonexistent/outboxd.toml"),
        "{err}"
    );

    let dir = test_dir("ops_config_mistakes");
    let toml = |source_extra: &str| {
        format!(
            "[[connectors]]\nname = \"typo\"\ntables = [\"s.outbox\"]\n[connectors.source]\n\
             kind = \"mariadb\"\nhost = \"127.0.0.1\"\nuser = \"u\"\n{source_extra}\n"
        )
    };
    let typo = dir.join("typo.toml");
    std::fs::write(&typo, toml("server_idd = 7")).unwrap();
    let (code, _, err) = run_cli(&["check", "--config", typo.to_str().unwrap()]);
    assert_eq!(code, 1, "{err}");
    assert_eq!(
        err.matches("unknown field `server_idd`").count(),
        1,
        "{err}"
    );
    assert_eq!(err.matches("TOML parse error").count(), 1, "{err}");
    assert!(err.contains("did you mean `server_id`?"), "{err}");

    let debezium_key = dir.join("debezium-key.toml");
    std::fs::write(
        &debezium_key,
        toml("server_id = 7\n\"database.password\" = \"x\""),
    )
    .unwrap();
    let (code, _, err) = run_cli(&["check", "--config", debezium_key.to_str().unwrap()]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("`database.password` is Debezium's name; in outboxd's TOML it is `password`"),
        "{err}"
    );
}

/// `db`'s connector with a file checkpoint store, in `connector.toml`, and its metrics port.
fn file_store_config(db: &MariaDb) -> (std::path::PathBuf, u16) {
    write_config_with(
        db,
        &db.outbox_table(),
        "",
        &suite::file_checkpoint(db),
        "connector.toml",
    )
}

/// Runs the relay of `path` (metrics on `port`) until it exits by itself (at most
/// `within`); its exit code (`None` when it was still running) and log.
fn run_until_exit(path: &std::path::Path, port: u16, within: Duration) -> (Option<i32>, String) {
    let mut relay =
        Relay::launch_with_args(&[path.to_str().unwrap()], port, path.with_extension("log"));
    let code = relay.wait_exit(within);
    (code, relay.log_text())
}

/// A metrics address already in use stops `run` at startup (exit 1, naming the address and
/// the setting) instead of running without `/metrics`, `/health` and `/ready`.
#[tokio::test(flavor = "multi_thread")]
async fn a_metrics_address_in_use_stops_run() {
    let db = MariaDb::new("ops_metrics_in_use").await;
    let (path, port) = file_store_config(&db);
    let _taken = std::net::TcpListener::bind(("127.0.0.1", port)).unwrap();
    let (code, log) = run_until_exit(&path, port, Duration::from_secs(30));
    assert_eq!(code, Some(1), "exit 1 at startup; log:\n{log}");
    assert!(
        log.contains(&format!(
            "cannot listen on 127.0.0.1:{port} for /metrics, /health and /ready"
        )) && log.contains("metrics.listen"),
        "{log}"
    );
    assert!(
        !log.contains("starting connector"),
        "nothing started: {log}"
    );
}

/// A user who may log in but lacks REPLICATION SLAVE (MariaDB refuses its binlog request
/// with the login's "access denied") is told which privilege is missing, not to check its
/// password.
#[tokio::test(flavor = "multi_thread")]
async fn a_missing_replication_privilege_is_named() {
    let mut db = MariaDb::new("ops_no_repl").await;
    let user = format!("norepl_{}", std::process::id());
    db.exec(&format!(
        "CREATE USER '{user}'@'%' IDENTIFIED BY 'norepl-secret'; \
         GRANT SELECT ON {}.* TO '{user}'@'%'; GRANT BINLOG MONITOR ON *.* TO '{user}'@'%'",
        db.db
    ))
    .await;
    db.relay.2 = user.clone();
    db.relay.3 = "norepl-secret".into();
    let (path, port) = file_store_config(&db);
    let (code, log) = run_until_exit(&path, port, Duration::from_secs(60));
    db.exec(&format!("DROP USER '{user}'@'%'")).await;
    assert_eq!(code, Some(1), "a definite stop; log:\n{log}");
    assert!(
        log.contains(&format!("user \"{user}\" lacks a privilege"))
            && log.contains("REPLICATION SLAVE")
            && !log.contains("check user / password"),
        "{log}"
    );
    assert!(!log.contains("norepl-secret"), "{log}");
}

/// `[log] format = "json"` in the file is applied (no --log-format), and list fields are
/// JSON arrays: `tables` of "starting connector".
#[tokio::test(flavor = "multi_thread")]
async fn log_format_from_the_file_and_tables_as_an_array() {
    let db = MariaDb::new("ops_json_log").await;
    let (path, port) = file_store_config(&db);
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, format!("[log]\nformat = \"json\"\n\n{text}")).unwrap();
    let mut relay = Relay::start(path, port);
    assert_eq!(relay.stop(), Some(0));
    let log = relay.log_text();
    let lines: Vec<serde_json::Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    let starting = lines
        .iter()
        .find(|l| l["fields"]["message"] == "starting connector")
        .unwrap_or_else(|| panic!("no 'starting connector' line:\n{log}"));
    assert_eq!(
        starting["fields"]["tables"],
        serde_json::json!([db.outbox_table()]),
        "{starting}"
    );
}

/// `binlog decode --config` loads the config without its password (nothing connects: an
/// unset `password_env` or `${env:...}` is fine), and says so when none of the config's
/// tables is in the file.
#[test]
fn binlog_decode_config_needs_no_password() {
    let fixtures =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures/mysql-binlogs");
    if !fixtures.is_dir() {
        println!("skipping: {} is absent", fixtures.display());
        return;
    }
    let file = fixtures.join("mariadb-bin.000001");
    let dir = test_dir("ops_decode_offline");
    let toml = |table: &str| {
        format!(
            "[[connectors]]\nname = \"toddy\"\ntables = [\"{table}\"]\n[connectors.source]\n\
             kind = \"mariadb\"\nhost = \"127.0.0.1\"\nuser = \"x\"\n\
             password_env = \"OUTBOXD_TEST_SURELY_UNSET_PASSWORD\"\nserver_id = 99\n\
             [connectors.router]\n\"route.by.field\" = \"topic\"\n\"table.field.event.key\" = \"id\"\n\
             \"table.field.event.payload\" = \"event\"\n"
        )
    };
    let cfg = dir.join("toddy.toml");
    std::fs::write(&cfg, toml("toddy_test.outbox")).unwrap();
    let json = dir.join("toddy.json");
    std::fs::write(
        &json,
        serde_json::json!({"name": "toddy", "config": {
            "connector.class": "io.debezium.connector.mariadb.MariaDbConnector",
            "database.hostname": "127.0.0.1", "database.user": "x",
            "database.password": "${env:OUTBOXD_TEST_SURELY_UNSET_PASSWORD}",
            "database.server.id": "99", "table.include.list": "toddy_test.outbox",
            "transforms": "outbox",
            "transforms.outbox.type": "io.debezium.transforms.outbox.EventRouter",
            "transforms.outbox.route.by.field": "topic",
            "transforms.outbox.table.field.event.key": "id",
            "transforms.outbox.table.field.event.payload": "event"
        }})
        .to_string(),
    )
    .unwrap();
    for config in [&cfg, &json] {
        let (code, out, err) = run_cli(&[
            "binlog",
            "decode",
            file.to_str().unwrap(),
            "--config",
            config.to_str().unwrap(),
        ]);
        assert_eq!(code, 0, "{}: {err}", config.display());
        assert_eq!(out.matches("\"kafka_record\":{").count(), 2, "{out}");
        assert!(
            !err.contains("no row change in the config's tables"),
            "{err}"
        );
    }
    let elsewhere = dir.join("elsewhere.toml");
    std::fs::write(&elsewhere, toml("other.outbox")).unwrap();
    let (code, out, err) = run_cli(&[
        "binlog",
        "decode",
        file.to_str().unwrap(),
        "--config",
        elsewhere.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(!out.contains("\"kafka_record\""), "{out}");
    assert!(
        err.contains("no row change in the config's tables (other.outbox)")
            && err.contains("toddy_test.outbox"),
        "{err}"
    );
}

/// Rows the polling-worker test inserts and then marks sent in one UPDATE.
const MARKED: usize = 5000;

/// A relay on `db`'s outbox with [`MARKED`] events delivered (the caller then marks them
/// sent in one UPDATE, in one source transaction).
async fn relay_with_marked_rows<S: SourceDb>(db: &S) -> Relay {
    let mut relay = suite::start_relay(db, "");
    relay.wait_ready(Duration::from_secs(60));
    let events = suite::sequenced_events("Marked", 50, MARKED, 0);
    db.insert(&events, false).await;
    let got = read_expecting(&[topic(db, "Marked")], MARKED);
    assert_eq!(got.len(), MARKED, "{}", relay.log_text());
    relay
}

/// After the UPDATE of [`MARKED`] rows: one WARN line for its source transaction, with the
/// count, the operation and the table (not one per row), and the skipped-events counter
/// reads [`MARKED`].
async fn one_line_for_the_marked_rows<S: SourceDb>(db: &S, mut relay: Relay) {
    // An event after the UPDATE: once it is delivered, the UPDATE's transaction was read.
    let after = OutboxEvent::new("After", "z-1", "Created", Some(r#"{"n":1}"#));
    db.insert(std::slice::from_ref(&after), false).await;
    let got = read_expecting(&[topic(db, "After")], 1);
    assert_eq!(got.len(), 1, "{}", relay.log_text());
    let log = relay.log_text();
    let lines: Vec<&str> = log
        .lines()
        .filter(|l| {
            l.contains("UPDATE(s) of outbox table")
                || l.contains("ignored (table.op.invalid.behavior")
        })
        .collect();
    assert_eq!(
        lines.len(),
        1,
        "one line per source transaction:\n{}",
        lines.join("\n")
    );
    assert!(lines[0].contains("WARN"), "{}", lines[0]);
    assert!(
        lines[0].contains(&format!("{MARKED} UPDATE(s) of outbox table")),
        "{}",
        lines[0]
    );
    assert!(lines[0].contains("outbox_events"), "{}", lines[0]);
    let text = relay.metrics();
    assert_eq!(
        metric(
            &text,
            "outboxd_events_skipped_total",
            &format!("connector=\"{}\",reason=\"update\"", db.name())
        ),
        Some(MARKED as f64),
        "{text}"
    );
    assert_eq!(relay.stop(), Some(0), "{}", relay.log_text());
}

/// A polling worker marking 5,000 outbox rows sent in one UPDATE (MariaDB): one WARN line
/// with the count, and the counter, not 5,000 WARN lines.
#[tokio::test(flavor = "multi_thread")]
async fn one_update_of_many_outbox_rows_is_one_warning_mariadb() {
    let db = MariaDb::new("ops_marked").await;
    let relay = relay_with_marked_rows(&db).await;
    db.exec("UPDATE outbox_events SET status = 'PUBLISHED'")
        .await;
    one_line_for_the_marked_rows(&db, relay).await;
}

/// The same on PostgreSQL, with a publication that publishes UPDATEs (Debezium's default
/// `publish` is all operations; the one outboxd creates publishes INSERTs only).
#[tokio::test(flavor = "multi_thread")]
async fn one_update_of_many_outbox_rows_is_one_warning_postgres() {
    let db = Postgres::with_publication("ops_marked", "insert, update, delete").await;
    let relay = relay_with_marked_rows(&db).await;
    db.exec("UPDATE outbox_events SET status = 'PUBLISHED'")
        .await;
    one_line_for_the_marked_rows(&db, relay).await;
}

/// Kafka's stock Connect worker file (`tests/reference/connect-distributed.properties`):
/// its Connect-only settings (worker group, config/offset/status topics, REST listener,
/// plugins) are listed once, not warned about one by one, by `check` (one `ok` line) and
/// `run` (one INFO line); the note that `OUTBOXD_KAFKA_BOOTSTRAP` overrides the file's
/// `bootstrap.servers` stays a warning on its own line.
#[tokio::test(flavor = "multi_thread")]
async fn a_stock_connect_worker_file_is_one_summary_line() {
    let worker = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/reference/connect-distributed.properties");
    let worker = worker.to_str().unwrap();
    let db = MariaDb::new("ops_worker").await;
    let (path, port) = write_config_with(
        &db,
        &db.outbox_table(),
        "",
        suite::EXACTLY_ONCE,
        "worker.toml",
    );
    let config = path.to_str().unwrap();
    let ignored = "10 Kafka Connect worker setting(s) ignored, with no role in outboxd";
    let keys = "config.storage.replication.factor, config.storage.topic, group.id, listeners, \
                offset.flush.interval.ms, offset.storage.replication.factor, \
                offset.storage.topic, plugin.path, status.storage.replication.factor, \
                status.storage.topic";
    let (code, out, err) = run_cli(&["check", "--config", config, "--kafka-config", worker]);
    assert_eq!(code, 0, "{out}\n{err}");
    let kafka: Vec<&str> = out.lines().filter(|l| l.contains("] kafka: ")).collect();
    assert_eq!(kafka.len(), 2, "{out}");
    assert!(
        kafka[0].starts_with("[ok  ] kafka: worker settings: ")
            && kafka[0].contains(ignored)
            && kafka[0].ends_with(keys),
        "{}",
        kafka[0]
    );
    assert!(
        kafka[1].starts_with("[warn] kafka: setting bootstrap.servers: overridden by"),
        "{}",
        kafka[1]
    );

    let mut relay = Relay::start_with_args(
        &[config, "--kafka-config", worker],
        port,
        path.with_extension("log"),
    );
    let log = relay.log_text();
    let summary: Vec<&str> = log.lines().filter(|l| l.contains(ignored)).collect();
    assert_eq!(summary.len(), 1, "{log}");
    assert!(
        summary[0].contains(" INFO ") && summary[0].ends_with(keys),
        "{}",
        summary[0]
    );
    let warned: Vec<&str> = log
        .lines()
        .filter(|l| l.contains(" WARN ") && l.contains("Kafka worker setting"))
        .collect();
    assert_eq!(warned.len(), 1, "{}", warned.join("\n"));
    assert!(warned[0].contains("key=bootstrap.servers"), "{}", warned[0]);
    assert_eq!(relay.stop(), Some(0), "{}", relay.log_text());
}

/// SIGHUP no longer ends the relay undrained: it re-reads the unchanged file, says nothing
/// changed, and streaming goes on (events written after it are delivered).
#[tokio::test(flavor = "multi_thread")]
async fn sighup_keeps_the_relay_streaming() {
    let db = MariaDb::new("ops_sighup").await;
    let (path, port) = write_config_with(
        &db,
        &db.outbox_table(),
        "",
        suite::EXACTLY_ONCE,
        "connector.toml",
    );
    let mut relay = Relay::start(path, port);
    let pid = relay.pid().expect("running");
    let sent = std::process::Command::new("kill")
        .args(["-HUP", &pid.to_string()])
        .status()
        .expect("kill -HUP");
    assert!(sent.success());
    let after = OutboxEvent::new("Hup", "h-1", "Created", Some(r#"{"n":1}"#));
    db.insert(std::slice::from_ref(&after), false).await;
    let got = read_expecting(&[topic(&db, "Hup")], 1);
    let log = relay.log_text();
    assert_eq!(got.len(), 1, "log:\n{log}");
    assert!(
        log.contains("SIGHUP received: reading the configuration again")
            && log.contains("configuration reloaded: no connector changed"),
        "log:\n{log}"
    );
    assert_eq!(
        relay.stop(),
        Some(0),
        "a drained stop afterwards; log:\n{log}"
    );
}
