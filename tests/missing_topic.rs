//! Issue 25, item 5: a topic events are routed to that does not exist, with the real
//! services.
//!
//! Without auto-creation, librdkafka holds such records without a word for
//! `topic.metadata.propagation.max.ms` (30 s), and the relay used to restart from its
//! checkpoint every few seconds for ever, naming no topic. Now it stops with a definite
//! error that names the topic and what to do, its checkpoint before the events routed
//! there; once the topic exists, a restart delivers them (exactly once in `exactly_once`
//! mode). `check` fails a connector whose fixed topic (`route.topic.replacement` without
//! `${routedByValue}`) is missing, and `status` shows a stopped connector's reason.
//!
//! The local broker creates topics on request (`auto.create.topics.enable=true`, as in
//! docker/kafka/server.properties); the connectors here turn auto-creation off on their side
//! (`kafka.producer` `allow.auto.create.topics=false`): librdkafka then never asks the
//! broker to create a topic, which is what a broker with `auto.create.topics.enable=false`
//! gives too (both answer `UNKNOWN_TOPIC_OR_PARTITION`).

mod common;

use std::time::Duration;

use common::edges::{event, expect_failed_exit};
use common::kafka::{create_topic, delete_topic, read_topics};
use common::mariadb::MariaDb;
use common::postgres::Postgres;
use common::relay::{run_cli, test_dir, Relay};
use common::suite::{self, topic, write_config_full, SourceDb, AT_LEAST_ONCE_KAFKA, EXACTLY_ONCE};

/// `[connectors.kafka]` lines: the producer never asks the broker to create a topic.
const NO_AUTO_CREATE: &str = r#"producer = { "allow.auto.create.topics" = "false" }"#;

