//! The pure pgoutput decoder: the payload of one `XLogData` message in, one typed
//! [`PgOutputMessage`] out. No I/O, no state: the relation cache lives in the adapter.
//!
//! Begin (`B`), Commit (`C`) and Message (`M`) never reach it: `pgwire-replication` parses
//! those itself and the session hands them to the adapter as they come; this decoder takes
//! the other messages, which the library forwards as raw `XLogData`.
//!
//! Protocol version 1 as specified in the PostgreSQL documentation, "Logical Replication
//! Message Formats" (all integers big-endian, strings NUL-terminated):
//!
//! | tag | message | fields |
//! |---|---|---|
//! | `O` | Origin | Int64 commit_lsn (on the origin), String name |
//! | `R` | Relation | Int32 oid, String namespace, String name, Int8 replica identity, Int16 n, n × (Int8 flags, String name, Int32 type oid, Int32 type modifier) |
//! | `Y` | Type | Int32 oid, String namespace, String name |
//! | `I` | Insert | Int32 relation oid, Byte1 `N`, TupleData |
//! | `U` | Update | Int32 relation oid, [Byte1 `K` or `O`, TupleData], Byte1 `N`, TupleData |
//! | `D` | Delete | Int32 relation oid, Byte1 `K` or `O`, TupleData |
//! | `T` | Truncate | Int32 n, Int8 options, n × Int32 relation oid |
//!
//! TupleData: Int16 n, then per column Byte1 `n` (NULL), `u` (unchanged TOASTed value, not
//! sent), `t` (Int32 length + text), or `b` (Int32 length + binary, only with `binary 'true'`).
//!
//! Timestamps are microseconds since 2000-01-01 00:00:00 UTC (PostgreSQL's epoch).
//!
//! Every read is checked: truncated or garbage input is a typed [`PgOutputError`], never a
//! panic. Byte payloads are [`Bytes`] slices of the input, so a 1 MiB value is not copied.

use bytes::Bytes;

use crate::position::Lsn;

/// Microseconds between the Unix epoch and PostgreSQL's (2000-01-01T00:00:00Z).
pub const PG_EPOCH_OFFSET_MICROS: i64 = 946_684_800_000_000;

/// Converts a PostgreSQL timestamp (µs since 2000-01-01 UTC) to milliseconds since the Unix
/// epoch.
pub fn pg_micros_to_unix_ms(micros: i64) -> i64 {
    micros
        .saturating_add(PG_EPOCH_OFFSET_MICROS)
        .div_euclid(1000)
}

/// Why a pgoutput message could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PgOutputError {
    /// The message is empty (no tag byte).
    #[error("empty pgoutput message")]
    Empty,
    /// The message ended before a field.
    #[error("pgoutput {message} message truncated: {field} needs {needed} byte(s) at offset {offset}, {available} left")]
    Truncated {
        /// Message kind.
        message: &'static str,
        /// Field being read.
        field: &'static str,
        /// Offset of the field in the message.
        offset: usize,
        /// Bytes the field needs.
        needed: usize,
        /// Bytes left.
        available: usize,
    },
    /// A string field has no NUL terminator.
    #[error("pgoutput {message} message: string {field} at offset {offset} is not NUL-terminated")]
    UnterminatedString {
        /// Message kind.
        message: &'static str,
        /// Field being read.
        field: &'static str,
        /// Offset of the field.
        offset: usize,
    },
    /// A string field is not UTF-8.
    #[error("pgoutput {message} message: string {field} at offset {offset} is not UTF-8")]
    InvalidUtf8 {
        /// Message kind.
        message: &'static str,
        /// Field being read.
        field: &'static str,
        /// Offset of the field.
        offset: usize,
    },
    /// A byte with a fixed set of values had another.
    #[error("pgoutput {message} message: unexpected {field} byte {found:#04x} at offset {offset}")]
    UnexpectedByte {
        /// Message kind.
        message: &'static str,
        /// Field being read.
        field: &'static str,
        /// Offset of the byte.
        offset: usize,
        /// The byte found.
        found: u8,
    },
    /// A count or length is negative.
    #[error("pgoutput {message} message: negative {field} {value} at offset {offset}")]
    Negative {
        /// Message kind.
        message: &'static str,
        /// Field being read.
        field: &'static str,
        /// Offset of the field.
        offset: usize,
        /// The value.
        value: i64,
    },
    /// Bytes were left after the message's last field.
    #[error("pgoutput {message} message has {extra} trailing byte(s)")]
    TrailingBytes {
        /// Message kind.
        message: &'static str,
        /// How many.
        extra: usize,
    },
    /// A message tag this decoder does not know (e.g. protocol v2 streaming messages, which
    /// outboxd does not ask for).
    #[error(
        "unknown pgoutput message tag {tag:#04x} ({len} bytes); outboxd speaks protocol version 1"
    )]
    UnknownTag {
        /// The tag byte.
        tag: u8,
        /// Message length.
        len: usize,
    },
}

