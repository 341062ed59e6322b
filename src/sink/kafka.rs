//! The Kafka producer (rdkafka over the bundled librdkafka).
//!
//! Settings follow what Debezium's Kafka Connect worker gives an outbox connector, tightened
//! for ordering and durability: `enable.idempotence=true` (so retries never reorder or
//! duplicate within a partition), `acks=all`, and `partitioner=murmur2_random`, the hash the
//! Java client uses, so an aggregate lands on the same partition as it did under Debezium.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rdkafka::error::{KafkaError, KafkaResult, RDKafkaErrorCode};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{BaseRecord, Producer, ThreadedProducer};
use tokio::sync::watch;

use super::client::CreateClient;
use super::error::SinkError;
use super::link::KafkaLink;
use super::topic_creator::TopicCreator;
use super::tracker::{self, DeliveryTracker};
use crate::config::KafkaConfig;
use crate::record::KafkaRecord;

/// The producer: librdkafka's, with a polling thread that feeds delivery reports to the
/// [`DeliveryTracker`].
pub(super) type TrackedProducer = ThreadedProducer<DeliveryTracker>;

/// An idempotent Kafka producer for one connector. Delivery outcomes are counted by its
/// [`DeliveryTracker`] ([`deliveries`](Self::deliveries)); one task sends on it.
pub struct KafkaSink {
    producer: Arc<TrackedProducer>,
    max_record_bytes: usize,
    /// The connector's name, for log lines.
    connector: String,
    /// `queue.buffering.max.kbytes` in effect, for log lines.
    queue_kbytes: u64,
    /// Turns true on shutdown: a send waiting for room in a full queue gives up then.
    shutdown: Option<watch::Receiver<bool>>,
    /// The producer's settings, for looking up the topics records wait for.
    settings: rdkafka::ClientConfig,
    /// Topics outboxd creates when the connector starts (checkpoint, dead letters).
    own_topics: Vec<String>,
    /// Creates a missing routed topic before its first record (`topic.creation.*`).
    creator: Option<TopicCreator>,
}

/// Framing allowance on top of `kafka.max_record_bytes` for librdkafka's
/// `message.max.bytes` (its request-level limit: record batch and request headers).
const FRAMING_ALLOWANCE: usize = 64 * 1024;

/// librdkafka's largest `message.max.bytes` (CONFIGURATION.md: 1000 .. 1000000000).
const LIBRDKAFKA_MAX_MESSAGE_BYTES: usize = 1_000_000_000;

/// outboxd's `queue.buffering.max.kbytes` floor (16 MiB), raised for large records.
const MIN_QUEUE_KBYTES: u64 = 16 * 1024;

/// How long a send waits in a full producer queue before it says so (and again every as
/// long while it keeps waiting).
const QUEUE_FULL_WARN_AFTER: Duration = Duration::from_secs(10);

/// The librdkafka sizes derived from `kafka.max_record_bytes`: `message.max.bytes` (the
/// record plus framing) and `queue.buffering.max.kbytes` (room for two of the largest
/// records, at least 16 MiB), so that a record of the largest allowed size always fits in
/// an empty queue and the queue never refuses it for ever.
///
/// Errors (definite) when the limit is beyond librdkafka's `message.max.bytes` range, or a
/// `kafka.producer` override of either property could never hold such a record.
pub fn producer_sizes(cfg: &KafkaConfig) -> Result<(usize, u64), SinkError> {
    let message_max = cfg.max_record_bytes.saturating_add(FRAMING_ALLOWANCE);
    if message_max > LIBRDKAFKA_MAX_MESSAGE_BYTES {
        return Err(SinkError::RecordLimit {
            detail: format!(
                "kafka.max_record_bytes={} is more than librdkafka can produce (its \
                 message.max.bytes is at most {LIBRDKAFKA_MAX_MESSAGE_BYTES}, and outboxd adds \
                 {FRAMING_ALLOWANCE} bytes of framing); lower kafka.max_record_bytes to at most \
                 {}",
                cfg.max_record_bytes,
                LIBRDKAFKA_MAX_MESSAGE_BYTES - FRAMING_ALLOWANCE
            ),
        });
    }
    let needed_kbytes = (message_max as u64).div_ceil(1024);
    let queue_kbytes = MIN_QUEUE_KBYTES.max(2 * needed_kbytes);
    if let Some(v) = cfg.producer.get("message.max.bytes") {
        if v.trim()
            .parse::<usize>()
            .is_ok_and(|n| n < cfg.max_record_bytes)
        {
            return Err(SinkError::RecordLimit {
                detail: format!(
                    "kafka.producer.message.max.bytes={v} is smaller than \
                     kafka.max_record_bytes={}: records in between would be refused; remove \
                     the override (outboxd derives message.max.bytes from \
                     kafka.max_record_bytes) or lower kafka.max_record_bytes",
                    cfg.max_record_bytes
                ),
            });
        }
    }
    if let Some(v) = cfg.producer.get("queue.buffering.max.kbytes") {
        if v.trim().parse::<u64>().is_ok_and(|k| k < needed_kbytes) {
            return Err(SinkError::RecordLimit {
                detail: format!(
                    "kafka.producer.queue.buffering.max.kbytes={v} (KiB) cannot hold a record \
                     of kafka.max_record_bytes={} bytes: such a record would wait for room in \
                     the producer queue for ever; raise queue.buffering.max.kbytes to at least \
                     {needed_kbytes} (or remove the override: outboxd then uses {queue_kbytes}), \
                     or lower kafka.max_record_bytes",
                    cfg.max_record_bytes
                ),
            });
        }
    }
    Ok((message_max, queue_kbytes))
}

