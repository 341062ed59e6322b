//! A connector's checkpoint in a NATS JetStream key-value bucket (`[connectors.sink]
//! checkpoint_bucket`, default `outboxd_checkpoints`, created with history 1 when missing):
//! key = the connector name, value = the checkpoint JSON (see the module docs of
//! `crate::checkpoint`).
//!
//! Fenced by the key's revision: [`load`](CheckpointStore::load) remembers the revision it
//! read, and each [`store`](CheckpointStore::store) is a compare-and-set on it (KV `update`,
//! JetStream's `Nats-Expected-Last-Subject-Sequence`). When another instance of the connector
//! wrote the key since, the write is refused and this instance stops ("fenced", definite):
//! two instances cannot both advance the checkpoint. A write whose acknowledgement was lost
//! but which landed is recognised (the key holds exactly what was written) and not taken
//! for another instance's.

use std::sync::Arc;

use async_nats::jetstream::context::{GetStreamError, GetStreamErrorKind, KeyValueErrorKind};
use async_nats::jetstream::kv::{self, Operation, UpdateErrorKind};
use async_nats::jetstream::stream::{Config as StreamConfig, DiscardPolicy, StorageType};
use async_nats::jetstream::ErrorCode;
use bytes::Bytes;

use super::{Checkpoint, CheckpointError, CheckpointStore};
use crate::config::sinks::NatsSinkConfig;
use crate::error::Class;
use crate::sink::nats::connect::{connect, BROKER};
use crate::sink::nats::StreamNotes;

/// What the store knows of the key.
#[derive(Default)]
struct State {
    /// The bucket, once opened.
    kv: Option<kv::Store>,
    /// The key's revision this instance read or wrote last (0: the key never existed);
    /// `None` before the first load.
    revision: Option<u64>,
    /// The value of a write whose outcome is unknown (no acknowledgement).
    unconfirmed: Option<Bytes>,
}

/// The checkpoint store of a connector whose records go to NATS JetStream; see the module
/// docs.
pub struct NatsCheckpointStore {
    cfg: NatsSinkConfig,
    connector: String,
    notes: Arc<StreamNotes>,
    state: tokio::sync::Mutex<State>,
}

/// A transient or definite failure of the store.
fn broker(class: Class, detail: String) -> CheckpointError {
    CheckpointError::Broker {
        broker: BROKER,
        detail,
        class,
    }
}

/// Whether `e` (a bucket lookup's failure) says the bucket's stream does not exist.
fn bucket_missing(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cur = Some(e);
    while let Some(e) = cur {
        if let Some(g) = e.downcast_ref::<GetStreamError>() {
            if let GetStreamErrorKind::JetStream(j) = g.kind() {
                return j.error_code() == ErrorCode::STREAM_NOT_FOUND;
            }
        }
        cur = e.source();
    }
    false
}

impl NatsCheckpointStore {
    /// The store of `connector` in `cfg`'s bucket; the loaded checkpoint's time goes to
    /// `notes` (compared with the streams' duplicate windows).
    pub fn new(cfg: &NatsSinkConfig, connector: &str, notes: Arc<StreamNotes>) -> Self {
        Self {
            cfg: cfg.clone(),
            connector: connector.to_string(),
            notes,
            state: tokio::sync::Mutex::default(),
        }
    }

