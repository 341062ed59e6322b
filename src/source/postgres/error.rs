//! The PostgreSQL source's failures, classified in one place ([`PgError::class`]).
//!
//! SQL errors are told apart by their SQLSTATE (PostgreSQL documentation, Appendix A "Error
//! Codes"), as `tokio_postgres::error::SqlState` constants. The replication connection
//! (`pgwire-replication`) hands server errors over as text ending in `(SQLSTATE xxxxx)`;
//! [`sqlstate_in`] reads the code from there, the one place that looks at such text.
//! Messages name the server, the role and the setting to change, never a password.

use tokio_postgres::error::SqlState;

use super::adapter::AdapterError;
use super::pgoutput::PgOutputError;
use crate::config::tls::PgTlsNames;
use crate::config::PostgresSourceConfig;
use crate::error::Class;
use crate::position::{Lsn, SourcePosition};

/// A failure of the PostgreSQL source.
#[derive(Debug, Clone, thiserror::Error)]
pub enum PgError {
    /// No connection could be made (refused, unreachable, name not resolved).
    #[error("cannot connect to PostgreSQL at {at} ({cause}); check host/port and that the server listens there")]
    Connect {
        /// `host:port/dbname`.
        at: String,
        /// The cause, in words.
        cause: String,
    },
    /// Connecting (or starting replication) did not complete in time.
    #[error("{what} PostgreSQL at {at} timed out after {after:?}")]
    Timeout {
        /// `connecting to`, `starting replication at`.
        what: &'static str,
        /// `host:port/dbname`.
        at: String,
        /// `connect_timeout`.
        after: std::time::Duration,
    },
    /// The server refused the role or its password (SQLSTATE 28P01, 28000).
    #[error("PostgreSQL at {at} refused user {user:?}: {message}; check {keys} and pg_hba.conf")]
    AuthFailed {
        /// `host:port/dbname`.
        at: String,
        /// The role.
        user: String,
        /// The server's message.
        message: String,
        /// The settings to check, as the connector's format names them.
        keys: &'static str,
    },
    /// The server refused a connection without TLS (SQLSTATE 28000 on a plaintext
    /// connection: `pg_hba.conf` has only `hostssl` lines for us).
    #[error("PostgreSQL at {at} refused user {user:?} without TLS: {message}; the server accepts only encrypted connections here (hostssl in pg_hba.conf): set {} to require, verify-ca or verify-full", tls.mode)]
    PlaintextRefused {
        /// `host:port/dbname`.
        at: String,
        /// The role.
        user: String,
        /// The server's message.
        message: String,
        /// The TLS settings, as the connector's format names them.
        tls: &'static PgTlsNames,
    },
    /// The TLS settings cannot be used (a file that is missing or does not parse).
    #[error("TLS settings for PostgreSQL at {at}: {source}")]
    TlsSetting {
        /// `host:port/dbname`.
        at: String,
        /// What is wrong.
        #[source]
        source: crate::tls::TlsError,
    },
    /// The server declined TLS (answered the SSLRequest with `N`) and the mode needs it.
    #[error("PostgreSQL at {at} does not accept TLS (it declined the SSLRequest), but {}={mode} needs it; turn ssl on in the server or set {}=prefer / disable", tls.mode, tls.mode)]
    TlsDeclined {
        /// `host:port/dbname`.
        at: String,
        /// The sslmode.
        mode: &'static str,
        /// The TLS settings, as the connector's format names them.
        tls: &'static PgTlsNames,
    },
    /// The TLS handshake failed: the certificate did not verify (wrong CA, wrong host name),
    /// or the server refused the client certificate.
    #[error("TLS with PostgreSQL at {at} failed: {cause}; {}", crate::tls::expiry::advice(cause, || format!("check {} (the CA that signed the server's certificate), {} (verify-full also checks the host name against the certificate) and, for mutual TLS, {} / {}", tls.rootcert, tls.mode, tls.cert, tls.key)))]
    Tls {
        /// `host:port/dbname`.
        at: String,
        /// rustls' reason (`invalid peer certificate: UnknownIssuer`, ...).
        cause: String,
        /// The TLS settings, as the connector's format names them.
        tls: &'static PgTlsNames,
    },
    /// The database does not exist (SQLSTATE 3D000).
    #[error("PostgreSQL at {at}: {message}; check {key}")]
    UnknownDatabase {
        /// `host:port`.
        at: String,
        /// The server's message.
        message: String,
        /// The setting, as the connector's format names it.
        key: &'static str,
    },
    /// The role lacks a privilege (SQLSTATE 42501).
    #[error("PostgreSQL at {at}: user {user:?} lacks a privilege: {message}")]
    InsufficientPrivilege {
        /// `host:port/dbname`.
        at: String,
        /// The role.
        user: String,
        /// The server's message.
        message: String,
    },
    /// Any other SQL error, or a lost SQL connection (transient).
    #[error("PostgreSQL at {at}: {message}{}", sqlstate.as_ref().map(|c| format!(" (SQLSTATE {})", c.code())).unwrap_or_default())]
    Sql {
        /// `host:port/dbname`.
        at: String,
        /// The server's or the driver's message.
        message: String,
        /// The SQLSTATE, when the server sent one.
        sqlstate: Option<SqlState>,
    },
    /// A server setting, a role attribute, an outbox table, the publication or the slot is
    /// not as the relay needs it: a failed requirement check, the same `outboxd check`
    /// reports (`catalog::requirements`, `table_check`, `publication::creation` /
    /// `coverage`, `slot::slot_check`).
    #[error("{detail}")]
    Requirement {
        /// The check's name (`wal_level`, `publication p`, `slot s`).
        check: String,
        /// What was found and what to change.
        detail: String,
    },
    /// The role may not create or extend the publication (SQLSTATE 42501).
    #[error("publication {publication:?} is missing or incomplete and user {user:?} could not fix it ({message}); FOR TABLE needs ownership of the tables (FOR ALL TABLES a superuser): have the table owner run `{sql}`, or GRANT the owner role to {user:?}")]
    PublicationDenied {
        /// The publication.
        publication: String,
        /// This connector's role.
        user: String,
        /// The statement that was refused.
        sql: String,
        /// The server's message.
        message: String,
    },
    /// Creating the slot found every `max_replication_slots` in use (SQLSTATE 53400).
    #[error("no free replication slot for {slot:?}: max_replication_slots = {max} and all are in use ({in_use}); drop an unused one (SELECT pg_drop_replication_slot('<name>')) or raise max_replication_slots (needs a restart)")]
    NoFreeSlot {
        /// The slot to create.
        slot: String,
        /// `max_replication_slots`.
        max: i64,
        /// The slots that exist (the first 20, `(active)` marked).
        in_use: String,
    },
    /// The role may not create the slot (SQLSTATE 42501).
    #[error("user {user:?} may not create replication slot {slot:?}: {message}; ALTER ROLE {} REPLICATION", super::catalog::quote_ident(user))]
    SlotCreateDenied {
        /// The slot to create.
        slot: String,
        /// This connector's role.
        user: String,
        /// The server's message.
        message: String,
    },
    /// Another process streams from the slot.
    #[error("replication slot {slot:?} is in use by another process: {holder}; another outboxd (or Debezium) is reading it. Stop it, or give this connector its own slot (slot_name / slot.name)")]
    SlotInUse {
        /// The slot.
        slot: String,
        /// Who (`pid N (application_name ...)`).
        holder: String,
    },
    /// After a group takeover, the previous owner's walsender still holds the slot and this
    /// role may not end it (transient: retried until it goes away).
    #[error("replication slot {slot:?} is still held by the previous owner's walsender ({holder}) and role {user:?} may not end it; GRANT pg_signal_backend TO {user} (or run every member as the role that streams from the slot); retrying")]
    SlotHeld {
        /// The slot.
        slot: String,
        /// Who (`pid N (application_name ...)`).
        holder: String,
        /// This connector's role.
        user: String,
    },
    /// The slot can no longer serve the connector's checkpoint: the WAL since it is gone
    /// for this connector (slot dropped, confirmed past the checkpoint, WAL lost).
    #[error("{reason}. The events committed after LSN {checkpoint} that were not delivered yet are lost for connector {connector}; outboxd will not skip them on its own. Either bring back a server that still has them, or start fresh, accepting the gap: stop the relay, run `outboxd checkpoint reset --config <its file> --connector {connector}`, and start it again (it then streams from the slot's confirmed_flush_lsn, or creates the slot at the current WAL position)")]
    CheckpointLost {
        /// The connector.
        connector: String,
        /// The checkpoint the connector would resume at.
        checkpoint: Lsn,
        /// What the slot is missing ([`super::catalog::slot::checkpoint_gap`]).
        reason: String,
    },
    /// While the connector streamed, the publication stopped carrying the rows of an outbox
    /// table (`catalog::coverage`): pgoutput sends nothing for rows it does not carry, and a
    /// later fix does not bring them back out of the slot. The slot was not confirmed past
    /// the last WAL position proven covered.
    #[error("{0}")]
    CoverageLost(Box<CoverageLoss>),
    /// The walsender cannot decode a change: the publication did not exist when it was
    /// written (dropped, or created after it; SQLSTATE 42704 from pgoutput). PostgreSQL
    /// decodes with the publications of the change's time, so this slot never will.
    #[error("PostgreSQL cannot decode the changes after LSN {after} through publication {publication:?} ({message}): a change is decoded with the publications of its time, and the publication did not exist when these were written (it was dropped, or created after them), so this slot never will, and the connector stopped before them. Outbox rows committed while it did not exist are not delivered by outboxd: re-insert them, with their ids (delete and insert them again in one transaction), once the connector streams again. To go on, make sure the publication exists (outboxd creates it when it starts, unless publication_autocreate is disabled), step past the changes written before it existed again: `outboxd checkpoint set --config <its file> --connector {connector} --position lsn:{}`{}, and start outboxd again (if publication_name was changed, going back to the publication the slot streamed with is the other way)", created_at.map(|l| l.to_string()).unwrap_or_else(|| "<LSN>".into()), if created_at.is_some() { " (where outboxd created it again)" } else { " with the WAL position right after it was created again (outboxd logs `created the publication at LSN ...` when it creates it)" })]
    PublicationNotInWal {
        /// The connector.
        connector: String,
        /// The publication.
        publication: String,
        /// The last position handed on.
        after: Lsn,
        /// Where this session's start created the publication, if it did.
        created_at: Option<Lsn>,
        /// The server's message.
        message: String,
    },
    /// Something just created or found is gone again (a concurrent drop).
    #[error("{what} vanished")]
    Vanished {
        /// What (`replication slot "x" after creation`).
        what: String,
    },
    /// The server sent an LSN that does not parse.
    #[error("the server sent an unreadable LSN: {source}")]
    UnreadableLsn {
        /// The parser's error.
        #[source]
        source: crate::position::PositionError,
    },
    /// The checkpoint is not an LSN.
    #[error("the checkpoint position {position} is not a PostgreSQL LSN; was the checkpoint written for another source? Reset it (`outboxd checkpoint reset`) or fix the config")]
    NotAnLsn {
        /// The checkpoint's position.
        position: SourcePosition,
    },
    /// The replication connection's server error.
    #[error("PostgreSQL replication at {at}: {message}")]
    Replication {
        /// `host:port/dbname`.
        at: String,
        /// The server's message, with its SQLSTATE.
        message: String,
        /// The SQLSTATE read from it.
        sqlstate: Option<SqlState>,
    },
    /// The replication connection's authentication failed.
    #[error("PostgreSQL at {at} refused user {user:?}: {message}; check {keys}")]
    ReplicationAuth {
        /// `host:port/dbname`.
        at: String,
        /// The role.
        user: String,
        /// What failed.
        message: String,
        /// The settings to check, as the connector's format names them.
        keys: &'static str,
    },
    /// TLS on the replication connection failed.
    #[error(
        "PostgreSQL replication at {at}: TLS: {message}{}",
        crate::tls::expiry::note(message)
    )]
    ReplicationTls {
        /// `host:port/dbname`.
        at: String,
        /// What failed.
        message: String,
    },
    /// The replication stream broke the protocol, or a frame was too large to accept.
    #[error("PostgreSQL replication at {at}: {message}")]
    ReplicationProtocol {
        /// `host:port/dbname`.
        at: String,
        /// What happened.
        message: String,
    },
    /// The replication connection failed otherwise (lost, reset; transient).
    #[error("PostgreSQL replication at {at}: {message}")]
    ReplicationLost {
        /// `host:port/dbname`.
        at: String,
        /// What happened.
        message: String,
    },
    /// The server ended the replication stream.
    #[error("the server ended the replication stream")]
    StreamEnded,
    /// A pgoutput message did not decode.
    #[error("pgoutput decoding failed at LSN {lsn}: {source}")]
    Decode {
        /// `wal_start` of the message.
        lsn: Lsn,
        /// The decoder's error.
        #[source]
        source: PgOutputError,
    },
    /// The stream cannot be turned into outbox events (a protocol violation, a value that
    /// does not decode, a logical decoding message that is not JSON).
    #[error("PostgreSQL {message} after LSN {after}: {source}")]
    Adapter {
        /// The pgoutput message kind.
        message: &'static str,
        /// The last position handed on.
        after: Lsn,
        /// What is wrong.
        #[source]
        source: Box<AdapterError>,
    },
}

