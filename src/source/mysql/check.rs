//! MySQL/MariaDB preflight: binary log settings, GTIDs, privileges and the outbox tables.

use mysql_async::prelude::*;

use crate::config::{ConnectorConfig, MysqlSourceConfig, StartPosition};
use crate::requirement::{CheckResult, Status};
use crate::source::check::{step, StoredCheckpoint};
use crate::source::mysql::server::{self, ServerInfo};

/// Runs every MySQL/MariaDB check for connector `cfg` with source `src`; the `stored`
/// checkpoint is read after the binlogs the server still has, and checked against them.
pub async fn check(
    cfg: &ConnectorConfig,
    src: &MysqlSourceConfig,
    stored: &StoredCheckpoint,
) -> Vec<CheckResult> {
    let name = cfg.name.as_str();
    let mut out = Vec::new();
    let Some(mut conn) = step(&mut out, name, "connect", server::connect(src).await) else {
        return out;
    };
    out.push(CheckResult::new(
        name,
        "connect",
        Status::Pass,
        format!("{}:{} as {}", src.host, src.port, src.user),
    ));
    match crate::source::mysql::tls::facts(&mut conn, &src.tls).await {
        Ok(facts) => {
            let names = crate::config::tls::MysqlTlsNames::of(src.format);
            out.push(crate::source::check::tls_result(
                name,
                &facts,
                names.mode,
                names.verify_full,
            ))
        }
        Err(e) => out.push(CheckResult::new(
            name,
            "tls",
            Status::Warn,
            format!("cannot read the session's Ssl_version: {e}"),
        )),
    }
    let Some(info) = step(
        &mut out,
        name,
        "server settings",
        server::server_info(&mut conn, src).await,
    ) else {
        return out;
    };
    out.extend(server::requirements(&info, name, &cfg.tables, src));
    let mode = server::tracking_mode(&info, src);
    let retained = server::retained(&mut conn, src, mode).await;
    let checkpoint = stored.get().ok();
    let gap = match (checkpoint.flatten(), &retained) {
        (Some(cp), Ok(r)) => r.gap(&cp.position),
        (Some(_), Err(f)) => Some(format!(
            "could not compare it with the server's binlogs: {f}"
        )),
        (None, _) => None,
    };
    let fresh = match src.start {
        StartPosition::Current => "starts at the server's current binlog position",
        StartPosition::Earliest => "starts at the oldest binlog the server has",
    };
    out.extend(crate::source::check::checkpoint_result(
        name, checkpoint, gap, fresh,
    ));
    out.extend(privileges(name, &mut conn, &info, src).await);
    out.push(server::binlog_format_changers(&mut conn, name, &info).await);
    tables(name, &mut conn, cfg, src, &info, &mut out).await;
    let _ = conn.disconnect().await;
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

/// The outbox tables: each exists (the same check `run` refuses to start without:
/// [`server::table_not_found`]) with the columns the router reads; and, when the server's
/// `binlog_row_image` is not FULL, whether it can leave one of those columns out
/// ([`server::row_image_check`]), which replaces the general `binlog_row_image` warning.
async fn tables(
    name: &str,
    conn: &mut mysql_async::Conn,
    cfg: &ConnectorConfig,
    src: &MysqlSourceConfig,
    info: &ServerInfo,
    out: &mut Vec<CheckResult>,
) {
    let needed = cfg.router.columns_read();
    let found = match server::outbox_tables(conn, src, &cfg.tables).await {
        Ok(found) => found,
        Err(e) => {
            out.push(CheckResult::new(
                name,
                "tables",
                Status::Fail,
                format!("cannot read the outbox tables' columns: {e}"),
            ));
            return;
        }
    };
    let mut present = Vec::new();
    for (t, facts) in found {
        if let Some(fail) = server::unusable_table(name, &t, facts.as_ref(), src) {
            out.push(fail);
            continue;
        }
        let Some(facts) = facts else {
            continue;
        };
        let names: Vec<&str> = facts.columns.iter().map(|c| c.name.as_str()).collect();
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
                format!("{} columns, engine {}", names.len(), facts.engine),
            ));
        } else {
            out.push(CheckResult::new(name, &format!("table {t}"), Status::Fail, format!(
                "lacks column(s) {} that the router reads; add them or set the table.field.event.* / route.by.field options", missing.join(", ")
            )));
        }
        present.push((t, facts));
    }
    if info.binlog_row_image.eq_ignore_ascii_case("FULL") || present.is_empty() {
        return;
    }
    let strict = match server::strict_sql_mode(conn, src).await {
        Ok(strict) => strict,
        Err(e) => {
            tracing::debug!(error = %e, "cannot read the global sql_mode; taking it as not strict");
            false
        }
    };
    if let Some(image) =
        server::row_image_check(name, &info.binlog_row_image, strict, &present, &needed)
    {
        match out.iter_mut().find(|r| r.name == "binlog_row_image") {
            Some(general) => *general = image,
            None => out.push(image),
        }
    }
}
