//! `outboxd status`: each connector's checkpoint position, the source's current position,
//! how far apart they are, and what the running relay says of it.
//!
//! `status` is a process of its own: it reads the checkpoint store and the source itself,
//! and knows the relay's state (streaming, retrying, Kafka unreachable, ...) only by asking
//! it: when the files' `metrics.listen` or `--metrics-listen` names the relay's endpoint, it
//! reads `/health` there; otherwise (or when nothing answers) it says it cannot tell.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;

use crate::cli::ConfigArgs;
use crate::connector::open_store;
use crate::position::SourcePosition;
use crate::source::Driver;

/// Prints one JSON object per connector:
/// `{"connector":..,"checkpoint":..,"checkpoint_updated_at_ms":..,"source":..,"behind":..,
/// "relay":..}` where `relay` is the running relay's `/health` entry for the connector
/// (`state`, `ready`, `reason`, ...), or `{"unknown": why}` when it cannot be asked; plus
/// `"checkpoint_lost": "<why>"` when the server can no longer serve the checkpoint (purged
/// binlogs; a dropped, overtaken or WAL-less slot; a checkpoint of another kind of source),
/// which also makes it exit 1; for PostgreSQL `"slot"` and `"publication"` (`name`, `exists`,
/// `publish_via_partition_root`, `uncovered`: what does not carry the outbox rows), and
/// `"uncovered": "<why>"` when the publication does not carry them (exit 1); and, in a group (`--group`), `"owner"`: the member running the
/// connector (`null` when none does, with `"owner_note"` saying why: never run, released, or
/// its member left the group), and `"members"`: which members of the group define it as
/// these files do (`same`), otherwise (`different`), or not at all (`lacking`). The source is
/// read before the checkpoint (see `source::driver::Serving`).
pub async fn run(args: ConfigArgs) -> anyhow::Result<ExitCode> {
    let cfg = args.load().context("loading the configuration")?;
    let plan = crate::group::GroupPlan::for_config(&cfg, args.group.as_deref())?;
    let relay = match args.metrics_listen.or(cfg.metrics.listen) {
        Some(addr) => relay_health(addr).await,
        None => Err("no metrics.listen / --metrics-listen names the relay's /health".into()),
    };
    let relay_of = |name: &str| -> serde_json::Value {
        match &relay {
            Ok(report) => match report.connectors.get(name) {
                Some(h) => serde_json::to_value(h).unwrap_or_default(),
                None => {
                    serde_json::json!({"unknown": "the relay there does not run this connector"})
                }
            },
            Err(why) => serde_json::json!({ "unknown": why }),
        }
    };
    // In a group: what the members' definitions say (read once for every connector).
    let group_view = match (&plan, cfg.connectors.first()) {
        (Some(plan), Some(first)) => {
            let (kafka, group) = (first.kafka.clone(), plan.name.clone());
            Some(
                tokio::task::spawn_blocking(move || {
                    crate::group::definitions::read_view(&kafka, &group)
                })
                .await?,
            )
        }
        _ => None,
    };
    let mut ok = true;
    for c in &cfg.connectors {
        // The source first, the checkpoint after it (see `source::driver::Serving`).
        let (current, fields, serving) = match Driver::of(c).status(c).await {
            Ok(r) => r,
            Err(e) => {
                ok = false;
                println!(
                    "{}",
                    serde_json::json!({"connector": c.name, "error": e, "relay": relay_of(&c.name)})
                );
                continue;
            }
        };
        let checkpoint = match crate::checkpoint::load_apart(open_store(c)) {
            Ok(cp) => cp,
            Err(f) => {
                ok = false;
                println!(
                    "{}",
                    serde_json::json!({"connector": c.name, "error": f.to_string(), "relay": relay_of(&c.name)})
                );
                continue;
            }
        };
        let gap = checkpoint.as_ref().and_then(|cp| serving.gap(&cp.position));
        let current = Some(current);
        let behind = match (&checkpoint, &current) {
            (Some(cp), Some(cur)) => behind(cp.position.delivered(), cur),
            _ => None,
        };
        let mut line = serde_json::json!({
            "connector": c.name,
            "checkpoint": checkpoint.as_ref().map(|cp| cp.position.to_string()),
            "checkpoint_updated_at_ms": checkpoint.as_ref().map(|cp| cp.updated_at_ms),
            "source": current.as_ref().map(|p| p.to_string()),
            "behind": behind,
        });
        if let Some(obj) = line.as_object_mut() {
            obj.insert("relay".into(), relay_of(&c.name));
            obj.extend(fields);
            if let Some(u) = serving.uncovered() {
                ok = false;
                obj.insert("uncovered".into(), u.into());
            }
            if let Some(g) = gap {
                ok = false;
                obj.insert(
                    "checkpoint_lost".into(),
                    format!(
                        "{g}; `outboxd run` will stop on this (see `outboxd checkpoint reset` \
                         to start fresh, accepting the gap)"
                    )
                    .into(),
                );
            }
        }
        if let (Some(plan), Some(obj)) = (&plan, line.as_object_mut()) {
            // In a group: who runs the connector now (its last ownership record, if that
            // member has not let go of it and is still in the group).
            let (kafka, group, name) = (c.kafka.clone(), plan.name.clone(), c.name.clone());
            let owner = tokio::task::spawn_blocking(move || {
                crate::group::owners::OwnerStatus::read(&kafka, &group, &name)
            })
            .await?;
            if let Some(view) = &group_view {
                obj.insert(
                    "members".into(),
                    match view {
                        Ok((catalog, live)) => crate::group::definitions::status_of(
                            &c.name,
                            &crate::group::definitions::Definition::of(c),
                            catalog,
                            live,
                        ),
                        Err(e) => serde_json::json!({ "error": e }),
                    },
                );
            }
            match owner {
                Ok(o) => {
                    obj.insert("owner".into(), serde_json::to_value(&o.owner)?);
                    if let Some(note) = o.note {
                        obj.insert("owner_note".into(), note.into());
                    }
                }
                Err(e) => {
                    obj.insert("owner".into(), serde_json::json!({ "error": e }));
                }
            }
        }
        println!("{line}");
    }
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// The running relay's `/health` at `addr` (2 s at most), or why it could not be read.
async fn relay_health(addr: SocketAddr) -> Result<crate::health::Report, String> {
    use http_body_util::{BodyExt, Empty};
    let ask = async {
        let stream = tokio::net::TcpStream::connect(addr).await.map_err(|e| {
            format!(
                "nothing answers at {addr} ({e}): the relay is not running, or serves elsewhere"
            )
        })?;
        let (mut sender, conn) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
                .await
                .map_err(|e| format!("{addr}: {e}"))?;
        tokio::spawn(conn);
        let request = hyper::Request::get("/health")
            .header(hyper::header::HOST, addr.to_string())
            .body(Empty::<bytes::Bytes>::new())
            .map_err(|e| e.to_string())?;
        let response = sender
            .send_request(request)
            .await
            .map_err(|e| format!("{addr}/health: {e}"))?;
        let body = response
            .into_body()
            .collect()
            .await
            .map_err(|e| format!("{addr}/health: {e}"))?
            .to_bytes();
        serde_json::from_slice(&body)
            .map_err(|e| format!("{addr}/health is not outboxd's health report: {e}"))
    };
    tokio::time::timeout(Duration::from_secs(2), ask)
        .await
        .unwrap_or_else(|_| Err(format!("{addr}/health did not answer within 2s")))
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
