//! Records routed to a topic that does not exist: found out, confirmed, and named.
//!
//! librdkafka says little about such records. A producer keeps records for a topic it does
//! not know (never created, or deleted while it ran) without a delivery report for
//! `topic.metadata.propagation.max.ms` (30 s by default: a new topic may take that long to
//! reach every broker), and fails them after that with `UNKNOWN_TOPIC_OR_PARTITION` (a topic it
//! never saw) or a local `Unknown partition` (the partitions of a deleted topic). A
//! transactional producer retries `AddPartitionsToTxn` for a deleted topic's partitions
//! (`UNKNOWN_TOPIC_OR_PARTITION` is retriable there) until the transaction times out. The
//! stall watch ([`super::stall`]) ends such a batch first, seconds after the cluster answers
//! a new client while the records wait, and a restart meets the same silence: without this
//! module the connector restarted every few seconds, for ever, naming no topic.
//!
//! When a batch ends that way (stalled, or records failed as above), the delivery loops ask
//! [`KafkaSink::missing_topics`](super::KafkaSink::missing_topics): the topics of the records
//! still waiting are looked up with a metadata request of a new client that never asks the
//! broker to create a topic (`allow.auto.create.topics=false`), twice, [`CONFIRM_AFTER`]
//! apart, so that a topic someone created a moment ago and whose metadata is still on its way
//! to the broker asked is not taken as missing. Only a topic both answers call unknown
//! (`UNKNOWN_TOPIC_OR_PARTITION`) is missing; a request that gets no answer proves nothing.
//!
//! Whether the missing topic will appear by itself depends on auto-creation, which takes two
//! settings ([`AutoCreate`]): the producer's `allow.auto.create.topics` (librdkafka's default
//! for producers is `true`: its metadata requests ask the broker to create unknown topics) and
//! the broker's `auto.create.topics.enable` (read with `DescribeConfigs`). Either one off,
//! nothing creates the topic: a definite failure that names it, what to do, and keeps the
//! checkpoint before its records. Both on, or the broker's setting unreadable, it stays a
//! transient failure — but one that names the topic.

use crate::sink::client::CreateClient;
use std::sync::Arc;
use std::time::Duration;

use rdkafka::admin::{AdminClient, AdminOptions, ResourceSpecifier};
use rdkafka::producer::{BaseProducer, Producer};
use rdkafka::types::RDKafkaRespErr;
use rdkafka::ClientConfig;

use super::client_log::ClientLog;
use super::link::KafkaLink;
use super::tracker::DeliveryTracker;

/// How long after the first answer that calls a topic unknown the second request is made.
pub const CONFIRM_AFTER: Duration = Duration::from_secs(1);

/// How long one metadata or `DescribeConfigs` request may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// Whether the cluster creates a topic a producer writes to that does not exist.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AutoCreate {
    /// Nothing creates it: which setting says so (`the producer's
    /// allow.auto.create.topics=false`, `the broker's auto.create.topics.enable=false`).
    Off(String),
    /// The producer asks for it and every broker allows it.
    On,
    /// The broker's setting could not be read: why.
    Unknown(String),
}

impl AutoCreate {
    /// The state in words, for messages and `check`.
    pub fn describe(&self) -> String {
        match self {
            AutoCreate::Off(why) => format!("topics are not created automatically ({why})"),
            AutoCreate::On => "topics are created automatically (the broker's \
                               auto.create.topics.enable=true, and the producer asks for it)"
                .into(),
            AutoCreate::Unknown(why) => format!(
                "whether the brokers create topics automatically is unknown (their \
                 auto.create.topics.enable could not be read: {why})"
            ),
        }
    }
}

