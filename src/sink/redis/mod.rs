//! The Redis Streams sink: routed records appended to streams (`XADD`, the routed topic as
//! the stream key, fields per [`layout`]), exactly once with no window.
//!
//! ## Exactly once
//!
//! A connector's sink has a connection of its own. Opening it fences older instances:
//! `INCR <checkpoint_key>:epoch` gives this instance its epoch, and the checkpoint is read
//! after that ([`crate::checkpoint::redis`]). The exactly-once loop then sends records into
//! a transaction: the sink keeps them in memory (acknowledging each to the
//! [`DeliveryTracker`] as taken, which is what the loop's bounds count) until the loop sends
//! the checkpoint record and commits; the commit is one `EVAL` of [`script::COMMIT`], which
//! checks the epoch and every key's type and only then writes every record and the
//! checkpoint. Records and checkpoint are thus applied together or not at all: after a crash
//! (of the relay or of Redis, with `appendfsync always`) the relay resumes from the
//! checkpoint that was written with the last records that were. See [`script`] for why not
//! `MULTI`/`EXEC`.
//!
//! An instance whose epoch is no longer the key's (a newer instance opened) fails its next
//! commit with a definite "fenced" error and writes nothing more.
//!
//! With `wait_replicas` > 0 each commit is followed by `WAIT`; fewer replicas than asked
//! within `wait_timeout` is a transient failure: the batch is written on the primary (and
//! its checkpoint with it), so the retry resumes after it.
//!
//! ## At-least-once with a file checkpoint
//!
//! With `[connectors.checkpoint] store = "file"` the at-least-once loop runs instead: each
//! record is appended (`XADD`) and acknowledged when Redis answers, and the file is written
//! after the acknowledgements (a crash between the two appends those records again).

mod conn;
mod layout;
mod plaintext;
pub(crate) mod script;

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use tokio::sync::watch;

use crate::config::sinks::redis::RedisSinkConfig;
use crate::error::Class;
use crate::record::KafkaRecord;

use super::tracker::counted_size;
use super::{DeliveryTracker, KafkaLink, RecordSink, SinkError, TransactionalSink};

pub(crate) use conn::{aof_replay_hazard, classify, connect, durability, BROKER};
use layout::Layout;

/// The header marking the checkpoint record of a transaction (never a routed record's:
/// [`RedisSink::checkpoint_record`]).
const CHECKPOINT_MARK: &str = "__outboxd_checkpoint";

/// Largest record taken, in bytes: Redis's default `proto-max-bulk-len` (512 MiB) for the
/// value, which a larger one could not be sent in.
const MAX_RECORD_BYTES: usize = 512 * 1024 * 1024;

/// How the sink delivers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Records and checkpoint in one script per batch (the exactly-once loop).
    Transactional,
    /// Each record appended at once, acknowledged by Redis's answer (the at-least-once loop
    /// with a file checkpoint).
    Acked,
}

/// The records of the open transaction, as the commit script takes them.
#[derive(Default)]
struct Batch {
    /// The distinct stream keys, in first-use order.
    streams: Vec<String>,
    /// Index of each stream key in `streams`.
    index: HashMap<String, usize>,
    /// The first record's event id for each stream (naming it in errors).
    first_ids: Vec<String>,
    /// Per record: stream index (1-based), field count, fields.
    args: Vec<Vec<u8>>,
    /// Records taken.
    records: usize,
    /// The checkpoint document, once sent.
    checkpoint: Option<Vec<u8>>,
}

/// A Redis Streams sink: see the module docs.
pub(crate) struct RedisSink {
    connector: String,
    deliveries: DeliveryTracker,
    conn: MultiplexedConnection,
    layout: Layout,
    mode: Mode,
    epoch_key: String,
    checkpoint_key: String,
    epoch: i64,
    maxlen: Option<u64>,
    wait: Option<(u32, u64)>,
    batch: Mutex<Batch>,
    fatal: Mutex<Option<SinkError>>,
}

/// Connectors whose durability settings were reported (once per process).
static REPORTED: Mutex<Vec<String>> = Mutex::new(Vec::new());

