//! Small readers of event bodies and the panic guard around `mysql_common`'s parsers.

use std::cell::Cell;
use std::fmt;
use std::panic::{self, AssertUnwindSafe};
use std::sync::Once;

use mysql_common::binlog::events::Event;

use super::DecodeError;
use crate::position::{BinlogFilePosition, GtidSet, Uuid};

/// Statement text without surrounding whitespace, `;` and comments-free prefix.
pub(super) fn trim_statement(q: &[u8]) -> &[u8] {
    let mut s = q;
    while let [first, rest @ ..] = s {
        if first.is_ascii_whitespace() {
            s = rest;
        } else {
            break;
        }
    }
    while let [rest @ .., last] = s {
        if last.is_ascii_whitespace() || *last == b';' || *last == 0 {
            s = rest;
        } else {
            break;
        }
    }
    s
}

/// The sql_mode bits that change how a statement is read, from a QUERY_EVENT's (or
/// EXECUTE_LOAD_QUERY_EVENT's) status variables (`Q_SQL_MODE_CODE`); the default mode when
/// the variable is absent or the variables do not parse.
pub(super) fn sql_mode_of(
    status_vars: &mysql_common::binlog::events::StatusVars<'_>,
) -> super::SqlMode {
    use mysql_common::binlog::consts::StatusVarKey;
    use mysql_common::binlog::events::StatusVarVal;
    let bits = panic::catch_unwind(AssertUnwindSafe(|| {
        status_vars
            .get_status_var(StatusVarKey::SqlMode)
            .and_then(|v| match v.get_value() {
                Ok(StatusVarVal::SqlMode(mode)) => Some(mode.0),
                _ => None,
            })
    }));
    super::SqlMode::from_bits(bits.ok().flatten().unwrap_or(0))
}

/// An XA_PREPARE_LOG_EVENT body (MySQL and MariaDB alike): `one_phase` (1 byte), then the
/// XID: `formatID` (4 bytes, signed), `gtrid_length` and `bqual_length` (4 bytes each, at
/// most 64), and their bytes.
pub(super) fn parse_xa_prepare(data: &[u8]) -> Result<(bool, super::Xid), String> {
    let u32_at = |at: usize| -> Result<u32, String> {
        data.get(at..at + 4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .ok_or_else(|| format!("ends at byte {} inside its XID header", data.len()))
    };
    let one_phase = *data.first().ok_or("is empty")? != 0;
    let format_id = i64::from(u32_at(1)? as i32);
    let gtrid_len = u32_at(5)? as usize;
    let bqual_len = u32_at(9)? as usize;
    if gtrid_len > 64 || bqual_len > 64 {
        return Err(format!(
            "XID lengths {gtrid_len} and {bqual_len} exceed 64 bytes"
        ));
    }
    let ids = data
        .get(13..13 + gtrid_len + bqual_len)
        .ok_or_else(|| format!("ends before the {} XID bytes", gtrid_len + bqual_len))?;
    Ok((
        one_phase,
        super::Xid {
            format_id,
            gtrid: ids[..gtrid_len].to_vec(),
            bqual: ids[gtrid_len..].to_vec(),
        },
    ))
}

/// MySQL 8 GTID events carry the commit time in microseconds.
pub(super) fn commit_ts_ms(micros: u64) -> Option<i64> {
    (micros != 0).then(|| i64::try_from(micros / 1000).unwrap_or(i64::MAX))
}

/// The next file name of a ROTATE_EVENT. Before the first FORMAT_DESCRIPTION_EVENT of a stream
/// `mysql_common` does not know the checksum setting and leaves the 4 CRC bytes in the name;
/// they are dropped when they are exactly the event's CRC32.
pub(super) fn rotate_file_name(event: &Event, name: &[u8]) -> String {
    if event.checksum().is_none() && name.len() > 4 {
        let (head, crc) = name.split_at(name.len() - 4);
        let mut hasher = crc32fast::Hasher::new();
        let mut header = Vec::with_capacity(19);
        let h = event.header();
        header.extend_from_slice(&h.timestamp().to_le_bytes());
        header.push(h.event_type_raw());
        header.extend_from_slice(&h.server_id().to_le_bytes());
        header.extend_from_slice(&h.event_size().to_le_bytes());
        header.extend_from_slice(&h.log_pos().to_le_bytes());
        header.extend_from_slice(&h.flags_raw().to_le_bytes());
        hasher.update(&header);
        let data = event.data();
        hasher.update(&data[..data.len() - 4]);
        if hasher.finalize().to_le_bytes() == crc {
            return String::from_utf8_lossy(head).into_owned();
        }
    }
    String::from_utf8_lossy(name).into_owned()
}

/// Parses a PREVIOUS_GTIDS_EVENT body (untagged, or MySQL 8.4's tagged format) into a set.
///
/// Read here rather than by `mysql_common`, which sizes vectors from the counts in the event
/// before checking them against its length.
pub(super) fn parse_previous_gtids(data: &[u8]) -> Result<GtidSet, String> {
    let mut buf = mysql_common::io::ParseBuf(data);
    let take = |buf: &mut mysql_common::io::ParseBuf<'_>, n: usize, what: &str| {
        if buf.0.len() < n {
            return Err(format!("ends inside the {what}"));
        }
        let (head, tail) = buf.0.split_at(n);
        buf.0 = tail;
        Ok::<_, String>(head.to_vec())
    };
    let u64_of = |b: &[u8]| {
        b.iter()
            .rev()
            .fold(0u64, |acc, x| (acc << 8) | u64::from(*x))
    };
    let header = u64_of(&take(&mut buf, 8, "header")?);
    let tagged = header >> 56 != 0;
    let n_sids = if tagged {
        (header >> 8) & ((1 << 48) - 1)
    } else {
        header & ((1 << 56) - 1)
    };
    let mut set = GtidSet::new();
    for _ in 0..n_sids {
        let uuid_bytes = take(&mut buf, 16, "source UUID")?;
        let mut uuid = [0u8; 16];
        uuid.copy_from_slice(&uuid_bytes);
        let tag = if tagged {
            let len = mysql_common::misc::read_varlen_uint(&mut buf).map_err(|e| e.to_string())?;
            let len = usize::try_from(len).map_err(|_| "tag length out of range".to_owned())?;
            let tag = take(&mut buf, len, "tag")?;
            let tag = String::from_utf8(tag).map_err(|_| "tag is not UTF-8".to_owned())?;
            (!tag.is_empty()).then_some(tag)
        } else {
            None
        };
        let n_intervals = u64_of(&take(&mut buf, 8, "interval count")?);
        if n_intervals.saturating_mul(16) > buf.0.len() as u64 {
            return Err(format!(
                "{n_intervals} intervals announced, {} bytes left",
                buf.0.len()
            ));
        }
        for _ in 0..n_intervals {
            let iv = take(&mut buf, 16, "interval")?;
            let (start, end) = (u64_of(&iv[..8]), u64_of(&iv[8..]));
            if end <= start {
                return Err(format!("empty interval [{start}, {end})"));
            }
            set.add_range(Uuid(uuid), tag.as_deref(), start, end - 1)
                .map_err(|e| e.to_string())?;
        }
    }
    if !buf.0.is_empty() {
        return Err(format!("{} bytes after the last GTID", buf.0.len()));
    }
    Ok(set)
}

