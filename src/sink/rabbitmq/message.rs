//! How a routed record becomes an AMQP 0-9-1 message (`basic.publish` and its content
//! header), following Debezium Server's RabbitMQ sink where it has a convention:
//!
//! | record | message |
//! |---|---|
//! | value | the body (a tombstone, `None`: an empty body, AMQP has no null body, and the header `outboxd.tombstone` = `true`, as the NATS sink's `Outboxd-Tombstone`) |
//! | headers (Debezium's, `id`, placements) | the `headers` table, each a long string (binary-safe); a header without value (a NULL column) is a field of type void (`V`), as Debezium Server's Java client writes a `null`. An AMQP table has no order (sorted by name here) and one value per name: a repeated name keeps its last value |
//! | `id` header (the outbox event id) | also `message_id`, for consumer-side dedupe |
//! | key (the aggregate id) | `correlation_id` when it is UTF-8 of at most 255 bytes (as Confluent's RabbitMQ sink forwards the key); otherwise the header `outboxd.key` (bytes). Debezium Server's sink does not send the key. |
//! | timestamp (ms) | `timestamp` (AMQP's is in seconds) |
//! | topic | the routing key (unless a fixed `routing_key` is configured) |
//!
//! Every message is persistent (`delivery_mode` 2, Debezium Server's default) and published
//! `mandatory` (an unroutable message comes back instead of being dropped).

use lapin::types::{AMQPValue, FieldTable, LongString, ShortString};
use lapin::BasicProperties;

use crate::record::KafkaRecord;

/// The header carrying a key that does not fit `correlation_id`.
pub const KEY_HEADER: &str = "outboxd.key";
/// The header marking a tombstone (a record without value), whose body is empty.
pub const TOMBSTONE_HEADER: &str = "outboxd.tombstone";

/// AMQP's `delivery_mode` of a persistent message.
const PERSISTENT: u8 = 2;

/// What AMQP cannot carry of a record: a name over its 255-byte short strings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unsendable(pub String);

/// The routing key of `record`: `fixed` when configured, else its topic. Errors: longer
/// than 255 bytes.
pub fn routing_key(record: &KafkaRecord, fixed: Option<&str>) -> Result<ShortString, Unsendable> {
    let key = fixed.unwrap_or(&record.topic);
    ShortString::try_new(key).map_err(|_| {
        Unsendable(format!(
            "the routing key (topic) is {} bytes, over AMQP's 255; shorten the routed topic \
             (route.topic.replacement) or set a fixed routing_key",
            key.len()
        ))
    })
}

/// The exchange named by `record`'s topic (`exchange_from_topic`). Errors: longer than
/// 255 bytes.
pub fn exchange_of(record: &KafkaRecord) -> Result<ShortString, Unsendable> {
    ShortString::try_new(record.topic.as_str()).map_err(|_| {
        Unsendable(format!(
            "the exchange (topic) is {} bytes, over AMQP's 255; shorten the routed topic",
            record.topic.len()
        ))
    })
}

/// The content header of `record`'s message. Errors: a header name over 255 bytes.
pub fn properties(record: &KafkaRecord) -> Result<BasicProperties, Unsendable> {
    let mut headers = FieldTable::default();
    let mut message_id = None;
    for (name, value) in &record.headers {
        let Ok(field) = ShortString::try_new(name.as_str()) else {
            return Err(Unsendable(format!(
                "header name of {} bytes, over AMQP's 255",
                name.len()
            )));
        };
        if name == "id" {
            message_id = value
                .as_deref()
                .and_then(|v| std::str::from_utf8(v).ok())
                .and_then(|v| ShortString::try_new(v).ok());
        }
        let v = match value {
            Some(v) => AMQPValue::LongString(LongString::from(v.clone())),
            None => AMQPValue::Void,
        };
        headers.insert(field, v);
    }
    if record.value.is_none() {
        headers.insert(
            TOMBSTONE_HEADER.into(),
            AMQPValue::LongString(LongString::from("true")),
        );
    }
    let mut props = BasicProperties::default().with_delivery_mode(PERSISTENT);
    if let Some(key) = &record.key {
        match std::str::from_utf8(key)
            .ok()
            .and_then(|k| ShortString::try_new(k).ok())
        {
            Some(k) => props = props.with_correlation_id(k),
            None => {
                headers.insert(
                    KEY_HEADER.into(),
                    AMQPValue::LongString(LongString::from(key.clone())),
                );
            }
        }
    }
    if let Some(id) = message_id {
        props = props.with_message_id(id);
    }
    if let Some(ms) = record.timestamp_ms.filter(|ms| *ms >= 0) {
        props = props.with_timestamp((ms / 1000) as u64);
    }
    Ok(props.with_headers(headers))
}

/// The body of `record`'s message.
pub fn body(record: &KafkaRecord) -> &[u8] {
    record.value.as_deref().unwrap_or(&[])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record() -> KafkaRecord {
        KafkaRecord {
            topic: "outbox.event.Order".into(),
            key: Some(b"order-1".to_vec()),
            value: Some(b"{\"a\":1}".to_vec()),
            headers: vec![
                ("id".into(), Some(b"8f1c".to_vec())),
                ("tenant".into(), None),
                ("bin".into(), Some(vec![0, 255])),
            ],
            timestamp_ms: Some(1_700_000_123_456),
            partition: None,
        }
    }

    #[test]
    fn a_record_maps_to_the_documented_message() {
        let r = record();
        let p = properties(&r).unwrap();
        assert_eq!(p.message_id().as_ref().map(|s| s.as_str()), Some("8f1c"));
        assert_eq!(
            p.correlation_id().as_ref().map(|s| s.as_str()),
            Some("order-1")
        );
        assert_eq!(*p.delivery_mode(), Some(2));
        assert_eq!(*p.timestamp(), Some(1_700_000_123));
        let h = p.headers().as_ref().unwrap();
        assert_eq!(
            h.inner().get("id"),
            Some(&AMQPValue::LongString(b"8f1c".to_vec().into()))
        );
        assert_eq!(h.inner().get("tenant"), Some(&AMQPValue::Void));
        assert_eq!(
            h.inner().get("bin"),
            Some(&AMQPValue::LongString(vec![0, 255].into()))
        );
        assert!(h.inner().get(KEY_HEADER).is_none());
        assert!(h.inner().get(TOMBSTONE_HEADER).is_none());
        assert_eq!(body(&r), b"{\"a\":1}");
        assert_eq!(
            routing_key(&r, None).unwrap().as_str(),
            "outbox.event.Order"
        );
        assert_eq!(routing_key(&r, Some("fixed")).unwrap().as_str(), "fixed");
    }

    #[test]
    fn what_short_strings_cannot_hold_is_refused_or_moved() {
        let mut r = record();
        r.key = Some(vec![b'k'; 300]);
        r.value = None;
        let p = properties(&r).unwrap();
        assert!(p.correlation_id().is_none());
        assert_eq!(
            p.headers().as_ref().unwrap().inner().get(KEY_HEADER),
            Some(&AMQPValue::LongString(vec![b'k'; 300].into()))
        );
        assert_eq!(body(&r), b"");
        assert_eq!(
            p.headers().as_ref().unwrap().inner().get(TOMBSTONE_HEADER),
            Some(&AMQPValue::LongString(b"true".to_vec().into()))
        );
        r.topic = "t".repeat(256);
        assert!(routing_key(&r, None).unwrap_err().0.contains("256 bytes"));
        r.headers.push(("h".repeat(256), None));
        assert!(properties(&r).is_err());
    }
}
