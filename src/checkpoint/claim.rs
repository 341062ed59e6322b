//! One connector, one checkpoint: refusing to start from a store that another store of the
//! same connector has overtaken.
//!
//! A connector can be described twice, say as outboxd TOML with a `file` store and as the
//! Debezium JSON it replaced (the Kafka store, the only one a JSON has), or as TOML with a
//! Kafka store in a topic of its own: run one after the other, each resumes from its own
//! checkpoint, and the second delivers again what the first delivered since (or skips what
//! it did not). The connector's default checkpoint topic (`outboxd.checkpoints.<name>`) is
//! therefore the place every store of the connector is registered, whatever its own topic:
//!
//! - key `<name>`: the checkpoint of the Kafka store in that topic (a Debezium JSON's, or a
//!   TOML's without `[connectors.checkpoint]`);
//! - key `<name>#file-store` ([`FileClaim`]): the file a `file` store keeps it in (absolute);
//! - key `<name>#kafka-store` ([`KafkaClaim`]): the topic of a Kafka store in another topic.
//!
//! At startup a connector reads those ([`Claims`]), loads every other store named there
//! (a claimed file only when it exists on this host), and then leaves its own claim (a file
//! store or a Kafka store in another topic; the default topic's store is its own record).
//! If another store holds a checkpoint at another position written later than this store's
//! (or this store has none), the connector stops with a definite error naming both and how
//! to carry the position over (`outboxd checkpoint set`). A file-store connector whose Kafka
//! does not answer within [`FILE_STORE_LOOK`] starts from its file with a warning (it needs
//! no Kafka to start reading, and would otherwise not start at all); a claim that cannot be
//! written (e.g. no ACL to create the default topic) is a warning too: only the detection
//! from the other side is lost. A store whose checkpoint is the newer one starts: the other
//! one is stale, and starting *that* one is what gets refused. Taking the newer checkpoint
//! silently was not done: `updated_at_ms` says which run came last, not which
//! configuration the operator means to keep.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use super::error::TwoStores;
use super::{now_ms, Checkpoint, CheckpointError, FileCheckpointStore, KafkaCheckpointStore};
use crate::config::{default_checkpoint_topic, CheckpointConfig, ConnectorConfig};
use crate::sink::KafkaLink;

/// A file store's note in the claims topic that it keeps connector `connector`'s
/// checkpoint: `{"connector":..,"store":"file","path":"/abs/path","claimed_at_ms":..}` under
/// key `<connector>#file-store`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FileClaim {
    /// The connector.
    pub connector: String,
    /// Always `file`.
    pub store: String,
    /// The checkpoint file, absolute.
    pub path: PathBuf,
    /// When the file store's connector last started, milliseconds since the Unix epoch.
    pub claimed_at_ms: i64,
}

impl FileClaim {
    /// The record key of connector `connector`'s claim.
    pub fn key(connector: &str) -> String {
        format!("{connector}#file-store")
    }
}

/// A Kafka store's note in the claims topic, when it keeps connector `connector`'s
/// checkpoint in another topic: `{"connector":..,"store":"kafka","topic":..,
/// "claimed_at_ms":..}` under key `<connector>#kafka-store`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct KafkaClaim {
    /// The connector.
    pub connector: String,
    /// Always `kafka`.
    pub store: String,
    /// The topic the store keeps the checkpoint in.
    pub topic: String,
    /// When the store's connector last started, milliseconds since the Unix epoch.
    pub claimed_at_ms: i64,
}

impl KafkaClaim {
    /// The record key of connector `connector`'s claim.
    pub fn key(connector: &str) -> String {
        format!("{connector}#kafka-store")
    }
}

/// What a connector's claims topic holds.
#[derive(Debug, Default)]
pub struct Claims {
    /// The checkpoint of the Kafka store in that topic.
    pub checkpoint: Option<Checkpoint>,
    /// The last file store's claim.
    pub file: Option<FileClaim>,
    /// The last claim of a Kafka store in another topic.
    pub kafka: Option<KafkaClaim>,
}

/// How long a file-store connector waits for the Kafka store of its name before it starts
/// from its file without the comparison.
pub(crate) const FILE_STORE_LOOK: Duration = Duration::from_secs(10);

/// A connector's store, as the claims name it.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Store {
    /// A file (absolute).
    File(PathBuf),
    /// A Kafka topic.
    Kafka(String),
}

impl Store {
    /// The store `checkpoint` names; `None` for a non-Kafka sink's own store (no Kafka
    /// cluster holds claims for it).
    fn of(checkpoint: &CheckpointConfig) -> Option<Self> {
        match checkpoint {
            CheckpointConfig::File { path } => Some(Store::File(absolute(path))),
            CheckpointConfig::Kafka { topic, .. } => Some(Store::Kafka(topic.clone())),
            CheckpointConfig::Sink {} => None,
        }
    }

