//! Debezium's table filters: `table.include.list` names the outbox tables; the schema filter
//! (`database.include.list` for MySQL/MariaDB, `schema.include.list` for PostgreSQL) must
//! admit them. The exclude lists are reported as unused (`unused.rs`).

use super::Keys;
use crate::config::KeyError;
use crate::event::TableName;

/// The outbox tables of `table.include.list` (required; literal `schema.table` names, each
/// once, in list order), checked against the schema filter of the source (`is_pg`).
pub(super) fn outbox_tables(keys: &mut Keys, is_pg: bool) -> Result<Vec<TableName>, KeyError> {
    const KEY: &str = "table.include.list";
    let include = keys.take_nonempty(KEY).ok_or_else(|| {
        (
            KEY.to_string(),
            "is required: list the outbox table(s), e.g. \"shop.outbox_events\"".to_string(),
        )
    })?;
    let mut tables = Vec::new();
    for entry in include.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let t = literal_table(entry).map_err(|m| (KEY.to_string(), m))?;
        if !tables.contains(&t) {
            tables.push(t);
        }
    }
    if tables.is_empty() {
        return Err((KEY.to_string(), "lists no table".to_string()));
    }
    let schema_list_key = if is_pg {
        "schema.include.list"
    } else {
        "database.include.list"
    };
    if let Some(list) = keys.take_nonempty(schema_list_key) {
        check_schema_list(&list, &tables).map_err(|m| (schema_list_key.to_string(), m))?;
    }
    Ok(tables)
}

/// A `table.include.list` entry as a literal table: `schema.table` or `schema\.table`.
fn literal_table(entry: &str) -> Result<TableName, String> {
    let unescaped = entry.replacen("\\.", ".", 1);
    let literal = unescaped
        .chars()
        .all(|c| c.is_alphanumeric() || c == '_' || c == '$' || c == '.')
        && unescaped.matches('.').count() == 1;
    if !literal {
        return Err(format!(
            "entry {entry:?} is not a literal schema.table name; outboxd needs the outbox tables \
             spelled out (regular expressions are not supported here)"
        ));
    }
    TableName::parse(&unescaped)
}

/// `database.include.list` / `schema.include.list` (regexes, full match, case-insensitive as in
/// Debezium) must admit every outbox table's schema.
fn check_schema_list(list: &str, tables: &[TableName]) -> Result<(), String> {
    let mut patterns = Vec::new();
    for p in list.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let re = regex::RegexBuilder::new(&format!(r"\A(?:{p})\z"))
            .case_insensitive(true)
            .build()
            .map_err(|e| {
                format!("entry {p:?} is not a regular expression outboxd can compile: {e}")
            })?;
        patterns.push(re);
    }
    for t in tables {
        if !patterns.iter().any(|re| re.is_match(&t.schema)) {
            return Err(format!(
                "does not include {:?}, the schema of outbox table {t} from table.include.list; \
                 add it or remove the list",
                t.schema
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod unit {
    use super::*;

    #[test]
    fn literal_tables() {
        assert_eq!(
            literal_table("shop.outbox").unwrap(),
            TableName::new("shop", "outbox")
        );
        assert_eq!(
            literal_table(r"shop\.outbox").unwrap(),
            TableName::new("shop", "outbox")
        );
        assert!(literal_table("shop.outbox.*").is_err());
        assert!(literal_table("shop.(a|b)").is_err());
        assert!(literal_table("outbox").is_err());
    }

    #[test]
    fn schema_lists() {
        let t = [TableName::new("order_db", "outbox_events")];
        assert!(check_schema_list("order_db", &t).is_ok());
        assert!(check_schema_list("ORDER_DB", &t).is_ok());
        assert!(check_schema_list("other,order_.*", &t).is_ok());
        let e = check_schema_list("other", &t).unwrap_err();
        assert!(e.contains("order_db"), "{e}");
    }
}
