//! The Redis Streams sink against a real Redis (`OUTBOXD_REDIS_URL`, user
//! `OUTBOXD_REDIS_USER`, password `OUTBOXD_REDIS_PASSWORD`; defaults: scripts/services.sh's
//! redis://127.0.0.1:36379, outboxd, outboxd-redis-secret) and the MariaDB/PostgreSQL test
//! services: both sources to streams with the documented entry layouts, restart, kill -9
//! under a writer (exactly once, counted by reading the streams), Redis restarted
//! mid-stream, a second instance fencing the first, a `--group` failover (kill -9 of the
//! owner) exactly once, a refused password, `rediss://` to the plaintext port, a stream key
//! of the wrong type.
//!
//! Stopping and starting Redis: `bash scripts/services.sh stop redis` / `start redis`, or
//! `$OUTBOXD_REDIS_CTL stop|start` when set (a script of one's own for a private server).

mod common;

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use common::edges::{expect_failed_exit, run_expecting_failure};
use common::group;
use common::mariadb::MariaDb;
use common::postgres::Postgres;
use common::relay::{free_port, test_dir, Relay};
use common::suite::{self, SourceDb};
use common::OutboxEvent;

fn redis_url() -> String {
    std::env::var("OUTBOXD_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:36379".into())
}

fn redis_user() -> String {
    std::env::var("OUTBOXD_REDIS_USER").unwrap_or_else(|_| "outboxd".into())
}

fn redis_password() -> String {
    std::env::var("OUTBOXD_REDIS_PASSWORD").unwrap_or_else(|_| "outboxd-redis-secret".into())
}

/// Held (read) by every test while it uses Redis, and (write) by the test that stops it, so
/// the outage hits only that test.
static REDIS_UP: tokio::sync::RwLock<()> = tokio::sync::RwLock::const_new(());

/// A connection to the test Redis as the test user.
fn redis() -> redis::Connection {
    try_redis().expect("connect to Redis: run scripts/services.sh up (or set OUTBOXD_REDIS_URL)")
}

fn try_redis() -> Option<redis::Connection> {
    use redis::IntoConnectionInfo;
    let info = redis_url().into_connection_info().unwrap();
    let login = info
        .redis_settings()
        .clone()
        .set_username(redis_user())
        .set_password(redis_password());
    redis::Client::open(info.set_redis_settings(login))
        .unwrap()
        .get_connection()
        .ok()
}

