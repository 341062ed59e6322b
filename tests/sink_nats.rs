//! The NATS JetStream sink against a real nats-server (`scripts/services.sh up nats`;
//! settings from `OUTBOXD_NATS_URL`, `_USER`, `_PASSWORD`): MariaDB and PostgreSQL outbox
//! rows to the routed subjects with key, headers and value; a restart resumes; kill -9 under
//! a writer delivers every event exactly once (JetStream drops the re-published copies by
//! `Nats-Msg-Id` within the duplicate window); the server restarted mid-stream; a refused
//! password; a missing stream; a second instance fenced by the checkpoint's KV revision;
//! a `--group` failover (kill -9 of the owner) exactly once.
//!
//! Stopping the server: `scripts/services.sh stop nats` / `start nats` (or the command in
//! `OUTBOXD_NATS_CTL`, given `stop` / `start`).

mod common;

use std::time::Duration;

use common::edges::{expect_failed_exit, run_expecting_failure};
use common::group;
use common::mariadb::MariaDb;
use common::nats;
use common::postgres::Postgres;
use common::relay::Relay;
use common::suite::{self, SourceDb};
use common::OutboxEvent;

const WINDOW: Duration = Duration::from_secs(120);

/// The record contract on NATS: subject = routed topic, `Outboxd-Key` = aggregate id,
/// payload = the payload bytes (empty + `Outboxd-Tombstone` for NULL), headers `id`,
/// `eventType` and `Nats-Msg-Id` = id.
fn assert_messages<S: SourceDb>(db: &S, events: &[OutboxEvent], got: &[common::kafka::Consumed]) {
    assert_eq!(got.len(), events.len(), "message count");
    for e in events {
        let m = got
            .iter()
            .find(|m| m.header("id").as_deref() == Some(e.id.as_str()))
            .unwrap_or_else(|| panic!("event {} not delivered", e.id));
        assert_eq!(m.topic, suite::topic(db, &e.aggregate_type));
        assert_eq!(m.key_str().as_deref(), Some(e.aggregate_id.as_str()));
        assert_eq!(
            m.value,
            e.payload.as_ref().map(|p| p.as_bytes().to_vec()),
            "value of {}",
            e.id
        );
        assert_eq!(
            m.header("eventType").as_deref(),
            Some(e.event_type.as_str())
        );
        assert_eq!(m.header("Nats-Msg-Id").as_deref(), Some(e.id.as_str()));
    }
}

/// Makes connector `name`'s stored checkpoint look written `by` earlier (its
/// `updated_at_ms`), as a relay that stayed down that long finds it.
async fn age_checkpoint(name: &str, by: Duration) {
    let kv = nats::js()
        .await
        .get_key_value("outboxd_test_checkpoints")
        .await
        .unwrap();
    let entry = kv.entry(name).await.unwrap().expect("a checkpoint");
    let mut c: serde_json::Value = serde_json::from_slice(&entry.value).unwrap();
    c["updated_at_ms"] = (c["updated_at_ms"].as_i64().unwrap() - by.as_millis() as i64).into();
    kv.update(name, serde_json::to_vec(&c).unwrap().into(), entry.revision)
        .await
        .unwrap();
}

