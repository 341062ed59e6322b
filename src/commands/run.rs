//! `outboxd run`: every connector of the given config files, until SIGINT/SIGTERM.

use std::process::ExitCode;

use anyhow::Context;
use tokio::sync::watch;

use crate::cli::ConfigArgs;
use crate::config;
use crate::connector;
use crate::health::Health;

/// Runs the connectors; exits 0 after a clean shutdown, 1 when any connector stopped on a
/// definite failure.
pub async fn run(args: ConfigArgs) -> anyhow::Result<ExitCode> {
    let cfg = config::load_many(&args.config, args.kafka_bootstrap.as_deref())
        .context("loading the configuration")?;
    config::log_ignored_keys(&cfg);
    let prometheus = metrics_exporter_prometheus::PrometheusBuilder::new()
        .install_recorder()
        .context("installing the Prometheus recorder")?;
    crate::metrics::describe();
    let health = Health::default();
    if let Some(listen) = args.metrics_listen.or(cfg.metrics.listen) {
        let (p, h) = (prometheus.clone(), health.clone());
        tokio::spawn(async move {
            if let Err(e) = crate::http::serve(listen, p, h).await {
                tracing::error!("{e:#}");
            }
        });
    }

    let (shutdown_tx, shutdown_rx) = watch::channel(false);
    let mut tasks = tokio::task::JoinSet::new();
    for c in cfg.connectors {
        tracing::info!(connector = %c.name, tables = ?c.tables.iter().map(|t| t.to_string()).collect::<Vec<_>>(), "starting connector");
        tasks.spawn(connector::run(c, health.clone(), shutdown_rx.clone()));
    }

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
    let mut signalled = false;
    while !tasks.is_empty() {
        tokio::select! {
            r = &mut signal, if !signalled => {
                r.context("waiting for signals")?;
                tracing::info!("signal received: draining and writing final checkpoints");
                signalled = true;
                let _ = shutdown_tx.send(true);
            }
            Some(joined) = tasks.join_next() => {
                failed |= !matches!(joined, Ok(Ok(())));
            }
        }
    }
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}
