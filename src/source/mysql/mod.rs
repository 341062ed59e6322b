//! MySQL / MariaDB ROW binlog source.
//!
//! * [`decode`]: the pure decoder, `mysql_common` events in, [`decode::BinlogMessage`]s out.
//! * [`framing`]: reading binlog files safely (offline decoding).
//! * [`offline`]: `outboxd binlog decode` — one JSON object per row change.

pub mod decode;
pub mod framing;
pub mod mariadb_events;
pub mod offline;
mod table;
mod values;

pub use decode::{
    BinlogDecoder, BinlogMessage, DecodeError, MissingColumnNames, PositionKind, TxnGtid,
};
pub use framing::{BinlogFileReader, FramedEvent};
pub use offline::{decode_file_to_json, DecodeSummary, OnRow};

pub mod adapter;
pub mod session;
