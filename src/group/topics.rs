//! The group's topics: one coordination topic per connector, whose single partition is what
//! the group coordinator assigns, and which also holds the connector's ownership record (who
//! runs it, since when) for `outboxd status`.
//!
//! Names: the consumer group `outboxd.group.<group>`, the topics
//! `outboxd.group.<group>.<connector>` (1 partition, `cleanup.policy=compact`, key `owner`).
//! Connector and group names use only `A-Z a-z 0-9 . _ -`, which are Kafka topic characters,
//! so the names are topic names as they are.

use std::time::Duration;

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::RDKafkaErrorCode;
use rdkafka::message::Message;
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{Offset, TopicPartitionList};
use serde::{Deserialize, Serialize};

use crate::config::KafkaConfig;
use crate::sink::client;
use crate::sink::client_log::ClientLog;
use crate::sink::KafkaLink;

/// How long one request to the cluster may take.
const KAFKA_TIMEOUT: Duration = Duration::from_secs(10);

/// The record key of an ownership record.
const OWNER_KEY: &str = "owner";

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

/// Who runs a connector, as its owner wrote it when it took the connector over.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Owner {
    /// The member (`outboxd-<host>-<pid>`).
    pub member: String,
    /// The member's host name.
    pub host: String,
    /// The member's process id.
    pub pid: u32,
    /// When it took the connector over, milliseconds since the Unix epoch.
    pub since_ms: i64,
}

/// Creates the coordination topics of `connectors` that do not exist yet.
///
/// Errors (with what to do) when Kafka refuses or does not answer.
pub async fn ensure(
    kafka: &KafkaConfig,
    group: &str,
    connectors: &[String],
    link: &std::sync::Arc<KafkaLink>,
) -> Result<(), String> {
    let admin: AdminClient<ClientLog> = client::config(kafka)
        .create_with_context(ClientLog::new(link.clone()))
        .map_err(|e| format!("cannot create a Kafka admin client: {e}"))?;
    let names: Vec<String> = connectors
        .iter()
        .map(|c| coordination_topic(group, c))
        .collect();
    let topics: Vec<NewTopic<'_>> = names
        .iter()
        .map(|n| NewTopic::new(n, 1, TopicReplication::Fixed(-1)).set("cleanup.policy", "compact"))
        .collect();
    let opts = AdminOptions::new().operation_timeout(Some(KAFKA_TIMEOUT));
    let created = tokio::time::timeout(KAFKA_TIMEOUT, admin.create_topics(&topics, &opts));
    let results = tokio::select! {
        r = created => r.map_err(|_| "Kafka did not answer a CreateTopics request for the group's topics".to_string())?,
        f = link.wait_definite() => return Err(f.to_string()),
    }
    .map_err(|e| format!("creating the group's coordination topics: {e}"))?;
    for r in results {
        match r {
            Ok(_) | Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
            Err((t, code)) => {
                return Err(format!(
                    "Kafka refused to create coordination topic {t} ({code}); create it with one \
                     partition and cleanup.policy=compact, or grant CREATE on it"
                ))
            }
        }
    }
    Ok(())
}

/// Writes ownership records; one per member, kept for its life.
pub struct OwnerLog {
    producer: FutureProducer<ClientLog>,
    group: String,
}

impl OwnerLog {
    /// A writer of group `group`'s ownership records.
    pub fn new(
        kafka: &KafkaConfig,
        group: &str,
        link: std::sync::Arc<KafkaLink>,
    ) -> Result<Self, String> {
        let producer = client::config(kafka)
            .set("enable.idempotence", "true")
            .set("linger.ms", "0")
            .create_with_context(ClientLog::new(link))
            .map_err(|e| format!("cannot create a Kafka producer: {e}"))?;
        Ok(Self {
            producer,
            group: group.to_string(),
        })
    }

    /// Records that `owner` runs `connector` (best effort: `status` shows a stale owner at
    /// worst; the assignment itself is the coordinator's).
    pub async fn record(&self, connector: &str, owner: &Owner) {
        let Ok(value) = serde_json::to_vec(owner) else {
            return;
        };
        let topic = coordination_topic(&self.group, connector);
        let sent = self
            .producer
            .send(
                FutureRecord::<str, [u8]>::to(&topic)
                    .key(OWNER_KEY)
                    .payload(&value),
                KAFKA_TIMEOUT,
            )
            .await;
        if let Err((e, _)) = sent {
            tracing::warn!(
                connector,
                "could not record this member as the connector's owner for `status`: {e}"
            );
        }
    }
}

/// The last ownership record of `connector` in group `group` (for `status`); `Ok(None)` when
/// no member ever ran it.
pub fn read_owner(
    kafka: &KafkaConfig,
    group: &str,
    connector: &str,
) -> Result<Option<Owner>, String> {
    let link = KafkaLink::quiet("status", &kafka.bootstrap_servers);
    let consumer: BaseConsumer<ClientLog> = client::config(kafka)
        .set("group.id", format!("{}.status", group_id(group)))
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "true")
        .create_with_context(ClientLog::new(link))
        .map_err(|e| format!("cannot create a Kafka consumer: {e}"))?;
    let topic = coordination_topic(group, connector);
    let (low, high) = consumer
        .fetch_watermarks(&topic, 0, KAFKA_TIMEOUT)
        .map_err(|e| format!("reading coordination topic {topic}: {e}"))?;
    if high <= low {
        return Ok(None);
    }
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(&topic, 0, Offset::Offset(high - 1))
        .map_err(|e| e.to_string())?;
    consumer.assign(&tpl).map_err(|e| e.to_string())?;
    let deadline = std::time::Instant::now() + KAFKA_TIMEOUT;
    let mut last = None;
    while std::time::Instant::now() < deadline {
        match consumer.poll(Duration::from_millis(200)) {
            Some(Ok(m)) => {
                if m.key() == Some(OWNER_KEY.as_bytes()) {
                    last = m.payload().and_then(|p| serde_json::from_slice(p).ok());
                }
                if m.offset() >= high - 1 {
                    break;
                }
            }
            Some(Err(rdkafka::error::KafkaError::PartitionEOF(_))) => break,
            Some(Err(e)) => return Err(format!("reading coordination topic {topic}: {e}")),
            None => {}
        }
    }
    Ok(last)
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
