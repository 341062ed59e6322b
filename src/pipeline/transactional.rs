//! The exactly-once delivery loop: records and their checkpoint in one Kafka transaction.
//!
//! Source events are routed and sent inside an open Kafka transaction until a bound is
//! reached ([`BatchOptions`]: records, bytes, time). Then the checkpoint record for the
//! position reached goes into the same transaction and the transaction commits: a
//! `read_committed` consumer sees the records and the checkpoint together, or neither. After a
//! crash the relay reads the last committed checkpoint and resumes the source there, so the
//! records of an aborted (or never committed) transaction are produced again exactly once.
//!
//! A source transaction larger than the bounds is split across Kafka transactions: the
//! checkpoint then names the position *before* that source transaction plus `skip`, the
//! number of its outbox rows already delivered, and on resume those rows are dropped.
//! Memory stays bounded by the batch bounds however large the source transaction.
//!
//! Only after a commit is the checkpointed position published (for PostgreSQL's flush LSN).

use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use super::{LoopContext, SHUTDOWN_GRACE};
use crate::checkpoint::{now_ms, Checkpoint, KafkaCheckpointStore};
use crate::error::Error;
use crate::event::SourceEvent;
use crate::metrics as m;
use crate::position::SourcePosition;
use crate::router::Routed;
use crate::sink::KafkaSink;

/// Awaits `fut` (the open transaction's acknowledgements, or its commit) while watching for
/// shutdown: once it is signalled (`stop_by` is then set to the signal time plus
/// [`SHUTDOWN_GRACE`], if it was not already) `fut` gets until `stop_by`, then a transient
/// failure says the batch was not committed. `what` completes "Kafka did not ...".
async fn unless_stopped<T>(
    fut: impl std::future::Future<Output = Result<T, Error>>,
    shutdown: &mut watch::Receiver<bool>,
    stop_by: &mut Option<Instant>,
    what: &str,
) -> Result<T, Error> {
    let mut fut = std::pin::pin!(fut);
    loop {
        if let Some(by) = *stop_by {
            return tokio::time::timeout_at(by, fut).await.unwrap_or_else(|_| {
                Err(Error::ShutdownTimeout {
                    what: what.to_string(),
                    grace: SHUTDOWN_GRACE,
                    consequence: "the open batch was not committed (nothing of it is visible) \
                                  and will be delivered after restart",
                })
            });
        }
        tokio::select! {
            r = &mut fut => return r,
            changed = shutdown.changed() => {
                if changed.is_err() || *shutdown.borrow() {
                    tracing::info!("shutdown: waiting up to {SHUTDOWN_GRACE:?} for Kafka to {what}");
                    *stop_by = Some(Instant::now() + SHUTDOWN_GRACE);
                }
            }
        }
    }
}

/// Longest the end of a transaction waits for its records' acknowledgements (past the
/// exactly-once producer's 55 s `message.timeout.ms`, which fails them first).
const FLUSH_TIMEOUT: Duration = Duration::from_secs(60);

/// Bounds of one Kafka transaction.
#[derive(Debug, Clone)]
pub struct BatchOptions {
    /// Most records per transaction.
    pub max_events: usize,
    /// Most record bytes per transaction.
    pub max_bytes: usize,
    /// Longest a transaction collects records before it commits, while the source is
    /// caught up.
    pub max_wait: Duration,
    /// How far behind the source must be (now minus the last source commit time) for a
    /// transaction to count as draining a backlog (default 2 s: MariaDB commit times have
    /// whole seconds). Then, when `max_wait` is up, the transaction collects on, `max_wait`
    /// at a time, up to `max_backlog_wait`: fewer, larger Kafka transactions while nobody
    /// is waiting on the newest events (a transaction's acknowledgement wait and commit
    /// cost about a tenth of a 100 ms one in a drain; benches/results/profile.md).
    pub backlog_lag: Duration,
    /// Longest a transaction collects records while the source is behind (default 1 s).
    pub max_backlog_wait: Duration,
    /// Record bytes sent but not yet acknowledged, at most, within a transaction (default
    /// 8 MiB). Past it the loop takes acknowledgements until half of that is left before it
    /// reads more events. This bounds memory (the records and librdkafka's copies of them)
    /// independently of `max_bytes`: peak RSS in a drain grew with what was in flight.
    pub max_unacked_bytes: usize,
    /// Records sent but not yet acknowledged, at most, within a transaction (default
    /// 10,000), with the same take-until-half rule. For small events this is the tighter
    /// bound: each record in flight also costs librdkafka's message header (and cost a
    /// per-record delivery future then), and 200-byte drains peaked at 66 MiB with the byte
    /// bound alone.
    pub max_unacked_records: usize,
    /// While only the position moves (heartbeats, other tables), how often a checkpoint-only
    /// transaction records it.
    pub idle_checkpoint_interval: Duration,
    /// While nothing moves at all, how often the checkpoint is re-committed anyway. This
    /// keeps the producer's transactional session exercised, so an instance fenced by a
    /// newer one notices within this interval and releases the source (a PostgreSQL slot,
    /// which the newer instance is waiting for).
    pub keepalive_interval: Duration,
}

