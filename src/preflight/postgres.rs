//! PostgreSQL preflight: `wal_level`, replication slots and senders, the role's
//! `REPLICATION` attribute, the publication, the slot and the outbox tables; and the slot
//! figures `outboxd status` reports.
//!
//! Checks only read: a missing publication or slot that the connector would create is a
//! warning that says so (with whether the role may create it), not a failure.

use super::{CheckResult, Status, StoredCheckpoint};
use crate::config::{ConnectorConfig, PostgresSourceConfig, PublicationAutocreate};
use crate::position::{Lsn, SourcePosition};
use crate::source::postgres::catalog::{self, quote_ident};

/// Runs every PostgreSQL check for connector `cfg` with source `src`; the `stored`
/// checkpoint is read after the slot, and checked against it.
pub async fn check(
    cfg: &ConnectorConfig,
    src: &PostgresSourceConfig,
    stored: &StoredCheckpoint,
) -> Vec<CheckResult> {
    let name = cfg.name.as_str();
    let mut out = Vec::new();
    let client = match catalog::connect_negotiated(src).await {
        Ok((c, negotiated)) => {
            out.push(CheckResult::new(
                name,
                "connect",
                Status::Pass,
                format!("{}:{}/{} as {}", src.host, src.port, src.dbname, src.user),
            ));
            let names = crate::config::tls::PgTlsNames::of(src.format);
            out.push(super::tls_result(
                name,
                &negotiated.facts,
                names.mode,
                names.verify_full,
            ));
            c
        }
        Err(f) => {
            out.push(CheckResult::new(
                name,
                "connect",
                Status::Fail,
                f.to_string(),
            ));
            return out;
        }
    };
    let info = match catalog::server_info(&client, src).await {
        Ok(i) => i,
        Err(f) => {
            out.push(CheckResult::new(
                name,
                "server settings",
                Status::Fail,
                f.to_string(),
            ));
            return out;
        }
    };
    out.extend(catalog::requirements(&info, name));
    // The slot first, the checkpoint after it: a running relay confirms to the slot only
    // what it has stored, so this order never shows the slot past a checkpoint that the
    // relay has in fact reached.
    let found = catalog::slot_info(&client, src, &src.slot_name).await;
    let checkpoint = stored.get().ok();
    let lsn = match checkpoint.flatten().map(|cp| &cp.position) {
        Some(SourcePosition::Lsn(l)) => Some(*l),
        _ => None,
    };
    out.extend(slot(name, &client, src, &info, &found, lsn).await);
    let gap = checkpoint.flatten().and_then(|cp| match &found {
        Ok(s) => gap(&src.slot_name, s.as_ref(), &cp.position),
        Err(f) => Some(format!("could not read the slot: {f}")),
    });
    out.extend(super::checkpoint_result(
        name,
        checkpoint,
        gap,
        "streams from the slot's confirmed_flush_lsn (a slot it creates: from the WAL \
         position at creation)",
    ));
    out.extend(publication(name, &client, cfg, src).await);
    out.extend(tables(name, &client, cfg, src).await);
    if !src.message_prefixes.is_empty() {
        out.push(CheckResult::new(
            name,
            "message prefixes",
            Status::Pass,
            format!(
                "pg_logical_emit_message with prefix {} is routed as an outbox event",
                src.message_prefixes.join(", ")
            ),
        ));
    }
    out
}

/// Why slot `slot_name` (`slot`: as read, `None` when missing) cannot serve a checkpoint at
/// `checkpoint`, or `None` when it can ([`catalog::checkpoint_gap`]; a position that is no
/// LSN is a checkpoint written for another source).
pub fn gap(
    slot_name: &str,
    slot: Option<&catalog::SlotInfo>,
    checkpoint: &SourcePosition,
) -> Option<String> {
    match checkpoint {
        SourcePosition::Lsn(l) => catalog::checkpoint_gap(slot_name, slot, *l),
        other => Some(format!(
            "the checkpoint position {other} is not a PostgreSQL LSN (written for another \
             source?)"
        )),
    }
}

