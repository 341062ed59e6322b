//! Routing with the connector's error policy and a replay's plan: what each outbox row
//! change becomes for the delivery loops ([`Step`]), shared by both loops. A change that did
//! not decode ([`RowChange::undecodable`]) meets the same policy as a row the router refuses.

use super::dead_letter::{self, Contents, Origin};
use super::poison::{Action, Cause, Plan, Poison};
use crate::active_topics::ActiveTopics;
use crate::config::ErrorPolicy;
use crate::cutover::dedupe::Dedupe;
use crate::event::{RowChange, Undecodable};
use crate::metrics as m;
use crate::pipeline::Error;
use crate::position::SourcePosition;
use crate::router::{EventRouter, Routed};
use crate::sink::KafkaRecord;

/// The event id of an event without one (as [`EventRouter::event_id`] says it).
const NO_ID: &str = "(none)";

/// What a row change becomes.
#[derive(Debug)]
pub enum Step {
    /// Deliver this record.
    Record(KafkaRecord),
    /// Deliver this dead letter in the event's place (`errors.tolerance=all`).
    DeadLetter(KafkaRecord),
    /// Nothing to deliver (a DELETE, an event Debezium delivered before a switch); counted
    /// in `outboxd_events_skipped_total`.
    Skipped,
    /// Nothing to deliver: an UPDATE `table.op.invalid.behavior` lets pass, counted in
    /// `outboxd_events_skipped_total` and logged once per source transaction by the caller
    /// ([`super::ignored::IgnoredOps`]).
    Ignored(crate::router::SkipReason),
    /// Stop at this event (`errors.tolerance=none`), after delivering what is ahead of its
    /// source transaction.
    Stop(Box<Poison>),
}

/// Where a row change is in the source stream.
#[derive(Debug, Clone)]
pub struct At<'a> {
    /// The position before its source transaction.
    pub before: Option<&'a SourcePosition>,
    /// Its place among that transaction's outbox rows, from 1.
    pub row: u64,
    /// Whether records of that transaction before it may be delivered already (a spilled,
    /// split transaction).
    pub partly_delivered: bool,
}

/// Routes row changes with an error policy and a replay plan.
pub struct Stage<'a> {
    connector: &'a str,
    router: &'a EventRouter,
    policy: &'a ErrorPolicy,
    max_record_bytes: usize,
    /// What sets `max_record_bytes` (the sink's [`crate::sink::RecordSink::record_limit`]).
    limit_of: crate::sink::RecordLimit,
    plan: Plan,
    /// The events Debezium delivered before a switch, skipped ([`Dedupe`]).
    dedupe: Option<&'a Dedupe>,
    /// Where the topics of the records it lets through are noted (topic tracking).
    topics: Option<&'a ActiveTopics>,
}

impl<'a> Stage<'a> {
    /// A stage for `connector`'s `router` and `policy`; records larger than
    /// `max_record_bytes` count as refused; `plan` is a replay's (empty otherwise).
    pub fn new(
        connector: &'a str,
        router: &'a EventRouter,
        policy: &'a ErrorPolicy,
        max_record_bytes: usize,
        plan: Plan,
    ) -> Self {
        Self {
            connector,
            router,
            policy,
            max_record_bytes,
            limit_of: crate::sink::RecordLimit::Kafka,
            plan,
            dedupe: None,
            topics: None,
        }
    }

    /// Notes the topic of every record it lets through in `topics` (Kafka Connect's topic
    /// tracking, `GET /connectors/{name}/topics`).
    pub fn with_topics(mut self, topics: Option<&'a ActiveTopics>) -> Self {
        self.topics = topics;
        self
    }

    /// Skips the records of events `dedupe` says Debezium delivered already (a switch from
    /// Debezium in progress): they become [`Step::Skipped`].
    pub fn with_dedupe(mut self, dedupe: Option<&'a Dedupe>) -> Self {
        self.dedupe = dedupe;
        self
    }

    /// The connector's name.
    pub fn connector(&self) -> &str {
        self.connector
    }

    /// The error policy.
    pub fn policy(&self) -> &ErrorPolicy {
        self.policy
    }

    /// The replay plan not yet used (its ordinals as the caller counts them).
    pub fn plan_mut(&mut self) -> &mut Plan {
        &mut self.plan
    }