/// How long a stop may take: the stall watch notices records without a delivery report after
/// 4-5 s, the lookup confirms in about 2 s; generous for a loaded machine.
const STOPS_WITHIN: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread")]
async fn deleted_topic_stops_then_resumes_exactly_once() {
    let db = MariaDb::new("mt_deleted_eos").await;
    deleted_topic_stops_then_resumes(&db, EXACTLY_ONCE, true).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn deleted_topic_stops_then_resumes_at_least_once() {
    let db = Postgres::new("mt_deleted_alo").await;
    deleted_topic_stops_then_resumes(&db, AT_LEAST_ONCE_KAFKA, false).await;
}

/// The relay streams to an existing topic; the topic is deleted; the next events stop the
/// connector (exit 1) with an error naming the topic, the auto-creation setting and the
/// fix, without a restart loop. After the topic is created again, a restart delivers the
/// events written meanwhile: the checkpoint stayed before them.
async fn deleted_topic_stops_then_resumes<S: SourceDb>(
    db: &S,
    checkpoint: &str,
    exactly_once: bool,
) {
    let orders = topic(db, "Order");
    create_topic(&orders, 3).await;
    let (path, port) = write_config_full(
        db,
        &db.outbox_table(),
        "",
        NO_AUTO_CREATE,
        checkpoint,
        "connector.toml",
    );
    let mut relay = Relay::start(path, port);
    let first = event("Order", "o-1", 0);
    db.insert(std::slice::from_ref(&first), false).await;
    let got = read_topics(
        std::slice::from_ref(&orders),
        1,
        Duration::from_secs(60),
        Duration::ZERO,
    );
    assert_eq!(got.len(), 1, "log:\n{}", relay.log_text());
    // Let the first event's checkpoint be written (at-least-once: at most a second later).
    tokio::time::sleep(Duration::from_secs(2)).await;

    delete_topic(&orders).await;
    let after: Vec<_> = (1..=3)
        .map(|i| event("Order", &format!("o-{i}"), i))
        .collect();
    db.insert(&after[..1], false).await;
    db.insert(&after[1..], false).await;

    let log = expect_failed_exit(&mut relay, STOPS_WITHIN);
    let stop = log
        .lines()
        .find(|l| l.contains("does not exist"))
        .unwrap_or_else(|| panic!("no line names the missing topic; log:\n{log}"));
    for words in [
        format!("topic {orders} does not exist"),
        "allow.auto.create.topics=false".to_string(),
        format!("Create {orders}"),
        "auto.create.topics.enable=true".to_string(),
    ] {
        assert!(stop.contains(&words), "{words:?} in the stop: {stop}");
    }
    assert!(
        !log.contains("transient failure, restarting from the checkpoint"),
        "the missing topic is a stop, not a restart loop; log:\n{log}"
    );

    // The fix: the topic again. The events written while it was missing are delivered.
    create_topic(&orders, 3).await;
    relay.spawn();
    relay.wait_ready(Duration::from_secs(60));
    let got = read_topics(
        std::slice::from_ref(&orders),
        after.len(),
        Duration::from_secs(60),
        Duration::from_secs(3),
    );
    let log = relay.log_text();
    if exactly_once {
        suite::assert_exactly_once(&after, &got, &log);
    } else {
        suite::assert_none_lost(&after, &got, &log);
    }
    assert_eq!(relay.stop(), Some(0));
}

/// The connector's own checkpoint topic deleted while it streams, exactly-once (MariaDB:
/// nothing on the server remembers where it was). The open transaction fails, and the
/// restart creates the topic again, empty; it must resume from the last checkpoint the
/// process committed, not at the configured start position (the binlog's end by then),
/// which skipped every event written since that checkpoint: 17 of 40 events written during
/// the deletion were lost without a word. (At-least-once, the store's producer creates the
/// topic again as it writes, and the connector goes on.)
#[tokio::test(flavor = "multi_thread")]
async fn deleted_checkpoint_topic_resumes_from_the_last_checkpoint() {
    let db = MariaDb::new("mt_ckpt_topic").await;
    let (path, port) = write_config_full(
        &db,
        &db.outbox_table(),
        "",
        "",
        EXACTLY_ONCE,
        "connector.toml",
    );
    let mut relay = Relay::start(path, port);
    let first = event("Order", "o-0", 0);
    db.insert(std::slice::from_ref(&first), false).await;
    let orders = topic(&db, "Order");
    read_topics(
        std::slice::from_ref(&orders),
        1,
        Duration::from_secs(60),
        Duration::ZERO,
    );
    tokio::time::sleep(Duration::from_secs(2)).await;

    // Events keep coming while the topic is deleted and the connector restarts.
    let during: Vec<_> = (1..=20)
        .map(|i| event("Order", &format!("o-{i}"), i))
        .collect();
    let writer = {
        let pool = db.pool.clone();
        let during = during.clone();
        tokio::spawn(async move {
            for e in during {
                let mut c = pool.get_conn().await.unwrap();
                common::mariadb::insert_events(&mut c, "outbox_events", &[e]).await;
                tokio::time::sleep(Duration::from_millis(400)).await;
            }
        })
    };
    delete_topic(&format!("outboxd.checkpoints.{}", db.name())).await;
    writer.await.unwrap();
    let want: Vec<_> = std::iter::once(first).chain(during).collect();
    let got = read_topics(
        std::slice::from_ref(&orders),
        want.len(),
        Duration::from_secs(120),
        Duration::from_secs(3),
    );
    let log = relay.log_text();
    suite::assert_exactly_once(&want, &got, &log);
    assert!(
        log.contains("no longer holds the connector's checkpoint"),
        "log:\n{log}"
    );
    assert_eq!(
        log.matches("no checkpoint yet").count(),
        1,
        "only the first start starts fresh; log:\n{log}"
    );
    assert_eq!(relay.stop(), Some(0));
}

/// A topic that never existed (the first event of a new aggregate type): one connector of
/// two in the process stops, naming it, while the other runs on; `status` shows the stopped
/// one's reason. `check` fails a connector whose one fixed topic does not exist.
#[tokio::test(flavor = "multi_thread")]
async fn never_created_topic_stops_and_status_and_check_say_so() {
    let db = MariaDb::new("mt_never").await;
    let name = db.name().to_string();
    let table = db.outbox_table();
    let dir = test_dir(&name);
    // Connector `<name>` routes by aggregate type, without auto-creation; connector
    // `<name>_all` sends everything to one existing topic and keeps the process running.
    let all = format!("{name}.all");
    create_topic(&all, 1).await;
    let (path, port) = write_config_full(
        &db,
        &table,
        "",
        NO_AUTO_CREATE,
        &suite::file_checkpoint(&db),
        "connectors.toml",
    );
    let second = format!(
        r#"
[[connectors]]
name = "{name}_all"
{source}

[connectors.router]
"route.topic.replacement" = "{all}"

[connectors.kafka]
bootstrap_servers = "{bootstrap}"

[connectors.checkpoint]
store = "file"
path = "{checkpoint}"
"#,
        source = db.source_toml(&table),
        bootstrap = common::kafka_bootstrap(),
        checkpoint = dir.join("checkpoint_all.json").display(),
    );
    let text = std::fs::read_to_string(&path).unwrap() + &second;
    std::fs::write(&path, text).unwrap();
    let mut relay = Relay::start(path.clone(), port);

    let ghost = topic(&db, "Ghost");
    let events = vec![event("Ghost", "g-1", 1), event("Ghost", "g-2", 2)];
    db.insert(&events, false).await;
    // The other connector delivers them.
    let got = read_topics(
        std::slice::from_ref(&all),
        events.len(),
        Duration::from_secs(60),
        Duration::ZERO,
    );
    assert_eq!(got.len(), events.len(), "log:\n{}", relay.log_text());

    // `status` shows the routing connector stopped, with the reason naming the topic.
    let deadline = std::time::Instant::now() + STOPS_WITHIN;
    let line = loop {
        let (_, out, err) = run_cli(&["status", "--config", path.to_str().unwrap()]);
        let line = out
            .lines()
            .find(|l| l.contains(&format!("\"connector\":\"{name}\"")))
            .map(str::to_string);
        if let Some(l) = line.filter(|l| l.contains("\"state\":\"failed\"")) {
            break l;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "status never showed {name} failed: {out}\n{err}\nlog:\n{}",
            relay.log_text()
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    };
    assert!(
        line.contains(&format!("topic {ghost} does not exist"))
            && line.contains("allow.auto.create.topics=false"),
        "{line}"
    );
    let log = relay.log_text();
    assert!(
        log.contains(&format!("topic {ghost} does not exist")),
        "log:\n{log}"
    );
    assert!(
        !log.contains("transient failure, restarting from the checkpoint"),
        "a stop, not a restart loop; log:\n{log}"
    );
    // The other connector runs on.
    let more = event("Ghost", "g-3", 3);
    db.insert(std::slice::from_ref(&more), false).await;
    let got = read_topics(
        std::slice::from_ref(&all),
        events.len() + 1,
        Duration::from_secs(60),
        Duration::ZERO,
    );
    assert!(got
        .iter()
        .any(|r| r.header("id").as_deref() == Some(more.id.as_str())));
    assert_eq!(relay.stop(), Some(1), "one connector failed: exit 1");

    // `check`: a fixed topic that does not exist, without auto-creation, fails; with the
    // topic there it passes.
    let fixed = format!("{name}.fixed");
    let (fixed_path, _) = write_config_full(
        &db,
        &table,
        "",
        NO_AUTO_CREATE,
        &suite::file_checkpoint(&db),
        "fixed.toml",
    );
    let text = std::fs::read_to_string(&fixed_path).unwrap().replace(
        &format!("\"route.topic.replacement\" = \"{name}.${{routedByValue}}\""),
        &format!("\"route.topic.replacement\" = \"{fixed}\""),
    );
    assert!(text.contains(&fixed));
    std::fs::write(&fixed_path, text).unwrap();
    let (code, out, err) = run_cli(&["check", "--config", fixed_path.to_str().unwrap()]);
    let line = out
        .lines()
        .find(|l| l.contains("kafka topics"))
        .unwrap_or_else(|| panic!("no kafka topics line: {out}\n{err}"));
    assert!(
        line.contains("[FAIL]") && line.contains(&format!("topic {fixed}, which does not exist")),
        "{line}"
    );
    assert_ne!(code, 0, "{out}");
    create_topic(&fixed, 1).await;
    let (_, out, _) = run_cli(&["check", "--config", fixed_path.to_str().unwrap()]);
    let line = out.lines().find(|l| l.contains("kafka topics")).unwrap();
    assert!(
        line.contains("[ok  ]") && line.contains("which exists"),
        "{line}"
    );
}

/// `[connectors.kafka]` lines: Kafka Connect's topic creation (KIP-158), a default group of
/// 5 partitions and a group `orders` of 2 partitions and a retention for `orders_topic`.
fn topic_creation(orders_topic: &str, replication_factor: i32) -> String {
    format!(
        r#"topic_creation = {{ "default.partitions" = 5, "default.replication.factor" = {replication_factor}, groups = "orders", "orders.include" = ["{}"], "orders.partitions" = 2, "orders.retention.ms" = 3600000 }}"#,
        orders_topic.replace('.', "\\\\.")
    )
}

/// Issue 26: a connector with `topic.creation.*` creates each missing routed topic before its
/// first record as Kafka Connect does — the first matching group's partition count and
/// topic configs, else the default group's — so keyed records land on the partitions they
/// would under Debezium; the broker's auto-creation (3 partitions here) never gets there
/// first.
#[tokio::test(flavor = "multi_thread")]
async fn routed_topics_are_created_with_their_topic_creation_group() {
    let db = MariaDb::new("mt_creation").await;
    let (orders, payments) = (topic(&db, "Order"), topic(&db, "Payment"));
    let (path, port) = write_config_full(
        &db,
        &db.outbox_table(),
        "",
        &topic_creation(&orders, -1),
        EXACTLY_ONCE,
        "connector.toml",
    );
    // `check` says how missing topics are created and that the brokers accept each group.
    let (code, out, err) = run_cli(&["check", "--config", path.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}\n{err}");
    for group in ["orders", "default"] {
        assert!(
            out.lines().any(|l| l.starts_with("[ok  ]")
                && l.contains(&format!("topic creation group {group}: the brokers accept"))),
            "{out}"
        );
    }
    assert!(
        out.contains("is created by outboxd before its first event"),
        "{out}"
    );
    let relay = Relay::start(path, port);
    let events: Vec<_> = (0..30)
        .map(|i| {
            let agg = if i % 3 == 0 { "Payment" } else { "Order" };
            event(agg, &format!("k-{}", i % 10), i)
        })
        .collect();
    db.insert(&events, false).await;
    let got = read_topics(
        &[orders.clone(), payments.clone()],
        events.len(),
        Duration::from_secs(90),
        Duration::from_secs(2),
    );
    let log = relay.log_text();
    suite::assert_exactly_once(&events, &got, &log);
    assert_eq!(
        common::kafka::partition_count(&orders),
        2,
        "the orders group; log:\n{log}"
    );
    assert_eq!(
        common::kafka::partition_count(&payments),
        5,
        "the default group; log:\n{log}"
    );
    for r in &got {
        let key = r.key.as_deref().expect("keyed");
        let n = if r.topic == orders { 2 } else { 5 };
        assert_eq!(
            r.partition,
            common::java_partition(key, n),
            "{} keyed {:?} on the partition Kafka Connect's producer picks",
            r.topic,
            r.key_str()
        );
    }
    let retention = common::kafka::topic_config(&orders, "retention.ms").await;
    assert_eq!(
        retention.as_deref(),
        Some("3600000"),
        "the group's topic config"
    );
    assert!(log.contains("created topic"), "log:\n{log}");
}

/// A topic creation Kafka refuses (a replication factor above the broker count) stops the
/// connector with a definite error naming the topic, its group and what to do; nothing is
/// written.
#[tokio::test(flavor = "multi_thread")]
async fn a_refused_topic_creation_stops_the_connector() {
    let db = Postgres::new("mt_creation_refused").await;
    let orders = topic(&db, "Order");
    let (path, port) = write_config_full(
        &db,
        &db.outbox_table(),
        "",
        &topic_creation(&orders, 3),
        AT_LEAST_ONCE_KAFKA,
        "connector.toml",
    );
    // `check` finds it before the first event does.
    let (code, out, _) = run_cli(&["check", "--config", path.to_str().unwrap()]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.lines().any(|l| l.starts_with("[FAIL]")
            && l.contains("topic creation group default: the brokers would refuse")
            && l.contains("replication factor 3")),
        "{out}"
    );
    let mut relay = Relay::start(path, port);
    db.insert(&[event("Order", "o-1", 0)], false).await;
    let log = expect_failed_exit(&mut relay, STOPS_WITHIN);
    assert!(
        log.contains(&format!("topic {orders} was not created"))
            && log.contains("replication factor 3")
            && log.contains("grant the principal CREATE"),
        "log:\n{log}"
    );
    assert!(
        !common::kafka::topic_exists(&orders),
        "no topic with other settings"
    );
}
