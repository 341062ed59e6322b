//! Sources: where outbox events come from.
//!
//! Each source has three layers: a pure decoder (bytes in, typed messages out, no I/O:
//! `mysql::decode`, `postgres::pgoutput`), a session (`mysql::stream`, `postgres::stream`:
//! socket, keepalives, status updates) with its catalog side (`mysql::server`,
//! `postgres::catalog`: server facts, requirements, slots and publications, shared with
//! `check` and `status`), and an adapter (keeps the outbox rows and maps them to
//! [`SourceEvent`]s).
//!
//! Every source implements `Source`: one session, from a position to a failure.
//! `supervise` runs sessions one after the other, owning reconnects, backoff and what a
//! transient or definite failure means; the events go through an `Outlet` into the
//! connector's delivery loop. Data flows one way: decoder → adapter → outlet → delivery loop;
//! the only thing flowing back is the durably checkpointed position, on a watch channel.

pub(crate) mod check;
mod driver;
mod error;
pub mod mysql;
pub mod postgres;
pub(crate) mod supervise;

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{mpsc, watch};

use crate::config::{ConnectorConfig, SourceConfig};
use crate::event::SourceEvent;
use crate::health::{ConnectorState, Health};
use crate::lease::Lease;
use crate::metrics as m;
use crate::position::SourcePosition;

pub(crate) use driver::Driver;
pub use error::SourceError;

/// Filtered source transactions (none of whose rows are outbox rows) between two
/// [`SourceEvent::Progress`] reports, at most, on every source: a busy server with a quiet
/// outbox still lets the checkpoint follow it without one event per transaction.
pub(crate) const PROGRESS_EVERY: u64 = 100;

/// Events buffered between a source session and the delivery loop.
pub(crate) const CHANNEL_CAPACITY: usize = 1024;

/// The pipeline stopped receiving (it finished or failed): the session ends quietly.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Closed;

/// How a session's stream ends early: the delivery loop stopped receiving, or the session
/// failed with its source's error `E`. Both sources' streams return it, so `?` works on
/// their errors and on [`Closed`] alike; [`Stop::session`] makes it the session's result.
pub(crate) enum Stop<E> {
    /// The delivery loop stopped receiving.
    Closed,
    /// The session failed.
    Failed(E),
}

impl<E: Into<SourceError>> From<E> for Stop<E> {
    fn from(e: E) -> Self {
        Stop::Failed(e)
    }
}

impl<E> From<Closed> for Stop<E> {
    fn from(_: Closed) -> Self {
        Stop::Closed
    }
}

impl<E: Into<SourceError>> Stop<E> {
    /// A stream's end as [`Source::session`] reports it: the delivery loop no longer
    /// receiving is a quiet end.
    pub(crate) fn session(ended: Result<(), Self>) -> Result<(), SourceError> {
        match ended {
            Ok(()) | Err(Stop::Closed) => Ok(()),
            Err(Stop::Failed(e)) => Err(e.into()),
        }
    }
}

/// A source session's end of the channel into the delivery loop.
///
/// It remembers what it handed on, which is what the supervisor needs to resume after a lost
/// connection: the position after the last transaction (or progress) sent, and whether rows
/// of an unfinished transaction were sent (then a new session would send them again, and the
/// connector must restart from its checkpoint instead).
#[derive(Debug)]
pub(crate) struct Outlet {
    tx: mpsc::Sender<Result<SourceEvent, SourceError>>,
    resume: Option<SourcePosition>,
    mid_transaction: bool,
    streamed: bool,
    /// The connector's streaming figures: each commit handed on counts toward the lag
    /// until the delivery loop takes it (it may wait in the channel while Kafka is down).
    stats: Arc<m::StreamingStats>,
}

impl Outlet {
    /// An outlet of connector `connector` sending into `tx` (a new channel: nothing of a
    /// previous one waits any more), whose sessions start at `resume` (the checkpoint;
    /// `None` without one).
    pub fn new(
        connector: &str,
        tx: mpsc::Sender<Result<SourceEvent, SourceError>>,
        resume: Option<SourcePosition>,
    ) -> Self {
        let stats = m::StreamingStats::of(connector);
        stats.channel_opened();
        Self {
            tx,
            resume,
            mid_transaction: false,
            streamed: false,
            stats,
        }
    }

    /// Where the next session starts: the position after the last transaction or progress
    /// handed on, else the one the outlet was created with.
    pub fn resume_position(&self) -> Option<&SourcePosition> {
        self.resume.as_ref()
    }

    /// True while rows of a transaction whose commit was not handed on yet were sent.
    pub fn mid_transaction(&self) -> bool {
        self.mid_transaction
    }

    /// Hands `event` on, waiting for room (backpressure).
    pub async fn send(&mut self, event: SourceEvent) -> Result<(), Closed> {
        self.reserve().await?.send(event);
        Ok(())
    }

