//! Debezium's column options, applied to an outbox row before the EventRouter sees it, as
//! Debezium's connectors apply them when they build the change event:
//!
//! - `column.include.list` / `column.exclude.list`: the columns left out are not in the row;
//! - `column.truncate.to.N.chars`: a string value longer than N characters (Java `char`s,
//!   UTF-16 code units) is cut to its first N; the field schema gets `truncateLength=N`;
//! - `column.mask.with.N.chars`: the value of a character column (CHAR, VARCHAR, TEXT, ENUM,
//!   SET, PostgreSQL text types) is replaced by N `*`, NULL included; the field schema gets
//!   `masked=true` whatever the column's type;
//! - `column.propagate.source.type` / `datatype.propagate.source.type`: the value is left
//!   alone; the field schema gets `__debezium.source.column.type` (the source's type name,
//!   upper-cased), `.length` and `.scale` (when the source declares them) and `.name` (the
//!   column's name) (`PropagateSourceMetadataToSchemaParameter`). The datatype form matches
//!   `<database-or-schema>.<table>.<type name>`.
//!
//! Column names are Debezium's fully-qualified regular expressions, `<database>.<table>.<column>`
//! (MySQL/MariaDB) or `<schema>.<table>.<column>` (PostgreSQL), matched case-insensitively
//! against the whole name. As in Debezium's `ColumnMappers`, the first rule that matches a
//! column decides (truncation rules before mask rules).

use regex::Regex;

use crate::event::{Row, TableName};
use crate::typemap::{SourceType, SqlType};
use crate::value::ColumnValue;

/// What a column rule does to the value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ColumnMapper {
    /// `column.truncate.to.N.chars`.
    Truncate(usize),
    /// `column.mask.with.N.chars`: the mask text.
    Mask(String),
    /// `column.propagate.source.type` / `datatype.propagate.source.type`.
    PropagateSourceType,
}

/// One `column.truncate.*` / `column.mask.*` option: its column patterns and mapper.
#[derive(Debug, Clone)]
struct MapperRule {
    patterns: Vec<Regex>,
    mapper: ColumnMapper,
    /// The patterns match `<schema>.<table>.<type name>` (`datatype.*`), not column names.
    by_type: bool,
}

/// Which columns Debezium keeps.
#[derive(Debug, Clone)]
enum Filter {
    Include(Vec<Regex>),
    Exclude(Vec<Regex>),
}

/// The connector's column options (none by default).
#[derive(Debug, Clone, Default)]
pub struct ColumnRules {
    filter: Option<Filter>,
    mappers: Vec<MapperRule>,
    /// The option text, for equality and display.
    source: Vec<(String, String)>,
}

impl PartialEq for ColumnRules {
    fn eq(&self, other: &Self) -> bool {
        self.source == other.source
    }
}
impl Eq for ColumnRules {}

/// Debezium's list of regular expressions: comma-separated, `\,` an escaped comma.
fn patterns(list: &str) -> Result<Vec<Regex>, String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut chars = list.chars().peekable();
    let mut items = Vec::new();
    while let Some(c) = chars.next() {
        if c == '\\' && chars.peek() == Some(&',') {
            cur.push(',');
            chars.next();
        } else if c == ',' {
            items.push(std::mem::take(&mut cur));
        } else {
            cur.push(c);
        }
    }
    items.push(cur);
    for item in items {
        let p = item.trim();
        if p.is_empty() {
            continue;
        }
        out.push(
            Regex::new(&format!("(?i)^(?:{p})$"))
                .map_err(|e| format!("{p:?} is not a regular expression: {e}"))?,
        );
    }
    Ok(out)
}

impl ColumnRules {
    /// True when no option is set.
    pub fn is_empty(&self) -> bool {
        self.filter.is_none() && self.mappers.is_empty()
    }

    /// Sets `column.include.list` (`include`) or `column.exclude.list`.
    pub fn set_filter(&mut self, include: bool, list: &str) -> Result<(), String> {
        if self.filter.is_some() {
            return Err("column.include.list and column.exclude.list cannot both be set (Debezium refuses it too)".into());
        }
        let p = patterns(list)?;
        self.source.push((
            if include {
                "column.include.list"
            } else {
                "column.exclude.list"
            }
            .into(),
            list.into(),
        ));
        self.filter = Some(if include {
            Filter::Include(p)
        } else {
            Filter::Exclude(p)
        });
        Ok(())
    }

