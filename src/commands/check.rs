//! `outboxd check`: preflight of every connector's source and sink.

use std::process::ExitCode;

use anyhow::Context;

use crate::cli::ConfigArgs;
use crate::config::CheckpointConfig;
use crate::connector::open_store;
use crate::preflight::{self, CheckResult, Status};
use crate::source::Driver;

/// Prints one line per check; exits 0 only when no check failed.
pub async fn run(args: ConfigArgs) -> anyhow::Result<ExitCode> {
    let cfg = args.load().context("loading the configuration")?;
    let mut results: Vec<CheckResult> = Vec::new();
    if let Some(line) = crate::config::worker_keys_line(&cfg.kafka.worker_keys) {
        results.push(CheckResult::new(
            "kafka",
            "worker settings",
            Status::Pass,
            line,
        ));
    }
    for (key, why) in &cfg.kafka.ignored_keys {
        results.push(CheckResult::new(
            "kafka",
            &format!("setting {key}"),
            Status::Warn,
            why.clone(),
        ));
    }
    for c in &cfg.connectors {
        for (key, why) in &c.ignored_keys {
            results.push(CheckResult::new(
                &c.name,
                &format!("config key {key}"),
                Status::Warn,
                why.clone(),
            ));
        }
        if let Ok(router) = crate::router::EventRouter::new(&c.router) {
            results.push(CheckResult::new(
                &c.name,
                "record format",
                Status::Pass,
                router.describe_format(),
            ));
        }
        // Progress while brokers are waited for (each probe waits at most 10 s).
        eprintln!("checking connector {} ...", c.name);
        // The sink first: when the Kafka cluster of a Kafka checkpoint store does not answer,
        // the checkpoint is not read (that would wait 30 s more for the same brokers).
        let sink = preflight::sink::check(c).await;
        let kafka_silent = c.sink.is_kafka()
            && matches!(c.checkpoint, CheckpointConfig::Kafka { .. })
            && sink
                .iter()
                .any(|r| r.name == "kafka" && r.status == Status::Fail);
        // The stored checkpoint, to tell whether the source can still serve it: read by the
        // source's checks after the source's state (see StoredCheckpoint).
        let stored = if kafka_silent {
            preflight::StoredCheckpoint::unreadable(
                "its Kafka cluster did not answer (see the kafka check)",
            )
        } else {
            preflight::StoredCheckpoint::new(open_store(c))
        };
        results.extend(Driver::of(c).check(c, &stored).await);
        if let Err(why) = stored.get() {
            results.push(CheckResult::new(
                &c.name,
                "checkpoint",
                Status::Fail,
                format!("cannot read the stored checkpoint: {why}"),
            ));
        }
        results.extend(sink);
    }
    let failed = results.iter().filter(|r| r.status == Status::Fail).count();
    for r in &results {
        println!("{r}");
    }
    if failed == 0 {
        println!("all checks passed");
        Ok(ExitCode::SUCCESS)
    } else {
        println!("{failed} check(s) failed");
        Ok(ExitCode::FAILURE)
    }
}