/// What [`PgError::CoverageLost`] says.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{what}, while connector {connector} streamed (seen by its publication check after {since}). PostgreSQL decodes each change with the publication as it was when the change was written, so {rows}; the connector stopped without confirming the replication slot past LSN {proven}. To go on: {fix}; start outboxd again; then re-insert the outbox rows committed since {since} that are not in Kafka, with their ids (delete and insert them again in one transaction; consumers that deduplicate by the id header see each once)")]
pub struct CoverageLoss {
    /// The connector.
    pub connector: String,
    /// What happened (`publication "p" does not include outbox table public.outbox`).
    pub what: String,
    /// What became of the rows committed meanwhile.
    pub rows: String,
    /// What to do.
    pub fix: String,
    /// The WAL position up to which coverage was proven (the slot is not confirmed beyond
    /// it).
    pub proven: Lsn,
    /// The server's time (UTC) of the last check that found the outbox carried.
    pub since: String,
}

impl From<crate::requirement::CheckResult> for PgError {
    /// A failed requirement check, for `run` to stop with ([`crate::requirement::enforce`]).
    fn from(check: crate::requirement::CheckResult) -> Self {
        PgError::Requirement {
            check: check.name,
            detail: check.detail,
        }
    }
}

/// SQLSTATEs with which the replication connection's server errors are definite: the same
/// request fails again until an operator acts.
const DEFINITE_REPLICATION_STATES: [&SqlState; 7] = [
    &SqlState::INVALID_PASSWORD,
    &SqlState::INVALID_AUTHORIZATION_SPECIFICATION,
    &SqlState::INVALID_CATALOG_NAME,
    &SqlState::INSUFFICIENT_PRIVILEGE,
    // WAL the slot needs was removed.
    &SqlState::UNDEFINED_FILE,
    // The slot was invalidated, or wal_level is not logical.
    &SqlState::OBJECT_NOT_IN_PREREQUISITE_STATE,
    // The publication does not exist.
    &SqlState::UNDEFINED_OBJECT,
];

