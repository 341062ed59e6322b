//! The real `outboxd` binary as a child process.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Directory for a test's files (configs, checkpoints, logs), under the project's ignored
/// state directory.
pub fn test_dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(".state")
        .join("tests")
        .join(name);
    std::fs::create_dir_all(&dir).expect("create test dir");
    dir
}

/// The outboxd binary the tests run: `OUTBOXD_TEST_BIN` when set (a copy of this build's
/// binary, for a target directory other builds share and may overwrite meanwhile), else
/// the one cargo built for this test.
pub fn binary() -> PathBuf {
    std::env::var_os("OUTBOXD_TEST_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_outboxd")))
}

/// A free loopback port (bound then released).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A running relay.
pub struct Relay {
    child: Option<Child>,
    pub configs: Vec<PathBuf>,
    pub log: PathBuf,
    pub metrics_port: u16,
    runs: u32,
    /// Environment variables set for the process, after the defaults.
    env: Vec<(String, String)>,
}

impl Relay {
    /// Starts `outboxd run --config <config>`; `metrics_port` must match the config's
    /// `metrics.listen`. Waits until `/ready` answers 200.
    pub fn start(config: PathBuf, metrics_port: u16) -> Relay {
        let log = config.with_extension("log");
        Self::start_with_args(&[config.to_str().unwrap()], metrics_port, log)
    }

    /// Starts `outboxd run` with one `--config` per config file in `args` (entries starting
    /// with `--` and the one after them are passed as they are), logging to `log`.
    pub fn start_with_args(args: &[&str], metrics_port: u16, log: PathBuf) -> Relay {
        let mut r = Self::launch_with_args(args, metrics_port, log);
        r.wait_ready(Duration::from_secs(60));
        r
    }

    /// [`Relay::start_with_args`] without waiting for `/ready` (for relays that cannot get
    /// ready, e.g. with Kafka unreachable).
    pub fn launch_with_args(args: &[&str], metrics_port: u16, log: PathBuf) -> Relay {
        Self::launch_with_env(args, metrics_port, log, &[])
    }

    /// [`Relay::launch_with_args`] with environment variables `env` (they beat the
    /// harness's own `OUTBOXD_KAFKA_BOOTSTRAP`).
    pub fn launch_with_env(
        args: &[&str],
        metrics_port: u16,
        log: PathBuf,
        env: &[(&str, &str)],
    ) -> Relay {
        let configs = args.iter().map(PathBuf::from).collect();
        let mut r = Relay {
            child: None,
            configs,
            log,
            metrics_port,
            runs: 0,
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        };
        r.spawn();
        r
    }

    /// Starts the relay without waiting for readiness.
    pub fn spawn(&mut self) {
        assert!(self.child.is_none(), "relay already running");
        self.runs += 1;
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .expect("relay log");
        let mut cmd = Command::new(binary());
        cmd.arg("run");
        let mut raw = false;
        for c in &self.configs {
            let s = c.to_string_lossy();
            if raw || s.starts_with("--") {
                cmd.arg(c);
                raw = s.starts_with("--");
            } else {
                cmd.arg("--config").arg(c);
            }
        }
        cmd.env("RUST_LOG", "info,outboxd=debug")
            .env("OUTBOXD_KAFKA_BOOTSTRAP", super::kafka_bootstrap());
        for (k, v) in &self.env {
            if v.is_empty() {
                cmd.env_remove(k);
            } else {
                cmd.env(k, v);
            }
        }
        let child = cmd
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("spawn outboxd");
        self.child = Some(child);
    }

    /// Waits for `/ready` = 200; panics with the relay's log otherwise.
    pub fn wait_ready(&mut self, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                panic!("outboxd exited early ({status}); log:\n{}", self.log_text());
            }
            if let Some((200, _)) = http_get(self.metrics_port, "/ready") {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!(
            "outboxd not ready after {timeout:?}; log:\n{}",
            self.log_text()
        );
    }

    /// SIGTERM, then waits for a clean exit (drain + final checkpoint). Returns the exit code.
    pub fn stop(&mut self) -> Option<i32> {
        let mut child = self.child.take()?;
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(child.id().to_string())
            .status();
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                return status.code();
            }
            if Instant::now() >= deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "outboxd did not stop within 30 s of SIGTERM; log:\n{}",
                    self.log_text()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// SIGKILL: no drain, no final checkpoint.
    pub fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// `kill -9`, then starts it again and waits (at most 60 s) until it is ready: a crash
    /// and the restart a supervisor would do.
    pub fn crash_and_restart(&mut self) {
        self.kill9();
        self.spawn();
        self.wait_ready(Duration::from_secs(60));
    }

    /// Waits for the process to exit by itself; returns its exit code.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<i32> {
        let deadline = Instant::now() + timeout;
        let child = self.child.as_mut()?;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = child.try_wait() {
                self.child = None;
                return status.code();
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        None
    }

    /// The running process's id.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(|c| c.id())
    }

    /// `/metrics` text.
    pub fn metrics(&self) -> String {
        http_get(self.metrics_port, "/metrics")
            .map(|(_, b)| b)
            .unwrap_or_default()
    }

    /// Everything the relay logged so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

/// A value of the first sample of `name` whose labels contain `labels`, in `/metrics` text.
pub fn metric(text: &str, name: &str, labels: &str) -> Option<f64> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .find(|l| l.starts_with(&format!("{name}{{")) && l.contains(labels))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// A minimal HTTP/1.0 GET against 127.0.0.1:`port`; returns (status, body).
pub fn http_get(port: u16, path: &str) -> Option<(u16, String)> {
    http_get_within(port, path, Duration::from_secs(5))
}

/// [`http_get`], giving up after `wait` without an answer (e.g. from a frozen process).
pub fn http_get_within(port: u16, path: &str, wait: Duration) -> Option<(u16, String)> {
    let mut s = TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), wait).ok()?;
    s.set_read_timeout(Some(wait)).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut buf = String::new();
    s.read_to_string(&mut buf).ok()?;
    let status = buf.split_whitespace().nth(1)?.parse().ok()?;
    let body = buf
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    Some((status, body))
}

/// Waits up to `timeout` for `/ready` on 127.0.0.1:`port` to answer `code`; returns the
/// body (the health report). Panics with the last answer otherwise.
pub fn wait_ready_code(port: u16, code: u16, timeout: Duration) -> String {
    let deadline = Instant::now() + timeout;
    let mut last = None;
    while Instant::now() < deadline {
        last = http_get(port, "/ready");
        if let Some((c, body)) = &last {
            if *c == code {
                return body.clone();
            }
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    panic!("/ready did not answer {code} within {timeout:?}; last: {last:?}");
}

/// Runs the outboxd binary with `args` to completion; returns (exit code, stdout, stderr).
pub fn run_cli(args: &[&str]) -> (i32, String, String) {
    run_cli_with_env(args, &[])
}

/// [`run_cli`] with environment variables `env` (an empty value unsets the variable).
pub fn run_cli_with_env(args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let mut cmd = Command::new(binary());
    cmd.args(args)
        .env("OUTBOXD_KAFKA_BOOTSTRAP", super::kafka_bootstrap());
    for (k, v) in env {
        if v.is_empty() {
            cmd.env_remove(k);
        } else {
            cmd.env(k, v);
        }
    }
    let out = cmd.output().expect("run outboxd");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}
