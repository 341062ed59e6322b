//! Source positions: where a source is, and where a restart resumes from.
//!
//! Every kind of position is a newtype with `Display`/`FromStr` and serde as a plain string, so a
//! position read back from a checkpoint is exactly the one written, and the text forms are the
//! ones operators know from the servers:
//!
//! | type | example | server side |
//! |---|---|---|
//! | [`GtidSet`] | `3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5:11,8e…:1-3:batch:1-7` | MySQL `@@gtid_executed` |
//! | [`MariadbGtidPosition`] | `0-1-42,1-2-7` | MariaDB `@@gtid_binlog_pos`, `@slave_connect_state` |
//! | [`BinlogFilePosition`] | `mysql-bin.000003:1234` | `SHOW BINARY LOG STATUS`, `SHOW MASTER STATUS` |
//! | [`Lsn`] | `16/B374D848` | PostgreSQL `pg_lsn` |
//! | [`XaPendingPosition`] | `mariadb_gtid:0-1-9@0-1-12` | none: outboxd's, while a prepared XA transaction waits |
//!
//! [`SourcePosition`] is the one a checkpoint store keeps. Its JSON form is a tagged object whose
//! `value` is the position's text form:
//!
//! ```json
//! {"kind":"mysql_gtid_set","value":"3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5"}
//! {"kind":"mariadb_gtid","value":"0-1-42"}
//! {"kind":"binlog_file","value":"mysql-bin.000003:1234"}
//! {"kind":"lsn","value":"16/B374D848"}
//! {"kind":"xa_pending","value":"mariadb_gtid:0-1-9@0-1-12"}
//! ```
//!
//! Its `Display`/`FromStr` form (used by `status` and on the command line) is `kind:value`, e.g.
//! `mariadb_gtid:0-1-42`; both round-trip.
//!
//! Nothing here panics on input: every parse error is a typed [`PositionError`].

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Why a position could not be parsed or built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PositionError {
    /// Not a UUID in `8-4-4-4-12` hex form (or 32 hex digits).
    #[error("invalid server UUID {input:?}: expected 8-4-4-4-12 hexadecimal digits")]
    InvalidUuid {
        /// The offending text (shortened).
        input: String,
    },
    /// Not a valid GTID tag.
    #[error(
        "invalid GTID tag {input:?}: a tag is 1 to 32 characters, letters, digits and \
         underscores, starting with a letter or underscore"
    )]
    InvalidTag {
        /// The offending text (shortened).
        input: String,
    },
    /// Not a valid GTID interval (`N` or `N-M`, 1 <= N <= M < 2^63).
    #[error("invalid GTID interval {input:?}: expected N or N-M with 1 <= N <= M < 2^63")]
    InvalidInterval {
        /// The offending text (shortened).
        input: String,
    },
    /// Not a valid GTID set.
    #[error("invalid GTID set {input:?}: {reason}")]
    InvalidGtidSet {
        /// The offending text (shortened).
        input: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// Not a valid MariaDB GTID (`domain-server-seq`).
    #[error("invalid MariaDB GTID {input:?}: expected domain-server-sequence, e.g. 0-1-42")]
    InvalidMariadbGtid {
        /// The offending text (shortened).
        input: String,
    },
    /// A MariaDB GTID position lists the same replication domain twice.
    #[error("MariaDB GTID position lists domain {domain} more than once")]
    DuplicateDomain {
        /// The repeated domain id.
        domain: u32,
    },
    /// Not a valid `file:pos`.
    #[error("invalid binlog position {input:?}: expected file:position, e.g. mysql-bin.000003:4")]
    InvalidFilePosition {
        /// The offending text (shortened).
        input: String,
    },
    /// Not a valid PostgreSQL LSN.
    #[error("invalid LSN {input:?}: expected XXXXXXXX/XXXXXXXX in hexadecimal, e.g. 16/B374D848")]
    InvalidLsn {
        /// The offending text (shortened).
        input: String,
    },
    /// A `kind:value` position with an unknown kind.
    #[error(
        "invalid source position {input:?}: expected mysql_gtid_set:…, mariadb_gtid:…, \
         binlog_file:…, lsn:… or xa_pending:<kind>:<resume>@<delivered>"
    )]
    InvalidSourcePosition {
        /// The offending text (shortened).
        input: String,
    },
}

/// Shortens user input quoted in an error message.
fn shown(input: &str) -> String {
    const MAX: usize = 120;
    if input.len() <= MAX {
        return input.to_owned();
    }
    let mut end = MAX;
    while !input.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &input[..end])
}

/// Implements serde for a type as its `Display`/`FromStr` string.
macro_rules! serde_as_string {
    ($ty:ty) => {
        impl Serialize for $ty {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.collect_str(self)
            }
        }

        impl<'de> Deserialize<'de> for $ty {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let s = String::deserialize(deserializer)?;
                s.parse().map_err(serde::de::Error::custom)
            }
        }
    };
}

// ---------------------------------------------------------------------------------------------
// Uuid
// ---------------------------------------------------------------------------------------------

/// A MySQL server UUID (`@@server_uuid`), the source id of a GTID.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Uuid(pub [u8; 16]);

/// Positions print their text form in `{:?}` too, so logs and test failures stay readable.
macro_rules! debug_as_display {
    ($ty:ty) => {
        impl fmt::Debug for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}(\"{}\")", stringify!($ty), self)
            }
        }
    };
}

debug_as_display!(Uuid);

impl Uuid {
    /// The 16 raw bytes, as in binlog events and `COM_BINLOG_DUMP_GTID`.
    pub fn as_bytes(&self) -> &[u8; 16] {
        &self.0
    }
}