impl PgError {
    /// Transient (retry after a backoff) or definite (stop), by variant and SQLSTATE.
    pub fn class(&self) -> Class {
        match self {
            PgError::Connect { .. }
            | PgError::Timeout { .. }
            | PgError::Sql { .. }
            | PgError::Vanished { .. }
            | PgError::SlotHeld { .. }
            | PgError::ReplicationLost { .. }
            | PgError::StreamEnded => Class::Transient,
            PgError::Replication { sqlstate, .. } => match sqlstate {
                Some(s) if DEFINITE_REPLICATION_STATES.contains(&s) => Class::Definite,
                _ => Class::Transient,
            },
            PgError::AuthFailed { .. }
            | PgError::PlaintextRefused { .. }
            | PgError::TlsSetting { .. }
            | PgError::TlsDeclined { .. }
            | PgError::Tls { .. }
            | PgError::UnknownDatabase { .. }
            | PgError::InsufficientPrivilege { .. }
            | PgError::Requirement { .. }
            | PgError::PublicationDenied { .. }
            | PgError::NoFreeSlot { .. }
            | PgError::SlotCreateDenied { .. }
            | PgError::SlotInUse { .. }
            | PgError::CheckpointLost { .. }
            | PgError::CoverageLost { .. }
            | PgError::PublicationNotInWal { .. }
            | PgError::UnreadableLsn { .. }
            | PgError::NotAnLsn { .. }
            | PgError::ReplicationAuth { .. }
            | PgError::ReplicationTls { .. }
            | PgError::ReplicationProtocol { .. }
            | PgError::Decode { .. }
            | PgError::Adapter { .. } => Class::Definite,
        }
    }

