//! Loading configuration files: one or several (their connectors merged, process-wide
//! sections set once), in either format (outboxd TOML, Debezium connector JSON), with the
//! command line's overrides and the process-wide Kafka settings applied to every connector.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use super::{
    debezium, kafka, names, native, CheckpointConfig, Config, ConfigError, GroupConfig,
    KafkaClientSettings, KafkaConfig, LogConfig, MetricsConfig, ENV_KAFKA_BOOTSTRAP,
};

/// What the command line adds to the files.
#[derive(Debug, Clone, Copy, Default)]
pub struct LoadOptions<'a> {
    /// `--kafka-bootstrap`: beats `OUTBOXD_KAFKA_BOOTSTRAP`, which beats the files.
    pub kafka_bootstrap: Option<&'a str>,
    /// `--kafka-config FILE`: a Kafka Connect worker properties file with the process-wide
    /// Kafka client settings (see `config::kafka`); its keys beat the TOML `[kafka]` section's.
    pub kafka_config: Option<&'a Path>,
    /// The source databases' secrets are not resolved (an unset `password_env` is no error):
    /// for commands that touch only the checkpoint store (`outboxd checkpoint ...`).
    pub without_source_secrets: bool,
    /// No file is an empty configuration (connectors come later: `run --rest-connectors`),
    /// not an error.
    pub none_is_empty: bool,
    /// `--shadow NAME` (and `--shadow-server-id`): run beside a live Debezium connector on
    /// the same connector files without touching what it owns ([`Shadow`]).
    pub shadow: Option<Shadow<'a>>,
}

/// A shadow run (`--shadow NAME`): outboxd reads the same source with the same connector
/// files as a live Debezium (or another outboxd) but writes nothing the other one owns:
/// every routed topic and the dead-letter topic get the prefix `NAME.`; the connector is
/// called `<name>.NAME` (its own checkpoint topic `outboxd.checkpoints.<name>.NAME`,
/// `transactional.id`, metrics label; a file store gets the suffix `.NAME`); a PostgreSQL
/// connector reads through its own slot `<slot>_NAME` (same publication); a MySQL/MariaDB
/// connector registers with `server_id` (the other reader's id must not be reused).
#[derive(Debug, Clone, Copy)]
pub struct Shadow<'a> {
    /// The shadow's name: 1-32 characters of `a-z 0-9 _`.
    pub name: &'a str,
    /// The replica server id of MySQL/MariaDB connectors (required for them).
    pub server_id: Option<u32>,
}

/// Loads one configuration file (outboxd TOML or Debezium connector JSON).
///
/// `kafka_bootstrap_override` is the `--kafka-bootstrap` flag; it beats `OUTBOXD_KAFKA_BOOTSTRAP`,
/// which beats the file. Environment variables are read from the process environment.
pub fn load(path: &Path, kafka_bootstrap_override: Option<&str>) -> Result<Config, ConfigError> {
    load_many(&[path], kafka_bootstrap_override)
}

/// Loads one configuration file for offline use (`binlog decode --config`): the router, the
/// tables and the column lists, without resolving passwords (nothing connects) or needing
/// Kafka bootstrap servers.
pub fn load_offline(path: &Path) -> Result<Config, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|cause| ConfigError::Read {
        path: path.to_path_buf(),
        cause,
    })?;
    let env = |k: &str| std::env::var(k).ok();
    let none = KafkaClientSettings::default();
    parse_with_kafka(&text, path, Some("offline:0"), &env, &none, Offline::All)
}

/// Loads several files and merges their connectors (connector names must be unique across
/// them). `[metrics]`/`[log]`/`[kafka]` may be set in one file, or identically in several.
pub fn load_many<P: AsRef<Path>>(
    paths: &[P],
    kafka_bootstrap_override: Option<&str>,
) -> Result<Config, ConfigError> {
    load_all(
        paths,
        LoadOptions {
            kafka_bootstrap: kafka_bootstrap_override,
            kafka_config: None,
            without_source_secrets: false,
            none_is_empty: false,
            shadow: None,
        },
    )
}

/// [`load_many`] with every command-line option ([`LoadOptions`]).
pub fn load_all<P: AsRef<Path>>(paths: &[P], opts: LoadOptions<'_>) -> Result<Config, ConfigError> {
    let env = |k: &str| std::env::var(k).ok();
    load_all_with_env(paths, opts, &env)
}

