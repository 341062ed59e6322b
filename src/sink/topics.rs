//! Topic creation: the one way outboxd creates the topics it owns (checkpoint topics, the
//! group's coordination and definitions topics, dead-letter topics), and the one reading of
//! Kafka's answer.
//!
//! Each topic is created with the partition count, replication factor and topic settings of
//! its [`TopicSpec`]: for outboxd's own topics one partition and the broker's default
//! replication factor (`replication.factor` -1, Kafka's `CreateTopics` API since KIP-464);
//! for routed topics those of the connector's Kafka Connect topic creation group
//! ([`super::topic_creator`]). An existing topic is left as it is
//! (`TOPIC_ALREADY_EXISTS` is success). Kafka's other answers are read by [`is_refusal`]:
//! an authorization, policy or configuration refusal will not change by asking again; any
//! other error code, or no answer, may.

use std::time::Duration;

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};

use super::client_log::ClientLog;
use super::{KafkaLink, LinkFailure};
use crate::error::Class;

/// A topic outboxd creates when it is missing: its name and topic-level settings
/// (Kafka's topic configs, e.g. `cleanup.policy`, `max.message.bytes`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TopicSpec {
    /// The topic name.
    pub name: String,
    /// Partition count; -1 = the broker's `num.partitions`.
    pub partitions: i32,
    /// Replication factor; -1 = the broker's `default.replication.factor`.
    pub replication_factor: i32,
    /// Topic configs set at creation, `(key, value)`.
    pub configs: Vec<(String, String)>,
}

impl TopicSpec {
    /// Topic `name` with the broker's default settings.
    pub(crate) fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            partitions: 1,
            replication_factor: -1,
            configs: Vec::new(),
        }
    }

    /// Topic `name` with `cleanup.policy=compact` (checkpoints, claims, ownership and
    /// definitions records: the last record of each key is what counts).
    pub(crate) fn compacted(name: impl Into<String>) -> Self {
        Self::new(name).with("cleanup.policy", "compact")
    }

    /// The same with topic config `key` = `value`.
    pub(crate) fn with(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.configs.push((key.into(), value.into()));
        self
    }
}

/// Why topics could not be made sure of.
#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum CreateTopicError {
    /// No answer within the timeout (transient).
    #[error("Kafka did not answer a CreateTopics request for {topics} within {timeout:?}")]
    Unanswered {
        /// The topics asked for, comma-separated.
        topics: String,
        /// How long it was waited for.
        timeout: Duration,
    },
    /// The request itself failed (transient: the client could not send it, or the
    /// cluster answered with an error for the whole request).
    #[error("the CreateTopics request for {topics} failed: {source}")]
    Request {
        /// The topics asked for, comma-separated.
        topics: String,
        /// The client's error.
        source: KafkaError,
    },
    /// Kafka refused to create the topic for good ([`is_refusal`]): create it by hand, or
    /// grant the principal CREATE on it.
    #[error("Kafka refused to create topic {topic} ({code})")]
    Refused {
        /// The topic.
        topic: String,
        /// Kafka's answer.
        code: RDKafkaErrorCode,
    },
    /// Kafka did not create the topic, for a reason that may pass (transient).
    #[error("Kafka did not create topic {topic} ({code})")]
    Failed {
        /// The topic.
        topic: String,
        /// Kafka's answer.
        code: RDKafkaErrorCode,
    },
    /// The cluster refused the credentials, or TLS with it failed verification.
    #[error(transparent)]
    Link(#[from] LinkFailure),
}

impl CreateTopicError {
    /// Definite for a refusal and a failed link, transient otherwise.
    pub(crate) fn class(&self) -> Class {
        match self {
            CreateTopicError::Refused { .. } | CreateTopicError::Link(_) => Class::Definite,
            CreateTopicError::Unanswered { .. }
            | CreateTopicError::Request { .. }
            | CreateTopicError::Failed { .. } => Class::Transient,
        }
    }
}

