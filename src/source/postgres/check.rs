//! PostgreSQL preflight: the requirement checks `run` applies (server settings and role, the
//! outbox tables, the publication and the slot: [`catalog`]), plus what only `check` reads:
//! the connection's TLS, free replication slots, whether the role may create the
//! publication, who streams from the slot, the columns the router reads, and whether the slot
//! can still serve the stored checkpoint.
//!
//! Checks only read: a missing publication or slot that the connector would create is a
//! pass or warning that says so (with whether the role may create it), not a failure.

use crate::config::{ConnectorConfig, PostgresSourceConfig};
use crate::position::SourcePosition;
use crate::requirement::{CheckResult, Status};
use crate::source::check::{step, StoredCheckpoint};
use crate::source::postgres::catalog::coverage::{self, Coverage};
use crate::source::postgres::catalog::{self, publication, slot};
use crate::source::postgres::PgError;

/// Runs every PostgreSQL check for connector `cfg` with source `src`; the `stored`
/// checkpoint is read after the slot, and checked against it.
pub async fn check(
    cfg: &ConnectorConfig,
    src: &PostgresSourceConfig,
    stored: &StoredCheckpoint,
) -> Vec<CheckResult> {
    let name = cfg.name.as_str();
    let mut out = Vec::new();
    let Some((client, negotiated)) = step(
        &mut out,
        name,
        "connect",
        catalog::connect_negotiated(src).await,
    ) else {
        return out;
    };
    out.push(CheckResult::new(
        name,
        "connect",
        Status::Pass,
        format!("{}:{}/{} as {}", src.host, src.port, src.dbname, src.user),
    ));
    let names = crate::config::tls::PgTlsNames::of(src.format);
    out.push(crate::source::check::tls_result(
        name,
        &negotiated.facts,
        names.mode,
        names.verify_full,
    ));
    let Some(info) = step(
        &mut out,
        name,
        "server settings",
        catalog::server_info(&client, src).await,
    ) else {
        return out;
    };
    out.extend(catalog::requirements(&info, name));
    // The slot first, the checkpoint after it: a running relay confirms to the slot only
    // what it has stored, so this order never shows the slot past a checkpoint that the
    // relay has in fact reached.
    let found = slot::SlotState::read(&client, src).await;
    let checkpoint = stored.get().ok();
    let has_checkpoint = checkpoint
        .flatten()
        .is_some_and(|cp| matches!(cp.position, SourcePosition::Lsn(_)));
    out.extend(slot_checks(name, &client, src, &info, &found, has_checkpoint).await);
    let gap = checkpoint.flatten().and_then(|cp| match &found {
        Ok(s) => s.gap(&cp.position),
        Err(f) => Some(format!("could not read the slot: {f}")),
    });
    out.extend(crate::source::check::checkpoint_result(
        name,
        checkpoint,
        gap,
        "streams from the slot's confirmed_flush_lsn (a slot it creates: from the WAL \
         position at creation)",
    ));
    out.push(publication_check(name, &client, cfg, src, &info, has_checkpoint).await);
    for t in &cfg.tables {
        out.push(match catalog::table_columns(&client, src, t).await {
            Ok(columns) => catalog::table_check(name, src, t, &columns, Some(&cfg.router)),
            Err(f) => CheckResult::new(name, &format!("table {t}"), Status::Fail, f.to_string()),
        });
    }
    if src.all_message_prefixes {
        out.push(CheckResult::new(
            name,
            "message prefixes",
            Status::Pass,
            "every pg_logical_emit_message is routed as an outbox event (DecodeLogicalDecodingMessageContent without message.prefix.include.list)",
        ));
    } else if !src.message_prefixes.is_empty() {
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

/// The slot checks: free `max_replication_slots` (for a slot still to be created), then
/// [`slot::slot_check`], a warning when a process streams from the slot.
async fn slot_checks(
    name: &str,
    client: &tokio_postgres::Client,
    src: &PostgresSourceConfig,
    info: &catalog::ServerInfo,
    found: &Result<slot::SlotState, PgError>,
    has_checkpoint: bool,
) -> Vec<CheckResult> {
    let found = match found {
        Ok(s) => s.info.as_ref(),
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
    let capacity = match (found, free) {
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
    };
    let mut check = slot::slot_check(name, src, found, has_checkpoint);
    if let (Status::Pass, Some(pid)) = (&check.status, found.and_then(|s| s.active_pid)) {
        check.status = Status::Warn;
        check.detail = format!(
            "{}; in use by {} (fine if that is this connector running)",
            check.detail,
            slot::describe_pid(client, pid).await
        );
    }
    vec![capacity, check]
}

/// The publication check: [`publication::creation`] / [`publication::coverage`] on a
/// [`Coverage`] read, and, where the connector would create or change the publication,
/// whether its role may. `has_checkpoint`: the connector streamed before, so a publication
/// that is missing or does not carry the outbox now means rows committed meanwhile are not in
/// the slot's stream.
async fn publication_check(
    name: &str,
    client: &tokio_postgres::Client,
    cfg: &ConnectorConfig,
    src: &PostgresSourceConfig,
    info: &catalog::ServerInfo,
    has_checkpoint: bool,
) -> CheckResult {
    let label = format!("publication {}", src.publication_name);
    let tables = &cfg.tables;
    let cov = match Coverage::read(client, src, tables, info.version_num).await {
        Ok(c) => c,
        Err(f) => return CheckResult::new(name, &label, Status::Fail, f.to_string()),
    };
    let not_in_stream = if has_checkpoint {
        " The connector has a checkpoint: outbox rows committed since it streamed while the \
         publication did not carry them are not in the slot's stream (PostgreSQL decodes each \
         change with the publication of its time) and are not delivered; re-insert those that \
         are not in Kafka."
    } else {
        ""
    };
    let Some(p) = &cov.publication else {
        return match publication::creation(name, src, tables) {
            Err(fail) => fail,
            Ok(all_tables) => {
                let sql = publication::create_sql(src, tables, all_tables);
                let may = all_tables || may_create(client, cfg).await;
                let gone = if has_checkpoint {
                    " It existed when the connector streamed (dropped since, or \
                     publication_name changed): the changes written while it did not exist \
                     cannot be decoded through it, and the stream stops at the first of them, \
                     saying how to step past them."
                } else {
                    ""
                };
                match (may, all_tables) {
                    (true, _) => CheckResult::new(
                        name,
                        &label,
                        if has_checkpoint || all_tables {
                            Status::Warn
                        } else {
                            Status::Pass
                        },
                        format!(
                            "does not exist{}; the connector creates it: {sql}{}{gone}",
                            if has_checkpoint { "" } else { " yet" },
                            if all_tables {
                                " (needs a superuser)"
                            } else {
                                ""
                            }
                        ),
                    ),
                    (false, _) => CheckResult::new(
                        name,
                        &label,
                        Status::Fail,
                        format!(
                            "does not exist and {} may not create it (FOR TABLE needs CREATE on \
                             the database and ownership of the tables); have the owner run \
                             `{sql}`{gone}",
                            src.user
                        ),
                    ),
                }
            }
        };
    };
    match publication::coverage(name, src, &cov) {
        Err(mut fail) => {
            fail.detail.push_str(not_in_stream);
            fail
        }
        Ok(repairs) if repairs.is_empty() => {
            let ops: Vec<&str> = [
                ("insert", p.insert),
                ("update", p.update),
                ("delete", p.delete),
            ]
            .iter()
            .filter(|(_, on)| *on)
            .map(|(op, _)| *op)
            .collect();
            let covered = if p.all_tables {
                "all tables".to_string()
            } else {
                tables
                    .iter()
                    .map(|t| t.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            let mut detail = format!(
                "covers {covered} (publish = '{}'{})",
                ops.join(", "),
                if p.via_root {
                    ", publish_via_partition_root"
                } else {
                    ""
                }
            );
            let filters = cov.row_filters();
            for (t, filter) in &filters {
                detail.push_str("; but ");
                detail.push_str(&coverage::describe_row_filter(
                    &src.publication_name,
                    t,
                    filter,
                ));
            }
            let status = if filters.is_empty() {
                Status::Pass
            } else {
                Status::Warn
            };
            CheckResult::new(name, &label, status, detail)
        }
        Ok(repairs) if may_create(client, cfg).await => CheckResult::new(
            name,
            &label,
            Status::Warn,
            format!(
                "{}; the connector changes it when it starts: {}.{not_in_stream}",
                repairs.describe(src),
                repairs.statements(src).join("; ")
            ),
        ),
        Ok(repairs) => {
            let mut fail = publication::uncovered(name, src, &repairs);
            fail.detail.push_str(not_in_stream);
            fail
        }
    }
}

/// Whether the role can create (or extend) a FOR TABLE publication: CREATE on the database
/// and ownership (membership in the owner role) of every outbox table.
async fn may_create(client: &tokio_postgres::Client, cfg: &ConnectorConfig) -> bool {
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
}
