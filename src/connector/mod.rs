//! One connector's life: a value built from its configuration that can be started and
//! stopped at any time. Running, it opens the sink and the checkpoint store, starts the
//! source at the checkpoint, runs the delivery loop, and restarts from the checkpoint after
//! transient failures (with backoff) until it is stopped or fails definitely.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, watch};

mod brokers;
mod open;

pub(crate) use open::OpenSink;

use crate::checkpoint::{
    claim::OtherStores, Checkpoint, CheckpointRecords, CheckpointStore, FencedCheckpointStore,
    FileCheckpointStore, KafkaCheckpointStore,
};
use crate::config::{CheckpointConfig, ConnectorConfig, DeliveryMode};
use crate::cutover::dedupe::Dedupe;
use crate::error::Class;
use crate::event::SourceEvent;
use crate::health::{ConnectorState, Health};
use crate::lease::{Lease, NotOwner};
use crate::metrics as m;
use crate::pipeline::poison::{Action, Ending, Plan, Replay};
use crate::pipeline::transactional::{self, BatchOptions};
use crate::pipeline::Error;
use crate::pipeline::{self, LoopContext, PipelineOptions};
use crate::position::SourcePosition;
use crate::retry::{sleep_before_retry, Retry};
use crate::router::{EventRouter, RouterConfigError};
use crate::sink::{KafkaLink, TransactionalSink};
use crate::source;
use crate::source::SourceError;

/// Longest wait between restarts after transient failures.
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// Shortest wait before a group member restarts a connector that was fenced while its lease
/// was held: long enough for the membership to learn of a loss (librdkafka checks the
/// session at least once a second, and a heartbeat answer comes within the 1 s heartbeat).
const FENCED_RESTART_WAIT: Duration = Duration::from_secs(3);

/// Opens the checkpoint store a connector is configured with (for reading it, e.g. by
/// `status`; the delivery loops write it).
pub fn open_store(cfg: &ConnectorConfig) -> Box<dyn CheckpointStore> {
    match &cfg.checkpoint {
        CheckpointConfig::File { path } => Box::new(FileCheckpointStore::new(path.clone())),
        CheckpointConfig::Kafka { topic, .. } => {
            Box::new(KafkaCheckpointStore::new(&cfg.kafka, topic, &cfg.name))
        }
        CheckpointConfig::Sink {} => brokers::sink_store(cfg),
    }
}

/// Creates the connector's checkpoint topic when its store is the Kafka one and the topic is
/// missing (before a checkpoint is written from outside a run: `checkpoint set`, an offsets
/// `PATCH`); other stores need nothing.
///
/// Errors: the store's, when Kafka refuses or does not answer the creation.
pub async fn ensure_store(cfg: &ConnectorConfig) -> Result<(), crate::checkpoint::CheckpointError> {
    if let CheckpointConfig::Kafka { topic, .. } = &cfg.checkpoint {
        KafkaCheckpointStore::new(&cfg.kafka, topic, &cfg.name)
            .ensure_topic()
            .await?;
    }
    Ok(())
}

/// How a connector delivers: records acknowledged then checkpointed (at-least-once), or
/// records and checkpoint in one Kafka transaction (exactly-once), or to another broker.
enum Delivery {
    /// A non-Kafka sink, with its configured store ([`brokers`]).
    Broker(Box<dyn CheckpointStore>),
    Acked(Box<dyn CheckpointStore>),
    Transactional {
        store: Box<KafkaCheckpointStore>,
        transactional_id: String,
        batch: BatchOptions,
    },
}

