//! The subcommands behind the CLI.

pub mod check;
pub mod checkpoint;
pub mod decode;
pub mod run;
pub mod status;

use crate::cli::{Command, LogFormat};

/// Worker threads for the async runtime of `command`: `--worker-threads` when given, else
/// one per connector of the `--config` files (read here only to count them; a file that
/// does not load counts as one, and the command reports its error), at most the CPU count;
/// 1 for the commands without connectors.
pub fn worker_threads(command: &Command) -> usize {
    let args = match command {
        Command::Run(a) | Command::Check(a) | Command::Status(a) => a,
        Command::Checkpoint { .. } | Command::Binlog { .. } => return 1,
    };
    if let Some(n) = args.worker_threads {
        return usize::from(n);
    }
    let connectors = args.load().map_or(1, |c| c.connectors.len());
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    connectors.clamp(1, cpus)
}

/// Installs the tracing subscriber: `RUST_LOG` filter (default `info`), text or JSON lines
/// on stderr. Text is coloured only when stderr is a terminal and `NO_COLOR` is unset
/// (no-color.org), so logs redirected to a file or a collector carry no escape codes.
pub fn init_logging(format: LogFormat) {
    use std::io::IsTerminal;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let colour = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(colour)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}
