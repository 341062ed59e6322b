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
//! (no event for three heartbeat periods) is a lost connection. Lost connections reconnect
//! with exponential backoff from the position after the last transaction handed to the
//! pipeline, so nothing is skipped.

use std::collections::HashSet;
use std::time::Duration;

use futures_util::StreamExt;
use mysql_async::binlog::events::Event;
use mysql_async::prelude::*;
use mysql_async::{BinlogStreamRequest, Conn, OptsBuilder};
use tokio::sync::{mpsc, watch};

use super::adapter::OutboxAdapter;
use super::decode::{BinlogDecoder, BinlogMessage, MissingColumnNames};
use crate::config::{MysqlFlavor, MysqlSourceConfig, PositionMode, StartPosition};
use crate::error::Failure;
use crate::event::{SourceEvent, TableName};
use crate::health::{ConnectorState, Health};
use crate::metrics as m;
use crate::position::{BinlogFilePosition, GtidSet, MariadbGtidPosition, SourcePosition};

/// How positions are tracked for a server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TrackingMode {
    /// MariaDB GTID position (`0-1-42`).
    MariadbGtid,
    /// MySQL GTID set (`uuid:1-42`).
    MysqlGtid,
    /// `file:pos`.
    File,
}

impl TrackingMode {
    /// The checkpoint's position kind for this mode: `mariadb_gtid`, `mysql_gtid_set`,
    /// `binlog_file`.
    pub fn as_str(self) -> &'static str {
        match self {
            TrackingMode::MariadbGtid => "mariadb_gtid",
            TrackingMode::MysqlGtid => "mysql_gtid_set",
            TrackingMode::File => "binlog_file",
        }
    }
}

/// What the server told us about itself at connect time.
#[derive(Debug, Clone)]
pub struct ServerInfo {
    /// `SELECT VERSION()`.
    pub version: String,
    /// MariaDB (true) or MySQL.
    pub mariadb: bool,
    /// `@@server_id`.
    pub server_id: u32,
    /// `@@log_bin` is ON.
    pub log_bin: bool,
    /// `@@binlog_format`.
    pub binlog_format: String,
    /// `@@binlog_row_image`.
    pub binlog_row_image: String,
    /// `@@binlog_row_metadata` (None on servers that lack it).
    pub binlog_row_metadata: Option<String>,
    /// MySQL `@@gtid_mode` (None on MariaDB).
    pub gtid_mode: Option<String>,
}

/// Opens an ordinary connection to the source with the configured credentials.
///
/// Errors: access denied is definite (fix the user/password); anything else transient.
pub async fn connect(cfg: &MysqlSourceConfig) -> Result<Conn, Failure> {
    let opts = OptsBuilder::default()
        .ip_or_hostname(cfg.host.clone())
        .tcp_port(cfg.port)
        .user(Some(cfg.user.clone()))
        .pass(Some(cfg.password.expose().to_string()))
        .prefer_socket(false)
        .stmt_cache_size(0);
    match tokio::time::timeout(cfg.connect_timeout, Conn::new(opts)).await {
        Err(_) => Err(Failure::transient(format!(
            "connecting to {}:{} timed out after {:?}",
            cfg.host, cfg.port, cfg.connect_timeout
        ))),
        Ok(Ok(c)) => Ok(c),
        Ok(Err(e)) => Err(classify(&e, cfg)),
    }
}

/// Start of the message of a failure caused by another replica with our `server_id`.
const SAME_SERVER_ID: &str = "another replica with the same server_id is connected";
/// That many such failures in a row make it definite: two relays are fighting over an id.
const SAME_SERVER_ID_LIMIT: u32 = 5;

