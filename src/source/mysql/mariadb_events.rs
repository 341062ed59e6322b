//! MariaDB-only binlog events, which `mysql_common` leaves unparsed.
//!
//! Names follow MariaDB's replication protocol documentation. All reads are checked: a short or
//! inconsistent body is an error, never a panic.

use crate::position::MariadbGtidPosition;

/// `BINLOG_CHECKPOINT_EVENT`: names the oldest binlog file still needed for crash recovery.
pub const BINLOG_CHECKPOINT_EVENT: u8 = 161;
/// `GTID_EVENT`: starts an event group (a transaction, or a standalone DDL).
pub const GTID_EVENT: u8 = 162;
/// `GTID_LIST_EVENT`: the last GTID of every replication domain, at the start of a binlog.
pub const GTID_LIST_EVENT: u8 = 163;
/// `START_ENCRYPTION_EVENT`: the rest of the file is encrypted.
pub const START_ENCRYPTION_EVENT: u8 = 164;
/// `QUERY_COMPRESSED_EVENT` (first of the compressed event types, `log_bin_compress=ON`).
pub const QUERY_COMPRESSED_EVENT: u8 = 165;
/// `DELETE_ROWS_COMPRESSED_EVENT` (last of the compressed event types).
pub const DELETE_ROWS_COMPRESSED_EVENT: u8 = 171;

/// GTID_EVENT flags2 bit: a standalone event group (DDL) with no terminating COMMIT/XID.
pub const FL_STANDALONE: u8 = 0x01;
/// GTID_EVENT flags2 bit: a group commit id follows the domain id.
pub const FL_GROUP_COMMIT_ID: u8 = 0x02;
/// GTID_EVENT flags2 bit: XA PREPARE.
pub const FL_PREPARED_XA: u8 = 0x40;

/// A decoded MariaDB `GTID_EVENT`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MariadbGtidEvent {
    /// Sequence number.
    pub seq_no: u64,
    /// Replication domain id.
    pub domain_id: u32,
    /// Originating server id (from the event header).
    pub server_id: u32,
    /// `flags2`.
    pub flags: u8,
    /// Group commit id, when `FL_GROUP_COMMIT_ID` is set.
    pub commit_id: Option<u64>,
}

impl MariadbGtidEvent {
    /// True for a standalone group (DDL): it ends with its single statement, no COMMIT follows.
    pub fn is_standalone(&self) -> bool {
        self.flags & FL_STANDALONE != 0
    }
}

/// Little-endian reads over a slice that fail instead of panicking.
struct Reader<'a> {
    data: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        if self.data.len() < n {
            return Err(format!(
                "needs {n} more bytes but only {} are left",
                self.data.len()
            ));
        }
        let (head, tail) = self.data.split_at(n);
        self.data = tail;
        Ok(head)
    }

    fn u8(&mut self) -> Result<u8, String> {
        Ok(self.take(1)?[0])
    }

    fn u32(&mut self) -> Result<u32, String> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn u64(&mut self) -> Result<u64, String> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }
}

/// Parses a `GTID_EVENT` body (checksum already removed). `server_id` comes from the header.
pub fn parse_gtid_event(data: &[u8], server_id: u32) -> Result<MariadbGtidEvent, String> {
    let mut r = Reader { data };
    let seq_no = r.u64()?;
    let domain_id = r.u32()?;
    let flags = r.u8()?;
    let commit_id = if flags & FL_GROUP_COMMIT_ID != 0 {
        Some(r.u64()?)
    } else {
        None
    };
    // What follows (padding, XA xid, extra flags) does not matter here.
    Ok(MariadbGtidEvent {
        seq_no,
        domain_id,
        server_id,
        flags,
        commit_id,
    })
}

/// Parses a `GTID_LIST_EVENT` body into a position (one GTID per domain; a domain listed twice
/// keeps its highest sequence number).
pub fn parse_gtid_list_event(data: &[u8]) -> Result<MariadbGtidPosition, String> {
    let mut r = Reader { data };
    // The low 28 bits are the count; the high 4 bits are flags.
    let count = (r.u32()? & 0x0fff_ffff) as usize;
    if count.saturating_mul(16) > r.data.len() {
        return Err(format!(
            "lists {count} GTIDs but only {} bytes follow",
            r.data.len()
        ));
    }
    let mut pos = MariadbGtidPosition::new();
    for _ in 0..count {
        let domain = r.u32()?;
        let server = r.u32()?;
        let seq = r.u64()?;
        pos.advance(domain, server, seq);
    }
    Ok(pos)
}

/// Parses a `BINLOG_CHECKPOINT_EVENT` body: the binlog file name.
pub fn parse_binlog_checkpoint_event(data: &[u8]) -> Result<String, String> {
    let mut r = Reader { data };
    let len = r.u32()? as usize;
    let name = r.take(len)?;
    Ok(String::from_utf8_lossy(name).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gtid_event() {
        let mut body = Vec::new();
        body.extend_from_slice(&42u64.to_le_bytes());
        body.extend_from_slice(&3u32.to_le_bytes());
        body.push(FL_STANDALONE | FL_GROUP_COMMIT_ID);
        body.extend_from_slice(&7u64.to_le_bytes());
        let ev = parse_gtid_event(&body, 10).unwrap();
        assert_eq!(
            ev,
            MariadbGtidEvent {
                seq_no: 42,
                domain_id: 3,
                server_id: 10,
                flags: FL_STANDALONE | FL_GROUP_COMMIT_ID,
                commit_id: Some(7)
            }
        );
        assert!(ev.is_standalone());
        // Group commit id announced but missing.
        assert!(parse_gtid_event(&body[..13], 10).is_err());
        for n in 0..13 {
            assert!(parse_gtid_event(&body[..n], 10).is_err());
        }
    }

    #[test]
    fn gtid_list_event() {
        // The example of MariaDB's documentation: one GTID, 0-10124-3584.
        let body = [
            0x01, 0, 0, 0, 0, 0, 0, 0, 0x8c, 0x27, 0, 0, 0x00, 0x0e, 0, 0, 0, 0, 0, 0,
        ];
        assert_eq!(
            parse_gtid_list_event(&body).unwrap().to_string(),
            "0-10124-3584"
        );
        assert!(parse_gtid_list_event(&body[..19]).is_err());
        // A huge count with no data behind it.
        assert!(parse_gtid_list_event(&[0xff, 0xff, 0xff, 0x0f]).is_err());
        assert_eq!(
            parse_gtid_list_event(&[0, 0, 0, 0]).unwrap().to_string(),
            ""
        );
    }
}
