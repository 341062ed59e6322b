//! An in-memory [`CheckpointStore`] with fault injection, for the delivery loops' unit
//! tests (built with `cfg(test)` only: the loops and the traits they use are crate-private): every checkpoint stored is
//! kept in order in a log the test shares ([`MemoryStore::log`]), and the next writes can
//! be made to fail.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use super::{Checkpoint, CheckpointError, CheckpointStore};

#[derive(Debug, Default)]
struct Shared {
    /// Every checkpoint stored, in order; `None` for a clear.
    log: Vec<Option<Checkpoint>>,
    /// Writes still to fail (as a full disk would: a definite `FileWrite`).
    fail_writes: u32,
}

/// An in-memory store; clones share the log.
#[derive(Debug, Clone, Default)]
pub(crate) struct MemoryStore(Arc<Mutex<Shared>>);

impl MemoryStore {
    fn shared(&self) -> std::sync::MutexGuard<'_, Shared> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Every checkpoint stored so far, in order.
    pub(crate) fn log(&self) -> Vec<Checkpoint> {
        self.shared().log.iter().flatten().cloned().collect()
    }

    /// The last checkpoint stored.
    pub(crate) fn last(&self) -> Option<Checkpoint> {
        self.shared().log.last().cloned().flatten()
    }

    /// The next `n` writes fail.
    pub(crate) fn fail_next_writes(&self, n: u32) {
        self.shared().fail_writes = n;
    }
}

#[async_trait::async_trait]
impl CheckpointStore for MemoryStore {
    async fn load(&self) -> Result<Option<Checkpoint>, CheckpointError> {
        Ok(self.last())
    }

    async fn store(&mut self, checkpoint: &Checkpoint) -> Result<(), CheckpointError> {
        let mut shared = self.shared();
        if shared.fail_writes > 0 {
            shared.fail_writes -= 1;
            return Err(CheckpointError::FileWrite {
                step: "write",
                path: PathBuf::from("memory"),
                source: Arc::new(std::io::Error::other("injected write failure")),
            });
        }
        shared.log.push(Some(checkpoint.clone()));
        Ok(())
    }

    async fn clear(&mut self) -> Result<(), CheckpointError> {
        self.shared().log.push(None);
        Ok(())
    }
}
