//! `outboxd diff`: Debezium's records against a shadow run's (`outboxd run --shadow NAME`
//! on the same connector JSON), paired by event id.
//!
//! Both sides are read `read_committed` over a time window (with some slack on either side:
//! Debezium's record time is when it processed an event, outboxd's the commit time, so one
//! event's two records need not fall in the same window). An event is compared when either
//! of its records lies in the window; its records are paired by topic (the shadow's minus
//! its `NAME.` prefix) and `id` header. For each pair: partition (not for records without
//! key, whose partition each producer picks), key, value, header names in order and header
//! values — except `__debezium.context.runId`, a new UUID per run on both sides, whose
//! presence alone is compared — and, per partition, the order of the events both sides
//! have. The record timestamps differ by design and are not compared. An event on one side
//! only is missing on the other; an event twice on one side is a duplicate (Debezium's own,
//! after a restart of its, do not count against the match: they are reported).

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Headers, Message};
use rdkafka::{Offset, TopicPartitionList};
use serde::Serialize;

use super::CutoverError;
use crate::config::KafkaConfig;
use crate::sink::client;

const KAFKA_TIMEOUT: Duration = Duration::from_secs(30);
/// The header whose value differs per run by design.
const RUN_ID: &str = "__debezium.context.runId";
/// Longest text shown of a differing field.
const SHOW_MAX: usize = 300;

/// One record read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rec {
    /// The topic (the shadow's prefix removed).
    pub topic: String,
    /// Partition and offset.
    pub partition: i32,
    /// Offset in the partition.
    pub offset: i64,
    /// Record time, ms.
    pub timestamp_ms: Option<i64>,
    /// Key bytes.
    pub key: Option<Vec<u8>>,
    /// Value bytes.
    pub value: Option<Vec<u8>>,
    /// Headers in order.
    pub headers: Vec<(String, Option<Vec<u8>>)>,
}

impl Rec {
    fn id(&self) -> Option<&[u8]> {
        self.headers
            .iter()
            .find(|(k, _)| k == "id")
            .and_then(|(_, v)| v.as_deref())
    }
}

