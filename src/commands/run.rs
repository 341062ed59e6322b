//! `outboxd run`: every connector of the given config files, until SIGINT/SIGTERM.

use std::process::ExitCode;

use anyhow::Context;

use crate::cli::ConfigArgs;
use crate::config;
use tokio::sync::watch;

use crate::connector::Connector;
use crate::group::{self, GroupPlan};
use crate::health::Health;

/// Longest the process waits for its connectors after SIGINT/SIGTERM: their own shutdown
/// grace (`crate::pipeline::SHUTDOWN_GRACE`, 10 s) plus time for a final checkpoint write.
pub const STOP_DEADLINE: std::time::Duration = std::time::Duration::from_secs(15);

/// Runs the connectors; exits 0 after a clean shutdown, 1 when any connector stopped on a
/// definite failure, stopped without its final checkpoint, or had not stopped
/// [`STOP_DEADLINE`] after the signal.
pub async fn run(args: ConfigArgs) -> anyhow::Result<ExitCode> {
    let cfg = args.load().context("loading the configuration")?;
    config::log_ignored_keys(&cfg);
    let plan = GroupPlan::for_config(&cfg, args.group.as_deref())?;
    let prometheus = metrics_exporter_prometheus::PrometheusBuilder::new()
        .install_recorder()
        .context("installing the Prometheus recorder")?;
    crate::metrics::describe();
    let health = Health::default();
    if let Some(listen) = args.metrics_listen.or(cfg.metrics.listen) {
        let listener = crate::http::bind(listen).await?;
        let (p, h) = (prometheus.clone(), health.clone());
        tokio::spawn(async move {
            if let Err(e) = crate::http::serve(listener, p, h).await {
                tracing::error!("{e:#}");
            }
        });
    }

    // Each task ends with whether it failed; a shutdown reaches them through `stops` (each
    // connector of a process without a group) or `shutdown` (a group member).
    let (shutdown, shutdown_rx) = watch::channel(false);
    let mut stops = Vec::new();
    let mut tasks = tokio::task::JoinSet::new();
    match plan {
        Some(plan) => {
            tracing::info!(group = %plan.name, connectors = ?cfg.connectors.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(), "running as a member of group {}: connectors start when the group assigns them", plan.name);
            tasks.spawn(group::run_member(cfg, plan, health.clone(), shutdown_rx));
        }
        None => {
            for c in cfg.connectors {
                tracing::info!(connector = %c.name, tables = ?c.tables.iter().map(|t| t.to_string()).collect::<Vec<_>>(), "starting connector");
                let running = Connector::new(c)
                    .context("building the connector")?
                    .start(health.clone());
                stops.push(running.stop_handle());
                tasks.spawn(async move { running.join().await.is_err() });
            }
        }
    }

    // SIGHUP (a terminal's hangup, `systemctl reload`, a config-reloader sidecar) ended the
    // process undrained: it is answered instead, until reloading is built.
    let mut hangup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
        .context("listening for SIGHUP")?;
    tokio::spawn(async move {
        while hangup.recv().await.is_some() {
            tracing::warn!(
                "SIGHUP received: outboxd does not reload its configuration yet, so nothing \
                 changed and every connector keeps streaming; to apply a changed \
                 configuration, stop it with SIGTERM (it drains and writes final checkpoints) \
                 and start it again"
            );
        }
    });
    let signal = async {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        tokio::select! {
            r = tokio::signal::ctrl_c() => r,
            _ = term.recv() => Ok(()),
        }
    };
    // A connector that stops on a definite failure stops alone (it logged why); the process
    // ends when all have stopped, or on a signal after draining them.
    let mut signal = std::pin::pin!(signal);
    let mut failed = false;
    // Set at the signal: when the process exits even if a connector has not stopped.
    let mut stop_deadline: Option<tokio::time::Instant> = None;
    while !tasks.is_empty() {
        let overdue = async {
            match stop_deadline {
                Some(d) => tokio::time::sleep_until(d).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            r = &mut signal, if stop_deadline.is_none() => {
                r.context("waiting for signals")?;
                tracing::info!("signal received: draining and writing final checkpoints");
                stop_deadline = Some(tokio::time::Instant::now() + STOP_DEADLINE);
                shutdown.send_replace(true);
                for stop in &stops {
                    stop.stop();
                }
            }
            Some(joined) = tasks.join_next() => {
                failed |= !matches!(joined, Ok(false));
            }
            _ = overdue => {
                // A connector stuck in a blocking Kafka call (a checkpoint write or a
                // metadata request while the brokers are unreachable) must not hold the
                // process past common stop timeouts. Its position is safe: nothing past
                // its last stored checkpoint is lost, only delivered again.
                tracing::error!(
                    connectors = tasks.len(),
                    "connectors did not stop within {STOP_DEADLINE:?} of the signal (Kafka \
                     unreachable?); exiting without their final checkpoints: what they read \
                     since the last one is delivered again after restart"
                );
                return Ok(ExitCode::FAILURE);
            }
        }
    }
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}