    /// The store in words, for the refusal (`its` for this one, `the` for another).
    fn describe(&self, article: &str) -> String {
        match self {
            Store::File(p) => format!("{article} file store {}", p.display()),
            Store::Kafka(t) => format!("{article} Kafka store (topic {t})"),
        }
    }
}

fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

/// The read of connector `cfg`'s other stores, started by [`OtherStores::start`] so that it
/// runs beside the load of the connector's own checkpoint, and finished by
/// [`OtherStores::check`] once that is loaded.
pub(crate) struct OtherStores {
    this: Store,
    claims_topic: String,
    read: tokio::task::JoinHandle<(OtherCheckpoints, KafkaCheckpointStore)>,
}

/// The checkpoints of a connector's other stores, each with the store that holds it.
type OtherCheckpoints = Result<Vec<(Store, Checkpoint)>, CheckpointError>;

impl OtherStores {
    /// Starts reading connector `cfg`'s claims topic (`outboxd.checkpoints.<name>`) and the
    /// checkpoints of the other stores it names, on the blocking pool. `link` is the
    /// connector's Kafka link. Call it after the claims topic exists. `None` when the
    /// connector's records do not go to Kafka: no cluster holds claims then.
    pub(crate) fn start(cfg: &ConnectorConfig, link: &Arc<KafkaLink>) -> Option<Self> {
        if !cfg.sink.is_kafka() {
            return None;
        }
        let this = Store::of(&cfg.checkpoint)?;
        let claims_topic = default_checkpoint_topic(&cfg.name);
        let store =
            KafkaCheckpointStore::new(&cfg.kafka, &claims_topic, &cfg.name).with_link(link.clone());
        // The store's reads block; on the blocking pool the wait can be bounded.
        let (kafka, name, this_read) = (cfg.kafka.clone(), cfg.name.clone(), this.clone());
        let read = tokio::task::spawn_blocking(move || {
            let others = store
                .claims()
                .and_then(|claims| other_checkpoints(&kafka, &name, &this_read, claims, &store));
            (others, store)
        });
        Some(OtherStores {
            this,
            claims_topic,
            read,
        })
    }

    /// Checks the other stores against `own` (this store's checkpoint, loaded) and leaves
    /// this store's claim.
    ///
    /// Errors: [`CheckpointError::TwoStores`] (definite) when another store is ahead;
    /// with a Kafka store, transient ones when Kafka does not answer (a file store starts
    /// without the comparison then, after waiting [`FILE_STORE_LOOK`]).
    pub(crate) async fn check(
        self,
        cfg: &ConnectorConfig,
        own: Option<&Checkpoint>,
    ) -> Result<(), CheckpointError> {
        let OtherStores {
            this,
            claims_topic,
            read,
        } = self;
        let (others, mut store) = match &this {
            Store::File(_) => {
                let why = match tokio::time::timeout(FILE_STORE_LOOK, read).await {
                    Ok(Ok((Ok(others), store))) => Ok((others, store)),
                    Ok(Ok((Err(e), _))) => Err(e.to_string()),
                    Ok(Err(e)) => Err(e.to_string()),
                    Err(_) => Err(format!(
                        "Kafka did not answer within {}s",
                        FILE_STORE_LOOK.as_secs()
                    )),
                };
                match why {
                    Ok(read) => read,
                    Err(why) => {
                        not_compared(cfg, &claims_topic, &why);
                        return Ok(());
                    }
                }
            }
            Store::Kafka(_) => match read.await {
                Ok((others, store)) => (others?, store),
                Err(e) => {
                    return Err(CheckpointError::kafka(
                        format!("reading the claims in topic {claims_topic}: {e}"),
                        None,
                    ))
                }
            },
        };
        for (other, checkpoint) in &others {
            refuse_if_overtaken(
                &cfg.name,
                own,
                &this.describe("its"),
                Some(checkpoint),
                &other.describe("the"),
            )?;
        }
        let claimed = match &this {
            Store::File(path) => {
                let claim = FileClaim {
                    connector: cfg.name.clone(),
                    store: "file".into(),
                    path: path.clone(),
                    claimed_at_ms: now_ms(),
                };
                store.write_claim(FileClaim::key(&cfg.name), &claim).await
            }
            Store::Kafka(topic) if *topic != claims_topic => {
                let claim = KafkaClaim {
                    connector: cfg.name.clone(),
                    store: "kafka".into(),
                    topic: topic.clone(),
                    claimed_at_ms: now_ms(),
                };
                store.write_claim(KafkaClaim::key(&cfg.name), &claim).await
            }
            Store::Kafka(_) => Ok(()),
        };
        if let Err(e) = claimed {
            // Only the detection from the other side is lost: say so and go on.
            tracing::warn!(connector = %cfg.name, "could not note {} in topic {claims_topic} ({e}); another configuration of this connector with another store will not see this store's checkpoint", this.describe("its"));
        }
        Ok(())
    }
}

