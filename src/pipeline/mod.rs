//! The delivery loops of one connector: source events -> router -> Kafka -> checkpoint.
//!
//! This module is the at-least-once loop (in-order acknowledgements -> checkpoint);
//! [`transactional`] is the exactly-once one (records and checkpoint in one Kafka
//! transaction). Both hold a source transaction's records back until its commit
//! ([`txn_buffer`]), route with the connector's error policy ([`stage`]), and stop at or
//! dead-letter events that cannot be delivered ([`poison`], [`dead_letter`]).
//!
//! At-least-once: every source transaction boundary is queued as a marker behind that
//! transaction's records (the number of records sent before it). A marker is reached only
//! when Kafka acknowledged every record sent before it
//! ([`crate::sink::DeliveryTracker::acked_below`]), so the checkpoint can only ever name a
//! position whose whole past was delivered; a failed delivery stops the loop before any
//! later marker is reached. In-flight records are bounded ([`PipelineOptions::max_in_flight`]),
//! which is the backpressure that slows the source reader when Kafka is slow.

use std::collections::{BTreeSet, VecDeque};
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, watch};

use self::inbox::Inbox;
use self::poison::{DeadLetterRefused, Ending, Plan, Poison, Replay};
use self::stage::Stage;
use self::txn_buffer::{Admitted, Pending, SourceTxn};
use crate::checkpoint::{now_ms, Checkpoint, CheckpointStore};
use crate::config::ErrorPolicy;
use crate::cutover::dedupe::Dedupe;
use crate::event::SourceEvent;
use crate::metrics as m;
use crate::position::SourcePosition;
use crate::router::EventRouter;
use crate::sink::{DeliveryTracker, KafkaRecord, KafkaSink, RecordSink, Refused, SinkError};
use crate::source::SourceError;

/// Longest a shutdown waits for Kafka to acknowledge (and, exactly-once, commit) what was
/// read, counted from the signal: fits common stop timeouts (Kubernetes' 30 s). Past it the
/// connector stops with what is left unacknowledged not checkpointed, to be delivered again
/// after restart, and the process exits 1.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// What a delivery loop delivers with: the connector's router and producer, where durably
/// stored positions are published, and the shutdown signal.
pub struct LoopContext<'a, S = KafkaSink> {
    /// The connector's name (logs, metrics labels).
    pub connector: &'a str,
    /// Turns row changes into records.
    pub router: &'a EventRouter,
    /// What happens to events that cannot be delivered.
    pub policy: &'a ErrorPolicy,
    /// The connector's sink: Kafka's producer (transactional for the exactly-once loop), or
    /// any [`RecordSink`] for the at-least-once loop.
    pub sink: &'a S,
    /// Every position durably stored is published here: how a PostgreSQL source learns what
    /// it may confirm to the server as flushed.
    pub checkpointed: &'a watch::Sender<Option<SourcePosition>>,
    /// Turns true on shutdown: the loop drains and writes its final checkpoint.
    pub shutdown: watch::Receiver<bool>,
    /// A switch from Debezium in progress: the events it delivered already, skipped; the
    /// checkpoints carry its note until it is done.
    pub dedupe: Option<&'a Dedupe>,
    /// While it holds true, no event is taken from the source (Kafka Connect's pause): what
    /// was sent is still acknowledged and checkpointed, a shutdown still drains.
    pub paused: watch::Receiver<bool>,
    /// Where the topics of the records sent are noted (Kafka Connect's topic tracking).
    pub topics: Option<&'a crate::active_topics::ActiveTopics>,
}

/// Tuning of the delivery loop.
#[derive(Debug, Clone)]
pub struct PipelineOptions {
    /// Records sent but not yet acknowledged, at most (default 4,000: enough to keep the
    /// broker busy at ~100k events/s with ~10 ms acks; more only costs memory).
    pub max_in_flight: usize,
    /// How often the checkpoint is written while positions advance (default 1 s). A crash
    /// loses at most this much checkpoint progress: those events are delivered again.
    pub checkpoint_interval: Duration,
}