/// Classifies a mysql_async error; never includes the password.
pub fn classify(e: &mysql_async::Error, cfg: &MysqlSourceConfig) -> Failure {
    match e {
        mysql_async::Error::Server(se) => match se.code {
            1045 => Failure::definite(format!(
                "MySQL/MariaDB at {}:{} refused user {:?}: access denied; check database.user / \
                 database.password",
                cfg.host, cfg.port, cfg.user
            )),
            1227 | 1142 | 1044 => Failure::definite(format!(
                "user {:?} lacks a privilege: {}; grant REPLICATION SLAVE, REPLICATION CLIENT \
                 (MariaDB: also BINLOG MONITOR) to it",
                cfg.user, se.message
            )),
            4052 | 1236 if se.message.contains("same server_uuid/server_id") => {
                Failure::transient(format!("{SAME_SERVER_ID}: {}", se.message))
            }
            1236 => Failure::definite(format!(
                "the server cannot send the binlog from the requested position: {}; if the \
                 binlogs were purged, delete the connector's checkpoint and restart from the \
                 current position (events in between are lost), or restore the binlogs",
                se.message
            )),
            _ => Failure::transient(format!("MySQL/MariaDB error {}: {}", se.code, se.message)),
        },
        other => Failure::transient(format!(
            "MySQL/MariaDB connection to {}:{}: {other}",
            cfg.host, cfg.port
        )),
    }
}

/// Reads the server facts the relay depends on.
pub async fn server_info(conn: &mut Conn, cfg: &MysqlSourceConfig) -> Result<ServerInfo, Failure> {
    let row: Option<(String, u32, u8, String, String)> = conn
        .query_first(
            "SELECT VERSION(), @@server_id, @@log_bin, @@binlog_format, @@binlog_row_image",
        )
        .await
        .map_err(|e| classify(&e, cfg))?;
    let (version, server_id, log_bin, binlog_format, binlog_row_image) =
        row.ok_or_else(|| Failure::transient("the server returned no row for its settings"))?;
    let mariadb = match cfg.flavor {
        MysqlFlavor::Mariadb => true,
        MysqlFlavor::Mysql => false,
        MysqlFlavor::Auto => version.to_ascii_lowercase().contains("mariadb"),
    };
    let binlog_row_metadata: Option<String> = conn
        .query_first("SELECT @@binlog_row_metadata")
        .await
        .ok()
        .flatten();
    let gtid_mode: Option<String> = if mariadb {
        None
    } else {
        conn.query_first("SELECT @@gtid_mode").await.ok().flatten()
    };
    Ok(ServerInfo {
        version,
        mariadb,
        server_id,
        log_bin: log_bin != 0,
        binlog_format,
        binlog_row_image,
        binlog_row_metadata,
        gtid_mode,
    })
}

/// The settings without which the relay cannot work, as definite failures saying what to set.
pub fn require_streamable(info: &ServerInfo, cfg: &MysqlSourceConfig) -> Result<(), Failure> {
    if !info.log_bin {
        return Err(Failure::definite(
            "log_bin is OFF; outboxd reads the binary log (start the server with log_bin)",
        ));
    }
    if !info.binlog_format.eq_ignore_ascii_case("ROW") {
        return Err(Failure::definite(format!(
            "binlog_format is {}; outboxd needs ROW (set binlog_format=ROW)",
            info.binlog_format
        )));
    }
    if info.server_id == cfg.server_id {
        return Err(Failure::definite(format!(
            "database.server.id {} is the source server's own server_id; choose another, unique \
             among its replicas",
            cfg.server_id
        )));
    }
    if cfg.position_mode == PositionMode::Gtid
        && !info.mariadb
        && !info
            .gtid_mode
            .as_deref()
            .is_some_and(|m| m.eq_ignore_ascii_case("ON"))
    {
        return Err(Failure::definite(format!(
            "position_mode is gtid but gtid_mode is {}; set gtid_mode=ON and \
             enforce_gtid_consistency=ON, or use position_mode=\"file\"",
            info.gtid_mode.as_deref().unwrap_or("unknown")
        )));
    }
    Ok(())
}

