//! The binlog session: the replication connection to a MySQL/MariaDB server.
//!
//! Registers as a replica (`COM_REGISTER_SLAVE` with the configured `server_id`) and asks for
//! the binlog from the resume position:
//! - MariaDB GTID position: `SET @mariadb_slave_capability=4` (MARIA_SLAVE_CAPABILITY_GTID,
//!   so GTID events arrive as such), `SET @slave_connect_state='<pos>'`, then
//!   `COM_BINLOG_DUMP` (MariaDB KB, "GTID" and "COM_BINLOG_DUMP").
//! - MySQL GTID set: `COM_BINLOG_DUMP_GTID` with the set (MySQL source, "Replication
//!   Protocol").
//! - `file:pos`: `COM_BINLOG_DUMP` with the file and position.
//!
//! `@master_heartbeat_period` makes the server send HEARTBEAT events while idle, which keep
//! the connection alive and let the checkpoint follow an idle server. A silent connection
//! (no event for three heartbeat periods) is a lost connection. Events flow one way: binlog
//! event → [`BinlogDecoder`] (positions, only outbox rows decoded) → [`OutboxAdapter`] →
//! the session's [`crate::source::Outlet`].

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use mysql_async::binlog::events::Event;
use mysql_async::prelude::*;
use mysql_async::BinlogStreamRequest;

use super::adapter::{Halt, OutboxAdapter};
use super::decode::{BinlogDecoder, BinlogMessage, MissingColumnNames};
use super::error::{MysqlError, StatementLogged, TablesGone, XaTooLarge};
use super::server::{self, TrackingMode};
use super::stall::StallWatch;
use crate::config::{MysqlSourceConfig, StartPosition};
use crate::event::{SourceEvent, TableName};
use crate::position::SourcePosition;
use crate::requirement;
use crate::source::SourceError;
use crate::source::{Source, SourceContext, Stop, STOP_CHECKPOINT_WAIT};

/// That many [`MysqlError::SameServerId`] failures in a row make it definite: two replicas
/// are fighting over one id.
const SAME_SERVER_ID_LIMIT: u32 = 5;

/// Longest the first start waits for its start position to be checkpointed.
const INITIAL_CHECKPOINT_WAIT: Duration = Duration::from_secs(120);

/// A MySQL/MariaDB source: the binlog of one server, filtered to the outbox tables.
pub struct MysqlSource {
    cfg: MysqlSourceConfig,
    tables: BTreeSet<TableName>,
    /// [`MysqlError::SameServerId`] failures in a row.
    same_id_failures: u32,
}

impl MysqlSource {
    /// The source of server `cfg`, keeping the rows of `tables`.
    pub fn new(cfg: MysqlSourceConfig, tables: &[TableName]) -> Self {
        Self {
            cfg,
            tables: tables.iter().cloned().collect(),
            same_id_failures: 0,
        }
    }
}

impl Source for MysqlSource {
    fn stream_name(&self) -> &'static str {
        "binlog"
    }

    fn reconnect_backoff_max(&self) -> Duration {
        self.cfg.reconnect_backoff_max
    }

    fn escalate(&mut self, error: SourceError) -> SourceError {
        match error {
            SourceError::Mysql(MysqlError::SameServerId { message }) => {
                self.same_id_failures += 1;
                if self.same_id_failures >= SAME_SERVER_ID_LIMIT {
                    MysqlError::SameServerIdRepeated {
                        key: self.cfg.format.key("server_id", "database.server.id"),
                        server_id: self.cfg.server_id,
                        times: self.same_id_failures,
                        message,
                    }
                    .into()
                } else {
                    MysqlError::SameServerId { message }.into()
                }
            }
            other => {
                self.same_id_failures = 0;
                other
            }
        }
    }

    async fn session(&mut self, ctx: &mut SourceContext) -> Result<(), SourceError> {
        Stop::session(self.stream(ctx).await)
    }
}

