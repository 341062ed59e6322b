//! TABLE_MAP information and row images.
//!
//! A TABLE_MAP_EVENT is parsed once into a [`TableInfo`] (column types, type metadata, optional
//! metadata: names, signedness, charsets, ENUM/SET labels); rows events are then decoded against
//! it without re-reading the optional metadata for every row.
//!
//! The TABLE_MAP body is parsed here, with every count checked against the bytes present
//! (`mysql_common` reserves vectors from such counts before checking them, and recomputes
//! metadata offsets from the first column for every column). The row image loop is ours too
//! (allocations stay per value, not per column header); each cell is decoded by
//! `mysql_common`'s `BinlogValue` once the column's metadata has been checked, so malformed
//! input errors instead of indexing out of bounds.

use std::sync::Arc;

use mysql_common::binlog::value::BinlogValue;
use mysql_common::constants::ColumnType;
use mysql_common::io::ParseBuf;

use super::values::{self, ColumnSpec, TextEncoding};
use crate::event::TableName;
use crate::typemap::ColumnType as ColumnTypeInfo;
use crate::value::ColumnValue;

/// One column of a TABLE_MAP.
#[derive(Debug, Clone)]
pub(crate) struct ColumnInfo {
    /// Type and conversion data; `None` when the type byte is unknown or inconsistent.
    pub spec: Option<ColumnSpec>,
    /// Type metadata bytes (length depends on the type); `None` when not computable.
    pub meta: Option<Vec<u8>>,
    /// The TABLE_MAP's NULL bitmap: the column accepts NULL.
    pub nullable: bool,
}

/// Everything needed to decode rows of one table id.
#[derive(Debug)]
pub(crate) struct TableInfo {
    /// `database.table`.
    pub table: TableName,
    /// Columns in table order.
    pub columns: Vec<ColumnInfo>,
    /// Column names from COLUMN_NAME optional metadata (`binlog_row_metadata=FULL`).
    pub binlog_names: Option<Vec<String>>,
    /// Names resolved for output (binlog, config or positional), cached.
    pub resolved_names: Option<Arc<[Arc<str>]>>,
    /// Column types for the type mapping (`super::types`), cached.
    pub resolved_types: Option<Arc<[ColumnTypeInfo]>>,
    /// Number of JSON columns (for partial JSON updates).
    pub json_columns: usize,
    /// Why the optional metadata could not be read, if it could not.
    pub metadata_error: Option<String>,
    /// The TABLE_MAP body this was built from (an identical TABLE_MAP reuses this info).
    pub raw: Vec<u8>,
}

/// Checked little-endian reads over a slice.
struct Cursor<'a> {
    data: &'a [u8],
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], String> {
        if self.data.len() < n {
            return Err(format!("{what}: needs {n} bytes, {} left", self.data.len()));
        }
        let (head, tail) = self.data.split_at(n);
        self.data = tail;
        Ok(head)
    }

    fn u8(&mut self, what: &str) -> Result<u8, String> {
        Ok(self.take(1, what)?[0])
    }

    fn lenenc(&mut self, what: &str) -> Result<u64, String> {
        let (v, rest) = read_lenenc(self.data).ok_or_else(|| format!("{what}: bad length"))?;
        self.data = rest;
        Ok(v)
    }

    /// A length-encoded count of items that each take at least one byte: bounded by the bytes
    /// left, so a corrupt count cannot make anyone allocate for it.
    fn count(&mut self, what: &str) -> Result<usize, String> {
        let n = self.lenenc(what)?;
        if n > self.data.len() as u64 {
            return Err(format!(
                "{what}: count {n} exceeds the {} bytes left",
                self.data.len()
            ));
        }
        Ok(n as usize)
    }

    fn lenenc_bytes(&mut self, what: &str) -> Result<&'a [u8], String> {
        let n = self.lenenc(what)?;
        let n = usize::try_from(n).map_err(|_| format!("{what}: length too large"))?;
        self.take(n, what)
    }
}

