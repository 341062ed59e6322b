//! Kafka stops and starts mid-stream. This binary stops the shared test broker, so it holds
//! a single test (cargo runs test binaries one after another).

mod common;

use common::mariadb::MariaDb;
use common::suite;

#[tokio::test(flavor = "multi_thread")]
async fn mariadb_kafka_outage_exactly_once() {
    suite::kafka_outage_mid_stream(&MariaDb::new("eos_outage").await).await;
}
