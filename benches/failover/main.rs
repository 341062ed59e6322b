//! Failover of a group of outboxd members: how long a connector's records stop after its
//! owner is killed, frozen, or asked to stop.
//!
//! Three members (`outboxd run --group`) share a MariaDB and a PostgreSQL connector
//! (exactly-once), while a writer inserts one event every 20 ms on each source (numbered in
//! its payload, its insert time noted) and a `read_committed` consumer notes when each record
//! arrives. Each round picks a connector, finds its owner (`outboxd_connector_owned`), applies
//! a fault and measures the time from the fault to the arrival of the first record of that
//! connector's topic *written after the fault* (so a record the old owner committed while
//! draining does not count as the next owner's):
//!
//! * `kill -9`: the owner dies; the group coordinator notices after the session timeout;
//! * `SIGSTOP`: the owner freezes (and is woken once the next owner delivers);
//! * `SIGTERM`: the owner hands its connectors over (drain, final commit, leave the group).
//!
//! Killed and stopped members are started again (as standbys) before the next round.
//! Results: `<out>/failover.md` and `<out>/failover.json`. Run with
//! `scripts/bench.sh failover [--rounds N]` (services up, optimized build).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

#[path = "../common/timings.rs"]
mod timings;
use clap::Parser;
use mysql_async::prelude::*;
use timings::{cores, load_average, utc_now, Timings};

/// Command-line knobs.
#[derive(Debug, Parser)]
struct Args {
    /// Rounds per fault and source.
    #[arg(long, default_value_t = 4)]
    rounds: usize,
    /// Where the results go.
    #[arg(long, default_value = "benches/results")]
    out: PathBuf,
    /// The command line to show in the results.
    #[arg(long, default_value = "scripts/bench.sh failover")]
    command_label: String,
    /// cargo bench passes `--bench`; ignored.
    #[arg(long, hide = true)]
    bench: bool,
}

fn var(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_string())
}

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The fault a round applies to a connector's owner.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Fault {
    Kill,
    Freeze,
    Term,
}

impl Fault {
    fn name(self) -> &'static str {
        match self {
            Fault::Kill => "kill -9",
            Fault::Freeze => "SIGSTOP",
            Fault::Term => "SIGTERM (handover)",
        }
    }
}

/// One measurement: the fault, the source, the seconds until the next record.
type Run = (Fault, String, f64);

/// One member process.
struct Member {
    child: Option<Child>,
    port: u16,
    args: Vec<String>,
    log: PathBuf,
}

impl Member {
    fn spawn(&mut self) -> Result<()> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)?;
        let child = Command::new(env!("CARGO_BIN_EXE_outboxd"))
            .arg("run")
            .args(&self.args)
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .context("starting outboxd")?;
        self.child = Some(child);
        Ok(())
    }

    fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    fn signal(&self, sig: &str) {
        if let Some(pid) = self.pid() {
            let _ = Command::new("kill")
                .args([&format!("-{sig}"), &pid.to_string()])
                .status();
        }
    }

    fn wait_exit(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.wait();
        }
    }

    fn get(&self, path: &str) -> Option<(u16, String)> {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect_timeout(
            &([127, 0, 0, 1], self.port).into(),
            Duration::from_millis(300),
        )
        .ok()?;
        s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
        write!(s, "GET {path} HTTP/1.0\r\n\r\n").ok()?;
        let mut buf = String::new();
        s.read_to_string(&mut buf).ok()?;
        let code = buf.split_whitespace().nth(1)?.parse().ok()?;
        Some((code, buf.split_once("\r\n\r\n")?.1.to_string()))
    }

    fn owns(&self, connector: &str) -> bool {
        self.child.is_some()
            && self.get("/metrics").is_some_and(|(_, b)| {
                b.contains(&format!(
                    "outboxd_connector_owned{{connector=\"{connector}\"}} 1"
                ))
            })
    }

    fn wait_ready(&self, timeout: Duration) -> Result<()> {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if matches!(self.get("/ready"), Some((200, _))) {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        bail!(
            "member not ready after {timeout:?}; see {}",
            self.log.display()
        )
    }
}

