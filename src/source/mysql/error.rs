//! The MySQL/MariaDB source's failures, classified in one place ([`MysqlError::class`]).
//!
//! Server errors are told apart by their error numbers (MySQL "Server Error Message
//! Reference", MariaDB "Error Codes"); connection failures by the I/O error's kind. Messages
//! name the server, the user and the setting to change, never a password.

use std::sync::Arc;
use std::time::Duration;

use super::decode::{DecodeError, TxnGtid, WriteVerb};
use crate::config::tls::MysqlTlsNames;
use crate::config::MysqlSourceConfig;
use crate::error::{io_cause, Class};
use crate::position::{BinlogFilePosition, SourcePosition};

/// The server error numbers outboxd reacts to.
pub mod codes {
    /// `ER_DBACCESS_DENIED_ERROR`: access denied to a database.
    pub const ER_DBACCESS_DENIED_ERROR: u16 = 1044;
    /// `ER_ACCESS_DENIED_ERROR`: wrong user or password.
    pub const ER_ACCESS_DENIED_ERROR: u16 = 1045;
    /// `ER_TABLEACCESS_DENIED_ERROR`: a command denied on a table.
    pub const ER_TABLEACCESS_DENIED_ERROR: u16 = 1142;
    /// `ER_SPECIFIC_ACCESS_DENIED_ERROR`: a privilege such as REPLICATION SLAVE is missing.
    pub const ER_SPECIFIC_ACCESS_DENIED_ERROR: u16 = 1227;
    /// `ER_MASTER_FATAL_ERROR_READING_BINLOG` (MySQL 8.0.26+:
    /// `ER_SOURCE_FATAL_ERROR_READING_BINLOG`): the binlog cannot be sent from the requested
    /// position (purged, unknown GTID). MySQL also uses it, with a message naming
    /// "server_uuid/server_id", when another replica registers with the same server id.
    pub const ER_MASTER_FATAL_ERROR_READING_BINLOG: u16 = 1236;
    /// MariaDB `ER_SLAVE_SAME_ID`: a replica with the same server_id connected.
    pub const ER_SLAVE_SAME_ID: u16 = 4052;
    /// MySQL `ER_SECURE_TRANSPORT_REQUIRED`: `require_secure_transport=ON` refused a
    /// connection without TLS (MariaDB answers such a connection with 1045 instead).
    pub const ER_SECURE_TRANSPORT_REQUIRED: u16 = 3159;
}

