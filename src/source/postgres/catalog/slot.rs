//! The connector's replication slot: reading it, the requirement it must meet (one
//! [`slot_check`] for `run` and `check`), whether it can still serve a checkpoint
//! ([`checkpoint_gap`]), taking it for a stream ([`ensure_slot`]), and what `outboxd status`
//! shows of it ([`status`]).

use std::time::{Duration, Instant};

use tokio_postgres::error::SqlState;

use super::{parse_lsn, ServerInfo};
use crate::config::PostgresSourceConfig;
use crate::lease::Lease;
use crate::position::{Lsn, SourcePosition};
use crate::requirement::{self, CheckResult, Status};
use crate::source::postgres::error::PgError;

/// How long a slot held by another process is waited for before that is a definite error
/// (a relay restarted right after `kill -9` finds its old walsender still exiting).
pub const SLOT_BUSY_WAIT: Duration = Duration::from_secs(10);

/// A row of `pg_replication_slots`.
#[derive(Debug, Clone)]
pub struct SlotInfo {
    /// Output plugin (`pgoutput`); `None` for a physical slot.
    pub plugin: Option<String>,
    /// `logical` or `physical`.
    pub slot_type: String,
    /// Database of a logical slot.
    pub database: Option<String>,
    /// PID of the process streaming from it, if any.
    pub active_pid: Option<i32>,
    /// Position confirmed by the consumer.
    pub confirmed_flush_lsn: Option<Lsn>,
    /// Oldest WAL the slot still needs.
    pub restart_lsn: Option<Lsn>,
    /// `reserved`, `extended`, `unreserved` or `lost`.
    pub wal_status: Option<String>,
}

/// Reads slot `name` from `pg_replication_slots`.
pub async fn slot_info(
    client: &tokio_postgres::Client,
    cfg: &PostgresSourceConfig,
    name: &str,
) -> Result<Option<SlotInfo>, PgError> {
    let Some(row) = client
        .query_opt(
            "SELECT plugin::text, slot_type, database::text, active_pid, \
                    confirmed_flush_lsn::text, restart_lsn::text, wal_status \
             FROM pg_replication_slots WHERE slot_name = $1",
            &[&name],
        )
        .await
        .map_err(|e| PgError::from_sql(&e, cfg))?
    else {
        return Ok(None);
    };
    Ok(Some(SlotInfo {
        plugin: row.get(0),
        slot_type: row.get(1),
        database: row.get(2),
        active_pid: row.get(3),
        confirmed_flush_lsn: parse_lsn(row.get(4))?,
        restart_lsn: parse_lsn(row.get(5))?,
        wal_status: row.get(6),
    }))
}

/// Who holds a slot: `pid N (application_name "x", client 1.2.3.4)`.
pub async fn describe_pid(client: &tokio_postgres::Client, pid: i32) -> String {
    let row = client
        .query_opt(
            "SELECT application_name, host(client_addr), usename::text FROM pg_stat_activity \
             WHERE pid = $1",
            &[&pid],
        )
        .await
        .ok()
        .flatten();
    match row {
        Some(r) => {
            let app: Option<String> = r.get(0);
            let addr: Option<String> = r.get(1);
            let user: Option<String> = r.get(2);
            format!(
                "pid {pid} (application_name {:?}, client {}, user {})",
                app.unwrap_or_default(),
                addr.as_deref().unwrap_or("local"),
                user.as_deref().unwrap_or("?")
            )
        }
        None => format!("pid {pid}"),
    }
}

/// Why slot `slot_name` (as `slot` describes it, `None` when it does not exist) can no
/// longer serve a connector whose checkpoint is at `checkpoint`, or `None` when it can.
///
/// A logical slot retains WAL from its `restart_lsn` and decodes from its
/// `confirmed_flush_lsn` on (PostgreSQL documentation, "Logical Decoding Concepts" and
/// `pg_replication_slots`); a stream asked to start before `confirmed_flush_lsn` silently
/// starts there. So the checkpoint can be served only when the slot exists, has not lost
/// WAL (`wal_status = lost`), and was not confirmed past the checkpoint.
pub fn checkpoint_gap(slot_name: &str, slot: Option<&SlotInfo>, checkpoint: Lsn) -> Option<String> {
    let Some(slot) = slot else {
        return Some(format!(
            "replication slot {slot_name:?} does not exist, but the connector's checkpoint is \
             at LSN {checkpoint}: the WAL written since then is no longer retained for this \
             connector (the slot was dropped, or this server is a failover standby or a \
             restore that does not have it)"
        ));
    };
    if slot.wal_status.as_deref() == Some("lost") {
        return Some(format!(
            "replication slot {slot_name:?} has lost WAL it needed (wal_status = lost: \
             max_slot_wal_keep_size was exceeded) and cannot serve the connector's checkpoint \
             at LSN {checkpoint}"
        ));
    }
    match slot.confirmed_flush_lsn {
        Some(confirmed) if confirmed > checkpoint => Some(format!(
            "replication slot {slot_name:?} was confirmed up to LSN {confirmed}, past the \
             connector's checkpoint at LSN {checkpoint} (another consumer of the slot, or the \
             checkpoint was set back): the server cannot send the transactions in between \
             any more"
        )),
        _ => None,
    }
}

