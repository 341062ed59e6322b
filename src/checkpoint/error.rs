//! The checkpoint stores' failures.
//!
//! A file that cannot be read or written, a checkpoint that is not outboxd JSON, a topic Kafka
//! refuses to create and a client librdkafka rejects are definite (an operator has to act);
//! a cluster that does not answer in time is transient.

use std::path::PathBuf;
use std::sync::Arc;

use rdkafka::error::{KafkaError, RDKafkaErrorCode};

use crate::error::Class;

/// A failure reading or writing a connector's checkpoint.
#[derive(Debug, Clone, thiserror::Error)]
pub enum CheckpointError {
    /// The checkpoint file exists but cannot be read.
    #[error("cannot read checkpoint file {}: {source}", path.display())]
    FileRead {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: Arc<std::io::Error>,
    },
    /// A step of the atomic replacement failed.
    #[error(
        "cannot {step} checkpoint file {}: {source}; check the directory's permissions and \
         free space",
        path.display()
    )]
    FileWrite {
        /// What was being done, completing "cannot ... checkpoint file".
        step: &'static str,
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: Arc<std::io::Error>,
    },
    /// The file does not hold an outboxd checkpoint.
    #[error(
        "checkpoint file {} is not a valid outboxd checkpoint ({source}); restore it from a \
         backup or remove it to start from the configured start position",
        path.display()
    )]
    FileInvalid {
        /// The file.
        path: PathBuf,
        /// The JSON error.
        #[source]
        source: Arc<serde_json::Error>,
    },
    /// The checkpoint record in the Kafka topic is not outboxd JSON.
    #[error(
        "the checkpoint of connector {connector} in topic {topic} (offset {offset}) is not valid \
         outboxd checkpoint JSON ({source}); produce a corrected one or a tombstone for key \
         {connector:?}"
    )]
    RecordInvalid {
        /// The connector (the record key).
        connector: String,
        /// The checkpoint topic.
        topic: String,
        /// The record's offset.
        offset: i64,
        /// The JSON error.
        #[source]
        source: Arc<serde_json::Error>,
    },
    /// A checkpoint could not be serialised (never expected).
    #[error("cannot serialise checkpoint: {source}")]
    Serialise {
        /// The JSON error.
        #[source]
        source: Arc<serde_json::Error>,
    },
    /// librdkafka rejected a client's configuration.
    #[error("cannot create a Kafka {client} for the checkpoint store: {source}")]
    Client {
        /// `admin client`, `consumer`, `producer`.
        client: &'static str,
        /// librdkafka's error.
        #[source]
        source: KafkaError,
    },
    /// Kafka refused to create the checkpoint topic.
    #[error(
        "Kafka refused to create checkpoint topic {topic} ({code}); create it with \
         cleanup.policy=compact or grant CREATE on it"
    )]
    TopicRefused {
        /// The topic.
        topic: String,
        /// Kafka's answer.
        code: RDKafkaErrorCode,
    },
    /// The cluster refused the credentials, or TLS with it failed verification.
    #[error(transparent)]
    Link(#[from] crate::sink::LinkFailure),
    /// A non-Kafka broker's store failed (a NATS JetStream key-value bucket, a Redis key).
    #[error("{broker}: {detail}")]
    Broker {
        /// The broker.
        broker: &'static str,
        /// What failed and what to do.
        detail: String,
        /// Transient (retry) or definite.
        class: Class,
    },
    /// Another store of the same connector holds a later checkpoint at another position.
    #[error(transparent)]
    TwoStores(Box<TwoStores>),
    /// A checkpoint written in a Kafka transaction of its own (at-least-once in a group,
    /// see `checkpoint::fenced`) failed: fenced by a newer owner, or the transaction failed.
    #[error("writing the checkpoint in a Kafka transaction: {0}")]
    Transaction(Box<crate::sink::SinkError>),
    /// The runtime shut down while the store's work ran on its blocking pool.
    #[error("{what} was interrupted: the process is shutting down")]
    Interrupted {
        /// What was being done.
        what: &'static str,
    },
    /// A request to the cluster failed or timed out.
    #[error("{what}: {}", match source { Some(e) => e.to_string(), None => "no answer".into() })]
    Kafka {
        /// What was being done.
        what: String,
        /// librdkafka's error, when it gave one.
        #[source]
        source: Option<KafkaError>,
    },
}

/// Another store of the same connector holds a later checkpoint at another position:
/// starting from this one would deliver again (or skip) what a run on that store did.
#[derive(Debug, Clone, thiserror::Error)]
#[error(
    "connector {connector} has checkpoints in two stores: {other_store} holds {other}, later \
     than {own_store} ({own}). Starting from this configuration's store would deliver again \
     (or skip) what the other run delivered. Run the configuration that uses {other_store}, or \
     carry its position over and start again: `outboxd checkpoint set --config FILE \
     --position {position}` with this configuration's file"
)]
pub struct TwoStores {
    /// The connector.
    pub connector: String,
    /// This configuration's store, described.
    pub own_store: String,
    /// Its checkpoint, described (or `no checkpoint`).
    pub own: String,
    /// The other store, described.
    pub other_store: String,
    /// Its checkpoint, described.
    pub other: String,
    /// The other checkpoint's position (`kind:value`).
    pub position: String,
}

impl CheckpointError {
    /// Transient for a cluster that did not answer (and a checkpoint transaction as its
    /// producer error says); definite for everything else.
    pub fn class(&self) -> Class {
        match self {
            CheckpointError::Kafka { .. } | CheckpointError::Interrupted { .. } => Class::Transient,
            CheckpointError::Transaction(e) => e.class(),
            CheckpointError::Broker { class, .. } => *class,
            CheckpointError::FileRead { .. }
            | CheckpointError::FileWrite { .. }
            | CheckpointError::FileInvalid { .. }
            | CheckpointError::RecordInvalid { .. }
            | CheckpointError::Serialise { .. }
            | CheckpointError::Client { .. }
            | CheckpointError::Link(_)
            | CheckpointError::TwoStores(_)
            | CheckpointError::TopicRefused { .. } => Class::Definite,
        }
    }

    /// A failed or unanswered request to the cluster while doing `what`.
    pub(crate) fn kafka(what: impl Into<String>, source: Option<KafkaError>) -> Self {
        CheckpointError::Kafka {
            what: what.into(),
            source,
        }
    }
}
