//! A throw-away MariaDB database with the project's outbox migration applied, dropped on
//! drop (left behind, each suite run piled up ~0.5 GB of test databases).

use mysql_async::prelude::*;
use mysql_async::{Opts, Pool};

use super::OutboxEvent;

/// Admin URL of the test server (creates databases, writes rows).
pub fn admin_url() -> String {
    std::env::var("OUTBOXD_TEST_MYSQL_ADMIN_URL")
        .unwrap_or_else(|_| "mysql://outboxd_admin:admin-secret@127.0.0.1:33306".into())
}

/// The replication user's settings: (host, port, user, password).
pub fn replication_user() -> (String, u16, String, String) {
    let url = std::env::var("OUTBOXD_TEST_MYSQL_URL")
        .unwrap_or_else(|_| "mysql://outboxd:outboxd-secret@127.0.0.1:33306".into());
    let opts = Opts::from_url(&url).expect("OUTBOXD_TEST_MYSQL_URL");
    (
        opts.ip_or_hostname().to_string(),
        opts.tcp_port(),
        opts.user().unwrap_or("outboxd").to_string(),
        opts.pass().unwrap_or("").to_string(),
    )
}

/// One test's database.
pub struct MariaDb {
    pub pool: Pool,
    pub db: String,
    /// The admin's connection options (no database) on the server holding it.
    admin: Opts,
    /// The relay's (host, port, user, password) for the connector config.
    pub relay: (String, u16, String, String),
    /// Extra lines after `[connectors.source]` (e.g. a `[connectors.source.tls]` table).
    pub source_extra: String,
}

impl MariaDb {
    /// Creates database `<prefix>_<unique>` with `migrations/mysql/001_outbox.sql` applied.
    pub async fn new(prefix: &str) -> MariaDb {
        let admin = Opts::from_url(&admin_url()).unwrap();
        Self::create(prefix, admin, replication_user()).await
    }

    /// Like [`MariaDb::new`] on the TLS-only server (`mariadb-tls`); the relay's settings
    /// name it as `localhost` (the certificate's name), with no TLS settings yet.
    pub async fn new_tls(prefix: &str) -> MariaDb {
        let (host, port) = super::tls::mariadb_tls_server();
        let relay = (
            host,
            port,
            "outboxd".into(),
            super::tls::RELAY_PASSWORD.into(),
        );
        Self::create(prefix, super::tls::mariadb_admin_opts(None), relay).await
    }

    async fn create(
        prefix: &str,
        admin_opts: Opts,
        relay: (String, u16, String, String),
    ) -> MariaDb {
        let db = super::unique(prefix);
        let admin = Pool::new(admin_opts.clone());
        let mut c = admin
            .get_conn()
            .await
            .expect("connect to MariaDB: run scripts/services.sh up");
        c.query_drop(format!("CREATE DATABASE `{db}` CHARACTER SET utf8mb4"))
            .await
            .unwrap();
        drop(c);
        admin.disconnect().await.unwrap();
        let pool = Pool::new(
            mysql_async::OptsBuilder::from_opts(admin_opts.clone()).db_name(Some(db.clone())),
        );
        let ddl = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/migrations/mysql/001_outbox.sql"
        ))
        .unwrap();
        let mut c = pool.get_conn().await.unwrap();
        c.query_drop(ddl)
            .await
            .expect("apply migrations/mysql/001_outbox.sql");
        drop(c);
        MariaDb {
            pool,
            db,
            admin: admin_opts,
            relay,
            source_extra: String::new(),
        }
    }

    /// Runs SQL statements (`;`-separated is fine) in the test database.
    pub async fn exec(&self, sql: &str) {
        let mut c = self.pool.get_conn().await.unwrap();
        c.query_drop(sql)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
    }

    /// `db.outbox_events`.
    pub fn outbox_table(&self) -> String {
        format!("{}.outbox_events", self.db)
    }

    /// Inserts `events` into `table` (in this database) in one transaction; commits unless
    /// `rollback`.
    pub async fn insert_into(&self, table: &str, events: &[OutboxEvent], rollback: bool) {
        let mut c = self.pool.get_conn().await.unwrap();
        let mut tx = c.start_transaction(Default::default()).await.unwrap();
        insert_events(&mut tx, table, events).await;
        if rollback {
            tx.rollback().await.unwrap();
        } else {
            tx.commit().await.unwrap();
        }
    }
}