impl RedisSink {
    /// Connects for connector `connector` (logged in; for the exactly-once `mode` fenced:
    /// this instance's epoch taken), retrying quietly while Redis is unreachable (one WARN
    /// per outage; an INFO when it answers again). `Ok(None)` when `shutdown` turned true
    /// first. Errors: a refused login, permission or certificate (definite).
    pub(crate) async fn open(
        cfg: &RedisSinkConfig,
        connector: &str,
        mode: Mode,
        shutdown: &watch::Receiver<bool>,
    ) -> Result<Option<Self>, SinkError> {
        let wait = (cfg.wait_replicas > 0).then_some((cfg.wait_replicas, cfg.wait_timeout_ms));
        let extra = Duration::from_millis(wait.map_or(0, |w| w.1));
        let checkpoint_key = cfg.checkpoint_key(connector);
        let epoch_key = format!("{checkpoint_key}:epoch");
        let mut backoff = Duration::from_millis(500);
        let mut sd = shutdown.clone();
        loop {
            let attempt = async {
                let mut conn = conn::connect(cfg, extra).await?;
                let epoch: i64 = match mode {
                    Mode::Transactional => redis::cmd("INCR")
                        .arg(&epoch_key)
                        .query_async(&mut conn)
                        .await
                        .map_err(|e| conn::classify(&e, "taking the fencing epoch"))?,
                    Mode::Acked => 0,
                };
                Ok::<_, (Class, String)>((conn, epoch))
            };
            let outcome = tokio::select! {
                r = attempt => r,
                _ = sd.wait_for(|v| *v) => return Ok(None),
            };
            match outcome {
                Ok((mut conn, epoch)) => {
                    if conn::outage_ended(connector) {
                        tracing::info!(connector, "Redis answers again");
                    }
                    if mode == Mode::Transactional {
                        refuse_aof_replay_hazard(cfg, connector, &mut conn).await?;
                    }
                    report_durability(connector, &mut conn).await;
                    tracing::debug!(connector, epoch, key = %epoch_key, "opened the Redis sink");
                    return Ok(Some(Self {
                        connector: connector.to_string(),
                        deliveries: DeliveryTracker::new(KafkaLink::quiet(connector, "")),
                        conn,
                        layout: Layout::of(cfg),
                        mode,
                        epoch_key,
                        checkpoint_key,
                        epoch,
                        maxlen: cfg.maxlen,
                        wait,
                        batch: Mutex::default(),
                        fatal: Mutex::default(),
                    }));
                }
                Err((Class::Transient, why)) => {
                    if conn::outage_began(connector) {
                        tracing::warn!(connector, url = %redacted(&cfg.url), "{why}; retrying until it answers");
                    } else {
                        tracing::debug!(connector, "{why}; retrying");
                    }
                    let mut sd = shutdown.clone();
                    tokio::select! {
                        _ = tokio::time::sleep(backoff) => {}
                        _ = sd.wait_for(|v| *v) => return Ok(None),
                    }
                    backoff = (backoff * 2).min(Duration::from_secs(5));
                }
                Err((class, why)) => return Err(SinkError::broker(BROKER, class, why)),
            }
        }
    }

    /// The record carrying `checkpoint_json` for the key `checkpoint_key` inside a
    /// transaction ([`crate::checkpoint::CheckpointRecords`]): recognised by [`send`] by its
    /// topic and marker header and written by the commit script's `SET`.
    pub(crate) fn checkpoint_record(checkpoint_key: &str, checkpoint_json: Vec<u8>) -> KafkaRecord {
        KafkaRecord {
            topic: checkpoint_key.to_string(),
            key: None,
            value: Some(checkpoint_json),
            headers: vec![(CHECKPOINT_MARK.to_string(), None)],
            timestamp_ms: None,
            partition: None,
        }
    }

    fn is_checkpoint(&self, record: &KafkaRecord) -> bool {
        record.topic == self.checkpoint_key
            && record
                .headers
                .first()
                .is_some_and(|(k, _)| k == CHECKPOINT_MARK)
    }