/// Rows become messages with the contract; the relay stopped and started again resumes from
/// its KV checkpoint: nothing lost, nothing twice; its checkpoint, older than the stream's
/// duplicate window, is warned about.
async fn records_and_restart<S: SourceDb>(db: &S) {
    nats::create_stream(db, WINDOW).await;
    let stream = nats::stream_name(db);
    let (path, port) = nats::write_config(db, "", &nats::password(), "connector.toml");
    let mut relay = Relay::start(path.clone(), port);
    let first = vec![
        OutboxEvent::new(
            "Order",
            "order-1",
            "OrderCreated",
            Some(r#"{"seq":1,"total":12.5}"#),
        ),
        OutboxEvent::new(
            "Order",
            "order-2",
            "OrderCreated",
            Some(r#"{"seq":2,"name":"Ünïcødé ✓"}"#),
        ),
        OutboxEvent::new("Customer", "cust-9", "CustomerDeleted", None),
    ];
    db.insert(&first, false).await;
    let got = nats::read_expecting(
        &stream,
        first.len(),
        Duration::from_secs(60),
        Duration::from_secs(1),
    )
    .await;
    assert_messages(db, &first, &got);
    assert_eq!(relay.stop(), Some(0), "log:\n{}", relay.log_text());
    let second = suite::sequenced_range("Order", 3, 10..60, 0);
    db.insert(&second, false).await;
    age_checkpoint(db.name(), Duration::from_secs(600)).await;
    let mut relay = Relay::start(path.clone(), port);
    let all: Vec<OutboxEvent> = first.iter().cloned().chain(second).collect();
    let got = nats::read_expecting(
        &stream,
        all.len(),
        Duration::from_secs(60),
        Duration::from_secs(2),
    )
    .await;
    assert_messages(db, &all, &got);
    let log = relay.log_text();
    assert!(
        log.contains("duplicate window"),
        "the window is logged; log:\n{log}"
    );
    assert!(
        log.contains("longer than stream") && log.contains("duplicate window (120s)"),
        "a checkpoint older than the window is warned about; log:\n{log}"
    );
    relay.stop();
    // The checkpoint commands reach the KV bucket with the sink's login.
    let (code, out, err) =
        common::relay::run_cli(&["checkpoint", "show", "--config", path.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    let shown = format!("\"connector\":\"{}\",\"position\"", db.name());
    assert!(out.contains(&shown), "{out}{err}");
}

#[tokio::test(flavor = "multi_thread")]
async fn mariadb_rows_to_subjects_and_restart() {
    let _server = nats::shared().await;
    records_and_restart(&MariaDb::new("nats_mdb").await).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn postgres_rows_to_subjects_and_restart() {
    let _server = nats::shared().await;
    records_and_restart(&Postgres::new("nats_pg").await).await;
}

/// kill -9 at random moments while a writer inserts: a consumer reading the stream sees
/// every event exactly once, in per-aggregate order (the copies a restart publishes again
/// are dropped by JetStream's duplicate window, `Nats-Msg-Id` = event id).
async fn kill9_exactly_once<S: SourceDb>(db: &S, kills: usize) {
    nats::create_stream(db, WINDOW).await;
    let (path, port) = nats::write_config(db, "", &nats::password(), "connector.toml");
    let relay = Relay::start(path, port);
    let events = suite::sequenced_events("Wallet", 10, 3_000, 50);
    let killer = suite::kill_at_random_moments(relay, kills);
    let (_, relay) = tokio::join!(suite::write_in_random_transactions(db, &events, 12), killer);
    let mut relay = relay.unwrap();
    let got = nats::read_all(db, events.len()).await;
    suite::assert_exactly_once(&events, &got, &relay.log_text());
    relay.stop();
}

#[tokio::test(flavor = "multi_thread")]
async fn kill9_under_a_writer_exactly_once_mariadb() {
    let _server = nats::shared().await;
    kill9_exactly_once(&MariaDb::new("nats_kill_m").await, 10).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn kill9_under_a_writer_exactly_once_postgres() {
    let _server = nats::shared().await;
    kill9_exactly_once(&Postgres::new("nats_kill_p").await, 10).await;
}

/// HA with a NATS JetStream connector: two members of a `--group` (coordinated through the
/// test Kafka cluster) run it from one file; while a writer inserts, its owner is killed
/// (`kill -9`) twice and the other member takes over each time, resuming from the KV
/// checkpoint. A consumer reading the stream counts every event id exactly once, in
/// per-aggregate order: what the killed owner published after its last checkpoint is
/// published again by its successor and dropped by the duplicate window.
#[tokio::test(flavor = "multi_thread")]
async fn group_failover_exactly_once() {
    let _server = nats::shared().await;
    let db = MariaDb::new("nats_group").await;
    nats::create_stream(&db, WINDOW).await;
    let (path, _) = nats::write_config(&db, "", &nats::password(), "member.toml");
    let (mut members, events) = group::failover_under_a_writer(&db, &path, 2).await;
    let got = nats::read_all(&db, events.len()).await;
    suite::assert_exactly_once(&events, &got, &group::logs(&members));
    for m in &mut members {
        m.stop();
    }
}

/// The NATS server stops for a while mid-stream and starts again: the relay keeps running
/// (one WARN for the outage, restarts from the checkpoint) and every event arrives once.
#[tokio::test(flavor = "multi_thread")]
async fn nats_restarted_mid_stream() {
    let _server = nats::exclusive().await;
    let db = MariaDb::new("nats_outage").await;
    nats::create_stream(&db, WINDOW).await;
    let (path, port) = nats::write_config(
        &db,
        "ack_timeout = \"3s\"",
        &nats::password(),
        "connector.toml",
    );
    let mut relay = Relay::start(path, port);
    let events = suite::sequenced_events("Invoice", 10, 1_500, 100);
    let outage = tokio::task::spawn_blocking(|| {
        std::thread::sleep(Duration::from_secs(2));
        nats::server("stop");
        let restart = suite::scopeguard(|| nats::server("start"));
        std::thread::sleep(Duration::from_secs(8));
        drop(restart);
    });
    let (_, o) = tokio::join!(suite::write_in_random_transactions(&db, &events, 8), outage);
    o.unwrap();
    let got = nats::read_all(&db, events.len()).await;
    let log = relay.log_text();
    // Exactly once; a key's order may break across the outage (README, "NATS JetStream":
    // a publish that got no acknowledgement is published again after later ones).
    suite::assert_exactly_once_unordered(&events, &got, &log);
    assert!(
        log.contains("unreachable") || log.contains("cannot connect to the NATS server"),
        "the outage is reported; log:\n{log}"
    );
    assert_eq!(
        relay.stop(),
        Some(0),
        "still running after the outage; log:\n{log}"
    );
}

/// A wrong password: the relay stops (non-zero) with the refusal and what to check, never
/// the password.
#[tokio::test(flavor = "multi_thread")]
async fn refused_password_stops_with_a_clear_error() {
    let _server = nats::shared().await;
    let db = Postgres::new("nats_badpw").await;
    nats::create_stream(&db, WINDOW).await;
    let (path, port) = nats::write_config(&db, "", "not-the-password-xyz", "connector.toml");
    let log = run_expecting_failure(&path, port, Duration::from_secs(60));
    assert!(log.contains("refused the login"), "log:\n{log}");
    assert!(
        log.contains(&format!("user \"{}\"", nats::user())),
        "log:\n{log}"
    );
    assert!(
        !log.contains("not-the-password-xyz"),
        "never the password; log:\n{log}"
    );
}

/// A configured stream that does not exist stops the relay with how to create it; no stream
/// for a subject (none configured) stops it at the first record, naming the subject; with
/// `create_stream` the relay creates the stream and delivers.
#[tokio::test(flavor = "multi_thread")]
async fn missing_stream_is_named_or_created() {
    let _server = nats::shared().await;
    let db = MariaDb::new("nats_nostream").await;
    let stream = nats::stream_name(&db);
    let (path, port) = nats::write_config(
        &db,
        &format!("stream = \"{stream}\""),
        &nats::password(),
        "a.toml",
    );
    let log = run_expecting_failure(&path, port, Duration::from_secs(60));
    assert!(
        log.contains(&format!("JetStream stream {stream} does not exist")),
        "log:\n{log}"
    );
    assert!(log.contains("nats stream add"), "says how; log:\n{log}");

    let (path, port) = nats::write_config(&db, "", &nats::password(), "b.toml");
    let mut relay = Relay::start(path, port);
    let events = vec![OutboxEvent::new("Order", "o-1", "OrderCreated", Some("{}"))];
    db.insert(&events, false).await;
    let log = expect_failed_exit(&mut relay, Duration::from_secs(60));
    assert!(
        log.contains(&format!(
            "no JetStream stream captures subject {}",
            suite::topic(&db, "Order")
        )),
        "log:\n{log}"
    );

    let extra = format!(
        "stream = \"{stream}\"\ncreate_stream = true\nsubjects = [\"{}.>\"]\nduplicate_window = \"5m\"",
        db.name()
    );
    let (path, port) = nats::write_config(&db, &extra, &nats::password(), "c.toml");
    let mut relay = Relay::start(path, port);
    let got =
        nats::read_expecting(&stream, 1, Duration::from_secs(60), Duration::from_secs(1)).await;
    assert_messages(&db, &events, &got);
    let log = relay.log_text();
    assert!(
        log.contains(&format!("created JetStream stream {stream}")),
        "log:\n{log}"
    );
    assert!(log.contains("duplicate window 300s"), "log:\n{log}");
    relay.stop();
}

/// A second instance of the connector (MariaDB: a PostgreSQL slot takes one reader): the
/// first of the two to write the checkpoint after
/// the other read it wins, the other stops, fenced (the KV revision moved); every event is
/// in the stream once.
#[tokio::test(flavor = "multi_thread")]
async fn second_instance_is_fenced() {
    let _server = nats::shared().await;
    let db = MariaDb::new("nats_fence").await;
    nats::create_stream(&db, WINDOW).await;
    let stream = nats::stream_name(&db);
    let (path_a, port_a) = nats::write_config(&db, "", &nats::password(), "a.toml");
    let mut a = Relay::start(path_a, port_a);
    let first = suite::sequenced_range("Order", 3, 0..10, 0);
    db.insert(&first, false).await;
    nats::read_expecting(
        &stream,
        first.len(),
        Duration::from_secs(60),
        Duration::from_secs(1),
    )
    .await;
    let (path_b, port_b) = nats::write_config(&db, "", &nats::password(), "b.toml");
    let mut b = Relay::start(path_b, port_b);
    let second = suite::sequenced_range("Order", 3, 10..20, 0);
    db.insert(&second, false).await;
    // One of them stops, fenced.
    let deadline = std::time::Instant::now() + Duration::from_secs(90);
    let (loser, winner) = loop {
        if let Some(c) = a.wait_exit(Duration::from_millis(200)) {
            break ((c, a.log_text()), b);
        }
        if let Some(c) = b.wait_exit(Duration::from_millis(200)) {
            break ((c, b.log_text()), a);
        }
        assert!(
            std::time::Instant::now() < deadline,
            "neither instance was fenced"
        );
        // Keep checkpoints coming.
        db.insert(&suite::sequenced_range("Order", 3, 100..101, 0), false)
            .await;
    };
    let (code, log) = loser;
    assert_ne!(code, 0, "log:\n{log}");
    assert!(
        log.contains("fenced") && log.contains("another outboxd instance"),
        "log:\n{log}"
    );
    let mut winner = winner;
    let got = nats::read_stream(&stream).await;
    let ids: std::collections::HashSet<String> =
        got.iter().filter_map(|m| m.header("id")).collect();
    assert_eq!(ids.len(), got.len(), "no event twice");
    for e in first.iter().chain(&second) {
        assert!(ids.contains(&e.id), "event {} delivered", e.id);
    }
    winner.stop();
}

/// TLS: the relay verifies the server against `tls_ca` and presents its client certificate
/// (mutual TLS) and delivers; a CA that did not sign the server's certificate stops it with
/// a TLS error naming tls_ca (not a retry for ever).
#[tokio::test(flavor = "multi_thread")]
async fn mutual_tls_delivers_and_a_wrong_ca_stops() {
    let _server = nats::shared().await;
    let _ = rustls::crypto::ring::default_provider().install_default();
    let db = MariaDb::new("nats_tls").await;
    let dir = common::relay::test_dir(db.name());
    let server = nats::OwnServer::start(&dir, true);
    let tls = common::tls::file;
    let with = |ca: &str| {
        format!(
            "tls_ca = \"{}\"\ntls_cert = \"{}\"\ntls_key = \"{}\"\nstream = \"{}\"\ncreate_stream = true\nsubjects = [\"{}.>\"]",
            tls(ca),
            tls("client.pem"),
            tls("client.key"),
            nats::stream_name(&db),
            db.name()
        )
    };
    let (path, port) =
        nats::write_config(&db, &with("other-ca.pem"), &nats::password(), "bad-ca.toml");
    std::fs::write(
        &path,
        std::fs::read_to_string(&path)
            .unwrap()
            .replace(&nats::url(), &server.url),
    )
    .unwrap();
    let log = run_expecting_failure(&path, port, Duration::from_secs(60));
    assert!(
        log.contains("TLS with the NATS server") && log.contains("tls_ca"),
        "log:\n{log}"
    );

    let (path, port) = nats::write_config(&db, &with("ca.pem"), &nats::password(), "tls.toml");
    std::fs::write(
        &path,
        std::fs::read_to_string(&path)
            .unwrap()
            .replace(&nats::url(), &server.url),
    )
    .unwrap();
    let mut relay = Relay::start(path, port);
    let events = vec![OutboxEvent::new("Order", "o-1", "OrderCreated", Some("{}"))];
    db.insert(&events, false).await;
    let client = async_nats::ConnectOptions::new()
        .user_and_password(nats::user(), nats::password())
        .add_root_certificates(tls("ca.pem").into())
        .add_client_certificate(tls("client.pem").into(), tls("client.key").into())
        .connect(server.url.as_str())
        .await
        .unwrap();
    let js = async_nats::jetstream::new(client);
    nats::wait_messages(&js, &nats::stream_name(&db), 1, &relay).await;
    relay.stop();
}

/// An event larger than the server's `max_payload` (1 MiB by default) cannot be delivered:
/// the relay stops (`tolerance = "none"`) naming the event and the limit, after delivering
/// what came before it.
#[tokio::test(flavor = "multi_thread")]
async fn an_event_over_max_payload_stops_naming_it() {
    let _server = nats::shared().await;
    let db = Postgres::new("nats_big").await;
    nats::create_stream(&db, WINDOW).await;
    let (path, port) = nats::write_config(&db, "", &nats::password(), "connector.toml");
    let mut relay = Relay::start(path, port);
    let small = OutboxEvent::new("Order", "o-1", "OrderCreated", Some(r#"{"seq":1}"#));
    let big_payload = format!(r#"{{"seq":2,"pad":"{}"}}"#, "x".repeat(1_200_000));
    let big = OutboxEvent::new("Order", "o-1", "OrderCreated", Some(&big_payload));
    db.insert(std::slice::from_ref(&small), false).await;
    db.insert(std::slice::from_ref(&big), false).await;
    let log = expect_failed_exit(&mut relay, Duration::from_secs(60));
    // The limit is the server's max_payload, named as such.
    assert!(
        log.contains(&big.id) && log.contains("max_payload (1048576)"),
        "log:\n{log}"
    );
    assert!(!log.contains("kafka.max_record_bytes"), "log:\n{log}");
    let got = nats::read_stream(&nats::stream_name(&db)).await;
    assert_messages(&db, &[small], &got);
}

/// NKey login: the relay signs the server's nonce with `nkey_seed` and delivers; a seed the
/// server does not know is refused, a definite error naming the NKey seed (never the seed).
#[tokio::test(flavor = "multi_thread")]
async fn nkey_login() {
    let _server = nats::shared().await;
    let db = MariaDb::new("nats_nkey").await;
    let dir = common::relay::test_dir(db.name());
    let user = nkeys::KeyPair::new_user();
    let server = nats::OwnServer::start_with(
        &dir,
        "",
        &format!(
            "authorization {{ users: [ {{ nkey: {} }} ] }}",
            user.public_key()
        ),
    );
    let config = |seed: &str, file: &str| {
        let (path, port) = nats::write_config(
            &db,
            &format!(
                "nkey_seed = \"{seed}\"\nstream = \"{}\"\ncreate_stream = true\nsubjects = [\"{}.>\"]",
                nats::stream_name(&db),
                db.name()
            ),
            "unused",
            file,
        );
        let text = std::fs::read_to_string(&path)
            .unwrap()
            .replace(&nats::url(), &server.url)
            .replace(
                &format!("user = \"{}\"\npassword = \"unused\"\n", nats::user()),
                "",
            );
        std::fs::write(&path, text).unwrap();
        (path, port)
    };
    let stranger = nkeys::KeyPair::new_user().seed().unwrap();
    let (path, port) = config(&stranger, "stranger.toml");
    let log = run_expecting_failure(&path, port, Duration::from_secs(60));
    assert!(
        log.contains("refused the login with the NKey seed"),
        "log:\n{log}"
    );
    assert!(!log.contains(&stranger), "never the seed; log:\n{log}");

    let (path, port) = config(&user.seed().unwrap(), "nkey.toml");
    let mut relay = Relay::start(path, port);
    let events = vec![OutboxEvent::new("Order", "o-1", "OrderCreated", Some("{}"))];
    db.insert(&events, false).await;
    let client = async_nats::ConnectOptions::with_nkey(user.seed().unwrap())
        .connect(server.url.as_str())
        .await
        .unwrap();
    let js = async_nats::jetstream::new(client);
    nats::wait_messages(&js, &nats::stream_name(&db), 1, &relay).await;
    relay.stop();
}

/// A user the server does not let publish to the routed subjects: the server refuses each
/// publish (`-ERR Permissions Violation`), which gets no acknowledgement; the failure says
/// what the server reported and the connector retries from its checkpoint (nothing is
/// checkpointed past it).
#[tokio::test(flavor = "multi_thread")]
async fn a_subject_the_user_may_not_publish_to_is_named() {
    let _server = nats::shared().await;
    let db = Postgres::new("nats_perm").await;
    let dir = common::relay::test_dir(db.name());
    let server = nats::OwnServer::start_with(
        &dir,
        "",
        &format!(
            "authorization {{ users: [ {{ user: \"{}\", password: \"{}\", permissions: {{ publish: {{ deny: [\"{}.>\"] }} }} }} ] }}",
            nats::user(),
            nats::password(),
            db.name()
        ),
    );
    let extra = format!(
        "ack_timeout = \"2s\"\nstream = \"{}\"\ncreate_stream = true\nsubjects = [\"{}.>\"]",
        nats::stream_name(&db),
        db.name()
    );
    let (path, port) = nats::write_config(&db, &extra, &nats::password(), "connector.toml");
    let text = std::fs::read_to_string(&path)
        .unwrap()
        .replace(&nats::url(), &server.url);
    std::fs::write(&path, text).unwrap();
    let mut relay = Relay::start(path, port);
    db.insert(
        &[OutboxEvent::new("Order", "o-1", "OrderCreated", Some("{}"))],
        false,
    )
    .await;
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let log = relay.log_text();
        if log.contains("transient failure") && log.contains("the server last reported") {
            assert!(log.contains("Permissions Violation"), "log:\n{log}");
            break;
        }
        assert!(std::time::Instant::now() < deadline, "log:\n{log}");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    assert_eq!(
        relay.stop(),
        Some(1),
        "stopped without a final checkpoint past the event"
    );
}

/// The NATS server down when the relay starts: it retries (transient, a WARN per attempt)
/// instead of exiting, and delivers once the server is up.
#[tokio::test(flavor = "multi_thread")]
async fn nats_down_at_start_retries() {
    let _server = nats::exclusive().await;
    let db = MariaDb::new("nats_downstart").await;
    nats::create_stream(&db, WINDOW).await;
    let (path, port) = nats::write_config(&db, "", &nats::password(), "connector.toml");
    nats::server("stop");
    let restart = suite::scopeguard(|| nats::server("start"));
    let mut relay =
        Relay::launch_with_args(&[path.to_str().unwrap()], port, path.with_extension("log"));
    assert_eq!(
        relay.wait_exit(Duration::from_secs(4)),
        None,
        "still running; log:\n{}",
        relay.log_text()
    );
    let log = relay.log_text();
    // One WARN for the outage, however many attempts.
    let warns = log
        .lines()
        .filter(|l| l.contains("WARN") && l.contains("cannot connect to the NATS server"))
        .count();
    assert!(warns == 1, "{warns} WARNs; log:\n{log}");
    drop(restart);
    // A first start begins at the source's position when it starts streaming.
    relay.wait_ready(Duration::from_secs(60));
    let events = suite::sequenced_events("Order", 3, 20, 0);
    db.insert(&events, false).await;
    let got = nats::read_expecting(
        &nats::stream_name(&db),
        events.len(),
        Duration::from_secs(90),
        Duration::from_secs(1),
    )
    .await;
    suite::assert_exactly_once(&events, &got, &relay.log_text());
    relay.stop();
}