/// How `cfg` delivers. At-least-once in a group (`grouped`) writes its checkpoints fenced by
/// the connector's `transactional.id` ([`FencedCheckpointStore`]), so a member that lost the
/// connector without knowing cannot move the stored checkpoint back after its successor read
/// it.
fn delivery(
    cfg: &ConnectorConfig,
    link: &Arc<KafkaLink>,
    grouped: bool,
    shutdown: &watch::Receiver<bool>,
) -> Delivery {
    if !cfg.sink.is_kafka() {
        return Delivery::Broker(open_store(cfg));
    }
    match &cfg.checkpoint {
        CheckpointConfig::Kafka {
            topic,
            delivery: DeliveryMode::ExactlyOnce,
            batch_max_events,
            batch_max_bytes,
            batch_max_ms,
            ..
        } => Delivery::Transactional {
            store: Box::new(
                KafkaCheckpointStore::new(&cfg.kafka, topic, &cfg.name).with_link(link.clone()),
            ),
            transactional_id: cfg.transactional_id(),
            batch: BatchOptions {
                max_events: *batch_max_events,
                max_bytes: *batch_max_bytes,
                max_wait: Duration::from_millis(*batch_max_ms),
                max_backlog_wait: BatchOptions::default()
                    .max_backlog_wait
                    .max(Duration::from_millis(*batch_max_ms)),
                ..BatchOptions::default()
            },
        },
        CheckpointConfig::Kafka { topic, .. } if grouped => Delivery::Acked(Box::new(
            FencedCheckpointStore::new(
                &cfg.kafka,
                topic,
                &cfg.name,
                &cfg.transactional_id(),
                link.clone(),
            )
            .with_shutdown(shutdown.clone()),
        )),
        CheckpointConfig::Kafka { topic, .. } => Delivery::Acked(Box::new(
            KafkaCheckpointStore::new(&cfg.kafka, topic, &cfg.name).with_link(link.clone()),
        )),
        CheckpointConfig::File { .. } | CheckpointConfig::Sink {} => {
            Delivery::Acked(open_store(cfg))
        }
    }
}

/// A connector, built and ready to start.
pub struct Connector {
    cfg: ConnectorConfig,
    router: EventRouter,
    /// The connection state of the connector's Kafka cluster, shared by all its clients.
    link: Arc<KafkaLink>,
    /// Whether it is still this process's to run (see [`Connector::with_lease`]).
    lease: Lease,
    /// The last position this process loaded from the connector's store or saw stored there:
    /// a restart that finds the store empty although it held a checkpoint (the checkpoint
    /// topic deleted while the connector ran) resumes here instead of at the configured
    /// start position, which would skip what was written since.
    stored: std::sync::Mutex<Option<SourcePosition>>,
    /// While it holds true the delivery loop takes no event ([`Connector::paused_by`]).
    paused: watch::Receiver<bool>,
    /// Where the topics it sends records to are noted: its [`Health`]'s, from its start.
    topics: Option<crate::active_topics::ActiveTopics>,
}

impl Connector {
    /// Builds the connector's router.
    ///
    /// Errors when the routing rules do not compile (configuration loading already checks
    /// this, so it only happens for a configuration built another way).
    pub fn new(cfg: ConnectorConfig) -> Result<Self, RouterConfigError> {
        let router = EventRouter::new(&cfg.router)?;
        tracing::info!(connector = %cfg.name, "record format: {}", router.describe_format());
        let link = KafkaLink::new(&cfg.name, &cfg.kafka.bootstrap_servers);
        let lease = Lease::sole(&cfg.name);
        Ok(Self {
            cfg,
            router,
            link,
            lease,
            stored: std::sync::Mutex::new(None),
            paused: watch::channel(false).1,
            topics: None,
        })
    }

    /// Pauses the connector while `paused` holds true, as Kafka Connect pauses a connector
    /// (`PUT /connectors/{name}/pause`): its source keeps its connection and the delivery
    /// loop takes no event, so the checkpoint stays at what was delivered; records already
    /// sent are still acknowledged and checkpointed, and a stop still drains.
    pub fn paused_by(mut self, paused: watch::Receiver<bool>) -> Self {
        self.paused = paused;
        self
    }

    /// Runs the connector under a group's assignment (`lease`, [`Lease::granted`]): it
    /// restarts, reconnects its source and fences other producers (`init_transactions`) only
    /// while the lease is held; until its source first streams, a PostgreSQL source ends a
    /// walsender still attached to its slot (the previous owner's) instead of waiting for it;
    /// at-least-once checkpoints are written fenced ([`FencedCheckpointStore`]). Being fenced
    /// by a newer owner, or losing the lease, is then a handover, not a failure.
    pub fn with_lease(mut self, lease: Lease) -> Self {
        self.lease = lease;
        self
    }

