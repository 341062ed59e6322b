//! outboxd's own TOML format (documented key by key in `connectors/README.md`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use super::names::{default_pg_object_name, validate_connector_name, validate_slot_name};
use super::{
    duration, read_secret_file, CheckpointConfig, ClientProperties, Config, ConfigError,
    ConfigFormat, ConnectorConfig, ErrorPolicy, ErrorTolerance, GroupConfig, KafkaClientSettings,
    KafkaConfig, LoadCtx, LogConfig, MetricsConfig, MysqlFlavor, MysqlSourceConfig, MysqlSslMode,
    MysqlTlsConfig, PgSslMode, PgTlsConfig, PositionMode, PostgresSourceConfig,
    PublicationAutocreate, RootCert, RouterConfig, Secret, SourceConfig, StartPosition, StoreFile,
    DEFAULT_MAX_RECORD_BYTES,
};
use crate::event::TableName;
use crate::router::UnknownOption;
use crate::tls::StoreKind;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileToml {
    #[serde(default)]
    metrics: MetricsConfig,
    #[serde(default)]
    log: LogConfig,
    /// Read by [`kafka_section`] before the connectors.
    #[serde(default)]
    #[allow(dead_code)]
    kafka: Option<toml::Table>,
    #[serde(default)]
    group: GroupConfig,
    #[serde(default)]
    connectors: Vec<ConnectorToml>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ConnectorToml {
    name: String,
    tables: Vec<String>,
    source: SourceToml,
    #[serde(default)]
    router: toml::Table,
    #[serde(default)]
    kafka: KafkaToml,
    #[serde(default)]
    sink: Option<toml::Table>,
    /// Read once the sink is known: `store` defaults by sink ([`checkpoint_table`]).
    #[serde(default)]
    checkpoint: Option<toml::Table>,
    #[serde(default)]
    errors: Option<ErrorsToml>,
}

/// `[connectors.errors]`: Kafka Connect's `errors.*` policy.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ErrorsToml {
    #[serde(default)]
    tolerance: ErrorTolerance,
    #[serde(default)]
    dead_letter_topic: Option<String>,
    #[serde(default)]
    context_headers: Option<bool>,
}

