//! Real Kafka Connect with Debezium, as the oracle: a worker (standalone) on the Maven Central
//! classpath `scripts/connect.sh resolve` puts under `.state/connect/` (PostgreSQL: Debezium
//! 3.6.1, `libs`; MariaDB: Debezium 3.5.0, `libs-mariadb`), driven through its REST API.
//!
//! Tests that need it call [`ConnectWorker::start`] (standalone, offsets in a file) or
//! [`ConnectWorker::start_distributed`] (offsets, configs and statuses in Kafka topics of
//! the test's own, a worker group of the test's own), which return `None` (after printing
//! why) when the classpath is not there, so a checkout without it skips them; `.ci/run`
//! resolves it first. Every worker process dies with its value (`Drop` kills it).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::relay::{free_port, test_dir};

/// Which Debezium classpath a worker runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plugin {
    /// Debezium 3.6.1 PostgreSQL connector (`.state/connect/libs`).
    Postgres,
    /// Debezium 3.5.0 MariaDB connector (`.state/connect/libs-mariadb`).
    Mariadb,
}

impl Plugin {
    fn libs(self) -> PathBuf {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join(".state/connect");
        match self {
            Plugin::Postgres => root.join("libs"),
            Plugin::Mariadb => root.join("libs-mariadb"),
        }
    }
}

/// A Kafka Connect worker process (standalone or distributed).
pub struct ConnectWorker {
    child: Option<Child>,
    /// Its classpath.
    libs: PathBuf,
    /// `ConnectStandalone` or `ConnectDistributed`.
    class: &'static str,
    /// REST port on 127.0.0.1.
    pub port: u16,
    /// The worker properties file (also usable as outboxd's `--kafka-config`).
    pub worker_file: PathBuf,
    /// The worker's log.
    pub log: PathBuf,
    /// Its directory (offsets file, schema histories).
    pub dir: PathBuf,
    /// A distributed worker's offsets topic (`offset.storage.topic`).
    pub offsets_topic: Option<String>,
}

impl ConnectWorker {
    /// Starts a standalone worker for `plugin` with Kafka's stock converters (JsonConverter
    /// with schemas for keys and values) plus `extra` worker properties, and waits for its
    /// REST API. `None` when the classpath is missing (the reason is printed).
    pub fn start(plugin: Plugin, name: &str, extra: &[(&str, &str)]) -> Option<ConnectWorker> {
        let dir = test_dir(name);
        let offsets = dir.join("connect.offsets").display().to_string();
        let mut props = vec![("offset.storage.file.filename", offsets.as_str())];
        props.extend_from_slice(extra);
        Self::launch(plugin, name, "ConnectStandalone", &props)
    }

    /// Starts a distributed worker for `plugin` in a worker group of its own
    /// (`<name>-group`; offsets, configs and statuses in topics `<name>-offsets` (Connect's
    /// default 25 partitions), `-configs`, `-status`, replication factor 1), with the
    /// stock converters plus `extra`, and waits for its REST API. `None` when the classpath
    /// is missing.
    pub fn start_distributed(
        plugin: Plugin,
        name: &str,
        extra: &[(&str, &str)],
    ) -> Option<ConnectWorker> {
        let group = format!("{name}-group");
        let offsets = format!("{name}-offsets");
        let configs = format!("{name}-configs");
        let status = format!("{name}-status");
        let mut props = vec![
            ("group.id", group.as_str()),
            ("offset.storage.topic", offsets.as_str()),
            ("config.storage.topic", configs.as_str()),
            ("status.storage.topic", status.as_str()),
            ("offset.storage.replication.factor", "1"),
            ("config.storage.replication.factor", "1"),
            ("status.storage.replication.factor", "1"),
            // A restarted worker rejoins quickly, and a dead one leaves the group soon.
            ("scheduled.rebalance.max.delay.ms", "0"),
        ];
        props.extend_from_slice(extra);
        let mut w = Self::launch(plugin, name, "ConnectDistributed", &props)?;
        w.offsets_topic = Some(offsets);
        Some(w)
    }

