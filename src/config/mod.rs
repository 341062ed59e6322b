//! outboxd configuration: a closed, documented schema loaded from outboxd's own TOML or
//! imported from a Debezium connector JSON.
//!
//! # Formats
//!
//! The format is detected from the content: a file whose first non-blank character is `{` is a
//! Debezium connector JSON (`{"name": .., "config": {..}}` or the bare config map, as Kafka
//! Connect users keep them); anything else is outboxd's TOML (see `connectors/README.md` for
//! every key).
//!
//! * TOML is closed: every table rejects unknown keys with the key's name and the accepted ones.
//!   Router options accept outboxd's snake_case names and Debezium's dotted names
//!   (`route_by_field` or `"route.by.field"`).
//! * A Debezium JSON import starts from **Debezium's** defaults (`aggregatetype`, `aggregateid`,
//!   `type`, `payload`, slot `debezium`, publication `dbz_publication`, ...), so options the user
//!   left unset behave as they did under Kafka Connect. Keys that mean nothing to outboxd are
//!   returned in [`ConnectorConfig::ignored_keys`] with the reason, for `run`/`check` to log;
//!   keys whose effect outboxd cannot reproduce (another transform, a schema-carrying or
//!   quoting converter, a data snapshot that has to happen, TLS required) are errors that say
//!   what to change.
//!
//! # Kafka bootstrap servers
//!
//! Precedence: `--kafka-bootstrap` > environment `OUTBOXD_KAFKA_BOOTSTRAP` > the file
//! (TOML `kafka.bootstrap_servers`; Debezium JSON `producer.override.bootstrap.servers`, then, as
//! a last resort reported in `ignored_keys`, the schema history's
//! `schema.history.internal.kafka.bootstrap.servers` / `database.history.kafka.bootstrap.servers`,
//! which in practice points at the same cluster Kafka Connect writes to). None of them: error.
//!
//! # Checkpoints
//!
//! A Debezium JSON has no place for outboxd's checkpoint, and a TOML connector may omit
//! `[connectors.checkpoint]`: both default to the Kafka store (topic `outboxd.checkpoints.<name>`,
//! key = connector name) in exactly-once mode, so the relay keeps no local state. A file store
//! (`store = "file"`) is at-least-once. Relative paths (checkpoint, `password_file`) are
//! relative to the working directory of the process.

mod debezium;
pub(crate) mod duration;
mod error;
mod hint;
pub(crate) mod kafka;
pub(crate) mod kafka_oauth;
mod load;
mod names;
pub use debezium::connector_class;
pub use names::validate_connector_name;
mod native;
mod providers;
pub mod sinks;
pub(crate) mod tls;
pub mod topic_creation;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::event::TableName;

pub use crate::router::{
    AdditionalField, InvalidOpBehavior, JsonEmptyArrayBehavior, JsonNullBehavior,
    MissingFieldBehavior, Placement, RouterConfig, UnknownOption, DEFAULT_ROUTE_TOPIC_REGEX,
    DEFAULT_ROUTE_TOPIC_REPLACEMENT,
};
pub use crate::secret::Secret;
pub use error::ConfigError;
pub(crate) use error::KeyError;
pub use kafka::{ClientProperties, KafkaClientSettings};
pub(crate) use load::LoadCtx;
pub use load::{
    load, load_all, load_all_with_env, load_many, load_many_with_env, load_offline,
    log_ignored_keys, parse, worker_keys_line, LoadOptions, Shadow,
};
pub use names::default_pg_object_name;
pub use sinks::SinkConfig;
pub use tls::{MysqlSslMode, MysqlTlsConfig, PgSslMode, PgTlsConfig, RootCert, StoreFile};

/// Environment variable overriding every connector's Kafka bootstrap servers (below the CLI flag).
pub const ENV_KAFKA_BOOTSTRAP: &str = "OUTBOXD_KAFKA_BOOTSTRAP";
/// Default [`KafkaConfig::max_record_bytes`]: 16 MiB.
pub const DEFAULT_MAX_RECORD_BYTES: usize = 16 * 1024 * 1024;

