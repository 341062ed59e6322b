//! The SQL side of a PostgreSQL source: connecting, the server facts the relay depends on,
//! the requirement checks `run` and `check` share, the outbox tables, the publication and
//! the replication slot (read by `check` and `status`, created and checked by the stream).

use std::collections::HashSet;
use std::time::{Duration, Instant};

use tokio_postgres::error::SqlState;

use super::error::{where_, PgError};
use super::tls::{negotiate, Attempt, Negotiated, NegotiationError};
use crate::config::tls::PgTlsNames;
use crate::config::{PostgresSourceConfig, PublicationAutocreate};
use crate::event::TableName;
use crate::lease::Lease;
use crate::position::Lsn;
use crate::preflight::{CheckResult, Status};

/// How long a slot held by another process is waited for before that is a definite error
/// (a relay restarted right after `kill -9` finds its old walsender still exiting).
pub const SLOT_BUSY_WAIT: Duration = Duration::from_secs(10);

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

pub(crate) fn quote_table(t: &TableName) -> String {
    format!("{}.{}", quote_ident(&t.schema), quote_ident(&t.name))
}

/// Opens an ordinary SQL connection with the connector's credentials and TLS.
pub async fn connect(cfg: &PostgresSourceConfig) -> Result<tokio_postgres::Client, PgError> {
    connect_negotiated(cfg).await.map(|(c, _)| c)
}

/// [`connect`], also saying what TLS the connection has (libpq's `sslmode` semantics, see
/// [`super::tls`]).
///
/// Errors: refused credentials, a refused plaintext connection, TLS that fails or is
/// declined, unusable TLS files are definite; a server that cannot be reached or does not
/// answer in `connect_timeout` is transient.
pub async fn connect_negotiated(
    cfg: &PostgresSourceConfig,
) -> Result<(tokio_postgres::Client, Negotiated), PgError> {
    let plan = super::tls::plan(&cfg.tls, PgTlsNames::of(cfg.format)).map_err(|source| {
        PgError::TlsSetting {
            at: where_(cfg),
            source,
        }
    })?;
    match connect_attempt(cfg, &plan.first).await {
        Err(PgError::PlaintextRefused { .. }) if plan.after_plaintext_refused.is_some() => {
            let then = plan.after_plaintext_refused.as_ref().expect("checked");
            connect_attempt(cfg, then).await
        }
        r => r,
    }
}

async fn connect_attempt(
    cfg: &PostgresSourceConfig,
    attempt: &Attempt,
) -> Result<(tokio_postgres::Client, Negotiated), PgError> {
    let at = where_(cfg);
    let connecting = async {
        let tcp = tokio::net::TcpStream::connect((cfg.host.as_str(), cfg.port))
            .await
            .map_err(|e| PgError::Connect {
                at: at.clone(),
                cause: crate::source::mysql::error::io_cause(&e),
            })?;
        let (stream, negotiated) = negotiate(tcp, attempt, &cfg.host)
            .await
            .map_err(|e| match e {
                NegotiationError::Io(e) => PgError::Connect {
                    at: at.clone(),
                    cause: crate::source::mysql::error::io_cause(&e),
                },
                NegotiationError::Declined => PgError::TlsDeclined {
                    at: at.clone(),
                    mode: cfg.tls.mode.as_str(),
                    tls: PgTlsNames::of(cfg.format),
                },
                NegotiationError::Unexpected(b) => PgError::ReplicationProtocol {
                    at: at.clone(),
                    message: format!("the server answered the SSLRequest with byte {b:#04x}, neither S nor N: is this a PostgreSQL server?"),
                },
                // rustls refused (certificate, protocol, alert): definite. The socket
                // failing mid-handshake (a server restarting): transient.
                NegotiationError::Handshake(e) if super::tls::is_tls_refusal(&e) => PgError::Tls {
                    at: at.clone(),
                    cause: super::tls::handshake_cause(&e),
                    tls: PgTlsNames::of(cfg.format),
                },
                NegotiationError::Handshake(e) => PgError::Connect {
                    at: at.clone(),
                    cause: crate::source::mysql::error::io_cause(&e),
                },
            })?;
        let mut pg = tokio_postgres::Config::new();
        pg.host(&cfg.host)
            .port(cfg.port)
            .user(&cfg.user)
            .password(cfg.password.expose())
            .dbname(&cfg.dbname)
            .application_name("outboxd")
            .ssl_mode(tokio_postgres::config::SslMode::Disable);
        let (client, connection) = pg
            .connect_raw(stream, tokio_postgres::NoTls)
            .await
            .map_err(|e| {
                let plaintext = !negotiated.facts.encrypted();
                match e.as_db_error() {
                    Some(db)
                        if plaintext
                            && *db.code() == SqlState::INVALID_AUTHORIZATION_SPECIFICATION =>
                    {
                        PgError::PlaintextRefused {
                            at: at.clone(),
                            user: cfg.user.clone(),
                            message: db.message().to_string(),
                            tls: PgTlsNames::of(cfg.format),
                        }
                    }
                    _ => PgError::from_connect(&e, cfg),
                }
            })?;
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!("PostgreSQL SQL connection ended: {e}");
            }
        });
        Ok((client, negotiated))
    };
    match tokio::time::timeout(cfg.connect_timeout, connecting).await {
        Err(_) => Err(PgError::Timeout {
            what: "connecting to",
            at: where_(cfg),
            after: cfg.connect_timeout,
        }),
        Ok(r) => r,
    }
}

