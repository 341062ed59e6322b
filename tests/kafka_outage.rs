//! Kafka stops and starts mid-stream, for each source, and the relay is stopped while Kafka
//! is down. This binary stops the shared test broker, so its one test runs the cases one
//! after the other (cargo runs test binaries one at a time).

mod common;

use common::mariadb::MariaDb;
use common::postgres::Postgres;
use common::suite;

#[tokio::test(flavor = "multi_thread")]
async fn kafka_outage_both_sources() {
    suite::kafka_outage_mid_stream(&MariaDb::new("eos_outage").await).await;
    suite::kafka_outage_mid_stream(&Postgres::new("pg_eos_outage").await).await;
    let eos = MariaDb::new("eos_outage_stop").await;
    suite::stop_during_kafka_outage(&eos, suite::EXACTLY_ONCE, true).await;
    let alo = Postgres::new("pg_alo_outage_stop").await;
    suite::stop_during_kafka_outage(&alo, &suite::file_checkpoint(&alo), false).await;
    let alo_kafka_store = MariaDb::new("alo_kstore_outage_stop").await;
    suite::stop_during_kafka_outage(&alo_kafka_store, suite::AT_LEAST_ONCE_KAFKA, false).await;
}
