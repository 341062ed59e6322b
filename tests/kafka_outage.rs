//! Kafka stops and starts mid-stream, for each source. This binary stops the shared test
//! broker, so its one test runs the sources one after the other (cargo runs test binaries
//! one at a time).

mod common;

use common::mariadb::MariaDb;
use common::postgres::Postgres;
use common::suite;

#[tokio::test(flavor = "multi_thread")]
async fn kafka_outage_exactly_once_both_sources() {
    suite::kafka_outage_mid_stream(&MariaDb::new("eos_outage").await).await;
    suite::kafka_outage_mid_stream(&Postgres::new("pg_eos_outage").await).await;
}