impl MysqlSource {
    async fn stream(&mut self, ctx: &mut SourceContext) -> Result<(), Stop<MysqlError>> {
        let cfg = &self.cfg;
        let connector = ctx.connector.clone();
        let driver = |e| MysqlError::from_driver(e, cfg);
        let mut conn = server::connect(cfg).await?;
        let info = server::server_info(&mut conn, cfg).await?;
        requirement::enforce(server::requirements(&info, &connector, &self.tables, cfg))
            .map_err(MysqlError::from)?;
        let mode = server::tracking_mode(&info, cfg);
        // Where to ask the server to start; `from_file` when starting at the earliest binlog.
        let resume = ctx.out.resume_position().cloned();
        let (start, from_file) = match resume.clone() {
            Some(p) => (p, None),
            None => match cfg.start {
                StartPosition::Current => {
                    (server::current_position(&mut conn, cfg, mode).await?, None)
                }
                StartPosition::Earliest => {
                    let first = server::earliest_position(&mut conn, cfg).await?;
                    (SourcePosition::BinlogFile(first.clone()), Some(first))
                }
            },
        };
        if !mode.fits(&start) {
            return Err(MysqlError::PositionMismatch {
                position: start,
                mode: mode.as_str(),
            }
            .into());
        }
        if let Some(p) = &resume {
            // Purged binlogs would otherwise surface as the server's own error (or, for a
            // file:pos, as events of another file): say which checkpoint is lost, and why.
            if let Some(reason) = server::checkpoint_gap(&mut conn, cfg, mode, p).await? {
                return Err(MysqlError::CheckpointLost {
                    connector: connector.clone(),
                    position: p.clone(),
                    reason,
                }
                .into());
            }
        }
        if resume.is_none() && from_file.is_none() {
            // First start: checkpoint the start position before streaming, so that a crash
            // from here on resumes here rather than at a later "current" position.
            ctx.out
                .send(SourceEvent::Progress {
                    position: start.clone(),
                })
                .await?;
            let stored = tokio::time::timeout(
                INITIAL_CHECKPOINT_WAIT,
                ctx.checkpointed.wait_for(|p| p.is_some()),
            )
            .await;
            if !matches!(stored, Ok(Ok(_))) {
                return Err(MysqlError::InitialCheckpointTimeout {
                    after: INITIAL_CHECKPOINT_WAIT,
                }
                .into());
            }
        }
        // A configured table that is not there would let the checkpoint move on past rows
        // written meanwhile to the table the application really uses: refuse, as `check`
        // does. On a first start this comes after the start position is checkpointed, so
        // that rows written from now on are delivered once the configuration is fixed
        // (without a checkpoint the next start would begin at a later current position).
        for (table, facts) in server::outbox_tables(&mut conn, cfg, &self.tables).await? {
            if let Some(fail) = server::unusable_table(&connector, &table, facts.as_ref(), cfg) {
                return Err(MysqlError::from(fail).into());
            }
        }
        tracing::info!(connector = %connector, server = %info.version, position = %start, "requesting the binlog");

        let hb_ns = cfg
            .heartbeat_interval
            .as_nanos()
            .min(u128::from(u32::MAX) * 1_000_000_000);
        let _ = conn
            .query_drop(format!("SET @master_heartbeat_period = {hb_ns}"))
            .await;
        let mut request = BinlogStreamRequest::new(cfg.server_id);
        let file_name: Vec<u8>;
        let sids;
        if info.mariadb {
            conn.query_drop("SET @mariadb_slave_capability = 4")
                .await
                .map_err(driver)?;
        }
        match start.read_from() {
            SourcePosition::MariadbGtid(pos) if from_file.is_none() => {
                conn.exec_drop("SET @slave_connect_state = ?", (pos.to_string(),))
                    .await
                    .map_err(driver)?;
                conn.query_drop(
                    "SET @slave_gtid_strict_mode = 0, @slave_gtid_ignore_duplicates = 0",
                )
                .await
                .map_err(driver)?;
            }
            SourcePosition::MysqlGtidSet(set) => {
                sids = set.to_sids();
                request = request.with_gtid().with_gtid_set(sids);
            }
            SourcePosition::BinlogFile(fp) => {
                file_name = fp.file.clone().into_bytes();
                request = request.with_filename(&file_name).with_pos(fp.pos);
            }
            other => {
                return Err(MysqlError::NotABinlogPosition {
                    position: other.clone(),
                }
                .into())
            }
        }
        let catalog =
            server::catalog_columns(&mut conn, &self.tables.iter().cloned().collect::<Vec<_>>())
                .await;
        let mut stream = conn
            .get_binlog_stream(request)
            .await
            .map_err(|e| unavailable_at(driver(e), &start))?;

        let mut decoder = BinlogDecoder::new()
            .with_columns(cfg.columns.clone())
            .with_missing_names(MissingColumnNames::Error)
            .with_table_filter(Some(self.tables.clone()))
            .with_catalog(catalog);
        decoder = match (&from_file, mode) {
            // From the earliest file with GTIDs on: the file's GTID list seeds the position.
            (Some(first), TrackingMode::MariadbGtid | TrackingMode::MysqlGtid) => {
                decoder.set_file(first.file.clone(), first.pos);
                decoder
            }
            _ => decoder.with_start(&start),
        };
        let mut adapter = OutboxAdapter::new(&start, cfg.xa_max_held_bytes);
        if let SourcePosition::XaPending(x) = &start {
            tracing::info!(connector = %connector, resume = %x.resume, delivered = %x.delivered, "prepared XA transactions were waiting for their XA COMMIT: reading again from before the oldest, delivering what commits after the delivered position");
        }
        ctx.streaming();
        let silence = cfg.heartbeat_interval * 3 + Duration::from_secs(5);
        let mut stall = StallWatch::new();
        let mut messages: Vec<BinlogMessage> = Vec::new();
        let mut out: Vec<SourceEvent> = Vec::new();
        loop {
            let silent_since = Instant::now();
            let event: Event = loop {
                let left = silence.saturating_sub(silent_since.elapsed());
                let wait = stall.probe_after().map_or(left, |p| p.min(left));
                match tokio::time::timeout(wait, stream.next()).await {
                    Ok(None) => return Err(MysqlError::StreamEnded.into()),
                    Ok(Some(Err(e))) => {
                        let at = ctx.out.resume_position().unwrap_or(&start);
                        return Err(unavailable_at(driver(e), at).into());
                    }
                    Ok(Some(Ok(ev))) => break ev,
                    Err(_) if silent_since.elapsed() >= silence => {
                        return Err(MysqlError::Silent { after: silence }.into())
                    }
                    // Silent after the reader was held back: stalled if the server has more.
                    Err(_) => {
                        if let Some(end) = stall.server_ahead(cfg, decoder.position()).await {
                            return Err(MysqlError::Stalled {
                                silent: silent_since.elapsed(),
                                read: decoder.position().clone(),
                                end,
                            }
                            .into());
                        }
                    }
                }
            };
            decoder
                .decode_event_into(&event, None, &mut messages)
                .map_err(|e| MysqlError::Decode {
                    source: std::sync::Arc::new(e),
                })?;
            for msg in messages.drain(..) {
                if let BinlogMessage::Incident { message } = &msg {
                    tracing::error!(connector = %connector, incident = %message, "the server logged an INCIDENT: events may be missing from the binlog here");
                }
                if let Err(halt) = adapter.on_message(msg, &mut out) {
                    // Hand on what came before, then act: a stop checkpoints everything
                    // ahead of it first, and never anything past it.
                    for ev in out.drain(..) {
                        ctx.out.send(ev).await?;
                    }
                    self.on_halt(ctx, *halt).await?;
                }
            }
            let handing_on = Instant::now();
            for ev in out.drain(..) {
                ctx.out.send(ev).await?;
            }
            stall.handed_on(handing_on.elapsed());
        }
    }
}

