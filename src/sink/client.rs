//! The one set of client settings every Kafka client of the process starts from.
//!
//! The record producer, the checkpoint store's admin client, consumers and producer, `check`
//! and `status` all build their librdkafka configuration with [`config`], so a setting that
//! concerns the connection to the cluster (the bootstrap servers; security settings) is
//! made in one place and applies to all of them alike.

use rdkafka::ClientConfig;

use crate::config::KafkaConfig;

/// A librdkafka configuration holding the connection settings of `kafka`, for any client
/// (producer, consumer, admin); callers add what their client needs.
pub fn config(kafka: &KafkaConfig) -> ClientConfig {
    let mut cc = ClientConfig::new();
    cc.set("bootstrap.servers", &kafka.bootstrap_servers);
    cc
}
