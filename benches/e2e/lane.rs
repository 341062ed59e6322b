//! One lane: a peer, a source, its own database, topics and slot, through the backlog and
//! steady-state scenarios; and the ceiling run.

use std::ops::Range;
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{Context, Result};
use mysql_async::prelude::Queryable;

use crate::collector::{self, Collector, Wait};
use crate::peers::{self, Lane, Peer, Running};
use crate::report::{Drain, Steady};
use crate::workload::{self, AGGREGATE_TYPES};
use crate::{clock, procstat, Options, Source};

fn topics(prefix: &str) -> Vec<String> {
    AGGREGATE_TYPES
        .iter()
        .map(|t| format!("{prefix}{t}"))
        .collect()
}

/// The services whose CPU a drain reports, in [`Drain`] order: the Kafka broker and the
/// lane's database server (`None` for the ceiling). Pids from `scripts/services.sh`; a
/// service without one is left out (its figure is then not reported).
fn services(source: Option<Source>) -> Vec<u32> {
    let db = source.map(|s| match s {
        Source::MariaDb => "mariadb",
        Source::Postgres => "postgres",
    });
    [Some("kafka"), db]
        .into_iter()
        .map(|s| s.and_then(crate::env::service_pid).unwrap_or(0))
        .collect()
}

/// Waits for `range`, sampling `peer` and `services`, failing early if the peer dies.
fn await_range(
    c: &Collector,
    range: Range<u64>,
    timeout: Duration,
    peer: &mut Running,
    services: &[u32],
) -> Result<Wait> {
    let pid = peer.pid();
    c.wait_for(range, timeout, Some(pid), services, &mut || {
        peer.check_alive()
    })
}

/// Percentile `p` (0..=100) of sorted `v`.
fn percentile(v: &[f64], p: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let idx = ((p / 100.0) * (v.len() - 1) as f64).round() as usize;
    v[idx.min(v.len() - 1)]
}

fn drain_result(
    source: &str,
    peer: &str,
    payload: usize,
    events: u64,
    w: &Wait,
    started_us: u64,
) -> Drain {
    let first = w.records.iter().map(|s| s.append_ms).min().unwrap_or(0);
    let last = w.records.iter().map(|s| s.append_ms).max().unwrap_or(0);
    let last_recv_us = w.records.iter().map(|s| s.recv_us).max().unwrap_or(0);
    // Until the last record is readable: an exactly-once record counts once its Kafka
    // transaction commits, not at its append. Append times are whole milliseconds: the
    // last one's millisecond counts in full.
    let last_visible_ms = (last_recv_us as f64 / 1000.0).max((last + 1) as f64);
    let span_s = ((last_visible_ms - first as f64) / 1000.0).max(0.001);
    let per_100k = |cpu_s: f64| cpu_s / events as f64 * 100_000.0;
    let service = |i: usize| w.services_cpu_s.get(i).copied().flatten().map(per_100k);
    Drain {
        source: source.into(),
        peer: peer.into(),
        payload,
        events,
        events_per_s: events as f64 / span_s,
        first_record_s: (first as f64 * 1000.0 - started_us as f64) / 1e6,
        drain_s: span_s,
        peak_rss_mib: w.at_last.hwm_kib as f64 / 1024.0,
        cpu_s_per_100k: per_100k(w.at_last.cpu_s - w.at_first.cpu_s),
        cpu_s_process: w.at_last.cpu_s,
        broker_cpu_s_per_100k: service(0),
        database_cpu_s_per_100k: service(1),
        duplicates: w.duplicates,
        visible_after_ms: Some((last_recv_us as f64 / 1000.0 - last as f64).max(0.0)),
    }
}

/// The plain-producer ceiling for `payload`-byte events.
pub async fn ceiling(opts: &Options, run: &str, payload: usize) -> Result<Drain> {
    let prefix = format!("bench.{run}.ceiling.{payload}.");
    let (w, started_us) = produce_and_read(&prefix, "ceiling", opts.events, payload).await?;
    Ok(drain_result(
        "none",
        "ceiling",
        payload,
        opts.events,
        &w,
        started_us,
    ))
}

/// Warms the broker up, unmeasured: `opts.warmup_events` 1 KiB events, half through the
/// ceiling's plain producer and half in Kafka transactions, read back by the collector.
pub async fn warmup(opts: &Options, run: &str) -> Result<()> {
    let half = (opts.warmup_events / 2).max(1);
    for role in ["ceiling", "warmup"] {
        let prefix = format!("bench.{run}.warmup.{role}.");
        produce_and_read(&prefix, role, half, 1024).await?;
    }
    Ok(())
}

