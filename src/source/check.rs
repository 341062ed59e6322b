//! What `outboxd check` asks of every source alike: the stored checkpoint read once, after
//! the source's state ([`StoredCheckpoint`]), the `checkpoint` and `tls` lines, and the
//! steps a check list depends on ([`step`]). Each source's own checks are in its `check`
//! module; `preflight` only orchestrates them.

use std::fmt;

use crate::requirement::{CheckResult, Status};

/// A connector's stored checkpoint as `check` reads it: once, when first asked. The source
/// checks ask right after reading what the source still has (its binlogs, its slot): a relay
/// running meanwhile only moves its checkpoint forward, and confirms to a PostgreSQL slot
/// only what it has stored, so a checkpoint read after the source's state is never behind
/// what that state reflects, and no gap the relay has already closed is reported. Read on a
/// thread of its own ([`crate::checkpoint::load_apart`]): the source's connection is open.
pub struct StoredCheckpoint {
    store: std::cell::Cell<Option<Box<dyn crate::checkpoint::CheckpointStore>>>,
    read: std::cell::OnceCell<Result<Option<crate::checkpoint::Checkpoint>, String>>,
}

impl StoredCheckpoint {
    /// The checkpoint in `store`, not read yet.
    pub fn new(store: Box<dyn crate::checkpoint::CheckpointStore>) -> Self {
        Self {
            store: std::cell::Cell::new(Some(store)),
            read: std::cell::OnceCell::new(),
        }
    }

    /// A checkpoint that is not to be read (its store's brokers did not answer another
    /// check): [`get`](Self::get) gives `why` at once.
    pub fn unreadable(why: impl Into<String>) -> Self {
        let read = std::cell::OnceCell::new();
        let _ = read.set(Err(why.into()));
        Self {
            store: std::cell::Cell::new(None),
            read,
        }
    }

    /// The checkpoint (`Ok(None)`: none yet), read now unless it was already; `Err` says why
    /// it could not be read. Blocks the calling worker thread for the read (a Kafka store
    /// reads its topic).
    pub fn get(&self) -> Result<Option<&crate::checkpoint::Checkpoint>, &str> {
        self.read
            .get_or_init(|| match self.store.take() {
                Some(store) => crate::checkpoint::load_apart(store).map_err(|f| f.to_string()),
                None => Err("the checkpoint store is gone".into()),
            })
            .as_ref()
            .map(Option::as_ref)
            .map_err(String::as_str)
    }
}

/// The `checkpoint` check of `outboxd check`: whether the source can still serve the stored
/// checkpoint. `loaded` is the checkpoint as read (`None`: it could not be read, which the
/// caller reports; `Some(None)`: there is none yet), `gap` the source's reason why
/// it cannot serve it, and `fresh` what a first start does.
pub fn checkpoint_result(
    connector: &str,
    loaded: Option<Option<&crate::checkpoint::Checkpoint>>,
    gap: Option<String>,
    fresh: &str,
) -> Option<CheckResult> {
    let loaded = loaded?;
    Some(match (loaded, gap) {
        (None, _) => CheckResult::new(
            connector,
            "checkpoint",
            Status::Pass,
            format!("none yet: the first start {fresh}"),
        ),
        (Some(cp), None) => CheckResult::new(
            connector,
            "checkpoint",
            Status::Pass,
            format!(
                "{}{}: the source still has what follows it",
                cp.position,
                if cp.skip > 0 {
                    format!(" (skip {})", cp.skip)
                } else {
                    String::new()
                }
            ),
        ),
        (Some(cp), Some(gap)) => CheckResult::new(
            connector,
            "checkpoint",
            Status::Fail,
            format!(
                "{gap}; the events after {} that were not delivered are lost for this \
                 connector, and `run` stops on it: restore what is missing, or start fresh \
                 accepting the gap (`outboxd checkpoint reset --config <file> --connector \
                 {connector}`)",
                cp.position
            ),
        ),
    })
}

/// The `tls` check of a database connection: pass when encrypted and the server's identity
/// (chain and host name) verified; warn otherwise, saying what is missing and how to get it.
pub fn tls_result(
    connector: &str,
    facts: &crate::tls::TlsFacts,
    mode_setting: &str,
    verify_full: &str,
) -> CheckResult {
    use crate::tls::Verification;
    let status = match (facts.encrypted(), facts.verified) {
        (true, Verification::ChainAndHost) => Status::Pass,
        _ => Status::Warn,
    };
    let advice = match (facts.encrypted(), facts.verified) {
        (false, _) => format!(
            "; passwords and events cross the network in clear text: enable TLS on the server and set {mode_setting} to a verifying mode"
        ),
        (true, Verification::None) => format!(
            "; anyone in between can pose as the server: set {mode_setting} to {verify_full} with the CA"
        ),
        (true, Verification::Chain) => format!(
            "; any certificate of that CA is accepted: {mode_setting}={verify_full} also checks the host name"
        ),
        (true, Verification::ChainAndHost) => String::new(),
    };
    CheckResult::new(connector, "tls", status, format!("{facts}{advice}"))
}

/// One step of a check list that the rest depends on (connecting, reading the server's
/// settings): its value, or `None` after adding a `Fail` named `check` with the error, upon
/// which the caller stops (nothing after it can be read).
pub fn step<T, E: fmt::Display>(
    out: &mut Vec<CheckResult>,
    connector: &str,
    check: &str,
    result: Result<T, E>,
) -> Option<T> {
    match result {
        Ok(v) => Some(v),
        Err(e) => {
            out.push(CheckResult::new(
                connector,
                check,
                Status::Fail,
                e.to_string(),
            ));
            None
        }
    }
}
