//! The Kafka record a routed outbox event (or a checkpoint) becomes: what the router makes
//! and a sink delivers, below both.

/// A record ready for the Kafka producer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KafkaRecord {
    /// Destination topic.
    pub topic: String,
    /// Record key bytes (the aggregate id as UTF-8); `None` for a NULL key.
    pub key: Option<Vec<u8>>,
    /// Record value bytes; `None` is a tombstone (or a NULL payload).
    pub value: Option<Vec<u8>>,
    /// Headers in order (Debezium's extended headers, `id`, then the header placements);
    /// `None` is a header without value (a NULL column).
    pub headers: Vec<(String, Option<Vec<u8>>)>,
    /// Record timestamp, milliseconds since the Unix epoch (CreateTime).
    pub timestamp_ms: Option<i64>,
    /// Explicit partition; `None` lets the producer's partitioner (`murmur2_random`) decide.
    pub partition: Option<i32>,
}

/// [`KafkaRecord::approx_size`] of a record's parts: topic, key, value and header names and
/// values, in bytes.
pub fn approx_size(
    topic: &str,
    key: Option<&[u8]>,
    value: Option<&[u8]>,
    headers: &[(String, Option<Vec<u8>>)],
) -> usize {
    topic.len()
        + key.map_or(0, <[u8]>::len)
        + value.map_or(0, <[u8]>::len)
        + headers
            .iter()
            .map(|(k, v)| k.len() + v.as_ref().map_or(0, Vec::len))
            .sum::<usize>()
}

impl KafkaRecord {
    /// Approximate size in bytes: topic, key, value and header names and values. Kafka's own
    /// per-record framing (a few dozen bytes) is not counted. Used for batching limits and
    /// `kafka.max_record_bytes`.
    pub fn approx_size(&self) -> usize {
        approx_size(
            &self.topic,
            self.key.as_deref(),
            self.value.as_deref(),
            &self.headers,
        )
    }

    /// The outbox event id (the `id` header) as text, for naming the record in errors;
    /// `(no id)` without one.
    pub fn event_id(&self) -> String {
        self.headers
            .iter()
            .find(|(k, _)| k == "id")
            .map(|(_, v)| String::from_utf8_lossy(v.as_deref().unwrap_or_default()).into_owned())
            .unwrap_or_else(|| "(no id)".to_string())
    }
}
