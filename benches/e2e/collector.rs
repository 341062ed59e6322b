//! The Kafka side of a lane: its topics, created with `message.timestamp.type=LogAppendTime`
//! so every record's timestamp is the broker's append time, and a read_committed consumer
//! that notes, for every record, the event's sequence number, the append time and when the
//! consumer saw it.

use std::collections::HashSet;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Headers, Message};
use rdkafka::{Offset, Timestamp, TopicPartitionList};

use crate::clock::now_us;
use crate::procstat;
use crate::workload::seq_of;

/// Partitions of every benchmark topic.
pub const PARTITIONS: i32 = 3;

fn admin() -> Result<AdminClient<DefaultClientContext>> {
    Ok(ClientConfig::new()
        .set("bootstrap.servers", crate::env::kafka_bootstrap())
        .create()?)
}

/// Creates `topics` (LogAppendTime, [`PARTITIONS`] partitions, replication 1).
pub async fn create_topics(topics: &[String]) -> Result<()> {
    let admin = admin()?;
    let new: Vec<NewTopic> = topics
        .iter()
        .map(|t| {
            NewTopic::new(t, PARTITIONS, TopicReplication::Fixed(1))
                .set("message.timestamp.type", "LogAppendTime")
        })
        .collect();
    for r in admin.create_topics(&new, &AdminOptions::new()).await? {
        if let Err((topic, code)) = r {
            bail!("cannot create topic {topic}: {code:?}");
        }
    }
    Ok(())
}

/// Deletes `topics`, ignoring errors (clean-up only).
pub async fn delete_topics(topics: &[String]) {
    if let Ok(admin) = admin() {
        let names: Vec<&str> = topics.iter().map(String::as_str).collect();
        let _ = admin.delete_topics(&names, &AdminOptions::new()).await;
    }
}

/// One record as the collector saw it.
#[derive(Debug, Clone, Copy)]
pub struct Seen {
    pub seq: u64,
    /// The broker's LogAppendTime, ms since the epoch.
    pub append_ms: i64,
    /// When the consumer received it, µs since the epoch.
    pub recv_us: u64,
}

/// A consumer thread reading a lane's topics from the beginning.
pub struct Collector {
    seen: Arc<Mutex<Vec<Seen>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Collector {
    /// Starts reading `topics` (which must exist) from offset 0.
    pub fn start(topics: &[String]) -> Result<Collector> {
        let consumer: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", crate::env::kafka_bootstrap())
            .set("group.id", "outboxd-bench-collector")
            .set("enable.auto.commit", "false")
            .set("isolation.level", "read_committed")
            // Fetches wait for 1 MiB or 5 ms. With fetch.min.bytes=1 a consumer of records
            // that become visible in a trickle (idempotent producers, Debezium) fetched
            // again for every few records, and the broker's CPU per event doubled: the
            // at-least-once relay drained at 78k events/s with the broker at 0.86 s / 100k
            // events, and at 116k with 0.43 s once fetches were batched (profile.md §6).
            .set("fetch.min.bytes", "1048576")
            .set("fetch.wait.max.ms", "5")
            .create()
            .context("Kafka consumer")?;
        let mut tpl = TopicPartitionList::new();
        for t in topics {
            for p in 0..PARTITIONS {
                tpl.add_partition_offset(t, p, Offset::Beginning)?;
            }
        }
        consumer.assign(&tpl)?;
        let seen = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (seen2, stop2) = (seen.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            while !stop2.load(Ordering::Relaxed) {
                let m = match consumer.poll(Duration::from_millis(50)) {
                    None => continue,
                    Some(Ok(m)) => m,
                    Some(Err(e)) => {
                        eprintln!("[bench] collector: {e}");
                        continue;
                    }
                };
                let recv_us = now_us();
                let append_ms = match m.timestamp() {
                    Timestamp::LogAppendTime(t) | Timestamp::CreateTime(t) => t,
                    Timestamp::NotAvailable => 0,
                };
                let seq = m.headers().and_then(|h| {
                    h.iter()
                        .find(|h| h.key == "id")
                        .and_then(|h| h.value)
                        .and_then(seq_of)
                });
                if let Some(seq) = seq {
                    seen2.lock().unwrap().push(Seen {
                        seq,
                        append_ms,
                        recv_us,
                    });
                }
            }
        });
        Ok(Collector {
            seen,
            stop,
            thread: Some(thread),
        })
    }

