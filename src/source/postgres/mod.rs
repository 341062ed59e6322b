//! PostgreSQL logical replication (pgoutput) source.
//!
//! * [`pgoutput`]: the pure decoder, bytes in, typed protocol-v1 messages out.
//! * [`values`]: text-format column values to [`crate::value::ColumnValue`]s by type OID.
//! * [`adapter`]: relation cache, outbox filter, logical decoding messages as outbox rows,
//!   transaction framing and positions.
//! * [`session`]: the SQL side (slot and publication management), the replication stream,
//!   standby status updates gated on durable checkpoints, reconnects.

pub mod adapter;
pub mod pgoutput;
pub mod session;
pub mod values;
