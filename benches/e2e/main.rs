//! outboxd against Debezium on Kafka Connect, same databases, same Kafka, one run.
//!
//! For each source (MariaDB, PostgreSQL) and each peer (outboxd exactly-once, outboxd
//! at-least-once, Debezium 3.6.1 with the EventRouter SMT in Kafka Connect standalone), one
//! *lane*: its own database with the `migrations/` outbox schema, its own topics (created
//! with LogAppendTime), its own slot/server id. In a lane:
//!
//! 1. start the peer, write one event, wait for it (the peer now has a position), stop it;
//! 2. backlog drain, per payload size: write N events while the peer is down, start it, and
//!    time the drain (events/s between the first and the last append), the time from
//!    process start to the first record, peak RSS (VmHWM) and CPU seconds per 100k events;
//! 3. steady state, per rate: write at a fixed rate for a while; latency from the source
//!    COMMIT returning to the broker's append time (and to a read_committed consumer seeing
//!    the record), p50/p99/max.
//!
//! Plus the ceiling: a plain rdkafka producer writing the same records with no database.
//! Results: `<out>/e2e.md` (tables with ratios), `<out>/e2e.json`, `<out>/e2e.png`.
//!
//! Run with `scripts/bench.sh` (services, Connect classpath, then
//! `cargo bench --bench e2e -- ARGS`); `--help` lists the knobs.

mod ceiling;
mod chart;
mod clock;
mod collector;
mod env;
mod interrupt;
mod lane;
mod peers;
mod procstat;
mod report;
mod sweep;
mod workload;

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::Parser;

use peers::Peer;

/// A source database.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    MariaDb,
    Postgres,
}

impl Source {
    /// Short name.
    pub fn name(self) -> &'static str {
        match self {
            Source::MariaDb => "mariadb",
            Source::Postgres => "postgres",
        }
    }

    fn parse(s: &str) -> Result<Source> {
        Ok(match s {
            "mariadb" | "mysql" => Source::MariaDb,
            "postgres" | "postgresql" => Source::Postgres,
            other => bail!("unknown source {other:?} (mariadb, postgres)"),
        })
    }

    /// (user, password, host, port) of the replication user outboxd runs as.
    pub fn relay_login(self) -> Result<(String, String, String, u16)> {
        match self {
            Source::MariaDb => env::url_parts(
                &std::env::var("OUTBOXD_TEST_MYSQL_URL")
                    .unwrap_or_else(|_| "mysql://outboxd:outboxd-secret@127.0.0.1:33306".into()),
            ),
            Source::Postgres => {
                env::url_parts(&std::env::var("OUTBOXD_TEST_PG_URL").unwrap_or_else(|_| {
                    "postgres://outboxd:outboxd-secret@127.0.0.1:35432/outboxd".into()
                }))
            }
        }
    }

    /// (user, password, host, port) of the admin (Debezium runs as the admin: its
    /// snapshot and schema reads need more than the replication privileges).
    pub fn admin_login(self) -> Result<(String, String, String, u16)> {
        match self {
            Source::MariaDb => env::url_parts(&env::mariadb_admin_url()),
            Source::Postgres => env::url_parts(&env::pg_admin_url()),
        }
    }
}

/// A free TCP port on loopback.
pub fn free_port() -> Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// Command-line options (after `cargo bench --bench e2e --`).
#[derive(Parser, Debug, Clone)]
#[command(
    about = "outboxd vs Debezium on Kafka Connect: backlog drain, steady-state latency, resources"
)]
pub struct Options {
    /// Events per backlog drain. 300k rather than 100k: at 60-120k events/s a 100k drain
    /// lasts about a second, and start-up (the first transaction, partition registration)
    /// and anything else the broker is doing swing its figure by half.
    #[arg(long, default_value_t = 300_000)]
    pub events: u64,
    /// Payload sizes in bytes for the backlog drain (JSON).
    #[arg(long, value_delimiter = ',', default_value = "1024,200")]
    pub payloads: Vec<usize>,
    /// Events per source transaction in the backlog.
    #[arg(long, default_value_t = 100)]
    pub txn_size: u64,
    /// Steady-state rates, events/s.
    #[arg(long, value_delimiter = ',', default_value = "1000,5000,20000")]
    pub rates: Vec<u64>,
    /// Seconds each steady-state rate runs.
    #[arg(long, default_value_t = 20)]
    pub steady_secs: u64,
    /// Events per source transaction in the steady state, at least (raised to rate/200, so
    /// writers need at most ~200 commits/s).
    #[arg(long, default_value_t = 10)]
    pub steady_txn_size: u64,
    /// Payload size of the steady-state events.
    #[arg(long, default_value_t = 1024)]
    pub steady_payload: usize,
    /// Concurrent writer connections.
    #[arg(long, default_value_t = 4)]
    pub writers: usize,
    /// Sources.
    #[arg(long, value_delimiter = ',', default_value = "mariadb,postgres")]
    pub sources: Vec<String>,
    /// Peers.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "outboxd,outboxd-alo,debezium"
    )]
    pub peers: Vec<String>,
    /// Events the broker takes before anything is measured, half through a plain producer
    /// and half in Kafka transactions, read back by a read_committed consumer (0: none). A
    /// freshly started broker JVM compiles its hot paths while the first lanes run: on this
    /// project's 2-core machine the same drain went from 42k to 80k events/s over its first
    /// five runs on a new broker (benches/results/profile.md).
    #[arg(long, default_value_t = 2_000_000)]
    pub warmup_events: u64,
    /// Skip the plain-producer ceiling.
    #[arg(long)]
    pub no_ceiling: bool,
    /// Where e2e.md / e2e.json / e2e.png go.
    #[arg(long, default_value = "benches/results")]
    pub out: PathBuf,
    /// Scratch directory for configs, logs and offsets.
    #[arg(long, default_value = ".state/bench")]
    pub work: PathBuf,
    /// Shown in the results as the command that produced them.
    #[arg(long, default_value = "cargo bench --bench e2e")]
    pub command_label: String,
    /// Only render `<out>/e2e.md` and `e2e.png` again from `<out>/e2e.json`.
    #[arg(long)]
    pub render_only: bool,
    /// Internal: run as the ceiling producer
    /// (`ceiling|warmup:<prefix>:<first>:<count>:<payload>`).
    #[arg(long, hide = true)]
    pub role: Option<String>,
    /// Passed by `cargo bench`; ignored.
    #[arg(long, hide = true)]
    pub bench: bool,
}

