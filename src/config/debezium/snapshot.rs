//! Debezium's `snapshot.mode`. outboxd takes no snapshot: a mode that needs no data
//! snapshot is accepted, `initial` / `when_needed` (and the default, `initial`) are reported
//! (rows already in the outbox table are not emitted), any other mode is refused. The other
//! `snapshot.*` keys are reported as unused (`unused.rs`).

use super::Keys;
use crate::config::KeyError;

/// Checks `snapshot.mode` against what outboxd does: start at the slot's position
/// (PostgreSQL, `is_pg`) or the current binlog position without a snapshot.
pub(super) fn check_snapshot(keys: &mut Keys, is_pg: bool) -> Result<(), KeyError> {
    let first_position = if is_pg {
        "the slot's position"
    } else {
        "the current binlog position"
    };
    match keys
        .take_nonempty("snapshot.mode")
        .map(|m| m.to_ascii_lowercase())
    {
        None => {
            keys.ignore(
                "snapshot.mode",
                format!("(not set) Debezium's default `initial` would first emit every row already in the outbox table; outboxd takes no snapshot and starts at {first_position}"),
            );
            Ok(())
        }
        Some(m) => match m.as_str() {
            "never" | "no_data" | "schema_only" | "schema_only_recovery" | "recovery" => Ok(()),
            "initial" | "when_needed" => {
                keys.ignore(
                    "snapshot.mode",
                    format!("`{m}`: rows already in the outbox table are not emitted; outboxd takes no snapshot and starts at {first_position}"),
                );
                Ok(())
            }
            _ => Err((
                "snapshot.mode".to_string(),
                format!(
                    "{m:?} needs a data snapshot, which outboxd does not take; use no_data (or never) \
                     and drain rows already in the outbox table another way"
                ),
            )),
        },
    }
}
