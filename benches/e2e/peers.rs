//! The relays under test, as child processes: outboxd (the binary this package builds) and
//! Debezium inside Kafka Connect standalone (`benches/peers/`). Both are configured for the
//! same lane: the same outbox table, the same topics, keys, values and headers.

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::Source;

/// A relay implementation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Peer {
    /// outboxd, default delivery: records and checkpoint in one Kafka transaction.
    OutboxdExactlyOnce,
    /// outboxd with `delivery = "at_least_once"` (idempotent producer, no transactions).
    OutboxdAtLeastOnce,
    /// Debezium (3.6.1 for PostgreSQL, 3.5.0 for MariaDB) in Kafka Connect standalone with
    /// the EventRouter SMT.
    Debezium,
}

impl Peer {
    /// Short name used in object names and the results table.
    pub fn name(self) -> &'static str {
        match self {
            Peer::OutboxdExactlyOnce => "outboxd",
            Peer::OutboxdAtLeastOnce => "outboxd-alo",
            Peer::Debezium => "debezium",
        }
    }

    /// Parses a name given by [`Peer::name`].
    pub fn parse(s: &str) -> Result<Peer> {
        Ok(match s {
            "outboxd" => Peer::OutboxdExactlyOnce,
            "outboxd-alo" => Peer::OutboxdAtLeastOnce,
            "debezium" => Peer::Debezium,
            other => bail!("unknown peer {other:?} (outboxd, outboxd-alo, debezium)"),
        })
    }
}

/// Everything a peer needs to serve one lane.
pub struct Lane {
    pub source: Source,
    /// Lane name: the connector name, database, slot and publication name.
    pub name: String,
    /// Topic prefix; the topic is `<prefix><aggregate_type>`.
    pub topic_prefix: String,
    /// Replica server id (MariaDB).
    pub server_id: u32,
    /// Directory for the lane's configs, logs and offsets.
    pub dir: PathBuf,
}

/// A running peer process.
pub struct Running {
    child: Child,
    /// When it was spawned, µs since the epoch.
    pub started_us: u64,
    log: PathBuf,
    peer: Peer,
}

impl Running {
    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Fails when the process has exited, quoting the end of its log.
    pub fn check_alive(&mut self) -> Result<()> {
        if let Some(status) = self.child.try_wait()? {
            bail!(
                "{status}; end of {}:\n{}",
                self.log.display(),
                tail(&self.log)
            );
        }
        Ok(())
    }

    /// SIGTERM, then SIGKILL after 60 s. Stopping a stopped process does nothing. A relay
    /// that needs the SIGKILL fails the lane; Kafka Connect, which now and then hangs in
    /// its own shutdown after logging "Kafka Connect stopping" (Jetty's "Unable to
    /// destroy"), is only reported: its measurements are taken by then, and what it
    /// delivers again after the kill shows in its duplicates.
    pub fn stop(&mut self) -> Result<()> {
        if self.child.try_wait()?.is_some() {
            return Ok(());
        }
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            if self.child.try_wait()?.is_some() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        if self.peer == Peer::Debezium {
            eprintln!(
                "[bench]   Kafka Connect did not stop within 60 s of SIGTERM; killed. Log: {}",
                self.log.display()
            );
            return Ok(());
        }
        bail!(
            "did not stop within 60 s of SIGTERM; killed. Log: {}",
            self.log.display()
        )
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// The last 30 lines of a log file.
pub fn tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(30)..].join("\n")
}

