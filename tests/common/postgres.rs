//! A throw-away PostgreSQL database with the project's outbox migration applied, its own
//! replication slot and publication names, dropped (slots first: they pin WAL) on drop.
//!
//! Each test gets database `<prefix>_<unique>`; slot and publication are named after it.
//! The outbox table is owned by the relay's role so that outboxd's default
//! `publication_autocreate = "filtered"` can create the publication itself (creating a
//! publication FOR TABLE needs ownership of the table).
//!
//! Payload column: the shared suite compares record values byte for byte with what the test
//! wrote, and `jsonb` stores a normalised form (`{"a":1}` comes back as `{"a": 1}`, keys
//! reordered), so [`Postgres::new`] turns the migration's `jsonb` payload into `json`, which
//! keeps the text verbatim. [`Postgres::with_jsonb`] keeps the migration as it is, for the
//! tests about `jsonb` (TOAST, normalisation).

use std::str::FromStr;
use std::time::Duration;

use tokio_postgres::{Client, Config, NoTls};

use super::OutboxEvent;

/// Admin URL of the test server (creates databases, writes rows).
pub fn admin_url() -> String {
    std::env::var("OUTBOXD_TEST_PG_ADMIN_URL")
        .unwrap_or_else(|_| "postgres://outboxd_admin:admin-secret@127.0.0.1:35432/outboxd".into())
}

/// The relay role's settings: (host, port, user, password).
pub fn replication_user() -> (String, u16, String, String) {
    let url = std::env::var("OUTBOXD_TEST_PG_URL")
        .unwrap_or_else(|_| "postgres://outboxd:outboxd-secret@127.0.0.1:35432/outboxd".into());
    let cfg = Config::from_str(&url).expect("OUTBOXD_TEST_PG_URL");
    let host = match cfg.get_hosts().first() {
        Some(tokio_postgres::config::Host::Tcp(h)) => h.clone(),
        _ => "127.0.0.1".into(),
    };
    (
        host,
        cfg.get_ports().first().copied().unwrap_or(5432),
        cfg.get_user().unwrap_or("outboxd").to_string(),
        String::from_utf8_lossy(cfg.get_password().unwrap_or_default()).into_owned(),
    )
}

/// An error with the server's message.
pub fn db_error(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(d) => format!("{} (SQLSTATE {})", d.message(), d.code().code()),
        None => e.to_string(),
    }
}

/// Connects as the admin to database `db`.
pub async fn admin_connect(db: &str) -> Client {
    try_admin_connect(db)
        .await
        .unwrap_or_else(|e| panic!("connect to PostgreSQL ({e}): run scripts/services.sh up"))
}

/// [`admin_connect`], returning the error instead of panicking.
pub async fn try_admin_connect(db: &str) -> Result<Client, String> {
    let mut cfg = Config::from_str(&admin_url()).expect("OUTBOXD_TEST_PG_ADMIN_URL");
    cfg.dbname(db);
    let (client, conn) = cfg.connect(NoTls).await.map_err(|e| db_error(&e))?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    Ok(client)
}

/// An admin connection to `db` on the plaintext server or (`tls`) on `postgres-tls`.
pub async fn admin_connect_on(tls: bool, db: &str) -> Client {
    if tls {
        super::tls::postgres_admin_connect(db).await
    } else {
        admin_connect(db).await
    }
}

/// One test's database.
pub struct Postgres {
    /// Admin connection to the test database.
    pub client: Client,
    /// Database name (also the test's name, slot and publication).
    pub db: String,
    /// Replication slot name.
    pub slot: String,
    /// Publication name.
    pub publication: String,
    /// Extra `[connectors.source]` lines.
    pub source_extra: String,
    /// outboxd creates the publication (`filtered`), or the test did (`disabled`).
    pub autocreate: &'static str,
    /// The relay's (host, port, user, password) for the connector config.
    pub relay: (String, u16, String, String),
    /// On the TLS-only server (`postgres-tls`).
    pub tls: bool,
}

impl Postgres {
    /// Database `<prefix>_<unique>` with the migration applied and a `json` payload column.
    pub async fn new(prefix: &str) -> Postgres {
        let db = Self::create(prefix).await;
        db.exec("ALTER TABLE outbox_events ALTER COLUMN payload TYPE json USING payload::json")
            .await;
        db
    }

    /// Database `<prefix>_<unique>` with `migrations/postgres/001_outbox.sql` exactly
    /// (`jsonb` payload).
    pub async fn with_jsonb(prefix: &str) -> Postgres {
        Self::create(prefix).await
    }

    /// Like [`Postgres::new`], with a publication created by the admin that publishes
    /// `publish` (e.g. `insert, update, delete`) and `publication_autocreate = "disabled"`.
    pub async fn with_publication(prefix: &str, publish: &str) -> Postgres {
        let mut db = Self::new(prefix).await;
        db.exec(&format!(
            "CREATE PUBLICATION {} FOR TABLE outbox_events WITH (publish = '{publish}')",
            db.publication
        ))
        .await;
        db.autocreate = "disabled";
        db
    }