impl Default for PipelineOptions {
    fn default() -> Self {
        Self {
            max_in_flight: 4_000,
            checkpoint_interval: Duration::from_secs(1),
        }
    }
}

/// A source position waiting for the records sent before it.
struct Marker {
    /// Records sent before it: the position is delivered once every record numbered below
    /// this is acknowledged.
    after: u64,
    position: SourcePosition,
    /// Rows of the transaction after `position` delivered (a stop inside a split one).
    skip: u64,
    commit_ts_ms: Option<i64>,
}

/// Checkpoint bookkeeping: what Kafka acknowledged versus what is durably stored.
struct Progress<'a> {
    connector: &'a str,
    dedupe: Option<&'a Dedupe>,
    store: &'a mut dyn CheckpointStore,
    checkpointed: &'a watch::Sender<Option<SourcePosition>>,
    /// The last position (and skip) whose past is acknowledged, and its marker's `after`.
    acked: Option<(SourcePosition, u64)>,
    acked_after: u64,
    /// What is stored, and its marker's `after` (record ordinals of a replay count from it).
    stored: Option<Checkpoint>,
    stored_after: u64,
    last_write: Instant,
    last_advance: Instant,
}

impl Progress<'_> {
    fn advance(&mut self, mk: Marker) {
        self.acked = Some((mk.position, mk.skip));
        self.acked_after = mk.after;
    }

    async fn flush(&mut self) -> Result<(), Error> {
        let Some((position, skip)) = &self.acked else {
            return Ok(());
        };
        if self.stored.as_ref().map(|c| (&c.position, c.skip)) == Some((position, *skip)) {
            return Ok(());
        }
        let checkpoint = Checkpoint {
            connector: self.connector.to_string(),
            position: position.clone(),
            skip: *skip,
            updated_at_ms: now_ms(),
            cutover: self.dedupe.and_then(Dedupe::note),
        };
        self.store.store(&checkpoint).await?;
        self.checkpointed
            .send_replace(Some(checkpoint.position.clone()));
        self.stored = Some(checkpoint);
        self.stored_after = self.acked_after;
        self.last_write = Instant::now();
        self.last_advance = Instant::now();
        metrics::counter!(m::CHECKPOINT_WRITES, m::LABEL_CONNECTOR => self.connector.to_string())
            .increment(1);
        Ok(())
    }

    fn report_gauges(&self) {
        let label = self.connector.to_string();
        metrics::gauge!(m::CHECKPOINT_AGE, m::LABEL_CONNECTOR => label)
            .set(self.last_advance.elapsed().as_secs_f64());
    }
}

/// What interrupts a delivery loop's reading.
enum Interrupt {
    /// A failure (the source's, the sink's, the checkpoint store's).
    Failed(Error),
    /// librdkafka refused to enqueue the record numbered `seq` for good (found on sending):
    /// like a refusal in a delivery report.
    RefusedOnSend(Refused),
    /// An event to stop at.
    Poison(Box<Poison>),
    /// A delivery failed (the tracker has it): handled like one seen between turns.
    Undelivered,
}

impl Interrupt {
    /// What a failed send of `record`, number `seq` (a dead letter when `dead`), means.
    fn of_send(f: SinkError, record: &KafkaRecord, seq: u64, dead: bool) -> Self {
        match (f.refusal(), dead) {
            (Some(_), true) => Interrupt::Failed(DeadLetterRefused::of(f)),
            (Some(_), false) => Interrupt::RefusedOnSend(Refused {
                seq,
                size: crate::sink::tracker::counted_size(record.approx_size()),
                refusal: f,
            }),
            (None, _) => Interrupt::Failed(f.into()),
        }
    }
}

