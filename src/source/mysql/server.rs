//! The SQL side of a MySQL/MariaDB source: connecting, the server facts the relay depends
//! on, the requirement checks `run` and `check` share, and the server's binlog positions.

use mysql_async::prelude::*;
use mysql_async::{Conn, OptsBuilder};

use super::error::{addr, MysqlError};
use crate::config::{MysqlFlavor, MysqlSourceConfig, PositionMode};
use crate::event::TableName;
use crate::position::{BinlogFilePosition, GtidSet, MariadbGtidPosition, SourcePosition};
use crate::preflight::{CheckResult, Status};

/// How positions are tracked for a server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TrackingMode {
    /// MariaDB GTID position (`0-1-42`).
    MariadbGtid,
    /// MySQL GTID set (`uuid:1-42`).
    MysqlGtid,
    /// `file:pos`.
    File,
}

impl TrackingMode {
    /// The checkpoint's position kind for this mode: `mariadb_gtid`, `mysql_gtid_set`,
    /// `binlog_file`.
    pub fn as_str(self) -> &'static str {
        match self {
            TrackingMode::MariadbGtid => "mariadb_gtid",
            TrackingMode::MysqlGtid => "mysql_gtid_set",
            TrackingMode::File => "binlog_file",
        }
    }

    /// Whether a checkpoint at `position` can be resumed in this mode (`file:pos` always can).
    pub fn fits(self, position: &SourcePosition) -> bool {
        matches!(
            (position, self),
            (SourcePosition::MariadbGtid(_), TrackingMode::MariadbGtid)
                | (SourcePosition::MysqlGtidSet(_), TrackingMode::MysqlGtid)
                | (SourcePosition::BinlogFile(_), _)
        )
    }
}

/// What the server told us about itself at connect time.
#[derive(Debug, Clone)]
pub struct ServerInfo {
    /// `SELECT VERSION()`.
    pub version: String,
    /// MariaDB (true) or MySQL.
    pub mariadb: bool,
    /// `@@server_id`.
    pub server_id: u32,
    /// `@@log_bin` is ON.
    pub log_bin: bool,
    /// `@@binlog_format`.
    pub binlog_format: String,
    /// `@@binlog_row_image`.
    pub binlog_row_image: String,
    /// `@@binlog_row_metadata` (None on servers that lack it).
    pub binlog_row_metadata: Option<String>,
    /// MySQL `@@gtid_mode` (None on MariaDB).
    pub gtid_mode: Option<String>,
}

/// Opens an ordinary connection to the source with the configured credentials.
///
/// Errors: access denied is definite (fix the user/password); a server that cannot be reached
/// or does not answer in `connect_timeout` is transient.
pub async fn connect(cfg: &MysqlSourceConfig) -> Result<Conn, MysqlError> {
    let opts = OptsBuilder::default()
        .ip_or_hostname(cfg.host.clone())
        .tcp_port(cfg.port)
        .user(Some(cfg.user.clone()))
        .pass(Some(cfg.password.expose().to_string()))
        .prefer_socket(false)
        .stmt_cache_size(0);
    match tokio::time::timeout(cfg.connect_timeout, Conn::new(opts)).await {
        Err(_) => Err(MysqlError::ConnectTimeout {
            addr: addr(cfg),
            after: cfg.connect_timeout,
        }),
        Ok(Ok(c)) => Ok(c),
        Ok(Err(e)) => Err(MysqlError::from_connect(e, cfg)),
    }
}

/// Reads the server facts the relay depends on.
pub async fn server_info(
    conn: &mut Conn,
    cfg: &MysqlSourceConfig,
) -> Result<ServerInfo, MysqlError> {
    let row: Option<(String, u32, u8, String, String)> = conn
        .query_first(
            "SELECT VERSION(), @@server_id, @@log_bin, @@binlog_format, @@binlog_row_image",
        )
        .await
        .map_err(|e| MysqlError::from_driver(e, cfg))?;
    let (version, server_id, log_bin, binlog_format, binlog_row_image) =
        row.ok_or(MysqlError::NoSettings)?;
    let mariadb = match cfg.flavor {
        MysqlFlavor::Mariadb => true,
        MysqlFlavor::Mysql => false,
        MysqlFlavor::Auto => version.to_ascii_lowercase().contains("mariadb"),
    };
    let binlog_row_metadata: Option<String> = conn
        .query_first("SELECT @@binlog_row_metadata")
        .await
        .ok()
        .flatten();
    let gtid_mode: Option<String> = if mariadb {
        None
    } else {
        conn.query_first("SELECT @@gtid_mode").await.ok().flatten()
    };
    Ok(ServerInfo {
        version,
        mariadb,
        server_id,
        log_bin: log_bin != 0,
        binlog_format,
        binlog_row_image,
        binlog_row_metadata,
        gtid_mode,
    })
}

