//! Clean-up of what an earlier, killed run left behind: peer processes (from their pid files
//! under the work directory), lane databases and replication slots (`ob<digits>_...`, which
//! would pin WAL), and benchmark topics. `scripts/bench.sh` holds a lock, so anything of
//! that shape found at start-up belongs to no running harness.

use std::path::Path;
use std::time::Duration;

use anyhow::Result;
use mysql_async::prelude::Queryable;
use rdkafka::admin::{AdminClient, AdminOptions};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;

/// The pid file a running peer leaves in its lane directory.
pub const PID_FILE: &str = "peer.pid";

fn is_lane_name(name: &str) -> bool {
    let Some(rest) = name.strip_prefix("ob") else {
        return false;
    };
    let digits = rest.chars().take_while(char::is_ascii_digit).count();
    digits > 0
        && (rest[digits..].starts_with("_mariadb_") || rest[digits..].starts_with("_postgres_"))
}

/// Kills peers whose pid files remain under `work` (only processes that are outboxd or Kafka
/// Connect), and removes the files.
pub fn kill_stale_peers(work: &Path) {
    let Ok(dirs) = std::fs::read_dir(work) else {
        return;
    };
    for dir in dirs.flatten() {
        let file = dir.path().join(PID_FILE);
        let Ok(pid) = std::fs::read_to_string(&file) else {
            continue;
        };
        let pid = pid.trim();
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let cmdline = String::from_utf8_lossy(&cmdline);
        if cmdline.contains("ConnectStandalone") || cmdline.contains("outboxd") {
            eprintln!("[bench] killing peer pid {pid} left by an earlier run");
            let _ = std::process::Command::new("kill")
                .args(["-KILL", pid])
                .status();
        }
        let _ = std::fs::remove_file(&file);
    }
}

/// Drops lane databases, slots and topics left by earlier runs.
pub async fn drop_stale_objects() -> Result<()> {
    let mut conn = crate::env::mariadb_connect().await?;
    let dbs: Vec<String> = conn.query("SHOW DATABASES LIKE 'ob%'").await?;
    for db in dbs.into_iter().filter(|d| is_lane_name(d)) {
        eprintln!("[bench] dropping MariaDB database {db} left by an earlier run");
        conn.query_drop(format!("DROP DATABASE IF EXISTS {db}"))
            .await?;
    }
    let pg = crate::env::pg_connect("outboxd").await?;
    for row in pg
        .query(
            "SELECT slot_name, active_pid FROM pg_replication_slots",
            &[],
        )
        .await?
    {
        let slot: String = row.get(0);
        let active: Option<i32> = row.get(1);
        if is_lane_name(&slot) {
            if let Some(pid) = active {
                pg.execute("SELECT pg_terminate_backend($1)", &[&pid])
                    .await?;
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            eprintln!("[bench] dropping replication slot {slot} left by an earlier run");
            let _ = pg
                .execute("SELECT pg_drop_replication_slot($1)", &[&slot])
                .await;
        }
    }
    for row in pg.query("SELECT datname FROM pg_database", &[]).await? {
        let db: String = row.get(0);
        if is_lane_name(&db) {
            eprintln!("[bench] dropping PostgreSQL database {db} left by an earlier run");
            pg.batch_execute(&format!("DROP DATABASE IF EXISTS {db} WITH (FORCE)"))
                .await?;
        }
    }
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", crate::env::kafka_bootstrap())
        .create()?;
    let md = admin
        .inner()
        .fetch_metadata(None, Duration::from_secs(10))?;
    let stale: Vec<String> = md
        .topics()
        .iter()
        .map(|t| t.name().to_string())
        .filter(|t| {
            t.starts_with("bench.")
                || t.strip_prefix("outboxd.checkpoints.")
                    .is_some_and(is_lane_name)
        })
        .collect();
    if !stale.is_empty() {
        eprintln!(
            "[bench] deleting {} topics left by earlier runs",
            stale.len()
        );
        let names: Vec<&str> = stale.iter().map(String::as_str).collect();
        admin.delete_topics(&names, &AdminOptions::new()).await?;
    }
    Ok(())
}
