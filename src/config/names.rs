//! The name rules both configuration formats share: what a connector may be called, what
//! PostgreSQL accepts as a replication slot name, and the slot / publication name outboxd
//! derives from a connector's when its TOML names none. Each check returns the message to
//! show (without the key: the caller says where the name came from, `name`, `slot_name`,
//! `slot.name`, `--shadow`).

/// Checks a connector name: 1 to 128 characters of `A-Z a-z 0-9 . _ -`, characters a Kafka
/// topic name allows (outboxd's rule: the name keys the checkpoint, goes into the default
/// checkpoint topic `outboxd.checkpoints.<name>` and `transactional.id` `outboxd-<name>`, and
/// labels the metrics). Errors: empty or longer than 128, or the first character outside
/// the set.
pub fn validate_connector_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > 128 {
        return Err(format!(
            "connector name {name:?} must be 1 to 128 characters long"
        ));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        return Err(format!(
            "connector name {name:?} contains {c:?}; use only letters, digits, '.', '_' and '-' \
             (the name keys checkpoints and metrics)"
        ));
    }
    Ok(())
}

/// Checks a PostgreSQL replication slot name: 1 to 63 characters of `a-z`, `0-9` and `_`
/// (PostgreSQL's rule, "Replication Slots" in its documentation: lower-case letters, numbers
/// and the underscore, at most `NAMEDATALEN - 1` bytes). Used for Debezium's `slot.name`,
/// the TOML `slot_name`, and a shadow's `<slot>_<shadow>`.
pub(super) fn validate_slot_name(name: &str) -> Result<(), String> {
    if name.is_empty()
        || name.len() > 63
        || !name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
    {
        return Err(format!(
            "slot name {name:?} must be 1 to 63 characters of a-z, 0-9 and _ (a PostgreSQL rule)"
        ));
    }
    Ok(())
}

/// outboxd's default PostgreSQL slot/publication name for a connector (TOML; a Debezium
/// JSON keeps Debezium's `debezium` / `dbz_publication`): `outboxd_<name>` lower-cased,
/// other characters than `a-z0-9_` replaced by `_`, cut to 63 bytes; always a valid slot
/// name (`validate_slot_name`).
pub fn default_pg_object_name(connector: &str) -> String {
    let mut s: String = format!("outboxd_{connector}")
        .chars()
        .map(|c| {
            let c = c.to_ascii_lowercase();
            if c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    s.truncate(63);
    s
}

#[cfg(test)]
mod unit {
    use super::*;

    #[test]
    fn name_rules_and_their_bounds() {
        assert!(validate_connector_name("orders-db.v2_X").is_ok());
        assert!(validate_connector_name(&"a".repeat(128)).is_ok());
        assert!(validate_connector_name(&"a".repeat(129)).is_err());
        assert!(validate_connector_name("").is_err());
        let e = validate_connector_name("a b").unwrap_err();
        assert!(e.contains("' '"), "{e}");

        assert!(validate_slot_name("debezium_1").is_ok());
        assert!(validate_slot_name(&"s".repeat(63)).is_ok());
        assert!(validate_slot_name(&"s".repeat(64)).is_err());
        assert!(validate_slot_name("Debezium").is_err());
        assert!(validate_slot_name("").is_err());

        // The derived name is always a valid slot name.
        for connector in ["orders", "Orders.DB-1", &"x".repeat(200)] {
            let n = default_pg_object_name(connector);
            validate_slot_name(&n).unwrap_or_else(|e| panic!("{connector}: {e}"));
        }
        assert_eq!(default_pg_object_name("Orders.DB-1"), "outboxd_orders_db_1");
    }
}