#[derive(Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
enum SourceKind {
    Mysql,
    Mariadb,
    Postgres,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SourceToml {
    kind: SourceKind,
    host: String,
    #[serde(default)]
    port: Option<u16>,
    user: String,
    #[serde(default)]
    password: Option<String>,
    #[serde(default)]
    password_env: Option<String>,
    #[serde(default)]
    password_file: Option<PathBuf>,
    #[serde(default, deserialize_with = "duration::deserialize_opt")]
    connect_timeout: Option<Duration>,
    // MySQL / MariaDB
    #[serde(default)]
    flavor: Option<MysqlFlavor>,
    #[serde(default)]
    server_id: Option<u32>,
    #[serde(default)]
    start: Option<StartPosition>,
    #[serde(default)]
    position_mode: Option<PositionMode>,
    #[serde(default, deserialize_with = "duration::deserialize_opt")]
    heartbeat_interval: Option<Duration>,
    #[serde(default, deserialize_with = "duration::deserialize_opt")]
    reconnect_backoff_max: Option<Duration>,
    #[serde(default)]
    columns: Option<BTreeMap<String, Vec<String>>>,
    #[serde(default)]
    xa_max_held_bytes: Option<usize>,
    // PostgreSQL
    #[serde(default)]
    dbname: Option<String>,
    #[serde(default)]
    slot_name: Option<String>,
    #[serde(default)]
    publication_name: Option<String>,
    #[serde(default)]
    publication_autocreate: Option<PublicationAutocreate>,
    #[serde(default)]
    slot_autocreate: Option<bool>,
    #[serde(default)]
    message_prefixes: Option<Vec<String>>,
    #[serde(default, deserialize_with = "duration::deserialize_opt")]
    status_interval: Option<Duration>,
    #[serde(default)]
    tls: Option<TlsToml>,
}

/// `[connectors.source.tls]`.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct TlsToml {
    #[serde(default)]
    mode: Option<String>,
    // MySQL / MariaDB
    #[serde(default)]
    truststore: Option<PathBuf>,
    #[serde(default)]
    truststore_type: Option<String>,
    #[serde(default)]
    truststore_password: Option<String>,
    #[serde(default)]
    truststore_password_env: Option<String>,
    #[serde(default)]
    truststore_password_file: Option<PathBuf>,
    #[serde(default)]
    keystore: Option<PathBuf>,
    #[serde(default)]
    keystore_type: Option<String>,
    #[serde(default)]
    keystore_password: Option<String>,
    #[serde(default)]
    keystore_password_env: Option<String>,
    #[serde(default)]
    keystore_password_file: Option<PathBuf>,
    // PostgreSQL
    #[serde(default)]
    rootcert: Option<String>,
    #[serde(default)]
    cert: Option<PathBuf>,
    #[serde(default)]
    key: Option<PathBuf>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct KafkaToml {
    #[serde(default)]
    bootstrap_servers: Option<String>,
    #[serde(default)]
    producer: BTreeMap<String, toml::Value>,
    #[serde(default)]
    max_record_bytes: Option<usize>,
    /// Kafka Connect's `topic.creation.*` keys without the prefix (`"default.partitions" = 6`).
    #[serde(default)]
    topic_creation: BTreeMap<String, toml::Value>,
}

/// `[connectors.kafka.topic_creation]`: Kafka Connect's `topic.creation.*` keys without the
/// prefix, read as a connector JSON's are
/// ([`TopicCreation::from_keys`](super::topic_creation::TopicCreation::from_keys)); a list
/// value (`include = ["a", "b"]`) is Connect's comma-separated list.
fn topic_creation(
    table: BTreeMap<String, toml::Value>,
    here: &str,
    ctx: &LoadCtx<'_>,
) -> Result<Option<super::topic_creation::TopicCreation>, ConfigError> {
    let scalar = |v: &toml::Value| match v {
        toml::Value::String(s) => Some(s.clone()),
        toml::Value::Integer(i) => Some(i.to_string()),
        toml::Value::Boolean(b) => Some(b.to_string()),
        _ => None,
    };
    let mut keys = BTreeMap::new();
    for (k, v) in &table {
        let text = match v {
            toml::Value::Array(items) => items
                .iter()
                .map(scalar)
                .collect::<Option<Vec<_>>>()
                .map(|l| l.join(",")),
            other => scalar(other),
        }
        .ok_or_else(|| {
            ctx.invalid(
                format!("{here}.kafka.topic_creation.{k}"),
                "must be a string, an integer, a boolean or a list of strings",
            )
        })?;
        keys.insert(format!("{}{k}", super::topic_creation::PREFIX), text);
    }
    super::topic_creation::TopicCreation::from_keys(&keys).map_err(|(k, m)| {
        let k = k.strip_prefix(super::topic_creation::PREFIX).unwrap_or(&k);
        ctx.invalid(format!("{here}.kafka.topic_creation.{k}"), m)
    })
}

pub(super) fn parse(text: &str, ctx: &LoadCtx<'_>) -> Result<Config, ConfigError> {
    let file: FileToml = toml::from_str(text).map_err(|e| ConfigError::Toml {
        path: ctx.path.to_path_buf(),
        hint: super::hint::did_you_mean(e.message()),
        cause: Box::new(e),
    })?;
    let mut connectors = Vec::with_capacity(file.connectors.len());
    for (i, c) in file.connectors.into_iter().enumerate() {
        connectors.push(connector(c, i, ctx)?);
    }
    if connectors.is_empty() {
        return Err(ctx.invalid(
            "file",
            "defines no connector: add a [[connectors]] table (see connectors/README.md)",
        ));
    }
    Ok(Config {
        connectors,
        metrics: file.metrics,
        log: file.log,
        group: file.group,
        kafka: KafkaClientSettings::default(),
    })
}

fn connector(
    c: ConnectorToml,
    index: usize,
    ctx: &LoadCtx<'_>,
) -> Result<ConnectorConfig, ConfigError> {
    let here = format!("connectors[{index}] ({:?})", c.name);
    validate_connector_name(&c.name).map_err(|m| ctx.invalid(format!("{here}.name"), m))?;

    if c.tables.is_empty() {
        return Err(ctx.invalid(
            format!("{here}.tables"),
            "list at least one outbox table as \"schema.table\" (e.g. tables = [\"shop.outbox_events\"])",
        ));
    }
    let mut tables = Vec::with_capacity(c.tables.len());
    for t in &c.tables {
        let t = TableName::parse(t).map_err(|m| ctx.invalid(format!("{here}.tables"), m))?;
        if tables.contains(&t) {
            return Err(ctx.invalid(format!("{here}.tables"), format!("{t} is listed twice")));
        }
        tables.push(t);
    }

    let source = source(c.source, &c.name, &tables, &format!("{here}.source"), ctx)?;
    let mut defaults = RouterConfig::default();
    defaults.format.logical_name = c.name.clone();
    match &source {
        SourceConfig::Postgres(_) => {
            defaults.format.connector_type = "postgresql".into();
            defaults.format.types = crate::typemap::TypeModes::POSTGRES;
        }
        SourceConfig::Mysql(m) => {
            defaults.format.connector_type = if m.flavor == crate::config::MysqlFlavor::Mariadb {
                "mariadb"
            } else {
                "mysql"
            }
            .into();
        }
    }
    let router = router_from_toml(&c.router, defaults, &format!("{here}.router"), ctx)?;

    let sink = match c.sink {
        Some(t) => super::sinks::from_toml(t, &format!("{here}.sink"), ctx)?,
        None => super::SinkConfig::Kafka,
    };
    let bootstrap = ctx
        .bootstrap_override
        .map(str::to_string)
        .or_else(|| {
            c.kafka
                .bootstrap_servers
                .as_deref()
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_string)
        })
        .or_else(|| ctx.process_bootstrap.map(str::to_string))
        // Nothing connects to Kafka when records go elsewhere.
        .or_else(|| (!sink.is_kafka()).then(String::new))
        .ok_or_else(|| ConfigError::MissingBootstrap {
            path: ctx.path.to_path_buf(),
            connector: c.name.clone(),
        })?;
    let mut producer = BTreeMap::new();
    // Secret-valued keys (`sasl.password`, `ssl.key.password`, ...) are kept as secrets, as
    // the process-wide ones are: they never print with the configuration.
    let mut producer_secrets = ClientProperties::default();
    for (k, v) in c.kafka.producer {
        if k == "bootstrap.servers" || k == "metadata.broker.list" {
            return Err(ctx.invalid(
                format!("{here}.kafka.producer"),
                format!("`{k}` belongs in kafka.bootstrap_servers, not in kafka.producer"),
            ));
        }
        let v = match v {
            toml::Value::String(s) => s,
            toml::Value::Integer(i) => i.to_string(),
            toml::Value::Boolean(b) => b.to_string(),
            toml::Value::Float(f) => f.to_string(),
            _ => {
                return Err(ctx.invalid(
                    format!("{here}.kafka.producer.{k}"),
                    "librdkafka properties are strings, integers or booleans",
                ))
            }
        };
        if super::kafka::is_secret_key(&k) {
            producer_secrets.set(&k, v);
        } else {
            producer.insert(k, v);
        }
    }
    let topic_creation = topic_creation(c.kafka.topic_creation, &here, ctx)?;
    let max_record_bytes = c.kafka.max_record_bytes.unwrap_or(DEFAULT_MAX_RECORD_BYTES);
    if max_record_bytes == 0 {
        return Err(ctx.invalid(
            format!("{here}.kafka.max_record_bytes"),
            "must be greater than 0 (default 16777216 = 16 MiB)",
        ));
    }