    /// Starts the connector on the runtime, reporting its state to `health`. The handle
    /// stops it ([`RunningConnector::stop`]: drain, final checkpoint) and waits for its end.
    pub fn start(self, health: Health) -> RunningConnector {
        let (stop, stopped) = watch::channel(false);
        let task = tokio::spawn(self.run(health, stopped));
        RunningConnector {
            stop: StopHandle(Arc::new(stop)),
            task,
        }
    }

    /// Runs the connector until `shutdown` turns true (Ok) or a definite failure (Err). A
    /// transient failure (Err) is returned only during shutdown: the final checkpoint was not
    /// written, and what was read since the last one is delivered again after restart.
    pub async fn run(
        mut self,
        health: Health,
        shutdown: watch::Receiver<bool>,
    ) -> Result<(), Error> {
        self.topics = Some(health.topics().clone());
        let name = self.cfg.name.clone();
        if !self.lease.in_group() {
            // In a group the lease shows it (1 from the assignment to the revocation).
            metrics::gauge!(m::CONNECTOR_OWNED, m::LABEL_CONNECTOR => name.clone()).set(1.0);
        }
        // Every series exists from the start (at 0), so dashboards and alerts see them before
        // the first event or failure.
        for kind in [Class::Transient, Class::Definite] {
            metrics::counter!(m::ERRORS, m::LABEL_CONNECTOR => name.clone(), m::LABEL_KIND => kind.label())
                .increment(0);
        }
        for reason in ["delete", "update"] {
            metrics::counter!(m::EVENTS_SKIPPED, m::LABEL_CONNECTOR => name.clone(), m::LABEL_REASON => reason).increment(0);
        }
        for counter in [
            m::EVENTS_READ,
            m::EVENTS_PRODUCED,
            m::EVENTS_DEAD_LETTERED,
            m::BYTES_PRODUCED,
            m::CHECKPOINT_WRITES,
            m::RESTARTS,
        ] {
            metrics::counter!(counter, m::LABEL_CONNECTOR => name.clone()).increment(0);
        }
        if self.cfg.sink.is_kafka() {
            // Another broker's outage shows as the connector retrying.
            health.watch_kafka(&name, self.link.clone());
        }
        m::StreamingStats::of(&name)
            .set_debezium_labels(self.cfg.source.plugin(), self.cfg.debezium_server());
        let result = self.supervise(&health, shutdown).await;
        match &result {
            Ok(()) => {
                health.set(&name, ConnectorState::Stopped);
                tracing::info!(connector = %name, "stopped: what was read is delivered and checkpointed");
            }
            Err(f @ Error::StoppedDuringRetry { .. }) => {
                health.set_because(&name, ConnectorState::Stopped, f);
                tracing::error!(connector = %name, "stopped without a final checkpoint while waiting to retry (nothing after the stored checkpoint is lost): {f}");
            }
            Err(f) if f.is_transient() => {
                health.set_because(&name, ConnectorState::Stopped, f);
                tracing::error!(
                    connector = %name,
                    "stopped without a final checkpoint (what was read since the last one, if \
                     anything, is delivered again after restart): {f}"
                );
            }
            Err(f) if self.lease.in_group() && (f.is_handed_over() || !self.lease.held()) => {
                health.set(&name, ConnectorState::Standby);
                tracing::info!(connector = %name, "stopped: another member of the group runs it now ({f})");
            }
            Err(f) => {
                health.set_because(&name, ConnectorState::Failed, f);
                metrics::counter!(m::ERRORS, m::LABEL_CONNECTOR => name.clone(), m::LABEL_KIND => Class::Definite.label()).increment(1);
                tracing::error!(connector = %name, "stopped: {f}");
            }
        }
        result
    }

