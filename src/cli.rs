//! Command-line interface (clap).

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

/// outboxd: transactional-outbox CDC relay from the MySQL/MariaDB binlog and PostgreSQL
/// logical replication to Kafka, record-compatible with Debezium's Outbox Event Router.
#[derive(Debug, Parser)]
#[command(name = "outboxd", version, about)]
pub struct Cli {
    /// Log format on stderr (default: the config files' `[log] format`, else text).
    #[arg(long, global = true, value_enum, env = "OUTBOXD_LOG_FORMAT")]
    pub log_format: Option<LogFormat>,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Log output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the connectors of one or more config files until SIGINT/SIGTERM.
    Run(ConfigArgs),
    /// Preflight: check the source servers and Kafka; exit 0 only when every check passes.
    Check(ConfigArgs),
    /// Print each connector's checkpoint position and how far the source is ahead of it.
    Status(ConfigArgs),
    /// Show or set a connector's checkpoint (e.g. to step past an outbox row that cannot be
    /// routed). Stop the connector first: a running one overwrites the checkpoint.
    Checkpoint {
        /// Checkpoint subcommand.
        #[command(subcommand)]
        command: CheckpointCommand,
    },
    /// Offline binlog tools.
    Binlog {
        /// Binlog subcommand.
        #[command(subcommand)]
        command: BinlogCommand,
    },
}

/// Where the configuration comes from.
#[derive(Debug, clap::Args)]
pub struct ConfigArgs {
    /// outboxd TOML or Debezium connector JSON; repeat for several connectors.
    #[arg(long = "config", short = 'c', required = true)]
    pub config: Vec<PathBuf>,
    /// Kafka bootstrap servers (HOST:PORT, comma-separated); overrides the config files.
    #[arg(long, env = "OUTBOXD_KAFKA_BOOTSTRAP")]
    pub kafka_bootstrap: Option<String>,
    /// Kafka client settings for every Kafka client of the process, as a Kafka Connect
    /// worker properties file holds them: bootstrap.servers, security.protocol, sasl.*,
    /// ssl.* (Java names, translated to librdkafka's; librdkafka names pass through), and
    /// producer.* for the record producers. Beats the TOML `[kafka]` section.
    #[arg(long, env = "OUTBOXD_KAFKA_CONFIG")]
    pub kafka_config: Option<PathBuf>,
    /// Address for /metrics, /health and /ready (e.g. 127.0.0.1:9187); overrides the config
    /// files' `metrics.listen` (a Debezium JSON has no place for it).
    #[arg(long, env = "OUTBOXD_METRICS_LISTEN")]
    pub metrics_listen: Option<std::net::SocketAddr>,
    /// Async runtime worker threads (default: one per connector, at most the CPU count).
    /// A connector's binlog/replication reader and its delivery loop share them; librdkafka
    /// runs its own threads. One thread per connector avoids handing every batch of events
    /// across cores: on 2 cores a backlog drain took ~25% less CPU (benches/results/profile.md).
    #[arg(long, env = "OUTBOXD_WORKER_THREADS", value_parser = clap::value_parser!(u16).range(1..))]
    pub worker_threads: Option<u16>,
    /// Run as a member of group NAME: processes started with the same group name and the
    /// same connector files share the connectors through Kafka's group coordinator (each
    /// runs in one member; another takes it over in seconds when it dies). Overrides the
    /// config files' `[group] name`. `status` shows each connector's owner with it.
    #[arg(long, env = "OUTBOXD_GROUP")]
    pub group: Option<String>,
    /// Shadow run beside a live Debezium (or outboxd) on the same connector files: routed
    /// and dead-letter topics prefixed `NAME.`, connector `<name>.NAME` (its own
    /// checkpoint), PostgreSQL slot `<slot>_NAME`; MySQL/MariaDB need --shadow-server-id.
    #[arg(long, env = "OUTBOXD_SHADOW", value_name = "NAME")]
    pub shadow: Option<String>,
    /// The replica server id of a shadow run's MySQL/MariaDB connectors.
    #[arg(long, env = "OUTBOXD_SHADOW_SERVER_ID", value_name = "ID")]
    pub shadow_server_id: Option<u32>,
}

/// `outboxd binlog ...`
#[derive(Debug, Subcommand)]
pub enum BinlogCommand {
    /// Decode binlog files and print one JSON object per row change (and, with --config,
    /// the Kafka record each outbox insert becomes).
    Decode {
        /// Binlog files, e.g. archived mysql-bin.000042.
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// A connector config: its outbox tables are routed and their records printed.
        #[arg(long, short = 'c')]
        config: Option<PathBuf>,
    },
}

/// `outboxd checkpoint ...`
#[derive(Debug, Subcommand)]
pub enum CheckpointCommand {
    /// Print the stored checkpoint of each connector (JSON lines).
    Show(ConfigArgs),
    /// Replace a connector's checkpoint: the next start resumes after `--position`.
    Set {
        /// Where the connector's config comes from.
        #[command(flatten)]
        config: ConfigArgs,
        /// The connector (required when the files define several).
        #[arg(long)]
        connector: Option<String>,
        /// The position in `kind:value` form, as `status` prints it: `mariadb_gtid:0-1-42`,
        /// `mysql_gtid_set:<uuid>:1-42`, `binlog_file:mariadb-bin.000003:1234`,
        /// `lsn:16/B374D848`. The connector resumes after this position.
        #[arg(long)]
        position: String,
        /// Outbox rows of the transaction right after `--position` to treat as done: the
        /// connector resumes at that row (e.g. to step past one unroutable event of a
        /// transaction already partly delivered, as its error says). Default 0.
        #[arg(long, default_value_t = 0)]
        skip: u64,
    },
    /// Remove a connector's checkpoint, so that its next start begins fresh: at the source's
    /// current position (`start = "earliest"`: its oldest binlog; PostgreSQL: the slot's
    /// confirmed_flush_lsn, or a new slot). Events after the old checkpoint that were not
    /// delivered are then never delivered: this is how to accept a gap the server can no
    /// longer serve (purged binlogs, a dropped slot). Stop the connector first.
    Reset {
        /// Where the connector's config comes from.
        #[command(flatten)]
        config: ConfigArgs,
        /// The connector (required when the files define several).
        #[arg(long)]
        connector: Option<String>,
    },
}

impl ConfigArgs {
    /// Loads the `--config` files with `--kafka-bootstrap` and `--kafka-config`.
    pub fn load(&self) -> Result<crate::config::Config, crate::config::ConfigError> {
        self.load_with(false)
    }

    /// [`load`](Self::load) without resolving the source databases' secrets, for the
    /// `checkpoint` commands, which only touch the checkpoint store.
    pub fn load_for_checkpoint(&self) -> Result<crate::config::Config, crate::config::ConfigError> {
        self.load_with(true)
    }

    fn load_with(
        &self,
        without_source_secrets: bool,
    ) -> Result<crate::config::Config, crate::config::ConfigError> {
        crate::config::load_all(
            &self.config,
            crate::config::LoadOptions {
                kafka_bootstrap: self.kafka_bootstrap.as_deref(),
                kafka_config: self.kafka_config.as_deref(),
                without_source_secrets,
                shadow: self.shadow.as_deref().map(|name| crate::config::Shadow {
                    name,
                    server_id: self.shadow_server_id,
                }),
            },
        )
    }
}
