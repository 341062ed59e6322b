//! Dead letters: what an outbox event that cannot be delivered becomes with
//! `errors.tolerance=all` (Kafka Connect's dead-letter queue, `errors.deadletterqueue.*`).
//!
//! A dead letter goes to the connector's dead-letter topic with the event's key and, when
//! it has one, its value (the routed record's value for a record Kafka refused; the payload
//! column as written for a row the router refused; the raw content of a logical decoding
//! message that does not decode, which has no key), so that it can be replayed from there.
//! A record refused as too large (by its topic's `max.message.bytes`, or by
//! `kafka.max_record_bytes` before sending) becomes a dead letter without its value: a copy
//! would be as large, and the dead-letter topic would most likely refuse it too, which
//! stops the connector. So does any dead letter that would be larger than
//! `kafka.max_record_bytes`. Headers `__outboxd.value.dropped` (why) and
//! `__outboxd.record.bytes` (the record's size) say so.
//!
//! Headers: the record's own (`id` first) and, with context headers on
//! (`errors.deadletterqueue.context.headers.enable`), Kafka Connect's error context under its
//! names plus outboxd's source coordinates — never the payload:
//!
//! | header | value |
//! |---|---|
//! | `__connect.errors.topic` | the topic the record was for (when it was routed) |
//! | `__connect.errors.connector.name` | the connector |
//! | `__connect.errors.task.id` | `0` |
//! | `__connect.errors.stage` | `TRANSFORMATION` (router, message decoding) or `KAFKA_PRODUCE` (Kafka refused) |
//! | `__connect.errors.class.name` | `io.debezium.transforms.outbox.EventRouter`, `io.debezium.connector.postgresql.transforms.DecodeLogicalDecodingMessageContent` or `org.apache.kafka.clients.producer.KafkaProducer` |
//! | `__connect.errors.exception.class.name` | outboxd's name of the failure, e.g. `outboxd.route.invalid_topic`, `outboxd.kafka.record_too_large`, `outboxd.message.not_json` |
//! | `__connect.errors.exception.message` | the failure, as the stop would have said it |
//! | `__outboxd.errors.class` | `definite` |
//! | `__outboxd.event.id` | the event id |
//! | `__outboxd.source.table` | the outbox table |
//! | `__outboxd.source.position` | the position before the event's source transaction (`kind:value`) |
//! | `__outboxd.source.row` | the event's place among that transaction's outbox rows, from 1 |
//! | `__outboxd.source.commit` | the position after that transaction, when known when sent |
//! | `__outboxd.message.lsn` | the LSN of a logical decoding message that does not decode |
//!
//! The topic is created when missing with one partition (so dead letters keep source order,
//! as Kafka Connect creates its DLQ topic), the broker's default replication factor and
//! `max.message.bytes` = the producer's `message.max.bytes` (`kafka.max_record_bytes` plus
//! framing), so that it takes every dead letter the connector may send. An existing topic
//! that takes less is refused at startup ([`SinkError::DeadLetterTopicTooSmall`]), naming
//! both settings: otherwise the first large dead letter would stop the connector.

use std::time::Duration;

use rdkafka::admin::{AdminClient, AdminOptions, ResourceSpecifier};
use rdkafka::error::RDKafkaErrorCode;

use super::poison::Cause;
use crate::config::{ErrorPolicy, KafkaConfig};
use crate::error::Class;
use crate::event::TableName;
use crate::position::SourcePosition;
use crate::sink::client::CreateClient;
use crate::sink::client_log::ClientLog;
use crate::sink::topics::{self, CreateTopicError, TopicSpec};
use crate::sink::{client, KafkaRecord, Refusal, SinkError};

