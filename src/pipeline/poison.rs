//! Outbox events that cannot be delivered ("poison events"), what the delivery loops do
//! about them, and how a loop is replayed to deal with one it learned about too late.
//!
//! An event cannot be delivered when its source change does not decode
//! ([`UndecodableMessage`]: a PostgreSQL logical decoding message that is not a JSON object),
//! the router refuses it ([`RouteError`]) or Kafka refuses its record for good
//! ([`SinkError::refusal`]: too large, unknown partition, ACLs, invalid topic). What happens then is the connector's [`ErrorPolicy`](crate::config::ErrorPolicy):
//!
//! * `errors.tolerance=none` (the default): the loop first delivers and checkpoints
//!   everything ahead of the event's source transaction (nothing of that transaction is
//!   sent: [`super::txn_buffer`]), reads on to that transaction's end to learn the position
//!   after it, and stops with a [`Poison`] error naming the event, the positions and the exact
//!   `outboxd checkpoint set` that steps past the transaction.
//! * `errors.tolerance=all`: the event's dead letter ([`super::dead_letter`]) takes its place,
//!   in stream order, and the stream goes on. In exactly-once mode the dead letter is in the
//!   same Kafka transaction as the checkpoint that covers it.
//!
//! A router refusal is known before anything is sent. A Kafka refusal is only known from the
//! record's delivery report, when the record was sent (and, exactly-once, its Kafka
//! transaction is doomed). Then the loop ends with [`Ending::Replay`]: the connector restarts
//! the source at the last stored checkpoint and runs the loop again with a [`Plan`] that
//! says, per record *ordinal* (the record's number counted from that checkpoint, the same in
//! every run because the source replays the same transactions in the same order and routing
//! is deterministic), to dead-letter that record or to stop at it. The plan also remembers
//! the record's event id and topic: a replay that finds another record at that ordinal stops
//! with a definite error instead of dead-lettering the wrong event.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use super::inbox::Inbox;
use crate::checkpoint::Checkpoint;
use crate::event::{SourceEvent, TableName, UndecodableMessage};
use crate::pipeline::Error;
use crate::position::SourcePosition;
use crate::router::RouteError;
use crate::sink::{Refused, SinkError};
use crate::source::SourceError;

/// Why an outbox event cannot be delivered.
#[derive(Debug, Clone)]
pub enum Cause {
    /// The source change does not decode into a row (a logical decoding message whose
    /// content is not a JSON object).
    Undecodable(UndecodableMessage),
    /// The router cannot turn the row into a record.
    Route(RouteError),
    /// Kafka refused the record for good (or it is larger than `kafka.max_record_bytes`).
    Refused(SinkError),
}

impl Cause {
    /// The cause's stable short name (`outboxd.route.invalid_topic`,
    /// `outboxd.kafka.record_too_large`, ...), for dead-letter headers.
    pub fn kind(&self) -> &'static str {
        match self {
            Cause::Undecodable(e) => e.reason.kind(),
            Cause::Route(e) => e.kind(),
            Cause::Refused(e) => e.kind(),
        }
    }
}

impl fmt::Display for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Cause::Undecodable(e) => write!(f, "it cannot be decoded: {e}"),
            Cause::Route(e) => write!(f, "it cannot be routed: {e}"),
            Cause::Refused(e) => e.fmt(f),
        }
    }
}

/// An outbox event the connector stopped at (`errors.tolerance=none`): a definite failure.
/// Names the event id, its table and its source transaction's positions (never the
/// payload), says what was delivered, and gives the `outboxd checkpoint set` that steps past
/// it.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{}", self.describe())]
pub struct Poison {
    /// The connector.
    pub connector: String,
    /// The outbox table, when known.
    pub table: Option<TableName>,
    /// The event id (`table.field.event.id`), `(none)` without one.
    pub id: String,
    /// Why it cannot be delivered.
    pub cause: Cause,
    /// The position before its source transaction (where the checkpoint stands).
    pub before: Option<SourcePosition>,
    /// Its place among its transaction's outbox rows, from 1.
    pub row: u64,
    /// The position after its source transaction, when the loop could read to its end.
    pub after: Option<SourcePosition>,
    /// Why `after` is unknown, when it is.
    pub after_unknown: Option<String>,
    /// Whether records of its transaction before it were delivered already (a transaction
    /// larger than a batch, split across Kafka transactions).
    pub partly_delivered: bool,
}