/// The slot, created when missing and allowed, meeting [`slot_check`], and free (waiting up
/// to [`SLOT_BUSY_WAIT`] for a previous holder to go away).
///
/// With a `checkpoint` (the LSN the connector resumes at), a slot that cannot serve it
/// ([`checkpoint_gap`]) is a definite [`PgError::CheckpointLost`] and a missing slot is never
/// created: creating it would start past the gap. Without one the slot is created (when
/// `slot_autocreate` allows) and streaming starts at its consistent point.
///
/// `lease`: while a group member takes the connector over ([`Lease::taking_over`]: granted,
/// still held, not streamed yet), a walsender attached to the slot is the previous owner's
/// and is ended at once with `pg_terminate_backend` (allowed for the same role, or with
/// `pg_signal_backend`). No grace is given: the group coordinator assigns the connector only
/// once the previous owner has stopped it (its walsender is ending anyway) or has been
/// expelled from the group (dead, frozen, or cut off; its writes are fenced). A role that may
/// not end it gets a transient [`PgError::SlotHeld`] (retried) instead of the definite
/// [`PgError::SlotInUse`]. The lease is read again right before each `pg_terminate_backend`:
/// a member that lost the connector meanwhile never ends its successor's walsender.
pub async fn ensure_slot(
    client: &tokio_postgres::Client,
    cfg: &PostgresSourceConfig,
    info: &ServerInfo,
    connector: &str,
    checkpoint: Option<Lsn>,
    lease: &Lease,
) -> Result<SlotInfo, PgError> {
    let name = &cfg.slot_name;
    let found = slot_info(client, cfg, name).await?;
    if let Some(c) = checkpoint {
        if let Some(reason) = checkpoint_gap(name, found.as_ref(), c) {
            return Err(PgError::CheckpointLost {
                connector: connector.to_string(),
                checkpoint: c,
                reason,
            });
        }
    }
    requirement::enforce(vec![slot_check(
        connector,
        cfg,
        found.as_ref(),
        checkpoint.is_some(),
    )])?;
    let mut slot = match found {
        Some(s) => s,
        None => {
            let created = create_slot(client, cfg, info).await?;
            // Created by someone else meanwhile (DUPLICATE_OBJECT): it must fit as well.
            requirement::enforce(vec![slot_check(connector, cfg, Some(&created), false)])?;
            created
        }
    };
    let started = Instant::now();
    let deadline = started + SLOT_BUSY_WAIT;
    let mut ended: Option<i32> = None;
    let mut said_waiting = false;
    while let Some(pid) = slot.active_pid {
        let taking_over = lease.taking_over();
        if taking_over && ended != Some(pid) {
            let who = describe_pid(client, pid).await;
            match client
                .query_one("SELECT pg_terminate_backend($1)", &[&pid])
                .await
            {
                Ok(row) => {
                    let done: bool = row.get(0);
                    if done {
                        tracing::info!(slot = %name, "ended the previous owner's walsender on the slot: {who}");
                    }
                    ended = Some(pid);
                }
                Err(e) if e.code() == Some(&SqlState::INSUFFICIENT_PRIVILEGE) => {
                    return Err(PgError::SlotHeld {
                        slot: name.clone(),
                        holder: who,
                        user: cfg.user.clone(),
                    })
                }
                Err(e) => return Err(PgError::from_sql(&e, cfg)),
            }
        }
        if Instant::now() >= deadline {
            let who = describe_pid(client, pid).await;
            if taking_over {
                return Err(PgError::SlotHeld {
                    slot: name.clone(),
                    holder: who,
                    user: cfg.user.clone(),
                });
            }
            return Err(PgError::SlotInUse {
                slot: name.clone(),
                holder: who,
            });
        }
        if !taking_over && !said_waiting && started.elapsed() >= Duration::from_secs(1) {
            said_waiting = true;
            let who = describe_pid(client, pid).await;
            tracing::info!(slot = %name, "replication slot is in use by {who}; waiting up to {SLOT_BUSY_WAIT:?} for it to go (a previous session's walsender ending)");
        }
        // A walsender this connector just ended goes within milliseconds: look again soon.
        let step = if ended.is_some() { 50 } else { 500 };
        tokio::time::sleep(Duration::from_millis(step)).await;
        slot = slot_info(client, cfg, name)
            .await?
            .ok_or_else(|| PgError::Vanished {
                what: format!("replication slot {name:?}, waited for,"),
            })?;
    }
    Ok(slot)
}