    /// Waits until every sequence number in `range` has been seen, or `timeout`. While
    /// waiting, samples `pid` (when given) every 20 ms; the returned [`Wait`] has the records
    /// of `range`, the duplicates, and the samples taken when the first record arrived and
    /// when the last did; and for each of `services` (pids of the broker or a database
    /// server), the CPU seconds it and its children used between those two moments.
    /// `alive` is called about every second and ends the wait with its error (a peer
    /// process that died).
    pub fn wait_for(
        &self,
        range: Range<u64>,
        timeout: Duration,
        pid: Option<u32>,
        services: &[u32],
        alive: &mut dyn FnMut() -> Result<()>,
    ) -> Result<Wait> {
        let services_cpu = || procstat::trees_cpu_s(services);
        let mut services_at_first = Vec::new();
        let deadline = Instant::now() + timeout;
        let mut next_check = Instant::now();
        let mut distinct = HashSet::with_capacity((range.end - range.start) as usize);
        let mut records = Vec::new();
        let mut duplicates = 0u64;
        let mut cursor = 0usize;
        let mut at_first = None;
        // Samples taken until the first record arrives, with when (µs since the epoch): the
        // CPU window starts at the first record's append, which an exactly-once consumer
        // sees only at its transaction's commit.
        let mut before_first: Vec<(u64, procstat::Sample, Vec<Option<f64>>)> = Vec::new();
        let mut max_rss_kib = 0;
        loop {
            crate::interrupt::check()?;
            if Instant::now() >= next_check {
                alive()?;
                next_check += Duration::from_secs(1);
            }
            let sample = pid.and_then(procstat::sample);
            if let Some(s) = sample {
                max_rss_kib = max_rss_kib.max(s.rss_kib);
            }
            {
                let seen = self.seen.lock().unwrap();
                for s in &seen[cursor..] {
                    if range.contains(&s.seq) {
                        if distinct.insert(s.seq) {
                            records.push(*s);
                        } else {
                            duplicates += 1;
                        }
                    }
                }
                cursor = seen.len();
            }
            if at_first.is_none() {
                if records.is_empty() {
                    if let Some(s) = sample {
                        before_first.push((crate::clock::now_us(), s, services_cpu()));
                    }
                } else {
                    let first_append_us = records
                        .iter()
                        .map(|r| r.append_ms)
                        .min()
                        .unwrap_or(0)
                        .max(0) as u64
                        * 1000;
                    let earlier = before_first
                        .iter()
                        .rev()
                        .find(|(t, ..)| *t <= first_append_us)
                        .or(before_first.first());
                    match earlier {
                        Some((_, s, services)) => {
                            at_first = Some(*s);
                            services_at_first = services.clone();
                        }
                        None => {
                            at_first = sample;
                            services_at_first = services_cpu();
                        }
                    }
                }
            }
            if distinct.len() as u64 == range.end - range.start {
                let services_cpu_s = services_cpu()
                    .into_iter()
                    .zip(services_at_first)
                    .map(|(last, first)| Some(last? - first?))
                    .collect();
                return Ok(Wait {
                    services_cpu_s,
                    records,
                    duplicates,
                    at_first: at_first.unwrap_or_default(),
                    at_last: sample.unwrap_or_default(),
                    max_rss_kib,
                });
            }
            if Instant::now() >= deadline {
                bail!(
                    "only {} of {} records arrived within {timeout:?}",
                    distinct.len(),
                    range.end - range.start
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Collector {
    /// Records of `range` seen more than once so far, over everything this collector read
    /// (a redelivery after a restart replays an earlier range; call after things settled).
    pub fn duplicates_in(&self, range: Range<u64>) -> u64 {
        let seen = self.seen.lock().unwrap();
        let mut distinct = HashSet::new();
        let mut total = 0u64;
        for s in seen.iter().filter(|s| range.contains(&s.seq)) {
            total += 1;
            distinct.insert(s.seq);
        }
        total - distinct.len() as u64
    }
}

impl Drop for Collector {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The outcome of [`Collector::wait_for`].
pub struct Wait {
    /// One record per sequence number (the first seen).
    pub records: Vec<Seen>,
    /// Records seen more than once.
    pub duplicates: u64,
    /// The process sample at the first record's append (the last one taken before it;
    /// samples are 20 ms apart).
    pub at_first: procstat::Sample,
    /// The process sample when the last one was.
    pub at_last: procstat::Sample,
    /// Highest RSS sampled while waiting, KiB.
    pub max_rss_kib: u64,
    /// Per pid given as `services`: CPU seconds from the first record's append to the last
    /// record's arrival (`None` when the process was gone).
    pub services_cpu_s: Vec<Option<f64>>,
}