/// The whole configuration of one outboxd process: any number of connectors (one per source
/// database), plus process-wide metrics and logging settings.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Connectors, in file order; names are unique.
    pub connectors: Vec<ConnectorConfig>,
    /// Prometheus endpoint settings (TOML `[metrics]`).
    pub metrics: MetricsConfig,
    /// Logging settings (TOML `[log]`).
    pub log: LogConfig,
    /// Group membership (TOML `[group]`; `--group` / `OUTBOXD_GROUP` set the name).
    pub group: GroupConfig,
    /// The process-wide Kafka client settings (`--kafka-config FILE` over the TOML `[kafka]`
    /// section), already merged into every connector's [`KafkaConfig`]; kept here for the
    /// clients that belong to no connector.
    pub kafka: KafkaClientSettings,
}

/// Membership of a group of outboxd processes that share the connectors through Kafka's group
/// coordinator (TOML `[group]`): each connector runs in exactly one member at a time.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GroupConfig {
    /// The group's name; members with the same name (and Kafka cluster) share the
    /// connectors. `None` (default): no group, the process runs every connector itself.
    /// `--group` / `OUTBOXD_GROUP` override it.
    #[serde(default)]
    pub name: Option<String>,
    /// How long the group coordinator waits for a member's heartbeat before it moves the
    /// member's connectors to the others (Kafka consumer `session.timeout.ms`); default 6 s,
    /// the broker's default `group.min.session.timeout.ms`. Failover after a crash takes
    /// about this plus the connector's start.
    #[serde(
        default = "default_session_timeout",
        deserialize_with = "duration::deserialize"
    )]
    pub session_timeout: Duration,
    /// How often a member heartbeats (Kafka consumer `heartbeat.interval.ms`); default 1 s,
    /// at most a third of `session_timeout`.
    #[serde(
        default = "default_heartbeat_interval",
        deserialize_with = "duration::deserialize"
    )]
    pub heartbeat_interval: Duration,
}

/// Default [`GroupConfig::session_timeout`].
pub const DEFAULT_GROUP_SESSION_TIMEOUT: Duration = Duration::from_secs(6);
/// Default [`GroupConfig::heartbeat_interval`].
pub const DEFAULT_GROUP_HEARTBEAT_INTERVAL: Duration = Duration::from_millis(500);

fn default_session_timeout() -> Duration {
    DEFAULT_GROUP_SESSION_TIMEOUT
}

fn default_heartbeat_interval() -> Duration {
    DEFAULT_GROUP_HEARTBEAT_INTERVAL
}

impl Default for GroupConfig {
    fn default() -> Self {
        Self {
            name: None,
            session_timeout: DEFAULT_GROUP_SESSION_TIMEOUT,
            heartbeat_interval: DEFAULT_GROUP_HEARTBEAT_INTERVAL,
        }
    }
}

/// Prometheus `/metrics`, `/health`, `/ready` endpoint.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetricsConfig {
    /// Address to listen on (`"127.0.0.1:9187"`); `None` (default) serves no HTTP endpoint.
    #[serde(default)]
    pub listen: Option<SocketAddr>,
}

/// Log line format.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// Human-readable lines (default).
    #[default]
    Text,
    /// One JSON object per line.
    Json,
}

/// Logging settings.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogConfig {
    /// `"text"` (default) or `"json"`.
    #[serde(default)]
    pub format: LogFormat,
}

