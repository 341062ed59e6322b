//! The outbox `EventRouter` among a Debezium connector's `transforms`, read onto Debezium's
//! defaults, and the connector keys that shape the record bytes (converters, extended
//! headers, type mapping, Debezium's column options).

use super::Keys;
use crate::config::{KeyError, MysqlFlavor, RouterConfig, SourceConfig};
use crate::router::{parse_bool, ColumnMapper, ColumnRules, RecordFormat, UnknownOption};
use crate::typemap::TypeModes;

const EVENT_ROUTER: &str = "io.debezium.transforms.outbox.EventRouter";
/// Debezium's transform that turns a PostgreSQL logical decoding message's JSON content into
/// a change event the EventRouter can route.
const DECODE_MESSAGE: &str =
    "io.debezium.connector.postgresql.transforms.DecodeLogicalDecodingMessageContent";

/// The router of a connector whose source is `source`: the EventRouter's options
/// ([`router_from_transforms`], with `decode_messages` set when
/// `DecodeLogicalDecodingMessageContent` precedes it), the record format
/// ([`record_format`]; `logical_name` is `topic.prefix`, else the connector name) and the
/// column options ([`column_options`]).
pub(super) fn router(
    keys: &mut Keys,
    logical_name: &str,
    source: &SourceConfig,
) -> Result<RouterConfig, KeyError> {
    let (mut router, decode_messages) = router_from_transforms(keys)?;
    let (connector_type, is_pg) = match source {
        SourceConfig::Postgres(_) => ("postgresql", true),
        SourceConfig::Mysql(m) if m.flavor == MysqlFlavor::Mariadb => ("mariadb", false),
        SourceConfig::Mysql(_) => ("mysql", false),
    };
    router.format = record_format(keys, logical_name, connector_type, is_pg)?;
    router.format.decode_messages = decode_messages;
    router.format.columns = column_options(keys)?;
    Ok(router)
}

/// Finds the EventRouter among `transforms` and reads its options onto Debezium's defaults.
/// A `DecodeLogicalDecodingMessageContent` transform before it is accepted too: the second
/// value is then its `fields.null.include` (default false).
fn router_from_transforms(keys: &mut Keys) -> Result<(RouterConfig, Option<bool>), KeyError> {
    let list = keys.take_nonempty("transforms").ok_or_else(|| {
        (
            "transforms".to_string(),
            format!("is missing: outboxd relays outbox events only; set transforms=outbox and transforms.outbox.type={EVENT_ROUTER}"),
        )
    })?;
    let names: Vec<String> = list
        .split(',')
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect();
    let mut router_name = None;
    let mut decode: Option<bool> = None;
    for n in &names {
        let type_key = format!("transforms.{n}.type");
        match keys.map.get(&type_key).map(|s| s.trim()) {
            Some(DECODE_MESSAGE) => {
                if router_name.is_some() || decode.is_some() {
                    return Err((
                        "transforms".into(),
                        format!("transform `{n}` ({DECODE_MESSAGE}) must come once, before the EventRouter"),
                    ));
                }
                keys.take(&type_key);
                let prefix = format!("transforms.{n}.");
                let opts: Vec<String> = keys
                    .map
                    .keys()
                    .filter(|k| k.starts_with(&prefix))
                    .cloned()
                    .collect();
                let mut include = false;
                for k in opts {
                    let v = keys.take(&k).unwrap_or_default();
                    match &k[prefix.len()..] {
                        "fields.null.include" => {
                            include = parse_bool(&v).map_err(|m| (k.clone(), m))?
                        }
                        "predicate" | "negate" => keys.ignore(
                            &k,
                            "outboxd decodes every logical decoding message with a configured prefix",
                        ),
                        _ => keys.ignore(&k, "not an option of DecodeLogicalDecodingMessageContent"),
                    }
                }
                decode = Some(include);
            }
            Some(EVENT_ROUTER) => {
                if router_name.is_some() {
                    return Err((
                        "transforms".into(),
                        "lists two EventRouter transforms; keep one".into(),
                    ));
                }
                router_name = Some(n.clone());
            }
            Some(other) => {
                return Err((
                    type_key.clone(),
                    format!("transform `{n}` of type {other:?} is not supported: outboxd applies only {EVENT_ROUTER} (and {DECODE_MESSAGE} before it); remove `{n}` from transforms"),
                ))
            }
            None => return Err((type_key, format!("transform `{n}` has no type"))),
        }
    }
    let name = router_name.ok_or_else(|| {
        (
            "transforms".to_string(),
            format!("no transform of type {EVENT_ROUTER}; outboxd relays outbox events only"),
        )
    })?;
    keys.take(&format!("transforms.{name}.type"));
    let prefix = format!("transforms.{name}.");
    let opts: Vec<(String, String)> = keys
        .map
        .iter()
        .filter(|(k, _)| k.starts_with(&prefix))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let mut cfg = RouterConfig::debezium_defaults();
    for (k, v) in opts {
        keys.take(&k);
        let opt = &k[prefix.len()..];
        match opt {
            "predicate" | "negate" => {
                keys.ignore(
                    &k,
                    "outboxd applies the outbox router to every change of table.include.list",
                );
                continue;
            }
            "table.field.payload.id" => {
                keys.ignore(
                    &k,
                    "removed in Debezium 2.0; the key comes from table.field.event.key",
                );
                continue;
            }
            _ => {}
        }
        match cfg.set_option(opt, &v).map_err(|m| (k.clone(), m))? {
            None => {}
            Some(UnknownOption::NoEffect(why)) => keys.ignore(&k, why),
            Some(UnknownOption::Unknown) => keys.ignore(
                &k,
                "unknown EventRouter option: not one outboxd knows; check the spelling",
            ),
        }
    }
    Ok((cfg, decode))
}

