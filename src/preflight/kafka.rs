//! Kafka preflight: the brokers answer a metadata request with the connector's settings.

use std::time::Duration;

use super::{CheckResult, Status};
use crate::config::ConnectorConfig;
use crate::sink::{KafkaLink, KafkaSink, SinkError};

/// How long the brokers have to answer the metadata request.
const PROBE_TIMEOUT: Duration = Duration::from_secs(10);

/// Checks that Kafka is reachable with the connector's producer settings.
pub fn check(cfg: &ConnectorConfig) -> Vec<CheckResult> {
    let name = cfg.name.as_str();
    // Quiet: the outcome is this check's line, not librdkafka's retries on stderr.
    let link = KafkaLink::quiet(name, &cfg.kafka.bootstrap_servers);
    let sink = match KafkaSink::new(&cfg.kafka, name, link.clone()) {
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
    match sink.probe(PROBE_TIMEOUT) {
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
                "no broker of {} answered within {}s ({}); check kafka.bootstrap_servers / \
                 --kafka-bootstrap and that the brokers listen there",
                cfg.kafka.bootstrap_servers,
                PROBE_TIMEOUT.as_secs(),
                match (&f, link.last_error()) {
                    (SinkError::Link(_), _) | (_, None) => f.to_string(),
                    (_, Some(e)) => format!("last connection error: {e}"),
                },
            ),
        )],
    }
}