    /// Adds a `column.truncate.to.N.chars` or `column.mask.with.N.chars` rule. Rules are
    /// matched in the order they are added: add truncation rules first, as Debezium does.
    pub fn add_mapper(
        &mut self,
        key: &str,
        list: &str,
        mapper: ColumnMapper,
    ) -> Result<(), String> {
        let p = patterns(list)?;
        self.source.push((key.into(), list.into()));
        self.mappers.push(MapperRule {
            patterns: p,
            mapper,
            by_type: false,
        });
        Ok(())
    }

    /// Adds `column.propagate.source.type` (`by_type` false: patterns of column names) or
    /// `datatype.propagate.source.type` (patterns of `<schema>.<table>.<type name>`), after
    /// the truncation and mask rules, as Debezium orders them.
    pub fn add_propagation(&mut self, key: &str, list: &str, by_type: bool) -> Result<(), String> {
        let p = patterns(list)?;
        self.source.push((key.into(), list.into()));
        self.mappers.push(MapperRule {
            patterns: p,
            mapper: ColumnMapper::PropagateSourceType,
            by_type,
        });
        Ok(())
    }

    /// The mapper of column `column` of `table`: the first rule matching it (rules by type
    /// match only when the column's source type name is known).
    pub fn mapper(&self, table: &TableName, column: &str) -> Option<&ColumnMapper> {
        self.mapper_of(table, column, None)
    }

    fn mapper_of(
        &self,
        table: &TableName,
        column: &str,
        source: Option<&SourceType>,
    ) -> Option<&ColumnMapper> {
        if self.mappers.is_empty() {
            return None;
        }
        let fq = format!("{}.{}.{column}", table.schema, table.name);
        let fq_type = source.map(|s| format!("{}.{}.{}", table.schema, table.name, s.name));
        self.mappers
            .iter()
            .find(|r| {
                let name = if r.by_type {
                    fq_type.as_deref()
                } else {
                    Some(fq.as_str())
                };
                name.is_some_and(|n| r.patterns.iter().any(|p| p.is_match(n)))
            })
            .map(|r| &r.mapper)
    }

    fn keeps(&self, table: &TableName, column: &str) -> bool {
        let fq = || format!("{}.{}.{column}", table.schema, table.name);
        match &self.filter {
            None => true,
            Some(Filter::Include(p)) => {
                let fq = fq();
                p.iter().any(|r| r.is_match(&fq))
            }
            Some(Filter::Exclude(p)) => {
                let fq = fq();
                !p.iter().any(|r| r.is_match(&fq))
            }
        }
    }

    /// The schema parameters the rule of `column` (its source type `source`, when known)
    /// adds to its field schema (Debezium's `ColumnMapper.alterFieldSchema`): `masked=true`,
    /// `truncateLength=N`, or the `__debezium.source.column.*` ones (none when the source
    /// type is not known).
    pub fn schema_parameters(
        &self,
        table: &TableName,
        column: &str,
        source: Option<&SourceType>,
    ) -> Vec<(String, String)> {
        let Some(m) = self.mapper_of(table, column, source) else {
            return Vec::new();
        };
        match m {
            ColumnMapper::Mask(_) => vec![("masked".into(), "true".into())],
            ColumnMapper::Truncate(n) => vec![("truncateLength".into(), n.to_string())],
            ColumnMapper::PropagateSourceType => {
                let Some(s) = source else {
                    return Vec::new();
                };
                let mut out = vec![("__debezium.source.column.type".into(), s.name.clone())];
                if let Some(l) = s.length {
                    out.push(("__debezium.source.column.length".into(), l.to_string()));
                }
                if let Some(sc) = s.scale {
                    out.push(("__debezium.source.column.scale".into(), sc.to_string()));
                }
                out.push(("__debezium.source.column.name".into(), column.to_string()));
                out
            }
        }
    }