async fn slot(
    name: &str,
    client: &tokio_postgres::Client,
    src: &PostgresSourceConfig,
    info: &catalog::ServerInfo,
    found: &Result<Option<catalog::SlotInfo>, crate::source::postgres::PgError>,
    checkpoint: Option<Lsn>,
) -> Vec<CheckResult> {
    let mut out = Vec::new();
    let slot = match found {
        Ok(s) => s.clone(),
        Err(f) => {
            return vec![CheckResult::new(
                name,
                "replication slot",
                Status::Fail,
                f.to_string(),
            )]
        }
    };
    let free = info.max_replication_slots - info.slots_used;
    out.push(match (&slot, free) {
        (Some(_), _) => CheckResult::new(
            name,
            "replication slots",
            Status::Pass,
            format!(
                "{} of max_replication_slots = {} in use (this connector's included)",
                info.slots_used, info.max_replication_slots
            ),
        ),
        (None, f) if f > 0 => CheckResult::new(
            name,
            "replication slots",
            Status::Pass,
            format!(
                "{f} free of max_replication_slots = {}",
                info.max_replication_slots
            ),
        ),
        (None, _) => CheckResult::new(
            name,
            "replication slots",
            Status::Fail,
            format!(
                "all max_replication_slots = {} are in use: drop an unused slot \
                 (pg_drop_replication_slot) or raise max_replication_slots (needs a restart)",
                info.max_replication_slots
            ),
        ),
    });
    let label = format!("slot {}", src.slot_name);
    out.push(match slot {
        None if checkpoint.is_some() => CheckResult::new(
            name,
            &label,
            Status::Fail,
            "does not exist, but the connector has a checkpoint: the connector will not create \
             it past the gap (see the checkpoint check)",
        ),
        None if src.slot_autocreate => CheckResult::new(
            name,
            &label,
            Status::Pass,
            "does not exist yet; the connector creates it at its first start (events from then on are delivered)",
        ),
        None => CheckResult::new(
            name,
            &label,
            Status::Fail,
            format!(
                "does not exist and slot_autocreate is off; SELECT \
                 pg_create_logical_replication_slot('{}', 'pgoutput')",
                src.slot_name
            ),
        ),
        Some(s) if s.plugin.as_deref() != Some("pgoutput") => CheckResult::new(
            name,
            &label,
            Status::Fail,
            format!(
                "is a {} slot for plugin {}; outboxd needs a logical pgoutput slot",
                s.slot_type,
                s.plugin.as_deref().unwrap_or("none")
            ),
        ),
        Some(s) if s.database.as_deref() != Some(src.dbname.as_str()) => CheckResult::new(
            name,
            &label,
            Status::Fail,
            format!(
                "belongs to database {}, not {}",
                s.database.as_deref().unwrap_or("?"),
                src.dbname
            ),
        ),
        Some(s) if s.wal_status.as_deref() == Some("lost") => CheckResult::new(
            name,
            &label,
            Status::Fail,
            "has lost WAL it needed (wal_status = lost): drop and recreate it, and reset the checkpoint (`outboxd checkpoint reset`)",
        ),
        Some(s) => {
            let at = format!(
                "pgoutput, confirmed_flush_lsn {}, restart_lsn {}",
                s.confirmed_flush_lsn
                    .map(|l| l.to_string())
                    .unwrap_or_else(|| "-".into()),
                s.restart_lsn
                    .map(|l| l.to_string())
                    .unwrap_or_else(|| "-".into())
            );
            match s.active_pid {
                Some(pid) => CheckResult::new(
                    name,
                    &label,
                    Status::Warn,
                    format!(
                        "{at}; in use by {} (fine if that is this connector running)",
                        catalog::describe_pid(client, pid).await
                    ),
                ),
                None => CheckResult::new(name, &label, Status::Pass, at),
            }
        }
    });
    out
}

