//! No duplicates across a switch from Debezium.
//!
//! Debezium is at-least-once: Kafka Connect commits its offsets every
//! `offset.flush.interval.ms`, so when it stops (above all when it is killed) records it
//! wrote after the last committed offset are in Kafka while the offset says they are not.
//! outboxd starts at that offset, so it would write them again. Instead, before it streams:
//!
//! 1. [`read_back`] reads the routed topics from shortly before the offset's time on (no
//!    record written after the offset can be older than the offset's own event; Debezium's
//!    record time is when it processed the event, outboxd's the commit time) to their end,
//!    `read_committed`, and collects the `id` header of every record: the events already
//!    delivered.
//! 2. The delivery loops consult the set ([`Dedupe::consult`]) for every record they are
//!    about to send and skip those already there, counting them
//!    (`outboxd_events_skipped_total{reason="debezium"}`) — a skipped event is settled like
//!    any other, so checkpoints and `skip` counts stay exact.
//! 3. Debezium wrote only what it read before it was stopped, and it was stopped before the
//!    import (which refuses otherwise): an event whose source time is past the import's time
//!    (plus a margin for the database's clock) cannot be in Kafka yet, and neither can any
//!    event after it (Debezium reads in order). From the first such event on the set is
//!    dropped and the checkpoints stop carrying the [`Cutover`] note; until then every start
//!    (a restart, a takeover by another group member) reads the topics back again.
//!
//! The `id` header bytes compared are the ones outboxd writes, which are Debezium's for the
//! same connector JSON and worker file (the record contract).

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Headers, Message};
use rdkafka::{Offset, TopicPartitionList};

use super::CutoverError;
use crate::checkpoint::Cutover;
use crate::config::KafkaConfig;
use crate::metrics as m;
use crate::sink::client;

/// How far before the offset's time the read-back starts (clocks of the database and of
/// Kafka Connect's host may differ by that much).
pub const SINCE_MARGIN: Duration = Duration::from_secs(300);
/// How far past the import's time source events may still have been delivered by Debezium
/// (the database's clock ahead of outboxd's host by up to that much).
pub const UNTIL_MARGIN: Duration = Duration::from_secs(60);
/// Most event ids read back; past it the read-back is refused (narrow the window).
pub const MAX_IDS: usize = 4_000_000;

const KAFKA_TIMEOUT: Duration = Duration::from_secs(30);

/// What the routed topics hold from a time on.
#[derive(Debug, Default, Clone)]
pub struct ReadBack {
    /// The `id` header values.
    pub ids: HashSet<Vec<u8>>,
    /// Records read (those without an `id` header included).
    pub records: u64,
    /// Records per topic.
    pub per_topic: BTreeMap<String, u64>,
    /// The latest record time seen, ms.
    pub latest_ms: Option<i64>,
}