    /// Waits for room for one event. Cancel safe: nothing is sent until [`Permit::send`].
    pub async fn reserve(&mut self) -> Result<Permit<'_>, Closed> {
        let permit = self.tx.reserve().await.map_err(|_| Closed)?;
        Ok(Permit {
            permit,
            resume: &mut self.resume,
            mid_transaction: &mut self.mid_transaction,
            streamed: &mut self.streamed,
            stats: &self.stats,
        })
    }

    /// Hands a failure on: the delivery loop stops with it (and the connector restarts from
    /// its checkpoint, or stops, as the failure's class says).
    pub async fn fail(&self, error: SourceError) {
        let _ = self.tx.send(Err(error)).await;
    }

    /// Whether anything was handed on since the last call (a session that streamed resets
    /// the backoff).
    fn take_streamed(&mut self) -> bool {
        std::mem::take(&mut self.streamed)
    }
}

/// Room for one event in the channel; see [`Outlet::reserve`].
pub(crate) struct Permit<'a> {
    permit: mpsc::Permit<'a, Result<SourceEvent, SourceError>>,
    resume: &'a mut Option<SourcePosition>,
    mid_transaction: &'a mut bool,
    streamed: &'a mut bool,
    stats: &'a m::StreamingStats,
}

impl Permit<'_> {
    /// Sends `event`, noting the position it reaches (and a commit's time, for the lag).
    pub fn send(self, event: SourceEvent) {
        match &event {
            SourceEvent::Change(_) => *self.mid_transaction = true,
            SourceEvent::Commit {
                position,
                commit_ts_ms,
            } => {
                *self.resume = Some(position.clone());
                *self.mid_transaction = false;
                self.stats.commit_handed_on(*commit_ts_ms);
            }
            SourceEvent::Progress { position } => {
                *self.resume = Some(position.clone());
                *self.mid_transaction = false;
            }
        }
        *self.streamed = true;
        self.permit.send(Ok(event));
    }
}

/// What a source's supervisor waits to retry, if it does: the wait and the failure, from the
/// failure until the source streams again. The connector reads it when it stops: a shutdown
/// during such a wait is not a clean stop (the source never caught up), and exits 1.
#[derive(Debug, Clone, Default)]
pub(crate) struct RetryState(Arc<Mutex<Option<(Duration, SourceError)>>>);

impl RetryState {
    fn slot(&self) -> std::sync::MutexGuard<'_, Option<(Duration, SourceError)>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The source waits `wait` to retry after `error`.
    pub(crate) fn retrying(&self, wait: Duration, error: SourceError) {
        *self.slot() = Some((wait, error));
    }

    /// The source streams again.
    fn clear(&self) {
        *self.slot() = None;
    }

    /// What the source was waiting to retry when asked, if anything.
    pub(crate) fn pending(&self) -> Option<(Duration, SourceError)> {
        self.slot().clone()
    }
}

/// What every session of a connector's source gets.
pub(crate) struct SourceContext {
    /// The connector's name, for logs, metrics and health.
    pub connector: String,
    /// Where connector states are reported.
    pub health: Health,
    /// Turns true on shutdown.
    pub shutdown: watch::Receiver<bool>,
    /// The positions the delivery loop durably checkpointed (every record before them
    /// acknowledged by Kafka): the only ones a source may confirm to its server.
    pub checkpointed: watch::Receiver<Option<SourcePosition>>,
    /// The channel into the delivery loop.
    pub out: Outlet,
    /// Whether the current session reached [`streaming`](Self::streaming).
    pub(crate) connected: bool,
    /// What the supervisor waits to retry.
    pub(crate) retry: RetryState,
    /// Whether the connector is still this process's: no reconnect once it is not.
    pub(crate) lease: Lease,
    /// The failed attempts since the source last streamed, for the supervisor's log lines.
    pub(crate) failing: Option<supervise::FailingStreak>,
}

impl SourceContext {
    /// Reports that the session is connected and streaming (after failed attempts, one INFO
    /// line says so).
    pub fn streaming(&mut self) {
        self.connected = true;
        if let Some(streak) = self.failing.take() {
            streak.ended(&self.connector);
        }
        self.retry.clear();
        self.health.set(&self.connector, ConnectorState::Streaming);
        m::StreamingStats::of(&self.connector).set_connected(true);
    }
}

/// Longest a source waits, before a definite stop, for the delivery loop to checkpoint what
/// is ahead of it ([`SourceContext::checkpoint_before_stop`]).
pub(crate) const STOP_CHECKPOINT_WAIT: Duration = Duration::from_secs(60);

