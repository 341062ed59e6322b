//! One connector's life: build the router, sink and checkpoint store, start the source at
//! the checkpoint, run the delivery loop, and restart from the checkpoint after transient
//! failures (with exponential backoff) until shutdown or a definite failure.

use std::time::{Duration, Instant};

use tokio::sync::{mpsc, watch};

use crate::checkpoint::{Checkpoint, CheckpointStore, FileCheckpointStore, KafkaCheckpointStore};
use crate::config::{CheckpointConfig, ConnectorConfig, DeliveryMode, SourceConfig};
use crate::error::Failure;
use crate::health::{ConnectorState, Health};
use crate::metrics as m;
use crate::pipeline::transactional::{self, BatchOptions};
use crate::pipeline::{self, PipelineOptions};
use crate::position::SourcePosition;
use crate::router::EventRouter;
use crate::sink::KafkaSink;
use crate::source;

/// Longest wait between restarts after transient failures.
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// A run that lasted this long resets the backoff.
const HEALTHY_RUN: Duration = Duration::from_secs(60);

/// Opens the checkpoint store a connector is configured with (for reading it, e.g. by
/// `status`; the delivery loops write it).
pub fn open_store(cfg: &ConnectorConfig) -> Box<dyn CheckpointStore> {
    match &cfg.checkpoint {
        CheckpointConfig::File { path } => Box::new(FileCheckpointStore::new(path.clone())),
        CheckpointConfig::Kafka { topic, .. } => Box::new(KafkaCheckpointStore::new(
            &cfg.kafka.bootstrap_servers,
            topic,
            &cfg.name,
        )),
    }
}

/// How a connector delivers: records acknowledged then checkpointed (at-least-once), or
/// records and checkpoint in one Kafka transaction (exactly-once).
enum Delivery {
    Acked(Box<dyn CheckpointStore>),
    Transactional {
        store: KafkaCheckpointStore,
        transactional_id: String,
        batch: BatchOptions,
    },
}