/// Bytes of type metadata a column type has in TABLE_MAP_EVENT (MySQL's
/// `Table_map_log_event` layout).
pub(crate) fn metadata_len(ty: ColumnType) -> usize {
    use ColumnType::*;
    match ty {
        MYSQL_TYPE_FLOAT
        | MYSQL_TYPE_DOUBLE
        | MYSQL_TYPE_BLOB
        | MYSQL_TYPE_TINY_BLOB
        | MYSQL_TYPE_MEDIUM_BLOB
        | MYSQL_TYPE_LONG_BLOB
        | MYSQL_TYPE_GEOMETRY
        | MYSQL_TYPE_JSON
        | MYSQL_TYPE_TIME2
        | MYSQL_TYPE_DATETIME2
        | MYSQL_TYPE_TIMESTAMP2
        | MYSQL_TYPE_VECTOR => 1,
        MYSQL_TYPE_VARCHAR
        | MYSQL_TYPE_BIT
        | MYSQL_TYPE_NEWDECIMAL
        | MYSQL_TYPE_SET
        | MYSQL_TYPE_ENUM
        | MYSQL_TYPE_STRING => 2,
        _ => 0,
    }
}

/// The type a cell is decoded as: STRING columns carry ENUM/SET in their metadata, DATE is
/// stored as NEWDATE.
pub(crate) fn real_type(ty: ColumnType, meta: &[u8]) -> Result<ColumnType, String> {
    match ty {
        ColumnType::MYSQL_TYPE_DATE => Ok(ColumnType::MYSQL_TYPE_NEWDATE),
        ColumnType::MYSQL_TYPE_STRING => {
            let byte0 = meta.first().copied().unwrap_or(0);
            if byte0 == 0 {
                return Ok(ty);
            }
            match byte0 | 0x30 {
                247 => Ok(ColumnType::MYSQL_TYPE_ENUM),
                248 => Ok(ColumnType::MYSQL_TYPE_SET),
                254 => Ok(ColumnType::MYSQL_TYPE_STRING),
                x => Err(format!("STRING column with real type {x}")),
            }
        }
        other => Ok(other),
    }
}

/// Optional metadata field types (MySQL `Table_map_log_event::Optional_metadata_field_type`).
mod opt {
    pub const SIGNEDNESS: u8 = 1;
    pub const DEFAULT_CHARSET: u8 = 2;
    pub const COLUMN_CHARSET: u8 = 3;
    pub const COLUMN_NAME: u8 = 4;
    pub const SET_STR_VALUE: u8 = 5;
    pub const ENUM_STR_VALUE: u8 = 6;
    pub const ENUM_AND_SET_DEFAULT_CHARSET: u8 = 10;
    pub const ENUM_AND_SET_COLUMN_CHARSET: u8 = 11;
}

impl TableInfo {
    /// Parses a TABLE_MAP_EVENT body (checksum removed). `table_id_len` is 6, or 4 for servers
    /// whose FORMAT_DESCRIPTION_EVENT gives TABLE_MAP a 6-byte post-header.
    ///
    /// The body is read here rather than through `mysql_common` so that every count is checked
    /// against the bytes present before anything is allocated for it.
    pub fn parse(data: &[u8], table_id_len: usize) -> Result<(u64, TableInfo), String> {
        let mut c = Cursor { data };
        let id_bytes = c.take(table_id_len, "table id")?;
        let table_id = id_bytes
            .iter()
            .rev()
            .fold(0u64, |acc, b| (acc << 8) | u64::from(*b));
        c.take(2, "flags")?;
        let db_len = usize::from(c.u8("database name")?);
        let db = c.take(db_len, "database name")?;
        c.take(1, "database name terminator")?;
        let tbl_len = usize::from(c.u8("table name")?);
        let tbl = c.take(tbl_len, "table name")?;
        c.take(1, "table name terminator")?;
        let count = c.count("column count")?;
        let types = c.take(count, "column types")?;
        let meta_block = c.lenenc_bytes("column metadata")?;
        let null_bits = c.take(count.div_ceil(8), "NULL bitmap")?;
        let optional = c.data;

        let table = TableName::new(
            String::from_utf8_lossy(db).into_owned(),
            String::from_utf8_lossy(tbl).into_owned(),
        );

        let mut columns = Vec::with_capacity(count);
        let mut raw_types = Vec::with_capacity(count);
        let mut meta_cursor = Cursor { data: meta_block };
        let mut json_columns = 0;
        let mut layout_ok = true;
        for (i, raw) in types.iter().enumerate() {
            let raw_ty = ColumnType::try_from(*raw).ok();
            raw_types.push(raw_ty);
            if raw_ty == Some(ColumnType::MYSQL_TYPE_JSON) {
                json_columns += 1;
            }
            // After an unknown type the metadata offsets of later columns are unknown too.
            let (spec, meta) = match raw_ty {
                Some(ty) if layout_ok => {
                    let meta = meta_cursor
                        .take(metadata_len(ty), "column metadata")
                        .map_err(|e| format!("column {}: {e}", i + 1))?
                        .to_vec();
                    let spec = real_type(ty, &meta).ok().map(|ty| ColumnSpec {
                        ty,
                        unsigned: false,
                        collation: None,
                        labels: None,
                    });
                    (spec, Some(meta))
                }
                _ => {
                    layout_ok = false;
                    (None, None)
                }
            };
            let nullable = null_bits
                .get(i / 8)
                .is_some_and(|b| b & (1 << (i % 8)) != 0);
            columns.push(ColumnInfo {
                spec,
                meta,
                nullable,
            });
        }

        let mut info = TableInfo {
            table,
            columns,
            binlog_names: None,
            resolved_names: None,
            resolved_types: None,
            json_columns,
            metadata_error: None,
            raw: data.to_vec(),
        };
        if let Err(e) = info.apply_optional_metadata(optional, &raw_types) {
            info.metadata_error = Some(format!("optional metadata: {e}"));
        }
        Ok((table_id, info))
    }