    fn batch(&self) -> std::sync::MutexGuard<'_, Batch> {
        self.batch.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A failure of the connection: classified, and an outage noted (so that the reopen
    /// does not announce it a second time after the loop's WARN).
    fn failed(&self, e: &redis::RedisError, doing: &str) -> SinkError {
        let (class, why) = conn::classify(e, doing);
        if conn::is_unreachable(e) {
            conn::outage_began(&self.connector);
        }
        SinkError::broker(BROKER, class, why)
    }

    /// Appends `record` at once (the at-least-once mode) and reports Redis's answer.
    async fn append(&self, record: &KafkaRecord, seq: u64, counted: u64) {
        let mut cmd = redis::cmd("XADD");
        cmd.arg(&record.topic);
        if let Some(n) = self.maxlen {
            cmd.arg("MAXLEN").arg("~").arg(n);
        }
        cmd.arg("*");
        for f in self.layout.fields(record) {
            cmd.arg(f);
        }
        let mut conn = self.conn.clone();
        let answer: Result<String, _> = cmd.query_async(&mut conn).await;
        let outcome = answer.map(|_| ()).map_err(|e| {
            if e.code() == Some("WRONGTYPE") {
                SinkError::Broker {
                    broker: BROKER,
                    detail: format!(
                        "the key {} holds another type than a stream (WRONGTYPE); rename or delete it, or route the events elsewhere",
                        record.topic
                    ),
                    class: Class::Definite,
                    record: Some((record.event_id(), record.topic.clone())),
                    refusal: None,
                }
            } else {
                match self.failed(&e, &format!("XADD to {}", record.topic)) {
                    SinkError::Broker {
                        class: Class::Transient,
                        detail,
                        ..
                    } => SinkError::broker_record(
                        BROKER,
                        &record.event_id(),
                        &record.topic,
                        None,
                        detail,
                    ),
                    other => other,
                }
            }
        });
        self.deliveries.report(seq, counted, outcome);
    }

    /// Runs the commit script on the open batch (see [`script`]).
    async fn run_commit(&self, batch: Batch) -> Result<(), SinkError> {
        let checkpoint = batch.checkpoint.ok_or_else(|| {
            SinkError::broker(
                BROKER,
                Class::Definite,
                "a transaction was committed without its checkpoint record (a bug)",
            )
        })?;
        let mut cmd = redis::cmd("EVAL");
        cmd.arg(script::COMMIT)
            .arg(2 + batch.streams.len())
            .arg(&self.epoch_key)
            .arg(&self.checkpoint_key);
        for s in &batch.streams {
            cmd.arg(s);
        }
        cmd.arg(self.epoch)
            .arg(checkpoint)
            .arg(self.maxlen.map(|n| n.to_string()).unwrap_or_default())
            .arg(batch.records);
        for a in batch.args {
            cmd.arg(a);
        }
        let mut conn = self.conn.clone();
        let answer: Result<i64, redis::RedisError> = cmd.query_async(&mut conn).await;
        match answer {
            Ok(_) => {}
            Err(e) if e.code() == Some(script::FENCED) => {
                let f = SinkError::broker(
                    BROKER,
                    Class::Definite,
                    format!(
                        "fenced: another instance runs connector {} (the epoch in {} is {}, this instance's is {}); this one stops without writing its open batch",
                        self.connector,
                        self.epoch_key,
                        e.detail().unwrap_or("?"),
                        self.epoch
                    ),
                );
                *self.fatal.lock().unwrap_or_else(|e| e.into_inner()) = Some(f.clone());
                return Err(f);
            }
            Err(e) if e.code() == Some(script::WRONG_TYPE) => {
                let (index, kind) = script::wrong_type(e.detail().unwrap_or_default())
                    .unwrap_or((0, "another type"));
                let (key, what, record) = match index {
                    0 => (
                        self.checkpoint_key.clone(),
                        "a string (the checkpoint)",
                        None,
                    ),
                    i => {
                        let key = batch.streams.get(i - 1).cloned().unwrap_or_default();
                        let id = batch.first_ids.get(i - 1).cloned().unwrap_or_default();
                        (key.clone(), "a stream", Some((id, key)))
                    }
                };
                return Err(SinkError::Broker {
                    broker: BROKER,
                    detail: format!(
                        "the key {key} holds a {kind}, not {what} (WRONGTYPE): nothing of the batch was written and the checkpoint stays where it was; rename or delete that key, or route the events elsewhere"
                    ),
                    class: Class::Definite,
                    record,
                    refusal: None,
                });
            }
            Err(e) => {
                let mut f = self.failed(&e, "committing a batch (EVAL)");
                if let SinkError::Broker {
                    class: Class::Definite,
                    detail,
                    ..
                } = &mut f
                {
                    // Not a check of the script's own: a write failed that no check foresaw.
                    detail.push_str(
                        "; the commit script stopped, and records it appended before that may \
                         be in their streams without the checkpoint (a restart appends them \
                         again)",
                    );
                }
                return Err(f);
            }
        }
        if let Some((replicas, timeout_ms)) = self.wait {
            let acked: Result<i64, _> = redis::cmd("WAIT")
                .arg(replicas)
                .arg(timeout_ms)
                .query_async(&mut conn)
                .await;
            match acked {
                Ok(n) if n >= i64::from(replicas) => {}
                Ok(n) => {
                    return Err(SinkError::broker(
                        BROKER,
                        Class::Transient,
                        format!(
                            "a batch is written on the primary but only {n} of the {replicas} replicas asked for (wait_replicas) acknowledged it within {timeout_ms} ms; restarting from its checkpoint until they do"
                        ),
                    ))
                }
                Err(e) => return Err(self.failed(&e, "WAIT for replicas")),
            }
        }
        Ok(())
    }
}

/// `url` without a password.
fn redacted(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s => format!("{}***{}", &url[..s + 3], &url[at..]),
        _ => url.to_string(),
    }
}

