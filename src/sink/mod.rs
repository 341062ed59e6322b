//! Delivery of routed records to Kafka.

pub mod kafka;
pub mod tracker;

pub use kafka::KafkaSink;
pub use tracker::DeliveryTracker;
