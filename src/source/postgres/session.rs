//! The PostgreSQL session: the SQL side (server facts, publication and slot management) over
//! `tokio-postgres`, and the logical replication stream over `pgwire-replication`.
//!
//! # What the stream is asked for
//!
//! `START_REPLICATION SLOT <slot> LOGICAL <start> (proto_version '1', publication_names
//! '<publication>', messages 'true')` (pgwire-replication always asks for messages), with the
//! session settings the value decoder relies on pinned in the startup `options`
//! (`DateStyle=ISO`, `TimeZone=UTC`, `bytea_output=hex`).
//!
//! pgwire-replication parses Begin, Commit and Message itself and forwards every other
//! pgoutput message as the raw `XLogData` payload; the session maps the former to the
//! decoder's types and hands the latter to [`super::pgoutput::decode`].
//!
//! # Where the stream starts, and why the flush LSN lags
//!
//! * With a checkpoint: at the checkpoint LSN. The server starts decoding at
//!   `max(start, confirmed_flush_lsn)` and skips transactions whose commit record starts
//!   before it; the adapter skips them as well, so a slot that replays delivers nothing twice.
//! * Without one: at the slot's `confirmed_flush_lsn` (for a slot created now, its consistent
//!   point: only transactions committed from now on).
//! * After a lost connection: at the last position handed to the pipeline.
//!
//! The flush LSN confirmed to the server (standby status update: write = flush = apply,
//! pgwire-replication reports one applied position) is the last position the pipeline
//! **durably checkpointed** — everything before it acknowledged by Kafka — published to this
//! session on a `watch` channel. It is sent every `status_interval` when it moved, at once when
//! the server asks for a reply, and on idle wakeups. Positions the session merely received are
//! never confirmed, so a crash (or Kafka being down) leaves the slot where a restart must
//! resume; the price is WAL retained for the time between delivery and checkpoint.
//!
//! While the outbox is idle the walsender sends keepalives carrying how far it has read WAL
//! (it does so whenever our confirmed position is behind it). The adapter turns those, between
//! transactions, into [`crate::event::SourceEvent::Progress`]; once checkpointed they are
//! confirmed, so WAL written to other tables does not stay pinned by an idle outbox.
//!
//! # Publication: INSERTs only
//!
//! A publication outboxd creates publishes INSERTs only (`WITH (publish = 'insert')`), in
//! `filtered` mode for the outbox tables only: UPDATEs and DELETEs of outbox rows never reach
//! outboxd, so `table.op.invalid.behavior` has nothing to act on (the insert-then-delete
//! cleanup pattern costs nothing). A publication the operator created that also publishes
//! UPDATE/DELETE works too: those changes then go to the router, which drops DELETEs and
//! applies `table.op.invalid.behavior` to UPDATEs, as on MySQL.
//!
//! # Server version
//!
//! PostgreSQL 14 or later: pgwire-replication always asks pgoutput for logical decoding
//! messages (`messages 'true'`), an option PostgreSQL 14 introduced.
//!
//! # Errors
//!
//! Transient (reconnect with backoff from the last handed-on position): connection lost,
//! server restarting, a slot still held by our own previous session. Definite (the connector
//! stops with what to change): `wal_level` not logical, a role without `REPLICATION`, no free
//! slot, a slot held by another process (named by pid), a missing outbox table or
//! publication that may not be created, a slot for another plugin or database, lost WAL,
//! undecodable data.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use pgwire_replication::{ReplicationClient, ReplicationConfig, ReplicationEvent, TlsConfig};
use tokio::sync::{mpsc, watch};
use tokio_postgres::error::SqlState;

use super::adapter::PgOutboxAdapter;
use super::pgoutput::{self, Begin, Commit, LogicalMessage, PgOutputMessage};
use crate::config::{PostgresSourceConfig, PublicationAutocreate};
use crate::error::Failure;
use crate::event::{SourceEvent, TableName};
use crate::health::{ConnectorState, Health};
use crate::metrics as m;
use crate::position::{Lsn, SourcePosition};

/// How long a slot held by another process is waited for before that is a definite error
/// (a relay restarted right after `kill -9` finds its old walsender still exiting).
pub const SLOT_BUSY_WAIT: Duration = Duration::from_secs(10);
/// Longest wait between reconnection attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// Events buffered between the replication worker and the session.
const REPLICATION_BUFFER: usize = 1024;
/// Session settings the value decoder relies on.
const SESSION_OPTIONS: &str =
    "-c datestyle=ISO,YMD -c timezone=UTC -c bytea_output=hex -c extra_float_digits=3";

