//! The reference ceiling: a plain rdkafka producer, run as a child process of the harness,
//! writing the same records a relay would (topics, keys, values, `id` and `eventType`
//! headers) as fast as the broker takes them, with no database. Its producer settings are
//! outboxd's at-least-once ones (idempotent, acks=all, murmur2_random, linger.ms=5, lz4), so
//! the ratio to it is what the relay costs on top of producing.
//!
//! The same producer, in Kafka transactions, warms the broker up before anything is measured
//! ([`Mode::Transactional`]).

use std::time::Duration;

use anyhow::{Context, Result};
use rdkafka::config::ClientConfig;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};

use crate::workload::Event;

/// How the producer writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Idempotent, no transactions: the ceiling.
    Plain,
    /// In Kafka transactions of [`TXN_RECORDS`] records (`transactional.id` per process):
    /// the broker code paths of exactly-once relays, for the warm-up.
    Transactional,
}

/// Records per transaction in [`Mode::Transactional`] (about what a relay's exactly-once
/// transaction holds in a 1 KiB backlog drain).
const TXN_RECORDS: u64 = 7_500;

/// Produces events `first..first + count` with `payload` bytes each to `<topic_prefix><type>`.
pub fn run(mode: Mode, topic_prefix: &str, first: u64, count: u64, payload: usize) -> Result<()> {
    let mut config = ClientConfig::new();
    if mode == Mode::Transactional {
        config.set(
            "transactional.id",
            format!("outboxd-bench-warmup-{}", std::process::id()),
        );
    }
    let producer: ThreadedProducer<DefaultProducerContext> = config
        .set("bootstrap.servers", crate::env::kafka_bootstrap())
        .set("enable.idempotence", "true")
        .set("acks", "all")
        .set("partitioner", "murmur2_random")
        .set("linger.ms", "5")
        .set("compression.type", "lz4")
        .set("queue.buffering.max.kbytes", "16384")
        .create()
        .context("Kafka producer")?;
    let txn_timeout = Duration::from_secs(60);
    if mode == Mode::Transactional {
        producer.init_transactions(txn_timeout)?;
        producer.begin_transaction()?;
    }
    for seq in first..first + count {
        if mode == Mode::Transactional && seq > first && (seq - first).is_multiple_of(TXN_RECORDS) {
            producer.commit_transaction(txn_timeout)?;
            producer.begin_transaction()?;
        }
        let e = Event::new(seq, payload);
        let topic = format!("{topic_prefix}{}", e.aggregate_type);
        let headers = OwnedHeaders::new()
            .insert(Header {
                key: "id",
                value: Some(e.id.as_bytes()),
            })
            .insert(Header {
                key: "eventType",
                value: Some(e.event_type.as_bytes()),
            });
        let mut record = BaseRecord::to(&topic)
            .key(e.aggregate_id.as_bytes())
            .payload(e.payload.as_bytes())
            .headers(headers);
        loop {
            match producer.send(record) {
                Ok(()) => break,
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), r)) => {
                    record = r;
                    std::thread::sleep(Duration::from_millis(1));
                }
                Err((e, _)) => return Err(e).context("produce"),
            }
        }
    }
    if mode == Mode::Transactional {
        producer.commit_transaction(txn_timeout)?;
    }
    producer
        .flush(Duration::from_secs(120))
        .context("flush the ceiling producer")?;
    Ok(())
}
