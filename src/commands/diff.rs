//! `outboxd diff`: a shadow run's records against Debezium's (`crate::cutover::diff`), one
//! JSON line per topic and a summary; exit 0 only when they match.

use std::process::ExitCode;

use anyhow::Context;
use serde_json::json;

use crate::checkpoint::now_ms;
use crate::cli::{ConfigArgs, DiffArgs};
use crate::cutover::dedupe::format_ms;
use crate::cutover::{diff, topics};

/// Runs `outboxd diff`.
pub async fn run(args: DiffArgs) -> anyhow::Result<ExitCode> {
    let config = ConfigArgs {
        config: args.config.clone(),
        kafka_bootstrap: args.kafka_bootstrap.clone(),
        kafka_config: args.kafka_config.clone(),
        metrics_listen: None,
        rest_listen: None,
        rest_jaas: None,
        rest_connectors: None,
        worker_threads: None,
        group: None,
        shadow: None,
        shadow_server_id: None,
    };
    let cfg = config
        .load_for_checkpoint()
        .context("loading the configuration")?;
    let c = super::checkpoint::pick(&cfg.connectors, args.connector.as_deref())?;
    let prefix = format!("{}.", args.shadow);
    let kafka = c.kafka.clone();
    let now = now_ms();
    let from = now - args.since.as_millis() as i64;
    let to = now - args.until.as_millis() as i64;
    if from >= to {
        anyhow::bail!("--since must be further back than --until");
    }
    let slack = args.slack.as_millis() as i64;
    let router = c.router.clone();
    let (dbz_topics, oxd_topics, absent) = tokio::task::block_in_place(|| {
        let existing = topics::matching(&kafka, &regex::Regex::new("").expect("a pattern"))?;
        let mut dbz = if args.topics.is_empty() {
            topics::matching(&kafka, &topics::pattern(&router, None))?
        } else {
            args.topics.clone()
        };
        let mut oxd: Vec<String> =
            topics::matching(&kafka, &topics::pattern(&router, Some(&prefix)))?;
        if !args.topics.is_empty() {
            oxd.retain(|t| {
                args.topics
                    .iter()
                    .any(|d| t.strip_prefix(&prefix) == Some(d.as_str()))
            });
        }
        // A topic only one side has is read on both (the other side is missing events).
        for t in &oxd {
            if let Some(base) = t.strip_prefix(&prefix) {
                if !dbz.iter().any(|d| d == base) {
                    dbz.push(base.to_string());
                }
            }
        }
        let oxd_all: Vec<String> = dbz.iter().map(|d| format!("{prefix}{d}")).collect();
        dbz.sort();
        // Topics read that the cluster does not have (read as empty).
        let absent: Vec<String> = dbz
            .iter()
            .chain(&oxd_all)
            .filter(|t| !existing.contains(t))
            .cloned()
            .collect();
        Ok::<_, crate::cutover::CutoverError>((dbz, oxd_all, absent))
    })?;
    let (dbz, oxd) = tokio::task::block_in_place(|| {
        let d = diff::read(&kafka, &dbz_topics, from - slack, to + slack, "")?;
        let o = diff::read(&kafka, &oxd_topics, from - slack, to + slack, &prefix)?;
        Ok::<_, crate::cutover::CutoverError>((d, o))
    })?;
    let reports = diff::compare(&dbz, &oxd, from, to);
    let mut all_match = !reports.is_empty();
    let mut totals = (0u64, 0u64, 0u64, 0u64, 0u64);
    for r in &reports {
        all_match &= r.matches();
        totals.0 += r.identical;
        totals.1 += r.different;
        totals.2 += r.missing_in_outboxd.0;
        totals.3 += r.missing_in_debezium.0;
        totals.4 += r.debezium_duplicates;
        let differences: serde_json::Map<String, serde_json::Value> = r
            .differences
            .iter()
            .map(|(kind, (n, ex))| (kind.clone(), json!({"events": n, "example": ex})))
            .collect();
        println!(
            "{}",
            json!({
                "topic": r.topic,
                "shadow_topic": format!("{prefix}{}", r.topic),
                "match": r.matches(),
                "identical": r.identical,
                "different": r.different,
                "differences": differences,
                "missing_in_outboxd": {"events": r.missing_in_outboxd.0, "ids": r.missing_in_outboxd.1},
                "missing_in_debezium": {"events": r.missing_in_debezium.0, "ids": r.missing_in_debezium.1},
                "debezium_duplicates": r.debezium_duplicates,
                "outboxd_duplicates": r.outboxd_duplicates,
                "without_id": {"debezium": r.without_id.0, "outboxd": r.without_id.1},
            })
        );
    }
    println!(
        "{}",
        json!({
            "summary": {
                "connector": c.name,
                "shadow": args.shadow,
                "window": {"from": format_ms(from), "to": format_ms(to), "slack_ms": slack},
                "topics": reports.len(),
                "identical": totals.0,
                "different": totals.1,
                "missing_in_outboxd": totals.2,
                "missing_in_debezium": totals.3,
                "debezium_duplicates": totals.4,
                "match": all_match && totals.0 + totals.1 > 0,
                "missing_topics": absent,
                "note": missing_note(&absent, &oxd_topics, &dbz_topics, &args.shadow, totals.0 + totals.1 == 0),
            }
        })
    );
    all_match &= totals.0 + totals.1 > 0;
    Ok(if all_match {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// The summary's note: topics that do not exist (all shadow topics: the wrong --shadow
/// name, or the shadow run wrote nothing yet), and a window with nothing compared.
fn missing_note(
    absent: &[String],
    shadow: &[String],
    debezium: &[String],
    name: &str,
    nothing_compared: bool,
) -> String {
    let mut notes = Vec::new();
    if !shadow.is_empty() && shadow.iter().all(|t| absent.contains(t)) {
        notes.push(format!(
            "none of the shadow topics exists ({}): is --shadow {name:?} the name the shadow \
             run was started with (`outboxd run --shadow NAME` writes to NAME.<topic>), and \
             has it delivered anything?",
            shadow.join(", ")
        ));
    } else if !absent.is_empty() {
        notes.push(format!(
            "these topics do not exist and were read as empty: {}",
            absent.join(", ")
        ));
    }
    if debezium.is_empty() {
        notes.push(
            "no topic of the connector's router (route.topic.replacement) exists: nothing to \
             compare"
                .into(),
        );
    }
    if nothing_compared {
        notes.push("no event in the window has records on both sides: nothing was compared (widen --since, or write events while both run)".into());
    }
    notes.join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_topics_are_named() {
        let shadow = vec!["nonexist.o.Order".to_string()];
        let dbz = vec!["o.Order".to_string()];
        let n = missing_note(&shadow, &shadow, &dbz, "nonexist", false);
        assert!(n.contains("none of the shadow topics exists"), "{n}");
        let n = missing_note(&dbz, &shadow, &dbz, "s", false);
        assert!(
            n.contains("do not exist and were read as empty: o.Order"),
            "{n}"
        );
        assert_eq!(missing_note(&[], &shadow, &dbz, "s", false), "");
    }
}
