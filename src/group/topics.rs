//! The group's topics: one coordination topic per connector, whose single partition is what
//! the group coordinator assigns, and which also holds the connector's ownership records
//! (see [`super::owners`]).
//!
//! Names: the consumer group `outboxd.group.<group>`, the topics
//! `outboxd.group.<group>.<connector>` (1 partition, `cleanup.policy=compact`, key `owner`),
//! the definitions topic `outboxd.definitions.<group>` (see [`super::definitions`]) and the
//! config topic `outboxd.configs.<group>` (see [`super::configs`]).
//! Connector and group names use only `A-Z a-z 0-9 . _ -`, which are Kafka topic characters,
//! so the names are topic names as they are.

use std::sync::Arc;
use std::time::Duration;

use rdkafka::admin::AdminClient;

use crate::config::KafkaConfig;
use crate::error::Class;
use crate::sink::client;
use crate::sink::client::CreateClient;
use crate::sink::client_log::ClientLog;
use crate::sink::topics::{self, CreateTopicError, TopicSpec};
use crate::sink::{KafkaLink, LinkFailure};

/// How long one request to the cluster may take.
const KAFKA_TIMEOUT: Duration = Duration::from_secs(10);

/// The consumer group's id for group `group`.
pub fn group_id(group: &str) -> String {
    format!("outboxd.group.{group}")
}

/// The coordination topic of `connector` in group `group`.
pub fn coordination_topic(group: &str, connector: &str) -> String {
    format!("outboxd.group.{group}.{connector}")
}

/// The connector a coordination topic of group `group` belongs to.
pub fn connector_of(group: &str, topic: &str) -> Option<String> {
    topic
        .strip_prefix(&format!("outboxd.group.{group}."))
        .filter(|c| !c.is_empty())
        .map(str::to_string)
}

/// Why the coordination topics could not be made sure of.
#[derive(Debug, Clone, thiserror::Error)]
pub enum TopicsError {
    /// The cluster did not answer, or refused (retried: an operator may create them
    /// meanwhile).
    #[error("{0}")]
    Kafka(String),
    /// The cluster refused the credentials, or TLS with it failed verification.
    #[error(transparent)]
    Link(#[from] LinkFailure),
}

impl TopicsError {
    /// Definite for a refused login or TLS verification, transient otherwise.
    pub fn class(&self) -> Class {
        match self {
            TopicsError::Kafka(_) => Class::Transient,
            TopicsError::Link(_) => Class::Definite,
        }
    }
}

/// Creates the coordination topics of `connectors`, the group's definitions topic
/// ([`super::definitions::definitions_topic`]) and its config topic
/// ([`super::configs::configs_topic`]) when they do not exist yet.
///
/// Errors (with what to do) when Kafka refuses or does not answer.
pub async fn ensure(
    kafka: &KafkaConfig,
    group: &str,
    connectors: &[String],
    link: &Arc<KafkaLink>,
) -> Result<(), TopicsError> {
    let fail = |m: String| TopicsError::Kafka(m);
    let admin: AdminClient<ClientLog> = client::config(kafka)
        .create_client(ClientLog::new(link.clone()))
        .map_err(|e| fail(format!("cannot create a Kafka admin client: {e}")))?;
    let names: Vec<String> = connectors
        .iter()
        .map(|c| coordination_topic(group, c))
        .chain([
            super::definitions::definitions_topic(group),
            super::configs::configs_topic(group),
        ])
        .collect();
    let specs: Vec<TopicSpec> = names.into_iter().map(TopicSpec::compacted).collect();
    topics::ensure_topics(&admin, &specs, KAFKA_TIMEOUT, link)
        .await
        .map_err(|e| match e {
            CreateTopicError::Link(f) => TopicsError::Link(f),
            CreateTopicError::Refused { topic, code } => fail(format!(
                "Kafka refused to create the group's topic {topic} ({code}); create it with one \
                 partition and cleanup.policy=compact, or grant CREATE on it"
            )),
            e => fail(format!("creating the group's coordination topics: {e}")),
        })?;
    Ok(())
}

/// This host's name: `/proc/sys/kernel/hostname`, else `$HOSTNAME`, else `unknown`.
pub fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .ok()
        .filter(|s| !s.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "unknown".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topic_names_round_trip() {
        let t = coordination_topic("prod", "shop-mariadb");
        assert_eq!(t, "outboxd.group.prod.shop-mariadb");
        assert_eq!(connector_of("prod", &t).as_deref(), Some("shop-mariadb"));
        assert_eq!(connector_of("other", &t), None);
        assert_eq!(connector_of("prod", "outboxd.group.prod."), None);
        assert_eq!(group_id("prod"), "outboxd.group.prod");
    }
}
