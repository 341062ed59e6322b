//! The `outboxd` binary: parses the command line, sets up logging, and hands over to the
//! command. Everything else lives in the library.

use std::process::ExitCode;

use clap::Parser;

use outboxd::cli::{Cli, Command};
use outboxd::commands;

/// mimalloc instead of glibc malloc: the relay allocates per row and per record from several
/// threads (tokio workers, librdkafka), where glibc's arena locks and consolidation cost ~25%
/// of its CPU in a backlog drain (benches/results/profile.md).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    outboxd::init_process();
    let cli = Cli::parse();
    let setup = commands::Setup::of(&cli);
    commands::init_logging(setup.log_format);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(setup.worker_threads)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("outboxd: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        match cli.command {
            Command::Run(args) => commands::run::run(args).await,
            Command::Check(args) => commands::check::run(args).await,
            Command::Status(args) => commands::status::run(args).await,
            Command::Checkpoint { command } => commands::checkpoint::run(command).await,
            Command::Binlog { command } => commands::decode::run(command),
            Command::Diff(args) => commands::diff::run(args).await,
        }
    });
    // A blocking Kafka call abandoned on shutdown (a commit while the brokers are
    // unreachable) must not hold the exit: its outcome no longer matters.
    runtime.shutdown_timeout(std::time::Duration::from_millis(500));
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("outboxd: {}", commands::error_text(&e));
            ExitCode::FAILURE
        }
    }
}
