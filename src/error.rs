//! What a connector's failure is, and what happens after it: retry (transient) or stop
//! (definite).
//!
//! Every failure that reaches a connector's supervisor is an [`Error`]: one variant per layer
//! (each source, the Kafka sink, the checkpoint store, the router), each a typed enum of its
//! own with the cause kept as `#[source]`. The layer's enum decides the [`Class`] in one
//! function (`class()`), from typed facts (MySQL error codes, SQLSTATEs, librdkafka error
//! codes), never from message text. Transient failures (connection lost, broker unavailable,
//! delivery timed out) restart from the last checkpoint after a backoff; definite ones (bad
//! configuration, a record Kafka refuses, `binlog_format` not ROW) stop the connector with a
//! message saying what to change. Neither ever advances the checkpoint.
//!
//! Messages never contain passwords or payload contents.

use std::time::Duration;

use crate::checkpoint::CheckpointError;
use crate::cutover::CutoverError;
use crate::pipeline::poison::{DeadLetterRefused, Poison};
use crate::sink::SinkError;
use crate::source::mysql::MysqlError;
use crate::source::postgres::PgError;

/// What happens after a failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// Retry from the last checkpoint after a backoff.
    Transient,
    /// Stop the connector; an operator has to change something first.
    Definite,
}

impl Class {
    /// `transient` or `definite`: the `kind` label of `outboxd_errors_total`.
    pub fn label(self) -> &'static str {
        match self {
            Class::Transient => "transient",
            Class::Definite => "definite",
        }
    }
}

/// A connector's failure.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Error {
    /// The MySQL/MariaDB source.
    #[error(transparent)]
    Mysql(#[from] MysqlError),
    /// The PostgreSQL source.
    #[error(transparent)]
    Postgres(#[from] PgError),
    /// The Kafka producer: configuration, enqueueing, deliveries, transactions.
    #[error(transparent)]
    Sink(#[from] SinkError),
    /// The checkpoint store.
    #[error(transparent)]
    Checkpoint(#[from] CheckpointError),
    /// A switch from Debezium: reading back what it delivered.
    #[error(transparent)]
    Cutover(#[from] CutoverError),
    /// An outbox event that cannot be delivered (the router refuses it, or Kafka refuses its
    /// record for good), stopped at with `errors.tolerance=none`.
    #[error(transparent)]
    Poison(#[from] Box<Poison>),
    /// The dead-letter topic refused a dead letter.
    #[error(transparent)]
    DeadLetter(#[from] Box<DeadLetterRefused>),
    /// A replay (to dead-letter or stop at a record Kafka refused) found another record at
    /// the planned place: the source did not send the same records again.
    #[error("replaying from the checkpoint to handle a record Kafka refused, the relay found {found} where it expected {expected} (record {ordinal} after the checkpoint): the source did not replay the same events; the connector stops rather than dead-letter or skip the wrong event. Restart it (the refused record is then met again)")]
    ReplayDiverged {
        /// The record's number after the checkpoint.
        ordinal: u64,
        /// What the plan expected there.
        expected: String,
        /// What came.
        found: String,
    },
    /// Shutdown came before Kafka acknowledged (or committed) what was read: nothing of it is
    /// lost, it is delivered again after restart.
    #[error("shutdown: Kafka did not {what} within {grace:?} of the signal; {consequence}")]
    ShutdownTimeout {
        /// What Kafka did not do, completing "Kafka did not ...".
        what: String,
        /// The grace the shutdown allowed.
        grace: Duration,
        /// What becomes of the records concerned.
        consequence: &'static str,
    },
    /// The connector's task ended without a result (it panicked): a bug, reported as such.
    #[error("the connector's task ended unexpectedly ({detail}); this is a bug in outboxd, please report it with the log")]
    TaskLost {
        /// What the runtime said.
        detail: String,
    },
    /// The group took the connector away from this member (revoked, or its session found
    /// lost) while the connector was failing or about to restart: it stops here without
    /// restarting, and the member that owns it now resumes from the last committed checkpoint.
    #[error("connector {connector} is no longer this member's (the group coordinator gave it to another member); it stops here without restarting")]
    NotOwner {
        /// The connector.
        connector: String,
    },
    /// Shutdown came while the connector waited to retry after a transient failure: the run
    /// that failed wrote no final checkpoint.
    #[error("shut down while waiting {backoff:?} to retry after: {cause}")]
    StoppedDuringRetry {
        /// The wait that was cut short.
        backoff: Duration,
        /// The failure that was to be retried.
        cause: Box<Error>,
    },
}

impl Error {
    /// Whether to retry: decided by the layer's own classifier.
    pub fn class(&self) -> Class {
        match self {
            Error::Mysql(e) => e.class(),
            Error::Postgres(e) => e.class(),
            Error::Sink(e) => e.class(),
            Error::Checkpoint(e) => e.class(),
            Error::Cutover(e) => e.class(),
            Error::Poison(_)
            | Error::DeadLetter(_)
            | Error::ReplayDiverged { .. }
            | Error::TaskLost { .. }
            | Error::NotOwner { .. } => Class::Definite,
            Error::ShutdownTimeout { .. } | Error::StoppedDuringRetry { .. } => Class::Transient,
        }
    }

    /// True when another instance with the same `transactional.id` took the connector over.
    pub fn is_fenced(&self) -> bool {
        match self {
            Error::Sink(e) => matches!(e, SinkError::Fenced { .. }),
            Error::Checkpoint(CheckpointError::Transaction(e)) => {
                matches!(**e, SinkError::Fenced { .. })
            }
            _ => false,
        }
    }

    /// True when the connector is (or is about to be) another member's: fenced by a newer
    /// owner, or its lease revoked. Not a failure of this member's.
    pub fn is_handed_over(&self) -> bool {
        self.is_fenced() || matches!(self, Error::NotOwner { .. })
    }

    /// True when the connector should be restarted after a backoff.
    pub fn is_transient(&self) -> bool {
        self.class() == Class::Transient
    }
}

impl From<Poison> for Error {
    fn from(e: Poison) -> Self {
        Error::Poison(Box::new(e))
    }
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
