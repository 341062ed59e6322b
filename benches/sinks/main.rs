//! The sink lanes of the benchmark: one backlog drain per non-Kafka sink (NATS JetStream,
//! Redis Streams, RabbitMQ) from MariaDB, through the binary this package builds.
//!
//! Each lane: a database of its own with the outbox table (`migrations/mysql`), the relay
//! started at the current binlog position until one warm-up event has arrived in the sink
//! (so the checkpoint exists), stopped; then `--events` outbox rows written in transactions
//! of 1,000 (the backlog), and the relay started again: the drain lasts from its start until
//! the sink holds every event (NATS: the stream's message count; Redis: `XLEN`; RabbitMQ:
//! the queue's ready messages). Reported: events/s over the drain (the relay's start and
//! connection included), the relay's peak RSS and its CPU seconds per 100k events. Results go
//! to `--out` (`sinks.md`, `sinks.json`); `scripts/bench.sh sinks` runs it, `smoke` a tiny
//! run of it. Kafka's figures are the e2e benchmark's (`benches/results/e2e.md`).

// Shared with the e2e benchmark, which uses all of it; this one only samples one process.
#[allow(dead_code)]
#[path = "../e2e/procstat.rs"]
mod procstat;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Parser;
use mysql_async::prelude::Queryable;

/// Command-line options (after `cargo bench --bench sinks --`).
#[derive(Parser, Debug, Clone)]
#[command(about = "outboxd's backlog drain into NATS JetStream, Redis Streams and RabbitMQ")]
struct Options {
    /// Events per drain.
    #[arg(long, default_value_t = 100_000)]
    events: u64,
    /// Payload size in bytes (JSON).
    #[arg(long, default_value_t = 1024)]
    payload: usize,
    /// The sinks: nats, redis, rabbitmq.
    #[arg(long, value_delimiter = ',', default_value = "nats,redis,rabbitmq")]
    sinks: Vec<String>,
    /// Where sinks.md and sinks.json go.
    #[arg(long, default_value = "benches/results")]
    out: PathBuf,
    /// How the run was started (the report's first line).
    #[arg(long, default_value = "cargo bench --bench sinks")]
    command_label: String,
    /// Longest a drain may take.
    #[arg(long, default_value_t = 600)]
    timeout_secs: u64,
}

/// One lane's result.
#[derive(Debug, serde::Serialize)]
struct Drain {
    sink: String,
    guarantee: &'static str,
    events: u64,
    payload: usize,
    seconds: f64,
    events_per_s: f64,
    peak_rss_mib: f64,
    cpu_s_per_100k: f64,
}

fn var(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_string())
}

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A sink under test: its `[connectors.sink]` table, and how to prepare and count its
/// destination.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Sink {
    Nats,
    Redis,
    RabbitMq,
}

impl Sink {
    fn parse(s: &str) -> Result<Sink> {
        Ok(match s {
            "nats" | "nats-jetstream" => Sink::Nats,
            "redis" => Sink::Redis,
            "rabbitmq" => Sink::RabbitMq,
            other => bail!("unknown sink {other:?} (nats, redis, rabbitmq)"),
        })
    }

    fn name(self) -> &'static str {
        match self {
            Sink::Nats => "nats",
            Sink::Redis => "redis",
            Sink::RabbitMq => "rabbitmq",
        }
    }

    fn guarantee(self) -> &'static str {
        match self {
            Sink::Nats => "exactly once within the duplicate window",
            Sink::Redis => "exactly once",
            Sink::RabbitMq => "at least once",
        }
    }

    fn login(self) -> (String, String, String) {
        match self {
            Sink::Nats => (
                var("OUTBOXD_NATS_URL", "nats://127.0.0.1:34222"),
                var("OUTBOXD_NATS_USER", "outboxd"),
                var("OUTBOXD_NATS_PASSWORD", "outboxd-nats-secret"),
            ),
            Sink::Redis => (
                var("OUTBOXD_REDIS_URL", "redis://127.0.0.1:36379"),
                var("OUTBOXD_REDIS_USER", "outboxd"),
                var("OUTBOXD_REDIS_PASSWORD", "outboxd-redis-secret"),
            ),
            Sink::RabbitMq => (
                var("OUTBOXD_RABBITMQ_URL", "amqp://127.0.0.1:35672/%2f"),
                var("OUTBOXD_RABBITMQ_USER", "outboxd"),
                var("OUTBOXD_RABBITMQ_PASSWORD", "outboxd-rabbit-secret"),
            ),
        }
    }

    /// The connector's `[connectors.sink]` and `[connectors.checkpoint]` tables.
    fn toml(self, dir: &Path) -> String {
        let (url, user, _) = self.login();
        let mut t = format!(
            "[connectors.sink]\ntype = \"{}\"\nurl = \"{url}\"\nuser = \"{user}\"\n\
             password_env = \"OUTBOXD_BENCH_SINK_PASSWORD\"\n",
            match self {
                Sink::Nats => "nats-jetstream",
                Sink::Redis => "redis",
                Sink::RabbitMq => "rabbitmq",
            }
        );
        if self == Sink::RabbitMq {
            t.push_str(&format!(
                "\n[connectors.checkpoint]\nstore = \"file\"\npath = \"{}\"\n",
                dir.join("checkpoint.json").display()
            ));
        }
        t
    }
}

