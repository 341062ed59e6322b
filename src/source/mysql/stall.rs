//! Noticing a binlog stream that stopped although the server has more binlog to send.
//!
//! The binlog dump is one-way: after `COM_BINLOG_DUMP` the replica only reads. While the relay
//! holds its reader back (Kafka slow or unreachable: the source channel is full), the
//! connection's receive buffer fills and the server's writes wait on a zero TCP window. The
//! server's kernel then probes the window with an exponential backoff (its persist timer: 14 s
//! between probes after a 30 s hold, seen with `ss -o` on the server's socket). When the
//! reader drains the buffer, the replica's kernel should advertise the open window at once;
//! when that update does not come, nothing arrives until the server's next probe, although
//! the server has binlog to send — 8 to 15 s of silence after a Kafka outage, seen in the
//! fault benchmark (`benches/faults`). Heartbeats do not help: the server sends one only when
//! it has nothing else to send.
//!
//! So after the reader was held back, a silence of [`PROBE_AFTER`] makes the session ask the
//! server where its binlog ends (`SHOW MASTER STATUS`, on an SQL connection of its own). When
//! that is past what the stream delivered, the stream is stalled: the session ends with
//! [`MysqlError::Stalled`] (transient) and the supervisor reconnects from the last position
//! handed on, with a WARN. A silence long after the last hold, or of an idle server, waits
//! for the heartbeats as before.

use std::cmp::Ordering;
use std::time::{Duration, Instant};

use mysql_async::prelude::*;
use mysql_async::Conn;

use super::error::MysqlError;
use super::server;
use crate::config::MysqlSourceConfig;
use crate::position::BinlogFilePosition;

/// A hand-on that waited this long held the reader back long enough to fill the socket.
const HELD_BACK: Duration = Duration::from_millis(500);

/// How long after the last hold a silence is probed.
const WATCH_FOR: Duration = Duration::from_secs(120);

/// The silence after which the server is asked where its binlog ends.
pub const PROBE_AFTER: Duration = Duration::from_secs(2);

/// Watches one binlog session for a stall after its reader was held back.
#[derive(Default)]
pub struct StallWatch {
    /// Until when a silence is probed.
    watch_until: Option<Instant>,
    /// The SQL connection the probes use, opened at the first probe.
    probe: Option<Conn>,
}

impl StallWatch {
    /// A watch that probes nothing until the reader is held back.
    pub fn new() -> Self {
        Self::default()
    }

    /// The reader waited `waited` to hand events on (the delivery loop's backpressure).
    pub fn handed_on(&mut self, waited: Duration) {
        if waited >= HELD_BACK {
            self.watch_until = Some(Instant::now() + WATCH_FOR);
        }
    }

    /// How long to wait for the next event before probing, when a silence now is worth a
    /// probe (`None`: wait for the heartbeats).
    pub fn probe_after(&self) -> Option<Duration> {
        self.watch_until
            .filter(|until| Instant::now() < *until)
            .map(|_| PROBE_AFTER)
    }

    /// Asks the server where its binlog ends; returns that position when it is past
    /// `delivered` (the stream is stalled). A probe that fails (the server may be going away:
    /// the stream then fails on its own) or a position that cannot be compared says nothing.
    pub async fn server_ahead(
        &mut self,
        cfg: &MysqlSourceConfig,
        delivered: &BinlogFilePosition,
    ) -> Option<BinlogFilePosition> {
        if delivered.file.is_empty() {
            return None;
        }
        let end = match self.binlog_end(cfg).await {
            Ok(end) => end,
            Err(e) => {
                tracing::debug!(server = %cfg.host, "binlog stall probe failed: {e}");
                self.probe = None;
                return None;
            }
        };
        (compare_positions(&end, delivered) == Some(Ordering::Greater)).then_some(end)
    }

    /// The end of the server's binlog (`SHOW MASTER STATUS`; MySQL 8.4: `SHOW BINARY LOG
    /// STATUS`).
    async fn binlog_end(
        &mut self,
        cfg: &MysqlSourceConfig,
    ) -> Result<BinlogFilePosition, MysqlError> {
        let conn = match &mut self.probe {
            Some(c) => c,
            none => none.insert(server::connect(cfg).await?),
        };
        let row: Option<(String, u64)> = match conn.query_first("SHOW MASTER STATUS").await {
            Ok(r) => r.map(|row: mysql_async::Row| {
                (row.get(0).unwrap_or_default(), row.get(1).unwrap_or(0))
            }),
            Err(_) => conn
                .query_first("SHOW BINARY LOG STATUS")
                .await
                .map_err(|e| MysqlError::from_driver(e, cfg))?
                .map(|row: mysql_async::Row| {
                    (row.get(0).unwrap_or_default(), row.get(1).unwrap_or(0))
                }),
        };
        let (file, pos) = row.ok_or(MysqlError::NoBinlog {
            query: "SHOW MASTER STATUS",
        })?;
        Ok(BinlogFilePosition::new(file, pos))
    }
}

/// Orders two positions of one server's binlog: by the file's sequence number (the digits
/// after the last `.`), then the offset; `None` when the files cannot be ordered (another base
/// name, no number).
fn compare_positions(a: &BinlogFilePosition, b: &BinlogFilePosition) -> Option<Ordering> {
    let seq = |f: &str| -> Option<(String, u64)> {
        let (base, n) = f.rsplit_once('.')?;
        Some((base.to_string(), n.parse().ok()?))
    };
    let (base_a, n_a) = seq(&a.file)?;
    let (base_b, n_b) = seq(&b.file)?;
    if base_a != base_b {
        return None;
    }
    Some(n_a.cmp(&n_b).then(a.pos.cmp(&b.pos)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(file: &str, pos: u64) -> BinlogFilePosition {
        BinlogFilePosition::new(file, pos)
    }

    #[test]
    fn positions_order_by_file_number_then_offset() {
        let c = compare_positions;
        assert_eq!(
            c(&at("b.000002", 4), &at("b.000001", 900)),
            Some(Ordering::Greater)
        );
        assert_eq!(
            c(&at("b.000010", 4), &at("b.000009", 4)),
            Some(Ordering::Greater)
        );
        assert_eq!(
            c(&at("b.000001", 900), &at("b.000001", 900)),
            Some(Ordering::Equal)
        );
        assert_eq!(
            c(&at("b.000001", 800), &at("b.000001", 900)),
            Some(Ordering::Less)
        );
        assert_eq!(c(&at("other.000001", 4), &at("b.000001", 4)), None);
        assert_eq!(c(&at("nonumber", 4), &at("nonumber", 4)), None);
    }

    #[test]
    fn silences_are_probed_only_after_a_hold() {
        let mut w = StallWatch::new();
        assert_eq!(w.probe_after(), None, "an idle server: wait for heartbeats");
        w.handed_on(Duration::from_millis(10));
        assert_eq!(w.probe_after(), None, "a short wait is no hold");
        w.handed_on(HELD_BACK);
        assert_eq!(w.probe_after(), Some(PROBE_AFTER));
        w.watch_until = Some(Instant::now() - Duration::from_millis(1));
        assert_eq!(w.probe_after(), None, "long after the hold");
    }
}
