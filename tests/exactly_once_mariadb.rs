//! Exactly-once and at-least-once delivery from MariaDB through the Kafka checkpoint store,
//! against the real services: crash loops, fencing, a huge source transaction.

mod common;

use std::collections::HashSet;

use common::mariadb::MariaDb;
use common::suite::{self, SourceDb};

#[tokio::test(flavor = "multi_thread")]
async fn kill9_twenty_times_exactly_once() {
    let db = MariaDb::new("eos_kill").await;
    suite::crash_loop(&db, suite::EXACTLY_ONCE, true, 20).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn kill9_twenty_times_at_least_once() {
    let db = MariaDb::new("alo_kill").await;
    suite::crash_loop(&db, suite::AT_LEAST_ONCE_KAFKA, false, 20).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn second_instance_fences_first() {
    suite::second_instance_fences_first(&MariaDb::new("eos_fence").await).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn huge_transaction_200k_rows_exactly_once() {
    suite::huge_transaction_exactly_once(&MariaDb::new("eos_huge").await, 200_000).await;
}

/// The server drops the binlog connection (the dump thread is killed) while transactions
/// stream, including in the middle of a large one: the relay reconnects and, exactly-once,
/// every event arrives once.
#[tokio::test(flavor = "multi_thread")]
async fn binlog_connection_killed_mid_stream() {
    use mysql_async::prelude::Queryable;
    let db = MariaDb::new("eos_dumpkill").await;
    let (path, port) = suite::write_config_with(
        &db,
        &db.outbox_table(),
        "",
        suite::EXACTLY_ONCE,
        "connector.toml",
    );
    let relay = common::relay::Relay::start(path, port);
    let big = suite::sequenced_events("Batch", 20, 60_000, 10);
    let small = suite::sequenced_events("Single", 5, 200, 10);
    let kill_dump_threads = || async {
        let mut c = db.pool.get_conn().await.unwrap();
        let ids: Vec<u64> = c
            .query(
                "SELECT id FROM information_schema.processlist WHERE command LIKE 'Binlog Dump%'",
            )
            .await
            .unwrap();
        for id in ids {
            let _ = c.query_drop(format!("KILL CONNECTION {id}")).await;
        }
    };
    let events_read = |relay: &common::relay::Relay| -> u64 {
        relay
            .metrics()
            .lines()
            .find(|l| l.starts_with("outboxd_events_read_total"))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0) as u64
    };
    let killer = async {
        // Once while the big transaction is being read (mid-transaction)...
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
        loop {
            let n = events_read(&relay);
            if n > 2_000 && n < 25_000 {
                kill_dump_threads().await;
                println!("killed the dump thread after {n} rows of the big transaction");
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the big transaction never streamed"
            );
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        // ...then a few times between small transactions.
        for _ in 0..4 {
            tokio::time::sleep(std::time::Duration::from_millis(700)).await;
            kill_dump_threads().await;
        }
    };
    let writer = async {
        db.insert(&big, false).await;
        suite::write_in_random_transactions(&db, &small, 5).await;
    };
    tokio::join!(killer, writer);
    let topics = [suite::topic(&db, "Batch"), suite::topic(&db, "Single")];
    let all: Vec<common::OutboxEvent> = big.into_iter().chain(small).collect();
    let got = common::kafka::read_topics(
        &topics,
        all.len(),
        std::time::Duration::from_secs(300),
        std::time::Duration::from_secs(4),
    );
    suite::assert_exactly_once(&all, &got, &relay.log_text());
}

/// A checkpoint topic shared by several connectors: another producer's open Kafka
/// transaction on it holds back the topic's last stable offset, and a restart must still find
/// its own, later, committed checkpoint (waiting for that transaction to end) rather than
/// resuming at the server's current position.
#[tokio::test(flavor = "multi_thread")]
async fn shared_checkpoint_topic_with_an_open_transaction() {
    use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
    let db = MariaDb::new("alo_shared").await;
    let shared = common::unique("shared_ckpt");
    // A zombie: a transaction on the shared topic that is never committed (the broker aborts
    // it after its 15 s timeout).
    let zombie: FutureProducer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", common::kafka_bootstrap())
        .set("transactional.id", common::unique("zombie"))
        .set("transaction.timeout.ms", "15000")
        .create()
        .unwrap();
    zombie
        .init_transactions(std::time::Duration::from_secs(30))
        .unwrap();
    zombie.begin_transaction().unwrap();
    zombie
        .send(
            FutureRecord::<str, str>::to(&shared)
                .key("someone-else")
                .payload("{}"),
            std::time::Duration::from_secs(30),
        )
        .await
        .unwrap();
    let alo = format!("store = \"kafka\"\ntopic = \"{shared}\"\ndelivery = \"at_least_once\"");
    let (path, port) = suite::write_config_with(&db, &db.outbox_table(), "", &alo, "b.toml");
    let mut relay = common::relay::Relay::start(path, port);
    let first = suite::sequenced_range("Order", 3, 0..10, 0);
    db.insert(&first, false).await;
    let got = common::kafka::read_expecting(&[suite::topic(&db, "Order")], first.len());
    assert_eq!(got.len(), first.len());
    assert_eq!(relay.stop(), Some(0));
    // Written while the relay is down: lost if the restart missed its checkpoint.
    let second = suite::sequenced_range("Order", 3, 10..20, 0);
    db.insert(&second, false).await;
    relay.spawn();
    relay.wait_ready(std::time::Duration::from_secs(150));
    let all: Vec<common::OutboxEvent> = first.into_iter().chain(second).collect();
    let got = common::kafka::read_expecting(&[suite::topic(&db, "Order")], all.len());
    let log = relay.log_text();
    assert_eq!(
        log.matches("no checkpoint yet").count(),
        1,
        "the restart found no checkpoint:\n{log}"
    );
    let ids: HashSet<String> = got.iter().filter_map(|r| r.header("id")).collect();
    assert!(
        all.iter().all(|e| ids.contains(&e.id)),
        "events lost; log:\n{log}"
    );
    drop(zombie);
}