/// The at-least-once loop's reading side: routing, the held-back transaction, sending,
/// markers.
struct Alo<'a, S> {
    sink: &'a S,
    deliveries: &'a DeliveryTracker,
    counters: m::EventCounters,
    stage: Stage<'a>,
    markers: VecDeque<Marker>,
    txn: SourceTxn,
    /// Number of the first record of this run: record ordinals count from it.
    base_seq: u64,
    /// Numbers of dead letters sent and not yet acknowledged.
    dead_seqs: BTreeSet<u64>,
    /// Turns true on shutdown.
    signal: watch::Receiver<bool>,
}

impl<S: RecordSink> Alo<'_, S> {
    async fn send_all(
        &mut self,
        pending: Vec<Pending>,
        commit: Option<&SourcePosition>,
    ) -> Result<(), Interrupt> {
        for p in pending {
            if p.dead {
                // A dead letter waits for every record before it: were one of them refused,
                // its own dead letter (written by the replay that follows) must come first.
                self.settle_before_dead_letter().await?;
            }
            let (seq, _, dead) = send_pending(self.sink, self.stage.policy(), p, commit).await?;
            if dead {
                self.dead_seqs.insert(seq);
                self.counters.dead_lettered.increment(1);
            }
        }
        Ok(())
    }

    /// Waits until every record sent is acknowledged ([`Interrupt::Undelivered`] when one
    /// fails), giving up at shutdown (transient: what was read is delivered again after
    /// restart).
    async fn settle_before_dead_letter(&mut self) -> Result<(), Interrupt> {
        let mut signal = self.signal.clone();
        tokio::select! {
            r = self.deliveries.all_acked() => r.map_err(|_| Interrupt::Undelivered),
            _ = signal.wait_for(|v| *v) => Err(Interrupt::Failed(Error::ShutdownTimeout {
                what: "acknowledge the records ahead of a dead letter".into(),
                grace: Duration::ZERO,
                consequence: "they are not checkpointed and will be delivered again after \
                              restart",
            })),
        }
    }

    /// Queues `position` (with the rows of the transaction after it already delivered: a
    /// resumed checkpoint's `skip` until that transaction's commit) behind what was sent.
    fn mark(&mut self, position: SourcePosition, commit_ts_ms: Option<i64>) {
        self.markers.push_back(Marker {
            after: self.deliveries.sent(),
            position,
            skip: self.txn.skip,
            commit_ts_ms,
        });
    }

    async fn on_event(&mut self, ev: SourceEvent) -> Result<(), Interrupt> {
        match ev {
            SourceEvent::Change(change) => {
                self.counters.read.increment(1);
                let sent = self.deliveries.sent() - self.base_seq;
                let pending = admitted(self.txn.admit(&self.stage, change, sent))?;
                self.send_all(pending, None).await
            }
            SourceEvent::Commit {
                position,
                commit_ts_ms,
            } => {
                self.counters.stream.commit_read(commit_ts_ms);
                let held = self.txn.commit(position.clone());
                self.send_all(held, Some(&position)).await?;
                self.mark(position, Some(commit_ts_ms));
                Ok(())
            }
            SourceEvent::Progress { position } => {
                if self.txn.between() {
                    self.txn.position = Some(position.clone());
                    self.mark(position, None);
                }
                Ok(())
            }
        }
    }
}

/// What an admitted row change asks of a loop: records to send now (perhaps none), or the
/// interrupt (a stop at a poison event, a failure).
fn admitted(admitted: Result<Admitted, Error>) -> Result<Vec<Pending>, Interrupt> {
    match admitted.map_err(Interrupt::Failed)? {
        Admitted::Nothing => Ok(Vec::new()),
        Admitted::Stop(poison) => Err(Interrupt::Poison(poison)),
        Admitted::Send(pending) => Ok(pending),
    }
}

