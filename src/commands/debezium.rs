//! `outboxd checkpoint import-debezium` and `export-debezium`: the switch from a running
//! Debezium connector to outboxd, and the way back (`crate::cutover` has the mechanics,
//! README "Migrating from Debezium" the runbook).
//!
//! Import, in this order, changing nothing until the last step: the connector must not be
//! running in Kafka Connect (REST), nor reading the source (a MySQL/MariaDB binlog dump
//! thread of its account, an active PostgreSQL slot); its committed offset is read (offsets
//! topic, offsets file or REST) and must name this connector (`name`, `topic.prefix`);
//! the source must still serve it; it is mapped onto a checkpoint by reading the
//! transaction it is in; the routed topics are read back from the offset's time on; then
//! the checkpoint is stored with the note that makes the connector skip what Debezium wrote
//! after its offset. Export: outboxd must be stopped; its checkpoint becomes Debezium's
//! offset, written where the worker reads it.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context};
use serde_json::json;

use super::checkpoint::{ensure_topic, pick};
use crate::checkpoint::{now_ms, Checkpoint, Cutover};
use crate::cli::{DebeziumArgs, OffsetsAt};
use crate::config::ConnectorConfig;
use crate::connector::open_store;
use crate::cutover::dedupe::{self, format_ms};
use crate::cutover::offsets::OffsetKey;
use crate::cutover::source::Imported;
use crate::cutover::worker::{self, ConnectRest, Liveness, Lookup, WorkerFile};
use crate::cutover::{self, topics};
use crate::position::SourcePosition;

/// What both directions work with: the connector, its Debezium key, the worker's storage.
struct Target {
    cfg: crate::config::Config,
    index: usize,
    key: OffsetKey,
    worker: Option<WorkerFile>,
    rest: Option<ConnectRest>,
    /// The REST URL came from the command line (not only derived from the worker file).
    rest_given: bool,
}

impl Target {
    fn connector(&self) -> &ConnectorConfig {
        &self.cfg.connectors[self.index]
    }

    fn load(args: &DebeziumArgs) -> anyhow::Result<Self> {
        if args.config.shadow.is_some() {
            bail!("--shadow makes no sense here: the import and export work on the connector itself (the shadow run has its own checkpoint)");
        }
        let cfg = args
            .config
            .load_without_shadow()
            .context("loading the configuration")?;
        let c = pick(&cfg.connectors, args.connector.as_deref())?;
        let index = cfg
            .connectors
            .iter()
            .position(|x| x.name == c.name)
            .expect("picked from the list");
        let name = args.debezium_name.clone().unwrap_or_else(|| c.name.clone());
        let Some(prefix) = args
            .topic_prefix
            .clone()
            .or_else(|| c.metrics_server.clone())
        else {
            bail!(
                "connector {} has no Debezium `topic.prefix` (a TOML connector): give the one \
                 Debezium ran with, --topic-prefix PREFIX (Connect keys the offsets by it)",
                c.name
            );
        };
        let worker = args
            .config
            .kafka_config
            .as_deref()
            .map(WorkerFile::read)
            .transpose()?;
        let url = args
            .connect_url
            .clone()
            .or_else(|| worker.as_ref().and_then(|w| w.rest_url.clone()));
        let rest = url.as_deref().map(ConnectRest::new).transpose()?;
        Ok(Self {
            key: OffsetKey::debezium(&name, &prefix),
            cfg,
            index,
            worker,
            rest,
            rest_given: args.connect_url.is_some(),
        })
    }

    fn offsets_topic(&self, args: &DebeziumArgs) -> Option<String> {
        args.offsets_topic
            .clone()
            .or_else(|| self.worker.as_ref().and_then(|w| w.offsets_topic.clone()))
    }

    fn offsets_file(&self, args: &DebeziumArgs) -> Option<std::path::PathBuf> {
        args.offsets_file
            .clone()
            .or_else(|| self.worker.as_ref().and_then(|w| w.offsets_file.clone()))
    }