/// How positions are tracked for this server and configuration.
pub fn tracking_mode(info: &ServerInfo, cfg: &MysqlSourceConfig) -> TrackingMode {
    match (cfg.position_mode, info.mariadb) {
        (PositionMode::File, _) => TrackingMode::File,
        (_, true) => TrackingMode::MariadbGtid,
        (_, false) => {
            if info
                .gtid_mode
                .as_deref()
                .is_some_and(|m| m.eq_ignore_ascii_case("ON"))
            {
                TrackingMode::MysqlGtid
            } else {
                TrackingMode::File
            }
        }
    }
}

/// The server's current position in the given tracking mode (new events only).
pub async fn current_position(
    conn: &mut Conn,
    cfg: &MysqlSourceConfig,
    mode: TrackingMode,
) -> Result<SourcePosition, Failure> {
    let bad = |what: &str, e: String| {
        Failure::definite(format!("the server's {what} could not be parsed: {e}"))
    };
    match mode {
        TrackingMode::MariadbGtid => {
            let pos: Option<String> = conn
                .query_first("SELECT @@gtid_binlog_pos")
                .await
                .map_err(|e| classify(&e, cfg))?;
            let pos = pos.unwrap_or_default();
            Ok(SourcePosition::MariadbGtid(
                pos.parse::<MariadbGtidPosition>()
                    .map_err(|e| bad("gtid_binlog_pos", e.to_string()))?,
            ))
        }
        TrackingMode::MysqlGtid => {
            let set: Option<String> = conn
                .query_first("SELECT @@gtid_executed")
                .await
                .map_err(|e| classify(&e, cfg))?;
            Ok(SourcePosition::MysqlGtidSet(
                set.unwrap_or_default()
                    .parse::<GtidSet>()
                    .map_err(|e| bad("gtid_executed", e.to_string()))?,
            ))
        }
        TrackingMode::File => {
            let mut row: Option<mysql_async::Row> =
                match conn.query_first("SHOW MASTER STATUS").await {
                    Ok(r) => r,
                    Err(_) => conn
                        .query_first("SHOW BINARY LOG STATUS")
                        .await
                        .map_err(|e| classify(&e, cfg))?,
                };
            let row = row.take().ok_or_else(|| {
                Failure::definite("SHOW MASTER STATUS returned nothing: is log_bin on?")
            })?;
            let file: String = row.get(0).unwrap_or_default();
            let pos: u64 = row.get(1).unwrap_or(4);
            Ok(SourcePosition::BinlogFile(BinlogFilePosition::new(
                file, pos,
            )))
        }
    }
}

/// The oldest binlog file the server has, at its first event.
pub async fn earliest_position(
    conn: &mut Conn,
    cfg: &MysqlSourceConfig,
) -> Result<BinlogFilePosition, Failure> {
    let rows: Vec<mysql_async::Row> = conn
        .query("SHOW BINARY LOGS")
        .await
        .map_err(|e| classify(&e, cfg))?;
    let first: String = rows
        .first()
        .and_then(|r| r.get(0))
        .ok_or_else(|| Failure::definite("SHOW BINARY LOGS lists no binlog: is log_bin on?"))?;
    Ok(BinlogFilePosition::new(first, 4))
}