/// Kafka Connect's header with the topic the failed record was for.
pub const H_TOPIC: &str = "__connect.errors.topic";
/// Kafka Connect's header with the connector name.
pub const H_CONNECTOR: &str = "__connect.errors.connector.name";
/// Kafka Connect's header with the task id.
pub const H_TASK: &str = "__connect.errors.task.id";
/// Kafka Connect's header with the stage that failed.
pub const H_STAGE: &str = "__connect.errors.stage";
/// Kafka Connect's header with the class that failed.
pub const H_CLASS: &str = "__connect.errors.class.name";
/// Kafka Connect's header with the exception class (here: outboxd's failure name).
pub const H_EXCEPTION: &str = "__connect.errors.exception.class.name";
/// Kafka Connect's header with the exception message.
pub const H_MESSAGE: &str = "__connect.errors.exception.message";
/// Transient or definite (always definite: transient failures are retried).
pub const H_ERROR_CLASS: &str = "__outboxd.errors.class";
/// The event id.
pub const H_EVENT_ID: &str = "__outboxd.event.id";
/// The outbox table.
pub const H_TABLE: &str = "__outboxd.source.table";
/// The position before the event's source transaction.
pub const H_POSITION: &str = "__outboxd.source.position";
/// The event's row in its transaction.
pub const H_ROW: &str = "__outboxd.source.row";
/// The position after the event's source transaction.
pub const H_COMMIT: &str = "__outboxd.source.commit";
/// The LSN of a logical decoding message that did not decode.
pub const H_MESSAGE_LSN: &str = "__outboxd.message.lsn";
/// Why the dead letter has no value.
pub const H_VALUE_DROPPED: &str = "__outboxd.value.dropped";
/// With [`H_VALUE_DROPPED`]: the size of the record (or row) the dead letter stands for, in
/// bytes as `kafka.max_record_bytes` counts them (`KafkaRecord::approx_size`).
pub const H_RECORD_BYTES: &str = "__outboxd.record.bytes";

/// Where an event that cannot be delivered came from.
#[derive(Debug, Clone)]
pub struct Origin<'a> {
    /// The connector.
    pub connector: &'a str,
    /// The outbox table.
    pub table: &'a TableName,
    /// The event id.
    pub event_id: &'a str,
    /// The position before its source transaction.
    pub before: Option<&'a SourcePosition>,
    /// Its row in that transaction, from 1.
    pub row: u64,
}

/// What goes into a dead letter besides its origin and cause.
#[derive(Debug, Clone, Default)]
pub struct Contents {
    /// The topic the record was for, when it was routed.
    pub topic: Option<String>,
    /// The record's key.
    pub key: Option<Vec<u8>>,
    /// The record's value.
    pub value: Option<Vec<u8>>,
    /// The record's own headers (`id` first); for an unroutable row just `id`.
    pub headers: Vec<(String, Option<Vec<u8>>)>,
    /// The record's timestamp.
    pub timestamp_ms: Option<i64>,
}

/// The dead letter for an event from `origin` that failed with `cause`, for `policy`'s
/// topic; without the value when `cause` is a record too large, and at most
/// `max_record_bytes` (`KafkaRecord::approx_size`), dropping the value to fit.
pub fn record(
    policy: &ErrorPolicy,
    origin: &Origin<'_>,
    cause: &Cause,
    contents: Contents,
    max_record_bytes: usize,
) -> KafkaRecord {
    let topic = policy
        .dead_letter_topic
        .clone()
        .unwrap_or_else(|| "(no dead-letter topic)".into());
    let original = crate::record::approx_size(
        contents.topic.as_deref().unwrap_or_default(),
        contents.key.as_deref(),
        contents.value.as_deref(),
        &contents.headers,
    );
    let mut headers = contents.headers;
    let mut dropped: Option<String> = None;
    if policy.context_headers {
        let (stage, class) = match cause {
            // Debezium decodes a message's content in this transformation.
            Cause::Undecodable(_) => (
                "TRANSFORMATION",
                "io.debezium.connector.postgresql.transforms.DecodeLogicalDecodingMessageContent",
            ),
            Cause::Route(_) => (
                "TRANSFORMATION",
                "io.debezium.transforms.outbox.EventRouter",
            ),
            Cause::Refused(_) => (
                "KAFKA_PRODUCE",
                "org.apache.kafka.clients.producer.KafkaProducer",
            ),
        };
        let mut h = |k: &str, v: String| headers.push((k.to_string(), Some(v.into_bytes())));
        if let Some(t) = &contents.topic {
            h(H_TOPIC, t.clone());
        }
        h(H_CONNECTOR, origin.connector.to_string());
        h(H_TASK, "0".into());
        h(H_STAGE, stage.into());
        h(H_CLASS, class.into());
        h(H_EXCEPTION, cause.kind().into());
        h(H_MESSAGE, cause.to_string());
        h(H_ERROR_CLASS, "definite".into());
        h(H_EVENT_ID, origin.event_id.to_string());
        h(H_TABLE, origin.table.to_string());
        if let Some(p) = origin.before {
            h(H_POSITION, p.to_string());
        }
        h(H_ROW, origin.row.to_string());
        if let Cause::Undecodable(e) = cause {
            h(H_MESSAGE_LSN, e.lsn.to_string());
        }
    }
    let mut dead = KafkaRecord {
        topic,
        key: contents.key,
        value: contents.value,
        headers,
        timestamp_ms: contents.timestamp_ms,
        partition: None,
    };
    let too_large = matches!(cause, Cause::Refused(e) if e.refusal() == Some(Refusal::TooLarge));
    if too_large && dead.value.is_some() {
        dead.value = None;
        dropped = Some(
            "the record was too large (outboxd.kafka.record_too_large): a dead letter with its \
             value would be as large"
                .to_string(),
        );
    } else if dead.approx_size() > max_record_bytes && dead.value.is_some() {
        dead.value = None;
        dropped = Some(format!(
            "the dead letter would exceed kafka.max_record_bytes={max_record_bytes}"
        ));
    }
    if let Some(why) = dropped {
        dead.headers
            .push((H_VALUE_DROPPED.to_string(), Some(why.into_bytes())));
        dead.headers.push((
            H_RECORD_BYTES.to_string(),
            Some(original.to_string().into_bytes()),
        ));
    }
    dead
}

