//! The reference ceiling: a plain rdkafka producer, run as a child process of the harness,
//! writing the same records a relay would (topics, keys, values, `id` and `eventType`
//! headers) as fast as the broker takes them, with no database. Its producer settings are
//! outboxd's at-least-once ones (idempotent, acks=all, murmur2_random, linger.ms=5, lz4), so
//! the ratio to it is what the relay costs on top of producing.

use std::time::Duration;

use anyhow::{Context, Result};
use rdkafka::config::ClientConfig;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};

use crate::workload::Event;

/// Produces events `first..first + count` with `payload` bytes each to `<topic_prefix><type>`.
pub fn run(topic_prefix: &str, first: u64, count: u64, payload: usize) -> Result<()> {
    let producer: ThreadedProducer<DefaultProducerContext> = ClientConfig::new()
        .set("bootstrap.servers", crate::env::kafka_bootstrap())
        .set("enable.idempotence", "true")
        .set("acks", "all")
        .set("partitioner", "murmur2_random")
        .set("linger.ms", "5")
        .set("compression.type", "lz4")
        .set("queue.buffering.max.kbytes", "16384")
        .create()
        .context("Kafka producer")?;
    for seq in first..first + count {
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
    producer
        .flush(Duration::from_secs(120))
        .context("flush the ceiling producer")?;
    Ok(())
}
