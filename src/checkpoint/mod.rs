//! Checkpoint stores: where the position after the last fully delivered source transaction
//! is kept, so a restart resumes exactly there.
//!
//! The stored document is JSON:
//! ```json
//! {"connector":"shop","position":{"kind":"mariadb_gtid","value":"0-1-42"},"updated_at_ms":1764440000000}
//! ```
//! plus `"skip": N` when a huge source transaction was split across Kafka transactions and
//! its first N outbox rows are already delivered, and `"cutover": {..}` while a switch from
//! Debezium is in progress ([`Cutover`]).
//! `position` is a [`SourcePosition`] in its serde form (see `crate::position`).

pub(crate) mod claim;
mod error;
pub mod fenced;
pub mod file;
pub mod kafka;
#[cfg(any(test, feature = "test-sinks"))]
pub(crate) mod memory;

use serde::{Deserialize, Serialize};

use crate::position::SourcePosition;

pub use error::CheckpointError;
pub use fenced::FencedCheckpointStore;
pub use file::FileCheckpointStore;
pub use kafka::KafkaCheckpointStore;

/// One stored checkpoint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Checkpoint {
    /// The connector's name (one checkpoint per connector).
    pub connector: String,
    /// The position after the last source transaction whose every record Kafka acknowledged
    /// — or, when `skip` > 0, the position *before* a source transaction that was split
    /// across Kafka transactions.
    pub position: SourcePosition,
    /// Outbox rows of the source transaction after `position` that were already delivered
    /// (a huge transaction split across Kafka transactions); 0 at a transaction boundary.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub skip: u64,
    /// Wall-clock time the checkpoint was written, milliseconds since the Unix epoch.
    pub updated_at_ms: i64,
    /// Set by `outboxd checkpoint import-debezium` and carried by every checkpoint after it
    /// until the switch is complete: Debezium may have written events after the offset it
    /// committed, which the connector reads back from the routed topics and skips.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cutover: Option<Cutover>,
}

/// A switch from Debezium in progress (`outboxd checkpoint import-debezium`): at every start
/// the connector reads the `id` headers of `topics` from `since_ms` on and skips the events
/// among them (Debezium delivered them after the offset it committed), until the source's
/// event times pass `until_ms` (Debezium was stopped before then: nothing later can be in
/// Kafka already). See `crate::cutover::dedupe`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cutover {
    /// Where the position came from: `debezium`.
    pub from: String,
    /// The routed topics Debezium wrote (those existing at the import).
    pub topics: Vec<String>,
    /// Read the topics back from this record time on, ms since the epoch.
    pub since_ms: i64,
    /// When Debezium was known stopped (the import), ms since the epoch.
    pub until_ms: i64,
}

/// How a checkpoint travels inside a sink transaction (the exactly-once loop): the record
/// that stores it, sent in the same transaction as the records it covers.
pub(crate) trait CheckpointRecords: Sync {
    /// The record storing `checkpoint`. Errors: it cannot be serialised.
    fn record(
        &self,
        checkpoint: &Checkpoint,
    ) -> Result<crate::record::KafkaRecord, CheckpointError>;
}

impl CheckpointRecords for KafkaCheckpointStore {
    fn record(
        &self,
        checkpoint: &Checkpoint,
    ) -> Result<crate::record::KafkaRecord, CheckpointError> {
        KafkaCheckpointStore::record(self, checkpoint)
    }
}

/// A durable home for a connector's checkpoint.
pub trait CheckpointStore: Send {
    /// Reads the last stored checkpoint; `Ok(None)` when there is none yet.
    fn load(&self) -> Result<Option<Checkpoint>, CheckpointError>;
    /// Durably replaces the stored checkpoint. Returns only once it would survive a crash.
    fn store(&mut self, checkpoint: &Checkpoint) -> Result<(), CheckpointError>;
    /// Durably removes the stored checkpoint: the next [`load`](Self::load) finds none, and
    /// the connector's next start begins as a first start does (`outboxd checkpoint reset`).
    fn clear(&mut self) -> Result<(), CheckpointError>;
    /// Connects whatever [`store`](Self::store) needs, so that the first checkpoint written
    /// while events stream does not stall the pipeline for a connection set-up. Blocking;
    /// call once before streaming. The default does nothing.
    fn prepare(&mut self) -> Result<(), CheckpointError> {
        Ok(())
    }
}

/// Reads `store` ([`CheckpointStore::load`]) on a thread of its own, blocking the calling
/// (tokio worker) thread meanwhile. A Kafka store's clients
/// (librdkafka, on the thread that creates them) may leave entries in that thread's OpenSSL
/// error queue, and a MySQL TLS connection open on the same thread (native-tls, OpenSSL)
/// then takes them for its own failure at its next read: `check` read the checkpoint between
/// a MariaDB server's checks and its `SHOW GRANTS` failed with "PEM routines ... Expecting:
/// CERTIFICATE". Used by `check` and `status`, which read the checkpoint after the source.
pub fn load_apart(store: Box<dyn CheckpointStore>) -> Result<Option<Checkpoint>, CheckpointError> {
    tokio::task::block_in_place(|| {
        std::thread::spawn(move || store.load())
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    })
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

pub use crate::clock::now_ms;