fn parse_lsn(s: Option<String>) -> Result<Option<Lsn>, PgError> {
    s.map(|s| {
        s.parse::<Lsn>().map_err(|e| PgError::UnreadableLsn {
            detail: e.to_string(),
        })
    })
    .transpose()
}

/// Reads the server facts the relay depends on.
pub async fn server_info(
    client: &tokio_postgres::Client,
    cfg: &PostgresSourceConfig,
) -> Result<ServerInfo, PgError> {
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
        .map_err(|e| PgError::from_sql(&e, cfg))?;
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

/// The server facts the relay depends on, checked: one result per fact, the same list for
/// `outboxd check` (which prints it) and `outboxd run` (which stops at a `Fail` with its
/// detail, and logs a `Warn`).
pub fn requirements(info: &ServerInfo, connector: &str) -> Vec<CheckResult> {
    let name = connector;
    let mut out = vec![CheckResult::new(
        name,
        "server",
        Status::Pass,
        info.version.clone(),
    )];
    if info.version_num < 140_000 {
        out.push(CheckResult::new(
            name,
            "server version",
            Status::Fail,
            "outboxd needs PostgreSQL 14 or later (it asks pgoutput for logical decoding \
             messages, an option PostgreSQL 14 introduced)",
        ));
    }
    out.push(if info.wal_level == "logical" {
        CheckResult::new(name, "wal_level", Status::Pass, "logical")
    } else {
        CheckResult::new(
            name,
            "wal_level",
            Status::Fail,
            format!(
                "wal_level is {:?}; logical replication needs wal_level = logical (ALTER SYSTEM \
                 SET wal_level = logical, then restart PostgreSQL)",
                info.wal_level
            ),
        )
    });
    out.push(if info.max_wal_senders > 0 {
        CheckResult::new(
            name,
            "max_wal_senders",
            Status::Pass,
            info.max_wal_senders.to_string(),
        )
    } else {
        CheckResult::new(
            name,
            "max_wal_senders",
            Status::Fail,
            "max_wal_senders is 0; a logical replication connection needs a WAL sender (set \
             max_wal_senders to at least the number of connectors, then restart PostgreSQL)",
        )
    });
    out.push(if info.rolreplication || info.rolsuper {
        CheckResult::new(
            name,
            "role REPLICATION",
            Status::Pass,
            format!(
                "{} has {}",
                info.user,
                if info.rolsuper {
                    "SUPERUSER"
                } else {
                    "REPLICATION"
                }
            ),
        )
    } else {
        CheckResult::new(
            name,
            "role REPLICATION",
            Status::Fail,
            format!(
                "role {:?} lacks the REPLICATION attribute that logical replication needs; run \
                 ALTER ROLE {} REPLICATION",
                info.user,
                quote_ident(&info.user)
            ),
        )
    });
    out
}

/// Fails definitely when an outbox table does not exist.
pub async fn require_tables(
    client: &tokio_postgres::Client,
    cfg: &PostgresSourceConfig,
    tables: &[TableName],
) -> Result<(), PgError> {
    for t in tables {
        let found = client
            .query_opt(
                "SELECT 1 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
                 WHERE n.nspname = $1 AND c.relname = $2 AND c.relkind IN ('r', 'p')",
                &[&t.schema, &t.name],
            )
            .await
            .map_err(|e| PgError::from_sql(&e, cfg))?;
        if found.is_none() {
            return Err(PgError::Requirement {
                check: "outbox table".into(),
                detail: format!(
                    "outbox table {t} not found in database {:?}; create it (migrations/postgres) \
                     or fix {}",
                    cfg.dbname,
                    cfg.format.key("tables", "table.include.list")
                ),
            });
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
) -> Result<Option<PublicationInfo>, PgError> {
    let Some(row) = client
        .query_opt(
            "SELECT pubinsert, pubupdate, pubdelete, puballtables FROM pg_publication \
             WHERE pubname = $1",
            &[&name],
        )
        .await
        .map_err(|e| PgError::from_sql(&e, cfg))?
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
        .map_err(|e| PgError::from_sql(&e, cfg))?;
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

fn publication_denied(cfg: &PostgresSourceConfig, sql: &str, e: &tokio_postgres::Error) -> PgError {
    let why = e
        .as_db_error()
        .map(|d| d.message().to_string())
        .unwrap_or_else(|| e.to_string());
    PgError::Requirement {
        check: "publication".into(),
        detail: format!(
            "publication {:?} is missing or incomplete and user {:?} could not fix it ({why}); \
         FOR TABLE needs ownership of the tables (FOR ALL TABLES a superuser): have the table \
         owner run `{sql}`, or GRANT the owner role to {:?}",
            cfg.publication_name, cfg.user, cfg.user
        ),
    }
}

/// Uses the configured publication, creating it (or adding missing outbox tables to it) as
/// `publication_autocreate` allows.
pub async fn ensure_publication(
    client: &tokio_postgres::Client,
    cfg: &PostgresSourceConfig,
    tables: &[TableName],
) -> Result<(), PgError> {
    let name = &cfg.publication_name;
    let info = match publication_info(client, cfg, name).await? {
        Some(i) => i,
        None => {
            let all = match cfg.publication_autocreate {
                PublicationAutocreate::Disabled => {
                    return Err(PgError::Requirement {
                        check: "publication".into(),
                        detail: format!(
                            "publication {name:?} does not exist and publication_autocreate is \
                         disabled; create it: {}",
                            create_publication_sql(cfg, tables, false)
                        ),
                    })
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
                Err(e) => return Err(PgError::from_sql(&e, cfg)),
            }
            publication_info(client, cfg, name)
                .await?
                .ok_or_else(|| PgError::Vanished {
                    what: format!("publication {name:?} after creation"),
                })?
        }
    };
    if !info.pubinsert {
        return Err(PgError::Requirement {
            check: "publication".into(),
            detail: format!(
                "publication {name:?} does not publish INSERTs; run ALTER PUBLICATION {} SET \
             (publish = 'insert')",
                quote_ident(name)
            ),
        });
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
        return Err(PgError::Requirement {
            check: "publication".into(),
            detail: format!(
                "publication {name:?} does not cover outbox table(s) {list}; run `{sql}`"
            ),
        });
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
        Err(e) => Err(PgError::from_sql(&e, cfg)),
    }
}

/// Reads slot `name` from `pg_replication_slots`.
pub async fn slot_info(
    client: &tokio_postgres::Client,
    cfg: &PostgresSourceConfig,
    name: &str,
) -> Result<Option<SlotInfo>, PgError> {
    let Some(row) = client
        .query_opt(
            "SELECT plugin::text, slot_type, database::text, active_pid, \
                    confirmed_flush_lsn::text, restart_lsn::text, wal_status \
             FROM pg_replication_slots WHERE slot_name = $1",
            &[&name],
        )
        .await
        .map_err(|e| PgError::from_sql(&e, cfg))?
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

/// Why slot `slot_name` (as `slot` describes it, `None` when it does not exist) can no
/// longer serve a connector whose checkpoint is at `checkpoint`, or `None` when it can.
///
/// A logical slot retains WAL from its `restart_lsn` and decodes from its
/// `confirmed_flush_lsn` on (PostgreSQL documentation, "Logical Decoding Concepts" and
/// `pg_replication_slots`); a stream asked to start before `confirmed_flush_lsn` silently
/// starts there. So the checkpoint can be served only when the slot exists, has not lost
/// WAL (`wal_status = lost`), and was not confirmed past the checkpoint.
pub fn checkpoint_gap(slot_name: &str, slot: Option<&SlotInfo>, checkpoint: Lsn) -> Option<String> {
    let Some(slot) = slot else {
        return Some(format!(
            "replication slot {slot_name:?} does not exist, but the connector's checkpoint is \
             at LSN {checkpoint}: the WAL written since then is no longer retained for this \
             connector (the slot was dropped, or this server is a failover standby or a \
             restore that does not have it)"
        ));
    };
    if slot.wal_status.as_deref() == Some("lost") {
        return Some(format!(
            "replication slot {slot_name:?} has lost WAL it needed (wal_status = lost: \
             max_slot_wal_keep_size was exceeded) and cannot serve the connector's checkpoint \
             at LSN {checkpoint}"
        ));
    }
    match slot.confirmed_flush_lsn {
        Some(confirmed) if confirmed > checkpoint => Some(format!(
            "replication slot {slot_name:?} was confirmed up to LSN {confirmed}, past the \
             connector's checkpoint at LSN {checkpoint} (another consumer of the slot, or the \
             checkpoint was set back): the server cannot send the transactions in between \
             any more"
        )),
        _ => None,
    }
}

/// The slot, created when missing and allowed, checked for plugin, database and lost WAL,
/// and free (waiting up to [`SLOT_BUSY_WAIT`] for a previous holder to go away).
///
/// With a `checkpoint` (the LSN the connector resumes at), a slot that cannot serve it
/// ([`checkpoint_gap`]) is a definite [`PgError::CheckpointLost`] and a missing slot is never
/// created: creating it would start past the gap. Without one the slot is created (when
/// `slot_autocreate` allows) and streaming starts at its consistent point.
///
/// `lease`: while a group member takes the connector over ([`Lease::taking_over`]: granted,
/// still held, not streamed yet), a walsender attached to the slot is the previous owner's
/// and is ended at once with `pg_terminate_backend` (allowed for the same role, or with
/// `pg_signal_backend`). No grace is given: the group coordinator assigns the connector only
/// once the previous owner has stopped it (its walsender is ending anyway) or has been
/// expelled from the group (dead, frozen, or cut off; its writes are fenced). A role that may
/// not end it gets a transient [`PgError::SlotHeld`] (retried) instead of the definite
/// [`PgError::SlotInUse`]. The lease is read again right before each `pg_terminate_backend`:
/// a member that lost the connector meanwhile never ends its successor's walsender.
pub async fn ensure_slot(
    client: &tokio_postgres::Client,
    cfg: &PostgresSourceConfig,
    info: &ServerInfo,
    connector: &str,
    checkpoint: Option<Lsn>,
    lease: &Lease,
) -> Result<SlotInfo, PgError> {
    let name = &cfg.slot_name;
    let lost = |reason: String, checkpoint: Lsn| PgError::CheckpointLost {
        connector: connector.to_string(),
        checkpoint,
        reason,
    };
    let found = slot_info(client, cfg, name).await?;
    if let Some(c) = checkpoint {
        if let Some(reason) = checkpoint_gap(name, found.as_ref(), c) {
            return Err(lost(reason, c));
        }
    }
    let mut slot = match found {
        Some(s) => s,
        None if !cfg.slot_autocreate => {
            return Err(PgError::Requirement {
                check: "replication slot".into(),
                detail: format!(
                    "replication slot {name:?} does not exist and slot_autocreate is off; create \
                 it: SELECT pg_create_logical_replication_slot('{name}', 'pgoutput')"
                ),
            })
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
                    return Err(PgError::Requirement {
                        check: "replication slot".into(),
                        detail: format!(
                        "no free replication slot for {name:?}: max_replication_slots = {} and \
                         all are in use ({}); drop an unused one (SELECT \
                         pg_drop_replication_slot('<name>')) or raise max_replication_slots \
                         (needs a restart)",
                        info.max_replication_slots,
                        names.join(", ")
                    ),
                    });
                }
                Err(e) if e.code() == Some(&SqlState::INSUFFICIENT_PRIVILEGE) => {
                    return Err(PgError::Requirement {
                        check: "replication slot".into(),
                        detail: format!(
                        "user {:?} may not create replication slot {name:?}: {}; ALTER ROLE {} \
                         REPLICATION",
                        cfg.user,
                        e.as_db_error().map(|d| d.message()).unwrap_or_default(),
                        quote_ident(&cfg.user)
                    ),
                    })
                }
                Err(e) => return Err(PgError::from_sql(&e, cfg)),
            }
            slot_info(client, cfg, name)
                .await?
                .ok_or_else(|| PgError::Vanished {
                    what: format!("replication slot {name:?} after creation"),
                })?
        }
    };
    if slot.slot_type != "logical" || slot.plugin.as_deref() != Some("pgoutput") {
        return Err(PgError::Requirement {
            check: "replication slot".into(),
            detail: format!(
                "replication slot {name:?} is a {} slot for plugin {:?}; outboxd needs a logical \
             slot for pgoutput: drop it or choose another slot_name",
                slot.slot_type,
                slot.plugin.as_deref().unwrap_or("none")
            ),
        });
    }
    if slot.database.as_deref() != Some(cfg.dbname.as_str()) {
        return Err(PgError::Requirement {
            check: "replication slot".into(),
            detail: format!(
                "replication slot {name:?} belongs to database {:?}, not {:?}; choose another \
             slot_name",
                slot.database.as_deref().unwrap_or("?"),
                cfg.dbname
            ),
        });
    }
    if slot.wal_status.as_deref() == Some("lost") {
        return Err(PgError::Requirement {
            check: "replication slot".into(),
            detail: format!(
                "replication slot {name:?} has lost WAL it needed (wal_status = lost, \
             max_slot_wal_keep_size exceeded): events in between are gone; drop and recreate \
             the slot and reset the connector's checkpoint (`outboxd checkpoint reset`)"
            ),
        });
    }
    let started = Instant::now();
    let deadline = started + SLOT_BUSY_WAIT;
    let mut ended: Option<i32> = None;
    let mut said_waiting = false;
    while let Some(pid) = slot.active_pid {
        let taking_over = lease.taking_over();
        if taking_over && ended != Some(pid) {
            let who = describe_pid(client, pid).await;
            match client
                .query_one("SELECT pg_terminate_backend($1)", &[&pid])
                .await
            {
                Ok(row) => {
                    let done: bool = row.get(0);
                    if done {
                        tracing::info!(slot = %name, "ended the previous owner's walsender on the slot: {who}");
                    }
                    ended = Some(pid);
                }
                Err(e) if e.code() == Some(&SqlState::INSUFFICIENT_PRIVILEGE) => {
                    return Err(PgError::SlotHeld {
                        slot: name.clone(),
                        holder: who,
                        user: cfg.user.clone(),
                    })
                }
                Err(e) => return Err(PgError::from_sql(&e, cfg)),
            }
        }
        if Instant::now() >= deadline {
            let who = describe_pid(client, pid).await;
            if taking_over {
                return Err(PgError::SlotHeld {
                    slot: name.clone(),
                    holder: who,
                    user: cfg.user.clone(),
                });
            }
            return Err(PgError::SlotInUse {
                slot: name.clone(),
                holder: who,
            });
        }
        if !taking_over && !said_waiting && started.elapsed() >= Duration::from_secs(1) {
            said_waiting = true;
            let who = describe_pid(client, pid).await;
            tracing::info!(slot = %name, "replication slot is in use by {who}; waiting up to {SLOT_BUSY_WAIT:?} for it to go (a previous session's walsender ending)");
        }
        // A walsender this connector just ended goes within milliseconds: look again soon.
        let step = if ended.is_some() { 50 } else { 500 };
        tokio::time::sleep(Duration::from_millis(step)).await;
        slot = slot_info(client, cfg, name)
            .await?
            .ok_or_else(|| PgError::Vanished {
                what: format!("replication slot {name:?}, waited for,"),
            })?;
    }
    Ok(slot)
}

/// The server's current WAL write position.
pub async fn current_wal_lsn(
    client: &tokio_postgres::Client,
    cfg: &PostgresSourceConfig,
) -> Result<Lsn, PgError> {
    let row = client
        .query_one("SELECT pg_current_wal_lsn()::text", &[])
        .await
        .map_err(|e| PgError::from_sql(&e, cfg))?;
    parse_lsn(row.get(0))?.ok_or_else(|| PgError::Vanished {
        what: "pg_current_wal_lsn()'s value".to_string(),
    })
}