/// A failure of the MySQL/MariaDB source.
#[derive(Debug, Clone, thiserror::Error)]
pub enum MysqlError {
    /// No connection could be made (refused, unreachable, name not resolved).
    #[error("cannot connect to MySQL/MariaDB at {addr} ({cause}); check host/port and that the server listens there")]
    Connect {
        /// `host:port`.
        addr: String,
        /// The I/O error, in words (`connection refused`).
        cause: String,
    },
    /// The connection or its handshake did not complete in time.
    #[error("connecting to {addr} timed out after {after:?}")]
    ConnectTimeout {
        /// `host:port`.
        addr: String,
        /// `connect_timeout`.
        after: Duration,
    },
    /// An established connection failed (lost, reset, a driver error).
    #[error("MySQL/MariaDB connection to {addr}: {source}")]
    Connection {
        /// `host:port`.
        addr: String,
        /// The driver's error.
        #[source]
        source: Arc<mysql_async::Error>,
    },
    /// Wrong user or password (or, on MariaDB, a connection without TLS to a server with
    /// `require_secure_transport=ON`, which it refuses the same way).
    #[error("MySQL/MariaDB at {addr} refused user {user:?}: access denied; check {keys}{}", if *encrypted { String::new() } else { format!(" (the connection was not encrypted: a MariaDB server with require_secure_transport=ON refuses such connections this way too; then set {} to required, verify_ca or verify_identity)", tls.mode) })]
    AccessDenied {
        /// `host:port`.
        addr: String,
        /// The user.
        user: String,
        /// Whether the refused connection was encrypted.
        encrypted: bool,
        /// The settings to check, as the connector's format names them.
        keys: &'static str,
        /// The TLS settings, as the connector's format names them.
        tls: &'static MysqlTlsNames,
    },
    /// MySQL's `require_secure_transport` refused a connection without TLS.
    #[error("MySQL at {addr} refused a connection without TLS ({message}); set {} to required, verify_ca or verify_identity", tls.mode)]
    PlaintextRefused {
        /// `host:port`.
        addr: String,
        /// The server's message.
        message: String,
        /// The TLS settings, as the connector's format names them.
        tls: &'static MysqlTlsNames,
    },
    /// The TLS settings cannot be used (a store that does not open, a file that is missing).
    #[error("TLS settings for MySQL/MariaDB at {addr}: {source}")]
    TlsSetting {
        /// `host:port`.
        addr: String,
        /// What is wrong.
        #[source]
        source: crate::tls::TlsError,
    },
    /// TLS was asked of a server that does not offer it.
    #[error("MySQL/MariaDB at {addr} does not offer TLS, but {}={mode} needs it; enable TLS on the server (ssl_cert, ssl_key) or set {}=preferred / disabled", tls.mode, tls.mode)]
    TlsUnsupported {
        /// `host:port`.
        addr: String,
        /// The ssl mode.
        mode: &'static str,
        /// The TLS settings, as the connector's format names them.
        tls: &'static MysqlTlsNames,
    },
    /// The TLS handshake failed: the certificate did not verify (wrong CA, wrong host name),
    /// or the server refused our client certificate.
    #[error("TLS with MySQL/MariaDB at {addr} failed: {cause}; {}", crate::tls::expiry::advice(cause, || format!("check {} (the CA that signed the server's certificate), {} (verify_identity also checks the host name against the certificate) and, for mutual TLS, {}", tls.truststore, tls.mode, tls.keystore)))]
    Tls {
        /// `host:port`.
        addr: String,
        /// OpenSSL's reason (`certificate verify failed`, ...).
        cause: String,
        /// The TLS settings, as the connector's format names them.
        tls: &'static MysqlTlsNames,
    },
    /// A privilege the binlog stream needs is missing.
    #[error("user {user:?} lacks a privilege: {message}; grant REPLICATION SLAVE, REPLICATION CLIENT (MariaDB: also BINLOG MONITOR) to it")]
    MissingPrivilege {
        /// The user.
        user: String,
        /// The server's message.
        message: String,
    },
    /// Another replica registered with the same `server_id` and the server dropped us.
    #[error("another replica with the same server_id is connected: {message}")]
    SameServerId {
        /// The server's message.
        message: String,
    },
    /// [`MysqlError::SameServerId`] several times in a row: two replicas fight over one id.
    #[error("another replica with the same server_id is connected: {message}; {times} times in a row: another replica (another outboxd or Debezium connector?) uses {key} {server_id}; give every connector its own {key}")]
    SameServerIdRepeated {
        /// The setting, as the connector's format names it.
        key: &'static str,
        /// The id.
        server_id: u32,
        /// Failures in a row.
        times: u32,
        /// The server's last message.
        message: String,
    },
    /// The server cannot send the binlog from the requested position.
    #[error("the server cannot send the binlog from {}: {message}; if the binlogs were purged, the events after that position that were not delivered are lost: restore the binlogs, or start fresh accepting the gap (stop the relay, run `outboxd checkpoint reset --config <its file> --connector <name>`, start it again)", position.as_ref().map(|p| format!("position {p}")).unwrap_or_else(|| "the requested position".into()))]
    BinlogUnavailable {
        /// The server's message.
        message: String,
        /// The position asked for, when known.
        position: Option<SourcePosition>,
    },
    /// The server no longer has the binlogs that follow the connector's checkpoint (found
    /// before asking for them: see `server::checkpoint_gap`).
    #[error("{reason}. The events after checkpoint {position} that were not delivered yet are lost for connector {connector}; outboxd will not skip them on its own. Either restore the purged binlogs (or point the connector at a server that has them), or start fresh, accepting the gap: stop the relay, run `outboxd checkpoint reset --config <its file> --connector {connector}`, and start it again (it then starts at the server's current position, or the oldest binlog with start = \"earliest\")")]
    CheckpointLost {
        /// The connector.
        connector: String,
        /// The checkpoint.
        position: SourcePosition,
        /// What is missing.
        reason: String,
    },
    /// Any other server error (transient: lock waits, restarts, ...).
    #[error("MySQL/MariaDB error {code}: {message}")]
    Server {
        /// The error number.
        code: u16,
        /// The server's message.
        message: String,
    },
    /// The server answered a settings query with no row.
    #[error("the server returned no row for its settings")]
    NoSettings,
    /// A server setting the relay depends on is not as needed: a failed requirement check,
    /// the same `outboxd check` prints as FAIL (`server::requirements`).
    #[error("{detail}")]
    Requirement {
        /// The check's name (`binlog_format`).
        check: String,
        /// What was found and what to change.
        detail: String,
    },
    /// A position the server reported could not be parsed.
    #[error("the server's {what} could not be parsed: {source}")]
    UnreadablePosition {
        /// The variable (`gtid_binlog_pos`).
        what: &'static str,
        /// The parser's error.
        #[source]
        source: crate::position::PositionError,
    },
    /// The server lists no binlog.
    #[error("{query} returned nothing: is log_bin on?")]
    NoBinlog {
        /// The statement.
        query: &'static str,
    },
    /// The checkpoint's position kind does not fit the server.
    #[error("the checkpoint position {position} does not match the server's position tracking ({mode}); was the checkpoint written for another server or position_mode?")]
    PositionMismatch {
        /// The checkpoint position.
        position: SourcePosition,
        /// The server's tracking mode (`mariadb_gtid`).
        mode: &'static str,
    },
    /// The checkpoint is not a MySQL/MariaDB position at all.
    #[error("position {position} cannot be used with a MySQL/MariaDB source")]
    NotABinlogPosition {
        /// The position.
        position: SourcePosition,
    },
    /// The first start's position could not be checkpointed.
    #[error("the initial checkpoint could not be written within {after:?}")]
    InitialCheckpointTimeout {
        /// How long it was waited for.
        after: Duration,
    },
    /// Neither an event nor a heartbeat arrived for three heartbeat periods.
    #[error("no binlog event or heartbeat for {after:?}")]
    Silent {
        /// The silence.
        after: Duration,
    },
    /// The stream fell silent after the reader was held back although the server's binlog
    /// goes on past what it delivered (a TCP window left closed: [`super::stall`]).
    #[error(
        "the binlog stream stalled: nothing arrived for {silent:.1?} although the server's \
         binlog ends at {end}, past {read} read so far (its TCP window stayed closed after \
         the relay held the reader back); reconnecting"
    )]
    Stalled {
        /// The silence so far.
        silent: Duration,
        /// The `file:pos` after the last event read.
        read: BinlogFilePosition,
        /// The end of the server's binlog (`SHOW MASTER STATUS`).
        end: BinlogFilePosition,
    },
    /// The server closed the binlog stream.
    #[error("the server closed the binlog stream")]
    StreamEnded,
    /// An event could not be decoded (the same bytes fail again after a restart).
    #[error("binlog decoding failed: {source}")]
    Decode {
        /// The decoder's error.
        #[source]
        source: Arc<DecodeError>,
    },
    /// A transaction wrote an outbox table with a statement: [`StatementLogged`].
    #[error(transparent)]
    StatementLogged(Box<StatementLogged>),
    /// DDL removed outbox tables: [`TablesGone`].
    #[error(transparent)]
    TablesGone(Box<TablesGone>),
    /// Held XA rows beyond the bound: [`XaTooLarge`].
    #[error(transparent)]
    XaTooLarge(Box<XaTooLarge>),
    /// A stop could not wait for what is ahead of it to be checkpointed (Kafka slow or
    /// down): the connector restarts from its checkpoint and meets the stop again.
    #[error(
        "{what}; what is ahead of it was not checkpointed within {after:?}, so the connector \
         restarts from its checkpoint (and stops there once it is)"
    )]
    StopNotCheckpointed {
        /// The stop, in a few words.
        what: String,
        /// How long it waited.
        after: Duration,
    },
}