    /// A `tokio-postgres` error, as the variant its SQLSTATE says.
    pub fn from_sql(e: &tokio_postgres::Error, cfg: &PostgresSourceConfig) -> Self {
        let at = where_(cfg);
        let Some(db) = e.as_db_error() else {
            return PgError::Sql {
                at,
                message: e.to_string(),
                sqlstate: None,
            };
        };
        let code = db.code();
        let message = db.message().to_string();
        if *code == SqlState::INVALID_PASSWORD
            || *code == SqlState::INVALID_AUTHORIZATION_SPECIFICATION
        {
            PgError::AuthFailed {
                at,
                user: cfg.user.clone(),
                message,
                keys: credential_keys(cfg),
            }
        } else if *code == SqlState::INVALID_CATALOG_NAME {
            PgError::UnknownDatabase {
                at: format!("{}:{}", cfg.host, cfg.port),
                message,
                key: cfg.format.key("dbname", "database.dbname"),
            }
        } else if *code == SqlState::INSUFFICIENT_PRIVILEGE {
            PgError::InsufficientPrivilege {
                at,
                user: cfg.user.clone(),
                message,
            }
        } else {
            PgError::Sql {
                at,
                message,
                sqlstate: Some(code.clone()),
            }
        }
    }

    /// A `tokio-postgres` error while connecting: without a server answer it is "cannot
    /// connect", with the cause (the driver's outermost message says only "error connecting
    /// to server").
    pub fn from_connect(e: &tokio_postgres::Error, cfg: &PostgresSourceConfig) -> Self {
        if e.as_db_error().is_some() {
            return Self::from_sql(e, cfg);
        }
        let cause = match std::error::Error::source(e) {
            Some(inner) => match inner.downcast_ref::<std::io::Error>() {
                Some(io) => crate::error::io_cause(io),
                None => inner.to_string(),
            },
            None => e.to_string(),
        };
        PgError::Connect {
            at: where_(cfg),
            cause,
        }
    }

