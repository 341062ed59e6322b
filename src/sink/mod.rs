//! Delivery of routed records to Kafka.

pub mod kafka;

pub use kafka::{Delivered, KafkaSink};
