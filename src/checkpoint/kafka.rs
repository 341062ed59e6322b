//! The `kafka` checkpoint store: a compacted topic, keyed by connector name.
//!
//! The topic (default `outboxd.checkpoints.<connector>`, Kafka Connect's `offset.storage.topic` in
//! spirit) is created if missing with `cleanup.policy=compact`, so it keeps the last
//! checkpoint of every connector forever. Record key: the connector name (UTF-8); value: the
//! [`Checkpoint`] JSON (see the module above). In exactly-once mode the checkpoint record is
//! written inside the same Kafka transaction as the records it covers; the store is read with
//! `isolation.level=read_committed`, so an aborted transaction's checkpoint is never seen.
//! In at-least-once mode it is produced after the records were acknowledged.

use std::time::{Duration, Instant};

use rdkafka::admin::AdminClient;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
use rdkafka::{Offset, TopicPartitionList};

use std::sync::Arc;

use super::claim::{Claims, FileClaim, KafkaClaim};
use super::{on_blocking_pool, Checkpoint, CheckpointError, CheckpointStore};
use crate::config::KafkaConfig;
use crate::error::Class;
use crate::sink::client::CreateClient;
use crate::sink::client_log::ClientLog;
use crate::sink::topics::{self, CreateTopicError, TopicSpec};
use crate::sink::{client, KafkaLink, KafkaRecord};

/// How long one metadata / watermark / produce round trip may take.
const KAFKA_TIMEOUT: Duration = Duration::from_secs(30);
/// Longest an at-least-once checkpoint write waits for Kafka's acknowledgement.
const WRITE_TIMEOUT: Duration = Duration::from_secs(5);

/// A record's offset and value, as read from the topic.
type Stored = (i64, Vec<u8>);

/// A connector's checkpoint in a compacted Kafka topic.
pub struct KafkaCheckpointStore {
    kafka: KafkaConfig,
    link: Arc<KafkaLink>,
    topic: String,
    connector: String,
    producer: Option<FutureProducer<ClientLog>>,
}

impl KafkaCheckpointStore {
    /// A store for `connector` in `topic` on the cluster `kafka` names, whose client settings
    /// (security among them) every client of the store uses. Nothing is contacted until
    /// [`ensure_topic`](Self::ensure_topic), `load` or `store`. Its clients' connection
    /// trouble goes to a quiet link of its own (a command's: the errors say what failed) unless
    /// [`with_link`](Self::with_link) gives it the connector's.
    pub fn new(kafka: &KafkaConfig, topic: &str, connector: &str) -> Self {
        Self {
            kafka: kafka.clone(),
            link: KafkaLink::quiet(connector, &kafka.bootstrap_servers),
            topic: topic.to_string(),
            connector: connector.to_string(),
            producer: None,
        }
    }

    /// Reports the store's clients' connection trouble to `link` (the connector's), instead
    /// of a link of its own.
    pub fn with_link(mut self, link: Arc<KafkaLink>) -> Self {
        self.link = link;
        self
    }

    /// The link the store's clients report to.
    pub fn link(&self) -> Arc<KafkaLink> {
        self.link.clone()
    }

    /// The store's topic.
    pub fn topic(&self) -> &str {
        &self.topic
    }

    /// The record that stores `checkpoint`: key = connector name, value = JSON.
    pub fn record(&self, checkpoint: &Checkpoint) -> Result<KafkaRecord, CheckpointError> {
        let value = serde_json::to_vec(checkpoint).map_err(|e| CheckpointError::Serialise {
            source: Arc::new(e),
        })?;
        Ok(KafkaRecord {
            value: Some(value),
            ..self.tombstone()
        })
    }

    /// The record that clears the checkpoint: key = connector name, no value (a tombstone).
    pub fn tombstone(&self) -> KafkaRecord {
        KafkaRecord {
            topic: self.topic.clone(),
            key: Some(self.connector.clone().into_bytes()),
            value: None,
            headers: Vec::new(),
            timestamp_ms: None,
            partition: None,
        }
    }

