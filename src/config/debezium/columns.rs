//! Debezium's column options (the connector's `column.*` keys): which columns of the outbox
//! row the EventRouter sees, and which it sees truncated or masked.

use super::Keys;
use crate::config::KeyError;
use crate::router::{ColumnMapper, ColumnRules};

/// Debezium's column options: `column.include.list` / `column.exclude.list`,
/// `column.truncate.to.N.chars` and `column.mask.with.N.chars`, applied to the row before the
/// EventRouter as Debezium applies them. `column.mask.hash.*` (salted hashes) is refused: outboxd
/// would publish the column unhashed. Keys under `column.mask.` / `column.truncate.` of another
/// form are reported as unused (Debezium ignores them too).
pub(super) fn column_options(keys: &mut Keys) -> Result<ColumnRules, KeyError> {
    let mut rules = ColumnRules::default();
    let include = keys.take_nonempty("column.include.list");
    let exclude = keys.take_nonempty("column.exclude.list");
    if include.is_some() && exclude.is_some() {
        return Err((
            "column.exclude.list".into(),
            "cannot be set together with column.include.list (Debezium refuses it too)".into(),
        ));
    }
    if let Some(l) = include {
        rules
            .set_filter(true, &l)
            .map_err(|m| ("column.include.list".to_string(), m))?;
    }
    if let Some(l) = exclude {
        rules
            .set_filter(false, &l)
            .map_err(|m| ("column.exclude.list".to_string(), m))?;
    }
    column_mappers(keys, &mut rules)?;
    for (key, by_type) in [
        ("column.propagate.source.type", false),
        ("datatype.propagate.source.type", true),
    ] {
        if let Some(l) = keys.take_nonempty(key) {
            rules
                .add_propagation(key, &l, by_type)
                .map_err(|m| (key.to_string(), m))?;
        }
    }
    Ok(rules)
}

/// `column.truncate.to.N.chars` and `column.mask.with.N.chars` into `rules`, truncations
/// first (an empty value sets no rule); a non-empty `column.mask.hash.*` is refused, other
/// `column.mask.*` / `column.truncate.*` keys are reported.
fn column_mappers(keys: &mut Keys, rules: &mut ColumnRules) -> Result<(), KeyError> {
    let mapper_keys: Vec<String> = keys
        .map
        .keys()
        .filter(|k| k.starts_with("column.mask.") || k.starts_with("column.truncate."))
        .cloned()
        .collect();
    let n_of = |k: &str, prefix: &str| -> Option<usize> {
        k.strip_prefix(prefix)?
            .strip_suffix(".chars")
            .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|n| n.parse().ok())
    };
    // Debezium adds the truncation rules before the mask rules; the first rule that
    // matches a column decides.
    let mut masks = Vec::new();
    for k in mapper_keys {
        let Some(v) = keys.take(&k) else { continue };
        let v = v.trim().to_string();
        if k.starts_with("column.mask.hash.") {
            if v.is_empty() {
                continue;
            }
            return Err((
                k,
                "salted-hash masking is not supported by outboxd, which would publish the column unhashed: remove the column from the outbox table, use column.exclude.list, or column.mask.with.N.chars".into(),
            ));
        }
        if let Some(n) = n_of(&k, "column.truncate.to.") {
            if n == 0 {
                return Err((
                    k,
                    "the length must be positive (Debezium fails on 0 too)".into(),
                ));
            }
            if !v.is_empty() {
                rules
                    .add_mapper(&k, &v, ColumnMapper::Truncate(n))
                    .map_err(|m| (k.clone(), m))?;
            }
        } else if let Some(n) = n_of(&k, "column.mask.with.") {
            if !v.is_empty() {
                masks.push((k, v, n));
            }
        } else {
            keys.ignore(
                &k,
                "not of the form column.mask.with.N.chars or column.truncate.to.N.chars: Debezium ignores it too",
            );
        }
    }
    for (k, v, n) in masks {
        rules
            .add_mapper(&k, &v, ColumnMapper::Mask("*".repeat(n)))
            .map_err(|m| (k.clone(), m))?;
    }
    Ok(())
}