/// librdkafka properties outboxd sets; a user's `kafka.producer` map may override the
/// non-essential ones but not these, which the delivery guarantees rest on.
use crate::config::kafka::FIXED_PRODUCER as FIXED_PROPERTIES;

impl KafkaSink {
    /// Creates the producer. `client_id` names the connector in broker logs.
    ///
    /// Errors (definite) when librdkafka rejects a property or a user override tries to
    /// weaken a fixed property (`enable.idempotence`, `acks`, `partitioner`).
    pub fn new(
        cfg: &KafkaConfig,
        client_id: &str,
        link: Arc<KafkaLink>,
    ) -> Result<Self, SinkError> {
        Self::build(cfg, client_id, None, link)
    }

    /// Creates a transactional producer with `transactional.id` = `transactional_id`
    /// (Kafka's exactly-once producer): call [`init_transactions`](Self::init_transactions)
    /// before the first [`begin`](Self::begin).
    pub fn new_transactional(
        cfg: &KafkaConfig,
        client_id: &str,
        transactional_id: &str,
        link: Arc<KafkaLink>,
    ) -> Result<Self, SinkError> {
        Self::build(cfg, client_id, Some(transactional_id), link)
    }

    fn build(
        cfg: &KafkaConfig,
        client_id: &str,
        transactional_id: Option<&str>,
        link: Arc<KafkaLink>,
    ) -> Result<Self, SinkError> {
        let (message_max, queue_kbytes) = producer_sizes(cfg)?;
        let mut cc = super::client::config(cfg);
        cc.set("client.id", format!("outboxd-{client_id}"))
            .set(
                "statistics.interval.ms",
                super::link::STATISTICS_INTERVAL_MS.to_string(),
            )
            .set("linger.ms", "5")
            .set("compression.type", "lz4")
            .set("message.timeout.ms", "300000")
            .set("queue.buffering.max.kbytes", queue_kbytes.to_string())
            .set("message.max.bytes", message_max.to_string());
        for (k, v) in &cfg.producer {
            if let Some((_, _, fixed)) = FIXED_PROPERTIES.iter().find(|(name, _, _)| name == k) {
                if v != fixed {
                    return Err(SinkError::FixedProperty {
                        key: k.clone(),
                        value: v.clone(),
                        fixed,
                    });
                }
            }
            cc.set(k, v);
        }
        for (k, v) in cfg.producer_secrets.expose() {
            cc.set(k, super::client::value_for(&cfg.bootstrap_servers, k, v));
        }
        for (k, _, v) in FIXED_PROPERTIES {
            cc.set(*k, *v);
        }
        if let Some(id) = transactional_id {
            // A transaction's records must be delivered within its timeout.
            cc.set("transactional.id", id)
                .set("transaction.timeout.ms", "60000")
                .set("message.timeout.ms", "55000");
            // Records become visible at the commit, which sends what is queued at once
            // (`flush_now`), so lingering delays nobody; it fills produce requests, which
            // halved the broker's CPU per event in PostgreSQL drains
            // (benches/results/profile.md §7). A user's `kafka.producer` value wins.
            if !cfg.producer.contains_key("linger.ms") {
                cc.set("linger.ms", TXN_LINGER_MS.to_string());
            }
        }
        let producer =
            super::client::create::<TrackedProducer, _>(&cc, DeliveryTracker::new(link.clone()))
                .map_err(|e| SinkError::Client {
                    source: Box::new(e),
                })?;
        let producer = Arc::new(producer);
        let settings = cc.clone();
        let creator = match &cfg.topic_creation {
            Some(plan) => {
                let admin = super::client::config(cfg)
                    .create_client(super::client_log::ClientLog::new(link.clone()))
                    .map_err(|e| SinkError::Client {
                        source: Box::new(e),
                    })?;
                Some(TopicCreator::new(
                    plan.clone(),
                    settings.clone(),
                    admin,
                    link.clone(),
                ))
            }
            None => None,
        };
        // Outside a runtime (unit tests) nothing is delivered, so nothing can stall.
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(super::stall::watch(
                Arc::downgrade(&producer),
                super::stall::probe_settings(&cc),
                client_id.to_string(),
            ));
        }
        // The link's WARN says how much waits for the brokers.
        let weak = Arc::downgrade(&producer);
        link.set_backlog(Box::new(move || {
            weak.upgrade().map(|p| p.context().unacked())
        }));
        let queue_kbytes = cfg
            .producer
            .get("queue.buffering.max.kbytes")
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(queue_kbytes);
        Ok(Self {
            producer,
            max_record_bytes: cfg.max_record_bytes,
            connector: client_id.to_string(),
            queue_kbytes,
            shutdown: None,
            creator,
            settings,
            own_topics: Vec::new(),
        })
    }

    /// The same sink, knowing `topics` as ones outboxd creates when the connector starts
    /// (its checkpoint topic, its dead-letter topic): a restart creates them again, so their
    /// absence is no reason to stop ([`missing_topics`](Self::missing_topics)).
    pub fn with_own_topics(mut self, topics: impl IntoIterator<Item = String>) -> Self {
        self.own_topics.extend(topics);
        if let Some(c) = &mut self.creator {
            c.add_own(self.own_topics.iter().cloned());
        }
        self
    }

    /// The same, knowing that routed topics carry `prefix` (`--shadow`): Kafka Connect's
    /// topic creation groups match the routed name without it.
    pub fn with_topic_prefix(mut self, prefix: Option<String>) -> Self {
        if let Some(c) = &mut self.creator {
            c.set_shadow_prefix(prefix);
        }
        self
    }

    /// Whether the cluster creates the topics this producer writes to when they do not exist
    /// (its `allow.auto.create.topics`, the brokers' `auto.create.topics.enable`).
    pub async fn auto_create(&self) -> super::missing_topic::AutoCreate {
        super::missing_topic::auto_create_of(&self.settings).await
    }

    /// The topics among `topics` that do not exist, asked twice
    /// ([`super::missing_topic::confirm_missing`]); empty when the cluster does not answer.
    pub async fn missing_among(&self, topics: Vec<String>) -> Vec<String> {
        let settings = self.settings.clone();
        tokio::task::spawn_blocking(move || {
            super::missing_topic::confirm_missing(&settings, &topics)
        })
        .await
        .unwrap_or_default()
    }

    /// When a batch ended with `cause` and that may come from a topic that does not exist
    /// ([`SinkError::may_be_missing_topic`]): the topics the records still waiting (or
    /// failed) go to that the cluster calls unknown, asked twice ([`super::missing_topic`]),
    /// as [`SinkError::TopicMissing`] — definite when nothing creates them. `None` when
    /// every such topic exists, or the cluster does not answer. Takes a second or two when a
    /// topic is missing (the confirmation and reading the brokers' settings).
    pub async fn missing_topics(&self, cause: &SinkError) -> Option<SinkError> {
        if !cause.may_be_missing_topic() {
            return None;
        }
        let mut topics = self.deliveries().waiting_topics();
        if let Some((_, topic)) = cause.record() {
            if !topics.iter().any(|t| t == topic) {
                topics.push(topic.to_string());
            }
        }
        let missing = self.missing_among(topics).await;
        if missing.is_empty() {
            return None;
        }
        let own = missing.iter().all(|t| self.own_topics.contains(t));
        let auto_create = super::missing_topic::auto_create_of(&self.settings).await;
        Some(SinkError::TopicMissing {
            topics: missing,
            records: self.deliveries().unacked().0,
            auto_create,
            own,
        })
    }

    /// The same sink, giving up a send that waits for room in a full producer queue once
    /// `shutdown` turns true (with a transient [`SinkError::QueueFull`]), so that a stop is
    /// never held by a queue Kafka does not drain.
    pub fn with_shutdown(mut self, shutdown: watch::Receiver<bool>) -> Self {
        self.shutdown = Some(shutdown);
        self
    }

    /// `kafka.max_record_bytes`: the largest record [`send`](Self::send) accepts.
    pub fn max_record_bytes(&self) -> usize {
        self.max_record_bytes
    }

    /// The definite error for `record` when it is larger than `kafka.max_record_bytes`
    /// (what [`send`](Self::send) would refuse it with), else `None`.
    pub fn check_size(&self, record: &KafkaRecord) -> Option<SinkError> {
        let size = record.approx_size();
        (size > self.max_record_bytes).then(|| SinkError::RecordTooLarge {
            id: record.event_id(),
            topic: record.topic.clone(),
            size,
            limit: self.max_record_bytes,
            limit_of: crate::sink::RecordLimit::Kafka,
        })
    }

    /// What Kafka acknowledged of the records sent, and the first failed delivery.
    pub fn deliveries(&self) -> &DeliveryTracker {
        self.producer.context()
    }

    /// Enqueues a record; its outcome is counted by [`deliveries`](Self::deliveries), where
    /// it is record number `deliveries().sent()` as of the call.
    ///
    /// Waits (backpressure) while librdkafka's local queue is full, logging a warning
    /// every [`QUEUE_FULL_WARN_AFTER`] it keeps waiting; gives up (transient
    /// [`SinkError::QueueFull`]) once the shutdown signal of
    /// [`with_shutdown`](Self::with_shutdown) is set. Errors (definite) when the record is
    /// larger than `kafka.max_record_bytes`; the error names the event id header but never
    /// the payload.
    pub async fn send(&self, record: &KafkaRecord) -> Result<(), SinkError> {
        if let Some(too_large) = self.check_size(record) {
            return Err(too_large);
        }
        if let Some(creator) = &self.creator {
            creator.ensure(&record.topic).await?;
        }
        let size = record.approx_size();
        let tracker = self.deliveries();
        let counted = tracker::counted_size(size);
        let seq = tracker.sent();
        let opaque = tracker::opaque(seq, counted);
        // Since when the queue has been full, and when that was last logged.
        let mut full_since: Option<Instant> = None;
        // Before the send: its report may come back before send returns.
        if record.partition.is_some() {
            tracker.sent_to_partition(seq);
        }
        let mut warned: Option<Instant> = None;
        loop {
            let mut headers = OwnedHeaders::new_with_capacity(record.headers.len());
            for (k, v) in &record.headers {
                headers = headers.insert(Header {
                    key: k,
                    value: v.as_deref(),
                });
            }
            let mut fr: BaseRecord<'_, [u8], [u8], usize> =
                BaseRecord::with_opaque_to(&record.topic, opaque).headers(headers);
            if let Some(k) = &record.key {
                fr = fr.key(k.as_slice());
            }
            if let Some(v) = &record.value {
                fr = fr.payload(v.as_slice());
            }
            if let Some(ts) = record.timestamp_ms {
                fr = fr.timestamp(ts);
            }
            if let Some(p) = record.partition {
                fr = fr.partition(p);
            }
            match self.producer.send(fr) {
                Ok(()) => {
                    tracker.enqueued(counted);
                    tracker.sent_to(&record.topic, seq);
                    return Ok(());
                }
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), _)) => {
                    let since = *full_since.get_or_insert_with(Instant::now);
                    if self.shutdown.as_ref().is_some_and(|s| *s.borrow()) {
                        return Err(SinkError::QueueFull {
                            topic: record.topic.clone(),
                            waited: since.elapsed(),
                        });
                    }
                    if since.elapsed() >= QUEUE_FULL_WARN_AFTER
                        && warned.is_none_or(|w| w.elapsed() >= QUEUE_FULL_WARN_AFTER)
                    {
                        warned = Some(Instant::now());
                        let (records, bytes) = tracker.unacked();
                        tracing::warn!(
                            connector = %self.connector,
                            topic = %record.topic,
                            unacknowledged_records = records,
                            unacknowledged_bytes = bytes,
                            "the Kafka producer's queue (queue.buffering.max.kbytes={}) has been \
                             full for {:?}: Kafka is not acknowledging records (unreachable or \
                             slow); the relay waits and reads no further meanwhile",
                            self.queue_kbytes,
                            since.elapsed()
                        );
                    }
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                Err((e, _)) => {
                    tracker.took_explicit(seq);
                    return Err(SinkError::on_send(
                        &e,
                        record.event_id(),
                        &record.topic,
                        record.partition,
                    ));
                }
            }
        }
    }

    /// Waits for every enqueued record to be acknowledged (or to fail), up to `timeout`.
    pub fn flush(&self, timeout: Duration) -> Result<(), SinkError> {
        self.producer.flush(timeout).map_err(|e| SinkError::Flush {
            source: Box::new(e),
        })
    }

    /// Fetches cluster metadata, proving the brokers are reachable and accept the client's
    /// credentials, within `timeout`: the number of brokers. A refused login or a TLS
    /// handshake that fails verification ([`KafkaLink::wait_definite`]) ends the wait at
    /// once with [`SinkError::Link`] (definite); no answer is [`SinkError::Unreachable`]
    /// (transient). Used by `check` and at startup.
    pub async fn probe(&self, timeout: Duration) -> Result<usize, SinkError> {
        let producer = self.producer.clone();
        let call = tokio::task::spawn_blocking(move || {
            producer
                .client()
                .fetch_metadata(None, timeout)
                .map(|m| m.brokers().len())
        });
        let link = self.deliveries().link().clone();
        tokio::select! {
            r = call => match r {
                Ok(Ok(n)) => Ok(n),
                Ok(Err(e)) => Err(match link.definite_failure() {
                    Some(f) => SinkError::Link(f),
                    None => SinkError::Unreachable {
                        source: Box::new(e),
                    },
                }),
                Err(e) => Err(SinkError::Abandoned {
                    what: "fetching cluster metadata",
                    source: Arc::new(e),
                }),
            },
            f = link.wait_definite() => Err(SinkError::Link(f)),
        }
    }

    /// At startup, before reading the source: waits up to `within` for the cluster to
    /// answer, and fails (definite) only when it refuses the credentials or the TLS
    /// handshake does not verify. Unreachable brokers are no error here: delivery waits for
    /// them, as it would later.
    pub async fn refuse_definite(&self, within: Duration) -> Result<(), SinkError> {
        match self.probe(within).await {
            Err(e @ SinkError::Link(_)) => Err(e),
            _ => Ok(()),
        }
    }
}