    /// Where the offsets are: the one asked for, else the worker file's topic, its file,
    /// else REST.
    fn place(&self, args: &DebeziumArgs, asked: Option<OffsetsAt>) -> anyhow::Result<OffsetsAt> {
        Ok(match asked {
            Some(a) => a,
            None if self.offsets_topic(args).is_some() => OffsetsAt::OffsetsTopic,
            None if self.offsets_file(args).is_some() => OffsetsAt::OffsetsFile,
            None if self.rest.is_some() => OffsetsAt::Rest,
            None => bail!(
                "where does Kafka Connect keep the offsets? Give the worker's properties file \
                 (--kafka-config WORKER.properties: its offset.storage.topic or \
                 offset.storage.file.filename), or --offsets-topic, --offsets-file, or \
                 --from rest with --connect-url"
            ),
        })
    }

    /// Whether Kafka Connect runs the connector: refused when it does, and when its REST API
    /// cannot tell (a host name that does not resolve, no answer, a 404 that is not
    /// Connect's, 401/403) unless `debezium_stopped` (the operator stopped it). Only Connect's
    /// own "not found" and a refused connection (nothing listens there) count as stopped.
    async fn not_running_in_connect(
        &self,
        notes: &mut Vec<String>,
        debezium_stopped: bool,
    ) -> anyhow::Result<()> {
        let Some(rest) = &self.rest else {
            notes.push(
                "no Kafka Connect REST URL known (--connect-url, or `listeners` in the worker \
                 file): not asked whether the connector runs"
                    .into(),
            );
            return Ok(());
        };
        let name = &self.key.connector;
        match rest.liveness(name).await {
            Ok(Liveness::Known(s)) if s.running() => bail!(
                "Kafka Connect at {} still runs connector {name} (connector {}, tasks {:?}{}): \
                 stop it first, keeping its offsets: `curl -X PUT {}/connectors/{name}/stop` \
                 (KIP-875), or stop the worker",
                rest.url(),
                s.state,
                s.tasks,
                s.worker_id
                    .as_deref()
                    .map(|w| format!(", on worker {w}"))
                    .unwrap_or_default(),
                rest.url()
            ),
            Ok(Liveness::Known(s)) => notes.push(format!(
                "Kafka Connect at {} has connector {name} in state {}",
                rest.url(),
                s.state
            )),
            Ok(Liveness::Unknown) => notes.push(format!(
                "Kafka Connect at {} does not run connector {name}",
                rest.url()
            )),
            Ok(Liveness::NotListening(detail)) => notes.push(format!(
                "nothing listens at {}{} ({detail}): taken for a stopped worker",
                rest.url(),
                if self.rest_given {
                    ""
                } else {
                    " (from the worker file; on another host than the worker, give --connect-url)"
                }
            )),
            Err(e) if debezium_stopped => notes.push(format!(
                "{e} — --debezium-stopped: taken as stopped by the operator"
            )),
            Err(e) => return Err(e.into()),
        }
        Ok(())
    }
}