fn main() -> Result<()> {
    let mut opts = Options::parse();
    if let Some(role) = &opts.role {
        return run_ceiling_role(role);
    }
    let root = peers::repo_root();
    opts.out = root.join(&opts.out);
    opts.work = root.join(&opts.work);
    let sources = opts
        .sources
        .iter()
        .map(|s| Source::parse(s))
        .collect::<Result<Vec<_>>>()?;
    let peers = opts
        .peers
        .iter()
        .map(|p| Peer::parse(p))
        .collect::<Result<Vec<_>>>()?;
    if opts.render_only {
        return report::Results::load(&opts.out)?.render(&opts.out);
    }
    validate(&opts)?;
    // Unique per run: seconds and pid (two runs in one second do not collide).
    let run = format!(
        "{}{:05}",
        clock::now_us() / 1_000_000 % 100_000,
        std::process::id() % 100_000
    );
    std::fs::create_dir_all(&opts.out)?;
    std::fs::create_dir_all(&opts.work)?;
    let rt = tokio::runtime::Runtime::new()?;
    rt.block_on(async {
        interrupt::install();
        sweep::kill_stale_peers(&opts.work);
        sweep::drop_stale_objects().await
    })
    .context("cleaning up after an earlier run")?;
    let mut results = report::Results::new(&opts, &rt)?;
    let started = std::time::Instant::now();
    if opts.warmup_events > 0 {
        eprintln!("[bench] broker warm-up, {} events", opts.warmup_events);
        rt.block_on(lane::warmup(&opts, &run))?;
    }
    if !opts.no_ceiling {
        for &payload in &opts.payloads {
            eprintln!("[bench] ceiling, {payload} B payload");
            results
                .drains
                .push(rt.block_on(lane::ceiling(&opts, &run, payload))?);
        }
    }
    for &source in &sources {
        for &peer in &peers {
            eprintln!("[bench] {} / {}", source.name(), peer.name());
            let (drains, steadies) = rt
                .block_on(lane::run(&opts, &run, source, peer))
                .with_context(|| format!("lane {} / {}", source.name(), peer.name()))?;
            results.drains.extend(drains);
            results.steadies.extend(steadies);
            // Written after every lane, so a failure later keeps what was measured.
            results.duration_s = started.elapsed().as_secs_f64();
            results.write(&opts.out)?;
        }
    }
    results.write(&opts.out)?;
    eprintln!("[bench] results: {}", opts.out.join("e2e.md").display());
    Ok(())
}

/// Rejects options that would measure nothing or divide by zero.
fn validate(o: &Options) -> Result<()> {
    for (name, v) in [
        ("--events", o.events),
        ("--txn-size", o.txn_size),
        ("--steady-secs", o.steady_secs),
        ("--steady-txn-size", o.steady_txn_size),
        ("--writers", o.writers as u64),
    ] {
        if v == 0 {
            bail!("{name} must be at least 1");
        }
    }
    if o.payloads.is_empty() || o.rates.is_empty() || o.sources.is_empty() || o.peers.is_empty() {
        bail!("--payloads, --rates, --sources and --peers each need at least one value");
    }
    if let Some(r) = o.rates.iter().find(|r| **r == 0) {
        bail!("--rates: {r} events/s measures nothing");
    }
    if let Some(p) = o.payloads.iter().find(|p| **p < 200) {
        bail!("--payloads: {p} B is below the 200 B the fixed JSON fields take");
    }
    Ok(())
}

fn run_ceiling_role(role: &str) -> Result<()> {
    let parts: Vec<&str> = role.split(':').collect();
    let [kind, prefix, first, count, payload] = parts[..] else {
        bail!("bad --role {role}");
    };
    let mode = match kind {
        "ceiling" => ceiling::Mode::Plain,
        "warmup" => ceiling::Mode::Transactional,
        _ => bail!("bad --role {role}"),
    };
    ceiling::run(
        mode,
        prefix,
        first.parse()?,
        count.parse()?,
        payload.parse()?,
    )?;
    // Stay until the harness has sampled us (it closes our stdin).
    let mut sink = String::new();
    let _ = std::io::stdin().read_line(&mut sink);
    Ok(())
}
