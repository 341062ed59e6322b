//! At-least-once checkpoints of a group member, fenced the way exactly-once ones are.
//!
//! In at-least-once mode the records go through an idempotent producer and the checkpoint
//! record is written once they are acknowledged. A member that lost its group membership
//! without knowing (frozen, or cut off from Kafka past its session) could then write a
//! checkpoint *after* its successor had read the store and moved on: the store holds the
//! last record per key (compaction keeps it, and `load` reads it), so the checkpoint would go
//! backward — events delivered again at the next takeover and, on PostgreSQL, a slot
//! confirmed past the checkpoint, which the next owner must take for lost events.
//!
//! This store writes each checkpoint record in a Kafka transaction of its own, with the
//! connector's `transactional.id` (the one exactly-once mode uses; records still go through
//! the idempotent producer). [`prepare`](CheckpointStore::prepare) runs `init_transactions`,
//! which fences every older producer with that id and aborts its open transaction, and the
//! connector calls it *before* [`load`](CheckpointStore::load): no checkpoint an older owner
//! writes can become visible after the new owner read the store, so the store never goes
//! backward. The store is read `read_committed`.
//!
//! Why not an owner generation in the record that `load` honours: compaction keeps the last
//! record per key, whatever its generation, so a zombie's late record would still replace
//! its successor's. Kafka's producer fencing is the mechanism built for exactly this.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use super::{Checkpoint, CheckpointError, CheckpointStore, KafkaCheckpointStore};
use crate::config::KafkaConfig;
use crate::sink::{KafkaLink, KafkaRecord, KafkaSink, SinkError};

/// Longest one checkpoint transaction (begin, record, commit) may take before the write
/// counts as failed (transient: the connector restarts from the stored checkpoint, and its
/// next `init_transactions` fences the unfinished one).
const WRITE_TIMEOUT: Duration = Duration::from_secs(5);

/// A connector's Kafka checkpoint store whose writes are fenced by the connector's
/// `transactional.id`.
pub struct FencedCheckpointStore {
    store: KafkaCheckpointStore,
    kafka: KafkaConfig,
    connector: String,
    transactional_id: String,
    link: Arc<KafkaLink>,
    producer: Option<KafkaSink>,
    shutdown: Option<watch::Receiver<bool>>,
}

impl FencedCheckpointStore {
    /// The store of `connector` in `topic`, writing with `transactional_id`; its clients
    /// report to `link` (the connector's).
    pub fn new(
        kafka: &KafkaConfig,
        topic: &str,
        connector: &str,
        transactional_id: &str,
        link: Arc<KafkaLink>,
    ) -> Self {
        Self {
            store: KafkaCheckpointStore::new(kafka, topic, connector).with_link(link.clone()),
            kafka: kafka.clone(),
            connector: connector.to_string(),
            transactional_id: transactional_id.to_string(),
            link,
            producer: None,
            shutdown: None,
        }
    }

    /// Gives up waiting for `init_transactions` (Kafka unreachable) once `shutdown` turns
    /// true, with a transient error: nothing was read yet then.
    pub fn with_shutdown(mut self, shutdown: watch::Receiver<bool>) -> Self {
        self.shutdown = Some(shutdown);
        self
    }

    /// Writes `record` in a transaction of its own, waiting for the commit (at most
    /// [`WRITE_TIMEOUT`]).
    async fn write(&mut self, record: KafkaRecord) -> Result<(), CheckpointError> {
        let Some(producer) = &self.producer else {
            return Err(CheckpointError::kafka(
                "writing the checkpoint before the store was prepared",
                None,
            ));
        };
        let transaction = async {
            producer.begin()?;
            producer.send(&record).await?;
            producer.commit().await
        };
        tokio::time::timeout(WRITE_TIMEOUT, transaction)
            .await
            .unwrap_or_else(|_| {
                Err(SinkError::NoAnswer {
                    what: "committing the checkpoint transaction",
                    within: WRITE_TIMEOUT,
                })
            })
            .map_err(|e| CheckpointError::Transaction(Box::new(e)))
    }
}

#[async_trait::async_trait]
impl CheckpointStore for FencedCheckpointStore {
    async fn load(&self) -> Result<Option<Checkpoint>, CheckpointError> {
        self.store.load().await
    }

    /// A new transactional producer, initialised: every older producer with the connector's
    /// `transactional.id` is fenced from here on. Call before [`load`](Self::load).
    async fn prepare(&mut self) -> Result<(), CheckpointError> {
        self.producer = None;
        let producer = KafkaSink::new_transactional(
            &self.kafka,
            &self.connector,
            &self.transactional_id,
            self.link.clone(),
        )
        .map_err(|e| CheckpointError::Transaction(Box::new(e)))?;
        let mut shutdown = self.shutdown.clone();
        let fenced = async {
            let stopped = async {
                match &mut shutdown {
                    Some(s) => {
                        let _ = s.wait_for(|v| *v).await;
                    }
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                r = producer.init_transactions() => r.map_err(|e| CheckpointError::Transaction(Box::new(e))),
                () = stopped => Err(CheckpointError::kafka("shut down while fencing older producers of the connector's transactional.id", None)),
            }
        };
        fenced.await?;
        self.producer = Some(producer);
        Ok(())
    }

    async fn store(&mut self, checkpoint: &Checkpoint) -> Result<(), CheckpointError> {
        let record = self.store.record(checkpoint)?;
        self.write(record).await
    }

    async fn clear(&mut self) -> Result<(), CheckpointError> {
        let tombstone = self.store.tombstone();
        self.write(tombstone).await
    }
}
