//! Import of a Debezium connector JSON (MySQL, MariaDB, PostgreSQL connectors with the outbox
//! `EventRouter` transform), as Kafka Connect users keep them.
//!
//! Options the user did not set take Debezium's defaults. Every key is accounted for: used,
//! reported in [`ConnectorConfig::ignored_keys`] with the reason, or rejected with an error
//! that says what to change. See the module docs of [`crate::config`] for the rules.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

mod security;
mod transforms;

use super::names::{validate_connector_name, validate_slot_name};
use super::providers::substitute_providers;
use super::{
    ClientProperties, ConfigError, ConfigFormat, ConnectorConfig, ErrorPolicy, ErrorTolerance,
    KafkaConfig, LoadCtx, MysqlFlavor, MysqlSourceConfig, PositionMode, PostgresSourceConfig,
    PublicationAutocreate, Secret, SourceConfig, StartPosition, DEFAULT_MAX_RECORD_BYTES,
};
use crate::event::TableName;
use crate::router::parse_bool;
use security::{mysql_tls, pg_tls, producer_security};
use transforms::{column_options, record_format, router_from_transforms};

const MYSQL_CLASS: &str = "io.debezium.connector.mysql.MySqlConnector";
const MARIADB_CLASS: &str = "io.debezium.connector.mariadb.MariaDbConnector";
const POSTGRES_CLASS: &str = "io.debezium.connector.postgresql.PostgresConnector";

