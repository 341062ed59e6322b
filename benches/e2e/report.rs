//! The results: `e2e.json` (every figure), `e2e.md` (tables with the ratios the goals are
//! stated in) and `e2e.png` (a chart of drain rates and steady-state latency).

use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Context, Result};
use mysql_async::prelude::Queryable;
use serde::{Deserialize, Serialize};

use crate::Options;

/// One backlog drain (or the ceiling run).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Drain {
    pub source: String,
    pub peer: String,
    /// Payload bytes per event.
    pub payload: usize,
    pub events: u64,
    /// Events per second from the first record's append until the last record reached the
    /// read_committed consumer (exactly-once: until the last Kafka transaction committed).
    pub events_per_s: f64,
    /// Seconds from the process start to the first record's append time.
    pub first_record_s: f64,
    /// Seconds from the first append until the last record was visible.
    pub drain_s: f64,
    /// Peak resident set size (VmHWM) at the end of the drain, MiB.
    pub peak_rss_mib: f64,
    /// CPU seconds (user + system) spent from the first record to the last, per 100k events.
    pub cpu_s_per_100k: f64,
    /// CPU seconds the process used from its start to the last record (start-up included).
    pub cpu_s_process: f64,
    /// CPU seconds the Kafka broker used from the first record to the last, per 100k events
    /// (`None`: no pid from scripts/services.sh, or results from before it was measured).
    #[serde(default)]
    pub broker_cpu_s_per_100k: Option<f64>,
    /// The same for the lane's database server and its children (PostgreSQL: the
    /// walsenders; MariaDB: the binlog dump thread is inside `mariadbd`).
    #[serde(default)]
    pub database_cpu_s_per_100k: Option<f64>,
    /// Records delivered more than once (recounted when the lane ends).
    pub duplicates: u64,
    /// Milliseconds from the last append to the last record reaching a read_committed
    /// consumer: for exactly-once, the wait for the last Kafka transaction's commit (plus
    /// the consumer's fetch delay, as for every peer). `None` in results from before it
    /// was measured.
    #[serde(default)]
    pub visible_after_ms: Option<f64>,
}

/// One steady-state rate.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Steady {
    pub source: String,
    pub peer: String,
    pub target_rate: u64,
    /// Events per source transaction.
    pub txn_size: u64,
    /// Events per second the writers committed.
    pub achieved_rate: f64,
    pub events: u64,
    /// Source COMMIT returned → broker append (LogAppendTime), ms.
    pub append_p50_ms: f64,
    pub append_p99_ms: f64,
    pub append_max_ms: f64,
    /// Source COMMIT returned → a read_committed consumer received it, ms.
    pub visible_p50_ms: f64,
    pub visible_p99_ms: f64,
    pub visible_max_ms: f64,
    /// Highest RSS sampled during the rate, MiB.
    pub max_rss_mib: f64,
    /// CPU seconds per 100k events during the rate.
    pub cpu_s_per_100k: f64,
    pub duplicates: u64,
}

/// Everything one run measured, and what it ran on.
#[derive(Debug, Serialize, Deserialize)]
pub struct Results {
    pub command: String,
    pub date: String,
    pub machine: String,
    pub versions: Vec<(String, String)>,
    pub options: String,
    /// Wall time of the run so far, seconds.
    #[serde(default)]
    pub duration_s: f64,
    pub drains: Vec<Drain>,
    pub steadies: Vec<Steady>,
}

