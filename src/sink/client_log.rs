//! librdkafka's log lines as tracing events (target `librdkafka`), for every Kafka client the
//! relay creates.
//!
//! Each line keeps the syslog level librdkafka gives it (its `log_cb`, see librdkafka's
//! CONFIGURATION.md `log_level`), as rdkafka's default context does, with one exception: a
//! warning about a coordinator that is still loading or not yet available, which librdkafka
//! retries on its own (the line ends in "retrying"), is logged at INFO. Every freshly started
//! broker answers so while it creates `__transaction_state` or loads it, and a WARN there
//! sent first-time users looking for a fault; if the coordinator never comes, the relay's own
//! error (a transaction that cannot start, a check that fails) still says so.

use rdkafka::config::RDKafkaLogLevel;
use rdkafka::consumer::ConsumerContext;
use rdkafka::ClientContext;
use tracing::Level;

/// Broker answers, as librdkafka words them in a retried request's warning, that mean a
/// coordinator is starting (Kafka error codes COORDINATOR_LOAD_IN_PROGRESS (14) and
/// COORDINATOR_NOT_AVAILABLE (15)).
const STARTING_COORDINATOR: [&str; 2] =
    ["Coordinator load in progress", "Coordinator not available"];

/// The tracing level for a librdkafka log line of syslog `level` with text `message`.
pub fn level(level: RDKafkaLogLevel, message: &str) -> Level {
    match level {
        RDKafkaLogLevel::Emerg
        | RDKafkaLogLevel::Alert
        | RDKafkaLogLevel::Critical
        | RDKafkaLogLevel::Error => Level::ERROR,
        RDKafkaLogLevel::Warning
            if message.trim_end().ends_with("retrying")
                && STARTING_COORDINATOR.iter().any(|s| message.contains(s)) =>
        {
            Level::INFO
        }
        RDKafkaLogLevel::Warning => Level::WARN,
        RDKafkaLogLevel::Notice | RDKafkaLogLevel::Info => Level::INFO,
        RDKafkaLogLevel::Debug => Level::DEBUG,
    }
}

/// Logs one librdkafka line (`fac`: its facility, e.g. `GETPID`) at [`level`]'s level.
pub fn log(rd_level: RDKafkaLogLevel, fac: &str, message: &str) {
    match level(rd_level, message) {
        Level::ERROR => tracing::error!(target: "librdkafka", "librdkafka: {fac} {message}"),
        Level::WARN => tracing::warn!(target: "librdkafka", "librdkafka: {fac} {message}"),
        Level::INFO => tracing::info!(target: "librdkafka", "librdkafka: {fac} {message}"),
        _ => tracing::debug!(target: "librdkafka", "librdkafka: {fac} {message}"),
    }
}

/// rdkafka's default client context with [`log`] for its log lines: for clients that need
/// no other callback (the checkpoint store's admin client, consumers and producer).
#[derive(Debug, Default, Clone, Copy)]
pub struct ClientLog;

impl ClientContext for ClientLog {
    fn log(&self, level: RDKafkaLogLevel, fac: &str, message: &str) {
        log(level, fac, message);
    }
}

impl ConsumerContext for ClientLog {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_starting_coordinator_retried_is_info() {
        for m in [
            "Failed to acquire idempotence PID from broker 127.0.0.1:39092/1: Broker: \
             Coordinator load in progress: retrying",
            "Failed to acquire transactional PID from broker TxnCoordinator/1: Broker: \
             Coordinator not available: retrying",
        ] {
            assert_eq!(level(RDKafkaLogLevel::Warning, m), Level::INFO, "{m}");
        }
    }

    #[test]
    fn other_warnings_and_errors_keep_their_level() {
        // Not retried: stays a warning.
        assert_eq!(
            level(
                RDKafkaLogLevel::Warning,
                "Failed to acquire idempotence PID: Coordinator load in progress"
            ),
            Level::WARN
        );
        // Retried, but not a starting coordinator.
        assert_eq!(
            level(
                RDKafkaLogLevel::Warning,
                "Failed to acquire idempotence PID from broker 1: Broker: Cluster \
                 authorization failed: retrying"
            ),
            Level::WARN
        );
        assert_eq!(
            level(
                RDKafkaLogLevel::Error,
                "Coordinator load in progress: retrying"
            ),
            Level::ERROR
        );
        assert_eq!(level(RDKafkaLogLevel::Notice, "x"), Level::INFO);
        assert_eq!(level(RDKafkaLogLevel::Debug, "x"), Level::DEBUG);
    }
}