impl KafkaSink {
    /// The producer's fatal error, if it had one (e.g. it was fenced), as a definite failure.
    /// After a fatal error librdkafka purges queued records, which then report as failed
    /// deliveries: this tells the real cause.
    pub fn fatal(&self) -> Option<SinkError> {
        let (code, reason) = self.producer.client().fatal_error()?;
        Some(if super::error::is_fenced(code) {
            SinkError::Fenced {
                what: "producing",
                detail: reason,
            }
        } else {
            SinkError::Fatal { code, reason }
        })
    }

    /// Registers the `transactional.id` with the cluster: fences any older producer with the
    /// same id (its open transaction is aborted) — Kafka's zombie fencing. Waits up to 60 s
    /// for the transaction coordinator (transient error after that); runs on tokio's
    /// blocking pool, so a caller may stop awaiting it (on shutdown) at any time.
    ///
    /// A cluster that gives this producer no transactions (refused permission, no
    /// transactional APIs) is [`SinkError::TransactionsUnavailable`]: definite.
    pub async fn init_transactions(&self) -> Result<(), SinkError> {
        let id = self
            .settings
            .get("transactional.id")
            .unwrap_or_default()
            .to_string();
        // One initialisation per id at a time, in this process: one abandoned by a run that
        // stopped while it waited (a restart) finishes before the next run's starts, so it
        // cannot fence the newer producer afterwards.
        let gate = {
            let mut gates = INIT_GATES.lock().unwrap_or_else(|e| e.into_inner());
            gates.entry(id.clone()).or_default().clone()
        };
        // Bounded: an initialisation abandoned while Kafka was unreachable may wait out its
        // whole timeout; past this wait the next run goes ahead (and, should the abandoned
        // one end later and fence it, restarts as any fenced run does).
        let held = tokio::time::timeout(INIT_GATE_WAIT, gate.lock_owned())
            .await
            .ok();
        self.off_thread("initialising transactions", move |p| {
            let _held = held;
            p.init_transactions(TXN_TIMEOUT)
        })
        .await
        .map_err(|e| e.of_init_transactions(&id))
    }

