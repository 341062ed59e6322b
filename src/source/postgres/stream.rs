//! The PostgreSQL session: the logical replication stream over `pgwire-replication`.
//!
//! # What the stream is asked for
//!
//! `START_REPLICATION SLOT <slot> LOGICAL <start> (proto_version '1', publication_names
//! '<publication>', messages 'true')` (pgwire-replication always asks for messages), with the
//! session settings the value decoder relies on pinned in the startup `options`
//! (`DateStyle=ISO`, `TimeZone=UTC`, `bytea_output=hex`).
//!
//! pgwire-replication parses Begin, Commit and Message itself; the session hands them to the
//! adapter as they are, and every other pgoutput message (forwarded as the raw `XLogData`
//! payload) through [`super::pgoutput::decode`].
//!
//! # Where the stream starts, and why the flush LSN lags
//!
//! * With a checkpoint: at the checkpoint LSN. The server starts decoding at
//!   `max(start, confirmed_flush_lsn)` and skips transactions whose commit record starts
//!   before it; the adapter skips them as well, so a slot that replays delivers nothing twice.
//!   A slot confirmed *past* the checkpoint (or missing, or with lost WAL) would silently
//!   skip what lies in between, so that is a definite error
//!   ([`super::error::PgError::CheckpointLost`]), and a missing slot is not re-created.
//! * Without one: at the slot's `confirmed_flush_lsn` (for a slot created now, its consistent
//!   point: only transactions committed from now on).
//! * After a lost connection: at the last position handed to the pipeline.
//!
//! The flush LSN confirmed to the server (standby status update: write = flush = apply,
//! pgwire-replication reports one applied position) is the last position the pipeline
//! **durably checkpointed** — everything before it acknowledged by Kafka — published to this
//! session on a `watch` channel. It is sent every `status_interval` when it moved, at once when
//! the server asks for a reply, and on idle wakeups. Positions the session merely received are
//! never confirmed, so a crash (or Kafka being down) leaves the slot where a restart must
//! resume; the price is WAL retained for the time between delivery and checkpoint.
//!
//! While the outbox is idle the walsender sends keepalives carrying how far it has read WAL
//! (it does so whenever our confirmed position is behind it). The adapter turns those, between
//! transactions, into [`crate::event::SourceEvent::Progress`]; once checkpointed they are
//! confirmed, so WAL written to other tables does not stay pinned by an idle outbox.
//!
//! # Whether the publication still carries the outbox
//!
//! Rows committed while the publication does not carry an outbox table are never sent, and
//! no later fix brings them back out of the slot (pgoutput decodes with the publication of
//! the change's time). The session keeps its SQL connection and reads the coverage every
//! `status_interval` (one small catalog query, [`super::catalog::coverage`]); the flush LSN
//! confirmed is the checkpointed one, but never beyond the WAL position the previous read
//! proved covered ([`Watch::proven`]: the slot lags by one to two intervals more). A read
//! that finds the outbox not carried — the table dropped, renamed, removed from the
//! publication, or removed and added back; the publication dropped; INSERTs or
//! `publish_via_partition_root` switched off — stops the connector, naming publication and
//! table. The checkpoint itself may have moved past that point (keepalive progress): that
//! loses nothing more, since what the publication did not carry cannot be decoded from any
//! position.
//!
//! A dropped publication also makes pgoutput fail at the first change written while it did
//! not exist (SQLSTATE 42704, at every restart: PostgreSQL 15 has no way past it but to start
//! after it): [`PgError::PublicationNotInWal`] says how to step past with `outboxd checkpoint
//! set`, to where this session created the publication again when it did.
//!
//! # Publication: INSERTs only
//!
//! A publication outboxd creates publishes INSERTs only (`WITH (publish = 'insert',
//! publish_via_partition_root = true)`: the rows of a partitioned outbox come out as its
//! own), in `filtered` mode for the outbox tables only: UPDATEs and DELETEs of outbox rows
//! never reach outboxd, so `table.op.invalid.behavior` has nothing to act on (the
//! insert-then-delete cleanup pattern costs nothing). A publication the operator created that
//! also publishes UPDATE/DELETE works too: those changes then go to the router, which drops
//! DELETEs and applies `table.op.invalid.behavior` to UPDATEs, as on MySQL.
//!
//! # Server version
//!
//! PostgreSQL 14 or later: pgwire-replication always asks pgoutput for logical decoding
//! messages (`messages 'true'`), an option PostgreSQL 14 introduced.
//!
//! # Errors
//!
//! Transient (reconnect with backoff from the last handed-on position): connection lost,
//! server restarting, a slot still held by our own previous session. Definite (the connector
//! stops with what to change): `wal_level` not logical, a role without `REPLICATION`, no free
//! slot, a slot held by another process (named by pid), a missing outbox table or
//! publication that may not be created, a publication that stopped carrying the outbox, a
//! slot for another plugin or database, lost WAL, undecodable data. See
//! [`super::error::PgError::class`].