/// One pgoutput message.
#[derive(Debug, Clone, PartialEq)]
pub enum PgOutputMessage {
    /// The transaction came from another node (replication origin).
    Origin(Origin),
    /// The layout of a table, sent before the first change of it in a session and after
    /// every change of its definition.
    Relation(Relation),
    /// A data type's name, sent before a Relation that uses a non-built-in type.
    Type(TypeInfo),
    /// A row was inserted.
    Insert(Insert),
    /// A row was updated.
    Update(Update),
    /// A row was deleted.
    Delete(Delete),
    /// Tables were truncated.
    Truncate(Truncate),
}

impl PgOutputMessage {
    /// The message's name, for logs.
    pub fn kind(&self) -> &'static str {
        match self {
            PgOutputMessage::Origin(_) => "Origin",
            PgOutputMessage::Relation(_) => "Relation",
            PgOutputMessage::Type(_) => "Type",
            PgOutputMessage::Insert(_) => "Insert",
            PgOutputMessage::Update(_) => "Update",
            PgOutputMessage::Delete(_) => "Delete",
            PgOutputMessage::Truncate(_) => "Truncate",
        }
    }
}

/// Origin of a transaction replicated from another node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    /// Commit LSN on the origin server.
    pub commit_lsn: Lsn,
    /// Origin name.
    pub name: String,
}

/// One column of a [`Relation`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelationColumn {
    /// Flags: bit 0 marks a replica identity (key) column.
    pub flags: u8,
    /// Column name.
    pub name: String,
    /// Data type OID.
    pub type_oid: u32,
    /// Type modifier (`atttypmod`).
    pub type_modifier: i32,
}

impl RelationColumn {
    /// True when the column is part of the replica identity.
    pub fn is_key(&self) -> bool {
        self.flags & 1 != 0
    }
}

/// Relation: a table's schema as the stream will encode its rows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Relation {
    /// Relation OID (the key of later Insert/Update/Delete messages).
    pub oid: u32,
    /// Schema name (`pg_catalog` is sent as the empty string).
    pub namespace: String,
    /// Table name.
    pub name: String,
    /// `relreplident`: `d` default, `n` nothing, `f` full, `i` index.
    pub replica_identity: u8,
    /// Columns in order.
    pub columns: Vec<RelationColumn>,
}

/// Type: the name of a data type used by a later Relation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TypeInfo {
    /// Type OID.
    pub oid: u32,
    /// Schema name.
    pub namespace: String,
    /// Type name.
    pub name: String,
}

/// One column value of a [`TupleData`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TupleValue {
    /// `n`: SQL NULL.
    Null,
    /// `u`: an unchanged TOASTed value that the server did not send (only in Update new
    /// tuples).
    UnchangedToast,
    /// `t`: the value in the type's text output format.
    Text(Bytes),
    /// `b`: the value in the type's binary send format (only with `binary 'true'`).
    Binary(Bytes),
}

/// The column values of one row, in relation column order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TupleData(pub Vec<TupleValue>);

