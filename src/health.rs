//! Liveness and readiness of the connectors, shared between them and the HTTP endpoints.
//!
//! `/health` (liveness) answers 200 while the process runs its event loop; `/ready`
//! (readiness) answers 200 only while every connector's source is streaming, 503 otherwise.
//! In a group (`--group`), connectors another member runs are `standby` here, and a member
//! is ready while it is in the group and the connectors it runs are streaming: a healthy
//! standby is ready.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// The state of one connector.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ConnectorState {
    /// Connecting to the source or Kafka.
    Starting,
    /// Source connected and streaming.
    Streaming,
    /// Waiting to retry after a transient failure.
    Retrying,
    /// Stopped after a definite failure.
    Failed,
    /// Stopped on shutdown.
    Stopped,
    /// Runs in another member of the group (or is not assigned yet).
    Standby,
}

/// Shared registry of connector states.
#[derive(Debug, Clone, Default)]
pub struct Health {
    inner: Arc<Mutex<BTreeMap<String, ConnectorState>>>,
    /// In a group: whether this member is in it. `None` without a group.
    member: Arc<Mutex<Option<bool>>>,
}

impl Health {
    /// Records connector `name`'s state.
    pub fn set(&self, name: &str, state: ConnectorState) {
        if let Ok(mut m) = self.inner.lock() {
            m.insert(name.to_string(), state);
        }
    }

    /// A copy of every connector's state.
    pub fn snapshot(&self) -> BTreeMap<String, ConnectorState> {
        self.inner.lock().map(|m| m.clone()).unwrap_or_default()
    }

    /// Records whether this member is in its group (a process in a group calls it; one
    /// without a group never does).
    pub fn set_member(&self, joined: bool) {
        if let Ok(mut m) = self.member.lock() {
            *m = Some(joined);
        }
    }

    /// In a group, whether this member is in it; `None` without a group.
    pub fn member(&self) -> Option<bool> {
        self.member.lock().ok().and_then(|m| *m)
    }

    /// True when there is at least one connector and all are streaming — in a group: this
    /// member is in it and every connector it runs is streaming (the others are standby).
    pub fn ready(&self) -> bool {
        let s = self.snapshot();
        let joined = self.member().unwrap_or(true);
        joined
            && !s.is_empty()
            && s.values()
                .all(|v| matches!(v, ConnectorState::Streaming | ConnectorState::Standby))
    }
}
