//! Kafka preflight: the brokers answer a metadata request with the connector's settings.

use std::time::Duration;

use super::{CheckResult, Status};
use crate::config::ConnectorConfig;
use crate::sink::{KafkaLink, KafkaSink};

/// Checks that Kafka is reachable with the connector's producer settings.
pub fn check(cfg: &ConnectorConfig) -> Vec<CheckResult> {
    let name = cfg.name.as_str();
    let link = KafkaLink::new(name, &cfg.kafka.bootstrap_servers);
    let sink = match KafkaSink::new(&cfg.kafka, name, link) {
        Ok(s) => s,
        Err(f) => {
            return vec![CheckResult::new(
                name,
                "kafka producer",
                Status::Fail,
                f.to_string(),
            )]
        }
    };
    match sink.probe(Duration::from_secs(10)) {
        Ok(brokers) => vec![CheckResult::new(
            name,
            "kafka",
            Status::Pass,
            format!(
                "{} reachable ({brokers} broker(s))",
                cfg.kafka.bootstrap_servers
            ),
        )],
        Err(f) => vec![CheckResult::new(
            name,
            "kafka",
            Status::Fail,
            format!(
                "{}: {}; check kafka.bootstrap_servers / --kafka-bootstrap and that the brokers \
                 listen there",
                cfg.kafka.bootstrap_servers, f
            ),
        )],
    }
}