    /// Applies the options to `row` of `table`: drops the columns the filter leaves out,
    /// truncates and masks values. Idempotent.
    pub fn apply(&self, table: &TableName, row: &mut Row) {
        if self.is_empty() {
            return;
        }
        if self.filter.is_some() {
            let names: Vec<bool> = row
                .column_names()
                .iter()
                .map(|c| self.keeps(table, c))
                .collect();
            if names.iter().any(|k| !k) {
                row.retain_columns(&names);
            }
        }
        if self.mappers.is_empty() {
            return;
        }
        let names: Vec<std::sync::Arc<str>> = row.column_names().to_vec();
        for name in names {
            let source = row.column_type(&name).and_then(|t| t.source.clone());
            let Some(m) = self.mapper_of(table, &name, source.as_ref()) else {
                continue;
            };
            if *m == ColumnMapper::PropagateSourceType {
                continue;
            }
            let character = row
                .column_type(&name)
                .map(|t| is_character(&t.sql))
                .unwrap_or(true);
            let Some(v) = row.take(&name) else { continue };
            row.put(&name, map_value(m, character, v));
        }
    }
}

/// A column Debezium's `MaskStrings` masks: JDBC CHAR, VARCHAR, LONGVARCHAR, CLOB and their N
/// forms.
fn is_character(sql: &SqlType) -> bool {
    matches!(sql, SqlType::Text | SqlType::Enum(_) | SqlType::Set(_))
}

/// One value through a mapper. `character`: the column is of a character type.
pub fn map_value(m: &ColumnMapper, character: bool, v: ColumnValue) -> ColumnValue {
    match m {
        ColumnMapper::Mask(mask) if character => ColumnValue::Text(mask.clone()),
        ColumnMapper::Mask(_) => v,
        ColumnMapper::Truncate(n) => match v {
            ColumnValue::Text(s) => ColumnValue::Text(truncate_utf16(s, *n)),
            ColumnValue::Json(s) => ColumnValue::Json(truncate_utf16(s, *n)),
            other => other,
        },
        ColumnMapper::PropagateSourceType => v,
    }
}

