//! Exactly-once and at-least-once delivery from PostgreSQL through the Kafka checkpoint
//! store, against the real services: crash loops, fencing, a huge source transaction.

mod common;

use common::postgres::Postgres;
use common::suite;

#[tokio::test(flavor = "multi_thread")]
async fn kill9_twenty_times_exactly_once() {
    let db = Postgres::new("pg_eos_kill").await;
    suite::crash_loop(&db, suite::EXACTLY_ONCE, true, 20).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn kill9_twenty_times_at_least_once() {
    let db = Postgres::new("pg_alo_kill").await;
    suite::crash_loop(&db, suite::AT_LEAST_ONCE_KAFKA, false, 20).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn second_instance_fences_first() {
    suite::second_instance_fences_first(&Postgres::new("pg_eos_fence").await).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn huge_transaction_200k_rows_exactly_once() {
    suite::huge_transaction_exactly_once(&Postgres::new("pg_eos_huge").await, 200_000).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn kafka_refusal_stops_then_resumes() {
    let db = Postgres::new("pg_eos_refused").await;
    suite::kafka_refusal_stops_then_resumes(&db, suite::EXACTLY_ONCE, true).await;
}

/// The first start on an idle database checkpoints where streaming starts at once, before
/// any keepalive: a relay stopped seconds later resumes there, not wherever the slot is then.
#[tokio::test(flavor = "multi_thread")]
async fn first_start_checkpoints_at_once() {
    use common::relay::{run_cli, Relay};
    let db = Postgres::new("pg_eos_first_cp").await;
    let (path, port) = suite::write_config_with(
        &db,
        &db.outbox_table(),
        "",
        suite::EXACTLY_ONCE,
        "connector.toml",
    );
    let mut relay = Relay::start(path.clone(), port);
    relay.wait_ready(std::time::Duration::from_secs(60));
    std::thread::sleep(std::time::Duration::from_secs(2));
    assert_eq!(relay.stop(), Some(0), "log:\n{}", relay.log_text());
    let (code, out, err) = run_cli(&["checkpoint", "show", "--config", path.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains(r#""kind":"lsn""#),
        "a checkpoint exists: {out}; log:\n{}",
        relay.log_text()
    );
}
