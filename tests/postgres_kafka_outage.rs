//! PostgreSQL: the slot's `confirmed_flush_lsn` does not move while Kafka is unreachable, and
//! moves once the events are delivered.
//!
//! The shared broker is not stopped (other test binaries use it): the relay is pointed at a
//! bootstrap address where nothing listens, then restarted with the real one.

mod common;

use std::time::{Duration, Instant};

use common::kafka::read_expecting;
use common::postgres::Postgres;
use common::relay::{free_port, Relay};
use common::suite::{self, topic};
use common::OutboxEvent;

#[tokio::test(flavor = "multi_thread")]
async fn confirmed_flush_waits_for_kafka() {
    let db = Postgres::new("pg_outage").await;
    let (path, port) = suite::write_config(&db, &db.outbox_table(), "");
    let dead = format!("127.0.0.1:{}", free_port());
    let log = path.with_extension("log");
    // Not ready (Kafka is unreachable), but streaming: the slot becomes active.
    let mut relay = Relay::launch_with_args(
        &[path.to_str().unwrap(), "--kafka-bootstrap", &dead],
        port,
        log.clone(),
    );
    db.wait_slot_active(Duration::from_secs(60)).await;
    // Let idle progress settle, then write events Kafka cannot take.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let before = db.current_wal().await;
    let events: Vec<OutboxEvent> = (0..5)
        .map(|i| {
            OutboxEvent::new(
                "Order",
                &format!("o-{i}"),
                "OrderCreated",
                Some(&format!(r#"{{"i":{i}}}"#)),
            )
        })
        .collect();
    // The transaction by hand, to know a bound on where its commit record starts: at or
    // after the WAL insert position read just before COMMIT.
    db.exec("BEGIN").await;
    common::postgres::insert_events(&db.client, &db.outbox_table(), &events).await;
    let before_commit: i64 = common::postgres::wal_insert_lsn(&db.client).await;
    db.exec("COMMIT").await;
    let after = db.current_wal().await;
    assert!(after > before_commit && before_commit > before);
    // Status updates go out every second: give them ten chances to (wrongly) confirm. The
    // slot may confirm a position inside the transaction (a keepalive sent while the
    // walsender had read part of its WAL, which the WAL writer flushes before the commit):
    // on restart PostgreSQL skips only transactions whose commit record starts before
    // confirmed_flush_lsn, so that is the line not to cross.
    let until = Instant::now() + Duration::from_secs(10);
    while Instant::now() < until {
        let (confirmed, _, active) = db.slot_state().await.unwrap();
        assert!(active.is_some(), "the relay keeps streaming");
        assert!(
            confirmed <= before_commit,
            "confirmed_flush_lsn {confirmed} passed the undelivered transaction's commit \
             record (it starts at or after {before_commit}); log:\n{}",
            relay.log_text()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    // A crash while Kafka is down, then a restart with the real broker.
    relay.kill9();
    drop(relay);
    let relay = Relay::start_with_args(&[path.to_str().unwrap()], port, log);
    let got = read_expecting(&[topic(&db, "Order")], events.len());
    suite::assert_records(&db, &events, &got);
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut confirmed = 0;
    while Instant::now() < deadline {
        confirmed = db.slot_state().await.unwrap().0;
        if confirmed >= after {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert!(
        confirmed >= after,
        "confirmed_flush_lsn {confirmed} did not pass the delivered transaction ({after}); log:\n{}",
        relay.log_text()
    );
}