/// Insert: a new row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Insert {
    /// Relation OID.
    pub relation_oid: u32,
    /// The new row.
    pub new: TupleData,
}

/// Which old row image an Update or Delete carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OldTupleKind {
    /// `K`: only the replica identity key columns (others NULL).
    Key,
    /// `O`: the whole old row (`REPLICA IDENTITY FULL`).
    Old,
}

/// Update: a changed row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Update {
    /// Relation OID.
    pub relation_oid: u32,
    /// The old key or row, when the key changed or the identity is FULL.
    pub old: Option<(OldTupleKind, TupleData)>,
    /// The new row.
    pub new: TupleData,
}

/// Delete: a removed row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delete {
    /// Relation OID.
    pub relation_oid: u32,
    /// The old key or row.
    pub old: (OldTupleKind, TupleData),
}

/// Truncate: tables emptied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Truncate {
    /// Option bits: 1 CASCADE, 2 RESTART IDENTITY.
    pub options: u8,
    /// Truncated relation OIDs.
    pub relation_oids: Vec<u32>,
}

/// Decodes one pgoutput message (the payload of an `XLogData`).
pub fn decode(data: &Bytes) -> Result<PgOutputMessage, PgOutputError> {
    let Some(&tag) = data.first() else {
        return Err(PgOutputError::Empty);
    };
    let message = match tag {
        b'O' => "Origin",
        b'R' => "Relation",
        b'Y' => "Type",
        b'I' => "Insert",
        b'U' => "Update",
        b'D' => "Delete",
        b'T' => "Truncate",
        other => {
            return Err(PgOutputError::UnknownTag {
                tag: other,
                len: data.len(),
            })
        }
    };
    let mut r = Reader {
        data,
        pos: 1,
        message,
    };
    let msg = match tag {
        b'O' => PgOutputMessage::Origin(Origin {
            commit_lsn: r.lsn("commit_lsn")?,
            name: r.string("origin name")?,
        }),
        b'R' => {
            let oid = r.u32("relation oid")?;
            let namespace = r.string("namespace")?;
            let name = r.string("relation name")?;
            let replica_identity = r.u8("replica identity")?;
            let n = r.count16("column count")?;
            let mut columns = Vec::with_capacity(n.min(1600));
            for _ in 0..n {
                columns.push(RelationColumn {
                    flags: r.u8("column flags")?,
                    name: r.string("column name")?,
                    type_oid: r.u32("column type oid")?,
                    type_modifier: r.i32("column type modifier")?,
                });
            }
            PgOutputMessage::Relation(Relation {
                oid,
                namespace,
                name,
                replica_identity,
                columns,
            })
        }
        b'Y' => PgOutputMessage::Type(TypeInfo {
            oid: r.u32("type oid")?,
            namespace: r.string("namespace")?,
            name: r.string("type name")?,
        }),
        b'I' => {
            let relation_oid = r.u32("relation oid")?;
            r.expect(b'N', "tuple kind")?;
            PgOutputMessage::Insert(Insert {
                relation_oid,
                new: r.tuple()?,
            })
        }
        b'U' => {
            let relation_oid = r.u32("relation oid")?;
            let kind_at = r.pos;
            let mut old = None;
            let kind = r.u8("tuple kind")?;
            let kind = match kind {
                b'K' | b'O' => {
                    let k = if kind == b'K' {
                        OldTupleKind::Key
                    } else {
                        OldTupleKind::Old
                    };
                    old = Some((k, r.tuple()?));
                    let at = r.pos;
                    (r.u8("tuple kind")?, at)
                }
                other => (other, kind_at),
            };
            if kind.0 != b'N' {
                return Err(PgOutputError::UnexpectedByte {
                    message,
                    field: "tuple kind",
                    offset: kind.1,
                    found: kind.0,
                });
            }
            PgOutputMessage::Update(Update {
                relation_oid,
                old,
                new: r.tuple()?,
            })
        }
        b'D' => {
            let relation_oid = r.u32("relation oid")?;
            let at = r.pos;
            let kind = match r.u8("tuple kind")? {
                b'K' => OldTupleKind::Key,
                b'O' => OldTupleKind::Old,
                found => {
                    return Err(PgOutputError::UnexpectedByte {
                        message,
                        field: "tuple kind",
                        offset: at,
                        found,
                    })
                }
            };
            PgOutputMessage::Delete(Delete {
                relation_oid,
                old: (kind, r.tuple()?),
            })
        }
        b'T' => {
            let n = r.count32("relation count")?;
            let options = r.u8("options")?;
            // Each oid takes 4 bytes: a count larger than the rest cannot be honest.
            r.need("relation oids", n.saturating_mul(4))?;
            let mut relation_oids = Vec::with_capacity(n);
            for _ in 0..n {
                relation_oids.push(r.u32("relation oid")?);
            }
            PgOutputMessage::Truncate(Truncate {
                options,
                relation_oids,
            })
        }
        _ => unreachable!("tag checked above"),
    };
    let extra = data.len() - r.pos;
    if extra != 0 {
        return Err(PgOutputError::TrailingBytes { message, extra });
    }
    Ok(msg)
}