    async fn supervise(
        &self,
        health: &Health,
        shutdown: watch::Receiver<bool>,
    ) -> Result<(), Error> {
        let name = self.cfg.name.as_str();
        health.set(name, ConnectorState::Starting);
        let mut delivery = delivery(&self.cfg, &self.link, self.lease.in_group(), &shutdown);
        let mut retry = Retry::new(MAX_BACKOFF);
        // The last transient failure warned about, and when it last happened: the same one
        // again within two backoffs is the same outage (one WARN for it, then DEBUG).
        let mut warned: Option<(String, Instant)> = None;
        loop {
            retry.attempt();
            let outcome = match &mut delivery {
                Delivery::Broker(store) => {
                    self.run_on_broker(store.as_mut(), health, shutdown.clone())
                        .await
                }
                Delivery::Acked(store) => {
                    let opener = open::KafkaAcked(self);
                    self.run_acked(&opener, store.as_mut(), health, shutdown.clone())
                        .await
                }
                Delivery::Transactional {
                    store,
                    transactional_id,
                    batch,
                } => {
                    let opener = open::KafkaTransactional {
                        connector: self,
                        transactional_id,
                    };
                    self.run_transactional(&opener, store.as_ref(), batch, health, shutdown.clone())
                        .await
                }
            };
            if *shutdown.borrow() {
                // A transient failure now means the final checkpoint was not written (the last
                // batch will be delivered after restart): `run` reports it and the process
                // exits 1.
                return outcome;
            }
            let failure = match outcome {
                Ok(()) => return Ok(()),
                Err(f) => f,
            };
            // Fenced in a group while the lease is held: either this member lost the connector
            // and its membership has not noticed yet (it does within about a second of waking
            // up or of the session timing out), or a process outside the group fenced it. A
            // restart after FENCED_RESTART_WAIT, with the lease checked again, tells them
            // apart: the owner takes the connector back, a zombie stops.
            let fenced = failure.is_fenced() && self.lease.in_group();
            let class = if fenced {
                Class::Transient
            } else {
                failure.class()
            };
            let Some(mut wait) = retry.after_failure(class, false) else {
                return Err(failure);
            };
            self.still_owned()?;
            if fenced {
                wait = wait.max(FENCED_RESTART_WAIT);
            }
            health.set_because(
                name,
                ConnectorState::Retrying,
                format!(
                    "restarting from the checkpoint in {:.1}s after: {failure}",
                    wait.as_secs_f64()
                ),
            );
            metrics::counter!(m::ERRORS, m::LABEL_CONNECTOR => name.to_string(), m::LABEL_KIND => Class::Transient.label()).increment(1);
            metrics::counter!(m::RESTARTS, m::LABEL_CONNECTOR => name.to_string()).increment(1);
            if fenced {
                tracing::warn!(connector = name, retry_in = ?wait, "fenced while this member owns the connector (another process with its transactional.id, or the group gave it away and this member does not know yet); restarting from the checkpoint unless the group took it away: {failure}");
            } else {
                let text = failure.to_string();
                let same_outage = warned
                    .as_ref()
                    .is_some_and(|(t, at)| *t == text && at.elapsed() < 2 * MAX_BACKOFF);
                if same_outage {
                    tracing::debug!(connector = name, retry_in = ?wait, "still failing as warned, restarting from the checkpoint: {failure}");
                } else {
                    tracing::warn!(connector = name, retry_in = ?wait, "transient failure, restarting from the checkpoint: {failure}");
                }
                warned = Some((text, Instant::now()));
            }
            wait_to_retry(wait, &shutdown, failure).await?;
            self.still_owned()?;
        }
    }

    /// `Err(NotOwner)` once the connector's lease is revoked: nothing that could take the
    /// connector away from another owner (a restart, `init_transactions`) may happen then.
    fn still_owned(&self) -> Result<(), Error> {
        if self.lease.held() {
            Ok(())
        } else {
            Err(NotOwner {
                connector: self.cfg.name.clone(),
            }
            .into())
        }
    }

