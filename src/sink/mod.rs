//! Delivery of routed records to Kafka.

pub mod client;
pub mod client_log;
mod error;
pub mod kafka;
pub mod link;
pub mod missing_topic;
pub mod oauth;
mod stall;
pub(crate) mod topics;
pub mod tracker;

pub use crate::record::KafkaRecord;
pub use error::{Refusal, SinkError};
pub use kafka::KafkaSink;
pub use link::{KafkaLink, LinkFailure};
pub use tracker::{DeliveryTracker, Refused};