/// One connector: a source database, its outbox tables, routing rules, Kafka and checkpoint.
#[derive(Debug, Clone, PartialEq)]
pub struct ConnectorConfig {
    /// Unique name: 1-128 characters of `A-Z a-z 0-9 . _ -`. It keys the checkpoint (and, with
    /// the Kafka store, the transactional id) and labels metrics. Debezium: the connector `name`.
    pub name: String,
    /// Where change events come from.
    pub source: SourceConfig,
    /// How an outbox row becomes a Kafka record.
    pub router: RouterConfig,
    /// Where records go: Kafka (the default) or another broker.
    pub sink: SinkConfig,
    /// The Kafka cluster records go to when `sink` is Kafka (its `bootstrap_servers` may be
    /// empty otherwise: nothing connects to it then).
    pub kafka: KafkaConfig,
    /// Where the delivered source position is kept.
    pub checkpoint: CheckpointConfig,
    /// What happens to an outbox event that cannot be delivered (Kafka Connect's
    /// `errors.*`): stop (default) or the dead-letter topic.
    pub errors: ErrorPolicy,
    /// Outbox tables (`schema.table`), at least one. Debezium `table.include.list` (literal
    /// names only, regex metacharacters are rejected).
    pub tables: Vec<TableName>,
    /// Keys of an imported Debezium JSON that outboxd does not use, each with the reason, for
    /// `run`/`check` to log at startup. Always empty for TOML (unknown TOML keys are errors).
    pub ignored_keys: Vec<(String, String)>,
    /// The `name` label of the connector's Debezium series (`debezium_metrics_*`): a Debezium
    /// JSON's `topic.prefix` (else `database.server.name`), the `server` of Debezium's own
    /// MBeans, so that its alerts keep matching; `None` (TOML): the connector name.
    pub metrics_server: Option<String>,
}

impl ConnectorConfig {
    /// The connector's `transactional.id`: `checkpoint.transactional_id`, default
    /// `outboxd-<connector>`.
    pub(crate) fn transactional_id(&self) -> String {
        match &self.checkpoint {
            CheckpointConfig::Kafka {
                transactional_id: Some(id),
                ..
            } => id.clone(),
            _ => format!("outboxd-{}", self.name),
        }
    }

    /// The `name` label of the connector's Debezium series: [`metrics_server`](Self::metrics_server)
    /// or the connector name.
    pub fn debezium_server(&self) -> &str {
        self.metrics_server.as_deref().unwrap_or(&self.name)
    }
}

/// The source database of a connector.
#[derive(Debug, Clone, PartialEq)]
pub enum SourceConfig {
    /// MySQL or MariaDB ROW binlog. TOML `kind = "mysql"` / `"mariadb"`.
    Mysql(MysqlSourceConfig),
    /// PostgreSQL logical replication (pgoutput). TOML `kind = "postgres"`.
    Postgres(PostgresSourceConfig),
}

impl SourceConfig {
    /// The format the connector was defined in.
    pub fn format(&self) -> ConfigFormat {
        match self {
            SourceConfig::Mysql(m) => m.format,
            SourceConfig::Postgres(p) => p.format,
        }
    }

    /// The Debezium connector plugin this source stands for, as its MBean domain
    /// `debezium.<plugin>` names it (the `plugin` label of the `debezium_metrics_*` series):
    /// `mariadb` (Debezium's MariaDB connector), `mysql`, `postgres`.
    pub fn plugin(&self) -> &'static str {
        match self {
            SourceConfig::Mysql(m) if m.flavor == MysqlFlavor::Mariadb => "mariadb",
            SourceConfig::Mysql(_) => "mysql",
            SourceConfig::Postgres(_) => "postgres",
        }
    }
}

/// The format a connector was defined in, which decides the key names messages use: a TOML
/// user is told `password`, a Debezium JSON user `database.password`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ConfigFormat {
    /// outboxd's TOML.
    #[default]
    Toml,
    /// A Debezium connector JSON.
    DebeziumJson,
}

impl ConfigFormat {
    /// The name of a setting as this format spells it: `toml` or `debezium`.
    pub fn key(self, toml: &'static str, debezium: &'static str) -> &'static str {
        match self {
            ConfigFormat::Toml => toml,
            ConfigFormat::DebeziumJson => debezium,
        }
    }
}

/// Which server dialect of the binlog protocol to speak.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MysqlFlavor {
    /// Detect from the server version string (`...-MariaDB` means MariaDB). Debezium
    /// `io.debezium.connector.mysql.MySqlConnector`, which MariaDB users ran for years.
    #[default]
    Auto,
    /// MySQL: GTID sets, COM_BINLOG_DUMP_GTID.
    Mysql,
    /// MariaDB: GTID positions, `@slave_connect_state`. Debezium
    /// `io.debezium.connector.mariadb.MariaDbConnector` (or `connector.adapter=mariadb`).
    Mariadb,
}