/// Adds the position after the event's source transaction to a dead letter (with context
/// headers on), once the transaction's commit is read.
pub fn with_commit(dead: &mut KafkaRecord, policy: &ErrorPolicy, commit: &SourcePosition) {
    if policy.context_headers {
        dead.headers
            .push((H_COMMIT.to_string(), Some(commit.to_string().into_bytes())));
    }
}

/// Longest the topic creation may take.
const ADMIN_TIMEOUT: Duration = Duration::from_secs(30);

/// Creates the dead-letter `topic` unless it exists (one partition, the broker's default
/// replication, `max.message.bytes` = the producer's `message.max.bytes`), then checks that
/// it takes every dead letter the connector may send ([`topic_limit`]).
///
/// Errors: transient when Kafka does not answer; definite when the creation is refused
/// (ACLs, policy): then create the topic by hand; definite
/// ([`SinkError::DeadLetterTopicTooSmall`]) when the topic's `max.message.bytes` is smaller
/// than the producer's `message.max.bytes`.
pub async fn ensure_topic(
    kafka: &KafkaConfig,
    topic: &str,
    link: std::sync::Arc<crate::sink::KafkaLink>,
) -> Result<(), SinkError> {
    let (required, _) = crate::sink::kafka::producer_sizes(kafka)?;
    let admin = admin(kafka, link.clone())?;
    let spec = [TopicSpec::new(topic).with("max.message.bytes", required.to_string())];
    topics::ensure_topics(&admin, &spec, ADMIN_TIMEOUT, &link)
        .await
        .map_err(|e| match e {
            CreateTopicError::Link(f) => SinkError::Link(f),
            e => SinkError::DeadLetterTopic {
                topic: topic.to_string(),
                definite: e.class() == Class::Definite,
                detail: e.to_string(),
            },
        })?;
    match topic_limit(&admin, topic).await? {
        Limit::Bytes(limit) => too_small(kafka, topic, limit).map_or(Ok(()), Err),
        Limit::Missing => Ok(()),
        Limit::Unknown(why) => {
            tracing::warn!(
                topic,
                "cannot read the dead-letter topic's max.message.bytes ({why}): a dead letter \
                 larger than it would stop the connector; make sure it is at least \
                 {required} (kafka.max_record_bytes plus framing)"
            );
            Ok(())
        }
    }
}

/// An admin client with the connector's Kafka settings, reporting to `link`.
pub fn admin(
    kafka: &KafkaConfig,
    link: std::sync::Arc<crate::sink::KafkaLink>,
) -> Result<AdminClient<ClientLog>, SinkError> {
    client::config(kafka)
        .create_client(ClientLog::new(link))
        .map_err(|e| SinkError::Client {
            source: Box::new(e),
        })
}

/// A topic's `max.message.bytes` as the broker reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Limit {
    /// The topic's limit (its own setting, or the broker's default).
    Bytes(usize),
    /// The topic does not exist.
    Missing,
    /// Kafka would not tell (no `DescribeConfigs` permission, say): why.
    Unknown(String),
}