/// The connector keys that shape the record bytes, read onto Debezium's and Kafka Connect's
/// defaults: the converter keys (resolved against the worker file when the configuration
/// is loaded), `extended.headers.enabled` (Debezium 3 default: on), and the type-mapping
/// options (`time.precision.mode`, `decimal.handling.mode`, `binary.handling.mode`,
/// `bigint.unsigned.handling.mode`, `interval.handling.mode`) on the connector's defaults.
/// `logical_name` is `topic.prefix`; `connector_type` the plugin name Debezium reports.
fn record_format(
    keys: &mut Keys,
    logical_name: &str,
    connector_type: &str,
    is_pg: bool,
) -> Result<RecordFormat, KeyError> {
    let mut f = RecordFormat {
        extended_headers: true,
        logical_name: logical_name.to_string(),
        connector_type: connector_type.to_string(),
        types: if is_pg {
            TypeModes::POSTGRES
        } else {
            TypeModes::MYSQL
        },
        ..RecordFormat::default()
    };
    let converter_keys: Vec<String> = keys
        .map
        .keys()
        .filter(|k| {
            ["key.converter", "value.converter", "header.converter"]
                .iter()
                .any(|c| *k == c || k.starts_with(&format!("{c}.")))
        })
        .cloned()
        .collect();
    for k in converter_keys {
        if let Some(v) = keys.take(&k) {
            f.converter_keys.insert(k, v.trim().to_string());
        }
    }
    if let Some(v) = keys.take_nonempty("extended.headers.enabled") {
        f.extended_headers =
            parse_bool(&v).map_err(|m| ("extended.headers.enabled".to_string(), m))?;
    }
    for k in [
        "time.precision.mode",
        "decimal.handling.mode",
        "binary.handling.mode",
        "bigint.unsigned.handling.mode",
        "interval.handling.mode",
    ] {
        if let Some(v) = keys.take_nonempty(k) {
            if is_pg && k == "bigint.unsigned.handling.mode" {
                keys.ignore(
                    k,
                    "a MySQL/MariaDB connector's option; PostgreSQL has no unsigned integers",
                );
                continue;
            }
            if !is_pg && k == "interval.handling.mode" {
                keys.ignore(
                    k,
                    "a PostgreSQL connector's option; MySQL/MariaDB have no interval type",
                );
                continue;
            }
            f.types.set_option(k, &v).map_err(|m| (k.to_string(), m))?;
        }
    }
    if !is_pg && f.types.time_precision == crate::typemap::TimePrecision::Adaptive {
        return Err((
            "time.precision.mode".into(),
            "'adaptive' is no longer supported by Debezium's MySQL/MariaDB connectors (they refuse the config); use adaptive_time_microseconds (their default) or another mode".into(),
        ));
    }
    Ok(f)
}

/// Debezium's column options: `column.include.list` / `column.exclude.list`,
/// `column.truncate.to.N.chars` and `column.mask.with.N.chars`, applied to the row before the
/// EventRouter as Debezium applies them. `column.mask.hash.*` (salted hashes) is refused: outboxd
/// would publish the column unhashed. Keys under `column.mask.` / `column.truncate.` of another
/// form are reported as unused (Debezium ignores them too).
fn column_options(keys: &mut Keys) -> Result<ColumnRules, KeyError> {
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
    Ok(rules)
}