/// Where to start when the connector has no checkpoint yet.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StartPosition {
    /// The server's current position: only events written from now on (default; what Debezium
    /// does after a `no_data` snapshot).
    #[default]
    Current,
    /// The oldest binlog the server still has.
    Earliest,
}

/// How the binlog position is tracked.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PositionMode {
    /// GTIDs when the server has them on, else `file:pos` (default).
    #[default]
    Auto,
    /// Require GTIDs (fail if `gtid_mode`/`gtid_strict_mode` do not allow it).
    Gtid,
    /// Always `file:pos`.
    File,
}

/// A MySQL/MariaDB source.
#[derive(Debug, Clone, PartialEq)]
pub struct MysqlSourceConfig {
    /// Protocol dialect; see [`MysqlFlavor`].
    pub flavor: MysqlFlavor,
    /// Host name or address. Debezium `database.hostname`.
    pub host: String,
    /// TCP port, default 3306. Debezium `database.port`.
    pub port: u16,
    /// Replication user (needs `REPLICATION SLAVE, REPLICATION CLIENT`). Debezium `database.user`.
    pub user: String,
    /// Password. Debezium `database.password`.
    pub password: Secret,
    /// Server id to register as a replica with; unique among the server's replicas.
    /// Required. Debezium `database.server.id`.
    pub server_id: u32,
    /// Start point without a checkpoint; default [`StartPosition::Current`].
    pub start: StartPosition,
    /// Position tracking; default [`PositionMode::Auto`].
    pub position_mode: PositionMode,
    /// Replication heartbeat period asked of the server (keeps an idle stream alive and lets
    /// the checkpoint follow it); default 10 s.
    pub heartbeat_interval: Duration,
    /// Connect (and handshake) timeout; default 10 s. Debezium `connect.timeout.ms`.
    pub connect_timeout: Duration,
    /// Longest wait between reconnection attempts (exponential backoff); default 30 s.
    pub reconnect_backoff_max: Duration,
    /// Column names per outbox table, for servers without `binlog_row_metadata=FULL`
    /// (in table order, every column). Tables listed here must be in `tables`.
    pub columns: BTreeMap<TableName, Vec<String>>,
    /// Most bytes of outbox rows of prepared XA transactions held in memory until their
    /// `XA COMMIT` (all waiting transactions together); default
    /// [`DEFAULT_XA_MAX_HELD_BYTES`]. Beyond it the connector stops (definite) before the
    /// transaction that would exceed it. TOML only (`xa_max_held_bytes`).
    pub xa_max_held_bytes: usize,
    /// TLS of the binlog and SQL connections (Debezium `database.ssl.*`).
    pub tls: MysqlTlsConfig,
    /// The format the connector was defined in (for the key names in messages).
    pub format: ConfigFormat,
}

/// Default [`MysqlSourceConfig::xa_max_held_bytes`]: 64 MiB.
pub const DEFAULT_XA_MAX_HELD_BYTES: usize = 64 * 1024 * 1024;

/// How the PostgreSQL publication is created when missing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PublicationAutocreate {
    /// Never create it; it must exist. Debezium `disabled`.
    Disabled,
    /// `CREATE PUBLICATION .. FOR ALL TABLES` (needs superuser). Debezium `all_tables`, its
    /// default.
    AllTables,
    /// `CREATE PUBLICATION .. FOR TABLE <outbox tables>`. Debezium `filtered`; outboxd's default.
    Filtered,
}