/// What the server told us about itself and our role.
#[derive(Debug, Clone)]
pub struct ServerInfo {
    /// `SELECT version()`.
    pub version: String,
    /// `server_version_num`.
    pub version_num: i32,
    /// `wal_level`.
    pub wal_level: String,
    /// `max_replication_slots`.
    pub max_replication_slots: i64,
    /// Slots that exist (any database).
    pub slots_used: i64,
    /// `max_wal_senders`.
    pub max_wal_senders: i64,
    /// `current_user`.
    pub user: String,
    /// The role has `REPLICATION`.
    pub rolreplication: bool,
    /// The role is a superuser.
    pub rolsuper: bool,
}

/// A row of `pg_replication_slots`.
#[derive(Debug, Clone)]
pub struct SlotInfo {
    /// Output plugin (`pgoutput`); `None` for a physical slot.
    pub plugin: Option<String>,
    /// `logical` or `physical`.
    pub slot_type: String,
    /// Database of a logical slot.
    pub database: Option<String>,
    /// PID of the process streaming from it, if any.
    pub active_pid: Option<i32>,
    /// Position confirmed by the consumer.
    pub confirmed_flush_lsn: Option<Lsn>,
    /// Oldest WAL the slot still needs.
    pub restart_lsn: Option<Lsn>,
    /// `reserved`, `extended`, `unreserved` or `lost`.
    pub wal_status: Option<String>,
}

/// Quotes an SQL identifier.
pub fn quote_ident(s: &str) -> String {
    format!("\"{}\"", s.replace('"', "\"\""))
}

fn quote_table(t: &TableName) -> String {
    format!("{}.{}", quote_ident(&t.schema), quote_ident(&t.name))
}

fn where_(cfg: &PostgresSourceConfig) -> String {
    format!("{}:{}/{}", cfg.host, cfg.port, cfg.dbname)
}

/// Opens an ordinary SQL connection with the connector's credentials.
pub async fn connect(cfg: &PostgresSourceConfig) -> Result<tokio_postgres::Client, Failure> {
    let mut pg = tokio_postgres::Config::new();
    pg.host(&cfg.host)
        .port(cfg.port)
        .user(&cfg.user)
        .password(cfg.password.expose())
        .dbname(&cfg.dbname)
        .application_name("outboxd")
        .connect_timeout(cfg.connect_timeout);
    let connecting = pg.connect(tokio_postgres::NoTls);
    let (client, connection) = match tokio::time::timeout(cfg.connect_timeout, connecting).await {
        Err(_) => {
            return Err(Failure::transient(format!(
                "connecting to PostgreSQL at {} timed out after {:?}",
                where_(cfg),
                cfg.connect_timeout
            )))
        }
        Ok(Err(e)) => return Err(classify_sql(&e, cfg)),
        Ok(Ok(c)) => c,
    };
    tokio::spawn(async move {
        if let Err(e) = connection.await {
            tracing::debug!("PostgreSQL SQL connection ended: {e}");
        }
    });
    Ok(client)
}

/// Classifies a tokio-postgres error; never includes the password.
pub fn classify_sql(e: &tokio_postgres::Error, cfg: &PostgresSourceConfig) -> Failure {
    let Some(db) = e.as_db_error() else {
        return Failure::transient(format!("PostgreSQL at {}: {e}", where_(cfg)));
    };
    let code = db.code();
    if *code == SqlState::INVALID_PASSWORD || *code == SqlState::INVALID_AUTHORIZATION_SPECIFICATION
    {
        Failure::definite(format!(
            "PostgreSQL at {} refused user {:?}: {}; check database.user / database.password \
             and pg_hba.conf",
            where_(cfg),
            cfg.user,
            db.message()
        ))
    } else if *code == SqlState::INVALID_CATALOG_NAME {
        Failure::definite(format!(
            "PostgreSQL at {}:{}: {}; check database.dbname",
            cfg.host,
            cfg.port,
            db.message()
        ))
    } else if *code == SqlState::INSUFFICIENT_PRIVILEGE {
        Failure::definite(format!(
            "PostgreSQL at {}: user {:?} lacks a privilege: {}",
            where_(cfg),
            cfg.user,
            db.message()
        ))
    } else {
        Failure::transient(format!(
            "PostgreSQL at {}: {} (SQLSTATE {})",
            where_(cfg),
            db.message(),
            code.code()
        ))
    }
}