impl Drop for MariaDb {
    /// Best effort: drops the database (its rows stay in the binlog, which is all a relay
    /// still reading needs).
    fn drop(&mut self) {
        let db = self.db.clone();
        let admin_opts = self.admin.clone();
        super::run_to_end(async move {
            let admin = Pool::new(admin_opts);
            let dropped = match admin.get_conn().await {
                // Not a day (the default) behind a lock a panicked test left.
                Ok(mut c) => {
                    c.query_drop(format!(
                        "SET SESSION lock_wait_timeout = 10; DROP DATABASE IF EXISTS `{db}`"
                    ))
                    .await
                }
                Err(e) => Err(e),
            };
            if let Err(e) = dropped {
                eprintln!("cleanup: DROP DATABASE {db}: {e}");
            }
            let _ = admin.disconnect().await;
        });
    }
}

/// Inserts outbox rows with a multi-row INSERT per 500 events.
pub async fn insert_events<Q: Queryable>(q: &mut Q, table: &str, events: &[OutboxEvent]) {
    try_insert_events(q, table, events)
        .await
        .expect("insert outbox rows");
}

/// [`insert_events`], returning the server's error instead of panicking.
pub async fn try_insert_events<Q: Queryable>(
    q: &mut Q,
    table: &str,
    events: &[OutboxEvent],
) -> Result<(), String> {
    for chunk in events.chunks(500) {
        let mut sql = format!(
            "INSERT INTO {table} (id, aggregate_type, aggregate_id, event_type, payload, idempotency_key) VALUES "
        );
        let mut params: Vec<mysql_async::Value> = Vec::with_capacity(chunk.len() * 5);
        for (i, e) in chunk.iter().enumerate() {
            if i > 0 {
                sql.push(',');
            }
            sql.push_str("(?, ?, ?, ?, ?, ?)");
            params.push(e.id.clone().into());
            params.push(e.aggregate_type.clone().into());
            params.push(e.aggregate_id.clone().into());
            params.push(e.event_type.clone().into());
            params.push(e.payload.clone().into());
            params.push(e.id.clone().into());
        }
        q.exec_drop(sql, params).await.map_err(|e| e.to_string())?;
    }
    Ok(())
}

impl super::suite::SourceDb for MariaDb {
    fn name(&self) -> &str {
        &self.db
    }

    fn source_toml(&self, table: &str) -> String {
        let (host, port, user, password) = &self.relay;
        format!(
            r#"tables = ["{table}"]

[connectors.source]
kind = "mariadb"
host = "{host}"
port = {port}
user = "{user}"
password = "{password}"
server_id = {server_id}
heartbeat_interval = "1s"
{extra}
"#,
            server_id = super::unique_server_id(),
            extra = self.source_extra,
        )
    }

    fn outbox_table(&self) -> String {
        MariaDb::outbox_table(self)
    }

    async fn insert(&self, events: &[OutboxEvent], rollback: bool) {
        self.insert_into(&MariaDb::outbox_table(self), events, rollback)
            .await;
    }

    async fn create_order_with_outbox(
        &self,
        customer_id: i64,
        items: &[(&str, i32, i64)],
        events: &[OutboxEvent],
    ) {
        let mut c = self.pool.get_conn().await.unwrap();
        let mut tx = c.start_transaction(Default::default()).await.unwrap();
        let total: i64 = items.iter().map(|(_, q, p)| i64::from(*q) * p).sum();
        tx.exec_drop(
            "INSERT INTO orders (customer_id, status, total_cents) VALUES (?, 'NEW', ?)",
            (customer_id, total),
        )
        .await
        .unwrap();
        let order_id = tx.last_insert_id().unwrap();
        for (sku, qty, price) in items {
            tx.exec_drop(
                "INSERT INTO order_items (order_id, sku, qty, price_cents) VALUES (?, ?, ?, ?)",
                (order_id, *sku, *qty, *price),
            )
            .await
            .unwrap();
        }
        insert_events(&mut tx, "outbox_events", events).await;
        tx.commit().await.unwrap();
    }

    async fn update_event(&self, id: &str) {
        let mut c = self.pool.get_conn().await.unwrap();
        c.exec_drop(
            "UPDATE outbox_events SET status = 'PUBLISHED' WHERE id = ?",
            (id,),
        )
        .await
        .unwrap();
    }

    async fn delete_event(&self, id: &str) {
        let mut c = self.pool.get_conn().await.unwrap();
        c.exec_drop("DELETE FROM outbox_events WHERE id = ?", (id,))
            .await
            .unwrap();
    }
}
