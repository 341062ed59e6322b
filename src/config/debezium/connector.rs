//! Debezium's connector identity: the connector `name`, `topic.prefix` (the logical name),
//! `connector.class` (with the MySQL connector's `connector.adapter`).

use std::path::Path;

use super::Keys;
use crate::config::names::validate_connector_name;
use crate::config::{ConfigError, KeyError, LoadCtx, MysqlFlavor};

const MYSQL_CLASS: &str = "io.debezium.connector.mysql.MySqlConnector";
const MARIADB_CLASS: &str = "io.debezium.connector.mariadb.MariaDbConnector";
const POSTGRES_CLASS: &str = "io.debezium.connector.postgresql.PostgresConnector";

/// The connector class `name` stands for, as Kafka Connect resolves a plugin's name: the
/// fully qualified class, its simple name (`MariaDbConnector`) or that without its
/// `Connector` suffix (`MariaDb`), Connect's aliases; `None` for another class.
pub fn connector_class(name: &str) -> Option<&'static str> {
    [MYSQL_CLASS, MARIADB_CLASS, POSTGRES_CLASS]
        .into_iter()
        .find(|class| {
            let simple = class.rsplit('.').next().unwrap_or(class);
            name == *class || name == simple || Some(name) == simple.strip_suffix("Connector")
        })
}

/// The source a `connector.class` stands for.
#[derive(Clone, Copy)]
pub(super) enum Kind {
    /// Debezium's MySQL connector (flavor from `connector.adapter`) or MariaDB connector.
    Mysql(MysqlFlavor),
    /// Debezium's PostgreSQL connector.
    Postgres,
}

impl Kind {
    pub(super) fn is_pg(self) -> bool {
        matches!(self, Kind::Postgres)
    }
}

/// The connector name: the REST shape's outer `"name"` (`outer`), the config's `name`, both
/// (then equal), or else the file's stem (`orders.debezium.json` → `orders`); checked by
/// [`validate_connector_name`]. Errors name the key `name`.
pub(super) fn name(
    keys: &mut Keys,
    outer: Option<String>,
    ctx: &LoadCtx<'_>,
) -> Result<String, ConfigError> {
    let inner = keys.take_nonempty("name");
    let name = match (outer, inner) {
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
    Ok(name)
}

fn file_stem(path: &Path) -> Option<String> {
    let stem = path.file_name()?.to_str()?;
    let stem = stem.strip_suffix(".json").unwrap_or(stem);
    let stem = stem.strip_suffix(".debezium").unwrap_or(stem);
    (!stem.is_empty()).then(|| stem.to_string())
}

/// The `server` of Debezium's MBeans: `topic.prefix`, else Debezium 1.x's
/// `database.server.name` (left to be reported when `topic.prefix` is set). It labels the
/// Debezium series (so that alerts and dashboards written for the connector keep matching)
/// and is the logical name in the record format.
///
/// Errors: a `topic.prefix` with characters Debezium refuses (it names Kafka topics: only
/// letters, digits, `.`, `_` and `-`).
pub(super) fn metrics_server(keys: &mut Keys) -> Result<Option<String>, KeyError> {
    if let Some(prefix) = keys.take_nonempty("topic.prefix") {
        if let Some(bad) = prefix
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
        {
            return Err((
                "topic.prefix".into(),
                format!(
                    "`{prefix}` has the character {bad:?}, which Debezium refuses (the prefix \
                     names Kafka topics: only letters, digits, '.', '_' and '-')"
                ),
            ));
        }
        return Ok(Some(prefix));
    }
    Ok(keys.take_nonempty("database.server.name"))
}

/// `connector.class`: Debezium's MySQL, MariaDB or PostgreSQL connector; the MySQL
/// connector's `connector.adapter` (`mysql` or `mariadb`, default: detect) picks the flavor.
/// `here` is the connector's place in messages.
pub(super) fn kind(keys: &mut Keys, here: &str, ctx: &LoadCtx<'_>) -> Result<Kind, ConfigError> {
    let class = keys.take_nonempty("connector.class").ok_or_else(|| {
        ctx.invalid(
            here,
            format!("connector.class is missing; outboxd imports {MYSQL_CLASS}, {MARIADB_CLASS} and {POSTGRES_CLASS}"),
        )
    })?;
    match connector_class(&class).unwrap_or(&class) {
        MYSQL_CLASS => {
            let adapter = keys.take_nonempty("connector.adapter");
            match adapter.as_deref().map(str::to_ascii_lowercase).as_deref() {
                None => Ok(Kind::Mysql(MysqlFlavor::Auto)),
                Some("mysql") => Ok(Kind::Mysql(MysqlFlavor::Mysql)),
                Some("mariadb") => Ok(Kind::Mysql(MysqlFlavor::Mariadb)),
                Some(other) => Err(ctx.invalid(
                    format!("{here}: connector.adapter"),
                    format!("{other:?} is not mysql or mariadb"),
                )),
            }
        }
        MARIADB_CLASS => Ok(Kind::Mysql(MysqlFlavor::Mariadb)),
        POSTGRES_CLASS => Ok(Kind::Postgres),
        other => Err(ctx.invalid(
            format!("{here}: connector.class"),
            format!("{other:?} is not supported; outboxd imports {MYSQL_CLASS}, {MARIADB_CLASS} and {POSTGRES_CLASS}"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connector_classes_resolve_as_connect_resolves_aliases() {
        for name in [MARIADB_CLASS, "MariaDbConnector", "MariaDb"] {
            assert_eq!(connector_class(name), Some(MARIADB_CLASS), "{name}");
        }
        assert_eq!(connector_class("MySql"), Some(MYSQL_CLASS));
        assert_eq!(connector_class("PostgresConnector"), Some(POSTGRES_CLASS));
        for name in ["", "Connector", "mariadb", "io.debezium.MariaDb", "Oracle"] {
            assert_eq!(connector_class(name), None, "{name}");
        }
    }
}