/// Refuses (definite) a server that would drop the commits when it replays its append-only
/// file ([`conn::aof_replay_hazard`]), unless `allow_default_user_off`; WARNs, once per
/// connector and process, when that cannot be checked.
async fn refuse_aof_replay_hazard(
    cfg: &RedisSinkConfig,
    connector: &str,
    conn: &mut MultiplexedConnection,
) -> Result<(), SinkError> {
    match conn::aof_replay_hazard(conn).await {
        Ok(Some(problem)) if !cfg.allow_default_user_off => {
            Err(SinkError::broker(BROKER, Class::Definite, problem))
        }
        Ok(_) => Ok(()),
        Err(why) => {
            static WARNED: Mutex<Vec<String>> = Mutex::new(Vec::new());
            let mut w = WARNED.lock().unwrap_or_else(|e| e.into_inner());
            if !w.iter().any(|c| c == connector) {
                w.push(connector.to_string());
                tracing::warn!(connector, "could not check whether Redis's default user is on ({why}): with it off, Redis 7.0 drops the sink's commits when it replays its append-only file (redis/redis#14541); grant the user +acl|getuser, or make sure `default` is on");
            }
            Ok(())
        }
    }
}

/// Logs, once per connector and process, what Redis's persistence settings mean for the
/// promise (INFO when they keep it, WARN otherwise).
async fn report_durability(connector: &str, conn: &mut MultiplexedConnection) {
    {
        let mut r = REPORTED.lock().unwrap_or_else(|e| e.into_inner());
        if r.iter().any(|c| c == connector) {
            return;
        }
        r.push(connector.to_string());
    }
    match durability(conn).await {
        Ok(ok) => tracing::info!(connector, "Redis persistence: {ok}"),
        Err(warn) => tracing::warn!(connector, "Redis persistence: {warn}"),
    }
}

impl RecordSink for RedisSink {
    fn deliveries(&self) -> &DeliveryTracker {
        &self.deliveries
    }

    fn max_record_bytes(&self) -> usize {
        MAX_RECORD_BYTES
    }

    fn record_limit(&self) -> crate::sink::RecordLimit {
        crate::sink::RecordLimit::Redis
    }

    async fn send(&self, record: &KafkaRecord) -> Result<(), SinkError> {
        let size = record.approx_size();
        if size > MAX_RECORD_BYTES {
            return Err(SinkError::RecordTooLarge {
                id: record.event_id(),
                topic: record.topic.clone(),
                size,
                limit: MAX_RECORD_BYTES,
                limit_of: crate::sink::RecordLimit::Redis,
            });
        }
        if let Some(f) = self.fatal() {
            return Err(f);
        }
        let counted = counted_size(size);
        let seq = self.deliveries.enqueue(&record.topic, counted);
        if self.mode == Mode::Acked {
            self.append(record, seq, counted).await;
            return Ok(());
        }
        {
            let mut b = self.batch();
            if self.is_checkpoint(record) {
                b.checkpoint = record.value.clone();
            } else {
                let next = b.streams.len() + 1;
                let index = *b.index.entry(record.topic.clone()).or_insert(next);
                if index == next {
                    b.streams.push(record.topic.clone());
                    b.first_ids.push(record.event_id());
                }
                let fields = self.layout.fields(record);
                b.args.push(index.to_string().into_bytes());
                b.args.push((fields.len() / 2).to_string().into_bytes());
                b.args.extend(fields);
                b.records += 1;
            }
        }
        // Taken into the transaction: what the loop's in-flight bounds count.
        self.deliveries.report(seq, counted, Ok(()));
        Ok(())
    }

    async fn missing_topics(&self, _cause: &SinkError) -> Option<SinkError> {
        // XADD creates a stream that does not exist.
        None
    }
}

impl TransactionalSink for RedisSink {
    fn begin(&self) -> Result<(), SinkError> {
        if let Some(f) = self.fatal() {
            return Err(f);
        }
        *self.batch() = Batch::default();
        Ok(())
    }

    fn kick(&self) {}

    async fn flush_now(&self, _timeout: Duration) -> Result<(), SinkError> {
        // Every record is answered when taken.
        Ok(())
    }

    async fn commit(&self) -> Result<(), SinkError> {
        if let Some(f) = self.fatal() {
            return Err(f);
        }
        let batch = std::mem::take(&mut *self.batch());
        self.run_commit(batch).await
    }

    fn fatal(&self) -> Option<SinkError> {
        self.fatal.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn abort(&self) {
        *self.batch() = Batch::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_logged_without_their_password() {
        assert_eq!(
            redacted("redis://u:secret@h:6379/0"),
            "redis://***@h:6379/0"
        );
        assert_eq!(redacted("redis://h:6379"), "redis://h:6379");
    }
}
