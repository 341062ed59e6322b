//! The group's shared connector configurations: the connectors created or changed through
//! the REST API of any member, their target states and restart requests, kept in the group's
//! config topic as Kafka Connect keeps them in its `config.storage.topic`.
//!
//! * Topic `outboxd.configs.<group>`: one partition, `cleanup.policy=compact`, created with
//!   the group's other topics ([`super::topics::ensure`]).
//! * Records, keyed as Connect's `KafkaConfigBackingStore` keys them:
//!   - `connector-<name>`: `{"properties": {<Connect's configuration map>}}`; a tombstone
//!     (no value) deletes the connector.
//!   - `target-state-<name>`: `{"state": "STARTED" | "PAUSED" | "STOPPED"}` (absent: started).
//!   - `restart-connector-<name>`: `{"only-failed": bool, "include-tasks": bool}`; every
//!     record read after a member started asks the connector's owner to restart it once.
//!   - `status-topic-<topic>:connector-<name>`: `{"topic": {"name", "connector", "task",
//!     "discoverTimestamp"}}`, a topic the connector used (topic tracking, as Connect's
//!     status topic keys it: `crate::active_topics`); a tombstone when its topics are reset.
//! * Every member follows the topic from its start on a thread of its own
//!   ([`SharedConfigs::subscribe`] gives each new state); a write returns once this member
//!   has read it back, so an answer given after it shows the change.
//!
//! The values hold the configuration as it was sent, secrets included, as Connect's config
//! topic does: restrict the topic with ACLs, or send `${file:...}` / `${env:...}` references
//! instead of passwords (the members resolve them, each in its own environment).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{Offset, TopicPartitionList};
use serde_json::{json, Map, Value};
use tokio::sync::watch;

use crate::config::KafkaConfig;
use crate::sink::client;
use crate::sink::client::CreateClient;
use crate::sink::client_log::ClientLog;
use crate::sink::KafkaLink;
use crate::supervisor::Target;

/// How long one write to the topic, and reading it back, may take.
const WRITE_WAIT: Duration = Duration::from_secs(10);

/// The config topic of group `group`.
pub fn configs_topic(group: &str) -> String {
    format!("outboxd.configs.{group}")
}

/// A connector configuration as Kafka Connect's REST API takes it.
pub type ConfigMap = Map<String, Value>;

/// The topic's content as read so far.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Shared {
    /// Connector name → its configuration.
    pub connectors: BTreeMap<String, ConfigMap>,
    /// Connector name → its target state, where one was set.
    pub targets: BTreeMap<String, Target>,
    /// Connector name → restart requests read since this member started: (how many, whether
    /// the last one was `onlyFailed`).
    pub restarts: BTreeMap<String, (u64, bool)>,
    /// Connector name → the claim that won the right to create it (the first read while no
    /// connector of that name exists; a claim older than [`CLAIM_VALID`] gives way).
    pub claims: BTreeMap<String, Claim>,
    /// The next offset to read: everything before it is in this state.
    pub read_to: i64,
    /// Whether the topic has been read to the end it had when the member opened it.
    pub caught_up: bool,
}

/// A member's claim to create a connector (`claim-connector-<name>`): two members creating
/// one name at the same moment both write one, and the one read first creates it, the
/// other answers 409 (Connect has its leader decide).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Claim {
    /// Unique to the request.
    pub nonce: String,
    /// When it was made, milliseconds since the Unix epoch.
    pub at_ms: i64,
}

/// How long a claim holds a name when its connector record does not follow (its member
/// died in between).
pub const CLAIM_VALID: Duration = Duration::from_secs(60);