    /// Creates the topic (1 partition, `cleanup.policy=compact`, the broker's default
    /// replication factor) unless it exists.
    ///
    /// Errors: transient when the cluster is unreachable; definite when creation is refused
    /// (e.g. no ACL): then create it by hand with `cleanup.policy=compact`.
    pub async fn ensure_topic(&self) -> Result<(), CheckpointError> {
        let admin: AdminClient<ClientLog> = client::config(&self.kafka)
            .create_client(ClientLog::new(self.link.clone()))
            .map_err(|source| CheckpointError::Client {
                client: "admin client",
                source,
            })?;
        let spec = [TopicSpec::compacted(&self.topic)];
        topics::ensure_topics(&admin, &spec, KAFKA_TIMEOUT, &self.link)
            .await
            .map_err(|e| match e {
                CreateTopicError::Refused { topic, code } => {
                    CheckpointError::TopicRefused { topic, code }
                }
                CreateTopicError::Link(f) => CheckpointError::Link(f),
                CreateTopicError::Request { source, .. } => CheckpointError::kafka(
                    format!("creating checkpoint topic {}", self.topic),
                    Some(source),
                ),
                CreateTopicError::Failed { topic, code } => CheckpointError::kafka(
                    format!("creating checkpoint topic {topic}"),
                    Some(rdkafka::error::KafkaError::AdminOp(code)),
                ),
                e @ CreateTopicError::Unanswered { .. } => {
                    CheckpointError::kafka(e.to_string(), None)
                }
            })?;
        Ok(())
    }

    fn read_last(&self) -> Result<Option<Checkpoint>, CheckpointError> {
        let [last] = self.read_last_values([self.connector.as_bytes()])?;
        last.map(|(offset, bytes)| self.parse_checkpoint(offset, &bytes))
            .transpose()
    }

    fn parse_checkpoint(&self, offset: i64, bytes: &[u8]) -> Result<Checkpoint, CheckpointError> {
        serde_json::from_slice(bytes).map_err(|e| CheckpointError::RecordInvalid {
            connector: self.connector.clone(),
            topic: self.topic.clone(),
            offset,
            source: Arc::new(e),
        })
    }

    /// What the connector's claims topic (this store's topic, the connector's default
    /// checkpoint topic) holds, read in one pass: the checkpoint stored there and the
    /// claims other stores of the connector left ([`Claims`]). Claims that do not parse are
    /// ignored (they guard, they do not decide delivery).
    pub fn claims(&self) -> Result<Claims, CheckpointError> {
        let file_key = FileClaim::key(&self.connector);
        let kafka_key = KafkaClaim::key(&self.connector);
        let [checkpoint, file, kafka] = self
            .read_last_values([
                self.connector.as_bytes(),
                file_key.as_bytes(),
                kafka_key.as_bytes(),
            ])
            .map_err(|e| self.definite_if_link_failed(e))?;
        Ok(Claims {
            checkpoint: checkpoint
                .map(|(offset, bytes)| self.parse_checkpoint(offset, &bytes))
                .transpose()?,
            file: file.and_then(|(_, b)| serde_json::from_slice(&b).ok()),
            kafka: kafka.and_then(|(_, b)| serde_json::from_slice(&b).ok()),
        })
    }

    /// Writes a claim (`key`, JSON `value`) to the topic, creating the topic if needed;
    /// waits for Kafka's acknowledgement, at most 5 s.
    pub async fn write_claim(
        &mut self,
        key: String,
        value: &impl serde::Serialize,
    ) -> Result<(), CheckpointError> {
        self.ensure_topic().await?;
        let value = serde_json::to_vec(value).map_err(|e| CheckpointError::Serialise {
            source: Arc::new(e),
        })?;
        self.produce(key.into_bytes(), Some(value), "writing a store's claim")
            .await
    }

    /// Transient failures while the link knows of a definite one are that one.
    fn definite_if_link_failed(&self, e: CheckpointError) -> CheckpointError {
        match self.link.definite_failure() {
            Some(f) if e.class() == Class::Transient => CheckpointError::Link(f),
            _ => e,
        }
    }