    /// What `change` becomes. `ordinal` is the number the record would have (records and
    /// dead letters counted from where the plan's ordinals start), `at` where it is.
    ///
    /// Errors (definite) when a replay finds another event than the one planned at
    /// `ordinal`: the source did not replay the same records, and dead-lettering or stopping
    /// at the wrong event is not an option.
    pub fn route(&self, change: &mut RowChange, ordinal: u64, at: &At<'_>) -> Result<Step, Error> {
        let dead_letters = self.policy.dead_letters().is_some();
        if let Some(undecodable) = change.undecodable.take() {
            return Ok(self.undecodable(change, *undecodable, dead_letters, at));
        }
        let record = match self.router.route_taking(change) {
            Ok(Routed::Skipped(reason)) => {
                metrics::counter!(m::EVENTS_SKIPPED, m::LABEL_CONNECTOR => self.connector.to_string(), m::LABEL_REASON => reason.label()).increment(1);
                return Ok(match reason {
                    crate::router::SkipReason::Delete => Step::Skipped,
                    other => Step::Ignored(other),
                });
            }
            Ok(Routed::Record(record)) => {
                if let Some(d) = self.dedupe {
                    let id = record
                        .headers
                        .iter()
                        .find(|(k, _)| k == "id")
                        .and_then(|(_, v)| v.as_deref());
                    if d.consult(id, change.source_ts_ms) {
                        return Ok(Step::Skipped);
                    }
                }
                record
            }
            Err(e) => {
                let id = self.router.event_id(change);
                let cause = Cause::Route(e);
                if !dead_letters {
                    return Ok(Step::Stop(self.poison(change, id, cause, at)));
                }
                let (key, value) = self.router.dead_letter_parts(change);
                let contents = Contents {
                    topic: None,
                    key,
                    value,
                    headers: vec![("id".to_string(), Some(id.clone().into_bytes()))],
                    timestamp_ms: Some(change.source_ts_ms),
                };
                return Ok(Step::DeadLetter(
                    self.dead_letter(change, &id, &cause, contents, at),
                ));
            }
        };
        let planned = self.plan.get(ordinal);
        if let Some(p) = planned {
            let id = record.event_id();
            if p.event_id != id || p.topic != record.topic {
                return Err(Error::ReplayDiverged {
                    ordinal,
                    expected: format!("event {} for topic {}", p.event_id, p.topic),
                    found: format!("event {id} for topic {}", record.topic),
                });
            }
        }
        // Refused before sending (larger than kafka.max_record_bytes), or by Kafka in an
        // earlier run.
        let cause = match (planned, self.check_size(&record)) {
            (Some(p), _) => match &p.action {
                Action::DeadLetter(c) | Action::Stop(c) => Some(c.clone()),
            },
            (None, too_large) => too_large,
        };
        let Some(cause) = cause else {
            if let Some(t) = self.topics {
                t.used(self.connector, &record.topic);
            }
            return Ok(Step::Record(record));
        };
        let id = record.event_id();
        if !dead_letters {
            return Ok(Step::Stop(self.poison(change, id, cause, at)));
        }
        let contents = Contents {
            topic: Some(record.topic),
            key: record.key,
            value: record.value,
            headers: record.headers,
            timestamp_ms: record.timestamp_ms,
        };
        Ok(Step::DeadLetter(
            self.dead_letter(change, &id, &cause, contents, at),
        ))
    }

    /// What a change that did not decode becomes: a stop, or a dead letter with its raw
    /// content as the value (no key, no `id` header: it has neither).
    fn undecodable(
        &self,
        change: &RowChange,
        undecodable: Undecodable,
        dead_letters: bool,
        at: &At<'_>,
    ) -> Step {
        let Undecodable { error, content } = undecodable;
        let cause = Cause::Undecodable(error);
        let id = NO_ID.to_string();
        if !dead_letters {
            return Step::Stop(self.poison(change, id, cause, at));
        }
        let contents = Contents {
            topic: None,
            key: None,
            value: Some(content),
            headers: Vec::new(),
            timestamp_ms: Some(change.source_ts_ms),
        };
        Step::DeadLetter(self.dead_letter(change, &id, &cause, contents, at))
    }

    /// The same stage, its records limited by `limit_of` (default: Kafka's setting).
    pub fn with_limit_of(mut self, limit_of: crate::sink::RecordLimit) -> Self {
        self.limit_of = limit_of;
        self
    }

    fn check_size(&self, record: &KafkaRecord) -> Option<Cause> {
        let size = record.approx_size();
        (size > self.max_record_bytes).then(|| {
            Cause::Refused(crate::sink::SinkError::RecordTooLarge {
                id: record.event_id(),
                topic: record.topic.clone(),
                size,
                limit: self.max_record_bytes,
                limit_of: self.limit_of,
            })
        })
    }

    fn dead_letter(
        &self,
        change: &RowChange,
        id: &str,
        cause: &Cause,
        contents: Contents,
        at: &At<'_>,
    ) -> KafkaRecord {
        tracing::warn!(connector = self.connector, table = %change.table, event_id = %id,
            position = ?at.before.map(|p| p.to_string()), row = at.row,
            "outbox event sent to the dead-letter topic: {cause}");
        let origin = Origin {
            connector: self.connector,
            table: &change.table,
            event_id: id,
            before: at.before,
            row: at.row,
        };
        dead_letter::record(self.policy, &origin, cause, contents, self.max_record_bytes)
    }