    fn launch(
        plugin: Plugin,
        name: &str,
        class: &'static str,
        extra: &[(&str, &str)],
    ) -> Option<ConnectWorker> {
        let libs = plugin.libs();
        if !libs.join("connect-runtime-4.1.1.jar").exists() {
            eprintln!(
                "SKIPPED: no Kafka Connect + Debezium classpath at {} (run `bash scripts/connect.sh resolve`)",
                libs.display()
            );
            return None;
        }
        let dir = test_dir(name);
        let port = free_port();
        let worker_file = dir.join("worker.properties");
        let mut props = vec![
            ("bootstrap.servers".to_string(), super::kafka_bootstrap()),
            (
                "key.converter".into(),
                "org.apache.kafka.connect.json.JsonConverter".into(),
            ),
            (
                "value.converter".into(),
                "org.apache.kafka.connect.json.JsonConverter".into(),
            ),
            ("key.converter.schemas.enable".into(), "true".into()),
            ("value.converter.schemas.enable".into(), "true".into()),
            ("offset.flush.interval.ms".into(), "10000".into()),
            ("listeners".into(), format!("http://127.0.0.1:{port}")),
            ("plugin.discovery".into(), "service_load".into()),
        ];
        for (k, v) in extra {
            props.retain(|(pk, _)| pk != k);
            props.push((k.to_string(), v.to_string()));
        }
        let text: String = props.iter().map(|(k, v)| format!("{k}={v}\n")).collect();
        std::fs::write(&worker_file, text).unwrap();
        let mut w = ConnectWorker {
            child: None,
            libs,
            class,
            port,
            worker_file,
            log: dir.join("connect.log"),
            dir,
            offsets_topic: None,
        };
        w.spawn();
        Some(w)
    }

    /// Starts the worker process (again, after [`stop`](Self::stop) or
    /// [`kill9`](Self::kill9)) with the same worker file, and waits for its REST API.
    pub fn restart(&mut self) {
        self.kill9();
        self.spawn();
    }

    fn spawn(&mut self) {
        let log_file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .unwrap();
        let log4j = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/peers/log4j2.properties");
        let child = Command::new("java")
            .args(["-Xms128M", "-Xmx768M", "-XX:+UseSerialGC"])
            .arg(format!("-Dlog4j2.configurationFile={}", log4j.display()))
            .arg("-cp")
            .arg(format!("{}/*", self.libs.display()))
            .arg(format!("org.apache.kafka.connect.cli.{}", self.class))
            .arg(&self.worker_file)
            .stdin(Stdio::null())
            .stdout(log_file.try_clone().unwrap())
            .stderr(log_file)
            .spawn()
            .expect("start java (Kafka Connect)");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(180);
        loop {
            if let Some((200, _)) = self.rest("GET", "/", None) {
                return;
            }
            if let Some(Ok(Some(status))) = self.child.as_mut().map(|c| c.try_wait()) {
                panic!(
                    "Kafka Connect exited ({status}) before its REST API answered:\n{}",
                    self.log_text()
                );
            }
            assert!(
                Instant::now() < deadline,
                "Kafka Connect's REST API did not answer within 180 s:\n{}",
                self.log_text()
            );
            std::thread::sleep(Duration::from_millis(300));
        }
    }