impl From<[u8; 16]> for Uuid {
    fn from(bytes: [u8; 16]) -> Self {
        Self(bytes)
    }
}

/// Lower-case `8-4-4-4-12` form, as MySQL prints it.
impl fmt::Display for Uuid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, b) in self.0.iter().enumerate() {
            if matches!(i, 4 | 6 | 8 | 10) {
                f.write_str("-")?;
            }
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

/// Accepts `8-4-4-4-12` hex digits (any case) or 32 hex digits without hyphens.
impl FromStr for Uuid {
    type Err = PositionError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || PositionError::InvalidUuid { input: shown(s) };
        let bytes = s.as_bytes();
        let hyphenated = bytes.len() == 36;
        if hyphenated {
            for (i, b) in bytes.iter().enumerate() {
                let is_dash_pos = matches!(i, 8 | 13 | 18 | 23);
                if is_dash_pos != (*b == b'-') {
                    return Err(err());
                }
            }
        } else if bytes.len() != 32 {
            return Err(err());
        }
        let mut out = [0u8; 16];
        let mut digits = bytes.iter().filter(|b| **b != b'-');
        for byte in &mut out {
            let hi = digits.next().and_then(|c| hex_value(*c)).ok_or_else(err)?;
            let lo = digits.next().and_then(|c| hex_value(*c)).ok_or_else(err)?;
            *byte = (hi << 4) | lo;
        }
        Ok(Self(out))
    }
}

fn hex_value(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

serde_as_string!(Uuid);

// ---------------------------------------------------------------------------------------------
// GTID set
// ---------------------------------------------------------------------------------------------

/// Largest GNO MySQL hands out (`GNO_END - 1`, i.e. `2^63 - 2`); we accept up to `2^63 - 1`.
const MAX_GNO: u64 = i64::MAX as u64;

/// Maximum length of a GTID tag (MySQL 8.4).
const MAX_TAG_LEN: usize = 32;

/// Validates a GTID tag and returns its canonical (lower-case) form.
///
/// MySQL tags are case-insensitive and printed in lower case.
pub fn normalize_gtid_tag(tag: &str) -> Result<String, PositionError> {
    let err = || PositionError::InvalidTag { input: shown(tag) };
    let mut chars = tag.chars();
    match chars.next() {
        Some(c) if c.is_ascii_alphabetic() || c == '_' => {}
        _ => return Err(err()),
    }
    if tag.len() > MAX_TAG_LEN || !chars.all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Err(err());
    }
    Ok(tag.to_ascii_lowercase())
}

/// A closed interval of GNOs, `start..=end`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct GnoRange {
    /// First GNO (>= 1).
    pub start: u64,
    /// Last GNO, inclusive.
    pub end: u64,
}

/// A MySQL GTID set: for every transaction source (server UUID, optional tag), a set of GNO
/// intervals, kept sorted and merged.
///
/// Text form as MySQL prints `@@gtid_executed`, canonicalised: UUIDs sorted and lower case, one
/// entry per UUID (`uuid:1-5:7`), untagged intervals first, then each tag in order with its
/// intervals (`uuid:1-5:batch:1-3`, MySQL 8.4 tagged GTIDs), entries joined by `,`.
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct GtidSet {
    /// Key: (uuid, tag; `""` = untagged). Value: disjoint, non-adjacent, sorted ranges.
    sets: BTreeMap<(Uuid, String), Vec<GnoRange>>,
}

impl GtidSet {
    /// The empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// True when the set holds no GTID.
    pub fn is_empty(&self) -> bool {
        self.sets.is_empty()
    }

    /// Adds one GTID. Returns `Ok(true)` when it was not in the set yet.
    ///
    /// Errors on GNO 0 (or above 2^63-1) and on an invalid tag.
    pub fn add(&mut self, sid: Uuid, tag: Option<&str>, gno: u64) -> Result<bool, PositionError> {
        if self.contains(sid, tag, gno) {
            return Ok(false);
        }
        self.add_range(sid, tag, gno, gno)?;
        Ok(true)
    }

    /// Adds the closed interval `start..=end` for a source.
    pub fn add_range(
        &mut self,
        sid: Uuid,
        tag: Option<&str>,
        start: u64,
        end: u64,
    ) -> Result<(), PositionError> {
        if start == 0 || start > end || end > MAX_GNO {
            return Err(PositionError::InvalidInterval {
                input: format!("{start}-{end}"),
            });
        }
        let tag = match tag {
            None | Some("") => String::new(),
            Some(t) => normalize_gtid_tag(t)?,
        };
        let ranges = self.sets.entry((sid, tag)).or_default();
        insert_range(ranges, GnoRange { start, end });
        Ok(())
    }

    /// True when the set contains the GTID.
    pub fn contains(&self, sid: Uuid, tag: Option<&str>, gno: u64) -> bool {
        let tag = tag.unwrap_or("").to_ascii_lowercase();
        let Some(ranges) = self.sets.get(&(sid, tag)) else {
            return false;
        };
        // Last range starting at or before gno.
        let idx = ranges.partition_point(|r| r.start <= gno);
        idx > 0 && ranges[idx - 1].end >= gno
    }

    /// Adds every GTID of `other`.
    pub fn union_with(&mut self, other: &GtidSet) {
        for (key, ranges) in &other.sets {
            let mine = self.sets.entry(key.clone()).or_default();
            for r in ranges {
                insert_range(mine, *r);
            }
        }
    }

    /// True when every GTID of `self` is also in `other`.
    pub fn is_subset_of(&self, other: &GtidSet) -> bool {
        self.sets.iter().all(|(key, ranges)| {
            let Some(theirs) = other.sets.get(key) else {
                return false;
            };
            ranges.iter().all(|r| {
                let idx = theirs.partition_point(|t| t.start <= r.start);
                idx > 0 && theirs[idx - 1].end >= r.end
            })
        })
    }

