//! A Kafka Connect standalone worker's offsets file: Java object serialization of one
//! `java.util.HashMap<byte[], byte[]>`, read and written without a JVM.
//!
//! Kafka Connect's `FileOffsetBackingStore` (`offset.storage.file.filename`) keeps every
//! connector's offsets in memory and, at each flush, writes them all with
//! `ObjectOutputStream.writeObject` of a `HashMap` whose keys and values are the JSON bytes of
//! the offset keys and values (`["<connector>",{"server":"<topic.prefix>"}]` →
//! `{"file":..,"pos":..}`); it reads the file back with `readObject` and refuses anything but a
//! `HashMap`. The byte layout follows the Java Object Serialization Specification, chapter 6
//! ("Object Serialization Stream Protocol"), and `HashMap`'s own `writeObject`:
//!
//! ```text
//! AC ED 00 05                         STREAM_MAGIC, STREAM_VERSION
//! 73 72 "java.util.HashMap" <suid>    TC_OBJECT, TC_CLASSDESC (handle 0x7E0000)
//!    03 0002 F "loadFactor" I "threshold" 78 70
//!                                     SC_WRITE_METHOD|SC_SERIALIZABLE, two primitive fields,
//!                                     no annotation, no serializable superclass
//!    <loadFactor f32> <threshold i32> the fields (the object is handle 0x7E0001)
//!    77 08 <buckets i32> <size i32>   TC_BLOCKDATA written by HashMap.writeObject
//!    size × (key, value)              each TC_ARRAY of class "[B" (its descriptor the first
//!                                     time, TC_REFERENCE to it after), or TC_NULL
//!    78                               TC_ENDBLOCKDATA
//! ```
//!
//! [`parse`] accepts exactly this shape (what any `ObjectOutputStream` writes for such a map,
//! references to earlier arrays included) and refuses everything else with a typed
//! [`JavaSerialError`] saying what was found where; it never panics and never allocates more
//! than the input holds. [`write`] produces the bytes Kafka Connect itself writes, which Kafka
//! Connect reads back.

use std::fmt;

/// `java.util.HashMap`'s `serialVersionUID`.
const HASHMAP_SUID: i64 = 362_498_820_763_181_265;
/// `byte[]`'s (`[B`) `serialVersionUID`.
const BYTE_ARRAY_SUID: i64 = -5_984_413_125_824_719_648;
/// The first handle a stream assigns (`baseWireHandle`).
const BASE_HANDLE: u32 = 0x7E_0000;

const STREAM_MAGIC: u16 = 0xACED;
const STREAM_VERSION: u16 = 5;
const TC_NULL: u8 = 0x70;
const TC_REFERENCE: u8 = 0x71;
const TC_CLASSDESC: u8 = 0x72;
const TC_OBJECT: u8 = 0x73;
const TC_ENDBLOCKDATA: u8 = 0x78;
const TC_ARRAY: u8 = 0x75;
const TC_BLOCKDATA: u8 = 0x77;
const TC_BLOCKDATALONG: u8 = 0x7A;
const SC_WRITE_METHOD: u8 = 0x01;
const SC_SERIALIZABLE: u8 = 0x02;

/// One entry of a map: key and value bytes, either of them Java `null`.
pub type Entry = (Option<Vec<u8>>, Option<Vec<u8>>);
/// Entries of a map.
pub type Entries = Vec<Entry>;

/// A class descriptor as read: name, `serialVersionUID`, flags, primitive fields (type code,
/// name).
type ClassDesc = (String, i64, u8, Vec<(u8, String)>);

/// Why bytes are not a Kafka Connect offsets file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JavaSerialError {
    /// The file does not start with Java serialization's magic bytes.
    #[error(
        "not a Java serialization stream (it starts with {found}, a Kafka Connect offsets file \
         starts with ac ed 00 05)"
    )]
    NotJavaSerialization {
        /// The first bytes, in hex.
        found: String,
    },
    /// The stream holds an object of another class.
    #[error(
        "the file holds a serialized {class}, not the java.util.HashMap of a Kafka Connect \
         offsets file"
    )]
    NotAHashMap {
        /// The class name found.
        class: String,
    },
    /// The input ends too early.
    #[error("the file ends at byte {at}, in the middle of {what} (truncated?)")]
    Truncated {
        /// Offset of the end.
        at: usize,
        /// What was being read.
        what: &'static str,
    },
    /// Something else than the offsets file's shape.
    #[error("unexpected content at byte {at}: {detail}")]
    Unexpected {
        /// Offset in the file.
        at: usize,
        /// What was expected and found.
        detail: String,
    },
}

