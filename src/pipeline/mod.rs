//! The delivery loop of one connector: source events -> router -> Kafka -> in-order
//! acknowledgements -> checkpoint.
//!
//! Every source transaction boundary is queued as a marker behind that transaction's records
//! (the number of records sent before it). A marker is reached only when Kafka acknowledged
//! every record sent before it ([`crate::sink::DeliveryTracker::acked_below`]), so the
//! checkpoint can only ever name a position whose whole past was delivered; a failed
//! delivery stops the loop before any later marker is reached. In-flight records are bounded
//! ([`PipelineOptions::max_in_flight`]), which is the backpressure that slows the source
//! reader when Kafka is slow.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, watch};

use crate::checkpoint::{now_ms, Checkpoint, CheckpointStore};
use crate::error::Error;
use crate::event::{RowChange, SourceEvent, TableName};
use crate::metrics as m;
use crate::position::SourcePosition;
use crate::router::{EventRouter, RouteError, Routed};
use crate::sink::KafkaSink;

/// An outbox row the router cannot turn into a record (a definite failure): names the table
/// and the event id (never the payload) and says what happens to the checkpoint.
#[derive(Debug, Clone, thiserror::Error)]
#[error(
    "outbox row in {table} with event id {id} could not be routed: {source}. The checkpoint \
     stays at the last delivered transaction: fix the routing options and restart; a row \
     already in the log cannot be changed, so if it must be dropped, set the checkpoint past \
     its transaction (`outboxd status` shows positions)"
)]
pub struct Unroutable {
    /// The outbox table.
    pub table: TableName,
    /// The event id (`table.field.event.id`), `(none)` without one.
    pub id: String,
    /// Why the router refused it.
    #[source]
    pub source: RouteError,
}

impl Unroutable {
    /// The failure for `change`, which `router` refused with `source`.
    pub fn new(router: &EventRouter, change: &RowChange, source: RouteError) -> Self {
        let id = change
            .row
            .get(&router.config().field_event_id)
            .and_then(|v| v.as_text().map(|t| t.into_owned()))
            .unwrap_or_else(|| "(none)".into());
        Self {
            table: change.table.clone(),
            id,
            source,
        }
    }
}

/// Longest a shutdown waits for Kafka to acknowledge (and, exactly-once, commit) what was
/// read, counted from the signal: fits common stop timeouts (Kubernetes' 30 s). Past it the
/// connector stops with what is left unacknowledged not checkpointed, to be delivered again
/// after restart, and the process exits 1.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// What a delivery loop delivers with: the connector's router and producer, where durably
/// stored positions are published, and the shutdown signal.
pub struct LoopContext<'a> {
    /// The connector's name (logs, metrics labels).
    pub connector: &'a str,
    /// Turns row changes into records.
    pub router: &'a EventRouter,
    /// The connector's producer (transactional for the exactly-once loop).
    pub sink: &'a KafkaSink,
    /// Every position durably stored is published here: how a PostgreSQL source learns what
    /// it may confirm to the server as flushed.
    pub checkpointed: &'a watch::Sender<Option<SourcePosition>>,
    /// Turns true on shutdown: the loop drains and writes its final checkpoint.
    pub shutdown: watch::Receiver<bool>,
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
    commit_ts_ms: Option<i64>,
}

/// Checkpoint bookkeeping: what Kafka acknowledged versus what is durably stored.
struct Progress<'a> {
    connector: &'a str,
    store: &'a mut dyn CheckpointStore,
    checkpointed: &'a watch::Sender<Option<SourcePosition>>,
    acked: Option<SourcePosition>,
    stored: Option<SourcePosition>,
    last_write: Instant,
    last_advance: Instant,
}