    /// Creates the Kafka topics the connector writes to besides the routed ones (its Kafka
    /// checkpoint topic, the dead-letter topic), when its records go to Kafka.
    async fn ensure_kafka_topics(&self) -> Result<(), Error> {
        let cfg = &self.cfg;
        if !cfg.sink.is_kafka() {
            return Ok(());
        }
        if let CheckpointConfig::Kafka { topic, .. } = &cfg.checkpoint {
            KafkaCheckpointStore::new(&cfg.kafka, topic, &cfg.name)
                .with_link(self.link.clone())
                .ensure_topic()
                .await?;
        }
        self.ensure_dead_letter_topic().await
    }

    /// Loads the checkpoint from `store` (with the other stores' comparison when records go
    /// to Kafka): where the source starts.
    async fn load_resume(
        &self,
        store: &(impl CheckpointStore + ?Sized),
    ) -> Result<Option<Checkpoint>, Error> {
        let cfg = &self.cfg;
        // The other stores are read beside this one's load: a handover waits for the longer
        // of the two reads, not for both.
        let others = OtherStores::start(cfg, &self.link);
        let loaded = store.load().await?;
        let resume = self.known_if_lost(loaded);
        if let Some(others) = others {
            others.check(cfg, resume.as_ref()).await?;
        }
        log_resume(cfg, &resume);
        Ok(resume)
    }

    /// The at-least-once run: records acknowledged by the sink `opener` opens, then
    /// checkpointed in `store`.
    async fn run_acked<O: OpenSink>(
        &self,
        opener: &O,
        store: &mut dyn CheckpointStore,
        health: &Health,
        shutdown: watch::Receiver<bool>,
    ) -> Result<(), Error> {
        let cfg = &self.cfg;
        self.ensure_kafka_topics().await?;
        // Before the load: a fenced store's `init_transactions` must come first, so that no
        // older owner's checkpoint can land after what is read here. A PostgreSQL slot's
        // confirmed_flush_lsn only follows stored checkpoints, so it cannot pass the one read
        // here either while this connector gets ready (no false "checkpoint lost" when a
        // frozen previous owner wakes meanwhile).
        self.still_owned()?;
        let prepared = store.prepare().await;
        if prepared.is_err() && *shutdown.borrow() {
            // Nothing was read yet: a clean stop.
            return Ok(());
        }
        prepared?;
        let mut resume = self.load_resume(store).await?;
        let dedupe = self.dedupe(resume.as_ref())?;
        let Some(mut sink) = opener.open(&shutdown).await? else {
            return Ok(());
        };
        let mut plan = Plan::default();
        let result = loop {
            let position = resume.as_ref().map(|c| c.position.clone());
            let mut feed = self.start_source(position, health, &shutdown);
            let events = feed.take_events();
            let ctx =
                self.loop_context(&sink, &feed.checkpointed, shutdown.clone(), dedupe.as_ref());
            let opts = PipelineOptions::default();
            let ended = pipeline::run(ctx, events, store, resume, plan, &opts).await;
            self.saw_stored(feed.checkpointed.borrow().clone());
            let ended = feed.stop(ended).await;
            match ended {
                Ok(Ending::Replay(r)) => {
                    log_replay(cfg, &r);
                    (resume, plan) = (Some(r.from), r.plan);
                    // The replay sends on a fresh producer, as the exactly-once one does:
                    // nothing of the refused records' sequence numbers is left to trip on.
                    sink = match opener.open(&shutdown).await? {
                        Some(s) => s,
                        None => return Ok(()),
                    };
                }
                Ok(Ending::Done) => break Ok(()),
                Err(f) => break Err(f),
            }
        };
        let closed = opener.close(sink).await;
        result.and(closed)
    }