/// Reads the entries of a serialized `HashMap<byte[], byte[]>` (a standalone worker's
/// offsets file), in stream order.
///
/// Errors: [`JavaSerialError`] for anything that is not exactly such a map (another class, a
/// truncated or damaged stream, trailing bytes).
pub fn parse(bytes: &[u8]) -> Result<Entries, JavaSerialError> {
    let mut r = Reader {
        bytes,
        at: 0,
        handles: Vec::new(),
    };
    r.header()?;
    r.expect_tag(TC_OBJECT, "the map object (TC_OBJECT)")?;
    r.hashmap_class_desc()?;
    r.handles.push(Handle::Object);
    let load_factor = f32::from_bits(r.u32("the map's loadFactor")?);
    let threshold = r.i32("the map's threshold")?;
    if !(load_factor > 0.0 && load_factor.is_finite()) || threshold < 0 {
        return Err(r.unexpected(format!(
            "a HashMap with loadFactor {load_factor} and threshold {threshold}"
        )));
    }
    let block = r.block_data()?;
    if block.len() != 8 {
        return Err(r.unexpected(format!(
            "HashMap.writeObject's block of 8 bytes (buckets, size), found {} bytes",
            block.len()
        )));
    }
    let size = i32::from_be_bytes([block[4], block[5], block[6], block[7]]);
    if size < 0 {
        return Err(r.unexpected(format!("a HashMap of negative size {size}")));
    }
    // Each entry takes at least two bytes (two TC_NULLs): a size beyond that is a lie.
    let size = size as usize;
    if size > r.remaining() / 2 {
        return Err(r.unexpected(format!(
            "a HashMap of {size} entries in {} remaining bytes",
            r.remaining()
        )));
    }
    let mut entries = Vec::with_capacity(size);
    for _ in 0..size {
        let key = r.byte_array("an entry's key")?;
        let value = r.byte_array("an entry's value")?;
        entries.push((key, value));
    }
    r.expect_tag(TC_ENDBLOCKDATA, "the end of the map (TC_ENDBLOCKDATA)")?;
    if r.remaining() > 0 {
        return Err(r.unexpected(format!(
            "{} bytes after the map (Kafka Connect writes nothing after it)",
            r.remaining()
        )));
    }
    Ok(entries)
}

