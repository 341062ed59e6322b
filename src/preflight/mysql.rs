//! MySQL/MariaDB preflight: binary log settings, GTIDs, privileges and the outbox tables.

use mysql_async::prelude::*;

use super::{CheckResult, Status};
use crate::config::{ConnectorConfig, MysqlSourceConfig, PositionMode};
use crate::source::mysql::session::{self, ServerInfo};

/// Runs every MySQL/MariaDB check for connector `cfg` with source `src`.
pub async fn check(cfg: &ConnectorConfig, src: &MysqlSourceConfig) -> Vec<CheckResult> {
    let name = cfg.name.as_str();
    let mut out = Vec::new();
    let mut conn = match session::connect(src).await {
        Ok(c) => {
            out.push(CheckResult::new(
                name,
                "connect",
                Status::Pass,
                format!("{}:{} as {}", src.host, src.port, src.user),
            ));
            c
        }
        Err(f) => {
            out.push(CheckResult::new(name, "connect", Status::Fail, f.message));
            return out;
        }
    };
    let info = match session::server_info(&mut conn, src).await {
        Ok(i) => i,
        Err(f) => {
            out.push(CheckResult::new(
                name,
                "server settings",
                Status::Fail,
                f.message,
            ));
            return out;
        }
    };
    out.extend(settings(name, &info, cfg, src));
    out.extend(privileges(name, &mut conn, &info, src).await);
    out.extend(tables(name, &mut conn, cfg).await);
    let _ = conn.disconnect().await;
    out
}