    /// Runs one of librdkafka's blocking transactional calls on tokio's blocking pool: they
    /// block until the coordinator answers or their timeout, and with the brokers unreachable
    /// that is the whole timeout. Awaiting it off the worker thread lets the delivery loop
    /// watch for shutdown meanwhile; a call abandoned that way finishes (or times out) in
    /// the background, and the process may exit before it does.
    async fn off_thread(
        &self,
        what: &'static str,
        call: impl FnOnce(&TrackedProducer) -> KafkaResult<()> + Send + 'static,
    ) -> Result<(), SinkError> {
        let producer = self.producer.clone();
        let call = tokio::task::spawn_blocking(move || call(&producer));
        // A refused login or a failed TLS verification will not change while the call waits
        // out its timeout: stop waiting then (the call finishes in the background).
        let link = self.deliveries().link().clone();
        tokio::select! {
            r = call => match r {
                Ok(r) => r.map_err(|e| SinkError::transaction(what, &e)),
                Err(e) => Err(SinkError::Abandoned {
                    what,
                    source: Arc::new(e),
                }),
            },
            f = link.wait_definite() => Err(SinkError::Link(f)),
        }
    }

    /// Opens a Kafka transaction.
    pub fn begin(&self) -> Result<(), SinkError> {
        self.producer
            .begin_transaction()
            .map_err(|e| SinkError::transaction("beginning a transaction", &e))
    }

