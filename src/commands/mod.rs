//! The subcommands behind the CLI.

pub mod check;
pub mod checkpoint;
pub mod debezium;
pub mod decode;
pub mod diff;
pub mod run;
pub mod status;

mod logging;

use crate::cli::{BinlogCommand, CheckpointCommand, Cli, Command, LogFormat};
use crate::config::{self, Config};

pub use logging::init_logging;

/// What the process is set up with before its command runs: decided from the command line
/// and the configuration files, which are read here for that alone (a file that does not
/// load is reported by the command).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Setup {
    /// `--log-format` (or `OUTBOXD_LOG_FORMAT`), else the files' `[log] format`, else text.
    pub log_format: LogFormat,
    /// Async runtime worker threads: `--worker-threads` when given, else one per connector
    /// of the `--config` files (a file that does not load counts as one), at most the CPU
    /// count; 1 for the commands without connectors to run.
    pub worker_threads: usize,
}

impl Setup {
    /// The setup `cli` asks for.
    pub fn of(cli: &Cli) -> Self {
        let config: Option<Config> = match &cli.command {
            Command::Run(a) | Command::Check(a) | Command::Status(a) => a.load().ok(),
            Command::Checkpoint {
                command:
                    CheckpointCommand::Show(a)
                    | CheckpointCommand::Set { config: a, .. }
                    | CheckpointCommand::Reset { config: a, .. },
            } => a.load().ok(),
            Command::Checkpoint {
                command:
                    CheckpointCommand::ImportDebezium { args, .. }
                    | CheckpointCommand::ExportDebezium { args, .. },
            } => args.config.load_without_shadow().ok(),
            Command::Diff(_) => None,
            Command::Binlog {
                command: BinlogCommand::Decode { config, .. },
            } => config.as_deref().and_then(|p| config::load_offline(p).ok()),
        };
        let log_format = cli
            .log_format
            .unwrap_or(match config.as_ref().map(|c| c.log.format) {
                Some(config::LogFormat::Json) => LogFormat::Json,
                Some(config::LogFormat::Text) | None => LogFormat::Text,
            });
        let worker_threads = match &cli.command {
            Command::Run(a) | Command::Check(a) | Command::Status(a) => match a.worker_threads {
                Some(n) => usize::from(n),
                None => {
                    let connectors = config.as_ref().map_or(1, |c| c.connectors.len());
                    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
                    connectors.clamp(1, cpus)
                }
            },
            Command::Checkpoint { .. } | Command::Binlog { .. } => 1,
            // The Kafka reads block their thread; the Connect REST client needs another.
            Command::Diff(_) => 2,
        };
        Self {
            log_format,
            worker_threads,
        }
    }
}

/// An error and its causes on one line, `a: b: c`, leaving out a cause whose text the line
/// already holds (many errors include their cause in their own message).
pub fn error_text(e: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if line.contains(text.trim()) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    line
}
