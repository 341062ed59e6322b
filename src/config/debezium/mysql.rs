//! The keys only Debezium's MySQL and MariaDB connectors have: `database.server.id` (the
//! replica server id), and the `database.ssl.*` TLS keys (read in `security.rs`).

use std::collections::BTreeMap;
use std::time::Duration;

use super::connection::Connection;
use super::security::mysql_tls;
use super::Keys;
use crate::config::{
    ConfigFormat, KeyError, MysqlFlavor, MysqlSourceConfig, PositionMode, SourceConfig,
    StartPosition, DEFAULT_XA_MAX_HELD_BYTES,
};

/// The MySQL/MariaDB source of `flavor` reached through `connection`: `database.server.id`
/// (required, 1 to 4294967295), the TLS keys; what Debezium has no key for takes outboxd's
/// defaults (start at the current position, auto GTID/file positions, heartbeats every
/// 10 s, reconnect backoff up to 30 s).
pub(super) fn source(
    keys: &mut Keys,
    flavor: MysqlFlavor,
    connection: Connection,
) -> Result<SourceConfig, KeyError> {
    const SERVER_ID: &str = "database.server.id";
    let server_id = keys.take_nonempty(SERVER_ID).ok_or_else(|| {
        (
            SERVER_ID.to_string(),
            "is required: a replica server id unique among the server's replicas".to_string(),
        )
    })?;
    let server_id = server_id
        .parse::<u32>()
        .ok()
        .filter(|id| *id != 0)
        .ok_or_else(|| {
            (
                SERVER_ID.to_string(),
                format!("{server_id:?} is not a server id (1 to 4294967295)"),
            )
        })?;
    let Connection {
        host,
        port,
        user,
        password,
        connect_timeout,
    } = connection;
    Ok(SourceConfig::Mysql(MysqlSourceConfig {
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
        xa_max_held_bytes: DEFAULT_XA_MAX_HELD_BYTES,
        tls: mysql_tls(keys)?,
        format: ConfigFormat::DebeziumJson,
    }))
}