/// [`load_many`] with an explicit environment lookup (for tests and embedding).
pub fn load_many_with_env<P: AsRef<Path>>(
    paths: &[P],
    kafka_bootstrap_override: Option<&str>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Config, ConfigError> {
    let opts = LoadOptions {
        kafka_bootstrap: kafka_bootstrap_override,
        kafka_config: None,
        without_source_secrets: false,
        none_is_empty: false,
        shadow: None,
    };
    load_all_with_env(paths, opts, env)
}

/// [`load_all`] with an explicit environment lookup.
pub fn load_all_with_env<P: AsRef<Path>>(
    paths: &[P],
    opts: LoadOptions<'_>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Config, ConfigError> {
    if paths.is_empty() && !opts.none_is_empty {
        return Err(ConfigError::NoFiles);
    }
    let mut texts = Vec::with_capacity(paths.len());
    for p in paths {
        let path = p.as_ref();
        let text = std::fs::read_to_string(path).map_err(|cause| ConfigError::Read {
            path: path.to_path_buf(),
            cause,
        })?;
        texts.push((path, text));
    }
    // The process-wide Kafka settings first: every file's connectors get them.
    let mut process = KafkaClientSettings::default();
    let mut kafka_from: Option<PathBuf> = None;
    for (path, text) in &texts {
        if let Some(k) = native::kafka_section(text, path, env)? {
            match &kafka_from {
                Some(first) if process != k => {
                    return Err(ConfigError::ConflictingSection {
                        path: path.to_path_buf(),
                        first: first.clone(),
                        section: "kafka",
                    })
                }
                Some(_) => {}
                None => {
                    kafka_from = Some(path.to_path_buf());
                    process = k;
                }
            }
        }
    }
    if let Some(worker) = opts.kafka_config {
        let w = kafka::from_worker_file(worker, env, &crate::config::kafka::knows_property)
            .map_err(|(key, message)| ConfigError::Invalid {
                path: worker.to_path_buf(),
                context: format!("--kafka-config: {key}"),
                message,
            })?;
        process.merge(&w);
    }
    note_bootstrap_override(&mut process, opts.kafka_bootstrap, env);

    let mut merged = Config {
        connectors: Vec::new(),
        metrics: MetricsConfig::default(),
        log: LogConfig::default(),
        group: GroupConfig::default(),
        kafka: process.clone(),
    };
    let mut origins: BTreeMap<String, PathBuf> = BTreeMap::new();
    // File checkpoint stores, by absolute path: one connector each.
    let mut checkpoint_files: BTreeMap<PathBuf, String> = BTreeMap::new();
    let mut metrics_from: Option<PathBuf> = None;
    let mut log_from: Option<PathBuf> = None;
    let mut group_from: Option<PathBuf> = None;
    for (path, text) in &texts {
        let path: &Path = path;
        let cfg = parse_with_kafka(
            text,
            path,
            opts.kafka_bootstrap,
            env,
            &process,
            if opts.without_source_secrets {
                Offline::Source
            } else {
                Offline::No
            },
        )?;
        merge_section(
            &mut merged.metrics,
            cfg.metrics,
            &mut metrics_from,
            path,
            "metrics",
        )?;
        merge_section(&mut merged.log, cfg.log, &mut log_from, path, "log")?;
        merge_section(&mut merged.group, cfg.group, &mut group_from, path, "group")?;
        for mut c in cfg.connectors {
            if let Some(shadow) = &opts.shadow {
                apply_shadow(&mut c, shadow).map_err(|message| ConfigError::Invalid {
                    path: path.to_path_buf(),
                    context: format!("--shadow {}", shadow.name),
                    message,
                })?;
            }
            if let Some(first) = origins.get(&c.name) {
                return Err(ConfigError::DuplicateConnector {
                    name: c.name,
                    first: first.clone(),
                    second: path.to_path_buf(),
                });
            }
            origins.insert(c.name.clone(), path.to_path_buf());
            if let CheckpointConfig::File { path: file } = &c.checkpoint {
                let key = std::path::absolute(file).unwrap_or_else(|_| file.clone());
                if let Some(first) = checkpoint_files.insert(key, c.name.clone()) {
                    return Err(ConfigError::SharedCheckpointFile {
                        path: file.clone(),
                        first,
                        second: c.name,
                    });
                }
            }
            merged.connectors.push(c);
        }
    }
    Ok(merged)
}

/// Turns connector `c` into its shadow ([`Shadow`]). Errors for a bad shadow name, or a
/// MySQL/MariaDB connector without `--shadow-server-id` (or with the connector's own id).
fn apply_shadow(c: &mut super::ConnectorConfig, shadow: &Shadow<'_>) -> Result<(), String> {
    let n = shadow.name;
    if n.is_empty()
        || n.len() > 32
        || !n
            .chars()
            .all(|ch| ch.is_ascii_lowercase() || ch.is_ascii_digit() || ch == '_')
    {
        return Err(format!(
            "shadow name {n:?} must be 1 to 32 characters of a-z, 0-9 and _ (it goes into topic, slot and connector names)"
        ));
    }
    let old_name = c.name.clone();
    c.name = format!("{old_name}.{n}");
    names::validate_connector_name(&c.name)?;
    c.router.topic_prefix = Some(format!("{n}."));
    if let Some(t) = &mut c.errors.dead_letter_topic {
        *t = format!("{n}.{t}");
    }
    if c.metrics_server.is_none() {
        c.metrics_server = Some(old_name.clone());
    }
    match &mut c.checkpoint {
        CheckpointConfig::Kafka {
            topic,
            transactional_id,
            ..
        } => {
            *topic = if *topic == super::default_checkpoint_topic(&old_name) {
                super::default_checkpoint_topic(&c.name)
            } else {
                format!("{topic}.{n}")
            };
            if let Some(id) = transactional_id {
                *id = format!("{id}.{n}");
            }
        }
        CheckpointConfig::File { path } => {
            let mut p = path.clone().into_os_string();
            p.push(format!(".{n}"));
            *path = PathBuf::from(p);
        }
        // Keyed by the connector's name (NATS KV), or a key derived from it unless set
        // (Redis): each table's connector has its own.
        CheckpointConfig::Sink {} => {}
    }
    match &mut c.source {
        super::SourceConfig::Postgres(pg) => {
            let slot = format!("{}_{n}", pg.slot_name);
            names::validate_slot_name(&slot)?;
            pg.slot_name = slot;
        }
        super::SourceConfig::Mysql(m) => match shadow.server_id {
            Some(id) if id != 0 && id != m.server_id => m.server_id = id,
            Some(_) => {
                return Err(format!(
                    "--shadow-server-id must differ from the connector's server id {} (the live reader's) and not be 0",
                    m.server_id
                ))
            }
            None => {
                return Err(format!(
                    "connector `{old_name}` reads a MySQL/MariaDB binlog: give the shadow a replica server id of its own with --shadow-server-id (not {}, the live reader's)",
                    m.server_id
                ))
            }
        },
    }
    Ok(())
}

/// Notes in `process.ignored_keys` a `bootstrap.servers` of `--kafka-config` / `[kafka]` that
/// `--kafka-bootstrap` (`flag`) or `OUTBOXD_KAFKA_BOOTSTRAP` overrides with another list: an
/// exported variable (e.g. by `scripts/services.sh up`) would otherwise silently send a
/// worker file's TLS settings to another listener.
fn note_bootstrap_override(
    process: &mut KafkaClientSettings,
    flag: Option<&str>,
    env: &dyn Fn(&str) -> Option<String>,
) {
    let Some(own) = process.bootstrap_servers.as_deref() else {
        return;
    };
    let from_env = env(ENV_KAFKA_BOOTSTRAP)
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty());
    let flag = flag.map(str::trim).filter(|f| !f.is_empty());
    let (by, servers) = match (flag, from_env) {
        // The command line reads the variable into the flag: name the variable.
        (Some(f), Some(e)) if f == e => (ENV_KAFKA_BOOTSTRAP, e),
        (Some(f), _) => ("--kafka-bootstrap", f.to_string()),
        (None, Some(e)) => (ENV_KAFKA_BOOTSTRAP, e),
        (None, None) => return,
    };
    if servers != own.trim() {
        let why = format!("overridden by {by}={servers}; without it, {own} would be used");
        process.ignored_keys.push(("bootstrap.servers".into(), why));
    }
}

