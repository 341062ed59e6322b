//! Whether this process may still act as a connector's owner.
//!
//! Without a group a process owns its connectors for its whole life ([`Lease::sole`]). In a
//! group (`--group`) the group coordinator's assignment is the ownership: the membership
//! grants a fresh lease with every assignment ([`Lease::granted`]) and revokes it the moment
//! it learns the connector is no longer this member's — a revocation, or the session found
//! lost (a member frozen or cut off from Kafka past its session timeout) — before the member
//! even starts stopping the connector. A revoked lease never becomes valid again: the next
//! assignment brings a new one, so nothing can act on an old assignment.
//!
//! Every step that could take a connector away from another owner checks the lease first:
//! a restart after a failure, a source reconnect, `init_transactions` (which fences every
//! other holder of the connector's `transactional.id`) and ending a walsender on the
//! PostgreSQL slot (`pg_terminate_backend`). So a zombie that wakes before its membership
//! notices the loss fails once (fenced) and does not come back to fence its successor.
//!
//! A group lease also drives `outboxd_connector_owned{connector}`: 1 from the grant, 0 from
//! the revocation (or when the member gives up running it after a definite failure).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::metrics as m;

/// The group took connector `connector` away from this member (revoked, or its session found
/// lost) while the connector was failing or about to restart or reconnect: it stops here
/// without restarting, and the member that owns it now resumes from the last committed
/// checkpoint. Definite for this member; not a failure of the connector.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("connector {connector} is no longer this member's (the group coordinator gave it to another member); it stops here without restarting")]
pub struct NotOwner {
    /// The connector.
    pub connector: String,
}

/// One process's right to run one connector (cheap to clone: the clones share it).
#[derive(Debug, Clone)]
pub struct Lease(Arc<State>);

#[derive(Debug)]
struct State {
    connector: String,
    /// Granted by a group's assignment (else the process owns the connector alone).
    grouped: bool,
    held: AtomicBool,
    /// Until the connector's source first streams under this lease: a walsender still on the
    /// slot is a previous owner's.
    taking_over: AtomicBool,
}

impl Lease {
    /// The lease of a process without a group: held for good, never a takeover.
    pub fn sole(connector: &str) -> Self {
        Self(Arc::new(State {
            connector: connector.to_string(),
            grouped: false,
            held: AtomicBool::new(true),
            taking_over: AtomicBool::new(false),
        }))
    }

    /// A group's assignment of `connector` to this member: held until revoked, and a takeover
    /// until the source first streams. Sets `outboxd_connector_owned` to 1.
    pub fn granted(connector: &str) -> Self {
        let lease = Self(Arc::new(State {
            connector: connector.to_string(),
            grouped: true,
            held: AtomicBool::new(true),
            taking_over: AtomicBool::new(true),
        }));
        lease.show_running(true);
        lease
    }

    /// Whether a group granted it (else the process runs the connector alone).
    pub fn in_group(&self) -> bool {
        self.0.grouped
    }

    /// Whether this process still owns the connector.
    pub fn held(&self) -> bool {
        self.0.held.load(Ordering::Acquire)
    }

    /// Whether the connector was just taken over from a previous owner that may not have let
    /// go of the source yet (held, and the source has not streamed under this lease).
    pub fn taking_over(&self) -> bool {
        self.held() && self.0.taking_over.load(Ordering::Acquire)
    }

    /// The source streams: from now on a walsender on the slot is not a previous owner's.
    pub fn streaming(&self) {
        self.0.taking_over.store(false, Ordering::Release);
    }

    /// The connector is no longer this process's (idempotent). Sets
    /// `outboxd_connector_owned` to 0.
    pub fn revoke(&self) {
        if self.0.held.swap(false, Ordering::AcqRel) {
            self.show_running(false);
        }
    }

    /// Sets `outboxd_connector_owned`: whether this member runs the connector (a group
    /// lease only; a process without a group sets it itself).
    pub fn show_running(&self, running: bool) {
        if self.0.grouped {
            metrics::gauge!(m::CONNECTOR_OWNED, m::LABEL_CONNECTOR => self.0.connector.clone())
                .set(if running { 1.0 } else { 0.0 });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_revoked_lease_stays_revoked_and_stops_taking_over() {
        let sole = Lease::sole("a");
        assert!(sole.held() && !sole.taking_over() && !sole.in_group());

        let lease = Lease::granted("a");
        let clone = lease.clone();
        assert!(clone.held() && clone.taking_over());
        lease.streaming();
        assert!(clone.held() && !clone.taking_over());

        let other = Lease::granted("a");
        assert!(other.taking_over());
        other.revoke();
        other.revoke();
        assert!(!other.held());
        // A revoked lease is no takeover either: nothing may end another owner's walsender.
        assert!(!other.taking_over());
    }
}
