//! Liveness and readiness of the connectors, shared between them and the HTTP endpoints.
//!
//! `/health` (liveness) answers 200 while the process runs its event loop; `/ready`
//! (readiness) answers 200 only while every connector's source is streaming, 503 otherwise.

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
}

/// Shared registry of connector states.
#[derive(Debug, Clone, Default)]
pub struct Health {
    inner: Arc<Mutex<BTreeMap<String, ConnectorState>>>,
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

    /// True when there is at least one connector and all are streaming.
    pub fn ready(&self) -> bool {
        let s = self.snapshot();
        !s.is_empty() && s.values().all(|v| *v == ConnectorState::Streaming)
    }
}