/// The checkpoints of the stores `claims` names other than `this`: the claims topic's own
/// (`claims_store`), a claimed file that exists on this host, a claimed other topic.
fn other_checkpoints(
    kafka: &crate::config::KafkaConfig,
    connector: &str,
    this: &Store,
    claims: Claims,
    claims_store: &KafkaCheckpointStore,
) -> Result<Vec<(Store, Checkpoint)>, CheckpointError> {
    let mut others = Vec::new();
    let claims_topic = Store::Kafka(claims_store.topic().to_string());
    if let Some(cp) = claims.checkpoint.filter(|_| *this != claims_topic) {
        others.push((claims_topic, cp));
    }
    if let Some(claim) = claims.file {
        let other = Store::File(claim.path.clone());
        // A claimed file this host cannot read (another machine's, or removed) is no
        // checkpoint here.
        if other != *this {
            if let Some(cp) = FileCheckpointStore::new(claim.path).read().ok().flatten() {
                others.push((other, cp));
            }
        }
    }
    if let Some(claim) = claims.kafka {
        let other = Store::Kafka(claim.topic.clone());
        if other != *this {
            let store = KafkaCheckpointStore::new(kafka, &claim.topic, connector)
                .with_link(claims_store.link());
            if let Some(cp) = store.load_blocking()? {
                others.push((other, cp));
            }
        }
    }
    Ok(others)
}

/// A file-store connector starts without comparing its file with the connector's other
/// stores.
fn not_compared(cfg: &ConnectorConfig, topic: &str, why: &str) {
    tracing::warn!(connector = %cfg.name, "could not compare the file checkpoint with the other stores of the same connector (claims topic {topic}: {why}); starting from the file");
}

/// [`CheckpointError::TwoStores`] when `other` holds another position than `own` and was
/// written later (or `own` is missing).
fn refuse_if_overtaken(
    connector: &str,
    own: Option<&Checkpoint>,
    own_store: &str,
    other: Option<&Checkpoint>,
    other_store: &str,
) -> Result<(), CheckpointError> {
    let Some(other) = other else {
        return Ok(());
    };
    let overtaken = match own {
        None => true,
        Some(own) => own.position != other.position && other.updated_at_ms > own.updated_at_ms,
    };
    if !overtaken {
        return Ok(());
    }
    Err(CheckpointError::TwoStores(Box::new(TwoStores {
        connector: connector.to_string(),
        own_store: own_store.to_string(),
        own: own.map_or_else(
            || "no checkpoint".to_string(),
            |c| format!("{} (written at {} ms)", c.position, c.updated_at_ms),
        ),
        other_store: other_store.to_string(),
        other: format!("{} (written at {} ms)", other.position, other.updated_at_ms),
        position: other.position.to_string(),
    })))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::position::SourcePosition;

    fn cp(pos: &str, at: i64) -> Checkpoint {
        Checkpoint {
            connector: "c".into(),
            position: pos.parse::<SourcePosition>().unwrap(),
            skip: 0,
            updated_at_ms: at,
            cutover: None,
        }
    }

    #[test]
    fn only_a_newer_other_position_is_refused() {
        let (a, b) = (cp("mariadb_gtid:0-1-5", 100), cp("mariadb_gtid:0-1-9", 200));
        // No other checkpoint, or this one is the newer: start.
        assert!(refuse_if_overtaken("c", Some(&a), "this", None, "that").is_ok());
        assert!(refuse_if_overtaken("c", Some(&b), "this", Some(&a), "that").is_ok());
        // The same position in both (carried over): start.
        let same = cp("mariadb_gtid:0-1-9", 300);
        assert!(refuse_if_overtaken("c", Some(&b), "this", Some(&same), "that").is_ok());
        // The other is ahead, or this store has none: refuse, naming both.
        let e = refuse_if_overtaken(
            "c",
            Some(&a),
            "its file store f",
            Some(&b),
            "the Kafka store",
        )
        .unwrap_err();
        let text = e.to_string();
        assert!(text.contains("its file store f"), "{text}");
        assert!(text.contains("the Kafka store"), "{text}");
        assert!(
            text.contains("checkpoint set --config FILE --position mariadb_gtid:0-1-9"),
            "{text}"
        );
        assert!(refuse_if_overtaken("c", None, "this", Some(&a), "that").is_err());
    }
}