    /// The bucket, connecting first when needed; a missing bucket is created when
    /// `create`, else `None` (reading creates nothing: `check`, `status`).
    async fn bucket(
        &self,
        st: &mut State,
        create: bool,
    ) -> Result<Option<kv::Store>, CheckpointError> {
        if let Some(kv) = &st.kv {
            return Ok(Some(kv.clone()));
        }
        let client = connect(
            &self.cfg,
            &format!("outboxd:{}:checkpoint", self.connector),
            None,
        )
        .await
        .map_err(|f| broker(f.class, f.detail))?;
        let js = async_nats::jetstream::ContextBuilder::new()
            .timeout(self.cfg.ack_timeout)
            .build(client);
        let name = &self.cfg.checkpoint_bucket;
        let kv = match js.get_key_value(name).await {
            Ok(kv) => kv,
            Err(e) if e.kind() == KeyValueErrorKind::GetBucket && bucket_missing(&e) && !create => {
                return Ok(None)
            }
            Err(e) if e.kind() == KeyValueErrorKind::GetBucket && bucket_missing(&e) => {
                // The bucket's stream as async-nats's `create_key_value` makes it, created
                // directly: that call first asks for the account's information, which it
                // cannot read from nats-server 2.9.
                let created = js
                    .create_stream(StreamConfig {
                        name: format!("KV_{name}"),
                        description: Some("outboxd connector checkpoints".into()),
                        subjects: vec![format!("$KV.{name}.>")],
                        max_messages_per_subject: 1,
                        storage: StorageType::File,
                        allow_rollup: true,
                        deny_delete: true,
                        allow_direct: true,
                        discard: DiscardPolicy::New,
                        num_replicas: 1,
                        ..Default::default()
                    })
                    .await;
                let created = match created {
                    Ok(_) => js.get_key_value(name).await.map_err(|e| e.to_string()),
                    Err(e) => Err(e.to_string()),
                };
                match created {
                    Ok(kv) => {
                        tracing::info!(connector = %self.connector, "created the JetStream key-value bucket {name} for checkpoints");
                        kv
                    }
                    // Another instance created it meanwhile.
                    Err(_) if js.get_key_value(name).await.is_ok() => {
                        js.get_key_value(name).await.map_err(|e| {
                            broker(Class::Transient, format!("cannot open bucket {name}: {e}"))
                        })?
                    }
                    Err(e) => {
                        return Err(broker(
                            Class::Definite,
                            format!(
                                "cannot create the JetStream key-value bucket {name} for the \
                                 checkpoint ({e}); create it (`nats kv add {name} --history 1`) \
                                 or allow the user to"
                            ),
                        ))
                    }
                }
            }
            Err(e) if e.kind() == KeyValueErrorKind::InvalidStoreName => {
                return Err(broker(
                    Class::Definite,
                    format!("checkpoint_bucket {name:?} is not a valid key-value bucket name (letters, digits, '-' and '_')"),
                ))
            }
            Err(e) => {
                return Err(broker(
                    Class::Transient,
                    format!("cannot open the JetStream key-value bucket {name} ({e}); is JetStream enabled?"),
                ))
            }
        };
        st.kv = Some(kv.clone());
        Ok(Some(kv))
    }

    /// The bucket, created when missing.
    async fn created(&self, st: &mut State) -> Result<kv::Store, CheckpointError> {
        self.bucket(st, true).await?.ok_or_else(|| {
            broker(
                Class::Transient,
                format!("bucket {} vanished", self.cfg.checkpoint_bucket),
            )
        })
    }

    /// The key's current entry: its revision and value (`None` value: deleted or never set).
    async fn read(&self, kv: &kv::Store) -> Result<(u64, Option<Bytes>), CheckpointError> {
        match kv.entry(self.connector.as_str()).await {
            Ok(None) => Ok((0, None)),
            Ok(Some(e)) if e.operation == Operation::Put => Ok((e.revision, Some(e.value))),
            Ok(Some(e)) => Ok((e.revision, None)),
            Err(e) => Err(broker(
                Class::Transient,
                format!(
                    "cannot read the checkpoint of {} from bucket {} ({e})",
                    self.connector, self.cfg.checkpoint_bucket
                ),
            )),
        }
    }

    /// The definite error of a write another instance got in before.
    fn fenced(&self) -> CheckpointError {
        broker(
            Class::Definite,
            format!(
                "fenced: the checkpoint of connector {} in bucket {} was written by another \
                 instance since this one read it; another outboxd instance runs this \
                 connector. Stop one of them (two instances publish every event twice; JetStream \
                 drops the copies only within the duplicate window)",
                self.connector, self.cfg.checkpoint_bucket
            ),
        )
    }
}