fn parse_lsn(s: Option<String>) -> Result<Option<Lsn>, Failure> {
    s.map(|s| {
        s.parse::<Lsn>()
            .map_err(|e| Failure::definite(format!("the server sent an unreadable LSN: {e}")))
    })
    .transpose()
}

/// Reads the server facts the relay depends on.
pub async fn server_info(
    client: &tokio_postgres::Client,
    cfg: &PostgresSourceConfig,
) -> Result<ServerInfo, Failure> {
    let row = client
        .query_one(
            "SELECT version(), current_setting('server_version_num')::int4, \
                    current_setting('wal_level'), \
                    current_setting('max_replication_slots')::int8, \
                    (SELECT count(*) FROM pg_replication_slots)::int8, \
                    current_setting('max_wal_senders')::int8, \
                    current_user::text, r.rolreplication, r.rolsuper \
             FROM pg_roles r WHERE r.rolname = current_user",
            &[],
        )
        .await
        .map_err(|e| classify_sql(&e, cfg))?;
    Ok(ServerInfo {
        version: row.get(0),
        version_num: row.get(1),
        wal_level: row.get(2),
        max_replication_slots: row.get(3),
        slots_used: row.get(4),
        max_wal_senders: row.get(5),
        user: row.get(6),
        rolreplication: row.get(7),
        rolsuper: row.get(8),
    })
}

/// `wal_level` and the role's `REPLICATION`, as definite failures saying what to change.
pub fn require_streamable(info: &ServerInfo) -> Result<(), Failure> {
    if info.wal_level != "logical" {
        return Err(Failure::definite(format!(
            "wal_level is {:?}; logical replication needs wal_level = logical (ALTER SYSTEM SET \
             wal_level = logical, then restart PostgreSQL)",
            info.wal_level
        )));
    }
    if !info.rolreplication && !info.rolsuper {
        return Err(Failure::definite(format!(
            "role {:?} lacks the REPLICATION attribute that logical replication needs; run \
             ALTER ROLE {} REPLICATION",
            info.user,
            quote_ident(&info.user)
        )));
    }
    Ok(())
}

/// Fails definitely when an outbox table does not exist.
pub async fn require_tables(
    client: &tokio_postgres::Client,
    cfg: &PostgresSourceConfig,
    tables: &[TableName],
) -> Result<(), Failure> {
    for t in tables {
        let found = client
            .query_opt(
                "SELECT 1 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
                 WHERE n.nspname = $1 AND c.relname = $2 AND c.relkind IN ('r', 'p')",
                &[&t.schema, &t.name],
            )
            .await
            .map_err(|e| classify_sql(&e, cfg))?;
        if found.is_none() {
            return Err(Failure::definite(format!(
                "outbox table {t} not found in database {:?}; create it (migrations/postgres) or \
                 fix `tables` / table.include.list",
                cfg.dbname
            )));
        }
    }
    Ok(())
}

/// A publication as the catalog describes it.
#[derive(Debug, Clone)]
pub struct PublicationInfo {
    /// Publishes INSERTs.
    pub pubinsert: bool,
    /// Publishes UPDATEs.
    pub pubupdate: bool,
    /// Publishes DELETEs.
    pub pubdelete: bool,
    /// `FOR ALL TABLES`.
    pub all_tables: bool,
    /// Tables it covers.
    pub tables: HashSet<TableName>,
}

/// Reads publication `name`, if it exists.
pub async fn publication_info(
    client: &tokio_postgres::Client,
    cfg: &PostgresSourceConfig,
    name: &str,
) -> Result<Option<PublicationInfo>, Failure> {
    let Some(row) = client
        .query_opt(
            "SELECT pubinsert, pubupdate, pubdelete, puballtables FROM pg_publication \
             WHERE pubname = $1",
            &[&name],
        )
        .await
        .map_err(|e| classify_sql(&e, cfg))?
    else {
        return Ok(None);
    };
    let rows = client
        .query(
            "SELECT schemaname::text, tablename::text FROM pg_publication_tables \
             WHERE pubname = $1",
            &[&name],
        )
        .await
        .map_err(|e| classify_sql(&e, cfg))?;
    Ok(Some(PublicationInfo {
        pubinsert: row.get(0),
        pubupdate: row.get(1),
        pubdelete: row.get(2),
        all_tables: row.get(3),
        tables: rows
            .iter()
            .map(|r| TableName::new(r.get::<_, String>(0), r.get::<_, String>(1)))
            .collect(),
    }))
}

