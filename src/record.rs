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
    ///
    /// A header converter that writes JSON (Debezium Server's default header format, or
    /// `header.converter` = JsonConverter) leaves the id as a JSON string, with or without
    /// the schema envelope (`"abc"`, `{"schema":..,"payload":"abc"}`): the id is the string
    /// inside, so that the sinks' deduplication ids (`Nats-Msg-Id`, `message_id`) are the
    /// event id whatever the header format.
    pub fn event_id(&self) -> String {
        self.headers
            .iter()
            .find(|(k, _)| k == "id")
            .map(|(_, v)| {
                let bytes = v.as_deref().unwrap_or_default();
                json_string(bytes).unwrap_or_else(|| String::from_utf8_lossy(bytes).into_owned())
            })
            .unwrap_or_else(|| "(no id)".to_string())
    }
}

/// The string a JSON header value holds: `"abc"`, or `{"schema":..,"payload":"abc"}`
/// (JsonConverter with schemas); `None` for anything else.
fn json_string(bytes: &[u8]) -> Option<String> {
    if !matches!(bytes.first(), Some(b'"' | b'{')) {
        return None;
    }
    match serde_json::from_slice::<serde_json::Value>(bytes).ok()? {
        serde_json::Value::String(s) => Some(s),
        serde_json::Value::Object(o) if o.contains_key("schema") => match o.get("payload")? {
            serde_json::Value::String(s) => Some(s.clone()),
            _ => None,
        },
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_id(id: &[u8]) -> KafkaRecord {
        KafkaRecord {
            topic: "t".into(),
            key: None,
            value: None,
            headers: vec![("id".into(), Some(id.to_vec()))],
            timestamp_ms: None,
            partition: None,
        }
    }

    #[test]
    fn the_event_id_is_the_text_inside_a_json_header() {
        assert_eq!(with_id(b"abc-1").event_id(), "abc-1");
        assert_eq!(with_id(b"\"abc-1\"").event_id(), "abc-1");
        assert_eq!(
            with_id(br#"{"schema":{"type":"string","optional":false},"payload":"abc-1"}"#)
                .event_id(),
            "abc-1"
        );
        // Not JSON, or JSON that is no string: as written.
        assert_eq!(with_id(b"{abc").event_id(), "{abc");
        assert_eq!(with_id(br#"{"a":1}"#).event_id(), r#"{"a":1}"#);
    }
}