    /// Every source with its intervals: `(uuid, tag or None, ranges)`, in canonical order.
    pub fn iter(&self) -> impl Iterator<Item = (Uuid, Option<&str>, &[GnoRange])> {
        self.sets.iter().map(|((uuid, tag), ranges)| {
            let tag = (!tag.is_empty()).then_some(tag.as_str());
            (*uuid, tag, ranges.as_slice())
        })
    }

    /// The set as `mysql_common` SIDs for `COM_BINLOG_DUMP_GTID` (intervals there are
    /// half-open, `[start, end + 1)`). Tagged sources carry their tag; a set with any tag makes
    /// `mysql_common` use the tagged wire format, which only MySQL 8.4+ accepts.
    pub fn to_sids(&self) -> Vec<mysql_common::packets::Sid<'static>> {
        use mysql_common::packets::{GnoInterval, Sid, Tag};
        self.sets
            .iter()
            .map(|((uuid, tag), ranges)| {
                let intervals = ranges
                    .iter()
                    .map(|r| GnoInterval::new(r.start, r.end + 1))
                    .collect();
                let sid = Sid::new(uuid.0).with_intervals(intervals);
                match Tag::new(tag.clone()) {
                    // Tags are validated and lower-cased on the way in, so `Tag::new` only fails
                    // for the untagged "" key.
                    Ok(tag) if !tag.is_empty() => sid.with_tag(tag),
                    _ => sid,
                }
            })
            .collect()
    }
}

/// Inserts `new` into sorted, disjoint, non-adjacent `ranges`, merging overlaps and neighbours.
fn insert_range(ranges: &mut Vec<GnoRange>, new: GnoRange) {
    // First range that could touch `new`: its end + 1 >= new.start.
    let first = ranges.partition_point(|r| r.end.saturating_add(1) < new.start);
    // One past the last range that could touch `new`: its start <= new.end + 1.
    let last = ranges.partition_point(|r| r.start <= new.end.saturating_add(1));
    if first >= last {
        ranges.insert(first, new);
        return;
    }
    let merged = GnoRange {
        start: ranges[first].start.min(new.start),
        end: ranges[last - 1].end.max(new.end),
    };
    ranges.splice(first..last, [merged]);
}

impl fmt::Display for GtidSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut previous_uuid: Option<Uuid> = None;
        for ((uuid, tag), ranges) in &self.sets {
            if previous_uuid != Some(*uuid) {
                if previous_uuid.is_some() {
                    f.write_str(",")?;
                }
                write!(f, "{uuid}")?;
                previous_uuid = Some(*uuid);
            }
            if !tag.is_empty() {
                write!(f, ":{tag}")?;
            }
            for r in ranges {
                if r.start == r.end {
                    write!(f, ":{}", r.start)?;
                } else {
                    write!(f, ":{}-{}", r.start, r.end)?;
                }
            }
        }
        Ok(())
    }
}

/// Parses MySQL's text form. Whitespace (including the newlines `@@gtid_executed` prints) is
/// ignored; the empty string is the empty set; the same UUID may appear in several entries.
impl FromStr for GtidSet {
    type Err = PositionError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let compact: String = s.chars().filter(|c| !c.is_whitespace()).collect();
        let mut set = GtidSet::new();
        if compact.is_empty() {
            return Ok(set);
        }
        let invalid = |reason| PositionError::InvalidGtidSet {
            input: shown(s),
            reason,
        };
        for entry in compact.split(',') {
            if entry.is_empty() {
                return Err(invalid("empty entry between commas"));
            }
            let mut parts = entry.split(':');
            let uuid: Uuid = parts.next().unwrap_or_default().parse()?;
            let mut tag: Option<String> = None;
            let mut intervals_for_tag = 0usize;
            let mut any_interval = false;
            for part in parts {
                if part.starts_with(|c: char| c.is_ascii_digit()) {
                    let (start, end) = parse_interval(part)?;
                    set.add_range(uuid, tag.as_deref(), start, end)?;
                    intervals_for_tag += 1;
                    any_interval = true;
                } else {
                    if tag.is_some() && intervals_for_tag == 0 {
                        return Err(invalid("a tag must be followed by at least one interval"));
                    }
                    tag = Some(normalize_gtid_tag(part)?);
                    intervals_for_tag = 0;
                }
            }
            if !any_interval || (tag.is_some() && intervals_for_tag == 0) {
                return Err(invalid(
                    "a UUID or tag must be followed by at least one interval",
                ));
            }
        }
        Ok(set)
    }
}

fn parse_interval(part: &str) -> Result<(u64, u64), PositionError> {
    let err = || PositionError::InvalidInterval { input: shown(part) };
    let parse = |t: &str| -> Result<u64, PositionError> {
        if t.is_empty() || !t.bytes().all(|b| b.is_ascii_digit()) {
            return Err(err());
        }
        t.parse::<u64>().map_err(|_| err())
    };
    let (start, end) = match part.split_once('-') {
        Some((a, b)) => (parse(a)?, parse(b)?),
        None => {
            let v = parse(part)?;
            (v, v)
        }
    };
    if start == 0 || start > end || end > MAX_GNO {
        return Err(err());
    }
    Ok((start, end))
}

serde_as_string!(GtidSet);
debug_as_display!(GtidSet);

// ---------------------------------------------------------------------------------------------
// MariaDB GTID position
// ---------------------------------------------------------------------------------------------

/// One MariaDB GTID: `domain-server-sequence`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct MariadbGtid {
    /// Replication domain id.
    pub domain: u32,
    /// Originating server id.
    pub server: u32,
    /// Sequence number within the domain.
    pub seq: u64,
}