/// Keys known to Kafka Connect / Debezium that have no meaning for outboxd, with the reason.
/// A pattern ending in `*` matches by prefix.
const NO_MEANING: &[(&str, &str)] = &[
    ("tasks.max", "outboxd runs one reader per connector (Debezium connectors are single-task too)"),
    ("database.server.name", "names Debezium's change-event topics (outbox topics come from route.topic.*); with topic.prefix set, not the metrics label either"),
    ("topic.naming.strategy", "names Debezium's change-event topics; outbox topics come from route.topic.*"),
    ("topic.delimiter", "names Debezium's change-event topics; outbox topics come from route.topic.*"),
    ("topic.heartbeat.prefix", "Debezium heartbeat topic; outboxd advances its checkpoint while idle without heartbeat records"),
    ("topic.transaction", "Debezium transaction metadata topic is not produced"),
    ("topic.creation.*", "Kafka Connect topic creation; create the outbox topics beforehand or let the broker auto-create them"),
    ("database.history*", "outboxd keeps no schema history: column names come from binlog row metadata (or `columns`) and pgoutput relations"),
    ("schema.history.internal*", "outboxd keeps no schema history: column names come from binlog row metadata (or `columns`) and pgoutput relations"),
    ("include.schema.changes", "no schema change topic is produced"),
    ("include.query", "only affects Debezium change events, which the outbox router replaces"),
    ("provide.transaction.metadata", "Debezium transaction metadata topic is not produced"),
    ("tombstones.on.delete", "the outbox router drops deletes and their tombstones anyway"),
    ("skipped.operations", "the outbox router only routes inserts anyway"),
    ("schema.name.adjustment.mode", "Connect schema names are not part of the record bytes"),
    ("field.name.adjustment.mode", "Connect field names of change events are not part of the outbox records"),
    ("sanitize.field.names", "Connect field names of change events are not part of the outbox records"),
    ("heartbeat.*", "Debezium heartbeat records; outboxd advances its checkpoint while idle without them"),
    ("max.batch.size", "Debezium queue tuning; outboxd has its own bounded pipeline"),
    ("max.queue.size", "Debezium queue tuning; outboxd has its own bounded pipeline"),
    ("max.queue.size.in.bytes", "Debezium queue tuning; outboxd has its own bounded pipeline"),
    ("poll.interval.ms", "Debezium queue tuning; outboxd has its own bounded pipeline"),
    ("query.fetch.size", "Debezium snapshot tuning; outboxd takes no snapshot"),
    ("binlog.buffer.size", "Debezium reader tuning"),
    ("streaming.delay.ms", "Debezium reader tuning"),
    ("retriable.restart.connector.wait.ms", "outboxd reconnects with its own backoff"),
    ("connect.keep.alive", "outboxd keeps the binlog connection alive with replication heartbeats"),
    ("connect.keep.alive.interval.ms", "outboxd keeps the binlog connection alive with replication heartbeats"),
    ("connect.max.attempts", "outboxd reconnects with its own backoff"),
    ("errors.log.*", "outboxd always logs an event it cannot deliver (id, table, positions; never the payload)"),
    ("errors.retry.*", "outboxd retries transient failures with its own backoff; an event that cannot be routed or is refused for good is not retried"),
    ("errors.deadletterqueue.topic.replication.factor", "outboxd creates a missing dead-letter topic with the broker's default replication factor"),
    ("errors.*", "Kafka Connect error handling setting outboxd does not use"),
    ("hstore.handling.mode", "representation of values in change events"),
    ("include.unknown.datatypes", "representation of values in change events"),
    ("column.propagate.source.type", "NOT APPLIED: outboxd does not add the __debezium.source.column.* schema parameters, which Debezium writes into every key and envelope schema under JsonConverter with schemas (records of other converters are unaffected)"),
    ("datatype.propagate.source.type", "NOT APPLIED: outboxd does not add the __debezium.source.column.* schema parameters, which Debezium writes into every key and envelope schema under JsonConverter with schemas (records of other converters are unaffected)"),
    ("converters", "Debezium custom value converters are not supported; values are read as their database text/bytes"),
    ("converters.*", "Debezium custom value converters are not supported; values are read as their database text/bytes"),
    ("enable.time.adjuster", "representation of values in change events"),
    ("unavailable.value.placeholder", "representation of values in change events"),
    ("money.fraction.digits", "representation of values in change events"),
    ("snapshot.*", "outboxd takes no snapshot"),
    ("incremental.snapshot.*", "incremental snapshots are not supported"),
    ("signal.*", "Debezium signals are not supported"),
    ("notification.*", "Debezium notifications are not supported"),
    ("read.only", "incremental snapshots are not supported"),
    ("offset.*", "outboxd keeps its own checkpoint"),
    ("event.processing.failure.handling.mode", "outboxd halts on an event it cannot decode"),
    ("event.deserialization.failure.handling.mode", "outboxd halts on an event it cannot decode"),
    ("inconsistent.schema.handling.mode", "outboxd halts on an event it cannot decode"),
    ("database.jdbc.driver", "JDBC setting"),
    ("database.protocol", "JDBC setting"),
    ("database.connectionTimeZone", "outboxd reads temporal values as UTC"),
    ("database.serverTimezone", "outboxd reads temporal values as UTC"),
    ("database.allowPublicKeyRetrieval", "the MySQL client negotiates authentication itself"),
    ("database.tcpKeepAlive", "connection tuning is not configurable"),
    ("database.initial.statements", "not supported: outboxd runs no extra session statements"),
    ("database.exclude.list", "outboxd reads only the tables of table.include.list"),
    ("table.exclude.list", "outboxd reads only the tables of table.include.list"),
    ("schema.exclude.list", "outboxd reads only the tables of table.include.list"),
    ("message.key.columns", "the outbox router sets the key from table.field.event.key"),
    ("gtid.source.*", "not supported: outboxd reads transactions of every GTID source"),
    ("slot.drop.on.stop", "not supported: outboxd never drops its slot"),
    ("slot.stream.params", "outboxd sets the pgoutput parameters itself"),
    ("slot.max.retries", "outboxd retries with its own backoff"),
    ("slot.retry.delay.ms", "outboxd retries with its own backoff"),
    ("xmin.fetch.interval.ms", "not used"),
    ("lsn.flush.timeout.ms", "not used"),
    ("flush.lsn.source", "not supported: outboxd always confirms delivered LSNs to the slot"),
    ("publish.via.partition.root", "outboxd publishes only the outbox tables"),
    ("schema.refresh.mode", "pgoutput relation messages give the columns"),
    ("replica.identity.autoset.values", "the outbox router only routes inserts"),
    ("message.prefix.*", "without io.debezium.connector.postgresql.transforms.DecodeLogicalDecodingMessageContent before the EventRouter, Debezium's message events do not reach it"),
    ("predicates", "outboxd applies the outbox router to every change of table.include.list"),
    ("predicates.*", "outboxd applies the outbox router to every change of table.include.list"),
    ("producer.override.*", "Java producer setting; put the librdkafka equivalent under [connectors.kafka.producer] in an outboxd TOML"),
    ("consumer.override.*", "outboxd runs no Kafka consumer for this connector"),
    ("admin.override.*", "outboxd runs no Kafka admin client for this connector"),
    ("database.ssl.*", "a MySQL/MariaDB connector's TLS setting; not used by a PostgreSQL connector (it reads database.sslmode, sslrootcert, sslcert, sslkey)"),
    ("database.sslmode", "a PostgreSQL connector's TLS setting; not used by a MySQL/MariaDB connector (it reads database.ssl.*)"),
    ("database.sslcert", "a PostgreSQL connector's TLS setting; not used by a MySQL/MariaDB connector (it reads database.ssl.*)"),
    ("database.sslkey", "a PostgreSQL connector's TLS setting; not used by a MySQL/MariaDB connector (it reads database.ssl.*)"),
    ("database.sslpassword", "a PostgreSQL connector's TLS setting; not used by a MySQL/MariaDB connector (it reads database.ssl.*)"),
    ("database.sslrootcert", "a PostgreSQL connector's TLS setting; not used by a MySQL/MariaDB connector (it reads database.ssl.*)"),
    ("database.sslfactory", "pgjdbc's socket factory; outboxd verifies the server as database.sslmode says"),
];