/// The server settings the relay depends on, checked: one result per setting, the same list
/// for `outboxd check` (which prints it) and `outboxd run` (which stops at a `Fail` with its
/// detail, and logs a `Warn`).
pub fn requirements<'a>(
    info: &ServerInfo,
    connector: &str,
    tables: impl IntoIterator<Item = &'a TableName>,
    src: &MysqlSourceConfig,
) -> Vec<CheckResult> {
    let name = connector;
    let mut out = vec![CheckResult::new(
        name,
        "server",
        Status::Pass,
        format!(
            "{} ({})",
            info.version,
            if info.mariadb { "MariaDB" } else { "MySQL" }
        ),
    )];
    out.push(if info.log_bin {
        CheckResult::new(name, "log_bin", Status::Pass, "ON")
    } else {
        CheckResult::new(
            name,
            "log_bin",
            Status::Fail,
            "log_bin is OFF; outboxd reads the binary log (start the server with log_bin)",
        )
    });
    out.push(if info.binlog_format.eq_ignore_ascii_case("ROW") {
        CheckResult::new(name, "binlog_format", Status::Pass, "ROW")
    } else {
        CheckResult::new(
            name,
            "binlog_format",
            Status::Fail,
            format!(
                "binlog_format is {}; outboxd needs ROW (set binlog_format=ROW)",
                info.binlog_format
            ),
        )
    });
    // MINIMAL and NOBLOB images still carry every column an INSERT names; only columns left
    // to their defaults are missing, and the router names such a column when it needs it.
    out.push(if info.binlog_row_image.eq_ignore_ascii_case("FULL") {
        CheckResult::new(name, "binlog_row_image", Status::Pass, "FULL")
    } else {
        CheckResult::new(
            name,
            "binlog_row_image",
            Status::Warn,
            format!(
                "binlog_row_image is {}; an INSERT's row image then lacks the columns it left \
                 to their defaults, which stops the connector if the router needs one (set \
                 binlog_row_image=FULL)",
                info.binlog_row_image
            ),
        )
    });
    let missing_columns: Vec<String> = tables
        .into_iter()
        .filter(|t| !src.columns.contains_key(t))
        .map(|t| t.to_string())
        .collect();
    let metadata = info.binlog_row_metadata.as_deref();
    out.push(match metadata {
        Some(m) if m.eq_ignore_ascii_case("FULL") => {
            CheckResult::new(name, "binlog_row_metadata", Status::Pass, "FULL")
        }
        _ if missing_columns.is_empty() => CheckResult::new(
            name,
            "binlog_row_metadata",
            Status::Warn,
            format!(
                "{}; column names come from the connector's explicit column lists",
                metadata.unwrap_or("unsupported")
            ),
        ),
        other => CheckResult::new(
            name,
            "binlog_row_metadata",
            Status::Fail,
            format!(
                "binlog_row_metadata is {}; the binlog carries no column names: set \
                 binlog_row_metadata=FULL, or list the columns of {} in the connector config",
                other.unwrap_or("unsupported by this server"),
                missing_columns.join(", ")
            ),
        ),
    });
    out.push(if info.server_id == src.server_id {
        CheckResult::new(
            name,
            "server_id",
            Status::Fail,
            format!(
                "{} {} is the source server's own server_id; choose another, unique among its \
                 replicas",
                src.format.key("server_id", "database.server.id"),
                src.server_id
            ),
        )
    } else {
        CheckResult::new(
            name,
            "server_id",
            Status::Pass,
            format!(
                "replica id {} (source is {})",
                src.server_id, info.server_id
            ),
        )
    });
    let mode = tracking_mode(info, src);
    let gtid_on = info
        .gtid_mode
        .as_deref()
        .is_some_and(|m| m.eq_ignore_ascii_case("ON"));
    let gtid_mode = info.gtid_mode.as_deref().unwrap_or("unknown");
    out.push(match (info.mariadb, gtid_on, src.position_mode) {
        (true, _, _) => CheckResult::new(
            name,
            "gtid",
            Status::Pass,
            format!("MariaDB GTIDs; positions tracked as {}", mode.as_str()),
        ),
        (false, true, _) => CheckResult::new(
            name,
            "gtid",
            Status::Pass,
            format!("gtid_mode=ON; positions tracked as {}", mode.as_str()),
        ),
        (false, false, PositionMode::Gtid) => CheckResult::new(
            name,
            "gtid",
            Status::Fail,
            format!(
                "position_mode is gtid but gtid_mode is {gtid_mode}; set gtid_mode=ON and \
                 enforce_gtid_consistency=ON, or use position_mode=\"file\""
            ),
        ),
        (false, false, _) => CheckResult::new(
            name,
            "gtid",
            Status::Warn,
            format!(
                "gtid_mode={gtid_mode}; positions are file:pos, which do not survive a \
                 failover (set gtid_mode=ON)"
            ),
        ),
    });
    out
}