/// Whether the topics a relay writes to are created automatically: the producer's
/// `producer_setting` (its `allow.auto.create.topics`, if set; librdkafka's producer
/// default is `true`) and the brokers' `auto.create.topics.enable`, one per broker (`Err`:
/// why it could not be read).
pub fn auto_create(
    producer_setting: Option<&str>,
    brokers: Result<Vec<(i32, String)>, String>,
) -> AutoCreate {
    if producer_setting
        .is_some_and(|v| matches!(v.trim().to_ascii_lowercase().as_str(), "false" | "0"))
    {
        return AutoCreate::Off("the producer's allow.auto.create.topics=false".into());
    }
    match brokers {
        Err(why) => AutoCreate::Unknown(why),
        Ok(brokers) if brokers.is_empty() => {
            AutoCreate::Unknown("no broker's configuration was returned".into())
        }
        Ok(brokers) => {
            let off: Vec<String> = brokers
                .iter()
                .filter(|(_, v)| v.trim().eq_ignore_ascii_case("false"))
                .map(|(id, _)| id.to_string())
                .collect();
            if off.is_empty() {
                AutoCreate::On
            } else {
                AutoCreate::Off(format!(
                    "the broker's auto.create.topics.enable=false (broker {})",
                    off.join(", ")
                ))
            }
        }
    }
}

/// The settings of a client that looks topics up: `settings` (the producer's: bootstrap
/// servers, security) without a transactional id or idempotence, and never asking the
/// broker to create a topic.
fn lookup_settings(settings: &ClientConfig) -> ClientConfig {
    let mut lookup = super::stall::probe_settings(settings);
    lookup.set("allow.auto.create.topics", "false");
    lookup
}

/// Which of `topics` the cluster calls unknown, asked once with `client`. `None` when the
/// cluster did not answer (nothing is known then).
fn unknown_now(client: &BaseProducer<DeliveryTracker>, topics: &[String]) -> Option<Vec<String>> {
    let mut unknown = Vec::new();
    for topic in topics {
        let metadata = client
            .client()
            .fetch_metadata(Some(topic), REQUEST_TIMEOUT)
            .ok()?;
        let missing = metadata.topics().iter().any(|t| {
            t.name() == topic
                && t.error() == Some(RDKafkaRespErr::RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART)
        });
        if missing {
            unknown.push(topic.clone());
        }
    }
    Some(unknown)
}

/// Which of `topics` the cluster reached with `settings` (a producer's) calls unknown, asked
/// once by a client that never asks the broker to create a topic. Blocking: call it off the
/// async workers. `None` when the cluster does not answer.
pub fn unknown_once(settings: &ClientConfig, topics: &[String]) -> Option<Vec<String>> {
    let settings = lookup_settings(settings);
    let bootstrap = settings.get("bootstrap.servers").unwrap_or_default();
    let context = DeliveryTracker::new(KafkaLink::quiet("topic lookup", bootstrap));
    let client = super::client::create::<BaseProducer<_>, _>(&settings, context).ok()?;
    unknown_now(&client, topics)
}

/// The topics among `topics` that do not exist: called unknown by two metadata answers
/// [`CONFIRM_AFTER`] apart (a topic created meanwhile, or whose metadata was still on its way,
/// is not missing). Blocking (metadata requests and the wait between them): call it off the
/// async workers. Empty when the cluster does not answer.
pub fn confirm_missing(settings: &ClientConfig, topics: &[String]) -> Vec<String> {
    if topics.is_empty() {
        return Vec::new();
    }
    let settings = lookup_settings(settings);
    let bootstrap = settings.get("bootstrap.servers").unwrap_or_default();
    let context = DeliveryTracker::new(KafkaLink::quiet("topic lookup", bootstrap));
    let Ok(client) = super::client::create::<BaseProducer<_>, _>(&settings, context) else {
        return Vec::new();
    };
    let Some(first) = unknown_now(&client, topics) else {
        return Vec::new();
    };
    if first.is_empty() {
        return first;
    }
    std::thread::sleep(CONFIRM_AFTER);
    match unknown_now(&client, &first) {
        Some(second) => first.into_iter().filter(|t| second.contains(t)).collect(),
        None => Vec::new(),
    }
}

