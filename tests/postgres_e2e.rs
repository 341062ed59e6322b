//! PostgreSQL pgoutput -> Kafka, end to end through the real `outboxd` binary, against the
//! real PostgreSQL 15 and Kafka started by `scripts/services.sh up`.

mod common;

use common::postgres::Postgres;
use common::suite;

#[tokio::test(flavor = "multi_thread")]
async fn single_insert() {
    suite::single_insert(&Postgres::new("pg_single").await).await;
}