/// Sends `pending` (a dead letter gets its transaction's `commit` position when known):
/// the record's number, its size, and whether it is a dead letter.
async fn send_pending<S: RecordSink>(
    sink: &S,
    policy: &ErrorPolicy,
    pending: Pending,
    commit: Option<&SourcePosition>,
) -> Result<(u64, usize, bool), Interrupt> {
    let Pending { mut record, dead } = pending;
    if let (true, Some(c)) = (dead, commit) {
        dead_letter::with_commit(&mut record, policy, c);
    }
    let seq = sink.deliveries().sent();
    sink.send(&record)
        .await
        .map_err(|f| Interrupt::of_send(f, &record, seq, dead))?;
    Ok((seq, record.approx_size(), dead))
}

/// Longest a stop at a poison event waits for the records ahead of it to be acknowledged.
const STOP_DRAIN: Duration = Duration::from_secs(60);

/// Runs the delivery loop until the source ends, `shutdown` turns true, a failure, or a
/// replay.
///
/// `resume` is the checkpoint the source started at (already stored), `plan` a replay's
/// (empty otherwise). Every position durably stored is published on `ctx.checkpointed`. On
/// every exit the last fully acknowledged position is written to `store` first (a drain on
/// shutdown: flush the producer, wait for acknowledgements, final checkpoint). Returns the
/// source's or the sink's failure; a failed delivery never lets a later position be stored.
/// Records Kafka refused end the loop with [`Ending::Replay`] from the checkpoint stored
/// before them ([`poison`]).
pub async fn run<S: RecordSink>(
    ctx: LoopContext<'_, S>,
    events: mpsc::Receiver<Result<SourceEvent, SourceError>>,
    store: &mut dyn CheckpointStore,
    resume: Option<Checkpoint>,
    plan: Plan,
    opts: &PipelineOptions,
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
    let resumed_from = resume.as_ref().map(|c| c.position.clone());
    checkpointed.send_replace(resumed_from.clone());
    let mut events = inbox::Inbox::new(events).paused_by(paused);
    let deliveries = sink.deliveries();
    // Reports of an earlier run on this producer (before a replay) are done with.
    deliveries.rebase();
    let mut alo = Alo {
        sink,
        deliveries,
        counters: m::EventCounters::new(connector),
        stage: Stage::new(connector, router, policy, sink.max_record_bytes(), plan)
            .with_limit_of(sink.record_limit())
            .with_dedupe(dedupe)
            .with_topics(topics),
        markers: VecDeque::new(),
        txn: SourceTxn::new(resume.as_ref(), opts.max_in_flight / 2, 4 * 1024 * 1024),
        base_seq: deliveries.sent(),
        dead_seqs: BTreeSet::new(),
        signal: shutdown.clone(),
    };
    // Acknowledgements already counted in the metrics.
    let mut counted = deliveries.acked();
    let mut progress = Progress {
        connector,
        dedupe,
        store,
        checkpointed,
        acked: resume.as_ref().map(|c| (c.position.clone(), c.skip)),
        acked_after: alo.base_seq,
        stored: resume,
        stored_after: alo.base_seq,
        last_write: Instant::now(),
        last_advance: Instant::now(),
    };
    let mut tick = tokio::time::interval(opts.checkpoint_interval.min(Duration::from_secs(1)));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut source_open = true;
    let mut drain_deadline: Option<Instant> = None;

    let outcome: Result<Ending, Error> = loop {
        let in_flight = deliveries.unacked().0 as usize;
        let turn: Result<(), Interrupt> = tokio::select! {
            biased;
            changed = shutdown.changed(), if source_open => {
                if changed.is_err() || *shutdown.borrow() {
                    tracing::info!(connector, "shutdown: draining in-flight records");
                    source_open = false;
                    events.close();
                    drain_deadline = Some(Instant::now() + SHUTDOWN_GRACE);
                }
                Ok(())
            }
            ev = events.recv(), if source_open && in_flight < opts.max_in_flight => {
                match ev {
                    None => {
                        source_open = false;
                        Ok(())
                    }
                    Some(Err(f)) => Err(Interrupt::Failed(f.into())),
                    Some(Ok(ev)) => alo.on_event(ev).await,
                }
            }
            // Markers are checked after every turn; this only wakes the loop when it waits.
            _ = deliveries.changed(), if in_flight > 0 => Ok(()),
            _ = tick.tick() => {
                if progress.last_write.elapsed() >= opts.checkpoint_interval {
                    if let Err(f) = progress.flush().await { break Err(f); }
                }
                progress.report_gauges();
                Ok(())
            }
        };
        let refused_on_send = match turn {
            Ok(()) => None,
            Err(Interrupt::Failed(f)) => break Err(f),
            Err(Interrupt::Poison(p)) => {
                break stop_at(p, &mut alo, &mut progress, &mut events, &mut shutdown).await
            }
            Err(Interrupt::RefusedOnSend(r)) => Some(r),
            Err(Interrupt::Undelivered) => None,
        };
        if refused_on_send.is_some() || deliveries.failure().is_some() {
            break refused(&mut alo, &mut progress, refused_on_send).await;
        }
        let acked = deliveries.acked();
        alo.counters.produced.increment(acked.0 - counted.0);
        alo.counters.bytes.increment(acked.1 - counted.1);
        counted = acked;
        let reached = reach_markers(&mut alo, &mut progress);
        if reached {
            // The lag is the age of the oldest commit still waiting for Kafka.
            alo.counters
                .stream
                .pending_since(alo.markers.iter().find_map(|mk| mk.commit_ts_ms));
        }
        // The very first checkpoint is written at once: until it exists a crash would
        // restart at the server's *current* position.
        if reached
            && (progress.stored.is_none()
                || progress.last_write.elapsed() >= opts.checkpoint_interval)
        {
            if let Err(f) = progress.flush().await {
                break Err(f);
            }
        }
        if !source_open && alo.markers.is_empty() && deliveries.unacked().0 == 0 {
            break Ok(Ending::Done);
        }
        if drain_deadline.is_some_and(|d| Instant::now() >= d) {
            // Kafka does not acknowledge (unreachable?): stop anyway, before an orchestrator
            // kills us. The unacknowledged records are not checkpointed, so a restart
            // delivers them again.
            break Err(Error::ShutdownTimeout {
                what: format!("acknowledge {} in-flight records", deliveries.unacked().0),
                grace: SHUTDOWN_GRACE,
                consequence: "they are not checkpointed and will be delivered again after \
                              restart",
            });
        }
    };

    // Whatever happened, positions already acknowledged are worth keeping. On a failure, the
    // records still in flight may or may not land; they are not waited for and nothing after
    // them is stored.
    let flushed = progress.flush().await;
    progress.report_gauges();
    match (outcome, flushed) {
        (Ok(Ending::Done), f) => f.map(|()| Ending::Done),
        (outcome, _) => outcome,
    }
}

