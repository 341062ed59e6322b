//! `outboxd binlog decode FILE...`: offline decoding of binlog files.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::process::ExitCode;

use anyhow::Context;

use crate::cli::BinlogCommand;
use crate::config::{self, SourceConfig};
use crate::event::Op;
use crate::router::{EventRouter, Routed};
use crate::source::mysql::decode_file_to_json;

/// Decodes each file to stdout: one JSON object per row change; with `--config`, after each
/// outbox INSERT a `{"kafka_record": ...}` object with the record it becomes, and a note on
/// stderr for a file none of whose row changes is in the config's tables. The config is
/// loaded offline (no password, no Kafka: nothing connects). Exits 1 when a file could not
/// be decoded to its end (damaged, truncated, not a binlog).
pub fn run(command: BinlogCommand) -> anyhow::Result<ExitCode> {
    let BinlogCommand::Decode { files, config } = command;
    let (columns, routing) = match &config {
        None => (BTreeMap::new(), None),
        Some(path) => {
            let cfg = config::load_offline(path).context("loading --config")?;
            let c = cfg
                .connectors
                .into_iter()
                .next()
                .context("--config names no connector")?;
            let columns = match &c.source {
                SourceConfig::Mysql(m) => m.columns.clone(),
                SourceConfig::Postgres(_) => BTreeMap::new(),
            };
            let router = EventRouter::new(&c.router).context("building the router")?;
            (columns, Some((router, c.tables)))
        }
    };
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let mut failed = 0;
    for file in &files {
        // Tables the file's row changes are in, and whether any is an outbox table.
        let mut seen: BTreeSet<String> = BTreeSet::new();
        let mut outbox_rows = false;
        let mut on_row = |change: &crate::event::RowChange,
                          w: &mut dyn Write|
         -> std::io::Result<()> {
            let Some((router, tables)) = &routing else {
                return Ok(());
            };
            if !tables.contains(&change.table) {
                if seen.len() < 20 {
                    seen.insert(change.table.to_string());
                }
                return Ok(());
            }
            outbox_rows = true;
            if change.op != Op::Insert {
                return Ok(());
            }
            let line = match router.route(change) {
                Ok(Routed::Record(r)) => serde_json::json!({"kafka_record": {
                    "topic": r.topic,
                    "key": r.key.as_deref().map(String::from_utf8_lossy),
                    "value": r.value.as_deref().map(String::from_utf8_lossy),
                    "headers": r.headers.iter().map(|(k, v)| (k.clone(), v.as_deref().map_or(serde_json::Value::Null, |v| serde_json::Value::from(String::from_utf8_lossy(v).into_owned())))).collect::<serde_json::Map<_, _>>(),
                    "timestamp_ms": r.timestamp_ms,
                    "partition": r.partition,
                }}),
                Ok(Routed::Skipped(reason)) => {
                    serde_json::json!({"kafka_record": null, "skipped": reason.to_string()})
                }
                Err(e) => serde_json::json!({"kafka_record": null, "error": e.to_string()}),
            };
            writeln!(w, "{line}")
        };
        match decode_file_to_json(file, &mut out, &columns, Some(&mut on_row)) {
            Ok(summary) => {
                let _ = out.flush();
                eprintln!("{}: {summary}", file.display());
                if let (Some((_, tables)), false) = (&routing, outbox_rows) {
                    let wanted: Vec<String> = tables.iter().map(|t| t.to_string()).collect();
                    eprintln!(
                        "{}: no row change in the config's tables ({}), so no kafka_record; \
                         row changes here are in: {}",
                        file.display(),
                        wanted.join(", "),
                        if seen.is_empty() {
                            "(no table)".to_string()
                        } else {
                            seen.iter().cloned().collect::<Vec<_>>().join(", ")
                        }
                    );
                }
            }
            Err(e) => {
                let _ = out.flush();
                eprintln!("outboxd: {e}");
                failed += 1;
            }
        }
    }
    out.flush().ok();
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