async fn publication(
    name: &str,
    client: &tokio_postgres::Client,
    cfg: &ConnectorConfig,
    src: &PostgresSourceConfig,
) -> Vec<CheckResult> {
    let label = format!("publication {}", src.publication_name);
    let info = match catalog::publication_info(client, src, &src.publication_name).await {
        Ok(i) => i,
        Err(f) => return vec![CheckResult::new(name, &label, Status::Fail, f.to_string())],
    };
    // Can the role create (or extend) a FOR TABLE publication: CREATE on the database and
    // ownership (membership in the owner role) of every outbox table.
    let may_create = async {
        let mut ok = client
            .query_one(
                "SELECT has_database_privilege(current_database(), 'CREATE')",
                &[],
            )
            .await
            .map(|r| r.get::<_, bool>(0))
            .unwrap_or(false);
        for t in &cfg.tables {
            let owns = client
                .query_opt(
                    "SELECT pg_has_role(c.relowner, 'USAGE') FROM pg_class c \
                     JOIN pg_namespace n ON n.oid = c.relnamespace \
                     WHERE n.nspname = $1 AND c.relname = $2",
                    &[&t.schema, &t.name],
                )
                .await
                .ok()
                .flatten()
                .map(|r| r.get::<_, bool>(0))
                .unwrap_or(false);
            ok &= owns;
        }
        ok
    };
    let sql = catalog::create_publication_sql(src, &cfg.tables, false);
    match info {
        None => match src.publication_autocreate {
            PublicationAutocreate::Disabled => vec![CheckResult::new(
                name,
                &label,
                Status::Fail,
                format!("does not exist and publication_autocreate is disabled; run `{sql}`"),
            )],
            PublicationAutocreate::AllTables => vec![CheckResult::new(
                name,
                &label,
                Status::Warn,
                "does not exist; the connector creates it FOR ALL TABLES (needs a superuser)",
            )],
            PublicationAutocreate::Filtered => {
                if may_create.await {
                    vec![CheckResult::new(
                        name,
                        &label,
                        Status::Pass,
                        format!("does not exist yet; the connector creates it: {sql}"),
                    )]
                } else {
                    vec![CheckResult::new(
                        name,
                        &label,
                        Status::Fail,
                        format!(
                            "does not exist and {} may not create it (FOR TABLE needs CREATE on \
                             the database and ownership of the tables); have the owner run \
                             `{sql}`",
                            src.user
                        ),
                    )]
                }
            }
        },
        Some(p) => {
            let mut out = Vec::new();
            if !p.pubinsert {
                out.push(CheckResult::new(
                    name,
                    &label,
                    Status::Fail,
                    format!(
                        "does not publish INSERTs; ALTER PUBLICATION {} SET (publish = 'insert')",
                        quote_ident(&src.publication_name)
                    ),
                ));
                return out;
            }
            let missing: Vec<String> = cfg
                .tables
                .iter()
                .filter(|t| !p.all_tables && !p.tables.contains(t))
                .map(|t| t.to_string())
                .collect();
            let ops: Vec<&str> = [
                ("insert", p.pubinsert),
                ("update", p.pubupdate),
                ("delete", p.pubdelete),
            ]
            .iter()
            .filter(|(_, on)| *on)
            .map(|(op, _)| *op)
            .collect();
            if missing.is_empty() {
                out.push(CheckResult::new(
                    name,
                    &label,
                    Status::Pass,
                    format!(
                        "covers {} (publish = '{}')",
                        if p.all_tables {
                            "all tables".to_string()
                        } else {
                            cfg.tables
                                .iter()
                                .map(|t| t.to_string())
                                .collect::<Vec<_>>()
                                .join(", ")
                        },
                        ops.join(", ")
                    ),
                ));
            } else if src.publication_autocreate == PublicationAutocreate::Filtered
                && may_create.await
            {
                out.push(CheckResult::new(
                    name,
                    &label,
                    Status::Warn,
                    format!(
                        "does not cover {}; the connector adds them (ALTER PUBLICATION .. ADD TABLE)",
                        missing.join(", ")
                    ),
                ));
            } else {
                out.push(CheckResult::new(
                    name,
                    &label,
                    Status::Fail,
                    format!(
                        "does not cover {}; ALTER PUBLICATION {} ADD TABLE {}",
                        missing.join(", "),
                        quote_ident(&src.publication_name),
                        missing.join(", ")
                    ),
                ));
            }
            out
        }
    }
}

