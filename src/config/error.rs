//! Why a configuration could not be loaded.

use std::path::PathBuf;

use super::ENV_KAFKA_BOOTSTRAP;
use crate::router::RouterConfigError;

/// A setting that is wrong: its key and what is wrong with it (never a secret value). The
/// caller turns it into a [`ConfigError`], adding the file and the place (the connector, the
/// section, `--kafka-config`).
pub(crate) type KeyError = (String, String);

/// Why a configuration could not be loaded. Every message names the file and the setting and
/// says what to change; secret values never appear.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// No file was given.
    #[error(
        "no configuration file given: pass --config FILE (outboxd TOML or Debezium connector JSON)"
    )]
    NoFiles,
    /// The file could not be read.
    #[error("cannot read {path}: {cause}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error (in the message, not a separate cause: printed once).
        cause: std::io::Error,
    },
    /// TOML syntax or schema error (unknown keys, wrong types), with line and column, and for
    /// an unknown key the closest accepted one.
    #[error("{path}: {}{hint}", cause.to_string().trim_end())]
    Toml {
        /// The file.
        path: PathBuf,
        /// The parser's error, with location.
        cause: Box<toml::de::Error>,
        /// `; did you mean ...?` for an unknown key, else empty.
        hint: String,
    },
    /// JSON syntax error.
    #[error("{path}: not valid JSON (a Debezium connector config is expected when the file starts with '{{'): {source}")]
    Json {
        /// The file.
        path: PathBuf,
        /// The parser's error, with location.
        source: serde_json::Error,
    },
    /// A setting is missing or has a value outboxd cannot use.
    #[error("{path}: {context}: {message}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// Where in the file: connector and key.
        context: String,
        /// What is wrong and what to do.
        message: String,
    },
    /// The router settings do not compile (bad regex, bad replacement).
    #[error("{path}: connector `{connector}`: router settings: {source}")]
    Router {
        /// The file.
        path: PathBuf,
        /// Connector name.
        connector: String,
        /// What is wrong.
        source: RouterConfigError,
    },
    /// No Kafka bootstrap servers anywhere.
    #[error("{path}: connector `{connector}`: no Kafka bootstrap servers: pass --kafka-bootstrap HOST:PORT, set {ENV_KAFKA_BOOTSTRAP}, or set bootstrap.servers in the --kafka-config worker file, [kafka] bootstrap_servers, or the connector's own (TOML [connectors.kafka] bootstrap_servers, Debezium producer.override.bootstrap.servers)")]
    MissingBootstrap {
        /// The file.
        path: PathBuf,
        /// Connector name.
        connector: String,
    },
    /// Two connectors share a name.
    #[error("connector `{name}` is defined twice ({first} and {second}); names must be unique because they key checkpoints")]
    DuplicateConnector {
        /// The name.
        name: String,
        /// File of the first definition.
        first: PathBuf,
        /// File of the second.
        second: PathBuf,
    },
    /// Two connectors keep their checkpoints in one file: each would overwrite the other's
    /// and resume at the other's position.
    #[error("connectors `{first}` and `{second}` both keep their checkpoint in file {}; give each connector a `[connectors.checkpoint] path` of its own", path.display())]
    SharedCheckpointFile {
        /// The file.
        path: PathBuf,
        /// The first connector naming it.
        first: String,
        /// The second.
        second: String,
    },
    /// Two files set `[metrics]` or `[log]` differently.
    #[error("{path}: [{section}] differs from the one in {first}; set it in one file only")]
    ConflictingSection {
        /// The later file.
        path: PathBuf,
        /// The earlier file.
        first: PathBuf,
        /// `metrics` or `log`.
        section: &'static str,
    },
}