/// Takes `section` of file `path` into `merged`: a process-wide section (`[metrics]`, `[log]`,
/// `[group]`) may be set in one file, or identically in several; `from` remembers the file
/// that set it first.
fn merge_section<T: PartialEq + Default>(
    merged: &mut T,
    section: T,
    from: &mut Option<PathBuf>,
    path: &Path,
    name: &'static str,
) -> Result<(), ConfigError> {
    if section == T::default() {
        return Ok(());
    }
    match from {
        Some(first) if *merged != section => Err(ConfigError::ConflictingSection {
            path: path.to_path_buf(),
            first: first.clone(),
            section: name,
        }),
        Some(_) => Ok(()),
        None => {
            *from = Some(path.to_path_buf());
            *merged = section;
            Ok(())
        }
    }
}

/// The one line on a worker file's Kafka Connect settings that have no role in outboxd
/// ([`KafkaClientSettings::worker_keys`]), `None` without any: what `run` logs at INFO and
/// `check` prints, instead of a warning per key.
pub fn worker_keys_line(keys: &[String]) -> Option<String> {
    (!keys.is_empty()).then(|| {
        format!(
            "{} Kafka Connect worker setting(s) ignored, with no role in outboxd (Connect's worker \
             group, REST API, config/offset/status topics and plugins; outboxd keeps its own \
             checkpoint; the cutover commands read the offsets storage and ask the REST API): {}",
            keys.len(),
            keys.join(", ")
        )
    })
}

