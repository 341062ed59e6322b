//! The RabbitMQ sink against a real broker (issue 29): both sources to a queue bound to the
//! exchange (routing key, message_id, correlation_id, headers, body), a restart resumes,
//! kill -9 under a writer (at-least-once: every id present, duplicates counted), the broker
//! restarted mid-stream (one WARN, nothing lost), a refused password, an unroutable
//! message (refused, nothing checkpointed past it; dead-lettered under
//! `errors.tolerance = "all"`), a queue full with `x-overflow = reject-publish`, a missing
//! exchange.
//!
//! The broker: `OUTBOXD_RABBITMQ_URL` (default `amqp://127.0.0.1:35672/%2f`, the port
//! `scripts/services.sh` runs RabbitMQ on), `OUTBOXD_RABBITMQ_USER` / `_PASSWORD`. The
//! broker is stopped, started and restarted with `OUTBOXD_RABBITMQ_SERVICES` (default `bash
//! scripts/services.sh`, from the project directory) `stop|start|restart rabbitmq`. Queues and exchanges are declared here, through
//! lapin, with names unique to each test.

mod common;

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use common::edges::expect_failed_exit;
use common::mariadb::MariaDb;
use common::postgres::Postgres;
use common::relay::Relay;
use common::suite::{self, sequenced_events, SourceDb};
use common::{unique, OutboxEvent};
use futures_util::StreamExt;
use lapin::options::{
    BasicAckOptions, BasicConsumeOptions, ExchangeDeclareOptions, QueueBindOptions,
    QueueDeclareOptions, QueuePurgeOptions,
};
use lapin::types::{AMQPValue, FieldTable};
use lapin::{Channel, Connection, ConnectionProperties, ExchangeKind};

/// Tests that stop the broker hold it exclusively; the others share it (tests of one file
/// run in parallel).
static BROKER: tokio::sync::RwLock<()> = tokio::sync::RwLock::const_new(());

fn rabbit_url() -> String {
    std::env::var("OUTBOXD_RABBITMQ_URL").unwrap_or_else(|_| "amqp://127.0.0.1:35672/%2f".into())
}

fn rabbit_user() -> String {
    std::env::var("OUTBOXD_RABBITMQ_USER").unwrap_or_else(|_| "outboxd".into())
}

fn rabbit_password() -> String {
    std::env::var("OUTBOXD_RABBITMQ_PASSWORD").unwrap_or_else(|_| "outboxd-rabbit-secret".into())
}

/// The URL with the test user's login, for the test's own connections.
fn login_url() -> String {
    let url = rabbit_url();
    let (scheme, rest) = url.split_once("://").unwrap();
    format!("{scheme}://{}:{}@{rest}", rabbit_user(), rabbit_password())
}

/// The test's own channel to the broker (declares, binds, consumes).
async fn channel() -> (Connection, Channel) {
    let conn = Connection::connect(&login_url(), ConnectionProperties::default())
        .await
        .expect("connect to RabbitMQ: run scripts/services.sh up (or set OUTBOXD_RABBITMQ_URL)");
    let ch = conn.create_channel().await.unwrap();
    (conn, ch)
}

/// Declares durable topic exchange `exchange`.
async fn declare_exchange(ch: &Channel, exchange: &str) {
    ch.exchange_declare(
        exchange.into(),
        ExchangeKind::Topic,
        ExchangeDeclareOptions {
            durable: true,
            ..Default::default()
        },
        FieldTable::default(),
    )
    .await
    .unwrap();
}

/// Declares queue `queue` (with `args`) bound to `exchange` with `key`.
async fn bound_queue(ch: &Channel, queue: &str, exchange: &str, key: &str, args: FieldTable) {
    ch.queue_declare(
        queue.into(),
        QueueDeclareOptions {
            durable: true,
            ..Default::default()
        },
        args,
    )
    .await
    .unwrap();
    ch.queue_bind(
        queue.into(),
        exchange.into(),
        key.into(),
        QueueBindOptions::default(),
        FieldTable::default(),
    )
    .await
    .unwrap();
}