impl Default for BatchOptions {
    fn default() -> Self {
        Self {
            max_events: 50_000,
            max_bytes: 32 * 1024 * 1024,
            max_wait: Duration::from_millis(100),
            backlog_lag: Duration::from_secs(2),
            max_backlog_wait: Duration::from_secs(1),
            max_unacked_bytes: 8 * 1024 * 1024,
            max_unacked_records: 10_000,
            idle_checkpoint_interval: Duration::from_secs(1),
            keepalive_interval: Duration::from_secs(3),
        }
    }
}

/// When a transaction's collection `deadline` is up (at `now`): the next deadline,
/// `max_wait` from now but not past `opened + max_backlog_wait`, if it should collect on
/// (the source is at least `opts.backlog_lag` behind, still delivering, and that cap is not
/// reached), else `None` (commit).
/// `lag` = now minus the commit time of the last source transaction read, if known;
/// `delivering` = whether source events arrived since the last deadline or are waiting. At
/// the end of a backlog the last source commit is still old, but nothing more comes: the
/// transaction commits then instead of holding its records invisible until the cap.
fn extend_deadline(
    now: Instant,
    deadline: Instant,
    opened: Instant,
    lag: Option<Duration>,
    delivering: bool,
    opts: &BatchOptions,
) -> Option<Instant> {
    let behind = lag.is_some_and(|l| l >= opts.backlog_lag);
    let cap = opened + opts.max_backlog_wait;
    (behind && delivering && now < cap).then(|| (now.max(deadline) + opts.max_wait).min(cap))
}

/// Where the loop stands in the source stream.
struct Cursor {
    /// Position after the last complete source transaction (or the resume position).
    position: Option<SourcePosition>,
    /// Outbox rows of the current, unfinished source transaction seen so far (including
    /// rows skipped because an earlier run delivered them).
    txn_rows: u64,
    /// Rows of the first source transaction to drop on resume.
    skip: u64,
    /// Commit time of the last complete source transaction, epoch ms.
    commit_ts_ms: Option<i64>,
}

impl Cursor {
    fn checkpoint(&self, connector: &str) -> Option<Checkpoint> {
        self.position.clone().map(|position| Checkpoint {
            connector: connector.to_string(),
            position,
            skip: self.txn_rows,
            updated_at_ms: now_ms(),
        })
    }
}

/// Ends the open transaction after `f` and returns the failure to report: the producer's
/// fatal error (fencing) if it has one — then nothing more is sent, not even an abort —
/// else, after aborting, the first failed delivery if a record failed, else `f`.
///
/// A record Kafka refuses (too large, no ACL) leaves the transaction in an abortable error
/// state, and the next send or the commit then fails with librdkafka's "Erroneous state":
/// the refusal is the cause to report (a definite failure that names the event), not that
/// (a transient one, which would retry the same refusal for ever).
fn fail(sink: &KafkaSink, open: bool, f: impl Into<Error>) -> Error {
    if let Some(fatal) = sink.fatal() {
        return fatal.into();
    }
    if open {
        sink.abort();
    }
    // The abort purged what was left; which record failed first is told by the reports.
    sink.deliveries()
        .settled_failure(crate::sink::DeliveryTracker::SETTLE_WITHIN)
        .map(Error::from)
        .unwrap_or_else(|| f.into())
}