impl Shared {
    /// Applies one record (key, value); `live`: read after the member caught up (restart
    /// requests before that are history, not requests to this member).
    ///
    /// A topic-tracking record (`status-topic-<topic>:connector-<name>`) goes to `topics`,
    /// not into the state: there may be hundreds of thousands, and the state is copied each
    /// time it is published.
    fn apply(
        &mut self,
        key: &[u8],
        value: Option<&[u8]>,
        live: bool,
        topics: &crate::active_topics::ActiveTopics,
    ) {
        let Ok(key) = std::str::from_utf8(key) else {
            return;
        };
        let body: Option<Value> = value.and_then(|v| serde_json::from_slice(v).ok());
        if let Some(rest) = key.strip_prefix("status-topic-") {
            // Connector names have no `:`; topics may (another sink's subject).
            let Some((topic, name)) = rest
                .rsplit_once(":connector-")
                .filter(|(t, n)| !t.is_empty() && !n.is_empty())
            else {
                return;
            };
            let at = value.map(|_| {
                body.as_ref()
                    .and_then(|b| b.pointer("/topic/discoverTimestamp"))
                    .and_then(Value::as_i64)
                    .unwrap_or(0)
            });
            topics.kept(name, topic, at);
            return;
        }
        if let Some(name) = key.strip_prefix("claim-connector-") {
            let Some(claim) = body.and_then(|b| serde_json::from_value::<Claim>(b).ok()) else {
                self.claims.remove(name);
                return;
            };
            // A claim dated far from the held one (its member died; a skewed clock) gives way.
            let held = self
                .claims
                .get(name)
                .is_some_and(|c| claim.at_ms.abs_diff(c.at_ms) < CLAIM_VALID.as_millis() as u64);
            if !self.connectors.contains_key(name) && !held {
                self.claims.insert(name.to_string(), claim);
            }
            return;
        }
        if let Some(name) = key.strip_prefix("connector-") {
            if value.is_none() {
                // A tombstone: deleted.
                self.connectors.remove(name);
                self.targets.remove(name);
                self.claims.remove(name);
                return;
            }
            match body
                .as_ref()
                .and_then(|b| b.get("properties"))
                .and_then(Value::as_object)
            {
                Some(p) => {
                    self.connectors.insert(name.to_string(), p.clone());
                    self.claims.remove(name);
                }
                None => {
                    // Not written by a member: ignored, as Connect ignores it (a delete is
                    // a tombstone, never a value it cannot read).
                    tracing::error!(connector = %name, "the group's config topic holds a record for connector {name} that is not {{\"properties\": {{...}}}}: ignored (the connector keeps its configuration); delete it with DELETE /connectors/{name} or write its configuration again");
                }
            }
        } else if let Some(name) = key.strip_prefix("target-state-") {
            let state = body
                .as_ref()
                .and_then(|b| b.get("state"))
                .and_then(Value::as_str);
            match (value, state) {
                (None, _) | (_, Some("STARTED")) => {
                    self.targets.remove(name);
                }
                (_, Some("PAUSED")) => {
                    self.targets.insert(name.to_string(), Target::Paused);
                }
                (_, Some("STOPPED")) => {
                    self.targets.insert(name.to_string(), Target::Stopped);
                }
                _ => {
                    tracing::error!(connector = %name, "the group's config topic holds a target state for connector {name} that is not {{\"state\": \"STARTED\" | \"PAUSED\" | \"STOPPED\"}}: ignored (the connector keeps its target state)");
                }
            }
        } else if let Some(logger) = key.strip_prefix("logger-cluster-") {
            // KIP-976: a level for every member running when it is written; members that
            // start later read it as history and keep their own.
            if let (true, Some(level)) = (live, body.as_ref().and_then(|b| b.get("level"))) {
                let level = level.as_str().unwrap_or_default();
                match crate::log_levels::set(logger, level) {
                    Ok(_) => {
                        tracing::info!(
                            logger,
                            level,
                            "log level set for the group (REST, scope=cluster)"
                        )
                    }
                    Err(e) => {
                        tracing::warn!(logger, "a log level for the group was not applied: {e}")
                    }
                }
            }
        } else if let Some(name) = key.strip_prefix("restart-connector-") {
            if live {
                if let Some(b) = body {
                    let only_failed = b.get("only-failed").and_then(Value::as_bool) == Some(true);
                    let e = self.restarts.entry(name.to_string()).or_insert((0, false));
                    e.0 += 1;
                    e.1 = only_failed;
                }
            }
        }
    }
}