/// Stops (`stop`) or starts (`start`) the test Redis.
fn redis_ctl(what: &str) {
    match std::env::var("OUTBOXD_REDIS_CTL") {
        Ok(script) => {
            let ok = std::process::Command::new("bash")
                .arg(&script)
                .arg(what)
                .status()
                .expect("run OUTBOXD_REDIS_CTL")
                .success();
            assert!(ok, "{script} {what} failed");
        }
        Err(_) => suite::services(&[what, "redis"]),
    }
    if what == "start" {
        // Up once it answers PONG (not LOADING while it reads its append-only file).
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let pong: Option<String> =
                try_redis().and_then(|mut c| redis::cmd("PING").query(&mut c).ok());
            if pong.as_deref() == Some("PONG") {
                break;
            }
            assert!(Instant::now() < deadline, "Redis did not come back");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// One stream entry: its fields in order, as text.
#[derive(Debug, Clone)]
struct Entry {
    fields: Vec<(String, String)>,
}

impl Entry {
    fn get(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Every entry of `stream`, in order.
fn read_stream(stream: &str) -> Vec<Entry> {
    let mut c = redis();
    let raw: Vec<(String, Vec<Vec<u8>>)> = redis::cmd("XRANGE")
        .arg(stream)
        .arg("-")
        .arg("+")
        .query(&mut c)
        .unwrap();
    raw.into_iter()
        .map(|(_, f)| Entry {
            fields: f
                .chunks(2)
                .map(|kv| {
                    (
                        String::from_utf8_lossy(&kv[0]).into_owned(),
                        String::from_utf8_lossy(kv.get(1).map_or(&[][..], |v| v)).into_owned(),
                    )
                })
                .collect(),
        })
        .collect()
}

/// Reads `stream` until it holds `n` entries (or `within` passes, then settles another
/// `settle` to catch duplicates).
fn read_expecting(stream: &str, n: usize, within: Duration) -> Vec<Entry> {
    let deadline = Instant::now() + within;
    loop {
        let got = read_stream(stream);
        if got.len() >= n || Instant::now() >= deadline {
            std::thread::sleep(Duration::from_millis(500));
            return read_stream(stream);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Writes a connector config for `db` with a Redis sink (`sink_extra` added to
/// `[connectors.sink]`, `password` as the password) and returns (path, metrics port).
fn write_config<S: SourceDb>(
    db: &S,
    sink_extra: &str,
    password: &str,
    file: &str,
) -> (PathBuf, u16) {
    suite::write_sink_config(
        db,
        &format!(
            r#"[connectors.sink]
type = "redis"
url = "{url}"
user = "{user}"
password = "{password}"
{sink_extra}"#,
            url = redis_url(),
            user = redis_user(),
        ),
        file,
    )
}

fn start<S: SourceDb>(db: &S, sink_extra: &str) -> Relay {
    let (path, port) = write_config(db, sink_extra, &redis_password(), "connector.toml");
    Relay::start(path, port)
}

const EXTENDED: &str = "message_format = \"extended\"";

/// Asserts that `got` (extended entries) holds every event of `events` exactly once, with
/// key, value and headers, in per-key order.
fn assert_exactly_once_extended(events: &[OutboxEvent], got: &[Entry], log: &str) {
    let mut count: HashMap<&str, usize> = HashMap::new();
    for e in got {
        *count.entry(e.get("ID").unwrap_or("")).or_default() += 1;
    }
    let missing = events
        .iter()
        .filter(|e| !count.contains_key(e.id.as_str()))
        .count();
    let dups = count.values().filter(|n| **n > 1).count();
    assert!(
        missing == 0 && dups == 0 && got.len() == events.len(),
        "{missing} of {} events missing, {dups} duplicated, {} entries; log tail:\n{}",
        events.len(),
        got.len(),
        &log[log.len().saturating_sub(6000)..]
    );
    let by_id: HashMap<&str, &OutboxEvent> = events.iter().map(|e| (e.id.as_str(), e)).collect();
    let mut last: HashMap<String, usize> = HashMap::new();
    for (i, entry) in got.iter().enumerate() {
        let e = by_id[entry.get("ID").unwrap()];
        assert_eq!(entry.get("key"), Some(e.aggregate_id.as_str()));
        assert_eq!(
            entry.get("value"),
            Some(e.payload.as_deref().unwrap_or("default"))
        );
        assert_eq!(entry.get("EVENTTYPE"), Some(e.event_type.as_str()));
        // Per key, in the order written (sequenced payloads carry their seq).
        let seq = e
            .payload
            .as_deref()
            .and_then(|p| serde_json::from_str::<serde_json::Value>(p).ok())
            .and_then(|v| v["seq"].as_u64());
        if let Some(seq) = seq {
            let prev = last.insert(e.aggregate_id.clone(), seq as usize);
            assert!(
                prev.is_none_or(|p| p < seq as usize),
                "entry {i}: key {} out of order",
                e.aggregate_id
            );
        }
    }
}

// ---------------------------------------------------------------- both sources

/// MariaDB outbox rows -> the routed streams, extended layout (key, value, upper-cased
/// headers); a restart resumes where the checkpoint is, with nothing lost or repeated.
#[tokio::test(flavor = "multi_thread")]
async fn mariadb_to_streams_extended_and_restart() {
    let _up = REDIS_UP.read().await;
    let db = MariaDb::new("redis_maria").await;
    to_streams_and_restart(&db).await;
}

/// The same from PostgreSQL.
#[tokio::test(flavor = "multi_thread")]
async fn postgres_to_streams_extended_and_restart() {
    let _up = REDIS_UP.read().await;
    let db = Postgres::new("redis_pg").await;
    to_streams_and_restart(&db).await;
}

async fn to_streams_and_restart<S: SourceDb>(db: &S) {
    let mut relay = start(db, EXTENDED);
    let orders = suite::sequenced_range("Order", 3, 0..20, 0);
    let mut customers = vec![OutboxEvent::new(
        "Customer",
        "c-1",
        "Created",
        Some("{\"n\":1}"),
    )];
    db.insert(&orders, false).await;
    db.insert(&customers, false).await;
    let stream = suite::topic(db, "Order");
    let got = read_expecting(&stream, orders.len(), Duration::from_secs(60));
    assert_exactly_once_extended(&orders, &got, &relay.log_text());
    let got = read_expecting(&suite::topic(db, "Customer"), 1, Duration::from_secs(30));
    assert_exactly_once_extended(&customers, &got, &relay.log_text());
    // Field order: key, value, then the headers.
    assert_eq!(got[0].fields[0].0, "key");
    assert_eq!(got[0].fields[1].0, "value");
    assert_eq!(got[0].fields[2].0, "ID");
    assert_eq!(relay.stop(), Some(0));
    // Written while the relay is down.
    let more = suite::sequenced_range("Order", 3, 20..40, 0);
    db.insert(&more, false).await;
    customers.push(OutboxEvent::new("Customer", "c-2", "Created", None));
    db.insert(&customers[1..], false).await;
    relay.spawn();
    relay.wait_ready(Duration::from_secs(60));
    let all: Vec<OutboxEvent> = orders.into_iter().chain(more).collect();
    let got = read_expecting(&stream, all.len(), Duration::from_secs(60));
    assert_exactly_once_extended(&all, &got, &relay.log_text());
    // A tombstone (no payload) carries the null_value text, as Debezium Server writes it.
    let got = read_expecting(&suite::topic(db, "Customer"), 2, Duration::from_secs(30));
    assert_exactly_once_extended(&customers, &got, &relay.log_text());
    assert_eq!(relay.stop(), Some(0));
}

/// The compact layout (Debezium Server's default): one field, the key, whose value is the
/// record value.
#[tokio::test(flavor = "multi_thread")]
async fn compact_layout_is_key_to_value() {
    let _up = REDIS_UP.read().await;
    let db = Postgres::new("redis_compact").await;
    let mut relay = start(&db, "");
    let events = suite::sequenced_range("Order", 2, 0..4, 0);
    db.insert(&events, false).await;
    let got = read_expecting(
        &suite::topic(&db, "Order"),
        events.len(),
        Duration::from_secs(60),
    );
    assert_eq!(got.len(), events.len(), "{}", relay.log_text());
    for (entry, e) in got.iter().zip(&events) {
        assert_eq!(
            entry.fields,
            vec![(e.aggregate_id.clone(), e.payload.clone().unwrap())]
        );
    }
    assert_eq!(relay.stop(), Some(0));
}

// ---------------------------------------------------------------- exactly once

/// kill -9 at random moments while a writer inserts: every event is in its stream once, in
/// per-key order.
#[tokio::test(flavor = "multi_thread")]
async fn kill9_under_a_writer_exactly_once() {
    let _up = REDIS_UP.read().await;
    let db = MariaDb::new("redis_kill").await;
    // Small batches: many commits for the kills to land in.
    let relay = start(&db, &format!("{EXTENDED}\nbatch_max_events = 100"));
    let events = suite::sequenced_events("Wallet", 10, 3_000, 50);
    let killer = suite::kill_at_random_moments(relay, 12);
    let (_, relay) = tokio::join!(
        suite::write_in_random_transactions(&db, &events, 12),
        killer
    );
    let mut relay = relay.unwrap();
    let got = read_expecting(
        &suite::topic(&db, "Wallet"),
        events.len(),
        Duration::from_secs(120),
    );
    assert_exactly_once_extended(&events, &got, &relay.log_text());
    relay.stop();
}

/// HA with a Redis Streams connector: two members of a `--group` (coordinated through the
/// test Kafka cluster) run it from one file; while a writer inserts, its owner is killed
/// (`kill -9`) twice and the other member takes over each time (a new fencing epoch, the
/// checkpoint written with the last batch). Reading the stream counts every event exactly
/// once, in per-aggregate order.
#[tokio::test(flavor = "multi_thread")]
async fn group_failover_exactly_once() {
    let _up = REDIS_UP.read().await;
    let db = MariaDb::new("redis_group").await;
    let (path, _) = write_config(
        &db,
        &format!("{EXTENDED}\nbatch_max_events = 100"),
        &redis_password(),
        "member.toml",
    );
    let (mut members, events) = group::failover_under_a_writer(&db, &path, 2).await;
    let got = read_expecting(
        &suite::topic(&db, group::AGGREGATE),
        events.len(),
        Duration::from_secs(120),
    );
    assert_exactly_once_extended(&events, &got, &group::logs(&members));
    for m in &mut members {
        m.stop();
    }
}

/// Redis stops for a few seconds while events stream: one WARN for the outage, then the
/// relay resumes from its checkpoint; every event once.
#[tokio::test(flavor = "multi_thread")]
async fn redis_restarted_mid_stream() {
    let _down = REDIS_UP.write().await;
    let db = Postgres::new("redis_outage").await;
    let mut relay = start(&db, EXTENDED);
    let events = suite::sequenced_events("Account", 5, 1_500, 20);
    let writer = suite::write_in_random_transactions(&db, &events, 8);
    let outage = async {
        tokio::time::sleep(Duration::from_millis(800)).await;
        tokio::task::spawn_blocking(|| {
            redis_ctl("stop");
            std::thread::sleep(Duration::from_secs(4));
            redis_ctl("start");
        })
        .await
        .unwrap();
    };
    tokio::join!(writer, outage);
    let got = read_expecting(
        &suite::topic(&db, "Account"),
        events.len(),
        Duration::from_secs(120),
    );
    let log = relay.log_text();
    assert_exactly_once_extended(&events, &got, &log);
    let warns = log
        .lines()
        .filter(|l| l.contains("WARN") && !l.contains("Redis persistence"))
        .count();
    assert!(
        (1..=2).contains(&warns),
        "one WARN for the outage (and at most one more naming the failure), got {warns}:\n{log}"
    );
    assert_eq!(relay.stop(), Some(0));
}

/// A second instance of the connector fences the first: the first stops with the fenced
/// error, and every event is in the stream once.
#[tokio::test(flavor = "multi_thread")]
async fn second_instance_fences_the_first() {
    let _up = REDIS_UP.read().await;
    let db = MariaDb::new("redis_fence").await;
    let (pa, porta) = write_config(&db, EXTENDED, &redis_password(), "a.toml");
    let mut a = Relay::start(pa, porta);
    let first = suite::sequenced_range("Order", 3, 0..10, 0);
    db.insert(&first, false).await;
    let stream = suite::topic(&db, "Order");
    assert_eq!(
        read_expecting(&stream, 10, Duration::from_secs(60)).len(),
        10
    );
    let (pb, portb) = write_config(&db, EXTENDED, &redis_password(), "b.toml");
    let mut b = Relay::start(pb, portb);
    let second = suite::sequenced_range("Order", 3, 10..20, 0);
    db.insert(&second, false).await;
    let log_a = expect_failed_exit(&mut a, Duration::from_secs(60));
    assert!(
        log_a.contains("fenced: another instance runs connector"),
        "it says it was fenced; log:\n{log_a}"
    );
    let all: Vec<OutboxEvent> = first.into_iter().chain(second).collect();
    let got = read_expecting(&stream, all.len(), Duration::from_secs(60));
    assert_exactly_once_extended(&all, &got, &b.log_text());
    assert_eq!(b.stop(), Some(0));
}

// ---------------------------------------------------------------- refusals

/// A wrong password: a definite error saying what to check, exit non-zero.
#[tokio::test(flavor = "multi_thread")]
async fn refused_password_stops_with_a_clear_error() {
    let _up = REDIS_UP.read().await;
    let db = Postgres::new("redis_badpw").await;
    let (path, port) = write_config(&db, "", "not-the-password", "connector.toml");
    let log = run_expecting_failure(&path, port, Duration::from_secs(30));
    assert!(
        log.contains("Redis refused the login")
            && log.contains("check the sink's user and password"),
        "the error says what to check; log:\n{log}"
    );
    assert!(
        !log.contains("not-the-password"),
        "the password is never logged"
    );
}

/// `rediss://` pointed at the test Redis's plaintext port: the server never answers the TLS
/// handshake (it waits for the end of an inline command), which alone looks like an outage;
/// the relay must not retry that for ever but stop, saying the port does not speak TLS and
/// what to use instead.
#[tokio::test(flavor = "multi_thread")]
async fn tls_to_a_plaintext_port_stops_with_a_clear_error() {
    let _up = REDIS_UP.read().await;
    let db = Postgres::new("redis_tls_plain").await;
    let (path, port) = write_config(&db, "", &redis_password(), "connector.toml");
    let plain = redis_url();
    assert!(
        plain.starts_with("redis://"),
        "the test Redis is plaintext: {plain}"
    );
    let cfg = std::fs::read_to_string(&path).unwrap();
    std::fs::write(
        &path,
        cfg.replace(&plain, &plain.replacen("redis://", "rediss://", 1)),
    )
    .unwrap();
    let log = run_expecting_failure(&path, port, Duration::from_secs(30));
    assert!(
        log.contains("did not answer the TLS handshake")
            && log.contains("use redis:// for a plaintext port")
            && log.contains("tls-port"),
        "the error says the port is plaintext and what to do; log:\n{log}"
    );
    assert!(
        !log.contains("not reachable"),
        "not reported as an outage; log:\n{log}"
    );
    assert!(
        !log.contains(&redis_password()),
        "the password is never logged"
    );
}

/// A server whose `default` user is off would drop every committed batch when it replays
/// its append-only file (redis/redis#14541): the exactly-once sink refuses it, saying why
/// and what to change, before reading anything; `allow_default_user_off = true` runs.
#[tokio::test(flavor = "multi_thread")]
async fn a_server_with_the_default_user_off_is_refused() {
    // Written (exclusive): the other tests' relays reconnect meanwhile and would refuse too.
    let _up = REDIS_UP.write().await;
    let db = Postgres::new("redis_default_off").await;
    /// Turns `default` back on however the test ends.
    struct Restore;
    impl Drop for Restore {
        fn drop(&mut self) {
            let _: redis::RedisResult<()> = redis::cmd("ACL")
                .arg("SETUSER")
                .arg("default")
                .arg("on")
                .query(&mut redis());
        }
    }
    let _restore = Restore;
    let _: () = redis::cmd("ACL")
        .arg("SETUSER")
        .arg("default")
        .arg("off")
        .query(&mut redis())
        .unwrap();
    let (path, port) = write_config(&db, "", &redis_password(), "connector.toml");
    let log = run_expecting_failure(&path, port, Duration::from_secs(30));
    assert!(
        log.contains("`default` user is off") && log.contains("allow_default_user_off"),
        "the error says why and what to change; log:\n{log}"
    );
    let (path, port) = write_config(
        &db,
        "allow_default_user_off = true",
        &redis_password(),
        "allowed.toml",
    );
    let mut relay = Relay::start(path, port);
    let events = suite::sequenced_range("Order", 1, 0..3, 0);
    db.insert(&events, false).await;
    let got = read_expecting(&suite::topic(&db, "Order"), 3, Duration::from_secs(60));
    assert_eq!(got.len(), 3, "{}", relay.log_text());
    assert_eq!(relay.stop(), Some(0));
}

/// A stream key that holds another type: a definite error naming it; nothing of the batch
/// is written and the checkpoint does not pass it (once the key is removed, a restart
/// delivers the events).
#[tokio::test(flavor = "multi_thread")]
async fn stream_key_of_the_wrong_type() {
    let _up = REDIS_UP.read().await;
    let db = MariaDb::new("redis_wrongtype").await;
    let stream = suite::topic(&db, "Order");
    let _: () = redis::cmd("RPUSH")
        .arg(&stream)
        .arg("not a stream")
        .query(&mut redis())
        .unwrap();
    let mut relay = start(&db, EXTENDED);
    let ok = suite::sequenced_range("Invoice", 1, 0..3, 0);
    db.insert(&ok, false).await;
    let invoices = suite::topic(&db, "Invoice");
    assert_eq!(
        read_expecting(&invoices, 3, Duration::from_secs(60)).len(),
        3
    );
    let orders = suite::sequenced_range("Order", 2, 0..5, 0);
    db.insert(&orders, false).await;
    let log = expect_failed_exit(&mut relay, Duration::from_secs(60));
    assert!(
        log.contains(&format!("the key {stream} holds a list, not a stream")),
        "the error names the key; log:\n{log}"
    );
    let _: () = redis::cmd("DEL").arg(&stream).query(&mut redis()).unwrap();
    relay.spawn();
    relay.wait_ready(Duration::from_secs(60));
    let got = read_expecting(&stream, orders.len(), Duration::from_secs(60));
    assert_exactly_once_extended(&orders, &got, &relay.log_text());
    // The invoices before it were committed once, and not again.
    assert_eq!(read_stream(&invoices).len(), 3);
    assert_eq!(relay.stop(), Some(0));
}

// ---------------------------------------------------------------- at-least-once

/// With a file checkpoint the sink appends record by record (at-least-once): every event
/// arrives, and a restart resumes from the file.
#[tokio::test(flavor = "multi_thread")]
async fn file_checkpoint_at_least_once() {
    let _up = REDIS_UP.read().await;
    let db = MariaDb::new("redis_file").await;
    let file = test_dir(db.name()).join("checkpoint.json");
    let extra = format!(
        "{EXTENDED}\n\n[connectors.checkpoint]\nstore = \"file\"\npath = \"{}\"",
        file.display()
    );
    let mut relay = start(&db, &extra);
    let first = suite::sequenced_range("Order", 3, 0..30, 0);
    db.insert(&first, false).await;
    let stream = suite::topic(&db, "Order");
    assert_eq!(
        read_expecting(&stream, 30, Duration::from_secs(60)).len(),
        30
    );
    assert_eq!(relay.stop(), Some(0));
    assert!(file.exists(), "the file store holds the checkpoint");
    let second = suite::sequenced_range("Order", 3, 30..40, 0);
    db.insert(&second, false).await;
    relay.spawn();
    relay.wait_ready(Duration::from_secs(60));
    let all: Vec<OutboxEvent> = first.into_iter().chain(second).collect();
    let got = read_expecting(&stream, all.len(), Duration::from_secs(60));
    // A clean stop checkpoints everything: nothing is repeated here either.
    assert_exactly_once_extended(&all, &got, &relay.log_text());
    assert_eq!(relay.stop(), Some(0));
}

// ---------------------------------------------------------------- TLS

/// Starts a `redis-server` of the test's own (the Debian package) on the configuration
/// `conf` (written to `dir`/redis.conf; it must daemonize with `pidfile <dir>/redis.pid`);
/// returns its pid once the pid file holds it.
fn redis_server(dir: &std::path::Path, conf: &str) -> u32 {
    let pid_file = dir.join("redis.pid");
    std::fs::write(dir.join("redis.conf"), conf).unwrap();
    let _ = std::fs::remove_file(&pid_file);
    let ok = std::process::Command::new("redis-server")
        .arg(dir.join("redis.conf"))
        .status()
        .expect("run redis-server (the Debian package redis-server)")
        .success();
    assert!(ok, "redis-server did not start; see {}", dir.display());
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(pid) = std::fs::read_to_string(&pid_file)
            .ok()
            .and_then(|p| p.trim().parse().ok())
        {
            return pid;
        }
        assert!(
            Instant::now() < deadline,
            "no pid file from redis-server in {}",
            dir.display()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A Redis of the test's own that takes only TLS with a client certificate
/// (`OUTBOXD_TEST_TLS_DIR`'s CA and `localhost` server certificate), on a free port;
/// stopped when dropped.
struct TlsRedis {
    port: u16,
    pid: u32,
}

impl TlsRedis {
    fn start(name: &str) -> TlsRedis {
        let dir = test_dir(name).join("redis-tls");
        std::fs::create_dir_all(&dir).unwrap();
        let port = free_port();
        let tls = common::tls::dir();
        let conf = format!(
            "port 0\ntls-port {port}\nbind 127.0.0.1\ntls-cert-file {t}/server.pem\n\
             tls-key-file {t}/server.key\ntls-ca-cert-file {t}/ca.pem\ntls-auth-clients yes\n\
             save \"\"\nappendonly no\ndir {d}\ndaemonize yes\npidfile {d}/redis.pid\n\
             logfile {d}/redis.log\nuser default off\nuser outboxd on >tls-secret ~* &* +@all\n",
            t = tls.display(),
            d = dir.display()
        );
        let pid = redis_server(&dir, &conf);
        std::thread::sleep(Duration::from_millis(300));
        TlsRedis { port, pid }
    }

    fn connection(&self) -> redis::Connection {
        use redis::IntoConnectionInfo;
        let _ = rustls::crypto::ring::default_provider().install_default();
        let read = |f: &str| std::fs::read(common::tls::dir().join(f)).unwrap();
        let info = format!("rediss://localhost:{}", self.port)
            .into_connection_info()
            .unwrap();
        let login = info
            .redis_settings()
            .clone()
            .set_username("outboxd")
            .set_password("tls-secret");
        redis::Client::build_with_tls(
            info.set_redis_settings(login),
            redis::TlsCertificates {
                client_tls: Some(redis::ClientTlsConfig {
                    client_cert: read("client.pem"),
                    client_key: read("client.key"),
                }),
                root_cert: Some(read("ca.pem")),
            },
        )
        .unwrap()
        .get_connection()
        .unwrap()
    }
}

impl Drop for TlsRedis {
    fn drop(&mut self) {
        let _ = std::process::Command::new("kill")
            .arg(self.pid.to_string())
            .status();
    }
}

/// `rediss://` with `tls_ca` and a client certificate: events arrive; a CA that did not sign
/// the server's certificate is a definite error saying what to check.
#[tokio::test(flavor = "multi_thread")]
async fn tls_with_a_client_certificate() {
    let db = Postgres::new("redis_tls").await;
    let server = TlsRedis::start(db.name());
    let tls = common::tls::dir();
    let write = |ca: &str, file: &str| {
        suite::write_sink_config(
            &db,
            &format!(
                r#"[connectors.sink]
type = "redis"
url = "rediss://localhost:{redis}"
user = "outboxd"
password = "tls-secret"
tls_ca = "{t}/{ca}"
tls_cert = "{t}/client.pem"
tls_key = "{t}/client.key"
message_format = "extended""#,
                redis = server.port,
                t = tls.display(),
            ),
            file,
        )
    };
    let (path, port) = write("ca.pem", "tls.toml");
    let mut relay = Relay::start(path, port);
    let events = suite::sequenced_range("Order", 2, 0..5, 0);
    db.insert(&events, false).await;
    let stream = suite::topic(&db, "Order");
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut conn = server.connection();
    loop {
        let n: usize = redis::cmd("XLEN").arg(&stream).query(&mut conn).unwrap();
        if n >= events.len() {
            break;
        }
        assert!(Instant::now() < deadline, "{}", relay.log_text());
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(relay.stop(), Some(0));
    let (path, port) = write("other-ca.pem", "other.toml");
    let log = run_expecting_failure(&path, port, Duration::from_secs(30));
    assert!(
        log.contains("the TLS handshake with Redis failed") && log.contains("check tls_ca"),
        "the error says what to check; log:\n{log}"
    );
}

// ---------------------------------------------------------------- check

/// `outboxd check` on a connector with a Redis sink: the login and the persistence settings
/// (the test Redis runs with appendonly yes, appendfsync always), no Kafka check.
#[tokio::test(flavor = "multi_thread")]
async fn check_reports_login_and_persistence() {
    let _up = REDIS_UP.read().await;
    let db = Postgres::new("redis_check").await;
    let (path, _) = write_config(&db, "", &redis_password(), "connector.toml");
    let (code, out, err) = common::relay::run_cli(&["check", "--config", path.to_str().unwrap()]);
    assert!(
        out.contains("redis: ") && out.contains(&format!("logged in as {}", redis_user())),
        "check names the login:\n{out}\n{err}"
    );
    assert!(
        out.contains("redis persistence: appendonly yes, appendfsync always"),
        "check prints the persistence settings:\n{out}\n{err}"
    );
    assert!(
        !out.contains("kafka"),
        "no Kafka check for a Redis sink:\n{out}"
    );
    assert_eq!(code, 0, "{out}\n{err}");
}

// ---------------------------------------------------------------- WAIT

/// A replica of the test Redis, started by the test on a free port; stopped when dropped.
struct Replica {
    pid: u32,
    dir: PathBuf,
}

impl Replica {
    fn start(name: &str) -> Replica {
        use redis::IntoConnectionInfo;
        let dir = test_dir(name).join("replica");
        std::fs::create_dir_all(&dir).unwrap();
        let info = redis_url().into_connection_info().unwrap();
        let (host, port) = match info.addr() {
            redis::ConnectionAddr::Tcp(h, p) => (h.clone(), *p),
            other => panic!("a TCP Redis URL, not {other:?}"),
        };
        let conf = format!(
            "port {p}\nbind 127.0.0.1\nreplicaof {host} {port}\nmasteruser {u}\nmasterauth {pw}\n\
             save \"\"\nappendonly no\ndir {d}\ndaemonize yes\npidfile {d}/redis.pid\n\
             logfile {d}/redis.log\n",
            p = free_port(),
            u = redis_user(),
            pw = redis_password(),
            d = dir.display()
        );
        let pid = redis_server(&dir, &conf);
        // Attached once a WAIT for one replica answers 1.
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let n: i64 = redis::cmd("WAIT")
                .arg(1)
                .arg(500)
                .query(&mut redis())
                .unwrap();
            if n >= 1 {
                break;
            }
            assert!(Instant::now() < deadline, "the replica did not attach");
        }
        Replica { pid, dir }
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = std::process::Command::new("kill")
            .arg(self.pid.to_string())
            .status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::path::Path::new(&format!("/proc/{}", self.pid)).exists()
            && Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = &self.dir;
    }
}

/// `wait_replicas = 1`: with a replica attached every commit is acknowledged; with it gone
/// the commit is written on the primary but reported as a transient failure, and once the
/// replica is back every event is in the stream exactly once.
#[tokio::test(flavor = "multi_thread")]
async fn wait_replicas_holds_until_a_replica_acknowledges() {
    // Exclusive: the test's replica must be the only one coming and going.
    let _down = REDIS_UP.write().await;
    let db = MariaDb::new("redis_wait").await;
    let replica = Replica::start(db.name());
    let mut relay = start(
        &db,
        &format!("{EXTENDED}\nwait_replicas = 1\nwait_timeout = 300"),
    );
    let first = suite::sequenced_range("Order", 3, 0..10, 0);
    db.insert(&first, false).await;
    let stream = suite::topic(&db, "Order");
    assert_eq!(
        read_expecting(&stream, 10, Duration::from_secs(60)).len(),
        10
    );
    drop(replica);
    let second = suite::sequenced_range("Order", 3, 10..20, 0);
    db.insert(&second, false).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    while !relay
        .log_text()
        .contains("replicas asked for (wait_replicas)")
    {
        assert!(
            Instant::now() < deadline,
            "no WAIT failure reported:\n{}",
            relay.log_text()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let replica = Replica::start(db.name());
    let third = suite::sequenced_range("Order", 3, 20..30, 0);
    db.insert(&third, false).await;
    let all: Vec<OutboxEvent> = first.into_iter().chain(second).chain(third).collect();
    let got = read_expecting(&stream, all.len(), Duration::from_secs(60));
    assert_exactly_once_extended(&all, &got, &relay.log_text());
    assert_eq!(relay.stop(), Some(0));
    drop(replica);
}

// ---------------------------------------------------------------- Debezium Server

/// A Debezium Server `application.properties` (PostgreSQL outbox, EventRouter, Redis sink,
/// `simplestring` formats) runs as is: its events reach the streams in Debezium Server's
/// compact layout (key -> value), the password comes from the environment variable named
/// after its key, and a restart resumes where the checkpoint is.
#[tokio::test(flavor = "multi_thread")]
async fn debezium_server_properties_run_as_is() {
    let _up = REDIS_UP.read().await;
    let db = Postgres::new("redis_dbzserver").await;
    let (host, port, user, password) = &db.relay;
    let address = redis_url()
        .trim_start_matches("redis://")
        .trim_end_matches('/')
        .to_string();
    let props = format!(
        "# Debezium Server: PostgreSQL outbox to Redis Streams\n\
         debezium.sink.type=redis\n\
         debezium.sink.redis.address={address}\n\
         debezium.sink.redis.user={ruser}\n\
         debezium.sink.redis.password=${{TEST_REDIS_PASSWORD}}\n\
         debezium.sink.redis.batch.size=500\n\
         debezium.source.connector.class=io.debezium.connector.postgresql.PostgresConnector\n\
         debezium.source.offset.storage=io.debezium.storage.redis.offset.RedisOffsetBackingStore\n\
         debezium.source.database.hostname={host}\n\
         debezium.source.database.port={port}\n\
         debezium.source.database.user={user}\n\
         debezium.source.database.password=overridden-by-the-environment\n\
         debezium.source.database.dbname={name}\n\
         debezium.source.topic.prefix={name}\n\
         debezium.source.plugin.name=pgoutput\n\
         debezium.source.slot.name={slot}\n\
         debezium.source.publication.name={publication}\n\
         debezium.source.publication.autocreate.mode={autocreate}\n\
         debezium.source.table.include.list={table}\n\
         debezium.source.snapshot.mode=never\n\
         debezium.transforms=outbox\n\
         debezium.transforms.outbox.type=io.debezium.transforms.outbox.EventRouter\n\
         debezium.transforms.outbox.route.topic.replacement={name}.${{routedByValue}}\n\
         debezium.transforms.outbox.route.by.field=aggregate_type\n\
         debezium.transforms.outbox.table.field.event.key=aggregate_id\n\
         debezium.transforms.outbox.table.field.event.type=event_type\n\
         debezium.format.key=simplestring\n\
         debezium.format.value=simplestring\n\
         quarkus.log.level=INFO\n",
        ruser = redis_user(),
        name = db.db,
        slot = db.slot,
        publication = db.publication,
        autocreate = db.autocreate,
        table = db.outbox_table(),
    );
    let dir = test_dir(&db.db);
    let path = dir.join("application.properties");
    std::fs::write(&path, props).unwrap();
    let metrics = free_port();
    let listen = format!("127.0.0.1:{metrics}");
    let env = [
        ("TEST_REDIS_PASSWORD", redis_password()),
        ("DEBEZIUM_SOURCE_DATABASE_PASSWORD", password.clone()),
    ];
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let mut relay = Relay::launch_with_env(
        &[path.to_str().unwrap(), "--metrics-listen", &listen],
        metrics,
        dir.join("application.log"),
        &env,
    );
    relay.wait_ready(Duration::from_secs(60));
    let events = suite::sequenced_range("Order", 2, 0..6, 0);
    db.insert(&events, false).await;
    let stream = format!("{}.Order", db.db);
    let got = read_expecting(&stream, events.len(), Duration::from_secs(60));
    let want: Vec<Vec<(String, String)>> = events
        .iter()
        .map(|e| vec![(e.aggregate_id.clone(), e.payload.clone().unwrap())])
        .collect();
    let got_fields: Vec<Vec<(String, String)>> = got.into_iter().map(|e| e.fields).collect();
    assert_eq!(got_fields, want, "{}", relay.log_text());
    assert_eq!(relay.stop(), Some(0));
    let log = relay.log_text();
    assert!(
        !log.contains(&redis_password()) && !log.contains(password.as_str()),
        "a password in the log:\n{log}"
    );
    // Written while it is down: delivered once after the restart.
    let more = suite::sequenced_range("Order", 2, 6..10, 0);
    db.insert(&more, false).await;
    relay.spawn();
    relay.wait_ready(Duration::from_secs(60));
    let got = read_expecting(&stream, events.len() + more.len(), Duration::from_secs(60));
    assert_eq!(got.len(), events.len() + more.len(), "{}", relay.log_text());
    assert_eq!(relay.stop(), Some(0));
}