    /// The offset and value of the last record with each of `keys` in the topic (`None` when
    /// there is none, the last one is a tombstone, or the topic does not exist), read
    /// `read_committed` to the topic's true end in one pass.
    fn read_last_values<const N: usize>(
        &self,
        keys: [&[u8]; N],
    ) -> Result<[Option<Stored>; N], CheckpointError> {
        let consumer_error = |source| CheckpointError::Client {
            client: "consumer",
            source,
        };
        let consumer: BaseConsumer<ClientLog> = client::config(&self.kafka)
            .set(
                "group.id",
                format!("outboxd-checkpoint-reader-{}", self.connector),
            )
            .set("enable.auto.commit", "false")
            .set("isolation.level", "read_committed")
            .set("enable.partition.eof", "false")
            .create_client(ClientLog::new(self.link.clone()))
            .map_err(consumer_error)?;
        let md = self.topic_metadata(&consumer)?;
        let partitions: Vec<i32> = md
            .topics()
            .iter()
            .flat_map(|t| t.partitions().iter().map(|p| p.id()))
            .collect();
        // The end to read up to is the true high watermark: with read_committed the broker
        // reports the last stable offset instead, which another producer's open transaction
        // holds back, so checkpoints committed after it would go unseen. Reading on with
        // read_committed until the position reaches the true end waits for such
        // transactions to end (at most their transaction.timeout.ms).
        let watermarks: BaseConsumer<ClientLog> = client::config(&self.kafka)
            .set(
                "group.id",
                format!("outboxd-checkpoint-reader-{}", self.connector),
            )
            .set("isolation.level", "read_uncommitted")
            .create_client(ClientLog::new(self.link.clone()))
            .map_err(consumer_error)?;
        let mut tpl = TopicPartitionList::new();
        let mut ends = Vec::new();
        for p in partitions {
            let (low, high) = client::watermarks(&watermarks, &self.topic, p, KAFKA_TIMEOUT)
                .map_err(|e| CheckpointError::kafka("reading checkpoint topic offsets", Some(e)))?;
            if high > low {
                tpl.add_partition_offset(&self.topic, p, Offset::Beginning)
                    .map_err(|e| {
                        CheckpointError::kafka("assigning the checkpoint topic", Some(e))
                    })?;
                ends.push((p, high));
            }
        }
        let mut last: [Option<Stored>; N] = std::array::from_fn(|_| None);
        if ends.is_empty() {
            return Ok(last);
        }
        consumer
            .assign(&tpl)
            .map_err(|e| CheckpointError::kafka("reading checkpoint topic", Some(e)))?;
        let deadline = Instant::now() + KAFKA_TIMEOUT * 4;
        let mut done: Vec<i32> = Vec::new();
        while done.len() < ends.len() {
            if Instant::now() > deadline {
                return Err(CheckpointError::kafka(
                    format!(
                        "timed out reading checkpoint topic {} to its end (is another \
                         producer's transaction on it still open?)",
                        self.topic
                    ),
                    None,
                ));
            }
            // Partitions whose position reached the end are done (control records of
            // transactions advance the position without being returned).
            if let Ok(pos) = consumer.position() {
                for (p, high) in &ends {
                    if done.contains(p) {
                        continue;
                    }
                    if let Some(e) = pos.find_partition(&self.topic, *p) {
                        if let Offset::Offset(o) = e.offset() {
                            if o >= *high {
                                done.push(*p);
                            }
                        }
                    }
                }
            }
            let Some(msg) = consumer.poll(Duration::from_millis(200)) else {
                continue;
            };
            let msg =
                msg.map_err(|e| CheckpointError::kafka("reading checkpoint topic", Some(e)))?;
            let Some(i) = keys.iter().position(|k| msg.key() == Some(*k)) else {
                continue;
            };
            last[i] = msg.payload().map(|bytes| (msg.offset(), bytes.to_vec()));
        }
        Ok(last)
    }

    /// The checkpoint topic's metadata, asked in one-second steps for up to [`KAFKA_TIMEOUT`]:
    /// between the steps the consumer serves its error events, so a refused login or a TLS
    /// handshake that fails verification ends the wait at once ([`CheckpointError::Link`]).
    fn topic_metadata(
        &self,
        consumer: &BaseConsumer<ClientLog>,
    ) -> Result<rdkafka::metadata::Metadata, CheckpointError> {
        let deadline = Instant::now() + KAFKA_TIMEOUT;
        loop {
            match consumer.fetch_metadata(Some(&self.topic), Duration::from_secs(1)) {
                Ok(md) => return Ok(md),
                Err(e) => {
                    // Not assigned yet: this only serves the client's events (errors, logs).
                    let _ = consumer.poll(Duration::from_millis(100));
                    if let Some(f) = self.link.definite_failure() {
                        return Err(CheckpointError::Link(f));
                    }
                    if Instant::now() >= deadline {
                        return Err(CheckpointError::kafka(
                            "reading checkpoint topic metadata",
                            Some(e),
                        ));
                    }
                }
            }
        }
    }

