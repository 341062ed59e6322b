//! Faults on the real services while both sources are written to and delivered exactly once:
//! the Kafka broker frozen for 30 s (SIGSTOP, SIGCONT), killed (`kill -9`, restarted), and
//! MariaDB and PostgreSQL down for 30 s. A `read_committed` consumer must see every committed
//! event once, in per-aggregate order (an insert whose commit failed as the database went
//! down may be there once, or not at all). How fast delivery resumes is measured by
//! `benches/faults` (`scripts/bench.sh faults`), not asserted here.
//!
//! This binary stops the shared test services, so its one test runs the faults one after the
//! other (cargo runs test binaries one at a time).

mod common;

use std::time::Duration;

use common::faults::{Fault, Scenario};

#[tokio::test(flavor = "multi_thread")]
async fn faults_lose_and_duplicate_nothing() {
    // 5 events every 20 ms on each source: 250 events/s, a backlog of ~7,500 per outage.
    let mut scenario = Scenario::start("faults", 5, Duration::from_millis(20), true).await;
    let faults = [
        Fault::BrokerFrozen(Duration::from_secs(30)),
        Fault::BrokerKilled,
        Fault::DatabasesDown(Duration::from_secs(30)),
    ];
    scenario.wait_flowing(std::time::Instant::now(), Duration::from_secs(60));
    for fault in faults {
        let ended = tokio::task::spawn_blocking(move || fault.apply())
            .await
            .expect("fault");
        let flowing = scenario.wait_flowing(ended, Duration::from_secs(180));
        println!("{}: delivering again after {flowing:?}", fault.label());
        tokio::time::sleep(Duration::from_secs(3)).await;
    }
    scenario.stop_writers().await;
    for side in &scenario.sides {
        side.assert_exactly_once();
    }
}