    /// The exactly-once run: records and their checkpoint (`store`'s record) in one
    /// transaction of the sink `opener` opens.
    async fn run_transactional<O, C>(
        &self,
        opener: &O,
        store: &C,
        batch: &BatchOptions,
        health: &Health,
        shutdown: watch::Receiver<bool>,
    ) -> Result<(), Error>
    where
        O: OpenSink,
        O::Sink: TransactionalSink,
        C: CheckpointRecords + CheckpointStore,
    {
        let cfg = &self.cfg;
        let t0 = Instant::now();
        let Some(mut sink) = opener.open(&shutdown).await? else {
            return Ok(());
        };
        let t1 = Instant::now();
        self.ensure_kafka_topics().await?;
        let t2 = Instant::now();
        let mut resume = self.load_resume(store).await?;
        let t3 = Instant::now();
        tracing::debug!(connector = %cfg.name, init_ms = (t1 - t0).as_millis() as u64, topics_ms = (t2 - t1).as_millis() as u64, load_ms = (t3 - t2).as_millis() as u64, "opened the transactional sink and read the checkpoint");
        let dedupe = self.dedupe(resume.as_ref())?;
        let mut plan = Plan::default();
        loop {
            let position = resume.as_ref().map(|c| c.position.clone());
            let mut feed = self.start_source(position, health, &shutdown);
            let events = feed.take_events();
            let ctx =
                self.loop_context(&sink, &feed.checkpointed, shutdown.clone(), dedupe.as_ref());
            let ended = transactional::run(ctx, events, store, resume, plan, batch).await;
            self.saw_stored(feed.checkpointed.borrow().clone());
            let ended = feed.stop(ended).await;
            match ended {
                Ok(Ending::Replay(r)) => {
                    log_replay(cfg, &r);
                    (resume, plan) = (Some(r.from), r.plan);
                    // A producer whose transaction a refused record doomed can be left with
                    // sequence numbers the broker no longer accepts ("skipped sequence
                    // numbers ... requires epoch bump"): the replay gets a fresh one, which
                    // fences the old.
                    drop(sink);
                    sink = match opener.open(&shutdown).await? {
                        Some(s) => s,
                        None => return Ok(()),
                    };
                }
                Ok(Ending::Done) => return opener.close(sink).await,
                Err(f) => return Err(f),
            }
        }
    }

    /// The topics this connector creates when it starts: its Kafka checkpoint topic and its
    /// dead-letter topic.
    fn own_topics(&self) -> Vec<String> {
        let mut topics = Vec::new();
        if let CheckpointConfig::Kafka { topic, .. } = &self.cfg.checkpoint {
            topics.push(topic.clone());
        }
        topics.extend(self.cfg.errors.dead_letters().map(str::to_string));
        topics
    }

    /// Notes `position` (when some) as stored in the connector's checkpoint store.
    fn saw_stored(&self, position: Option<SourcePosition>) {
        if let Some(p) = position {
            *self.stored.lock().unwrap_or_else(|e| e.into_inner()) = Some(p);
        }
    }