    /// Reads SIGNEDNESS, charsets, COLUMN_NAME and ENUM/SET labels from the optional metadata
    /// (`binlog_row_metadata`); unknown field types are skipped.
    fn apply_optional_metadata(
        &mut self,
        optional: &[u8],
        raw_types: &[Option<ColumnType>],
    ) -> Result<(), String> {
        let n = self.columns.len();
        let real = |i: usize| self.columns[i].spec.as_ref().map(|s| s.ty);
        let numeric: Vec<usize> = (0..n)
            .filter(|i| raw_types[*i].is_some_and(|t| t.is_numeric_type()))
            .collect();
        let character: Vec<usize> = (0..n)
            .filter(|i| real(*i).is_some_and(|t| t.is_character_type()))
            .collect();
        let enum_set: Vec<usize> = (0..n)
            .filter(|i| real(*i).is_some_and(|t| t.is_enum_or_set_type()))
            .collect();
        let of_type =
            |ty: ColumnType| -> Vec<usize> { (0..n).filter(|i| real(*i) == Some(ty)).collect() };
        let enums = of_type(ColumnType::MYSQL_TYPE_ENUM);
        let sets = of_type(ColumnType::MYSQL_TYPE_SET);

        let mut enum_set_charsets: Option<Vec<u16>> = None;
        let mut enum_labels: Option<Vec<Vec<Vec<u8>>>> = None;
        let mut set_labels: Option<Vec<Vec<Vec<u8>>>> = None;

        let mut c = Cursor { data: optional };
        while !c.data.is_empty() {
            let field_type = c.u8("field type")?;
            let value = c.lenenc_bytes("field")?;
            let mut v = Cursor { data: value };
            match field_type {
                opt::SIGNEDNESS => {
                    for (k, col) in numeric.iter().enumerate() {
                        let byte = value.get(k / 8).copied().unwrap_or(0);
                        let unsigned = byte & (0x80 >> (k % 8)) != 0;
                        if let Some(spec) = self.columns[*col].spec.as_mut() {
                            spec.unsigned = unsigned;
                        }
                    }
                }
                opt::DEFAULT_CHARSET | opt::COLUMN_CHARSET => {
                    let charsets =
                        read_charsets(&mut v, field_type == opt::DEFAULT_CHARSET, character.len())?;
                    for (col, cs) in character.iter().zip(charsets) {
                        if let Some(spec) = self.columns[*col].spec.as_mut() {
                            spec.collation = Some(cs);
                        }
                    }
                }
                opt::ENUM_AND_SET_DEFAULT_CHARSET | opt::ENUM_AND_SET_COLUMN_CHARSET => {
                    enum_set_charsets = Some(read_charsets(
                        &mut v,
                        field_type == opt::ENUM_AND_SET_DEFAULT_CHARSET,
                        enum_set.len(),
                    )?);
                }
                opt::COLUMN_NAME => {
                    let mut names = Vec::with_capacity(n);
                    while !v.data.is_empty() {
                        let name = v.lenenc_bytes("column name")?;
                        names.push(String::from_utf8_lossy(name).into_owned());
                    }
                    if names.len() != n {
                        return Err(format!(
                            "COLUMN_NAME lists {} names for {n} columns",
                            names.len()
                        ));
                    }
                    self.binlog_names = Some(names);
                }
                opt::SET_STR_VALUE | opt::ENUM_STR_VALUE => {
                    let mut all = Vec::new();
                    while !v.data.is_empty() {
                        let count = v.count("labels")?;
                        let mut labels = Vec::with_capacity(count);
                        for _ in 0..count {
                            labels.push(v.lenenc_bytes("label")?.to_vec());
                        }
                        all.push(labels);
                    }
                    if field_type == opt::SET_STR_VALUE {
                        set_labels = Some(all);
                    } else {
                        enum_labels = Some(all);
                    }
                }
                // GEOMETRY_TYPE, primary keys, COLUMN_VISIBILITY, VECTOR_DIMENSIONALITY and
                // fields of newer servers carry nothing we need.
                _ => {}
            }
        }

        let label_encoding = |col: usize| -> TextEncoding {
            let idx = enum_set.iter().position(|c| *c == col);
            values::encoding_of(
                idx.and_then(|i| enum_set_charsets.as_ref().and_then(|v| v.get(i).copied())),
            )
        };
        for (cols, labels) in [(&enums, enum_labels), (&sets, set_labels)] {
            let Some(labels) = labels else { continue };
            for (col, col_labels) in cols.iter().zip(labels) {
                let enc = label_encoding(*col);
                let texts = col_labels
                    .into_iter()
                    .map(|b| match values::text_value(b, enc) {
                        ColumnValue::Text(s) => s,
                        ColumnValue::Bytes(b) => String::from_utf8_lossy(&b).into_owned(),
                        _ => String::new(),
                    })
                    .collect();
                if let Some(spec) = self.columns[*col].spec.as_mut() {
                    spec.labels = Some(texts);
                }
            }
        }
        Ok(())
    }

