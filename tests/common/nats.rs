//! The NATS JetStream side of the sink tests: the server's settings (`OUTBOXD_NATS_URL`,
//! `_USER`, `_PASSWORD`, as `scripts/services.sh env` prints them), connector configs with a
//! `[connectors.sink] type = "nats-jetstream"`, streams, a reader of a whole stream (its
//! messages as [`Consumed`] records, so the shared assertions apply), and stopping/starting
//! the server (`scripts/services.sh stop nats` / `start nats`, or the command in
//! `OUTBOXD_NATS_CTL`, called with `stop`/`start`).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use async_nats::jetstream;

use super::kafka::Consumed;
use super::relay::{free_port, Relay};
use super::suite::SourceDb;

/// The test server's URL.
pub fn url() -> String {
    std::env::var("OUTBOXD_NATS_URL").unwrap_or_else(|_| "nats://127.0.0.1:34222".into())
}

/// The test server's user.
pub fn user() -> String {
    std::env::var("OUTBOXD_NATS_USER").unwrap_or_else(|_| "outboxd".into())
}

/// The test server's password.
pub fn password() -> String {
    std::env::var("OUTBOXD_NATS_PASSWORD").unwrap_or_else(|_| "outboxd-nats-secret".into())
}

/// A JetStream context on the test server, as the test's own client.
pub async fn js() -> jetstream::Context {
    let client = async_nats::ConnectOptions::new()
        .user_and_password(user(), password())
        .connect(url())
        .await
        .expect("connect to the test NATS server");
    jetstream::new(client)
}

/// The stream name the tests use for `db`: `S_<name>`, capturing `<name>.>`.
pub fn stream_name<S: SourceDb>(db: &S) -> String {
    format!("S_{}", db.name())
}

/// Creates `db`'s stream (file storage, duplicate window `window`).
pub async fn create_stream<S: SourceDb>(db: &S, window: Duration) {
    js().await
        .create_stream(jetstream::stream::Config {
            name: stream_name(db),
            subjects: vec![format!("{}.>", db.name())],
            duplicate_window: window,
            ..Default::default()
        })
        .await
        .expect("create the test stream");
}

/// Writes a connector config for `db` to NATS (`sink_extra` added to `[connectors.sink]`,
/// `password` the sink's), file `file_name`; returns (path, metrics port).
pub fn write_config<S: SourceDb>(
    db: &S,
    sink_extra: &str,
    password: &str,
    file_name: &str,
) -> (PathBuf, u16) {
    super::suite::write_sink_config(
        db,
        &format!(
            r#"[connectors.sink]
type = "nats-jetstream"
url = "{url}"
user = "{user}"
password = "{password}"
checkpoint_bucket = "outboxd_test_checkpoints"
{sink_extra}"#,
            url = url(),
            user = user(),
        ),
        file_name,
    )
}

/// Every message of stream `stream`, in stream order, as records: subject as topic, stream
/// sequence as offset, `Outboxd-Key` as key, payload as value (`None` for a tombstone).
pub async fn read_stream(stream: &str) -> Vec<Consumed> {
    let js = js().await;
    let mut s = js.get_stream(stream).await.expect("the stream exists");
    let info = s.info().await.expect("stream info").state.clone();
    let mut out = Vec::new();
    for seq in info.first_sequence..=info.last_sequence {
        let Ok(m) = s.get_raw_message(seq).await else {
            continue;
        };
        let mut headers = Vec::new();
        let mut tombstone = false;
        let mut key = None;
        for (name, values) in m.headers.iter() {
            let name: &str = name.as_ref();
            for v in values {
                match name {
                    "Outboxd-Key" => key = Some(v.as_str().as_bytes().to_vec()),
                    "Outboxd-Tombstone" => tombstone = true,
                    _ => headers.push((name.to_string(), v.as_str().as_bytes().to_vec())),
                }
            }
        }
        out.push(Consumed {
            topic: m.subject.to_string(),
            partition: 0,
            offset: seq as i64,
            key,
            value: if tombstone {
                None
            } else {
                Some(m.payload.to_vec())
            },
            raw_headers: headers
                .iter()
                .map(|(k, v)| (k.clone(), Some(v.clone())))
                .collect(),
            headers,
            timestamp_ms: Some(m.time.unix_timestamp() * 1000),
        });
    }
    out
}