use std::collections::HashSet;
use std::time::Duration;

use pgwire_replication::{ReplicationClient, ReplicationConfig, ReplicationEvent};
use tokio::sync::watch;

use super::adapter::PgOutboxAdapter;
use super::catalog;
use super::catalog::coverage::{Coverage, Watch};
use super::error::{where_, PgError};
use super::pgoutput;
use crate::config::PostgresSourceConfig;
use crate::event::{SourceEvent, TableName};
use crate::position::{Lsn, SourcePosition};
use crate::requirement;
use crate::source::SourceError;
use crate::source::{Source, SourceContext, Stop};

/// Events buffered between the replication worker and the session.
const REPLICATION_BUFFER: usize = 1024;
/// Session settings the value decoder relies on.
const SESSION_OPTIONS: &str =
    "-c datestyle=ISO,YMD -c timezone=UTC -c bytea_output=hex -c extra_float_digits=3";

/// A PostgreSQL source: one logical replication slot, filtered by a publication to the
/// outbox tables, plus logical decoding messages with the configured prefixes.
pub struct PgSource {
    cfg: PostgresSourceConfig,
    tables: Vec<TableName>,
    /// The last coverage read that found the outbox carried, kept across the sessions of
    /// one run of the connector: a session's first read is compared with it.
    coverage: Option<Coverage>,
}

impl PgSource {
    /// The source of database `cfg`, keeping the changes of `tables`.
    pub fn new(cfg: PostgresSourceConfig, tables: &[TableName]) -> Self {
        Self {
            cfg,
            tables: tables.to_vec(),
            coverage: None,
        }
    }
}

impl Source for PgSource {
    fn stream_name(&self) -> &'static str {
        "PostgreSQL replication"
    }

    async fn session(&mut self, ctx: &mut SourceContext) -> Result<(), SourceError> {
        Stop::session(self.stream(ctx).await)
    }
}

/// The latest durably checkpointed LSN.
fn checkpointed_lsn(rx: &watch::Receiver<Option<SourcePosition>>) -> Option<Lsn> {
    match &*rx.borrow() {
        Some(SourcePosition::Lsn(l)) => Some(*l),
        _ => None,
    }
}

/// The replication client, ended at once when the session ends (a failure, or the connector
/// stopping the source): pgwire-replication's own drop only asks its worker to stop
/// gracefully (CopyDone, then read until the server's answer), which left the walsender
/// attached to the slot for seconds while the next session waited for the slot to be free.
/// Nothing depends on the graceful end: positions are confirmed explicitly, and the server
/// resumes from the confirmed one.
struct EndOnDrop(ReplicationClient);

impl std::ops::Deref for EndOnDrop {
    type Target = ReplicationClient;
    fn deref(&self) -> &ReplicationClient {
        &self.0
    }
}

impl std::ops::DerefMut for EndOnDrop {
    fn deref_mut(&mut self) -> &mut ReplicationClient {
        &mut self.0
    }
}

impl Drop for EndOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Confirms the latest checkpointed LSN to the server (sent with the next status update),
/// but never beyond `proven`, the WAL position up to which the publication is known to have
/// carried the outbox ([`Watch::proven`]).
fn confirm(client: &ReplicationClient, rx: &watch::Receiver<Option<SourcePosition>>, proven: Lsn) {
    if let Some(l) = checkpointed_lsn(rx) {
        client.update_applied_lsn(pgwire_replication::Lsn::from_u64(l.0.min(proven.0)));
    }
}