    /// An error of the replication connection.
    pub fn from_replication(
        e: &pgwire_replication::PgWireError,
        cfg: &PostgresSourceConfig,
    ) -> Self {
        use pgwire_replication::PgWireError as E;
        let at = where_(cfg);
        match e {
            E::Server(msg) => PgError::Replication {
                at,
                sqlstate: sqlstate_in(msg),
                message: msg.clone(),
            },
            E::Auth(msg) => PgError::ReplicationAuth {
                at,
                user: cfg.user.clone(),
                message: msg.clone(),
                keys: credential_keys(cfg),
            },
            E::Tls(msg) => PgError::ReplicationTls {
                at,
                message: msg.clone(),
            },
            E::Protocol(_) | E::MessageTooLarge { .. } => PgError::ReplicationProtocol {
                at,
                message: e.to_string(),
            },
            other => PgError::ReplicationLost {
                at,
                message: other.to_string(),
            },
        }
    }
}

/// The SQLSTATE at the end of a server error as pgwire-replication words it
/// (`message (SQLSTATE 55000)`).
pub fn sqlstate_in(message: &str) -> Option<SqlState> {
    let (_, rest) = message.rsplit_once("(SQLSTATE ")?;
    let code = rest.strip_suffix(')')?;
    (code.len() == 5 && code.bytes().all(|b| b.is_ascii_alphanumeric()))
        .then(|| SqlState::from_code(code))
}