/// Serializes `entries` as Kafka Connect's `FileOffsetBackingStore` does: a
/// `java.util.HashMap<byte[], byte[]>` with `HashMap`'s default load factor and the table
/// size `HashMap` would have for them.
pub fn write(entries: &[Entry]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&STREAM_MAGIC.to_be_bytes());
    out.extend_from_slice(&STREAM_VERSION.to_be_bytes());
    out.push(TC_OBJECT);
    out.push(TC_CLASSDESC);
    utf(&mut out, "java.util.HashMap");
    out.extend_from_slice(&HASHMAP_SUID.to_be_bytes());
    out.push(SC_WRITE_METHOD | SC_SERIALIZABLE);
    out.extend_from_slice(&2u16.to_be_bytes());
    out.push(b'F');
    utf(&mut out, "loadFactor");
    out.push(b'I');
    utf(&mut out, "threshold");
    out.push(TC_ENDBLOCKDATA);
    out.push(TC_NULL);
    // Handles: 0 the class descriptor, 1 the map; then "[B" and the arrays.
    let mut buckets: u32 = 16;
    while entries.len() as u64 * 4 > u64::from(buckets) * 3 {
        buckets *= 2;
    }
    let threshold = if entries.is_empty() {
        0
    } else {
        buckets / 4 * 3
    };
    out.extend_from_slice(&0.75f32.to_bits().to_be_bytes());
    out.extend_from_slice(&threshold.to_be_bytes());
    out.push(TC_BLOCKDATA);
    out.push(8);
    out.extend_from_slice(&buckets.to_be_bytes());
    out.extend_from_slice(&(entries.len() as u32).to_be_bytes());
    let mut byte_class: Option<u32> = None;
    let mut next_handle = BASE_HANDLE + 2;
    let mut array = |out: &mut Vec<u8>, value: &Option<Vec<u8>>| {
        let Some(bytes) = value else {
            out.push(TC_NULL);
            return;
        };
        out.push(TC_ARRAY);
        match byte_class {
            Some(h) => {
                out.push(TC_REFERENCE);
                out.extend_from_slice(&h.to_be_bytes());
            }
            None => {
                out.push(TC_CLASSDESC);
                utf(out, "[B");
                out.extend_from_slice(&BYTE_ARRAY_SUID.to_be_bytes());
                out.push(SC_SERIALIZABLE);
                out.extend_from_slice(&0u16.to_be_bytes());
                out.push(TC_ENDBLOCKDATA);
                out.push(TC_NULL);
                byte_class = Some(next_handle);
                next_handle += 1;
            }
        }
        next_handle += 1;
        out.extend_from_slice(&(bytes.len() as u32).to_be_bytes());
        out.extend_from_slice(bytes);
    };
    for (k, v) in entries {
        array(&mut out, k);
        array(&mut out, v);
    }
    out.push(TC_ENDBLOCKDATA);
    out
}

/// A modified-UTF-8 string with its 2-byte length (every string here is ASCII).
fn utf(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u16).to_be_bytes());
    out.extend_from_slice(s.as_bytes());
}

/// What a handle of the stream stands for.
#[derive(Debug, Clone)]
enum Handle {
    /// The `[B` class descriptor.
    ByteArrayClass,
    /// Another class descriptor (the map's).
    OtherClass,
    /// The map object.
    Object,
    /// A byte array.
    Array(Vec<u8>),
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
    handles: Vec<Handle>,
}

impl fmt::Debug for Reader<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Reader at {}", self.at)
    }
}

