//! `outboxd checkpoint show|set|reset`: read, replace or remove a connector's stored
//! checkpoint.
//!
//! `set` is the operator's way past an outbox event that can never be delivered (it stays in
//! the binlog/WAL forever): the connector's error names the event and prints the exact
//! `checkpoint set` that steps past its transaction (or, for a transaction already partly
//! delivered, past that event: `--skip`). `reset` removes the checkpoint, so the next start
//! begins fresh: the explicit way to accept a gap the source can no longer serve (purged
//! binlogs, a dropped slot). The connector must be stopped: a running one keeps writing its
//! own checkpoint.

use std::process::ExitCode;
use std::str::FromStr;

use anyhow::{bail, Context};

use crate::checkpoint::{now_ms, Checkpoint};
use crate::cli::CheckpointCommand;
use crate::config::ConnectorConfig;
use crate::connector::open_store;
use crate::position::SourcePosition;
use crate::source::Driver;

/// Runs `checkpoint show`, `set`, `reset`, `import-debezium` or `export-debezium`.
pub async fn run(command: CheckpointCommand) -> anyhow::Result<ExitCode> {
    match command {
        CheckpointCommand::ImportDebezium {
            args,
            from,
            dedupe_window,
            dedupe_topics,
            debezium_stopped,
        } => {
            super::debezium::import(args, from, dedupe_window, dedupe_topics, debezium_stopped)
                .await
        }
        CheckpointCommand::ExportDebezium {
            args,
            to,
            debezium_stopped,
        } => super::debezium::export(args, to, debezium_stopped).await,
        CheckpointCommand::Show(args) => {
            let cfg = args
                .load_for_checkpoint()
                .context("loading the configuration")?;
            for c in &cfg.connectors {
                let store = open_store(c);
                let cp = store
                    .load()
                    .await
                    .map_err(|f| anyhow::anyhow!(f.to_string()))?;
                println!(
                    "{}",
                    serde_json::json!({"connector": c.name, "checkpoint": cp})
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        CheckpointCommand::Reset {
            config: args,
            connector,
        } => {
            let cfg = args
                .load_for_checkpoint()
                .context("loading the configuration")?;
            let c = pick(&cfg.connectors, connector.as_deref())?;
            ensure_topic(c).await?;
            let mut store = open_store(c);
            let old = store
                .load()
                .await
                .map_err(|f| anyhow::anyhow!(f.to_string()))?;
            store
                .clear()
                .await
                .map_err(|f| anyhow::anyhow!(f.to_string()))?;
            let fresh = Driver::of(c).fresh_start();
            let note = match &old {
                Some(cp) => format!(
                    "checkpoint {} removed: the next start begins at {fresh}; events after {} \
                     that were not delivered will not be delivered",
                    cp.position, cp.position
                ),
                None => format!("there was no checkpoint; the next start begins at {fresh}"),
            };
            tracing::warn!(connector = %c.name, "{note}");
            println!(
                "{}",
                serde_json::json!({"connector": c.name, "previous": old, "checkpoint": null, "note": note})
            );
            Ok(ExitCode::SUCCESS)
        }
        CheckpointCommand::Set {
            config: args,
            connector,
            position,
            skip,
        } => {
            let cfg = args
                .load_for_checkpoint()
                .context("loading the configuration")?;
            let c = pick(&cfg.connectors, connector.as_deref())?;
            let position = SourcePosition::from_str(&position).with_context(|| {
                format!("--position {position:?} is not a position (e.g. mariadb_gtid:0-1-42)")
            })?;
            let fits = Driver::of(c).accepts(&position);
            if !fits {
                bail!(
                    "position {position} does not fit connector {}'s source",
                    c.name
                );
            }
            ensure_topic(c).await?;
            let mut store = open_store(c);
            let old = store
                .load()
                .await
                .map_err(|f| anyhow::anyhow!(f.to_string()))?;
            let new = Checkpoint {
                connector: c.name.clone(),
                position,
                skip,
                updated_at_ms: now_ms(),
                cutover: None,
            };
            store
                .store(&new)
                .await
                .map_err(|f| anyhow::anyhow!(f.to_string()))?;
            println!(
                "{}",
                serde_json::json!({"connector": c.name, "previous": old, "checkpoint": new})
            );
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// Creates the connector's checkpoint topic if it has a Kafka store and the topic is missing.
pub(super) async fn ensure_topic(c: &ConnectorConfig) -> anyhow::Result<()> {
    crate::connector::ensure_store(c)
        .await
        .map_err(|f| anyhow::anyhow!(f.to_string()))
}

pub(super) fn pick<'a>(
    connectors: &'a [ConnectorConfig],
    name: Option<&str>,
) -> anyhow::Result<&'a ConnectorConfig> {
    match name {
        Some(n) => connectors
            .iter()
            .find(|c| c.name == n)
            .with_context(|| format!("no connector named {n:?} in the given files")),
        None if connectors.len() == 1 => Ok(&connectors[0]),
        None => bail!("the files define several connectors: name one with --connector"),
    }
}