/// Reads `topics` from record time `from_ms` on to their end (`read_committed`), keeping the
/// records up to `to_ms`; `strip` is removed from the front of each topic name.
///
/// Errors: transient when Kafka does not answer.
pub fn read(
    kafka: &KafkaConfig,
    topics: &[String],
    from_ms: i64,
    to_ms: i64,
    strip: &str,
) -> Result<Vec<Rec>, CutoverError> {
    let unavailable = |what: String, e: rdkafka::error::KafkaError| {
        CutoverError::unavailable(what, e.to_string())
    };
    let make = |isolation: &str| -> Result<BaseConsumer, CutoverError> {
        client::config(kafka)
            .set("group.id", "outboxd-diff")
            .set("enable.auto.commit", "false")
            .set("isolation.level", isolation)
            .create()
            .map_err(|e| unavailable("creating a Kafka consumer".into(), e))
    };
    let consumer = make("read_committed")?;
    let watermarks = make("read_uncommitted")?;
    let mut times = TopicPartitionList::new();
    for topic in topics {
        let md = consumer
            .fetch_metadata(Some(topic), KAFKA_TIMEOUT)
            .map_err(|e| unavailable(format!("reading metadata of {topic}"), e))?;
        for t in md.topics().iter().filter(|t| t.error().is_none()) {
            for p in t.partitions() {
                times
                    .add_partition_offset(topic, p.id(), Offset::Offset(from_ms))
                    .map_err(|e| unavailable(format!("topic {topic}"), e))?;
            }
        }
    }
    let mut out = Vec::new();
    if times.count() == 0 {
        return Ok(out);
    }
    let starts = consumer
        .offsets_for_times(times, KAFKA_TIMEOUT)
        .map_err(|e| unavailable("finding the window's start offsets".into(), e))?;
    let mut assign = TopicPartitionList::new();
    let mut ends: BTreeMap<(String, i32), i64> = BTreeMap::new();
    for e in starts.elements() {
        let Offset::Offset(start) = e.offset() else {
            continue;
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
        .map_err(|e| unavailable("assigning".into(), e))?;
    let mut idle = std::time::Instant::now();
    while !ends.is_empty() {
        if idle.elapsed() > KAFKA_TIMEOUT * 2 {
            return Err(CutoverError::unavailable(
                "reading the topics",
                format!("no progress for {:?}", KAFKA_TIMEOUT * 2),
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
        let msg = msg.map_err(|e| unavailable("reading the topics".into(), e))?;
        idle = std::time::Instant::now();
        let ts = msg.timestamp().to_millis();
        if ts.is_some_and(|t| t > to_ms) {
            continue;
        }
        let headers = msg
            .headers()
            .map(|hs| {
                hs.iter()
                    .map(|h| (h.key.to_string(), h.value.map(<[u8]>::to_vec)))
                    .collect()
            })
            .unwrap_or_default();
        out.push(Rec {
            topic: msg
                .topic()
                .strip_prefix(strip)
                .unwrap_or(msg.topic())
                .to_string(),
            partition: msg.partition(),
            offset: msg.offset(),
            timestamp_ms: ts,
            key: msg.key().map(<[u8]>::to_vec),
            value: msg.payload().map(<[u8]>::to_vec),
            headers,
        });
    }
    Ok(out)
}

/// One kind of difference, with an example.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Example {
    /// The event id.
    pub id: String,
    /// Debezium's side of the field.
    pub debezium: String,
    /// outboxd's side of the field.
    pub outboxd: String,
}

/// What one topic's comparison found.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct TopicReport {
    /// The topic (Debezium's name).
    pub topic: String,
    /// Events compared and found the same.
    pub identical: u64,
    /// Events compared and found different (each counted once, whatever differs).
    pub different: u64,
    /// Differences by kind (`value`, `key`, `partition`, `header names`, `header <name>`,
    /// `order`): how many events, and one example.
    pub differences: BTreeMap<String, (u64, Example)>,
    /// Events Debezium wrote and the shadow did not (up to 10 ids shown).
    pub missing_in_outboxd: (u64, Vec<String>),
    /// Events the shadow wrote and Debezium did not.
    pub missing_in_debezium: (u64, Vec<String>),
    /// Events Debezium wrote more than once (its at-least-once redelivery).
    pub debezium_duplicates: u64,
    /// Events the shadow wrote more than once.
    pub outboxd_duplicates: u64,
    /// Records without an `id` header (not comparable), per side.
    pub without_id: (u64, u64),
}

impl TopicReport {
    /// Whether the shadow's records are Debezium's.
    pub fn matches(&self) -> bool {
        self.different == 0
            && self.differences.is_empty()
            && self.missing_in_outboxd.0 == 0
            && self.missing_in_debezium.0 == 0
            && self.outboxd_duplicates == 0
    }
}

/// A field's bytes for the report: text when UTF-8 (shortened), else hex.
fn show(b: Option<&[u8]>) -> String {
    match b {
        None => "(null)".into(),
        Some(b) => match std::str::from_utf8(b) {
            Ok(s) if s.chars().count() > SHOW_MAX => {
                format!(
                    "{}… ({} bytes)",
                    s.chars().take(SHOW_MAX).collect::<String>(),
                    b.len()
                )
            }
            Ok(s) => s.to_string(),
            Err(_) => format!(
                "hex:{}{}",
                b.iter()
                    .take(SHOW_MAX / 2)
                    .map(|x| format!("{x:02x}"))
                    .collect::<String>(),
                if b.len() > SHOW_MAX / 2 { "…" } else { "" }
            ),
        },
    }
}

/// One side's records by topic and event id.
type Side<'a> = BTreeMap<String, HashMap<Vec<u8>, Vec<&'a Rec>>>;

/// Groups one side's records by topic and event id; records without an `id` header in the
/// window are counted in their topic's report.
fn group<'a>(
    recs: &'a [Rec],
    dbz_side: bool,
    reports: &mut BTreeMap<String, TopicReport>,
    from_ms: i64,
    to_ms: i64,
) -> Side<'a> {
    let mut side: Side<'a> = BTreeMap::new();
    for r in recs {
        let rep = reports
            .entry(r.topic.clone())
            .or_insert_with(|| TopicReport {
                topic: r.topic.clone(),
                ..Default::default()
            });
        match r.id() {
            Some(id) => side
                .entry(r.topic.clone())
                .or_default()
                .entry(id.to_vec())
                .or_default()
                .push(r),
            None if r.timestamp_ms.is_none_or(|t| t >= from_ms && t <= to_ms) => {
                if dbz_side {
                    rep.without_id.0 += 1;
                } else {
                    rep.without_id.1 += 1;
                }
            }
            None => {}
        }
    }
    side
}

/// Compares Debezium's records `dbz` with the shadow's `oxd` (topics without the prefix),
/// considering the events with a record in `[from_ms, to_ms]` on either side.
pub fn compare(dbz: &[Rec], oxd: &[Rec], from_ms: i64, to_ms: i64) -> Vec<TopicReport> {
    let in_window = |r: &Rec| r.timestamp_ms.is_none_or(|t| t >= from_ms && t <= to_ms);
    let mut reports: BTreeMap<String, TopicReport> = BTreeMap::new();
    let d = group(dbz, true, &mut reports, from_ms, to_ms);
    let o = group(oxd, false, &mut reports, from_ms, to_ms);
    let empty = HashMap::new();
    for (topic, rep) in reports.iter_mut() {
        let ds = d.get(topic).unwrap_or(&empty);
        let os = o.get(topic).unwrap_or(&empty);
        let mut ids: Vec<&Vec<u8>> = ds.keys().chain(os.keys()).collect();
        ids.sort();
        ids.dedup();
        let note = |rep: &mut TopicReport, kind: String, ex: Example| {
            rep.differences
                .entry(kind)
                .and_modify(|(n, _)| *n += 1)
                .or_insert((1, ex));
        };
        // Per partition, the events both sides have, in each side's order.
        let mut order_d: BTreeMap<i32, Vec<(i64, &Vec<u8>)>> = BTreeMap::new();
        let mut order_o: BTreeMap<i32, Vec<(i64, &Vec<u8>)>> = BTreeMap::new();
        for id in ids {
            let dr = ds.get(id).map(Vec::as_slice).unwrap_or_default();
            let or = os.get(id).map(Vec::as_slice).unwrap_or_default();
            if !dr.iter().chain(or).any(|r| in_window(r)) {
                continue;
            }
            let shown = String::from_utf8_lossy(id).into_owned();
            if dr.len() > 1 {
                rep.debezium_duplicates += (dr.len() - 1) as u64;
            }
            if or.len() > 1 {
                rep.outboxd_duplicates += (or.len() - 1) as u64;
            }
            let (Some(a), Some(b)) = (dr.first(), or.first()) else {
                let missing = if dr.is_empty() {
                    &mut rep.missing_in_debezium
                } else {
                    &mut rep.missing_in_outboxd
                };
                missing.0 += 1;
                if missing.1.len() < 10 {
                    missing.1.push(shown);
                }
                continue;
            };
            if a.key.is_some() && b.key.is_some() {
                order_d.entry(a.partition).or_default().push((a.offset, id));
                order_o.entry(b.partition).or_default().push((b.offset, id));
            }
            let mut differs = false;
            let mut diff =
                |rep: &mut TopicReport, kind: String, x: Option<&[u8]>, y: Option<&[u8]>| {
                    differs = true;
                    note(
                        rep,
                        kind,
                        Example {
                            id: shown.clone(),
                            debezium: show(x),
                            outboxd: show(y),
                        },
                    );
                };
            if a.key.is_some() && b.key.is_some() && a.partition != b.partition {
                let (x, y) = (a.partition.to_string(), b.partition.to_string());
                diff(
                    rep,
                    "partition".into(),
                    Some(x.as_bytes()),
                    Some(y.as_bytes()),
                );
            }
            if a.key != b.key {
                diff(rep, "key".into(), a.key.as_deref(), b.key.as_deref());
            }
            if a.value != b.value {
                diff(rep, "value".into(), a.value.as_deref(), b.value.as_deref());
            }
            let names = |r: &Rec| {
                r.headers
                    .iter()
                    .map(|(k, _)| k.as_str())
                    .collect::<Vec<_>>()
                    .join(",")
            };
            if names(a) != names(b) {
                let (x, y) = (names(a), names(b));
                diff(
                    rep,
                    "header names".into(),
                    Some(x.as_bytes()),
                    Some(y.as_bytes()),
                );
            } else {
                for ((k, x), (_, y)) in a.headers.iter().zip(&b.headers) {
                    if k != RUN_ID && x != y {
                        diff(rep, format!("header {k}"), x.as_deref(), y.as_deref());
                    }
                }
            }
            if differs {
                rep.different += 1;
            } else {
                rep.identical += 1;
            }
        }
        // Order: the common events of each partition in offset order must be the same list.
        for (p, mut dl) in order_d {
            let mut ol = order_o.remove(&p).unwrap_or_default();
            dl.sort();
            ol.sort();
            let common: std::collections::HashSet<&Vec<u8>> = dl
                .iter()
                .map(|(_, i)| *i)
                .filter(|i| ol.iter().any(|(_, j)| j == i))
                .collect();
            let da: Vec<&Vec<u8>> = dl
                .iter()
                .map(|(_, i)| *i)
                .filter(|i| common.contains(i))
                .collect();
            let oa: Vec<&Vec<u8>> = ol
                .iter()
                .map(|(_, i)| *i)
                .filter(|i| common.contains(i))
                .collect();
            if let Some(k) = da.iter().zip(&oa).position(|(x, y)| x != y) {
                note(
                    rep,
                    "order".into(),
                    Example {
                        id: format!("partition {p}, event #{}", k + 1),
                        debezium: String::from_utf8_lossy(da[k]).into_owned(),
                        outboxd: String::from_utf8_lossy(oa[k]).into_owned(),
                    },
                );
            }
        }
    }
    reports.into_values().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(topic: &str, p: i32, off: i64, id: &str, value: &str, run: &str) -> Rec {
        Rec {
            topic: topic.into(),
            partition: p,
            offset: off,
            timestamp_ms: Some(1_000 + off),
            key: Some(b"k".to_vec()),
            value: Some(value.as_bytes().to_vec()),
            headers: vec![
                (RUN_ID.into(), Some(run.as_bytes().to_vec())),
                ("id".into(), Some(id.as_bytes().to_vec())),
            ],
        }
    }

    #[test]
    fn pairs_by_id_and_reports_each_kind_once_with_an_example() {
        let dbz = vec![
            rec("t", 0, 0, "a", "1", "r1"),
            rec("t", 0, 1, "b", "2", "r1"),
            rec("t", 0, 2, "c", "3", "r1"),
            rec("t", 0, 3, "c", "3", "r1"),
            rec("t", 0, 4, "d", "4", "r1"),
        ];
        let oxd = vec![
            rec("t", 0, 10, "a", "1", "r2"),
            rec("t", 0, 11, "b", "two", "r2"),
            rec("t", 0, 12, "c", "3", "r2"),
            rec("t", 0, 13, "e", "5", "r2"),
        ];
        let r = compare(&dbz, &oxd, 0, 10_000);
        assert_eq!(r.len(), 1);
        let t = &r[0];
        assert_eq!((t.identical, t.different), (2, 1));
        assert_eq!(t.debezium_duplicates, 1);
        assert_eq!(t.missing_in_outboxd, (1, vec!["d".into()]));
        assert_eq!(t.missing_in_debezium, (1, vec!["e".into()]));
        let (n, ex) = &t.differences["value"];
        assert_eq!(
            (*n, ex.debezium.as_str(), ex.outboxd.as_str()),
            (1, "2", "two")
        );
        assert!(!t.matches());
    }

    #[test]
    fn run_ids_and_timestamps_do_not_count_but_order_does() {
        let dbz = vec![
            rec("t", 0, 0, "a", "1", "r1"),
            rec("t", 0, 1, "b", "2", "r1"),
        ];
        let mut oxd = vec![
            rec("t", 0, 5, "b", "2", "r2"),
            rec("t", 0, 6, "a", "1", "r2"),
        ];
        let r = compare(&dbz, &oxd, 0, 10_000);
        assert_eq!(r[0].identical, 2);
        assert!(r[0].differences.contains_key("order"), "{:?}", r[0]);
        oxd.swap(0, 1);
        oxd[0].offset = 5;
        oxd[1].offset = 6;
        let r = compare(&dbz, &oxd, 0, 10_000);
        assert!(r[0].matches(), "{:?}", r[0]);
    }

    #[test]
    fn out_of_window_events_are_not_compared() {
        let dbz = vec![
            rec("t", 0, 0, "a", "1", "r"),
            rec("t", 0, 9_000, "z", "1", "r"),
        ];
        let oxd = vec![rec("t", 0, 0, "a", "1", "r")];
        let r = compare(&dbz, &oxd, 0, 5_000);
        assert!(r[0].matches(), "{:?}", r[0]);
    }
}