/// The statement that creates the publication for `tables` (Filtered) or all tables.
pub fn create_publication_sql(
    cfg: &PostgresSourceConfig,
    tables: &[TableName],
    all_tables: bool,
) -> String {
    let target = if all_tables {
        "ALL TABLES".to_string()
    } else {
        format!(
            "TABLE {}",
            tables
                .iter()
                .map(quote_table)
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    format!(
        "CREATE PUBLICATION {} FOR {target} WITH (publish = 'insert')",
        quote_ident(&cfg.publication_name)
    )
}

fn publication_denied(cfg: &PostgresSourceConfig, sql: &str, e: &tokio_postgres::Error) -> Failure {
    let why = e
        .as_db_error()
        .map(|d| d.message().to_string())
        .unwrap_or_else(|| e.to_string());
    Failure::definite(format!(
        "publication {:?} is missing or incomplete and user {:?} could not fix it ({why}); \
         FOR TABLE needs ownership of the tables (FOR ALL TABLES a superuser): have the table \
         owner run `{sql}`, or GRANT the owner role to {:?}",
        cfg.publication_name, cfg.user, cfg.user
    ))
}

/// Uses the configured publication, creating it (or adding missing outbox tables to it) as
/// `publication_autocreate` allows.
pub async fn ensure_publication(
    client: &tokio_postgres::Client,
    cfg: &PostgresSourceConfig,
    tables: &[TableName],
) -> Result<(), Failure> {
    let name = &cfg.publication_name;
    let info = match publication_info(client, cfg, name).await? {
        Some(i) => i,
        None => {
            let all = match cfg.publication_autocreate {
                PublicationAutocreate::Disabled => {
                    return Err(Failure::definite(format!(
                        "publication {name:?} does not exist and publication_autocreate is \
                         disabled; create it: {}",
                        create_publication_sql(cfg, tables, false)
                    )))
                }
                PublicationAutocreate::AllTables => true,
                PublicationAutocreate::Filtered => false,
            };
            let sql = create_publication_sql(cfg, tables, all);
            match client.batch_execute(&sql).await {
                Ok(()) => tracing::info!(publication = %name, "created the publication: {sql}"),
                Err(e) if e.code() == Some(&SqlState::DUPLICATE_OBJECT) => {}
                Err(e) if e.code() == Some(&SqlState::INSUFFICIENT_PRIVILEGE) => {
                    return Err(publication_denied(cfg, &sql, &e))
                }
                Err(e) => return Err(classify_sql(&e, cfg)),
            }
            publication_info(client, cfg, name).await?.ok_or_else(|| {
                Failure::transient(format!("publication {name:?} vanished after creation"))
            })?
        }
    };
    if !info.pubinsert {
        return Err(Failure::definite(format!(
            "publication {name:?} does not publish INSERTs; run ALTER PUBLICATION {} SET \
             (publish = 'insert')",
            quote_ident(name)
        )));
    }
    if info.all_tables {
        return Ok(());
    }
    let missing: Vec<&TableName> = tables.iter().filter(|t| !info.tables.contains(t)).collect();
    if missing.is_empty() {
        return Ok(());
    }
    let list = missing
        .iter()
        .map(|t| quote_table(t))
        .collect::<Vec<_>>()
        .join(", ");
    let sql = format!("ALTER PUBLICATION {} ADD TABLE {list}", quote_ident(name));
    if cfg.publication_autocreate != PublicationAutocreate::Filtered {
        return Err(Failure::definite(format!(
            "publication {name:?} does not cover outbox table(s) {list}; run `{sql}`"
        )));
    }
    match client.batch_execute(&sql).await {
        Ok(()) => {
            tracing::info!(publication = %name, "added outbox table(s) to the publication: {sql}");
            Ok(())
        }
        Err(e) if e.code() == Some(&SqlState::INSUFFICIENT_PRIVILEGE) => {
            Err(publication_denied(cfg, &sql, &e))
        }
        Err(e) if e.code() == Some(&SqlState::DUPLICATE_OBJECT) => Ok(()),
        Err(e) => Err(classify_sql(&e, cfg)),
    }
}

/// Reads slot `name` from `pg_replication_slots`.
pub async fn slot_info(
    client: &tokio_postgres::Client,
    cfg: &PostgresSourceConfig,
    name: &str,
) -> Result<Option<SlotInfo>, Failure> {
    let Some(row) = client
        .query_opt(
            "SELECT plugin::text, slot_type, database::text, active_pid, \
                    confirmed_flush_lsn::text, restart_lsn::text, wal_status \
             FROM pg_replication_slots WHERE slot_name = $1",
            &[&name],
        )
        .await
        .map_err(|e| classify_sql(&e, cfg))?
    else {
        return Ok(None);
    };
    Ok(Some(SlotInfo {
        plugin: row.get(0),
        slot_type: row.get(1),
        database: row.get(2),
        active_pid: row.get(3),
        confirmed_flush_lsn: parse_lsn(row.get(4))?,
        restart_lsn: parse_lsn(row.get(5))?,
        wal_status: row.get(6),
    }))
}

/// Who holds a slot: `pid N (application_name "x", client 1.2.3.4)`.
pub async fn describe_pid(client: &tokio_postgres::Client, pid: i32) -> String {
    let row = client
        .query_opt(
            "SELECT application_name, host(client_addr), usename::text FROM pg_stat_activity \
             WHERE pid = $1",
            &[&pid],
        )
        .await
        .ok()
        .flatten();
    match row {
        Some(r) => {
            let app: Option<String> = r.get(0);
            let addr: Option<String> = r.get(1);
            let user: Option<String> = r.get(2);
            format!(
                "pid {pid} (application_name {:?}, client {}, user {})",
                app.unwrap_or_default(),
                addr.as_deref().unwrap_or("local"),
                user.as_deref().unwrap_or("?")
            )
        }
        None => format!("pid {pid}"),
    }
}

/// The slot, created when missing and allowed, checked for plugin, database and lost WAL,
/// and free (waiting up to [`SLOT_BUSY_WAIT`] for a previous holder to go away).
pub async fn ensure_slot(
    client: &tokio_postgres::Client,
    cfg: &PostgresSourceConfig,
    info: &ServerInfo,
) -> Result<SlotInfo, Failure> {
    let name = &cfg.slot_name;
    let mut slot = match slot_info(client, cfg, name).await? {
        Some(s) => s,
        None if !cfg.slot_autocreate => {
            return Err(Failure::definite(format!(
                "replication slot {name:?} does not exist and slot_autocreate is off; create \
                 it: SELECT pg_create_logical_replication_slot('{name}', 'pgoutput')"
            )))
        }
        None => {
            let created = client
                .query_one(
                    "SELECT lsn::text FROM pg_create_logical_replication_slot($1, 'pgoutput')",
                    &[name],
                )
                .await;
            match created {
                Ok(row) => {
                    let lsn: String = row.get(0);
                    tracing::info!(slot = %name, consistent_point = %lsn, "created the replication slot; events committed from here on are delivered");
                }
                Err(e) if e.code() == Some(&SqlState::DUPLICATE_OBJECT) => {}
                Err(e) if e.code() == Some(&SqlState::CONFIGURATION_LIMIT_EXCEEDED) => {
                    let names: Vec<String> = client
                        .query(
                            "SELECT slot_name::text || CASE WHEN active THEN ' (active)' ELSE '' END \
                             FROM pg_replication_slots ORDER BY slot_name LIMIT 20",
                            &[],
                        )
                        .await
                        .map(|rows| rows.iter().map(|r| r.get(0)).collect())
                        .unwrap_or_default();
                    return Err(Failure::definite(format!(
                        "no free replication slot for {name:?}: max_replication_slots = {} and \
                         all are in use ({}); drop an unused one (SELECT \
                         pg_drop_replication_slot('<name>')) or raise max_replication_slots \
                         (needs a restart)",
                        info.max_replication_slots,
                        names.join(", ")
                    )));
                }
                Err(e) if e.code() == Some(&SqlState::INSUFFICIENT_PRIVILEGE) => {
                    return Err(Failure::definite(format!(
                        "user {:?} may not create replication slot {name:?}: {}; ALTER ROLE {} \
                         REPLICATION",
                        cfg.user,
                        e.as_db_error().map(|d| d.message()).unwrap_or_default(),
                        quote_ident(&cfg.user)
                    )))
                }
                Err(e) => return Err(classify_sql(&e, cfg)),
            }
            slot_info(client, cfg, name).await?.ok_or_else(|| {
                Failure::transient(format!("replication slot {name:?} vanished after creation"))
            })?
        }
    };
    if slot.slot_type != "logical" || slot.plugin.as_deref() != Some("pgoutput") {
        return Err(Failure::definite(format!(
            "replication slot {name:?} is a {} slot for plugin {:?}; outboxd needs a logical \
             slot for pgoutput: drop it or choose another slot_name",
            slot.slot_type,
            slot.plugin.as_deref().unwrap_or("none")
        )));
    }
    if slot.database.as_deref() != Some(cfg.dbname.as_str()) {
        return Err(Failure::definite(format!(
            "replication slot {name:?} belongs to database {:?}, not {:?}; choose another \
             slot_name",
            slot.database.as_deref().unwrap_or("?"),
            cfg.dbname
        )));
    }
    if slot.wal_status.as_deref() == Some("lost") {
        return Err(Failure::definite(format!(
            "replication slot {name:?} has lost WAL it needed (wal_status = lost, \
             max_slot_wal_keep_size exceeded): events in between are gone; drop and recreate \
             the slot and delete the connector's checkpoint"
        )));
    }
    let deadline = Instant::now() + SLOT_BUSY_WAIT;
    while let Some(pid) = slot.active_pid {
        if Instant::now() >= deadline {
            let who = describe_pid(client, pid).await;
            return Err(Failure::definite(format!(
                "replication slot {name:?} is in use by another process: {who}; another \
                 outboxd (or Debezium) is reading it. Stop it, or give this connector its own \
                 slot (slot_name / slot.name)"
            )));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        slot = slot_info(client, cfg, name)
            .await?
            .ok_or_else(|| Failure::transient(format!("replication slot {name:?} was dropped")))?;
    }
    Ok(slot)
}

/// The server's current WAL write position.
pub async fn current_wal_lsn(
    client: &tokio_postgres::Client,
    cfg: &PostgresSourceConfig,
) -> Result<Lsn, Failure> {
    let row = client
        .query_one("SELECT pg_current_wal_lsn()::text", &[])
        .await
        .map_err(|e| classify_sql(&e, cfg))?;
    parse_lsn(row.get(0))?.ok_or_else(|| Failure::transient("pg_current_wal_lsn() is NULL"))
}

/// Classifies an error of the replication connection.
fn classify_replication(
    e: &pgwire_replication::PgWireError,
    cfg: &PostgresSourceConfig,
) -> Failure {
    use pgwire_replication::PgWireError as E;
    let at = where_(cfg);
    match e {
        E::Server(msg) => {
            let code = msg
                .rsplit_once("(SQLSTATE ")
                .map(|(_, c)| c.trim_end_matches(')'))
                .unwrap_or("");
            match code {
                // invalid_password, invalid_authorization_specification, invalid_catalog_name,
                // insufficient_privilege, undefined_file (WAL removed),
                // object_not_in_prerequisite_state (slot invalidated, wal_level),
                // undefined_object (publication missing).
                "28P01" | "28000" | "3D000" | "42501" | "58P01" | "55000" | "42704" => {
                    Failure::definite(format!("PostgreSQL replication at {at}: {msg}"))
                }
                _ => Failure::transient(format!("PostgreSQL replication at {at}: {msg}")),
            }
        }
        E::Auth(msg) => Failure::definite(format!(
            "PostgreSQL at {at} refused user {:?}: {msg}; check database.user / database.password",
            cfg.user
        )),
        E::Tls(msg) => Failure::definite(format!("PostgreSQL replication at {at}: TLS: {msg}")),
        E::Protocol(_) | E::MessageTooLarge { .. } => {
            Failure::definite(format!("PostgreSQL replication at {at}: {e}"))
        }
        other => Failure::transient(format!("PostgreSQL replication at {at}: {other}")),
    }
}

/// Streams outbox events from the server into `tx` until `tx` closes, or a definite failure
/// (sent into `tx` as `Err`). Transient failures reconnect with backoff. `checkpointed`
/// carries the positions the pipeline durably stored: the only ones confirmed to the server.
#[allow(clippy::too_many_arguments)]
pub async fn run(
    connector: String,
    cfg: PostgresSourceConfig,
    tables: Vec<TableName>,
    resume: Option<SourcePosition>,
    tx: mpsc::Sender<Result<SourceEvent, Failure>>,
    health: Health,
    shutdown: watch::Receiver<bool>,
    mut checkpointed: watch::Receiver<Option<SourcePosition>>,
) {
    let mut position = match resume {
        None => None,
        Some(SourcePosition::Lsn(l)) => Some(l),
        Some(other) => {
            let _ = tx
                .send(Err(Failure::definite(format!(
                    "the checkpoint position {other} is not a PostgreSQL LSN; was the \
                     checkpoint written for another source? Delete it or fix the config"
                ))))
                .await;
            return;
        }
    };
    let mut backoff = Duration::from_secs(1);
    loop {
        let mut streamed = false;
        let mut open_txn = false;
        let result = stream_once(
            &connector,
            &cfg,
            &tables,
            &mut position,
            &tx,
            &health,
            &mut checkpointed,
            &mut streamed,
            &mut open_txn,
        )
        .await;
        metrics::gauge!(m::SOURCE_CONNECTED, m::LABEL_CONNECTOR => connector.clone()).set(0.0);
        match result {
            Ok(()) => return,
            // Part of a transaction was handed on: a new session would send it again whole,
            // after the part. The pipeline fails instead, and the connector restarts from its
            // checkpoint (aborting what it had started).
            Err(f) if open_txn => {
                let _ = tx.send(Err(f)).await;
                return;
            }
            Err(f) if f.is_transient() && !*shutdown.borrow() => {
                if streamed {
                    backoff = Duration::from_secs(1);
                }
                health.set(&connector, ConnectorState::Retrying);
                metrics::counter!(m::ERRORS, m::LABEL_CONNECTOR => connector.clone(), m::LABEL_KIND => "transient").increment(1);
                tracing::warn!(connector = %connector, retry_in = ?backoff, "PostgreSQL replication lost, reconnecting: {f}");
                if !crate::error::sleep_before_retry(backoff, &shutdown).await {
                    return;
                }
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
            Err(f) => {
                let _ = tx.send(Err(f)).await;
                return;
            }
        }
    }
}

/// The latest durably checkpointed LSN.
fn checkpointed_lsn(rx: &watch::Receiver<Option<SourcePosition>>) -> Option<Lsn> {
    match &*rx.borrow() {
        Some(SourcePosition::Lsn(l)) => Some(*l),
        _ => None,
    }
}

fn confirm(client: &ReplicationClient, rx: &watch::Receiver<Option<SourcePosition>>) {
    if let Some(l) = checkpointed_lsn(rx) {
        client.update_applied_lsn(pgwire_replication::Lsn::from_u64(l.0));
    }
}

#[allow(clippy::too_many_arguments)]
async fn stream_once(
    connector: &str,
    cfg: &PostgresSourceConfig,
    tables: &[TableName],
    position: &mut Option<Lsn>,
    tx: &mpsc::Sender<Result<SourceEvent, Failure>>,
    health: &Health,
    checkpointed: &mut watch::Receiver<Option<SourcePosition>>,
    streamed: &mut bool,
    open_txn: &mut bool,
) -> Result<(), Failure> {
    let sql = connect(cfg).await?;
    let info = server_info(&sql, cfg).await?;
    require_streamable(&info)?;
    require_tables(&sql, cfg, tables).await?;
    ensure_publication(&sql, cfg, tables).await?;
    let slot = ensure_slot(&sql, cfg, &info).await?;
    drop(sql);

    let confirmed = slot.confirmed_flush_lsn.unwrap_or_default();
    let start = match *position {
        Some(p) => {
            if confirmed > p {
                tracing::warn!(connector, slot = %cfg.slot_name, checkpoint = %p, confirmed_flush_lsn = %confirmed,
                    "the slot was confirmed past this connector's checkpoint (by another consumer, or the checkpoint is older than the slot): the server resumes at confirmed_flush_lsn, transactions in between are not delivered");
            }
            p
        }
        None => confirmed,
    };
    let acked = checkpointed_lsn(checkpointed).unwrap_or_default();
    let application_name: String = format!("outboxd {connector}").chars().take(63).collect();
    let rcfg = ReplicationConfig::new(
        cfg.host.clone(),
        cfg.user.clone(),
        cfg.password.expose().to_string(),
        cfg.dbname.clone(),
        cfg.slot_name.clone(),
        cfg.publication_name.clone(),
    )
    .with_port(cfg.port)
    .with_tls(TlsConfig::disabled())
    .with_start_lsn(pgwire_replication::Lsn::from_u64(start.0))
    .with_ack_lsn(pgwire_replication::Lsn::from_u64(acked.0))
    .with_status_interval(cfg.status_interval)
    .with_wakeup_interval(cfg.status_interval.min(Duration::from_secs(10)))
    .with_buffer_size(REPLICATION_BUFFER)
    .with_options(SESSION_OPTIONS)
    .with_application_name(application_name);
    tracing::info!(connector, slot = %cfg.slot_name, publication = %cfg.publication_name, start = %start, server = %info.version, "starting logical replication");
    let mut client = match tokio::time::timeout(cfg.connect_timeout, async {
        let mut c = ReplicationClient::connect(rcfg).await?;
        c.wait_started().await?;
        Ok::<_, pgwire_replication::PgWireError>(c)
    })
    .await
    {
        Err(_) => {
            return Err(Failure::transient(format!(
                "starting replication at {} timed out after {:?}",
                where_(cfg),
                cfg.connect_timeout
            )))
        }
        Ok(Err(e)) => return Err(classify_replication(&e, cfg)),
        Ok(Ok(c)) => c,
    };
    health.set(connector, ConnectorState::Streaming);
    metrics::gauge!(m::SOURCE_CONNECTED, m::LABEL_CONNECTOR => connector.to_string()).set(1.0);
    confirm(&client, checkpointed);

    let mut adapter = PgOutboxAdapter::new(
        tables.iter().cloned().collect(),
        cfg.message_prefixes.clone(),
        start,
    );
    let mut out: Vec<SourceEvent> = Vec::new();
    // Without a checkpoint, the position streaming starts from is the first one: hand it
    // on at once, so it is checkpointed before anything else happens (the server's next
    // keepalive can be seconds away, and a relay stopped before it would start over at
    // whatever the slot says then).
    if position.is_none() && start.0 != 0 {
        *position = Some(start);
        out.push(SourceEvent::Progress {
            position: SourcePosition::Lsn(start),
        });
    }
    loop {
        for ev in out.drain(..) {
            match &ev {
                SourceEvent::Commit {
                    position: SourcePosition::Lsn(p),
                    ..
                }
                | SourceEvent::Progress {
                    position: SourcePosition::Lsn(p),
                } => {
                    *position = Some(*p);
                    *open_txn = false;
                }
                SourceEvent::Begin => *open_txn = true,
                _ => {}
            }
            *streamed = true;
            // Wait for room in the pipeline, confirming checkpoints meanwhile.
            loop {
                tokio::select! {
                    permit = tx.reserve() => {
                        match permit {
                            Ok(p) => { p.send(Ok(ev)); break; }
                            Err(_) => return Ok(()),
                        }
                    }
                    changed = checkpointed.changed() => {
                        if changed.is_err() {
                            return Ok(());
                        }
                        confirm(&client, checkpointed);
                    }
                }
            }
        }
        tokio::select! {
            biased;
            changed = checkpointed.changed() => {
                if changed.is_err() {
                    return Ok(());
                }
                confirm(&client, checkpointed);
            }
            ev = client.recv() => {
                let ev = match ev {
                    Err(e) => return Err(classify_replication(&e, cfg)),
                    Ok(None) => return Err(Failure::transient("the server ended the replication stream")),
                    Ok(Some(ev)) => ev,
                };
                on_event(ev, &mut adapter, &mut out)?;
            }
        }
    }
}

fn on_event(
    ev: ReplicationEvent,
    adapter: &mut PgOutboxAdapter,
    out: &mut Vec<SourceEvent>,
) -> Result<(), Failure> {
    let msg = match ev {
        ReplicationEvent::KeepAlive { wal_end, .. } => {
            adapter.on_keepalive(Lsn(wal_end.as_u64()), out);
            return Ok(());
        }
        ReplicationEvent::Begin {
            final_lsn,
            xid,
            commit_time_micros,
        } => PgOutputMessage::Begin(Begin {
            final_lsn: Lsn(final_lsn.as_u64()),
            commit_ts: commit_time_micros,
            xid,
        }),
        ReplicationEvent::Commit {
            lsn,
            end_lsn,
            commit_time_micros,
        } => PgOutputMessage::Commit(Commit {
            flags: 0,
            commit_lsn: Lsn(lsn.as_u64()),
            end_lsn: Lsn(end_lsn.as_u64()),
            commit_ts: commit_time_micros,
        }),
        ReplicationEvent::Message {
            transactional,
            lsn,
            prefix,
            content,
        } => PgOutputMessage::Message(LogicalMessage {
            transactional,
            lsn: Lsn(lsn.as_u64()),
            prefix,
            content,
        }),
        ReplicationEvent::XLogData {
            wal_start, data, ..
        } => pgoutput::decode(&data).map_err(|e| {
            Failure::definite(format!(
                "pgoutput decoding failed at LSN {}: {e}",
                Lsn(wal_start.as_u64())
            ))
        })?,
        ReplicationEvent::StoppedAt { .. } => {
            return Err(Failure::transient("the replication stream stopped"))
        }
    };
    let kind = msg.kind();
    adapter.on_message(msg, out).map_err(|e| {
        Failure::definite(format!(
            "PostgreSQL {kind} after LSN {}: {e}",
            adapter.last_position()
        ))
    })
}
