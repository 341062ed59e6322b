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
    /// Compare Debezium's records with a shadow run's (`run --shadow NAME` on the same
    /// connector files), paired by event id, over a time window: identical, different (one
    /// example per kind of difference), missing, per topic. Exit 0 only when they match.
    Diff(DiffArgs),
    /// Offline binlog tools.
    Binlog {
        /// Binlog subcommand.
        #[command(subcommand)]
        command: BinlogCommand,
    },
}

/// Where the configuration comes from.
#[derive(Debug, Clone, clap::Args)]
pub struct ConfigArgs {
    /// outboxd TOML or Debezium connector JSON; repeat for several connectors. Optional
    /// with `--rest-connectors` (connectors then come from the REST API) and with `--group`
    /// (connectors then come from the group's config topic).
    #[arg(
        long = "config",
        short = 'c',
        required_unless_present_any = ["rest_connectors", "group"]
    )]
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
    /// `run`: serve Kafka Connect's REST API (`GET /connectors/{name}/status`, `PUT
    /// .../pause`, `POST /connectors`, ...) on this address, e.g. `127.0.0.1:8083`, or
    /// `https://0.0.0.0:8443` with the certificate from the worker file
    /// (`listeners.https.ssl.keystore.*`). A group member answers for the group's
    /// connectors (created ones are kept in the group's config topic).
    #[arg(
        long,
        env = "OUTBOXD_REST_LISTEN",
        value_name = "[http://|https://]IP:PORT"
    )]
    pub rest_listen: Option<String>,
    /// `run`: the JAAS file whose `KafkaConnect` entry names the REST API's users
    /// (`PropertyFileLoginModule`'s `file`), when the worker file's `rest.extension.classes`
    /// turns on Connect's Basic authentication; default: `KAFKA_OPTS`'s
    /// `-Djava.security.auth.login.config=FILE`, as for Kafka Connect.
    #[arg(long, env = "OUTBOXD_REST_JAAS", value_name = "FILE")]
    pub rest_jaas: Option<PathBuf>,
    /// `run`: the directory where connectors created or changed through the REST API are
    /// kept, one Debezium connector JSON file each (`<name>.json`), read at start and on
    /// SIGHUP like `--config` files. Without it the API does not create or change connectors.
    #[arg(long, env = "OUTBOXD_REST_CONNECTORS", value_name = "DIR")]
    pub rest_connectors: Option<PathBuf>,
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
    /// Connectors created through a member's REST API are shared by the whole group (its
    /// config topic `outboxd.configs.NAME`); a member needs no `--config` then.
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

/// `outboxd diff`.
#[derive(Debug, clap::Args)]
pub struct DiffArgs {
    /// The connector files the shadow ran with (outboxd TOML or Debezium connector JSON).
    #[arg(long = "config", short = 'c', required = true)]
    pub config: Vec<PathBuf>,
    /// Kafka bootstrap servers (HOST:PORT, comma-separated); overrides the config files.
    #[arg(long, env = "OUTBOXD_KAFKA_BOOTSTRAP")]
    pub kafka_bootstrap: Option<String>,
    /// Kafka client settings as a Kafka Connect worker properties file (see `run`).
    #[arg(long, env = "OUTBOXD_KAFKA_CONFIG")]
    pub kafka_config: Option<PathBuf>,
    /// The shadow run's name (`run --shadow NAME`): its topics are Debezium's prefixed `NAME.`.
    #[arg(long, value_name = "NAME")]
    pub shadow: String,
    /// The connector (required when the files define several).
    #[arg(long)]
    pub connector: Option<String>,
    /// Start of the window, as a duration before now (`15m`, `2h`).
    #[arg(long, default_value = "15m", value_parser = duration_arg)]
    pub since: std::time::Duration,
    /// End of the window, as a duration before now (default 30s: both sides have had time
    /// to deliver what was committed before it).
    #[arg(long, default_value = "30s", value_parser = duration_arg)]
    pub until: std::time::Duration,
    /// Records up to this much outside the window are read too, so that an event whose
    /// two records straddle an edge is paired (Debezium's record time is when it processed
    /// the event, outboxd's the commit time).
    #[arg(long, default_value = "5m", value_parser = duration_arg)]
    pub slack: std::time::Duration,
    /// Debezium's topics, comma-separated (default: every topic the connector's
    /// `route.topic.replacement` can name).
    #[arg(long, value_delimiter = ',')]
    pub topics: Vec<String>,
}

/// A duration on the command line (`30s`, `15m`, `2h`, `500ms`).
pub fn duration_arg(text: &str) -> Result<std::time::Duration, String> {
    crate::config::duration::parse_duration(text)
}

/// Where Kafka Connect keeps a connector's offsets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OffsetsAt {
    /// A distributed worker's `offset.storage.topic`.
    OffsetsTopic,
    /// A standalone worker's `offset.storage.file.filename`.
    OffsetsFile,
    /// Kafka Connect's REST API: `GET` / `PATCH /connectors/<name>/offsets` (KIP-875).
    Rest,
}