    /// The checkpoint to resume from, given what the store holds (`loaded`): that, or, when
    /// the store holds nothing although this process loaded or saw a checkpoint stored there
    /// before (its Kafka topic deleted, its file removed while the connector ran), the last
    /// such position, with a WARN. Starting at the configured start position instead would
    /// skip every event written since that checkpoint. A split source transaction's
    /// delivered rows (`skip`) are not known here: they would be delivered again, never lost.
    fn known_if_lost(&self, loaded: Option<Checkpoint>) -> Option<Checkpoint> {
        if let Some(c) = &loaded {
            self.saw_stored(Some(c.position.clone()));
            return loaded;
        }
        let known = self
            .stored
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()?;
        let store = match &self.cfg.checkpoint {
            CheckpointConfig::File { path } => format!("file {}", path.display()),
            CheckpointConfig::Kafka { topic, .. } => format!("Kafka topic {topic}"),
            CheckpointConfig::Sink {} => self
                .cfg
                .sink
                .own_checkpoint(&self.cfg.name)
                .unwrap_or_default(),
        };
        tracing::warn!(connector = %self.cfg.name, position = %known, "the checkpoint store ({store}) no longer holds the connector's checkpoint, which this process stored or read there (deleted while the connector ran?): resuming from the last checkpoint this process knows, {known}, not at the configured start position, which would skip what was written since; the next checkpoint is stored there again");
        Some(Checkpoint {
            connector: self.cfg.name.clone(),
            position: known,
            skip: 0,
            cutover: None,
            updated_at_ms: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX)),
        })
    }

    /// Creates the dead-letter topic when events go there (`errors.tolerance=all`).
    async fn ensure_dead_letter_topic(&self) -> Result<(), Error> {
        if let Some(topic) = self.cfg.errors.dead_letters() {
            pipeline::dead_letter::ensure_topic(&self.cfg.kafka, topic, self.link.clone()).await?;
        }
        Ok(())
    }

    /// Starts the source at `resume`: its events, and where the delivery loop publishes what
    /// it durably checkpointed (sources that confirm positions to the server read it).
    fn start_source(
        &self,
        resume: Option<SourcePosition>,
        health: &Health,
        shutdown: &watch::Receiver<bool>,
    ) -> SourceFeed {
        let started = source::spawn(&self.cfg, resume, health, shutdown.clone(), &self.lease);
        SourceFeed {
            events: Some(started.events),
            checkpointed: started.checkpointed,
            task: started.task,
            retry: started.retry,
        }
    }

    /// What a delivery loop of this connector delivers with.
    fn loop_context<'a, S>(
        &'a self,
        sink: &'a S,
        checkpointed: &'a watch::Sender<Option<SourcePosition>>,
        shutdown: watch::Receiver<bool>,
        dedupe: Option<&'a Dedupe>,
    ) -> LoopContext<'a, S> {
        LoopContext {
            connector: &self.cfg.name,
            router: &self.router,
            policy: &self.cfg.errors,
            sink,
            checkpointed,
            shutdown,
            dedupe,
            paused: self.paused.clone(),
            topics: self.topics.as_ref(),
        }
    }

    /// The events Debezium delivered before a switch that is still in progress (the
    /// checkpoint carries its note: `outboxd checkpoint import-debezium`), read back from
    /// the routed topics before the source starts.
    fn dedupe(&self, resume: Option<&Checkpoint>) -> Result<Option<Dedupe>, Error> {
        let Some(note) = resume.and_then(|c| c.cutover.as_ref()) else {
            return Ok(None);
        };
        let name = &self.cfg.name;
        let kafka = &self.cfg.kafka;
        Ok(Some(tokio::task::block_in_place(|| {
            Dedupe::load(name, kafka, note)
        })?))
    }
}

/// A running source, as a delivery loop sees it.
struct SourceFeed {
    events: Option<mpsc::Receiver<Result<SourceEvent, SourceError>>>,
    checkpointed: watch::Sender<Option<SourcePosition>>,
    task: tokio::task::JoinHandle<()>,
    retry: source::RetryState,
}

impl SourceFeed {
    /// The source's events (once).
    fn take_events(&mut self) -> mpsc::Receiver<Result<SourceEvent, SourceError>> {
        self.events.take().expect("events are taken once")
    }

    /// Stops the source and waits until it has. A delivery loop that ended cleanly (on
    /// shutdown) while the source was waiting to retry after a failure did not stop cleanly:
    /// the source never caught up, so the connector reports that failure (and the process
    /// exits 1, as after any retry cut short).
    async fn stop(mut self, delivered: Result<Ending, Error>) -> Result<Ending, Error> {
        self.task.abort();
        let _ = (&mut self.task).await;
        match (delivered, self.retry.pending()) {
            (Ok(Ending::Done), Some((backoff, cause))) => Err(Error::StoppedDuringRetry {
                backoff,
                cause: Box::new(cause.into()),
            }),
            (result, _) => result,
        }
    }
}

