//! PostgreSQL logical replication (pgoutput) source.
//!
//! * [`pgoutput`]: the pure decoder, bytes in, typed protocol-v1 messages out.
//! * [`values`]: text-format column values to [`crate::value::ColumnValue`]s by type OID.
//! * [`catalog`]: the SQL side: server facts, the requirement checks, outbox tables,
//!   publication and slot management (shared with `check` and `status`).
//! * [`stream`]: the replication stream ([`PgSource`]), standby status updates gated on
//!   durable checkpoints.
//! * [`adapter`]: relation cache, outbox filter, logical decoding messages as outbox rows,
//!   transaction framing and positions.
//! * [`error`]: the source's failures and their classification.

pub mod adapter;
pub mod catalog;
pub mod error;
pub mod pgoutput;
pub mod stream;
pub mod values;

pub use error::PgError;
pub use stream::PgSource;
