//! Kafka Connect's REST API, answered for the connectors of a process without a group, so
//! that the tools written against Connect (runbooks with `curl`, kcctl, kafka-connect-py,
//! Kafka UI panels, CI pipelines) work against outboxd unchanged: the same paths, bodies,
//! status codes and error shape (`{"error_code": <HTTP status>, "message": "..."}`) as Kafka
//! Connect 4.1's `ConnectorsResource`, `RootResource` and `ConnectorPluginsResource`.
//!
//! Each outboxd connector is one Connect connector with one task (id 0), of type `source`.
//! Its state is RUNNING, PAUSED, STOPPED, FAILED (its task, with the failure as `trace`) or
//! UNASSIGNED (stopped on shutdown), `worker_id` the address this API listens on. Pause,
//! resume, stop and restart act through [`Supervisor`]; connectors created or changed here are
//! written as Debezium connector JSON files to the `--rest-connectors` directory and applied
//! as a SIGHUP applies files, so they survive a restart. A connector defined in a `--config`
//! file is changed there, not here (409, naming the file).
//!
//! The listener is `http://` or `https://` with HTTP Basic authentication as Connect's are
//! configured ([`listener`]). KIP-875's offsets are the checkpoint in Debezium's offset
//! format ([`offsets`]). KIP-558's topic tracking lists the topics each connector's records
//! were routed to (`crate::active_topics`).
//!
//! A group member (`--group`) answers for the group ([`Connectors::Group`]): the connectors
//! of its files and those of the group's config topic (`crate::group::configs`), where a
//! connector created, changed, deleted, paused, resumed, stopped or restarted through any
//! member is written for every member to see and for the one that runs it to apply.

pub(crate) mod config;
mod handlers;
pub mod listener;
mod loggers;
mod offsets;

pub use handlers::serve;

use std::path::PathBuf;
use std::sync::Arc;

use std::collections::BTreeMap;

use crate::group::view::GroupView;
use crate::health::Health;
use crate::supervisor::{Listed, OpError, Supervisor, Target};

/// The connectors the REST API answers for.
pub enum Connectors {
    /// The process's own (no group): changed in the `--rest-connectors` directory.
    Local(Arc<Supervisor>),
    /// The group's, as this member sees them: changed in the group's config topic.
    Group(Arc<GroupView>),
}

impl Connectors {
    /// Every connector, by name.
    pub fn list(&self) -> BTreeMap<String, Listed> {
        match self {
            Connectors::Local(s) => s.list(),
            Connectors::Group(g) => g.list(),
        }
    }

    /// Sets `name`'s target state (Kafka Connect's pause, resume, stop).
    ///
    /// Errors when there is no such connector, or the change cannot be made.
    pub async fn set_target(&self, name: &str, target: Target) -> Result<(), OpError> {
        match self {
            Connectors::Local(s) => match target {
                Target::Paused => s.pause(name).await,
                Target::Running => s.resume(name).await,
                Target::Stopped => s.stop(name).await,
            },
            Connectors::Group(g) => g.set_target(name, target).await,
        }
    }

    /// Restarts `name` (`only_failed`: only when its last run failed).
    ///
    /// Errors as [`Connectors::set_target`].
    pub async fn restart(&self, name: &str, only_failed: bool) -> Result<(), OpError> {
        match self {
            Connectors::Local(s) => s.restart(name, only_failed).await,
            Connectors::Group(g) => g.restart(name, only_failed).await,
        }
    }
}

/// What the REST API works with.
pub struct Rest {
    /// The connectors it answers for.
    pub connectors: Connectors,
    /// Their states as the connectors report them.
    pub health: Health,
    /// `worker_id` in statuses: the address the API listens on (`host:port`).
    pub worker_id: String,
    /// `--config` files: connectors defined there are changed there.
    pub files: Vec<PathBuf>,
    /// `--rest-connectors`: where connectors created through the API are kept; `None` when
    /// not given (creating and changing connectors is refused then).
    pub store: Option<PathBuf>,
    /// `GET /`'s `kafka_cluster_id`, once Kafka gave it.
    pub kafka_cluster_id: tokio::sync::Mutex<Option<String>>,
    /// The bootstrap servers to ask it (the process-wide Kafka settings).
    pub kafka: Option<crate::config::KafkaConfig>,
    /// Held while a configuration file is written and applied, an offsets change is made, or
    /// a connector's target state changes (pause, resume, stop, restart): one change at a
    /// time, so a resume cannot start from the checkpoint an offsets change is replacing.
    pub edits: tokio::sync::Mutex<()>,
    /// Kafka Connect's topic tracking settings (`topic.tracking.*` of the worker file).
    pub tracking: listener::Tracking,
    /// Loads connector `name` with a configuration (Connect's map) as `run` would, with the
    /// process's worker file and environment: `Err` with the refusal's message.
    pub validate: Validate,
}

/// See [`Rest::validate`].
pub type Validate = Box<
    dyn Fn(&str, &serde_json::Map<String, serde_json::Value>) -> Result<(), String> + Send + Sync,
>;

/// The files the configuration is read from: the `--config` files, then those the REST API
/// wrote under `store`.
pub fn config_files(files: &[PathBuf], store: Option<&std::path::Path>) -> Vec<PathBuf> {
    let mut all = files.to_vec();
    if let Some(dir) = store {
        all.extend(config::stored_files(dir));
    }
    all
}