/// A record to write: key and value (`None`: a tombstone).
pub type Write = (String, Option<Value>);

/// The record setting `name`'s configuration to `config` (`None`: deleting it).
pub fn connector_record(name: &str, config: Option<&ConfigMap>) -> Write {
    (
        format!("connector-{name}"),
        config.map(|c| json!({"properties": c})),
    )
}

/// The record setting `name`'s target state.
pub fn target_record(name: &str, target: Target) -> Write {
    let state = match target {
        Target::Running => "STARTED",
        Target::Paused => "PAUSED",
        Target::Stopped => "STOPPED",
    };
    (
        format!("target-state-{name}"),
        Some(json!({"state": state, "state.v2": state})),
    )
}

/// The record claiming the creation of `name` (`None`: withdrawing a claim).
pub fn claim_record(name: &str, claim: Option<&Claim>) -> Write {
    (
        format!("claim-connector-{name}"),
        claim.and_then(|c| serde_json::to_value(c).ok()),
    )
}

/// The record setting logger `name` to `level` on every member (KIP-976's
/// `logger-cluster-<namespace>`, value `{"level": ...}`).
pub fn logger_record(name: &str, level: &str) -> Write {
    (
        format!("logger-cluster-{name}"),
        Some(json!({"level": level})),
    )
}

/// The record noting that connector `name` used `topic`, first at `at_ms` (`None`: a
/// tombstone, forgetting it), as Connect's status topic keeps topic tracking.
pub fn topic_record(name: &str, topic: &str, at_ms: Option<i64>) -> Write {
    (
        format!("status-topic-{topic}:connector-{name}"),
        at_ms.map(|at| {
            json!({"topic": {"name": topic, "connector": name, "task": 0, "discoverTimestamp": at}})
        }),
    )
}

/// Keeps the topics the group's connectors used in its config topic, where every member
/// reads them ([`crate::active_topics::Keeper`]).
pub struct TopicKeeper(pub Arc<SharedConfigs>);

#[async_trait::async_trait]
impl crate::active_topics::Keeper for TopicKeeper {
    async fn note(&self, connector: &str, topic: &str, at_ms: i64) -> Result<(), String> {
        self.0
            .write(&[topic_record(connector, topic, Some(at_ms))])
            .await
            .map(|_| ())
    }

    async fn forget(&self, connector: &str, topics: &[String]) -> Result<(), String> {
        let records: Vec<Write> = topics
            .iter()
            .map(|t| topic_record(connector, t, None))
            .collect();
        self.0.write(&records).await.map(|_| ())
    }
}

/// The record asking `name`'s owner to restart it.
pub fn restart_record(name: &str, only_failed: bool, include_tasks: bool) -> Write {
    (
        format!("restart-connector-{name}"),
        Some(json!({"only-failed": only_failed, "include-tasks": include_tasks})),
    )
}

/// This member's access to the config topic: a producer, and the thread that follows it.
pub struct SharedConfigs {
    producer: FutureProducer<ClientLog>,
    topic: String,
    state: watch::Receiver<Shared>,
    stop: Arc<AtomicBool>,
}

