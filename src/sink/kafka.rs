//! The Kafka producer (rdkafka over the bundled librdkafka).
//!
//! Settings follow what Debezium's Kafka Connect worker gives an outbox connector, tightened
//! for ordering and durability: `enable.idempotence=true` (so retries never reorder or
//! duplicate within a partition), `acks=all`, and `partitioner=murmur2_random`, the hash the
//! Java client uses, so an aggregate lands on the same partition as it did under Debezium.

use std::sync::Arc;
use std::time::Duration;

use rdkafka::config::FromClientConfigAndContext;
use rdkafka::error::{KafkaError, KafkaResult, RDKafkaErrorCode};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{BaseRecord, Producer, ThreadedProducer};

use super::error::SinkError;
use super::link::KafkaLink;
use super::record::KafkaRecord;
use super::tracker::{self, DeliveryTracker};
use crate::config::KafkaConfig;

/// The producer: librdkafka's, with a polling thread that feeds delivery reports to the
/// [`DeliveryTracker`].
type TrackedProducer = ThreadedProducer<DeliveryTracker>;

/// An idempotent Kafka producer for one connector. Delivery outcomes are counted by its
/// [`DeliveryTracker`] ([`deliveries`](Self::deliveries)); one task sends on it.
pub struct KafkaSink {
    producer: Arc<TrackedProducer>,
    max_record_bytes: usize,
}

/// librdkafka properties outboxd sets; a user's `kafka.producer` map may override the
/// non-essential ones but not these, which the delivery guarantees rest on.
const FIXED_PROPERTIES: &[(&str, &str)] = &[
    ("enable.idempotence", "true"),
    ("acks", "all"),
    ("partitioner", "murmur2_random"),
];

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
        let mut cc = super::client::config(cfg);
        cc.set("client.id", format!("outboxd-{client_id}"))
            .set(
                "statistics.interval.ms",
                super::link::STATISTICS_INTERVAL_MS.to_string(),
            )
            .set("linger.ms", "5")
            .set("compression.type", "lz4")
            .set("message.timeout.ms", "300000")
            .set("queue.buffering.max.kbytes", "16384")
            .set(
                "message.max.bytes",
                (cfg.max_record_bytes + 64 * 1024).to_string(),
            );
        for (k, v) in &cfg.producer {
            if let Some((_, fixed)) = FIXED_PROPERTIES.iter().find(|(name, _)| name == k) {
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
        for (k, v) in FIXED_PROPERTIES {
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
            TrackedProducer::from_config_and_context(&cc, DeliveryTracker::new(link.clone()))
                .map_err(|e| SinkError::Client {
                    source: Box::new(e),
                })?;
        let producer = Arc::new(producer);
        // The link's WARN says how much waits for the brokers.
        let weak = Arc::downgrade(&producer);
        link.set_backlog(Box::new(move || {
            weak.upgrade().map(|p| p.context().unacked())
        }));
        Ok(Self {
            producer,
            max_record_bytes: cfg.max_record_bytes,
        })
    }

    /// What Kafka acknowledged of the records sent, and the first failed delivery.
    pub fn deliveries(&self) -> &DeliveryTracker {
        self.producer.context()
    }

    /// Enqueues a record; its outcome is counted by [`deliveries`](Self::deliveries), where
    /// it is record number `deliveries().sent()` as of the call.
    ///
    /// Waits (backpressure) while librdkafka's local queue is full. Errors (definite) when
    /// the record is larger than `kafka.max_record_bytes`; the error names the event id
    /// header but never the payload.
    pub async fn send(&self, record: &KafkaRecord) -> Result<(), SinkError> {
        let size = record.approx_size();
        if size > self.max_record_bytes {
            return Err(SinkError::RecordTooLarge {
                id: record.event_id(),
                topic: record.topic.clone(),
                size,
                limit: self.max_record_bytes,
            });
        }
        let tracker = self.deliveries();
        let counted = tracker::counted_size(size);
        let opaque = tracker::opaque(tracker.sent(), counted);
        loop {
            let mut headers = OwnedHeaders::new_with_capacity(record.headers.len());
            for (k, v) in &record.headers {
                headers = headers.insert(Header {
                    key: k,
                    value: Some(v.as_slice()),
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
                    return Ok(());
                }
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), _)) => {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                Err((e, _)) => {
                    return Err(SinkError::on_send(
                        &e,
                        record.event_id(),
                        &record.topic,
                        record.partition,
                    ))
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

    /// Fetches cluster metadata, proving the brokers are reachable. Used by `check` and at
    /// startup.
    pub fn probe(&self, timeout: Duration) -> Result<usize, SinkError> {
        self.producer
            .client()
            .fetch_metadata(None, timeout)
            .map(|m| m.brokers().len())
            .map_err(|e| match self.deliveries().link().definite_failure() {
                Some(f) => SinkError::Link(f),
                None => SinkError::Unreachable {
                    source: Box::new(e),
                },
            })
    }
}

impl KafkaSink {
    /// The producer's fatal error, if it had one (e.g. it was fenced), as a definite failure.
    /// After a fatal error librdkafka purges queued records, which then report as failed
    /// deliveries: this tells the real cause.
    pub fn fatal(&self) -> Option<SinkError> {
        let (code, reason) = self.producer.client().fatal_error()?;
        Some(
            if matches!(
                code,
                RDKafkaErrorCode::Fenced
                    | RDKafkaErrorCode::ProducerFenced
                    | RDKafkaErrorCode::InvalidProducerEpoch
            ) {
                SinkError::Fenced {
                    what: "producing",
                    detail: reason,
                }
            } else {
                SinkError::Fatal { code, reason }
            },
        )
    }

    /// Registers the `transactional.id` with the cluster: fences any older producer with the
    /// same id (its open transaction is aborted) — Kafka's zombie fencing. Waits up to 60 s
    /// for the transaction coordinator (transient error after that); runs on tokio's
    /// blocking pool, so a caller may stop awaiting it (on shutdown) at any time.
    pub async fn init_transactions(&self) -> Result<(), SinkError> {
        self.off_thread("initialising transactions", |p| {
            p.init_transactions(TXN_TIMEOUT)
        })
        .await
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
                    detail: e.to_string(),
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
        .await
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
