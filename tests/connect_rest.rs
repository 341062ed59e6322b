//! Kafka Connect's REST API (`run --rest-listen`) and SIGHUP reload, on real MariaDB and
//! Kafka, under a writer, exactly once: a connector created with `POST /connectors`, paused,
//! resumed, restarted, changed with `PUT /connectors/{name}/config`, stopped, resumed, kept
//! across a process restart and deleted delivers every row once; a connector file changed and
//! applied with SIGHUP restarts only that connector.

mod common;

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::connect::rest;
use common::kafka::read_topics;
use common::mariadb::{insert_events, MariaDb};
use common::relay::{free_port, test_dir, Relay};
use common::OutboxEvent;
use mysql_async::prelude::Queryable;
use serde_json::{json, Map, Value};

/// A Debezium MariaDB connector JSON's config for the test database's outbox table, routing
/// to `<route>.<aggregate_type>`.
fn connector(db: &MariaDb, name: &str, route: &str) -> Map<String, Value> {
    let (host, port, user, password) = &db.relay;
    let c = json!({
        "connector.class": "io.debezium.connector.mariadb.MariaDbConnector",
        "database.hostname": host,
        "database.port": port.to_string(),
        "database.user": user,
        "database.password": password,
        "database.server.id": common::unique_server_id().to_string(),
        "database.include.list": db.db,
        "table.include.list": db.outbox_table(),
        "topic.prefix": name,
        "snapshot.mode": "no_data",
        "key.converter": "org.apache.kafka.connect.storage.StringConverter",
        "value.converter": "org.apache.kafka.connect.storage.StringConverter",
        "transforms": "outbox",
        "transforms.outbox.type": "io.debezium.transforms.outbox.EventRouter",
        "transforms.outbox.table.field.event.key": "aggregate_id",
        "transforms.outbox.route.by.field": "aggregate_type",
        "transforms.outbox.route.topic.replacement": format!("{route}.${{routedByValue}}"),
        "transforms.outbox.table.fields.additional.placement": "event_type:header:eventType",
    });
    c.as_object().unwrap().clone()
}