impl SharedConfigs {
    /// Opens group `group`'s config topic (it must exist) and starts following it; the
    /// topic-tracking records read go to `topics`.
    ///
    /// Errors when a Kafka client cannot be created.
    pub fn open(
        kafka: &KafkaConfig,
        group: &str,
        link: Arc<KafkaLink>,
        topics: crate::active_topics::ActiveTopics,
    ) -> Result<Self, String> {
        let producer: FutureProducer<ClientLog> = client::config(kafka)
            .set("enable.idempotence", "true")
            .set("linger.ms", "0")
            // A write fails after WRITE_WAIT instead of librdkafka's 300 s default.
            .set("message.timeout.ms", WRITE_WAIT.as_millis().to_string())
            .create_client(ClientLog::new(link.clone()))
            .map_err(|e| format!("cannot create a Kafka producer: {e}"))?;
        let consumer: BaseConsumer<ClientLog> = client::config(kafka)
            .set(
                "group.id",
                format!("{}.configs", super::topics::group_id(group)),
            )
            .set("enable.auto.commit", "false")
            .set("enable.partition.eof", "false")
            .set("fetch.wait.max.ms", "50")
            .create_client(ClientLog::new(link))
            .map_err(|e| format!("cannot create a Kafka consumer: {e}"))?;
        let topic = configs_topic(group);
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset(&topic, 0, Offset::Beginning)
            .map_err(|e| e.to_string())?;
        consumer.assign(&tpl).map_err(|e| e.to_string())?;
        let (tx, state) = watch::channel(Shared::default());
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let t = topic.clone();
        std::thread::Builder::new()
            .name("outboxd-configs".into())
            .spawn(move || follow(consumer, &t, &tx, &flag, &topics))
            .map_err(|e| format!("cannot start the config topic's reader: {e}"))?;
        Ok(Self {
            producer,
            topic,
            state,
            stop,
        })
    }

    /// The state as read so far.
    pub fn current(&self) -> Shared {
        self.state.borrow().clone()
    }

    /// Every new state.
    pub fn subscribe(&self) -> watch::Receiver<Shared> {
        self.state.clone()
    }

    /// Waits until the topic has been read to the end it had at open, as long as reading
    /// goes on: at most `wait` without a record read (a long topic takes as long as it
    /// takes; a reader that stopped moving does not).
    ///
    /// Errors when nothing was read for `wait` before the end.
    pub async fn caught_up(&self, wait: Duration) -> Result<Shared, String> {
        let mut rx = self.state.clone();
        let mut read_to = rx.borrow().read_to;
        loop {
            let step = tokio::time::timeout(wait, async {
                rx.wait_for(|s| s.caught_up || s.read_to != read_to)
                    .await
                    .map(|s| s.clone())
            })
            .await;
            match step {
                Ok(Ok(s)) if s.caught_up => return Ok(s),
                Ok(Ok(s)) => read_to = s.read_to,
                _ => {
                    return Err(format!(
                        "the group's config topic {} was not read to its end: nothing read for \
                         {wait:?} (read to offset {read_to})",
                        self.topic
                    ))
                }
            }
        }
    }

    /// Writes `records` in order and returns once this member has read them back (the
    /// state returned holds them).
    ///
    /// Errors when Kafka does not take them or they are not read back within
    /// [`WRITE_WAIT`]: what was written before the failure stays written.
    pub async fn write(&self, records: &[Write]) -> Result<Shared, String> {
        let mut last = -1;
        // Sent a chunk at a time, each chunk's records all in flight together (one
        // partition, an idempotent producer: in the order sent); a reset of thousands of
        // topics once waited for each tombstone in turn.
        for chunk in records.chunks(WRITE_CHUNK) {
            let payloads: Vec<Option<String>> = chunk
                .iter()
                .map(|(_, v)| v.as_ref().map(|v| v.to_string()))
                .collect();
            let sends = chunk.iter().zip(&payloads).map(|((key, _), payload)| {
                let mut record = FutureRecord::<str, str>::to(&self.topic).key(key);
                if let Some(p) = payload {
                    record = record.payload(p);
                }
                self.producer.send(record, WRITE_WAIT)
            });
            for delivered in futures_util::future::join_all(sends).await {
                let delivered = delivered.map_err(|(e, _)| {
                    format!("writing to the group's config topic {}: {e}", self.topic)
                })?;
                last = last.max(delivered.offset);
            }
        }
        let mut rx = self.state.clone();
        let read = tokio::time::timeout(WRITE_WAIT, async {
            rx.wait_for(|s| s.read_to > last).await.map(|s| s.clone())
        })
        .await;
        match read {
            Ok(Ok(s)) => Ok(s),
            _ => Err(format!(
                "written to the group's config topic {}, but not read back within {WRITE_WAIT:?}",
                self.topic
            )),
        }
    }
}