/// The requirement on the connector's replication slot `slot` (as read; `None`: it does not
/// exist), one result named `slot <slot_name>`, the same for `run` (which creates a missing
/// slot when this passes) and `check` (which adds who streams from it): a missing slot passes
/// only when `slot_autocreate` is on and the connector has no checkpoint (`has_checkpoint`:
/// creating the slot then would start past the events since the checkpoint); a slot must be
/// a logical slot for pgoutput, in the connector's database, without lost WAL.
pub fn slot_check(
    connector: &str,
    cfg: &PostgresSourceConfig,
    slot: Option<&SlotInfo>,
    has_checkpoint: bool,
) -> CheckResult {
    let name = &cfg.slot_name;
    let label = format!("slot {name}");
    let fail = |detail: String| CheckResult::new(connector, &label, Status::Fail, detail);
    match slot {
        None if has_checkpoint => fail(format!(
            "replication slot {name:?} does not exist, but the connector has a checkpoint: the \
             connector will not create it past the gap (see the checkpoint check)"
        )),
        None if cfg.slot_autocreate => CheckResult::new(
            connector,
            &label,
            Status::Pass,
            "does not exist yet; the connector creates it at its first start (events from then \
             on are delivered)",
        ),
        None => fail(format!(
            "replication slot {name:?} does not exist and slot_autocreate is off; create it: \
             SELECT pg_create_logical_replication_slot('{name}', 'pgoutput')"
        )),
        Some(s) if s.slot_type != "logical" || s.plugin.as_deref() != Some("pgoutput") => {
            fail(format!(
                "replication slot {name:?} is a {} slot for plugin {:?}; outboxd needs a logical \
                 slot for pgoutput: drop it or choose another slot_name",
                s.slot_type,
                s.plugin.as_deref().unwrap_or("none")
            ))
        }
        Some(s) if s.database.as_deref() != Some(cfg.dbname.as_str()) => fail(format!(
            "replication slot {name:?} belongs to database {:?}, not {:?}; choose another \
             slot_name",
            s.database.as_deref().unwrap_or("?"),
            cfg.dbname
        )),
        Some(s) if s.wal_status.as_deref() == Some("lost") => fail(format!(
            "replication slot {name:?} has lost WAL it needed (wal_status = lost, \
             max_slot_wal_keep_size exceeded): events in between are gone; drop and recreate \
             the slot and reset the connector's checkpoint (`outboxd checkpoint reset`)"
        )),
        Some(s) => {
            let lsn = |l: Option<Lsn>| l.map(|l| l.to_string()).unwrap_or_else(|| "-".into());
            CheckResult::new(
                connector,
                &label,
                Status::Pass,
                format!(
                    "pgoutput, confirmed_flush_lsn {}, restart_lsn {}",
                    lsn(s.confirmed_flush_lsn),
                    lsn(s.restart_lsn)
                ),
            )
        }
    }
}

/// Creates the connector's slot for pgoutput (a slot created meanwhile by someone else is
/// taken as found), and reads it.
async fn create_slot(
    client: &tokio_postgres::Client,
    cfg: &PostgresSourceConfig,
    info: &ServerInfo,
) -> Result<SlotInfo, PgError> {
    let name = &cfg.slot_name;
    let created = client
        .query_one(
            "SELECT lsn::text FROM pg_create_logical_replication_slot($1, 'pgoutput')",
            &[name],
        )
        .await;
    match created {
        Ok(row) => {
            let lsn: String = row.get(0);
            tracing::info!(slot = %name, consistent_point = %lsn, "created the replication slot; events committed from here on are delivered");
        }
        Err(e) if e.code() == Some(&SqlState::DUPLICATE_OBJECT) => {}
        Err(e) if e.code() == Some(&SqlState::CONFIGURATION_LIMIT_EXCEEDED) => {
            let in_use: Vec<String> = client
                .query(
                    "SELECT slot_name::text || CASE WHEN active THEN ' (active)' ELSE '' END \
                     FROM pg_replication_slots ORDER BY slot_name LIMIT 20",
                    &[],
                )
                .await
                .map(|rows| rows.iter().map(|r| r.get(0)).collect())
                .unwrap_or_default();
            return Err(PgError::NoFreeSlot {
                slot: name.clone(),
                max: info.max_replication_slots,
                in_use: in_use.join(", "),
            });
        }
        Err(e) if e.code() == Some(&SqlState::INSUFFICIENT_PRIVILEGE) => {
            return Err(PgError::SlotCreateDenied {
                slot: name.clone(),
                user: cfg.user.clone(),
                message: e
                    .as_db_error()
                    .map(|d| d.message().to_string())
                    .unwrap_or_default(),
            })
        }
        Err(e) => return Err(PgError::from_sql(&e, cfg)),
    }
    slot_info(client, cfg, name)
        .await?
        .ok_or_else(|| PgError::Vanished {
            what: format!("replication slot {name:?} after creation"),
        })
}