    /// `@1`, `@2`, … (1-based, as `mysqlbinlog` prints them).
    pub fn positional_names(&self) -> Vec<String> {
        (1..=self.columns.len()).map(|i| format!("@{i}")).collect()
    }
}

/// Reads DEFAULT_CHARSET (a default plus `(index, collation)` exceptions) or COLUMN_CHARSET (one
/// collation per column) for `count` columns.
fn read_charsets(v: &mut Cursor<'_>, with_default: bool, count: usize) -> Result<Vec<u16>, String> {
    let collation = |x: u64| u16::try_from(x).map_err(|_| format!("collation id {x} out of range"));
    if with_default {
        let default = collation(v.lenenc("default collation")?)?;
        let mut all = vec![default; count];
        while !v.data.is_empty() {
            let index = v.lenenc("column index")?;
            let cs = collation(v.lenenc("collation")?)?;
            if let Some(slot) = usize::try_from(index).ok().and_then(|i| all.get_mut(i)) {
                *slot = cs;
            }
        }
        Ok(all)
    } else {
        let mut all = Vec::with_capacity(count);
        while !v.data.is_empty() {
            all.push(collation(v.lenenc("collation")?)?);
        }
        Ok(all)
    }
}

/// Reads one row image from `data`, returning the values (only when `keep`) and the rest.
///
/// `present` says which columns are in the image; `partial_json` is true for the after image of
/// a PARTIAL_UPDATE_ROWS_EVENT, which starts with the shared "value options".
pub(crate) fn read_image<'a>(
    table: &TableInfo,
    data: &'a [u8],
    present: &[bool],
    n_present: usize,
    partial_json: bool,
    keep: bool,
) -> Result<(Vec<ColumnValue>, &'a [u8]), String> {
    let mut rest = data;
    let mut partial_bits: Option<Vec<bool>> = None;
    if partial_json {
        let (options, after) = read_lenenc(rest).ok_or("truncated value options")?;
        rest = after;
        if options & 1 != 0 {
            let n = table.json_columns.div_ceil(8);
            if rest.len() < n {
                return Err("truncated partial JSON bitmap".to_owned());
            }
            let (bits, after) = rest.split_at(n);
            rest = after;
            partial_bits = Some(
                (0..table.json_columns)
                    .map(|i| bits[i / 8] & (1 << (i % 8)) != 0)
                    .collect(),
            );
        }
    }

    let null_len = n_present.div_ceil(8);
    if rest.len() < null_len {
        return Err("truncated NULL bitmap".to_owned());
    }
    let (nulls, after) = rest.split_at(null_len);
    rest = after;

    let mut values = Vec::with_capacity(if keep { n_present } else { 0 });
    let mut image_idx = 0usize;
    let mut json_idx = 0usize;
    for (i, col) in table.columns.iter().enumerate() {
        let is_json = col
            .spec
            .as_ref()
            .is_some_and(|s| s.ty == ColumnType::MYSQL_TYPE_JSON);
        let is_partial = is_json
            && partial_bits
                .as_ref()
                .and_then(|b| b.get(json_idx).copied())
                .unwrap_or(false);
        if is_json {
            json_idx += 1;
        }
        if !present.get(i).copied().unwrap_or(false) {
            continue;
        }
        let is_null = nulls[image_idx / 8] & (1 << (image_idx % 8)) != 0;
        image_idx += 1;
        if is_null {
            if keep {
                values.push(ColumnValue::Null);
            }
            continue;
        }
        let (Some(spec), Some(meta)) = (&col.spec, &col.meta) else {
            return Err(format!(
                "column {} has a type this decoder does not know",
                i + 1
            ));
        };
        check_meta(spec.ty, meta).map_err(|e| format!("column {}: {e}", i + 1))?;
        let mut buf = ParseBuf(rest);
        let cell: BinlogValue<'_> = buf
            .parse((spec.ty, meta.as_slice(), spec.unsigned, is_partial))
            .map_err(|e| format!("column {}: {e}", i + 1))?;
        let consumed = rest.len() - buf.0.len();
        rest = &rest[consumed..];
        if keep {
            values.push(
                values::convert(spec, cell, consumed)
                    .map_err(|e| format!("column {}: {e}", i + 1))?,
            );
        }
    }
    Ok((values, rest))
}