/// Logs every connector's [`ConnectorConfig::ignored_keys`](crate::config::ConnectorConfig::ignored_keys) and the process-wide Kafka
/// settings' (one warning per key, with the reason; values are never logged), after one INFO
/// line listing the Kafka Connect worker settings with no role here. `run` and
/// `check` call it after loading.
pub fn log_ignored_keys(cfg: &Config) {
    if let Some(line) = worker_keys_line(&cfg.kafka.worker_keys) {
        tracing::info!("{line}");
    }
    for (key, why) in &cfg.kafka.ignored_keys {
        tracing::warn!(key = %key, "Kafka worker setting not used by outboxd: {why}");
    }
    for c in &cfg.connectors {
        for (key, why) in &c.ignored_keys {
            tracing::warn!(connector = %c.name, key = %key, "Debezium setting `{key}`: {why}");
        }
    }
}

/// Parses configuration text. `origin` is only used in messages and as the fallback connector
/// name of a Debezium JSON without one (its file stem). `env` looks up environment variables
/// (`OUTBOXD_KAFKA_BOOTSTRAP`, `OUTBOXD_STATE_DIR`, `password_env`, `${env:VAR}`). A TOML
/// text's own `[kafka]` section is its process-wide Kafka settings.
pub fn parse(
    text: &str,
    origin: &Path,
    kafka_bootstrap_override: Option<&str>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Config, ConfigError> {
    let process = native::kafka_section(text, origin, env)?.unwrap_or_default();
    parse_with_kafka(
        text,
        origin,
        kafka_bootstrap_override,
        env,
        &process,
        Offline::No,
    )
}

/// Which secrets a load leaves unresolved.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Offline {
    /// None.
    No,
    /// The source's ([`LoadOptions::without_source_secrets`]: the checkpoint commands,
    /// which reach the checkpoint store, which may be the sink's).
    Source,
    /// All ([`load_offline`]: nothing connects).
    All,
}

