//! Delivery of routed records to Kafka.

pub mod client_log;
pub mod kafka;
pub mod tracker;

pub use kafka::KafkaSink;
pub use tracker::DeliveryTracker;
