//! The outbox `EventRouter` among a Debezium connector's `transforms`, read onto Debezium's
//! defaults, and the converters Kafka Connect would write with, accepted only where they
//! write what outboxd writes.

use super::Keys;
use crate::config::RouterConfig;
use crate::router::{parse_bool, Placement, UnknownOption};

const EVENT_ROUTER: &str = "io.debezium.transforms.outbox.EventRouter";
const STRING_CONVERTER: &str = "org.apache.kafka.connect.storage.StringConverter";
const JSON_CONVERTER: &str = "org.apache.kafka.connect.json.JsonConverter";

/// Finds the EventRouter among `transforms` and reads its options onto Debezium's defaults.
pub(super) fn router_from_transforms(keys: &mut Keys) -> Result<RouterConfig, (String, String)> {
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
    for n in &names {
        let type_key = format!("transforms.{n}.type");
        match keys.map.get(&type_key).map(|s| s.trim()) {
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
                    format!("transform `{n}` of type {other:?} is not supported: outboxd applies only {EVENT_ROUTER}; remove `{n}` from transforms"),
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
    Ok(cfg)
}

/// Converters decide the bytes Kafka Connect writes; accept only those that write what outboxd
/// writes (key and headers as UTF-8 text, value as the payload bytes or schemaless JSON).
pub(super) fn check_converters(
    keys: &mut Keys,
    router: &RouterConfig,
) -> Result<(), (String, String)> {
    if let Some(kc) = keys.take_nonempty("key.converter") {
        if kc != STRING_CONVERTER {
            return Err((
                "key.converter".into(),
                format!("{kc:?} writes keys differently from outboxd, which writes the key column as UTF-8 text (what {STRING_CONVERTER} writes) and partitions by it; set key.converter={STRING_CONVERTER} if consumers can read that"),
            ));
        }
    }
    if let Some(hc) = keys.take_nonempty("header.converter") {
        if hc != "org.apache.kafka.connect.storage.SimpleHeaderConverter" && hc != STRING_CONVERTER
        {
            return Err((
                "header.converter".into(),
                format!("{hc:?} is not supported: outboxd writes header values as UTF-8 text, like the default SimpleHeaderConverter"),
            ));
        }
    }
    let schemas_enable = keys.take_nonempty("value.converter.schemas.enable");
    let Some(vc) = keys.take_nonempty("value.converter") else {
        if schemas_enable.is_some() {
            keys.ignore(
                "value.converter.schemas.enable",
                "no value.converter is set",
            );
        }
        return Ok(());
    };
    let envelope = router
        .additional_placement
        .iter()
        .any(|f| f.placement == Placement::Envelope);
    match vc.as_str() {
        STRING_CONVERTER
        | "org.apache.kafka.connect.converters.ByteArrayConverter"
        | "io.debezium.converters.BinaryDataConverter" => {
            if schemas_enable.is_some() {
                keys.ignore("value.converter.schemas.enable", "only read by JsonConverter");
            }
            Ok(())
        }
        JSON_CONVERTER => {
            let schemas = match schemas_enable.as_deref() {
                None => true, // JsonConverter's default
                Some(v) => parse_bool(v).map_err(|m| ("value.converter.schemas.enable".to_string(), m))?,
            };
            if schemas {
                return Err((
                    "value.converter.schemas.enable".into(),
                    "JsonConverter with schemas enabled (its default) wraps every value in {\"schema\":..,\"payload\":..}; outboxd writes no schema envelope. Set value.converter.schemas.enable=false if consumers read the bare value".into(),
                ));
            }
            if !router.expand_json_payload && !envelope {
                return Err((
                    "value.converter".into(),
                    format!("with JsonConverter and table.expand.json.payload=false Debezium writes the payload as a quoted JSON string; outboxd writes the payload bytes as they are. Set transforms.<name>.table.expand.json.payload=true (consumers then get the JSON document itself) or value.converter={STRING_CONVERTER}"),
                ));
            }
            Ok(())
        }
        other => Err((
            "value.converter".into(),
            format!("{other:?} is not supported: outboxd writes the payload bytes ({STRING_CONVERTER}) or, with table.expand.json.payload or envelope fields, schemaless JSON ({JSON_CONVERTER} with schemas.enable=false)"),
        )),
    }
}