/// Rejects type metadata `mysql_common` would index out of range or overflow on.
pub(crate) fn check_meta(ty: ColumnType, meta: &[u8]) -> Result<(), String> {
    use ColumnType::*;
    let need = |n: usize| {
        if meta.len() < n {
            Err(format!("type metadata too short ({} bytes)", meta.len()))
        } else {
            Ok(())
        }
    };
    match ty {
        MYSQL_TYPE_NEWDECIMAL => {
            need(2)?;
            let (precision, scale) = (meta[0], meta[1]);
            if precision == 0 || precision > 65 || scale > precision || scale > 38 {
                return Err(format!("invalid DECIMAL({precision},{scale})"));
            }
        }
        MYSQL_TYPE_TIMESTAMP2 | MYSQL_TYPE_DATETIME2 | MYSQL_TYPE_TIME2 => {
            need(1)?;
            if meta[0] > 6 {
                return Err(format!("invalid fractional seconds precision {}", meta[0]));
            }
        }
        MYSQL_TYPE_STRING
        | MYSQL_TYPE_ENUM
        | MYSQL_TYPE_SET
        | MYSQL_TYPE_BIT
        | MYSQL_TYPE_VARCHAR
        | MYSQL_TYPE_VAR_STRING => need(2)?,
        MYSQL_TYPE_BLOB
        | MYSQL_TYPE_TINY_BLOB
        | MYSQL_TYPE_MEDIUM_BLOB
        | MYSQL_TYPE_LONG_BLOB
        | MYSQL_TYPE_GEOMETRY
        | MYSQL_TYPE_VECTOR
        | MYSQL_TYPE_JSON
        | MYSQL_TYPE_FLOAT
        | MYSQL_TYPE_DOUBLE => need(1)?,
        MYSQL_TYPE_TYPED_ARRAY => return Err("typed array columns are not supported".to_owned()),
        _ => {}
    }
    Ok(())
}

/// Reads a MySQL length-encoded integer.
fn read_lenenc(data: &[u8]) -> Option<(u64, &[u8])> {
    let (first, rest) = data.split_first()?;
    let n = match *first {
        0xfc => 2,
        0xfd => 3,
        0xfe => 8,
        0xfb | 0xff => return None,
        x => return Some((u64::from(x), rest)),
    };
    if rest.len() < n {
        return None;
    }
    let mut v = 0u64;
    for (i, b) in rest[..n].iter().enumerate() {
        v |= u64::from(*b) << (8 * i);
    }
    Some((v, &rest[n..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lenenc() {
        assert_eq!(read_lenenc(&[5, 9]), Some((5, &[9u8][..])));
        assert_eq!(read_lenenc(&[0xfc, 1, 2]), Some((0x0201, &[][..])));
        assert_eq!(read_lenenc(&[0xfd, 1, 2]), None);
        assert_eq!(read_lenenc(&[]), None);
    }

    #[test]
    fn meta_checks() {
        assert!(check_meta(ColumnType::MYSQL_TYPE_NEWDECIMAL, &[10, 2]).is_ok());
        assert!(check_meta(ColumnType::MYSQL_TYPE_NEWDECIMAL, &[2, 10]).is_err());
        assert!(check_meta(ColumnType::MYSQL_TYPE_DATETIME2, &[7]).is_err());
        assert!(check_meta(ColumnType::MYSQL_TYPE_STRING, &[0xfe]).is_err());
    }
}