    /// The worker's process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(|c| c.id())
    }

    /// One REST call; `None` when nothing answers.
    pub fn rest(&self, method: &str, path: &str, body: Option<&str>) -> Option<(u16, String)> {
        rest(self.port, method, path, body)
    }

    /// Creates connector `name` with `config` (`POST /connectors`); panics with Connect's
    /// answer unless it is 201.
    pub fn create(&self, name: &str, config: &serde_json::Map<String, serde_json::Value>) {
        let body = serde_json::json!({"name": name, "config": config}).to_string();
        match self.rest("POST", "/connectors", Some(&body)) {
            Some((201, _)) => {}
            other => panic!("creating connector {name}: {other:?}"),
        }
    }

    /// The task's state (`RUNNING`, `FAILED`, ...) and trace, when the connector has a task.
    pub fn task_state(&self, name: &str) -> Option<(String, String)> {
        let (code, body) = self.rest("GET", &format!("/connectors/{name}/status"), None)?;
        if code != 200 {
            return None;
        }
        let v: serde_json::Value = serde_json::from_str(&body).ok()?;
        let t = v.get("tasks")?.get(0)?;
        Some((
            t.get("state")?.as_str()?.to_string(),
            t.get("trace")
                .and_then(|x| x.as_str())
                .unwrap_or_default()
                .to_string(),
        ))
    }

    /// Waits until the connector's task is RUNNING or FAILED; returns that state and the
    /// trace.
    pub fn wait_task(&self, name: &str, timeout: Duration) -> (String, String) {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some((state, trace)) = self.task_state(name) {
                if state == "RUNNING" || state == "FAILED" {
                    return (state, trace);
                }
            }
            assert!(
                Instant::now() < deadline,
                "connector {name} has no RUNNING/FAILED task after {timeout:?}:\n{}",
                self.log_text()
            );
            std::thread::sleep(Duration::from_millis(300));
        }
    }

    /// Creates connector `name` in the STOPPED state (KIP-980 `initial_state`): it starts
    /// nothing until [`resume_connector`](Self::resume_connector); its offsets can be set
    /// (KIP-875 `PATCH`) meanwhile.
    pub fn create_stopped(&self, name: &str, config: &serde_json::Map<String, serde_json::Value>) {
        let body = serde_json::json!({"name": name, "config": config, "initial_state": "STOPPED"})
            .to_string();
        match self.rest("POST", "/connectors", Some(&body)) {
            Some((201, _)) => {}
            other => panic!("creating connector {name} stopped: {other:?}"),
        }
    }

    /// `PUT /connectors/<name>/stop` (KIP-875: tasks shut down, offsets kept), and waits
    /// until the connector reports STOPPED.
    pub fn stop_connector(&self, name: &str) {
        match self.rest("PUT", &format!("/connectors/{name}/stop"), None) {
            Some((code, _)) if (200..300).contains(&code) => {}
            other => panic!("stopping connector {name}: {other:?}"),
        }
        self.wait_connector_state(name, "STOPPED", Duration::from_secs(60));
    }

    /// `PUT /connectors/<name>/resume`.
    pub fn resume_connector(&self, name: &str) {
        match self.rest("PUT", &format!("/connectors/{name}/resume"), None) {
            Some((code, _)) if (200..300).contains(&code) => {}
            other => panic!("resuming connector {name}: {other:?}"),
        }
    }

    /// Waits until the connector's own state is `state`.
    pub fn wait_connector_state(&self, name: &str, state: &str, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some((200, body)) = self.rest("GET", &format!("/connectors/{name}/status"), None)
            {
                let v: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
                if v["connector"]["state"] == state {
                    return;
                }
            }
            assert!(
                Instant::now() < deadline,
                "connector {name} not {state} after {timeout:?}:\n{}",
                self.log_text()
            );
            std::thread::sleep(Duration::from_millis(300));
        }
    }

    /// Deletes connector `name` (its offsets stay in the worker's file).
    pub fn delete(&self, name: &str) {
        let _ = self.rest("DELETE", &format!("/connectors/{name}"), None);
    }

    /// The worker's log so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Stops the worker with SIGTERM (it flushes offsets) and waits for it.
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = Command::new("kill").arg(c.id().to_string()).status();
            let deadline = Instant::now() + Duration::from_secs(30);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = c.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Kills the worker with SIGKILL.
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for ConnectWorker {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// A minimal HTTP/1.1 request (JSON body, `Connection: close`) to 127.0.0.1:`port`;
/// returns (status, body), or `None` when nothing answers within 30 s.
pub fn rest(port: u16, method: &str, path: &str, body: Option<&str>) -> Option<(u16, String)> {
    let wait = Duration::from_secs(30);
    let mut s =
        TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), Duration::from_secs(2)).ok()?;
    s.set_read_timeout(Some(wait)).ok()?;
    let body = body.unwrap_or("");
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\nAccept: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .ok()?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).ok()?;
    let text = String::from_utf8_lossy(&buf).into_owned();
    let status = text.split_whitespace().nth(1)?.parse().ok()?;
    let (head, rest) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let chunked = head.lines().any(|l| {
        l.to_ascii_lowercase()
            .starts_with("transfer-encoding: chunked")
    });
    let body = if chunked {
        dechunk(rest)
    } else {
        rest.to_string()
    };
    Some((status, body))
}

/// Joins an HTTP/1.1 chunked body.
fn dechunk(mut s: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = s.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        s = rest[n..].trim_start_matches("\r\n");
    }
    out
}
