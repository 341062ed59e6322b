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

use super::inbox::Inbox;
use super::poison::{self, Ending, Plan, Poison, Replay};
use super::stage::Stage;
use super::txn_buffer::{Pending, SourceTxn};
use super::{Interrupt, LoopContext, SHUTDOWN_GRACE};
use crate::checkpoint::{now_ms, Checkpoint, CheckpointRecords};
use crate::cutover::dedupe::Dedupe;
use crate::event::{RowChange, SourceEvent};
use crate::metrics as m;
use crate::pipeline::Error;
use crate::position::SourcePosition;
use crate::sink::{DeliveryTracker, Refused, SinkError, TransactionalSink};
use crate::source::SourceError;

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

/// Figures of a batch, for its commit's debug line.
#[derive(Default)]
struct BatchStats {
    /// Source events waiting when the batch was collected.
    queued: usize,
    /// Time spent taking acknowledgements before reading on.
    stalled: Duration,
    /// Time spent waiting for the source.
    starved: Duration,
}

/// The exactly-once loop's state.
struct Eos<'a, S, C> {
    connector: &'a str,
    /// A switch from Debezium in progress ([`Dedupe`]).
    dedupe: Option<&'a Dedupe>,
    label: String,
    sink: &'a S,
    deliveries: &'a DeliveryTracker,
    store: &'a C,
    checkpointed: &'a watch::Sender<Option<SourcePosition>>,
    /// Turns true on shutdown (read, never awaited, here).
    signal: watch::Receiver<bool>,
    opts: &'a BatchOptions,
    counters: m::EventCounters,
    stage: Stage<'a>,
    /// Where the loop stands in the source stream, the current transaction held back.
    txn: SourceTxn,
    /// Commit time of the last complete source transaction, epoch ms.
    commit_ts_ms: Option<i64>,
    /// The last committed checkpoint (at first the one resumed from).
    committed: Option<Checkpoint>,
    /// Number of the first record sent after the last commit: record ordinals count from it.
    base_seq: u64,
    /// Numbers of the dead letters in the open transaction.
    dead_seqs: Vec<u64>,
    /// Number of the open transaction's checkpoint record, once sent.
    checkpoint_seq: Option<u64>,
    /// A Kafka transaction is open.
    open: bool,
    /// Records and their bytes sent in the open transaction.
    records: usize,
    bytes: usize,
    /// Taking acknowledgements before reading on.
    draining: bool,
    /// When the open transaction's collection ends, and when its first record was sent.
    deadline: Option<Instant>,
    opened_at: Option<Instant>,
    last_commit: Instant,
    /// Once stopping: when the open batch must be committed by.
    stop_by: Option<Instant>,
}