    let checkpoint_given = c.checkpoint.is_some();
    let checkpoint = c
        .checkpoint
        .map(|t| checkpoint_table(t, &sink, &here, ctx))
        .transpose()?;
    let checkpoint = match checkpoint {
        Some(CheckpointConfig::File { path }) if path.as_os_str().is_empty() => {
            return Err(ctx.invalid(format!("{here}.checkpoint.path"), "must not be empty"))
        }
        Some(CheckpointConfig::Kafka {
            batch_max_events,
            batch_max_bytes,
            batch_max_ms,
            ..
        }) if batch_max_events == 0 || batch_max_bytes == 0 || batch_max_ms == 0 => {
            return Err(ctx.invalid(
                format!("{here}.checkpoint"),
                "batch_max_events, batch_max_bytes and batch_max_ms must be greater than 0",
            ))
        }
        Some(CheckpointConfig::Kafka {
            topic,
            delivery,
            transactional_id,
            batch_max_events,
            batch_max_bytes,
            batch_max_ms,
        }) => CheckpointConfig::Kafka {
            topic: if topic.trim().is_empty() {
                super::default_checkpoint_topic(&c.name)
            } else {
                topic
            },
            delivery,
            transactional_id,
            batch_max_events,
            batch_max_bytes,
            batch_max_ms,
        },
        Some(cp) => cp,
        None => ctx.default_checkpoint(&c.name),
    };
    let checkpoint = sink_checkpoint(&sink, checkpoint, checkpoint_given, &here, ctx)?;

    let errors = match c.errors {
        None => ErrorPolicy {
            context_headers: true,
            ..ErrorPolicy::default()
        },
        Some(e) => {
            if e.tolerance == ErrorTolerance::None && e.dead_letter_topic.is_some() {
                return Err(ctx.invalid(
                    format!("{here}.errors.dead_letter_topic"),
                    "is only used with tolerance = \"all\"; set tolerance = \"all\" or remove it",
                ));
            }
            ErrorPolicy {
                tolerance: e.tolerance,
                dead_letter_topic: e.dead_letter_topic,
                context_headers: e.context_headers.unwrap_or(true),
            }
        }
    };
    let checkpoint_topic = match &checkpoint {
        CheckpointConfig::Kafka { topic, .. } => Some(topic.as_str()),
        CheckpointConfig::File { .. } | CheckpointConfig::Sink {} => None,
    };
    errors
        .validate(checkpoint_topic)
        .map_err(|m| ctx.invalid(format!("{here}.errors"), m))?;

