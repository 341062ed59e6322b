//! PostgreSQL pgoutput -> Kafka, end to end through the real `outboxd` binary, against the
//! real PostgreSQL 15 and Kafka started by `scripts/services.sh up`.
//!
//! The shared acceptance cases live in `common/suite.rs` (run here against a `json` payload
//! column, whose text PostgreSQL keeps verbatim, because the suite compares record values
//! byte for byte). PostgreSQL-only cases follow: the insert-only publication, `jsonb`
//! (normalised text, TOAST), logical decoding messages, the slot's `confirmed_flush_lsn` and
//! `restart_lsn` following an idle outbox, two relays on one slot, the Debezium JSON import,
//! `check` and `status`. The Kafka outage case is in `postgres_kafka_outage.rs`.

mod common;

use std::collections::HashSet;
use std::time::{Duration, Instant};

use common::kafka::{read_expecting, read_topics, Consumed};
use common::postgres::{self as pg, Postgres};
use common::relay::{free_port, run_cli, test_dir, Relay};
use common::suite::{self, start_relay, topic, SourceDb};
use common::OutboxEvent;

// ---------------------------------------------------------------- the shared suite

#[tokio::test(flavor = "multi_thread")]
async fn single_insert() {
    suite::single_insert(&Postgres::new("pg_single").await).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn order_saga_flow() {
    suite::order_saga_flow(&Postgres::new("pg_saga").await).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn rolled_back_emits_nothing() {
    suite::rolled_back_emits_nothing(&Postgres::new("pg_rollback").await).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn aggregate_types_get_own_topics() {
    suite::aggregate_types_get_own_topics(&Postgres::new("pg_aggs").await).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn ten_thousand_keep_order() {
    suite::ten_thousand_keep_order(&Postgres::new("pg_10k").await).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn restart_mid_stream_loses_nothing() {
    suite::restart_mid_stream_loses_nothing(&Postgres::new("pg_restart").await).await;
}

/// outboxd's own publication publishes only INSERTs (as Debezium's outbox setups do), so
/// UPDATE and DELETE never reach it and `table.op.invalid.behavior` has nothing to see.
/// The suite's UPDATE/DELETE cases therefore run on a publication the test creates with
/// `publish = 'insert, update, delete'`; the insert-only behaviour is checked below.
#[tokio::test(flavor = "multi_thread")]
async fn delete_and_update_make_no_records() {
    let db = Postgres::with_publication("pg_delupd", "insert, update, delete").await;
    suite::delete_and_update_make_no_records(&db).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn update_with_fatal_behavior_stops() {
    let db = Postgres::with_publication("pg_fatal", "insert, update").await;
    suite::update_with_fatal_behavior_stops(&db).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn null_payload_tombstone() {
    suite::null_payload_tombstone(&Postgres::new("pg_tomb").await).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn utf8_and_large_payloads() {
    suite::utf8_and_large_payloads(&Postgres::new("pg_utf8").await).await;
}

// ---------------------------------------------------------------- PostgreSQL only

/// With the default insert-only publication, UPDATE and DELETE of outbox rows produce
/// nothing at all (not even a warning): the server never sends them.
#[tokio::test(flavor = "multi_thread")]
async fn insert_only_publication_ignores_update_and_delete() {
    let db = Postgres::new("pg_insonly").await;
    let relay = start_relay(&db, r#""table.op.invalid.behavior" = "fatal""#);
    let a = OutboxEvent::new("Order", "o-a", "OrderCreated", Some(r#"{"n":1}"#));
    db.insert(std::slice::from_ref(&a), false).await;
    db.update_event(&a.id).await;
    db.delete_event(&a.id).await;
    let b = OutboxEvent::new("Order", "o-b", "OrderCreated", Some(r#"{"n":2}"#));
    db.insert(std::slice::from_ref(&b), false).await;
    let got = read_expecting(&[topic(&db, "Order")], 2);
    suite::assert_records(&db, &[a, b], &got);
    assert!(
        !relay.log_text().contains("table.op.invalid.behavior"),
        "{}",
        relay.log_text()
    );
}

/// The migration's `jsonb` payload: the record value is jsonb's text as the server holds
/// it (normalised: `{"b":1,"a":[1,2]}` is stored as `{"a": [1, 2], "b": 1}`), equal as JSON
/// to what the application wrote. A 1 MiB incompressible jsonb payload (stored out of line,
/// TOASTed) arrives whole.
#[tokio::test(flavor = "multi_thread")]
async fn jsonb_payloads_normalised_and_toasted_arrive_whole() {
    let db = Postgres::with_jsonb("pg_jsonb").await;
    let _relay = start_relay(&db, "");
    let small = OutboxEvent::new(
        "Order",
        "o-1",
        "OrderCreated",
        Some(r#"{"b":1,"a":[1,2],"s":"😀"}"#),
    );
    let blob: String = (0..1024 * 1024 / 16)
        .map(|_| format!("{:016x}", rand::random::<u64>()))
        .collect();
    let big = OutboxEvent::new(
        "Order",
        "o-2",
        "OrderCreated",
        Some(&format!(r#"{{"blob":"{blob}","n":2}}"#)),
    );
    db.insert(std::slice::from_ref(&small), false).await;
    db.insert(std::slice::from_ref(&big), false).await;
    let external: i32 = db
        .client
        .query_one(
            "SELECT pg_column_size(payload) FROM outbox_events WHERE id = $1::text::uuid",
            &[&big.id],
        )
        .await
        .unwrap()
        .get(0);
    assert!(external > 1024 * 1024 / 2, "stored size {external}");
    let got = read_expecting(&[topic(&db, "Order")], 2);
    assert_eq!(got.len(), 2);
    for e in [&small, &big] {
        let r = got
            .iter()
            .find(|r| r.header("id").as_deref() == Some(e.id.as_str()))
            .unwrap();
        let stored: String = db
            .client
            .query_one(
                "SELECT payload::text FROM outbox_events WHERE id = $1::text::uuid",
                &[&e.id],
            )
            .await
            .unwrap()
            .get(0);
        assert_eq!(
            r.value_str().as_deref(),
            Some(stored.as_str()),
            "jsonb text"
        );
        let want: serde_json::Value = serde_json::from_str(e.payload.as_ref().unwrap()).unwrap();
        let have: serde_json::Value = serde_json::from_slice(r.value.as_ref().unwrap()).unwrap();
        assert_eq!(have, want);
        assert_eq!(r.key_str().as_deref(), Some(e.aggregate_id.as_str()));
    }
    let small_value = got
        .iter()
        .find(|r| r.header("id").as_deref() == Some(small.id.as_str()))
        .and_then(|r| r.value_str())
        .unwrap();
    assert_eq!(small_value, r#"{"a": [1, 2], "b": 1, "s": "😀"}"#);
}

fn message_json(e: &OutboxEvent, seq: i64) -> String {
    format!(
        r#"{{"id":"{}","aggregate_type":"{}","aggregate_id":"{}","event_type":"{}","payload":{{"seq":{seq},  "via":"message"}}}}"#,
        e.id, e.aggregate_type, e.aggregate_id, e.event_type
    )
}

fn seq_of(r: &Consumed) -> i64 {
    let v: serde_json::Value = serde_json::from_slice(r.value.as_ref().unwrap()).unwrap();
    v["seq"].as_i64().unwrap()
}

/// Logical decoding messages with a configured prefix are outbox events without a table:
/// transactional ones keep their place among the transaction's rows, non-transactional ones
/// are delivered on their own, other prefixes and rolled-back transactions give nothing, and
/// the payload object's text is kept exactly as written in the message.
#[tokio::test(flavor = "multi_thread")]
async fn messages_and_rows_keep_their_order() {
    let mut db = Postgres::new("pg_msgs").await;
    db.source_extra = r#"message_prefixes = ["outbox"]"#.into();
    let relay = start_relay(&db, "");
    let ev = |seq: i64| {
        OutboxEvent::new(
            "Order",
            "o-mixed",
            &format!("Step{seq}"),
            Some(&format!(r#"{{"seq":{seq}}}"#)),
        )
    };
    // One transaction: row, message, row, message (+ a message with another prefix).
    let (e0, e1, e2, e3) = (ev(0), ev(1), ev(2), ev(3));
    db.exec("BEGIN").await;
    pg::insert_events(&db.client, "outbox_events", std::slice::from_ref(&e0)).await;
    db.emit_message(true, "outbox", &message_json(&e1, 1)).await;
    db.emit_message(true, "unrelated", "not even JSON").await;
    pg::insert_events(&db.client, "outbox_events", std::slice::from_ref(&e2)).await;
    db.emit_message(true, "outbox", &message_json(&e3, 3)).await;
    db.exec("COMMIT").await;
    // A rolled-back transactional message: nothing.
    let lost = ev(99);
    db.exec("BEGIN").await;
    db.emit_message(true, "outbox", &message_json(&lost, 99))
        .await;
    db.exec("ROLLBACK").await;
    // A non-transactional message, then a row.
    let e4 = ev(4);
    db.emit_message(false, "outbox", &message_json(&e4, 4))
        .await;
    let e5 = ev(5);
    db.insert(std::slice::from_ref(&e5), false).await;

    let got = read_expecting(&[topic(&db, "Order")], 6);
    let mut sorted = got.clone();
    sorted.sort_by_key(|r| (r.partition, r.offset));
    let seqs: Vec<i64> = sorted.iter().map(seq_of).collect();
    assert_eq!(seqs, [0, 1, 2, 3, 4, 5], "log:\n{}", relay.log_text());
    let ids: Vec<String> = sorted.iter().map(|r| r.header("id").unwrap()).collect();
    assert_eq!(ids, [e0.id, e1.id, e2.id, e3.id, e4.id, e5.id]);
    let m = &sorted[1];
    assert_eq!(
        m.value_str().as_deref(),
        Some(r#"{"seq":1,  "via":"message"}"#)
    );
    assert_eq!(m.key_str().as_deref(), Some("o-mixed"));
    assert_eq!(m.header("eventType").as_deref(), Some("Step1"));
}

/// A message with the configured prefix that is not a JSON object stops the connector with
/// an error naming the LSN, and never logs the content.
#[tokio::test(flavor = "multi_thread")]
async fn malformed_message_is_a_definite_error() {
    let mut db = Postgres::new("pg_badmsg").await;
    db.source_extra = r#"message_prefixes = ["outbox"]"#.into();
    let mut relay = start_relay(&db, "");
    db.emit_message(false, "outbox", "{\"id\": top-secret-content")
        .await;
    let code = relay.wait_exit(Duration::from_secs(60));
    let log = relay.log_text();
    assert!(matches!(code, Some(c) if c != 0), "must stop; log:\n{log}");
    assert!(
        log.contains("at LSN") && log.contains("not valid JSON"),
        "{log}"
    );
    assert!(
        !log.contains("top-secret-content"),
        "content leaked:\n{log}"
    );
}

/// 50 MB of WAL written to a table outside the publication while the outbox is idle does not
/// stay pinned: the slot's `confirmed_flush_lsn` follows the server's WAL (keepalives become
/// checkpointed progress and are confirmed), and after a CHECKPOINT so does `restart_lsn`.
#[tokio::test(flavor = "multi_thread")]
async fn idle_outbox_does_not_pin_wal() {
    let db = Postgres::new("pg_idlewal").await;
    let _relay = start_relay(&db, "");
    db.wait_slot_active(Duration::from_secs(30)).await;
    db.exec("CREATE TABLE filler (id bigserial PRIMARY KEY, data text)")
        .await;
    let start = db.current_wal().await;
    // ~10 MB of WAL per transaction, 5 transactions.
    for _ in 0..5 {
        db.exec(
            "INSERT INTO filler (data) SELECT repeat(md5(random()::text), 30) \
             FROM generate_series(1, 10000)",
        )
        .await;
    }
    let end = db.current_wal().await;
    assert!(
        end - start >= 50_000_000,
        "wrote {} bytes of WAL",
        end - start
    );
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut state = db.slot_state().await.unwrap();
    while state.0 < end && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(250)).await;
        state = db.slot_state().await.unwrap();
    }
    assert!(
        state.0 >= end,
        "confirmed_flush_lsn {} stays behind the WAL written ({end}); start {start}",
        state.0
    );
    // restart_lsn moves once a running-xacts record after the filler is decoded and
    // confirmed; CHECKPOINT writes one.
    let deadline = Instant::now() + Duration::from_secs(90);
    while state.1 < end && Instant::now() < deadline {
        db.exec("CHECKPOINT").await;
        tokio::time::sleep(Duration::from_secs(2)).await;
        state = db.slot_state().await.unwrap();
    }
    assert!(
        state.1 >= end,
        "restart_lsn {} stays behind the WAL written ({end}); start {start}",
        state.1
    );
}

/// A second relay on a slot that another one streams from stops with an error that names
/// the holder's pid.
#[tokio::test(flavor = "multi_thread")]
async fn second_relay_on_the_same_slot_names_the_holder() {
    let db = Postgres::new("pg_twoslot").await;
    let first = start_relay(&db, "");
    db.wait_slot_active(Duration::from_secs(30)).await;
    let (_, _, pid) = db.slot_state().await.unwrap();
    let pid = pid.unwrap();
    // Same source, another connector name (own checkpoint and metrics port).
    let dir = test_dir(&format!("{}_second", db.db));
    let port = free_port();
    let text = std::fs::read_to_string(&first.configs[0]).unwrap();
    let text = text
        .replace(
            &format!("\nname = \"{}\"", db.db),
            &format!("\nname = \"{}_second\"", db.db),
        )
        .replace(
            &format!("listen = \"127.0.0.1:{}\"", first.metrics_port),
            &format!("listen = \"127.0.0.1:{port}\""),
        )
        .replace("checkpoint.json", "second.checkpoint.json");
    let path = dir.join("second.toml");
    std::fs::write(&path, text).unwrap();
    // Not through Relay::start: this one never gets ready.
    let log = dir.join("second.log");
    let out = std::fs::File::create(&log).unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_outboxd"))
        .args(["run", "--config", path.to_str().unwrap()])
        .env("OUTBOXD_KAFKA_BOOTSTRAP", common::kafka_bootstrap())
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break Some(s);
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        matches!(status, Some(s) if !s.success()),
        "the second relay must stop with an error ({status:?}); log:\n{text}"
    );
    assert!(
        text.contains("in use by another process") && text.contains(&format!("pid {pid}")),
        "the error names the holder (pid {pid}); log:\n{text}"
    );
    // The first relay still works.
    let e = OutboxEvent::new("Order", "o-1", "OrderCreated", Some(r#"{"n":1}"#));
    db.insert(std::slice::from_ref(&e), false).await;
    let got = read_expecting(&[topic(&db, "Order")], 1);
    suite::assert_records(&db, &[e], &got);
    drop(first);
}

/// A clean stop writes an LSN checkpoint; the restarted relay resumes from it and delivers
/// every event exactly once (what the slot may still hold before the checkpoint is skipped).
#[tokio::test(flavor = "multi_thread")]
async fn clean_restart_resumes_without_duplicates() {
    let db = Postgres::new("pg_resume").await;
    let mut relay = start_relay(&db, "");
    let mk = |range: std::ops::Range<i32>| -> Vec<OutboxEvent> {
        range
            .map(|i| {
                OutboxEvent::new(
                    "Order",
                    &format!("r-{}", i % 3),
                    "E",
                    Some(&format!(r#"{{"seq":{i}}}"#)),
                )
            })
            .collect()
    };
    let first = mk(0..20);
    db.insert(&first, false).await;
    let got = read_expecting(&[topic(&db, "Order")], first.len());
    assert_eq!(got.len(), first.len());
    assert_eq!(relay.stop(), Some(0), "log:\n{}", relay.log_text());
    let checkpoint = std::fs::read_to_string(test_dir(&db.db).join("checkpoint.json")).unwrap();
    assert!(checkpoint.contains(r#""kind":"lsn""#), "{checkpoint}");
    let second = mk(20..40);
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

/// A checkpoint taken while an outbox transaction is still open: another transaction
/// commits (flushing the WAL before it, the open transaction's rows included), the idle
/// outbox's keepalive moves the checkpoint and `confirmed_flush_lsn` past the open
/// transaction's first rows. After a kill -9 and the open transaction's commit, the restart
/// from that checkpoint delivers it whole: PostgreSQL and the adapter skip only transactions
/// whose commit lies before the resume position.
#[tokio::test(flavor = "multi_thread")]
async fn checkpoint_inside_an_open_transaction_loses_nothing() {
    let db = Postgres::new("pg_opentxn").await;
    db.exec("CREATE TABLE other (id bigserial PRIMARY KEY)")
        .await;
    let mut relay = start_relay(&db, "");
    db.wait_slot_active(Duration::from_secs(30)).await;
    let events: Vec<OutboxEvent> = (0..3)
        .map(|i| {
            OutboxEvent::new(
                "Order",
                &format!("open-{i}"),
                "OrderCreated",
                Some(&format!(r#"{{"i":{i}}}"#)),
            )
        })
        .collect();
    let open = pg::admin_connect(&db.db).await;
    open.batch_execute("BEGIN").await.unwrap();
    let first_row: i64 = pg::wal_insert_lsn(&open).await;
    pg::insert_events(&open, &db.outbox_table(), &events).await;
    db.exec("INSERT INTO other DEFAULT VALUES").await;
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut confirmed = db.slot_state().await.unwrap().0;
    while confirmed <= first_row && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(250)).await;
        confirmed = db.slot_state().await.unwrap().0;
    }
    assert!(
        confirmed > first_row,
        "confirmed_flush_lsn {confirmed} did not pass the open transaction's first row \
         ({first_row}) after another transaction committed; log:\n{}",
        relay.log_text()
    );
    relay.kill9();
    open.batch_execute("COMMIT").await.unwrap();
    relay.spawn();
    relay.wait_ready(Duration::from_secs(60));
    let got = read_expecting(&[topic(&db, "Order")], events.len());
    suite::assert_records(&db, &events, &got);
}

/// The same routing as outboxd TOML and as a Debezium PostgresConnector JSON gives the same
/// records (keys, values, headers, partitions).
#[tokio::test(flavor = "multi_thread")]
async fn debezium_json_and_toml_give_same_records() {
    let db = Postgres::new("pg_dbzjson").await;
    let (host, port, user, password) = pg::replication_user();
    let dir = test_dir(&db.db);
    let toml_port = free_port();
    let toml = format!(
        r#"[metrics]
listen = "127.0.0.1:{toml_port}"

[[connectors]]
name = "{db}_toml"
tables = ["public.outbox_events"]

[connectors.source]
kind = "postgres"
host = "{host}"
port = {port}
user = "{user}"
password = "{password}"
dbname = "{db}"
slot_name = "{db}_toml"
publication_name = "{db}_toml"
status_interval = "1s"

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
        dir = dir.display(),
    );
    let toml_path = dir.join("same.toml");
    std::fs::write(&toml_path, toml).unwrap();
    let dbz_port = free_port();
    let json = serde_json::json!({
        "name": format!("{}_dbz", db.db),
        "config": {
            "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
            "database.hostname": host,
            "database.port": port.to_string(),
            "database.user": user,
            "database.password": password,
            "database.dbname": db.db,
            "plugin.name": "pgoutput",
            "slot.name": format!("{}_dbz", db.db),
            "publication.name": format!("{}_dbz", db.db),
            "publication.autocreate.mode": "filtered",
            "status.update.interval.ms": "1000",
            "topic.prefix": "outbox_server",
            "table.include.list": "public.outbox_events",
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

/// `outboxd check` passes against the test services (and reports wal_level, slots, the
/// REPLICATION attribute, publication and table), names the fix for a missing table and for
/// a role without REPLICATION; `outboxd status` reports the slot's positions and lag.
#[tokio::test(flavor = "multi_thread")]
async fn check_and_status() {
    let db = Postgres::new("pg_check").await;
    let (bad, _) = suite::write_config(&db, "public.no_such_outbox", "");
    let (code, out, _) = run_cli(&["check", "--config", bad.to_str().unwrap()]);
    assert_ne!(code, 0);
    assert!(
        out.contains("no_such_outbox") && out.contains("not found"),
        "{out}"
    );

    let (path, port) = suite::write_config(&db, &db.outbox_table(), "");
    let (code, out, err) = run_cli(&["check", "--config", path.to_str().unwrap()]);
    assert_eq!(code, 0, "check should pass:\n{out}\n{err}");
    for name in [
        "wal_level",
        "replication slots",
        "REPLICATION",
        "publication",
        "table public.outbox_events",
        "all checks passed",
    ] {
        assert!(out.contains(name), "{name} in:\n{out}");
    }

    // A role without REPLICATION: check names the fix, run stops with it.
    let role = format!("norepl_{}", db.db);
    db.exec(&format!(
        "CREATE ROLE {role} LOGIN PASSWORD 'pw'; GRANT CONNECT ON DATABASE {} TO {role}",
        db.db
    ))
    .await;
    let text = std::fs::read_to_string(&path)
        .unwrap()
        .replace("user = \"outboxd\"", &format!("user = \"{role}\""))
        .replace("password = \"outboxd-secret\"", "password = \"pw\"");
    let norepl = path.with_file_name("norepl.toml");
    std::fs::write(&norepl, text).unwrap();
    let (code, out, _) = run_cli(&["check", "--config", norepl.to_str().unwrap()]);
    assert_ne!(code, 0);
    assert!(
        out.contains(&format!("ALTER ROLE \"{role}\" REPLICATION")),
        "{out}"
    );
    let (code, out, err) = run_cli(&["run", "--config", norepl.to_str().unwrap()]);
    assert_ne!(code, 0);
    assert!(
        format!("{out}{err}").contains("lacks the REPLICATION attribute"),
        "{out}\n{err}"
    );
    db.exec(&format!("REVOKE ALL ON DATABASE {} FROM {role}", db.db))
        .await;
    let admin = pg::admin_connect("outboxd").await;
    let _ = admin
        .batch_execute(&format!("DROP ROLE IF EXISTS {role}"))
        .await;

    // status: after a delivery the slot, its confirmed_flush_lsn and the lag are shown.
    let mut relay = Relay::start(path.clone(), port);
    let e = OutboxEvent::new("Order", "o-1", "OrderCreated", Some(r#"{"n":1}"#));
    db.insert(std::slice::from_ref(&e), false).await;
    read_expecting(&[topic(&db, "Order")], 1);
    assert_eq!(relay.stop(), Some(0));
    let (code, out, err) = run_cli(&["status", "--config", path.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}\n{err}");
    let v: serde_json::Value = serde_json::from_str(out.lines().next().unwrap()).unwrap();
    assert!(v["checkpoint"].as_str().unwrap().starts_with("lsn:"), "{v}");
    assert!(v["source"].as_str().unwrap().starts_with("lsn:"), "{v}");
    assert!(v["slot"]["confirmed_flush_lsn"].is_string(), "{v}");
    assert!(v["slot"]["restart_lsn"].is_string(), "{v}");
    assert!(v["slot"]["lag_bytes"].is_number(), "{v}");
    assert!(v["behind"].as_str().unwrap().ends_with("byte(s)"), "{v}");
}

/// The server ends the replication connection (pg_terminate_backend of the walsender) while
/// events flow: the relay reconnects from the last position it handed on and loses nothing.
#[tokio::test(flavor = "multi_thread")]
async fn reconnects_after_the_walsender_is_terminated() {
    let db = Postgres::new("pg_reconnect").await;
    let relay = start_relay(&db, "");
    db.wait_slot_active(Duration::from_secs(30)).await;
    // Big transactions, the walsender terminated just after each commit, while the
    // transaction is being sent: the cut falls inside a transaction (or between two); both
    // must lose nothing.
    let events = suite::sequenced_events("Order", 5, 9_000, 1_000);
    for chunk in events.chunks(3_000) {
        db.wait_slot_active(Duration::from_secs(60)).await;
        db.insert(chunk, false).await;
        tokio::time::sleep(Duration::from_millis(30)).await;
        db.exec(&format!(
            "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots \
             WHERE slot_name = '{}' AND active_pid IS NOT NULL",
            db.slot
        ))
        .await;
    }
    // Duplicates count towards `expected`, and a restart pauses delivery for its backoff:
    // settle long enough not to stop reading in that pause.
    let got = read_topics(
        &[topic(&db, "Order")],
        events.len(),
        Duration::from_secs(180),
        Duration::from_secs(10),
    );
    let ids: HashSet<String> = got.iter().filter_map(|r| r.header("id")).collect();
    let missing = events.iter().filter(|e| !ids.contains(&e.id)).count();
    assert_eq!(
        missing,
        0,
        "{} records read; log:\n{}",
        got.len(),
        relay.log_text()
    );
    // At-least-once: a transaction cut short restarts the connector from its checkpoint, so
    // duplicates are allowed; first deliveries keep per-key order.
    let mut seen = HashSet::new();
    let mut sorted = got.clone();
    sorted.sort_by_key(|r| (r.partition, r.offset));
    let first: Vec<Consumed> = sorted
        .into_iter()
        .filter(|r| seen.insert(r.header("id").unwrap()))
        .collect();
    suite::assert_per_key_order(&first);
    let log = relay.log_text();
    assert!(
        log.contains("reconnecting") || log.contains("restarting from the checkpoint"),
        "{log}"
    );
}