    /// Like [`Postgres::new`] on the TLS-only server (`postgres-tls`); the relay's
    /// settings name it as `localhost` (the certificate's name), with no TLS settings yet.
    pub async fn new_tls(prefix: &str) -> Postgres {
        let db = Self::create_on(prefix, true).await;
        db.exec("ALTER TABLE outbox_events ALTER COLUMN payload TYPE json USING payload::json")
            .await;
        db
    }

    async fn create(prefix: &str) -> Postgres {
        Self::create_on(prefix, false).await
    }

    async fn create_on(prefix: &str, tls: bool) -> Postgres {
        let db = super::unique(prefix);
        let admin = admin_connect_on(tls, "outboxd").await;
        // One statement per call: CREATE DATABASE cannot run in a (implicit) transaction.
        for sql in [
            format!("CREATE DATABASE {db}"),
            format!("GRANT CONNECT, CREATE ON DATABASE {db} TO outboxd"),
        ] {
            admin
                .batch_execute(&sql)
                .await
                .unwrap_or_else(|e| panic!("{sql}: {}", db_error(&e)));
        }
        drop(admin);
        let client = admin_connect_on(tls, &db).await;
        let ddl = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/migrations/postgres/001_outbox.sql"
        ))
        .unwrap();
        client
            .batch_execute(&ddl)
            .await
            .expect("apply migrations/postgres/001_outbox.sql");
        let (_, _, user, _) = replication_user();
        client
            .batch_execute(&format!("ALTER TABLE outbox_events OWNER TO {user}"))
            .await
            .unwrap();
        let relay = if tls {
            let (host, port) = super::tls::postgres_tls_server();
            (host, port, user, super::tls::RELAY_PASSWORD.to_string())
        } else {
            replication_user()
        };
        Postgres {
            client,
            slot: db.clone(),
            publication: db.clone(),
            db,
            source_extra: String::new(),
            autocreate: "filtered",
            relay,
            tls,
        }
    }

    /// Runs SQL statements in the test database (as the admin).
    pub async fn exec(&self, sql: &str) {
        self.client
            .batch_execute(sql)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {}", db_error(&e)));
    }

    /// `public.outbox_events`.
    pub fn outbox_table(&self) -> String {
        "public.outbox_events".into()
    }

    /// Inserts `events` into `table` in one transaction; commits unless `rollback`.
    pub async fn insert_into(&self, table: &str, events: &[OutboxEvent], rollback: bool) {
        self.exec("BEGIN").await;
        insert_events(&self.client, table, events).await;
        self.exec(if rollback { "ROLLBACK" } else { "COMMIT" })
            .await;
    }

    /// `pg_logical_emit_message(transactional, prefix, content)`; returns the LSN it returns
    /// (`16/B374D848`), which is the LSN pgoutput gives the message.
    pub async fn emit_message(&self, transactional: bool, prefix: &str, content: &str) -> String {
        self.client
            .query_one(
                "SELECT pg_logical_emit_message($1, $2::text, $3::text)::text",
                &[&transactional, &prefix, &content],
            )
            .await
            .expect("pg_logical_emit_message")
            .get(0)
    }

    /// The slot's `(confirmed_flush_lsn, restart_lsn, active_pid)`, LSNs as byte offsets;
    /// `None` when the slot does not exist.
    pub async fn slot_state(&self) -> Option<(i64, i64, Option<i32>)> {
        self.client
            .query_opt(
                "SELECT (confirmed_flush_lsn - '0/0'::pg_lsn)::int8, \
                        (restart_lsn - '0/0'::pg_lsn)::int8, active_pid \
                 FROM pg_replication_slots WHERE slot_name = $1",
                &[&self.slot],
            )
            .await
            .unwrap()
            .map(|r| (r.get(0), r.get(1), r.get(2)))
    }

    /// `pg_current_wal_lsn()` as a byte offset.
    pub async fn current_wal(&self) -> i64 {
        self.client
            .query_one("SELECT (pg_current_wal_lsn() - '0/0'::pg_lsn)::int8", &[])
            .await
            .unwrap()
            .get(0)
    }

    /// Waits until the slot exists and is streaming (a relay holds it).
    pub async fn wait_slot_active(&self, timeout: Duration) {
        let deadline = std::time::Instant::now() + timeout;
        while std::time::Instant::now() < deadline {
            if let Some((_, _, Some(_))) = self.slot_state().await {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("slot {} not active after {timeout:?}", self.slot);
    }
}

/// `pg_current_wal_insert_lsn()` on `client`, as a byte offset: inside a transaction, a
/// lower bound of where its next record (e.g. its commit record) starts.
pub async fn wal_insert_lsn(client: &Client) -> i64 {
    client
        .query_one(
            "SELECT (pg_current_wal_insert_lsn() - '0/0'::pg_lsn)::int8",
            &[],
        )
        .await
        .unwrap()
        .get(0)
}

/// Inserts outbox rows with a multi-row INSERT per 500 events (text parameters cast in SQL).
pub async fn insert_events(client: &Client, table: &str, events: &[OutboxEvent]) {
    try_insert_events(client, table, events)
        .await
        .unwrap_or_else(|e| panic!("insert outbox rows: {e}"));
}

/// [`insert_events`], returning the server's error instead of panicking.
pub async fn try_insert_events(
    client: &Client,
    table: &str,
    events: &[OutboxEvent],
) -> Result<(), String> {
    for chunk in events.chunks(500) {
        let mut sql = format!(
            "INSERT INTO {table} (id, aggregate_type, aggregate_id, event_type, payload, idempotency_key) VALUES "
        );
        let mut params: Vec<Option<&str>> = Vec::with_capacity(chunk.len() * 6);
        for (i, e) in chunk.iter().enumerate() {
            if i > 0 {
                sql.push(',');
            }
            let b = i * 6;
            sql.push_str(&format!(
                "(${}::text::uuid, ${}::text, ${}::text, ${}::text, ${}::text::json, ${}::text)",
                b + 1,
                b + 2,
                b + 3,
                b + 4,
                b + 5,
                b + 6,
            ));
            params.push(Some(e.id.as_str()));
            params.push(Some(e.aggregate_type.as_str()));
            params.push(Some(e.aggregate_id.as_str()));
            params.push(Some(e.event_type.as_str()));
            params.push(e.payload.as_deref());
            params.push(Some(e.id.as_str()));
        }
        let refs: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> = params
            .iter()
            .map(|p| p as &(dyn tokio_postgres::types::ToSql + Sync))
            .collect();
        client
            .execute(&sql, &refs)
            .await
            .map_err(|e| db_error(&e))?;
    }
    Ok(())
}

impl super::suite::SourceDb for Postgres {
    fn name(&self) -> &str {
        &self.db
    }

    fn source_toml(&self, table: &str) -> String {
        let (host, port, user, password) = &self.relay;
        format!(
            r#"tables = ["{table}"]

[connectors.source]
kind = "postgres"
host = "{host}"
port = {port}
user = "{user}"
password = "{password}"
dbname = "{db}"
slot_name = "{slot}"
publication_name = "{publication}"
publication_autocreate = "{autocreate}"
status_interval = "1s"
{extra}
"#,
            db = self.db,
            slot = self.slot,
            publication = self.publication,
            autocreate = self.autocreate,
            extra = self.source_extra,
        )
    }

    fn outbox_table(&self) -> String {
        Postgres::outbox_table(self)
    }

    async fn insert(&self, events: &[OutboxEvent], rollback: bool) {
        self.insert_into("outbox_events", events, rollback).await;
    }

    async fn create_order_with_outbox(
        &self,
        customer_id: i64,
        items: &[(&str, i32, i64)],
        events: &[OutboxEvent],
    ) {
        self.exec("BEGIN").await;
        let total: i64 = items.iter().map(|(_, q, p)| i64::from(*q) * p).sum();
        let order_id: i64 = self
            .client
            .query_one(
                "INSERT INTO orders (customer_id, status, total_cents) VALUES ($1, 'NEW', $2) \
                 RETURNING id",
                &[&customer_id, &total],
            )
            .await
            .unwrap()
            .get(0);
        for (sku, qty, price) in items {
            self.client
                .execute(
                    "INSERT INTO order_items (order_id, sku, qty, price_cents) VALUES ($1, $2, $3, $4)",
                    &[&order_id, sku, qty, price],
                )
                .await
                .unwrap();
        }
        insert_events(&self.client, "outbox_events", events).await;
        self.exec("COMMIT").await;
    }

    async fn update_event(&self, id: &str) {
        self.client
            .execute(
                "UPDATE outbox_events SET status = 'PUBLISHED' WHERE id = $1::text::uuid",
                &[&id],
            )
            .await
            .unwrap();
    }

    async fn delete_event(&self, id: &str) {
        self.client
            .execute(
                "DELETE FROM outbox_events WHERE id = $1::text::uuid",
                &[&id],
            )
            .await
            .unwrap();
    }
}

impl Drop for Postgres {
    /// Best effort: terminate whoever still streams from the database's slots, drop them
    /// (a forgotten slot pins WAL forever), then drop the database.
    fn drop(&mut self) {
        let db = self.db.clone();
        let tls = self.tls;
        super::run_to_end(async move {
            let admin = admin_connect_on(tls, "outboxd").await;
            for _ in 0..50 {
                let _ = admin
                    .execute(
                        "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots \
                             WHERE database = $1 AND active_pid IS NOT NULL",
                        &[&db],
                    )
                    .await;
                let _ = admin
                    .execute(
                        "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots \
                             WHERE database = $1 AND NOT active",
                        &[&db],
                    )
                    .await;
                let left: i64 = admin
                    .query_one(
                        "SELECT count(*) FROM pg_replication_slots WHERE database = $1",
                        &[&db],
                    )
                    .await
                    .map(|r| r.get(0))
                    .unwrap_or(0);
                if left == 0 {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            if let Err(e) = admin
                .batch_execute(&format!("DROP DATABASE IF EXISTS {db} WITH (FORCE)"))
                .await
            {
                eprintln!("cleanup: DROP DATABASE {db}: {e}");
            }
        });
    }
}