    Ok(ConnectorConfig {
        name: c.name,
        source,
        router,
        errors,
        sink,
        kafka: KafkaConfig {
            bootstrap_servers: bootstrap,
            client: ClientProperties::default(),
            producer,
            producer_secrets,
            max_record_bytes,
            topic_creation,
        },
        checkpoint,
        tables,
        ignored_keys: Vec::new(),
        metrics_server: None,
    })
}

/// `[connectors.checkpoint]` read for a connector whose records go to `sink`: without
/// `store`, the sink's default store (`"kafka"` for Kafka, `"sink"` for NATS JetStream and
/// Redis); a RabbitMQ sink, or a `path` without `store`, must say `store = "file"`.
/// Errors name the key and, for an unknown one, the closest accepted key.
fn checkpoint_table(
    mut t: toml::Table,
    sink: &super::SinkConfig,
    here: &str,
    ctx: &LoadCtx<'_>,
) -> Result<CheckpointConfig, ConfigError> {
    use super::SinkConfig;
    let at = format!("{here}.checkpoint");
    if !t.contains_key("store") {
        let store = match sink {
            _ if t.contains_key("path") => {
                return Err(ctx.invalid(
                    format!("{at}.store"),
                    "is missing: `path` is for store = \"file\" (a JSON file, at-least-once); \
                     add store = \"file\"",
                ))
            }
            SinkConfig::Kafka => "kafka",
            SinkConfig::Nats(_) | SinkConfig::Redis(_) => "sink",
            SinkConfig::RabbitMq(_) => {
                return Err(ctx.invalid(
                    format!("{at}.store"),
                    "is missing: a RabbitMQ sink keeps its checkpoint in a file: set \
                     store = \"file\" and path = \"...\"",
                ))
            }
        };
        t.insert("store".into(), toml::Value::String(store.into()));
    }
    CheckpointConfig::deserialize(toml::Value::Table(t)).map_err(|e| {
        let m = e.message().to_string();
        let hint = super::hint::did_you_mean(&m);
        ctx.invalid(at, format!("{m}{hint}"))
    })
}

/// The checkpoint store of a connector whose records go to `sink`, given the configured one
/// (`given`: whether `[connectors.checkpoint]` was there). Kafka takes every store but
/// `sink`; NATS JetStream and Redis keep the checkpoint themselves unless it is a file; a
/// RabbitMQ sink needs a file.
fn sink_checkpoint(
    sink: &super::SinkConfig,
    checkpoint: CheckpointConfig,
    given: bool,
    here: &str,
    ctx: &LoadCtx<'_>,
) -> Result<CheckpointConfig, ConfigError> {
    use super::SinkConfig;
    let at = format!("{here}.checkpoint.store");
    match (sink, checkpoint) {
        (SinkConfig::Kafka, CheckpointConfig::Sink {}) => Err(ctx.invalid(
            at,
            "\"sink\" is for a non-Kafka [connectors.sink]; with Kafka use \"kafka\" (default) or \"file\"",
        )),
        (SinkConfig::Kafka, cp) | (_, cp @ CheckpointConfig::File { .. }) => Ok(cp),
        (SinkConfig::RabbitMq(_), _) => Err(ctx.invalid(
            at,
            "a RabbitMQ sink keeps its checkpoint in a file: set [connectors.checkpoint] \
             store = \"file\" and path = \"...\"",
        )),
        (_, CheckpointConfig::Sink {}) => Ok(CheckpointConfig::Sink {}),
        (other, CheckpointConfig::Kafka { .. }) if given => Err(ctx.invalid(
            at,
            format!(
                "a {} sink keeps its checkpoint itself (store = \"sink\", the default) or in a \
                 file (store = \"file\"), not in Kafka",
                other.kind()
            ),
        )),
        (_, CheckpointConfig::Kafka { .. }) => Ok(CheckpointConfig::Sink {}),
    }
}

