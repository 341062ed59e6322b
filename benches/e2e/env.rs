//! Service settings: the `OUTBOXD_TEST_*` variables `scripts/services.sh env` prints, with
//! the same defaults the integration tests use, and admin connections built from them.

use anyhow::{Context, Result};

fn var(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_string())
}

/// Kafka bootstrap servers (`OUTBOXD_KAFKA_BOOTSTRAP`).
pub fn kafka_bootstrap() -> String {
    var("OUTBOXD_KAFKA_BOOTSTRAP", "127.0.0.1:39092")
}

/// The pid `scripts/services.sh` recorded for `service` (`kafka`, `mariadb`, `postgres`) in
/// `.state/<service>/pid`; `None` when the file is missing or not a number (services started
/// some other way: their CPU is then not reported).
pub fn service_pid(service: &str) -> Option<u32> {
    let path = crate::peers::repo_root()
        .join(".state")
        .join(service)
        .join("pid");
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// MariaDB admin URL, without a database (`OUTBOXD_TEST_MYSQL_ADMIN_URL`).
pub fn mariadb_admin_url() -> String {
    var(
        "OUTBOXD_TEST_MYSQL_ADMIN_URL",
        "mysql://outboxd_admin:admin-secret@127.0.0.1:33306",
    )
}

/// PostgreSQL admin URL (`OUTBOXD_TEST_PG_ADMIN_URL`); its database is replaced per lane.
pub fn pg_admin_url() -> String {
    var(
        "OUTBOXD_TEST_PG_ADMIN_URL",
        "postgres://outboxd_admin:admin-secret@127.0.0.1:35432/outboxd",
    )
}

/// The parts of a `scheme://user:password@host:port[/db]` URL: (user, password, host, port).
pub fn url_parts(url: &str) -> Result<(String, String, String, u16)> {
    let rest = url.split_once("://").context("URL without scheme")?.1;
    let (auth, hostpart) = rest.rsplit_once('@').context("URL without user")?;
    let (user, password) = auth.split_once(':').unwrap_or((auth, ""));
    let hostport = hostpart.split('/').next().unwrap_or(hostpart);
    let (host, port) = hostport.rsplit_once(':').context("URL without port")?;
    Ok((
        user.to_string(),
        password.to_string(),
        host.to_string(),
        port.parse().context("port")?,
    ))
}

/// An admin connection to PostgreSQL database `db`.
pub async fn pg_connect(db: &str) -> Result<tokio_postgres::Client> {
    use std::str::FromStr;
    let mut cfg = tokio_postgres::Config::from_str(&pg_admin_url())?;
    cfg.dbname(db);
    let (client, conn) = cfg
        .connect(tokio_postgres::NoTls)
        .await
        .context("connect to PostgreSQL (scripts/services.sh up)")?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    Ok(client)
}

/// An admin connection to MariaDB (no default database).
pub async fn mariadb_connect() -> Result<mysql_async::Conn> {
    let opts = mysql_async::Opts::from_url(&mariadb_admin_url())?;
    mysql_async::Conn::new(opts)
        .await
        .context("connect to MariaDB (scripts/services.sh up)")
}