/// A checked cursor over one message.
struct Reader<'a> {
    data: &'a Bytes,
    pos: usize,
    message: &'static str,
}

impl Reader<'_> {
    fn need(&self, field: &'static str, n: usize) -> Result<(), PgOutputError> {
        let available = self.data.len() - self.pos;
        if available < n {
            return Err(PgOutputError::Truncated {
                message: self.message,
                field,
                offset: self.pos,
                needed: n,
                available,
            });
        }
        Ok(())
    }

    fn array<const N: usize>(&mut self, field: &'static str) -> Result<[u8; N], PgOutputError> {
        self.need(field, N)?;
        let mut out = [0u8; N];
        out.copy_from_slice(&self.data[self.pos..self.pos + N]);
        self.pos += N;
        Ok(out)
    }

    fn u8(&mut self, field: &'static str) -> Result<u8, PgOutputError> {
        Ok(self.array::<1>(field)?[0])
    }

    fn i16(&mut self, field: &'static str) -> Result<i16, PgOutputError> {
        Ok(i16::from_be_bytes(self.array(field)?))
    }

    fn i32(&mut self, field: &'static str) -> Result<i32, PgOutputError> {
        Ok(i32::from_be_bytes(self.array(field)?))
    }

    fn u32(&mut self, field: &'static str) -> Result<u32, PgOutputError> {
        Ok(u32::from_be_bytes(self.array(field)?))
    }

    fn lsn(&mut self, field: &'static str) -> Result<Lsn, PgOutputError> {
        Ok(Lsn(u64::from_be_bytes(self.array(field)?)))
    }

    fn count16(&mut self, field: &'static str) -> Result<usize, PgOutputError> {
        let offset = self.pos;
        let v = self.i16(field)?;
        usize::try_from(v).map_err(|_| PgOutputError::Negative {
            message: self.message,
            field,
            offset,
            value: i64::from(v),
        })
    }

    fn count32(&mut self, field: &'static str) -> Result<usize, PgOutputError> {
        let offset = self.pos;
        let v = self.i32(field)?;
        usize::try_from(v).map_err(|_| PgOutputError::Negative {
            message: self.message,
            field,
            offset,
            value: i64::from(v),
        })
    }

    fn bytes(&mut self, field: &'static str, n: usize) -> Result<Bytes, PgOutputError> {
        self.need(field, n)?;
        let b = self.data.slice(self.pos..self.pos + n);
        self.pos += n;
        Ok(b)
    }

    fn string(&mut self, field: &'static str) -> Result<String, PgOutputError> {
        let offset = self.pos;
        let rest = &self.data[self.pos..];
        let end = rest
            .iter()
            .position(|&b| b == 0)
            .ok_or(PgOutputError::UnterminatedString {
                message: self.message,
                field,
                offset,
            })?;
        let s = std::str::from_utf8(&rest[..end]).map_err(|_| PgOutputError::InvalidUtf8 {
            message: self.message,
            field,
            offset,
        })?;
        let s = s.to_owned();
        self.pos += end + 1;
        Ok(s)
    }

    fn expect(&mut self, want: u8, field: &'static str) -> Result<(), PgOutputError> {
        let offset = self.pos;
        let found = self.u8(field)?;
        if found != want {
            return Err(PgOutputError::UnexpectedByte {
                message: self.message,
                field,
                offset,
                found,
            });
        }
        Ok(())
    }

    fn tuple(&mut self) -> Result<TupleData, PgOutputError> {
        let n = self.count16("tuple column count")?;
        // Every column takes at least its kind byte.
        self.need("tuple columns", n)?;
        let mut values = Vec::with_capacity(n);
        for _ in 0..n {
            let at = self.pos;
            let v = match self.u8("tuple value kind")? {
                b'n' => TupleValue::Null,
                b'u' => TupleValue::UnchangedToast,
                b't' => {
                    let len = self.count32("value length")?;
                    TupleValue::Text(self.bytes("value", len)?)
                }
                b'b' => {
                    let len = self.count32("value length")?;
                    TupleValue::Binary(self.bytes("value", len)?)
                }
                found => {
                    return Err(PgOutputError::UnexpectedByte {
                        message: self.message,
                        field: "tuple value kind",
                        offset: at,
                        found,
                    })
                }
            };
            values.push(v);
        }
        Ok(TupleData(values))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Builds pgoutput messages by hand, as the server would send them.
    #[derive(Default)]
    pub(crate) struct Msg(pub Vec<u8>);

    impl Msg {
        pub(crate) fn tag(t: u8) -> Self {
            Msg(vec![t])
        }
        pub(crate) fn u8(mut self, v: u8) -> Self {
            self.0.push(v);
            self
        }
        pub(crate) fn i16(mut self, v: i16) -> Self {
            self.0.extend_from_slice(&v.to_be_bytes());
            self
        }
        pub(crate) fn i32(mut self, v: i32) -> Self {
            self.0.extend_from_slice(&v.to_be_bytes());
            self
        }
        pub(crate) fn i64(mut self, v: i64) -> Self {
            self.0.extend_from_slice(&v.to_be_bytes());
            self
        }
        pub(crate) fn str(mut self, s: &str) -> Self {
            self.0.extend_from_slice(s.as_bytes());
            self.0.push(0);
            self
        }
        pub(crate) fn text(mut self, v: &[u8]) -> Self {
            self.0.push(b't');
            self.0.extend_from_slice(&(v.len() as i32).to_be_bytes());
            self.0.extend_from_slice(v);
            self
        }
        pub(crate) fn raw(mut self, v: &[u8]) -> Self {
            self.0.extend_from_slice(v);
            self
        }
        pub(crate) fn bytes(self) -> Bytes {
            Bytes::from(self.0)
        }
    }

    pub(crate) fn relation(oid: i32, ns: &str, name: &str, cols: &[(&str, i32)]) -> Bytes {
        let mut m = Msg::tag(b'R')
            .i32(oid)
            .str(ns)
            .str(name)
            .u8(b'd')
            .i16(cols.len() as i16);
        for (i, (c, t)) in cols.iter().enumerate() {
            m = m.u8(u8::from(i == 0)).str(c).i32(*t).i32(-1);
        }
        m.bytes()
    }

    pub(crate) fn insert(oid: i32, values: &[Option<&[u8]>]) -> Bytes {
        let mut m = Msg::tag(b'I').i32(oid).u8(b'N').i16(values.len() as i16);
        for v in values {
            m = match v {
                Some(v) => m.text(v),
                None => m.u8(b'n'),
            };
        }
        m.bytes()
    }

    #[test]
    fn relation_and_insert() {
        let r = decode(&relation(
            16385,
            "public",
            "outbox_events",
            &[("id", 2950), ("payload", 3802)],
        ))
        .unwrap();
        let PgOutputMessage::Relation(r) = r else {
            panic!("{r:?}")
        };
        assert_eq!(r.oid, 16385);
        assert_eq!(r.namespace, "public");
        assert_eq!(r.name, "outbox_events");
        assert_eq!(r.replica_identity, b'd');
        assert_eq!(r.columns.len(), 2);
        assert!(r.columns[0].is_key());
        assert!(!r.columns[1].is_key());
        assert_eq!(r.columns[1].type_oid, 3802);
        assert_eq!(r.columns[1].type_modifier, -1);

        let i = decode(&insert(16385, &[Some(b"abc"), None])).unwrap();
        assert_eq!(
            i,
            PgOutputMessage::Insert(Insert {
                relation_oid: 16385,
                new: TupleData(vec![
                    TupleValue::Text(Bytes::from_static(b"abc")),
                    TupleValue::Null
                ])
            })
        );
    }

    #[test]
    fn update_delete_truncate_type_origin() {
        let tuple = |m: Msg| m.i16(2).text(b"1").u8(b'u');
        let u = decode(&tuple(Msg::tag(b'U').i32(7).u8(b'N')).bytes()).unwrap();
        assert_eq!(
            u,
            PgOutputMessage::Update(Update {
                relation_oid: 7,
                old: None,
                new: TupleData(vec![
                    TupleValue::Text(Bytes::from_static(b"1")),
                    TupleValue::UnchangedToast
                ])
            })
        );
        let u = decode(&tuple(tuple(Msg::tag(b'U').i32(7).u8(b'O')).u8(b'N')).bytes()).unwrap();
        let PgOutputMessage::Update(u) = u else {
            panic!()
        };
        assert_eq!(u.old.unwrap().0, OldTupleKind::Old);
        let d = decode(&tuple(Msg::tag(b'D').i32(7).u8(b'K')).bytes()).unwrap();
        let PgOutputMessage::Delete(d) = d else {
            panic!()
        };
        assert_eq!(d.old.0, OldTupleKind::Key);
        assert_eq!(
            decode(&Msg::tag(b'T').i32(2).u8(1).i32(5).i32(6).bytes()).unwrap(),
            PgOutputMessage::Truncate(Truncate {
                options: 1,
                relation_oids: vec![5, 6]
            })
        );
        assert_eq!(
            decode(&Msg::tag(b'Y').i32(99).str("public").str("mood").bytes()).unwrap(),
            PgOutputMessage::Type(TypeInfo {
                oid: 99,
                namespace: "public".into(),
                name: "mood".into()
            })
        );
        assert_eq!(
            decode(&Msg::tag(b'O').i64(42).str("node_a").bytes()).unwrap(),
            PgOutputMessage::Origin(Origin {
                commit_lsn: Lsn(42),
                name: "node_a".into()
            })
        );
        let b = decode(
            &Msg::tag(b'I')
                .i32(1)
                .u8(b'N')
                .i16(1)
                .u8(b'b')
                .i32(2)
                .raw(&[0, 1])
                .bytes(),
        )
        .unwrap();
        let PgOutputMessage::Insert(b) = b else {
            panic!()
        };
        assert_eq!(b.new.0[0], TupleValue::Binary(Bytes::from_static(&[0, 1])));
    }

    #[test]
    fn every_truncation_is_an_error() {
        let samples = [
            relation(1, "s", "t", &[("a", 25), ("b", 23)]),
            insert(1, &[Some(b"hello"), None, Some(b"")]),
            Msg::tag(b'T').i32(2).u8(0).i32(5).i32(6).bytes(),
            Msg::tag(b'U')
                .i32(7)
                .u8(b'K')
                .i16(1)
                .u8(b'n')
                .u8(b'N')
                .i16(1)
                .text(b"x")
                .bytes(),
            Msg::tag(b'D').i32(7).u8(b'O').i16(1).text(b"x").bytes(),
            Msg::tag(b'Y').i32(99).str("public").str("mood").bytes(),
            Msg::tag(b'O').i64(42).str("node_a").bytes(),
        ];
        for full in samples {
            assert!(decode(&full).is_ok(), "{full:?}");
            for cut in 0..full.len() {
                let short = full.slice(..cut);
                assert!(decode(&short).is_err(), "prefix {cut} of {full:?} decoded");
            }
            let mut long = full.to_vec();
            long.push(0);
            assert!(matches!(
                decode(&Bytes::from(long)),
                Err(PgOutputError::TrailingBytes { extra: 1, .. })
            ));
        }
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        assert_eq!(decode(&Bytes::new()), Err(PgOutputError::Empty));
        assert!(matches!(
            decode(&Bytes::from_static(b"S\0\0\0\x01\x01")),
            Err(PgOutputError::UnknownTag { tag: b'S', .. })
        ));
        // Begin, Commit and Message are pgwire-replication's to parse.
        assert!(matches!(
            decode(&Bytes::from_static(b"B")),
            Err(PgOutputError::UnknownTag { tag: b'B', .. })
        ));
        // Negative counts and lengths.
        assert!(matches!(
            decode(&Msg::tag(b'I').i32(1).u8(b'N').i16(-1).bytes()),
            Err(PgOutputError::Negative { .. })
        ));
        assert!(matches!(
            decode(
                &Msg::tag(b'I')
                    .i32(1)
                    .u8(b'N')
                    .i16(1)
                    .u8(b't')
                    .i32(-5)
                    .bytes()
            ),
            Err(PgOutputError::Negative { .. })
        ));
        // Huge counts with little data do not allocate or panic.
        assert!(decode(&Msg::tag(b'T').i32(i32::MAX).u8(0).bytes()).is_err());
        assert!(decode(&Msg::tag(b'I').i32(1).u8(b'N').i16(i16::MAX).bytes()).is_err());
        assert!(decode(
            &Msg::tag(b'R')
                .i32(1)
                .str("s")
                .str("t")
                .u8(b'd')
                .i16(i16::MAX)
                .bytes()
        )
        .is_err());
        // Bad kind bytes.
        assert!(matches!(
            decode(&Msg::tag(b'I').i32(1).u8(b'X').bytes()),
            Err(PgOutputError::UnexpectedByte { .. })
        ));
        assert!(matches!(
            decode(&Msg::tag(b'I').i32(1).u8(b'N').i16(1).u8(b'z').bytes()),
            Err(PgOutputError::UnexpectedByte { .. })
        ));
        assert!(matches!(
            decode(
                &Msg::tag(b'U')
                    .i32(1)
                    .u8(b'K')
                    .i16(0)
                    .u8(b'K')
                    .i16(0)
                    .bytes()
            ),
            Err(PgOutputError::UnexpectedByte { .. })
        ));
        assert!(matches!(
            decode(&Msg::tag(b'D').i32(1).u8(b'N').i16(0).bytes()),
            Err(PgOutputError::UnexpectedByte { .. })
        ));
        // Strings: unterminated, not UTF-8.
        assert!(matches!(
            decode(&Msg::tag(b'Y').i32(1).raw(b"public").bytes()),
            Err(PgOutputError::UnterminatedString { .. })
        ));
        assert!(matches!(
            decode(&Msg::tag(b'Y').i32(1).raw(b"\xff\0").str("t").bytes()),
            Err(PgOutputError::InvalidUtf8 { .. })
        ));
        // A deterministic pseudo-random fuzz: never panics.
        let mut seed: u64 = 0x9E37_79B9_7F4A_7C15;
        for _ in 0..20_000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let len = (seed % 40) as usize;
            let tags = b"ORYIUDT";
            let mut v = vec![tags[(seed >> 8) as usize % tags.len()]];
            let mut s = seed;
            for _ in 0..len {
                s = s.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                v.push((s >> 56) as u8);
            }
            let _ = decode(&Bytes::from(v));
        }
    }
}