impl PgSource {
    async fn stream(&mut self, ctx: &mut SourceContext) -> Result<(), Stop<PgError>> {
        let cfg = &self.cfg;
        let connector = ctx.connector.clone();
        let position = match ctx.out.resume_position() {
            None => None,
            Some(SourcePosition::Lsn(l)) => Some(*l),
            Some(other) => {
                return Err(PgError::NotAnLsn {
                    position: other.clone(),
                }
                .into())
            }
        };
        let (sql, negotiated) = catalog::connect_negotiated(cfg).await?;
        let info = catalog::server_info(&sql, cfg).await?;
        let mut checks = catalog::requirements(&info, &connector);
        for t in &self.tables {
            let columns = catalog::table_columns(&sql, cfg, t).await?;
            checks.push(catalog::table_check(&connector, cfg, t, &columns, None));
        }
        requirement::enforce(checks).map_err(PgError::from)?;
        let ensured =
            catalog::publication::ensure(&sql, cfg, &connector, &self.tables, info.version_num)
                .await?;
        for (table, filter) in ensured.coverage.row_filters() {
            tracing::warn!(connector = %connector, "{}", catalog::coverage::describe_row_filter(&cfg.publication_name, table, filter));
        }
        // With a position to resume at, a slot that cannot serve it (missing, confirmed past
        // it, WAL lost) is a definite error here, never a new slot past the gap.
        let slot =
            catalog::slot::ensure_slot(&sql, cfg, &info, &connector, position, &ctx.lease).await?;
        let column_catalog = super::types::column_catalog(&sql, &self.tables).await;

        let confirmed = slot.confirmed_flush_lsn.unwrap_or_default();
        let start = position.unwrap_or(confirmed);
        // The previous session's last read is the baseline: a lapse between the sessions
        // (a table removed and added back meanwhile, by us in `ensure` included) is one too.
        if let Some(previous) = &self.coverage {
            if let Some(lapse) = ensured.coverage.lapse_since(previous) {
                return Err(lapse.error(&connector, cfg, confirmed, &previous.at).into());
            }
        }
        self.coverage = Some(ensured.coverage.clone());
        let mut coverage = Watch::new(ensured.coverage, start);
        let acked = checkpointed_lsn(&ctx.checkpointed)
            .unwrap_or_default()
            .min(coverage.proven());
        let application_name: String = format!("outboxd {connector}").chars().take(63).collect();
        let rcfg = ReplicationConfig::new(
            cfg.host.clone(),
            cfg.user.clone(),
            cfg.password.expose().to_string(),
            cfg.dbname.clone(),
            cfg.slot_name.clone(),
            cfg.publication_name.clone(),
        )
        .with_port(cfg.port)
        .with_tls(super::tls::replication_tls(&cfg.tls, &negotiated))
        .with_start_lsn(pgwire_replication::Lsn::from_u64(start.0))
        .with_ack_lsn(pgwire_replication::Lsn::from_u64(acked.0))
        .with_status_interval(cfg.status_interval)
        .with_wakeup_interval(cfg.status_interval.min(Duration::from_secs(10)))
        .with_buffer_size(REPLICATION_BUFFER)
        .with_options(SESSION_OPTIONS)
        .with_application_name(application_name);
        tracing::info!(connector = %connector, slot = %cfg.slot_name, publication = %cfg.publication_name, start = %start, server = %info.version, "starting logical replication");
        let client = match tokio::time::timeout(cfg.connect_timeout, async {
            let mut c = ReplicationClient::connect(rcfg).await?;
            c.wait_started().await?;
            Ok::<_, pgwire_replication::PgWireError>(c)
        })
        .await
        {
            Err(_) => {
                return Err(PgError::Timeout {
                    what: "starting replication at",
                    at: where_(cfg),
                    after: cfg.connect_timeout,
                }
                .into())
            }
            Ok(Err(e)) => {
                return Err(not_in_wal(
                    PgError::from_replication(&e, cfg),
                    &connector,
                    cfg,
                    start,
                    ensured.created_at,
                )
                .into())
            }
            Ok(Ok(c)) => c,
        };
        let mut client = EndOnDrop(client);
        ctx.streaming();
        // Streaming: from now on (this and every later session of the connector under this
        // lease) a walsender on the slot is not a previous owner's.
        ctx.lease.streaming();
        confirm(&client, &ctx.checkpointed, coverage.proven());

        let tables: HashSet<TableName> = self.tables.iter().cloned().collect();
        let mut adapter = PgOutboxAdapter::new(tables, cfg.message_prefixes.clone(), start)
            .with_all_prefixes(cfg.all_message_prefixes)
            .with_catalog(column_catalog);
        adapter.set_partitions(coverage.last().partitions());
        let mut check = tokio::time::interval_at(
            tokio::time::Instant::now() + cfg.status_interval,
            cfg.status_interval,
        );
        check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut out: Vec<SourceEvent> = Vec::new();
        // Without a checkpoint, the position streaming starts from is the first one: hand it
        // on at once, so it is checkpointed before anything else happens (the server's next
        // keepalive can be seconds away, and a relay stopped before it would start over at
        // whatever the slot says then).
        if position.is_none() && start.0 != 0 {
            out.push(SourceEvent::Progress {
                position: SourcePosition::Lsn(start),
            });
        }
        loop {
            for ev in out.drain(..) {
                // Wait for room in the pipeline, confirming checkpoints meanwhile.
                loop {
                    tokio::select! {
                        permit = ctx.out.reserve() => {
                            permit?.send(ev);
                            break;
                        }
                        changed = ctx.checkpointed.changed() => {
                            if changed.is_err() {
                                return Ok(());
                            }
                            confirm(&client, &ctx.checkpointed, coverage.proven());
                        }
                    }
                }
            }
            tokio::select! {
                biased;
                changed = ctx.checkpointed.changed() => {
                    if changed.is_err() {
                        return Ok(());
                    }
                    confirm(&client, &ctx.checkpointed, coverage.proven());
                }
                _ = check.tick() => {
                    let now = Coverage::read(&sql, cfg, &self.tables, info.version_num).await?;
                    let since = coverage.last().at.clone();
                    if let Err(lapse) = coverage.observe(now) {
                        return Err(lapse.error(&connector, cfg, coverage.proven(), &since).into());
                    }
                    self.coverage = Some(coverage.last().clone());
                    adapter.set_partitions(coverage.last().partitions());
                    confirm(&client, &ctx.checkpointed, coverage.proven());
                }
                ev = client.recv() => {
                    let ev = match ev {
                        Err(e) => {
                            return Err(not_in_wal(
                                PgError::from_replication(&e, cfg),
                                &connector,
                                cfg,
                                adapter.last_position(),
                                ensured.created_at,
                            )
                            .into())
                        }
                        Ok(None) => return Err(PgError::StreamEnded.into()),
                        Ok(Some(ev)) => ev,
                    };
                    on_event(ev, &mut adapter, &mut out)?;
                }
            }
        }
    }
}