impl fmt::Display for MariadbGtid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}-{}", self.domain, self.server, self.seq)
    }
}

impl FromStr for MariadbGtid {
    type Err = PositionError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || PositionError::InvalidMariadbGtid { input: shown(s) };
        let t = s.trim();
        let mut it = t.split('-');
        let (Some(d), Some(srv), Some(seq), None) = (it.next(), it.next(), it.next(), it.next())
        else {
            return Err(err());
        };
        let digits = |x: &str| !x.is_empty() && x.bytes().all(|b| b.is_ascii_digit());
        if !(digits(d) && digits(srv) && digits(seq)) {
            return Err(err());
        }
        Ok(Self {
            domain: d.parse().map_err(|_| err())?,
            server: srv.parse().map_err(|_| err())?,
            seq: seq.parse().map_err(|_| err())?,
        })
    }
}

serde_as_string!(MariadbGtid);

/// A MariaDB GTID position: the last GTID of each replication domain
/// (`@@gtid_binlog_pos`, `@slave_connect_state`), e.g. `0-1-42,1-2-7`.
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct MariadbGtidPosition {
    /// domain -> (server, seq)
    domains: BTreeMap<u32, (u32, u64)>,
}

impl MariadbGtidPosition {
    /// The empty position (start of history).
    pub fn new() -> Self {
        Self::default()
    }

    /// True when no domain is known.
    pub fn is_empty(&self) -> bool {
        self.domains.is_empty()
    }

    /// Records `domain-server-seq` as the last GTID of its domain (stream order is
    /// authoritative: this replaces whatever the domain had).
    pub fn update(&mut self, domain: u32, server: u32, seq: u64) {
        self.domains.insert(domain, (server, seq));
    }

    /// Like [`update`](Self::update), but only when `seq` is beyond the domain's current
    /// sequence number (used for GTID_LIST events, which may lag the position we resume from).
    pub fn advance(&mut self, domain: u32, server: u32, seq: u64) {
        match self.domains.get(&domain) {
            Some((_, current)) if *current >= seq => {}
            _ => {
                self.domains.insert(domain, (server, seq));
            }
        }
    }

    /// The last GTID of a domain.
    pub fn get(&self, domain: u32) -> Option<MariadbGtid> {
        self.domains.get(&domain).map(|(server, seq)| MariadbGtid {
            domain,
            server: *server,
            seq: *seq,
        })
    }

    /// All domains' GTIDs, sorted by domain.
    pub fn iter(&self) -> impl Iterator<Item = MariadbGtid> + '_ {
        self.domains
            .iter()
            .map(|(domain, (server, seq))| MariadbGtid {
                domain: *domain,
                server: *server,
                seq: *seq,
            })
    }
}

impl fmt::Display for MariadbGtidPosition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, gtid) in self.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{gtid}")?;
        }
        Ok(())
    }
}

/// Parses `domain-server-seq[,…]`; whitespace around entries is ignored, the empty string is the
/// empty position, a domain listed twice is an error (MariaDB rejects it too).
impl FromStr for MariadbGtidPosition {
    type Err = PositionError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut pos = MariadbGtidPosition::new();
        if s.trim().is_empty() {
            return Ok(pos);
        }
        for entry in s.split(',') {
            let gtid: MariadbGtid = entry.parse()?;
            if pos.domains.contains_key(&gtid.domain) {
                return Err(PositionError::DuplicateDomain {
                    domain: gtid.domain,
                });
            }
            pos.update(gtid.domain, gtid.server, gtid.seq);
        }
        Ok(pos)
    }
}

serde_as_string!(MariadbGtidPosition);
debug_as_display!(MariadbGtidPosition);

// ---------------------------------------------------------------------------------------------
// file:pos
// ---------------------------------------------------------------------------------------------

/// A binlog file name and byte offset, `mysql-bin.000003:1234`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BinlogFilePosition {
    /// Binlog file name (no directory).
    pub file: String,
    /// Byte offset in the file.
    pub pos: u64,
}

impl BinlogFilePosition {
    /// Builds a position.
    pub fn new(file: impl Into<String>, pos: u64) -> Self {
        Self {
            file: file.into(),
            pos,
        }
    }

    /// The file's base name and sequence number (`mysql-bin.000042` -> `("mysql-bin", 42)`),
    /// the numbered extension the server gives each new binlog; `None` for other names.
    pub fn sequence(&self) -> Option<(&str, u64)> {
        let (base, n) = self.file.rsplit_once('.')?;
        Some((base, n.parse().ok()?))
    }
}

impl fmt::Display for BinlogFilePosition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.file, self.pos)
    }
}

/// Parses `file:pos`; the position is after the last `:`, so file names may contain colons.
impl FromStr for BinlogFilePosition {
    type Err = PositionError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || PositionError::InvalidFilePosition { input: shown(s) };
        let t = s.trim();
        let (file, pos) = t.rsplit_once(':').ok_or_else(err)?;
        if file.is_empty() || pos.is_empty() || !pos.bytes().all(|b| b.is_ascii_digit()) {
            return Err(err());
        }
        Ok(Self {
            file: file.to_owned(),
            pos: pos.parse().map_err(|_| err())?,
        })
    }
}

serde_as_string!(BinlogFilePosition);

// ---------------------------------------------------------------------------------------------
// LSN
// ---------------------------------------------------------------------------------------------

/// A PostgreSQL WAL location, printed as PostgreSQL does: `16/B374D848` (upper-case hex, high and
/// low 32 bits, no zero padding).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Lsn(pub u64);

impl fmt::Display for Lsn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:X}/{:X}", self.0 >> 32, self.0 & 0xffff_ffff)
    }
}

