//! The subcommands behind the CLI.

pub mod check;
pub mod checkpoint;
pub mod decode;
pub mod run;
pub mod status;

use crate::cli::LogFormat;

/// Installs the tracing subscriber: `RUST_LOG` filter (default `info`), text or JSON lines
/// on stderr.
pub fn init_logging(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}
