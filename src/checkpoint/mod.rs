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
#[cfg(test)]
pub(crate) mod memory;
pub mod nats;
pub mod redis;

use serde::{Deserialize, Serialize};

use crate::position::SourcePosition;

pub use error::CheckpointError;
pub use fenced::FencedCheckpointStore;
pub use file::FileCheckpointStore;
pub use kafka::KafkaCheckpointStore;
pub use nats::NatsCheckpointStore;
pub use redis::RedisCheckpointStore;

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
///
/// Asynchronous: the delivery loops and the commands await it on the runtime. A store whose
/// client library blocks (the Kafka store's consumer reads, the file store's fsyncs) does that
/// work on tokio's blocking pool, never on a runtime worker.
#[async_trait::async_trait]
pub trait CheckpointStore: Send + Sync {
    /// Reads the last stored checkpoint; `Ok(None)` when there is none yet.
    async fn load(&self) -> Result<Option<Checkpoint>, CheckpointError>;
    /// Durably replaces the stored checkpoint. Returns only once it would survive a crash.
    async fn store(&mut self, checkpoint: &Checkpoint) -> Result<(), CheckpointError>;
    /// Durably removes the stored checkpoint: the next [`load`](Self::load) finds none, and
    /// the connector's next start begins as a first start does (`outboxd checkpoint reset`).
    async fn clear(&mut self) -> Result<(), CheckpointError>;
    /// Connects whatever [`store`](Self::store) needs, so that the first checkpoint written
    /// while events stream does not stall the pipeline for a connection set-up. Call once
    /// before streaming. The default does nothing.
    async fn prepare(&mut self) -> Result<(), CheckpointError> {
        Ok(())
    }
}

/// Reads `store` ([`CheckpointStore::load`]) from synchronous code on a runtime worker
/// (`check`'s and `status`'s lists), blocking that worker meanwhile. The read itself happens
/// where the store does it (a Kafka store: on the blocking pool, so that its clients'
/// OpenSSL error-queue entries never reach the worker thread a MySQL TLS connection reads
/// on: `check` once read the checkpoint between a MariaDB server's checks and its
/// `SHOW GRANTS` failed with "PEM routines ... Expecting: CERTIFICATE").
pub fn load_apart(store: Box<dyn CheckpointStore>) -> Result<Option<Checkpoint>, CheckpointError> {
    tokio::task::block_in_place(|| tokio::runtime::Handle::current().block_on(store.load()))
}

/// Runs `f`, a store's blocking work (a Kafka consumer's reads, a file's fsyncs), on tokio's
/// blocking pool and awaits it; `what` names it should the runtime shut down meanwhile
/// ([`CheckpointError::Interrupted`]). A panic in `f` continues in the caller.
pub(crate) async fn on_blocking_pool<T: Send + 'static>(
    what: &'static str,
    f: impl FnOnce() -> Result<T, CheckpointError> + Send + 'static,
) -> Result<T, CheckpointError> {
    match tokio::task::spawn_blocking(f).await {
        Ok(r) => r,
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Err(_) => Err(CheckpointError::Interrupted { what }),
    }
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

pub use crate::clock::now_ms;
