//! A connector's failure as a whole: [`Error`], one variant per layer below the delivery
//! loops (each source, the Kafka sink, the checkpoint store, a switch from Debezium) plus
//! what the loops and the connector's supervision decide themselves (an event stopped at,
//! a replay that diverged, a shutdown before Kafka answered, a lost task, a connector
//! handed over). Each layer's enum keeps its cause as `#[source]` and decides its own
//! [`Class`].

use std::time::Duration;

use super::poison::{DeadLetterRefused, Poison};
use crate::checkpoint::CheckpointError;
use crate::cutover::CutoverError;
use crate::error::Class;
use crate::lease::NotOwner;
use crate::sink::SinkError;
use crate::source::mysql::MysqlError;
use crate::source::postgres::PgError;
use crate::source::SourceError;

/// A connector's failure.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Error {
    /// A source: MySQL/MariaDB, PostgreSQL, or the connector no longer this member's.
    #[error(transparent)]
    Source(#[from] SourceError),
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
    #[error("replaying from the checkpoint to handle a record the sink refused, the relay found {found} where it expected {expected} (record {ordinal} after the checkpoint): the source did not replay the same events; the connector stops rather than dead-letter or skip the wrong event. Restart it (the refused record is then met again)")]
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
    /// The group took the connector away from this member while it was failing or about to
    /// restart (see [`NotOwner`]).
    #[error(transparent)]
    NotOwner(#[from] NotOwner),
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
            Error::Source(e) => e.class(),
            Error::Sink(e) => e.class(),
            Error::Checkpoint(e) => e.class(),
            Error::Cutover(e) => e.class(),
            Error::Poison(_)
            | Error::DeadLetter(_)
            | Error::ReplayDiverged { .. }
            | Error::TaskLost { .. }
            | Error::NotOwner(_) => Class::Definite,
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
        self.is_fenced()
            || matches!(
                self,
                Error::NotOwner(_) | Error::Source(SourceError::NotOwner(_))
            )
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

impl From<MysqlError> for Error {
    fn from(e: MysqlError) -> Self {
        Error::Source(e.into())
    }
}

impl From<PgError> for Error {
    fn from(e: PgError) -> Self {
        Error::Source(e.into())
    }
}
