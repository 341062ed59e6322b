//! The SQL side of a MySQL/MariaDB source: connecting, the server facts the relay depends
//! on, the requirement checks `run` and `check` share, and the server's binlog positions.

use mysql_async::prelude::*;
use mysql_async::{Conn, OptsBuilder};

use super::error::{addr, MysqlError};
use super::types::CatalogColumn;
use crate::config::tls::MysqlTlsNames;
use crate::config::{MysqlFlavor, MysqlSourceConfig, MysqlSslMode, PositionMode};
use crate::event::TableName;
use crate::position::{BinlogFilePosition, GtidSet, MariadbGtidPosition, SourcePosition};
use crate::requirement::{CheckResult, Status};

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
            (position.read_from(), self),
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

/// Opens an ordinary connection to the source with the configured credentials and TLS
/// (`database.ssl.mode`: with `preferred`, plaintext when the server offers no TLS).
///
/// Errors: access denied, TLS that fails (verification, a server without TLS when the mode
/// needs it, unusable trust/key files) are definite; a server that cannot be reached or does
/// not answer in `connect_timeout` is transient.
pub async fn connect(cfg: &MysqlSourceConfig) -> Result<Conn, MysqlError> {
    let ssl = super::tls::ssl_opts(&cfg.tls, MysqlTlsNames::of(cfg.format)).map_err(|source| {
        MysqlError::TlsSetting {
            addr: addr(cfg),
            source,
        }
    })?;
    match connect_once(cfg, ssl.clone()).await {
        Err(MysqlError::TlsUnsupported { .. }) if cfg.tls.mode == MysqlSslMode::Preferred => {
            tracing::debug!(server = %addr(cfg), "the server offers no TLS; ssl mode preferred connects without");
            connect_once(cfg, None).await
        }
        r => r,
    }
}

async fn connect_once(
    cfg: &MysqlSourceConfig,
    ssl: Option<mysql_async::SslOpts>,
) -> Result<Conn, MysqlError> {
    let encrypted = ssl.is_some();
    let opts = OptsBuilder::default()
        .ip_or_hostname(cfg.host.clone())
        .tcp_port(cfg.port)
        .user(Some(cfg.user.clone()))
        .pass(Some(cfg.password.expose().to_string()))
        .prefer_socket(false)
        .stmt_cache_size(0)
        .ssl_opts(ssl);
    match tokio::time::timeout(cfg.connect_timeout, Conn::new(opts)).await {
        Err(_) => Err(MysqlError::ConnectTimeout {
            addr: addr(cfg),
            after: cfg.connect_timeout,
        }),
        Ok(Ok(c)) => Ok(c),
        Ok(Err(e)) => Err(MysqlError::from_connect(e, cfg, encrypted)),
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
    // `check` makes this a FAIL when the outbox tables' columns allow it (`row_image_check`).
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

/// A column of an outbox table as `information_schema.COLUMNS` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColumnFacts {
    /// `COLUMN_NAME`.
    pub name: String,
    /// `DATA_TYPE`, lower case (`varchar`, `json`, `longtext`, ...).
    pub data_type: String,
    /// `IS_NULLABLE` is `YES`.
    pub nullable: bool,
    /// `COLUMN_DEFAULT` (MariaDB shows an explicit `DEFAULT NULL` as the text `NULL`).
    pub default: Option<String>,
    /// `EXTRA`, lower case (`auto_increment`, `virtual generated`, `stored generated`,
    /// `persistent generated`, ...).
    pub extra: String,
}

/// An outbox table as `information_schema` shows it to the connector's user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableFacts {
    /// `TABLES.ENGINE` (empty for a view).
    pub engine: String,
    /// `TABLES.TABLE_TYPE` is `VIEW` (or `SYSTEM VIEW`): rows written through it are logged
    /// as rows of its base table, never under its name.
    pub view: bool,
    /// `TABLE_SCHEMA.TABLE_NAME` as the catalog spells it, which is how the binlog's
    /// TABLE_MAP names it: with `lower_case_table_names` 1 the catalog finds
    /// `Shop.Outbox` as `shop.outbox`.
    pub name: TableName,
    /// Its columns, in table order.
    pub columns: Vec<ColumnFacts>,
}