impl MysqlSource {
    /// What a [`Halt`] of the adapter means: a definite stop once everything ahead of it is
    /// checkpointed (transient when that does not happen within
    /// [`STOP_CHECKPOINT_WAIT`]: the restart meets it again), or nothing when outbox tables
    /// a DDL removed exist again now (re-created later in the binlog: their rows come).
    async fn on_halt(&self, ctx: &mut SourceContext, halt: Halt) -> Result<(), Stop<MysqlError>> {
        let cfg = &self.cfg;
        let connector = ctx.connector.clone();
        // What to stop with, and the position before it, to checkpoint first.
        let error = match halt {
            Halt::TablesGone { at, gtid, tables } => {
                let names: Vec<TableName> = tables.iter().map(|(t, _)| t.clone()).collect();
                let missing = server::missing_tables(cfg, &names).await?;
                if missing.is_empty() {
                    tracing::info!(connector = %connector, tables = ?names.iter().map(|t| t.to_string()).collect::<Vec<_>>(), gtid = ?gtid.map(|g| g.to_string()), "outbox tables were dropped or renamed away and exist again now (created again later): reading on");
                    return Ok(());
                }
                let tables = tables
                    .into_iter()
                    .filter(|(t, _)| missing.contains(t))
                    .collect();
                MysqlError::TablesGone(Box::new(TablesGone {
                    tables,
                    gtid,
                    at,
                    key: cfg.format.key("tables", "table.include.list"),
                }))
            }
            Halt::StatementWrite {
                before,
                after,
                gtid,
                table,
                verb,
                xa,
            } => MysqlError::StatementLogged(Box::new(StatementLogged {
                connector,
                table,
                verb,
                gtid,
                before,
                after,
                xa,
            })),
            Halt::XaTooLarge {
                before,
                gtid,
                rows,
                limit,
            } => MysqlError::XaTooLarge(Box::new(XaTooLarge {
                gtid,
                rows,
                limit,
                before,
            })),
        };
        let Some(before) = error.stop_position().cloned() else {
            return Err(error.into());
        };
        match ctx
            .checkpoint_before_stop(before, STOP_CHECKPOINT_WAIT)
            .await?
        {
            Some(stored) => Err(error.checkpointed_at(stored).into()),
            None => Err(MysqlError::StopNotCheckpointed {
                what: error.stop_summary(),
                after: STOP_CHECKPOINT_WAIT,
            }
            .into()),
        }
    }
}

/// The server's refusal to send the binlog: `ER_MASTER_FATAL_ERROR_READING_BINLOG` naming
/// `position`, the position it was asked for; an "access denied" as the missing privilege
/// it is.
fn unavailable_at(e: MysqlError, position: &SourcePosition) -> MysqlError {
    match e {
        MysqlError::BinlogUnavailable { message, .. } => MysqlError::BinlogUnavailable {
            message,
            position: Some(position.clone()),
        },
        // The login succeeded on this connection; MariaDB answers a binlog request without
        // REPLICATION SLAVE with the login's "access denied" (1045): a privilege, not the
        // password.
        MysqlError::AccessDenied { user, .. } => MysqlError::MissingPrivilege {
            user,
            message: "the server refused the binlog request (register as a replica, binlog \
                      dump) with \"access denied\" after the login succeeded"
                .into(),
        },
        other => other,
    }
}