async fn tables(
    name: &str,
    client: &tokio_postgres::Client,
    cfg: &ConnectorConfig,
    src: &PostgresSourceConfig,
) -> Vec<CheckResult> {
    let needed = cfg.router.columns_read();
    let mut out = Vec::new();
    for t in &cfg.tables {
        let label = format!("table {t}");
        let cols = client
            .query(
                "SELECT a.attname::text, format_type(a.atttypid, a.atttypmod) \
                 FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid \
                 JOIN pg_namespace n ON n.oid = c.relnamespace \
                 WHERE n.nspname = $1 AND c.relname = $2 AND c.relkind IN ('r', 'p') \
                   AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum",
                &[&t.schema, &t.name],
            )
            .await;
        let cols: Vec<(String, String)> = match cols {
            Ok(rows) => rows.iter().map(|r| (r.get(0), r.get(1))).collect(),
            Err(e) => {
                out.push(CheckResult::new(
                    name,
                    &label,
                    Status::Fail,
                    crate::source::postgres::PgError::from_sql(&e, src).to_string(),
                ));
                continue;
            }
        };
        if cols.is_empty() {
            out.push(CheckResult::new(
                name,
                &label,
                Status::Fail,
                format!(
                    "not found in database {}; create it (migrations/postgres) or fix {}",
                    src.dbname,
                    src.format.key("tables", "table.include.list")
                ),
            ));
            continue;
        }
        let missing: Vec<&str> = needed
            .iter()
            .copied()
            .filter(|c| !cols.iter().any(|(n, _)| n == c))
            .collect();
        if !missing.is_empty() {
            out.push(CheckResult::new(name, &label, Status::Fail, format!(
                "lacks column(s) {} that the router reads; add them or set the table.field.event.* / route.by.field options",
                missing.join(", ")
            )));
            continue;
        }
        let payload_type = cols
            .iter()
            .find(|(n, _)| *n == cfg.router.field_event_payload)
            .map(|(_, t)| t.as_str())
            .unwrap_or("?");
        let note = if payload_type == "jsonb" {
            " (jsonb: record values are jsonb's normalised text; use json or text to keep the bytes as written)"
        } else {
            ""
        };
        out.push(CheckResult::new(
            name,
            &label,
            Status::Pass,
            format!("{} columns, payload {payload_type}{note}", cols.len()),
        ));
    }
    out
}

/// What `outboxd status` shows for a PostgreSQL connector.
#[derive(Debug, Clone)]
pub struct StatusReport {
    /// The server's current WAL write position.
    pub current: SourcePosition,
    /// The slot's figures (`confirmed_flush_lsn`, `restart_lsn`, lag in bytes, holder).
    pub slot: serde_json::Value,
    /// The slot as read (`None`: it does not exist), for [`gap`] with the checkpoint read
    /// after it.
    pub slot_info: Option<catalog::SlotInfo>,
}

/// The server's current WAL position and the slot's figures, for `outboxd status`. The
/// caller reads the checkpoint afterwards and compares ([`gap`]): a running relay confirms
/// to the slot only what it has stored, so a checkpoint read after the slot is never
/// behind the slot's `confirmed_flush_lsn` unless the slot really moved past it.
pub async fn status(
    src: &PostgresSourceConfig,
) -> Result<StatusReport, crate::source::postgres::PgError> {
    let client = catalog::connect(src).await?;
    let current = catalog::current_wal_lsn(&client, src).await?;
    let slot = catalog::slot_info(&client, src, &src.slot_name).await?;
    let lag = |l: Option<Lsn>| l.map(|l| current.0.saturating_sub(l.0));
    let slot_json = match &slot {
        None => serde_json::json!({"name": src.slot_name, "exists": false}),
        Some(s) => serde_json::json!({
            "name": src.slot_name,
            "exists": true,
            "active_pid": s.active_pid,
            "confirmed_flush_lsn": s.confirmed_flush_lsn.map(|l| l.to_string()),
            "restart_lsn": s.restart_lsn.map(|l| l.to_string()),
            "wal_status": s.wal_status,
            "lag_bytes": lag(s.confirmed_flush_lsn),
            "retained_bytes": lag(s.restart_lsn),
        }),
    };
    Ok(StatusReport {
        current: SourcePosition::Lsn(current),
        slot: slot_json,
        slot_info: slot,
    })
}
