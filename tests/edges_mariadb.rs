//! Issue 17 on MariaDB, against the real services: an event that cannot be delivered (stop
//! after committing what is ahead, step past, also with `file:pos` positions; the
//! dead-letter topic, exactly once across `kill -9`; a dead-letter topic too small or that
//! refuses; a poison inside a split transaction), a record too large for its broker-default
//! topic dead-lettered without its value, a topic without WRITE permission (ACLs), purged
//! binlogs behind a GTID or a `file:pos` checkpoint, a 20 MB record, a producer queue that
//! could never hold the largest record, and a MINIMAL row image.
//!
//! The purge tests remove binlogs other tests of this binary may still read: they hold
//! [`BINLOGS`] for writing, every other test for reading.

mod common;

use std::time::Duration;

use common::edges::{self, event, ids, BAD_TYPE};
use common::kafka::read_topics;
use common::mariadb::MariaDb;
use common::relay::{run_cli, Relay};
use common::suite::{self, topic, write_config_full, SourceDb, EXACTLY_ONCE};
use common::OutboxEvent;
use mysql_async::prelude::Queryable;
use tokio::sync::RwLock;

/// Held for writing while binlogs are purged, for reading by every other test.
static BINLOGS: RwLock<()> = RwLock::const_new(());

#[tokio::test(flavor = "multi_thread")]
async fn poison_stop_commits_ahead_then_steps_past_exactly_once() {
    let _binlogs = BINLOGS.read().await;
    let db = MariaDb::new("edge_poison_eos").await;
    edges::poison_stop_commits_ahead_then_steps_past(&db, EXACTLY_ONCE, true).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn poison_stop_commits_ahead_then_steps_past_at_least_once() {
    let _binlogs = BINLOGS.read().await;
    let db = MariaDb::new("edge_poison_alo").await;
    edges::poison_stop_commits_ahead_then_steps_past(&db, &suite::file_checkpoint(&db), false)
        .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn dead_letters_exactly_once_across_kill9() {
    let _binlogs = BINLOGS.read().await;
    edges::dead_letters_in_order(&MariaDb::new("edge_dlq").await, EXACTLY_ONCE, true).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn dead_letters_at_least_once_across_kill9() {
    let _binlogs = BINLOGS.read().await;
    let db = MariaDb::new("edge_dlq_alo").await;
    edges::dead_letters_in_order(&db, &suite::file_checkpoint(&db), false).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn too_large_for_its_topic_is_dead_lettered_without_its_value() {
    let _binlogs = BINLOGS.read().await;
    let db = MariaDb::new("edge_huge").await;
    edges::too_large_for_its_topic_is_dead_lettered_without_its_value(&db).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn twenty_megabyte_event_is_delivered() {
    let _binlogs = BINLOGS.read().await;
    edges::twenty_megabyte_event_is_delivered(&MariaDb::new("edge_large").await).await;
}

/// The dead-letter topic must take every dead letter the connector may send. One that takes
/// less (`max.message.bytes` 1 MiB, about a stock broker's default, below
/// `kafka.max_record_bytes` plus framing) is refused by `check` and at startup, naming both
/// settings, instead of stopping the connector at the first large dead letter. One shrunk
/// while the relay runs refuses a dead letter: the connector stops, definitely, without
/// checkpointing past the event; once the topic takes it again, a restart writes the dead
/// letter and delivers what follows, exactly once.
#[tokio::test(flavor = "multi_thread")]
async fn a_dead_letter_topic_that_refuses_stops_the_connector() {
    let _binlogs = BINLOGS.read().await;
    let db = MariaDb::new("edge_dlq_refused").await;
    let dlq = format!("{}.dlq", db.name());
    suite::topic_with_max_bytes(&dlq, 1024 * 1024).await;
    let checkpoint = format!(
        "{EXACTLY_ONCE}\n\n[connectors.errors]\ntolerance = \"all\"\ndead_letter_topic = \"{dlq}\""
    );
    let (path, port) = write_config_full(&db, &db.outbox_table(), "", "", &checkpoint, "c.toml");
    let cfg = path.to_str().unwrap();
    let too_small = [
        format!("the dead-letter topic {dlq} takes records of at most max.message.bytes=1048576"),
        "kafka.max_record_bytes=16777216".to_string(),
        "raise the topic's max.message.bytes to at least 16842752".to_string(),
    ];
    let (code, out, _) = run_cli(&["check", "--config", cfg]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains(&format!("[FAIL] {}: dead-letter topic {dlq}:", db.name()))
            && too_small.iter().all(|p| out.contains(p)),
        "{out}"
    );
    let mut relay = Relay::launch_with_args(&[cfg], port, path.with_extension("log"));
    let log = edges::expect_failed_exit(&mut relay, Duration::from_secs(60));
    assert!(too_small.iter().all(|p| log.contains(p)), "log:\n{log}");
    let large_enough = 17 * 1024 * 1024;
    suite::topic_with_max_bytes(&dlq, large_enough).await;
    let (code, out, _) = run_cli(&["check", "--config", cfg]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains(&format!(
            "dead-letter topic {dlq}: max.message.bytes=17825792"
        )),
        "{out}"
    );

    relay.spawn();
    relay.wait_ready(Duration::from_secs(60));
    let orders = topic(&db, "Order");
    let e1 = edges::one_delivered(&db).await;
    suite::topic_with_max_bytes(&dlq, 2048).await;
    let filler: String = (0..8_000)
        .map(|_| char::from_digit(rand::random::<u32>() % 16, 16).unwrap())
        .collect();
    let poison = OutboxEvent::new(
        BAD_TYPE,
        "o-2",
        "Changed",
        Some(&format!(r#"{{"seq":1,"f":"{filler}"}}"#)),
    );
    let e2 = event("Order", "o-1", 2);
    db.insert(std::slice::from_ref(&poison), false).await;
    db.insert(std::slice::from_ref(&e2), false).await;
    let log = edges::expect_failed_exit(&mut relay, Duration::from_secs(90));
    assert!(
        log.contains(&format!(
            "the dead-letter topic {dlq} refused the dead letter of outbox event {}",
            poison.id
        )),
        "log:\n{log}"
    );
    suite::topic_with_max_bytes(&dlq, large_enough).await;
    relay.spawn();
    relay.wait_ready(Duration::from_secs(60));
    let got = read_topics(
        std::slice::from_ref(&orders),
        2,
        Duration::from_secs(60),
        Duration::from_secs(3),
    );
    suite::assert_exactly_once(&[e1, e2], &got, &relay.log_text());
    let dead = read_topics(&[dlq], 1, Duration::from_secs(60), Duration::from_secs(3));
    assert_eq!(ids(&dead), vec![poison.id.clone()]);
    assert_eq!(relay.stop(), Some(0));
}

/// A poison event deep inside a source transaction larger than a batch: the rows before it
/// are delivered (the error says so), the checkpoint stands right before it, and the
/// proposed `checkpoint set --skip` steps past that event alone, so the rest of its
/// transaction follows. Exactly once with `exactly_once`, none lost otherwise.
async fn poison_inside_a_split_transaction(db: &MariaDb, checkpoint: &str, exactly_once: bool) {
    let (path, port) = write_config_full(db, &db.outbox_table(), "", "", checkpoint, "s.toml");
    let orders = topic(db, "Order");
    let mut relay = Relay::start(path.clone(), port);
    assert_eq!(relay.stop(), Some(0));
    let mut txn = suite::sequenced_range("Order", 4, 0..6_000, 10);
    let bad_index = 5_500;
    txn[bad_index] = event(BAD_TYPE, "o-x", bad_index);
    let bad = txn[bad_index].clone();
    db.insert(&txn, false).await;
    relay.spawn();
    let log = edges::expect_failed_exit(&mut relay, Duration::from_secs(120));
    assert!(
        log.contains(&format!("outbox event {}", bad.id))
            && log.contains("first 5500 row(s) are already delivered"),
        "log:\n{log}"
    );
    let step = edges::proposed_step_past(&log, &bad.id);
    assert_eq!(
        step[2..],
        ["--skip".to_string(), "5501".to_string()],
        "{step:?}"
    );
    let got = read_topics(
        std::slice::from_ref(&orders),
        bad_index,
        Duration::from_secs(120),
        Duration::from_secs(3),
    );
    suite::assert_delivered(exactly_once, &txn[..bad_index], &got, &log);
    edges::checkpoint_set(&path, &step);
    relay.spawn();
    relay.wait_ready(Duration::from_secs(60));
    let want: Vec<OutboxEvent> = txn.iter().filter(|e| e.id != bad.id).cloned().collect();
    let got = read_topics(
        &[orders],
        want.len(),
        Duration::from_secs(120),
        Duration::from_secs(3),
    );
    suite::assert_delivered(exactly_once, &want, &got, &relay.log_text());
    assert_eq!(relay.stop(), Some(0));
}

#[tokio::test(flavor = "multi_thread")]
async fn poison_inside_a_split_transaction_exactly_once() {
    let _binlogs = BINLOGS.read().await;
    let db = MariaDb::new("edge_split_eos").await;
    poison_inside_a_split_transaction(&db, EXACTLY_ONCE, true).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn poison_inside_a_split_transaction_at_least_once() {
    let _binlogs = BINLOGS.read().await;
    let db = MariaDb::new("edge_split_alo").await;
    let checkpoint = suite::file_checkpoint(&db);
    poison_inside_a_split_transaction(&db, &checkpoint, false).await;
}

/// `checkpoint set --skip N` skips rows of the first transaction with outbox rows after
/// `--position` (a transaction on another table in between is passed over); a skip beyond
/// that transaction's rows is logged and ends with it: the next transaction is delivered.
#[tokio::test(flavor = "multi_thread")]
async fn a_skip_beyond_its_transaction_is_logged_and_ends_there() {
    let _binlogs = BINLOGS.read().await;
    let db = MariaDb::new("edge_skip_scope").await;
    let (path, port) = write_config_full(&db, &db.outbox_table(), "", "", EXACTLY_ONCE, "s.toml");
    let (mut relay, first) = edges::started_with_one_delivered(&db, &path, port).await;
    assert_eq!(relay.stop(), Some(0));
    let at = edges::stored_position(&path);
    edges::checkpoint_set(
        &path,
        &["--position".into(), at.clone(), "--skip".into(), "3".into()],
    );
    db.exec(
        "CREATE TABLE not_the_outbox (id INT PRIMARY KEY); INSERT INTO not_the_outbox VALUES (1)",
    )
    .await;
    let skipped = [event("Order", "o-2", 1), event("Order", "o-2", 2)];
    db.insert(&skipped, false).await;
    let after = [event("Order", "o-3", 3)];
    db.insert(&after, false).await;
    relay.spawn();
    let got = read_topics(
        &[topic(&db, "Order")],
        2,
        Duration::from_secs(120),
        Duration::from_secs(3),
    );
    let log = relay.log_text();
    let mut got_ids = ids(&got);
    got_ids.sort();
    let mut want = vec![first.id.clone(), after[0].id.clone()];
    want.sort();
    assert_eq!(
        got_ids, want,
        "the two-row transaction is skipped, the next one delivered; log:\n{log}"
    );
    assert!(
        log.contains(&format!(
            "the checkpoint skips 3 row(s) of the first source transaction with outbox rows after {at}, which has only 2"
        )),
        "the skip beyond the transaction is logged; log:\n{log}"
    );
    assert_eq!(relay.stop(), Some(0));
}

/// With `binlog_row_image=MINIMAL` (here for the writer's session), an INSERT that leaves a
/// placed column to its default has no such column in its row image: the stop says so, and
/// says to set binlog_row_image=FULL, instead of claiming the table lacks the column.
#[tokio::test(flavor = "multi_thread")]
async fn a_column_left_out_of_a_minimal_row_image_is_named_as_such() {
    let _binlogs = BINLOGS.read().await;
    let db = MariaDb::new("edge_minimal").await;
    let (path, port) = suite::write_config(&db, &db.outbox_table(), "");
    let text = std::fs::read_to_string(&path).unwrap().replace(
        "\"event_type:header:eventType\"",
        "\"event_type:header:eventType,status:header:status\"",
    );
    std::fs::write(&path, text).unwrap();
    let mut relay = Relay::start(path, port);
    let mut c = db.pool.get_conn().await.unwrap();
    c.query_drop("SET SESSION binlog_row_image = 'MINIMAL'")
        .await
        .unwrap();
    c.query_drop(
        "INSERT INTO outbox_events (id, aggregate_type, aggregate_id, event_type, payload) \
         VALUES ('minimal-1', 'Order', 'o-1', 'Created', '{}')",
    )
    .await
    .unwrap();
    drop(c);
    let log = edges::expect_failed_exit(&mut relay, Duration::from_secs(60));
    assert!(
        log.contains(&format!(
            "outbox table {} has column `status`",
            db.outbox_table()
        )) && log.contains("row image leaves it out")
            && log.contains("binlog_row_image=FULL")
            && log.contains("minimal-1"),
        "log:\n{log}"
    );
    assert!(!log.contains("has no column `status`"), "log:\n{log}");
}

/// A `kafka.producer` queue too small for `kafka.max_record_bytes` is refused at startup,
/// naming both settings (such a record would otherwise wait for room for ever, silently).
#[tokio::test(flavor = "multi_thread")]
async fn a_producer_queue_smaller_than_the_largest_record_is_refused_at_startup() {
    let _binlogs = BINLOGS.read().await;
    let db = MariaDb::new("edge_queue").await;
    let (path, port) = write_config_full(
        &db,
        &db.outbox_table(),
        "",
        "max_record_bytes = 33554432\nproducer = { \"queue.buffering.max.kbytes\" = 16384 }",
        EXACTLY_ONCE,
        "q.toml",
    );
    let log = path.with_extension("log");
    let mut relay = Relay::launch_with_args(&[path.to_str().unwrap()], port, log);
    let log = edges::expect_failed_exit(&mut relay, Duration::from_secs(60));
    assert!(
        log.contains("kafka.producer.queue.buffering.max.kbytes=16384")
            && log.contains("kafka.max_record_bytes=33554432"),
        "log:\n{log}"
    );
}

/// Rotates the binlog and purges every older one. MariaDB keeps a binlog until its binlog
/// checkpoint has moved past it (the storage engine made its commits durable), so this
/// retries until the oldest binlog left is the new one.
async fn purge_all_but_a_new_binlog(db: &MariaDb) {
    let mut c = db.pool.get_conn().await.unwrap();
    let files = |rows: Vec<mysql_async::Row>| -> Vec<String> {
        rows.iter().filter_map(|r| r.get(0)).collect()
    };
    c.query_drop("FLUSH BINARY LOGS").await.unwrap();
    let newest = files(c.query("SHOW BINARY LOGS").await.unwrap())
        .pop()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        c.query_drop(format!("PURGE BINARY LOGS TO '{newest}'"))
            .await
            .unwrap();
        let left = files(c.query("SHOW BINARY LOGS").await.unwrap());
        if left.first() == Some(&newest) {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "binlogs before {newest} not purged: {left:?}"
        );
        // Moves the binlog checkpoint on (a new binlog is only started once the older ones'
        // commits are durable).
        c.query_drop("FLUSH LOGS").await.unwrap();
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Issue 17, case 1 on MariaDB: binlogs purged past a stopped connector's checkpoint.
/// `check` passes before the purge; after it, `check` and `status` report it before `run`
/// does; `run` stops with a definite error that names the checkpoint's position;
/// `checkpoint reset` is the explicit way to start fresh, and says the gap is lost.
/// `file_mode`: the connector tracks `file:pos` (`position_mode = "file"`) instead of the
/// GTID position.
async fn purged_binlogs_behind_the_checkpoint(prefix: &str, file_mode: bool) {
    let _binlogs = BINLOGS.write().await;
    let mut db = MariaDb::new(prefix).await;
    if file_mode {
        db.source_extra = "position_mode = \"file\"".into();
    }
    let (path, port) = suite::write_config(&db, &db.outbox_table(), "");
    let cfg = path.to_str().unwrap().to_string();
    let (mut relay, e1) = edges::started_with_one_delivered(&db, &path, port).await;
    assert_eq!(relay.stop(), Some(0));
    let checkpoint = edges::stored_position(&path);
    let kind = if file_mode {
        "binlog_file:"
    } else {
        "mariadb_gtid:"
    };
    assert!(checkpoint.starts_with(kind), "{checkpoint}");
    let (code, out, err) = run_cli(&["check", "--config", &cfg]);
    assert_eq!(code, 0, "before the purge:\n{out}\n{err}");
    assert!(out.contains(&format!("checkpoint: {kind}")), "{out}");
    // Written while the relay is down, then purged with its binlog.
    let lost = event("Order", "o-2", 1);
    db.insert(std::slice::from_ref(&lost), false).await;
    purge_all_but_a_new_binlog(&db).await;

    let value = checkpoint.trim_start_matches(kind);
    let (said, run_said) = if file_mode {
        let file = value.rsplit_once(':').map_or(value, |(f, _)| f).to_string();
        (
            format!("is in binlog file {file}, which the server no longer has"),
            format!("the connector's checkpoint is in binlog file {file}"),
        )
    } else {
        (
            "no longer has the binlogs".to_string(),
            format!(
                "the server no longer has the binlogs that follow the connector's checkpoint \
                 at GTID position {value}"
            ),
        )
    };
    let (code, out, _) = run_cli(&["check", "--config", &cfg]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains(&format!("[FAIL] {}: checkpoint:", db.name()))
            && out.contains(&said)
            && out.contains("checkpoint reset"),
        "{out}"
    );
    let (code, out, _) = run_cli(&["status", "--config", &cfg]);
    assert_eq!(code, 1, "{out}");
    let v: serde_json::Value = serde_json::from_str(out.lines().next().unwrap()).unwrap();
    assert!(
        v["checkpoint_lost"]
            .as_str()
            .is_some_and(|s| s.contains("were purged")),
        "{v}"
    );

    relay.spawn();
    let log = edges::expect_failed_exit(&mut relay, Duration::from_secs(60));
    assert!(
        log.contains(&run_said)
            && log.contains(&format!("checkpoint {checkpoint}"))
            && log.contains("outboxd checkpoint reset"),
        "log:\n{log}"
    );

    edges::reset_then_start_fresh(&db, &mut relay, &path, &checkpoint, &[e1.id]).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn purged_binlogs_behind_the_checkpoint_are_reported_and_reset_starts_fresh() {
    purged_binlogs_behind_the_checkpoint("edge_purged", false).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn purged_binlogs_behind_a_file_pos_checkpoint_are_reported_and_reset_starts_fresh() {
    purged_binlogs_behind_the_checkpoint("edge_purged_file", true).await;
}

/// The poison stop and the documented step-past with `position_mode = "file"`: the
/// positions in the error and in `checkpoint set` are `binlog_file:` ones.
#[tokio::test(flavor = "multi_thread")]
async fn poison_stop_commits_ahead_then_steps_past_with_file_positions() {
    let _binlogs = BINLOGS.read().await;
    let mut db = MariaDb::new("edge_poison_file").await;
    db.source_extra = "position_mode = \"file\"".into();
    edges::poison_stop_commits_ahead_then_steps_past(&db, EXACTLY_ONCE, true).await;
    let config = common::relay::test_dir(db.name()).join("poison.toml");
    let checkpoint = edges::stored_position(&config);
    assert!(checkpoint.starts_with("binlog_file:"), "{checkpoint}");
}

/// Issue 17 with ACLs (see `common::acl`): a topic the relay may not write to stops the
/// connector after what is ahead, exactly-once (where Kafka refuses the whole transaction,
/// not a record) and at-least-once; with `errors.tolerance=all` its events are dead-lettered.
#[tokio::test(flavor = "multi_thread")]
async fn a_topic_without_write_access_stops_exactly_once() {
    let _binlogs = BINLOGS.read().await;
    let db = MariaDb::new("edge_acl_eos").await;
    common::acl::a_topic_without_write_access_stops(&db, EXACTLY_ONCE, true).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_topic_without_write_access_stops_at_least_once() {
    let _binlogs = BINLOGS.read().await;
    let db = MariaDb::new("edge_acl_alo").await;
    let checkpoint = suite::file_checkpoint(&db);
    common::acl::a_topic_without_write_access_stops(&db, &checkpoint, false).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_topic_without_write_access_is_dead_lettered_exactly_once() {
    let _binlogs = BINLOGS.read().await;
    let db = MariaDb::new("edge_acl_dlq").await;
    common::acl::a_topic_without_write_access_is_dead_lettered(&db).await;
}
