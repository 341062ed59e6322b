//! Dead letters: what an outbox event that cannot be delivered becomes with
//! `errors.tolerance=all` (Kafka Connect's dead-letter queue, `errors.deadletterqueue.*`).
//!
//! A dead letter goes to the connector's dead-letter topic with the event's key and, when
//! it has one, its value (the routed record's value for a record Kafka refused; the payload
//! column as written for a row the router refused), so that it can be replayed from there.
//! A dead letter that would be larger than `kafka.max_record_bytes` (a record refused for
//! being larger than that) keeps no value; header `__outboxd.value.dropped` says so.
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
//! | `__connect.errors.stage` | `TRANSFORMATION` (router) or `KAFKA_PRODUCE` (Kafka refused) |
//! | `__connect.errors.class.name` | `io.debezium.transforms.outbox.EventRouter` or `org.apache.kafka.clients.producer.KafkaProducer` |
//! | `__connect.errors.exception.class.name` | outboxd's name of the failure, e.g. `outboxd.route.invalid_topic`, `outboxd.kafka.record_too_large` |
//! | `__connect.errors.exception.message` | the failure, as the stop would have said it |
//! | `__outboxd.errors.class` | `definite` |
//! | `__outboxd.event.id` | the event id |
//! | `__outboxd.source.table` | the outbox table |
//! | `__outboxd.source.position` | the position before the event's source transaction (`kind:value`) |
//! | `__outboxd.source.row` | the event's place among that transaction's outbox rows, from 1 |
//! | `__outboxd.source.commit` | the position after that transaction, when known when sent |
//!
//! The topic is created when missing with one partition (so dead letters keep source order,
//! as Kafka Connect creates its DLQ topic) and the broker's default replication factor.

use std::time::Duration;

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::error::RDKafkaErrorCode;

use super::poison::Cause;
use crate::config::{ErrorPolicy, KafkaConfig};
use crate::event::TableName;
use crate::position::SourcePosition;
use crate::sink::client_log::ClientLog;
use crate::sink::{client, KafkaRecord, SinkError};

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
/// Why the dead letter has no value.
pub const H_VALUE_DROPPED: &str = "__outboxd.value.dropped";

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
    pub headers: Vec<(String, Vec<u8>)>,
    /// The record's timestamp.
    pub timestamp_ms: Option<i64>,
}

/// The dead letter for an event from `origin` that failed with `cause`, for `policy`'s
/// topic; at most `max_record_bytes` (`KafkaRecord::approx_size`), dropping the value to fit.
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
    let mut headers = contents.headers;
    let mut dropped: Option<String> = None;
    if policy.context_headers {
        let (stage, class) = match cause {
            Cause::Route(_) => (
                "TRANSFORMATION",
                "io.debezium.transforms.outbox.EventRouter",
            ),
            Cause::Refused(_) => (
                "KAFKA_PRODUCE",
                "org.apache.kafka.clients.producer.KafkaProducer",
            ),
        };
        let mut h = |k: &str, v: String| headers.push((k.to_string(), v.into_bytes()));
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
    }
    let mut dead = KafkaRecord {
        topic,
        key: contents.key,
        value: contents.value,
        headers,
        timestamp_ms: contents.timestamp_ms,
        partition: None,
    };
    if dead.approx_size() > max_record_bytes && dead.value.is_some() {
        dead.value = None;
        dropped = Some(format!(
            "the dead letter would exceed kafka.max_record_bytes={max_record_bytes}"
        ));
    }
    if let Some(why) = dropped {
        dead.headers
            .push((H_VALUE_DROPPED.to_string(), why.into_bytes()));
    }
    dead
}

/// Adds the position after the event's source transaction to a dead letter (with context
/// headers on), once the transaction's commit is read.
pub fn with_commit(dead: &mut KafkaRecord, policy: &ErrorPolicy, commit: &SourcePosition) {
    if policy.context_headers {
        dead.headers
            .push((H_COMMIT.to_string(), commit.to_string().into_bytes()));
    }
}

/// Longest the topic creation may take.
const ADMIN_TIMEOUT: Duration = Duration::from_secs(30);

/// Creates the dead-letter `topic` (one partition, the broker's default replication) unless
/// it exists.
///
/// Errors: transient when Kafka does not answer; definite when the creation is refused
/// (ACLs, policy): then create the topic by hand.
pub async fn ensure_topic(
    kafka: &KafkaConfig,
    topic: &str,
    link: std::sync::Arc<crate::sink::KafkaLink>,
) -> Result<(), SinkError> {
    let admin: AdminClient<ClientLog> = client::config(kafka)
        .create_with_context(ClientLog::new(link))
        .map_err(|e| SinkError::Client {
            source: Box::new(e),
        })?;
    let new = NewTopic::new(topic, 1, TopicReplication::Fixed(-1));
    let opts = AdminOptions::new().operation_timeout(Some(ADMIN_TIMEOUT));
    let results = tokio::time::timeout(ADMIN_TIMEOUT, admin.create_topics([&new], &opts))
        .await
        .map_err(|_| SinkError::DeadLetterTopic {
            topic: topic.to_string(),
            detail: "Kafka did not answer the CreateTopics request".into(),
            definite: false,
        })?
        .map_err(|e| SinkError::DeadLetterTopic {
            topic: topic.to_string(),
            detail: e.to_string(),
            definite: false,
        })?;
    for r in results {
        match r {
            Ok(_) | Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
            Err((t, code)) => {
                let definite = matches!(
                    code,
                    RDKafkaErrorCode::TopicAuthorizationFailed
                        | RDKafkaErrorCode::ClusterAuthorizationFailed
                        | RDKafkaErrorCode::PolicyViolation
                        | RDKafkaErrorCode::InvalidConfig
                        | RDKafkaErrorCode::InvalidTopic
                );
                return Err(SinkError::DeadLetterTopic {
                    topic: t,
                    detail: code.to_string(),
                    definite,
                });
            }
        }
    }
    Ok(())
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
            .map(|(_, v)| std::str::from_utf8(v).unwrap())
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
            headers: vec![("id".into(), b"e3".to_vec())],
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
        assert!(r
            .headers
            .iter()
            .all(|(_, v)| !String::from_utf8_lossy(v).contains("secret")));
        // Without context headers: the record's own headers only.
        let bare = record(&policy(false), &origin, &cause, contents.clone(), 1 << 20);
        assert_eq!(bare.headers.len(), 1);
        // Too large for kafka.max_record_bytes: the value is dropped, and that is said.
        let small = record(&policy(true), &origin, &cause, contents, 64);
        assert!(small.value.is_none());
        assert!(header(&small, H_VALUE_DROPPED)
            .unwrap()
            .contains("max_record_bytes"));
    }
}