impl Progress<'_> {
    fn advance(&mut self, position: SourcePosition) {
        self.acked = Some(position);
    }

    fn flush(&mut self) -> Result<(), Error> {
        let Some(acked) = &self.acked else {
            return Ok(());
        };
        if self.stored.as_ref() == Some(acked) {
            return Ok(());
        }
        let checkpoint = Checkpoint {
            connector: self.connector.to_string(),
            position: acked.clone(),
            skip: 0,
            updated_at_ms: now_ms(),
        };
        self.store.store(&checkpoint)?;
        self.checkpointed
            .send_replace(Some(checkpoint.position.clone()));
        self.stored = Some(checkpoint.position);
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

/// Runs the delivery loop until the source ends, `shutdown` turns true, or a failure.
///
/// `resumed_from` is the position the source started at (already stored). Every position
/// durably stored is published on `ctx.checkpointed`. On every exit
/// the last fully acknowledged position is written to `store` first (a drain on shutdown:
/// flush the producer, wait for acknowledgements, final checkpoint). Returns the source's or
/// the sink's failure; a failed delivery never lets a later position be stored.
pub async fn run(
    ctx: LoopContext<'_>,
    events: mpsc::Receiver<Result<SourceEvent, Error>>,
    store: &mut dyn CheckpointStore,
    resumed_from: Option<SourcePosition>,
    opts: &PipelineOptions,
) -> Result<(), Error> {
    let LoopContext {
        connector,
        router,
        sink,
        checkpointed,
        mut shutdown,
    } = ctx;
    checkpointed.send_replace(resumed_from.clone());
    let mut events = inbox::Inbox::new(events);
    let label = connector.to_string();
    let counters = m::EventCounters::new(connector);
    let deliveries = sink.deliveries();
    let mut markers: VecDeque<Marker> = VecDeque::new();
    // Acknowledgements already counted in the metrics.
    let mut counted = deliveries.acked();
    let mut progress = Progress {
        connector,
        store,
        checkpointed,
        acked: resumed_from.clone(),
        stored: resumed_from,
        last_write: Instant::now(),
        last_advance: Instant::now(),
    };
    let mut tick = tokio::time::interval(opts.checkpoint_interval.min(Duration::from_secs(1)));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut source_open = true;
    let mut drain_deadline: Option<Instant> = None;

    let outcome: Result<(), Error> = loop {
        let in_flight = deliveries.unacked().0 as usize;
        tokio::select! {
            biased;
            changed = shutdown.changed(), if source_open => {
                if changed.is_err() || *shutdown.borrow() {
                    tracing::info!(connector, "shutdown: draining in-flight records");
                    source_open = false;
                    events.close();
                    drain_deadline = Some(Instant::now() + SHUTDOWN_GRACE);
                }
            }
            ev = events.recv(), if source_open && in_flight < opts.max_in_flight => {
                match ev {
                    None => { source_open = false; }
                    Some(Err(f)) => break Err(f),
                    Some(Ok(ev)) => {
                        if let Err(f) = handle_event(&label, &counters, ev, router, sink, &mut markers).await {
                            break Err(f);
                        }
                    }
                }
            }
            // Markers are checked after every turn; this only wakes the loop when it waits.
            _ = deliveries.changed(), if in_flight > 0 => {}
            _ = tick.tick() => {
                if progress.last_write.elapsed() >= opts.checkpoint_interval {
                    if let Err(f) = progress.flush() { break Err(f); }
                }
                progress.report_gauges();
            }
        }
        if deliveries.failure().is_some() {
            // The records refused with it, and the cause among them, report one by one.
            break Err(deliveries
                .settled_failure(crate::sink::DeliveryTracker::SETTLE_WITHIN)
                .or_else(|| deliveries.failure())
                .expect("a failure stays recorded")
                .into());
        }
        let acked = deliveries.acked();
        counters.produced.increment(acked.0 - counted.0);
        counters.bytes.increment(acked.1 - counted.1);
        counted = acked;
        let acked_below = deliveries.acked_below();
        let mut reached = false;
        while markers.front().is_some_and(|mk| mk.after <= acked_below) {
            let mk = markers.pop_front().expect("front exists");
            progress.advance(mk.position);
            reached = true;
        }
        if reached {
            // The lag is the age of the oldest commit still waiting for Kafka.
            counters
                .stream
                .pending_since(markers.iter().find_map(|mk| mk.commit_ts_ms));
        }
        // The very first checkpoint is written at once: until it exists a crash would
        // restart at the server's *current* position.
        if reached
            && (progress.stored.is_none()
                || progress.last_write.elapsed() >= opts.checkpoint_interval)
        {
            if let Err(f) = progress.flush() {
                break Err(f);
            }
        }
        if !source_open && markers.is_empty() && deliveries.unacked().0 == 0 {
            break Ok(());
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
    let flushed = progress.flush();
    progress.report_gauges();
    outcome.and(flushed)
}

async fn handle_event(
    label: &str,
    counters: &m::EventCounters,
    ev: SourceEvent,
    router: &EventRouter,
    sink: &KafkaSink,
    markers: &mut VecDeque<Marker>,
) -> Result<(), Error> {
    let (position, commit_ts_ms) = match ev {
        SourceEvent::Change(mut change) => {
            counters.read.increment(1);
            let routed = router
                .route_taking(&mut change)
                .map_err(|e| Unroutable::new(router, &change, e))?;
            match routed {
                Routed::Record(record) => sink.send(&record).await?,
                Routed::Skipped(reason) => {
                    metrics::counter!(m::EVENTS_SKIPPED, m::LABEL_CONNECTOR => label.to_string(), m::LABEL_REASON => reason.label())
                        .increment(1);
                }
            }
            return Ok(());
        }
        SourceEvent::Commit {
            position,
            commit_ts_ms,
        } => {
            counters.stream.commit_read(commit_ts_ms);
            (position, Some(commit_ts_ms))
        }
        SourceEvent::Progress { position } => (position, None),
    };
    markers.push_back(Marker {
        after: sink.deliveries().sent(),
        position,
        commit_ts_ms,
    });
    Ok(())
}

pub mod inbox;
pub mod transactional;