impl Poison {
    fn describe(&self) -> String {
        let table = self
            .table
            .as_ref()
            .map(|t| format!(" in {t}"))
            .unwrap_or_default();
        let before = self
            .before
            .as_ref()
            .map(|p| p.to_string())
            .unwrap_or_else(|| "(none yet)".into());
        // An undecodable message has no event id (the cause names its LSN and prefix), and
        // no fix makes it deliverable: its content is in the WAL as written.
        let undecodable = matches!(self.cause, Cause::Undecodable(_));
        let (subject, this) = if undecodable {
            (format!("outbox message{table}"), "message")
        } else {
            (format!("outbox event {}{table}", self.id), "event")
        };
        let fix = if undecodable {
            "A restart meets it again (its content is in the WAL as written): restart with \
             errors.tolerance = \"all\" and a dead-letter topic to dead-letter it and deliver \
             the rest"
        } else {
            "Fix the cause and restart to deliver it"
        };
        let mut s = format!(
            "{subject} (row {} of the source transaction after {before}) cannot be delivered: \
             {}. ",
            self.row, self.cause
        );
        let set = |position: &SourcePosition, skip: Option<u64>| {
            format!(
                "`outboxd checkpoint set --config <its file> --connector {} --position \
                 {position}{}`",
                self.connector,
                skip.map(|n| format!(" --skip {n}")).unwrap_or_default()
            )
        };
        if self.partly_delivered {
            s.push_str(&format!(
                "Its source transaction is larger than one batch and its first {} row(s) are \
                 already delivered; the checkpoint stands right before this {this}. {fix}{}; or \
                 step past this {this} alone: stop the relay, run {}",
                self.row - 1,
                if undecodable {
                    ""
                } else {
                    " and the rest of its transaction"
                },
                self.before
                    .as_ref()
                    .map(|b| set(b, Some(self.row)))
                    .unwrap_or_else(|| "`outboxd checkpoint set` (no position known)".into())
            ));
            if let Some(after) = &self.after {
                s.push_str(&format!(
                    " (or past the rest of its transaction: {})",
                    set(after, None)
                ));
            }
            s.push_str(", and start it again");
        } else {
            s.push_str(&format!(
                "Everything before its source transaction is delivered and checkpointed \
                 ({before}); nothing of that transaction is. {fix}; or step past that \
                 transaction (its other outbox rows are dropped too): stop the relay, run {}, \
                 and start it again",
                match &self.after {
                    Some(after) => set(after, None),
                    None => format!(
                        "`outboxd checkpoint set --config <its file> --connector {} --position \
                         <the position after that transaction>` (`outboxd status` shows \
                         positions)",
                        self.connector
                    ),
                }
            ));
            if let Some(why) = &self.after_unknown {
                s.push_str(&format!(" (the position after it is not known: {why})"));
            }
        }
        s
    }
}

/// The dead-letter topic refused a dead letter: a definite failure (dead letters must not
/// be lost either).
#[derive(Debug, Clone, thiserror::Error)]
#[error("the dead-letter topic {topic} refused the dead letter of outbox event {id}: {source}; the connector stops without checkpointing past that event: fix the dead-letter topic (its max.message.bytes, ACLs) and restart")]
pub struct DeadLetterRefused {
    /// The dead-letter topic.
    pub topic: String,
    /// The event whose dead letter it was.
    pub id: String,
    /// Kafka's refusal.
    #[source]
    pub source: SinkError,
}

