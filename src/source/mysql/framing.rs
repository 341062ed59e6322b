//! Framing of binlog files: magic, event headers, sizes; expansion of compressed transactions.
//!
//! `mysql_common`'s own file reader panics on a truncated event, so files are framed here: the
//! 4-byte magic is checked, each 19-byte header is read and its `event_size` validated (at
//! least a header plus checksum, at most [`MAX_EVENT_SIZE`], and that many bytes really
//! present) before the complete event is handed to `mysql_common`'s `EventStreamReader`, which
//! tracks the FORMAT_DESCRIPTION_EVENT needed to parse the rest.
//!
//! A MySQL 8 TRANSACTION_PAYLOAD_EVENT (binlog_transaction_compression=ON) is returned itself,
//! then the events of its decompressed payload, each flagged [`FramedEvent::in_payload`] — the
//! same order `mysql_async`'s binlog stream uses, so the decoder handles both alike.

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::Path;

use mysql_common::binlog::consts::{
    BinlogChecksumAlg, BinlogVersion, EventType, TransactionPayloadCompressionType,
};
use mysql_common::binlog::events::{BinlogEventHeader, Event, TransactionPayloadEvent};
use mysql_common::binlog::EventStreamReader;

use super::decode::{guarded, DecodeError};
use crate::position::BinlogFilePosition;

/// Largest event accepted (MySQL's `max_allowed_packet` ceiling is 1 GiB).
pub const MAX_EVENT_SIZE: u64 = 1 << 30;

/// Largest decompressed transaction payload accepted.
pub const MAX_PAYLOAD_SIZE: u64 = 1 << 30;

/// The binlog file magic, `\xfe b i n`.
pub const BINLOG_MAGIC: [u8; 4] = [0xfe, b'b', b'i', b'n'];

const HEADER_LEN: usize = BinlogEventHeader::LEN;
const CHECKSUM_LEN: u64 = 4;

/// One event read from a file.
#[derive(Debug)]
pub struct FramedEvent {
    /// The event.
    pub event: Event,
    /// Byte offset where it starts in the file; for events inside a compressed transaction, the
    /// offset of the TRANSACTION_PAYLOAD_EVENT.
    pub offset: u64,
    /// Size in bytes (header, body, checksum).
    pub size: u64,
    /// True for an event from inside a TRANSACTION_PAYLOAD_EVENT.
    pub in_payload: bool,
}

/// The decompressed events of a TRANSACTION_PAYLOAD_EVENT still to be returned.
struct Payload {
    data: Vec<u8>,
    pos: usize,
    outer_offset: u64,
}

/// Reads the events of one binlog (or relay log) file, validating the framing.
pub struct BinlogFileReader<R> {
    input: R,
    name: String,
    offset: u64,
    reader: EventStreamReader,
    payload: Option<Payload>,
    /// Set after an error: the framing can no longer be trusted, so reading stops.
    failed: bool,
}

impl BinlogFileReader<BufReader<File>> {
    /// Opens a binlog file and checks its magic. The file name (without directory) is used in
    /// positions.
    pub fn open(path: &Path) -> Result<Self, DecodeError> {
        let shown = path.display().to_string();
        let file = File::open(path).map_err(|source| DecodeError::Io {
            file: shown.clone(),
            source,
        })?;
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or(shown);
        Self::new(BufReader::new(file), name)
    }
}

impl<R: Read> BinlogFileReader<R> {
    /// Wraps a reader positioned at the start of a binlog file; reads and checks the magic.
    pub fn new(mut input: R, name: impl Into<String>) -> Result<Self, DecodeError> {
        let name = name.into();
        let mut magic = [0u8; 4];
        let n = read_full(&mut input, &mut magic).map_err(|source| DecodeError::Io {
            file: name.clone(),
            source,
        })?;
        if n < magic.len() || magic != BINLOG_MAGIC {
            return Err(DecodeError::NotABinlog { file: name });
        }
        Ok(Self {
            input,
            name,
            offset: BINLOG_MAGIC.len() as u64,
            reader: EventStreamReader::new(BinlogVersion::Version4),
            payload: None,
            failed: false,
        })
    }

    /// The file name used in positions.
    pub fn file_name(&self) -> &str {
        &self.name
    }