/// What `checkpoint import-debezium` and `export-debezium` share.
#[derive(Debug, clap::Args)]
pub struct DebeziumArgs {
    /// The connector's config: the Debezium connector JSON (its `name`, `topic.prefix`,
    /// `slot.name`, `database.*`), or outboxd TOML. `--kafka-config` is the Kafka Connect
    /// worker's properties file: the offsets topic or file and the REST listener are read
    /// from it.
    #[command(flatten)]
    pub config: ConfigArgs,
    /// The connector (required when the files define several).
    #[arg(long)]
    pub connector: Option<String>,
    /// The Kafka Connect connector name (default: the connector's name).
    #[arg(long)]
    pub debezium_name: Option<String>,
    /// Debezium's `topic.prefix` (default: the connector JSON's).
    #[arg(long)]
    pub topic_prefix: Option<String>,
    /// The offsets topic (default: `offset.storage.topic` of the worker file).
    #[arg(long)]
    pub offsets_topic: Option<String>,
    /// The standalone worker's offsets file (default: `offset.storage.file.filename` of the
    /// worker file).
    #[arg(long)]
    pub offsets_file: Option<PathBuf>,
    /// Kafka Connect's REST API (default: the worker file's `listeners` /
    /// `rest.advertised.*`). Asked whether the connector still runs, and for `rest`.
    #[arg(long, value_name = "URL")]
    pub connect_url: Option<String>,
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
    /// Take over a stopped Debezium connector's position: read its committed offsets (the
    /// worker's offsets topic or file, or KIP-875 REST), map them onto the checkpoint
    /// exactly (mid-transaction skips included; PostgreSQL keeps Debezium's slot), and note
    /// that the events it wrote after that offset are to be skipped. Refused while Debezium
    /// still runs, and for a position the source no longer serves.
    ImportDebezium {
        /// The connector and where Kafka Connect keeps its offsets.
        #[command(flatten)]
        args: DebeziumArgs,
        /// Where to read the offsets (default: the worker file's offsets topic, else its
        /// offsets file, else REST with --connect-url).
        #[arg(long, value_enum)]
        from: Option<OffsetsAt>,
        /// How far back from now the routed topics are read for events Debezium wrote after
        /// its committed offset (from the offset's time on, at most this far back); 0
        /// turns the read-back off.
        #[arg(long, default_value = "24h", value_parser = duration_arg)]
        dedupe_window: std::time::Duration,
        /// The routed topics to read back (comma-separated; default: every topic the
        /// connector's `route.topic.replacement` can name).
        #[arg(long, value_delimiter = ',')]
        dedupe_topics: Vec<String>,
        /// Debezium is stopped: do not refuse because of MySQL/MariaDB binlog dump threads
        /// of its account (other readers that share the account), nor because Kafka
        /// Connect's REST API cannot be asked (a name that does not resolve, no answer,
        /// credentials). A Connect that answers the connector runs, and the slot check,
        /// still refuse.
        #[arg(long)]
        debezium_stopped: bool,
    },
    /// The way back: write the connector's checkpoint as Debezium offsets, so that Debezium
    /// resumes where outboxd stopped (outboxd must be stopped; PostgreSQL: the slot stays).
    ExportDebezium {
        /// The connector and where Kafka Connect keeps its offsets.
        #[command(flatten)]
        args: DebeziumArgs,
        /// Where to write them: a record in the offsets topic (the partition Connect reads),
        /// the standalone worker's offsets file, or `rest`: the body for `PATCH
        /// /connectors/<name>/offsets`, printed, and sent when --connect-url is given (the
        /// connector stopped). Default: the offsets topic, else the file, else the body.
        #[arg(long, value_enum)]
        to: Option<OffsetsAt>,
        /// Debezium (and a standalone worker writing the offsets file) is stopped: do not
        /// refuse because Kafka Connect's REST API cannot be asked (a name that does not
        /// resolve, no answer, credentials). A Connect that answers still refuses.
        #[arg(long)]
        debezium_stopped: bool,
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
        crate::config::load_all(&self.config, self.options(without_source_secrets))
    }

    /// The configuration with `--shadow` ignored, for commands that work on the connector
    /// itself (the Debezium import and export).
    pub fn load_without_shadow(&self) -> Result<crate::config::Config, crate::config::ConfigError> {
        let mut opts = self.options(false);
        opts.shadow = None;
        crate::config::load_all(&self.config, opts)
    }

    fn options(&self, without_source_secrets: bool) -> crate::config::LoadOptions<'_> {
        crate::config::LoadOptions {
            kafka_bootstrap: self.kafka_bootstrap.as_deref(),
            kafka_config: self.kafka_config.as_deref(),
            without_source_secrets,
            none_is_empty: self.rest_connectors.is_some() || self.group.is_some(),
            shadow: self.shadow.as_deref().map(|name| crate::config::Shadow {
                name,
                server_id: self.shadow_server_id,
            }),
        }
    }
}