/// Logical decoding messages when Debezium's `DecodeLogicalDecodingMessageContent` precedes
/// the EventRouter (`decode`): the prefixes of `message.prefix.include.list` (literal names;
/// outboxd does not take Debezium's regular expressions there), or every prefix without it;
/// `message.prefix.exclude.list` is refused (outboxd lists what it takes). Without the
/// transform the keys are reported as unused.
fn message_prefixes(
    keys: &mut Keys,
    source: &mut SourceConfig,
    decode: bool,
) -> Result<(), (String, String)> {
    let include = keys.take_nonempty("message.prefix.include.list");
    let exclude = keys.take_nonempty("message.prefix.exclude.list");
    if !decode {
        for (k, v) in [
            ("message.prefix.include.list", &include),
            ("message.prefix.exclude.list", &exclude),
        ] {
            if v.is_some() {
                keys.ignore(k, "without io.debezium.connector.postgresql.transforms.DecodeLogicalDecodingMessageContent before the EventRouter, Debezium's message events do not reach it");
            }
        }
        return Ok(());
    }
    let SourceConfig::Postgres(pg) = source else {
        return Err((
            "transforms".into(),
            "DecodeLogicalDecodingMessageContent decodes PostgreSQL logical decoding messages; this is not a PostgreSQL connector".into(),
        ));
    };
    if exclude.is_some() {
        return Err((
            "message.prefix.exclude.list".into(),
            "is not supported: list the prefixes to take in message.prefix.include.list".into(),
        ));
    }
    match include {
        None => pg.all_message_prefixes = true,
        Some(list) => {
            for p in list.split(',').map(str::trim).filter(|p| !p.is_empty()) {
                if p.chars().any(|c| "\\^$.|?*+()[]{}".contains(c)) {
                    return Err((
                        "message.prefix.include.list".into(),
                        format!("{p:?} is a regular expression; outboxd matches message prefixes literally: list the prefixes themselves"),
                    ));
                }
                pg.message_prefixes.push(p.to_string());
            }
        }
    }
    Ok(())
}

/// The string-valued config map, consumed key by key.
struct Keys {
    map: BTreeMap<String, String>,
    ignored: Vec<(String, String)>,
}