/// `topic`'s `max.message.bytes` (Kafka's DescribeConfigs).
///
/// Errors (transient) only when Kafka does not answer.
pub async fn topic_limit(admin: &AdminClient<ClientLog>, topic: &str) -> Result<Limit, SinkError> {
    let opts = AdminOptions::new().request_timeout(Some(ADMIN_TIMEOUT));
    let described = tokio::time::timeout(
        ADMIN_TIMEOUT,
        admin.describe_configs([&ResourceSpecifier::Topic(topic)], &opts),
    )
    .await
    .map_err(|_| SinkError::DeadLetterTopic {
        topic: topic.to_string(),
        detail: "Kafka did not answer the DescribeConfigs request".into(),
        definite: false,
    })?
    .map_err(|e| SinkError::DeadLetterTopic {
        topic: topic.to_string(),
        detail: e.to_string(),
        definite: false,
    })?;
    Ok(match described.into_iter().next() {
        Some(Ok(resource)) => match resource
            .get("max.message.bytes")
            .and_then(|e| e.value.as_deref())
            .and_then(|v| v.trim().parse().ok())
        {
            Some(limit) => Limit::Bytes(limit),
            None => Limit::Unknown("max.message.bytes missing from the answer".into()),
        },
        Some(Err(RDKafkaErrorCode::UnknownTopicOrPartition)) => Limit::Missing,
        Some(Err(code)) => Limit::Unknown(code.to_string()),
        None => Limit::Unknown("no answer for the topic".into()),
    })
}

