//! Import of a Debezium connector JSON (MySQL, MariaDB, PostgreSQL connectors with the outbox
//! `EventRouter` transform), as Kafka Connect users keep them.
//!
//! Options the user did not set take Debezium's defaults. Every key is accounted for: used,
//! reported in [`ConnectorConfig::ignored_keys`] with the reason, or rejected with an error
//! that says what to change. See the module docs of [`crate::config`] for the rules.
//!
//! [`parse`] reads the document (`document.rs`) into [`Keys`], then hands them to one
//! section after another, by Debezium's option groups; each takes its own keys and returns
//! its part of the [`ConnectorConfig`]:
//!
//! | section | keys |
//! |---|---|
//! | `connector.rs` | `name`, `topic.prefix`, `connector.class`, `connector.adapter` |
//! | `tables.rs` | `table.include.list`, `database.include.list` / `schema.include.list` |
//! | `connection.rs` | `database.hostname`, `.port`, `.user`, `.password`, `connect.timeout.ms` |
//! | `snapshot.rs` | `snapshot.mode` |
//! | `mysql.rs` | `database.server.id` (and the TLS keys) |
//! | `postgres.rs` | `plugin.name`, `database.dbname`, `slot.name`, `publication.*`, `status.update.interval.ms`, `message.prefix.*` |
//! | `security.rs` | the database TLS keys, `producer.override.security.protocol` / `sasl.*` / `ssl.*` |
//! | `transforms.rs` | `transforms*`, the converters, `extended.headers.enabled`, the type-mapping options |
//! | `columns.rs` | `column.include.list` / `column.exclude.list`, `column.truncate.*`, `column.mask.*` |
//! | `bootstrap.rs` | `producer.override.bootstrap.servers`, the schema history's bootstrap servers |
//! | `errors.rs` | `errors.tolerance`, `errors.deadletterqueue.*` |
//! | `unused.rs` | whatever is left: reported with the reason |

use std::collections::{BTreeMap, BTreeSet};

mod bootstrap;
mod columns;
mod connection;
mod connector;
pub use connector::connector_class;
mod document;
mod errors;
mod mysql;
mod postgres;
mod security;
mod server;
mod server_sinks;
mod snapshot;
mod tables;
mod transforms;
mod unused;

use super::{
    CheckpointConfig, ConfigError, ConnectorConfig, KafkaConfig, KeyError, LoadCtx,
    DEFAULT_MAX_RECORD_BYTES,
};
use connector::Kind;
pub(super) use server::{looks_like_server_properties, parse_server};

/// The string-valued config map, consumed key by key, and the keys reported so far.
struct Keys {
    map: BTreeMap<String, String>,
    ignored: Vec<(String, String)>,
    /// Every key a section asked for, present or not: what an unknown key may be a typo of
    /// (`unused::report`'s "did you mean").
    asked: BTreeSet<String>,
}

impl Keys {
    /// The config map `map`, with the keys `ignored` already reported.
    fn new(map: BTreeMap<String, String>, ignored: Vec<(String, String)>) -> Self {
        Keys {
            map,
            ignored,
            asked: BTreeSet::new(),
        }
    }
    fn take(&mut self, k: &str) -> Option<String> {
        if !self.asked.contains(k) {
            self.asked.insert(k.to_string());
        }
        self.map.remove(k)
    }
    fn take_nonempty(&mut self, k: &str) -> Option<String> {
        self.take(k)
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
    }
    fn ignore(&mut self, k: &str, why: impl Into<String>) {
        self.ignored.push((k.to_string(), why.into()));
    }
}

/// Takes the `topic.creation.*` keys (Kafka Connect's topic creation, read by
/// [`TopicCreation::from_keys`](crate::config::topic_creation::TopicCreation::from_keys)).
fn topic_creation(
    keys: &mut Keys,
) -> Result<Option<crate::config::topic_creation::TopicCreation>, KeyError> {
    use crate::config::topic_creation::{TopicCreation, PREFIX};
    let ours: BTreeMap<String, String> = keys
        .map
        .iter()
        .filter(|(k, _)| k.starts_with(PREFIX))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    for k in ours.keys() {
        keys.take(k);
    }
    TopicCreation::from_keys(&ours)
}

/// The connector of a Debezium connector JSON `text`. Errors name the file (`ctx.path`),
/// the connector and the key.
pub(super) fn parse(text: &str, ctx: &LoadCtx<'_>) -> Result<ConnectorConfig, ConfigError> {
    let (outer_name, keys) = document::read(text, ctx)?;
    from_keys(outer_name, keys, Destination::kafka(), ctx)
}