/// The credential settings, as the connector's format names them.
fn credential_keys(cfg: &PostgresSourceConfig) -> &'static str {
    cfg.format.key(
        "user / password (password_env, password_file)",
        "database.user / database.password",
    )
}

/// `host:port/dbname` of the source, for messages.
pub(crate) fn where_(cfg: &PostgresSourceConfig) -> String {
    format!("{}:{}/{}", cfg.host, cfg.port, cfg.dbname)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqlstates_are_read_from_replication_errors() {
        assert_eq!(
            sqlstate_in("replication slot \"s\" is active for PID 7 (SQLSTATE 55006)"),
            Some(SqlState::OBJECT_IN_USE)
        );
        assert_eq!(
            sqlstate_in("password authentication failed (SQLSTATE 28P01)"),
            Some(SqlState::INVALID_PASSWORD)
        );
        assert_eq!(sqlstate_in("no code here"), None);
        assert_eq!(sqlstate_in("odd (SQLSTATE 1234)"), None);
    }

    /// Hints name the settings as the connector's own format does: TOML keys for a TOML
    /// connector, Debezium's for a Debezium JSON, never the other's.
    #[test]
    fn hints_use_the_connectors_format() {
        use crate::config::{example_source, ConfigFormat, SourceConfig};
        for (format, credentials, mode, rootcert, foreign) in [
            (
                ConfigFormat::Toml,
                "user / password (password_env, password_file)",
                "tls.mode",
                "tls.rootcert",
                "database.",
            ),
            (
                ConfigFormat::DebeziumJson,
                "database.user / database.password",
                "database.sslmode",
                "database.sslrootcert",
                "password_env",
            ),
        ] {
            let SourceConfig::Postgres(cfg) = example_source("postgres", format) else {
                panic!("a PostgreSQL source")
            };
            let tls = PgTlsNames::of(format);
            assert_eq!(credential_keys(&cfg), credentials);
            let at = where_(&cfg);
            let declined = PgError::TlsDeclined {
                at: at.clone(),
                mode: "require",
                tls,
            }
            .to_string();
            let refused = PgError::PlaintextRefused {
                at: at.clone(),
                user: cfg.user.clone(),
                message: "no pg_hba.conf entry".into(),
                tls,
            }
            .to_string();
            let failed = PgError::Tls {
                at,
                cause: "invalid peer certificate: UnknownIssuer".into(),
                tls,
            }
            .to_string();
            assert!(
                declined.contains(&format!("but {mode}=require needs it"))
                    && declined.contains(&format!("or set {mode}=prefer / disable")),
                "{declined}"
            );
            assert!(
                refused.contains(&format!("set {mode} to require")),
                "{refused}"
            );
            assert!(
                failed.contains(&format!("check {rootcert} (the CA")),
                "{failed}"
            );
            for text in [&declined, &refused, &failed] {
                assert!(!text.contains(foreign), "{format:?}: {text}");
            }
        }
    }
}