impl Keys {
    fn take(&mut self, k: &str) -> Option<String> {
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

pub(super) fn parse(text: &str, ctx: &LoadCtx<'_>) -> Result<ConnectorConfig, ConfigError> {
    let root: serde_json::Value =
        serde_json::from_str(text).map_err(|source| ConfigError::Json {
            path: ctx.path.to_path_buf(),
            source,
        })?;
    let serde_json::Value::Object(root) = root else {
        return Err(ctx.invalid("file", "a Debezium connector JSON must be an object"));
    };
    let mut wrapper_ignored = Vec::new();
    let (outer_name, config) = match root.get("config") {
        Some(serde_json::Value::Object(cfg)) => {
            let name = match root.get("name") {
                Some(serde_json::Value::String(n)) => Some(n.clone()),
                None => None,
                Some(_) => return Err(ctx.invalid("name", "must be a string")),
            };
            for k in root.keys() {
                match k.as_str() {
                    "name" | "config" => {}
                    "tasks" | "type" => wrapper_ignored.push((
                        k.clone(),
                        "Kafka Connect REST metadata, not configuration".to_string(),
                    )),
                    _ => wrapper_ignored.push((
                        k.clone(),
                        "unknown key next to \"config\"; only \"name\" and \"config\" are read"
                            .to_string(),
                    )),
                }
            }
            (name, cfg.clone())
        }
        Some(_) => return Err(ctx.invalid("config", "must be an object of string values")),
        None => (None, root),
    };

    let mut map = BTreeMap::new();
    for (k, v) in config {
        let s = match v {
            serde_json::Value::String(s) => s,
            serde_json::Value::Number(n) => n.to_string(),
            serde_json::Value::Bool(b) => b.to_string(),
            _ => return Err(ctx.invalid(
                format!("config key {k:?}"),
                "Kafka Connect config values are strings (numbers and booleans are accepted too)",
            )),
        };
        // Offline nothing connects: a password's provider (an unset variable, a file only the
        // relay's host has) is not resolved.
        let s = if ctx.offline && k == "database.password" {
            String::new()
        } else {
            substitute_providers(&s, ctx.env)
                .map_err(|m| ctx.invalid(format!("config key {k:?}"), m))?
        };
        map.insert(k, s);
    }
    let mut keys = Keys {
        map,
        ignored: wrapper_ignored,
    };

    // Name.
    let inner_name = keys.take_nonempty("name");
    let name = match (outer_name, inner_name) {
        (Some(a), Some(b)) if a != b => {
            return Err(ctx.invalid(
                "name",
                format!("\"name\" is {a:?} but config \"name\" is {b:?}; make them equal"),
            ))
        }
        (Some(a), _) => a,
        (None, Some(b)) => b,
        (None, None) => file_stem(ctx.path)
            .ok_or_else(|| ctx.invalid("name", "no connector name: add \"name\" to the JSON"))?,
    };
    validate_connector_name(&name).map_err(|m| ctx.invalid("name", m))?;
    let here = format!("connector `{name}`");
    // The `server` of Debezium's MBeans: the `name` label of the Debezium series, so that
    // alerts and dashboards written for the connector keep matching.
    let metrics_server = keys
        .take_nonempty("topic.prefix")
        .or_else(|| keys.take_nonempty("database.server.name"));

    // Connector class.
    let class = keys.take_nonempty("connector.class").ok_or_else(|| {
        ctx.invalid(
            &here,
            format!("connector.class is missing; outboxd imports {MYSQL_CLASS}, {MARIADB_CLASS} and {POSTGRES_CLASS}"),
        )
    })?;
    enum Kind {
        Mysql(MysqlFlavor),
        Postgres,
    }
    let kind = match class.as_str() {
        MYSQL_CLASS => {
            let adapter = keys.take_nonempty("connector.adapter");
            match adapter.as_deref().map(str::to_ascii_lowercase).as_deref() {
                None => Kind::Mysql(MysqlFlavor::Auto),
                Some("mysql") => Kind::Mysql(MysqlFlavor::Mysql),
                Some("mariadb") => Kind::Mysql(MysqlFlavor::Mariadb),
                Some(other) => {
                    return Err(ctx.invalid(
                        format!("{here}: connector.adapter"),
                        format!("{other:?} is not mysql or mariadb"),
                    ))
                }
            }
        }
        MARIADB_CLASS => Kind::Mysql(MysqlFlavor::Mariadb),
        POSTGRES_CLASS => Kind::Postgres,
        other => {
            return Err(ctx.invalid(
                format!("{here}: connector.class"),
                format!("{other:?} is not supported; outboxd imports {MYSQL_CLASS}, {MARIADB_CLASS} and {POSTGRES_CLASS}"),
            ))
        }
    };
    let is_pg = matches!(kind, Kind::Postgres);

    // Tables.
    let include = keys.take_nonempty("table.include.list").ok_or_else(|| {
        ctx.invalid(
            format!("{here}: table.include.list"),
            "is required: list the outbox table(s), e.g. \"shop.outbox_events\"",
        )
    })?;
    let mut tables = Vec::new();
    for entry in include.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let t = literal_table(entry)
            .map_err(|m| ctx.invalid(format!("{here}: table.include.list"), m))?;
        if !tables.contains(&t) {
            tables.push(t);
        }
    }
    if tables.is_empty() {
        return Err(ctx.invalid(format!("{here}: table.include.list"), "lists no table"));
    }
    let schema_list_key = if is_pg {
        "schema.include.list"
    } else {
        "database.include.list"
    };
    if let Some(list) = keys.take_nonempty(schema_list_key) {
        check_schema_list(&list, &tables)
            .map_err(|m| ctx.invalid(format!("{here}: {schema_list_key}"), m))?;
    }

    // Connection.
    let host = keys
        .take_nonempty("database.hostname")
        .ok_or_else(|| ctx.invalid(format!("{here}: database.hostname"), "is required"))?;
    let port = match keys.take_nonempty("database.port") {
        Some(p) => p.parse::<u16>().map_err(|_| {
            ctx.invalid(
                format!("{here}: database.port"),
                format!("{p:?} is not a TCP port"),
            )
        })?,
        None if is_pg => 5432,
        None => 3306,
    };
    let user = keys
        .take_nonempty("database.user")
        .ok_or_else(|| ctx.invalid(format!("{here}: database.user"), "is required"))?;
    let password = Secret::new(keys.take("database.password").unwrap_or_default());
    let connect_timeout = match keys.take_nonempty("connect.timeout.ms") {
        Some(v) => Duration::from_millis(v.parse::<u64>().map_err(|_| {
            ctx.invalid(
                format!("{here}: connect.timeout.ms"),
                format!("{v:?} is not a number of milliseconds"),
            )
        })?),
        None => Duration::from_secs(if is_pg { 10 } else { 30 }),
    };
    check_snapshot(&mut keys, is_pg)
        .map_err(|m| ctx.invalid(format!("{here}: snapshot.mode"), m))?;

    let source = match kind {
        Kind::Mysql(flavor) => {
            let server_id = keys.take_nonempty("database.server.id").ok_or_else(|| {
                ctx.invalid(
                    format!("{here}: database.server.id"),
                    "is required: a replica server id unique among the server's replicas",
                )
            })?;
            let server_id = server_id
                .parse::<u32>()
                .ok()
                .filter(|id| *id != 0)
                .ok_or_else(|| {
                    ctx.invalid(
                        format!("{here}: database.server.id"),
                        format!("{server_id:?} is not a server id (1 to 4294967295)"),
                    )
                })?;
            SourceConfig::Mysql(MysqlSourceConfig {
                flavor,
                host,
                port,
                user,
                password,
                server_id,
                start: StartPosition::Current,
                position_mode: PositionMode::Auto,
                heartbeat_interval: Duration::from_secs(10),
                connect_timeout,
                reconnect_backoff_max: Duration::from_secs(30),
                columns: BTreeMap::new(),
                xa_max_held_bytes: crate::config::DEFAULT_XA_MAX_HELD_BYTES,
                tls: mysql_tls(&mut keys)
                    .map_err(|(k, m)| ctx.invalid(format!("{here}: {k}"), m))?,
                format: ConfigFormat::DebeziumJson,
            })
        }
        Kind::Postgres => {
            if let Some(p) = keys.take_nonempty("plugin.name") {
                if p != "pgoutput" {
                    return Err(ctx.invalid(
                        format!("{here}: plugin.name"),
                        format!("{p:?} is not supported: outboxd decodes pgoutput only; set plugin.name=pgoutput (a slot made for another plugin must be recreated)"),
                    ));
                }
            }
            let dbname = keys
                .take_nonempty("database.dbname")
                .ok_or_else(|| ctx.invalid(format!("{here}: database.dbname"), "is required"))?;
            let slot_name = keys
                .take_nonempty("slot.name")
                .unwrap_or_else(|| "debezium".into());
            validate_slot_name(&slot_name)
                .map_err(|m| ctx.invalid(format!("{here}: slot.name"), m))?;
            let publication_name = keys
                .take_nonempty("publication.name")
                .unwrap_or_else(|| "dbz_publication".into());
            let publication_autocreate = match keys
                .take_nonempty("publication.autocreate.mode")
                .map(|m| m.to_ascii_lowercase())
                .as_deref()
            {
                None | Some("all_tables") => PublicationAutocreate::AllTables,
                Some("disabled") => PublicationAutocreate::Disabled,
                Some("filtered") => PublicationAutocreate::Filtered,
                Some(other) => {
                    return Err(ctx.invalid(
                        format!("{here}: publication.autocreate.mode"),
                        format!("{other:?} is not supported; use disabled, all_tables or filtered"),
                    ))
                }
            };
            let status_interval = match keys.take_nonempty("status.update.interval.ms") {
                Some(v) => Duration::from_millis(v.parse::<u64>().map_err(|_| {
                    ctx.invalid(
                        format!("{here}: status.update.interval.ms"),
                        format!("{v:?} is not a number of milliseconds"),
                    )
                })?),
                None => Duration::from_secs(10),
            };
            if keys.take("database.server.id").is_some() {
                keys.ignore("database.server.id", "PostgreSQL has no replica server id");
            }
            SourceConfig::Postgres(PostgresSourceConfig {
                host,
                port,
                user,
                password,
                dbname,
                slot_name,
                publication_name,
                publication_autocreate,
                slot_autocreate: true,
                message_prefixes: Vec::new(),
                all_message_prefixes: false,
                status_interval,
                connect_timeout,
                tls: pg_tls(&mut keys).map_err(|(k, m)| ctx.invalid(format!("{here}: {k}"), m))?,
                format: ConfigFormat::DebeziumJson,
            })
        }
    };

    // Transforms.
    let (mut router, decode_messages) = router_from_transforms(&mut keys)
        .map_err(|(k, m)| ctx.invalid(format!("{here}: {k}"), m))?;
    router.format = record_format(
        &mut keys,
        metrics_server.as_deref().unwrap_or(&name),
        match &source {
            SourceConfig::Postgres(_) => "postgresql",
            SourceConfig::Mysql(m) if m.flavor == MysqlFlavor::Mariadb => "mariadb",
            SourceConfig::Mysql(_) => "mysql",
        },
        is_pg,
    )
    .map_err(|(k, m)| ctx.invalid(format!("{here}: {k}"), m))?;
    router.format.decode_messages = decode_messages;
    router.format.columns =
        column_options(&mut keys).map_err(|(k, m)| ctx.invalid(format!("{here}: {k}"), m))?;
    let mut source = source;
    message_prefixes(&mut keys, &mut source, decode_messages.is_some())
        .map_err(|(k, m)| ctx.invalid(format!("{here}: {k}"), m))?;

    // Kafka.
    let client =
        producer_security(&mut keys).map_err(|(k, m)| ctx.invalid(format!("{here}: {k}"), m))?;
    let producer_bootstrap = keys.take_nonempty("producer.override.bootstrap.servers");
    let history_keys = [
        "schema.history.internal.kafka.bootstrap.servers",
        "database.history.kafka.bootstrap.servers",
    ];
    let mut history_bootstrap = None;
    for k in history_keys {
        if let Some(v) = keys.take_nonempty(k) {
            if history_bootstrap.is_none() {
                history_bootstrap = Some((k, v));
            } else {
                keys.ignore(k, "schema history is not kept");
            }
        }
    }
    let bootstrap = if let Some(b) = ctx.bootstrap_override {
        if let Some((k, _)) = &history_bootstrap {
            keys.ignore(k, "schema history is not kept (the Kafka bootstrap servers come from --kafka-bootstrap / OUTBOXD_KAFKA_BOOTSTRAP)");
        }
        if producer_bootstrap.is_some() {
            keys.ignore(
                "producer.override.bootstrap.servers",
                "overridden by --kafka-bootstrap / OUTBOXD_KAFKA_BOOTSTRAP",
            );
        }
        b.to_string()
    } else if let Some(b) = producer_bootstrap {
        if let Some((k, _)) = &history_bootstrap {
            keys.ignore(k, "schema history is not kept");
        }
        b
    } else if let Some(b) = ctx.process_bootstrap {
        if let Some((k, _)) = &history_bootstrap {
            keys.ignore(k, "schema history is not kept (the Kafka bootstrap servers come from --kafka-config / [kafka])");
        }
        b.to_string()
    } else if let Some((k, b)) = history_bootstrap {
        keys.ignore(
            k,
            "USED as the Kafka bootstrap servers (last resort: no --kafka-bootstrap, OUTBOXD_KAFKA_BOOTSTRAP or producer.override.bootstrap.servers); the schema history itself is not kept",
        );
        b
    } else {
        return Err(ConfigError::MissingBootstrap {
            path: ctx.path.to_path_buf(),
            connector: name,
        });
    };

    // Error policy (Kafka Connect errors.tolerance and the dead-letter queue).
    let errors_policy =
        error_policy(&mut keys).map_err(|(k, m)| ctx.invalid(format!("{here}: {k}"), m))?;

    // Everything else: report.
    let rest = std::mem::take(&mut keys.map);
    for (k, _) in rest {
        let why = NO_MEANING
            .iter()
            .find(|(pat, _)| match pat.strip_suffix('*') {
                Some(prefix) => k.starts_with(prefix),
                None => k == *pat,
            })
            .map(|(_, why)| (*why).to_string())
            .or_else(|| {
                k.starts_with("transforms.").then(|| {
                    "belongs to a transform not listed in `transforms` (Kafka Connect ignores it too)".to_string()
                })
            })
            .unwrap_or_else(|| {
                "unknown key: not an option of the Debezium connector or the outbox router that outboxd knows; check the spelling".to_string()
            });
        keys.ignore(&k, why);
    }
    let mut ignored_keys = keys.ignored;
    ignored_keys.sort();

    let checkpoint = ctx.default_checkpoint(&name);
    let errors = errors_policy;
    let checkpoint_topic = match &checkpoint {
        super::CheckpointConfig::Kafka { topic, .. } => Some(topic.as_str()),
        super::CheckpointConfig::File { .. } => None,
    };
    errors
        .validate(checkpoint_topic)
        .map_err(|m| ctx.invalid(format!("{here}: errors.*"), m))?;
    Ok(ConnectorConfig {
        name,
        source,
        router,
        errors,
        kafka: KafkaConfig {
            bootstrap_servers: bootstrap,
            client,
            producer: BTreeMap::new(),
            producer_secrets: ClientProperties::default(),
            max_record_bytes: DEFAULT_MAX_RECORD_BYTES,
        },
        checkpoint,
        tables,
        ignored_keys,
        metrics_server,
    })
}

/// Kafka Connect's error policy keys: `errors.tolerance` (`none`, the default, or `all`),
/// `errors.deadletterqueue.topic.name`, `errors.deadletterqueue.context.headers.enable`
/// (default false, as in Connect). A dead-letter topic without `errors.tolerance=all` is
/// reported as unused (Connect does not write to it then either).
fn error_policy(keys: &mut Keys) -> Result<ErrorPolicy, (String, String)> {
    let tolerance = match keys
        .take_nonempty("errors.tolerance")
        .map(|v| v.to_ascii_lowercase())
        .as_deref()
    {
        None | Some("none") => ErrorTolerance::None,
        Some("all") => ErrorTolerance::All,
        Some(other) => {
            return Err((
                "errors.tolerance".into(),
                format!("{other:?} is not none or all"),
            ))
        }
    };
    let topic_key = "errors.deadletterqueue.topic.name";
    let headers_key = "errors.deadletterqueue.context.headers.enable";
    let mut dead_letter_topic = keys.take_nonempty(topic_key);
    let context_headers = match keys.take_nonempty(headers_key) {
        Some(v) => parse_bool(&v).map_err(|m| (headers_key.to_string(), m))?,
        None => false,
    };
    if tolerance == ErrorTolerance::None && dead_letter_topic.take().is_some() {
        keys.ignore(
            topic_key,
            "used only with errors.tolerance=all (the default, none, stops the connector instead)",
        );
    }
    Ok(ErrorPolicy {
        tolerance,
        dead_letter_topic,
        context_headers,
    })
}

fn file_stem(path: &Path) -> Option<String> {
    let stem = path.file_name()?.to_str()?;
    let stem = stem.strip_suffix(".json").unwrap_or(stem);
    let stem = stem.strip_suffix(".debezium").unwrap_or(stem);
    (!stem.is_empty()).then(|| stem.to_string())
}

/// A `table.include.list` entry as a literal table: `schema.table` or `schema\.table`.
fn literal_table(entry: &str) -> Result<TableName, String> {
    let unescaped = entry.replacen("\\.", ".", 1);
    let literal = unescaped
        .chars()
        .all(|c| c.is_alphanumeric() || c == '_' || c == '$' || c == '.')
        && unescaped.matches('.').count() == 1;
    if !literal {
        return Err(format!(
            "entry {entry:?} is not a literal schema.table name; outboxd needs the outbox tables \
             spelled out (regular expressions are not supported here)"
        ));
    }
    TableName::parse(&unescaped)
}

/// `database.include.list` / `schema.include.list` (regexes, full match, case-insensitive as in
/// Debezium) must admit every outbox table's schema.
fn check_schema_list(list: &str, tables: &[TableName]) -> Result<(), String> {
    let mut patterns = Vec::new();
    for p in list.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let re = regex::RegexBuilder::new(&format!(r"\A(?:{p})\z"))
            .case_insensitive(true)
            .build()
            .map_err(|e| {
                format!("entry {p:?} is not a regular expression outboxd can compile: {e}")
            })?;
        patterns.push(re);
    }
    for t in tables {
        if !patterns.iter().any(|re| re.is_match(&t.schema)) {
            return Err(format!(
                "does not include {:?}, the schema of outbox table {t} from table.include.list; \
                 add it or remove the list",
                t.schema
            ));
        }
    }
    Ok(())
}