/// Streams outbox events from the server into `tx` until `tx` closes, shutdown, or a
/// definite failure (sent into `tx` as `Err`). Transient failures reconnect with backoff.
#[allow(clippy::too_many_arguments)]
pub async fn run(
    connector: String,
    cfg: MysqlSourceConfig,
    tables: Vec<TableName>,
    resume: Option<SourcePosition>,
    tx: mpsc::Sender<Result<SourceEvent, Failure>>,
    health: Health,
    shutdown: watch::Receiver<bool>,
    checkpointed: watch::Receiver<Option<SourcePosition>>,
) {
    let mut position = resume;
    let mut backoff = Duration::from_secs(1);
    let tables: HashSet<TableName> = tables.into_iter().collect();
    let mut same_id_failures = 0;
    loop {
        let mut streamed = false;
        // Set while rows of an unfinished transaction were handed on: reconnecting inside
        // the session would replay them after the partial copy, so such a failure goes to
        // the pipeline, which restarts the connector from its checkpoint (exactly-once
        // aborts the open Kafka transaction).
        let mut mid_txn = false;
        let result = stream_once(
            &connector,
            &cfg,
            &tables,
            &mut position,
            &tx,
            &health,
            &mut streamed,
            &mut mid_txn,
            checkpointed.clone(),
        )
        .await;
        metrics::gauge!(m::SOURCE_CONNECTED, m::LABEL_CONNECTOR => connector.clone()).set(0.0);
        let result = match result {
            Err(f) if f.message.starts_with(SAME_SERVER_ID) => {
                same_id_failures += 1;
                if same_id_failures >= SAME_SERVER_ID_LIMIT {
                    Err(Failure::definite(format!(
                        "{f}; {same_id_failures} times in a row: another replica (another \
                         outboxd or Debezium connector?) uses database.server.id {}; give every \
                         connector its own server_id",
                        cfg.server_id
                    )))
                } else {
                    Err(f)
                }
            }
            other => {
                if other.is_err() {
                    same_id_failures = 0;
                }
                other
            }
        };
        match result {
            Ok(()) => return,
            Err(f) if f.is_transient() && !*shutdown.borrow() && !mid_txn => {
                if streamed {
                    backoff = Duration::from_secs(1);
                }
                health.set(&connector, ConnectorState::Retrying);
                metrics::counter!(m::ERRORS, m::LABEL_CONNECTOR => connector.clone(), m::LABEL_KIND => "transient").increment(1);
                tracing::warn!(connector = %connector, retry_in = ?backoff, "binlog connection lost, reconnecting: {f}");
                if !crate::error::sleep_before_retry(backoff, &shutdown).await {
                    return;
                }
                backoff = (backoff * 2).min(cfg.reconnect_backoff_max);
            }
            Err(f) => {
                let _ = tx.send(Err(f)).await;
                return;
            }
        }
    }
}