fn delivery(cfg: &ConnectorConfig) -> Delivery {
    match &cfg.checkpoint {
        CheckpointConfig::Kafka {
            topic,
            delivery: DeliveryMode::ExactlyOnce,
            transactional_id,
            batch_max_events,
            batch_max_bytes,
            batch_max_ms,
        } => Delivery::Transactional {
            store: KafkaCheckpointStore::new(&cfg.kafka.bootstrap_servers, topic, &cfg.name),
            transactional_id: transactional_id
                .clone()
                .unwrap_or_else(|| format!("outboxd-{}", cfg.name)),
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
        _ => Delivery::Acked(open_store(cfg)),
    }
}

/// Runs connector `cfg` until `shutdown` turns true (Ok) or a definite failure (Err). A
/// transient failure (Err) is returned only during shutdown: the final checkpoint was not
/// written, and what was read since the last one is delivered again after restart.
pub async fn run(
    cfg: ConnectorConfig,
    health: Health,
    shutdown: watch::Receiver<bool>,
) -> Result<(), Failure> {
    let name = cfg.name.clone();
    // Every series exists from the start (at 0), so dashboards and alerts see them before
    // the first event or failure.
    for kind in ["transient", "definite"] {
        metrics::counter!(m::ERRORS, m::LABEL_CONNECTOR => name.clone(), m::LABEL_KIND => kind)
            .increment(0);
    }
    for reason in ["delete", "update"] {
        metrics::counter!(m::EVENTS_SKIPPED, m::LABEL_CONNECTOR => name.clone(), m::LABEL_REASON => reason).increment(0);
    }
    for counter in [
        m::EVENTS_READ,
        m::EVENTS_PRODUCED,
        m::BYTES_PRODUCED,
        m::CHECKPOINT_WRITES,
        m::RESTARTS,
    ] {
        metrics::counter!(counter, m::LABEL_CONNECTOR => name.clone()).increment(0);
    }
    let result = supervise(&cfg, &health, shutdown).await;
    match &result {
        Ok(()) => {
            health.set(&name, ConnectorState::Stopped);
            tracing::info!(connector = %name, "stopped: what was read is delivered and checkpointed");
        }
        Err(f) if f.is_transient() => {
            health.set(&name, ConnectorState::Stopped);
            tracing::error!(
                connector = %name,
                "stopped without a final checkpoint (what was read since the last one, if \
                 anything, is delivered again after restart): {f}"
            );
        }
        Err(f) => {
            health.set(&name, ConnectorState::Failed);
            metrics::counter!(m::ERRORS, m::LABEL_CONNECTOR => name.clone(), m::LABEL_KIND => "definite").increment(1);
            tracing::error!(connector = %name, "stopped: {f}");
        }
    }
    result
}

async fn supervise(
    cfg: &ConnectorConfig,
    health: &Health,
    shutdown: watch::Receiver<bool>,
) -> Result<(), Failure> {
    let name = cfg.name.as_str();
    health.set(name, ConnectorState::Starting);
    let router = EventRouter::new(&cfg.router)
        .map_err(|e| Failure::definite(format!("connector {name}: {e}")))?;
    let mut delivery = delivery(cfg);
    let mut backoff = Duration::from_secs(1);
    loop {
        let started = Instant::now();
        let outcome = match &mut delivery {
            Delivery::Acked(store) => {
                run_acked(cfg, &router, store.as_mut(), health, shutdown.clone()).await
            }
            Delivery::Transactional {
                store,
                transactional_id,
                batch,
            } => {
                run_transactional(
                    cfg,
                    &router,
                    store,
                    transactional_id,
                    batch,
                    health,
                    shutdown.clone(),
                )
                .await
            }
        };
        if *shutdown.borrow() {
            // A transient failure now means the final checkpoint was not written (the last
            // batch will be delivered after restart): `run` reports it and the process
            // exits 1.
            return outcome;
        }
        match outcome {
            Ok(()) => return Ok(()),
            Err(f) if f.is_transient() => {
                if started.elapsed() >= HEALTHY_RUN {
                    backoff = Duration::from_secs(1);
                }
                health.set(name, ConnectorState::Retrying);
                metrics::counter!(m::ERRORS, m::LABEL_CONNECTOR => name.to_string(), m::LABEL_KIND => "transient").increment(1);
                metrics::counter!(m::RESTARTS, m::LABEL_CONNECTOR => name.to_string()).increment(1);
                tracing::warn!(connector = name, retry_in = ?backoff, "transient failure, restarting from the checkpoint: {f}");
                wait_to_retry(backoff, &shutdown, f).await?;
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
            Err(f) => return Err(f),
        }
    }
}

/// Waits `backoff` before the connector restarts after transient failure `failure`. A
/// shutdown during the wait returns `failure` (still transient): the run it ended wrote no
/// final checkpoint, so what it read since the last one is undelivered, and the process exits
/// 1 instead of reporting a clean stop.
async fn wait_to_retry(
    backoff: Duration,
    shutdown: &watch::Receiver<bool>,
    failure: Failure,
) -> Result<(), Failure> {
    if crate::error::sleep_before_retry(backoff, shutdown).await {
        Ok(())
    } else {
        Err(Failure::transient(format!(
            "shut down while waiting {backoff:?} to retry after: {}",
            failure.message
        )))
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

/// Starts the connector's source at `resume`, streaming into `tx`.
fn spawn_source(
    cfg: &ConnectorConfig,
    resume: Option<SourcePosition>,
    tx: mpsc::Sender<Result<crate::event::SourceEvent, Failure>>,
    health: &Health,
    shutdown: watch::Receiver<bool>,
    checkpointed: watch::Receiver<Option<SourcePosition>>,
) -> tokio::task::JoinHandle<()> {
    match &cfg.source {
        SourceConfig::Mysql(src) => tokio::spawn(source::mysql::session::run(
            cfg.name.clone(),
            src.clone(),
            cfg.tables.clone(),
            resume,
            tx,
            health.clone(),
            shutdown,
            checkpointed,
        )),
        SourceConfig::Postgres(src) => tokio::spawn(source::postgres::session::run(
            cfg.name.clone(),
            src.clone(),
            cfg.tables.clone(),
            resume,
            tx,
            health.clone(),
            shutdown,
            checkpointed,
        )),
    }
}

async fn run_acked(
    cfg: &ConnectorConfig,
    router: &EventRouter,
    store: &mut dyn CheckpointStore,
    health: &Health,
    shutdown: watch::Receiver<bool>,
) -> Result<(), Failure> {
    if let CheckpointConfig::Kafka { topic, .. } = &cfg.checkpoint {
        KafkaCheckpointStore::new(&cfg.kafka.bootstrap_servers, topic, &cfg.name)
            .ensure_topic()
            .await?;
    }
    let resume_cp = tokio::task::block_in_place(|| store.load())?;
    log_resume(cfg, &resume_cp);
    tokio::task::block_in_place(|| store.prepare())?;
    let resume = resume_cp.map(|c| c.position);
    let sink = KafkaSink::new(&cfg.kafka, &cfg.name)?;
    let (tx, rx) = mpsc::channel(1024);
    // Positions durably checkpointed, for sources that confirm them to the server
    // (PostgreSQL's flush LSN).
    let (checkpointed, checkpointed_rx) = watch::channel(resume.clone());
    let source_task = spawn_source(
        cfg,
        resume.clone(),
        tx,
        health,
        shutdown.clone(),
        checkpointed_rx,
    );
    let opts = PipelineOptions::default();
    let result = pipeline::run(
        &cfg.name,
        rx,
        router,
        &sink,
        store,
        resume,
        Some(&checkpointed),
        &opts,
        shutdown,
    )
    .await;
    source_task.abort();
    let _ = source_task.await;
    let flushed = tokio::task::block_in_place(|| sink.flush(Duration::from_secs(2)));
    result.and(flushed)
}

async fn run_transactional(
    cfg: &ConnectorConfig,
    router: &EventRouter,
    store: &KafkaCheckpointStore,
    transactional_id: &str,
    batch: &BatchOptions,
    health: &Health,
    shutdown: watch::Receiver<bool>,
) -> Result<(), Failure> {
    let sink = KafkaSink::new_transactional(&cfg.kafka, &cfg.name, transactional_id)?;
    // Fence older instances first: their open transaction is aborted, so the checkpoint
    // read next is the last one anybody will ever commit before us.
    // With Kafka unreachable this waits up to a minute: a shutdown meanwhile stops at once
    // (nothing was read yet, so nothing is left uncommitted).
    let mut sd = shutdown.clone();
    tokio::select! {
        r = sink.init_transactions() => r?,
        _ = sd.wait_for(|v| *v) => return Ok(()),
    }
    store.ensure_topic().await?;
    let resume = tokio::task::block_in_place(|| store.load())?;
    log_resume(cfg, &resume);
    let (tx, rx) = mpsc::channel(1024);
    let position = resume.as_ref().map(|c| c.position.clone());
    let (checkpointed, checkpointed_rx) = watch::channel(position.clone());
    let source_task = spawn_source(cfg, position, tx, health, shutdown.clone(), checkpointed_rx);
    let result = transactional::run(
        &cfg.name,
        rx,
        router,
        &sink,
        store,
        resume,
        Some(&checkpointed),
        batch,
        shutdown,
    )
    .await;
    source_task.abort();
    let _ = source_task.await;
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn shutdown_during_retry_backoff_reports_the_failure() {
        let (tx, rx) = watch::channel(false);
        let waiting = tokio::spawn(async move {
            wait_to_retry(
                Duration::from_secs(60),
                &rx,
                Failure::transient("Kafka unreachable"),
            )
            .await
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        tx.send(true).unwrap();
        let f = tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .expect("the shutdown ends the wait")
            .unwrap()
            .unwrap_err();
        assert!(f.is_transient());
        assert!(f.message.contains("Kafka unreachable"), "{}", f.message);
    }

    #[tokio::test]
    async fn retry_backoff_ends_without_shutdown() {
        let (_tx, rx) = watch::channel(false);
        let f = Failure::transient("Kafka unreachable");
        assert!(wait_to_retry(Duration::from_millis(10), &rx, f)
            .await
            .is_ok());
    }
}