/// `e`, or, when it is pgoutput's `publication "..." does not exist` (SQLSTATE 42704: a
/// change written while the publication did not exist), [`PgError::PublicationNotInWal`]
/// with what to do: connector `connector` handed on everything up to `after`; this session
/// created the publication at `created_at`, if it did (where to step past to, when that is
/// after `after`: a publication this session created and someone dropped later is no
/// help).
fn not_in_wal(
    e: PgError,
    connector: &str,
    cfg: &PostgresSourceConfig,
    after: Lsn,
    created_at: Option<Lsn>,
) -> PgError {
    match e {
        PgError::Replication {
            message,
            sqlstate: Some(state),
            ..
        } if state == tokio_postgres::error::SqlState::UNDEFINED_OBJECT
            && message.starts_with("publication ") =>
        {
            PgError::PublicationNotInWal {
                connector: connector.to_string(),
                publication: cfg.publication_name.clone(),
                after,
                created_at: created_at.filter(|c| *c > after),
                message,
            }
        }
        other => other,
    }
}

/// Hands one replication event to the adapter.
fn on_event(
    ev: ReplicationEvent,
    adapter: &mut PgOutboxAdapter,
    out: &mut Vec<SourceEvent>,
) -> Result<(), PgError> {
    let lsn = |l: pgwire_replication::Lsn| Lsn(l.as_u64());
    let (kind, result) = match ev {
        ReplicationEvent::KeepAlive { wal_end, .. } => {
            adapter.on_keepalive(lsn(wal_end), out);
            return Ok(());
        }
        ReplicationEvent::Begin {
            final_lsn,
            commit_time_micros,
            ..
        } => (
            "Begin",
            adapter.on_begin(lsn(final_lsn), commit_time_micros),
        ),
        ReplicationEvent::Commit {
            lsn: commit_lsn,
            end_lsn,
            commit_time_micros,
        } => (
            "Commit",
            adapter.on_commit(lsn(commit_lsn), lsn(end_lsn), commit_time_micros, out),
        ),
        ReplicationEvent::Message {
            transactional,
            lsn: at,
            prefix,
            content,
        } => (
            "Message",
            adapter.on_logical_message(transactional, lsn(at), &prefix, &content, out),
        ),
        ReplicationEvent::XLogData {
            wal_start, data, ..
        } => {
            let msg = pgoutput::decode(&data).map_err(|source| PgError::Decode {
                lsn: lsn(wal_start),
                source,
            })?;
            (msg.kind(), adapter.on_message(msg, out))
        }
        ReplicationEvent::StoppedAt { .. } => return Err(PgError::StreamEnded),
    };
    result.map_err(|source| PgError::Adapter {
        message: kind,
        after: adapter.last_position(),
        source: Box::new(source),
    })
}