/// A PostgreSQL source.
#[derive(Debug, Clone, PartialEq)]
pub struct PostgresSourceConfig {
    /// Host name or address. Debezium `database.hostname`.
    pub host: String,
    /// TCP port, default 5432. Debezium `database.port`.
    pub port: u16,
    /// Role with `REPLICATION`. Debezium `database.user`.
    pub user: String,
    /// Password. Debezium `database.password`.
    pub password: Secret,
    /// Database. Debezium `database.dbname`.
    pub dbname: String,
    /// Logical replication slot. Debezium `slot.name` (default `debezium`); outboxd's default
    /// `outboxd_<connector name>` lower-cased with other characters than `a-z0-9_` replaced
    /// by `_`, at most 63 bytes.
    pub slot_name: String,
    /// Publication. Debezium `publication.name` (default `dbz_publication`); outboxd's default
    /// is the same as the slot name.
    pub publication_name: String,
    /// Publication creation. Debezium `publication.autocreate.mode` (default `all_tables`);
    /// outboxd's default [`PublicationAutocreate::Filtered`].
    pub publication_autocreate: PublicationAutocreate,
    /// Create the slot when missing; default true (Debezium always does).
    pub slot_autocreate: bool,
    /// Prefixes of logical decoding messages (`pg_logical_emit_message`) treated as a
    /// table-less outbox; default none.
    pub message_prefixes: Vec<String>,
    /// Every logical decoding message is an outbox event, whatever its prefix (a Debezium
    /// JSON with `DecodeLogicalDecodingMessageContent` and no `message.prefix.include.list`).
    pub all_message_prefixes: bool,
    /// Standby status update period; default 10 s. Debezium `status.update.interval.ms`.
    pub status_interval: Duration,
    /// Connect timeout; default 10 s. Debezium `connect.timeout.ms`.
    pub connect_timeout: Duration,
    /// TLS of the replication and SQL connections (libpq `sslmode` and friends).
    pub tls: PgTlsConfig,
    /// The format the connector was defined in (for the key names in messages).
    pub format: ConfigFormat,
}

/// Kafka settings of a connector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KafkaConfig {
    /// Comma-separated `host:port` list. See the module docs for precedence.
    pub bootstrap_servers: String,
    /// librdkafka settings of every client of the connector (record producer, checkpoint
    /// store, `check`, `status`): the process-wide ones (`--kafka-config`, TOML `[kafka]`),
    /// then a Debezium JSON's `producer.override.*` security keys. Security lives here.
    pub client: ClientProperties,
    /// Extra librdkafka producer properties (`"compression.type" = "lz4"`), applied after
    /// outboxd's own: the process-wide `producer.*` keys, then the connector's
    /// `kafka.producer`; `bootstrap.servers` is not allowed here.
    pub producer: BTreeMap<String, String>,
    /// Secret-valued record producer properties (the process-wide `producer.sasl.password`,
    /// ...), applied after `producer`.
    pub producer_secrets: ClientProperties,
    /// Largest record (key + value + headers, see `KafkaRecord::approx_size`) outboxd will
    /// produce; default 16 MiB. A bigger record is a definite error: the connector halts
    /// without advancing its checkpoint (raise this, librdkafka `message.max.bytes` and the
    /// topic's `max.message.bytes` together).
    pub max_record_bytes: usize,
    /// Kafka Connect's topic creation (`topic.creation.*`, KIP-158): how a missing routed
    /// topic is created before its first record; `None`: outboxd creates none (the broker
    /// may auto-create it with its defaults). Off when the worker file sets
    /// `topic.creation.enable=false`.
    pub topic_creation: Option<topic_creation::TopicCreation>,
}

impl KafkaConfig {
    /// The settings the record producer connects with: [`client`](Self::client), then the
    /// producer-only ones ([`producer`](Self::producer), [`producer_secrets`](Self::producer_secrets))
    /// over them — what `check` describes and probes (a worker file's `producer.`-prefixed
    /// `security.protocol` included).
    pub fn producer_client(&self) -> ClientProperties {
        let mut props = self.client.clone();
        for (k, v) in &self.producer {
            props.set(k, v.clone());
        }
        props.merge(&self.producer_secrets);
        props
    }
}