impl Reader<'_> {
    fn remaining(&self) -> usize {
        self.bytes.len() - self.at
    }

    fn unexpected(&self, detail: String) -> JavaSerialError {
        JavaSerialError::Unexpected {
            at: self.at,
            detail,
        }
    }

    fn take(&mut self, n: usize, what: &'static str) -> Result<&[u8], JavaSerialError> {
        if self.remaining() < n {
            return Err(JavaSerialError::Truncated {
                at: self.bytes.len(),
                what,
            });
        }
        let s = &self.bytes[self.at..self.at + n];
        self.at += n;
        Ok(s)
    }

    fn u8(&mut self, what: &'static str) -> Result<u8, JavaSerialError> {
        Ok(self.take(1, what)?[0])
    }

    fn u16(&mut self, what: &'static str) -> Result<u16, JavaSerialError> {
        let b = self.take(2, what)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }

    fn u32(&mut self, what: &'static str) -> Result<u32, JavaSerialError> {
        let b = self.take(4, what)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn i32(&mut self, what: &'static str) -> Result<i32, JavaSerialError> {
        Ok(self.u32(what)? as i32)
    }

    fn i64(&mut self, what: &'static str) -> Result<i64, JavaSerialError> {
        let b = self.take(8, what)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(i64::from_be_bytes(a))
    }

    fn utf(&mut self, what: &'static str) -> Result<String, JavaSerialError> {
        let n = self.u16(what)? as usize;
        let at = self.at;
        let b = self.take(n, what)?;
        String::from_utf8(b.to_vec()).map_err(|_| JavaSerialError::Unexpected {
            at,
            detail: format!("{what} that is not UTF-8"),
        })
    }

    fn expect_tag(&mut self, tag: u8, what: &'static str) -> Result<(), JavaSerialError> {
        let at = self.at;
        let found = self.u8(what)?;
        if found != tag {
            return Err(JavaSerialError::Unexpected {
                at,
                detail: format!("expected {what} (0x{tag:02x}), found 0x{found:02x}"),
            });
        }
        Ok(())
    }

    fn header(&mut self) -> Result<(), JavaSerialError> {
        let head = &self.bytes[..self.bytes.len().min(4)];
        if head.len() < 4
            || u16::from_be_bytes([head[0], head[1]]) != STREAM_MAGIC
            || u16::from_be_bytes([head[2], head[3]]) != STREAM_VERSION
        {
            return Err(JavaSerialError::NotJavaSerialization {
                found: if head.is_empty() {
                    "nothing (the file is empty)".into()
                } else {
                    head.iter()
                        .map(|b| format!("{b:02x}"))
                        .collect::<Vec<_>>()
                        .join(" ")
                },
            });
        }
        self.at = 4;
        Ok(())
    }

    /// A new class descriptor (after its TC_CLASSDESC): name, serialVersionUID, flags,
    /// fields, annotation, superclass. Returns the name; the descriptor gets a handle.
    fn class_desc_body(&mut self, handle: Handle) -> Result<ClassDesc, JavaSerialError> {
        let name = self.utf("a class name")?;
        let suid = self.i64("a serialVersionUID")?;
        self.handles.push(handle);
        let flags = self.u8("class flags")?;
        let count = self.u16("a field count")?;
        let mut fields = Vec::new();
        for _ in 0..count {
            let at = self.at;
            let code = self.u8("a field type")?;
            let field = self.utf("a field name")?;
            if !matches!(code, b'B' | b'C' | b'D' | b'F' | b'I' | b'J' | b'S' | b'Z') {
                return Err(JavaSerialError::Unexpected {
                    at,
                    detail: format!(
                        "field {field:?} of class {name} has type code {:?}, not a primitive",
                        code as char
                    ),
                });
            }
            fields.push((code, field));
        }
        self.expect_tag(TC_ENDBLOCKDATA, "the end of a class annotation")?;
        self.expect_tag(TC_NULL, "no serializable superclass (TC_NULL)")?;
        Ok((name, suid, flags, fields))
    }

    fn hashmap_class_desc(&mut self) -> Result<(), JavaSerialError> {
        let at = self.at;
        let tag = self.u8("the map's class descriptor")?;
        if tag != TC_CLASSDESC {
            return Err(JavaSerialError::Unexpected {
                at,
                detail: format!("expected the map's class descriptor, found tag 0x{tag:02x}"),
            });
        }
        let name_at = self.at;
        let (name, suid, flags, fields) = self.class_desc_body(Handle::OtherClass)?;
        if name != "java.util.HashMap" {
            return Err(JavaSerialError::NotAHashMap { class: name });
        }
        let expected = [(b'F', "loadFactor".to_string()), (b'I', "threshold".into())];
        if suid != HASHMAP_SUID || flags != SC_WRITE_METHOD | SC_SERIALIZABLE || fields != expected
        {
            return Err(JavaSerialError::Unexpected {
                at: name_at,
                detail: format!(
                    "a java.util.HashMap descriptor other than the JDK's (serialVersionUID \
                     {suid}, flags 0x{flags:02x}, {} fields)",
                    fields.len()
                ),
            });
        }
        Ok(())
    }

    /// Block data (one or more TC_BLOCKDATA / TC_BLOCKDATALONG runs, joined).
    fn block_data(&mut self) -> Result<Vec<u8>, JavaSerialError> {
        let mut data = Vec::new();
        loop {
            let at = self.at;
            match self.bytes.get(self.at) {
                Some(&TC_BLOCKDATA) => {
                    self.at += 1;
                    let n = self.u8("a block length")? as usize;
                    data.extend_from_slice(self.take(n, "block data")?);
                }
                Some(&TC_BLOCKDATALONG) => {
                    self.at += 1;
                    let n = self.u32("a block length")? as usize;
                    data.extend_from_slice(self.take(n, "block data")?);
                }
                Some(_) if !data.is_empty() => return Ok(data),
                Some(tag) => {
                    return Err(JavaSerialError::Unexpected {
                        at,
                        detail: format!(
                            "expected HashMap.writeObject's block data, found tag 0x{tag:02x}"
                        ),
                    })
                }
                None => {
                    return Err(JavaSerialError::Truncated {
                        at,
                        what: "the map's block data",
                    })
                }
            }
        }
    }

    /// A `byte[]` (TC_ARRAY of class `[B`, a reference to an earlier one) or `null`.
    fn byte_array(&mut self, what: &'static str) -> Result<Option<Vec<u8>>, JavaSerialError> {
        let at = self.at;
        match self.u8(what)? {
            TC_NULL => Ok(None),
            TC_REFERENCE => match self.reference(what)? {
                Handle::Array(bytes) => Ok(Some(bytes)),
                other => Err(JavaSerialError::Unexpected {
                    at,
                    detail: format!("{what} refers to {other:?}, not a byte array"),
                }),
            },
            TC_ARRAY => {
                let class_at = self.at;
                match self.u8("an array's class")? {
                    TC_CLASSDESC => {
                        let (name, suid, flags, fields) =
                            self.class_desc_body(Handle::ByteArrayClass)?;
                        if name != "[B" {
                            return Err(JavaSerialError::Unexpected {
                                at: class_at,
                                detail: format!(
                                    "{what} is an array of class {name}, not byte[] ([B)"
                                ),
                            });
                        }
                        if suid != BYTE_ARRAY_SUID || flags != SC_SERIALIZABLE || !fields.is_empty()
                        {
                            return Err(JavaSerialError::Unexpected {
                                at: class_at,
                                detail: "a [B descriptor other than the JDK's".into(),
                            });
                        }
                    }
                    TC_REFERENCE => {
                        if !matches!(self.reference(what)?, Handle::ByteArrayClass) {
                            return Err(JavaSerialError::Unexpected {
                                at: class_at,
                                detail: format!("{what}'s class is not byte[] ([B)"),
                            });
                        }
                    }
                    tag => {
                        return Err(JavaSerialError::Unexpected {
                            at: class_at,
                            detail: format!("{what}'s class descriptor has tag 0x{tag:02x}"),
                        })
                    }
                }
                let len_at = self.at;
                let len = self.i32("an array length")?;
                if len < 0 {
                    return Err(JavaSerialError::Unexpected {
                        at: len_at,
                        detail: format!("{what} has negative length {len}"),
                    });
                }
                let bytes = self.take(len as usize, what)?.to_vec();
                self.handles.push(Handle::Array(bytes.clone()));
                Ok(Some(bytes))
            }
            tag => Err(JavaSerialError::Unexpected {
                at,
                detail: format!("{what} has tag 0x{tag:02x}, not a byte array or null"),
            }),
        }
    }

    /// The handle a TC_REFERENCE (already read) names.
    fn reference(&mut self, what: &'static str) -> Result<Handle, JavaSerialError> {
        let at = self.at;
        let h = self.u32("a reference")?;
        h.checked_sub(BASE_HANDLE)
            .and_then(|i| self.handles.get(i as usize))
            .cloned()
            .ok_or_else(|| JavaSerialError::Unexpected {
                at,
                detail: format!("{what} refers to handle 0x{h:x}, which the stream never assigned"),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bytes Kafka Connect 4.1.1 wrote for one Debezium MariaDB connector, as seen on
    /// this project's machine (`xxd connect.offsets`).
    fn connect_written() -> Vec<u8> {
        let key = br#"["cutexp",{"server":"cutexp"}]"#;
        let value = br#"{"ts_sec":1796237002,"file":"mariadb-bin.000006","pos":351704341,"gtids":"0-1-12622","row":1,"server_id":1,"event":40004}"#;
        let mut b = hex(
            "aced0005737200116a6176612e7574696c2e486173684d61700507dac1c31660d10300024600\
             0a6c6f6164466163746f724900097468726573686f6c6478703f4000000000000c770800000010\
             00000001757200025b42acf317f8060854e0020000787000",
        );
        b.extend_from_slice(&[0, 0, key.len() as u8]);
        b.extend_from_slice(key);
        b.extend_from_slice(&hex("7571007e000200"));
        b.extend_from_slice(&[0, 0, value.len() as u8]);
        b.extend_from_slice(value);
        b.push(0x78);
        b
    }

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn reads_what_kafka_connect_wrote_and_writes_the_same_bytes() {
        let bytes = connect_written();
        let entries = parse(&bytes).unwrap();
        assert_eq!(entries.len(), 1);
        assert_eq!(
            entries[0].0.as_deref(),
            Some(&br#"["cutexp",{"server":"cutexp"}]"#[..])
        );
        assert!(std::str::from_utf8(entries[0].1.as_deref().unwrap())
            .unwrap()
            .contains("\"event\":40004"));
        assert_eq!(write(&entries), bytes, "byte for byte what Connect writes");
    }

    #[test]
    fn round_trips_many_entries_nulls_and_empty() {
        let mut entries: Entries = (0..40)
            .map(|i| {
                (
                    Some(format!("[\"c{i}\",{{\"server\":\"s\"}}]").into_bytes()),
                    Some(vec![b'x'; i * 7]),
                )
            })
            .collect();
        entries.push((Some(b"k".to_vec()), None));
        entries.push((None, Some(b"v".to_vec())));
        assert_eq!(parse(&write(&entries)).unwrap(), entries);
        assert_eq!(parse(&write(&[])).unwrap(), Vec::new());
    }

    #[test]
    fn a_reference_to_an_earlier_array_is_that_array() {
        // key and value the same byte[] instance: the value is a TC_REFERENCE to the key.
        let mut b = write(&[(Some(b"ab".to_vec()), Some(b"ab".to_vec()))]);
        let end = b.len() - 1;
        // Replace the second array (75 71 007e0002 00000002 6162) by 71 007e0003.
        let second = end - (1 + 5 + 4 + 2);
        b.truncate(second);
        b.extend_from_slice(&hex("71007e0003"));
        b.push(TC_ENDBLOCKDATA);
        let e = parse(&b).unwrap();
        assert_eq!(e, vec![(Some(b"ab".to_vec()), Some(b"ab".to_vec()))]);
    }

    #[test]
    fn refuses_other_formats_with_what_it_found() {
        let e = parse(b"{\"not\":\"java\"}").unwrap_err();
        assert!(
            matches!(e, JavaSerialError::NotJavaSerialization { .. }),
            "{e}"
        );
        assert!(e.to_string().contains("7b 22 6e 6f"), "{e}");
        assert!(parse(b"").unwrap_err().to_string().contains("empty"));
        // A serialized java.util.ArrayList.
        let mut b = hex("aced00057372");
        utf(&mut b, "java.util.ArrayList");
        b.extend_from_slice(&hex("7881d21d99c7619d03000149000473697a65787000"));
        let e = parse(&b).unwrap_err();
        assert_eq!(
            e,
            JavaSerialError::NotAHashMap {
                class: "java.util.ArrayList".into()
            }
        );
        // Trailing bytes.
        let mut b = connect_written();
        b.push(0);
        assert!(parse(&b).unwrap_err().to_string().contains("after the map"));
    }

    #[test]
    fn never_panics_on_truncation_or_bit_flips() {
        let good = write(&[
            (
                Some(b"[\"a\",{\"server\":\"b\"}]".to_vec()),
                Some(b"{}".to_vec()),
            ),
            (Some(b"[\"c\",{\"server\":\"d\"}]".to_vec()), None),
        ]);
        for n in 0..good.len() {
            assert!(parse(&good[..n]).is_err(), "truncated at {n}");
        }
        for i in 0..good.len() {
            for bit in 0..8 {
                let mut b = good.clone();
                b[i] ^= 1 << bit;
                let _ = parse(&b);
            }
        }
        // A size far beyond the bytes present is refused before allocating.
        let mut b = good.clone();
        let size_at = b.iter().position(|&x| x == TC_BLOCKDATA).unwrap() + 6;
        b[size_at..size_at + 4].copy_from_slice(&i32::MAX.to_be_bytes());
        assert!(parse(&b).is_err());
    }
}
