//! Where the connector's Kafka cluster is: the command line's or the environment's
//! bootstrap servers, Debezium's `producer.override.bootstrap.servers`, the process-wide
//! Kafka settings, and as a last resort the schema history's bootstrap servers (in practice
//! the cluster Kafka Connect writes to). See the module docs of `crate::config`.

use super::Keys;
use crate::config::LoadCtx;

/// The schema history's bootstrap server keys, Debezium 2+ then 1.x.
const HISTORY_KEYS: [&str; 2] = [
    "schema.history.internal.kafka.bootstrap.servers",
    "database.history.kafka.bootstrap.servers",
];

/// The bootstrap servers by precedence: `--kafka-bootstrap` / `OUTBOXD_KAFKA_BOOTSTRAP`
/// (`ctx.bootstrap_override`), `producer.override.bootstrap.servers`, the process-wide
/// `bootstrap.servers` (`--kafka-config` / `[kafka]`), the schema history's. Every one of
/// these keys is taken; the ones not used are reported with the reason, the history's also
/// when it is used. `None`: no servers anywhere (the caller's error).
pub(super) fn servers(keys: &mut Keys, ctx: &LoadCtx<'_>) -> Option<String> {
    let producer_bootstrap = keys.take_nonempty("producer.override.bootstrap.servers");
    let history_bootstrap = history_servers(keys);
    let history_unused = |keys: &mut Keys, why: &str| {
        if let Some((k, _)) = &history_bootstrap {
            keys.ignore(k, why);
        }
    };
    if let Some(b) = ctx.bootstrap_override {
        history_unused(keys, "schema history is not kept (the Kafka bootstrap servers come from --kafka-bootstrap / OUTBOXD_KAFKA_BOOTSTRAP)");
        if producer_bootstrap.is_some() {
            keys.ignore(
                "producer.override.bootstrap.servers",
                "overridden by --kafka-bootstrap / OUTBOXD_KAFKA_BOOTSTRAP",
            );
        }
        Some(b.to_string())
    } else if let Some(b) = producer_bootstrap {
        history_unused(keys, "schema history is not kept");
        Some(b)
    } else if let Some(b) = ctx.process_bootstrap {
        history_unused(keys, "schema history is not kept (the Kafka bootstrap servers come from --kafka-config / [kafka])");
        Some(b.to_string())
    } else if let Some((k, b)) = history_bootstrap {
        keys.ignore(
            k,
            "USED as the Kafka bootstrap servers (last resort: no --kafka-bootstrap, OUTBOXD_KAFKA_BOOTSTRAP or producer.override.bootstrap.servers); the schema history itself is not kept",
        );
        Some(b)
    } else {
        None
    }
}

/// The first schema history bootstrap key set (in [`HISTORY_KEYS`] order) with its value;
/// a second one is reported as unused.
fn history_servers(keys: &mut Keys) -> Option<(&'static str, String)> {
    let mut first = None;
    for k in HISTORY_KEYS {
        if let Some(v) = keys.take_nonempty(k) {
            if first.is_none() {
                first = Some((k, v));
            } else {
                keys.ignore(k, "schema history is not kept");
            }
        }
    }
    first
}