impl Drop for SourceFeed {
    /// A connector abandoned mid-run ([`RunningConnector::abandon`]) takes its source down
    /// with it: no session goes on (or confirms a position to the server) without it.
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Stops a running connector: it drains what it read, writes its final checkpoint and ends.
#[derive(Debug, Clone)]
pub struct StopHandle(Arc<watch::Sender<bool>>);

impl StopHandle {
    /// Asks the connector to stop (idempotent).
    pub fn stop(&self) {
        self.0.send_replace(true);
    }
}

/// A started connector.
#[derive(Debug)]
pub struct RunningConnector {
    stop: StopHandle,
    task: tokio::task::JoinHandle<Result<(), Error>>,
}

impl RunningConnector {
    /// Whether it has ended (stopped, or failed by itself).
    pub fn is_finished(&self) -> bool {
        self.task.is_finished()
    }

    /// Ends it at once, without draining and without a final checkpoint, and waits until it
    /// has ended: what it read since its last checkpoint is the next owner's to deliver
    /// (again). For a connector this member lost without knowing: anything it wrote now
    /// would come after its successor started. Its source stops without a last status
    /// update to the server.
    pub async fn abandon(self) {
        self.task.abort();
        let _ = self.task.await;
    }

    /// What stops it, to keep while [`join`](Self::join) awaits its end.
    pub fn stop_handle(&self) -> StopHandle {
        self.stop.clone()
    }

    /// Waits for the connector to end: `Ok` after a clean stop, the failure otherwise (a
    /// transient one only when it was stopped without its final checkpoint).
    pub async fn join(self) -> Result<(), Error> {
        match self.task.await {
            Ok(r) => r,
            Err(e) => Err(Error::TaskLost {
                detail: e.to_string(),
            }),
        }
    }
}

/// Waits `wait` before the connector restarts after transient failure `failure`. A
/// shutdown during the wait returns `failure` (still transient): the run it ended wrote no
/// final checkpoint, so what it read since the last one is undelivered, and the process exits
/// 1 instead of reporting a clean stop.
async fn wait_to_retry(
    wait: Duration,
    shutdown: &watch::Receiver<bool>,
    failure: Error,
) -> Result<(), Error> {
    if sleep_before_retry(wait, shutdown).await {
        Ok(())
    } else {
        Err(Error::StoppedDuringRetry {
            backoff: wait,
            cause: Box::new(failure),
        })
    }
}

fn log_replay(cfg: &ConnectorConfig, replay: &Replay) {
    for (ordinal, planned) in replay.plan.iter() {
        let action = match planned.action {
            Action::DeadLetter(_) => "dead-letter",
            Action::Stop(_) => "stop at",
        };
        tracing::info!(connector = %cfg.name, position = %replay.from.position, skip = replay.from.skip, ordinal, event_id = %planned.event_id, topic = %planned.topic,
            "replaying from the checkpoint to {action} the outbox event the sink refused");
    }
}

fn log_resume(cfg: &ConnectorConfig, resume: &Option<Checkpoint>) {
    match resume {
        Some(c) if c.skip > 0 => {
            tracing::info!(connector = %cfg.name, position = %c.position, skip = c.skip, "resuming from checkpoint, inside a split source transaction")
        }
        Some(c) => {
            tracing::info!(connector = %cfg.name, position = %c.position, "resuming from checkpoint")
        }
        None => {
            tracing::info!(connector = %cfg.name, "no checkpoint yet: starting at the configured start position")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checkpoint::CheckpointError;

    fn transient() -> Error {
        CheckpointError::kafka("Kafka unreachable", None).into()
    }

    #[tokio::test]
    async fn shutdown_during_retry_backoff_reports_the_failure() {
        let (tx, rx) = watch::channel(false);
        let waiting =
            tokio::spawn(
                async move { wait_to_retry(Duration::from_secs(60), &rx, transient()).await },
            );
        tokio::time::sleep(Duration::from_millis(20)).await;
        tx.send(true).unwrap();
        let f = tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .expect("the shutdown ends the wait")
            .unwrap()
            .unwrap_err();
        assert!(f.is_transient());
        assert!(f.to_string().contains("Kafka unreachable"), "{f}");
    }

    #[tokio::test]
    async fn retry_backoff_ends_without_shutdown() {
        let (_tx, rx) = watch::channel(false);
        assert!(wait_to_retry(Duration::from_millis(10), &rx, transient())
            .await
            .is_ok());
    }
}