/// A transaction wrote an outbox table with a statement (its session's binlog_format was
/// STATEMENT or MIXED): its rows are not in the binlog as rows. Raised once everything
/// before the transaction is checkpointed.
#[derive(Debug, Clone, thiserror::Error)]
#[error(
    "transaction {} wrote outbox table {table} with {} logged as a statement (QUERY \
     event), because the writing session's binlog_format was STATEMENT \
     or MIXED: its rows are not in the binlog as rows, and outboxd cannot decode them \
     (nor will it skip them on its own). Everything before that transaction is delivered \
     and checkpointed ({before}); nothing of it is. To deliver its event(s), write them \
     again in a session with binlog_format=ROW (e.g. delete and re-insert the outbox \
     row(s) after SET SESSION binlog_format='ROW'); then step past the transaction (its \
     other outbox rows, if any, are not delivered either): stop the relay, run \
     `outboxd checkpoint set --config <its file> --connector {connector} --position \
     {after}`, and start it again. Keep binlog_format=ROW for every session that writes \
     the outbox (`outboxd check` lists who may change it)",
    gtid.as_ref().map(|g| g.to_string()).unwrap_or_else(|| format!("after {before}")),
    format!(
        "{} {}{}",
        if matches!(verb, WriteVerb::Insert) { "an" } else { "a" },
        verb.as_str(),
        if *xa { " (in a prepared XA transaction)" } else { "" }
    )
)]
pub struct StatementLogged {
    /// The connector.
    pub connector: String,
    /// The outbox table written.
    pub table: crate::event::TableName,
    /// The statement's verb.
    pub verb: WriteVerb,
    /// The transaction's GTID.
    pub gtid: Option<TxnGtid>,
    /// The position before the transaction: the checkpoint.
    pub before: SourcePosition,
    /// The position after it.
    pub after: SourcePosition,
    /// Whether it is a prepared XA transaction.
    pub xa: bool,
}
/// A DDL statement dropped or renamed outbox tables away and they do not exist now.
/// Raised once everything up to the DDL is checkpointed.
#[derive(Debug, Clone, thiserror::Error)]
#[error(
    "outbox table{} {} (DDL {}) and {} not exist now: outboxd stops here rather than read \
     on while its configuration names a table that is gone (rows written elsewhere \
     meanwhile would be passed by). Everything up to that DDL is delivered and \
     checkpointed ({at}). Create the table again (its rows are delivered from the \
     checkpoint on), or point {key} at the table the outbox rows go to now (e.g. its new \
     name: rows written to it after the checkpoint are then delivered), and restart",
    if tables.len() > 1 { "s" } else { "" },
    tables.iter().map(|(t, how)| format!("{t} was {how}")).collect::<Vec<_>>().join(", "),
    gtid.as_ref().map(|g| g.to_string()).unwrap_or_else(|| format!("before {at}")),
    if tables.len() > 1 { "do" } else { "does" },
)]
pub struct TablesGone {
    /// The tables and what happened to each.
    pub tables: Vec<(crate::event::TableName, String)>,
    /// The DDL's GTID.
    pub gtid: Option<TxnGtid>,
    /// The position after the DDL: the checkpoint.
    pub at: SourcePosition,
    /// The tables setting, as the connector's format names it.
    pub key: &'static str,
}
/// The outbox rows of prepared XA transactions held until their `XA COMMIT` would
/// exceed `xa_max_held_bytes`. Raised once everything before the transaction is
/// checkpointed.
#[derive(Debug, Clone, thiserror::Error)]
#[error(
    "prepared XA transaction {} makes the outbox rows held until their XA COMMIT exceed \
     xa_max_held_bytes={limit} ({rows} row(s) of prepared XA transactions): outboxd holds \
     them in memory, and stops rather than drop or deliver them before their commit. \
     Everything before that transaction is delivered and checkpointed ({before}). Raise \
     xa_max_held_bytes in [connectors.source] (a TOML connector) and restart",
    gtid.as_ref().map(|g| g.to_string()).unwrap_or_else(|| format!("after {before}"))
)]
pub struct XaTooLarge {
    /// The transaction's GTID.
    pub gtid: Option<TxnGtid>,
    /// Rows held with it.
    pub rows: usize,
    /// `xa_max_held_bytes`.
    pub limit: usize,
    /// The position before it: the checkpoint.
    pub before: SourcePosition,
}

