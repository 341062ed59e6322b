//! Kafka Connect's topic creation for routed topics: before the first record to a topic, a
//! connector with `topic.creation.*` settings makes sure the topic exists, creating it with
//! its topic creation group's partition count, replication factor and topic configs
//! ([`crate::config::topic_creation`]), as Kafka Connect's source task does
//! (`AbstractWorkerSourceTask.maybeCreateTopic`): look the topic up; when it is missing,
//! create it; a topic that exists (or that somebody else created meanwhile) is left as it
//! is; a refused creation fails the connector with what to do.
//!
//! Each topic is looked up once per producer (the answer is kept). The lookup never asks
//! the broker to create the topic, so a broker's `auto.create.topics.enable` does not get
//! there first with its own defaults.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rdkafka::admin::AdminClient;
use rdkafka::ClientConfig;

use super::client_log::ClientLog;
use super::error::SinkError;
use super::link::KafkaLink;
use super::topics::{self, CreateTopicError, TopicSpec};
use crate::config::topic_creation::TopicCreation;
use crate::error::Class;

/// Longest a lookup plus creation of one topic may take.
const CREATE_TIMEOUT: Duration = Duration::from_secs(30);

/// Creates the routed topics a connector writes to, per its topic creation groups.
pub(crate) struct TopicCreator {
    plan: TopicCreation,
    /// `--shadow`'s topic prefix: groups match the routed name without it, as they would
    /// under Kafka Connect; the shadow topic is created with that group's settings.
    shadow_prefix: Option<String>,
    settings: ClientConfig,
    admin: AdminClient<ClientLog>,
    link: Arc<KafkaLink>,
    /// Topics known to exist, and outboxd's own (created elsewhere): not looked up.
    known: Mutex<HashSet<String>>,
}

impl TopicCreator {
    /// A creator following `plan`, reaching the cluster with the producer's `settings`.
    pub(crate) fn new(
        plan: TopicCreation,
        settings: ClientConfig,
        admin: AdminClient<ClientLog>,
        link: Arc<KafkaLink>,
    ) -> Self {
        Self {
            plan,
            shadow_prefix: None,
            settings,
            admin,
            link,
            known: Mutex::new(HashSet::new()),
        }
    }

    /// Routed topics carry `prefix` (`--shadow`): groups match the name without it.
    pub(crate) fn set_shadow_prefix(&mut self, prefix: Option<String>) {
        self.shadow_prefix = prefix;
    }

    /// The producer also writes to `topics`, which outboxd creates elsewhere (checkpoint,
    /// dead letters): they are not routed topics.
    pub(crate) fn add_own(&mut self, topics: impl IntoIterator<Item = String>) {
        self.known
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .extend(topics);
    }

    /// Makes sure `topic` exists before a record goes to it: at once when it is known, else
    /// looked up and, when missing, created with its group's settings.
    ///
    /// Errors: transient when Kafka does not answer or does not create it for a passing
    /// reason ([`SinkError::TopicCreation`]); definite when Kafka refuses the creation
    /// (ACLs, policy, a replication factor above the broker count) or the link fails.
    pub(crate) async fn ensure(&self, topic: &str) -> Result<(), SinkError> {
        if self.is_known(topic) {
            return Ok(());
        }
        let settings = self.settings.clone();
        let asked = vec![topic.to_string()];
        let unknown = tokio::task::spawn_blocking(move || {
            super::missing_topic::unknown_once(&settings, &asked)
        })
        .await
        .ok()
        .flatten();
        let spec = self.spec(topic);
        let Some(unknown) = unknown else {
            return Err(self.failed(
                &spec,
                Class::Transient,
                "Kafka did not answer whether it exists",
            ));
        };
        if unknown.is_empty() {
            self.known(topic);
            return Ok(());
        }
        match topics::ensure_topics(
            &self.admin,
            std::slice::from_ref(&spec),
            CREATE_TIMEOUT,
            &self.link,
        )
        .await
        {
            Ok(()) => {
                tracing::info!(
                    topic,
                    group = %self.group_name(topic),
                    partitions = spec.partitions,
                    replication_factor = spec.replication_factor,
                    "created topic (Kafka Connect topic creation)"
                );
                self.known(topic);
                Ok(())
            }
            Err(CreateTopicError::Link(f)) => Err(SinkError::Link(f)),
            Err(e) => Err(self.failed(&spec, e.class(), &e.to_string())),
        }
    }

    fn is_known(&self, topic: &str) -> bool {
        self.known
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(topic)
    }

    fn known(&self, topic: &str) {
        self.known
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(topic.to_string());
    }

    /// The routed name of `topic`: without the shadow prefix.
    fn routed<'t>(&self, topic: &'t str) -> &'t str {
        self.shadow_prefix
            .as_deref()
            .and_then(|p| topic.strip_prefix(p))
            .unwrap_or(topic)
    }

    fn group_name(&self, topic: &str) -> String {
        self.plan.group_for(self.routed(topic)).name.clone()
    }

    /// How `topic` is created: its group's settings.
    fn spec(&self, topic: &str) -> TopicSpec {
        let group = self.plan.group_for(self.routed(topic));
        let mut spec = TopicSpec::new(topic);
        spec.partitions = group.partitions;
        spec.replication_factor = group.replication_factor;
        spec.configs = group
            .configs
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        spec
    }

    fn failed(&self, spec: &TopicSpec, class: Class, detail: &str) -> SinkError {
        SinkError::TopicCreation {
            topic: spec.name.clone(),
            group: self.group_name(&spec.name),
            partitions: spec.partitions,
            replication_factor: spec.replication_factor,
            definite: class == Class::Definite,
            detail: detail.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::super::client::CreateClient;
    use super::*;

    fn creator(prefix: Option<&str>) -> TopicCreator {
        let keys: BTreeMap<String, String> = [
            ("topic.creation.default.partitions", "4"),
            ("topic.creation.default.replication.factor", "-1"),
            ("topic.creation.groups", "orders"),
            ("topic.creation.orders.include", "outbox\\.event\\.Order"),
            ("topic.creation.orders.partitions", "2"),
            ("topic.creation.orders.cleanup.policy", "compact"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let plan = TopicCreation::from_keys(&keys).unwrap().unwrap();
        let mut settings = ClientConfig::new();
        settings.set("bootstrap.servers", "127.0.0.1:1");
        let link = KafkaLink::new("test", "127.0.0.1:1");
        let admin = settings
            .create_client(ClientLog::new(link.clone()))
            .unwrap();
        let mut c = TopicCreator::new(plan, settings, admin, link);
        c.set_shadow_prefix(prefix.map(str::to_string));
        c.add_own(["own".to_string()]);
        c
    }

    #[test]
    fn a_topic_gets_its_group_s_settings_and_the_shadow_prefix_is_not_matched() {
        let c = creator(Some("sh."));
        let spec = c.spec("sh.outbox.event.Order");
        assert_eq!((spec.partitions, spec.replication_factor), (2, -1));
        assert_eq!(
            spec.configs,
            vec![("cleanup.policy".to_string(), "compact".to_string())]
        );
        assert_eq!(
            spec.name, "sh.outbox.event.Order",
            "the shadow topic is created"
        );
        assert_eq!(c.spec("sh.outbox.event.Payment").partitions, 4);
        let err = c.failed(&c.spec("sh.outbox.event.Order"), Class::Definite, "refused");
        assert_eq!(err.class(), Class::Definite);
        assert!(err.to_string().contains("group orders"), "{err}");
    }
}