/// Inserts one event every 20 ms (aggregate type `a`) until told to stop; the ids written.
struct Writer {
    stop: Arc<AtomicBool>,
    ids: Arc<Mutex<Vec<String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Writer {
    fn start(db: &MariaDb) -> Writer {
        let stop = Arc::new(AtomicBool::new(false));
        let ids = Arc::new(Mutex::new(Vec::new()));
        let (pool, table) = (db.pool.clone(), db.outbox_table());
        let (s, i) = (stop.clone(), ids.clone());
        let task = tokio::spawn(async move {
            let mut conn = pool.get_conn().await.unwrap();
            while !s.load(Ordering::SeqCst) {
                let e = OutboxEvent::new("a", "k", "Created", Some("{\"n\":1}"));
                insert_events(&mut conn, &table, std::slice::from_ref(&e)).await;
                i.lock().unwrap().push(e.id);
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        });
        Writer { stop, ids, task }
    }

    fn written(&self) -> usize {
        self.ids.lock().unwrap().len()
    }

    async fn finish(self) -> Vec<String> {
        self.stop.store(true, Ordering::SeqCst);
        self.task.await.unwrap();
        let ids = self.ids.lock().unwrap().clone();
        ids
    }
}

/// The REST call's (status, JSON body); panics when nothing answers.
fn call(port: u16, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
    let text = body.map(|b| b.to_string());
    let (code, out) = rest(port, method, path, text.as_deref())
        .unwrap_or_else(|| panic!("{method} {path}: no answer"));
    let v = serde_json::from_str(&out).unwrap_or(Value::Null);
    (code, v)
}

/// Waits until the connector's status shows `connector`/`task` states.
fn wait_state(port: u16, name: &str, connector: &str, task: Option<&str>, relay: &Relay) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut last = Value::Null;
    while Instant::now() < deadline {
        let (code, s) = call(port, "GET", &format!("/connectors/{name}/status"), None);
        if code == 200
            && s["connector"]["state"] == connector
            && s["tasks"].get(0).map(|t| t["state"].as_str().unwrap_or("")) == task
        {
            return s;
        }
        last = s;
        std::thread::sleep(Duration::from_millis(200));
    }
    panic!(
        "{name} never {connector}/{task:?}; last status {last}\nlog:\n{}",
        relay.log_text()
    );
}

fn wait_api(port: u16, relay: &Relay) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        if let Some((200, _)) = rest(port, "GET", "/", None) {
            return;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    panic!("REST API never answered; log:\n{}", relay.log_text());
}

/// How many events the connector has produced (its metric), 0 before the first.
fn produced(relay: &Relay, name: &str) -> f64 {
    common::relay::metric(
        &relay.metrics(),
        "outboxd_events_produced_total",
        &format!("connector=\"{name}\""),
    )
    .unwrap_or(0.0)
}

/// Every written id arrived exactly once.
fn assert_exactly_once(
    topics: &[String],
    ids: &[String],
    relay: &Relay,
) -> Vec<common::kafka::Consumed> {
    let got = read_topics(
        topics,
        ids.len(),
        Duration::from_secs(120),
        Duration::from_secs(3),
    );
    let mut seen: Vec<String> = got.iter().filter_map(|r| r.header("id")).collect();
    let dupes = seen.len() - {
        let mut s = seen.clone();
        s.sort();
        s.dedup();
        s.len()
    };
    seen.sort();
    let missing: Vec<usize> = ids
        .iter()
        .enumerate()
        .filter(|(_, i)| seen.binary_search(i).is_err())
        .map(|(n, _)| n)
        .collect();
    assert!(
        missing.is_empty() && dupes == 0,
        "{} written, {} read, {} missing (written as number {missing:?}), {dupes} duplicates\nlog:\n{}",
        ids.len(),
        got.len(),
        missing.len(),
        relay.log_text()
    );
    got
}

#[tokio::test(flavor = "multi_thread")]
async fn connector_lifecycle_through_the_rest_api_exactly_once() {
    let db = MariaDb::new("rest_life").await;
    let name = db.db.clone();
    let dir = test_dir(&name);
    let store = dir.join("rest-connectors");
    let (port, metrics) = (free_port(), free_port());
    let listen = format!("127.0.0.1:{port}");
    let metrics_listen = format!("127.0.0.1:{metrics}");
    let args = [
        "--rest-listen",
        listen.as_str(),
        "--rest-connectors",
        store.to_str().unwrap(),
        "--metrics-listen",
        metrics_listen.as_str(),
    ];
    let log = dir.join("outboxd.log");
    let mut relay = Relay::launch_with_args(&args, metrics, log.clone());
    wait_api(port, &relay);

    let (code, root) = call(port, "GET", "/", None);
    assert_eq!(code, 200);
    assert!(
        root["version"].is_string() && root.get("kafka_cluster_id").is_some(),
        "{root}"
    );
    assert_eq!(call(port, "GET", "/connectors", None), (200, json!([])));

    // A configuration outboxd refuses is refused with Connect's error shape, and not kept.
    let mut bad = connector(&db, &name, &name);
    bad.insert("topic.prefix".into(), json!("no spaces allowed"));
    let (code, e) = call(
        port,
        "POST",
        "/connectors",
        Some(&json!({"name": name, "config": bad})),
    );
    assert_eq!(code, 400, "{e}");
    assert_eq!(e["error_code"], 400, "{e}");
    assert!(
        e["message"].as_str().unwrap().contains("topic.prefix"),
        "{e}"
    );
    assert_eq!(call(port, "GET", "/connectors", None), (200, json!([])));
    assert!(!store.join(format!("{name}.json")).exists());
    // A body over the limit: Connect's error shape too.
    bad.insert("padding".into(), json!("x".repeat(3 << 20)));
    let (code, e) = call(
        port,
        "POST",
        "/connectors",
        Some(&json!({"name": name, "config": bad})),
    );
    assert_eq!((code, &e["error_code"]), (413, &json!(413)), "{e}");
    // A name that is not UTF-8: 400 in Connect's shape (the router's plain text before).
    let (code, e) = call(port, "GET", "/connectors/%FF/status", None);
    assert_eq!((code, &e["error_code"]), (400, &json!(400)), "{e}");
    // Names that are paths write nothing anywhere.
    let escape = dir.join("escaped");
    for bad in [
        format!(
            ".%2F..%2F..%2F{}",
            escape.file_name().unwrap().to_str().unwrap()
        ),
        "..".to_string(),
        ".hidden".to_string(),
    ] {
        let (code, e) = call(
            port,
            "PUT",
            &format!("/connectors/{bad}/config"),
            Some(&Value::Object(connector(&db, &name, &name))),
        );
        assert_eq!(code, 400, "{bad}: {e}");
    }
    let (code, e) = call(
        port,
        "POST",
        "/connectors",
        Some(&json!({"name": "", "config": connector(&db, &name, &name)})),
    );
    assert_eq!(code, 400, "empty name: {e}");
    assert!(!dir.join("escaped.json").exists() && !escape.with_extension("json").exists());
    assert_eq!(call(port, "GET", "/connectors", None), (200, json!([])));

    // Created.
    let cfg = connector(&db, &name, &name);
    let (code, info) = call(
        port,
        "POST",
        "/connectors",
        Some(&json!({"name": name, "config": cfg})),
    );
    assert_eq!(code, 201, "{info}\n{}", relay.log_text());
    assert_eq!(info["name"], name.as_str());
    assert_eq!(info["type"], "source");
    assert_eq!(info["config"]["database.password"], "[hidden]", "{info}");
    let (code, e) = call(
        port,
        "POST",
        "/connectors",
        Some(&json!({"name": name, "config": cfg})),
    );
    assert_eq!(code, 409, "{e}");
    assert_eq!(e["message"], format!("Connector {name} already exists"));
    wait_state(port, &name, "RUNNING", Some("RUNNING"), &relay);
    // Connect's RUNNING is "started"; rows count from the start position it reads at (the
    // binlog's end when it first connects: `snapshot.mode` no_data), so wait for that.
    relay.wait_ready(Duration::from_secs(60));

    let writer = Writer::start(&db);
    let topic = format!("{name}.a");
    let wait_produced = |relay: &Relay, more_than: f64| {
        let deadline = Instant::now() + Duration::from_secs(60);
        while produced(relay, &name) <= more_than {
            assert!(
                Instant::now() < deadline,
                "nothing produced\n{}",
                relay.log_text()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    wait_produced(&relay, 0.0);

    // A log level changed while it runs (Connect's /admin/loggers): the pipeline's DEBUG
    // lines (one per committed batch) stop at WARN and come back at DEBUG.
    let set_level = |level: &str| {
        let (code, changed) = call(
            port,
            "PUT",
            "/admin/loggers/outboxd.pipeline",
            Some(&json!({ "level": level })),
        );
        assert_eq!((code, changed), (200, json!(["outboxd.pipeline"])));
        std::thread::sleep(Duration::from_millis(200));
        relay.log_text().len()
    };
    let pipeline_lines = |from: usize| {
        relay.log_text()[from..]
            .matches("outboxd::pipeline")
            .count()
    };
    let mark = set_level("WARN");
    let before = produced(&relay, &name);
    wait_produced(&relay, before + 50.0);
    assert_eq!(pipeline_lines(mark), 0, "DEBUG lines at WARN");
    let (_, got) = call(
        port,
        "GET",
        "/admin/loggers/outboxd.pipeline.transactional",
        None,
    );
    assert_eq!(got["level"], "WARN", "{got}");
    let mark = set_level("DEBUG");
    let deadline = Instant::now() + Duration::from_secs(30);
    while pipeline_lines(mark) == 0 {
        assert!(Instant::now() < deadline, "no DEBUG lines back at DEBUG");
        std::thread::sleep(Duration::from_millis(100));
    }

    // Paused: nothing more is produced while the writer goes on.
    let (code, _) = call(port, "PUT", &format!("/connectors/{name}/pause"), None);
    assert_eq!(code, 202);
    wait_state(port, &name, "PAUSED", Some("PAUSED"), &relay);
    std::thread::sleep(Duration::from_millis(500));
    let at_pause = produced(&relay, &name);
    let written_at_pause = writer.written();
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(produced(&relay, &name), at_pause, "paused, yet produced");
    assert!(
        writer.written() > written_at_pause + 20,
        "the writer goes on"
    );
    let (code, _) = call(port, "PUT", &format!("/connectors/{name}/resume"), None);
    assert_eq!(code, 202);
    wait_state(port, &name, "RUNNING", Some("RUNNING"), &relay);
    wait_produced(&relay, at_pause);

    // Restarted (204; 202 with the status when includeTasks is asked).
    let (code, _) = call(port, "POST", &format!("/connectors/{name}/restart"), None);
    assert_eq!(code, 204);
    let (code, s) = call(
        port,
        "POST",
        &format!("/connectors/{name}/restart?includeTasks=true&onlyFailed=false"),
        None,
    );
    assert_eq!(code, 202, "{s}");
    assert_eq!(s["tasks"][0]["state"], "RESTARTING", "{s}");
    wait_state(port, &name, "RUNNING", Some("RUNNING"), &relay);

    // Changed: records from then on carry the new header.
    // As a runbook does it: the config read back (its password `[hidden]`), edited, sent.
    let (_, read_back) = call(port, "GET", &format!("/connectors/{name}/config"), None);
    assert_eq!(read_back["database.password"], "[hidden]");
    let mut changed = read_back.as_object().unwrap().clone();
    changed.insert(
        "transforms.outbox.table.fields.additional.placement".into(),
        json!("event_type:header:eventType,aggregate_type:header:aggType"),
    );
    let (code, info) = call(
        port,
        "PUT",
        &format!("/connectors/{name}/config"),
        Some(&Value::Object(changed.clone())),
    );
    assert_eq!(code, 200, "{info}");
    let (code, got) = call(port, "GET", &format!("/connectors/{name}/config"), None);
    assert_eq!(code, 200);
    assert_eq!(
        got["transforms.outbox.table.fields.additional.placement"],
        "event_type:header:eventType,aggregate_type:header:aggType"
    );
    wait_state(port, &name, "RUNNING", Some("RUNNING"), &relay);
    let after_change = produced(&relay, &name);
    wait_produced(&relay, after_change + 5.0);

    // Stopped: no task; resumed, it goes on from its checkpoint.
    let (code, _) = call(port, "PUT", &format!("/connectors/{name}/stop"), None);
    assert_eq!(code, 204);
    let s = wait_state(port, &name, "STOPPED", None, &relay);
    assert_eq!(s["tasks"], json!([]));
    let (code, _) = call(port, "PUT", &format!("/connectors/{name}/resume"), None);
    assert_eq!(code, 202);
    wait_state(port, &name, "RUNNING", Some("RUNNING"), &relay);

    // Topic tracking: the one topic its records went to.
    let topics_path = format!("/connectors/{name}/topics");
    let used = json!({ name.as_str(): {"topics": [topic.as_str()]} });
    assert_eq!(call(port, "GET", &topics_path, None), (200, used.clone()));

    // The process restarts: the created connector, as last changed and paused, is there
    // again, paused until resumed, its topics still listed.
    let (code, _) = call(port, "PUT", &format!("/connectors/{name}/pause"), None);
    assert_eq!(code, 202);
    wait_state(port, &name, "PAUSED", Some("PAUSED"), &relay);
    assert_eq!(relay.stop(), Some(0), "{}", relay.log_text());
    relay.spawn();
    wait_api(port, &relay);
    wait_state(port, &name, "PAUSED", Some("PAUSED"), &relay);
    assert_eq!(call(port, "GET", &topics_path, None), (200, used.clone()));
    // Reset: none until its next record, and none after a restart.
    let reset = format!("{topics_path}/reset");
    assert_eq!(call(port, "PUT", &reset, None).0, 202);
    let none = json!({ name.as_str(): {"topics": []} });
    assert_eq!(call(port, "GET", &topics_path, None), (200, none.clone()));
    assert_eq!(relay.stop(), Some(0), "{}", relay.log_text());
    relay.spawn();
    wait_api(port, &relay);
    wait_state(port, &name, "PAUSED", Some("PAUSED"), &relay);
    assert_eq!(call(port, "GET", &topics_path, None), (200, none));
    let (code, _) = call(port, "PUT", &format!("/connectors/{name}/resume"), None);
    assert_eq!(code, 202);
    wait_state(port, &name, "RUNNING", Some("RUNNING"), &relay);
    wait_for(
        port,
        &topics_path,
        "the topic listed again after its next record",
        std::slice::from_ref(&relay),
        |code, v| code == 200 && *v == used,
    );
    let (_, got) = call(port, "GET", &format!("/connectors/{name}/config"), None);
    assert!(
        got["transforms.outbox.table.fields.additional.placement"]
            .as_str()
            .unwrap()
            .contains("aggType"),
        "{got}"
    );
    let (code, list) = call(port, "GET", "/connectors?expand=status&expand=info", None);
    assert_eq!(code, 200);
    assert_eq!(
        list[&name]["status"]["tasks"][0]["state"], "RUNNING",
        "{list}"
    );
    assert_eq!(list[&name]["info"]["name"], name.as_str(), "{list}");

    let ids = writer.finish().await;
    let got = assert_exactly_once(std::slice::from_ref(&topic), &ids, &relay);
    let last = got.iter().max_by_key(|r| (r.partition, r.offset)).unwrap();
    assert_eq!(
        last.header("aggType").as_deref(),
        Some("a"),
        "changed config applied"
    );

    // Deleted: gone from the API and from the directory.
    assert_eq!(
        call(port, "DELETE", &format!("/connectors/{name}"), None).0,
        204
    );
    assert_eq!(call(port, "GET", "/connectors", None), (200, json!([])));
    let (code, e) = call(port, "GET", &format!("/connectors/{name}/status"), None);
    assert_eq!(code, 404);
    assert_eq!(
        e,
        json!({"error_code": 404, "message": format!("No status found for connector {name}")})
    );
    assert!(!store.join(format!("{name}.json")).exists());
    assert_eq!(relay.stop(), Some(0), "{}", relay.log_text());
}

/// Reads `topic` until `expected` records are there (and nothing more comes for 3 s): how
/// many times each event id was read.
fn id_counts(topic: &str, expected: usize) -> std::collections::BTreeMap<String, usize> {
    let got = read_topics(
        &[topic.to_string()],
        expected,
        Duration::from_secs(120),
        Duration::from_secs(3),
    );
    let mut counts = std::collections::BTreeMap::new();
    for id in got.iter().filter_map(|r| r.header("id")) {
        *counts.entry(id).or_insert(0) += 1;
    }
    counts
}

/// Where an offsets answer (`{"offsets": [{"partition", "offset"}]}`) resumes a MariaDB
/// connector: its partition and the offset's `gtids`. The rest is not a function of the
/// checkpoint alone (`file`/`pos` name where the binlog continues after it, `ts_sec` when
/// it was asked).
fn resume_point(answer: &Value) -> (Value, Value) {
    let first = &answer["offsets"][0];
    (first["partition"].clone(), first["offset"]["gtids"].clone())
}

/// MariaDB's GTID position at an offsets answer's `file`/`pos` (`BINLOG_GTID_POS`): a
/// Debezium offset names one point of the binlog, so this is its `gtids`.
async fn gtid_pos_at(db: &MariaDb, answer: &Value) -> String {
    let offset = &answer["offsets"][0]["offset"];
    let mut conn = db.pool.get_conn().await.unwrap();
    conn.exec_first::<Option<String>, _, _>(
        "SELECT BINLOG_GTID_POS(?, ?)",
        (
            offset["file"].as_str().unwrap().to_string(),
            offset["pos"].as_u64().unwrap(),
        ),
    )
    .await
    .unwrap()
    .flatten()
    .unwrap_or_default()
}

/// The GTID position `at` (of the offset's `file`/`pos`) is the offset's `gtids`, or later in
/// the same domain: other tests write to the same server between two of this test's
/// transactions, and those lie between the checkpoint and the next of this connector's.
fn at_or_after(at: &str, answer: &Value) {
    let gtids = answer["offsets"][0]["offset"]["gtids"]
        .as_str()
        .unwrap_or("");
    let split = |g: &str| -> Option<(String, u64)> {
        let (head, seq) = g.rsplit_once('-')?;
        let (domain, _server) = head.split_once('-')?;
        Some((domain.to_string(), seq.parse().ok()?))
    };
    match (split(at), split(gtids)) {
        (Some((d1, s1)), Some((d2, s2))) => {
            assert!(
                d1 == d2 && s1 >= s2,
                "file/pos at {at}, gtids {gtids}: {answer}"
            )
        }
        _ => panic!("file/pos at {at:?}, gtids {gtids:?}: {answer}"),
    }
}

/// Waits until `GET path` (a connector's offsets) lists one: the connector has read its
/// start position and stored it.
fn wait_checkpoint(port: u16, path: &str, relay: &Relay) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while call(port, "GET", path, None).1["offsets"]
        .as_array()
        .is_none_or(|o| o.is_empty())
    {
        assert!(Instant::now() < deadline, "{}", relay.log_text());
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// KIP-875's offsets through outboxd's checkpoint: refused while the connector runs; a
/// STOPPED connector set back with `PATCH` to the Debezium offset `GET` gave earlier delivers
/// the events after it again (and those before it not); reset with `DELETE`, it starts where
/// a connector without checkpoint starts (the binlog's current position: what was written
/// while it had none is not delivered, what comes after it is, once).
#[tokio::test(flavor = "multi_thread")]
async fn offsets_set_back_and_reset_through_the_rest_api() {
    let db = MariaDb::new("rest_offsets").await;
    let name = db.db.clone();
    let dir = test_dir(&name);
    let store = dir.join("rest-connectors");
    let (port, metrics) = (free_port(), free_port());
    let (listen, metrics_listen) = (format!("127.0.0.1:{port}"), format!("127.0.0.1:{metrics}"));
    let args = [
        "--rest-listen",
        listen.as_str(),
        "--rest-connectors",
        store.to_str().unwrap(),
        "--metrics-listen",
        metrics_listen.as_str(),
    ];
    let mut relay = Relay::launch_with_args(&args, metrics, dir.join("outboxd.log"));
    wait_api(port, &relay);
    let cfg = connector(&db, &name, &name);
    let (code, info) = call(
        port,
        "POST",
        "/connectors",
        Some(&json!({"name": name, "config": cfg})),
    );
    assert_eq!(code, 201, "{info}\n{}", relay.log_text());
    wait_state(port, &name, "RUNNING", Some("RUNNING"), &relay);
    let topic = format!("{name}.a");
    let path = format!("/connectors/{name}/offsets");
    // A connector without checkpoint starts at the binlog's position when it connects:
    // rows written before that are not its to deliver.
    wait_checkpoint(port, &path, &relay);
    let batch = || -> Vec<OutboxEvent> {
        (0..5)
            .map(|_| OutboxEvent::new("a", "k", "Created", Some("{}")))
            .collect()
    };
    let ids = |b: &[OutboxEvent]| b.iter().map(|e| e.id.clone()).collect::<Vec<_>>();

    // A, delivered (exactly once: the checkpoint is committed with the records), then its
    // offset; B after it.
    let a = batch();
    db.insert_into(&db.outbox_table(), &a, false).await;
    assert_eq!(id_counts(&topic, 5).len(), 5, "{}", relay.log_text());
    let (code, after_a) = call(port, "GET", &path, None);
    assert_eq!(code, 200, "{after_a}");
    let partition = after_a["offsets"][0]["partition"].clone();
    assert_eq!(partition, json!({"server": name}), "{after_a}");
    // Nothing of this connector follows A yet: file/pos are where the binlog ends, the same
    // point as gtids (or after it, past other tests' transactions on the same server).
    at_or_after(&gtid_pos_at(&db, &after_a).await, &after_a);
    let b = batch();
    db.insert_into(&db.outbox_table(), &b, false).await;
    assert_eq!(id_counts(&topic, 10).len(), 10, "{}", relay.log_text());

    // Refused while it runs, with Connect's words.
    for method in ["PATCH", "DELETE"] {
        let (code, e) = call(port, method, &path, Some(&after_a));
        assert_eq!(code, 400, "{method} while running: {e}");
        assert!(
            e["message"].as_str().unwrap().contains("STOPPED state"),
            "{e}"
        );
    }
    let (code, _) = call(port, "PUT", &format!("/connectors/{name}/stop"), None);
    assert_eq!(code, 204);
    wait_state(port, &name, "STOPPED", None, &relay);
    let (_, after_b) = call(port, "GET", &path, None);
    assert_ne!(
        resume_point(&after_b),
        resume_point(&after_a),
        "B moved the checkpoint"
    );

    // Bad requests change nothing: no offsets, another partition, a malformed offset.
    for (body, words) in [
        (
            json!({"offsets": []}),
            "Partitions / offsets need to be provided",
        ),
        (
            json!({"offsets": [{"partition": {"server": "other"}, "offset": after_a["offsets"][0]["offset"]}]}),
            "reads one source partition",
        ),
        (
            json!({"offsets": [{"partition": partition, "offset": {"file": 42}}]}),
            "malformed",
        ),
    ] {
        let (code, e) = call(port, "PATCH", &path, Some(&body));
        assert_eq!(code, 400, "{body}: {e}");
        assert!(e["message"].as_str().unwrap().contains(words), "{e}");
    }
    let (code, now) = call(port, "GET", &path, None);
    assert_eq!((code, resume_point(&now)), (200, resume_point(&after_b)));

    // Set back to A's offset: B comes again, A not.
    let (code, m) = call(port, "PATCH", &path, Some(&after_a));
    assert_eq!(code, 200, "{m}\n{}", relay.log_text());
    assert!(m["message"]
        .as_str()
        .unwrap()
        .contains("altered successfully"));
    let (code, now) = call(port, "GET", &path, None);
    assert_eq!((code, resume_point(&now)), (200, resume_point(&after_a)));
    // B follows A now: file/pos are where B begins, still the same point as gtids (or after
    // it, past other tests' transactions on the same server).
    at_or_after(&gtid_pos_at(&db, &now).await, &now);
    let (code, _) = call(port, "PUT", &format!("/connectors/{name}/resume"), None);
    assert_eq!(code, 202);
    wait_state(port, &name, "RUNNING", Some("RUNNING"), &relay);
    let counts = id_counts(&topic, 15);
    for id in ids(&a) {
        assert_eq!(counts.get(&id), Some(&1), "A's {id}: {counts:?}");
    }
    for id in ids(&b) {
        assert_eq!(counts.get(&id), Some(&2), "B's {id}: {counts:?}");
    }

    // Reset: no checkpoint; C, written while it has none, is not delivered; D is, once.
    // A resume sent while the reset is under way waits for it: the connector must not
    // start from the checkpoint being removed (it would deliver C) while the reset says 200.
    // The reset is sent 30 ms before the resume; on a busy machine the resume may still come
    // first (then the reset is refused, the connector running, and C delivered: a correct
    // answer to that order), so the race is run again, with a new C, until the reset is first.
    let mut attempt = 0;
    let c = loop {
        attempt += 1;
        let (code, _) = call(port, "PUT", &format!("/connectors/{name}/stop"), None);
        assert_eq!(code, 204);
        wait_state(port, &name, "STOPPED", None, &relay);
        let c = batch();
        db.insert_into(&db.outbox_table(), &c, false).await;
        let reset = {
            let path = path.clone();
            std::thread::spawn(move || call(port, "DELETE", &path, None))
        };
        std::thread::sleep(Duration::from_millis(30));
        let (code, _) = call(port, "PUT", &format!("/connectors/{name}/resume"), None);
        assert_eq!(code, 202);
        let (code, m) = reset.join().unwrap();
        let text = m["message"].as_str().unwrap_or_default();
        if code == 400 && text.contains("STOPPED state") && attempt < 5 {
            wait_state(port, &name, "RUNNING", Some("RUNNING"), &relay);
            continue;
        }
        assert_eq!(code, 200, "{m}\n{}", relay.log_text());
        assert!(text.contains("reset successfully"), "{m}");
        break c;
    };
    wait_state(port, &name, "RUNNING", Some("RUNNING"), &relay);
    // Started: its checkpoint is back (the start position is stored before any event).
    wait_checkpoint(port, &path, &relay);
    let d = batch();
    db.insert_into(&db.outbox_table(), &d, false).await;
    let counts = id_counts(&topic, 20);
    for id in ids(&c) {
        assert!(!counts.contains_key(&id), "C's {id} delivered: {counts:?}");
    }
    for id in ids(&d) {
        assert_eq!(counts.get(&id), Some(&1), "D's {id}: {counts:?}");
    }
    // Unknown connector.
    assert_eq!(
        call(port, "DELETE", "/connectors/nope/offsets", None).0,
        404
    );
    assert_eq!(relay.stop(), Some(0), "{}", relay.log_text());
}

/// Writes connector file `path` for `cfg` (a Debezium connector JSON).
fn write_file(path: &Path, name: &str, cfg: &Map<String, Value>) {
    std::fs::write(path, json!({"name": name, "config": cfg}).to_string()).unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn sighup_applies_a_changed_file_connector_by_connector_exactly_once() {
    let db = MariaDb::new("rest_hup").await;
    let other = MariaDb::new("rest_hup2").await;
    let (a, b) = (db.db.clone(), other.db.clone());
    let dir = test_dir(&a);
    let (fa, fb) = (dir.join("a.json"), dir.join("b.json"));
    let cfg_a = connector(&db, &a, &a);
    write_file(&fa, &a, &cfg_a);
    write_file(&fb, &b, &connector(&other, &b, &b));
    let metrics = free_port();
    let metrics_listen = format!("127.0.0.1:{metrics}");
    let mut relay = Relay::start_with_args(
        &[
            fa.to_str().unwrap(),
            fb.to_str().unwrap(),
            "--metrics-listen",
            metrics_listen.as_str(),
        ],
        metrics,
        dir.join("outboxd.log"),
    );
    let wa = Writer::start(&db);
    let wb = Writer::start(&other);
    let wait_produced = |relay: &Relay, name: &str, more_than: f64| {
        let deadline = Instant::now() + Duration::from_secs(60);
        while produced(relay, name) <= more_than {
            assert!(
                Instant::now() < deadline,
                "nothing produced\n{}",
                relay.log_text()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    wait_produced(&relay, &a, 0.0);
    wait_produced(&relay, &b, 0.0);

    // A file that does not load changes nothing.
    std::fs::write(&fa, "{ not json").unwrap();
    let hup = |relay: &Relay| {
        let pid = relay.pid().unwrap().to_string();
        assert!(std::process::Command::new("kill")
            .args(["-HUP", &pid])
            .status()
            .unwrap()
            .success());
    };
    hup(&relay);
    let deadline = Instant::now() + Duration::from_secs(30);
    while !relay
        .log_text()
        .contains("the configuration was not applied")
    {
        assert!(Instant::now() < deadline, "{}", relay.log_text());
        std::thread::sleep(Duration::from_millis(100));
    }

    // A changed file: only its connector restarts, with the new settings.
    let mut changed = cfg_a.clone();
    changed.insert(
        "transforms.outbox.table.fields.additional.placement".into(),
        json!("event_type:header:eventType,aggregate_type:header:aggType"),
    );
    write_file(&fa, &a, &changed);
    let starts = |log: &str| {
        log.lines()
            .filter(|l| l.contains("starting connector") && l.contains(b.as_str()))
            .count()
    };
    let starts_b = starts(&relay.log_text());
    let before = produced(&relay, &a);
    hup(&relay);
    let deadline = Instant::now() + Duration::from_secs(30);
    while !relay.log_text().contains("configuration reloaded") {
        assert!(Instant::now() < deadline, "{}", relay.log_text());
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        relay.log_text().contains(&format!("changed=[\"{a}\"]")),
        "{}",
        relay.log_text()
    );
    wait_produced(&relay, &a, before + 10.0);
    assert_eq!(starts(&relay.log_text()), starts_b, "{b} was not restarted");

    let (ids_a, ids_b) = (wa.finish().await, wb.finish().await);
    let got = assert_exactly_once(&[format!("{a}.a")], &ids_a, &relay);
    let last = got.iter().max_by_key(|r| (r.partition, r.offset)).unwrap();
    assert_eq!(
        last.header("aggType").as_deref(),
        Some("a"),
        "new settings applied"
    );
    assert_exactly_once(&[format!("{b}.a")], &ids_b, &relay);
    assert_eq!(relay.stop(), Some(0), "{}", relay.log_text());
}

/// A request body made from a side's connector config.
type BodyOf<'a> = dyn Fn(&Map<String, Value>) -> Value + 'a;

/// The JSON's shape: object keys (sorted) with their values' shapes, arrays of shapes, and
/// `"string"`, `"number"`, `"bool"`, `null` for scalars; `skip` keys keep no shape (values
/// that differ by nature: a config map's own keys, an offset's fields).
fn shape(v: &Value, skip: &[&str]) -> Value {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            Value::Object(
                keys.into_iter()
                    .map(|k| {
                        let s = if skip.contains(&k.as_str()) {
                            json!("*")
                        } else {
                            shape(&m[k], skip)
                        };
                        (k.clone(), s)
                    })
                    .collect(),
            )
        }
        Value::Array(a) => Value::Array(a.iter().map(|e| shape(e, skip)).collect()),
        Value::String(_) => json!("string"),
        Value::Number(_) => json!("number"),
        Value::Bool(_) => json!("bool"),
        Value::Null => Value::Null,
    }
}

/// A kafka-connect-py (`kc`) command against `port`: (exit code, stdout); `None` when the
/// client is not installed (`scripts/connect.sh resolve` installs it).
fn kc(port: u16, args: &[&str]) -> Option<(i32, String)> {
    let bin = Path::new(env!("CARGO_MANIFEST_DIR")).join(".state/connect/kc/bin/kc");
    if !bin.exists() {
        return None;
    }
    let out = std::process::Command::new(bin)
        .arg("--url")
        .arg(format!("http://127.0.0.1:{port}"))
        .args(args)
        .output()
        .unwrap();
    Some((
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).trim().to_string(),
    ))
}

/// The same requests (curl-like, then kafka-connect-py's `kc`) to a real Kafka Connect worker
/// running Debezium's MariaDB connector and to outboxd, on the same connector JSON: the same
/// status codes, error messages and body shapes.
#[tokio::test(flavor = "multi_thread")]
async fn answers_as_kafka_connect_answers() {
    let db = MariaDb::new("rest_same").await;
    let name = db.db.clone();
    // Debezium's account: the privileges its MariaDB connector checks.
    let user = format!("dbz{}", &name[name.len().saturating_sub(12)..]).replace('_', "");
    db.exec(&format!(
        "CREATE USER '{user}'@'%' IDENTIFIED BY 'dbz-secret';
         GRANT SELECT, RELOAD, SHOW DATABASES, LOCK TABLES, REPLICATION SLAVE, BINLOG MONITOR,
           REPLICATION MASTER ADMIN ON *.* TO '{user}'@'%'"
    ))
    .await;
    let Some(worker) = common::connect::ConnectWorker::start(
        common::connect::Plugin::Mariadb,
        &format!("{name}_connect"),
        &[("offset.flush.interval.ms", "1000")],
    ) else {
        db.exec(&format!("DROP USER '{user}'@'%'")).await;
        return;
    };
    let dir = test_dir(&name);
    let config = |server_id: u32| {
        let mut c = connector(&db, &name, &name);
        c.insert("database.user".into(), json!(user));
        c.insert("database.password".into(), json!("dbz-secret"));
        c.insert("database.server.id".into(), json!(server_id.to_string()));
        c.insert("snapshot.locking.mode".into(), json!("none"));
        c.insert(
            "schema.history.internal".into(),
            json!("io.debezium.storage.file.history.FileSchemaHistory"),
        );
        c.insert(
            "schema.history.internal.file.filename".into(),
            json!(dir
                .join(format!("{server_id}.history"))
                .display()
                .to_string()),
        );
        c
    };
    let (port, metrics) = (free_port(), free_port());
    let (listen, metrics_listen) = (format!("127.0.0.1:{port}"), format!("127.0.0.1:{metrics}"));
    let store = dir.join("rest-connectors");
    let mut relay = Relay::launch_with_args(
        &[
            "--rest-listen",
            listen.as_str(),
            "--rest-connectors",
            store.to_str().unwrap(),
            "--metrics-listen",
            metrics_listen.as_str(),
            "--kafka-config",
            worker.worker_file.to_str().unwrap(),
        ],
        metrics,
        dir.join("outboxd.log"),
    );
    wait_api(port, &relay);
    let sides = [
        (
            "Kafka Connect",
            worker.port,
            config(common::unique_server_id()),
        ),
        ("outboxd", port, config(common::unique_server_id())),
    ];
    // Each step on both sides: the same status code, and the same shape (or the same body).
    let step = |what: &str,
                method: &str,
                path: &str,
                body: Option<&BodyOf<'_>>,
                same_body: bool,
                skip: &[&str]| {
        let answers: Vec<(u16, Value)> = sides
            .iter()
            .map(|(_, p, cfg)| call(*p, method, path, body.map(|b| b(cfg)).as_ref()))
            .collect();
        let (ours, theirs) = (&answers[1], &answers[0]);
        assert_eq!(
            ours.0, theirs.0,
            "{what}: status code; Connect {theirs:?}, outboxd {ours:?}"
        );
        if same_body {
            assert_eq!(ours.1, theirs.1, "{what}: body");
        } else {
            assert_eq!(
                shape(&ours.1, skip),
                shape(&theirs.1, skip),
                "{what}: shape; Connect {theirs:?}, outboxd {ours:?}"
            );
        }
        answers
    };
    let wait_both = |state: &str, task: Option<&str>| {
        for (who, p, _) in &sides {
            let deadline = Instant::now() + Duration::from_secs(90);
            loop {
                let (_, s) = call(*p, "GET", &format!("/connectors/{name}/status"), None);
                if s["connector"]["state"] == state
                    && s["tasks"].get(0).map(|t| t["state"].as_str().unwrap_or("")) == task
                {
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "{who}: never {state}/{task:?}: {s}\nConnect log:\n{}\noutboxd log:\n{}",
                    worker.log_text(),
                    relay.log_text()
                );
                std::thread::sleep(Duration::from_millis(250));
            }
        }
    };
    let create = |cfg: &Map<String, Value>| json!({"name": name, "config": cfg});
    let config_only = |cfg: &Map<String, Value>| Value::Object(cfg.clone());
    let none: &[&str] = &[];
    let cfg_keys: &[&str] = &["config", "trace"];

    step("GET /", "GET", "/", None, false, none);
    step("no connectors", "GET", "/connectors", None, true, none);
    step(
        "create",
        "POST",
        "/connectors",
        Some(&create),
        false,
        cfg_keys,
    );
    step(
        "create again",
        "POST",
        "/connectors",
        Some(&create),
        true,
        none,
    );
    wait_both("RUNNING", Some("RUNNING"));
    step(
        "status",
        "GET",
        &format!("/connectors/{name}/status"),
        None,
        false,
        none,
    );
    step(
        "info",
        "GET",
        &format!("/connectors/{name}"),
        None,
        false,
        cfg_keys,
    );
    let configs = step(
        "config",
        "GET",
        &format!("/connectors/{name}/config"),
        None,
        false,
        none,
    );
    // The same keys as given, the password hidden by outboxd (Connect shows what it stores).
    assert_eq!(configs[1].1["database.password"], "[hidden]");
    step(
        "tasks",
        "GET",
        &format!("/connectors/{name}/tasks"),
        None,
        false,
        cfg_keys,
    );
    step(
        "expand",
        "GET",
        "/connectors?expand=status&expand=info",
        None,
        false,
        cfg_keys,
    );
    // Connect (Jersey) takes a path with a trailing `/` as the path.
    step(
        "expand, trailing slash",
        "GET",
        "/connectors/?expand=status",
        None,
        false,
        cfg_keys,
    );
    step(
        "config, trailing slash",
        "GET",
        &format!("/connectors/{name}/config/"),
        None,
        false,
        none,
    );
    step(
        "pause",
        "PUT",
        &format!("/connectors/{name}/pause"),
        None,
        true,
        none,
    );
    wait_both("PAUSED", Some("PAUSED"));
    step(
        "paused status",
        "GET",
        &format!("/connectors/{name}/status"),
        None,
        false,
        none,
    );
    step(
        "resume",
        "PUT",
        &format!("/connectors/{name}/resume"),
        None,
        true,
        none,
    );
    wait_both("RUNNING", Some("RUNNING"));
    step(
        "restart",
        "POST",
        &format!("/connectors/{name}/restart"),
        None,
        true,
        none,
    );
    wait_both("RUNNING", Some("RUNNING"));
    step(
        "restart with tasks",
        "POST",
        &format!("/connectors/{name}/restart?includeTasks=true&onlyFailed=false"),
        None,
        false,
        none,
    );
    wait_both("RUNNING", Some("RUNNING"));
    step(
        "update config",
        "PUT",
        &format!("/connectors/{name}/config"),
        Some(&config_only),
        false,
        cfg_keys,
    );
    wait_both("RUNNING", Some("RUNNING"));
    // After the offsets reset above, the connector has no checkpoint: as Debezium with
    // snapshot.mode=no_data, it starts where the binlog ends when it connects, a moment after
    // it reports RUNNING (Connect too). outboxd commits that position at once; the event is
    // written after it, so that it is not written before the start position is taken.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (_, o) = call(port, "GET", &format!("/connectors/{name}/offsets"), None);
        if o["offsets"].as_array().is_some_and(|a| !a.is_empty()) {
            break;
        }
        assert!(Instant::now() < deadline, "outboxd: no start position: {o}");
        std::thread::sleep(Duration::from_millis(200));
    }
    // An event, so that both have an offset to show (Debezium commits one only after records).
    let e = OutboxEvent::new("a", "k", "Created", Some("{}"));
    db.insert_into(&db.outbox_table(), std::slice::from_ref(&e), false)
        .await;
    for (who, p, _) in &sides {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let (_, o) = call(*p, "GET", &format!("/connectors/{name}/offsets"), None);
            if o["offsets"].as_array().is_some_and(|a| !a.is_empty()) {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{who}: no offset after an event: {o}"
            );
            std::thread::sleep(Duration::from_millis(500));
        }
    }
    // Topic tracking (KIP-558): both list the routed topic (Connect may list the schema
    // change topic too), a reset empties both, the next event lists it again.
    let topics_path = format!("/connectors/{name}/topics");
    let routed = format!("{name}.a");
    let lists = |p: u16, with: bool| {
        let (code, v) = call(p, "GET", &topics_path, None);
        let topics = v[&name]["topics"].as_array().cloned().unwrap_or_default();
        code == 200
            && v.as_object().is_some_and(|o| o.len() == 1)
            && topics.contains(&json!(routed)) == with
            && (with || topics.is_empty())
    };
    let wait_lists = |with: bool| {
        for (who, p, _) in &sides {
            let deadline = Instant::now() + Duration::from_secs(60);
            while !lists(*p, with) {
                assert!(
                    Instant::now() < deadline,
                    "{who}: topics never {}: {:?}",
                    if with { "listed" } else { "empty" },
                    call(*p, "GET", &topics_path, None)
                );
                std::thread::sleep(Duration::from_millis(250));
            }
        }
    };
    wait_lists(true);
    step("topics", "GET", &topics_path, None, false, &["topics"]);
    assert_eq!(
        call(port, "GET", &topics_path, None).1,
        json!({ name.as_str(): {"topics": [routed.as_str()]} })
    );
    step(
        "reset topics",
        "PUT",
        &format!("{topics_path}/reset"),
        None,
        true,
        none,
    );
    wait_lists(false);
    step(
        "topics of an unknown connector",
        "GET",
        "/connectors/nope/topics",
        None,
        true,
        none,
    );
    step(
        "a method the path does not take",
        "POST",
        &topics_path,
        None,
        true,
        none,
    );
    step(
        "reset topics of an unknown connector",
        "PUT",
        "/connectors/nope/topics/reset",
        None,
        true,
        none,
    );
    let e = OutboxEvent::new("a", "k", "Created", Some("{}"));
    db.insert_into(&db.outbox_table(), std::slice::from_ref(&e), false)
        .await;
    wait_lists(true);

    // KIP-875: each side's own offsets (a Debezium offset of the same database on both), not
    // to be changed while the connector runs.
    let offsets_path = format!("/connectors/{name}/offsets");
    let own: Vec<(Value, Value)> = sides
        .iter()
        .map(|(_, p, cfg)| {
            (
                cfg["database.server.id"].clone(),
                call(*p, "GET", &offsets_path, None).1,
            )
        })
        .collect();
    let own_offsets = |cfg: &Map<String, Value>| {
        own.iter()
            .find(|(id, _)| *id == cfg["database.server.id"])
            .map(|(_, o)| o.clone())
            .unwrap()
    };
    step(
        "alter offsets while running",
        "PATCH",
        &offsets_path,
        Some(&own_offsets),
        true,
        none,
    );
    step(
        "reset offsets while running",
        "DELETE",
        &offsets_path,
        None,
        true,
        none,
    );
    step(
        "stop",
        "PUT",
        &format!("/connectors/{name}/stop"),
        None,
        true,
        none,
    );
    wait_both("STOPPED", None);
    step(
        "stopped status",
        "GET",
        &format!("/connectors/{name}/status"),
        None,
        false,
        none,
    );
    step(
        "offsets",
        "GET",
        &format!("/connectors/{name}/offsets"),
        None,
        false,
        &["offset"],
    );
    let no_offsets = |_: &Map<String, Value>| json!({"offsets": []});
    step(
        "alter no offsets",
        "PATCH",
        &offsets_path,
        Some(&no_offsets),
        true,
        none,
    );
    step(
        "alter offsets of an unknown connector",
        "PATCH",
        "/connectors/nope/offsets",
        Some(&own_offsets),
        true,
        none,
    );
    step("reset offsets", "DELETE", &offsets_path, None, true, none);
    step(
        "offsets after reset",
        "GET",
        &offsets_path,
        None,
        true,
        none,
    );
    step(
        "alter offsets",
        "PATCH",
        &offsets_path,
        Some(&own_offsets),
        true,
        none,
    );
    let altered = step(
        "offsets after alter",
        "GET",
        &offsets_path,
        None,
        false,
        &["offset"],
    );
    assert_eq!(
        resume_point(&altered[1].1),
        resume_point(&own[1].1),
        "outboxd's offsets read back as set"
    );
    step(
        "resume stopped",
        "PUT",
        &format!("/connectors/{name}/resume"),
        None,
        true,
        none,
    );
    wait_both("RUNNING", Some("RUNNING"));
    step(
        "unknown status",
        "GET",
        "/connectors/nope/status",
        None,
        true,
        none,
    );
    // Log levels (KIP-495/KIP-976): Connect's answers, codes and messages.
    let level = |l: &str| {
        let l = l.to_string();
        move |_: &Map<String, Value>| json!({ "level": l })
    };
    let logger = "/admin/loggers/io.debezium.connector.mariadb.MariaDbConnector";
    step(
        "root logger",
        "GET",
        "/admin/loggers/root",
        None,
        false,
        none,
    );
    step(
        "unknown logger",
        "GET",
        "/admin/loggers/io.nope.Nothing",
        None,
        true,
        none,
    );
    step(
        "set a logger",
        "PUT",
        logger,
        Some(&level("debug")),
        true,
        none,
    );
    step("a set logger", "GET", logger, None, false, none);
    step(
        "invalid level",
        "PUT",
        logger,
        Some(&level("LOUD")),
        true,
        none,
    );
    step(
        "no level",
        "PUT",
        logger,
        Some(&|_: &Map<String, Value>| json!({})),
        true,
        none,
    );
    step(
        "cluster scope",
        "PUT",
        &format!("{logger}?scope=cluster"),
        Some(&level("INFO")),
        true,
        none,
    );
    // The list: Connect's every JVM logger, outboxd's the log targets with a level of their
    // own, and the Debezium names set, as given (this one stands for the MySQL/MariaDB
    // source's target).
    let lists: Vec<(u16, Value)> = sides
        .iter()
        .map(|(_, p, _)| call(*p, "GET", "/admin/loggers", None))
        .collect();
    assert_eq!(lists[0].0, 200, "{:?}", lists[0]);
    assert_eq!(lists[1].0, 200, "{:?}", lists[1]);
    let set_name = logger.trim_start_matches("/admin/loggers/");
    for listed in [&lists[0].1[set_name], &lists[1].1[set_name]] {
        assert_eq!(listed["level"], "INFO", "{set_name}: {listed}");
        assert!(listed["last_modified"].is_number(), "{listed}");
    }
    assert_eq!(
        lists[1].1["outboxd.source.mysql"]["level"], "INFO",
        "{}",
        lists[1].1
    );
    step(
        "unknown pause",
        "PUT",
        "/connectors/nope/pause",
        None,
        true,
        none,
    );
    step(
        "unknown config",
        "GET",
        "/connectors/nope/config",
        None,
        true,
        none,
    );
    step("unknown path", "GET", "/nothing-here", None, true, none);
    // Connect's plugin aliases: the simple class name, and that without `Connector`.
    for alias in ["MariaDbConnector", "MariaDb"] {
        step(
            &format!("validate through the alias {alias}"),
            "PUT",
            &format!("/connector-plugins/{alias}/config/validate"),
            Some(&config_only),
            false,
            &["configs", "groups"],
        );
    }
    step(
        "validate through another plugin than the config's",
        "PUT",
        "/connector-plugins/NoSuchConnector/config/validate",
        Some(&config_only),
        true,
        none,
    );
    // Without `connector.class`, Connect answers 500 with the whole configuration in its
    // message (its password too); outboxd answers the unknown plugin's 404.
    // Connect lists the plugins on its classpath (here only the MariaDB connector); outboxd
    // the three connector classes it runs: every one Connect lists, alike.
    let (_, theirs) = call(worker.port, "GET", "/connector-plugins", None);
    let (_, ours) = call(port, "GET", "/connector-plugins", None);
    for p in theirs.as_array().unwrap() {
        assert!(ours.as_array().unwrap().contains(p), "{p} in {ours}");
    }

    // kafka-connect-py, as a runbook would call it.
    if kc(port, &["info"]).is_none() {
        eprintln!("kafka-connect-py not installed (scripts/connect.sh resolve installs it): kc steps skipped");
    }
    for args in [
        vec!["info"],
        vec!["list"],
        vec!["status", name.as_str()],
        vec!["pause", name.as_str()],
        vec!["resume", name.as_str()],
        vec!["restart", name.as_str(), "-i", "-o"],
        vec!["get", "nope"],
    ] {
        let (Some(theirs), Some(ours)) = (kc(worker.port, &args), kc(port, &args)) else {
            break;
        };
        assert_eq!(ours.0, theirs.0, "kc {args:?}: exit code");
        let parse = |s: &str| serde_json::from_str::<Value>(s).map(|v| shape(&v, none));
        match (parse(&theirs.1), parse(&ours.1)) {
            (Ok(t), Ok(o)) => assert_eq!(o, t, "kc {args:?}: {} vs {}", theirs.1, ours.1),
            _ => assert_eq!(
                ours.1.replace(&port.to_string(), "PORT"),
                theirs.1.replace(&worker.port.to_string(), "PORT"),
                "kc {args:?}"
            ),
        }
        let state = if args[0] == "pause" {
            "PAUSED"
        } else {
            "RUNNING"
        };
        wait_both(state, Some(state));
    }

    step(
        "delete",
        "DELETE",
        &format!("/connectors/{name}"),
        None,
        true,
        none,
    );
    step("deleted", "GET", "/connectors", None, true, none);
    assert_eq!(relay.stop(), Some(0), "{}", relay.log_text());
    drop(worker);
    db.exec(&format!("DROP USER '{user}'@'%'")).await;
}

/// `curl` (status code, body) for a request to the REST API with `extra` arguments.
fn curl(url: &str, extra: &[&str]) -> (u16, String) {
    let out = std::process::Command::new("curl")
        .args(["-s", "-w", "\n%{http_code}", "--max-time", "20"])
        .args(extra)
        .arg(url)
        .output()
        .expect("curl");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", &text));
    (code.trim().parse().unwrap_or(0), body.to_string())
}

/// An `https://` listener with the worker file's keystore, and Connect's Basic
/// authentication from the JAAS file `KAFKA_OPTS` names: only the file's user gets in.
#[tokio::test(flavor = "multi_thread")]
async fn https_listener_with_basic_authentication() {
    let dir = test_dir("rest_tls");
    let users = dir.join("connect.password");
    std::fs::write(&users, "operator: op-secret\n").unwrap();
    let jaas = dir.join("jaas.conf");
    std::fs::write(
        &jaas,
        format!(
            "KafkaConnect {{\n  org.apache.kafka.connect.rest.basic.auth.extension.PropertyFileLoginModule required\n  file=\"{}\";\n}};\n",
            users.display()
        ),
    )
    .unwrap();
    let worker = dir.join("worker.properties");
    std::fs::write(
        &worker,
        format!(
            "bootstrap.servers={}\nlisteners=https://127.0.0.1:8443\n\
             listeners.https.ssl.keystore.location={}\n\
             listeners.https.ssl.keystore.password={}\n\
             listeners.https.ssl.keystore.type=PKCS12\n\
             rest.extension.classes=org.apache.kafka.connect.rest.basic.auth.extension.BasicAuthSecurityRestExtension\n\
             topic.tracking.allow.reset=false\n",
            common::kafka_bootstrap(),
            common::tls::file("server.p12"),
            common::tls::KEYSTORE_PASSWORD,
        ),
    )
    .unwrap();
    let (port, metrics) = (free_port(), free_port());
    let listen = format!("https://127.0.0.1:{port}");
    let metrics_listen = format!("127.0.0.1:{metrics}");
    let store = dir.join("rest-connectors");
    let opts = format!("-Djava.security.auth.login.config={}", jaas.display());
    let mut relay = Relay::launch_with_env(
        &[
            "--rest-listen",
            listen.as_str(),
            "--rest-connectors",
            store.to_str().unwrap(),
            "--kafka-config",
            worker.to_str().unwrap(),
            "--metrics-listen",
            metrics_listen.as_str(),
        ],
        metrics,
        dir.join("outboxd.log"),
        &[("KAFKA_OPTS", opts.as_str())],
    );
    let ca = common::tls::file("ca.pem");
    let url = format!("https://localhost:{port}/connectors");
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut last = (0, String::new());
    while Instant::now() < deadline {
        last = curl(&url, &["--cacert", &ca, "-u", "operator:op-secret"]);
        if last.0 == 200 {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(last, (200, "[]".into()), "{}", relay.log_text());
    // Without credentials, or with a wrong password: Connect's 401.
    let none = curl(&url, &["--cacert", &ca]);
    assert_eq!(none, (401, "User cannot access the resource.".into()));
    let wrong = curl(&url, &["--cacert", &ca, "-u", "operator:nope"]);
    assert_eq!(wrong.0, 401);
    // Plain HTTP to the TLS port gets nothing served; TLS is verified against the CA.
    let plain = curl(
        &format!("http://127.0.0.1:{port}/connectors"),
        &["-u", "operator:op-secret"],
    );
    assert_ne!(plain.0, 200, "{plain:?}");
    let untrusted = curl(&url, &["-u", "operator:op-secret"]);
    assert_eq!(untrusted.0, 0, "no CA given: curl refuses the certificate");
    // Topic tracking as the worker file sets it: listed, not reset (Connect's 403).
    let topics = format!("{url}/nope/topics");
    assert_eq!(
        curl(&topics, &["--cacert", &ca, "-u", "operator:op-secret"]),
        (200, r#"{"nope":{"topics":[]}}"#.into())
    );
    assert_eq!(
        curl(
            &format!("{topics}/reset"),
            &["--cacert", &ca, "-u", "operator:op-secret", "-X", "PUT"]
        ),
        (
            403,
            r#"{"error_code":403,"message":"Topic tracking reset is disabled."}"#.into()
        )
    );
    // The password is in no log line.
    let log = relay.log_text();
    assert!(
        !log.contains("op-secret") && !log.contains(common::tls::KEYSTORE_PASSWORD),
        "{log}"
    );
    assert_eq!(relay.stop(), Some(0), "{log}");
}

/// Polls `GET path` on `port` until `ok` holds of the answer (60 s at most); the last one.
fn wait_for(
    port: u16,
    path: &str,
    what: &str,
    members: &[Relay],
    ok: impl Fn(u16, &Value) -> bool,
) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut last = Value::Null;
    while Instant::now() < deadline {
        if let Some((code, body)) = rest(port, "GET", path, None) {
            let v: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
            if ok(code, &v) {
                return v;
            }
            last = v;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    panic!(
        "{what}: GET {path} on port {port} never did; last answer {last}\n{}",
        common::group::logs(members)
    );
}

/// The group's shared connector configurations: three members started with no connector
/// file, each serving the REST API; a connector created through one member reaches the
/// others, is run by one, is paused and resumed through another, fails over when its owner
/// is killed (`kill -9`) under a writer, and is deleted through a survivor: every row once.
/// Its password is an `${env:...}` reference member 2's environment lacks: member 2 lists
/// it and answers for it, but never runs it.
#[tokio::test(flavor = "multi_thread")]
async fn a_connector_created_on_one_member_fails_over_in_a_three_member_group() {
    let db = MariaDb::new("rest_group").await;
    let name = db.db.clone();
    let dir = test_dir(&name);
    let group = common::unique("restgroup");
    const PASSWORD_VAR: &str = "OUTBOXD_TEST_GROUP_DB_PASSWORD";
    let password = db.relay.3.clone();
    let ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let mut members: Vec<Relay> = ports
        .iter()
        .enumerate()
        .map(|(i, port)| {
            let metrics = free_port();
            let (listen, metrics_listen) =
                (format!("127.0.0.1:{port}"), format!("127.0.0.1:{metrics}"));
            let args = [
                "--group",
                group.as_str(),
                "--rest-listen",
                listen.as_str(),
                "--metrics-listen",
                metrics_listen.as_str(),
            ];
            let env: &[(&str, &str)] = if i < 2 {
                &[(PASSWORD_VAR, password.as_str())]
            } else {
                &[]
            };
            Relay::launch_with_env(&args, metrics, dir.join(format!("member{i}.log")), env)
        })
        .collect();
    for (port, m) in ports.iter().zip(members.iter_mut()) {
        // Ready: in the group, its config topic read.
        m.wait_ready(Duration::from_secs(60));
        wait_api(*port, m);
        assert_eq!(call(*port, "GET", "/connectors", None), (200, json!([])));
    }

    // A log level for the whole group (KIP-976 `scope=cluster`): through one member, in the
    // config topic, applied by every member.
    let (code, _) = call(
        ports[2],
        "PUT",
        "/admin/loggers/outboxd.group?scope=cluster",
        Some(&json!({"level": "TRACE"})),
    );
    assert_eq!(code, 204);
    for (port, m) in ports.iter().zip(members.iter()) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let (_, got) = call(*port, "GET", "/admin/loggers/outboxd.group", None);
            if got["level"] == "TRACE" {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "not applied: {got}\n{}",
                m.log_text()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    // One name created through two members at the same moment: one 201, one 409.
    let twin = format!("{name}_twin");
    let racers: Vec<_> = [0usize, 1]
        .into_iter()
        .map(|i| {
            let body = json!({"name": twin, "config": connector(&db, &twin, &twin)});
            let port = ports[i];
            std::thread::spawn(move || call(port, "POST", "/connectors", Some(&body)).0)
        })
        .collect();
    let mut codes: Vec<u16> = racers.into_iter().map(|r| r.join().unwrap()).collect();
    codes.sort();
    assert_eq!(codes, [201, 409], "{}", common::group::logs(&members));
    let (code, e) = call(ports[1], "DELETE", &format!("/connectors/{twin}"), None);
    assert_eq!(code, 204, "{e}");
    for port in &ports {
        wait_for(*port, "/connectors", "forget the twin", &members, |c, v| {
            c == 200 && *v == json!([])
        });
    }

    // Created through member 0: every member lists it, one runs it.
    let mut cfg = connector(&db, &name, &name);
    let reference = format!("${{env:{PASSWORD_VAR}}}");
    cfg.insert("database.password".into(), json!(reference));
    let (code, info) = call(
        ports[0],
        "POST",
        "/connectors",
        Some(&json!({"name": name, "config": cfg})),
    );
    assert_eq!(code, 201, "{info}\n{}", common::group::logs(&members));
    assert_eq!(
        info["config"]["database.password"],
        reference.as_str(),
        "{info}"
    );
    let (code, e) = call(
        ports[2],
        "POST",
        "/connectors",
        Some(&json!({"name": name, "config": cfg})),
    );
    assert_eq!(code, 409, "created twice through another member: {e}");
    for port in &ports {
        wait_for(
            *port,
            "/connectors",
            "list the connector",
            &members,
            |c, v| c == 200 && *v == json!([name]),
        );
        let (code, c) = call(*port, "GET", &format!("/connectors/{name}/config"), None);
        assert_eq!(code, 200);
        assert_eq!(c["database.password"], reference.as_str(), "{c}");
        assert_eq!(c["topic.prefix"], name.as_str(), "{c}");
    }
    // A name whose coordination topic would collide with this one's in Kafka ('.' and '_').
    let colliding = name.replacen('_', ".", 1);
    let (code, e) = call(
        ports[1],
        "POST",
        "/connectors",
        Some(&json!({"name": colliding, "config": cfg})),
    );
    assert_eq!(code, 400, "{e}");
    assert!(e["message"].as_str().unwrap().contains("collides"), "{e}");
    let owner = common::group::wait_owner(&members, &name, Duration::from_secs(60));
    assert!(
        owner < 2,
        "member 2 cannot resolve the password, yet runs the connector"
    );
    assert!(
        members[2]
            .log_text()
            .contains(&format!("cannot load connector {name}")),
        "{}",
        members[2].log_text()
    );
    // The other member that can run it, and the one that cannot.
    let (other, lacking) = (1 - owner, 2);
    // Streaming (it starts at the binlog's end: rows written before are not its).
    members[owner].wait_ready(Duration::from_secs(60));
    let writer = Writer::start(&db);
    let owner_id = format!("127.0.0.1:{}", ports[owner]);
    // Every member says who runs it.
    for port in &ports {
        wait_for(
            *port,
            &format!("/connectors/{name}/status"),
            "show the owner running it",
            &members,
            |c, s| {
                c == 200
                    && s["connector"]["state"] == "RUNNING"
                    && s["tasks"][0]["state"] == "RUNNING"
                    && s["tasks"][0]["worker_id"] == owner_id.as_str()
            },
        );
    }

    // Paused and resumed through another member: applied by the owner.
    let (code, _) = call(
        ports[lacking],
        "PUT",
        &format!("/connectors/{name}/pause"),
        None,
    );
    assert_eq!(code, 202);
    wait_state(
        ports[owner],
        &name,
        "PAUSED",
        Some("PAUSED"),
        &members[owner],
    );
    // What was in flight when the pause took effect has been delivered by now.
    std::thread::sleep(Duration::from_millis(700));
    let paused_at = produced(&members[owner], &name);
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(
        produced(&members[owner], &name),
        paused_at,
        "a paused connector delivered"
    );
    // Topic tracking: every member lists the topic the owner's records went to (kept in the
    // config topic); reset through the member that cannot run it, every list is empty while
    // the connector is paused, and the owner notes the topic again at its next record.
    let topics_path = format!("/connectors/{name}/topics");
    let used = json!({ name.as_str(): {"topics": [format!("{name}.a")]} });
    let none = json!({ name.as_str(): {"topics": []} });
    for port in &ports {
        wait_for(
            *port,
            &topics_path,
            "list the routed topic",
            &members,
            |c, v| c == 200 && *v == used,
        );
    }
    let (code, _) = call(ports[lacking], "PUT", &format!("{topics_path}/reset"), None);
    assert_eq!(code, 202);
    for port in &ports {
        wait_for(
            *port,
            &topics_path,
            "list no topic after the reset",
            &members,
            |c, v| c == 200 && *v == none,
        );
    }
    let (code, _) = call(
        ports[other],
        "PUT",
        &format!("/connectors/{name}/resume"),
        None,
    );
    assert_eq!(code, 202);
    wait_state(
        ports[owner],
        &name,
        "RUNNING",
        Some("RUNNING"),
        &members[owner],
    );
    for port in &ports {
        wait_for(
            *port,
            &topics_path,
            "list the routed topic again after the next record",
            &members,
            |c, v| c == 200 && *v == used,
        );
    }

    // Changed through another member: the owner restarts it with the new configuration.
    let placement = "transforms.outbox.table.fields.additional.placement";
    let mut changed = cfg.clone();
    changed.insert(placement.into(), json!("event_type:header:type"));
    let (code, info) = call(
        ports[other],
        "PUT",
        &format!("/connectors/{name}/config"),
        Some(&Value::Object(changed)),
    );
    assert_eq!(code, 200, "{info}");
    for port in &ports {
        wait_for(
            *port,
            &format!("/connectors/{name}/config"),
            "show the changed configuration",
            &members,
            |c, v| c == 200 && v[placement] == "event_type:header:type",
        );
    }
    let logged = |m: &Relay, what: &str| {
        let deadline = Instant::now() + Duration::from_secs(30);
        while !m.log_text().contains(what) {
            assert!(
                Instant::now() < deadline,
                "the owner never logged {what:?}\n{}",
                common::group::logs(&members)
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    };
    logged(
        &members[owner],
        "configuration changed in the group's config topic: restarting it",
    );
    // Restarted, stopped and resumed through the member that cannot run it.
    let third = lacking;
    let (code, _) = call(
        ports[third],
        "POST",
        &format!("/connectors/{name}/restart"),
        None,
    );
    assert_eq!(code, 204);
    logged(&members[owner], "restart asked through the REST API");
    let (code, _) = call(
        ports[third],
        "PUT",
        &format!("/connectors/{name}/stop"),
        None,
    );
    assert_eq!(code, 204);
    for port in &ports {
        wait_for(
            *port,
            &format!("/connectors/{name}/status"),
            "show it stopped",
            &members,
            |c, s| c == 200 && s["connector"]["state"] == "STOPPED" && s["tasks"] == json!([]),
        );
    }
    // Offsets are changed by the member that holds the stopped connector (it knows the
    // connector no longer writes checkpoints); another member says where to send them.
    let offsets = format!("/connectors/{name}/offsets");
    let (code, now) = call(ports[owner], "GET", &offsets, None);
    assert_eq!(code, 200, "{now}");
    let (code, e) = call(ports[third], "PATCH", &offsets, Some(&now));
    assert_eq!(code, 409, "{e}");
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains(&format!("127.0.0.1:{}", ports[owner])),
        "{e}"
    );
    let (code, e) = call(ports[owner], "PATCH", &offsets, Some(&now));
    assert_eq!(
        code,
        200,
        "the same offset set again: {e}\n{}",
        members[owner].log_text()
    );
    let (code, _) = call(
        ports[third],
        "PUT",
        &format!("/connectors/{name}/resume"),
        None,
    );
    assert_eq!(code, 202);
    wait_state(
        ports[owner],
        &name,
        "RUNNING",
        Some("RUNNING"),
        &members[owner],
    );
    members[owner].wait_ready(Duration::from_secs(60));

    // The owner killed under the writer: another member takes the connector over.
    while writer.written() < 100 {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    members[owner].kill9();
    let survivors: Vec<usize> = (0..3).filter(|i| *i != owner).collect();
    let next = {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(i) = survivors
                .iter()
                .copied()
                .find(|i| common::group::owns(&members[*i], &name))
            {
                break i;
            }
            assert!(
                Instant::now() < deadline,
                "no member took {name} over\n{}",
                common::group::logs(&members)
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    };
    let before = produced(&members[next], &name);
    let deadline = Instant::now() + Duration::from_secs(60);
    while produced(&members[next], &name) <= before {
        assert!(
            Instant::now() < deadline,
            "the new owner delivers nothing\n{}",
            common::group::logs(&members)
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let ids = writer.finish().await;
    assert_exactly_once(&[format!("{name}.a")], &ids, &members[next]);
    for i in &survivors {
        let (code, v) = call(ports[*i], "GET", &topics_path, None);
        assert_eq!((code, v), (200, used.clone()), "topics after the failover");
    }

    // A member whose files define the connector otherwise (as it was before the change) is
    // refused: one definition per connector.
    let file = dir.join("same-name.json");
    write_file(&file, &name, &cfg);
    let metrics = free_port();
    let metrics_listen = format!("127.0.0.1:{metrics}");
    let mut fourth = Relay::launch_with_env(
        &[
            "--group",
            group.as_str(),
            "--config",
            file.to_str().unwrap(),
            "--metrics-listen",
            metrics_listen.as_str(),
        ],
        metrics,
        dir.join("member3.log"),
        &[(PASSWORD_VAR, password.as_str())],
    );
    assert_eq!(
        fourth.wait_exit(Duration::from_secs(60)),
        Some(1),
        "{}",
        fourth.log_text()
    );
    assert!(
        fourth.log_text().contains(
            "is defined differently in this member's connector files and in the group's config topic"
        ),
        "{}",
        fourth.log_text()
    );

    // Deleted through a survivor: gone from every member's list, stopped where it ran.
    let (code, e) = call(
        ports[survivors[0]],
        "DELETE",
        &format!("/connectors/{name}"),
        None,
    );
    assert_eq!(code, 204, "{e}");
    for i in &survivors {
        wait_for(
            ports[*i],
            "/connectors",
            "forget the deleted connector",
            &members,
            |c, v| c == 200 && *v == json!([]),
        );
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while survivors
        .iter()
        .any(|i| common::group::owns(&members[*i], &name))
    {
        assert!(
            Instant::now() < deadline,
            "the deleted connector still runs\n{}",
            common::group::logs(&members)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    // Its owner (the one that took it over) drained it: not abandoned as a lost assignment.
    let log = members[next].log_text();
    assert!(
        log.contains("connector deleted from the group's config topic: stopping it here")
            && log.contains("stopped: what was read is delivered and checkpointed"),
        "{log}"
    );
    for i in survivors {
        assert_eq!(members[i].stop(), Some(0), "{}", members[i].log_text());
    }
}

/// A member's Debezium connector JSON seeds the group's config topic: a member started
/// without that file lists the connector, and runs it (the owner killed, or from the start),
/// every row once.
#[tokio::test(flavor = "multi_thread")]
async fn a_connector_file_seeds_the_group_for_members_without_it() {
    let db = MariaDb::new("rest_seed").await;
    let name = db.db.clone();
    let dir = test_dir(&name);
    let group = common::unique("seedgroup");
    let file = dir.join("seed.json");
    write_file(&file, &name, &connector(&db, &name, &name));
    let ports = [free_port(), free_port()];
    let mut members: Vec<Relay> = ports
        .iter()
        .enumerate()
        .map(|(i, port)| {
            let metrics = free_port();
            let (listen, metrics_listen) =
                (format!("127.0.0.1:{port}"), format!("127.0.0.1:{metrics}"));
            let mut args = vec![
                "--group",
                group.as_str(),
                "--rest-listen",
                listen.as_str(),
                "--metrics-listen",
                metrics_listen.as_str(),
            ];
            if i == 0 {
                args.extend(["--config", file.to_str().unwrap()]);
            }
            let log = dir.join(format!("member{i}.log"));
            Relay::launch_with_args(&args, metrics, log)
        })
        .collect();
    for (port, m) in ports.iter().zip(members.iter_mut()) {
        m.wait_ready(Duration::from_secs(60));
        wait_api(*port, m);
    }
    assert!(
        members[0]
            .log_text()
            .contains("seeded the group's config topic with this member's connector files"),
        "{}",
        members[0].log_text()
    );
    // The member without the file knows the connector, and may not change it (the file's).
    let c = wait_for(
        ports[1],
        &format!("/connectors/{name}/config"),
        "show the seeded configuration",
        &members,
        |c, _| c == 200,
    );
    assert_eq!(c["topic.prefix"], name.as_str(), "{c}");
    assert_eq!(c["database.password"], "[hidden]", "{c}");
    let owner = common::group::wait_owner(&members, &name, Duration::from_secs(60));
    members[owner].wait_ready(Duration::from_secs(60));
    let writer = Writer::start(&db);
    while writer.written() < 50 {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    if owner == 0 {
        // The member with the file goes: the one without it takes the connector over.
        members[0].kill9();
        let deadline = Instant::now() + Duration::from_secs(60);
        while !common::group::owns(&members[1], &name) {
            assert!(
                Instant::now() < deadline,
                "the member without the file did not take the connector over\n{}",
                common::group::logs(&members)
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    let before = produced(&members[1], &name);
    let deadline = Instant::now() + Duration::from_secs(60);
    while produced(&members[1], &name) <= before {
        assert!(
            Instant::now() < deadline,
            "the member without the file delivers nothing\n{}",
            common::group::logs(&members)
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let ids = writer.finish().await;
    assert_exactly_once(&[format!("{name}.a")], &ids, &members[1]);
    // A config topic holding many topic-tracking records (a connector routing by aggregate
    // to thousands of topics): a member joining reads them all and joins, every member lists
    // them. Publishing the state per record read once made reading them quadratic, and a
    // joining member never caught up.
    let history = format!("{name}_many");
    let many = 30_000;
    fill_topic_records(&group, &history, many).await;
    let port = free_port();
    let metrics = free_port();
    let (listen, metrics_listen) = (format!("127.0.0.1:{port}"), format!("127.0.0.1:{metrics}"));
    let mut joining = Relay::launch_with_args(
        &[
            "--group",
            group.as_str(),
            "--rest-listen",
            listen.as_str(),
            "--metrics-listen",
            metrics_listen.as_str(),
        ],
        metrics,
        dir.join("member2.log"),
    );
    joining.wait_ready(Duration::from_secs(120));
    wait_api(port, &joining);
    let listed = |p: u16| {
        let (code, v) = call(p, "GET", &format!("/connectors/{history}/topics"), None);
        (code, v[&history]["topics"].as_array().map_or(0, Vec::len))
    };
    for (who, p, m) in [
        ("joining", port, &joining),
        ("running", ports[1], &members[1]),
    ] {
        let deadline = Instant::now() + Duration::from_secs(120);
        while listed(p) != (200, many) {
            assert!(
                Instant::now() < deadline,
                "{who} member lists {:?} of {many} topics\n{}",
                listed(p),
                m.log_text()
            );
            std::thread::sleep(Duration::from_millis(500));
        }
    }
    // Their reset, through the member that just joined: a tombstone each, all written (the
    // answer does not wait for them all), every member's list emptied.
    let (code, _) = call(
        port,
        "PUT",
        &format!("/connectors/{history}/topics/reset"),
        None,
    );
    assert_eq!(code, 202);
    for (who, p, m) in [
        ("joining", port, &joining),
        ("running", ports[1], &members[1]),
    ] {
        let deadline = Instant::now() + Duration::from_secs(120);
        while listed(p) != (200, 0) {
            assert!(
                Instant::now() < deadline,
                "{who} member still lists {:?} topics after the reset\n{}",
                listed(p),
                m.log_text()
            );
            std::thread::sleep(Duration::from_millis(500));
        }
    }
    joining.stop();
    for m in members.iter_mut() {
        m.stop();
    }
}

/// Writes `count` topic-tracking records of connector `connector` into group `group`'s config
/// topic, as members write them (`status-topic-<topic>:connector-<name>`).
async fn fill_topic_records(group: &str, connector: &str, count: usize) {
    use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
    let producer: FutureProducer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", common::kafka_bootstrap())
        .set("linger.ms", "20")
        .create()
        .expect("kafka producer");
    let topic = format!("outboxd.configs.{group}");
    for i in 0..count {
        let routed = format!("{connector}.aggregate{i}");
        let key = format!("status-topic-{routed}:connector-{connector}");
        let value = json!({"topic": {"name": routed, "connector": connector, "task": 0, "discoverTimestamp": 1}})
            .to_string();
        loop {
            match producer.send_result(FutureRecord::to(&topic).key(&key).payload(&value)) {
                Ok(_) => break,
                Err((e, _)) => {
                    assert!(
                        matches!(
                            e.rdkafka_error_code(),
                            Some(rdkafka::types::RDKafkaErrorCode::QueueFull)
                        ),
                        "{e}"
                    );
                    std::thread::sleep(Duration::from_millis(10));
                }
            }
        }
    }
    producer
        .flush(Duration::from_secs(60))
        .expect("config topic records flushed");
}