/// Each of `tables` with what `information_schema` shows of it (`None`: not found, or not
/// visible to the user, which needs some privilege on the table, e.g. `SELECT`).
pub async fn outbox_tables(
    conn: &mut Conn,
    cfg: &MysqlSourceConfig,
    tables: impl IntoIterator<Item = &TableName>,
) -> Result<Vec<(TableName, Option<TableFacts>)>, MysqlError> {
    type ColumnRow = (
        String,
        Option<String>,
        String,
        String,
        Option<String>,
        Option<String>,
        String,
        String,
        String,
    );
    let mut out = Vec::new();
    for t in tables {
        let rows: Vec<ColumnRow> = conn
            .exec(
                "SELECT c.column_name, t.engine, c.data_type, c.is_nullable, c.column_default, \
                 c.extra, t.table_type, t.table_schema, t.table_name \
                 FROM information_schema.columns c JOIN information_schema.tables t \
                 USING (table_schema, table_name) WHERE table_schema = ? AND table_name = ? \
                 ORDER BY c.ordinal_position",
                (t.schema.clone(), t.name.clone()),
            )
            .await
            .map_err(|e| MysqlError::from_driver(e, cfg))?;
        let facts = (!rows.is_empty()).then(|| TableFacts {
            engine: rows[0].1.clone().unwrap_or_default(),
            view: rows[0].6.to_ascii_uppercase().ends_with("VIEW"),
            name: TableName::new(rows[0].7.clone(), rows[0].8.clone()),
            columns: rows
                .into_iter()
                .map(
                    |(name, _, data_type, nullable, default, extra, ..)| ColumnFacts {
                        name,
                        data_type: data_type.to_ascii_lowercase(),
                        nullable: nullable.eq_ignore_ascii_case("YES"),
                        default,
                        extra: extra.unwrap_or_default().to_ascii_lowercase(),
                    },
                )
                .collect(),
        });
        out.push((t.clone(), facts));
    }
    Ok(out)
}

/// The `table <name>` check of a configured outbox table that is not there: `check` prints
/// it, `run` refuses to start with it (a connector whose table is missing would stream, and
/// move its checkpoint past rows written meanwhile to the table the application really
/// uses).
pub fn table_not_found(connector: &str, table: &TableName, src: &MysqlSourceConfig) -> CheckResult {
    CheckResult::new(
        connector,
        &format!("table {table}"),
        Status::Fail,
        format!(
            "outbox table {table} not found (or not visible to the user: it needs a privilege \
             on the table, e.g. SELECT); create it (migrations/mysql) or fix {}",
            src.format.key("tables", "table.include.list")
        ),
    )
}

/// The `table <name>` check of a configured outbox table that `run` cannot stream from
/// (`facts` as [`outbox_tables`] read them): not there ([`table_not_found`]), a view, whose
/// rows the binlog logs under its base table's name only, or a name the server found
/// without regard to case (`lower_case_table_names` 1 or 2) that the binlog spells
/// otherwise: the decoder compares names exactly. `None` for a table.
pub fn unusable_table(
    connector: &str,
    table: &TableName,
    facts: Option<&TableFacts>,
    src: &MysqlSourceConfig,
) -> Option<CheckResult> {
    match facts {
        None => Some(table_not_found(connector, table, src)),
        Some(f) if f.view => Some(CheckResult::new(
            connector,
            &format!("table {table}"),
            Status::Fail,
            format!(
                "outbox table {table} is a view: the binlog logs the rows written through it as \
                 rows of its base table, never under the view's name, so none would be \
                 delivered; name the base table in {}",
                src.format.key("tables", "table.include.list")
            ),
        )),
        Some(f) if f.name != *table => Some(CheckResult::new(
            connector,
            &format!("table {table}"),
            Status::Fail,
            format!(
                "outbox table {table} is {} to the server (lower_case_table_names), and the \
                 binlog names its rows so: write it that way in {}",
                f.name,
                src.format.key("tables", "table.include.list")
            ),
        )),
        Some(_) => None,
    }
}

/// Whether each of `tables` exists now (as a table, not a view), on a connection of its
/// own: those that do not.
pub async fn missing_tables(
    cfg: &MysqlSourceConfig,
    tables: impl IntoIterator<Item = &TableName>,
) -> Result<Vec<TableName>, MysqlError> {
    let mut conn = connect(cfg).await?;
    let found = outbox_tables(&mut conn, cfg, tables).await;
    let _ = conn.disconnect().await;
    Ok(found?
        .into_iter()
        .filter(|(_, facts)| facts.as_ref().is_none_or(|f| f.view))
        .map(|(t, _)| t)
        .collect())
}