/// A sink's destination for one lane (`dest`: the routed topic), created empty.
enum Destination {
    Nats(async_nats::jetstream::Context, String),
    Redis(redis::aio::MultiplexedConnection, String),
    RabbitMq(lapin::Channel, String, lapin::Connection),
}

impl Destination {
    async fn create(sink: Sink, dest: &str) -> Result<Destination> {
        let (url, user, password) = sink.login();
        Ok(match sink {
            Sink::Nats => {
                let client = async_nats::ConnectOptions::with_user_and_password(user, password)
                    .connect(url.as_str())
                    .await
                    .context("connecting to NATS")?;
                let js = async_nats::jetstream::new(client);
                let stream = dest.replace('.', "_").to_uppercase();
                let _ = js.delete_stream(&stream).await;
                js.create_stream(async_nats::jetstream::stream::Config {
                    name: stream.clone(),
                    subjects: vec![dest.to_string()],
                    storage: async_nats::jetstream::stream::StorageType::File,
                    ..Default::default()
                })
                .await
                .map_err(|e| anyhow::anyhow!("creating stream {stream}: {e}"))?;
                Destination::Nats(js, stream)
            }
            Sink::Redis => {
                let url = url.replacen("://", &format!("://{user}:{password}@"), 1);
                let client = redis::Client::open(url)?;
                let mut con = client.get_multiplexed_async_connection().await?;
                let _: i64 = redis::cmd("DEL").arg(dest).query_async(&mut con).await?;
                Destination::Redis(con, dest.to_string())
            }
            Sink::RabbitMq => {
                let url = url.replacen("://", &format!("://{user}:{password}@"), 1);
                let conn = lapin::Connection::connect(&url, lapin::ConnectionProperties::default())
                    .await
                    .context("connecting to RabbitMQ")?;
                let ch = conn.create_channel().await?;
                let _ = ch
                    .queue_delete(dest.into(), lapin::options::QueueDeleteOptions::default())
                    .await;
                ch.queue_declare(
                    dest.into(),
                    lapin::options::QueueDeclareOptions {
                        durable: true,
                        ..Default::default()
                    },
                    lapin::types::FieldTable::default(),
                )
                .await?;
                Destination::RabbitMq(ch, dest.to_string(), conn)
            }
        })
    }

    /// Messages in the destination now.
    async fn count(&mut self) -> Result<u64> {
        Ok(match self {
            Destination::Nats(js, stream) => {
                let mut s = js
                    .get_stream(stream.as_str())
                    .await
                    .map_err(|e| anyhow::anyhow!("{e}"))?;
                s.info()
                    .await
                    .map_err(|e| anyhow::anyhow!("{e}"))?
                    .state
                    .messages
            }
            Destination::Redis(con, key) => {
                redis::cmd("XLEN")
                    .arg(key.as_str())
                    .query_async(con)
                    .await?
            }
            Destination::RabbitMq(ch, q, _) => u64::from(
                ch.queue_declare(
                    q.as_str().into(),
                    lapin::options::QueueDeclareOptions {
                        passive: true,
                        durable: true,
                        ..Default::default()
                    },
                    lapin::types::FieldTable::default(),
                )
                .await?
                .message_count(),
            ),
        })
    }

    /// Removes what the lane created.
    async fn drop_it(self) {
        match self {
            Destination::Nats(js, stream) => {
                let _ = js.delete_stream(&stream).await;
            }
            Destination::Redis(mut con, key) => {
                let _: redis::RedisResult<i64> =
                    redis::cmd("DEL").arg(key).query_async(&mut con).await;
            }
            Destination::RabbitMq(ch, q, conn) => {
                let _ = ch
                    .queue_delete(
                        q.as_str().into(),
                        lapin::options::QueueDeleteOptions::default(),
                    )
                    .await;
                let _ = conn.close(200, "done".into()).await;
            }
        }
    }
}