/// Whether Kafka's answer `code` to creating a topic is a refusal that asking again will
/// not change: the principal lacks CREATE (topic or cluster authorization), the cluster's
/// `create.topic.policy.class.name` refused it, or the topic's name or settings are invalid.
pub(crate) fn is_refusal(code: RDKafkaErrorCode) -> bool {
    matches!(
        code,
        RDKafkaErrorCode::TopicAuthorizationFailed
            | RDKafkaErrorCode::ClusterAuthorizationFailed
            | RDKafkaErrorCode::PolicyViolation
            | RDKafkaErrorCode::InvalidConfig
            | RDKafkaErrorCode::InvalidTopic
            | RDKafkaErrorCode::InvalidReplicationFactor
            | RDKafkaErrorCode::InvalidPartitions
    )
}

/// Creates each of `topics` that does not exist yet, through `admin`, waiting at most
/// `timeout`; a definite failure of `link` (refused login, failed TLS verification) ends
/// the wait at once.
///
/// Errors: [`CreateTopicError`]; the first topic Kafka did not create decides.
pub(crate) async fn ensure_topics(
    admin: &AdminClient<ClientLog>,
    topics: &[TopicSpec],
    timeout: Duration,
    link: &KafkaLink,
) -> Result<(), CreateTopicError> {
    let new: Vec<NewTopic<'_>> = topics
        .iter()
        .map(|t| {
            t.configs.iter().fold(
                NewTopic::new(
                    &t.name,
                    t.partitions,
                    TopicReplication::Fixed(t.replication_factor),
                ),
                |n, (k, v)| n.set(k, v),
            )
        })
        .collect();
    let names = || {
        topics
            .iter()
            .map(|t| t.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let opts = AdminOptions::new().operation_timeout(Some(timeout));
    let created = tokio::time::timeout(timeout, admin.create_topics(&new, &opts));
    let results = tokio::select! {
        r = created => r,
        f = link.wait_definite() => return Err(f.into()),
    }
    .map_err(|_| CreateTopicError::Unanswered {
        topics: names(),
        timeout,
    })?
    .map_err(|source| CreateTopicError::Request {
        topics: names(),
        source,
    })?;
    for r in results {
        answer(r)?;
    }
    Ok(())
}

/// One topic's result of a `CreateTopics` request, read.
fn answer(result: Result<String, (String, RDKafkaErrorCode)>) -> Result<(), CreateTopicError> {
    match result {
        Ok(_) | Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => Ok(()),
        Err((topic, code)) if is_refusal(code) => Err(CreateTopicError::Refused { topic, code }),
        Err((topic, code)) => Err(CreateTopicError::Failed { topic, code }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_read_one_way() {
        assert!(answer(Ok("t".into())).is_ok());
        assert!(answer(Err(("t".into(), RDKafkaErrorCode::TopicAlreadyExists))).is_ok());
        for code in [
            RDKafkaErrorCode::TopicAuthorizationFailed,
            RDKafkaErrorCode::ClusterAuthorizationFailed,
            RDKafkaErrorCode::PolicyViolation,
            RDKafkaErrorCode::InvalidConfig,
            RDKafkaErrorCode::InvalidTopic,
            RDKafkaErrorCode::InvalidReplicationFactor,
        ] {
            let e = answer(Err(("t".into(), code))).unwrap_err();
            assert_eq!(e.class(), Class::Definite, "{code:?}");
            assert!(e.to_string().contains("refused to create topic t"), "{e}");
        }
        for code in [
            RDKafkaErrorCode::RequestTimedOut,
            RDKafkaErrorCode::NotController,
            RDKafkaErrorCode::BrokerNotAvailable,
        ] {
            let e = answer(Err(("t".into(), code))).unwrap_err();
            assert_eq!(e.class(), Class::Transient, "{code:?}");
        }
    }

    #[test]
    fn specs_carry_their_settings() {
        let t = TopicSpec::compacted("c").with("max.message.bytes", "10");
        assert_eq!((t.partitions, t.replication_factor), (1, -1));
        assert_eq!(
            t.configs,
            vec![
                ("cleanup.policy".to_string(), "compact".to_string()),
                ("max.message.bytes".to_string(), "10".to_string())
            ]
        );
    }
}
