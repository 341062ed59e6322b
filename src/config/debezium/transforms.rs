//! The outbox `EventRouter` among a Debezium connector's `transforms`, read onto Debezium's
//! defaults, and the connector keys that shape the record bytes (converters, extended
//! headers, type mapping; Debezium's column options are read in `columns.rs`).

use super::columns::column_options;
use super::Keys;
use crate::config::{KeyError, MysqlFlavor, RouterConfig, SourceConfig};
use crate::router::{parse_bool, RecordFormat, UnknownOption};
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
/// column options (`columns.rs`).
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
/// value is then its `fields.null.include` (default false). Any other transform, a
/// transform without `type`, two EventRouters or none are errors.
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
                decode = Some(decode_message_options(keys, n)?);
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
    Ok((event_router_options(keys, &name)?, decode))
}

/// The options of the `DecodeLogicalDecodingMessageContent` transform `name`: its
/// `fields.null.include` (default false); `predicate` / `negate` and anything else are
/// reported as unused.
fn decode_message_options(keys: &mut Keys, name: &str) -> Result<bool, KeyError> {
    let prefix = format!("transforms.{name}.");
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
            "fields.null.include" => include = parse_bool(&v).map_err(|m| (k.clone(), m))?,
            "predicate" | "negate" => keys.ignore(
                &k,
                "outboxd decodes every logical decoding message with a configured prefix",
            ),
            _ => keys.ignore(&k, "not an option of DecodeLogicalDecodingMessageContent"),
        }
    }
    Ok(include)
}

/// The options of the EventRouter transform `name` (`transforms.<name>.*`, its `type`
/// included) onto Debezium's defaults ([`RouterConfig::set_option`]); `predicate` /
/// `negate`, the removed `table.field.payload.id`, options without effect and unknown
/// options are reported.
fn event_router_options(keys: &mut Keys, name: &str) -> Result<RouterConfig, KeyError> {
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
            Some(UnknownOption::Unknown) => {
                let hint = crate::config::hint::closest_key(
                    opt,
                    RouterConfig::option_names().map(|(debezium, _)| debezium),
                )
                .map_or_else(String::new, |c| format!(" (did you mean `{prefix}{c}`?)"));
                keys.ignore(
                    &k,
                    format!(
                        "unknown EventRouter option: not one outboxd knows; check the spelling{hint}"
                    ),
                )
            }
        }
    }
    Ok(cfg)
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
