//! TABLE_MAP and rows events: the table-map cache, column names, and rows decoded into
//! named [`Row`]s (only for the tables the decoder's filter keeps).

use std::sync::Arc;

use mysql_common::binlog::consts::EventType;
use mysql_common::binlog::events::{Event, EventData, RowsEventData};

use super::parse::{guarded, malformed};
use super::{
    BinlogDecoder, BinlogMessage, DecodeError, MissingColumnNames, TxnState, MAX_CACHED_TABLES,
};
use crate::event::{Op, Row};
use crate::position::BinlogFilePosition;
use crate::source::mysql::table::{read_image, TableInfo};
use crate::typemap::ColumnType as ColumnTypeInfo;

impl BinlogDecoder {
    pub(super) fn on_table_map(
        &mut self,
        event: &Event,
        at: &BinlogFilePosition,
    ) -> Result<(), DecodeError> {
        let data = event.data();
        // Servers before 5.1.4 wrote a 4-byte table id (TABLE_MAP post-header of 6 bytes).
        let table_id_len = if event
            .fde()
            .get_event_type_header_length(EventType::TABLE_MAP_EVENT)
            == 6
        {
            4
        } else {
            6
        };
        let (table_id, info) = guarded("TABLE_MAP_EVENT", at, || {
            TableInfo::parse(data, table_id_len)
        })?;
        if let Some(existing) = self.tables.get(&table_id) {
            if existing.raw == data {
                return Ok(());
            }
        }
        if self.tables.len() >= MAX_CACHED_TABLES {
            self.tables.clear();
        }
        self.tables.insert(table_id, info);
        Ok(())
    }

    pub(super) fn on_rows(
        &mut self,
        event: &Event,
        at: &BinlogFilePosition,
        ts_ms: i64,
        out: &mut Vec<BinlogMessage>,
    ) -> Result<(), DecodeError> {
        let event_type = event.header().event_type_raw();
        let data = guarded("rows event", at, || event.read_data())?;
        let Some(EventData::RowsEvent(rows)) = data else {
            return Err(malformed("rows event", at, "not a rows event"));
        };
        let table_id = rows.table_id();
        // MySQL's dummy rows event that only closes a statement.
        if table_id == 0x00ff_ffff {
            out.push(BinlogMessage::Other { event_type });
            return Ok(());
        }
        if self.txn == TxnState::Idle {
            // Rows outside BEGIN (decoding started mid-transaction): open one.
            self.begin(None, TxnState::Open, ts_ms, None, out);
        }

        let Some(info) = self.tables.get(&table_id) else {
            return Err(DecodeError::UnknownTableId {
                table_id,
                at: at.clone(),
            });
        };
        if let Some(filter) = &self.table_filter {
            if !filter.contains(&info.table) {
                out.push(BinlogMessage::Other { event_type });
                return Ok(());
            }
        }
        if let Some(e) = &info.metadata_error {
            return Err(malformed("TABLE_MAP_EVENT", at, e));
        }
        let names = self.resolve_names(table_id)?;
        let types = self.resolve_types(table_id, &names);
        let Some(info) = self.tables.get(&table_id) else {
            return Err(DecodeError::UnknownTableId {
                table_id,
                at: at.clone(),
            });
        };

        let (op, what) = match &rows {
            RowsEventData::WriteRowsEventV1(_) | RowsEventData::WriteRowsEvent(_) => {
                (Op::Insert, "WRITE_ROWS_EVENT")
            }
            RowsEventData::UpdateRowsEventV1(_)
            | RowsEventData::UpdateRowsEvent(_)
            | RowsEventData::PartialUpdateRowsEvent(_) => (Op::Update, "UPDATE_ROWS_EVENT"),
            RowsEventData::DeleteRowsEventV1(_) | RowsEventData::DeleteRowsEvent(_) => {
                (Op::Delete, "DELETE_ROWS_EVENT")
            }
        };
        let partial = matches!(rows, RowsEventData::PartialUpdateRowsEvent(_));
        let n = usize::try_from(rows.num_columns()).unwrap_or(usize::MAX);
        if n != info.columns.len() {
            return Err(malformed(
                what,
                at,
                format!(
                    "the event has {n} columns but the TABLE_MAP_EVENT of {} has {}",
                    info.table,
                    info.columns.len()
                ),
            ));
        }
        let before: Option<Vec<bool>> = rows
            .columns_before_image()
            .map(|b| (0..n).map(|i| b.get(i).is_some_and(|x| *x)).collect());
        let after: Option<Vec<bool>> = rows
            .columns_after_image()
            .map(|b| (0..n).map(|i| b.get(i).is_some_and(|x| *x)).collect());
        let (kept, kept_is_after) = match op {
            Op::Delete => (before.as_ref(), false),
            _ => (after.as_ref(), true),
        };
        let Some(kept) = kept else {
            return Err(malformed(what, at, "no column bitmap for the row image"));
        };
        let kept_count = kept.iter().filter(|b| **b).count();
        // A partial image (binlog_row_image=MINIMAL/NOBLOB): the columns it leaves out are
        // named on every row, so that a missing column can be told from a column the table
        // does not have.
        let pick = |present: bool| -> Arc<[Arc<str>]> {
            kept.iter()
                .zip(names.iter())
                .filter(|(k, _)| **k == present)
                .map(|(_, name)| name.clone())
                .collect()
        };
        let (columns, omitted) = if kept_count == names.len() {
            (names.clone(), None)
        } else {
            (pick(true), Some(pick(false)))
        };
        let kept_types: Arc<[ColumnTypeInfo]> = if kept_count == types.len() {
            types.clone()
        } else {
            kept.iter()
                .zip(types.iter())
                .filter(|(k, _)| **k)
                .map(|(_, t)| t.clone())
                .collect()
        };

        let result = guarded(what, at, || {
            let mut data = rows.rows_data();
            let mut out_rows = Vec::new();
            while !data.is_empty() {
                let start_len = data.len();
                let mut kept_values = None;
                if let Some(b) = &before {
                    let count = b.iter().filter(|x| **x).count();
                    let (vals, rest) = read_image(info, data, b, count, false, !kept_is_after)?;
                    data = rest;
                    if !kept_is_after {
                        kept_values = Some(vals);
                    }
                }
                if let Some(a) = &after {
                    let count = a.iter().filter(|x| **x).count();
                    let (vals, rest) = read_image(info, data, a, count, partial, kept_is_after)?;
                    data = rest;
                    if kept_is_after {
                        kept_values = Some(vals);
                    }
                }
                if data.len() >= start_len {
                    return Err("a row image without any bytes".to_owned());
                }
                let row = Row::new(columns.clone(), kept_values.unwrap_or_default())
                    .with_types(kept_types.clone());
                out_rows.push(match &omitted {
                    Some(o) => row.with_omitted(o.clone()),
                    None => row,
                });
            }
            Ok(out_rows)
        })?;
        out.push(BinlogMessage::Rows {
            table: info.table.clone(),
            op,
            rows: result,
            ts_ms,
        });
        Ok(())
    }

