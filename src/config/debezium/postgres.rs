//! The keys only Debezium's PostgreSQL connector has: `plugin.name`, `database.dbname`, the
//! replication slot (`slot.name`), the publication (`publication.name`,
//! `publication.autocreate.mode`), `status.update.interval.ms`, the logical decoding
//! messages (`message.prefix.*`), and the `database.ssl*` TLS keys (read in `security.rs`).

use std::time::Duration;

use super::connection::{milliseconds, Connection};
use super::security::pg_tls;
use super::Keys;
use crate::config::names::validate_slot_name;
use crate::config::{
    ConfigFormat, KeyError, PostgresSourceConfig, PublicationAutocreate, SourceConfig,
};

/// The PostgreSQL source reached through `connection`, on Debezium's defaults: `plugin.name`
/// must be `pgoutput` (the default), `database.dbname` is required, slot `debezium`,
/// publication `dbz_publication` created for all tables, status updates every 10 s.
/// `database.server.id` (a MySQL key) is reported as unused.
pub(super) fn source(keys: &mut Keys, connection: Connection) -> Result<SourceConfig, KeyError> {
    if let Some(p) = keys.take_nonempty("plugin.name") {
        if p != "pgoutput" {
            return Err((
                "plugin.name".into(),
                format!("{p:?} is not supported: outboxd decodes pgoutput only; set plugin.name=pgoutput (a slot made for another plugin must be recreated)"),
            ));
        }
    }
    let dbname = keys
        .take_nonempty("database.dbname")
        .ok_or_else(|| ("database.dbname".to_string(), "is required".to_string()))?;
    let slot_name = keys
        .take_nonempty("slot.name")
        .unwrap_or_else(|| "debezium".into());
    validate_slot_name(&slot_name).map_err(|m| ("slot.name".to_string(), m))?;
    let publication_name = keys
        .take_nonempty("publication.name")
        .unwrap_or_else(|| "dbz_publication".into());
    let publication_autocreate = publication_autocreate(keys)?;
    let status_interval = match keys.take_nonempty("status.update.interval.ms") {
        Some(v) => Duration::from_millis(milliseconds(&v, "status.update.interval.ms")?),
        None => Duration::from_secs(10),
    };
    if keys.take("database.server.id").is_some() {
        keys.ignore("database.server.id", "PostgreSQL has no replica server id");
    }
    let Connection {
        host,
        port,
        user,
        password,
        connect_timeout,
    } = connection;
    Ok(SourceConfig::Postgres(PostgresSourceConfig {
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
        tls: pg_tls(keys)?,
        format: ConfigFormat::DebeziumJson,
    }))
}

/// `publication.autocreate.mode`: `all_tables` (Debezium's default), `disabled` or
/// `filtered`, in any case.
fn publication_autocreate(keys: &mut Keys) -> Result<PublicationAutocreate, KeyError> {
    match keys
        .take_nonempty("publication.autocreate.mode")
        .map(|m| m.to_ascii_lowercase())
        .as_deref()
    {
        None | Some("all_tables") => Ok(PublicationAutocreate::AllTables),
        Some("disabled") => Ok(PublicationAutocreate::Disabled),
        Some("filtered") => Ok(PublicationAutocreate::Filtered),
        Some(other) => Err((
            "publication.autocreate.mode".into(),
            format!("{other:?} is not supported; use disabled, all_tables or filtered"),
        )),
    }
}

/// Logical decoding messages when Debezium's `DecodeLogicalDecodingMessageContent` precedes
/// the EventRouter (`decode`): the prefixes of `message.prefix.include.list` (literal names;
/// outboxd does not take Debezium's regular expressions there), or every prefix without it;
/// `message.prefix.exclude.list` is refused (outboxd lists what it takes). Without the
/// transform the keys are reported as unused; with it on a MySQL/MariaDB source, an error.
pub(super) fn message_prefixes(
    keys: &mut Keys,
    source: &mut SourceConfig,
    decode: bool,
) -> Result<(), KeyError> {
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
