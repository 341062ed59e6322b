//! Preflight checks (`outboxd check`): everything the relay needs from the source and from
//! Kafka, each as a named check with what to change when it fails. The README's
//! prerequisites are this list.

pub mod kafka;
pub mod redis;
pub mod sink;

pub use crate::requirement::{CheckResult, Status};

pub use crate::source::check::{step, StoredCheckpoint};
