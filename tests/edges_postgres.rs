//! Issue 17 on PostgreSQL, against the real services: a replication slot dropped behind a
//! stopped connector's checkpoint, or confirmed past it, is a definite, explained stop
//! (reported by `check` and `status` first, never a new slot past the gap), while a busy
//! relay's `status` and `check` never show a gap; an event that cannot be delivered
//! (exactly-once and at-least-once); the dead-letter topic across `kill -9`; a record too
//! large for its broker-default topic; a topic without WRITE permission (ACLs); a 20 MB
//! record; logical decoding messages that do not decode (not JSON, not an object, a field
//! twice): a stop before them, or dead letters.

mod common;

use std::time::Duration;

use common::edges::{self, event};
use common::kafka::read_topics;
use common::postgres::Postgres;
use common::relay::{run_cli, Relay};
use common::suite::{self, topic, write_config_full, SourceDb, EXACTLY_ONCE};
use common::OutboxEvent;

#[tokio::test(flavor = "multi_thread")]
async fn poison_stop_commits_ahead_then_steps_past_exactly_once() {
    let db = Postgres::new("pg_edge_poison").await;
    edges::poison_stop_commits_ahead_then_steps_past(&db, EXACTLY_ONCE, true).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn poison_stop_commits_ahead_then_steps_past_at_least_once() {
    let db = Postgres::new("pg_edge_poison_alo").await;
    let checkpoint = suite::file_checkpoint(&db);
    edges::poison_stop_commits_ahead_then_steps_past(&db, &checkpoint, false).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn dead_letters_exactly_once_across_kill9() {
    edges::dead_letters_in_order(&Postgres::new("pg_edge_dlq").await, EXACTLY_ONCE, true).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn dead_letters_at_least_once_across_kill9() {
    let db = Postgres::new("pg_edge_dlq_alo").await;
    edges::dead_letters_in_order(&db, &suite::file_checkpoint(&db), false).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn twenty_megabyte_event_is_delivered() {
    edges::twenty_megabyte_event_is_delivered(&Postgres::new("pg_edge_large").await).await;
}

/// The checkpoint LSN (`16/B374D848`).
fn stored_lsn(config: &std::path::Path) -> String {
    let position = edges::stored_position(config);
    position
        .strip_prefix("lsn:")
        .unwrap_or_else(|| panic!("not an LSN: {position}"))
        .to_string()
}

/// Runs `sql` as the admin until it succeeds (the stopped relay's walsender may still hold
/// the slot for a moment).
async fn admin_until_ok(db: &Postgres, sql: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        match db.client.batch_execute(sql).await {
            Ok(()) => return,
            Err(e) if std::time::Instant::now() < deadline => {
                eprintln!("{sql}: {e}; retrying");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => panic!("{sql}: {}", common::postgres::db_error(&e)),
        }
    }
}

/// A relay that delivered an event and stopped with a checkpoint.
struct Stopped {
    relay: Relay,
    config: std::path::PathBuf,
    /// The config path as text, for the CLI.
    cfg: String,
    /// The checkpoint LSN.
    lsn: String,
    /// The event delivered.
    delivered: String,
}

/// A relay that delivered an event and stopped; `check` passes then (the control for what
/// the slot's drop or advance changes).
async fn stopped_with_a_checkpoint(db: &Postgres) -> Stopped {
    let (config, port) = suite::write_config(db, &db.outbox_table(), "");
    let (mut relay, first) = edges::started_with_one_delivered(db, &config, port).await;
    assert_eq!(relay.stop(), Some(0));
    let cfg = config.to_str().unwrap();
    let (code, out, err) = run_cli(&["check", "--config", cfg]);
    assert_eq!(code, 0, "healthy, before the slot changes:\n{out}\n{err}");
    assert!(
        out.contains(&format!(
            "[ok  ] {}: checkpoint: lsn:{}: the source still has what follows it",
            db.name(),
            stored_lsn(&config)
        )),
        "{out}"
    );
    let (code, out, _) = run_cli(&["status", "--config", cfg]);
    assert_eq!(code, 0, "{out}");
    assert!(!out.contains("checkpoint_lost"), "{out}");
    Stopped {
        relay,
        cfg: config.to_str().unwrap().to_string(),
        lsn: stored_lsn(&config),
        config,
        delivered: first.id,
    }
}

/// `check` and `status` report `expect` about the checkpoint before `run` does; `run` stops
/// with a definite error naming the checkpoint LSN and `checkpoint reset`.
fn reported_everywhere(db: &Postgres, stopped: &mut Stopped, expect: &str) {
    let (config, lsn, relay) = (&stopped.cfg, &stopped.lsn, &mut stopped.relay);
    let (code, out, _) = run_cli(&["check", "--config", config]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains(&format!("[FAIL] {}: checkpoint:", db.name()))
            && out.contains(expect)
            && out.contains(&format!("LSN {lsn}"))
            && out.contains("checkpoint reset"),
        "{out}"
    );
    let (code, out, _) = run_cli(&["status", "--config", config]);
    assert_eq!(code, 1, "{out}");
    let v: serde_json::Value = serde_json::from_str(out.lines().next().unwrap()).unwrap();
    assert!(
        v["checkpoint_lost"]
            .as_str()
            .is_some_and(|s| s.contains(expect)),
        "{v}"
    );
    relay.spawn();
    let log = edges::expect_failed_exit(relay, Duration::from_secs(60));
    assert!(
        log.contains(expect)
            && log.contains(&format!("LSN {lsn}"))
            && log.contains(&format!(
                "outboxd checkpoint reset --config <its file> --connector {}",
                db.name()
            )),
        "log:\n{log}"
    );
    assert!(
        log.matches("created the replication slot;").count() <= 1,
        "the slot must not be re-created past the gap; log:\n{log}"
    );
}

/// Issue 17, case 1: the slot of a stopped connector is dropped (by a person, a failover, a
/// restore) while events are written. The restart must not create a new slot past the gap:
/// it stops, definitely, saying the WAL since the checkpoint is no longer retained; only an
/// explicit `checkpoint reset` starts fresh, and it says the gap is lost.
#[tokio::test(flavor = "multi_thread")]
async fn a_dropped_slot_is_a_definite_stop_until_an_explicit_reset() {
    let db = Postgres::new("pg_edge_dropped").await;
    let mut stopped = stopped_with_a_checkpoint(&db).await;
    let lost = event("Order", "o-2", 1);
    db.insert(std::slice::from_ref(&lost), false).await;
    admin_until_ok(
        &db,
        &format!("SELECT pg_drop_replication_slot('{}')", db.slot),
    )
    .await;
    reported_everywhere(
        &db,
        &mut stopped,
        "does not exist, but the connector's checkpoint",
    );
    assert!(
        db.slot_state().await.is_none(),
        "the failed start must not have created the slot"
    );
    let Stopped {
        mut relay,
        config,
        lsn,
        delivered,
        ..
    } = stopped;
    edges::reset_then_start_fresh(
        &db,
        &mut relay,
        &config,
        &format!("lsn:{lsn}"),
        &[delivered],
    )
    .await;
}

/// Issue 17, case 1: a slot confirmed past the connector's checkpoint (another consumer
/// advanced it while the relay was stopped) would silently skip what lies in between: the
/// restart stops instead, naming both positions.
#[tokio::test(flavor = "multi_thread")]
async fn a_slot_confirmed_past_the_checkpoint_is_a_definite_stop() {
    let db = Postgres::new("pg_edge_advanced").await;
    let mut stopped = stopped_with_a_checkpoint(&db).await;
    db.insert(&[event("Order", "o-2", 1)], false).await;
    admin_until_ok(
        &db,
        &format!(
            "SELECT pg_replication_slot_advance('{}', pg_current_wal_lsn())",
            db.slot
        ),
    )
    .await;
    reported_everywhere(&db, &mut stopped, "past the connector's checkpoint");
}

/// `status` and `check` of a busy relay (a transaction every 20 ms; the relay stores a
/// checkpoint and confirms it to the slot every second, `status_interval = "1s"`), for 20 s
/// at least: the
/// slot's `confirmed_flush_lsn` keeps overtaking whatever checkpoint a reader saw before
/// it, so they read the slot first and the checkpoint after it, and must never report a
/// gap. `checkpoint` is the `[connectors.checkpoint]` body.
async fn a_busy_relay_never_shows_a_gap(db: &Postgres, checkpoint: &str) {
    let (path, port) =
        suite::write_config_full(db, &db.outbox_table(), "", "", checkpoint, "busy.toml");
    let cfg = path.to_str().unwrap().to_string();
    let (mut relay, first) = edges::started_with_one_delivered(db, &path, port).await;
    let stop = std::sync::atomic::AtomicBool::new(false);
    let writer = async {
        let mut written = vec![first];
        while !stop.load(std::sync::atomic::Ordering::Acquire) {
            let e = event("Order", "o-1", written.len());
            db.insert(std::slice::from_ref(&e), false).await;
            written.push(e);
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        written
    };
    let prober = async {
        let mut seen = std::collections::BTreeSet::new();
        let started = std::time::Instant::now();
        let mut round = 0;
        while round < 30 || started.elapsed() < Duration::from_secs(20) {
            round += 1;
            let command = if round % 6 == 5 { "check" } else { "status" };
            let args = [command, "--config", cfg.as_str()].map(String::from);
            let (code, out, err) = tokio::task::spawn_blocking(move || {
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                run_cli(&args)
            })
            .await
            .unwrap();
            assert_eq!(code, 0, "{command} (round {round}):\n{out}\n{err}");
            assert!(
                !out.contains("checkpoint_lost") && !out.contains("[FAIL]"),
                "{command} (round {round}) reported a gap of a running relay:\n{out}"
            );
            if command == "status" {
                let v: serde_json::Value =
                    serde_json::from_str(out.lines().next().unwrap()).unwrap();
                seen.insert(v["checkpoint"].as_str().unwrap_or_default().to_string());
            }
        }
        stop.store(true, std::sync::atomic::Ordering::Release);
        seen
    };
    let (written, seen) = tokio::join!(writer, prober);
    assert!(
        seen.len() >= 8,
        "the checkpoint must have moved between the reads (the relay was busy): {seen:?}"
    );
    let got = common::kafka::read_topics(
        &[suite::topic(db, "Order")],
        written.len(),
        Duration::from_secs(60),
        Duration::from_secs(3),
    );
    let exactly_once = checkpoint == EXACTLY_ONCE;
    suite::assert_delivered(exactly_once, &written, &got, &relay.log_text());
    assert_eq!(relay.stop(), Some(0));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_busy_relay_never_shows_a_gap_exactly_once() {
    let db = Postgres::new("pg_edge_busy_eos").await;
    a_busy_relay_never_shows_a_gap(&db, EXACTLY_ONCE).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_busy_relay_never_shows_a_gap_file_store() {
    let db = Postgres::new("pg_edge_busy_file").await;
    let checkpoint = suite::file_checkpoint(&db);
    a_busy_relay_never_shows_a_gap(&db, &checkpoint).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn too_large_for_its_topic_is_dead_lettered_without_its_value() {
    let db = Postgres::new("pg_edge_huge").await;
    edges::too_large_for_its_topic_is_dead_lettered_without_its_value(&db).await;
}

/// Issue 17 with ACLs (see `common::acl`): a topic the relay may not write to, exactly-once
/// (Kafka refuses the whole transaction, not a record): a stop after what is ahead, or, with
/// `errors.tolerance=all`, dead letters.
#[tokio::test(flavor = "multi_thread")]
async fn a_topic_without_write_access_stops_exactly_once() {
    let db = Postgres::new("pg_edge_acl_eos").await;
    common::acl::a_topic_without_write_access_stops(&db, EXACTLY_ONCE, true).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_topic_without_write_access_is_dead_lettered_exactly_once() {
    let db = Postgres::new("pg_edge_acl_dlq").await;
    common::acl::a_topic_without_write_access_is_dead_lettered(&db).await;
}

/// The prefix of the logical decoding messages in the tests below.
const PREFIX: &str = "bkmsg";

/// A logical decoding message's JSON content for `e`.
fn message_json(e: &OutboxEvent) -> String {
    format!(
        r#"{{"id":"{}","aggregate_type":"{}","aggregate_id":"{}","event_type":"{}","payload":{}}}"#,
        e.id,
        e.aggregate_type,
        e.aggregate_id,
        e.event_type,
        e.payload.as_deref().unwrap_or("null")
    )
}

/// A database whose connector takes the logical decoding messages with [`PREFIX`].
async fn with_messages(name: &str) -> Postgres {
    let mut db = Postgres::new(name).await;
    db.source_extra = format!(r#"message_prefixes = ["{PREFIX}"]"#);
    db
}

/// A message that is not JSON, between two good ones, with the default policy
/// (`errors.tolerance=none`), exactly-once: the first is delivered and checkpointed, the relay
/// stops (exit 1) naming the message's prefix and LSN, never its content, and proposing the
/// `checkpoint set` past its transaction; following it, the third is delivered, exactly once.
#[tokio::test(flavor = "multi_thread")]
async fn undecodable_message_stops_after_what_is_ahead_then_steps_past_exactly_once() {
    let db = with_messages("pg_edge_badmsg").await;
    let (path, port) =
        write_config_full(&db, &db.outbox_table(), "", "", EXACTLY_ONCE, "badmsg.toml");
    let orders = topic(&db, "Order");
    let (mut relay, e0) = edges::started_with_one_delivered(&db, &path, port).await;
    assert_eq!(relay.stop(), Some(0), "log:\n{}", relay.log_text());
    let (m1, m3) = (event("Order", "o-1", 1), event("Order", "o-1", 3));
    db.emit_message(true, PREFIX, &message_json(&m1)).await;
    let lsn = db
        .emit_message(true, PREFIX, "not json at all, top-secret-content")
        .await;
    db.emit_message(true, PREFIX, &message_json(&m3)).await;
    relay.spawn();
    let log = edges::expect_failed_exit(&mut relay, Duration::from_secs(90));
    let at = format!("prefix \"{PREFIX}\" at LSN {lsn}");
    for part in [
        format!("outbox message in pg_logical_emit_message.{PREFIX}"),
        at.clone(),
        "not valid JSON".to_string(),
        "Everything before its source transaction is delivered and checkpointed".to_string(),
        format!(
            "outboxd checkpoint set --config <its file> --connector {} --position",
            db.name()
        ),
    ] {
        assert!(log.contains(&part), "{part:?} in the log:\n{log}");
    }
    assert!(
        !log.contains("top-secret-content"),
        "content leaked:\n{log}"
    );
    let step = edges::proposed_step_past(&log, &at);
    assert_eq!(
        (step[0].as_str(), step.len()),
        ("--position", 2),
        "a transaction step, no --skip: {step:?}"
    );
    assert!(step[1].starts_with("lsn:"), "{step:?}");
    let got = read_topics(
        std::slice::from_ref(&orders),
        2,
        Duration::from_secs(60),
        Duration::from_secs(3),
    );
    assert_eq!(
        edges::ids(&got),
        [e0.id.clone(), m1.id.clone()],
        "what is ahead delivered, nothing after; log:\n{log}"
    );
    // Restarting without the step meets the same message again.
    relay.spawn();
    let again = edges::expect_failed_exit(&mut relay, Duration::from_secs(90));
    assert!(again.contains(&at), "{again}");
    // The documented step-past: exactly that transaction.
    edges::checkpoint_set(&path, &step);
    relay.spawn();
    relay.wait_ready(Duration::from_secs(60));
    let want = [e0, m1, m3];
    let got = read_topics(
        &[orders],
        want.len(),
        Duration::from_secs(90),
        Duration::from_secs(3),
    );
    suite::assert_exactly_once(&want, &got, &relay.log_text());
    assert_eq!(edges::ids(&got), want.map(|e| e.id));
    assert_eq!(relay.stop(), Some(0));
}

/// With `errors.tolerance=all`: good, not JSON (non-transactional), a JSON array, good, a
/// field twice (in a transaction with an outbox row after it), then a good row: the good
/// events are delivered once each, in order, and the three messages that do not decode go to
/// the dead-letter topic once each, in order, with their content as the value and headers
/// saying why and where from; the stream goes on, across a restart.
#[tokio::test(flavor = "multi_thread")]
async fn undecodable_messages_are_dead_lettered_in_order_exactly_once() {
    let db = with_messages("pg_edge_badmsg_dlq").await;
    let dlq = format!("{}.dlq", db.name());
    let checkpoint = format!(
        "{EXACTLY_ONCE}\n\n[connectors.errors]\ntolerance = \"all\"\ndead_letter_topic = \"{dlq}\""
    );
    let (path, port) = write_config_full(
        &db,
        &db.outbox_table(),
        "",
        "",
        &checkpoint,
        "badmsg_dlq.toml",
    );
    let orders = topic(&db, "Order");
    let mut relay = Relay::start(path, port);
    let (g1, g2, g3) = (
        event("Order", "o-1", 1),
        event("Order", "o-1", 2),
        event("Order", "o-1", 3),
    );
    let not_json = "not json at all";
    let array = "[1,2]";
    let twice = r#"{"id":"x","id":"y"}"#;
    db.emit_message(true, PREFIX, &message_json(&g1)).await;
    let lsn1 = db.emit_message(false, PREFIX, not_json).await;
    let lsn2 = db.emit_message(true, PREFIX, array).await;
    db.emit_message(true, PREFIX, &message_json(&g2)).await;
    db.exec("BEGIN").await;
    let lsn3 = db.emit_message(true, PREFIX, twice).await;
    common::postgres::insert_events(&db.client, "outbox_events", std::slice::from_ref(&g3)).await;
    db.exec("COMMIT").await;
    let want = [g1, g2, g3];
    let got = read_topics(
        std::slice::from_ref(&orders),
        want.len(),
        Duration::from_secs(90),
        Duration::from_secs(3),
    );
    let log = relay.log_text();
    suite::assert_exactly_once(&want, &got, &log);
    assert_eq!(edges::ids(&got), want.clone().map(|e| e.id), "in order");
    let mut dead = read_topics(
        std::slice::from_ref(&dlq),
        3,
        Duration::from_secs(60),
        Duration::from_secs(3),
    );
    dead.sort_by_key(|r| r.offset);
    let expected = [
        (not_json, "outboxd.message.not_json", &lsn1, "1"),
        (array, "outboxd.message.not_an_object", &lsn2, "1"),
        (twice, "outboxd.message.duplicate_field", &lsn3, "1"),
    ];
    assert_eq!(dead.len(), expected.len(), "{dead:?}\nlog:\n{log}");
    for (r, (content, kind, lsn, row)) in dead.iter().zip(expected) {
        let h = |name: &str| r.header(name).unwrap_or_else(|| panic!("{name} on {r:?}"));
        assert_eq!(r.value_str().as_deref(), Some(content), "the raw content");
        assert_eq!(r.key, None);
        assert_eq!(h("__connect.errors.exception.class.name"), kind);
        assert_eq!(h("__connect.errors.stage"), "TRANSFORMATION");
        assert_eq!(h("__connect.errors.connector.name"), db.name());
        assert_eq!(
            h("__outboxd.source.table"),
            format!("pg_logical_emit_message.{PREFIX}")
        );
        assert_eq!(&h("__outboxd.message.lsn"), lsn);
        assert_eq!(h("__outboxd.source.row"), row);
        assert!(h("__outboxd.source.position").starts_with("lsn:"), "{r:?}");
        assert!(h("__outboxd.source.commit").starts_with("lsn:"), "{r:?}");
        assert!(
            h("__connect.errors.exception.message").contains(&format!("at LSN {lsn}")),
            "{r:?}"
        );
    }
    // The stream went on; after a restart nothing is delivered or dead-lettered again.
    assert_eq!(relay.stop(), Some(0), "log:\n{}", relay.log_text());
    relay.spawn();
    relay.wait_ready(Duration::from_secs(60));
    let g4 = event("Order", "o-1", 4);
    db.emit_message(true, PREFIX, &message_json(&g4)).await;
    let all = [want[0].clone(), want[1].clone(), want[2].clone(), g4];
    let got = read_topics(
        &[orders],
        all.len(),
        Duration::from_secs(90),
        Duration::from_secs(3),
    );
    suite::assert_exactly_once(&all, &got, &relay.log_text());
    let dead = read_topics(&[dlq], 3, Duration::from_secs(30), Duration::from_secs(3));
    assert_eq!(dead.len(), 3, "{dead:?}");
    assert_eq!(relay.stop(), Some(0));
}
