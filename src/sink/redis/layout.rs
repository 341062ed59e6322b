//! How a routed record becomes the fields of a stream entry, following Debezium Server's
//! Redis sink (`debezium.sink.redis.message.format`, `null.key`, `null.value`):
//!
//! - `compact` (the default): one field, named by the record key, whose value is the record
//!   value: `XADD <topic> * <key> <value>`. Headers (the event id among them) are not
//!   written.
//! - `extended`: `key`, `value`, then one field per header, its name upper-cased as Debezium
//!   Server writes it (`ID`, then the placements' names): `XADD <topic> * key <key> value
//!   <value> ID <id> ...`.
//!
//! A record without a key is written with the `null_key` text, one without a value (a
//! tombstone) with the `null_value` text (both `default` unless configured, as in Debezium
//! Server). A header without a value is written as an empty field value. Bytes are written
//! as they are (JSON text for the EventRouter's string/JSON values).

use crate::config::sinks::redis::{MessageFormat, RedisSinkConfig};
use crate::record::KafkaRecord;

/// The field name of the key in the extended format.
const KEY_FIELD: &[u8] = b"key";
/// The field name of the value in the extended format.
const VALUE_FIELD: &[u8] = b"value";

/// The layout settings of a sink.
#[derive(Debug, Clone)]
pub(crate) struct Layout {
    format: MessageFormat,
    null_key: Vec<u8>,
    null_value: Vec<u8>,
}

impl Layout {
    /// The layout `cfg` configures.
    pub(crate) fn of(cfg: &RedisSinkConfig) -> Self {
        Self {
            format: cfg.message_format,
            null_key: cfg.null_key.as_bytes().to_vec(),
            null_value: cfg.null_value.as_bytes().to_vec(),
        }
    }

    /// The field/value pairs of `record`'s entry, flattened (name, value, name, value, ...);
    /// at least one pair.
    pub(crate) fn fields(&self, record: &KafkaRecord) -> Vec<Vec<u8>> {
        let key = record.key.clone().unwrap_or_else(|| self.null_key.clone());
        let value = record
            .value
            .clone()
            .unwrap_or_else(|| self.null_value.clone());
        match self.format {
            MessageFormat::Compact => vec![key, value],
            MessageFormat::Extended => {
                let mut out = Vec::with_capacity(4 + 2 * record.headers.len());
                out.extend([KEY_FIELD.to_vec(), key, VALUE_FIELD.to_vec(), value]);
                for (name, v) in &record.headers {
                    out.push(name.to_ascii_uppercase().into_bytes());
                    out.push(v.clone().unwrap_or_default());
                }
                out
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout(format: MessageFormat) -> Layout {
        Layout {
            format,
            null_key: b"default".to_vec(),
            null_value: b"default".to_vec(),
        }
    }

    fn record(key: Option<&str>, value: Option<&str>) -> KafkaRecord {
        KafkaRecord {
            topic: "outbox.event.order".into(),
            key: key.map(|k| k.as_bytes().to_vec()),
            value: value.map(|v| v.as_bytes().to_vec()),
            headers: vec![
                ("id".into(), Some(b"e-1".to_vec())),
                ("eventType".into(), Some(b"Created".to_vec())),
                ("empty".into(), None),
            ],
            timestamp_ms: None,
            partition: None,
        }
    }

    fn text(fields: Vec<Vec<u8>>) -> Vec<String> {
        fields
            .into_iter()
            .map(|f| String::from_utf8(f).unwrap())
            .collect()
    }

    #[test]
    fn compact_is_key_to_value() {
        let f = layout(MessageFormat::Compact).fields(&record(Some("42"), Some("{\"a\":1}")));
        assert_eq!(text(f), ["42", "{\"a\":1}"]);
    }

    #[test]
    fn extended_has_key_value_and_upper_cased_headers() {
        let f = layout(MessageFormat::Extended).fields(&record(Some("42"), Some("v")));
        assert_eq!(
            text(f),
            [
                "key",
                "42",
                "value",
                "v",
                "ID",
                "e-1",
                "EVENTTYPE",
                "Created",
                "EMPTY",
                ""
            ]
        );
    }

    #[test]
    fn null_key_and_tombstone_take_the_configured_texts() {
        let f = layout(MessageFormat::Compact).fields(&record(None, None));
        assert_eq!(text(f), ["default", "default"]);
        let f = layout(MessageFormat::Extended).fields(&record(None, None));
        assert_eq!(&text(f)[..4], ["key", "default", "value", "default"]);
    }
}