impl FromStr for Lsn {
    type Err = PositionError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || PositionError::InvalidLsn { input: shown(s) };
        let (hi, lo) = s.trim().split_once('/').ok_or_else(err)?;
        let part = |x: &str| -> Result<u64, PositionError> {
            if x.is_empty() || x.len() > 8 || !x.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(err());
            }
            u64::from_str_radix(x, 16).map_err(|_| err())
        };
        Ok(Lsn((part(hi)? << 32) | part(lo)?))
    }
}

serde_as_string!(Lsn);

// ---------------------------------------------------------------------------------------------
// SourcePosition
// ---------------------------------------------------------------------------------------------

/// The position a checkpoint holds: where a restart resumes.
///
/// Serialised as `{"kind": "...", "value": "<text form>"}`; displayed and parsed as
/// `kind:value`. See the module docs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "value", rename_all = "snake_case")]
pub enum SourcePosition {
    /// MySQL with `gtid_mode=ON`: the executed GTID set.
    MysqlGtidSet(GtidSet),
    /// MariaDB with GTIDs: the GTID position.
    MariadbGtid(MariadbGtidPosition),
    /// MySQL/MariaDB without GTIDs: `file:pos`.
    BinlogFile(BinlogFilePosition),
    /// PostgreSQL: the LSN.
    Lsn(Lsn),
    /// MySQL/MariaDB while prepared XA transactions with outbox rows wait for their
    /// `XA COMMIT`: read again from before the oldest such `XA PREPARE`, deliver only what
    /// commits after the delivered position.
    XaPending(XaPendingPosition),
}

impl SourcePosition {
    /// The `kind` tag: `mysql_gtid_set`, `mariadb_gtid`, `binlog_file`, `lsn` or
    /// `xa_pending`.
    pub fn kind(&self) -> &'static str {
        match self {
            SourcePosition::MysqlGtidSet(_) => "mysql_gtid_set",
            SourcePosition::MariadbGtid(_) => "mariadb_gtid",
            SourcePosition::BinlogFile(_) => "binlog_file",
            SourcePosition::Lsn(_) => "lsn",
            SourcePosition::XaPending(_) => "xa_pending",
        }
    }

    /// Where a source starts reading to resume here: the position itself, or for an
    /// [`XaPendingPosition`] its `resume` position (before the oldest prepared XA
    /// transaction still waiting).
    pub fn read_from(&self) -> &SourcePosition {
        match self {
            SourcePosition::XaPending(x) => &x.resume,
            other => other,
        }
    }

    /// Whether `self` is at or before `other` in one binlog (or WAL): everything up to `self`
    /// is also up to `other`. `None` when the two cannot be compared (other kinds, other
    /// binlog file series, an [`XaPendingPosition`]).
    ///
    /// MariaDB: every domain of `self` is in `other` with a sequence number at least as high.
    /// MySQL: `self` is a subset of `other`. `file:pos`: the same file and a position not
    /// after, or an earlier file of the same series (`mysql-bin.000003` < `mysql-bin.000004`).
    pub fn is_at_or_before(&self, other: &SourcePosition) -> Option<bool> {
        match (self, other) {
            (SourcePosition::MariadbGtid(a), SourcePosition::MariadbGtid(b)) => Some(
                a.iter()
                    .all(|g| b.get(g.domain).is_some_and(|o| o.seq >= g.seq)),
            ),
            (SourcePosition::MysqlGtidSet(a), SourcePosition::MysqlGtidSet(b)) => {
                Some(a.is_subset_of(b))
            }
            (SourcePosition::BinlogFile(a), SourcePosition::BinlogFile(b)) => {
                if a.file == b.file {
                    return Some(a.pos <= b.pos);
                }
                match (a.sequence(), b.sequence()) {
                    (Some((base_a, n_a)), Some((base_b, n_b))) if base_a == base_b => {
                        Some(n_a < n_b)
                    }
                    _ => None,
                }
            }
            (SourcePosition::Lsn(a), SourcePosition::Lsn(b)) => Some(a <= b),
            _ => None,
        }
    }

    /// How far delivery got: the position itself, or for an [`XaPendingPosition`] its
    /// `delivered` position (what `status` measures the lag from).
    pub fn delivered(&self) -> &SourcePosition {
        match self {
            SourcePosition::XaPending(x) => &x.delivered,
            other => other,
        }
    }
}

/// A MySQL/MariaDB position while prepared XA transactions with outbox rows wait for their
/// `XA COMMIT` (or `XA ROLLBACK`), possibly from another session, much later.
///
/// An XA transaction's rows are in the binlog at its `XA PREPARE`; whether they commit is
/// known only at the later `XA COMMIT` group, where outboxd delivers them. Meanwhile the
/// transactions after the PREPARE are delivered as they commit, so the checkpoint must say
/// two things: where reading must start again so that the PREPARE is read once more
/// (`resume`: the position before the oldest PREPARE still waiting), and which transactions
/// after it were delivered already (`delivered`: the position after the last of them). A
/// restart reads from `resume`, holds the PREPAREs it meets again, and delivers only
/// transactions that commit after `delivered` (a GTID not in it; for `file:pos`, a commit
/// ending after it): exactly once.
///
/// Both are positions of the same binlog kind (`mariadb_gtid`, `mysql_gtid_set` or
/// `binlog_file`). Text form `<kind>:<resume>@<delivered>`, e.g. `mariadb_gtid:0-1-9@0-1-12`
/// (a `binlog_file` form splits at the first `@` after `:<digits>`).
#[derive(Clone, PartialEq, Eq)]
pub struct XaPendingPosition {
    /// Where reading starts again: before the oldest prepared XA transaction still waiting.
    pub resume: Box<SourcePosition>,
    /// The position after the last transaction delivered.
    pub delivered: Box<SourcePosition>,
}