#[async_trait::async_trait]
impl CheckpointStore for NatsCheckpointStore {
    async fn load(&self) -> Result<Option<Checkpoint>, CheckpointError> {
        let mut st = self.state.lock().await;
        let Some(kv) = self.bucket(&mut st, false).await? else {
            // No bucket yet: no checkpoint (the first store creates it).
            st.revision = Some(0);
            self.notes.loaded(None);
            return Ok(None);
        };
        let (revision, value) = self.read(&kv).await?;
        st.revision = Some(revision);
        st.unconfirmed = None;
        let Some(value) = value else {
            self.notes.loaded(None);
            return Ok(None);
        };
        let c: Checkpoint = serde_json::from_slice(&value).map_err(|e| {
            broker(
                Class::Definite,
                format!(
                    "the checkpoint of connector {} in bucket {} (revision {revision}) is not \
                     valid outboxd checkpoint JSON ({e}); put a corrected one (`nats kv put {} \
                     {} ...`) or delete the key",
                    self.connector,
                    self.cfg.checkpoint_bucket,
                    self.cfg.checkpoint_bucket,
                    self.connector
                ),
            )
        })?;
        self.notes.loaded(Some(c.updated_at_ms));
        Ok(Some(c))
    }

    async fn store(&mut self, checkpoint: &Checkpoint) -> Result<(), CheckpointError> {
        let value = Bytes::from(serde_json::to_vec(checkpoint).map_err(|e| {
            CheckpointError::Serialise {
                source: Arc::new(e),
            }
        })?);
        let mut st = self.state.lock().await;
        let kv = self.created(&mut st).await?;
        let revision = match st.revision {
            Some(r) => r,
            None => {
                let (r, _) = self.read(&kv).await?;
                st.revision = Some(r);
                r
            }
        };
        let mut attempt = kv
            .update(self.connector.as_str(), value.clone(), revision)
            .await;
        if matches!(&attempt, Err(e) if e.kind() == UpdateErrorKind::WrongLastRevision) {
            // Our own earlier write may have landed without its acknowledgement.
            let (current, held) = self.read(&kv).await?;
            match (&st.unconfirmed, held) {
                (Some(mine), Some(held)) if *mine == held => {
                    attempt = kv
                        .update(self.connector.as_str(), value.clone(), current)
                        .await;
                }
                _ => return Err(self.fenced()),
            }
        }
        match attempt {
            Ok(r) => {
                st.revision = Some(r);
                st.unconfirmed = None;
                Ok(())
            }
            Err(e) if e.kind() == UpdateErrorKind::WrongLastRevision => Err(self.fenced()),
            Err(e) => {
                st.unconfirmed = Some(value);
                Err(broker(
                    Class::Transient,
                    format!(
                        "cannot write the checkpoint of {} to bucket {} ({e})",
                        self.connector, self.cfg.checkpoint_bucket
                    ),
                ))
            }
        }
    }

    async fn clear(&mut self) -> Result<(), CheckpointError> {
        let mut st = self.state.lock().await;
        let Some(kv) = self.bucket(&mut st, false).await? else {
            return Ok(());
        };
        kv.purge(self.connector.as_str()).await.map_err(|e| {
            broker(
                Class::Transient,
                format!(
                    "cannot delete the checkpoint of {} from bucket {} ({e})",
                    self.connector, self.cfg.checkpoint_bucket
                ),
            )
        })?;
        st.revision = None;
        st.unconfirmed = None;
        Ok(())
    }

    /// Connects and opens (or creates) the bucket, so that a NATS server down at start is a
    /// transient failure before anything is read.
    async fn prepare(&mut self) -> Result<(), CheckpointError> {
        let mut st = self.state.lock().await;
        self.created(&mut st).await.map(|_| ())
    }
}