/// The connector's slot as read at one moment (`info`: `None` when it does not exist): what
/// a checkpoint can still be streamed from.
#[derive(Debug, Clone)]
pub struct SlotState {
    /// `slot_name`.
    pub name: String,
    /// The slot's row, if it exists.
    pub info: Option<SlotInfo>,
}

impl SlotState {
    /// Reads the connector's slot.
    pub async fn read(
        client: &tokio_postgres::Client,
        cfg: &PostgresSourceConfig,
    ) -> Result<Self, PgError> {
        Ok(Self {
            name: cfg.slot_name.clone(),
            info: slot_info(client, cfg, &cfg.slot_name).await?,
        })
    }

    /// Why the slot cannot serve a checkpoint at `checkpoint`, or `None` when it can
    /// ([`checkpoint_gap`]; a position that is no LSN is a checkpoint written for another
    /// source).
    pub fn gap(&self, checkpoint: &SourcePosition) -> Option<String> {
        match checkpoint {
            SourcePosition::Lsn(l) => checkpoint_gap(&self.name, self.info.as_ref(), *l),
            other => Some(format!(
                "the checkpoint position {other} is not a PostgreSQL LSN (written for another \
                 source?)"
            )),
        }
    }
}

/// What `outboxd status` shows for a PostgreSQL connector.
#[derive(Debug, Clone)]
pub struct StatusReport {
    /// The server's current WAL write position.
    pub current: SourcePosition,
    /// The slot's figures (`confirmed_flush_lsn`, `restart_lsn`, lag in bytes, holder).
    pub figures: serde_json::Value,
    /// The slot as read, for [`SlotState::gap`] with the checkpoint read after it.
    pub slot: SlotState,
    /// The publication's figures: `name`, `exists`, `publish_via_partition_root`, and
    /// `uncovered` (what does not carry the outbox rows, one entry per problem).
    pub publication: serde_json::Value,
    /// Why the publication does not carry the outbox rows now, in a sentence (`None`: it
    /// does, or neither it nor the slot exists yet, which the first start creates).
    pub uncovered: Option<String>,
}

/// The server's current WAL position, the slot's figures and whether the publication
/// carries outbox `tables` ([`super::coverage`]), for `outboxd status`. The caller reads the
/// checkpoint afterwards and compares ([`SlotState::gap`]): a running relay confirms to the
/// slot only what it has stored, so a checkpoint read after the slot is never behind the
/// slot's `confirmed_flush_lsn` unless the slot really moved past it.
pub async fn status(
    cfg: &PostgresSourceConfig,
    tables: &[crate::event::TableName],
) -> Result<StatusReport, PgError> {
    let client = super::connect(cfg).await?;
    let current = super::current_wal_lsn(&client, cfg).await?;
    let slot = SlotState::read(&client, cfg).await?;
    let info = super::server_info(&client, cfg).await?;
    let coverage = super::coverage::Coverage::read(&client, cfg, tables, info.version_num).await?;
    let problems: Vec<String> = coverage
        .uncovered()
        .iter()
        .map(|u| u.describe(&cfg.publication_name))
        .collect();
    // Neither slot nor publication: a connector that never started (the first start
    // creates both).
    let fresh = coverage.publication.is_none() && slot.info.is_none();
    let uncovered = (!problems.is_empty() && !fresh).then(|| {
        format!(
            "{}: outbox rows committed while the publication does not carry them are not in \
             the slot's stream and are never delivered; `outboxd run` stops on this (`outboxd \
             check` says what to change)",
            problems.join("; ")
        )
    });
    let publication = serde_json::json!({
        "name": cfg.publication_name,
        "exists": coverage.publication.is_some(),
        "publish_via_partition_root": coverage.publication.as_ref().map(|p| p.via_root),
        "uncovered": problems,
    });
    let lag = |l: Option<Lsn>| l.map(|l| current.0.saturating_sub(l.0));
    let figures = match &slot.info {
        None => serde_json::json!({"name": slot.name, "exists": false}),
        Some(s) => serde_json::json!({
            "name": slot.name,
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
        figures,
        slot,
        publication,
        uncovered,
    })
}