impl Drop for Member {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// When each event was written (its insert began; index = its `seq` - 1, the same on both
/// sources) and when records arrived, per topic, with their `seq`.
#[derive(Default)]
struct Arrivals {
    written: Mutex<Vec<Instant>>,
    arrived: Mutex<HashMap<String, Vec<(Instant, u64)>>>,
}

impl Arrivals {
    /// When the first record of `topic` written after `t` arrived, if one did.
    fn first_written_after(&self, topic: &str, t: Instant) -> Option<Instant> {
        let first = self.written.lock().unwrap().iter().position(|w| *w > t)? as u64 + 1;
        self.arrived
            .lock()
            .unwrap()
            .get(topic)?
            .iter()
            .filter(|(_, seq)| *seq >= first)
            .map(|(at, _)| *at)
            .min()
    }
}

fn watch(topics: Vec<String>, arrivals: Arc<Arrivals>, stop: Arc<AtomicBool>) -> Result<()> {
    use rdkafka::consumer::{BaseConsumer, Consumer};
    use rdkafka::message::Message;
    let consumer: BaseConsumer = rdkafka::ClientConfig::new()
        .set(
            "bootstrap.servers",
            var("OUTBOXD_KAFKA_BOOTSTRAP", "127.0.0.1:39092"),
        )
        .set(
            "group.id",
            format!("outboxd-failover-watch-{}", std::process::id()),
        )
        .set("isolation.level", "read_committed")
        .set("auto.offset.reset", "earliest")
        .set("enable.auto.commit", "false")
        .set("topic.metadata.refresh.interval.ms", "1000")
        .create()?;
    let refs: Vec<&str> = topics.iter().map(String::as_str).collect();
    consumer.subscribe(&refs)?;
    while !stop.load(Ordering::Acquire) {
        if let Some(Ok(m)) = consumer.poll(Duration::from_millis(50)) {
            let seq = m
                .payload()
                .and_then(|p| serde_json::from_slice::<serde_json::Value>(p).ok())
                .and_then(|v| v["seq"].as_u64())
                .unwrap_or(0);
            arrivals
                .arrived
                .lock()
                .unwrap()
                .entry(m.topic().to_string())
                .or_default()
                .push((Instant::now(), seq));
        }
    }
    Ok(())
}

/// The MariaDB database and connector file of the run.
async fn mariadb(
    dir: &Path,
    name: &str,
    group_topic: &str,
) -> Result<(PathBuf, mysql_async::Pool)> {
    let admin = var(
        "OUTBOXD_TEST_MYSQL_ADMIN_URL",
        "mysql://outboxd_admin:admin-secret@127.0.0.1:33306",
    );
    let pool = mysql_async::Pool::new(mysql_async::Opts::from_url(&admin)?);
    let mut c = pool.get_conn().await?;
    c.query_drop(format!("DROP DATABASE IF EXISTS `{name}`"))
        .await?;
    c.query_drop(format!("CREATE DATABASE `{name}`")).await?;
    drop(c);
    pool.disconnect().await?;
    let pool = mysql_async::Pool::new(mysql_async::Opts::from_url(&format!("{admin}/{name}"))?);
    let ddl = std::fs::read_to_string(repo_root().join("migrations/mysql/001_outbox.sql"))?;
    pool.get_conn().await?.query_drop(ddl).await?;
    let relay = mysql_async::Opts::from_url(&var(
        "OUTBOXD_TEST_MYSQL_URL",
        "mysql://outboxd:outboxd-secret@127.0.0.1:33306",
    ))?;
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(
        &path,
        format!(
            "[[connectors]]\nname = \"{name}\"\ntables = [\"{name}.outbox_events\"]\n\
             [connectors.source]\nkind = \"mariadb\"\nhost = \"{}\"\nport = {}\nuser = \"{}\"\n\
             password = \"{}\"\nserver_id = {}\n[connectors.router]\n\
             \"route.topic.replacement\" = \"{group_topic}\"\n[connectors.kafka]\n\
             bootstrap_servers = \"{}\"\n",
            relay.ip_or_hostname(),
            relay.tcp_port(),
            relay.user().unwrap_or("outboxd"),
            relay.pass().unwrap_or(""),
            5_000_000 + std::process::id() % 1_000_000,
            var("OUTBOXD_KAFKA_BOOTSTRAP", "127.0.0.1:39092"),
        ),
    )?;
    Ok((path, pool))
}

/// The PostgreSQL database and connector file of the run.
async fn postgres(
    dir: &Path,
    name: &str,
    group_topic: &str,
) -> Result<(PathBuf, tokio_postgres::Client)> {
    use std::str::FromStr;
    let admin_url = var(
        "OUTBOXD_TEST_PG_ADMIN_URL",
        "postgres://outboxd_admin:admin-secret@127.0.0.1:35432/outboxd",
    );
    let connect = |db: &str| {
        let mut cfg = tokio_postgres::Config::from_str(&admin_url).unwrap();
        cfg.dbname(db);
        async move {
            let (client, conn) = cfg.connect(tokio_postgres::NoTls).await?;
            tokio::spawn(conn);
            Ok::<_, tokio_postgres::Error>(client)
        }
    };
    let admin = connect("outboxd").await?;
    for row in admin
        .query(
            "SELECT slot_name::text FROM pg_replication_slots WHERE slot_name = $1",
            &[&name],
        )
        .await?
    {
        let slot: String = row.get(0);
        let _ = admin
            .execute("SELECT pg_drop_replication_slot($1)", &[&slot])
            .await;
    }
    admin
        .batch_execute(&format!("DROP DATABASE IF EXISTS {name}"))
        .await?;
    admin
        .batch_execute(&format!("CREATE DATABASE {name}"))
        .await?;
    admin
        .batch_execute(&format!(
            "GRANT CONNECT, CREATE ON DATABASE {name} TO outboxd"
        ))
        .await?;
    let db = connect(name).await?;
    let ddl = std::fs::read_to_string(repo_root().join("migrations/postgres/001_outbox.sql"))?;
    db.batch_execute(&ddl).await?;
    db.batch_execute(&format!(
        "CREATE PUBLICATION {name} FOR TABLE public.outbox_events WITH (publish = 'insert')"
    ))
    .await?;
    let relay = var(
        "OUTBOXD_TEST_PG_URL",
        "postgres://outboxd:outboxd-secret@127.0.0.1:35432/outboxd",
    );
    let relay = tokio_postgres::Config::from_str(&relay)?;
    let host = match relay.get_hosts().first() {
        Some(tokio_postgres::config::Host::Tcp(h)) => h.clone(),
        _ => "127.0.0.1".into(),
    };
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(
        &path,
        format!(
            "[[connectors]]\nname = \"{name}\"\ntables = [\"public.outbox_events\"]\n\
             [connectors.source]\nkind = \"postgres\"\nhost = \"{host}\"\nport = {}\n\
             user = \"{}\"\npassword = \"{}\"\ndbname = \"{name}\"\nslot_name = \"{name}\"\n\
             publication_name = \"{name}\"\npublication_autocreate = \"disabled\"\n\
             status_interval = \"1s\"\n[connectors.router]\n\
             \"route.topic.replacement\" = \"{group_topic}\"\n[connectors.kafka]\n\
             bootstrap_servers = \"{}\"\n",
            relay.get_ports().first().copied().unwrap_or(5432),
            relay.get_user().unwrap_or("outboxd"),
            String::from_utf8_lossy(relay.get_password().unwrap_or_default()),
            var("OUTBOXD_KAFKA_BOOTSTRAP", "127.0.0.1:39092"),
        ),
    )?;
    Ok((path, db))
}

/// The member that runs `connector` (waits up to 90 s for one).
fn owner_of(members: &[Member], connector: &str) -> Result<usize> {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        if let Some(i) = members.iter().position(|m| m.owns(connector)) {
            return Ok(i);
        }
        if Instant::now() > deadline {
            bail!("nobody owns {connector}; see the member logs in .state/bench-failover");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[tokio::main]
async fn main() -> Result<()> {
    let args = Args::parse();
    let load_before = load_average();
    let tag = format!("fo_{}", std::process::id());
    let dir = repo_root().join(".state").join("bench-failover");
    std::fs::create_dir_all(&dir)?;
    let (maria, pg) = (format!("{tag}_m"), format!("{tag}_p"));
    let (topic_m, topic_p) = (format!("{maria}.events"), format!("{pg}.events"));
    let (file_m, pool) = mariadb(&dir, &maria, &topic_m).await?;
    let (file_p, pgdb) = postgres(&dir, &pg, &topic_p).await?;
    let group = tag.clone();

    let mut members: Vec<Member> = (0..3)
        .map(|i| {
            let port = free_port();
            Member {
                child: None,
                port,
                args: vec![
                    "--config".into(),
                    file_m.display().to_string(),
                    "--config".into(),
                    file_p.display().to_string(),
                    "--group".into(),
                    group.clone(),
                    "--metrics-listen".into(),
                    format!("127.0.0.1:{port}"),
                ],
                log: dir.join(format!("{tag}_member{i}.log")),
            }
        })
        .collect();
    for m in &mut members {
        m.spawn()?;
    }
    for m in &members {
        m.wait_ready(Duration::from_secs(90))?;
    }
    owner_of(&members, &maria)?;
    owner_of(&members, &pg)?;
    for m in &members {
        m.wait_ready(Duration::from_secs(90))?;
    }

    let arrivals = Arc::new(Arrivals::default());
    let stop = Arc::new(AtomicBool::new(false));
    let watcher = {
        let (a, s, t) = (
            arrivals.clone(),
            stop.clone(),
            vec![topic_m.clone(), topic_p.clone()],
        );
        std::thread::spawn(move || watch(t, a, s))
    };
    let writer = {
        let (stop, arrivals) = (stop.clone(), arrivals.clone());
        tokio::spawn(async move {
            let mut n = 0u64;
            while !stop.load(Ordering::Acquire) {
                n += 1;
                let id = format!("{:032x}", rand::random::<u128>());
                let agg = format!("a-{}", n % 16);
                let payload = format!("{{\"seq\":{n}}}");
                arrivals.written.lock().unwrap().push(Instant::now());
                let _ = pool
                    .get_conn()
                    .await?
                    .exec_drop(
                        "INSERT INTO outbox_events (id, aggregate_type, aggregate_id, event_type, payload) VALUES (?, 'events', ?, 'E', ?)",
                        (uuidish(&id), agg.clone(), payload.clone()),
                    )
                    .await;
                let _ = pgdb
                    .execute(
                        "INSERT INTO outbox_events (id, aggregate_type, aggregate_id, event_type, payload) VALUES ($1::text::uuid, 'events', $2, 'E', $3::text::jsonb)",
                        &[&uuidish(&id), &agg, &payload],
                    )
                    .await;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Ok::<_, anyhow::Error>(())
        })
    };

    let results = tokio::task::spawn_blocking({
        let arrivals = arrivals.clone();
        let (maria, pg, topic_m, topic_p) =
            (maria.clone(), pg.clone(), topic_m.clone(), topic_p.clone());
        move || -> Result<(Vec<Run>, Vec<Member>)> {
            let wait_record = |topic: &str, after: Instant| -> Result<Duration> {
                let deadline = after + Duration::from_secs(120);
                loop {
                    if let Some(t) = arrivals.first_written_after(topic, after) {
                        return Ok(t.duration_since(after));
                    }
                    if Instant::now() > deadline {
                        bail!("no record of {topic} written after the fault arrived within 120 s");
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
            };
            let mut out = Vec::new();
            let start = Instant::now();
            wait_record(&topic_m, start)?;
            wait_record(&topic_p, start)?;
            for fault in [Fault::Kill, Fault::Freeze, Fault::Term] {
                for round in 0..args.rounds * 2 {
                    let (connector, topic, source) = if round % 2 == 0 {
                        (&maria, &topic_m, "MariaDB")
                    } else {
                        (&pg, &topic_p, "PostgreSQL")
                    };
                    let owner = owner_of(&members, connector)?;
                    std::thread::sleep(Duration::from_secs(2));
                    let t = Instant::now();
                    match fault {
                        Fault::Kill => members[owner].signal("KILL"),
                        Fault::Freeze => members[owner].signal("STOP"),
                        Fault::Term => members[owner].signal("TERM"),
                    }
                    let took = wait_record(topic, t)?;
                    eprintln!(
                        "[failover] {} {source}: {:.2} s",
                        fault.name(),
                        took.as_secs_f64()
                    );
                    out.push((fault, source.to_string(), took.as_secs_f64()));
                    if fault == Fault::Freeze {
                        members[owner].signal("CONT");
                        // Woken, it stops the connector and stays in the group as a standby.
                        std::thread::sleep(Duration::from_secs(3));
                    } else {
                        members[owner].wait_exit();
                        members[owner].spawn()?;
                    }
                    members[owner].wait_ready(Duration::from_secs(90))?;
                }
            }
            Ok((out, members))
        }
    })
    .await??;
    stop.store(true, Ordering::Release);
    let _ = watcher.join();
    writer.await??;
    let (runs, members) = results;
    drop(members);

    // Report.
    let mut timings = Timings::default();
    for (fault, source, t) in &runs {
        timings.add(fault.name(), source, *t);
    }
    let md = format!(
        "# Failover of a group of three members\n\n\
         `{}` at {} (default group settings: session timeout 6 s, heartbeat 0.5 s). Time from the \
         fault to the arrival, at a `read_committed` consumer, of the first record of the \
         connector's topic that was written after the fault, while a writer inserts one event \
         every 20 ms on each source; the killed or stopped member is started again (as a \
         standby) before the next round. See \
         `benches/failover/main.rs`. Load average (1 min) at the start and the end: {} / {} \
         on this machine's {} cores.\n\n{}",
        args.command_label,
        utc_now(),
        load_before,
        load_average(),
        cores(),
        timings.table(None),
    );
    std::fs::create_dir_all(&args.out)?;
    std::fs::write(args.out.join("failover.md"), &md)?;
    std::fs::write(
        args.out.join("failover.json"),
        serde_json::to_string_pretty(&timings.json())?,
    )?;
    print!("{md}");
    Ok(())
}

/// The hex id as a UUID (PostgreSQL's outbox id column is a uuid).
fn uuidish(hex: &str) -> String {
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}