impl XaPendingPosition {
    /// A pending position; errors unless both are binlog positions of the same kind, and
    /// `resume` is not after `delivered`.
    pub fn new(resume: SourcePosition, delivered: SourcePosition) -> Result<Self, PositionError> {
        let binlog = |p: &SourcePosition| {
            matches!(
                p,
                SourcePosition::MysqlGtidSet(_)
                    | SourcePosition::MariadbGtid(_)
                    | SourcePosition::BinlogFile(_)
            )
        };
        if !binlog(&resume)
            || resume.kind() != delivered.kind()
            || resume.is_at_or_before(&delivered) == Some(false)
        {
            return Err(PositionError::InvalidSourcePosition {
                input: shown(&format!("{resume}@{delivered}")),
            });
        }
        Ok(Self {
            resume: Box::new(resume),
            delivered: Box::new(delivered),
        })
    }
}

impl fmt::Display for XaPendingPosition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let delivered = self.delivered.to_string();
        let value = delivered
            .split_once(':')
            .map_or(delivered.as_str(), |(_, v)| v);
        write!(f, "{}@{value}", self.resume)
    }
}

impl FromStr for XaPendingPosition {
    type Err = PositionError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || PositionError::InvalidSourcePosition { input: shown(s) };
        let t = s.trim();
        let (kind, _) = t.split_once(':').ok_or_else(err)?;
        // The first `@` whose two sides both parse (GTID forms never contain one).
        for (i, _) in t.match_indices('@') {
            let (resume, delivered) = (&t[..i], &t[i + 1..]);
            let (Ok(resume), Ok(delivered)) = (
                resume.parse::<SourcePosition>(),
                format!("{kind}:{delivered}").parse::<SourcePosition>(),
            ) else {
                continue;
            };
            if matches!(resume, SourcePosition::XaPending(_)) {
                return Err(err());
            }
            return Self::new(resume, delivered);
        }
        Err(err())
    }
}

serde_as_string!(XaPendingPosition);

impl fmt::Debug for XaPendingPosition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl fmt::Display for SourcePosition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.kind())?;
        f.write_str(":")?;
        match self {
            SourcePosition::MysqlGtidSet(v) => v.fmt(f),
            SourcePosition::MariadbGtid(v) => v.fmt(f),
            SourcePosition::BinlogFile(v) => v.fmt(f),
            SourcePosition::Lsn(v) => v.fmt(f),
            SourcePosition::XaPending(v) => v.fmt(f),
        }
    }
}

