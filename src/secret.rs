//! Secrets (database passwords) that never reach logs, `Debug` output or error messages.

use std::fmt;

/// A secret string, such as a database password.
///
/// `Debug` and `Display` print `***`; only [`Secret::expose`] gives the value, and callers use
/// it solely to hand the secret to a client library. In outboxd's TOML a secret is given as
/// `password = "..."`, `password_env = "VAR"` (read from the environment at load time) or
/// `password_file = "/path"` (file contents with one trailing newline removed). In a Debezium
/// connector JSON it is `database.password`, optionally through Kafka Connect's
/// `${env:VAR}` / `${file:/path.properties:key}` / `${directory:/dir:file}` config providers.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct Secret(String);

impl Secret {
    /// Wraps a secret value.
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The secret value. Never log or format it.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// True when the secret is the empty string (for example no password configured).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn never_printed() {
        let s = Secret::new("hunter2");
        assert_eq!(format!("{s}"), "***");
        assert_eq!(format!("{s:?}"), "***");
        assert_eq!(format!("{:?}", Some(&s)), "Some(***)");
        assert_eq!(s.expose(), "hunter2");
    }
}