/// The first `n` UTF-16 code units of `s` (Java's `String.substring(0, n)`). A cut through a
/// surrogate pair leaves a lone surrogate, which Java writes as `?` in UTF-8.
fn truncate_utf16(s: String, n: usize) -> String {
    let mut units = 0usize;
    for (i, c) in s.char_indices() {
        let w = c.len_utf16();
        if units + w > n {
            let mut out = s[..i].to_string();
            if units < n {
                out.push('?');
            }
            return out;
        }
        units += w;
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::typemap::ColumnType;
    use std::sync::Arc;

    fn row() -> Row {
        let cols: Arc<[Arc<str>]> = ["id", "secret", "payload", "n"]
            .iter()
            .map(|c| Arc::from(*c))
            .collect();
        Row::new(
            cols,
            vec![
                ColumnValue::Text("1".into()),
                ColumnValue::Text("hunter2".into()),
                ColumnValue::Text("payloadtext".into()),
                ColumnValue::Int(7),
            ],
        )
        .with_types(
            [
                SqlType::Text,
                SqlType::Text,
                SqlType::Text,
                SqlType::Integer {
                    bits: 32,
                    unsigned: false,
                },
            ]
            .into_iter()
            .map(ColumnType::nullable)
            .collect(),
        )
    }

    #[test]
    fn masks_truncates_and_filters_like_debezium() {
        let t = TableName::new("shop", "outbox");
        let mut r = ColumnRules::default();
        r.add_mapper(
            "column.truncate.to.3.chars",
            "shop.outbox.payload",
            ColumnMapper::Truncate(3),
        )
        .unwrap();
        r.add_mapper(
            "column.mask.with.5.chars",
            "SHOP.OUTBOX.SECRET,shop.outbox.n",
            ColumnMapper::Mask("*****".into()),
        )
        .unwrap();
        r.set_filter(false, "shop\\.outbox\\.i.").unwrap();
        let mut row = row();
        r.apply(&t, &mut row);
        assert_eq!(row.get("id"), None);
        assert_eq!(row.get("secret"), Some(&ColumnValue::Text("*****".into())));
        assert_eq!(row.get("payload"), Some(&ColumnValue::Text("pay".into())));
        // Not a character column: Debezium leaves the value, but marks the schema.
        assert_eq!(row.get("n"), Some(&ColumnValue::Int(7)));
        assert_eq!(
            r.schema_parameters(&t, "n", None),
            vec![("masked".to_string(), "true".to_string())]
        );
        assert_eq!(
            r.schema_parameters(&t, "payload", None),
            vec![("truncateLength".to_string(), "3".to_string())]
        );
        // Whole-name match only; other tables untouched.
        assert_eq!(r.mapper(&t, "secretx"), None);
        assert_eq!(r.mapper(&TableName::new("shop", "outbox2"), "secret"), None);
        // Idempotent.
        let before = row.clone();
        r.apply(&t, &mut row);
        assert_eq!(row, before);
    }

    #[test]
    fn mask_replaces_null_and_include_list_keeps_only_listed() {
        let t = TableName::new("public", "outbox");
        let mut r = ColumnRules::default();
        r.add_mapper(
            "column.mask.with.2.chars",
            "public.outbox.secret",
            ColumnMapper::Mask("**".into()),
        )
        .unwrap();
        r.set_filter(true, "public.outbox.secret,public.outbox.payload")
            .unwrap();
        assert!(r.set_filter(false, "x").is_err());
        let mut row = row();
        row.put("secret", ColumnValue::Null);
        r.apply(&t, &mut row);
        let names: Vec<&str> = row.column_names().iter().map(|c| &**c).collect();
        assert_eq!(names, ["secret", "payload"]);
        assert_eq!(row.get("secret"), Some(&ColumnValue::Text("**".into())));
    }

    #[test]
    fn truncates_in_utf16_units_and_splits_escaped_commas() {
        assert_eq!(truncate_utf16("héllo".into(), 2), "hé");
        assert_eq!(truncate_utf16("a😀b".into(), 2), "a?");
        assert_eq!(truncate_utf16("a😀b".into(), 3), "a😀");
        assert_eq!(truncate_utf16("ab".into(), 5), "ab");
        let p = patterns("a\\,b, c.d ,").unwrap();
        assert_eq!(p.len(), 2);
        assert!(p[0].is_match("a,b"));
        assert!(p[1].is_match("C.D"));
    }

    /// `column.propagate.source.type` / `datatype.propagate.source.type`: the parameters
    /// Debezium writes (parity cases `propagate_*`), after a mask rule that matches first.
    #[test]
    fn propagation_adds_the_source_type_parameters() {
        let t = TableName::new("shop", "outbox");
        let varchar = SourceType {
            name: "VARCHAR".into(),
            length: Some(255),
            scale: None,
        };
        let longtext = SourceType {
            name: "LONGTEXT".into(),
            length: None,
            scale: None,
        };
        let mut r = ColumnRules::default();
        r.add_mapper(
            "column.mask.with.2.chars",
            "shop.outbox.secret",
            ColumnMapper::Mask("**".into()),
        )
        .unwrap();
        r.add_propagation(
            "column.propagate.source.type",
            "shop.outbox.(aggregateid|secret)",
            false,
        )
        .unwrap();
        r.add_propagation("datatype.propagate.source.type", ".+\\.longtext", true)
            .unwrap();
        let p = |k: &str, v: &str| (k.to_string(), v.to_string());
        assert_eq!(
            r.schema_parameters(&t, "aggregateid", Some(&varchar)),
            vec![
                p("__debezium.source.column.type", "VARCHAR"),
                p("__debezium.source.column.length", "255"),
                p("__debezium.source.column.name", "aggregateid"),
            ]
        );
        // By type, case-insensitively; without a known source type, none.
        assert_eq!(
            r.schema_parameters(&t, "payload", Some(&longtext)),
            vec![
                p("__debezium.source.column.type", "LONGTEXT"),
                p("__debezium.source.column.name", "payload"),
            ]
        );
        assert!(r.schema_parameters(&t, "payload", None).is_empty());
        assert!(r.schema_parameters(&t, "other", Some(&varchar)).is_empty());
        // The first matching rule decides: the mask.
        assert_eq!(
            r.schema_parameters(&t, "secret", Some(&varchar)),
            vec![p("masked", "true")]
        );
        // Values are left alone.
        let mut row = row();
        let before = row.clone();
        let mut only = ColumnRules::default();
        only.add_propagation("column.propagate.source.type", ".*", false)
            .unwrap();
        only.apply(&t, &mut row);
        assert_eq!(row, before);
    }
}