/// The refusal of dead-letter `topic` whose `max.message.bytes` is `limit`, when that is
/// smaller than the producer's `message.max.bytes` for `kafka`; `None` when it takes every
/// dead letter.
pub fn too_small(kafka: &KafkaConfig, topic: &str, limit: usize) -> Option<SinkError> {
    let (required, _) = crate::sink::kafka::producer_sizes(kafka).ok()?;
    (limit < required).then(|| SinkError::DeadLetterTopicTooSmall {
        topic: topic.to_string(),
        limit,
        required,
        max_record_bytes: kafka.max_record_bytes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ErrorTolerance;
    use crate::position::Lsn;
    use crate::router::RouteError;

    fn policy(context_headers: bool) -> ErrorPolicy {
        ErrorPolicy {
            tolerance: ErrorTolerance::All,
            dead_letter_topic: Some("dlq".into()),
            context_headers,
        }
    }

    fn header<'a>(r: &'a KafkaRecord, name: &str) -> Option<&'a str> {
        r.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| std::str::from_utf8(v.as_deref().unwrap_or_default()).unwrap())
    }

    #[test]
    fn a_dead_letter_says_why_and_where_from_but_not_the_payload() {
        let table = TableName::new("shop", "outbox_events");
        let before = SourcePosition::Lsn(Lsn(0x42));
        let origin = Origin {
            connector: "shop",
            table: &table,
            event_id: "e3",
            before: Some(&before),
            row: 2,
        };
        let cause = Cause::Route(RouteError::InvalidTopic {
            table: table.clone(),
            column: "aggregate_type".into(),
            topic: "outbox.event.bad topic".into(),
        });
        let contents = Contents {
            key: Some(b"a-1".to_vec()),
            value: Some(b"{\"secret\":1}".to_vec()),
            headers: vec![("id".into(), Some(b"e3".to_vec()))],
            ..Contents::default()
        };
        let mut r = record(&policy(true), &origin, &cause, contents.clone(), 1 << 20);
        with_commit(&mut r, &policy(true), &SourcePosition::Lsn(Lsn(0x50)));
        assert_eq!(r.topic, "dlq");
        assert_eq!(r.key.as_deref(), Some(&b"a-1"[..]));
        assert_eq!(r.value.as_deref(), Some(&b"{\"secret\":1}"[..]));
        assert_eq!(r.headers[0].0, "id");
        assert_eq!(header(&r, H_STAGE), Some("TRANSFORMATION"));
        assert_eq!(header(&r, H_EXCEPTION), Some("outboxd.route.invalid_topic"));
        assert_eq!(header(&r, H_POSITION), Some("lsn:0/42"));
        assert_eq!(header(&r, H_COMMIT), Some("lsn:0/50"));
        assert_eq!(header(&r, H_ROW), Some("2"));
        assert_eq!(header(&r, H_TABLE), Some("shop.outbox_events"));
        assert!(header(&r, H_TOPIC).is_none(), "never routed");
        assert!(r.headers.iter().all(|(_, v)| !String::from_utf8_lossy(
            v.as_deref().unwrap_or_default()
        )
        .contains("secret")));
        // Without context headers: the record's own headers only.
        let bare = record(&policy(false), &origin, &cause, contents.clone(), 1 << 20);
        assert_eq!(bare.headers.len(), 1);
        // Too large for kafka.max_record_bytes: the value is dropped, and that is said.
        let small = record(&policy(true), &origin, &cause, contents, 64);
        assert!(small.value.is_none());
        assert!(header(&small, H_VALUE_DROPPED)
            .unwrap()
            .contains("max_record_bytes"));
        assert_eq!(
            header(&small, H_RECORD_BYTES),
            Some("19"),
            "key, value, id header"
        );
    }

    #[test]
    fn a_record_refused_as_too_large_is_dead_lettered_without_its_value() {
        use rdkafka::error::{KafkaError, RDKafkaErrorCode as C};
        let table = TableName::new("shop", "outbox_events");
        let origin = Origin {
            connector: "shop",
            table: &table,
            event_id: "e9",
            before: None,
            row: 1,
        };
        let contents = Contents {
            topic: Some("shop.Big".into()),
            key: Some(b"a-1".to_vec()),
            value: Some(vec![b'x'; 2_000_000]),
            headers: vec![("id".into(), Some(b"e9".to_vec()))],
            ..Contents::default()
        };
        let size = 8 + 3 + 2_000_000 + 2 + 2;
        for refusal in [
            SinkError::on_delivery(
                &KafkaError::MessageProduction(C::MessageSizeTooLarge),
                "e9".into(),
                "shop.Big",
            ),
            SinkError::RecordTooLarge {
                id: "e9".into(),
                topic: "shop.Big".into(),
                size,
                limit: 1_000_000,
                limit_of: crate::sink::RecordLimit::Kafka,
            },
        ] {
            let cause = Cause::Refused(refusal);
            // Well within kafka.max_record_bytes: dropped all the same.
            let r = record(&policy(true), &origin, &cause, contents.clone(), 16 << 20);
            assert!(r.value.is_none(), "{cause}");
            assert_eq!(r.key.as_deref(), Some(&b"a-1"[..]));
            assert!(header(&r, H_VALUE_DROPPED).unwrap().contains("too large"));
            assert_eq!(header(&r, H_RECORD_BYTES), Some(size.to_string().as_str()));
            assert_eq!(header(&r, H_TOPIC), Some("shop.Big"));
            assert_eq!(
                header(&r, H_EXCEPTION),
                Some("outboxd.kafka.record_too_large")
            );
            assert!(r.approx_size() < 4096, "{}", r.approx_size());
        }
        // Another refusal (no ACL) keeps the value, to replay it from there.
        let acl = Cause::Refused(SinkError::on_delivery(
            &KafkaError::MessageProduction(C::TopicAuthorizationFailed),
            "e9".into(),
            "shop.Big",
        ));
        let r = record(&policy(true), &origin, &acl, contents, 16 << 20);
        assert_eq!(r.value.as_ref().map(Vec::len), Some(2_000_000));
        assert!(header(&r, H_VALUE_DROPPED).is_none());
    }

    #[test]
    fn a_dead_letter_topic_must_take_what_the_producer_may_send() {
        let kafka = |max_record_bytes| KafkaConfig {
            bootstrap_servers: "127.0.0.1:9092".into(),
            producer: Default::default(),
            client: Default::default(),
            producer_secrets: Default::default(),
            max_record_bytes,
            topic_creation: None,
        };
        let (required, _) = crate::sink::kafka::producer_sizes(&kafka(16 << 20)).unwrap();
        assert!(too_small(&kafka(16 << 20), "dlq", required).is_none());
        let e = too_small(&kafka(16 << 20), "dlq", 1_048_588).unwrap();
        assert_eq!(e.class(), crate::error::Class::Definite);
        let msg = e.to_string();
        for part in [
            "dead-letter topic dlq",
            "max.message.bytes=1048588",
            "kafka.max_record_bytes=16777216",
            &format!("at least {required}"),
            "lower kafka.max_record_bytes to at most 983052",
        ] {
            assert!(msg.contains(part), "{part:?} in {msg}");
        }
        assert!(!msg.contains("  "), "{msg:?}");
        // Too small to propose a limit that fits.
        let msg = too_small(&kafka(16 << 20), "dlq", 2048)
            .unwrap()
            .to_string();
        assert!(!msg.contains("lower kafka.max_record_bytes"), "{msg}");
    }
}