/// Reads `topics` from record time `since_ms` on to their end (`read_committed`) and
/// collects the `id` headers.
///
/// Errors: transient when Kafka does not answer; definite past [`MAX_IDS`].
pub fn read_back(
    kafka: &KafkaConfig,
    connector: &str,
    topics: &[String],
    since_ms: i64,
) -> Result<ReadBack, CutoverError> {
    let unavailable = |what: String, e: rdkafka::error::KafkaError| {
        CutoverError::unavailable(what, e.to_string())
    };
    let mut out = ReadBack::default();
    if topics.is_empty() {
        return Ok(out);
    }
    let make = |isolation: &str| -> Result<BaseConsumer, CutoverError> {
        client::config(kafka)
            .set("group.id", format!("outboxd-cutover-{connector}"))
            .set("enable.auto.commit", "false")
            .set("isolation.level", isolation)
            .set("enable.partition.eof", "false")
            .create()
            .map_err(|e| unavailable("creating a Kafka consumer".into(), e))
    };
    let consumer = make("read_committed")?;
    let watermarks = make("read_uncommitted")?;
    let mut times = TopicPartitionList::new();
    for topic in topics {
        let md = consumer
            .fetch_metadata(Some(topic), KAFKA_TIMEOUT)
            .map_err(|e| unavailable(format!("reading metadata of topic {topic}"), e))?;
        for t in md.topics().iter().filter(|t| t.error().is_none()) {
            for p in t.partitions() {
                times
                    .add_partition_offset(topic, p.id(), Offset::Offset(since_ms))
                    .map_err(|e| unavailable(format!("topic {topic}"), e))?;
            }
        }
    }
    if times.count() == 0 {
        return Ok(out);
    }
    let starts = consumer
        .offsets_for_times(times, KAFKA_TIMEOUT)
        .map_err(|e| {
            unavailable(
                "finding the offsets of the read-back's start time".into(),
                e,
            )
        })?;
    let mut assign = TopicPartitionList::new();
    let mut ends: BTreeMap<(String, i32), i64> = BTreeMap::new();
    for e in starts.elements() {
        let Offset::Offset(start) = e.offset() else {
            continue; // nothing at or after the time
        };
        let (_, high) = client::watermarks(&watermarks, e.topic(), e.partition(), KAFKA_TIMEOUT)
            .map_err(|err| unavailable(format!("reading the end of {}", e.topic()), err))?;
        if high > start {
            assign
                .add_partition_offset(e.topic(), e.partition(), Offset::Offset(start))
                .map_err(|err| unavailable(format!("topic {}", e.topic()), err))?;
            ends.insert((e.topic().to_string(), e.partition()), high);
        }
    }
    if ends.is_empty() {
        return Ok(out);
    }
    consumer
        .assign(&assign)
        .map_err(|e| unavailable("assigning the routed topics".into(), e))?;
    let mut last_progress = Instant::now();
    while !ends.is_empty() {
        if last_progress.elapsed() > KAFKA_TIMEOUT * 2 {
            return Err(CutoverError::unavailable(
                "reading the routed topics back",
                format!(
                    "no progress for {:?} ({} partition(s) not at their end: an open \
                     transaction on them?)",
                    KAFKA_TIMEOUT * 2,
                    ends.len()
                ),
            ));
        }
        if let Ok(pos) = consumer.position() {
            ends.retain(|(t, p), high| {
                !matches!(pos.find_partition(t, *p).map(|e| e.offset()),
                    Some(Offset::Offset(o)) if o >= *high)
            });
        }
        let Some(msg) = consumer.poll(Duration::from_millis(200)) else {
            continue;
        };
        let msg = msg.map_err(|e| unavailable("reading the routed topics back".into(), e))?;
        last_progress = Instant::now();
        out.records += 1;
        *out.per_topic.entry(msg.topic().to_string()).or_default() += 1;
        if let Some(ts) = msg.timestamp().to_millis() {
            out.latest_ms = Some(out.latest_ms.map_or(ts, |l| l.max(ts)));
        }
        if let Some(headers) = msg.headers() {
            if let Some(id) = headers.iter().find(|h| h.key == "id").and_then(|h| h.value) {
                out.ids.insert(id.to_vec());
                if out.ids.len() > MAX_IDS {
                    return Err(CutoverError::refused(format!(
                        "more than {MAX_IDS} events in the routed topics since {}: too many \
                         to hold; import again with a smaller --dedupe-window (the time \
                         Debezium may have run past its committed offset, usually seconds)",
                        format_ms(since_ms)
                    )));
                }
            }
        }
    }
    Ok(out)
}