impl DeadLetterRefused {
    /// The failure for a dead letter Kafka refused with `refusal` (which names it).
    pub fn of(refusal: SinkError) -> Error {
        let (id, topic) = refusal
            .refused_record()
            .map(|(i, t)| (i.to_string(), t.to_string()))
            .unwrap_or_default();
        Box::new(DeadLetterRefused {
            topic,
            id,
            source: refusal,
        })
        .into()
    }
}

/// `refused` records numbered from `base` on, renumbered as ordinals counted from it (those
/// before `base` are left out: they belong to what was already stored).
pub fn ordinals_from(refused: Vec<Refused>, base: u64) -> Vec<Refused> {
    refused
        .into_iter()
        .filter(|r| r.seq >= base)
        .map(|r| Refused {
            seq: r.seq - base,
            ..r
        })
        .collect()
}

/// Adds Kafka's refusals to `plan`: `refused` with their `seq` already the record ordinal;
/// with `dead_letters` each is to be dead-lettered, otherwise the replay stops at the first.
///
/// Kafka refuses a produce request as too large as a whole, so every record of it reports
/// "too large": of those, only the largest is taken as the cause (the others, likely
/// collateral, are sent again by the replay; if one of them is too large too, it is refused
/// again and found then). Errors (definite) when a refused record was itself a dead letter
/// (`is_dead_letter` of its ordinal): the dead-letter topic refused it.
pub fn plan_refusals(
    plan: &mut Plan,
    mut refused: Vec<Refused>,
    is_dead_letter: impl Fn(u64) -> bool,
    dead_letters: bool,
    connector: &str,
) -> Result<(), Error> {
    if let Some(r) = refused.iter().find(|r| is_dead_letter(r.seq)) {
        return Err(DeadLetterRefused::of(r.refusal.clone()));
    }
    let too_large = |r: &Refused| r.refusal.refusal() == Some(crate::sink::Refusal::TooLarge);
    let largest = refused
        .iter()
        .filter(|r| too_large(r))
        .max_by_key(|r| r.size)
        .map(|r| r.seq);
    refused.retain(|r| !too_large(r) || Some(r.seq) == largest);
    refused.sort_by_key(|r| r.seq);
    for Refused { seq, refusal, .. } in refused {
        tracing::warn!(connector, ordinal = seq, "the sink refused a record for good: {refusal}; replaying from the last checkpoint to {} it", if dead_letters { "dead-letter" } else { "stop at" });
        plan.insert(seq, planned(refusal, dead_letters));
        if !dead_letters {
            break; // the stop is at the first refused record
        }
    }
    Ok(())
}

/// What a replayed run does at a record ordinal.
#[derive(Debug, Clone)]
pub enum Action {
    /// Send its dead letter instead of the record.
    DeadLetter(Cause),
    /// Stop at it, as for an event the router refuses.
    Stop(Cause),
}

/// A record a replay must treat specially, and how to recognise it.
#[derive(Debug, Clone)]
pub struct Planned {
    /// The event id the record had.
    pub event_id: String,
    /// The topic it was for.
    pub topic: String,
    /// What to do with it.
    pub action: Action,
}

/// What a replayed run does with the records Kafka refused in an earlier run: keyed by
/// record ordinal, counted from the checkpoint the run starts at.
#[derive(Debug, Clone, Default)]
pub struct Plan {
    entries: BTreeMap<u64, Planned>,
}

impl Plan {
    /// What to do at `ordinal`.
    pub fn get(&self, ordinal: u64) -> Option<&Planned> {
        self.entries.get(&ordinal)
    }

    /// Plans `planned` at `ordinal` (replacing what was planned there).
    pub fn insert(&mut self, ordinal: u64, planned: Planned) {
        self.entries.insert(ordinal, planned);
    }