/// Runs the producer child (`role` `ceiling` or `warmup`) for events `1..=count` into fresh
/// topics under `prefix`, waits until the collector has read them all, deletes the topics.
/// Returns the wait (samples of the child) and when the child was started, µs.
async fn produce_and_read(
    prefix: &str,
    role: &str,
    count: u64,
    payload: usize,
) -> Result<(Wait, u64)> {
    let topics = topics(prefix);
    collector::create_topics(&topics).await?;
    let c = Collector::start(&topics)?;
    let started_us = clock::now_us();
    let mut child = Command::new(std::env::current_exe()?)
        .arg("--role")
        .arg(format!("{role}:{prefix}:1:{count}:{payload}"))
        .stdin(Stdio::piped())
        .spawn()
        .with_context(|| format!("start the {role} producer"))?;
    let pid = child.id();
    let w = tokio::task::block_in_place(|| {
        c.wait_for(
            1..1 + count,
            Duration::from_secs(600),
            Some(pid),
            &services(None),
            &mut || match child.try_wait()? {
                Some(status) => anyhow::bail!("the {role} producer exited early: {status}"),
                None => Ok(()),
            },
        )
    });
    if w.is_err() {
        let _ = child.kill();
    }
    drop(child.stdin.take());
    let _ = child.wait();
    drop(c);
    collector::delete_topics(&topics).await;
    Ok((w?, started_us))
}

/// Creates the lane's database with the `migrations/` outbox schema (and, on PostgreSQL, the
/// publication both peers read).
async fn create_database(source: Source, name: &str) -> Result<()> {
    let root = peers::repo_root();
    match source {
        Source::MariaDb => {
            let ddl = std::fs::read_to_string(root.join("migrations/mysql/001_outbox.sql"))?;
            let mut conn = crate::env::mariadb_connect().await?;
            conn.query_drop(format!("CREATE DATABASE {name}")).await?;
            conn.query_drop(format!("USE {name}")).await?;
            conn.query_drop(ddl).await.context("migrations/mysql")?;
            conn.disconnect().await?;
        }
        Source::Postgres => {
            let ddl = std::fs::read_to_string(root.join("migrations/postgres/001_outbox.sql"))?;
            let admin = crate::env::pg_connect("outboxd").await?;
            admin
                .batch_execute(&format!("CREATE DATABASE {name}"))
                .await?;
            let (user, ..) = source.relay_login()?;
            admin
                .batch_execute(&format!("GRANT CONNECT ON DATABASE {name} TO {user}"))
                .await?;
            let db = crate::env::pg_connect(name).await?;
            db.batch_execute(&ddl)
                .await
                .context("migrations/postgres")?;
            db.batch_execute(&format!(
                "CREATE PUBLICATION {name} FOR TABLE outbox_events WITH (publish = 'insert')"
            ))
            .await?;
        }
    }
    Ok(())
}

/// Drops the lane's database and replication slots (clean-up; errors are reported only).
async fn drop_database(source: Source, name: &str) {
    let result: Result<()> = async {
        match source {
            Source::MariaDb => {
                let mut conn = crate::env::mariadb_connect().await?;
                conn.query_drop(format!("DROP DATABASE IF EXISTS {name}"))
                    .await?;
            }
            Source::Postgres => {
                let admin = crate::env::pg_connect("outboxd").await?;
                admin
                    .batch_execute(&format!(
                        "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots \
                         WHERE slot_name IN ('{name}_o', '{name}_d') AND NOT active"
                    ))
                    .await?;
                admin
                    .batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                    .await?;
            }
        }
        Ok(())
    }
    .await;
    if let Err(e) = result {
        eprintln!("[bench] warning: clean-up of {name}: {e:#}");
    }
}