    fn poison(&self, change: &RowChange, id: String, cause: Cause, at: &At<'_>) -> Box<Poison> {
        Box::new(Poison {
            connector: self.connector.to_string(),
            table: Some(change.table.clone()),
            id,
            cause,
            before: at.before.cloned(),
            row: at.row,
            after: None,
            after_unknown: None,
            partly_delivered: at.partly_delivered,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ErrorTolerance;
    use crate::event::{MessageDecodeError, Op, Row, TableName, UndecodableMessage};
    use crate::position::Lsn;
    use crate::router::RouterConfig;

    fn undecodable(content: &[u8]) -> RowChange {
        RowChange {
            table: TableName::new(crate::event::MESSAGE_SCHEMA, "bkmsg"),
            op: Op::Insert,
            row: Row::new(std::sync::Arc::from(Vec::new()), Vec::new()),
            source_ts_ms: 7,
            undecodable: Some(Box::new(Undecodable {
                error: UndecodableMessage {
                    prefix: "bkmsg".into(),
                    lsn: Lsn(0x1_0000_00A0),
                    reason: MessageDecodeError::NotJson { line: 1, column: 1 },
                },
                content: content.to_vec(),
            })),
        }
    }

    fn header<'a>(r: &'a KafkaRecord, name: &str) -> Option<&'a str> {
        r.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| std::str::from_utf8(v.as_deref().unwrap_or_default()).unwrap())
    }

    fn at(before: &SourcePosition) -> At<'_> {
        At {
            before: Some(before),
            row: 1,
            partly_delivered: false,
        }
    }

    #[test]
    fn an_undecodable_message_stops_naming_its_lsn_and_prefix_not_its_content() {
        let router = EventRouter::new(&RouterConfig::default()).unwrap();
        let policy = ErrorPolicy::default();
        let stage = Stage::new("shop", &router, &policy, 1 << 20, Plan::default());
        let before = SourcePosition::Lsn(Lsn(0x90));
        let step = stage
            .route(&mut undecodable(b"secret-content"), 0, &at(&before))
            .unwrap();
        let Step::Stop(mut poison) = step else {
            panic!("a stop: {step:?}")
        };
        assert!(matches!(poison.cause, Cause::Undecodable(_)));
        assert_eq!(poison.cause.kind(), "outboxd.message.not_json");
        poison.after = Some(SourcePosition::Lsn(Lsn(0x1_0000_00A1)));
        let text = poison.to_string();
        for part in [
            "outbox message in pg_logical_emit_message.bkmsg",
            "it cannot be decoded",
            "prefix \"bkmsg\" at LSN 1/A0",
            "not valid JSON",
            "--connector shop --position lsn:1/A1`",
            "A restart meets it again",
        ] {
            assert!(text.contains(part), "{part:?} in {text}");
        }
        assert!(!text.contains("secret-content"), "{text}");
        assert!(!text.contains("Fix the cause"), "{text}");
        poison.partly_delivered = true;
        poison.row = 3;
        let split = poison.to_string();
        assert!(
            split.contains("right before this message")
                && split.contains("step past this message alone")
                && split.contains("--position lsn:0/90 --skip 3`"),
            "{split}"
        );
    }

    #[test]
    fn an_undecodable_message_is_dead_lettered_with_its_raw_content() {
        let router = EventRouter::new(&RouterConfig::default()).unwrap();
        let policy = ErrorPolicy {
            tolerance: ErrorTolerance::All,
            dead_letter_topic: Some("shop.dlq".into()),
            context_headers: true,
        };
        let stage = Stage::new("shop", &router, &policy, 1 << 20, Plan::default());
        let before = SourcePosition::Lsn(Lsn(0x90));
        let mut change = undecodable(b"[1,2] secret-content");
        let step = stage.route(&mut change, 0, &at(&before)).unwrap();
        let Step::DeadLetter(dead) = step else {
            panic!("a dead letter: {step:?}")
        };
        assert!(change.undecodable.is_none(), "taken");
        assert_eq!(dead.topic, "shop.dlq");
        assert_eq!(dead.key, None);
        assert_eq!(dead.value.as_deref(), Some(&b"[1,2] secret-content"[..]));
        assert_eq!(dead.timestamp_ms, Some(7));
        assert!(header(&dead, "id").is_none(), "it has no event id");
        assert_eq!(
            header(&dead, dead_letter::H_EXCEPTION),
            Some("outboxd.message.not_json")
        );
        assert_eq!(header(&dead, dead_letter::H_STAGE), Some("TRANSFORMATION"));
        assert_eq!(
            header(&dead, dead_letter::H_TABLE),
            Some("pg_logical_emit_message.bkmsg")
        );
        assert_eq!(header(&dead, dead_letter::H_MESSAGE_LSN), Some("1/A0"));
        assert_eq!(header(&dead, dead_letter::H_POSITION), Some("lsn:0/90"));
        assert!(header(&dead, dead_letter::H_MESSAGE)
            .is_some_and(|m| m.contains("at LSN 1/A0") && !m.contains("secret-content")));
        // Larger than kafka.max_record_bytes: the dead letter goes without the content.
        let small = Stage::new("shop", &router, &policy, 64, Plan::default());
        let Step::DeadLetter(dead) = small
            .route(&mut undecodable(&[b'x'; 200]), 0, &at(&before))
            .unwrap()
        else {
            panic!("a dead letter")
        };
        assert_eq!(dead.value, None);
        assert!(header(&dead, dead_letter::H_VALUE_DROPPED).is_some());
    }
}
