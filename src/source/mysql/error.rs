//! The MySQL/MariaDB source's failures, classified in one place ([`MysqlError::class`]).
//!
//! Server errors are told apart by their error numbers (MySQL "Server Error Message
//! Reference", MariaDB "Error Codes"); connection failures by the I/O error's kind. Messages
//! name the server, the user and the setting to change, never a password.

use std::sync::Arc;
use std::time::Duration;

use super::adapter::XaOutboxRows;
use super::decode::DecodeError;
use crate::config::MysqlSourceConfig;
use crate::error::Class;
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
    /// Wrong user or password.
    #[error("MySQL/MariaDB at {addr} refused user {user:?}: access denied; check {keys}")]
    AccessDenied {
        /// `host:port`.
        addr: String,
        /// The user.
        user: String,
        /// The settings to check, as the connector's format names them.
        keys: &'static str,
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
    #[error("the server cannot send the binlog from the requested position: {message}; if the binlogs were purged, delete the connector's checkpoint and restart from the current position (events in between are lost), or restore the binlogs")]
    BinlogUnavailable {
        /// The server's message.
        message: String,
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
    /// A server setting the relay depends on is not as needed (the same check `outboxd
    /// check` prints as FAIL).
    #[error("{detail}")]
    Requirement {
        /// The check's name (`binlog_format`).
        check: String,
        /// What was found and what to change.
        detail: String,
    },
    /// A position the server reported could not be parsed.
    #[error("the server's {what} could not be parsed: {detail}")]
    UnreadablePosition {
        /// The variable (`gtid_binlog_pos`).
        what: &'static str,
        /// The parser's message.
        detail: String,
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
    /// An XA transaction wrote outbox rows.
    #[error("{source} (binlog position {position})")]
    XaOutbox {
        /// Where the stream stopped.
        position: BinlogFilePosition,
        /// What happened.
        #[source]
        source: XaOutboxRows,
    },
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
            | MysqlError::StreamEnded => Class::Transient,
            MysqlError::AccessDenied { .. }
            | MysqlError::MissingPrivilege { .. }
            | MysqlError::SameServerIdRepeated { .. }
            | MysqlError::BinlogUnavailable { .. }
            | MysqlError::Requirement { .. }
            | MysqlError::UnreadablePosition { .. }
            | MysqlError::NoBinlog { .. }
            | MysqlError::PositionMismatch { .. }
            | MysqlError::NotABinlogPosition { .. }
            | MysqlError::Decode { .. }
            | MysqlError::XaOutbox { .. } => Class::Definite,
        }
    }

    /// A `mysql_async` error of an established connection (or of its handshake), as the
    /// variant its error number or I/O kind says.
    pub fn from_driver(e: mysql_async::Error, cfg: &MysqlSourceConfig) -> Self {
        use codes::*;
        let addr = addr(cfg);
        match e {
            mysql_async::Error::Server(se) => match se.code {
                ER_ACCESS_DENIED_ERROR => MysqlError::AccessDenied {
                    addr,
                    user: cfg.user.clone(),
                    keys: cfg.format.key(
                        "user / password (password_env, password_file)",
                        "database.user / database.password",
                    ),
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

    /// A failure to open a connection: an I/O error before the server answered is "cannot
    /// connect"; anything the server said is classified as [`from_driver`](Self::from_driver).
    pub fn from_connect(e: mysql_async::Error, cfg: &MysqlSourceConfig) -> Self {
        match &e {
            mysql_async::Error::Io(mysql_async::IoError::Io(io)) => MysqlError::Connect {
                addr: addr(cfg),
                cause: io_cause(io),
            },
            _ => Self::from_driver(e, cfg),
        }
    }
}

/// `host:port` of the source.
pub(crate) fn addr(cfg: &MysqlSourceConfig) -> String {
    format!("{}:{}", cfg.host, cfg.port)
}

/// An I/O error in a few words: `connection refused`, `host unreachable`, or its own text.
pub(crate) fn io_cause(e: &std::io::Error) -> String {
    use std::io::ErrorKind as K;
    match e.kind() {
        K::ConnectionRefused => "connection refused".into(),
        K::HostUnreachable => "host unreachable".into(),
        K::NetworkUnreachable => "network unreachable".into(),
        K::TimedOut => "timed out".into(),
        K::ConnectionReset => "connection reset".into(),
        _ => match e.raw_os_error() {
            // A name that does not resolve comes back as a custom error with the resolver's text.
            None => e.to_string(),
            Some(_) => e
                .to_string()
                .split(" (os error")
                .next()
                .unwrap_or_default()
                .to_lowercase(),
        },
    }
}