    /// Commits the open transaction: flushes its records and makes them (and the checkpoint
    /// record in it) visible to `read_committed` consumers, atomically. Waits up to 60 s for
    /// the coordinator (librdkafka's `rd_kafka_commit_transaction`; transient error after
    /// that). Runs on tokio's blocking pool: a caller that stops awaiting it (on shutdown)
    /// leaves the commit to finish or fail in the background; either way the checkpoint in
    /// the transaction stays consistent with its records.
    pub async fn commit(&self) -> Result<(), SinkError> {
        self.off_thread("committing a transaction", |p| {
            p.commit_transaction(TXN_TIMEOUT)
        })
        .await?;
        // The coordinator answered: the cluster is reachable.
        self.deliveries().link().answered();
        Ok(())
    }

    /// Sends every queued record now, ignoring `linger.ms`, and waits (at most `timeout`)
    /// until all are acknowledged. librdkafka's `rd_kafka_flush` marks the producer as
    /// flushing for as long as it waits, and while it is marked the broker threads send
    /// without lingering (rust-rdkafka's `flush` marks it only for an instant per 100 ms
    /// poll step). Runs on tokio's blocking pool; `Err` (transient) when records are still
    /// unacknowledged at the timeout.
    pub async fn flush_now(&self, timeout: Duration) -> Result<(), SinkError> {
        let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
        self.off_thread(
            "sending the transaction's records",
            move |p| match raw_flush(p, ms) {
                rdkafka::types::RDKafkaRespErr::RD_KAFKA_RESP_ERR_NO_ERROR => Ok(()),
                e => Err(KafkaError::Flush(e.into())),
            },
        )
        .await
    }