    fn producer(&mut self) -> Result<&FutureProducer<ClientLog>, CheckpointError> {
        if self.producer.is_none() {
            let p: FutureProducer<ClientLog> = client::config(&self.kafka)
                .set("enable.idempotence", "true")
                .set("acks", "all")
                .set("linger.ms", "0")
                .create_client(ClientLog::new(self.link.clone()))
                .map_err(|source| CheckpointError::Client {
                    client: "producer",
                    source,
                })?;
            self.producer = Some(p);
        }
        Ok(self.producer.as_ref().expect("set above"))
    }
}

#[async_trait::async_trait]
impl CheckpointStore for KafkaCheckpointStore {
    /// Reads the topic on the blocking pool (see [`load_blocking`](Self::load_blocking)).
    async fn load(&self) -> Result<Option<Checkpoint>, CheckpointError> {
        let reader = self.reader();
        on_blocking_pool("reading the checkpoint topic", move || {
            reader.load_blocking()
        })
        .await
    }

    /// Creates the producer and waits for the checkpoint topic's metadata: the broker
    /// connection and the idempotent producer id are then in place, and the first
    /// [`store`](CheckpointStore::store) costs one round trip instead of a connection
    /// set-up (measured ~0.5 s of stalled stream without this; benches/results/profile.md).
    async fn prepare(&mut self) -> Result<(), CheckpointError> {
        let topic = self.topic.clone();
        let producer = self.producer()?.clone();
        on_blocking_pool("asking for the checkpoint topic's metadata", move || {
            producer
                .client()
                .fetch_metadata(Some(&topic), KAFKA_TIMEOUT)
                .map(|_| ())
                .map_err(|e| CheckpointError::kafka(format!("checkpoint topic {topic}"), Some(e)))
        })
        .await
    }

    /// Produces the checkpoint record and waits until Kafka acknowledged it (at-least-once
    /// mode; exactly-once writes [`record`](Self::record) inside its transactions instead).
    async fn store(&mut self, checkpoint: &Checkpoint) -> Result<(), CheckpointError> {
        let record = self.record(checkpoint)?;
        let key = self.connector.clone().into_bytes();
        self.produce(key, record.value, "writing the checkpoint")
            .await
    }

    /// Produces a tombstone for the connector's key (a null value, which compaction keeps
    /// until `delete.retention.ms` and `load` reads as "no checkpoint").
    async fn clear(&mut self) -> Result<(), CheckpointError> {
        let key = self.connector.clone().into_bytes();
        self.produce(key, None, "clearing the checkpoint").await
    }
}

impl KafkaCheckpointStore {
    /// The last stored checkpoint, read now, blocking the calling thread (at most a few
    /// [`KAFKA_TIMEOUT`]s): for code already on the blocking pool. Otherwise use
    /// [`CheckpointStore::load`].
    pub(crate) fn load_blocking(&self) -> Result<Option<Checkpoint>, CheckpointError> {
        self.read_last()
            .map_err(|e| self.definite_if_link_failed(e))
    }

    /// A copy of the store without its producer, to read on the blocking pool.
    fn reader(&self) -> Self {
        Self {
            kafka: self.kafka.clone(),
            link: self.link.clone(),
            topic: self.topic.clone(),
            connector: self.connector.clone(),
            producer: None,
        }
    }

    /// Produces `key`/`value` (`None`: a tombstone) to the topic and waits for the
    /// acknowledgement, at most [`WRITE_TIMEOUT`] (`what`: for the error).
    async fn produce(
        &mut self,
        key: Vec<u8>,
        value: Option<Vec<u8>>,
        what: &'static str,
    ) -> Result<(), CheckpointError> {
        let topic = self.topic.clone();
        let producer = self.producer()?.clone();
        let delivery = async move {
            let mut record = FutureRecord::<[u8], [u8]>::to(&topic).key(&key);
            if let Some(v) = &value {
                record = record.payload(v);
            }
            producer
                .send(record, KAFKA_TIMEOUT)
                .await
                .map(|_| ())
                .map_err(|(e, _)| CheckpointError::kafka(what, Some(e)))
        };
        // Bounded: with the brokers unreachable the delivery would wait for the producer's
        // message timeout (minutes) and the loop with it; a failed write is transient (the
        // connector restarts from the stored checkpoint).
        tokio::time::timeout(WRITE_TIMEOUT, delivery)
            .await
            .unwrap_or_else(|_| {
                Err(CheckpointError::kafka(
                    format!("{what}: Kafka did not acknowledge it within {WRITE_TIMEOUT:?}"),
                    None,
                ))
            })
    }
}