impl<S: TransactionalSink, C: CheckpointRecords> Eos<'_, S, C> {
    /// Past the unacknowledged bounds (`factor` 1), or still above half of them (2).
    fn over_bounds(&self, factor: usize) -> bool {
        let (records, bytes) = self.deliveries.unacked();
        bytes as usize > self.opts.max_unacked_bytes / factor
            || records as usize > self.opts.max_unacked_records / factor
    }

    /// The checkpoint for what is sent so far: the position before the current source
    /// transaction plus its rows settled (sent or skipped, none held back before them).
    fn checkpoint(&self) -> Option<Checkpoint> {
        self.txn.position.clone().map(|position| Checkpoint {
            connector: self.connector.to_string(),
            position,
            skip: self.txn.settled(),
            updated_at_ms: now_ms(),
            cutover: self.dedupe.and_then(Dedupe::note),
        })
    }

    /// Whether `checkpoint` is beyond the last committed one.
    fn moved(&self, checkpoint: Option<&Checkpoint>) -> bool {
        checkpoint.map(|c| (&c.position, c.skip))
            != self.committed.as_ref().map(|c| (&c.position, c.skip))
    }

    /// Sends `pending` in the open transaction (opening one if needed), in order.
    async fn send_all(
        &mut self,
        pending: Vec<Pending>,
        commit: Option<&SourcePosition>,
    ) -> Result<(), Interrupt> {
        for p in pending {
            if !self.open {
                self.sink.begin().map_err(|f| Interrupt::Failed(f.into()))?;
                self.open = true;
            }
            let (seq, size, dead) =
                super::send_pending(self.sink, self.stage.policy(), p, commit).await?;
            if dead {
                self.dead_seqs.push(seq);
            }
            self.records += 1;
            self.bytes += size;
            self.draining = self.over_bounds(1);
            if self.draining {
                // Waiting for acknowledgements: no point lingering.
                self.sink.kick();
            }
            let now = Instant::now();
            self.opened_at.get_or_insert(now);
            self.deadline.get_or_insert(now + self.opts.max_wait);
        }
        Ok(())
    }

    /// One outbox row change of the current source transaction.
    async fn on_change(&mut self, change: RowChange) -> Result<(), Interrupt> {
        self.counters.read.increment(1);
        let sent = self.deliveries.sent() - self.base_seq;
        let pending = super::admitted(self.txn.admit(&self.stage, change, sent))?;
        self.send_all(pending, None).await
    }

    /// The current source transaction committed at `position`: its records go out.
    async fn on_commit(
        &mut self,
        position: SourcePosition,
        commit_ts_ms: i64,
    ) -> Result<(), Interrupt> {
        self.counters.stream.commit_read(commit_ts_ms);
        let held = self.txn.commit(position.clone());
        self.send_all(held, Some(&position)).await?;
        self.commit_ts_ms = Some(commit_ts_ms);
        if self.records > 0 {
            let now = Instant::now();
            self.opened_at.get_or_insert(now);
            self.deadline.get_or_insert(now + self.opts.max_wait);
        }
        Ok(())
    }

    /// Commits the open transaction (opening one if needed) with `checkpoint`: its records
    /// are acknowledged and librdkafka holds nothing before commit(), because
    /// rust-rdkafka's commit_transaction flushes first and that flush polls in 100 ms steps
    /// while anything is outstanding, which added 100 ms to every commit
    /// (benches/results/profile.md §2, §4).
    async fn commit(
        &mut self,
        checkpoint: Checkpoint,
        shutdown: &mut watch::Receiver<bool>,
        stats: BatchStats,
    ) -> Result<(), Error> {
        if !self.open {
            self.sink.begin()?;
            self.open = true;
        }
        let collected_at = Instant::now();
        let record = self.store.record(&checkpoint)?;
        self.checkpoint_seq = Some(self.deliveries.sent());
        self.sink.send(&record).await?;
        // The flush sends the tail of the batch without lingering; the delivery reports tell
        // which record failed, if one did.
        let deliveries = self.deliveries;
        let sink = self.sink;
        let all = async {
            tokio::try_join!(deliveries.all_acked(), sink.flush_now(FLUSH_TIMEOUT))
                .map(|_| ())
                .map_err(Error::from)
        };
        // After a shutdown signal, a failure leaves the transaction to the broker instead of
        // aborting it: with Kafka unreachable the abort would block for its own timeout.
        unless_stopped(
            all,
            shutdown,
            &mut self.stop_by,
            "acknowledge the open batch",
        )
        .await?;
        let acked_at = Instant::now();
        unless_stopped(
            async { sink.commit().await.map_err(Error::from) },
            shutdown,
            &mut self.stop_by,
            "commit the open batch",
        )
        .await?;
        let checkpoint_seq = self.checkpoint_seq.take().unwrap_or(self.base_seq);
        // The records of this transaction are done with: the plan counts from the next one.
        self.stage.plan_mut().rebase(checkpoint_seq - self.base_seq);
        self.base_seq = self.deliveries.sent();
        self.open = false;
        let dead = self.dead_seqs.len();
        self.dead_seqs.clear();
        let collect_ms = collected_at.duration_since(self.last_commit).as_millis() as u64;
        let ack_ms = acked_at.duration_since(collected_at).as_millis() as u64;
        self.last_commit = Instant::now();
        let commit_ms = self.last_commit.duration_since(acked_at).as_millis() as u64;
        let (stalled_ms, starved_ms) = (
            stats.stalled.as_millis() as u64,
            stats.starved.as_millis() as u64,
        );
        self.txn.skip = checkpoint.skip;
        self.counters
            .produced
            .increment((self.records - dead) as u64);
        self.counters.dead_lettered.increment(dead as u64);
        self.counters.bytes.increment(self.bytes as u64);
        metrics::counter!(m::CHECKPOINT_WRITES, m::LABEL_CONNECTOR => self.label.clone())
            .increment(1);
        metrics::gauge!(m::CHECKPOINT_AGE, m::LABEL_CONNECTOR => self.label.clone()).set(0.0);
        // The commit covers every source transaction whose commit was read: nothing is behind.
        self.counters.stream.pending_since(None);
        self.checkpointed
            .send_replace(Some(checkpoint.position.clone()));
        let (connector, records, queued) = (self.connector, self.records, stats.queued);
        tracing::debug!(connector, records, dead, queued, collect_ms, stalled_ms, starved_ms, ack_ms, commit_ms, position = %checkpoint.position, skip = checkpoint.skip, "committed");
        self.committed = Some(checkpoint);
        self.records = 0;
        self.bytes = 0;
        Ok(())
    }

    /// Ends the open transaction after `f` (or, with `on_send`, the refusal of record
    /// `ordinal` when it was sent) and says what comes next: the producer's fatal error
    /// (fencing) if it has one — then nothing more is sent, not even an abort — else, after
    /// aborting, the records' missing topic ([`KafkaSink::missing_topics`]) when they waited
    /// for one, a replay from the last commit when Kafka refused records (to dead-letter
    /// them, or to stop at the first: [`super::poison`]), else the failure that best tells
    /// the cause.
    ///
    /// A record Kafka refuses (too large, no ACL) leaves the transaction in an abortable
    /// error state, and the next send or the commit then fails with librdkafka's "Erroneous
    /// state": the refusal is the cause to report (a definite failure that names the event),
    /// not that (a transient one, which would retry the same refusal for ever). A topic the
    /// connector may not write to is refused for the whole transaction instead
    /// ([`crate::sink::TxnRefusal`]): its records, purged, are the refused ones.
    async fn failed(&mut self, f: Error, on_send: Option<Refused>) -> Result<Ending, Error> {
        if let Some(fatal) = self.sink.fatal() {
            return Err(fatal.into());
        }
        let signalled = *self.signal.borrow() || self.stop_by.is_some();
        if self.open && !signalled {
            self.sink.abort();
        }
        self.open = false;
        // The abort purged what was left; which record failed first is told by the reports.
        let settled = self
            .deliveries
            .settled_failure(DeliveryTracker::SETTLE_WITHIN);
        // Records that waited for (or failed on) a topic that does not exist: named, and a
        // stop when nothing creates it. AddPartitionsToTxn retries such a topic's partitions
        // until the transaction times out, so this is seen as a stall.
        let suspect = settled.clone().or_else(|| match &f {
            Error::Sink(s) => Some(s.clone()),
            _ => None,
        });
        if let Some(cause) = suspect {
            if let Some(missing) = self.sink.missing_topics(&cause).await {
                return Err(missing.into());
            }
        }
        let base = self.base_seq;
        // Ordinals, counted from the last commit.
        let mut refused = poison::ordinals_from(self.deliveries.take_refused(), base);
        refused.extend(on_send);
        let (txn_refused, topics) = self.deliveries.take_txn_refused();
        refused.extend(poison::ordinals_from(txn_refused, base));
        let cause = match (settled, topics.first()) {
            (Some(s), _) => s.into(),
            // A refused topic none of whose records is known: still a definite stop,
            // never a retry of the same refusal.
            (None, Some(t)) if refused.is_empty() => SinkError::on_delivery(
                &rdkafka::error::KafkaError::MessageProduction(t.code),
                "(not known)".into(),
                &t.topic,
            )
            .into(),
            (None, _) => f,
        };
        let from = match (&self.committed, refused.is_empty() || signalled) {
            (Some(from), false) => from.clone(),
            _ => return Err(cause),
        };
        // The checkpoint record itself refused: no replay helps.
        let checkpoint_ordinal = self.checkpoint_seq.map(|s| s - base);
        if let Some(i) = refused
            .iter()
            .position(|r| Some(r.seq) == checkpoint_ordinal)
        {
            return Err(refused.swap_remove(i).refusal.into());
        }
        let dead_letters = self.stage.policy().dead_letters().is_some();
        let mut plan = std::mem::take(self.stage.plan_mut());
        let dead_seqs = &self.dead_seqs;
        poison::plan_refusals(
            &mut plan,
            refused,
            |ordinal| dead_seqs.contains(&(ordinal + base)),
            dead_letters,
            self.connector,
        )?;
        Ok(Ending::Replay(Replay { from, plan }))
    }

    /// Stops at `poison` (`errors.tolerance=none`): commits everything ahead of its source
    /// transaction (nothing of that transaction is sent, unless it was split), reads on to
    /// the transaction's end for the position after it, and returns the poison.
    async fn stop_at(
        &mut self,
        poison: Box<Poison>,
        events: &mut Inbox<Result<SourceEvent, SourceError>>,
        shutdown: &mut watch::Receiver<bool>,
    ) -> Result<Ending, Error> {
        let skip = self.txn.stop_at(poison.row);
        if let Some(position) = self.txn.position.clone() {
            let checkpoint = Checkpoint {
                connector: self.connector.to_string(),
                position,
                skip,
                updated_at_ms: now_ms(),
                cutover: self.dedupe.and_then(Dedupe::note),
            };
            if self.open || self.moved(Some(&checkpoint)) {
                if let Err(f) = self
                    .commit(checkpoint, shutdown, BatchStats::default())
                    .await
                {
                    return self.failed(f, None).await;
                }
            }
        }
        Err(poison::stopped(poison, events, shutdown).await)
    }

    async fn interrupted(
        &mut self,
        interrupt: Interrupt,
        events: &mut Inbox<Result<SourceEvent, SourceError>>,
        shutdown: &mut watch::Receiver<bool>,
    ) -> Result<Ending, Error> {
        match interrupt {
            Interrupt::Failed(f) => self.failed(f, None).await,
            Interrupt::RefusedOnSend(r) => {
                let ordinal = Refused {
                    seq: r.seq - self.base_seq,
                    ..r
                };
                self.failed(ordinal.refusal.clone().into(), Some(ordinal))
                    .await
            }
            Interrupt::Poison(p) => self.stop_at(p, events, shutdown).await,
            Interrupt::Undelivered => {
                let f = self
                    .deliveries
                    .failure()
                    .map(Error::from)
                    .unwrap_or_else(|| Error::TaskLost {
                        detail: "a delivery failure without a cause".into(),
                    });
                self.failed(f, None).await
            }
        }
    }
}