fn source(
    s: SourceToml,
    connector: &str,
    tables: &[TableName],
    here: &str,
    ctx: &LoadCtx<'_>,
) -> Result<SourceConfig, ConfigError> {
    let password = secret_setting(
        "password",
        (&s.password, &s.password_env, &s.password_file),
        here,
        ctx,
    )?
    .unwrap_or_default();
    let tls = s.tls.unwrap_or_default();
    let tls_here = format!("{here}.tls");
    if s.host.trim().is_empty() {
        return Err(ctx.invalid(format!("{here}.host"), "must not be empty"));
    }
    let connect_timeout = s.connect_timeout.unwrap_or(Duration::from_secs(10));

    let misplaced = |names: &[(&str, bool)], kind: &str| -> Result<(), ConfigError> {
        if let Some((n, _)) = names.iter().find(|(_, set)| *set) {
            return Err(ctx.invalid(
                format!("{here}.{n}"),
                format!("does not apply to kind = \"{kind}\"; remove it"),
            ));
        }
        Ok(())
    };

    match s.kind {
        SourceKind::Mysql | SourceKind::Mariadb => {
            let kind = if s.kind == SourceKind::Mysql {
                "mysql"
            } else {
                "mariadb"
            };
            misplaced(
                &[
                    ("dbname", s.dbname.is_some()),
                    ("slot_name", s.slot_name.is_some()),
                    ("publication_name", s.publication_name.is_some()),
                    ("publication_autocreate", s.publication_autocreate.is_some()),
                    ("slot_autocreate", s.slot_autocreate.is_some()),
                    ("message_prefixes", s.message_prefixes.is_some()),
                    ("status_interval", s.status_interval.is_some()),
                    ("tls.rootcert", tls.rootcert.is_some()),
                    ("tls.cert", tls.cert.is_some()),
                    ("tls.key", tls.key.is_some()),
                ],
                kind,
            )?;
            let tls = mysql_tls(tls, &tls_here, ctx)?;
            let flavor = match (s.kind, s.flavor) {
                (SourceKind::Mariadb, None | Some(MysqlFlavor::Mariadb)) => MysqlFlavor::Mariadb,
                (SourceKind::Mariadb, Some(_)) => return Err(ctx.invalid(
                    format!("{here}.flavor"),
                    "kind = \"mariadb\" implies flavor = \"mariadb\"; use kind = \"mysql\" with \
                         flavor = \"auto\" or \"mysql\" instead",
                )),
                (_, f) => f.unwrap_or(MysqlFlavor::Auto),
            };
            let server_id = s.server_id.ok_or_else(|| {
                ctx.invalid(
                    format!("{here}.server_id"),
                    "is required: a replica server id unique among the server's replicas \
                     (Debezium database.server.id), e.g. server_id = 184054",
                )
            })?;
            if server_id == 0 {
                return Err(ctx.invalid(
                    format!("{here}.server_id"),
                    "must not be 0 (the server refuses replicas with server_id 0)",
                ));
            }
            let mut columns = BTreeMap::new();
            for (t, cols) in s.columns.unwrap_or_default() {
                let name =
                    TableName::parse(&t).map_err(|m| ctx.invalid(format!("{here}.columns"), m))?;
                if !tables.contains(&name) {
                    return Err(ctx.invalid(
                        format!("{here}.columns"),
                        format!("table {name} is not in the connector's tables"),
                    ));
                }
                if cols.is_empty() || cols.iter().any(|c| c.trim().is_empty()) {
                    return Err(ctx.invalid(
                        format!("{here}.columns.\"{name}\""),
                        "list every column name of the table, in table order",
                    ));
                }
                let unique: BTreeSet<&String> = cols.iter().collect();
                if unique.len() != cols.len() {
                    return Err(
                        ctx.invalid(format!("{here}.columns.\"{name}\""), "lists a column twice")
                    );
                }
                columns.insert(name, cols);
            }
            Ok(SourceConfig::Mysql(MysqlSourceConfig {
                flavor,
                host: s.host,
                port: s.port.unwrap_or(3306),
                user: s.user,
                password,
                server_id,
                start: s.start.unwrap_or_default(),
                position_mode: s.position_mode.unwrap_or_default(),
                heartbeat_interval: s.heartbeat_interval.unwrap_or(Duration::from_secs(10)),
                connect_timeout,
                reconnect_backoff_max: s.reconnect_backoff_max.unwrap_or(Duration::from_secs(30)),
                columns,
                xa_max_held_bytes: s
                    .xa_max_held_bytes
                    .unwrap_or(super::DEFAULT_XA_MAX_HELD_BYTES),
                tls,
                format: ConfigFormat::Toml,
            }))
        }
        SourceKind::Postgres => {
            misplaced(
                &[
                    ("flavor", s.flavor.is_some()),
                    ("server_id", s.server_id.is_some()),
                    ("start", s.start.is_some()),
                    ("position_mode", s.position_mode.is_some()),
                    ("heartbeat_interval", s.heartbeat_interval.is_some()),
                    ("reconnect_backoff_max", s.reconnect_backoff_max.is_some()),
                    ("columns", s.columns.is_some()),
                    ("xa_max_held_bytes", s.xa_max_held_bytes.is_some()),
                    ("tls.truststore", tls.truststore.is_some()),
                    ("tls.truststore_type", tls.truststore_type.is_some()),
                    (
                        "tls.truststore_password",
                        tls.truststore_password.is_some()
                            || tls.truststore_password_env.is_some()
                            || tls.truststore_password_file.is_some(),
                    ),
                    ("tls.keystore", tls.keystore.is_some()),
                    ("tls.keystore_type", tls.keystore_type.is_some()),
                    (
                        "tls.keystore_password",
                        tls.keystore_password.is_some()
                            || tls.keystore_password_env.is_some()
                            || tls.keystore_password_file.is_some(),
                    ),
                ],
                "postgres",
            )?;
            let tls = pg_tls(tls, &tls_here, ctx)?;
            let dbname = s.dbname.filter(|d| !d.trim().is_empty()).ok_or_else(|| {
                ctx.invalid(
                    format!("{here}.dbname"),
                    "is required: the database holding the outbox table (Debezium database.dbname)",
                )
            })?;
            let default_name = default_pg_object_name(connector);
            let slot_name = s.slot_name.unwrap_or_else(|| default_name.clone());
            validate_slot_name(&slot_name)
                .map_err(|m| ctx.invalid(format!("{here}.slot_name"), m))?;
            let publication_name = s.publication_name.unwrap_or(default_name);
            if publication_name.is_empty() || publication_name.len() > 63 {
                return Err(ctx.invalid(
                    format!("{here}.publication_name"),
                    "must be 1 to 63 bytes long",
                ));
            }
            let message_prefixes = s.message_prefixes.unwrap_or_default();
            if message_prefixes.iter().any(|p| p.is_empty()) {
                return Err(ctx.invalid(
                    format!("{here}.message_prefixes"),
                    "a prefix must not be empty",
                ));
            }
            Ok(SourceConfig::Postgres(PostgresSourceConfig {
                host: s.host,
                port: s.port.unwrap_or(5432),
                user: s.user,
                password,
                dbname,
                slot_name,
                publication_name,
                publication_autocreate: s
                    .publication_autocreate
                    .unwrap_or(PublicationAutocreate::Filtered),
                slot_autocreate: s.slot_autocreate.unwrap_or(true),
                message_prefixes,
                all_message_prefixes: false,
                status_interval: s.status_interval.unwrap_or(Duration::from_secs(10)),
                connect_timeout,
                tls,
                format: ConfigFormat::Toml,
            }))
        }
    }
}