/// Runs `<OUTBOXD_RABBITMQ_SERVICES> <action> rabbitmq` (default `bash
/// scripts/services.sh`, from the project directory): `stop`, `start` or `restart` the broker.
fn broker(action: &str) {
    let services = std::env::var("OUTBOXD_RABBITMQ_SERVICES")
        .unwrap_or_else(|_| "bash scripts/services.sh".into());
    let cmd = format!("{services} {action} rabbitmq >/dev/null");
    let status = std::process::Command::new("sh")
        .arg("-c")
        .arg(&cmd)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .status()
        .expect("run the services script");
    assert!(status.success(), "{cmd}: {status}");
}

/// One consumed message.
#[derive(Debug, Clone)]
struct Msg {
    routing_key: String,
    message_id: Option<String>,
    correlation_id: Option<String>,
    delivery_mode: Option<u8>,
    headers: HashMap<String, AMQPValue>,
    body: Vec<u8>,
}

impl Msg {
    /// Header `name` as text (a long string), `None` when absent or void.
    fn header(&self, name: &str) -> Option<String> {
        match self.headers.get(name)? {
            AMQPValue::LongString(s) => Some(String::from_utf8_lossy(s.as_bytes()).into_owned()),
            _ => None,
        }
    }
}

/// Reads `queue` until `want` distinct messages (by `message_id`) arrived and then nothing
/// for `quiet`, or `timeout`.
/// A test's own topic exchange with a queue of its own bound to it by `binding` (queue
/// arguments `args`): the connection (keep it: closing it closes the channel), the channel,
/// the exchange's and the queue's names.
async fn exchange_and_queue(
    binding: &str,
    args: FieldTable,
) -> (Connection, Channel, String, String) {
    let (conn, ch) = channel().await;
    let exchange = unique("rabbit29_x");
    let queue = unique("rabbit29_q");
    declare_exchange(&ch, &exchange).await;
    bound_queue(&ch, &queue, &exchange, binding, args).await;
    (conn, ch, exchange, queue)
}

/// Binds a new queue to `exchange` by `binding`, inserts one event into `db` and asserts
/// that it arrives there, once, with its id as `message_id` (`relay`'s log otherwise);
/// returns the message.
async fn one_event_arrives<S: SourceDb>(
    db: &S,
    ch: &Channel,
    (exchange, binding): (&str, &str),
    relay: &Relay,
) -> Msg {
    let queue = unique("rabbit29_q");
    bound_queue(ch, &queue, exchange, binding, FieldTable::default()).await;
    let e = OutboxEvent::new("Order", "o-1", "Created", Some("{}"));
    db.insert(std::slice::from_ref(&e), false).await;
    let got = consume(
        &queue,
        1,
        Duration::from_secs(60),
        Duration::from_millis(500),
    )
    .await;
    assert_eq!(got.len(), 1, "log:\n{}", relay.log_text());
    assert_eq!(got[0].message_id.as_deref(), Some(e.id.as_str()));
    got.into_iter().next().unwrap()
}

async fn consume(queue: &str, want: usize, timeout: Duration, quiet: Duration) -> Vec<Msg> {
    let (conn, ch) = channel().await;
    let mut consumer = ch
        .basic_consume(
            queue.into(),
            unique("rabbit29_c").as_str().into(),
            BasicConsumeOptions::default(),
            FieldTable::default(),
        )
        .await
        .unwrap();
    let deadline = Instant::now() + timeout;
    let mut got = Vec::new();
    let mut distinct = HashSet::new();
    loop {
        let wait = if distinct.len() >= want {
            quiet
        } else {
            deadline.saturating_duration_since(Instant::now())
        };
        let Ok(Some(Ok(d))) = tokio::time::timeout(wait, consumer.next()).await else {
            break;
        };
        let p = &d.properties;
        distinct.insert(p.message_id().as_ref().map(|s| s.to_string()));
        got.push(Msg {
            routing_key: d.routing_key.to_string(),
            message_id: p.message_id().as_ref().map(|s| s.to_string()),
            correlation_id: p.correlation_id().as_ref().map(|s| s.to_string()),
            delivery_mode: *p.delivery_mode(),
            headers: p
                .headers()
                .as_ref()
                .map(|h| {
                    h.inner()
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.clone()))
                        .collect()
                })
                .unwrap_or_default(),
            body: d.data.clone(),
        });
        d.ack(BasicAckOptions::default()).await.unwrap();
        if Instant::now() >= deadline {
            break;
        }
    }
    let _ = conn.close(200, "done".into()).await;
    got
}