/// Where the connector keeps the position after the last delivered source transaction.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(tag = "store", rename_all = "lowercase", deny_unknown_fields)]
pub enum CheckpointConfig {
    /// A JSON file replaced atomically (temp file, fsync, rename): at-least-once delivery.
    /// TOML `store = "file"`, `path = "..."`.
    File {
        /// File path (relative to the working directory).
        path: PathBuf,
    },
    /// A compacted Kafka topic, one key per connector (the default). With
    /// `delivery = "exactly_once"` each Kafka transaction holds a batch of records and the
    /// checkpoint for the position after them, so a restart never re-delivers what a
    /// `read_committed` consumer saw; the relay keeps no local state.
    /// TOML `store = "kafka"`, `topic = "..."`, `delivery = "..."`, batch bounds.
    Kafka {
        /// Checkpoint topic, created with `cleanup.policy=compact` if missing; default
        /// `outboxd.checkpoints.<connector name>` (Kafka Connect's analogue is
        /// `offset.storage.topic`). A topic of its own per connector means no other
        /// producer's open transaction can hold back what `read_committed` sees of it; a
        /// shared topic works too, but a restart may then wait for other connectors' open
        /// transactions to end.
        #[serde(default)]
        topic: String,
        /// `exactly_once` (default) or `at_least_once`.
        #[serde(default)]
        delivery: DeliveryMode,
        /// Producer `transactional.id`; default `outboxd-<connector name>`. A second
        /// instance with the same id fences the first.
        #[serde(default)]
        transactional_id: Option<String>,
        /// Most records in one Kafka transaction (default 50,000).
        #[serde(default = "default_batch_max_events")]
        batch_max_events: usize,
        /// Most record bytes in one Kafka transaction (default 32 MiB; memory is bounded
        /// separately, by what is unacknowledged).
        #[serde(default = "default_batch_max_bytes")]
        batch_max_bytes: usize,
        /// Longest a Kafka transaction stays open collecting records while the source is
        /// caught up, milliseconds (default 100). While the source is 2 s or more behind (a
        /// backlog), up to 1 s (or this, if longer).
        #[serde(default = "default_batch_max_ms")]
        batch_max_ms: u64,
    },
    /// Kept by the connector's non-Kafka sink: a NATS JetStream key-value bucket, a Redis key
    /// written in the records' `MULTI`/`EXEC` (see `sinks`). TOML `store = "sink"`, the
    /// default for those sinks.
    Sink {},
}

/// Kafka Connect's `errors.tolerance`: what a connector does with an outbox event it cannot
/// deliver (the router cannot route it, or Kafka refuses it for good).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ErrorTolerance {
    /// Stop the connector (after committing everything ahead of the event's source
    /// transaction), naming the event and how to step past it. Connect's default.
    #[default]
    None,
    /// Write the event to the dead-letter topic, with headers saying why and where it came
    /// from, and go on.
    All,
}

/// A connector's error policy: Kafka Connect's `errors.tolerance`,
/// `errors.deadletterqueue.topic.name` and `errors.deadletterqueue.context.headers.enable`
/// (TOML `[connectors.errors]`: `tolerance`, `dead_letter_topic`, `context_headers`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ErrorPolicy {
    /// Stop or dead-letter.
    pub tolerance: ErrorTolerance,
    /// The dead-letter topic (required with [`ErrorTolerance::All`]); created with one
    /// partition if missing, so dead letters keep source order.
    pub dead_letter_topic: Option<String>,
    /// Whether dead letters carry the `__connect.errors.*` / `__outboxd.*` context headers
    /// (TOML default true; a Debezium JSON import follows Connect's default, false).
    pub context_headers: bool,
}

impl ErrorPolicy {
    /// Checks the policy of a connector whose checkpoint topic (Kafka store) is
    /// `checkpoint_topic`: `all` needs a valid dead-letter topic other than that one.
    /// Returns what is wrong.
    pub fn validate(&self, checkpoint_topic: Option<&str>) -> Result<(), String> {
        match (&self.tolerance, &self.dead_letter_topic) {
            (ErrorTolerance::All, None) => Err(
                "tolerance \"all\" (errors.tolerance=all) needs a dead-letter topic \
                 (errors.deadletterqueue.topic.name / dead_letter_topic): outboxd never drops \
                 an event silently"
                    .into(),
            ),
            (_, Some(t)) if !crate::router::is_valid_topic(t) => Err(format!(
                "dead-letter topic {t:?} is not a valid Kafka topic name (1-249 characters of \
                 a-z A-Z 0-9 . _ -)"
            )),
            (_, Some(t)) if Some(t.as_str()) == checkpoint_topic => Err(format!(
                "dead-letter topic {t:?} is the checkpoint topic; choose another"
            )),
            _ => Ok(()),
        }
    }

    /// The dead-letter topic when events go there (`tolerance = all`).
    pub fn dead_letters(&self) -> Option<&str> {
        match self.tolerance {
            ErrorTolerance::All => self.dead_letter_topic.as_deref(),
            ErrorTolerance::None => None,
        }
    }
}