/// Pops every marker whose records are all acknowledged into `progress`; true if one was.
fn reach_markers<S: RecordSink>(alo: &mut Alo<'_, S>, progress: &mut Progress<'_>) -> bool {
    let acked_below = alo.deliveries.acked_below();
    let mut reached = false;
    while alo
        .markers
        .front()
        .is_some_and(|mk| mk.after <= acked_below)
    {
        let mk = alo.markers.pop_front().expect("front exists");
        progress.advance(mk);
        reached = true;
    }
    alo.dead_seqs = alo.dead_seqs.split_off(&acked_below);
    reached
}

/// A delivery failed (or, with `on_send`, a record was refused when sent). When the records
/// waited for (or failed on) a topic that does not exist, that failure
/// ([`KafkaSink::missing_topics`]). When every failure is a refusal for good, the loop is replayed from the checkpoint stored once the
/// records before them are acknowledged, with a plan to dead-letter them (or stop at the
/// first): [`poison`]. Otherwise the failure that best tells the cause.
async fn refused<S: RecordSink>(
    alo: &mut Alo<'_, S>,
    progress: &mut Progress<'_>,
    on_send: Option<Refused>,
) -> Result<Ending, Error> {
    let deliveries = alo.deliveries;
    // The records refused with it, and the cause among them, report one by one.
    let settled = deliveries.settled_failure(DeliveryTracker::SETTLE_WITHIN);
    let only_refusals = on_send.is_some() || deliveries.only_refusals();
    let mut refused = deliveries.take_refused();
    refused.extend(on_send);
    let Some(cause) = settled
        .or_else(|| deliveries.failure())
        .or_else(|| refused.first().map(|r| r.refusal.clone()))
    else {
        return Err(Error::TaskLost {
            detail: "a delivery failure without a cause".into(),
        });
    };
    // Records that waited or failed for a topic that does not exist: named, and a stop
    // when nothing creates it (not a refusal of each record, not a retry for ever).
    if let Some(missing) = alo.sink.missing_topics(&cause).await {
        return Err(missing.into());
    }
    if !only_refusals || refused.is_empty() {
        return Err(cause.into());
    }
    // Everything acknowledged before the first refused record is checkpointed: the replay
    // starts there.
    reach_markers(alo, progress);
    progress.flush().await?;
    let (Some(from), stored_after) = (progress.stored.clone(), progress.stored_after) else {
        return Err(cause.into());
    };
    let dead_letters = alo.stage.policy().dead_letters().is_some();
    let mut plan = std::mem::take(alo.stage.plan_mut());
    plan.rebase(stored_after - alo.base_seq);
    let refused = poison::ordinals_from(refused, stored_after);
    let is_dead_letter = |ordinal: u64| alo.dead_seqs.contains(&(ordinal + stored_after));
    poison::plan_refusals(
        &mut plan,
        refused,
        is_dead_letter,
        dead_letters,
        progress.connector,
    )?;
    Ok(Ending::Replay(Replay { from, plan }))
}