/// Whether an INSERT can leave `column` out of a `binlog_row_image` image (`minimal`:
/// the columns the statement names, plus auto-increment values; `noblob`: every column but
/// BLOB/TEXT/JSON ones the statement does not name; MySQL "binlog_row_image", checked on
/// MariaDB 10.11): why, or `None` when every INSERT carries it. `strict`: the server's
/// global `sql_mode` is strict (`STRICT_TRANS_TABLES` / `STRICT_ALL_TABLES`), so an INSERT
/// must name a NOT NULL column without a default.
pub fn left_out_by(image: &str, column: &ColumnFacts, strict: bool) -> Option<String> {
    let blob = matches!(
        column.data_type.as_str(),
        "tinyblob"
            | "blob"
            | "mediumblob"
            | "longblob"
            | "tinytext"
            | "text"
            | "mediumtext"
            | "longtext"
            | "json"
            | "geometry"
            | "point"
            | "linestring"
            | "polygon"
            | "multipoint"
            | "multilinestring"
            | "multipolygon"
            | "geometrycollection"
    );
    let image = image.to_ascii_uppercase();
    if image == "FULL" || (image == "NOBLOB" && !blob) {
        return None;
    }
    let extra = &column.extra;
    if extra.contains("virtual")
        || extra.contains("stored generated")
        || extra.contains("persistent")
    {
        return Some("generated".into());
    }
    if extra.contains("auto_increment") {
        // Logged with the value the server generated.
        return None;
    }
    match (&column.default, column.nullable) {
        (Some(d), _) if !d.eq_ignore_ascii_case("NULL") => Some(format!("DEFAULT {d}")),
        (_, true) => Some("NULL allowed".into()),
        _ if !strict => Some("NOT NULL without a default, but sql_mode is not strict".into()),
        _ => None,
    }
}

/// The `binlog_row_image` check against the outbox tables: `Fail` when the server's image
/// (`image`, not FULL) can leave out a column the router reads (`needed`), naming the
/// columns and why ([`left_out_by`]); otherwise `Warn` (a session may still set its own
/// `binlog_row_image`, or a non-strict `sql_mode`). `None` for FULL.
pub fn row_image_check(
    connector: &str,
    image: &str,
    strict: bool,
    tables: &[(TableName, TableFacts)],
    needed: &[&str],
) -> Option<CheckResult> {
    if image.eq_ignore_ascii_case("FULL") {
        return None;
    }
    let mut left_out = Vec::new();
    for (table, facts) in tables {
        for column in facts
            .columns
            .iter()
            .filter(|c| needed.contains(&c.name.as_str()))
        {
            if let Some(why) = left_out_by(image, column, strict) {
                left_out.push(format!("{table}.{} ({why})", column.name));
            }
        }
    }
    Some(if left_out.is_empty() {
        CheckResult::new(
            connector,
            "binlog_row_image",
            Status::Warn,
            format!(
                "binlog_row_image is {image}; every INSERT must name each column the router \
                 reads (they allow no default here), but a session that sets its own \
                 binlog_row_image or a non-strict sql_mode could still leave one out, which \
                 stops the connector at that event (set binlog_row_image=FULL)"
            ),
        )
    } else {
        CheckResult::new(
            connector,
            "binlog_row_image",
            Status::Fail,
            format!(
                "binlog_row_image is {image}: an INSERT that leaves a column to its default \
                 writes a row image without it, and these columns the router reads can be \
                 left out: {}; such an event stops the connector (it cannot be routed without \
                 the column); set binlog_row_image=FULL (SET GLOBAL binlog_row_image='FULL', \
                 and in the server's configuration)",
                left_out.join(", ")
            ),
        )
    })
}