/// A secret given one of three ways: `<name>` (literally), `<name>_env` (an environment
/// variable's value, read now) or `<name>_file` (a file's contents, one trailing newline
/// removed). `None` when none is set, and offline ([`LoadCtx::offline`]: nothing connects,
/// so an unset variable or a file only the relay's host has is no error); an error when
/// several are set.
pub(crate) fn secret_setting(
    name: &str,
    (literal, var, file): (&Option<String>, &Option<String>, &Option<PathBuf>),
    here: &str,
    ctx: &LoadCtx<'_>,
) -> Result<Option<Secret>, ConfigError> {
    match (literal, var, file) {
        _ if ctx.offline => Ok(None),
        (Some(p), None, None) => Ok(Some(Secret::new(p.clone()))),
        (None, Some(var), None) => Ok(Some(Secret::new((ctx.env)(var).ok_or_else(|| {
            ctx.invalid(
                format!("{here}.{name}_env"),
                format!("environment variable {var} is not set; export it with the {name}"),
            )
        })?))),
        (None, None, Some(path)) => read_secret_file(path)
            .map(Some)
            .map_err(|m| ctx.invalid(format!("{here}.{name}_file"), m)),
        (None, None, None) => Ok(None),
        _ => Err(ctx.invalid(
            here,
            format!("set only one of {name}, {name}_env, {name}_file"),
        )),
    }
}

/// `<name>`, `<name>_type` and `<name>_password[_env|_file]` of `[connectors.source.tls]` as
/// one store (`None` without `<name>`; a type or password without it is an error).
fn store_file(
    name: &str,
    path: Option<PathBuf>,
    kind: &Option<String>,
    password: (&Option<String>, &Option<String>, &Option<PathBuf>),
    here: &str,
    ctx: &LoadCtx<'_>,
) -> Result<Option<StoreFile>, ConfigError> {
    let password = secret_setting(&format!("{name}_password"), password, here, ctx)?;
    let kind_at = format!("{here}.{name}_type");
    let kind = kind
        .as_deref()
        .map(|t| StoreKind::parse(&kind_at, t))
        .transpose()
        .map_err(|e| ctx.invalid(kind_at.clone(), e.to_string()))?;
    match path {
        Some(path) => Ok(Some(StoreFile {
            path,
            kind,
            password: password.unwrap_or_default(),
        })),
        None if kind.is_some() || password.is_some() => Err(ctx.invalid(
            format!("{here}.{name}"),
            format!("is needed with {name}_type / {name}_password"),
        )),
        None => Ok(None),
    }
}