    /// Offset of the next event in the file.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    fn at(&self, offset: u64) -> BinlogFilePosition {
        BinlogFilePosition::new(self.name.clone(), offset)
    }

    /// The next event, `None` at a clean end of file. After an error it returns `None`.
    pub fn next_event(&mut self) -> Result<Option<FramedEvent>, DecodeError> {
        if self.failed {
            return Ok(None);
        }
        let result = self.read_event();
        if result.is_err() {
            self.failed = true;
            self.payload = None;
        }
        result
    }

    fn read_event(&mut self) -> Result<Option<FramedEvent>, DecodeError> {
        if let Some(ev) = self.next_payload_event()? {
            return Ok(Some(ev));
        }

        let offset = self.offset;
        let mut header = [0u8; HEADER_LEN];
        let got = read_full(&mut self.input, &mut header).map_err(|source| DecodeError::Io {
            file: self.name.clone(),
            source,
        })?;
        if got == 0 {
            return Ok(None);
        }
        if got < HEADER_LEN {
            return Err(DecodeError::Truncated {
                at: self.at(offset),
                detail: format!(
                    "the file ends inside an event header ({got} of {HEADER_LEN} bytes)"
                ),
            });
        }
        let event_type = header[4];
        let size = u64::from(u32::from_le_bytes([
            header[9], header[10], header[11], header[12],
        ]));
        let min = self.min_event_size(event_type);
        if size < min || size > MAX_EVENT_SIZE {
            return Err(DecodeError::Truncated {
                at: self.at(offset),
                detail: format!(
                    "event of type {event_type} declares an impossible size of {size} bytes"
                ),
            });
        }

        let body_len = size - HEADER_LEN as u64;
        // Grows with the data actually present, so a corrupt size cannot allocate 1 GiB up front.
        let mut bytes = Vec::with_capacity(HEADER_LEN + body_len.min(1 << 20) as usize);
        bytes.extend_from_slice(&header);
        let read = (&mut self.input)
            .take(body_len)
            .read_to_end(&mut bytes)
            .map_err(|source| DecodeError::Io {
                file: self.name.clone(),
                source,
            })?;
        if (read as u64) < body_len {
            return Err(DecodeError::Truncated {
                at: self.at(offset),
                detail: format!(
                    "event of type {event_type} declares {size} bytes but the file ends after {}",
                    HEADER_LEN + read
                ),
            });
        }
        self.offset += size;

        let at = self.at(offset);
        let event =
            guarded("binlog event", &at, || self.reader.read(&bytes[..]))?.ok_or_else(|| {
                DecodeError::Truncated {
                    at: at.clone(),
                    detail: "empty event".to_owned(),
                }
            })?;

        if event_type == EventType::TRANSACTION_PAYLOAD_EVENT as u8 {
            let data = guarded("TRANSACTION_PAYLOAD_EVENT", &at, || {
                decompress_payload(&event)
            })?;
            self.payload = Some(Payload {
                data,
                pos: 0,
                outer_offset: offset,
            });
        }

        Ok(Some(FramedEvent {
            event,
            offset,
            size,
            in_payload: false,
        }))
    }

    /// Smallest valid size of an event of this type given the current checksum setting:
    /// `mysql_common` slices the checksum off the end without checking the length.
    fn min_event_size(&self, event_type: u8) -> u64 {
        let base = HEADER_LEN as u64;
        if event_type == EventType::FORMAT_DESCRIPTION_EVENT as u8 {
            return base;
        }
        match self.reader.get_fde().footer().get_checksum_alg() {
            Ok(None) | Ok(Some(BinlogChecksumAlg::BINLOG_CHECKSUM_ALG_OFF)) => base,
            _ => base + CHECKSUM_LEN,
        }
    }

    /// The next event of a pending decompressed payload, if any.
    fn next_payload_event(&mut self) -> Result<Option<FramedEvent>, DecodeError> {
        let Some(p) = self.payload.as_mut() else {
            return Ok(None);
        };
        if p.pos >= p.data.len() {
            self.payload = None;
            return Ok(None);
        }
        let outer = p.outer_offset;
        let at = BinlogFilePosition::new(self.name.clone(), outer);
        let rest = &p.data[p.pos..];
        if rest.len() < HEADER_LEN {
            return Err(DecodeError::Malformed {
                what: "TRANSACTION_PAYLOAD_EVENT".to_owned(),
                at,
                detail: format!("payload ends inside an event header ({} bytes)", rest.len()),
            });
        }
        let size = u32::from_le_bytes([rest[9], rest[10], rest[11], rest[12]]) as usize;
        if size < HEADER_LEN || size > rest.len() {
            return Err(DecodeError::Malformed {
                what: "TRANSACTION_PAYLOAD_EVENT".to_owned(),
                at,
                detail: format!(
                    "inner event declares {size} bytes, {} remain in the payload",
                    rest.len()
                ),
            });
        }
        let bytes = &rest[..size];
        let reader = &mut self.reader;
        let result = guarded("TRANSACTION_PAYLOAD_EVENT", &at, || {
            reader.read_decompressed(bytes)
        });
        let event = match result {
            Ok(Some(ev)) => ev,
            Ok(None) => {
                self.payload = None;
                return Ok(None);
            }
            Err(e) => return Err(e),
        };
        p.pos += size;
        Ok(Some(FramedEvent {
            event,
            offset: outer,
            size: size as u64,
            in_payload: true,
        }))
    }
}

impl<R: Read> Iterator for BinlogFileReader<R> {
    type Item = Result<FramedEvent, DecodeError>;

    /// Iterates until the end of the file or the first error.
    fn next(&mut self) -> Option<Self::Item> {
        self.next_event().transpose()
    }
}

/// Decompresses a TRANSACTION_PAYLOAD_EVENT's payload (bounded by [`MAX_PAYLOAD_SIZE`]).
fn decompress_payload(event: &Event) -> std::io::Result<Vec<u8>> {
    let tpe: TransactionPayloadEvent<'_> = event.read_event()?;
    if tpe.algorithm() == TransactionPayloadCompressionType::NONE {
        // Uncompressed payloads carry no uncompressed size.
        return Ok(tpe.payload_raw().to_vec());
    }
    let declared = tpe.uncompressed_size();
    if declared > MAX_PAYLOAD_SIZE {
        return Err(std::io::Error::other(format!(
            "declares {declared} uncompressed bytes, more than the {MAX_PAYLOAD_SIZE} accepted"
        )));
    }
    let mut data = Vec::with_capacity(declared.min(1 << 20) as usize);
    tpe.decompressed()?
        .take(declared + 1)
        .read_to_end(&mut data)?;
    if data.len() as u64 != declared {
        return Err(std::io::Error::other(format!(
            "decompresses to {}{} bytes but declares {declared}",
            if data.len() as u64 > declared {
                "more than "
            } else {
                ""
            },
            data.len().min(declared as usize)
        )));
    }
    Ok(data)
}

/// Reads until `buf` is full or the input ends; returns the number of bytes read.
fn read_full(input: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match input.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}
