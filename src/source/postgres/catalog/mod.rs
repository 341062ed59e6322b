//! The SQL side of a PostgreSQL source: connecting, the server facts the relay depends on,
//! and the requirement checks `run` and `check` share, as [`CheckResult`] lists (`check`
//! prints them, `run` applies them with [`crate::requirement::enforce`]): the server settings
//! and the role ([`requirements`]), the outbox tables ([`table_check`]), the publication
//! ([`publication`]; whether it carries the outbox rows, also while streaming:
//! [`coverage`]) and the replication slot ([`slot`], which also reads what `outboxd status`
//! shows).

pub mod coverage;
pub mod publication;
pub mod slot;

use tokio_postgres::error::SqlState;

use super::error::{where_, PgError};
use super::tls::{negotiate, Attempt, Negotiated, NegotiationError};
use crate::config::tls::PgTlsNames;
use crate::config::PostgresSourceConfig;
use crate::event::TableName;
use crate::position::Lsn;
use crate::requirement::{CheckResult, Status};
use crate::router::RouterConfig;

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
                cause: crate::error::io_cause(&e),
            })?;
        let (stream, negotiated) = negotiate(tcp, attempt, &cfg.host)
            .await
            .map_err(|e| match e {
                NegotiationError::Io(e) => PgError::Connect {
                    at: at.clone(),
                    cause: crate::error::io_cause(&e),
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
                    cause: crate::error::io_cause(&e),
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
        s.parse::<Lsn>()
            .map_err(|source| PgError::UnreadableLsn { source })
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

/// The columns of outbox table `t` as `(name, type)` in column order (`format_type`: `jsonb`,
/// `character varying(255)`, ...); empty when there is no such table (or view: a publication
/// covers tables only).
pub async fn table_columns(
    client: &tokio_postgres::Client,
    cfg: &PostgresSourceConfig,
    t: &TableName,
) -> Result<Vec<(String, String)>, PgError> {
    let rows = client
        .query(
            "SELECT a.attname::text, format_type(a.atttypid, a.atttypmod) \
             FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid \
             JOIN pg_namespace n ON n.oid = c.relnamespace \
             WHERE n.nspname = $1 AND c.relname = $2 AND c.relkind IN ('r', 'p') \
               AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum",
            &[&t.schema, &t.name],
        )
        .await
        .map_err(|e| PgError::from_sql(&e, cfg))?;
    Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
}

/// The requirement on outbox table `t` with `columns` ([`table_columns`]), one result named
/// `table <t>`: the table exists and, when a `router` is given, has every column the router
/// reads. `run` checks existence only (a missing column stops the connector at the first
/// row that needs it, as any row the router refuses does); `check` checks both.
pub fn table_check(
    connector: &str,
    cfg: &PostgresSourceConfig,
    t: &TableName,
    columns: &[(String, String)],
    router: Option<&RouterConfig>,
) -> CheckResult {
    let label = format!("table {t}");
    if columns.is_empty() {
        return CheckResult::new(
            connector,
            &label,
            Status::Fail,
            format!(
                "outbox table {t} not found in database {:?}; create it (migrations/postgres) or \
                 fix {}",
                cfg.dbname,
                cfg.format.key("tables", "table.include.list")
            ),
        );
    }
    let Some(router) = router else {
        return CheckResult::new(
            connector,
            &label,
            Status::Pass,
            format!("{} columns", columns.len()),
        );
    };
    let missing: Vec<&str> = router
        .columns_read()
        .into_iter()
        .filter(|c| !columns.iter().any(|(n, _)| n == c))
        .collect();
    if !missing.is_empty() {
        return CheckResult::new(
            connector,
            &label,
            Status::Fail,
            format!(
                "lacks column(s) {} that the router reads; add them or set the \
                 table.field.event.* / route.by.field options",
                missing.join(", ")
            ),
        );
    }
    let payload_type = columns
        .iter()
        .find(|(n, _)| *n == router.field_event_payload)
        .map(|(_, t)| t.as_str())
        .unwrap_or("?");
    let note = if payload_type == "jsonb" {
        " (jsonb: record values are jsonb's normalised text; use json or text to keep the bytes \
         as written)"
    } else {
        ""
    };
    CheckResult::new(
        connector,
        &label,
        Status::Pass,
        format!("{} columns, payload {payload_type}{note}", columns.len()),
    )
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

/// The server's current WAL insert position: every WAL record written so far (a committed
/// transaction's commit record included) lies before it.
pub async fn current_wal_insert_lsn(
    client: &tokio_postgres::Client,
    cfg: &PostgresSourceConfig,
) -> Result<Lsn, PgError> {
    let row = client
        .query_one("SELECT pg_current_wal_insert_lsn()::text", &[])
        .await
        .map_err(|e| PgError::from_sql(&e, cfg))?;
    parse_lsn(row.get(0))?.ok_or_else(|| PgError::Vanished {
        what: "pg_current_wal_insert_lsn()'s value".to_string(),
    })
}