/// Runs one lane; returns its backlog drains and steady-state results.
pub async fn run(
    opts: &Options,
    run: &str,
    source: Source,
    peer: Peer,
) -> Result<(Vec<Drain>, Vec<Steady>)> {
    let name = format!(
        "ob{run}_{}_{}",
        source.name(),
        peer.name().replace('-', "_")
    );
    let dir = opts.work.join(&name);
    std::fs::create_dir_all(&dir)?;
    let lane = Lane {
        source,
        topic_prefix: format!("bench.{run}.{}.{}.", source.name(), peer.name()),
        server_id: 4_000_000 + std::process::id() % 10_000 * 10 + peer as u32,
        name: name.clone(),
        dir,
    };
    let topics = topics(&lane.topic_prefix);
    // Clean-up runs whatever happened: failure, interruption (SIGINT/SIGTERM), or success.
    let result = async {
        create_database(source, &name).await?;
        collector::create_topics(&topics).await?;
        scenarios(opts, &lane, peer, &topics).await
    }
    .await;
    collector::delete_topics(&topics).await;
    collector::delete_topics(&[
        format!("outboxd.checkpoints.{name}"),
        format!("{name}.schema-history"),
    ])
    .await;
    drop_database(source, &name).await;
    result
}

async fn scenarios(
    opts: &Options,
    lane: &Lane,
    peer: Peer,
    topics: &[String],
) -> Result<(Vec<Drain>, Vec<Steady>)> {
    let db = workload::connect(lane.source, &lane.name, opts.writers).await?;
    let c = Collector::start(topics)?;
    let (src, pname) = (lane.source.name(), peer.name());
    let mut starts = 0;
    let mut next_seq = 1u64;

    // 1. A position: the peer sees one event, then stops.
    let mut running = peers::start(peer, lane, starts)?;
    starts += 1;
    let mut retries = 0u64;
    wait_streaming(&c, &db, next_seq, &mut retries, &mut running).await?;
    next_seq += 1;
    running.stop()?;

    // 2. Backlog drains.
    let mut drains = Vec::new();
    // The sequence range of every result, in order (drains, then steadies).
    let mut ranges: Vec<Range<u64>> = Vec::new();
    for (i, &payload) in opts.payloads.iter().enumerate() {
        let range = next_seq..next_seq + opts.events;
        next_seq = range.end;
        eprintln!(
            "[bench]   backlog: writing {} events of {payload} B",
            opts.events
        );
        let written = workload::write(
            &db,
            range.start,
            opts.events,
            opts.txn_size,
            payload,
            opts.writers,
            None,
        )
        .await?;
        eprintln!(
            "[bench]   backlog written at {:.0} events/s; starting {pname}",
            written.rate()
        );
        running = peers::start(peer, lane, starts)?;
        starts += 1;
        let started_us = running.started_us;
        let timeout = Duration::from_secs(600 + opts.events / 100);
        let w = tokio::task::block_in_place(|| {
            await_range(
                &c,
                range.clone(),
                timeout,
                &mut running,
                &services(Some(lane.source)),
            )
        })?;
        let d = drain_result(src, pname, payload, opts.events, &w, started_us);
        ranges.push(range.clone());
        eprintln!(
            "[bench]   drained {:.0} events/s, first record after {:.2} s, last visible {:.0} ms after its append, peak RSS {:.0} MiB",
            d.events_per_s,
            d.first_record_s,
            d.visible_after_ms.unwrap_or(f64::NAN),
            d.peak_rss_mib
        );
        drains.push(d);
        if i + 1 < opts.payloads.len() {
            running.stop()?;
        }
    }

    // 3. Steady state, the peer running on.
    if opts.payloads.is_empty() {
        running = peers::start(peer, lane, starts)?;
        wait_streaming(&c, &db, next_seq, &mut retries, &mut running).await?;
        next_seq += 1;
    }
    let mut steadies = Vec::new();
    for &rate in &opts.rates {
        let count = rate * opts.steady_secs;
        let range = next_seq..next_seq + count;
        next_seq = range.end;
        eprintln!(
            "[bench]   steady: {rate} events/s for {} s",
            opts.steady_secs
        );
        // At most ~200 commits/s: each COMMIT waits for a log fsync, and a few writers on a
        // small machine do not get many more (a 20k/s target with 10-event transactions
        // reached only ~4.5k/s).
        let txn_size = opts.steady_txn_size.max(rate / 200);
        let before = procstat::sample(running.pid()).unwrap_or_default();
        let sampler = RssSampler::start(running.pid());
        let written = workload::write(
            &db,
            range.start,
            count,
            txn_size,
            opts.steady_payload,
            opts.writers,
            Some(rate as f64),
        )
        .await;
        let rss_while_writing = sampler.stop().await;
        running.check_alive()?;
        let written = written?;
        let timeout = Duration::from_secs(120 + opts.steady_secs);
        let w = tokio::task::block_in_place(|| {
            await_range(&c, range.clone(), timeout, &mut running, &[])
        })?;
        let mut append = Vec::with_capacity(w.records.len());
        let mut visible = Vec::with_capacity(w.records.len());
        for r in &w.records {
            let commit = written.commit_us[&r.seq] as f64;
            // LogAppendTime is truncated to the millisecond: +0.5 ms is its unbiased value.
            append.push((r.append_ms as f64 * 1000.0 + 500.0 - commit) / 1000.0);
            visible.push((r.recv_us as f64 - commit) / 1000.0);
        }
        // Every record's times, for looking at the tail (`<work>/<lane>/steady-<rate>.csv`).
        let mut csv = String::from("seq,commit_us,append_ms,recv_us\n");
        for r in &w.records {
            csv.push_str(&format!(
                "{},{},{},{}\n",
                r.seq, written.commit_us[&r.seq], r.append_ms, r.recv_us
            ));
        }
        std::fs::write(lane.dir.join(format!("steady-{rate}.csv")), csv)?;
        append.sort_by(f64::total_cmp);
        visible.sort_by(f64::total_cmp);
        let s = Steady {
            source: src.into(),
            peer: pname.into(),
            target_rate: rate,
            txn_size,
            achieved_rate: written.rate(),
            events: count,
            append_p50_ms: percentile(&append, 50.0),
            append_p99_ms: percentile(&append, 99.0),
            append_max_ms: percentile(&append, 100.0),
            visible_p50_ms: percentile(&visible, 50.0),
            visible_p99_ms: percentile(&visible, 99.0),
            visible_max_ms: percentile(&visible, 100.0),
            max_rss_mib: w.max_rss_kib.max(rss_while_writing) as f64 / 1024.0,
            cpu_s_per_100k: (w.at_last.cpu_s - before.cpu_s) / count as f64 * 100_000.0,
            duplicates: w.duplicates,
        };
        eprintln!(
            "[bench]   achieved {:.0} events/s; append latency p50 {:.1} ms p99 {:.1} ms",
            s.achieved_rate, s.append_p50_ms, s.append_p99_ms
        );
        steadies.push(s);
        ranges.push(range.clone());
    }
    running.stop()?;
    // Redeliveries (after a restart, or late) count for the range they belong to: recount
    // over everything read, once nothing more is in flight.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let mut ranges = ranges.into_iter();
    for d in &mut drains {
        d.duplicates = c.duplicates_in(ranges.next().expect("one range per result"));
    }
    for s in &mut steadies {
        s.duplicates = c.duplicates_in(ranges.next().expect("one range per result"));
    }
    Ok((drains, steadies))
}