impl FromStr for SourcePosition {
    type Err = PositionError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim();
        let (kind, value) = t
            .split_once(':')
            .ok_or_else(|| PositionError::InvalidSourcePosition { input: shown(s) })?;
        match kind {
            "mysql_gtid_set" => Ok(SourcePosition::MysqlGtidSet(value.parse()?)),
            "mariadb_gtid" => Ok(SourcePosition::MariadbGtid(value.parse()?)),
            "binlog_file" => Ok(SourcePosition::BinlogFile(value.parse()?)),
            "lsn" => Ok(SourcePosition::Lsn(value.parse()?)),
            "xa_pending" => Ok(SourcePosition::XaPending(value.parse()?)),
            _ => Err(PositionError::InvalidSourcePosition { input: shown(s) }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const U1: &str = "3e11fa47-71ca-11e1-9e33-c80aa9429562";
    const U2: &str = "b9b88c66-0755-11f1-9899-4a9da94c4d71";

    fn uuid(s: &str) -> Uuid {
        s.parse().unwrap()
    }

    #[test]
    fn uuid_round_trip_and_forms() {
        let u = uuid(U1);
        assert_eq!(u.to_string(), U1);
        assert_eq!(uuid(&U1.to_uppercase()), u);
        assert_eq!(uuid(&U1.replace('-', "")), u);
        for bad in [
            "",
            "xyz",
            &U1[1..],
            "3e11fa47-71ca-11e1-9e33-c80aa942956g",
            "3e11fa4-771ca-11e1-9e33-c80aa9429562",
        ] {
            assert!(bad.parse::<Uuid>().is_err(), "{bad}");
        }
    }

    #[test]
    fn gtid_set_merges_adjacent_and_overlapping() {
        let mut set = GtidSet::new();
        let u = uuid(U1);
        for gno in [5, 3, 4, 1, 10, 2] {
            assert!(set.add(u, None, gno).unwrap());
        }
        assert!(!set.add(u, None, 4).unwrap());
        assert_eq!(set.to_string(), format!("{U1}:1-5:10"));
        set.add_range(u, None, 6, 9).unwrap();
        assert_eq!(set.to_string(), format!("{U1}:1-10"));
        assert!(set.contains(u, None, 7));
        assert!(!set.contains(u, None, 11));
        assert!(!set.contains(u, Some("t"), 7));
        set.add_range(u, None, 20, 30).unwrap();
        set.add_range(u, None, 12, 25).unwrap();
        assert_eq!(set.to_string(), format!("{U1}:1-10:12-30"));
        set.add(u, None, 11).unwrap();
        assert_eq!(set.to_string(), format!("{U1}:1-30"));
        assert!(set.add(u, None, 0).is_err());
        assert!(set.add(u, Some("9bad"), 1).is_err());
    }

    #[test]
    fn gtid_set_parse_canonical_display() {
        // Unsorted UUIDs, upper case, whitespace and newlines as @@gtid_executed prints them,
        // the same UUID twice, unmerged intervals.
        let u2 = U2.to_uppercase();
        let input = format!("{u2}:1-2,\n{U1}:3-4:1-2:7 ,\n{U1}:9");
        let set: GtidSet = input.parse().unwrap();
        assert_eq!(set.to_string(), format!("{U1}:1-4:7:9,{U2}:1-2"));
        let again: GtidSet = set.to_string().parse().unwrap();
        assert_eq!(again, set);
        assert_eq!("".parse::<GtidSet>().unwrap(), GtidSet::new());
        assert_eq!(" \n".parse::<GtidSet>().unwrap().to_string(), "");
    }

    #[test]
    fn gtid_set_tagged() {
        let s = format!("{U1}:Batch:5-7:1-3:alpha:2,{U1}:1");
        let set: GtidSet = s.parse().unwrap();
        // Intervals after a tag belong to that tag.
        assert_eq!(set.to_string(), format!("{U1}:1:alpha:2:batch:1-3:5-7"));
        assert!(set.contains(uuid(U1), Some("batch"), 6));
        assert!(set.contains(uuid(U1), Some("BATCH"), 6));
        assert!(!set.contains(uuid(U1), None, 6));
        let sids = set.to_sids();
        assert_eq!(sids.len(), 3);
        assert!(sids[0].tag().is_none());
        assert_eq!(sids[0].intervals()[0].start(), 1);
        assert_eq!(sids[0].intervals()[0].end(), 2, "half-open on the wire");
        assert_eq!(sids[2].tag().map(|t| t.as_str()), Some("batch"));
        assert_eq!(set.to_string().parse::<GtidSet>().unwrap(), set);
    }

    #[test]
    fn gtid_set_subset_and_union() {
        let a: GtidSet = format!("{U1}:1-5").parse().unwrap();
        let b: GtidSet = format!("{U1}:1-10,{U2}:1").parse().unwrap();
        assert!(a.is_subset_of(&b));
        assert!(!b.is_subset_of(&a));
        let mut c = a.clone();
        c.union_with(&b);
        assert_eq!(c, b);
    }

    #[test]
    fn gtid_set_bad_input() {
        for bad in [
            "x",
            U1,
            &format!("{U1}:"),
            &format!("{U1}:0"),
            &format!("{U1}:5-3"),
            &format!("{U1}:1-x"),
            &format!("{U1}:1,,{U2}:1"),
            &format!("{U1}:tag"),
            &format!("{U1}:1:tag"),
            &format!("{U1}:1:a:b:2"),
            &format!("{U1}:-1"),
            &format!("{U1}:1-99999999999999999999"),
            &format!("{U1}:1:{}:1", "t".repeat(33)),
        ] {
            assert!(
                bad.parse::<GtidSet>().is_err(),
                "{bad:?} should be rejected"
            );
        }
    }

    #[test]
    fn mariadb_position() {
        let mut pos: MariadbGtidPosition = " 1-2-7, 0-1-42 ".parse().unwrap();
        assert_eq!(pos.to_string(), "0-1-42,1-2-7");
        pos.update(0, 3, 43);
        pos.advance(1, 9, 5);
        pos.advance(2, 1, 1);
        assert_eq!(pos.to_string(), "0-3-43,1-2-7,2-1-1");
        assert_eq!(pos.get(0).unwrap().to_string(), "0-3-43");
        assert_eq!(
            "".parse::<MariadbGtidPosition>().unwrap(),
            MariadbGtidPosition::new()
        );
        assert_eq!(pos.to_string().parse::<MariadbGtidPosition>().unwrap(), pos);
        for bad in [
            "0-1",
            "0-1-2-3",
            "a-1-2",
            "0-1-2,",
            "0--2",
            "0-1-2,0-2-3",
            "4294967296-1-1",
        ] {
            assert!(bad.parse::<MariadbGtidPosition>().is_err(), "{bad}");
        }
    }

    #[test]
    fn file_position() {
        let p: BinlogFilePosition = "mysql-bin.000003:1234".parse().unwrap();
        assert_eq!(p, BinlogFilePosition::new("mysql-bin.000003", 1234));
        assert_eq!(p.to_string(), "mysql-bin.000003:1234");
        let c: BinlogFilePosition = "c:\\x:y.000001:4".parse().unwrap();
        assert_eq!(c.file, "c:\\x:y.000001");
        for bad in ["", "file", ":4", "file:", "file:-1", "file:4x"] {
            assert!(bad.parse::<BinlogFilePosition>().is_err(), "{bad}");
        }
    }

    #[test]
    fn lsn() {
        let l: Lsn = "16/B374D848".parse().unwrap();
        assert_eq!(l.0, 0x16_B374_D848);
        assert_eq!(l.to_string(), "16/B374D848");
        assert_eq!(Lsn(0).to_string(), "0/0");
        assert_eq!("0/1a".parse::<Lsn>().unwrap().to_string(), "0/1A");
        assert!(Lsn(1) < "1/0".parse::<Lsn>().unwrap());
        for bad in ["", "16", "16/", "/1", "G/1", "1/123456789", "1/2/3"] {
            assert!(bad.parse::<Lsn>().is_err(), "{bad}");
        }
    }

    #[test]
    fn source_position_json_and_text() {
        let cases = [
            (
                SourcePosition::MariadbGtid("0-1-42".parse().unwrap()),
                r#"{"kind":"mariadb_gtid","value":"0-1-42"}"#,
                "mariadb_gtid:0-1-42",
            ),
            (
                SourcePosition::MysqlGtidSet(format!("{U1}:1-5").parse().unwrap()),
                r#"{"kind":"mysql_gtid_set","value":"3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5"}"#,
                "mysql_gtid_set:3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5",
            ),
            (
                SourcePosition::BinlogFile(BinlogFilePosition::new("mysql-bin.000001", 4)),
                r#"{"kind":"binlog_file","value":"mysql-bin.000001:4"}"#,
                "binlog_file:mysql-bin.000001:4",
            ),
            (
                SourcePosition::Lsn(Lsn(0x16_B374_D848)),
                r#"{"kind":"lsn","value":"16/B374D848"}"#,
                "lsn:16/B374D848",
            ),
            (
                SourcePosition::MysqlGtidSet(GtidSet::new()),
                r#"{"kind":"mysql_gtid_set","value":""}"#,
                "mysql_gtid_set:",
            ),
        ];
        for (pos, json, text) in cases {
            assert_eq!(serde_json::to_string(&pos).unwrap(), json);
            assert_eq!(serde_json::from_str::<SourcePosition>(json).unwrap(), pos);
            assert_eq!(pos.to_string(), text);
            assert_eq!(text.parse::<SourcePosition>().unwrap(), pos);
        }
        assert!(serde_json::from_str::<SourcePosition>(r#"{"kind":"lsn","value":"zz"}"#).is_err());
        assert!(serde_json::from_str::<SourcePosition>(r#"{"kind":"nope","value":"1"}"#).is_err());
        assert!("nope:1".parse::<SourcePosition>().is_err());
    }

    #[test]
    fn xa_pending_position_round_trips_for_every_binlog_kind() {
        let pending = |r: &str, d: &str| {
            SourcePosition::XaPending(
                XaPendingPosition::new(r.parse().unwrap(), d.parse().unwrap()).unwrap(),
            )
        };
        let cases = [
            (
                pending("mariadb_gtid:0-1-9", "mariadb_gtid:0-1-12,1-2-3"),
                r#"{"kind":"xa_pending","value":"mariadb_gtid:0-1-9@0-1-12,1-2-3"}"#,
                "xa_pending:mariadb_gtid:0-1-9@0-1-12,1-2-3",
            ),
            (
                pending(
                    &format!("mysql_gtid_set:{U1}:1-5"),
                    &format!("mysql_gtid_set:{U1}:1-9:t:1"),
                ),
                r#"{"kind":"xa_pending","value":"mysql_gtid_set:3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5@3e11fa47-71ca-11e1-9e33-c80aa9429562:1-9:t:1"}"#,
                "xa_pending:mysql_gtid_set:3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5@3e11fa47-71ca-11e1-9e33-c80aa9429562:1-9:t:1",
            ),
            (
                // A file name with `@` and `:` in it still splits where both sides parse.
                pending("binlog_file:b@x:1.000001:4", "binlog_file:b@x:1.000002:120"),
                r#"{"kind":"xa_pending","value":"binlog_file:b@x:1.000001:4@b@x:1.000002:120"}"#,
                "xa_pending:binlog_file:b@x:1.000001:4@b@x:1.000002:120",
            ),
        ];
        for (pos, json, text) in cases {
            assert_eq!(serde_json::to_string(&pos).unwrap(), json);
            assert_eq!(serde_json::from_str::<SourcePosition>(json).unwrap(), pos);
            assert_eq!(pos.to_string(), text);
            assert_eq!(text.parse::<SourcePosition>().unwrap(), pos, "{text}");
        }
        let p = pending("mariadb_gtid:0-1-9", "mariadb_gtid:0-1-12");
        assert_eq!(p.read_from().to_string(), "mariadb_gtid:0-1-9");
        assert_eq!(p.delivered().to_string(), "mariadb_gtid:0-1-12");
        for bad in [
            "xa_pending:mariadb_gtid:0-1-9",
            "xa_pending:mariadb_gtid:0-1-9@",
            "xa_pending:lsn:0/1@0/2",
            "xa_pending:xa_pending:mariadb_gtid:0-1-1@0-1-2@0-1-3",
            "xa_pending:@",
            "xa_pending:",
        ] {
            assert!(bad.parse::<SourcePosition>().is_err(), "{bad}");
        }
        let before = |a: &str, b: &str| {
            a.parse::<SourcePosition>()
                .unwrap()
                .is_at_or_before(&b.parse().unwrap())
        };
        assert_eq!(
            before("mariadb_gtid:0-1-9", "mariadb_gtid:0-1-12,1-1-1"),
            Some(true)
        );
        assert_eq!(
            before("mariadb_gtid:0-1-9,1-1-2", "mariadb_gtid:0-1-12,1-1-1"),
            Some(false)
        );
        assert_eq!(
            before("mariadb_gtid:0-1-12", "mariadb_gtid:1-1-1"),
            Some(false)
        );
        assert_eq!(before("mariadb_gtid:", "mariadb_gtid:1-1-1"), Some(true));
        assert_eq!(
            before(
                &format!("mysql_gtid_set:{U1}:1-5"),
                &format!("mysql_gtid_set:{U1}:1-9")
            ),
            Some(true)
        );
        assert_eq!(
            before(
                &format!("mysql_gtid_set:{U1}:1-9"),
                &format!("mysql_gtid_set:{U1}:1-5")
            ),
            Some(false)
        );
        assert_eq!(
            before("binlog_file:b.000009:900", "binlog_file:b.000010:4"),
            Some(true)
        );
        assert_eq!(
            before("binlog_file:b.000010:900", "binlog_file:b.000010:4"),
            Some(false)
        );
        assert_eq!(
            before("binlog_file:b.000010:900", "binlog_file:c.000011:4"),
            None
        );
        assert_eq!(before("binlog_file:b.1:4", "mariadb_gtid:0-1-1"), None);
        assert!(XaPendingPosition::new(
            "mariadb_gtid:0-1-9".parse().unwrap(),
            "binlog_file:b.1:4".parse().unwrap()
        )
        .is_err());
    }
}
