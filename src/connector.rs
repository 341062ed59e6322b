//! One connector's life: build the router, sink and checkpoint store, start the source at
//! the checkpoint, run the delivery loop, and restart from the checkpoint after transient
//! failures (with exponential backoff) until shutdown or a definite failure.

use std::time::{Duration, Instant};

use tokio::sync::{mpsc, watch};

use crate::checkpoint::{CheckpointStore, FileCheckpointStore};
use crate::config::{CheckpointConfig, ConnectorConfig, SourceConfig};
use crate::error::Failure;
use crate::health::{ConnectorState, Health};
use crate::metrics as m;
use crate::pipeline::{self, PipelineOptions};
use crate::router::EventRouter;
use crate::sink::KafkaSink;
use crate::source;

/// Longest wait between restarts after transient failures.
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// A run that lasted this long resets the backoff.
const HEALTHY_RUN: Duration = Duration::from_secs(60);

/// Opens the checkpoint store a connector is configured with.
pub fn open_store(cfg: &ConnectorConfig) -> Box<dyn CheckpointStore> {
    match &cfg.checkpoint {
        CheckpointConfig::File { path } => Box::new(FileCheckpointStore::new(path.clone())),
    }
}

/// Runs connector `cfg` until `shutdown` turns true (Ok) or a definite failure (Err).
pub async fn run(
    cfg: ConnectorConfig,
    health: Health,
    shutdown: watch::Receiver<bool>,
) -> Result<(), Failure> {
    let name = cfg.name.clone();
    let result = supervise(&cfg, &health, shutdown).await;
    match &result {
        Ok(()) => health.set(&name, ConnectorState::Stopped),
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
    let mut store = open_store(cfg);
    let opts = PipelineOptions::default();
    let mut backoff = Duration::from_secs(1);
    loop {
        let started = Instant::now();
        let outcome = run_once(
            cfg,
            &router,
            store.as_mut(),
            &opts,
            health,
            shutdown.clone(),
        )
        .await;
        if *shutdown.borrow() {
            return Ok(());
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
                let mut sd = shutdown.clone();
                tokio::select! {
                    _ = tokio::time::sleep(backoff) => {}
                    _ = sd.wait_for(|v| *v) => return Ok(()),
                }
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
            Err(f) => return Err(f),
        }
    }
}

async fn run_once(
    cfg: &ConnectorConfig,
    router: &EventRouter,
    store: &mut dyn CheckpointStore,
    opts: &PipelineOptions,
    health: &Health,
    shutdown: watch::Receiver<bool>,
) -> Result<(), Failure> {
    let resume = store.load()?.map(|c| c.position);
    match &resume {
        Some(p) => tracing::info!(connector = %cfg.name, position = %p, "resuming from checkpoint"),
        None => {
            tracing::info!(connector = %cfg.name, "no checkpoint yet: starting at the configured start position")
        }
    }
    let sink = KafkaSink::new(&cfg.kafka, &cfg.name)?;
    let (tx, rx) = mpsc::channel(4096);
    // Positions durably checkpointed, for sources that confirm them to the server
    // (PostgreSQL's flush LSN).
    let (checkpointed, _checkpointed_rx) = watch::channel(resume.clone());
    let source_task = match &cfg.source {
        SourceConfig::Mysql(src) => tokio::spawn(source::mysql::session::run(
            cfg.name.clone(),
            src.clone(),
            cfg.tables.clone(),
            resume.clone(),
            tx,
            health.clone(),
            shutdown.clone(),
        )),
        SourceConfig::Postgres(src) => tokio::spawn(source::postgres::session::run(
            cfg.name.clone(),
            src.clone(),
            cfg.tables.clone(),
            resume.clone(),
            tx,
            health.clone(),
            shutdown.clone(),
            checkpointed.subscribe(),
        )),
    };
    let result = pipeline::run(
        &cfg.name,
        rx,
        router,
        &sink,
        store,
        resume,
        Some(&checkpointed),
        opts,
        shutdown,
    )
    .await;
    source_task.abort();
    let _ = source_task.await;
    let flushed = tokio::task::block_in_place(|| sink.flush(Duration::from_secs(10)));
    result.and(flushed)
}