/// Writes the connector config of `db` publishing to `exchange` (`sink_extra` adds lines to
/// `[connectors.sink]`, `tail` tables after the checkpoint); returns (path, metrics port).
fn write_config<S: SourceDb>(
    db: &S,
    exchange: &str,
    sink_extra: &str,
    tail: &str,
) -> (PathBuf, u16) {
    suite::write_sink_config(
        db,
        &format!(
            r#"[connectors.sink]
type = "rabbitmq"
url = "{url}"
user = "{user}"
password_env = "OUTBOXD_RABBITMQ_TEST_PASSWORD"
exchange = "{exchange}"
{sink_extra}

[connectors.checkpoint]
{checkpoint}
{tail}"#,
            url = rabbit_url(),
            user = rabbit_user(),
            checkpoint = suite::file_checkpoint(db),
        ),
        "connector.toml",
    )
}

/// Launches the relay on `config` with the sink password in its environment.
fn launch(config: PathBuf, port: u16, password: &str) -> Relay {
    let log = config.with_extension("log");
    let _ = std::fs::remove_file(&log);
    Relay::launch_with_env(
        &[config.to_str().unwrap()],
        port,
        log,
        &[("OUTBOXD_RABBITMQ_TEST_PASSWORD", password)],
    )
}

fn start(config: PathBuf, port: u16) -> Relay {
    let mut r = launch(config, port, &rabbit_password());
    r.wait_ready(Duration::from_secs(60));
    r
}

/// Asserts every event of `events` arrived (at least once) and returns how many arrived
/// more than once.
fn assert_all_present(events: &[OutboxEvent], got: &[Msg], log: &str) -> usize {
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for m in got {
        *seen
            .entry(m.message_id.as_deref().unwrap_or(""))
            .or_default() += 1;
    }
    let missing: Vec<&str> = events
        .iter()
        .map(|e| e.id.as_str())
        .filter(|id| !seen.contains_key(id))
        .collect();
    assert!(
        missing.is_empty(),
        "{} of {} events lost, e.g. {:?}; log:\n{log}",
        missing.len(),
        events.len(),
        &missing[..missing.len().min(5)]
    );
    seen.values().map(|n| n - 1).sum()
}