/// Waits until stream `stream` holds at least `n` messages and no more arrive for
/// `settle`, at most `timeout`; then reads it ([`read_stream`]).
pub async fn read_expecting(
    stream: &str,
    n: usize,
    timeout: Duration,
    settle: Duration,
) -> Vec<Consumed> {
    let js = js().await;
    let deadline = Instant::now() + timeout;
    let mut last = (0u64, Instant::now());
    loop {
        let count = message_count(&js, stream).await;
        if count != last.0 {
            last = (count, Instant::now());
        }
        if (count as usize >= n && last.1.elapsed() >= settle) || Instant::now() >= deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    read_stream(stream).await
}

/// How many messages stream `stream` holds (0 while it does not exist), through `js`.
pub async fn message_count(js: &jetstream::Context, stream: &str) -> u64 {
    match js.get_stream(stream).await {
        Ok(mut s) => s.info().await.map(|i| i.state.messages).unwrap_or(0),
        Err(_) => 0,
    }
}

/// Waits (at most 60 s) until stream `stream` holds `n` messages, through `js` (a server of
/// the test's own: [`OwnServer`]); panics with `relay`'s log otherwise.
pub async fn wait_messages(js: &jetstream::Context, stream: &str, n: u64, relay: &Relay) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while message_count(js, stream).await != n {
        assert!(
            Instant::now() < deadline,
            "stream {stream} never held {n} messages; log:\n{}",
            relay.log_text()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// [`read_expecting`] on `db`'s stream ([`stream_name`]) for `n` messages, within 120 s and
/// settled for 4 s (the wait of the tests that count deliveries after crashes).
pub async fn read_all<S: SourceDb>(db: &S, n: usize) -> Vec<Consumed> {
    read_expecting(
        &stream_name(db),
        n,
        Duration::from_secs(120),
        Duration::from_secs(4),
    )
    .await
}

/// Stops (`"stop"`) or starts (`"start"`) the NATS server: `OUTBOXD_NATS_CTL <what>` when
/// set, else `scripts/services.sh <what> nats`.
pub fn server(what: &str) {
    let out = match std::env::var("OUTBOXD_NATS_CTL") {
        Ok(cmd) => std::process::Command::new(cmd).arg(what).output(),
        Err(_) => std::process::Command::new("bash")
            .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/services.sh"))
            .args([what, "nats"])
            .output(),
    }
    .expect("run the NATS stop/start command");
    assert!(
        out.status.success(),
        "NATS {what}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The server as the tests of one process share it: each test holds [`shared`] while it
/// uses the server, the test that stops it holds [`exclusive`], so no other test sees the
/// outage.
static SERVER: tokio::sync::RwLock<()> = tokio::sync::RwLock::const_new(());

/// Held while a test uses the server (not stopping it).
pub async fn shared() -> tokio::sync::RwLockReadGuard<'static, ()> {
    SERVER.read().await
}

/// Held while a test stops and starts the server.
pub async fn exclusive() -> tokio::sync::RwLockWriteGuard<'static, ()> {
    SERVER.write().await
}

/// A nats-server of the test's own (with TLS: [`OwnServer::start`]) (the test certificates of `.state/tls`:
/// `server.pem` for `localhost`, clients verified against `ca.pem` when `mutual`), JetStream
/// and the test user; stopped when dropped.
pub struct OwnServer {
    child: std::process::Child,
    /// `tls://localhost:<port>`.
    pub url: String,
}

impl OwnServer {
    /// Starts it in `dir` (its store and configuration).
    pub fn start(dir: &std::path::Path, mutual: bool) -> OwnServer {
        let tls = super::tls::file;
        Self::start_with(
            dir,
            &format!(
                "tls {{ cert_file: \"{cert}\", key_file: \"{key}\", ca_file: \"{ca}\", verify: {mutual} }}",
                cert = tls("server.pem"),
                key = tls("server.key"),
                ca = tls("ca.pem"),
            ),
            &format!(
                "authorization {{ users: [ {{ user: \"{user}\", password: \"{password}\" }} ] }}",
                user = user(),
                password = password(),
            ),
        )
    }

    /// Starts a server of the test's own in `dir` with the configuration blocks `tls` (empty:
    /// none; then the URL is `nats://`) and `auth`.
    pub fn start_with(dir: &std::path::Path, tls: &str, auth: &str) -> OwnServer {
        let port = free_port();
        let conf = dir.join("nats-own.conf");
        std::fs::write(
            &conf,
            format!(
                "listen: 127.0.0.1:{port}\njetstream {{ store_dir: \"{store}\" }}\n{tls}\n{auth}\n",
                store = dir.join("nats-own-store").display(),
            ),
        )
        .unwrap();
        let bin = ["/usr/sbin/nats-server", "/usr/bin/nats-server"]
            .into_iter()
            .find(|p| std::path::Path::new(p).exists())
            .unwrap_or("nats-server");
        let child = std::process::Command::new(bin)
            .arg("-c")
            .arg(&conf)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("start nats-server");
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "nats-server with TLS did not start"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        OwnServer {
            child,
            url: format!(
                "{}://localhost:{port}",
                if tls.is_empty() { "nats" } else { "tls" }
            ),
        }
    }
}

impl Drop for OwnServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