/// Stops at `poison`: waits until every record sent before it is acknowledged, checkpoints
/// up to its source transaction (or, for a split one, up to the event), reads on to the
/// transaction's end, and returns the poison.
async fn stop_at<S: RecordSink>(
    poison: Box<Poison>,
    alo: &mut Alo<'_, S>,
    progress: &mut Progress<'_>,
    events: &mut Inbox<Result<SourceEvent, SourceError>>,
    shutdown: &mut watch::Receiver<bool>,
) -> Result<Ending, Error> {
    let skip = alo.txn.stop_at(poison.row);
    if alo.txn.spilled {
        if let Some(position) = alo.txn.position.clone() {
            alo.markers.push_back(Marker {
                after: alo.deliveries.sent(),
                position,
                skip,
                commit_ts_ms: None,
            });
        }
    }
    let drained = tokio::select! {
        r = tokio::time::timeout(STOP_DRAIN, alo.deliveries.all_acked()) => r.ok(),
        _ = shutdown.wait_for(|v| *v) => None,
    };
    match drained {
        Some(Ok(())) => {}
        Some(Err(_)) => return refused(alo, progress, None).await,
        None => {
            return Err(Error::ShutdownTimeout {
                what: format!(
                    "acknowledge the {} records ahead of outbox event {}, which cannot be \
                     delivered",
                    alo.deliveries.unacked().0,
                    poison.id
                ),
                grace: STOP_DRAIN,
                consequence: "they are not checkpointed and will be delivered again after \
                              restart (the event is met again then)",
            })
        }
    }
    reach_markers(alo, progress);
    progress.flush().await?;
    Err(poison::stopped(poison, events, shutdown).await)
}

pub mod dead_letter;
mod error;
pub use error::Error;
pub mod ignored;
pub mod inbox;
pub mod poison;
pub mod stage;
pub mod transactional;
pub mod txn_buffer;

#[cfg(test)]
mod loop_tests;
