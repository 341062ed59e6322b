//! The database connection keys Debezium's MySQL, MariaDB and PostgreSQL connectors share:
//! `database.hostname`, `database.port`, `database.user`, `database.password`,
//! `connect.timeout.ms`. The source-specific ones are in `mysql.rs` and `postgres.rs`, the
//! TLS keys in `security.rs`.

use std::time::Duration;

use super::Keys;
use crate::config::{KeyError, Secret};

/// Where and as whom to connect, on Debezium's defaults.
pub(super) struct Connection {
    pub(super) host: String,
    pub(super) port: u16,
    pub(super) user: String,
    pub(super) password: Secret,
    pub(super) connect_timeout: Duration,
}

/// `database.hostname` and `database.user` (required), `database.port` (default 3306, or
/// 5432 for PostgreSQL: `is_pg`), `database.password` (default empty),
/// `connect.timeout.ms` (default 30 s, or 10 s for PostgreSQL).
pub(super) fn connection(keys: &mut Keys, is_pg: bool) -> Result<Connection, KeyError> {
    let required = |k: &str| (k.to_string(), "is required".to_string());
    let host = keys
        .take_nonempty("database.hostname")
        .ok_or_else(|| required("database.hostname"))?;
    let port = match keys.take_nonempty("database.port") {
        Some(p) => p.parse::<u16>().map_err(|_| {
            (
                "database.port".to_string(),
                format!("{p:?} is not a TCP port"),
            )
        })?,
        None if is_pg => 5432,
        None => 3306,
    };
    let user = keys
        .take_nonempty("database.user")
        .ok_or_else(|| required("database.user"))?;
    let password = Secret::new(keys.take("database.password").unwrap_or_default());
    let connect_timeout = match keys.take_nonempty("connect.timeout.ms") {
        Some(v) => Duration::from_millis(milliseconds(&v, "connect.timeout.ms")?),
        None => Duration::from_secs(if is_pg { 10 } else { 30 }),
    };
    Ok(Connection {
        host,
        port,
        user,
        password,
        connect_timeout,
    })
}

/// A number of milliseconds, the value of key `key`.
pub(super) fn milliseconds(v: &str, key: &str) -> Result<u64, KeyError> {
    v.parse::<u64>().map_err(|_| {
        (
            key.to_string(),
            format!("{v:?} is not a number of milliseconds"),
        )
    })
}
