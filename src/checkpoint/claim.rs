//! One connector, one checkpoint: refusing to start from a store that another store of the
//! same connector has overtaken.
//!
//! A connector can be described twice, say as outboxd TOML with a `file` store and as the
//! Debezium JSON it replaced (the Kafka store, the only one a JSON has): run one after the
//! other, each resumes from its own checkpoint, and the second delivers again what the first
//! delivered since (or skips what it did not). At startup a connector therefore looks at
//! the other store it could have:
//!
//! - with the `file` store: the Kafka store at the connector's default checkpoint topic
//!   (`outboxd.checkpoints.<name>`, key = the name), which is where a Debezium JSON or a
//!   TOML without `[connectors.checkpoint]` keeps it; it then leaves a claim there
//!   ([`FileClaim`]: key `<name>#file-store`, the file's absolute path);
//! - with the `kafka` store: the file named by such a claim in its topic, when that file
//!   exists on this host.
//!
//! If the other store holds a checkpoint at another position written later than this
//! store's (or this store has none), the connector stops with a definite error naming both
//! and how to carry the position over (`outboxd checkpoint set`). A file-store connector
//! whose Kafka does not answer within [`FILE_STORE_LOOK`] starts from its file with a
//! warning (it needs no Kafka to start reading, and would otherwise not start at all). A store whose checkpoint
//! is the newer one starts: the other one is stale, and starting *that* one is what gets
//! refused. Taking the newer checkpoint silently was not done: `updated_at_ms` says which
//! run came last, not which configuration the operator means to keep.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::error::TwoStores;
use super::{
    now_ms, Checkpoint, CheckpointError, CheckpointStore, FileCheckpointStore, KafkaCheckpointStore,
};
use crate::config::{default_checkpoint_topic, CheckpointConfig, ConnectorConfig};
use crate::sink::KafkaLink;

/// A file store's note in the Kafka checkpoint topic that it keeps connector `connector`'s
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

/// How long a file-store connector waits for the Kafka store of its name before it starts
/// from its file without the comparison.
pub(crate) const FILE_STORE_LOOK: Duration = Duration::from_secs(10);

/// Checks connector `cfg`'s other store against `own` (this store's checkpoint, loaded) and,
/// with the `file` store, leaves the claim. `link` is the connector's Kafka link.
///
/// Errors: [`CheckpointError::TwoStores`] (definite) when the other store is ahead;
/// transient ones when Kafka does not answer.
pub(crate) async fn check_other_store(
    cfg: &ConnectorConfig,
    own: Option<&Checkpoint>,
    link: &Arc<KafkaLink>,
) -> Result<(), CheckpointError> {
    match &cfg.checkpoint {
        CheckpointConfig::File { path } => {
            let topic = default_checkpoint_topic(&cfg.name);
            let kafka =
                KafkaCheckpointStore::new(&cfg.kafka, &topic, &cfg.name).with_link(link.clone());
            // The store's reads block; on the blocking pool the wait can be bounded.
            let load = tokio::task::spawn_blocking(move || (kafka.load(), kafka));
            let (other, mut kafka) = match tokio::time::timeout(FILE_STORE_LOOK, load).await {
                Ok(Ok((Ok(other), kafka))) => (other, kafka),
                Ok(Ok((Err(e), _))) => {
                    not_compared(cfg, &topic, &e.to_string());
                    return Ok(());
                }
                Ok(Err(e)) => {
                    not_compared(cfg, &topic, &e.to_string());
                    return Ok(());
                }
                Err(_) => {
                    let why = format!("Kafka did not answer within {}s", FILE_STORE_LOOK.as_secs());
                    not_compared(cfg, &topic, &why);
                    return Ok(());
                }
            };
            refuse_if_overtaken(
                &cfg.name,
                own,
                &format!("its file store {}", path.display()),
                other.as_ref(),
                &format!("the Kafka store (topic {topic})"),
            )?;
            let claim = FileClaim {
                connector: cfg.name.clone(),
                store: "file".into(),
                path: std::path::absolute(path).unwrap_or_else(|_| path.clone()),
                claimed_at_ms: now_ms(),
            };
            if let Err(e) = kafka.write_file_claim(&claim).await {
                // Only the detection from the other side is lost: say so and go on.
                tracing::warn!(connector = %cfg.name, "could not note the file store in topic {topic} ({e}); a Debezium JSON or Kafka-store configuration of this connector will not see this file's checkpoint");
            }
            Ok(())
        }
        CheckpointConfig::Kafka { topic, .. } => {
            let kafka =
                KafkaCheckpointStore::new(&cfg.kafka, topic, &cfg.name).with_link(link.clone());
            let Some(claim) = tokio::task::block_in_place(|| kafka.file_claim())? else {
                return Ok(());
            };
            let file = FileCheckpointStore::new(claim.path.clone());
            // A claimed file this host cannot read (another machine's, or removed) is no
            // checkpoint here.
            let other = file.load().ok().flatten();
            refuse_if_overtaken(
                &cfg.name,
                own,
                &format!("its Kafka store (topic {topic})"),
                other.as_ref(),
                &format!("the file store {}", claim.path.display()),
            )
        }
    }
}

/// A file-store connector starts without comparing its file with the Kafka store.
fn not_compared(cfg: &ConnectorConfig, topic: &str, why: &str) {
    tracing::warn!(connector = %cfg.name, "could not compare the file checkpoint with the Kafka store of the same connector (topic {topic}: {why}); starting from the file");
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