/// Whether the cluster reached with `settings` (a producer's) creates missing topics: the
/// producer's own `allow.auto.create.topics` and every broker's `auto.create.topics.enable`
/// (`DescribeConfigs`; the principal needs `DESCRIBE_CONFIGS` on the cluster).
pub async fn auto_create_of(settings: &ClientConfig) -> AutoCreate {
    let producer_setting = settings.get("allow.auto.create.topics").map(str::to_string);
    if producer_setting.is_some() {
        let decided = auto_create(producer_setting.as_deref(), Ok(Vec::new()));
        if matches!(decided, AutoCreate::Off(_)) {
            return decided;
        }
    }
    let brokers = broker_settings(settings).await;
    auto_create(producer_setting.as_deref(), brokers)
}

/// Every broker's `auto.create.topics.enable`, by broker id.
async fn broker_settings(settings: &ClientConfig) -> Result<Vec<(i32, String)>, String> {
    let settings = lookup_settings(settings);
    let bootstrap = settings
        .get("bootstrap.servers")
        .unwrap_or_default()
        .to_string();
    let admin: Arc<AdminClient<ClientLog>> = Arc::new(
        settings
            .create_client(ClientLog::new(KafkaLink::quiet("topic lookup", &bootstrap)))
            .map_err(|e| format!("cannot create a Kafka admin client: {e}"))?,
    );
    let lookup = admin.clone();
    let ids: Vec<i32> = tokio::task::spawn_blocking(move || {
        lookup
            .inner()
            .fetch_metadata(None, REQUEST_TIMEOUT)
            .map(|m| m.brokers().iter().map(|b| b.id()).collect())
            .map_err(|e| format!("no metadata: {e}"))
    })
    .await
    .map_err(|e| e.to_string())??;
    let resources: Vec<ResourceSpecifier<'_>> = ids
        .iter()
        .map(|id| ResourceSpecifier::Broker(*id))
        .collect();
    let opts = AdminOptions::new().request_timeout(Some(REQUEST_TIMEOUT));
    let described =
        tokio::time::timeout(REQUEST_TIMEOUT, admin.describe_configs(&resources, &opts))
            .await
            .map_err(|_| "Kafka did not answer the DescribeConfigs request".to_string())?
            .map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    for (id, resource) in ids.iter().zip(described) {
        let resource = resource.map_err(|code| format!("broker {id}: {code}"))?;
        let value = resource
            .get("auto.create.topics.enable")
            .and_then(|e| e.value.clone())
            .ok_or_else(|| format!("broker {id} did not return auto.create.topics.enable"))?;
        out.push((*id, value));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn either_setting_off_means_nothing_creates_the_topic() {
        let on = |v: &str| Ok(vec![(1, v.to_string()), (2, "true".to_string())]);
        assert_eq!(auto_create(None, on("true")), AutoCreate::On);
        assert_eq!(auto_create(Some("true"), on("true")), AutoCreate::On);
        let off = auto_create(Some("false"), on("true"));
        assert!(
            matches!(&off, AutoCreate::Off(why) if why.contains("allow.auto.create.topics=false")),
            "{off:?}"
        );
        let off = auto_create(None, on("false"));
        assert!(
            matches!(&off, AutoCreate::Off(why) if why.contains("auto.create.topics.enable=false (broker 1)")),
            "{off:?}"
        );
        // The producer's own setting decides even when the brokers cannot be asked.
        assert!(matches!(
            auto_create(Some(" FALSE "), Err("denied".into())),
            AutoCreate::Off(_)
        ));
        assert_eq!(
            auto_create(None, Err("denied".into())),
            AutoCreate::Unknown("denied".into())
        );
        assert!(matches!(
            auto_create(None, Ok(vec![])),
            AutoCreate::Unknown(_)
        ));
    }
}