impl From<crate::requirement::CheckResult> for MysqlError {
    /// A failed requirement check, for `run` to stop with ([`crate::requirement::enforce`]).
    fn from(check: crate::requirement::CheckResult) -> Self {
        MysqlError::Requirement {
            check: check.name,
            detail: check.detail,
        }
    }
}

impl MysqlError {
    /// Transient (retry after a backoff) or definite (stop), by variant and error number.
    pub fn class(&self) -> Class {
        match self {
            MysqlError::Connect { .. }
            | MysqlError::ConnectTimeout { .. }
            | MysqlError::Connection { .. }
            | MysqlError::SameServerId { .. }
            | MysqlError::Server { .. }
            | MysqlError::NoSettings
            | MysqlError::InitialCheckpointTimeout { .. }
            | MysqlError::Silent { .. }
            | MysqlError::Stalled { .. }
            | MysqlError::StopNotCheckpointed { .. }
            | MysqlError::StreamEnded => Class::Transient,
            MysqlError::AccessDenied { .. }
            | MysqlError::PlaintextRefused { .. }
            | MysqlError::TlsSetting { .. }
            | MysqlError::TlsUnsupported { .. }
            | MysqlError::Tls { .. }
            | MysqlError::MissingPrivilege { .. }
            | MysqlError::SameServerIdRepeated { .. }
            | MysqlError::BinlogUnavailable { .. }
            | MysqlError::CheckpointLost { .. }
            | MysqlError::Requirement { .. }
            | MysqlError::UnreadablePosition { .. }
            | MysqlError::NoBinlog { .. }
            | MysqlError::PositionMismatch { .. }
            | MysqlError::NotABinlogPosition { .. }
            | MysqlError::Decode { .. }
            | MysqlError::StatementLogged(_)
            | MysqlError::TablesGone(_)
            | MysqlError::XaTooLarge(_) => Class::Definite,
        }
    }