fn mysql_tls(t: TlsToml, here: &str, ctx: &LoadCtx<'_>) -> Result<MysqlTlsConfig, ConfigError> {
    let mode = match &t.mode {
        None => MysqlSslMode::default(),
        Some(m) => MysqlSslMode::parse(m).map_err(|e| ctx.invalid(format!("{here}.mode"), e))?,
    };
    let truststore = store_file(
        "truststore",
        t.truststore,
        &t.truststore_type,
        (
            &t.truststore_password,
            &t.truststore_password_env,
            &t.truststore_password_file,
        ),
        here,
        ctx,
    )?;
    let keystore = store_file(
        "keystore",
        t.keystore,
        &t.keystore_type,
        (
            &t.keystore_password,
            &t.keystore_password_env,
            &t.keystore_password_file,
        ),
        here,
        ctx,
    )?;
    Ok(MysqlTlsConfig {
        mode,
        truststore,
        keystore,
    })
}

fn pg_tls(t: TlsToml, here: &str, ctx: &LoadCtx<'_>) -> Result<PgTlsConfig, ConfigError> {
    let mode = match &t.mode {
        None => PgSslMode::default(),
        Some(m) => PgSslMode::parse(m).map_err(|e| ctx.invalid(format!("{here}.mode"), e))?,
    };
    let rootcert = t.rootcert.map(|r| {
        if r == "system" {
            RootCert::System
        } else {
            RootCert::File(PathBuf::from(r))
        }
    });
    if t.cert.is_some() != t.key.is_some() {
        return Err(ctx.invalid(
            format!("{here}.cert"),
            "set cert and key together (the client certificate and its private key, PEM)",
        ));
    }
    Ok(PgTlsConfig {
        mode,
        rootcert,
        cert: t.cert,
        key: t.key,
    })
}

