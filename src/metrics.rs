//! Metric names and labels, in one place (Prometheus naming: `_total` counters, base units).
//!
//! Labels stay low-cardinality: the connector name and a small closed set of kinds. Row
//! values and payloads are never labels.

/// Label: the connector's name.
pub const LABEL_CONNECTOR: &str = "connector";
/// Label: failure kind, `transient` or `definite`.
pub const LABEL_KIND: &str = "kind";
/// Label: why an outbox row change made no record (`delete`, `update`, ...).
pub const LABEL_REASON: &str = "reason";
/// Label: an assignment change in a group, `assigned` or `revoked`.
pub const LABEL_CHANGE: &str = "change";

/// Counter: outbox row changes read from the source.
pub const EVENTS_READ: &str = "outboxd_events_read_total";
/// Counter: records Kafka acknowledged.
pub const EVENTS_PRODUCED: &str = "outboxd_events_produced_total";
/// Counter: outbox row changes that made no record, by reason.
pub const EVENTS_SKIPPED: &str = "outboxd_events_skipped_total";
/// Counter: outbox events written to the dead-letter topic instead (`errors.tolerance=all`).
pub const EVENTS_DEAD_LETTERED: &str = "outboxd_events_dead_lettered_total";
/// Counter: bytes (key + value + headers) of records Kafka acknowledged.
pub const BYTES_PRODUCED: &str = "outboxd_bytes_produced_total";
/// Counter: failures, by kind.
pub const ERRORS: &str = "outboxd_errors_total";
/// Counter: checkpoints written.
pub const CHECKPOINT_WRITES: &str = "outboxd_checkpoint_writes_total";
/// Gauge: seconds since the checkpointed position last moved forward.
pub const CHECKPOINT_AGE: &str = "outboxd_checkpoint_age_seconds";
/// Gauge: seconds between the commit time of the last checkpointed source transaction and
/// now (how far delivery lags the source).
pub const CHECKPOINT_LAG: &str = "outboxd_checkpoint_lag_seconds";
/// Gauge: 1 while the source is connected and streaming, else 0.
pub const SOURCE_CONNECTED: &str = "outboxd_source_connected";
/// Counter: connector restarts after transient failures.
pub const RESTARTS: &str = "outboxd_connector_restarts_total";
/// Gauge: 1 in the member of a group that runs the connector, 0 in the others (and 1 for
/// every connector of a process without a group).
pub const CONNECTOR_OWNED: &str = "outboxd_connector_owned";
/// Gauge: members of this process's group, as the group coordinator last described it.
pub const GROUP_MEMBERS: &str = "outboxd_group_members";
/// Counter: connectors assigned to or revoked from this member, by `change`.
pub const GROUP_ASSIGNMENTS: &str = "outboxd_group_assignments_total";

/// Registers descriptions so `/metrics` documents each series.
pub fn describe() {
    use metrics::{describe_counter, describe_gauge, Unit};
    describe_counter!(EVENTS_READ, "Outbox row changes read from the source");
    describe_counter!(EVENTS_PRODUCED, "Records acknowledged by Kafka");
    describe_counter!(EVENTS_SKIPPED, "Outbox row changes that produced no record");
    describe_counter!(
        EVENTS_DEAD_LETTERED,
        "Outbox events written to the dead-letter topic"
    );
    describe_counter!(BYTES_PRODUCED, Unit::Bytes, "Bytes acknowledged by Kafka");
    describe_counter!(ERRORS, "Connector failures by kind");
    describe_counter!(CHECKPOINT_WRITES, "Checkpoints written");
    describe_gauge!(
        CHECKPOINT_AGE,
        Unit::Seconds,
        "Seconds since the checkpoint last advanced"
    );
    describe_gauge!(
        CHECKPOINT_LAG,
        Unit::Seconds,
        "Seconds between the last checkpointed commit and now"
    );
    describe_gauge!(SOURCE_CONNECTED, "1 while the source is streaming");
    describe_counter!(RESTARTS, "Connector restarts after transient failures");
    describe_gauge!(
        CONNECTOR_OWNED,
        "1 in the group member that runs the connector, 0 in the others"
    );
    describe_gauge!(GROUP_MEMBERS, "Members of this process's group");
    describe_counter!(
        GROUP_ASSIGNMENTS,
        "Connectors assigned to or revoked from this member"
    );
}

/// The per-event counters of one connector, looked up once.
///
/// `metrics::counter!` with a label hashes the key and searches the registry on every call;
/// per event (tens of thousands a second) that was measurable in the delivery loops.
#[derive(Clone)]
pub struct EventCounters {
    /// [`EVENTS_READ`] for the connector.
    pub read: metrics::Counter,
    /// [`EVENTS_PRODUCED`] for the connector.
    pub produced: metrics::Counter,
    /// [`BYTES_PRODUCED`] for the connector.
    pub bytes: metrics::Counter,
    /// [`EVENTS_DEAD_LETTERED`] for the connector.
    pub dead_lettered: metrics::Counter,
}

impl EventCounters {
    /// Registers (or finds) the counters labelled with `connector`.
    pub fn new(connector: &str) -> Self {
        Self {
            read: metrics::counter!(EVENTS_READ, LABEL_CONNECTOR => connector.to_string()),
            produced: metrics::counter!(EVENTS_PRODUCED, LABEL_CONNECTOR => connector.to_string()),
            bytes: metrics::counter!(BYTES_PRODUCED, LABEL_CONNECTOR => connector.to_string()),
            dead_lettered: metrics::counter!(EVENTS_DEAD_LETTERED, LABEL_CONNECTOR => connector.to_string()),
        }
    }
}
