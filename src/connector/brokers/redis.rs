//! A Redis Streams connector: the exactly-once loop with the checkpoint in Redis (`store =
//! "sink"`), else the at-least-once loop with the configured store.

use tokio::sync::watch;

use crate::checkpoint::{CheckpointStore, RedisCheckpointStore};
use crate::config::sinks::RedisSinkConfig;
use crate::config::CheckpointConfig;
use crate::health::Health;
use crate::pipeline::transactional::BatchOptions;
use crate::pipeline::Error;
use crate::sink::redis::Mode;
use crate::sink::RedisSink;

use super::super::open::OpenSink;
use super::super::Connector;

impl Connector {
    /// A Redis Streams sink: the exactly-once loop with the checkpoint in Redis (`store =
    /// "sink"`), else the at-least-once loop with the configured store.
    pub(super) async fn run_on_redis(
        &self,
        r: &RedisSinkConfig,
        store: &mut dyn CheckpointStore,
        health: &Health,
        shutdown: watch::Receiver<bool>,
    ) -> Result<(), Error> {
        match &self.cfg.checkpoint {
            CheckpointConfig::Sink {} => {
                let opener = RedisOpen {
                    cfg: r,
                    connector: self,
                    mode: Mode::Transactional,
                };
                let store = RedisCheckpointStore::new(r, &self.cfg.name);
                self.run_transactional(&opener, &store, &redis_batch(r), health, shutdown)
                    .await
            }
            _ => {
                let opener = RedisOpen {
                    cfg: r,
                    connector: self,
                    mode: Mode::Acked,
                };
                self.run_acked(&opener, store, health, shutdown).await
            }
        }
    }
}

/// The bounds of one Redis batch (one commit script): `batch_max_events` and
/// `batch_max_bytes` of the sink, smaller than a Kafka transaction's because Redis runs the
/// script to its end before it serves any other client (about 50 ms for 5,000 entries of
/// 400 bytes with `appendfsync always`).
fn redis_batch(r: &RedisSinkConfig) -> BatchOptions {
    BatchOptions {
        max_events: r.batch_max_events,
        max_bytes: r.batch_max_bytes,
        ..BatchOptions::default()
    }
}

/// Opens a connector's Redis sink ([`RedisSink::open`]): for the exactly-once loop fenced by
/// a new epoch, for the at-least-once loop (a file checkpoint) appending record by record.
struct RedisOpen<'a> {
    cfg: &'a RedisSinkConfig,
    connector: &'a Connector,
    mode: Mode,
}

impl OpenSink for RedisOpen<'_> {
    type Sink = RedisSink;

    /// In a group, only while this member owns the connector: taking an epoch fences the
    /// owner.
    async fn open(&self, shutdown: &watch::Receiver<bool>) -> Result<Option<RedisSink>, Error> {
        self.connector.still_owned()?;
        let name = self.connector.cfg.name.as_str();
        Ok(RedisSink::open(self.cfg, name, self.mode, shutdown).await?)
    }

    /// Every batch is committed or dropped by the loop, every record answered when sent.
    async fn close(&self, _sink: RedisSink) -> Result<(), Error> {
        Ok(())
    }
}