/// Who can switch their own session's `binlog_format` to STATEMENT or MIXED, which writes
/// outbox INSERTs as statements outboxd cannot decode: MariaDB (10.5.2+) needs `BINLOG
/// ADMIN` or `SUPER` for `SET SESSION binlog_format` (MDEV-21957); MySQL, a restricted
/// session variable, `SESSION_VARIABLES_ADMIN`, `SYSTEM_VARIABLES_ADMIN` or `SUPER`. Read
/// from `information_schema.USER_PRIVILEGES`, which lists every account only to a user who
/// may read the `mysql` schema's grant tables; otherwise the check says it cannot tell who.
/// Always a `Warn` at most: outboxd stops at such a statement instead of skipping it.
pub async fn binlog_format_changers(
    conn: &mut Conn,
    connector: &str,
    info: &ServerInfo,
) -> CheckResult {
    let privileges: &[&str] = if info.mariadb {
        &["SUPER", "BINLOG ADMIN"]
    } else {
        &["SUPER", "SESSION_VARIABLES_ADMIN", "SYSTEM_VARIABLES_ADMIN"]
    };
    let names = privileges.join(" or ");
    let listed: Result<Vec<String>, _> = conn
        .query(format!(
            "SELECT DISTINCT GRANTEE FROM information_schema.USER_PRIVILEGES WHERE \
             PRIVILEGE_TYPE IN ({}) ORDER BY GRANTEE",
            privileges
                .iter()
                .map(|p| format!("'{p}'"))
                .collect::<Vec<_>>()
                .join(", ")
        ))
        .await;
    let all_visible = conn
        .query_drop(if info.mariadb {
            "SELECT 1 FROM mysql.global_priv LIMIT 1"
        } else {
            "SELECT 1 FROM mysql.user LIMIT 1"
        })
        .await
        .is_ok();
    let stops = "a session of theirs that sets binlog_format=STATEMENT or MIXED writes \
                 outbox INSERTs as statements, which outboxd cannot decode: it stops before \
                 such a transaction (see README, \"Events that cannot be delivered\"); one \
                 that sets sql_log_bin=0 (the same privilege) keeps its writes out of the \
                 binlog altogether: its outbox rows are lost without a trace, which no binlog \
                 reader can notice";
    match listed {
        Ok(accounts) if all_visible && accounts.is_empty() => CheckResult::new(
            connector,
            "binlog_format per session",
            Status::Pass,
            format!("no account has {names}: every session writes ROW"),
        ),
        Ok(accounts) if all_visible => CheckResult::new(
            connector,
            "binlog_format per session",
            Status::Warn,
            format!(
                "accounts with {names} can change their own session's binlog_format: {}; {stops}",
                accounts.join(", ")
            ),
        ),
        _ => CheckResult::new(
            connector,
            "binlog_format per session",
            Status::Warn,
            format!(
                "any session of an account with {names} can change its own binlog_format \
                 (the user cannot read the grant tables to tell which accounts have it); \
                 {stops}"
            ),
        ),
    }
}

