//! Sources: where row changes come from.
//!
//! Each source has three layers (see DESIGN.md, "Code models"): a pure decoder (bytes in, typed
//! messages out, no I/O), a session (socket, keepalives, reconnects) and an adapter (keeps the
//! outbox rows and maps them to [`crate::event::SourceEvent`]s).

pub mod mysql;
pub mod postgres;
