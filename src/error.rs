//! What happens after a failure: retry (transient) or stop (definite). A leaf: every layer's
//! error enum decides its [`Class`] here, importing nothing else of the crate.
//!
//! Each layer's enum (each source's, the Kafka sink's, the checkpoint store's, the
//! router's) decides the [`Class`] in one function (`class()`), from typed facts (MySQL
//! error codes, SQLSTATEs, librdkafka error codes). Transient failures (connection lost,
//! broker unavailable, delivery timed out) restart from the last checkpoint after a backoff;
//! definite ones (bad configuration, a record Kafka refuses, `binlog_format` not ROW) stop
//! the connector with a message saying what to change. Neither ever advances the
//! checkpoint. A connector's failure as a whole is `pipeline::Error`.
//!
//! Messages never contain passwords or payload contents.

/// What happens after a failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// Retry from the last checkpoint after a backoff.
    Transient,
    /// Stop the connector; an operator has to change something first.
    Definite,
}

impl Class {
    /// `transient` or `definite`: the `kind` label of `outboxd_errors_total`.
    pub fn label(self) -> &'static str {
        match self {
            Class::Transient => "transient",
            Class::Definite => "definite",
        }
    }
}

/// An I/O error in a few words: `connection refused`, `host unreachable`, or its own text.
pub(crate) fn io_cause(e: &std::io::Error) -> String {
    use std::io::ErrorKind as K;
    match e.kind() {
        K::ConnectionRefused => "connection refused".into(),
        K::HostUnreachable => "host unreachable".into(),
        K::NetworkUnreachable => "network unreachable".into(),
        K::TimedOut => "timed out".into(),
        K::ConnectionReset => "connection reset".into(),
        _ => match e.raw_os_error() {
            // A name that does not resolve comes back as a custom error with the resolver's text.
            None => e.to_string(),
            Some(_) => e
                .to_string()
                .split(" (os error")
                .next()
                .unwrap_or_default()
                .to_lowercase(),
        },
    }
}