/// The lane's MariaDB database with the outbox table, made anew.
async fn database(name: &str) -> Result<mysql_async::Conn> {
    let admin = var(
        "OUTBOXD_TEST_MYSQL_ADMIN_URL",
        "mysql://outboxd_admin:admin-secret@127.0.0.1:33306",
    );
    let mut conn = mysql_async::Conn::from_url(admin.as_str())
        .await
        .context("connecting to MariaDB as admin (scripts/services.sh up)")?;
    conn.query_drop(format!("DROP DATABASE IF EXISTS {name}"))
        .await?;
    conn.query_drop(format!("CREATE DATABASE {name}")).await?;
    conn.query_drop(format!("USE {name}")).await?;
    let schema = std::fs::read_to_string(repo_root().join("migrations/mysql/001_outbox.sql"))?;
    // Comments (`--` to the end of the line) out first: they may hold a `;`.
    let code: String = schema
        .lines()
        .map(|l| l.split("--").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n");
    for stmt in code.split(';').filter(|s| !s.trim().is_empty()) {
        conn.query_drop(stmt).await?;
    }
    Ok(conn)
}

/// Writes events `from..to` in transactions of 1,000, `payload` bytes each.
async fn write(conn: &mut mysql_async::Conn, from: u64, to: u64, payload: usize) -> Result<()> {
    let body = format!("{{\"pad\":\"{}\"}}", "x".repeat(payload.saturating_sub(10)));
    let mut seq = from;
    while seq < to {
        let end = (seq + 1000).min(to);
        let rows: Vec<String> = (seq..end)
            .map(|i| {
                format!(
                    "('00000000-0000-4000-8000-{i:012}','Order','{}','OrderCreated','{body}')",
                    i % 100
                )
            })
            .collect();
        conn.query_drop(format!(
            "INSERT INTO outbox_events (id, aggregate_type, aggregate_id, event_type, payload) \
             VALUES {}",
            rows.join(",")
        ))
        .await?;
        seq = end;
    }
    Ok(())
}

/// The relay, started with `config`.
fn start_relay(config: &Path, log: &Path, sink_password: &str) -> Result<Child> {
    let password = mysql_password();
    Ok(Command::new(env!("CARGO_BIN_EXE_outboxd"))
        .args(["run", "--config"])
        .arg(config)
        .env("OUTBOXD_BENCH_PASSWORD", password)
        .env("OUTBOXD_BENCH_SINK_PASSWORD", sink_password)
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log)?)
        .spawn()?)
}

fn mysql_password() -> String {
    let url = var(
        "OUTBOXD_TEST_MYSQL_URL",
        "mysql://outboxd:outboxd-secret@127.0.0.1:33306",
    );
    url.split("://")
        .nth(1)
        .and_then(|r| r.split('@').next())
        .and_then(|up| up.split(':').nth(1))
        .unwrap_or("outboxd-secret")
        .to_string()
}

/// SIGTERM and wait (SIGKILL after 60 s, an error).
fn stop(child: &mut Child) -> Result<()> {
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        if child.try_wait()?.is_some() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    bail!("the relay did not stop within 60 s of SIGTERM")
}

fn tail(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(20)..].join("\n")
}

