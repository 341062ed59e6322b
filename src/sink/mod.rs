//! Delivery of routed records to Kafka, and to NATS JetStream ([`nats`]), Redis Streams
//! ([`redis`]) and RabbitMQ ([`rabbitmq`]).

pub mod client;
pub mod client_log;
mod error;
pub mod kafka;
pub(crate) mod librdkafka_text;
pub mod link;
#[cfg(test)]
pub(crate) mod memory;
pub mod missing_topic;
pub mod nats;
pub mod oauth;
pub mod rabbitmq;
mod record_sink;
pub(crate) mod redis;
mod stall;
pub(crate) mod topic_creator;
pub(crate) mod topics;
pub mod tracker;

pub(crate) use self::redis::RedisSink;
pub use crate::record::KafkaRecord;
pub use error::{RecordLimit, Refusal, SinkError};
pub use kafka::KafkaSink;
pub use link::{KafkaLink, LinkFailure};
pub(crate) use record_sink::{RecordSink, TransactionalSink};
pub use tracker::{DeliveryTracker, Refused};
