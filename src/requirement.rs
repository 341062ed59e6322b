//! A requirement check's result: what a source (or Kafka) needs, found satisfied, not as
//! recommended, or not satisfied, with what to change. The source modules return these
//! lists; `outboxd check` prints them (`preflight`), `run` applies them with [`enforce`].
//! A leaf below the sources, so they do not import the `check` command's module.

use std::fmt;

/// Outcome of one check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    /// Satisfied.
    Pass,
    /// Works, but not as recommended (does not fail `check`).
    Warn,
    /// Not satisfied: the relay will not work.
    Fail,
}

/// One preflight check's result.
#[derive(Debug, Clone)]
pub struct CheckResult {
    /// Which connector it is about.
    pub connector: String,
    /// Short name, e.g. `binlog_format`.
    pub name: String,
    /// Pass / warn / fail.
    pub status: Status,
    /// What was found and, unless passed, what to change.
    pub detail: String,
}

impl CheckResult {
    /// Builds a result.
    pub fn new(connector: &str, name: &str, status: Status, detail: impl Into<String>) -> Self {
        Self {
            connector: connector.to_string(),
            name: name.to_string(),
            status,
            detail: detail.into(),
        }
    }
}

impl fmt::Display for CheckResult {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let tag = match self.status {
            Status::Pass => "ok  ",
            Status::Warn => "warn",
            Status::Fail => "FAIL",
        };
        write!(
            f,
            "[{tag}] {}: {}: {}",
            self.connector, self.name, self.detail
        )
    }
}

/// Enforces requirement checks for `run`: logs each `Warn` (with the connector and the
/// check's name) and returns the first `Fail`, for the source to stop with.
pub fn enforce(checks: Vec<CheckResult>) -> Result<(), CheckResult> {
    for check in checks {
        match check.status {
            Status::Fail => return Err(check),
            Status::Warn => {
                tracing::warn!(connector = %check.connector, check = %check.name, "{}", check.detail)
            }
            Status::Pass => {}
        }
    }
    Ok(())
}