/// Runs the exactly-once loop until the source ends, `shutdown`, or a failure.
///
/// `sink` must be transactional and initialised ([`KafkaSink::init_transactions`]);
/// `resume` is the last committed checkpoint. On shutdown the open batch is committed first.
/// Failures abort the open transaction: nothing of it becomes visible and the checkpoint
/// stays at the last commit.
pub async fn run(
    ctx: LoopContext<'_>,
    events: mpsc::Receiver<Result<SourceEvent, Error>>,
    store: &KafkaCheckpointStore,
    resume: Option<Checkpoint>,
    opts: &BatchOptions,
) -> Result<(), Error> {
    let LoopContext {
        connector,
        router,
        sink,
        checkpointed,
        mut shutdown,
    } = ctx;
    let mut events = super::inbox::Inbox::new(events);
    let deliveries = sink.deliveries();
    // Past the unacknowledged bounds (`factor` 1), or still above half of them (2).
    let over_bounds = |factor: usize| {
        let (records, bytes) = deliveries.unacked();
        bytes as usize > opts.max_unacked_bytes / factor
            || records as usize > opts.max_unacked_records / factor
    };
    let label = connector.to_string();
    let counters = m::EventCounters::new(connector);
    let mut cursor = Cursor {
        position: resume.as_ref().map(|c| c.position.clone()),
        txn_rows: 0,
        skip: resume.as_ref().map_or(0, |c| c.skip),
        commit_ts_ms: None,
    };
    checkpointed.send_replace(cursor.position.clone());
    let mut committed_position = cursor.position.clone();
    // Until the first source commit is read, how far behind the source is is estimated from
    // when the resumed checkpoint was written: a relay that was down for minutes resumes a
    // backlog.
    let resumed_at_ms = resume.as_ref().map(|c| c.updated_at_ms);
    let mut last_commit = Instant::now();
    let mut stopping = false;
    // Once stopping: when the open batch must be committed by.
    let mut stop_by: Option<Instant> = None;
    loop {
        // ---- collect one batch
        let mut open = false;
        let (mut records, mut bytes) = (0usize, 0usize);
        // Whether the loop is taking acknowledgements before reading on.
        let mut draining = false;
        let mut deadline: Option<Instant> = None;
        // When the first record of the transaction was sent (deadline - max_wait).
        let mut opened_at: Option<Instant> = None;
        // Time spent taking acknowledgements before reading on, and waiting for the source.
        let (mut stalled, mut starved) = (Duration::ZERO, Duration::ZERO);
        // Whether outbox rows or commits arrived since the last deadline.
        let mut arrived = false;
        while !stopping {
            // Only turns that wait are timed: no clock read per event while events flow.
            let (was_draining, was_empty) = (draining, events.is_empty());
            let turn = (was_draining || was_empty).then(Instant::now);
            let sleep_until =
                deadline.unwrap_or_else(|| Instant::now() + opts.idle_checkpoint_interval);
            tokio::select! {
                biased;
                changed = shutdown.changed() => {
                    if changed.is_err() || *shutdown.borrow() {
                        tracing::info!(connector, "shutdown: committing the open batch");
                        stopping = true;
                    }
                }
                _ = deliveries.changed(), if draining => {
                    if let Some(f) = deliveries.failure() {
                        return Err(fail(sink, true, f));
                    }
                    draining = over_bounds(2);
                }
                ev = events.recv(), if !draining => match ev {
                    None => stopping = true,
                    Some(Err(f)) => return Err(fail(sink, open, f)),
                    Some(Ok(SourceEvent::Change(mut change))) => {
                        arrived = true;
                        cursor.txn_rows += 1;
                        counters.read.increment(1);
                        if cursor.txn_rows <= cursor.skip {
                            continue; // delivered by an earlier run
                        }
                        let routed = router
                            .route_taking(&mut change)
                            .map_err(|e| super::Unroutable::new(router, &change, e));
                        let routed = match routed {
                            Ok(r) => r,
                            Err(f) => return Err(fail(sink, open, f)),
                        };
                        match routed {
                            Routed::Record(record) => {
                                if !open {
                                    sink.begin().map_err(|f| fail(sink, false, f))?;
                                    open = true;
                                }
                                let size = record.approx_size();
                                if let Err(f) = sink.send(&record).await {
                                    return Err(fail(sink, true, f));
                                }
                                records += 1;
                                bytes += size;
                                draining = over_bounds(1);
                                if draining {
                                    // Waiting for acknowledgements: no point lingering.
                                    sink.kick();
                                }
                                let now = Instant::now();
                                opened_at.get_or_insert(now);
                                deadline.get_or_insert(now + opts.max_wait);
                            }
                            Routed::Skipped(reason) => {
                                metrics::counter!(m::EVENTS_SKIPPED, m::LABEL_CONNECTOR => label.clone(), m::LABEL_REASON => reason.label()).increment(1);
                            }
                        }
                    }
                    Some(Ok(SourceEvent::Commit { position, commit_ts_ms })) => {
                        arrived = true;
                        cursor.position = Some(position);
                        cursor.txn_rows = 0;
                        cursor.skip = 0;
                        cursor.commit_ts_ms = Some(commit_ts_ms);
                        counters.stream.commit_read(commit_ts_ms);
                        if records > 0 {
                            let now = Instant::now();
                            opened_at.get_or_insert(now);
                            deadline.get_or_insert(now + opts.max_wait);
                        }
                    }
                    Some(Ok(SourceEvent::Progress { position })) => {
                        if cursor.txn_rows == 0 {
                            cursor.position = Some(position);
                            if committed_position.is_none() {
                                break; // commit the first checkpoint now
                            }
                        }
                    }
                },
                _ = tokio::time::sleep_until(sleep_until) => {
                    let lag = cursor
                        .commit_ts_ms
                        .or(resumed_at_ms)
                        .map(|ts| Duration::from_millis((now_ms() - ts).max(0) as u64));
                    let delivering =
                        std::mem::take(&mut arrived) || draining || !events.is_empty();
                    let next = match (deadline, opened_at) {
                        (Some(d), Some(o)) if !stopping => {
                            extend_deadline(Instant::now(), d, o, lag, delivering, opts)
                        }
                        _ => None,
                    };
                    match next {
                        Some(d) => deadline = Some(d),
                        None => break,
                    }
                }
            }
            if let Some(turn) = turn {
                if was_draining {
                    stalled += turn.elapsed();
                } else {
                    starved += turn.elapsed();
                }
            }
            if records >= opts.max_events || bytes >= opts.max_bytes {
                break;
            }
        }

        // ---- commit it (records + checkpoint), or nothing if nothing moved
        let moved = cursor.position != committed_position || cursor.txn_rows > cursor.skip;
        // The very first checkpoint is committed at once: until it exists a crash would
        // restart at the server's *current* position.
        let idle_due =
            committed_position.is_none() || last_commit.elapsed() >= opts.idle_checkpoint_interval;
        let keepalive_due =
            committed_position.is_some() && last_commit.elapsed() >= opts.keepalive_interval;
        if records == 0 && !keepalive_due && (!moved || (!idle_due && !stopping)) {
            if open {
                sink.abort();
            }
            if stopping {
                return Ok(());
            }
            continue;
        }
        let Some(checkpoint) = cursor.checkpoint(connector) else {
            // No position known yet (e.g. before the first GTID list): nothing to commit.
            if open {
                sink.abort();
            }
            if stopping {
                return Ok(());
            }
            continue;
        };
        if !open {
            sink.begin().map_err(|f| fail(sink, false, f))?;
        }
        if stopping {
            stop_by.get_or_insert_with(|| Instant::now() + SHUTDOWN_GRACE);
        }
        // The checkpoint record joins the batch's records: all of them are acknowledged,
        // and `flush_now` has found librdkafka holding nothing, before commit(), because
        // rust-rdkafka's commit_transaction flushes first and that flush polls in 100 ms
        // steps while anything is outstanding, which added 100 ms to every commit
        // (benches/results/profile.md §2, §4).
        let collected_at = Instant::now();
        let queued = events.len();
        let record = store.record(&checkpoint)?;
        if let Err(f) = sink.send(&record).await {
            return Err(fail(sink, true, f));
        }
        // The flush sends the tail of the batch without lingering; the delivery reports tell
        // which record failed, if one did.
        let all = async {
            tokio::try_join!(deliveries.all_acked(), sink.flush_now(FLUSH_TIMEOUT))
                .map(|_| ())
                .map_err(Error::from)
        };
        // After a shutdown signal, a failure leaves the transaction to the broker instead of
        // aborting it: with Kafka unreachable the abort would block for its own timeout.
        let acked = unless_stopped(
            all,
            &mut shutdown,
            &mut stop_by,
            "acknowledge the open batch",
        )
        .await;
        if let Err(f) = acked {
            return Err(fail(sink, stop_by.is_none(), f));
        }
        let acked_at = Instant::now();
        let committed = unless_stopped(
            async { sink.commit().await.map_err(Error::from) },
            &mut shutdown,
            &mut stop_by,
            "commit the open batch",
        )
        .await;
        if let Err(f) = committed {
            return Err(fail(sink, stop_by.is_none(), f));
        }
        stopping |= stop_by.is_some();
        let collect_ms = collected_at.duration_since(last_commit).as_millis() as u64;
        let ack_ms = acked_at.duration_since(collected_at).as_millis() as u64;
        last_commit = Instant::now();
        let commit_ms = last_commit.duration_since(acked_at).as_millis() as u64;
        let (stalled_ms, starved_ms) = (stalled.as_millis() as u64, starved.as_millis() as u64);
        committed_position = Some(checkpoint.position.clone());
        cursor.skip = cursor.txn_rows;
        counters.produced.increment(records as u64);
        counters.bytes.increment(bytes as u64);
        metrics::counter!(m::CHECKPOINT_WRITES, m::LABEL_CONNECTOR => label.clone()).increment(1);
        metrics::gauge!(m::CHECKPOINT_AGE, m::LABEL_CONNECTOR => label.clone()).set(0.0);
        // The commit covers every source transaction read: nothing is behind.
        counters.stream.pending_since(None);
        checkpointed.send_replace(Some(checkpoint.position.clone()));
        tracing::debug!(connector, records, queued, collect_ms, stalled_ms, starved_ms, ack_ms, commit_ms, position = %checkpoint.position, skip = checkpoint.skip, "committed");
        if stopping {
            return Ok(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts() -> BatchOptions {
        BatchOptions::default()
    }

    #[test]
    fn a_caught_up_source_commits_when_max_wait_is_up() {
        let t0 = Instant::now();
        let due = t0 + opts().max_wait;
        let lag = Some(Duration::from_millis(300));
        assert_eq!(extend_deadline(due, due, t0, lag, true, &opts()), None);
        assert_eq!(extend_deadline(due, due, t0, None, true, &opts()), None);
    }

    #[test]
    fn a_backlog_collects_on_in_max_wait_steps_up_to_the_cap() {
        let o = opts();
        let t0 = Instant::now();
        let lag = Some(Duration::from_secs(30));
        let mut deadline = t0 + o.max_wait;
        let mut steps = 0;
        while let Some(next) = extend_deadline(deadline, deadline, t0, lag, true, &o) {
            assert!(next > deadline);
            assert!(next <= t0 + o.max_backlog_wait);
            deadline = next;
            steps += 1;
        }
        assert_eq!(deadline, t0 + o.max_backlog_wait);
        assert_eq!(steps, 9);
    }

    #[test]
    fn a_late_wake_up_collects_max_wait_from_now() {
        let o = opts();
        let t0 = Instant::now();
        let late = t0 + Duration::from_millis(450);
        let next = extend_deadline(late, t0 + o.max_wait, t0, Some(o.backlog_lag), true, &o);
        assert_eq!(next, Some(late + o.max_wait));
    }

    #[test]
    fn the_end_of_a_backlog_commits_when_max_wait_is_up() {
        let o = opts();
        let t0 = Instant::now();
        let due = t0 + o.max_wait;
        let lag = Some(Duration::from_secs(30));
        assert_eq!(extend_deadline(due, due, t0, lag, false, &o), None);
    }
}