fn sh(cmd: &str) -> String {
    std::process::Command::new("sh")
        .args(["-c", cmd])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

/// The value of `<name>` in a pom's `<properties>` (the versions the harness resolves).
fn pom_property(pom: &str, name: &str) -> String {
    let text = std::fs::read_to_string(crate::peers::repo_root().join(pom)).unwrap_or_default();
    let open = format!("<{name}>");
    text.split_once(&open)
        .and_then(|(_, rest)| rest.split_once("</"))
        .map(|(v, _)| v.trim().to_string())
        .unwrap_or_else(|| "?".into())
}

/// `v` with `decimals` decimals; a value just under `goal` that would round up to it gets one
/// decimal more, rounded down, so "5.0× (not met)" cannot appear.
fn against_goal(v: f64, goal: f64, decimals: usize) -> String {
    let scale = 10f64.powi(decimals as i32);
    if v < goal && (v * scale).round() >= goal * scale {
        format!(
            "{:.*}",
            decimals + 1,
            (v * scale * 10.0).floor() / (scale * 10.0)
        )
    } else {
        format!("{v:.decimals$}")
    }
}

impl Results {
    /// Empty results with the run's environment filled in.
    pub fn new(opts: &Options, rt: &tokio::runtime::Runtime) -> Result<Results> {
        let mariadb: String = rt.block_on(async {
            let mut c = crate::env::mariadb_connect().await?;
            let v: Option<String> = c.query_first("SELECT VERSION()").await?;
            anyhow::Ok(v.unwrap_or_default())
        })?;
        let postgres: String = rt.block_on(async {
            let c = crate::env::pg_connect("outboxd").await?;
            let row = c.query_one("SHOW server_version", &[]).await?;
            anyhow::Ok(row.get::<_, String>(0))
        })?;
        Ok(Results {
            command: opts.command_label.clone(),
            date: sh("date -u '+%Y-%m-%d %H:%M UTC'"),
            machine: format!(
                "{} CPUs ({}), {} GiB RAM, {}",
                sh("nproc"),
                sh("grep -m1 'model name' /proc/cpuinfo | cut -d: -f2").trim(),
                sh("awk '/MemTotal/ {printf \"%.0f\", $2/1048576}' /proc/meminfo"),
                sh("uname -sr")
            ),
            versions: vec![
                (
                    "outboxd".into(),
                    format!(
                        "{} ({})",
                        env!("CARGO_PKG_VERSION"),
                        sh("git rev-parse --short HEAD")
                    ),
                ),
                ("MariaDB".into(), mariadb),
                ("PostgreSQL".into(), postgres),
                (
                    "Kafka broker".into(),
                    format!("{} (KRaft, single node)", pom_property("scripts/kafka/pom.xml", "kafka.version")),
                ),
                (
                    "Debezium".into(),
                    format!("3.6.1.Final (PostgresConnector) and 3.5.0.Final (MariaDbConnector: no 3.6 \
                     release of it is on Maven Central, and the 3.6.1 MySqlConnector refuses \
                     MariaDB 10.11), EventRouter SMT, in Kafka Connect {} standalone \
                     (-Xms256M -Xmx2G, plugin.discovery=service_load)",
                    pom_property("benches/peers/pom.xml", "kafka.version")
                ),
                ),
                ("Java".into(), sh("java -version 2>&1 | head -1")),
            ],
            options: format!(
                "events={} payloads={:?} txn_size={} rates={:?} steady_secs={} steady_txn_size={} \
                 steady_payload={} writers={} warmup_events={}",
                opts.events,
                opts.payloads,
                opts.txn_size,
                opts.rates,
                opts.steady_secs,
                opts.steady_txn_size,
                opts.steady_payload,
                opts.writers,
                opts.warmup_events
            ),
            duration_s: 0.0,
            drains: Vec::new(),
            steadies: Vec::new(),
        })
    }

    /// Writes `e2e.json`, `e2e.md` and `e2e.png` into `dir`.
    pub fn write(&self, dir: &Path) -> Result<()> {
        std::fs::write(dir.join("e2e.json"), serde_json::to_string_pretty(self)?)?;
        self.render(dir)
    }

    /// Writes `e2e.md` and `e2e.png` into `dir` (`e2e.json` is left as it is).
    pub fn render(&self, dir: &Path) -> Result<()> {
        // Links to profile.md and benches/README.md hold only beside profile.md (the full
        // run's benches/results/); elsewhere (the smoke run's .state/) they name the files.
        let beside_profile = dir.join("profile.md").exists();
        std::fs::write(dir.join("e2e.md"), self.markdown(beside_profile))?;
        crate::chart::draw(self, &dir.join("e2e.png")).context("drawing e2e.png")?;
        Ok(())
    }

    fn drain_of(&self, source: &str, peer: &str, payload: usize) -> Option<&Drain> {
        self.drains
            .iter()
            .find(|d| d.source == source && d.peer == peer && d.payload == payload)
    }

    /// Reads the results a run wrote (`e2e.json`), to render them again.
    pub fn load(dir: &Path) -> Result<Results> {
        let text = std::fs::read_to_string(dir.join("e2e.json"))
            .with_context(|| format!("reading {}", dir.join("e2e.json").display()))?;
        Ok(serde_json::from_str(&text)?)
    }

    /// The goals for the backlog drain, per source and payload, checked against
    /// this run: outboxd (default, exactly-once) ≥ 5× Debezium's events/s, ≤ 1/10 of its
    /// peak RSS, ≥ 70% of the plain-producer ceiling.
    fn goals(&self) -> String {
        if self
            .drains
            .iter()
            .any(|d| d.peer == "outboxd" && d.events < 20_000)
        {
            return "## Goals\n\nNot meaningful at this size (fewer than 20,000 events per \
                    drain: start-up dominates); see the full run in benches/results/e2e.md.\n\n"
                .to_string();
        }
        let mut m = String::from(
            "## Goals (backlog drain, outboxd exactly-once)\n\n\
             | source | payload | events/s ÷ Debezium (goal ≥ 5) | Debezium peak RSS ÷ outboxd (goal ≥ 10) | ÷ ceiling (goal ≥ 70%) |\n\
             |---|---:|---:|---:|---:|\n",
        );
        let mark = |ok: bool| if ok { "met" } else { "**not met**" };
        let times = |v: f64, goal: f64| format!("{}×", against_goal(v, goal, 1));
        let percent = |v: f64| format!("{}%", against_goal(v * 100.0, 70.0, 0));
        for d in self.drains.iter().filter(|d| d.peer == "outboxd") {
            let dbz = self.drain_of(&d.source, "debezium", d.payload);
            let ceiling = self.drain_of("none", "ceiling", d.payload);
            let speed = dbz.map(|b| d.events_per_s / b.events_per_s);
            let rss = dbz.map(|b| b.peak_rss_mib / d.peak_rss_mib);
            let ceil = ceiling.map(|c| d.events_per_s / c.events_per_s);
            let _ = writeln!(
                m,
                "| {} | {} B | {} | {} | {} |",
                d.source,
                d.payload,
                speed.map_or("–".into(), |v| format!(
                    "{} ({})",
                    times(v, 5.0),
                    mark(v >= 5.0)
                )),
                rss.map_or("–".into(), |v| format!(
                    "{} ({})",
                    times(v, 10.0),
                    mark(v >= 10.0)
                )),
                ceil.map_or("–".into(), |v| format!(
                    "{} ({})",
                    percent(v),
                    mark(v >= 0.7)
                )),
            );
        }
        m.push('\n');
        m
    }

    fn markdown(&self, beside_profile: bool) -> String {
        let mut m = String::new();
        let _ = writeln!(m, "# outboxd vs Debezium: end-to-end benchmark\n");
        let _ = writeln!(
            m,
            "Produced by `{}`, started {}{}.\n",
            self.command,
            self.date,
            if self.duration_s > 0.0 {
                format!(", took {:.0} min", self.duration_s / 60.0)
            } else {
                String::new()
            }
        );
        let _ = writeln!(m, "- Machine: {}", self.machine);
        for (k, v) in &self.versions {
            let _ = writeln!(m, "- {k}: {v}");
        }
        let _ = writeln!(m, "- Options: {}", self.options);
        let _ = writeln!(
            m,
            "- Peers: `outboxd` = exactly-once (default), `outboxd-alo` = at-least-once, \
             `debezium` = Debezium + EventRouter in Kafka Connect standalone (Connect's and \
             Debezium's defaults except what benches/peers/README.md lists: service_load \
             plugin discovery, no extended headers, no snapshot locks, file schema history; \
             its producer is Connect's default: no compression, one request in flight), \
             `ceiling` = a plain rdkafka producer writing the same records with no database. \
             All against the same servers and broker, one at a time.\n"
        );
        let (profile, readme) = if beside_profile {
            (
                "[profile.md](profile.md)",
                "[benches/README.md](../README.md)",
            )
        } else {
            ("benches/results/profile.md", "benches/README.md")
        };
        let _ = writeln!(
            m,
            "- What profiling the relay found and what is left: {profile}; what each figure \
             means: {readme}.\n"
        );
        let _ = writeln!(m, "![chart](e2e.png)\n");
        m.push_str(&self.goals());

        let _ = writeln!(m, "## Backlog drain\n");
        let _ = writeln!(
            m,
            "N events written while the relay is stopped, then the relay is started. events/s = \
             N ÷ (last record visible − first append): until every record reached the \
             harness's read_committed consumer; first record = process start to first \
             append; peak RSS = VmHWM; CPU s / 100k = user+system seconds from the first \
             append to the last record's arrival, per 100k events (– when the drain took under 1 s: 10 ms ticks); CPU s total = from process start to the last \
             record. broker / database CPU s / 100k = the same for the Kafka broker and for \
             the lane's database server (PostgreSQL with its walsenders; MariaDB's binlog dump \
             thread is inside mariadbd): what each peer costs the services it shares the \
             machine with. For exactly-once, append times are before the Kafka transaction \
             commits; last visible = ms from the last append to the last record reaching the \
             harness's read_committed consumer (the last commit, plus its fetch delay for \
             every peer). CPU windows start at the first append, also when an exactly-once \
             consumer sees it only at the first commit.\n"
        );
        let _ = writeln!(
            m,
            "| source | payload | peer | events/s | first record (s) | peak RSS (MiB) | CPU s / 100k | CPU s total | broker CPU s / 100k | database CPU s / 100k | dup | last visible (ms) | ×Debezium events/s | Debezium RSS ÷ this | ÷ ceiling |"
        );
        let _ = writeln!(
            m,
            "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
        );
        for d in &self.drains {
            let dbz = self.drain_of(&d.source, "debezium", d.payload);
            let ceiling = self.drain_of("none", "ceiling", d.payload);
            let ratio = |num: Option<f64>, den: Option<f64>| match (num, den) {
                (Some(a), Some(b)) if b > 0.0 && d.peer != "debezium" => format!("{:.1}", a / b),
                _ => "".into(),
            };
            // Ticks are 10 ms: under a second of drain the figure would be mostly rounding.
            let per_100k = |v: Option<f64>| match v {
                Some(v) if d.drain_s >= 1.0 => format!("{v:.2}"),
                _ => "–".to_string(),
            };
            let _ = writeln!(
                m,
                "| {} | {} B | {} | {:.0} | {:.2} | {:.0} | {} | {:.1} | {} | {} | {} | {} | {} | {} | {} |",
                d.source,
                d.payload,
                d.peer,
                d.events_per_s,
                d.first_record_s,
                d.peak_rss_mib,
                per_100k(Some(d.cpu_s_per_100k)),
                d.cpu_s_process,
                per_100k(d.broker_cpu_s_per_100k),
                per_100k(d.database_cpu_s_per_100k),
                d.duplicates,
                d.visible_after_ms
                    .map(|v| format!("{v:.0}"))
                    .unwrap_or_else(|| "–".into()),
                ratio(Some(d.events_per_s), dbz.map(|x| x.events_per_s)),
                ratio(dbz.map(|x| x.peak_rss_mib), Some(d.peak_rss_mib)),
                if d.peer == "ceiling" {
                    String::new()
                } else {
                    ceiling
                        .map(|c| format!("{:.0}%", 100.0 * d.events_per_s / c.events_per_s))
                        .unwrap_or_default()
                },
            );
        }

        let _ = writeln!(m, "\n## Steady state\n");
        let _ = writeln!(
            m,
            "Writers commit at the target rate; latency runs from the source COMMIT returning \
             to the broker's LogAppendTime (append), and to a read_committed consumer \
             receiving the record (visible; for exactly-once this includes the Kafka \
             transaction commit; up to 5 ms of it is the consumer's fetch batching, \
             fetch.wait.max.ms). Append times are whole milliseconds (+0.5 ms added). \
             Debezium polls its change queue every 500 ms by default (poll.interval.ms), \
             which dominates its latency at low rates. The chart shows append p99; for \
             exactly-once, what a read_committed consumer sees is the visible column. Where \
             achieved/s is below the target, the writers (and the 2 cores) were the limit, \
             and peers are compared at somewhat different rates. RSS = highest VmRSS sampled every 100 ms \
             while the writers ran and until the last record arrived.\n"
        );
        let _ = writeln!(
            m,
            "| source | peer | target/s | txn | achieved/s | append p50 / p99 / max (ms) | visible p50 / p99 / max (ms) | RSS (MiB) | CPU s / 100k | dup |"
        );
        let _ = writeln!(m, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|");
        for s in &self.steadies {
            let _ = writeln!(
                m,
                "| {} | {} | {} | {} | {:.0} | {:.1} / {:.1} / {:.1} | {:.1} / {:.1} / {:.1} | {:.0} | {:.2} | {} |",
                s.source,
                s.peer,
                s.target_rate,
                s.txn_size,
                s.achieved_rate,
                s.append_p50_ms,
                s.append_p99_ms,
                s.append_max_ms,
                s.visible_p50_ms,
                s.visible_p99_ms,
                s.visible_max_ms,
                s.max_rss_mib,
                s.cpu_s_per_100k,
                s.duplicates
            );
        }
        m
    }
}