#[allow(clippy::too_many_arguments)]
async fn stream_once(
    connector: &str,
    cfg: &MysqlSourceConfig,
    tables: &HashSet<TableName>,
    position: &mut Option<SourcePosition>,
    tx: &mpsc::Sender<Result<SourceEvent, Failure>>,
    health: &Health,
    streamed: &mut bool,
    mid_txn: &mut bool,
    mut checkpointed: watch::Receiver<Option<SourcePosition>>,
) -> Result<(), Failure> {
    let mut conn = connect(cfg).await?;
    let info = server_info(&mut conn, cfg).await?;
    require_streamable(&info, cfg)?;
    if !info.binlog_row_image.eq_ignore_ascii_case("FULL") {
        tracing::warn!(connector, binlog_row_image = %info.binlog_row_image, "binlog_row_image is not FULL; outbox rows may lack columns (set binlog_row_image=FULL)");
    }
    let mode = tracking_mode(&info, cfg);
    // Where to ask the server to start, and the position tracking starts from.
    let (start, from_file) = match position.clone() {
        Some(p) => (p, None),
        None => match cfg.start {
            StartPosition::Current => (current_position(&mut conn, cfg, mode).await?, None),
            StartPosition::Earliest => {
                let first = earliest_position(&mut conn, cfg).await?;
                (SourcePosition::BinlogFile(first.clone()), Some(first))
            }
        },
    };
    check_position_fits(&start, mode)?;
    if position.is_none() && from_file.is_none() {
        // First start: checkpoint the start position before streaming, so that a crash
        // from here on resumes here rather than at a later "current" position.
        if tx
            .send(Ok(SourceEvent::Progress {
                position: start.clone(),
            }))
            .await
            .is_err()
        {
            return Ok(());
        }
        let stored = tokio::time::timeout(
            Duration::from_secs(120),
            checkpointed.wait_for(|p| p.is_some()),
        )
        .await;
        if !matches!(stored, Ok(Ok(_))) {
            return Err(Failure::transient(
                "the initial checkpoint could not be written within 120 s",
            ));
        }
        *position = Some(start.clone());
    }
    tracing::info!(connector, server = %info.version, position = %start, "requesting the binlog");

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
            .map_err(|e| classify(&e, cfg))?;
    }
    match &start {
        SourcePosition::MariadbGtid(pos) if from_file.is_none() => {
            conn.exec_drop("SET @slave_connect_state = ?", (pos.to_string(),))
                .await
                .map_err(|e| classify(&e, cfg))?;
            conn.query_drop("SET @slave_gtid_strict_mode = 0, @slave_gtid_ignore_duplicates = 0")
                .await
                .map_err(|e| classify(&e, cfg))?;
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
            return Err(Failure::definite(format!(
                "position {other} cannot be used with a MySQL/MariaDB source"
            )))
        }
    }
    let mut stream = conn
        .get_binlog_stream(request)
        .await
        .map_err(|e| classify(&e, cfg))?;

    let mut decoder = BinlogDecoder::new()
        .with_columns(cfg.columns.clone())
        .with_missing_names(MissingColumnNames::Error)
        .with_table_filter(Some(tables.iter().cloned().collect()));
    decoder = match (&from_file, mode) {
        // From the earliest file with GTIDs on: the file's GTID list seeds the position.
        (Some(first), TrackingMode::MariadbGtid | TrackingMode::MysqlGtid) => {
            decoder.set_file(first.file.clone(), first.pos);
            decoder
        }
        _ => decoder.with_start(&start),
    };
    let mut adapter = OutboxAdapter::new(tables.clone());
    health.set(connector, ConnectorState::Streaming);
    metrics::gauge!(m::SOURCE_CONNECTED, m::LABEL_CONNECTOR => connector.to_string()).set(1.0);
    let silence = cfg.heartbeat_interval * 3 + Duration::from_secs(5);
    let mut out: Vec<SourceEvent> = Vec::new();
    loop {
        let event: Event = match tokio::time::timeout(silence, stream.next()).await {
            Err(_) => {
                return Err(Failure::transient(format!(
                    "no binlog event or heartbeat for {silence:?}"
                )))
            }
            Ok(None) => return Err(Failure::transient("the server closed the binlog stream")),
            Ok(Some(Err(e))) => return Err(classify(&e, cfg)),
            Ok(Some(Ok(ev))) => ev,
        };
        let messages = decoder
            .decode_event(&event)
            .map_err(|e| Failure::definite(format!("binlog decoding failed: {e}")))?;
        for msg in messages {
            if let BinlogMessage::Incident { message } = &msg {
                tracing::error!(connector, incident = %message, "the server logged an INCIDENT: events may be missing from the binlog here");
            }
            if let Err(e) = adapter.on_message(msg, || decoder.current_position(), &mut out) {
                // Hand on what came before, then stop: the pipeline checkpoints up to the
                // last complete transaction and never past this one.
                for ev in out.drain(..) {
                    let _ = tx.send(Ok(ev)).await;
                }
                return Err(Failure::definite(format!(
                    "{e} (binlog position {})",
                    decoder.position()
                )));
            }
        }
        *mid_txn = adapter.mid_transaction();
        for ev in out.drain(..) {
            if let SourceEvent::Commit { position: p, .. } | SourceEvent::Progress { position: p } =
                &ev
            {
                *position = Some(p.clone());
            }
            *streamed = true;
            if tx.send(Ok(ev)).await.is_err() {
                return Ok(());
            }
        }
    }
}

fn check_position_fits(start: &SourcePosition, mode: TrackingMode) -> Result<(), Failure> {
    let fits = matches!(
        (start, mode),
        (SourcePosition::MariadbGtid(_), TrackingMode::MariadbGtid)
            | (SourcePosition::MysqlGtidSet(_), TrackingMode::MysqlGtid)
            | (SourcePosition::BinlogFile(_), _)
    );
    if fits {
        Ok(())
    } else {
        Err(Failure::definite(format!(
            "the checkpoint position {start} does not match the server's position tracking \
             ({}); was the checkpoint written for another server or position_mode?",
            mode.as_str()
        )))
    }
}