pub(super) fn malformed(
    what: &str,
    at: &BinlogFilePosition,
    detail: impl fmt::Display,
) -> DecodeError {
    DecodeError::Malformed {
        what: what.to_owned(),
        at: at.clone(),
        detail: detail.to_string(),
    }
}

thread_local! {
    /// Set while [`guarded`] runs, so the panic hook stays quiet for panics it turns into errors.
    static IN_GUARD: Cell<u32> = const { Cell::new(0) };
}

static QUIET_HOOK: Once = Once::new();

/// Installs (once) a panic hook that is silent for panics inside [`guarded`] and delegates to
/// the previous hook otherwise.
fn install_quiet_hook() {
    QUIET_HOOK.call_once(|| {
        let previous = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            if IN_GUARD.with(|g| g.get()) == 0 {
                previous(info);
            }
        }));
    });
}

/// Runs a parse of untrusted bytes; an error or a panic becomes [`DecodeError::Malformed`].
pub(crate) fn guarded<T, E: fmt::Display>(
    what: &str,
    at: &BinlogFilePosition,
    f: impl FnOnce() -> Result<T, E>,
) -> Result<T, DecodeError> {
    match quietly(f) {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(malformed(what, at, e)),
        Err(msg) => Err(malformed(what, at, format!("invalid data ({msg})"))),
    }
}

/// Runs `f` (a `mysql_common` parser on untrusted bytes) catching a panic, whose message is
/// the error, with the panic hook kept quiet: [`guarded`] without the position, for parses
/// deeper down (a JSON value's opaque scalars).
pub(crate) fn quietly<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    install_quiet_hook();
    IN_GUARD.with(|g| g.set(g.get() + 1));
    let result = panic::catch_unwind(AssertUnwindSafe(f));
    IN_GUARD.with(|g| g.set(g.get().saturating_sub(1)));
    result.map_err(|payload| {
        payload
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "parser panicked".to_owned())
    })
}