    /// The type mapping's column types of a table, with what the catalog says when the
    /// session read it (cached per TABLE_MAP).
    fn resolve_types(&mut self, table_id: u64, names: &[Arc<str>]) -> Arc<[ColumnTypeInfo]> {
        let catalog = self.catalog.as_ref();
        let Some(info) = self.tables.get_mut(&table_id) else {
            return Arc::from(Vec::new());
        };
        if let Some(t) = &info.resolved_types {
            return t.clone();
        }
        let mut types: Vec<ColumnTypeInfo> = info
            .columns
            .iter()
            .map(super::super::types::column_type)
            .collect();
        if let Some(c) = catalog.and_then(|c| c.get(&info.table)) {
            super::super::types::with_catalog(&mut types, names, c);
        }
        let types: Arc<[ColumnTypeInfo]> = types.into();
        info.resolved_types = Some(types.clone());
        types
    }

    /// Column names for a table: binlog metadata, else the configured list, else positional
    /// names (offline) or an error.
    fn resolve_names(&mut self, table_id: u64) -> Result<Arc<[Arc<str>]>, DecodeError> {
        let Some(info) = self.tables.get_mut(&table_id) else {
            return Err(DecodeError::UnknownTableId {
                table_id,
                at: self.position.clone(),
            });
        };
        if let Some(names) = &info.resolved_names {
            return Ok(names.clone());
        }
        let names: Vec<String> = if let Some(names) = &info.binlog_names {
            names.clone()
        } else if let Some(configured) = self.columns.get(&info.table) {
            if configured.len() != info.columns.len() {
                return Err(DecodeError::ColumnCountMismatch {
                    table: info.table.clone(),
                    configured: configured.len(),
                    actual: info.columns.len(),
                });
            }
            configured.clone()
        } else {
            match self.missing_names {
                MissingColumnNames::Error => {
                    return Err(DecodeError::MissingColumnNames {
                        table: info.table.clone(),
                    })
                }
                MissingColumnNames::Positional => {
                    if self.noted_tables.insert(info.table.clone()) {
                        self.notes.push(format!(
                            "table {} has no column names in the binlog \
                             (binlog_row_metadata=MINIMAL or an older server); its columns are \
                             shown as @1..@{}",
                            info.table,
                            info.columns.len()
                        ));
                    }
                    info.positional_names()
                }
            }
        };
        let names: Arc<[Arc<str>]> = names.into_iter().map(Arc::from).collect();
        info.resolved_names = Some(names.clone());
        Ok(names)
    }
}