/// Waits until the destination holds `n` messages, sampling the relay; its samples.
async fn await_count(
    dest: &mut Destination,
    n: u64,
    relay: &mut Child,
    log: &Path,
    timeout: Duration,
) -> Result<procstat::Sample> {
    let deadline = Instant::now() + timeout;
    let mut last = procstat::Sample::default();
    loop {
        if let Some(s) = procstat::sample(relay.id()) {
            last = s;
        }
        if let Some(status) = relay.try_wait()? {
            bail!(
                "the relay exited ({status}); end of {}:\n{}",
                log.display(),
                tail(log)
            );
        }
        let have = dest.count().await?;
        if have >= n {
            return Ok(last);
        }
        if Instant::now() > deadline {
            bail!(
                "{have} of {n} events after {timeout:?}; end of {}:\n{}",
                log.display(),
                tail(log)
            );
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn lane(sink: Sink, o: &Options, run: u32) -> Result<Drain> {
    // A name of this run's own: a checkpoint the sink keeps (NATS KV, Redis) from an earlier
    // run on this machine would resume at a position whose binlogs may be purged since.
    let name = format!("bench_sink_{}_{run}", sink.name());
    let dir = repo_root().join(".state/bench-sinks").join(sink.name());
    std::fs::create_dir_all(&dir)?;
    let _ = std::fs::remove_file(dir.join("checkpoint.json"));
    let dest_name = format!("bsk{run}.{}.Order", sink.name());
    let mut db = database(&name).await?;
    let mut dest = Destination::create(sink, &dest_name).await?;
    let url = var(
        "OUTBOXD_TEST_MYSQL_URL",
        "mysql://outboxd:outboxd-secret@127.0.0.1:33306",
    );
    let hostport = url
        .rsplit('@')
        .next()
        .unwrap_or("127.0.0.1:33306")
        .trim_end_matches('/')
        .to_string();
    let (host, port) = hostport.split_once(':').unwrap_or(("127.0.0.1", "33306"));
    let config = format!(
        "[[connectors]]\nname = \"{name}\"\ntables = [\"{name}.outbox_events\"]\n\n\
         [connectors.source]\nkind = \"mariadb\"\nhost = \"{host}\"\nport = {port}\n\
         user = \"outboxd\"\npassword_env = \"OUTBOXD_BENCH_PASSWORD\"\n\
         server_id = {}\nstart = \"current\"\n\n\
         [connectors.router]\nroute_by_field = \"aggregate_type\"\n\
         route_topic_replacement = \"bsk{run}.{}.${{routedByValue}}\"\n\n{}",
        190_000 + run % 1000 + sink as u32,
        sink.name(),
        sink.toml(&dir),
    );
    let config_path = dir.join("outboxd.toml");
    std::fs::write(&config_path, config)?;
    let log = dir.join("relay.log");
    let (_, _, sink_password) = sink.login();
    // Warm-up: the checkpoint exists once one event went through.
    let mut relay = start_relay(&config_path, &log, &sink_password)?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    write(&mut db, 0, 1, o.payload).await?;
    await_count(&mut dest, 1, &mut relay, &log, Duration::from_secs(60)).await?;
    stop(&mut relay)?;
    // The backlog, then the drain.
    write(&mut db, 1, 1 + o.events, o.payload).await?;
    let log2 = dir.join("relay-drain.log");
    let t0 = Instant::now();
    let mut relay = start_relay(&config_path, &log2, &sink_password)?;
    let s = await_count(
        &mut dest,
        1 + o.events,
        &mut relay,
        &log2,
        Duration::from_secs(o.timeout_secs),
    )
    .await?;
    let seconds = t0.elapsed().as_secs_f64();
    let end = procstat::sample(relay.id()).unwrap_or(s);
    stop(&mut relay)?;
    let have = dest.count().await?;
    dest.drop_it().await;
    db.query_drop(format!("DROP DATABASE IF EXISTS {name}"))
        .await?;
    if have != 1 + o.events {
        bail!(
            "{} holds {have} events after the drain, expected {} (exactly {}): see {}",
            sink.name(),
            1 + o.events,
            sink.guarantee(),
            log2.display()
        );
    }
    Ok(Drain {
        sink: sink.name().into(),
        guarantee: sink.guarantee(),
        events: o.events,
        payload: o.payload,
        seconds,
        events_per_s: o.events as f64 / seconds,
        peak_rss_mib: end.hwm_kib as f64 / 1024.0,
        cpu_s_per_100k: end.cpu_s / o.events as f64 * 100_000.0,
    })
}

fn report(o: &Options, drains: &[Drain]) -> Result<()> {
    std::fs::create_dir_all(&o.out)?;
    let mut md = format!(
        "# outboxd into NATS JetStream, Redis Streams and RabbitMQ\n\n\
         `{}` — backlog drain of {} events of {} B from MariaDB; the drain counts from the \
         relay's start (connections included) until the sink holds every event; RSS is the \
         relay's peak, CPU the relay's user+system time. Machine: {} cores. Kafka's lanes: \
         e2e.md.\n\n| sink | guarantee | events/s | drain s | peak RSS MiB | CPU s / 100k events |\n|---|---|---:|---:|---:|---:|\n",
        o.command_label,
        o.events,
        o.payload,
        std::thread::available_parallelism().map_or(0, |n| n.get()),
    );
    for d in drains {
        md.push_str(&format!(
            "| {} | {} | {:.0} | {:.2} | {:.1} | {:.2} |\n",
            d.sink, d.guarantee, d.events_per_s, d.seconds, d.peak_rss_mib, d.cpu_s_per_100k
        ));
    }
    std::fs::write(o.out.join("sinks.md"), &md)?;
    std::fs::write(
        o.out.join("sinks.json"),
        serde_json::to_string_pretty(drains)?,
    )?;
    print!("{md}");
    Ok(())
}

fn main() -> Result<()> {
    // `cargo bench` passes `--bench`; it means nothing here.
    let args = std::env::args().filter(|a| a != "--bench");
    let o = Options::parse_from(args);
    let sinks = o
        .sinks
        .iter()
        .map(|s| Sink::parse(s))
        .collect::<Result<Vec<_>>>()?;
    let rt = tokio::runtime::Runtime::new()?;
    let run = std::process::id();
    let mut drains = Vec::new();
    for sink in sinks {
        eprintln!("[bench] sink {}: {} events", sink.name(), o.events);
        let d = rt
            .block_on(lane(sink, &o, run))
            .with_context(|| format!("sink {}", sink.name()))?;
        eprintln!(
            "[bench]   {:.0} events/s, peak RSS {:.1} MiB",
            d.events_per_s, d.peak_rss_mib
        );
        drains.push(d);
    }
    report(&o, &drains)
}
