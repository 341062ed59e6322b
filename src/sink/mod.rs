//! Delivery of routed records to Kafka.

pub mod client;
pub mod client_log;
mod error;
pub mod kafka;
pub mod link;
pub mod missing_topic;
pub mod oauth;
pub mod record;
mod stall;
pub(crate) mod topics;
pub mod tracker;

pub use error::{Refusal, SinkError};
pub use kafka::KafkaSink;
pub use link::{KafkaLink, LinkFailure};
pub use record::KafkaRecord;
pub use tracker::{DeliveryTracker, Refused};
