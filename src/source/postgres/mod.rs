//! PostgreSQL logical replication (pgoutput) source.
//!
//! * [`pgoutput`]: the pure decoder, bytes in, typed protocol-v1 messages out.
//! * `values`: text-format column values to `crate::value::ColumnValue`s by type OID.
//! * `catalog`: the SQL side: server facts, the requirement checks, outbox tables,
//!   publication and slot management (shared with `check` and `status`).
//! * `stream`: the replication stream (`PgSource`), standby status updates gated on
//!   durable checkpoints.
//! * `tls`: libpq's `sslmode` semantics: the SQL connection's negotiation, the
//!   replication connection's settings.
//! * `adapter`: relation cache, outbox filter, logical decoding messages as outbox rows,
//!   transaction framing and positions.
//! * `types`: Relation column types (+ the catalog's NOT NULL, defaults, enum labels) for
//!   the type mapping.
//! * `error`: the source's failures and their classification.

pub(crate) mod adapter;
pub(crate) mod catalog;
pub(crate) mod check;
pub(crate) mod error;
pub mod pgoutput;
pub(crate) mod stream;
pub(crate) mod tls;
pub(crate) mod types;
pub(crate) mod values;

pub(crate) use error::PgError;
pub(crate) use stream::PgSource;