fn settings(
    name: &str,
    info: &ServerInfo,
    cfg: &ConnectorConfig,
    src: &MysqlSourceConfig,
) -> Vec<CheckResult> {
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
            "OFF; outboxd reads the binary log (start the server with log_bin)",
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
                "{}; outboxd needs ROW (set binlog_format=ROW)",
                info.binlog_format
            ),
        )
    });
    out.push(if info.binlog_row_image.eq_ignore_ascii_case("FULL") {
        CheckResult::new(name, "binlog_row_image", Status::Pass, "FULL")
    } else {
        CheckResult::new(
            name,
            "binlog_row_image",
            Status::Fail,
            format!(
                "{}; set binlog_row_image=FULL so every outbox column is in the row image",
                info.binlog_row_image
            ),
        )
    });
    let missing_columns: Vec<String> = cfg
        .tables
        .iter()
        .filter(|t| !src.columns.contains_key(t))
        .map(|t| t.to_string())
        .collect();
    out.push(match info.binlog_row_metadata.as_deref() {
        Some(m) if m.eq_ignore_ascii_case("FULL") => CheckResult::new(name, "binlog_row_metadata", Status::Pass, "FULL"),
        _ if missing_columns.is_empty() => CheckResult::new(name, "binlog_row_metadata", Status::Warn, format!("{}; column names come from the connector's explicit column lists", info.binlog_row_metadata.as_deref().unwrap_or("unsupported"))),
        other => CheckResult::new(name, "binlog_row_metadata", Status::Fail, format!(
            "{}; the binlog carries no column names: set binlog_row_metadata=FULL, or list the columns of {} in the connector config",
            other.unwrap_or("unsupported by this server"), missing_columns.join(", ")
        )),
    });
    out.push(if info.server_id == src.server_id {
        CheckResult::new(
            name,
            "server_id",
            Status::Fail,
            format!(
                "{} is the source's own server_id; choose another database.server.id",
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
    let mode = session::tracking_mode(info, src);
    out.push(match (info.mariadb, info.gtid_mode.as_deref(), src.position_mode) {
        (true, _, _) => CheckResult::new(name, "gtid", Status::Pass, format!("MariaDB GTIDs; positions tracked as {}", mode.as_str())),
        (false, Some(m), _) if m.eq_ignore_ascii_case("ON") => CheckResult::new(name, "gtid", Status::Pass, format!("gtid_mode=ON; positions tracked as {}", mode.as_str())),
        (false, m, PositionMode::Gtid) => CheckResult::new(name, "gtid", Status::Fail, format!("gtid_mode={}; set gtid_mode=ON or position_mode=\"file\"", m.unwrap_or("unknown"))),
        (false, m, _) => CheckResult::new(name, "gtid", Status::Warn, format!("gtid_mode={}; positions are file:pos, which do not survive a failover (set gtid_mode=ON)", m.unwrap_or("unknown"))),
    });
    out
}

async fn privileges(
    name: &str,
    conn: &mut mysql_async::Conn,
    info: &ServerInfo,
    src: &MysqlSourceConfig,
) -> Vec<CheckResult> {
    let grants: Vec<String> = match conn.query("SHOW GRANTS").await {
        Ok(g) => g,
        Err(e) => {
            return vec![CheckResult::new(
                name,
                "privileges",
                Status::Fail,
                format!("SHOW GRANTS failed: {e}"),
            )]
        }
    };
    let all = grants.join(" ").to_ascii_uppercase();
    let has = |p: &str| all.contains("ALL PRIVILEGES ON *.*") || all.contains(p);
    let mut out = Vec::new();
    out.push(if has("REPLICATION SLAVE") || has("REPLICATION REPLICA") {
        CheckResult::new(name, "privilege REPLICATION SLAVE", Status::Pass, "granted")
    } else {
        CheckResult::new(
            name,
            "privilege REPLICATION SLAVE",
            Status::Fail,
            format!(
                "missing; GRANT REPLICATION SLAVE ON *.* TO '{}'@'...'",
                src.user
            ),
        )
    });
    let monitor = if info.mariadb {
        "BINLOG MONITOR"
    } else {
        "REPLICATION CLIENT"
    };
    out.push(if has(monitor) || has("REPLICATION CLIENT") || has("SUPER") {
        CheckResult::new(name, &format!("privilege {monitor}"), Status::Pass, "granted")
    } else {
        CheckResult::new(name, &format!("privilege {monitor}"), Status::Fail, format!("missing (needed for the current binlog position); GRANT {monitor} ON *.* TO '{}'@'...'", src.user))
    });
    out
}

async fn tables(
    name: &str,
    conn: &mut mysql_async::Conn,
    cfg: &ConnectorConfig,
) -> Vec<CheckResult> {
    let needed = cfg.router.columns_read();
    let mut out = Vec::new();
    for t in &cfg.tables {
        let cols: Vec<(String, String)> = match conn
            .exec(
                "SELECT column_name, engine FROM information_schema.columns c JOIN information_schema.tables t \
                 USING (table_schema, table_name) WHERE table_schema = ? AND table_name = ? ORDER BY ordinal_position",
                (t.schema.clone(), t.name.clone()),
            )
            .await
        {
            Ok(c) => c,
            Err(e) => {
                out.push(CheckResult::new(name, &format!("table {t}"), Status::Fail, format!("cannot read its columns: {e}")));
                continue;
            }
        };
        if cols.is_empty() {
            out.push(CheckResult::new(name, &format!("table {t}"), Status::Fail, "not found (or not visible to the user); create it (migrations/mysql) or fix table.include.list"));
            continue;
        }
        let names: Vec<&str> = cols.iter().map(|(c, _)| c.as_str()).collect();
        let missing: Vec<&str> = needed
            .iter()
            .copied()
            .filter(|c| !names.contains(c))
            .collect();
        if missing.is_empty() {
            out.push(CheckResult::new(
                name,
                &format!("table {t}"),
                Status::Pass,
                format!("{} columns, engine {}", names.len(), cols[0].1),
            ));
        } else {
            out.push(CheckResult::new(name, &format!("table {t}"), Status::Fail, format!(
                "lacks column(s) {} that the router reads; add them or set the table.field.event.* / route.by.field options", missing.join(", ")
            )));
        }
    }
    out
}
