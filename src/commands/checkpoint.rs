//! `outboxd checkpoint show|set`: read or replace a connector's stored checkpoint.
//!
//! `set` is the operator's way past an outbox row that can never be routed (it stays in the
//! binlog/WAL forever): point the checkpoint at the position after that row's transaction
//! (`outboxd status` and the connector's error show positions) and restart. The connector must
//! be stopped: a running one keeps writing its own checkpoint.

use std::process::ExitCode;
use std::str::FromStr;

use anyhow::{bail, Context};

use crate::checkpoint::{now_ms, Checkpoint, KafkaCheckpointStore};
use crate::cli::CheckpointCommand;
use crate::config::{CheckpointConfig, ConnectorConfig, SourceConfig};
use crate::connector::open_store;
use crate::position::SourcePosition;

/// Runs `checkpoint show` or `checkpoint set`.
pub async fn run(command: CheckpointCommand) -> anyhow::Result<ExitCode> {
    match command {
        CheckpointCommand::Show(args) => {
            let cfg = args.load().context("loading the configuration")?;
            for c in &cfg.connectors {
                let store = open_store(c);
                let cp = tokio::task::block_in_place(|| store.load())
                    .map_err(|f| anyhow::anyhow!(f.to_string()))?;
                println!(
                    "{}",
                    serde_json::json!({"connector": c.name, "checkpoint": cp})
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        CheckpointCommand::Set {
            config: args,
            connector,
            position,
        } => {
            let cfg = args.load().context("loading the configuration")?;
            let c = pick(&cfg.connectors, connector.as_deref())?;
            let position = SourcePosition::from_str(&position).with_context(|| {
                format!("--position {position:?} is not a position (e.g. mariadb_gtid:0-1-42)")
            })?;
            let fits = matches!(
                (&c.source, &position),
                (SourceConfig::Postgres(_), SourcePosition::Lsn(_))
                    | (
                        SourceConfig::Mysql(_),
                        SourcePosition::MariadbGtid(_)
                            | SourcePosition::MysqlGtidSet(_)
                            | SourcePosition::BinlogFile(_)
                    )
            );
            if !fits {
                bail!(
                    "position {position} does not fit connector {}'s source",
                    c.name
                );
            }
            if let CheckpointConfig::Kafka { topic, .. } = &c.checkpoint {
                KafkaCheckpointStore::new(&c.kafka, topic, &c.name)
                    .ensure_topic()
                    .await
                    .map_err(|f| anyhow::anyhow!(f.to_string()))?;
            }
            let mut store = open_store(c);
            let old = tokio::task::block_in_place(|| store.load())
                .map_err(|f| anyhow::anyhow!(f.to_string()))?;
            let new = Checkpoint {
                connector: c.name.clone(),
                position,
                skip: 0,
                updated_at_ms: now_ms(),
            };
            tokio::task::block_in_place(|| store.store(&new))
                .map_err(|f| anyhow::anyhow!(f.to_string()))?;
            println!(
                "{}",
                serde_json::json!({"connector": c.name, "previous": old, "checkpoint": new})
            );
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn pick<'a>(
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