    /// Starts sending what is queued without waiting for `linger.ms` and returns at once
    /// (the send goes on for up to 5 ms in a blocking-pool thread): for when the loop waits
    /// for acknowledgements at its in-flight bound.
    pub fn kick(&self) {
        let producer = self.producer.clone();
        drop(tokio::task::spawn_blocking(move || raw_flush(&producer, 5)));
    }

    /// Aborts the open transaction (best effort: the transaction times out on the broker
    /// anyway, and a restart's `init_transactions` aborts it too).
    pub fn abort(&self) {
        let _ = tokio::task::block_in_place(|| {
            self.producer.abort_transaction(Duration::from_secs(10))
        });
    }
}

/// Timeout of the blocking transactional calls.
const TXN_TIMEOUT: Duration = Duration::from_secs(60);

/// Longest wait of an `init_transactions` for an earlier one of the same id to end.
const INIT_GATE_WAIT: Duration = Duration::from_secs(10);

/// One lock per `transactional.id`, held by an `init_transactions` call until it returns
/// ([`KafkaSink::init_transactions`]).
static INIT_GATES: std::sync::LazyLock<
    std::sync::Mutex<std::collections::HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
> = std::sync::LazyLock::new(Default::default);

/// `linger.ms` of the exactly-once producer (the at-least-once one uses 5).
const TXN_LINGER_MS: u32 = 50;