/// The server's global `sql_mode` is strict (`STRICT_TRANS_TABLES` or `STRICT_ALL_TABLES`):
/// an INSERT must then name a NOT NULL column without a default.
pub async fn strict_sql_mode(conn: &mut Conn, cfg: &MysqlSourceConfig) -> Result<bool, MysqlError> {
    let mode: Option<String> = conn
        .query_first("SELECT @@GLOBAL.sql_mode")
        .await
        .map_err(|e| MysqlError::from_driver(e, cfg))?;
    let mode = mode.unwrap_or_default().to_ascii_uppercase();
    Ok(mode.contains("STRICT_TRANS_TABLES") || mode.contains("STRICT_ALL_TABLES"))
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
        TrackingMode::MariadbGtid => Ok(SourcePosition::MariadbGtid(
            gtid_variable(conn, cfg, "gtid_binlog_pos").await?,
        )),
        TrackingMode::MysqlGtid => Ok(SourcePosition::MysqlGtidSet(
            gtid_variable(conn, cfg, "gtid_executed").await?,
        )),
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

/// A GTID position or set the server reported as `what` (`gtid_binlog_pos`, ...); NULL
/// reads as empty.
fn parse_position<T>(what: &'static str, value: Option<String>) -> Result<T, MysqlError>
where
    T: std::str::FromStr<Err = crate::position::PositionError>,
{
    value
        .unwrap_or_default()
        .parse()
        .map_err(|source| MysqlError::UnreadablePosition { what, source })
}

/// The GTID position or set in server variable `var` (`gtid_binlog_pos`, `gtid_executed`,
/// `gtid_purged`).
async fn gtid_variable<T>(
    conn: &mut Conn,
    cfg: &MysqlSourceConfig,
    var: &'static str,
) -> Result<T, MysqlError>
where
    T: std::str::FromStr<Err = crate::position::PositionError>,
{
    let value: Option<String> = conn
        .query_first(format!("SELECT @@{var}"))
        .await
        .map_err(|e| MysqlError::from_driver(e, cfg))?;
    parse_position(var, value)
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

/// What a `status` report shows of the server: its current position in the connector's
/// tracking mode, and what it still has of its binlog ([`Retained::gap`] tells whether that
/// serves the connector's checkpoint).
#[derive(Debug, Clone)]
pub struct StatusReport {
    /// The server's current position.
    pub current: SourcePosition,
    /// The binlogs the server still has.
    pub retained: Retained,
}

/// The server's current position and what it still has of its binlog, for a `status`
/// report: connects, reads, disconnects. The caller reads the checkpoint afterwards and
/// compares ([`Retained::gap`]): checkpoints only move forward, so one read after the
/// server's state never looks older than what the server had then.
pub async fn status(cfg: &MysqlSourceConfig) -> Result<StatusReport, MysqlError> {
    let mut conn = connect(cfg).await?;
    let report = async {
        let info = server_info(&mut conn, cfg).await?;
        let mode = tracking_mode(&info, cfg);
        let current = current_position(&mut conn, cfg, mode).await?;
        let retained = retained(&mut conn, cfg, mode).await?;
        Ok(StatusReport { current, retained })
    }
    .await;
    let _ = conn.disconnect().await;
    report
}

/// What the server still has of its binlog, read once, to tell whether it can send its
/// binlog from a checkpoint ([`gap`](Self::gap)).
#[derive(Debug, Clone)]
pub struct Retained {
    /// The connector's tracking mode on this server.
    mode: TrackingMode,
    /// `SHOW BINARY LOGS`, oldest first.
    files: Vec<String>,
    /// MariaDB GTID mode: the GTID state at the start of the oldest binlog
    /// (`BINLOG_GTID_POS(<oldest file>, 4)`, that file's `Gtid_list` event; MariaDB KB
    /// "BINLOG_GTID_POS").
    oldest_state: Option<MariadbGtidPosition>,
    /// MySQL GTID mode: `@@gtid_purged`.
    purged: Option<GtidSet>,
}

/// Reads what the server still has of its binlog in tracking mode `mode`.
pub async fn retained(
    conn: &mut Conn,
    cfg: &MysqlSourceConfig,
    mode: TrackingMode,
) -> Result<Retained, MysqlError> {
    let driver = |e| MysqlError::from_driver(e, cfg);
    let files = binlog_files(conn, cfg).await?;
    let mut retained = Retained {
        mode,
        files,
        oldest_state: None,
        purged: None,
    };
    match mode {
        TrackingMode::MariadbGtid => {
            if let Some(oldest) = retained.files.first() {
                let state: Option<String> = conn
                    .exec_first("SELECT BINLOG_GTID_POS(?, 4)", (oldest.clone(),))
                    .await
                    .map_err(driver)?;
                retained.oldest_state = Some(parse_position(
                    "BINLOG_GTID_POS of the oldest binlog",
                    state,
                )?);
            }
        }
        TrackingMode::MysqlGtid => {
            retained.purged = Some(gtid_variable(conn, cfg, "gtid_purged").await?);
        }
        TrackingMode::File => {}
    }
    Ok(retained)
}

impl Retained {
    /// Why the server can no longer send its binlog from `checkpoint` (the position a
    /// connector resumes at), or `None` when it can: the binlogs holding what follows the
    /// checkpoint were purged (`PURGE BINARY LOGS`, `binlog_expire_logs_seconds`), or the
    /// checkpoint belongs to another tracking mode.
    ///
    /// - MariaDB GTID position: compared, domain by domain, with the GTID state at the start
    ///   of the oldest binlog ([`mariadb_gtid_gap`]).
    /// - MySQL GTID set: the server's `gtid_purged` must be contained in it (MySQL "GTID
    ///   Auto-Positioning": the source refuses a replica missing purged transactions).
    /// - `file:pos`: the file must still be listed by `SHOW BINARY LOGS`, or be newer than
    ///   every file listed (a checkpoint read after this list may be in a binlog started
    ///   since).
    pub fn gap(&self, checkpoint: &SourcePosition) -> Option<String> {
        if !self.mode.fits(checkpoint) {
            return Some(
                MysqlError::PositionMismatch {
                    position: checkpoint.clone(),
                    mode: self.mode.as_str(),
                }
                .to_string(),
            );
        }
        match checkpoint.read_from() {
            SourcePosition::MariadbGtid(pos) => {
                let (oldest, state) = (self.files.first()?, self.oldest_state.as_ref()?);
                mariadb_gtid_gap(pos, state, oldest)
            }
            SourcePosition::MysqlGtidSet(set) => mysql_gtid_gap(set, self.purged.as_ref()?),
            SourcePosition::BinlogFile(fp) => binlog_file_gap(fp, &self.files),
            SourcePosition::Lsn(_) | SourcePosition::XaPending(_) => None,
        }
    }
}

/// Why the server can no longer send its binlog from `checkpoint`, or `None` when it can
/// ([`retained`], then [`Retained::gap`]).
pub async fn checkpoint_gap(
    conn: &mut Conn,
    cfg: &MysqlSourceConfig,
    mode: TrackingMode,
    checkpoint: &SourcePosition,
) -> Result<Option<String>, MysqlError> {
    Ok(retained(conn, cfg, mode).await?.gap(checkpoint))
}

/// The binlog files the server has, oldest first (`SHOW BINARY LOGS`).
async fn binlog_files(conn: &mut Conn, cfg: &MysqlSourceConfig) -> Result<Vec<String>, MysqlError> {
    let rows: Vec<mysql_async::Row> = conn
        .query("SHOW BINARY LOGS")
        .await
        .map_err(|e| MysqlError::from_driver(e, cfg))?;
    Ok(rows.iter().filter_map(|r| r.get::<String, _>(0)).collect())
}

/// [`Retained::gap`] for a MariaDB GTID position `checkpoint`, given `oldest_state`, the GTID
/// state at the start of the oldest binlog `oldest_file`: every domain that binlog starts
/// after must be reached by the checkpoint, else the transactions in between were purged.
pub fn mariadb_gtid_gap(
    checkpoint: &MariadbGtidPosition,
    oldest_state: &MariadbGtidPosition,
    oldest_file: &str,
) -> Option<String> {
    let missing: Vec<String> = oldest_state
        .iter()
        .filter(|first| {
            checkpoint
                .get(first.domain)
                .is_none_or(|c| c.seq < first.seq)
        })
        .map(|first| match checkpoint.get(first.domain) {
            Some(c) => format!(
                "domain {} is at {c}, the binlogs start after {first}",
                c.domain
            ),
            None => format!(
                "domain {} is not in the checkpoint, the binlogs start after {first}",
                first.domain
            ),
        })
        .collect();
    (!missing.is_empty()).then(|| {
        format!(
            "the server no longer has the binlogs that follow the connector's checkpoint at \
             GTID position {checkpoint}: its oldest binlog, {oldest_file}, starts at GTID \
             position {oldest_state} ({}); the binlogs in between were purged",
            missing.join("; ")
        )
    })
}

/// [`Retained::gap`] for a MySQL GTID set `checkpoint` given the server's `gtid_purged`.
pub fn mysql_gtid_gap(checkpoint: &GtidSet, purged: &GtidSet) -> Option<String> {
    (!purged.is_subset_of(checkpoint)).then(|| {
        format!(
            "the server purged transactions the connector's checkpoint (GTID set {checkpoint}) \
             has not seen: gtid_purged is {purged}; the binlogs holding them are gone"
        )
    })
}

/// [`Retained::gap`] for a `file:pos` checkpoint given the server's binlog files, oldest
/// first: a gap when its file is not listed, unless it is a later file of the same
/// sequence than the newest listed (started after the list was read).
pub fn binlog_file_gap(checkpoint: &BinlogFilePosition, files: &[String]) -> Option<String> {
    if files.contains(&checkpoint.file) {
        return None;
    }
    let newer = files.last().is_some_and(|newest| {
        match (binlog_sequence(newest), binlog_sequence(&checkpoint.file)) {
            (Some((base, n)), Some((cbase, c))) => base == cbase && c > n,
            _ => false,
        }
    });
    (!newer).then(|| {
        format!(
            "the connector's checkpoint is in binlog file {}, which the server no longer has \
             (its binlogs: {}); the binlogs from there on were purged",
            checkpoint.file,
            match (files.first(), files.last()) {
                (Some(a), Some(b)) => format!("{a} to {b}"),
                _ => "none".to_string(),
            }
        )
    })
}

/// A binlog file name's base name and sequence number (`mysql-bin.000042` -> `("mysql-bin",
/// 42)`), the numbered extension the server gives each new binlog.
fn binlog_sequence(file: &str) -> Option<(&str, u64)> {
    let (base, n) = file.rsplit_once('.')?;
    Some((base, n.parse().ok()?))
}

/// The catalog's columns of `tables` (`information_schema.COLUMNS`: `COLUMN_DEFAULT`,
/// `COLUMN_TYPE`), what Debezium reads from the DDL and the binlog does not carry. A catalog
/// the relay user may not read gives none (logged at DEBUG): schemas carry no defaults then,
/// and a FLOAT(M,D) stays single precision.
pub(crate) async fn catalog_columns(
    conn: &mut Conn,
    tables: &[TableName],
) -> std::collections::BTreeMap<TableName, std::collections::HashMap<String, CatalogColumn>> {
    let mut out = std::collections::BTreeMap::new();
    for t in tables {
        let rows: Result<Vec<(String, Option<String>, String)>, _> = conn
            .exec(
                "SELECT COLUMN_NAME, COLUMN_DEFAULT, COLUMN_TYPE FROM information_schema.COLUMNS \
                 WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?",
                (t.schema.as_str(), t.name.as_str()),
            )
            .await;
        match rows {
            Ok(rows) => {
                let columns = rows
                    .into_iter()
                    .map(|(name, default, column_type)| {
                        (
                            name,
                            CatalogColumn {
                                default,
                                column_type,
                            },
                        )
                    })
                    .collect();
                out.insert(t.clone(), columns);
            }
            Err(e) => {
                tracing::debug!(table = %t, error = %e, "the catalog's columns are not readable; schemas carry no defaults");
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mariadb_source() -> MysqlSourceConfig {
        let text = "[[connectors]]\nname = \"shop\"\ntables = [\"shop.outbox\"]\n\
                    [connectors.source]\nkind = \"mariadb\"\nhost = \"h\"\nuser = \"u\"\n\
                    password = \"p\"\nserver_id = 7\n[connectors.kafka]\n\
                    bootstrap_servers = \"k:9092\"\n";
        let cfg =
            crate::config::parse(text, std::path::Path::new("t.toml"), None, &|_| None).unwrap();
        match &cfg.connectors[0].source {
            crate::config::SourceConfig::Mysql(m) => m.clone(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn only_a_table_spelled_as_the_binlog_spells_it_can_be_streamed() {
        let src = mariadb_source();
        let t = TableName::new("Shop", "Outbox");
        let facts = |view: bool, name: TableName| TableFacts {
            engine: "InnoDB".into(),
            view,
            name,
            columns: Vec::new(),
        };
        let fail = |f: Option<&TableFacts>| unusable_table("shop", &t, f, &src).map(|r| r.detail);
        assert!(fail(None)
            .unwrap()
            .contains("outbox table Shop.Outbox not found"));
        assert!(fail(Some(&facts(true, t.clone())))
            .unwrap()
            .contains("outbox table Shop.Outbox is a view"));
        let lower = fail(Some(&facts(false, TableName::new("shop", "outbox")))).unwrap();
        assert!(
            lower.contains("outbox table Shop.Outbox is shop.outbox to the server")
                && lower.contains("write it that way in tables"),
            "{lower}"
        );
        assert_eq!(fail(Some(&facts(false, t.clone()))), None);
    }

    fn pos(s: &str) -> MariadbGtidPosition {
        s.parse().unwrap()
    }

    #[test]
    fn a_mariadb_checkpoint_behind_the_oldest_binlog_is_a_gap() {
        assert_eq!(
            mariadb_gtid_gap(&pos("0-1-10"), &pos("0-1-10"), "b.2"),
            None
        );
        assert_eq!(
            mariadb_gtid_gap(&pos("0-1-12"), &pos("0-1-10"), "b.2"),
            None
        );
        assert_eq!(mariadb_gtid_gap(&pos("0-1-12"), &pos(""), "b.1"), None);
        let gap = mariadb_gtid_gap(&pos("0-1-9"), &pos("0-1-10"), "b.2").unwrap();
        assert!(
            gap.contains("GTID position 0-1-9") && gap.contains("b.2") && gap.contains("0-1-10"),
            "{gap}"
        );
        // A domain that started after the checkpoint and whose first binlogs are gone.
        let gap = mariadb_gtid_gap(&pos("0-1-12"), &pos("0-1-10,1-2-3"), "b.2").unwrap();
        assert!(gap.contains("domain 1 is not in the checkpoint"), "{gap}");
    }

    #[test]
    fn a_mysql_checkpoint_missing_purged_transactions_is_a_gap() {
        let set = |s: &str| s.parse::<GtidSet>().unwrap();
        let u = "3e11fa47-71ca-11e1-9e33-c80aa9429562";
        assert_eq!(
            mysql_gtid_gap(&set(&format!("{u}:1-10")), &set(&format!("{u}:1-5"))),
            None
        );
        assert_eq!(mysql_gtid_gap(&set(&format!("{u}:1-10")), &set("")), None);
        assert!(mysql_gtid_gap(&set(&format!("{u}:1-4")), &set(&format!("{u}:1-5"))).is_some());
    }

    fn col(
        name: &str,
        data_type: &str,
        nullable: bool,
        default: Option<&str>,
        extra: &str,
    ) -> ColumnFacts {
        ColumnFacts {
            name: name.into(),
            data_type: data_type.into(),
            nullable,
            default: default.map(str::to_string),
            extra: extra.into(),
        }
    }

    #[test]
    fn which_columns_a_partial_row_image_can_leave_out() {
        let uuid_id = col("id", "char", false, Some("uuid()"), "");
        let plain = col("aggregate_id", "varchar", false, None, "");
        let payload = col("payload", "longtext", true, Some("NULL"), "");
        let text = col("payload", "text", false, None, "");
        let auto = col("seq", "bigint", false, None, "auto_increment");
        let generated = col("g", "varchar", true, None, "stored generated");
        let mysql_expr = col("id", "varchar", false, Some("uuid()"), "default_generated");
        assert_eq!(left_out_by("FULL", &payload, true), None);
        assert_eq!(
            left_out_by("MINIMAL", &uuid_id, true).as_deref(),
            Some("DEFAULT uuid()")
        );
        assert_eq!(
            left_out_by("MINIMAL", &payload, true).as_deref(),
            Some("NULL allowed")
        );
        assert_eq!(left_out_by("MINIMAL", &plain, true), None);
        assert!(
            left_out_by("MINIMAL", &plain, false).is_some(),
            "not strict"
        );
        assert_eq!(
            left_out_by("MINIMAL", &auto, false),
            None,
            "logged when generated"
        );
        assert_eq!(
            left_out_by("minimal", &generated, true).as_deref(),
            Some("generated")
        );
        assert_eq!(
            left_out_by("MINIMAL", &mysql_expr, true).as_deref(),
            Some("DEFAULT uuid()")
        );
        // NOBLOB leaves out only BLOB/TEXT/JSON columns an INSERT does not name.
        assert_eq!(left_out_by("NOBLOB", &uuid_id, true), None);
        assert_eq!(
            left_out_by("NOBLOB", &payload, true).as_deref(),
            Some("NULL allowed")
        );
        assert_eq!(left_out_by("NOBLOB", &text, true), None);
        assert!(left_out_by("NOBLOB", &text, false).is_some());

        let t = TableName::new("shop", "outbox");
        let facts = TableFacts {
            engine: "InnoDB".into(),
            view: false,
            name: t.clone(),
            columns: vec![uuid_id, plain, payload.clone()],
        };
        let needed = ["id", "aggregate_id", "payload"];
        assert!(
            row_image_check("c", "FULL", true, &[(t.clone(), facts.clone())], &needed).is_none()
        );
        let r =
            row_image_check("c", "MINIMAL", true, &[(t.clone(), facts.clone())], &needed).unwrap();
        assert_eq!(r.status, Status::Fail);
        assert!(
            r.detail
                .contains("shop.outbox.id (DEFAULT uuid()), shop.outbox.payload (NULL allowed)"),
            "{}",
            r.detail
        );
        // Columns the router does not read do not count.
        let r = row_image_check("c", "MINIMAL", true, &[(t, facts)], &["aggregate_id"]).unwrap();
        assert_eq!(r.status, Status::Warn, "{}", r.detail);
    }

    #[test]
    fn a_file_checkpoint_in_a_purged_file_is_a_gap() {
        let files = vec!["b.000003".to_string(), "b.000004".to_string()];
        assert_eq!(
            binlog_file_gap(&BinlogFilePosition::new("b.000003", 99), &files),
            None
        );
        let gap = binlog_file_gap(&BinlogFilePosition::new("b.000001", 99), &files).unwrap();
        assert!(
            gap.contains("b.000001") && gap.contains("b.000003 to b.000004"),
            "{gap}"
        );
        // A checkpoint read after the list, in a binlog started since: no gap.
        assert_eq!(
            binlog_file_gap(&BinlogFilePosition::new("b.000005", 4), &files),
            None
        );
        assert!(binlog_file_gap(&BinlogFilePosition::new("other.000005", 4), &files).is_some());
        assert!(binlog_file_gap(&BinlogFilePosition::new("b.000005", 4), &[]).is_some());
    }
}
