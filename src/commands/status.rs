//! `outboxd status`: each connector's checkpoint position, the source's current position,
//! and how far apart they are.

use std::process::ExitCode;

use anyhow::Context;

use crate::cli::ConfigArgs;
use crate::config::SourceConfig;
use crate::connector::open_store;
use crate::position::SourcePosition;
use crate::source::mysql::server;

/// Prints one JSON object per connector:
/// `{"connector":..,"checkpoint":..,"checkpoint_updated_at_ms":..,"source":..,"behind":..}`.
pub async fn run(args: ConfigArgs) -> anyhow::Result<ExitCode> {
    let cfg = args.load().context("loading the configuration")?;
    let mut ok = true;
    for c in &cfg.connectors {
        let store = open_store(c);
        let checkpoint = match store.load() {
            Ok(cp) => cp,
            Err(f) => {
                ok = false;
                println!(
                    "{}",
                    serde_json::json!({"connector": c.name, "error": f.to_string()})
                );
                continue;
            }
        };
        // PostgreSQL: the slot's figures (confirmed_flush_lsn, restart_lsn, lag in bytes).
        let mut slot: Option<serde_json::Value> = None;
        let current = match &c.source {
            SourceConfig::Mysql(src) => match server::status_position(src).await {
                Ok(p) => Some(p),
                Err(e) => {
                    ok = false;
                    println!(
                        "{}",
                        serde_json::json!({"connector": c.name, "error": e.to_string()})
                    );
                    continue;
                }
            },
            SourceConfig::Postgres(src) => match crate::preflight::postgres::status(src).await {
                Ok((p, s)) => {
                    slot = Some(s);
                    Some(p)
                }
                Err(e) => {
                    ok = false;
                    println!(
                        "{}",
                        serde_json::json!({"connector": c.name, "error": e.to_string()})
                    );
                    continue;
                }
            },
        };
        let behind = match (&checkpoint, &current) {
            (Some(cp), Some(cur)) => behind(&cp.position, cur),
            _ => None,
        };
        let mut line = serde_json::json!({
            "connector": c.name,
            "checkpoint": checkpoint.as_ref().map(|cp| cp.position.to_string()),
            "checkpoint_updated_at_ms": checkpoint.as_ref().map(|cp| cp.updated_at_ms),
            "source": current.as_ref().map(|p| p.to_string()),
            "behind": behind,
        });
        if let (Some(s), Some(obj)) = (slot, line.as_object_mut()) {
            obj.insert("slot".into(), s);
        }
        println!("{line}");
    }
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// A human description of the distance between a checkpoint and the source's position:
/// transactions per MariaDB GTID domain, or bytes within one binlog file.
fn behind(checkpoint: &SourcePosition, current: &SourcePosition) -> Option<String> {
    match (checkpoint, current) {
        (SourcePosition::MariadbGtid(a), SourcePosition::MariadbGtid(b)) => {
            let parts: Vec<String> = b
                .iter()
                .map(|g| {
                    let done = a.get(g.domain).map(|x| x.seq).unwrap_or(0);
                    format!(
                        "domain {}: {} transaction(s)",
                        g.domain,
                        g.seq.saturating_sub(done)
                    )
                })
                .collect();
            Some(parts.join(", "))
        }
        (SourcePosition::BinlogFile(a), SourcePosition::BinlogFile(b)) if a.file == b.file => {
            Some(format!("{} byte(s)", b.pos.saturating_sub(a.pos)))
        }
        (SourcePosition::BinlogFile(a), SourcePosition::BinlogFile(b)) => {
            Some(format!("from {} to {}", a, b))
        }
        (SourcePosition::Lsn(a), SourcePosition::Lsn(b)) => {
            Some(format!("{} byte(s)", b.0.saturating_sub(a.0)))
        }
        _ => None,
    }
}
