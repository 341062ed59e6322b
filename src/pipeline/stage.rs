//! Routing with the connector's error policy and a replay's plan: what each outbox row
//! change becomes for the delivery loops ([`Step`]), shared by both loops.

use super::dead_letter::{self, Contents, Origin};
use super::poison::{Action, Cause, Plan, Poison};
use crate::config::ErrorPolicy;
use crate::error::Error;
use crate::event::RowChange;
use crate::metrics as m;
use crate::position::SourcePosition;
use crate::router::{EventRouter, Routed};
use crate::sink::KafkaRecord;

/// What a row change becomes.
#[derive(Debug)]
pub enum Step {
    /// Deliver this record.
    Record(KafkaRecord),
    /// Deliver this dead letter in the event's place (`errors.tolerance=all`).
    DeadLetter(KafkaRecord),
    /// Nothing to deliver (a DELETE, a tolerated UPDATE); counted in
    /// `outboxd_events_skipped_total`.
    Skipped,
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
    plan: Plan,
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
            plan,
        }
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
        let record = match self.router.route_taking(change) {
            Ok(Routed::Skipped(reason)) => {
                metrics::counter!(m::EVENTS_SKIPPED, m::LABEL_CONNECTOR => self.connector.to_string(), m::LABEL_REASON => reason.label()).increment(1);
                return Ok(Step::Skipped);
            }
            Ok(Routed::Record(record)) => record,
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
                    headers: vec![("id".to_string(), id.clone().into_bytes())],
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

    fn check_size(&self, record: &KafkaRecord) -> Option<Cause> {
        let size = record.approx_size();
        (size > self.max_record_bytes).then(|| {
            Cause::Refused(crate::sink::SinkError::RecordTooLarge {
                id: record.event_id(),
                topic: record.topic.clone(),
                size,
                limit: self.max_record_bytes,
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