/// How positions are tracked for this server and configuration.
pub fn tracking_mode(info: &ServerInfo, cfg: &MysqlSourceConfig) -> TrackingMode {
    match (cfg.position_mode, info.mariadb) {
        (PositionMode::File, _) => TrackingMode::File,
        (_, true) => TrackingMode::MariadbGtid,
        (_, false) => {
            if info
                .gtid_mode
                .as_deref()
                .is_some_and(|m| m.eq_ignore_ascii_case("ON"))
            {
                TrackingMode::MysqlGtid
            } else {
                TrackingMode::File
            }
        }
    }
}

/// The server's current position in the given tracking mode (new events only).
pub async fn current_position(
    conn: &mut Conn,
    cfg: &MysqlSourceConfig,
    mode: TrackingMode,
) -> Result<SourcePosition, MysqlError> {
    let driver = |e| MysqlError::from_driver(e, cfg);
    match mode {
        TrackingMode::MariadbGtid => {
            let pos: Option<String> = conn
                .query_first("SELECT @@gtid_binlog_pos")
                .await
                .map_err(driver)?;
            let pos = pos
                .unwrap_or_default()
                .parse::<MariadbGtidPosition>()
                .map_err(|e| MysqlError::UnreadablePosition {
                    what: "gtid_binlog_pos",
                    detail: e.to_string(),
                })?;
            Ok(SourcePosition::MariadbGtid(pos))
        }
        TrackingMode::MysqlGtid => {
            let set: Option<String> = conn
                .query_first("SELECT @@gtid_executed")
                .await
                .map_err(driver)?;
            let set = set.unwrap_or_default().parse::<GtidSet>().map_err(|e| {
                MysqlError::UnreadablePosition {
                    what: "gtid_executed",
                    detail: e.to_string(),
                }
            })?;
            Ok(SourcePosition::MysqlGtidSet(set))
        }
        TrackingMode::File => {
            let row: Option<mysql_async::Row> = match conn.query_first("SHOW MASTER STATUS").await {
                Ok(r) => r,
                Err(_) => conn
                    .query_first("SHOW BINARY LOG STATUS")
                    .await
                    .map_err(driver)?,
            };
            let row = row.ok_or(MysqlError::NoBinlog {
                query: "SHOW MASTER STATUS",
            })?;
            let file: String = row.get(0).unwrap_or_default();
            let pos: u64 = row.get(1).unwrap_or(4);
            Ok(SourcePosition::BinlogFile(BinlogFilePosition::new(
                file, pos,
            )))
        }
    }
}

/// The oldest binlog file the server has, at its first event.
pub async fn earliest_position(
    conn: &mut Conn,
    cfg: &MysqlSourceConfig,
) -> Result<BinlogFilePosition, MysqlError> {
    let rows: Vec<mysql_async::Row> = conn
        .query("SHOW BINARY LOGS")
        .await
        .map_err(|e| MysqlError::from_driver(e, cfg))?;
    let first: String = rows
        .first()
        .and_then(|r| r.get(0))
        .ok_or(MysqlError::NoBinlog {
            query: "SHOW BINARY LOGS",
        })?;
    Ok(BinlogFilePosition::new(first, 4))
}

/// The server's current position for a `status` report: connects, reads the facts and the
/// position in the connector's tracking mode, disconnects.
pub async fn status_position(cfg: &MysqlSourceConfig) -> Result<SourcePosition, MysqlError> {
    let mut conn = connect(cfg).await?;
    let info = server_info(&mut conn, cfg).await?;
    let mode = tracking_mode(&info, cfg);
    let p = current_position(&mut conn, cfg, mode).await;
    let _ = conn.disconnect().await;
    p
}