/// `2026-12-02T18:43:36.123Z` for ms since the epoch.
pub fn format_ms(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let millis = ms.rem_euclid(1000);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let mo = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = if mo <= 2 { y + 1 } else { y };
    format!(
        "{y:04}-{mo:02}-{d:02}T{:02}:{:02}:{:02}.{millis:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// The events Debezium delivered after its committed offset, consulted by the delivery
/// loops until the source is past the time Debezium was stopped.
#[derive(Debug)]
pub struct Dedupe {
    connector: String,
    note: Cutover,
    ids: HashSet<Vec<u8>>,
    ends_after_ms: i64,
    done: AtomicBool,
    skipped: AtomicU64,
}

impl Dedupe {
    /// Reads the topics of `note` back ([`read_back`]) for `connector`.
    ///
    /// Errors as [`read_back`].
    pub fn load(
        connector: &str,
        kafka: &KafkaConfig,
        note: &Cutover,
    ) -> Result<Self, CutoverError> {
        let back = read_back(kafka, connector, &note.topics, note.since_ms)?;
        tracing::info!(
            connector,
            topics = note.topics.len(),
            records = back.records,
            events = back.ids.len(),
            since = %format_ms(note.since_ms),
            until = %format_ms(note.until_ms),
            "switching from Debezium: read the routed topics back; the events among them \
             that come again from the source are skipped until the source passes the time \
             Debezium was stopped"
        );
        Ok(Self::new(connector, note.clone(), back.ids))
    }

    /// A set of `ids` for `note`.
    pub fn new(connector: &str, note: Cutover, ids: HashSet<Vec<u8>>) -> Self {
        metrics::counter!(m::EVENTS_SKIPPED, m::LABEL_CONNECTOR => connector.to_string(), m::LABEL_REASON => m::REASON_DEBEZIUM).increment(0);
        Self {
            connector: connector.to_string(),
            ends_after_ms: note
                .until_ms
                .saturating_add(UNTIL_MARGIN.as_millis() as i64),
            note,
            ids,
            done: AtomicBool::new(false),
            skipped: AtomicU64::new(0),
        }
    }

    /// Whether the event with `id` (its `id` header bytes), of source time `event_ts_ms`,
    /// was delivered by Debezium already: then it is skipped (and counted). The first event
    /// past the time Debezium was stopped ends the consulting for good.
    pub fn consult(&self, id: Option<&[u8]>, event_ts_ms: i64) -> bool {
        if self.done.load(Ordering::Relaxed) {
            return false;
        }
        if event_ts_ms > self.ends_after_ms {
            self.done.store(true, Ordering::Relaxed);
            tracing::info!(
                connector = %self.connector,
                skipped = self.skipped.load(Ordering::Relaxed),
                "switch from Debezium complete: the source is past the time Debezium was \
                 stopped ({}); {} event(s) Debezium had already written were skipped",
                format_ms(self.note.until_ms),
                self.skipped.load(Ordering::Relaxed)
            );
            return false;
        }
        let Some(id) = id else { return false };
        if self.ids.contains(id) {
            self.skipped.fetch_add(1, Ordering::Relaxed);
            metrics::counter!(m::EVENTS_SKIPPED, m::LABEL_CONNECTOR => self.connector.clone(), m::LABEL_REASON => m::REASON_DEBEZIUM).increment(1);
            tracing::debug!(connector = %self.connector, event_id = %String::from_utf8_lossy(id), "skipped: Debezium delivered it before it stopped");
            return true;
        }
        false
    }

    /// Sets whether the set is consulted, for a delivery loop (re)starting from a checkpoint
    /// that carries the note (`active`) or no longer does: a replay from an earlier
    /// checkpoint skips the same events the first pass did.
    pub fn rearm(&self, active: bool) {
        self.done.store(!active, Ordering::Relaxed);
    }

    /// The note checkpoints carry while the set is consulted; `None` once done.
    pub fn note(&self) -> Option<Cutover> {
        (!self.done.load(Ordering::Relaxed)).then(|| self.note.clone())
    }

    /// Events skipped so far.
    #[cfg(test)]
    pub fn skipped(&self) -> u64 {
        self.skipped.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn note() -> Cutover {
        Cutover {
            from: "debezium".into(),
            topics: vec!["t".into()],
            since_ms: 1_000,
            until_ms: 10_000,
        }
    }

    #[test]
    fn skips_what_debezium_wrote_until_past_its_stop() {
        let ids: HashSet<Vec<u8>> = [b"a".to_vec(), b"b".to_vec()].into();
        let d = Dedupe::new("c", note(), ids);
        assert!(d.consult(Some(b"a"), 5_000));
        assert!(
            d.consult(Some(b"a"), 5_000),
            "a replay meets it again: skipped again"
        );
        assert!(!d.consult(Some(b"x"), 5_000));
        assert!(!d.consult(None, 5_000));
        assert_eq!(d.skipped(), 2);
        assert!(d.note().is_some());
        // Within the margin: still consulted.
        assert!(d.consult(Some(b"b"), 10_000 + 59_000));
        // Past it: done for good, even for ids in the set.
        assert!(!d.consult(Some(b"b"), 10_000 + 61_000));
        assert!(!d.consult(Some(b"b"), 5_000));
        assert!(d.note().is_none());
    }

    #[test]
    fn times_print_as_utc() {
        assert_eq!(format_ms(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(format_ms(1_796_237_002_123), "2026-12-02T18:43:22.123Z");
        assert_eq!(format_ms(951_782_400_000), "2000-02-29T00:00:00.000Z");
    }
}