impl SourceContext {
    /// Before a definite stop at something the source cannot deliver (or will not read
    /// past): makes sure the delivery loop durably checkpoints everything ahead of it, at
    /// most `within`, so that the stored checkpoint is exactly where the stop says.
    ///
    /// `position` is the position right before what the source stops at, a transaction
    /// boundary. Between transactions it is handed on as progress and waited for. When rows
    /// of an unfinished transaction were handed on (`Outlet::mid_transaction`: the delivery
    /// loop holds them and drops them when the source fails), the last position handed on
    /// is waited for instead: only transactions without outbox rows lie between it and
    /// `position`. Returns the position checkpointed; `None` when that did not happen within
    /// `within` (then the stop should be transient: a restart from the checkpoint meets it
    /// again); `Err(Closed)` when the loop stopped receiving, or at shutdown.
    pub(crate) async fn checkpoint_before_stop(
        &mut self,
        position: SourcePosition,
        within: Duration,
    ) -> Result<Option<SourcePosition>, Closed> {
        let target = match (self.out.mid_transaction(), self.out.resume_position()) {
            (true, Some(handed_on)) => handed_on.clone(),
            _ => {
                self.out
                    .send(SourceEvent::Progress {
                        position: position.clone(),
                    })
                    .await?;
                position
            }
        };
        let mut shutdown = self.shutdown.clone();
        tokio::select! {
            stored = tokio::time::timeout(
                within,
                self.checkpointed.wait_for(|p| p.as_ref() == Some(&target)),
            ) => match stored {
                Ok(Ok(_)) => Ok(Some(target)),
                Ok(Err(_)) => Err(Closed),
                Err(_) => Ok(None),
            },
            _ = shutdown.wait_for(|v| *v) => Err(Closed),
        }
    }
}

/// A database outbox events are streamed from.
pub(crate) trait Source: Send {
    /// What the stream is called in logs: `binlog`, `PostgreSQL replication`.
    fn stream_name(&self) -> &'static str;

    /// One session: connects, streams from `ctx.out.resume_position()` (or the configured
    /// start without one) into `ctx.out` until the connection fails (`Err`) or the delivery
    /// loop stops receiving (`Ok`). Calls [`SourceContext::streaming`] once streaming.
    fn session(
        &mut self,
        ctx: &mut SourceContext,
    ) -> impl Future<Output = Result<(), SourceError>> + Send;

    /// Longest wait between reconnection attempts.
    fn reconnect_backoff_max(&self) -> std::time::Duration {
        supervise::MAX_RECONNECT_BACKOFF
    }

    /// A session's failure as the supervisor should treat it; the default is as it is. A
    /// source that learns from repeated failures (MySQL: several replicas fighting over one
    /// `server_id`) makes a transient failure definite here.
    fn escalate(&mut self, error: SourceError) -> SourceError {
        error
    }
}

/// A started source, as [`spawn`] returns it.
pub(crate) struct Started {
    /// The source's events, for the delivery loop.
    pub events: mpsc::Receiver<Result<SourceEvent, SourceError>>,
    /// Where the delivery loop publishes what it durably checkpointed (sources that confirm
    /// positions to the server read it).
    pub checkpointed: watch::Sender<Option<SourcePosition>>,
    /// The supervisor's task.
    pub task: tokio::task::JoinHandle<()>,
    /// What the supervisor waits to retry.
    pub retry: RetryState,
}

/// Starts connector `cfg`'s source on the runtime: sessions from `resume` (the checkpoint),
/// supervised ([`supervise::run`]) until the delivery loop stops receiving, shutdown, or a
/// definite failure (sent into the events channel, [`CHANNEL_CAPACITY`] deep).
/// `lease`: whether the connector is still this process's, and whether it was just taken
/// over from another member of a group ([`Lease::taking_over`]).
pub(crate) fn spawn(
    cfg: &ConnectorConfig,
    resume: Option<SourcePosition>,
    health: &Health,
    shutdown: watch::Receiver<bool>,
    lease: &Lease,
) -> Started {
    let (tx, events) = mpsc::channel(CHANNEL_CAPACITY);
    let (checkpointed_tx, checkpointed) = watch::channel(resume.clone());
    let retry = RetryState::default();
    let ctx = SourceContext {
        connector: cfg.name.clone(),
        health: health.clone(),
        shutdown,
        checkpointed,
        out: Outlet::new(&cfg.name, tx, resume),
        connected: false,
        retry: retry.clone(),
        lease: lease.clone(),
        failing: None,
    };
    let task = match &cfg.source {
        SourceConfig::Mysql(src) => tokio::spawn(supervise::run(
            mysql::MysqlSource::new(src.clone(), &cfg.tables),
            ctx,
        )),
        SourceConfig::Postgres(src) => tokio::spawn(supervise::run(
            postgres::PgSource::new(src.clone(), &cfg.tables),
            ctx,
        )),
    };
    Started {
        events,
        checkpointed: checkpointed_tx,
        task,
        retry,
    }
}