fn check_snapshot(keys: &mut Keys, is_pg: bool) -> Result<(), String> {
    let first_position = if is_pg {
        "the slot's position"
    } else {
        "the current binlog position"
    };
    match keys
        .take_nonempty("snapshot.mode")
        .map(|m| m.to_ascii_lowercase())
    {
        None => {
            keys.ignore(
                "snapshot.mode",
                format!("(not set) Debezium's default `initial` would first emit every row already in the outbox table; outboxd takes no snapshot and starts at {first_position}"),
            );
            Ok(())
        }
        Some(m) => match m.as_str() {
            "never" | "no_data" | "schema_only" | "schema_only_recovery" | "recovery" => Ok(()),
            "initial" | "when_needed" => {
                keys.ignore(
                    "snapshot.mode",
                    format!("`{m}`: rows already in the outbox table are not emitted; outboxd takes no snapshot and starts at {first_position}"),
                );
                Ok(())
            }
            _ => Err(format!(
                "{m:?} needs a data snapshot, which outboxd does not take; use no_data (or never) \
                 and drain rows already in the outbox table another way"
            )),
        },
    }
}

#[cfg(test)]
mod unit {
    use super::*;

    #[test]
    fn literal_tables() {
        assert_eq!(
            literal_table("shop.outbox").unwrap(),
            TableName::new("shop", "outbox")
        );
        assert_eq!(
            literal_table(r"shop\.outbox").unwrap(),
            TableName::new("shop", "outbox")
        );
        assert!(literal_table("shop.outbox.*").is_err());
        assert!(literal_table("shop.(a|b)").is_err());
        assert!(literal_table("outbox").is_err());
    }

    #[test]
    fn schema_lists() {
        let t = [TableName::new("order_db", "outbox_events")];
        assert!(check_schema_list("order_db", &t).is_ok());
        assert!(check_schema_list("ORDER_DB", &t).is_ok());
        assert!(check_schema_list("other,order_.*", &t).is_ok());
        let e = check_schema_list("other", &t).unwrap_err();
        assert!(e.contains("order_db"), "{e}");
    }
}