/// Both sources: messages carry the routing key, ids, key, headers, body, persistence; a
/// stopped relay resumes where it stopped.
async fn delivers_and_resumes<S: SourceDb>(db: &S) {
    let key = format!("{}.Order", db.name());
    let (_conn, _ch, exchange, queue) = exchange_and_queue(&key, FieldTable::default()).await;
    let (path, port) = write_config(db, &exchange, "", "");
    let mut relay = start(path, port);
    let first = vec![
        OutboxEvent::new("Order", "order-1", "Created", Some(r#"{"n":1}"#)),
        OutboxEvent::new(
            "Order",
            "order-2",
            "Created",
            Some(r#"{"n":2,"s":"zażółć"}"#),
        ),
        OutboxEvent::new("Order", "order-1", "Paid", Some(r#"{"n":3}"#)),
    ];
    db.insert(&first, false).await;
    let got = consume(
        &queue,
        3,
        Duration::from_secs(60),
        Duration::from_millis(500),
    )
    .await;
    assert_eq!(got.len(), 3, "log:\n{}", relay.log_text());
    for (m, e) in got.iter().zip(&first) {
        assert_eq!(m.routing_key, key);
        assert_eq!(m.message_id.as_deref(), Some(e.id.as_str()));
        assert_eq!(m.correlation_id.as_deref(), Some(e.aggregate_id.as_str()));
        assert_eq!(m.header("id").as_deref(), Some(e.id.as_str()));
        assert_eq!(
            m.header("eventType").as_deref(),
            Some(e.event_type.as_str())
        );
        assert_eq!(m.delivery_mode, Some(2), "persistent");
        let body: serde_json::Value = serde_json::from_slice(&m.body).unwrap();
        let want: serde_json::Value = serde_json::from_str(e.payload.as_deref().unwrap()).unwrap();
        assert_eq!(body, want, "the body is the payload");
    }
    assert_eq!(
        relay.stop(),
        Some(0),
        "clean stop; log:\n{}",
        relay.log_text()
    );
    let later = sequenced_events("Order", 5, 50, 10);
    db.insert(&later, false).await;
    relay.spawn();
    relay.wait_ready(Duration::from_secs(60));
    let got = consume(&queue, 50, Duration::from_secs(60), Duration::from_secs(2)).await;
    let dups = assert_all_present(&later, &got, &relay.log_text());
    let first_ids: HashSet<&str> = first.iter().map(|e| e.id.as_str()).collect();
    assert!(
        got.iter()
            .all(|m| !first_ids.contains(m.message_id.as_deref().unwrap_or(""))),
        "a clean stop checkpoints what was confirmed: nothing before it again"
    );
    assert_eq!(dups, 0, "a clean restart sends nothing twice");
    relay.stop();
}

#[tokio::test(flavor = "multi_thread")]
async fn mariadb_to_a_bound_queue_and_resume() {
    let _broker = BROKER.read().await;
    let db = MariaDb::new("rabbit29_m").await;
    delivers_and_resumes(&db).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn postgres_to_a_bound_queue_and_resume() {
    let _broker = BROKER.read().await;
    let db = Postgres::new("rabbit29_p").await;
    delivers_and_resumes(&db).await;
}

/// kill -9 twice while a writer inserts: every id arrives (at-least-once); the duplicates
/// are counted and printed.
#[tokio::test(flavor = "multi_thread")]
async fn kill_9_under_a_writer_loses_nothing() {
    let _broker = BROKER.read().await;
    let db = MariaDb::new("rabbit29_k").await;
    let (_conn, _ch, exchange, queue) =
        exchange_and_queue(&format!("{}.#", db.name()), FieldTable::default()).await;
    let (path, port) = write_config(&db, &exchange, "", "");
    let mut relay = start(path, port);
    let events = sequenced_events("Ledger", 20, 3_000, 100);
    for (i, chunk) in events.chunks(10).enumerate() {
        db.insert(chunk, false).await;
        if i == 80 || i == 200 {
            relay.crash_and_restart();
        }
    }
    let got = consume(
        &queue,
        events.len(),
        Duration::from_secs(120),
        Duration::from_secs(3),
    )
    .await;
    let dups = assert_all_present(&events, &got, &relay.log_text());
    println!(
        "kill -9 x2 under a writer: {} events, {} messages, {dups} duplicates",
        events.len(),
        got.len()
    );
    // Per aggregate, first deliveries keep the commit order.
    let mut seen = HashSet::new();
    let mut last: HashMap<String, i64> = HashMap::new();
    for m in &got {
        if !seen.insert(m.message_id.clone()) {
            continue;
        }
        let v: serde_json::Value = serde_json::from_slice(&m.body).unwrap();
        let seq = v["seq"].as_i64().unwrap();
        let agg = m.correlation_id.clone().unwrap();
        if let Some(prev) = last.insert(agg.clone(), seq) {
            assert!(prev < seq, "{agg}: {seq} after {prev}");
        }
    }
    relay.stop();
}

/// The broker restarted while a writer inserts: the relay waits for it with one WARN, then
/// delivers everything.
#[tokio::test(flavor = "multi_thread")]
async fn broker_restart_mid_stream_loses_nothing() {
    let _broker = BROKER.write().await;
    let db = MariaDb::new("rabbit29_r").await;
    let (conn, _ch, exchange, queue) =
        exchange_and_queue(&format!("{}.#", db.name()), FieldTable::default()).await;
    let _ = conn.close(200, "set up".into()).await;
    let (path, port) = write_config(&db, &exchange, "", "");
    let mut relay = start(path, port);
    let events = sequenced_events("Ledger", 10, 600, 50);
    let restart = std::thread::spawn(|| {
        std::thread::sleep(Duration::from_secs(2));
        broker("restart");
    });
    for chunk in events.chunks(5) {
        db.insert(chunk, false).await;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    restart.join().unwrap();
    let got = consume(
        &queue,
        events.len(),
        Duration::from_secs(120),
        Duration::from_secs(3),
    )
    .await;
    let log = relay.log_text();
    let dups = assert_all_present(&events, &got, &log);
    println!("broker restart: {} events, {dups} duplicates", events.len());
    let warns: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("WARN") && l.contains("RabbitMQ"))
        .collect();
    assert_eq!(
        warns.len(),
        1,
        "one WARN per outage: {warns:#?}\nlog:\n{log}"
    );
    assert!(
        log.contains("RabbitMQ is reachable again"),
        "one INFO when it is back; log:\n{log}"
    );
    relay.stop();
}

/// A refused password stops the relay with an error naming the user, not the password.
#[tokio::test(flavor = "multi_thread")]
async fn a_refused_password_is_a_clear_definite_error() {
    let _broker = BROKER.read().await;
    let db = MariaDb::new("rabbit29_a").await;
    let (path, port) = write_config(&db, "", "", "");
    let mut relay = launch(path, port, "not-the-password-rabbit29");
    let log = expect_failed_exit(&mut relay, Duration::from_secs(60));
    assert!(
        log.contains("refused the login of user \"outboxd\"")
            || log.contains(&format!("refused the login of user \"{}\"", rabbit_user())),
        "log:\n{log}"
    );
    assert!(
        !log.contains("not-the-password-rabbit29"),
        "the password is never printed"
    );
}

/// An exchange that does not exist: a definite error saying how to declare it; with
/// `exchange_type` the relay declares it.
#[tokio::test(flavor = "multi_thread")]
async fn a_missing_exchange_is_named_or_declared() {
    let _broker = BROKER.read().await;
    let db = MariaDb::new("rabbit29_e").await;
    let exchange = unique("rabbit29_missing");
    let (path, port) = write_config(&db, &exchange, "", "");
    let mut relay = launch(path, port, &rabbit_password());
    let log = expect_failed_exit(&mut relay, Duration::from_secs(60));
    assert!(
        log.contains(&format!("exchange \"{exchange}\" does not exist"))
            && log.contains("exchange_type"),
        "log:\n{log}"
    );
    let (path, port) = write_config(&db, &exchange, "exchange_type = \"topic\"", "");
    let mut relay = start(path, port);
    let (_conn, ch) = channel().await;
    one_event_arrives(&db, &ch, (&exchange, "#"), &relay).await;
    let _ = ch
        .exchange_delete(exchange.as_str().into(), Default::default())
        .await;
    relay.stop();
}

/// A message no queue is bound for comes back (mandatory): the relay stops at it with a
/// clear error, and nothing is checkpointed past it — once a queue is bound, a restart
/// delivers it. Under `errors.tolerance = "all"` it goes to the dead-letter routing key.
#[tokio::test(flavor = "multi_thread")]
async fn an_unroutable_message_is_refused_not_dropped() {
    let _broker = BROKER.read().await;
    let db = MariaDb::new("rabbit29_u").await;
    let (_conn, ch, exchange, orders) =
        exchange_and_queue(&format!("{}.Order", db.name()), FieldTable::default()).await;
    let (path, port) = write_config(&db, &exchange, "", "");
    let mut relay = start(path.clone(), port);
    let before = OutboxEvent::new("Order", "o-1", "Created", Some("{}"));
    let lost = OutboxEvent::new("Invoice", "i-1", "Created", Some("{}"));
    let after = OutboxEvent::new("Order", "o-2", "Created", Some("{}"));
    db.insert(std::slice::from_ref(&before), false).await;
    db.insert(std::slice::from_ref(&lost), false).await;
    db.insert(std::slice::from_ref(&after), false).await;
    let log = expect_failed_exit(&mut relay, Duration::from_secs(60));
    let key = format!("{}.Invoice", db.name());
    assert!(
        log.contains(&format!("no queue is bound for routing key \"{key}\"")),
        "log:\n{log}"
    );
    assert!(log.contains(&lost.id), "names the event; log:\n{log}");
    // Nothing past it was checkpointed: bound now, a restart delivers it (and what came
    // after it, perhaps again).
    let invoices = unique("rabbit29_q");
    bound_queue(&ch, &invoices, &exchange, &key, FieldTable::default()).await;
    relay.spawn();
    relay.wait_ready(Duration::from_secs(60));
    let got = consume(
        &invoices,
        1,
        Duration::from_secs(60),
        Duration::from_millis(500),
    )
    .await;
    assert_eq!(got.len(), 1, "log:\n{}", relay.log_text());
    assert_eq!(got[0].message_id.as_deref(), Some(lost.id.as_str()));
    let got = consume(&orders, 2, Duration::from_secs(30), Duration::from_secs(1)).await;
    let ids: HashSet<_> = got.iter().filter_map(|m| m.message_id.clone()).collect();
    assert!(
        ids.contains(&before.id) && ids.contains(&after.id),
        "{ids:?}"
    );
    relay.stop();

    // errors.tolerance = "all": dead-lettered to the dead-letter routing key.
    let dlq_key = format!("{}.dlq", db.name());
    let dlq = unique("rabbit29_dlq");
    bound_queue(&ch, &dlq, &exchange, &dlq_key, FieldTable::default()).await;
    let tail =
        format!("\n[connectors.errors]\ntolerance = \"all\"\ndead_letter_topic = \"{dlq_key}\"");
    let (path, port) = write_config(&db, &exchange, "", &tail);
    let mut relay = start(path, port);
    let refund = OutboxEvent::new("Refund", "r-1", "Created", Some("{}"));
    let next = OutboxEvent::new("Order", "o-3", "Created", Some("{}"));
    db.insert(std::slice::from_ref(&refund), false).await;
    db.insert(std::slice::from_ref(&next), false).await;
    let dead = consume(&dlq, 1, Duration::from_secs(60), Duration::from_millis(500)).await;
    let log = relay.log_text();
    assert_eq!(dead.len(), 1, "log:\n{log}");
    assert_eq!(dead[0].header("id").as_deref(), Some(refund.id.as_str()));
    let got = consume(
        &orders,
        1,
        Duration::from_secs(30),
        Duration::from_millis(500),
    )
    .await;
    assert!(
        got.iter()
            .any(|m| m.message_id.as_deref() == Some(next.id.as_str())),
        "streaming goes on; log:\n{log}"
    );
    relay.stop();
}

/// A queue at its `x-max-length` with `x-overflow = reject-publish` nacks: one WARN saying
/// the queue is full, retries, and everything arrives once consumers catch up.
#[tokio::test(flavor = "multi_thread")]
async fn a_full_reject_publish_queue_is_retried_with_one_warn() {
    let _broker = BROKER.read().await;
    let db = MariaDb::new("rabbit29_f").await;
    let mut args = FieldTable::default();
    args.insert("x-max-length".into(), AMQPValue::LongInt(5));
    args.insert(
        "x-overflow".into(),
        AMQPValue::LongString("reject-publish".into()),
    );
    let (_conn, ch, exchange, queue) = exchange_and_queue(&format!("{}.#", db.name()), args).await;
    let (path, port) = write_config(&db, &exchange, "", "");
    let mut relay = start(path, port);
    let events = sequenced_events("Order", 3, 12, 10);
    db.insert(&events, false).await;
    // The queue fills with the first five; the rest waits.
    let deadline = Instant::now() + Duration::from_secs(30);
    while !relay.log_text().contains("is full") && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    tokio::time::sleep(Duration::from_secs(6)).await; // a few retries
    let log = relay.log_text();
    let warns: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("WARN") && l.contains("is full"))
        .collect();
    assert_eq!(warns.len(), 1, "one WARN per episode; log:\n{log}");
    assert!(
        warns[0].contains("queue bound to routing key"),
        "{}",
        warns[0]
    );
    assert!(warns[0].contains("consumers must catch up"), "{}", warns[0]);
    // A consumer catches up: everything arrives.
    let got = consume(
        &queue,
        events.len(),
        Duration::from_secs(90),
        Duration::from_secs(3),
    )
    .await;
    let log = relay.log_text();
    let dups = assert_all_present(&events, &got, &log);
    println!("reject-publish: {} events, {dups} duplicates", events.len());
    assert!(log.contains("RabbitMQ takes messages again"), "log:\n{log}");
    let _ = ch
        .queue_purge(queue.as_str().into(), QueuePurgeOptions::default())
        .await;
    relay.stop();
}

/// A record over `max_message_bytes` is refused before sending (the relay stops at it,
/// naming it). A message the broker refuses as over its own `max_message_size` (channel
/// closed with PRECONDITION_FAILED) is a refusal of that record, named with both sizes:
/// checked when `OUTBOXD_RABBITMQ_MAX_MESSAGE_SIZE` gives the broker's limit (the default
/// 128 MiB of RabbitMQ 3.x is too large to test cheaply).
#[tokio::test(flavor = "multi_thread")]
async fn an_oversized_message_is_refused_with_both_sizes() {
    let _broker = BROKER.read().await;
    let db = MariaDb::new("rabbit29_o").await;
    let (_conn, _ch, exchange, queue) = exchange_and_queue("#", FieldTable::default()).await;
    let (path, port) = write_config(&db, &exchange, "max_message_bytes = 4096", "");
    let mut relay = start(path, port);
    let big = OutboxEvent::new(
        "Order",
        "o-1",
        "Created",
        Some(&format!("\"{}\"", "x".repeat(5000))),
    );
    db.insert(std::slice::from_ref(&big), false).await;
    let log = expect_failed_exit(&mut relay, Duration::from_secs(60));
    assert!(log.contains(&big.id) && log.contains("4096"), "log:\n{log}");

    let Some(limit) = std::env::var("OUTBOXD_RABBITMQ_MAX_MESSAGE_SIZE")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
    else {
        println!("OUTBOXD_RABBITMQ_MAX_MESSAGE_SIZE unset: the broker's own limit is not tested");
        return;
    };
    let db = MariaDb::new("rabbit29_o").await;
    let (path, port) = write_config(
        &db,
        &exchange,
        &format!("max_message_bytes = {}", limit * 4),
        "",
    );
    let mut relay = start(path, port);
    let small = OutboxEvent::new("Order", "o-1", "Created", Some("{}"));
    let big = OutboxEvent::new(
        "Order",
        "o-2",
        "Created",
        Some(&format!("\"{}\"", "x".repeat(limit + 10))),
    );
    db.insert(std::slice::from_ref(&small), false).await;
    db.insert(std::slice::from_ref(&big), false).await;
    let log = expect_failed_exit(&mut relay, Duration::from_secs(60));
    assert!(
        log.contains(&format!("refused outbox event {}", big.id))
            && log.contains(&format!(
                "over the broker's max_message_size ({limit} bytes)"
            )),
        "log:\n{log}"
    );
    let got = consume(
        &queue,
        1,
        Duration::from_secs(20),
        Duration::from_millis(500),
    )
    .await;
    assert!(got
        .iter()
        .any(|m| m.message_id.as_deref() == Some(small.id.as_str())));
}

/// `amqps://` with `tls_ca` and a client certificate delivers; a CA that did not sign the
/// broker's certificate is a definite error saying what to check. Runs when
/// `OUTBOXD_RABBITMQ_TLS_URL` names a TLS listener (`scripts/services.sh` runs none) and
/// `OUTBOXD_RABBITMQ_TLS_DIR` holds `ca.pem`, `other-ca.pem`, `client.pem`, `client.key`
/// (default: the project's `.state/tls`).
#[tokio::test(flavor = "multi_thread")]
async fn tls_with_a_ca_and_a_client_certificate() {
    let _broker = BROKER.read().await;
    let Ok(url) = std::env::var("OUTBOXD_RABBITMQ_TLS_URL") else {
        println!("OUTBOXD_RABBITMQ_TLS_URL unset: TLS not tested");
        return;
    };
    let dir = std::env::var("OUTBOXD_RABBITMQ_TLS_DIR")
        .unwrap_or_else(|_| concat!(env!("CARGO_MANIFEST_DIR"), "/.state/tls").into());
    let db = MariaDb::new("rabbit29_t").await;
    let exchange = unique("rabbit29_x");
    let tls = |ca: &str| {
        format!(
            "exchange_type = \"topic\"\ntls_ca = \"{dir}/{ca}.pem\"\ntls_cert = \
             \"{dir}/client.pem\"\ntls_key = \"{dir}/client.key\""
        )
    };
    let rewrite = |path: &PathBuf| {
        let text = std::fs::read_to_string(path).unwrap();
        let text = text.replace(
            &format!("url = \"{}\"", rabbit_url()),
            &format!("url = \"{url}\""),
        );
        std::fs::write(path, text).unwrap();
    };
    let (path, port) = write_config(&db, &exchange, &tls("other-ca"), "");
    rewrite(&path);
    let mut relay = launch(path, port, &rabbit_password());
    let log = expect_failed_exit(&mut relay, Duration::from_secs(60));
    assert!(
        log.contains("TLS handshake") && log.contains("tls_ca"),
        "log:\n{log}"
    );

    let (path, port) = write_config(&db, &exchange, &tls("ca"), "");
    rewrite(&path);
    let mut relay = start(path, port);
    let (_conn, ch) = channel().await;
    one_event_arrives(&db, &ch, (&exchange, "#"), &relay).await;
    relay.stop();
}

/// The broker down when the relay starts: one WARN, nothing read meanwhile; once it is up,
/// everything written meanwhile is delivered.
#[tokio::test(flavor = "multi_thread")]
async fn broker_down_at_start_is_waited_for() {
    let _broker = BROKER.write().await;
    let db = MariaDb::new("rabbit29_d").await;
    let (conn, _ch, exchange, queue) = exchange_and_queue("#", FieldTable::default()).await;
    let _ = conn.close(200, "set up".into()).await;
    let (path, port) = write_config(&db, &exchange, "", "");
    // A first run stores the checkpoint (the start position) the second resumes from.
    let mut relay = start(path, port);
    relay.stop();
    broker("stop");
    relay.spawn();
    let events = sequenced_events("Ledger", 5, 100, 20);
    db.insert(&events, false).await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    broker("start");
    let got = consume(
        &queue,
        events.len(),
        Duration::from_secs(90),
        Duration::from_secs(2),
    )
    .await;
    let log = relay.log_text();
    assert_all_present(&events, &got, &log);
    let warns: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("WARN") && l.contains("RabbitMQ"))
        .collect();
    assert_eq!(
        warns.len(),
        1,
        "one WARN per outage: {warns:#?}\nlog:\n{log}"
    );
    assert!(warns[0].contains("unreachable"), "{}", warns[0]);
    assert!(log.contains("RabbitMQ is reachable again"), "log:\n{log}");
    relay.stop();
}

/// Debezium Server's layout (what an `application.properties` without `exchange` imports
/// as): each record to the exchange named by its topic, with the routing key "".
#[tokio::test(flavor = "multi_thread")]
async fn an_exchange_per_topic_as_debezium_server_does() {
    let _broker = BROKER.read().await;
    let db = MariaDb::new("rabbit29_x").await;
    let (_conn, ch) = channel().await;
    let exchange = format!("{}.Order", db.name());
    declare_exchange(&ch, &exchange).await;
    let (path, port) = write_config(
        &db,
        "",
        "exchange_from_topic = true\nrouting_key = \"\"",
        "",
    );
    let mut relay = start(path, port);
    let m = one_event_arrives(&db, &ch, (&exchange, ""), &relay).await;
    assert_eq!(m.routing_key, "");
    // A topic without its exchange: a definite error naming it.
    let lost = OutboxEvent::new("Invoice", "i-1", "Created", Some("{}"));
    db.insert(std::slice::from_ref(&lost), false).await;
    let log = expect_failed_exit(&mut relay, Duration::from_secs(60));
    assert!(
        log.contains(&format!(
            "exchange \"{}.Invoice\" does not exist",
            db.name()
        )),
        "log:\n{log}"
    );
    let _ = ch
        .exchange_delete(exchange.as_str().into(), Default::default())
        .await;
}
