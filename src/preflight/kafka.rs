//! Kafka preflight: the connection's security, and that the brokers answer a metadata
//! request with the connector's settings (credentials and TLS included).

use std::time::Duration;

use super::{CheckResult, Status};
use crate::config::ConnectorConfig;
use crate::sink::{client, KafkaLink, KafkaSink, SinkError};
use crate::tls::Verification;

/// Checks the Kafka connection of connector `cfg`: how it is secured (warns when it is not
/// encrypted or the brokers are not fully verified), then that the brokers answer.
pub async fn check(cfg: &ConnectorConfig) -> Vec<CheckResult> {
    let name = cfg.name.as_str();
    let (verification, words) = client::describe_security(&cfg.kafka);
    let mut out = vec![CheckResult::new(
        name,
        "kafka tls",
        match verification {
            Some(Verification::ChainAndHost) => Status::Pass,
            _ => Status::Warn,
        },
        match verification {
            None => format!("{words}; set security.protocol=SASL_SSL or SSL (--kafka-config / [kafka]) for an encrypted connection"),
            Some(Verification::ChainAndHost) => words,
            Some(_) => format!("{words}; keep ssl.endpoint.identification.algorithm=https and certificate verification on"),
        },
    )];
    let link = KafkaLink::new(name, &cfg.kafka.bootstrap_servers);
    let sink = match KafkaSink::new(&cfg.kafka, name, link) {
        Ok(s) => s,
        Err(f) => {
            out.push(CheckResult::new(
                name,
                "kafka producer",
                Status::Fail,
                f.to_string(),
            ));
            return out;
        }
    };
    out.push(match sink.probe(Duration::from_secs(10)).await {
        Ok(brokers) => CheckResult::new(
            name,
            "kafka",
            Status::Pass,
            format!(
                "{} reachable ({brokers} broker(s))",
                cfg.kafka.bootstrap_servers
            ),
        ),
        Err(f @ SinkError::Link(_)) => CheckResult::new(name, "kafka", Status::Fail, f.to_string()),
        Err(f) => CheckResult::new(
            name,
            "kafka",
            Status::Fail,
            format!(
                "{}: {}; check kafka.bootstrap_servers / --kafka-bootstrap and that the brokers \
                 listen there",
                cfg.kafka.bootstrap_servers, f
            ),
        ),
    });
    out
}
