//! Entry points for the fuzz targets in `fuzz/` (ARCHITECTURE.md, invariant 7): the value
//! decoders they exercise are crate-private, and this module is the one door to them. Not an
//! API: hidden from the docs, and nothing else should call it.
//!
//! The binlog and pgoutput targets need nothing from here: they use the public decoders
//! (`source::mysql::BinlogFileReader` + `BinlogDecoder`, `source::postgres::pgoutput::decode`).

use mysql_common::binlog::value::BinlogValue;
use mysql_common::constants::ColumnType;
use mysql_common::io::ParseBuf;

use crate::position::BinlogFilePosition;
use crate::source::mysql::{decode::guarded, table, values};
use crate::value::ColumnValue;

/// PostgreSQL: one column value in text output format, as the adapter decodes it for a column
/// of type `type_oid` (`source::postgres::values::decode_text`).
pub fn pg_value(type_oid: u32, raw: &[u8]) -> Result<ColumnValue, String> {
    crate::source::postgres::values::decode_text(type_oid, raw).map_err(|e| e.to_string())
}

/// PostgreSQL: the content of a logical decoding message as the adapter turns it into an
/// outbox row (`source::postgres::adapter::message_row`); the number of fields.
pub fn pg_message_row(content: &[u8]) -> Result<usize, String> {
    crate::source::postgres::adapter::message_row(content)
        .map(|row| row.iter().count())
        .map_err(|e| e.to_string())
}

/// MySQL / MariaDB: one cell of a row image, decoded the way a rows event's cells are
/// (`table::read_image`): the column's TABLE_MAP type byte `wire_type` and its type metadata
/// `meta` (as many bytes as the type has; fewer is an error, as in a TABLE_MAP), signedness,
/// charset (collation id) and ENUM/SET labels from the optional metadata, then `data`, the
/// image bytes from the cell on. Returns the value and the bytes it took.
///
/// As in the decoder, `mysql_common`'s parse of the cell runs under the panic guard; the
/// checks before it and the conversion after it are outboxd's own code and run unguarded, so
/// that a panic there is a crash the fuzzer reports.
pub fn mysql_cell(
    wire_type: u8,
    meta: &[u8],
    unsigned: bool,
    collation: Option<u16>,
    labels: Option<Vec<String>>,
    partial_json: bool,
    data: &[u8],
) -> Result<(ColumnValue, usize), String> {
    let ty = ColumnType::try_from(wire_type).map_err(|_| "unknown column type".to_owned())?;
    let meta = meta
        .get(..table::metadata_len(ty))
        .ok_or_else(|| "type metadata too short".to_owned())?;
    let spec = values::ColumnSpec {
        ty: table::real_type(ty, meta)?,
        unsigned,
        collation,
        labels,
    };
    table::check_meta(spec.ty, meta)?;
    let at = BinlogFilePosition::new("fuzz", 4);
    let (cell, consumed) = guarded("cell", &at, || {
        let mut buf = ParseBuf(data);
        let cell: BinlogValue<'_> = buf.parse((spec.ty, meta, spec.unsigned, partial_json))?;
        Ok::<_, std::io::Error>((cell, data.len() - buf.0.len()))
    })
    .map_err(|e| e.to_string())?;
    let value = values::convert(&spec, cell, consumed)?;
    Ok((value, consumed))
}
