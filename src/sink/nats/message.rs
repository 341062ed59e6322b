//! A routed record as a JetStream message: subject, headers, payload.
//!
//! | record | message |
//! |---|---|
//! | topic | subject (must be a valid NATS subject: no spaces, no `*`/`>` tokens) |
//! | headers (Debezium's, `id`, placements) | headers of the same names and values (UTF-8 text); a header whose value is NULL is left out, as Debezium Server's NATS JetStream sink does |
//! | `id` header (the event id) | also `Nats-Msg-Id`: JetStream drops a second message with it within the stream's duplicate window |
//! | key (the aggregate id) | header `Outboxd-Key` (its text; `Outboxd-Key-Base64` when it is not UTF-8 text without CR/LF); none for a NULL key |
//! | value | payload bytes |
//! | NULL value (a tombstone) | empty payload and header `Outboxd-Tombstone: true` (Debezium Server's sink skips tombstones) |
//!
//! A header NATS cannot carry (a name with `:` or spaces, a value that is not UTF-8 text or
//! holds CR/LF) refuses the record for good (it can be dead-lettered), naming the header.

use async_nats::header::{HeaderMap, HeaderName, HeaderValue};
use base64::Engine as _;
use bytes::Bytes;

use crate::sink::{KafkaRecord, Refusal, SinkError};

use super::connect::BROKER;

/// The header holding the record key (its UTF-8 text).
pub const KEY_HEADER: &str = "Outboxd-Key";
/// The header holding the record key, base64 (standard alphabet, padded), when the key is
/// not UTF-8 text without CR/LF.
pub const KEY_BASE64_HEADER: &str = "Outboxd-Key-Base64";
/// The header marking a tombstone (a NULL value): `true`.
pub const TOMBSTONE_HEADER: &str = "Outboxd-Tombstone";
/// JetStream's de-duplication header.
pub const MSG_ID_HEADER: &str = "Nats-Msg-Id";

/// Whether `subject` is a subject a message can be published to: dot-separated non-empty
/// tokens, no whitespace, no wildcard token.
pub fn valid_subject(subject: &str) -> bool {
    !subject.is_empty()
        && !subject.chars().any(char::is_whitespace)
        && subject
            .split('.')
            .all(|t| !t.is_empty() && t != "*" && t != ">")
}

/// The headers and payload of `record`'s message. Errors: a refusal ([`Refusal::Other`])
/// when the subject or a header cannot be carried by NATS.
pub fn message(record: &KafkaRecord) -> Result<(HeaderMap, Bytes), SinkError> {
    let refuse = |detail: String| {
        SinkError::broker_record(
            BROKER,
            &record.event_id(),
            &record.topic,
            Some(Refusal::Other),
            detail,
        )
    };
    if !valid_subject(&record.topic) {
        return Err(refuse(format!(
            "topic {:?} is not a valid NATS subject (dot-separated tokens without spaces or \
             wildcards); change the routing (route.topic.replacement)",
            record.topic
        )));
    }
    let mut headers = HeaderMap::new();
    for (name, value) in &record.headers {
        let Some(value) = value else { continue };
        let n: HeaderName = name.parse().map_err(|_| {
            refuse(format!(
                "header name {name:?} cannot be a NATS header name (no ':', spaces or control \
                 characters)"
            ))
        })?;
        let v = std::str::from_utf8(value)
            .ok()
            .and_then(|s| s.parse::<HeaderValue>().ok())
            .ok_or_else(|| {
                refuse(format!(
                    "the value of header {name:?} is not UTF-8 text without CR/LF, which a NATS \
                     header needs"
                ))
            })?;
        if name == "id" {
            headers.insert(MSG_ID_HEADER, v.clone());
        }
        headers.append(n, v);
    }
    if let Some(key) = &record.key {
        match std::str::from_utf8(key)
            .ok()
            .and_then(|s| s.parse::<HeaderValue>().ok())
        {
            Some(v) => headers.insert(KEY_HEADER, v),
            None => headers.insert(
                KEY_BASE64_HEADER,
                base64::engine::general_purpose::STANDARD
                    .encode(key)
                    .as_str(),
            ),
        }
    }
    let payload = match &record.value {
        Some(v) => Bytes::copy_from_slice(v),
        None => {
            headers.insert(TOMBSTONE_HEADER, "true");
            Bytes::new()
        }
    };
    Ok((headers, payload))
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
                ("id".into(), Some(b"5f0c".to_vec())),
                ("eventType".into(), Some(b"Created".to_vec())),
                ("nothing".into(), None),
            ],
            timestamp_ms: None,
            partition: None,
        }
    }

    #[test]
    fn headers_key_and_msg_id() {
        let (h, p) = message(&record()).unwrap();
        assert_eq!(&p[..], b"{\"a\":1}");
        assert_eq!(h.get("id").unwrap().as_str(), "5f0c");
        assert_eq!(h.get(MSG_ID_HEADER).unwrap().as_str(), "5f0c");
        assert_eq!(h.get("eventType").unwrap().as_str(), "Created");
        assert_eq!(h.get(KEY_HEADER).unwrap().as_str(), "order-1");
        assert!(h.get("nothing").is_none());
        assert!(h.get(TOMBSTONE_HEADER).is_none());
    }

    #[test]
    fn a_tombstone_is_an_empty_payload_marked() {
        let mut r = record();
        r.value = None;
        let (h, p) = message(&r).unwrap();
        assert!(p.is_empty());
        assert_eq!(h.get(TOMBSTONE_HEADER).unwrap().as_str(), "true");
    }

    #[test]
    fn a_binary_key_goes_base64() {
        let mut r = record();
        r.key = Some(vec![0xff, b'\n']);
        let (h, _) = message(&r).unwrap();
        assert!(h.get(KEY_HEADER).is_none());
        assert_eq!(h.get(KEY_BASE64_HEADER).unwrap().as_str(), "/wo=");
    }

    #[test]
    fn what_nats_cannot_carry_is_refused() {
        let mut r = record();
        r.headers.push(("bad".into(), Some(b"a\r\nb".to_vec())));
        let e = message(&r).unwrap_err();
        assert_eq!(e.refusal(), Some(Refusal::Other));
        let mut r = record();
        r.topic = "outbox event".into();
        assert!(message(&r).is_err());
        assert!(!valid_subject("a.*.b") && !valid_subject("a..b") && valid_subject("a.b"));
    }
}