/// Reads Debezium's committed offset value from `place`; refuses when there is none for the
/// connector's key, saying which keys there are.
async fn read_offset(
    target: &Target,
    args: &DebeziumArgs,
    place: OffsetsAt,
) -> anyhow::Result<(Vec<u8>, String)> {
    let key = &target.key;
    let c = target.connector();
    let lookup: Lookup = match place {
        OffsetsAt::OffsetsTopic => {
            let Some(topic) = target.offsets_topic(args) else {
                bail!("--from offsets-topic: name the topic (--offsets-topic, or offset.storage.topic in the worker file given with --kafka-config)");
            };
            let kafka = c.kafka.clone();
            tokio::task::block_in_place(|| worker::read_offsets_topic(&kafka, &topic, key))?
        }
        OffsetsAt::OffsetsFile => {
            let Some(file) = target.offsets_file(args) else {
                bail!("--from offsets-file: name the file (--offsets-file, or offset.storage.file.filename in the worker file given with --kafka-config)");
            };
            worker::read_offsets_file(&file, key)?
        }
        OffsetsAt::Rest => {
            let Some(rest) = &target.rest else {
                bail!("--from rest: give Kafka Connect's URL with --connect-url");
            };
            rest.offsets(key).await?
        }
    };
    match lookup.value {
        Some(v) => Ok((v, lookup.at)),
        None if lookup.reset => bail!(
            "the offsets of {key} in {} were reset (their last record has no value): \
             Debezium would start over too. Nothing to import; start outboxd without a \
             checkpoint instead",
            lookup.at
        ),
        None => {
            let mut hint = String::new();
            let same_name: Vec<String> = lookup
                .others
                .iter()
                .filter(|k| k.connector == key.connector)
                .map(|k| k.to_string())
                .collect();
            let same_server: Vec<String> = lookup
                .others
                .iter()
                .filter(|k| k.server() == key.server() && k.connector != key.connector)
                .map(|k| k.to_string())
                .collect();
            if !same_name.is_empty() {
                hint = format!(
                    " The connector name matches {}: is `topic.prefix` (--topic-prefix) the \
                     one Debezium ran with?",
                    same_name.join(", ")
                );
            } else if !same_server.is_empty() {
                hint = format!(
                    " The topic.prefix matches {}: is the connector `name` \
                     (--debezium-name) the one Kafka Connect knows?",
                    same_server.join(", ")
                );
            }
            let others = if lookup.others.is_empty() {
                "no connector's offsets at all".to_string()
            } else {
                format!(
                    "offsets of {}",
                    lookup
                        .others
                        .iter()
                        .map(|k| k.to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            };
            if !lookup.written_otherwise.is_empty() {
                hint.push_str(&format!(
                    " Records with this connector's key written with other bytes were \
                     found: {}. Kafka Connect matches offset keys byte for byte (`{}`), so \
                     Debezium does not read them either.",
                    lookup.written_otherwise.join(", "),
                    String::from_utf8_lossy(&key.to_bytes())
                ));
            }
            bail!(
                "{} holds no offsets for {key} (connector name and topic.prefix); it holds \
                 {others}.{hint} Nothing was changed",
                lookup.at
            )
        }
    }
}

/// Whether the Debezium connector JSON asks for MariaDB `ANNOTATE_ROWS` events
/// (`include.query=true`): Debezium counts them among a transaction's events then.
fn include_query(args: &DebeziumArgs) -> bool {
    args.config.config.iter().any(|p| {
        std::fs::read_to_string(p)
            .ok()
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
            .map(|v| {
                let c = v.get("config").unwrap_or(&v);
                c.get("include.query")
                    .map(|q| {
                        q.as_str().map_or(q.as_bool() == Some(true), |s| {
                            s.eq_ignore_ascii_case("true")
                        })
                    })
                    .unwrap_or(false)
            })
            .unwrap_or(false)
    })
}

/// `outboxd checkpoint import-debezium`.
pub async fn import(
    args: DebeziumArgs,
    from: Option<OffsetsAt>,
    dedupe_window: Duration,
    dedupe_topics: Vec<String>,
    debezium_stopped: bool,
) -> anyhow::Result<ExitCode> {
    let target = Target::load(&args)?;
    let c = target.connector().clone();
    let place = target.place(&args, from)?;
    let mut notes = Vec::new();
    // 1. Debezium must be stopped.
    target
        .not_running_in_connect(&mut notes, debezium_stopped)
        .await?;
    cutover::source::refuse_if_debezium_reads(&c, debezium_stopped, &mut notes).await?;
    // 2. Its committed offset.
    let (value, at) = read_offset(&target, &args, place).await?;
    let offset_json: serde_json::Value = serde_json::from_slice(&value).unwrap_or(json!(null));
    // 3. Mapped onto the checkpoint, the source read (the PostgreSQL slot checked).
    let Imported {
        position,
        skip,
        txn,
        offset_ms,
    } = cutover::source::import(&c, &value, &at.to_string(), include_query(&args)).await?;
    // 4. What Debezium wrote after its offset, read back.
    let now = now_ms();
    let (cutover, dedupe_report) = if dedupe_window.is_zero() {
        notes.push("--dedupe-window 0: the routed topics are not read back; events Debezium wrote after its committed offset are delivered again, and so are outboxd's own deliveries after that offset when outboxd ran since Debezium stopped (its checkpoint is set back to Debezium's)".into());
        (None, json!(null))
    } else {
        let topics = if dedupe_topics.is_empty() {
            let kafka = c.kafka.clone();
            let pattern = topics::pattern(&c.router, None);
            tokio::task::block_in_place(|| topics::matching(&kafka, &pattern))?
        } else {
            dedupe_topics
        };
        let floor = now - dedupe_window.as_millis() as i64;
        let wanted = offset_ms.unwrap_or(now) - dedupe::SINCE_MARGIN.as_millis() as i64;
        if wanted < floor {
            notes.push(format!(
                "Debezium's offset is from {}, before the --dedupe-window: the topics are read \
                 back from {} only; events it wrote before that and after its offset would be \
                 delivered again (raise --dedupe-window if it delivered for longer than that \
                 past its offset)",
                offset_ms.map_or_else(|| "?".into(), format_ms),
                format_ms(floor)
            ));
        }
        let since = wanted.max(floor);
        let kafka = c.kafka.clone();
        let name = c.name.clone();
        let back =
            tokio::task::block_in_place(|| dedupe::read_back(&kafka, &name, &topics, since))?;
        let report = json!({
            "topics": topics,
            "since": format_ms(since),
            "records": back.records,
            "events": back.ids.len(),
            "latest_record": back.latest_ms.map(format_ms),
        });
        (
            Some(Cutover {
                from: "debezium".into(),
                topics,
                since_ms: since,
                until_ms: now,
            }),
            report,
        )
    };
    // 5. Stored (the first change).
    ensure_topic(&c).await?;
    let mut store = open_store(&c);
    let previous = store
        .load()
        .await
        .map_err(|f| anyhow::anyhow!(f.to_string()))?;
    let new = Checkpoint {
        connector: c.name.clone(),
        position,
        skip,
        updated_at_ms: now,
        cutover,
    };
    if let Some(note) = rewinds(previous.as_ref(), &new, offset_ms, dedupe_window.is_zero()) {
        tracing::warn!(connector = %c.name, "{note}");
        notes.push(note);
    }
    store
        .store(&new)
        .await
        .map_err(|f| anyhow::anyhow!(f.to_string()))?;
    tracing::info!(connector = %c.name, position = %new.position, skip = new.skip, from = %at, "imported Debezium's committed offset");
    println!(
        "{}",
        json!({
            "connector": c.name,
            "debezium": {"key": target.key.to_string(), "from": at, "offset": offset_json},
            "in_transaction": txn,
            "previous": previous,
            "checkpoint": new,
            "dedupe": dedupe_report,
            "notes": notes,
        })
    );
    Ok(ExitCode::SUCCESS)
}

/// The warning when the import sets back a checkpoint outboxd wrote after Debezium's offset
/// (outboxd ran since Debezium stopped): its deliveries since that offset come again unless
/// the dedupe read-back covers them. `None` when there was no checkpoint, it is the same
/// position, or it is older than the offset (Debezium ran on after outboxd).
fn rewinds(
    previous: Option<&Checkpoint>,
    new: &Checkpoint,
    offset_ms: Option<i64>,
    no_read_back: bool,
) -> Option<String> {
    let p = previous?;
    if p.position == new.position && p.skip == new.skip {
        return None;
    }
    let behind = match (&p.position, &new.position) {
        (SourcePosition::Lsn(a), SourcePosition::Lsn(b)) => a.0 > b.0,
        _ => offset_ms.is_some_and(|o| p.updated_at_ms > o),
    };
    if !behind {
        return None;
    }
    let then = if no_read_back {
        "with --dedupe-window 0 they are delivered again (duplicates): import with a \
         --dedupe-window that reaches back to Debezium's offset to skip them"
    } else {
        "the read-back of the routed topics (--dedupe-window) skips those it finds; any \
         older than the window are delivered again"
    };
    Some(format!(
        "outboxd's checkpoint ({} skip {}, written {}) is ahead of Debezium's offset: outboxd \
         ran after Debezium stopped, and this import sets its checkpoint back to {} skip {}. \
         The events outboxd delivered since that offset are read again: {then}",
        p.position,
        p.skip,
        format_ms(p.updated_at_ms),
        new.position,
        new.skip
    ))
}

/// `outboxd checkpoint export-debezium`.
pub async fn export(
    args: DebeziumArgs,
    to: Option<OffsetsAt>,
    debezium_stopped: bool,
) -> anyhow::Result<ExitCode> {
    let target = Target::load(&args)?;
    let c = target.connector().clone();
    let place = match to {
        Some(t) => t,
        None => target.place(&args, None).unwrap_or(OffsetsAt::Rest),
    };
    let mut notes = Vec::new();
    let store = open_store(&c);
    let Some(cp) = store
        .load()
        .await
        .map_err(|f| anyhow::anyhow!(f.to_string()))?
    else {
        bail!("connector {} has no checkpoint: nothing to export", c.name);
    };
    // outboxd must be stopped (PostgreSQL: the slot is checked by the export itself), and
    // Kafka Connect must not run the connector.
    cutover::source::refuse_if_outboxd_reads(&c, &mut notes).await?;
    target
        .not_running_in_connect(&mut notes, debezium_stopped)
        .await?;
    let annotate = include_query(&args);
    let value = cutover::source::export(&c, &cp, annotate, false).await?;
    let bytes = value.to_string().into_bytes();
    let key = &target.key;
    let written = match place {
        OffsetsAt::OffsetsTopic => {
            let Some(topic) = target.offsets_topic(&args) else {
                bail!("--to offsets-topic: name the topic (--offsets-topic, or offset.storage.topic in the worker file given with --kafka-config)");
            };
            let (partition, offset) =
                worker::write_offsets_topic(&c.kafka, &topic, key, &bytes).await?;
            json!({"offsets_topic": topic, "partition": partition, "offset": offset})
        }
        OffsetsAt::OffsetsFile => {
            let Some(file) = target.offsets_file(&args) else {
                bail!("--to offsets-file: name the file (--offsets-file, or offset.storage.file.filename in the worker file given with --kafka-config)");
            };
            if let Some(rest) = &target.rest {
                // Only a refused connection says no worker runs there.
                match rest.liveness(&key.connector).await {
                    Ok(Liveness::NotListening(_)) => {}
                    Ok(_) => bail!(
                        "the Kafka Connect worker at {} answers: a running standalone worker \
                         rewrites its offsets file from memory. Stop the worker first (or \
                         use --to rest with the connector stopped)",
                        rest.url()
                    ),
                    Err(e) if debezium_stopped => notes.push(format!(
                        "{e} — --debezium-stopped: the worker taken as stopped by the operator"
                    )),
                    Err(e) => return Err(e.into()),
                }
            }
            worker::write_offsets_file(&file, key, &bytes)?;
            json!({"offsets_file": file})
        }
        OffsetsAt::Rest => {
            let body = json!({"offsets": [{"partition": key.partition, "offset": value}]});
            match (&target.rest, target.rest_given) {
                (Some(rest), true) => {
                    let answer = rest
                        .patch_offsets(&key.connector, body.to_string().as_bytes())
                        .await?;
                    notes.push(format!(
                        "Kafka Connect keeps connector {} STOPPED with the new offset: start \
                         Debezium with PUT /connectors/{}/resume when you choose",
                        key.connector, key.connector
                    ));
                    json!({"rest": rest.url(), "patched": body, "answer": answer})
                }
                _ => {
                    json!({"patch_body": body, "path": format!("/connectors/{}/offsets", key.connector)})
                }
            }
        }
    };
    notes.push(format!(
        "do not start outboxd for connector {} while Debezium runs it; to switch to outboxd \
         again, stop Debezium and import",
        c.name
    ));
    println!(
        "{}",
        json!({
            "connector": c.name,
            "checkpoint": cp,
            "debezium": {"key": key.to_string(), "offset": value, "written": written},
            "notes": notes,
        })
    );
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::position::Lsn;

    fn cp(lsn: u64, skip: u64, at: i64) -> Checkpoint {
        Checkpoint {
            connector: "c".into(),
            position: SourcePosition::Lsn(Lsn(lsn)),
            skip,
            updated_at_ms: at,
            cutover: None,
        }
    }

    #[test]
    fn an_import_that_sets_outboxd_back_says_so() {
        let new = cp(100, 0, 5_000);
        assert_eq!(rewinds(None, &new, Some(1_000), false), None);
        assert_eq!(
            rewinds(Some(&cp(100, 0, 2_000)), &new, Some(1_000), true),
            None
        );
        // Debezium ran on after outboxd: moving forward.
        assert_eq!(
            rewinds(Some(&cp(50, 0, 500)), &new, Some(1_000), true),
            None
        );
        let w = rewinds(Some(&cp(300, 0, 2_000)), &new, Some(1_000), true).unwrap();
        assert!(
            w.contains("ahead of Debezium's offset") && w.contains("--dedupe-window 0"),
            "{w}"
        );
        let w = rewinds(Some(&cp(300, 0, 2_000)), &new, Some(1_000), false).unwrap();
        assert!(w.contains("read-back"), "{w}");
    }
}
