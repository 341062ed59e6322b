//! SIGINT / SIGTERM: the harness stops its peer and cleans up the lane (database, slots,
//! topics) instead of dying with them running. Long waits poll [`check`].

use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::{bail, Result};

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// Installs the handlers (on the current tokio runtime).
pub fn install() {
    tokio::spawn(async {
        use tokio::signal::unix::{signal, SignalKind};
        let (Ok(mut int), Ok(mut term)) = (
            signal(SignalKind::interrupt()),
            signal(SignalKind::terminate()),
        ) else {
            return;
        };
        tokio::select! {
            _ = int.recv() => {}
            _ = term.recv() => {}
        }
        eprintln!("[bench] interrupted: stopping the peer and cleaning up the lane");
        INTERRUPTED.store(true, Ordering::SeqCst);
    });
}

/// Fails once a signal arrived.
pub fn check() -> Result<()> {
    if INTERRUPTED.load(Ordering::SeqCst) {
        bail!("interrupted");
    }
    Ok(())
}