/// Starts `peer` for `lane`; `start` numbers the starts of one lane (log file names).
pub fn start(peer: Peer, lane: &Lane, start: u32) -> Result<Running> {
    let log = lane.dir.join(format!("{}.{start}.log", peer.name()));
    let out = File::create(&log)?;
    let mut cmd = match peer {
        Peer::OutboxdExactlyOnce | Peer::OutboxdAtLeastOnce => outboxd_command(peer, lane)?,
        Peer::Debezium => debezium_command(lane)?,
    };
    cmd.stdin(Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(out);
    let started_us = crate::clock::now_us();
    let child = cmd
        .spawn()
        .with_context(|| format!("cannot start {}", peer.name()))?;
    // Found and killed by the next run if this harness dies without stopping it.
    std::fs::write(
        lane.dir.join(crate::sweep::PID_FILE),
        child.id().to_string(),
    )?;
    Ok(Running {
        child,
        started_us,
        log,
        peer,
    })
}

fn outboxd_command(peer: Peer, lane: &Lane) -> Result<Command> {
    let (user, password, host, port) = lane.source.relay_login()?;
    let source = match lane.source {
        Source::MariaDb => format!(
            "kind = \"mariadb\"\nhost = \"{host}\"\nport = {port}\nuser = \"{user}\"\n\
             password_env = \"OUTBOXD_BENCH_PASSWORD\"\nserver_id = {}\nstart = \"current\"\n",
            lane.server_id
        ),
        Source::Postgres => format!(
            "kind = \"postgres\"\nhost = \"{host}\"\nport = {port}\nuser = \"{user}\"\n\
             password_env = \"OUTBOXD_BENCH_PASSWORD\"\ndbname = \"{db}\"\n\
             slot_name = \"{db}_o\"\npublication_name = \"{db}\"\n\
             publication_autocreate = \"disabled\"\n",
            db = lane.name
        ),
    };
    let table = match lane.source {
        Source::MariaDb => format!("{}.outbox_events", lane.name),
        Source::Postgres => "public.outbox_events".to_string(),
    };
    let delivery = if peer == Peer::OutboxdAtLeastOnce {
        "at_least_once"
    } else {
        "exactly_once"
    };
    let config = format!(
        "[[connectors]]\nname = \"{name}\"\ntables = [\"{table}\"]\n\n\
         [connectors.source]\n{source}\n\
         [connectors.router]\nroute_by_field = \"aggregate_type\"\n\
         route_topic_replacement = \"{prefix}${{routedByValue}}\"\n\
         additional_placement = [\"event_type:header:eventType\"]\n\n\
         [connectors.kafka]\nbootstrap_servers = \"{bootstrap}\"\n\n\
         [connectors.checkpoint]\nstore = \"kafka\"\ndelivery = \"{delivery}\"\n\
         topic = \"outboxd.checkpoints.{name}\"\n",
        name = lane.name,
        prefix = lane.topic_prefix,
        bootstrap = crate::env::kafka_bootstrap(),
    );
    let path = lane.dir.join("outboxd.toml");
    std::fs::write(&path, config)?;
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_outboxd"));
    cmd.args(["run", "--config"])
        .arg(&path)
        .env("OUTBOXD_BENCH_PASSWORD", password)
        .env(
            "RUST_LOG",
            // For profiling: e.g. `info,outboxd::pipeline=debug` logs each Kafka
            // transaction's records and timings (benches/results/profile.md).
            std::env::var("OUTBOXD_BENCH_RELAY_LOG").unwrap_or_else(|_| "info".into()),
        );
    Ok(cmd)
}

/// The repository root (templates, the Connect classpath under `.state/connect/libs`).
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Replaces every `@KEY@` in `template`; fails on a placeholder left unreplaced.
pub fn fill(template: &str, values: &BTreeMap<&str, String>) -> Result<String> {
    let mut out = template.to_string();
    for (k, v) in values {
        out = out.replace(&format!("@{k}@"), v);
    }
    let leftover = out
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .find(|l| l.matches('@').count() >= 2);
    if let Some(line) = leftover {
        bail!("template placeholder left unreplaced: {line}");
    }
    Ok(out)
}

fn debezium_command(lane: &Lane) -> Result<Command> {
    let root = repo_root();
    let peers = root.join("benches/peers");
    // Two classpaths (benches/peers/pom.xml): Debezium 3.6.1 for PostgreSQL; 3.5.0 for
    // MariaDB, whose 3.6 connector is not on Maven Central.
    let libs = root.join(match lane.source {
        Source::MariaDb => ".state/connect/libs-mariadb",
        Source::Postgres => ".state/connect/libs",
    });
    if !libs.is_dir() {
        bail!(
            "no Kafka Connect classpath at {}; run scripts/bench.sh (it resolves benches/peers/pom.xml)",
            libs.display()
        );
    }
    let (user, password, host, port) = lane.source.admin_login()?;
    let mut v = BTreeMap::new();
    v.insert("NAME", lane.name.clone());
    v.insert("BOOTSTRAP", crate::env::kafka_bootstrap());
    v.insert(
        "OFFSETS_FILE",
        lane.dir.join("connect.offsets").display().to_string(),
    );
    v.insert("REST_PORT", crate::free_port()?.to_string());
    v.insert("HOST", host);
    v.insert("PORT", port.to_string());
    v.insert("USER", user);
    v.insert("PASSWORD", password);
    v.insert("DB", lane.name.clone());
    v.insert("TOPIC_PREFIX", lane.topic_prefix.clone());
    v.insert("SERVER_ID", lane.server_id.to_string());
    v.insert("SLOT", format!("{}_d", lane.name));
    v.insert("PUBLICATION", lane.name.clone());
    v.insert(
        "SCHEMA_HISTORY_FILE",
        lane.dir.join("schema-history.dat").display().to_string(),
    );
    let worker = fill(
        &std::fs::read_to_string(peers.join("connect-worker.properties"))?,
        &v,
    )?;
    let connector_template = match lane.source {
        Source::MariaDb => "debezium-mariadb.properties",
        Source::Postgres => "debezium-postgres.properties",
    };
    let connector = fill(
        &std::fs::read_to_string(peers.join(connector_template))?,
        &v,
    )?;
    let worker_path = lane.dir.join("connect-worker.properties");
    let connector_path = lane.dir.join(connector_template);
    std::fs::write(&worker_path, worker)?;
    std::fs::write(&connector_path, connector)?;
    let mut cmd = Command::new("java");
    // The heap Kafka's bin/connect-standalone.sh gives Connect by default.
    cmd.args(["-Xms256M", "-Xmx2G"])
        .arg(format!(
            "-Dlog4j2.configurationFile={}",
            peers.join("log4j2.properties").display()
        ))
        .arg("-cp")
        .arg(format!("{}/*", libs.display()))
        .arg("org.apache.kafka.connect.cli.ConnectStandalone")
        .arg(&worker_path)
        .arg(&connector_path);
    Ok(cmd)
}