    /// Counts ordinals from `passed` records later: what lies before is done.
    pub fn rebase(&mut self, passed: u64) {
        if passed == 0 {
            return;
        }
        self.entries = std::mem::take(&mut self.entries)
            .into_iter()
            .filter(|(o, _)| *o >= passed)
            .map(|(o, p)| (o - passed, p))
            .collect();
    }

    /// The entries, by ordinal.
    pub fn iter(&self) -> impl Iterator<Item = (u64, &Planned)> {
        self.entries.iter().map(|(o, p)| (*o, p))
    }
}

/// Run the loop again from `from` with `plan` (see the module docs).
#[derive(Debug, Clone)]
pub struct Replay {
    /// The stored checkpoint to restart the source at.
    pub from: Checkpoint,
    /// What to do with the refused records.
    pub plan: Plan,
}

/// How a delivery loop ended without a failure.
#[derive(Debug)]
pub enum Ending {
    /// The source ended or shutdown was asked for: everything read is delivered and
    /// checkpointed.
    Done,
    /// Kafka refused records after they were sent: restart the source and the loop.
    Replay(Replay),
}

/// Longest the loop reads on after a poison event to find its transaction's end.
const READ_ON: Duration = Duration::from_secs(30);

/// The failure a loop ends with when it stops at `poison` (everything ahead of it delivered
/// and checkpointed): the source read on to the end of the poison event's transaction
/// ([`read_to_commit`]), and the position after it noted in the error (or why it is unknown).
pub async fn stopped(
    mut poison: Box<Poison>,
    events: &mut Inbox<Result<SourceEvent, SourceError>>,
    shutdown: &mut watch::Receiver<bool>,
) -> Error {
    match read_to_commit(events, shutdown).await {
        Ok(after) => poison.after = Some(after),
        Err(why) => poison.after_unknown = Some(why),
    }
    Error::Poison(poison)
}

/// Reads the source on to the end of the current transaction (its `Commit`), discarding its
/// rows: the position after it, or why it could not be had (the source ended or failed,
/// shutdown, nothing within [`READ_ON`]).
async fn read_to_commit(
    events: &mut Inbox<Result<SourceEvent, SourceError>>,
    shutdown: &mut watch::Receiver<bool>,
) -> Result<SourcePosition, String> {
    let deadline = Instant::now() + READ_ON;
    loop {
        if *shutdown.borrow() {
            return Err("the relay was shutting down".into());
        }
        tokio::select! {
            ev = events.recv() => match ev {
                None => return Err("the source stopped before the transaction's end".into()),
                Some(Err(f)) => return Err(format!("the source failed before the transaction's end: {f}")),
                Some(Ok(SourceEvent::Commit { position, .. })) => return Ok(position),
                Some(Ok(_)) => {}
            },
            _ = tokio::time::sleep_until(deadline) => {
                return Err(format!("its end was not read within {READ_ON:?}"));
            }
            changed = shutdown.changed() => {
                if changed.is_err() {
                    return Err("the relay was shutting down".into());
                }
            }
        }
    }
}