/// The TOML top-level `[kafka]` section of `text`, as process-wide Kafka settings (`None`
/// for a Debezium JSON or a TOML without one). Keys are Kafka Connect / Java client names or
/// librdkafka names; nested tables are dotted keys (`[kafka.producer]` holds the record
/// producers' keys); a secret is given as `{ env = "VAR" }` or `{ file = "/path" }`. The
/// schema is closed: a key that is not used is an error. A TOML that does not parse yields
/// `None` here (the connector parse reports it).
pub(super) fn kafka_section(
    text: &str,
    path: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<KafkaClientSettings>, ConfigError> {
    if text.trim_start().starts_with('{') {
        return Ok(None);
    }
    let Ok(mut table) = toml::from_str::<toml::Table>(text) else {
        return Ok(None);
    };
    let Some(toml::Value::Table(kafka)) = table.remove("kafka") else {
        return Ok(None);
    };
    let invalid = |context: String, message: String| ConfigError::Invalid {
        path: path.to_path_buf(),
        context,
        message,
    };
    let mut keys = BTreeMap::new();
    flatten_kafka("", &kafka, env, &mut keys).map_err(|(k, m)| invalid(format!("kafka.{k}"), m))?;
    let settings = super::kafka::from_keys(keys, &crate::config::kafka::knows_property)
        .map_err(|(k, m)| invalid(format!("kafka.{k:?}"), m))?;
    if let Some((k, why)) = settings.ignored_keys.first() {
        return Err(invalid(
            format!("kafka.{k:?}"),
            format!("is not used by outboxd ({why}); remove it"),
        ));
    }
    if let Some(k) = settings.worker_keys.first() {
        return Err(invalid(
            format!("kafka.{k:?}"),
            "is not used by outboxd (a Kafka Connect worker setting: Connect's worker group, \
             REST API, config/offset/status topics or plugins); remove it"
                .into(),
        ));
    }
    Ok(Some(settings))
}

fn flatten_kafka(
    prefix: &str,
    table: &toml::Table,
    env: &dyn Fn(&str) -> Option<String>,
    out: &mut BTreeMap<String, String>,
) -> Result<(), (String, String)> {
    for (k, v) in table {
        let key = if prefix.is_empty() {
            k.clone()
        } else {
            format!("{prefix}.{k}")
        };
        let text = match v {
            toml::Value::String(s) => s.clone(),
            toml::Value::Integer(i) => i.to_string(),
            toml::Value::Boolean(b) => b.to_string(),
            toml::Value::Float(f) => f.to_string(),
            toml::Value::Table(t)
                if t.len() == 1 && (t.contains_key("env") || t.contains_key("file")) =>
            {
                match (t.get("env"), t.get("file")) {
                    (Some(toml::Value::String(var)), _) => env(var).ok_or_else(|| {
                        (
                            key.clone(),
                            format!("environment variable {var} is not set"),
                        )
                    })?,
                    (_, Some(toml::Value::String(file))) => read_secret_file(Path::new(file))
                        .map_err(|m| (key.clone(), m))?
                        .expose()
                        .to_string(),
                    _ => return Err((key, "env / file take a string".into())),
                }
            }
            toml::Value::Table(t) => {
                flatten_kafka(&key, t, env, out)?;
                continue;
            }
            _ => {
                return Err((
                    key,
                    "Kafka client settings are strings, integers or booleans".into(),
                ))
            }
        };
        out.insert(key, text);
    }
    Ok(())
}

/// The `[connectors.router]` table, over `cfg` (the defaults for the connector's source):
/// every key goes through [`RouterConfig::set_option`] (snake_case or Debezium names, and
/// the record-format keys: converters, `extended.headers.enabled`, type-mapping options),
/// unknown keys are errors.
fn router_from_toml(
    table: &toml::Table,
    mut cfg: RouterConfig,
    here: &str,
    ctx: &LoadCtx<'_>,
) -> Result<RouterConfig, ConfigError> {
    let mut seen: BTreeMap<&'static str, &str> = BTreeMap::new();
    for (key, value) in table {
        let at = format!("{here}.{key:?}");
        let text = match value {
            toml::Value::String(s) => s.clone(),
            toml::Value::Boolean(b) => b.to_string(),
            toml::Value::Integer(i) => i.to_string(),
            toml::Value::Array(items) => {
                placement_array(items).map_err(|m| ctx.invalid(at.clone(), m))?
            }
            _ => {
                return Err(ctx.invalid(
                    at,
                    "expected a string, boolean, or (for additional_placement) an array",
                ))
            }
        };
        let canonical = RouterConfig::option_names()
            .find(|(d, s)| d == key || s == key)
            .map(|(d, _)| d);
        if let Some(c) = canonical {
            if let Some(prev) = seen.insert(c, key) {
                return Err(ctx.invalid(
                    at,
                    format!("sets the same option as {prev:?}; keep one of the two names"),
                ));
            }
        }
        if matches!(value, toml::Value::Array(_))
            && canonical != Some("table.fields.additional.placement")
        {
            return Err(ctx.invalid(at, "only additional_placement takes an array"));
        }
        match cfg
            .set_option(key, &text)
            .map_err(|m| ctx.invalid(at.clone(), m))?
        {
            None => {}
            Some(UnknownOption::NoEffect(why)) => {
                return Err(ctx.invalid(
                    at,
                    format!("is a Debezium option with no effect in outboxd ({why}); remove it"),
                ))
            }
            Some(UnknownOption::Unknown) => {
                let known: Vec<String> = RouterConfig::option_names()
                    .map(|(d, s)| format!("{s} (\"{d}\")"))
                    .collect();
                return Err(ctx.invalid(
                    at,
                    format!("unknown router option; accepted: {}", known.join(", ")),
                ));
            }
        }
    }
    Ok(cfg)
}

/// `additional_placement` as an array: strings `"col:placement[:alias]"` or tables
/// `{ column = "..", placement = "..", alias = ".." }`; returned in Debezium's list form.
fn placement_array(items: &[toml::Value]) -> Result<String, String> {
    let mut parts = Vec::with_capacity(items.len());
    for item in items {
        match item {
            toml::Value::String(s) => parts.push(s.clone()),
            toml::Value::Table(t) => {
                if let Some(k) = t
                    .keys()
                    .find(|k| !matches!(k.as_str(), "column" | "placement" | "alias"))
                {
                    return Err(format!(
                        "unknown key `{k}` in a placement; expected column, placement, alias"
                    ));
                }
                let get = |k: &str| t.get(k).and_then(|v| v.as_str());
                let column = get("column").ok_or("a placement needs column = \"...\"")?;
                let placement = get("placement").ok_or(
                    "a placement needs placement = \"header\" | \"envelope\" | \"partition\"",
                )?;
                if column.contains([',', ':']) {
                    return Err(format!("column {column:?} must not contain ',' or ':'"));
                }
                match get("alias") {
                    Some(a) if a.contains([',', ':']) => {
                        return Err(format!("alias {a:?} must not contain ',' or ':'"))
                    }
                    Some(a) => parts.push(format!("{column}:{placement}:{a}")),
                    None => parts.push(format!("{column}:{placement}")),
                }
            }
            _ => return Err("additional_placement entries are strings or tables".into()),
        }
    }
    Ok(parts.join(","))
}