/// Samples a process's RSS every 100 ms in the background, for the time writers run.
struct RssSampler {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    task: tokio::task::JoinHandle<u64>,
}

impl RssSampler {
    fn start(pid: u32) -> RssSampler {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        let task = tokio::spawn(async move {
            let mut max = 0;
            while !flag.load(std::sync::atomic::Ordering::Relaxed) {
                match procstat::sample(pid) {
                    Some(s) => max = max.max(s.rss_kib),
                    None => break,
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            max
        });
        RssSampler { stop, task }
    }

    /// Stops sampling; the highest RSS seen, KiB.
    async fn stop(self) -> u64 {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.task.await.unwrap_or(0)
    }
}

/// After a (re)start: writes event `seq` and waits until the peer delivers it. A peer that
/// has not taken its start position yet may miss an event written too early (both start at
/// the current position), so another event is written every 10 s until one arrives, for up
/// to 5 minutes; those take ids from `retries` (lane-wide, above every scenario's range).
async fn wait_streaming(
    c: &Collector,
    db: &workload::Db,
    first: u64,
    retries: &mut u64,
    running: &mut Running,
) -> Result<()> {
    // Write once the peer has had a moment; a peer that starts slowly (the JVM) is covered by
    // the retries below.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let deadline = std::time::Instant::now() + Duration::from_secs(300);
    let mut seq = first;
    loop {
        workload::write(db, seq, 1, 1, 200, 1, None).await?;
        let got = tokio::task::block_in_place(|| {
            c.wait_for(
                seq..seq + 1,
                Duration::from_secs(10),
                None,
                &[],
                &mut || running.check_alive(),
            )
        });
        if got.is_ok() {
            return Ok(());
        }
        running.check_alive()?;
        if std::time::Instant::now() >= deadline {
            anyhow::bail!("the peer delivered nothing within 5 minutes of starting");
        }
        *retries += 1;
        seq = 900_000_000_000 + *retries;
    }
}