/// The plan entry for a record Kafka refused with `refusal` (`errors.tolerance` decides
/// the action).
pub fn planned(refusal: SinkError, dead_letter: bool) -> Planned {
    let (event_id, topic) = refusal
        .refused_record()
        .map(|(i, t)| (i.to_string(), t.to_string()))
        .unwrap_or_default();
    let cause = Cause::Refused(refusal);
    Planned {
        event_id,
        topic,
        action: if dead_letter {
            Action::DeadLetter(cause)
        } else {
            Action::Stop(cause)
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::position::Lsn;

    fn route_error() -> RouteError {
        RouteError::InvalidTopic {
            table: TableName::new("shop", "outbox_events"),
            column: "aggregate_type".into(),
            topic: "outbox.event.bad topic/name".into(),
        }
    }

    fn poison() -> Poison {
        Poison {
            connector: "shop".into(),
            table: Some(TableName::new("shop", "outbox_events")),
            id: "e3".into(),
            cause: Cause::Route(route_error()),
            before: Some(SourcePosition::Lsn(Lsn(0x100))),
            row: 2,
            after: Some(SourcePosition::Lsn(Lsn(0x200))),
            after_unknown: None,
            partly_delivered: false,
        }
    }

    #[test]
    fn the_stop_names_the_event_the_positions_and_the_step_past() {
        let msg = poison().to_string();
        for part in [
            "outbox event e3 in shop.outbox_events",
            "row 2 of the source transaction after lsn:0/100",
            "not a valid Kafka topic name",
            "checkpointed (lsn:0/100)",
            "`outboxd checkpoint set --config <its file> --connector shop --position lsn:0/200`",
        ] {
            assert!(msg.contains(part), "{part:?} in {msg}");
        }
        let split = Poison {
            partly_delivered: true,
            row: 7,
            ..poison()
        }
        .to_string();
        assert!(
            split.contains("first 6 row(s) are already delivered")
                && split.contains("--position lsn:0/100 --skip 7")
                && split.contains("--position lsn:0/200`"),
            "{split}"
        );
        let unknown = Poison {
            after: None,
            after_unknown: Some("the relay was shutting down".into()),
            ..poison()
        }
        .to_string();
        assert!(
            unknown.contains("<the position after that transaction>")
                && unknown.contains("shutting down"),
            "{unknown}"
        );
    }

    fn refused(seq: u64, size: u64, code: rdkafka::error::RDKafkaErrorCode) -> Refused {
        Refused {
            seq,
            size,
            refusal: SinkError::on_delivery(
                &rdkafka::error::KafkaError::MessageProduction(code),
                format!("e{seq}"),
                "t",
            ),
        }
    }

    #[test]
    fn of_a_request_refused_as_too_large_only_its_largest_record_is_planned() {
        use rdkafka::error::RDKafkaErrorCode as C;
        let batch = || {
            vec![
                refused(4, 10, C::MessageSizeTooLarge),
                refused(2, 90_000, C::MessageSizeTooLarge),
                refused(3, 10, C::MessageSizeTooLarge),
                refused(7, 10, C::TopicAuthorizationFailed),
            ]
        };
        let mut plan = Plan::default();
        plan_refusals(&mut plan, batch(), |_| false, true, "c").unwrap();
        let planned: Vec<u64> = plan.iter().map(|(o, _)| o).collect();
        assert_eq!(
            planned,
            vec![2, 7],
            "the largest too-large one and the ACL refusal"
        );
        // Stopping: at the first cause only.
        let mut plan = Plan::default();
        plan_refusals(&mut plan, batch(), |_| false, false, "c").unwrap();
        let planned: Vec<(u64, bool)> = plan
            .iter()
            .map(|(o, p)| (o, matches!(p.action, Action::Stop(_))))
            .collect();
        assert_eq!(planned, vec![(2, true)]);
        // A refused dead letter is a definite failure.
        let e = plan_refusals(&mut Plan::default(), batch(), |o| o == 3, true, "c").unwrap_err();
        assert!(matches!(e, Error::DeadLetter(_)), "{e}");
    }

    #[test]
    fn a_plan_rebases_past_what_was_done() {
        let mut plan = Plan::default();
        for o in [2, 5, 9] {
            plan.insert(
                o,
                Planned {
                    event_id: format!("e{o}"),
                    topic: "t".into(),
                    action: Action::Stop(Cause::Route(route_error())),
                },
            );
        }
        plan.rebase(5);
        let left: Vec<(u64, String)> = plan.iter().map(|(o, p)| (o, p.event_id.clone())).collect();
        assert_eq!(left, vec![(0, "e5".into()), (4, "e9".into())]);
        plan.rebase(0);
        assert_eq!(plan.iter().count(), 2);
        plan.rebase(100);
        assert_eq!(plan.iter().count(), 0);
    }
}