/// `rd_kafka_flush(rk, timeout_ms)` on `producer`'s handle: sends everything queued at
/// once and blocks until nothing is outstanding or `timeout_ms` passes (`_TIMED_OUT`).
fn raw_flush(producer: &TrackedProducer, timeout_ms: i32) -> rdkafka::types::RDKafkaRespErr {
    // SAFETY: the handle belongs to `producer`, which the caller keeps alive for the
    // duration of the call; librdkafka's API is thread-safe, and flush on a producer handle
    // has no other precondition.
    unsafe { rdkafka::bindings::rd_kafka_flush(producer.client().native_ptr(), timeout_ms) }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn kafka(max_record_bytes: usize, producer: &[(&str, &str)]) -> KafkaConfig {
        KafkaConfig {
            bootstrap_servers: "127.0.0.1:9092".into(),
            producer: producer
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<BTreeMap<_, _>>(),
            client: Default::default(),
            producer_secrets: Default::default(),
            max_record_bytes,
            topic_creation: None,
        }
    }

    #[test]
    fn the_queue_holds_two_of_the_largest_records_and_at_least_16_mib() {
        let (message, queue) = producer_sizes(&kafka(1024 * 1024, &[])).unwrap();
        assert_eq!(message, 1024 * 1024 + FRAMING_ALLOWANCE);
        assert_eq!(queue, MIN_QUEUE_KBYTES);
        let (message, queue) = producer_sizes(&kafka(32 * 1024 * 1024, &[])).unwrap();
        assert!(
            queue * 1024 >= 2 * message as u64,
            "{queue} KiB for {message}"
        );
    }

    #[test]
    fn settings_that_could_never_hold_the_largest_record_are_refused() {
        let e = producer_sizes(&kafka(
            32 * 1024 * 1024,
            &[("queue.buffering.max.kbytes", "16384")],
        ))
        .unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains("queue.buffering.max.kbytes=16384")
                && msg.contains("kafka.max_record_bytes=33554432"),
            "{msg}"
        );
        assert_eq!(e.class(), crate::error::Class::Definite);
        let e = producer_sizes(&kafka(4 * 1024 * 1024, &[("message.max.bytes", "1000000")]))
            .unwrap_err();
        assert!(e.to_string().contains("message.max.bytes=1000000"), "{e}");
        let e = producer_sizes(&kafka(LIBRDKAFKA_MAX_MESSAGE_BYTES, &[])).unwrap_err();
        assert!(e.to_string().contains("at most"), "{e}");
        // Large enough overrides are the user's to make.
        assert!(producer_sizes(&kafka(
            1024 * 1024,
            &[("queue.buffering.max.kbytes", "4096")]
        ))
        .is_ok());
    }

    #[test]
    fn startup_refusals_read_as_one_line_of_prose() {
        let refusals = [
            producer_sizes(&kafka(LIBRDKAFKA_MAX_MESSAGE_BYTES, &[])),
            producer_sizes(&kafka(4 * 1024 * 1024, &[("message.max.bytes", "1000000")])),
            producer_sizes(&kafka(
                32 * 1024 * 1024,
                &[("queue.buffering.max.kbytes", "16384")],
            )),
        ];
        for r in refusals {
            let msg = r.unwrap_err().to_string();
            assert!(
                !msg.contains("  ") && !msg.contains('\n'),
                "a broken line continuation: {msg:?}"
            );
        }
    }
}