    /// The position a stop of the source checkpoints before it is raised: before the
    /// statement-logged transaction, after the DDL, before the XA transaction too large to
    /// hold; `None` for other failures.
    pub fn stop_position(&self) -> Option<&SourcePosition> {
        match self {
            MysqlError::StatementLogged(e) => Some(&e.before),
            MysqlError::TablesGone(e) => Some(&e.at),
            MysqlError::XaTooLarge(e) => Some(&e.before),
            _ => None,
        }
    }

    /// A stop in a few words (for [`MysqlError::StopNotCheckpointed`]).
    pub fn stop_summary(&self) -> String {
        let gtid = |g: &Option<TxnGtid>| g.as_ref().map(|g| format!(" {g}")).unwrap_or_default();
        match self {
            MysqlError::StatementLogged(e) => format!(
                "transaction{} wrote outbox table {} with a statement, which outboxd stops at",
                gtid(&e.gtid),
                e.table
            ),
            MysqlError::TablesGone(e) => format!(
                "DDL{} removed outbox table(s) {}, which outboxd stops after",
                gtid(&e.gtid),
                e.tables
                    .iter()
                    .map(|(t, _)| t.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            MysqlError::XaTooLarge(e) => format!(
                "prepared XA transaction{} exceeds xa_max_held_bytes={}, which outboxd stops \
                 at",
                gtid(&e.gtid),
                e.limit
            ),
            other => other.to_string(),
        }
    }

    /// The same stop, naming `stored` as the checkpoint it left (the position actually
    /// checkpointed before it: see `SourceContext::checkpoint_before_stop`).
    pub fn checkpointed_at(mut self, stored: SourcePosition) -> Self {
        match &mut self {
            MysqlError::StatementLogged(e) => e.before = stored,
            MysqlError::TablesGone(e) => e.at = stored,
            MysqlError::XaTooLarge(e) => e.before = stored,
            _ => {}
        }
        self
    }

    /// A `mysql_async` error of an established connection (or of its handshake), as the
    /// variant its error number or I/O kind says.
    pub fn from_driver(e: mysql_async::Error, cfg: &MysqlSourceConfig) -> Self {
        Self::from_server(e, cfg, true)
    }

    fn from_server(e: mysql_async::Error, cfg: &MysqlSourceConfig, encrypted: bool) -> Self {
        use codes::*;
        let addr = addr(cfg);
        match e {
            mysql_async::Error::Server(se) => match se.code {
                ER_ACCESS_DENIED_ERROR => MysqlError::AccessDenied {
                    addr,
                    user: cfg.user.clone(),
                    encrypted,
                    keys: cfg.format.key(
                        "user / password (password_env, password_file)",
                        "database.user / database.password",
                    ),
                    tls: MysqlTlsNames::of(cfg.format),
                },
                ER_SECURE_TRANSPORT_REQUIRED => MysqlError::PlaintextRefused {
                    addr,
                    message: se.message,
                    tls: MysqlTlsNames::of(cfg.format),
                },
                ER_SPECIFIC_ACCESS_DENIED_ERROR
                | ER_TABLEACCESS_DENIED_ERROR
                | ER_DBACCESS_DENIED_ERROR => MysqlError::MissingPrivilege {
                    user: cfg.user.clone(),
                    message: se.message,
                },
                ER_SLAVE_SAME_ID => MysqlError::SameServerId {
                    message: se.message,
                },
                // MySQL reports a replica with our server_id under the general binlog error,
                // telling it apart only in the message.
                ER_MASTER_FATAL_ERROR_READING_BINLOG
                    if se.message.contains("same server_uuid/server_id") =>
                {
                    MysqlError::SameServerId {
                        message: se.message,
                    }
                }
                ER_MASTER_FATAL_ERROR_READING_BINLOG => MysqlError::BinlogUnavailable {
                    message: se.message,
                    position: None,
                },
                code => MysqlError::Server {
                    code,
                    message: se.message,
                },
            },
            other => MysqlError::Connection {
                addr,
                source: Arc::new(other),
            },
        }
    }

    /// A failure to open a connection (`encrypted`: TLS was asked for): an I/O error before
    /// the server answered is "cannot connect"; a TLS failure or a server without TLS is
    /// definite; anything the server said is classified as [`from_driver`](Self::from_driver).
    pub fn from_connect(e: mysql_async::Error, cfg: &MysqlSourceConfig, encrypted: bool) -> Self {
        match &e {
            // The socket failing mid-handshake (a server restarting) is transient; OpenSSL
            // refusing the handshake (verification, protocol, an alert) is definite.
            mysql_async::Error::Io(mysql_async::IoError::Tls(tls)) => match io_source(tls) {
                Some(io) => MysqlError::Connect {
                    addr: addr(cfg),
                    cause: io_cause(io),
                },
                None => MysqlError::Tls {
                    addr: addr(cfg),
                    cause: tls_cause(tls),
                    tls: MysqlTlsNames::of(cfg.format),
                },
            },
            mysql_async::Error::Driver(mysql_async::DriverError::NoClientSslFlagFromServer) => {
                MysqlError::TlsUnsupported {
                    addr: addr(cfg),
                    mode: cfg.tls.mode.as_str(),
                    tls: MysqlTlsNames::of(cfg.format),
                }
            }
            mysql_async::Error::Io(mysql_async::IoError::Io(io)) => MysqlError::Connect {
                addr: addr(cfg),
                cause: io_cause(io),
            },
            _ => Self::from_server(e, cfg, encrypted),
        }
    }
}

/// The I/O error at the root of a TLS error, if the socket is what failed.
fn io_source<'a>(e: &'a (dyn std::error::Error + 'static)) -> Option<&'a std::io::Error> {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        if let Some(io) = err.downcast_ref::<std::io::Error>() {
            return Some(io);
        }
        cur = err.source();
    }
    None
}

/// OpenSSL's reason for a failed handshake, with its causes (`certificate verify failed`,
/// `... hostname mismatch`).
fn tls_cause(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut cur = e.source();
    while let Some(s) = cur {
        let t = s.to_string();
        if !out.contains(&t) {
            out.push_str(": ");
            out.push_str(&t);
        }
        cur = s.source();
    }
    out
}

/// `host:port` of the source.
pub(crate) fn addr(cfg: &MysqlSourceConfig) -> String {
    format!("{}:{}", cfg.host, cfg.port)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A real handshake, through native-tls as mysql_async makes it, with a server whose
    /// certificate expired (the test certificate, valid in January 2024 only): the error says
    /// the server's certificate expired and is renewed there, not to check the truststore.
    #[test]
    fn an_expired_server_certificate_is_named() {
        use std::net::{TcpListener, TcpStream};
        let identity = native_tls::Identity::from_pkcs8(
            include_bytes!("../../tls/testdata/expired-server.pem"),
            include_bytes!("../../tls/testdata/expired-server.key"),
        )
        .unwrap();
        let acceptor = native_tls::TlsAcceptor::new(identity).unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = std::thread::spawn(move || {
            let (s, _) = listener.accept().unwrap();
            let _ = acceptor.accept(s);
        });
        let ca =
            native_tls::Certificate::from_pem(include_bytes!("../../tls/testdata/expired-ca.pem"))
                .unwrap();
        let connector = native_tls::TlsConnector::builder()
            .add_root_certificate(ca)
            .build()
            .unwrap();
        let stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
        let err = match connector.connect("localhost", stream) {
            Err(native_tls::HandshakeError::Failure(e)) => e,
            Err(e) => panic!("{e}"),
            Ok(_) => panic!("the expired certificate was accepted"),
        };
        server.join().unwrap();
        use crate::config::{ConfigFormat, SourceConfig};
        let SourceConfig::Mysql(cfg) = crate::config::example_source("mariadb", ConfigFormat::Toml)
        else {
            panic!("a MySQL source")
        };
        let e = MysqlError::from_connect(
            mysql_async::Error::Io(mysql_async::IoError::from(err)),
            &cfg,
            true,
        );
        let text = e.to_string();
        assert!(matches!(e, MysqlError::Tls { .. }), "{text}");
        assert!(text.contains("certificate has expired"), "{text}");
        assert!(text.contains("the server's certificate expired"), "{text}");
        assert!(text.contains("renew it on the server"), "{text}");
        assert!(!text.contains("check truststore"), "{text}");
    }

    /// Hints name the settings as the connector's own format does: TOML keys for a TOML
    /// connector, Debezium's for a Debezium JSON, never the other's.
    #[test]
    fn hints_use_the_connectors_format() {
        use crate::config::{example_source, ConfigFormat, SourceConfig};
        for (format, credentials, tls_mode, truststore, foreign) in [
            (
                ConfigFormat::Toml,
                "check user / password (password_env, password_file)",
                "tls.mode",
                "tls.truststore",
                "database.",
            ),
            (
                ConfigFormat::DebeziumJson,
                "check database.user / database.password",
                "database.ssl.mode",
                "database.ssl.truststore",
                "password_env",
            ),
        ] {
            let SourceConfig::Mysql(cfg) = example_source("mariadb", format) else {
                panic!("a MariaDB source")
            };
            let denied = |code| {
                MysqlError::from_connect(
                    mysql_async::Error::Server(mysql_async::ServerError {
                        code,
                        message: "Access denied for user 'relay'".into(),
                        state: "28000".into(),
                    }),
                    &cfg,
                    false,
                )
                .to_string()
            };
            let access = denied(codes::ER_ACCESS_DENIED_ERROR);
            let plaintext = denied(codes::ER_SECURE_TRANSPORT_REQUIRED);
            let no_tls = MysqlError::from_connect(
                mysql_async::Error::Driver(mysql_async::DriverError::NoClientSslFlagFromServer),
                &cfg,
                true,
            )
            .to_string();
            let tls = MysqlError::Tls {
                addr: addr(&cfg),
                cause: "certificate verify failed".into(),
                tls: MysqlTlsNames::of(format),
            }
            .to_string();
            assert!(access.contains(credentials), "{format:?}: {access}");
            assert!(
                access.contains(&format!("then set {tls_mode} to required")),
                "{format:?}: {access}"
            );
            assert!(
                plaintext.contains(&format!("set {tls_mode} to required")),
                "{plaintext}"
            );
            assert!(
                no_tls.contains(&format!("but {tls_mode}=preferred needs it"))
                    && no_tls.contains(&format!("or set {tls_mode}=preferred / disabled")),
                "{no_tls}"
            );
            assert!(
                tls.contains(&format!("check {truststore} (the CA")),
                "{tls}"
            );
            for text in [&access, &plaintext, &no_tls, &tls] {
                assert!(!text.contains(foreign), "{format:?}: {text}");
            }
        }
    }

    #[test]
    fn source_stops_name_the_checkpoint_they_left_and_say_what_to_do() {
        let pos = |s: &str| s.parse::<SourcePosition>().unwrap();
        let gtid = Some(TxnGtid::Mariadb {
            domain: 0,
            server: 1,
            seq: 12,
        });
        let stop = MysqlError::StatementLogged(Box::new(StatementLogged {
            connector: "shop".into(),
            table: crate::event::TableName::new("shop", "outbox"),
            verb: WriteVerb::Insert,
            gtid: gtid.clone(),
            before: pos("mariadb_gtid:0-1-11"),
            after: pos("mariadb_gtid:0-1-12"),
            xa: false,
        }));
        assert_eq!(stop.class(), Class::Definite);
        assert_eq!(stop.stop_position(), Some(&pos("mariadb_gtid:0-1-11")));
        let stop = stop.checkpointed_at(pos("mariadb_gtid:0-1-10"));
        let text = stop.to_string();
        for want in [
            "transaction 0-1-12 wrote outbox table shop.outbox with an INSERT logged as a statement",
            "binlog_format was STATEMENT or MIXED",
            "delivered and checkpointed (mariadb_gtid:0-1-10)",
            "SET SESSION binlog_format='ROW'",
            "`outboxd checkpoint set --config <its file> --connector shop --position mariadb_gtid:0-1-12`",
        ] {
            assert!(text.contains(want), "{want}: {text}");
        }
        assert!(stop
            .stop_summary()
            .contains("0-1-12 wrote outbox table shop.outbox"));
        let waited = MysqlError::StopNotCheckpointed {
            what: stop.stop_summary(),
            after: Duration::from_secs(60),
        };
        assert_eq!(waited.class(), Class::Transient);
        assert!(!waited.to_string().contains("delivered and checkpointed"));

        let gone = MysqlError::TablesGone(Box::new(TablesGone {
            tables: vec![(
                crate::event::TableName::new("shop", "outbox"),
                "renamed to shop.outbox_v2".into(),
            )],
            gtid,
            at: pos("mariadb_gtid:0-1-12"),
            key: "tables",
        }));
        let text = gone.to_string();
        assert!(
            text.contains("outbox table shop.outbox was renamed to shop.outbox_v2 (DDL 0-1-12) and does not exist now")
                && text.contains("checkpointed (mariadb_gtid:0-1-12)")
                && text.contains("point tables at the table"),
            "{text}"
        );
        assert_eq!(MysqlError::StreamEnded.stop_position(), None);
    }
}
