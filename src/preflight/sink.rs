//! `check`'s sink checks: Kafka's ([`super::kafka`]) or the other broker's (each next to its
//! sink in `crate::sink`).

use super::CheckResult;
use crate::config::{ConnectorConfig, SinkConfig};

/// The checks of connector `c`'s sink.
pub async fn check(c: &ConnectorConfig) -> Vec<CheckResult> {
    match &c.sink {
        SinkConfig::Kafka => super::kafka::check(c).await,
        SinkConfig::Nats(n) => crate::sink::nats::check::check(&c.name, n).await,
        SinkConfig::RabbitMq(r) => crate::sink::rabbitmq::check(&c.name, r).await,
        SinkConfig::Redis(r) => super::redis::check(c, r).await,
    }
}
