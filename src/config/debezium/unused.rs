//! The keys left after every section took its own: Kafka Connect / Debezium options with no
//! meaning for outboxd (heartbeats, queue tuning, schema history, snapshots, signals, value
//! representation, the other source's TLS keys, ...) with the reason, keys of transforms not
//! in `transforms`, and unknown keys. Each is reported in
//! [`ConnectorConfig::ignored_keys`](crate::config::ConnectorConfig::ignored_keys), never an
//! error.

use super::{KeyError, Keys};

/// Keys known to Kafka Connect / Debezium that have no meaning for outboxd, with the reason.
/// A pattern ending in `*` matches by prefix.
const NO_MEANING: &[(&str, &str)] = &[
    ("tasks.max", "outboxd runs one reader per connector (Debezium connectors are single-task too)"),
    ("database.server.name", "names Debezium's change-event topics (outbox topics come from route.topic.*); with topic.prefix set, not the metrics label either"),
    ("topic.naming.strategy", "names Debezium's change-event topics; outbox topics come from route.topic.*"),
    ("topic.delimiter", "names Debezium's change-event topics; outbox topics come from route.topic.*"),
    ("topic.heartbeat.prefix", "Debezium heartbeat topic; outboxd advances its checkpoint while idle without heartbeat records"),
    ("topic.transaction", "Debezium transaction metadata topic is not produced"),
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

/// Ignored keys whose non-boolean value makes Kafka Connect refuse the connector (ConfigDef
/// `BOOLEAN`, `true` / `false` in any case, trimmed), by connector: observed with Debezium
/// 3.5.0's MariaDB and 3.6.1's PostgreSQL connector (each accepts any value for the others).
const BOOLEANS_MYSQL: &[&str] = &[
    "tombstones.on.delete",
    "provide.transaction.metadata",
    "enable.time.adjuster",
    "include.query",
    "include.schema.changes",
];
const BOOLEANS_POSTGRES: &[&str] = &[
    "tombstones.on.delete",
    "provide.transaction.metadata",
    "include.unknown.datatypes",
    "slot.drop.on.stop",
];

/// Errors for the first key of the connector's booleans (`pg`: the PostgreSQL connector's,
/// else MySQL/MariaDB's) in `keys` whose value is not a boolean, as Kafka Connect's
/// validation of the connector refuses it.
pub(super) fn refuse_non_booleans(keys: &Keys, pg: bool) -> Result<(), KeyError> {
    let booleans = if pg {
        BOOLEANS_POSTGRES
    } else {
        BOOLEANS_MYSQL
    };
    for key in booleans {
        if let Some(v) = keys.map.get(*key) {
            let t = v.trim();
            if !t.eq_ignore_ascii_case("true") && !t.eq_ignore_ascii_case("false") {
                return Err((
                    key.to_string(),
                    format!(
                        "`{v}` is not true or false; Kafka Connect refuses the connector with it"
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// Reports every key still in `keys` (with the first matching [`NO_MEANING`] reason, the
/// unlisted-transform reason, or as unknown) and returns all the reported keys, sorted.
pub(super) fn report(mut keys: Keys) -> Vec<(String, String)> {
    let rest = std::mem::take(&mut keys.map);
    let asked = std::mem::take(&mut keys.asked);
    let known: Vec<&str> = asked
        .iter()
        .map(String::as_str)
        .chain(
            NO_MEANING
                .iter()
                .map(|(k, _)| *k)
                .filter(|k| !k.ends_with('*')),
        )
        .collect();
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
                let hint = crate::config::hint::closest_key(&k, known.iter().copied())
                    .map_or_else(String::new, |c| format!(" (did you mean `{c}`?)"));
                format!("unknown key: not an option of the Debezium connector or the outbox router that outboxd knows; check the spelling{hint}")
            });
        keys.ignore(&k, why);
    }
    let mut ignored_keys = keys.ignored;
    ignored_keys.sort();
    ignored_keys
}