/// [`parse`] with the process-wide Kafka settings given: they are merged into each
/// connector's [`KafkaConfig`] (its own settings win). `offline`: which passwords are not
/// resolved.
fn parse_with_kafka(
    text: &str,
    origin: &Path,
    kafka_bootstrap_override: Option<&str>,
    env: &dyn Fn(&str) -> Option<String>,
    process: &KafkaClientSettings,
    offline: Offline,
) -> Result<Config, ConfigError> {
    let bootstrap_override = kafka_bootstrap_override
        .map(str::to_string)
        .or_else(|| env(ENV_KAFKA_BOOTSTRAP))
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty());
    let ctx = LoadCtx {
        path: origin,
        bootstrap_override: bootstrap_override.as_deref(),
        process_bootstrap: process.bootstrap_servers.as_deref(),
        env,
        offline: offline != Offline::No,
        sink_offline: offline == Offline::All,
    };
    let mut cfg = if text.trim_start().starts_with('{')
        || debezium::looks_like_server_properties(origin, text)
    {
        let connector = if text.trim_start().starts_with('{') {
            debezium::parse(text, &ctx)?
        } else {
            debezium::parse_server(text, &ctx)?
        };
        Config {
            connectors: vec![connector],
            metrics: MetricsConfig::default(),
            log: LogConfig::default(),
            group: GroupConfig::default(),
            kafka: process.clone(),
        }
    } else {
        native::parse(text, &ctx)?
    };
    cfg.kafka = process.clone();
    let mut seen = BTreeSet::new();
    for c in &mut cfg.connectors {
        if !seen.insert(c.name.clone()) {
            return Err(ConfigError::DuplicateConnector {
                name: c.name.clone(),
                first: origin.to_path_buf(),
                second: origin.to_path_buf(),
            });
        }
        let debezium = c.source.format() == super::ConfigFormat::DebeziumJson;
        let structured = c.router.expand_json_payload
            || c.router
                .additional_placement
                .iter()
                .any(|f| f.placement == crate::router::Placement::Envelope);
        c.router
            .format
            .resolve_converters(debezium, &process.converters, structured)
            .map_err(|e| ConfigError::Invalid {
                path: origin.to_path_buf(),
                context: format!("connector `{}`: {}", c.name, e.key),
                message: e.message,
            })?;
        crate::router::EventRouter::new(&c.router).map_err(|source| ConfigError::Router {
            path: origin.to_path_buf(),
            connector: c.name.clone(),
            source,
        })?;
        apply_process_kafka(&mut c.kafka, process);
    }
    Ok(cfg)
}

/// Merges the process-wide Kafka settings under a connector's own.
fn apply_process_kafka(k: &mut KafkaConfig, process: &KafkaClientSettings) {
    if process.topic_creation_enable == Some(false) {
        k.topic_creation = None;
    }
    let mut client = process.client.clone();
    client.merge(&k.client);
    k.client = client;
    let mut producer: BTreeMap<String, String> = process
        .producer
        .plain()
        .iter()
        .map(|(a, b)| (a.clone(), b.clone()))
        .collect();
    producer.extend(std::mem::take(&mut k.producer));
    k.producer = producer;
    let mut secrets = process.producer.secrets_only();
    secrets.merge(&k.producer_secrets);
    k.producer_secrets = secrets;
}

/// What both format parsers need.
pub(crate) struct LoadCtx<'a> {
    pub(crate) path: &'a Path,
    /// CLI flag or `OUTBOXD_KAFKA_BOOTSTRAP`, already resolved.
    pub(crate) bootstrap_override: Option<&'a str>,
    /// `bootstrap.servers` of the process-wide Kafka settings: for connectors that name
    /// none themselves.
    pub(crate) process_bootstrap: Option<&'a str>,
    pub(crate) env: &'a dyn Fn(&str) -> Option<String>,
    /// The source's secrets are not resolved: nothing will connect to it ([`load_offline`],
    /// [`LoadOptions::without_source_secrets`]).
    pub(crate) offline: bool,
    /// The sink's secrets are not resolved either ([`load_offline`] only: the checkpoint
    /// commands reach a sink that keeps the checkpoint, with its login).
    pub(crate) sink_offline: bool,
}

impl LoadCtx<'_> {
    /// This context for a sink's settings: its secrets resolved unless nothing connects.
    pub(crate) fn for_sink(&self) -> LoadCtx<'_> {
        LoadCtx {
            path: self.path,
            bootstrap_override: self.bootstrap_override,
            process_bootstrap: self.process_bootstrap,
            env: self.env,
            offline: self.sink_offline,
            sink_offline: self.sink_offline,
        }
    }

    pub(crate) fn invalid(
        &self,
        context: impl Into<String>,
        message: impl Into<String>,
    ) -> ConfigError {
        ConfigError::Invalid {
            path: self.path.to_path_buf(),
            context: context.into(),
            message: message.into(),
        }
    }

    /// Default checkpoint store: the Kafka topic, exactly-once (no local state).
    pub(crate) fn default_checkpoint(&self, connector: &str) -> CheckpointConfig {
        CheckpointConfig::kafka_default(connector)
    }
}