/// Runs the exactly-once loop until the source ends, `shutdown`, a failure, or a replay.
///
/// `sink` must be transactional and initialised ([`KafkaSink::init_transactions`]);
/// `resume` is the last committed checkpoint, `plan` a replay's (empty otherwise). On
/// shutdown the open batch is committed first. Failures abort the open transaction: nothing
/// of it becomes visible and the checkpoint stays at the last commit. Records Kafka refused
/// end the loop with [`Ending::Replay`] ([`super::poison`]).
pub async fn run<S: TransactionalSink, C: CheckpointRecords>(
    ctx: LoopContext<'_, S>,
    events: mpsc::Receiver<Result<SourceEvent, SourceError>>,
    store: &C,
    resume: Option<Checkpoint>,
    plan: Plan,
    opts: &BatchOptions,
) -> Result<Ending, Error> {
    let LoopContext {
        connector,
        router,
        policy,
        sink,
        checkpointed,
        mut shutdown,
        dedupe,
        paused,
        topics,
    } = ctx;
    if let Some(d) = dedupe {
        d.rearm(resume.as_ref().is_some_and(|c| c.cutover.is_some()));
    }
    let mut events = super::inbox::Inbox::new(events).paused_by(paused);
    let deliveries = sink.deliveries();
    // Reports of an earlier run on this producer (an aborted transaction) are done with.
    deliveries.rebase();
    let mut eos = Eos {
        connector,
        dedupe,
        label: connector.to_string(),
        sink,
        deliveries,
        store,
        checkpointed,
        signal: shutdown.clone(),
        opts,
        counters: m::EventCounters::new(connector),
        stage: Stage::new(connector, router, policy, sink.max_record_bytes(), plan)
            .with_limit_of(sink.record_limit())
            .with_dedupe(dedupe)
            .with_topics(topics),
        txn: SourceTxn::new(
            resume.as_ref(),
            opts.max_unacked_records / 2,
            opts.max_unacked_bytes / 2,
        ),
        commit_ts_ms: None,
        committed: resume.clone(),
        base_seq: deliveries.sent(),
        dead_seqs: Vec::new(),
        checkpoint_seq: None,
        open: false,
        records: 0,
        bytes: 0,
        draining: false,
        deadline: None,
        opened_at: None,
        last_commit: Instant::now(),
        stop_by: None,
    };
    checkpointed.send_replace(eos.txn.position.clone());
    // Until the first source commit is read, how far behind the source is is estimated from
    // when the resumed checkpoint was written: a relay that was down for minutes resumes a
    // backlog.
    let resumed_at_ms = resume.as_ref().map(|c| c.updated_at_ms);
    let mut stopping = false;
    loop {
        // ---- collect one batch
        eos.draining = false;
        eos.deadline = None;
        eos.opened_at = None;
        let mut stats = BatchStats::default();
        // Whether outbox rows or commits arrived since the last deadline.
        let mut arrived = false;
        while !stopping {
            // Only turns that wait are timed: no clock read per event while events flow.
            let (was_draining, was_empty) = (eos.draining, events.is_empty());
            let turn = (was_draining || was_empty).then(Instant::now);
            let sleep_until = eos
                .deadline
                .unwrap_or_else(|| Instant::now() + opts.idle_checkpoint_interval);
            let mut first_checkpoint = false;
            let outcome: Result<(), Interrupt> = tokio::select! {
                biased;
                changed = shutdown.changed() => {
                    if changed.is_err() || *shutdown.borrow() {
                        tracing::info!(connector, "shutdown: committing the open batch");
                        stopping = true;
                    }
                    Ok(())
                }
                _ = deliveries.changed(), if eos.draining => {
                    match deliveries.failure() {
                        Some(f) => Err(Interrupt::Failed(f.into())),
                        None => {
                            eos.draining = eos.over_bounds(2);
                            Ok(())
                        }
                    }
                }
                ev = events.recv(), if !eos.draining => match ev {
                    None => {
                        stopping = true;
                        Ok(())
                    }
                    Some(Err(f)) => Err(Interrupt::Failed(f.into())),
                    Some(Ok(SourceEvent::Change(change))) => {
                        arrived = true;
                        eos.on_change(change).await
                    }
                    Some(Ok(SourceEvent::Commit { position, commit_ts_ms })) => {
                        arrived = true;
                        eos.on_commit(position, commit_ts_ms).await
                    }
                    Some(Ok(SourceEvent::Progress { position })) => {
                        if eos.txn.between() {
                            eos.txn.position = Some(position);
                            // Commit the first checkpoint now.
                            first_checkpoint = eos.committed.is_none();
                        }
                        Ok(())
                    }
                },
                _ = tokio::time::sleep_until(sleep_until) => {
                    let lag = eos
                        .commit_ts_ms
                        .or(resumed_at_ms)
                        .map(|ts| Duration::from_millis((now_ms() - ts).max(0) as u64));
                    let delivering =
                        std::mem::take(&mut arrived) || eos.draining || !events.is_empty();
                    let next = match (eos.deadline, eos.opened_at) {
                        (Some(d), Some(o)) if !stopping => {
                            extend_deadline(Instant::now(), d, o, lag, delivering, opts)
                        }
                        _ => None,
                    };
                    match next {
                        Some(d) => {
                            eos.deadline = Some(d);
                            Ok(())
                        }
                        None => break,
                    }
                }
            };
            if let Err(interrupt) = outcome {
                return eos.interrupted(interrupt, &mut events, &mut shutdown).await;
            }
            if let Some(turn) = turn {
                if was_draining {
                    stats.stalled += turn.elapsed();
                } else {
                    stats.starved += turn.elapsed();
                }
            }
            if first_checkpoint || eos.records >= opts.max_events || eos.bytes >= opts.max_bytes {
                break;
            }
        }

        // ---- commit it (records + checkpoint), or nothing if nothing moved
        let checkpoint = eos.checkpoint();
        let moved = eos.moved(checkpoint.as_ref());
        // The very first checkpoint is committed at once: until it exists a crash would
        // restart at the server's *current* position.
        let idle_due =
            eos.committed.is_none() || eos.last_commit.elapsed() >= opts.idle_checkpoint_interval;
        let keepalive_due =
            eos.committed.is_some() && eos.last_commit.elapsed() >= opts.keepalive_interval;
        let checkpoint = match checkpoint {
            Some(c) if eos.records > 0 || keepalive_due || (moved && (idle_due || stopping)) => c,
            // Nothing to commit, or no position known yet (e.g. before the first GTID list).
            _ => {
                if eos.open {
                    sink.abort();
                    eos.open = false;
                }
                if stopping {
                    return Ok(Ending::Done);
                }
                continue;
            }
        };
        if stopping {
            eos.stop_by
                .get_or_insert_with(|| Instant::now() + SHUTDOWN_GRACE);
        }
        stats.queued = events.len();
        if let Err(f) = eos.commit(checkpoint, &mut shutdown, stats).await {
            return eos.failed(f, None).await;
        }
        stopping |= eos.stop_by.is_some();
        if stopping {
            return Ok(Ending::Done);
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