/// How records and checkpoints reach Kafka.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeliveryMode {
    /// Records and the checkpoint in one Kafka transaction (`transactional.id` per
    /// connector): `read_committed` consumers see every event once.
    #[default]
    ExactlyOnce,
    /// Idempotent producer, checkpoint written after the acknowledgements: nothing lost,
    /// a crash may deliver the last events again.
    AtLeastOnce,
}

/// Prefix of the default checkpoint topic, `outboxd.checkpoints.<connector name>`.
pub const DEFAULT_CHECKPOINT_TOPIC_PREFIX: &str = "outboxd.checkpoints";

/// The default checkpoint topic of connector `name`.
pub fn default_checkpoint_topic(name: &str) -> String {
    format!("{DEFAULT_CHECKPOINT_TOPIC_PREFIX}.{name}")
}
fn default_batch_max_events() -> usize {
    50_000
}
fn default_batch_max_bytes() -> usize {
    32 * 1024 * 1024
}
fn default_batch_max_ms() -> u64 {
    100
}

impl CheckpointConfig {
    /// The default store of connector `name`: its Kafka topic, exactly-once.
    pub fn kafka_default(name: &str) -> Self {
        CheckpointConfig::Kafka {
            topic: default_checkpoint_topic(name),
            delivery: DeliveryMode::ExactlyOnce,
            transactional_id: None,
            batch_max_events: default_batch_max_events(),
            batch_max_bytes: default_batch_max_bytes(),
            batch_max_ms: default_batch_max_ms(),
        }
    }
}

/// Reads a secret file: its contents with one trailing newline (`\n` or `\r\n`) removed.
pub(crate) fn read_secret_file(path: &Path) -> Result<Secret, String> {
    let mut s = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read password file {}: {e}", path.display()))?;
    if s.ends_with('\n') {
        s.pop();
        if s.ends_with('\r') {
            s.pop();
        }
    }
    Ok(Secret::new(s))
}

/// A source of kind `kind` (`mariadb`, `postgres`) as a connector in `format` defines it
/// (user `relay`, password `pw`), for other modules' tests of format-aware messages.
#[cfg(test)]
pub(crate) fn example_source(kind: &str, format: ConfigFormat) -> SourceConfig {
    let text = match (kind, format) {
        ("postgres", ConfigFormat::Toml) => "[[connectors]]\nname = \"x\"\ntables = [\"public.outbox\"]\n[connectors.source]\nkind = \"postgres\"\nhost = \"db\"\nuser = \"relay\"\npassword = \"pw\"\ndbname = \"app\"\n".to_string(),
        (_, ConfigFormat::Toml) => format!("[[connectors]]\nname = \"x\"\ntables = [\"s.outbox\"]\n[connectors.source]\nkind = \"{kind}\"\nhost = \"db\"\nuser = \"relay\"\npassword = \"pw\"\nserver_id = 7\n"),
        ("postgres", ConfigFormat::DebeziumJson) => r#"{"name": "x", "connector.class": "io.debezium.connector.postgresql.PostgresConnector", "database.hostname": "db", "database.user": "relay", "database.password": "pw", "database.dbname": "app", "table.include.list": "public.outbox", "transforms": "outbox", "transforms.outbox.type": "io.debezium.transforms.outbox.EventRouter"}"#.to_string(),
        (_, ConfigFormat::DebeziumJson) => r#"{"name": "x", "connector.class": "io.debezium.connector.mariadb.MariaDbConnector", "database.hostname": "db", "database.user": "relay", "database.password": "pw", "database.server.id": "7", "table.include.list": "s.outbox", "transforms": "outbox", "transforms.outbox.type": "io.debezium.transforms.outbox.EventRouter"}"#.to_string(),
    };
    let mut cfg = parse(&text, std::path::Path::new("x"), Some("k:1"), &|_| None)
        .unwrap_or_else(|e| panic!("{e}"));
    let source = cfg.connectors.remove(0).source;
    assert_eq!(source.format(), format);
    source
}

#[cfg(test)]
mod tests;