impl Drop for SharedConfigs {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
    }
}

/// Most records [`SharedConfigs::write`] has in flight at once.
const WRITE_CHUNK: usize = 5_000;

/// Most records [`follow`] applies before it publishes the state.
const BATCH: usize = 10_000;

/// The reader thread: polls the topic until `stop`, publishing each new state on `tx`
/// (once per batch of records read) and handing topic-tracking records to `topics`.
fn follow(
    consumer: BaseConsumer<ClientLog>,
    topic: &str,
    tx: &watch::Sender<Shared>,
    stop: &AtomicBool,
    topics: &crate::active_topics::ActiveTopics,
) {
    let mut state = Shared::default();
    // The end to reach before the state counts as caught up (unknown until Kafka answers).
    let mut end: Option<i64> = None;
    while !stop.load(Ordering::Acquire) {
        if end.is_none() {
            if let Ok((_, high)) = client::watermarks(&consumer, topic, 0, Duration::from_secs(2)) {
                end = Some(high);
            }
        }
        // Everything the client has fetched is applied before the state is published once:
        // publishing (a clone of the state) per record made reading a long topic quadratic.
        let mut changed = false;
        let mut wait = Duration::from_millis(100);
        for _ in 0..BATCH {
            let Some(Ok(m)) = consumer.poll(wait) else {
                break;
            };
            if let Some(key) = m.key() {
                state.apply(key, m.payload(), state.caught_up, topics);
            }
            state.read_to = m.offset() + 1;
            changed = true;
            wait = Duration::ZERO;
        }
        if !state.caught_up {
            if let Some(end) = end {
                let position = consumer
                    .position()
                    .ok()
                    .and_then(|p| p.find_partition(topic, 0).and_then(|e| e.offset().to_raw()))
                    .unwrap_or(-1);
                if state.read_to >= end || position >= end {
                    state.caught_up = true;
                    state.read_to = state.read_to.max(end);
                    changed = true;
                }
            }
        }
        if changed {
            tx.send_replace(state.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn apply(s: &mut Shared, w: &Write, live: bool) {
        let v = w.1.as_ref().map(|v| v.to_string());
        let topics = crate::active_topics::ActiveTopics::default();
        s.apply(
            w.0.as_bytes(),
            v.as_deref().map(str::as_bytes),
            live,
            &topics,
        );
    }

    #[test]
    fn topic_records_track_topics_and_a_tombstone_forgets_them() {
        let mut s = Shared::default();
        let topics = crate::active_topics::ActiveTopics::default();
        let mut put = |w: &Write| {
            let v = w.1.as_ref().map(|v| v.to_string());
            s.apply(
                w.0.as_bytes(),
                v.as_deref().map(str::as_bytes),
                true,
                &topics,
            );
        };
        put(&topic_record("a", "orders", Some(5)));
        put(&topic_record("a", "x:connector-y", Some(6)));
        put(&topic_record("b", "orders", Some(7)));
        assert_eq!(topics.list("a"), ["orders", "x:connector-y"]);
        put(&topic_record("a", "orders", None));
        put(&topic_record("a", "x:connector-y", None));
        assert!(topics.list("a").is_empty());
        assert_eq!(topics.list("b"), ["orders"]);
        // Bytes from outside: ignored, never a panic.
        for (k, v) in [
            (&b"status-topic-"[..], Some(&b"{}"[..])),
            (b"status-topic-t:connector-", Some(b"{}")),
            (b"status-topic-:connector-c", None),
            (b"status-topic-t:connector-c", Some(b"garbage")),
        ] {
            s.apply(k, v, true, &topics);
        }
        assert_eq!(topics.list("c"), ["t"]);
        // Not in the state, which is copied at each change.
        assert_eq!(s, Shared::default());
    }

    #[test]
    fn records_build_the_state_as_connect_keys_them() {
        let mut s = Shared::default();
        let mut cfg = ConfigMap::new();
        cfg.insert("topic.prefix".into(), json!("shop"));
        apply(&mut s, &connector_record("a", Some(&cfg)), false);
        apply(&mut s, &target_record("a", Target::Paused), false);
        assert_eq!(s.connectors["a"]["topic.prefix"], json!("shop"));
        assert_eq!(s.targets.get("a"), Some(&Target::Paused));
        // A restart asked before this member caught up is history.
        apply(&mut s, &restart_record("a", false, true), false);
        assert!(!s.restarts.contains_key("a"));
        apply(&mut s, &restart_record("a", true, true), true);
        assert_eq!(s.restarts["a"], (1, true));
        apply(&mut s, &target_record("a", Target::Running), true);
        assert_eq!(s.targets.get("a"), None);
        apply(&mut s, &target_record("a", Target::Stopped), true);
        // Deleting the connector forgets its target state too.
        apply(&mut s, &connector_record("a", None), true);
        assert!(s.connectors.is_empty());
        assert!(s.targets.is_empty());
        // Bytes from outside: ignored, never a panic.
        s.apply(&[0xff, 0xfe], Some(b"{"), true, &Default::default());
        s.apply(b"connector-b", Some(b"not json"), true, &Default::default());
        s.apply(b"target-state-b", Some(b"[]"), true, &Default::default());
        // A target state it cannot read changes nothing.
        apply(&mut s, &target_record("d", Target::Stopped), true);
        s.apply(b"target-state-d", Some(b"[]"), true, &Default::default());
        s.apply(
            b"target-state-d",
            Some(br#"{"state":"BOGUS"}"#),
            true,
            &Default::default(),
        );
        assert_eq!(s.targets.get("d"), Some(&Target::Stopped));
        s.apply(b"target-state-d", None, true, &Default::default());
        assert_eq!(s.targets.get("d"), None);
        assert!(s.connectors.is_empty());
        // A record that is neither a configuration nor a tombstone deletes nothing.
        apply(&mut s, &connector_record("c", Some(&cfg)), true);
        s.apply(
            b"connector-c",
            Some(br#"{"propertie":{}}"#),
            true,
            &Default::default(),
        );
        s.apply(b"connector-c", Some(b"garbage"), true, &Default::default());
        assert_eq!(s.connectors["c"]["topic.prefix"], json!("shop"));
        assert_eq!(
            target_record("x", Target::Stopped).1.unwrap()["state"],
            "STOPPED"
        );
    }

    #[test]
    fn the_first_claim_read_creates_a_connector() {
        let mut s = Shared::default();
        let claim = |nonce: &str, at_ms: i64| Claim {
            nonce: nonce.into(),
            at_ms,
        };
        apply(&mut s, &claim_record("a", Some(&claim("m1", 1_000))), true);
        apply(&mut s, &claim_record("a", Some(&claim("m2", 1_010))), true);
        assert_eq!(s.claims["a"].nonce, "m1", "the first claim read wins");
        // The winner's connector record ends the claim.
        let cfg = ConfigMap::new();
        apply(&mut s, &connector_record("a", Some(&cfg)), true);
        assert!(s.claims.is_empty());
        // No claim for an existing connector.
        apply(&mut s, &claim_record("a", Some(&claim("m3", 2_000))), true);
        assert!(s.claims.is_empty());
        // A claim whose connector never came gives way after CLAIM_VALID.
        apply(&mut s, &claim_record("b", Some(&claim("dead", 0))), true);
        let later = CLAIM_VALID.as_millis() as i64 + 1;
        apply(&mut s, &claim_record("b", Some(&claim("m4", later))), true);
        assert_eq!(s.claims["b"].nonce, "m4");
        apply(&mut s, &claim_record("b", None), true);
        assert!(s.claims.is_empty());
        // A claim dated in the future holds nothing for long.
        apply(
            &mut s,
            &claim_record("c", Some(&claim("skewed", 3_600_000))),
            true,
        );
        apply(&mut s, &claim_record("c", Some(&claim("m5", 1_000))), true);
        assert_eq!(s.claims["c"].nonce, "m5");
    }
}
