//! What happens after a failure: retry (transient) or stop (definite).
//!
//! Every failure that reaches a connector's supervisor is classified. Transient failures
//! (connection lost, broker unavailable, delivery timed out) restart the connector from its
//! last checkpoint after a backoff; definite ones (bad configuration, a record Kafka refuses,
//! binlog_format not ROW) stop the connector with a message saying what to change. Neither
//! ever advances the checkpoint.

use std::fmt;
use std::time::Duration;

use tokio::sync::watch;

/// Whether a failure is worth retrying.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Severity {
    /// Retry from the last checkpoint after a backoff.
    Transient,
    /// Stop the connector; an operator has to change something first.
    Definite,
}

/// A classified failure of a connector: a message for the operator plus its severity.
///
/// The message never contains passwords or payload contents.
#[derive(Debug, Clone)]
pub struct Failure {
    /// Transient or definite.
    pub severity: Severity,
    /// What went wrong and, for definite failures, what to change.
    pub message: String,
}

impl Failure {
    /// A failure worth retrying (connection lost, broker down, ...).
    pub fn transient(message: impl Into<String>) -> Self {
        Self {
            severity: Severity::Transient,
            message: message.into(),
        }
    }

    /// A failure that needs an operator (bad setting, refused record, ...).
    pub fn definite(message: impl Into<String>) -> Self {
        Self {
            severity: Severity::Definite,
            message: message.into(),
        }
    }

    /// True when the connector should be restarted after a backoff.
    pub fn is_transient(&self) -> bool {
        self.severity == Severity::Transient
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Failure {}

/// Sleeps `backoff` before a retry after a transient failure. Returns `false`, early, when
/// `shutdown` turns true first: do not retry then. Shared by the connector's restarts and
/// the sources' reconnects, so none of them holds a stopping process for its backoff.
pub async fn sleep_before_retry(backoff: Duration, shutdown: &watch::Receiver<bool>) -> bool {
    let mut shutdown = shutdown.clone();
    tokio::select! {
        _ = tokio::time::sleep(backoff) => true,
        _ = shutdown.wait_for(|v| *v) => false,
    }
}
