//! Switching a connector from a running Debezium to outboxd and back, with nothing lost
//! and nothing duplicated (`outboxd diff`, `outboxd checkpoint import-debezium`,
//! `outboxd checkpoint export-debezium`; README "Migrating from Debezium" is the runbook).
//!
//! * [`java_serial`]: a standalone worker's offsets file (Java serialization), parsed and
//!   written without a JVM.
//! * [`offsets`]: Debezium's offset keys and values (MySQL/MariaDB, PostgreSQL).
//! * `worker`: where Kafka Connect keeps them (offsets topic, offsets file, REST, KIP-875)
//!   and whether it still runs the connector.
//! * `binlog`, `wal`: the source side. A Debezium offset becomes an outboxd checkpoint
//!   exactly (its position plus `skip`, the outbox rows of the next transaction already
//!   delivered) by reading that transaction from the server: Debezium counts events and
//!   rows (`event`, `row`) or names LSNs (`lsn_commit`, `lsn_proc`), outboxd counts outbox
//!   rows. The same reading turns an outboxd checkpoint back into Debezium's terms. Both
//!   refuse a position the server no longer serves, and a Debezium still reading.
//! * `dedupe`: what Debezium wrote after the offset it committed (it is at-least-once) is
//!   read back from the routed topics and skipped by the delivery loops until the source is
//!   past the time Debezium stopped ([`crate::checkpoint::Cutover`], carried in the
//!   checkpoint until then).
//! * `source`: the steps above for each source, one arm per source (the commands never match
//!   on the source).
//! * `topics`: the topics a connector's router can write, from `route.topic.replacement`.
//! * `diff`: pairs a Debezium topic set with a shadow run's by event id and compares them.

pub(crate) mod binlog;
pub(crate) mod dedupe;
pub(crate) mod diff;
pub mod java_serial;
pub mod offsets;
pub(crate) mod source;
pub(crate) mod topics;
pub(crate) mod wal;
pub(crate) mod worker;

use crate::error::Class;

/// Why a cutover step could not be done.
#[derive(Debug, Clone, thiserror::Error)]
pub enum CutoverError {
    /// Something did not answer (Kafka, Kafka Connect's REST API, the database): try again.
    #[error("{what}: {detail}")]
    Unavailable {
        /// What was asked of whom.
        what: String,
        /// Why it failed.
        detail: String,
    },
    /// The step is refused: the message says what was found and what to do.
    #[error("{message}")]
    Refused {
        /// What was found, and what to do.
        message: String,
    },
}

impl CutoverError {
    /// A transient failure of `what`.
    pub fn unavailable(what: impl Into<String>, detail: String) -> Self {
        Self::Unavailable {
            what: what.into(),
            detail,
        }
    }

    /// A definite refusal saying what to do.
    pub fn refused(message: impl Into<String>) -> Self {
        Self::Refused {
            message: message.into(),
        }
    }

    /// Transient for [`CutoverError::Unavailable`], definite otherwise.
    pub fn class(&self) -> Class {
        match self {
            Self::Unavailable { .. } => Class::Transient,
            Self::Refused { .. } => Class::Definite,
        }
    }
}