/// Where an imported connector's records and checkpoint go: Kafka and its checkpoint topic
/// for a Connect connector JSON; a Debezium Server file names its sink (`server.rs`).
struct Destination {
    sink: crate::config::SinkConfig,
    /// `None`: the default store for the sink.
    checkpoint: Option<CheckpointConfig>,
}

impl Destination {
    fn kafka() -> Self {
        Destination {
            sink: crate::config::SinkConfig::Kafka,
            checkpoint: None,
        }
    }
}

/// The connector of a config map (`keys`; `outer_name`: the REST shape's `"name"`) whose
/// records go to `dest`.
fn from_keys(
    outer_name: Option<String>,
    mut keys: Keys,
    dest: Destination,
    ctx: &LoadCtx<'_>,
) -> Result<ConnectorConfig, ConfigError> {
    let name = connector::name(&mut keys, outer_name, ctx)?;
    let here = format!("connector `{name}`");
    // A key the file lacks (required, say) may be there misspelt.
    let present: Vec<String> = keys.map.keys().cloned().collect();
    let invalid = |(k, m): KeyError| {
        let typo = if present.contains(&k) {
            None
        } else {
            crate::config::hint::misspelt_as(&k, present.iter().map(String::as_str))
        };
        let m = match typo {
            Some(t) => format!("{m} (the file has `{t}`: a misspelling of it?)"),
            None => m,
        };
        ctx.invalid(format!("{here}: {k}"), m)
    };
    let metrics_server = connector::metrics_server(&mut keys).map_err(&invalid)?;
    let kind = connector::kind(&mut keys, &here, ctx)?;

    let tables = tables::outbox_tables(&mut keys, kind.is_pg()).map_err(invalid)?;
    let connection = connection::connection(&mut keys, kind.is_pg()).map_err(invalid)?;
    snapshot::check_snapshot(&mut keys, kind.is_pg()).map_err(invalid)?;
    let mut source = match kind {
        Kind::Mysql(flavor) => mysql::source(&mut keys, flavor, connection),
        Kind::Postgres => postgres::source(&mut keys, connection),
    }
    .map_err(invalid)?;

    let logical_name = metrics_server.as_deref().unwrap_or(&name);
    let router = transforms::router(&mut keys, logical_name, &source).map_err(invalid)?;
    let decode = router.format.decode_messages.is_some();
    postgres::message_prefixes(&mut keys, &mut source, decode).map_err(invalid)?;

    let client = security::producer_security(&mut keys).map_err(invalid)?;
    let bootstrap_servers = bootstrap::servers(&mut keys, ctx)
        // Nothing connects to Kafka when records go elsewhere.
        .or_else(|| (!dest.sink.is_kafka()).then(String::new))
        .ok_or_else(|| ConfigError::MissingBootstrap {
            path: ctx.path.to_path_buf(),
            connector: name.clone(),
        })?;
    let (producer, producer_secrets) = security::producer_overrides(&mut keys).map_err(invalid)?;
    let errors = errors::error_policy(&mut keys).map_err(invalid)?;
    let topic_creation = topic_creation(&mut keys).map_err(invalid)?;
    unused::refuse_non_booleans(&keys, kind.is_pg()).map_err(invalid)?;
    let ignored_keys = unused::report(keys);

    let checkpoint = match dest.checkpoint {
        Some(c) => c,
        None if dest.sink.is_kafka() => ctx.default_checkpoint(&name),
        None => CheckpointConfig::Sink {},
    };
    let checkpoint_topic = match &checkpoint {
        CheckpointConfig::Kafka { topic, .. } => Some(topic.as_str()),
        CheckpointConfig::File { .. } | CheckpointConfig::Sink {} => None,
    };
    errors
        .validate(checkpoint_topic)
        .map_err(|m| invalid(("errors.*".to_string(), m)))?;
    Ok(ConnectorConfig {
        name,
        source,
        router,
        errors,
        sink: dest.sink,
        kafka: KafkaConfig {
            bootstrap_servers,
            client,
            producer,
            producer_secrets,
            max_record_bytes: DEFAULT_MAX_RECORD_BYTES,
            topic_creation,
        },
        checkpoint,
        tables,
        ignored_keys,
        metrics_server,
    })
}
