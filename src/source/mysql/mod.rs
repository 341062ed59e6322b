//! MySQL / MariaDB ROW binlog source.
//!
//! * [`decode`]: the pure decoder, `mysql_common` events in, [`decode::BinlogMessage`]s out
//!   (with `mariadb_events` for the MariaDB events `mysql_common` leaves unparsed).
//! * [`framing`]: reading binlog files safely (offline decoding).
//! * `offline`: `outboxd binlog decode` — one JSON object per row change.
//! * `server`: connecting, server facts, the requirement checks, positions (SQL side).
//! * `stream`: the binlog session (`MysqlSource`).
//! * `stall`: noticing a binlog stream stalled after the reader was held back.
//! * `tls`: Debezium's `database.ssl.mode` and stores as mysql_async TLS options.
//! * `adapter`: outbox rows and commits to `crate::event::SourceEvent`s.
//! * `error`: the source's failures and their classification.

pub(crate) mod adapter;
pub(crate) mod check;
pub mod decode;
pub(crate) mod error;
pub mod framing;
pub(crate) mod mariadb_events;
mod offline;
pub(crate) mod server;
mod stall;
pub(crate) mod stream;
pub(crate) mod table;
pub(crate) mod tls;
pub(crate) mod types;
pub(crate) mod values;

pub use decode::{
    BinlogDecoder, BinlogMessage, DecodeError, MissingColumnNames, PositionKind, TxnGtid,
};
pub(crate) use error::MysqlError;
pub use framing::{BinlogFileReader, FramedEvent};
pub use offline::{decode_file_to_json, DecodeSummary, OnRow};
pub(crate) use stream::MysqlSource;
