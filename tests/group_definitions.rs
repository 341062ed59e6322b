//! Issue 25: the members of one `--group` started with different connector files, with the
//! real services and real processes of the built binary.
//!
//! * Two definitions of one connector name that differ (same table and server id, another
//!   `route.topic.replacement` and header alias): the joining member is refused (exit 1)
//!   before it takes any connector, naming the connector, the member and the keys that
//!   differ, never a password; the running member goes on, routing as before.
//! * Disjoint files (one member runs a connector the other does not define): both members
//!   say so (a WARN each), `outboxd_connector_standbys` is 0 for that connector and 1 for the
//!   one both define alike (its password taken from another environment variable there: not a
//!   difference), and `status --group` lists which members lack it.
//!
//! * A group's only member that lost its session (SIGSTOP past the session timeout) says
//!   that no other member takes its connector over and takes it back itself on rejoining.
//!
//! These tests neither stop nor restart a service.

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::edges::{event, expect_failed_exit};
use common::kafka::{read_expecting, read_topics};
use common::mariadb::{self as mdb, MariaDb};
use common::relay::{free_port, metric, run_cli, test_dir, Relay};
use common::suite::{self, topic, SourceDb, EXACTLY_ONCE};

/// A connector file for `db` without `[metrics]` (each member gets `--metrics-listen`).
fn member_file<S: SourceDb>(db: &S, file_name: &str) -> PathBuf {
    let (path, _) = suite::write_config_with(db, &db.outbox_table(), "", EXACTLY_ONCE, file_name);
    let text = std::fs::read_to_string(&path).unwrap();
    let body = text
        .split_once("[[connectors]]")
        .map(|(_, rest)| format!("[[connectors]]{rest}"))
        .unwrap();
    std::fs::write(&path, body).unwrap();
    path
}

/// Starts a member of `group` with `files` (not waiting for readiness); its metrics port.
fn launch(files: &[&Path], group: &str, log: PathBuf, env: &[(&str, &str)]) -> (Relay, u16) {
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let mut args: Vec<&str> = files.iter().map(|f| f.to_str().unwrap()).collect();
    args.extend(["--group", group, "--metrics-listen", &listen]);
    (Relay::launch_with_env(&args, port, log, env), port)
}

/// The member id of a relay (`outboxd-<host>-<pid>`).
fn member_id(relay: &Relay) -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap();
    format!("outboxd-{host}-{}", relay.pid().unwrap())
}

/// Waits until `relay`'s `/metrics` has `name{labels}` = `value`.
fn wait_metric(relay: &Relay, name: &str, labels: &str, value: f64, within: Duration) {
    let deadline = Instant::now() + within;
    loop {
        let text = relay.metrics();
        if metric(&text, name, labels) == Some(value) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{name}{{{labels}}} never became {value}; metrics:\n{}\nlog:\n{}",
            text.lines()
                .filter(|l| l.starts_with("outboxd_connector") || l.starts_with("outboxd_group"))
                .collect::<Vec<_>>()
                .join("\n"),
            relay.log_text()
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// Waits until `relay`'s log holds a line with every one of `words`; returns it.
fn wait_log_line(relay: &Relay, words: &[&str], within: Duration) -> String {
    let deadline = Instant::now() + within;
    loop {
        let log = relay.log_text();
        if let Some(l) = log.lines().find(|l| words.iter().all(|w| l.contains(w))) {
            return l.to_string();
        }
        assert!(
            Instant::now() < deadline,
            "no line with {words:?}; log:\n{log}"
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_member_with_another_definition_of_a_connector_is_refused() {
    let db = MariaDb::new("gd_differ").await;
    let name = db.name().to_string();
    let group = common::unique("gd_differ_group");
    let dir = test_dir(&name);
    let first = member_file(&db, "first.toml");
    // The same connector (name, table, server id), routed elsewhere with another header.
    let text = std::fs::read_to_string(&first).unwrap();
    let other_text = text
        .replace(
            &format!("\"route.topic.replacement\" = \"{name}.${{routedByValue}}\""),
            &format!("\"route.topic.replacement\" = \"{name}.v2.${{routedByValue}}\""),
        )
        .replace("event_type:header:eventType", "event_type:header:eventKind");
    assert_ne!(text, other_text);
    let other = dir.join("other.toml");
    std::fs::write(&other, other_text).unwrap();

    let (mut a, a_port) = launch(&[&first], &group, dir.join("a.log"), &[]);
    a.wait_ready(Duration::from_secs(60));
    wait_metric(
        &a,
        "outboxd_connector_owned",
        &format!("connector=\"{name}\""),
        1.0,
        Duration::from_secs(60),
    );
    let before = event("Order", "o-1", 1);
    db.insert(std::slice::from_ref(&before), false).await;
    let orders = topic(&db, "Order");
    assert_eq!(
        read_topics(
            std::slice::from_ref(&orders),
            1,
            Duration::from_secs(60),
            Duration::ZERO
        )
        .len(),
        1
    );

    let (mut b, _) = launch(&[&other], &group, dir.join("b.log"), &[]);
    let log = expect_failed_exit(&mut b, Duration::from_secs(60));
    let refusal = log
        .lines()
        .find(|l| l.contains("is defined differently here than in member"))
        .unwrap_or_else(|| panic!("no refusal; log:\n{log}"));
    for words in [
        format!(
            "connector {name} is defined differently here than in member {}",
            member_id(&a)
        ),
        "route.topic.replacement".to_string(),
        "table.fields.additional.placement".to_string(),
    ] {
        assert!(refusal.contains(&words), "{words:?} in {refusal}");
    }
    assert!(
        !refusal.contains("source.server_id") && !refusal.contains("tables"),
        "only what differs: {refusal}"
    );
    let (_, _, _, password) = mdb::replication_user();
    assert!(!log.contains(&password), "a password in the log:\n{log}");
    assert!(
        !log.contains("assigned to this member"),
        "refused before it took anything; log:\n{log}"
    );

    // The first member goes on, routing as its files say.
    let after = event("Order", "o-2", 2);
    db.insert(std::slice::from_ref(&after), false).await;
    let got = read_topics(
        std::slice::from_ref(&orders),
        2,
        Duration::from_secs(60),
        Duration::from_secs(2),
    );
    assert_eq!(got.len(), 2, "log:\n{}", a.log_text());
    assert!(got.iter().all(|r| r.header("eventType").is_some()));
    let _ = a_port;
    assert_eq!(a.stop(), Some(0));
}

#[tokio::test(flavor = "multi_thread")]
async fn connectors_some_members_lack_are_reported() {
    let only_a = MariaDb::new("gd_only_a").await;
    let both = MariaDb::new("gd_both").await;
    let group = common::unique("gd_disjoint_group");
    let dir = test_dir(only_a.name());
    let x = member_file(&only_a, "x.toml");
    let z = member_file(&both, "z.toml");
    // Member b's file for the shared connector takes its password from the environment: the
    // same definition.
    let (_, _, _, password) = mdb::replication_user();
    let z_env = dir.join("z_env.toml");
    let z_text = std::fs::read_to_string(&z).unwrap().replace(
        &format!("password = \"{password}\""),
        "password_env = \"GD_TEST_Z_PASSWORD\"",
    );
    assert!(z_text.contains("password_env"));
    std::fs::write(&z_env, z_text).unwrap();
    let (xn, zn) = (only_a.name().to_string(), both.name().to_string());

    let (mut a, _) = launch(&[&x, &z], &group, dir.join("a.log"), &[]);
    a.wait_ready(Duration::from_secs(60));
    let (mut b, _) = launch(
        &[&z_env],
        &group,
        dir.join("b.log"),
        &[("GD_TEST_Z_PASSWORD", password.as_str())],
    );
    b.wait_ready(Duration::from_secs(60));
    let (a_id, b_id) = (member_id(&a), member_id(&b));

    // The joining member says what it cannot take over...
    wait_log_line(
        &b,
        &[
            "WARN",
            &format!("connector {xn} (defined in member(s) {a_id}) is not defined here"),
        ],
        Duration::from_secs(30),
    );
    // ... and the first one, from its watch, what has no standby.
    let line = wait_log_line(
        &a,
        &[
            "WARN",
            &format!("connector {xn} is not defined in member(s) {b_id}"),
        ],
        Duration::from_secs(30),
    );
    assert!(line.contains("it has no standby"), "{line}");
    let x_label = format!("connector=\"{xn}\"");
    let z_label = format!("connector=\"{zn}\"");
    wait_metric(
        &a,
        "outboxd_connector_standbys",
        &x_label,
        0.0,
        Duration::from_secs(30),
    );
    wait_metric(
        &a,
        "outboxd_connector_standbys",
        &z_label,
        1.0,
        Duration::from_secs(30),
    );
    wait_metric(
        &b,
        "outboxd_connector_standbys",
        &z_label,
        1.0,
        Duration::from_secs(30),
    );
    assert!(
        !a.log_text().contains("is defined differently")
            && !b.log_text().contains("is defined differently"),
        "a password from another variable is no difference"
    );

    // `status --group` with member a's files: who defines each connector.
    let (_, out, err) = run_cli(&[
        "status",
        "--config",
        x.to_str().unwrap(),
        "--config",
        z.to_str().unwrap(),
        "--group",
        &group,
    ]);
    let line_of = |connector: &str| -> serde_json::Value {
        let l = out
            .lines()
            .find(|l| l.contains(&format!("\"connector\":\"{connector}\"")))
            .unwrap_or_else(|| panic!("no status line for {connector}: {out}\n{err}"));
        serde_json::from_str(l).unwrap()
    };
    let xs = line_of(&xn);
    assert_eq!(xs["members"]["same"], serde_json::json!([a_id]), "{xs}");
    assert_eq!(xs["members"]["lacking"], serde_json::json!([b_id]), "{xs}");
    let zs = line_of(&zn);
    let mut same: Vec<String> = serde_json::from_value(zs["members"]["same"].clone()).unwrap();
    same.sort();
    let mut expected = vec![a_id.clone(), b_id.clone()];
    expected.sort();
    assert_eq!(same, expected, "{zs}");

    assert_eq!(b.stop(), Some(0));
    assert_eq!(a.stop(), Some(0));
}

/// Members of one group share its Kafka cluster (the group lives there), whatever list of
/// addresses each one's files or environment name it by: another order, another broker of
/// the same cluster, a host name instead of an address. Such members define a connector
/// alike and stand by for each other. Before, the text of `bootstrap_servers` was compared
/// and a member reaching the cluster through `127.0.0.1:9092,localhost:9092` was refused.
#[tokio::test(flavor = "multi_thread")]
async fn members_reaching_the_cluster_by_other_addresses_are_alike() {
    let db = MariaDb::new("gd_bootstrap").await;
    let name = db.name().to_string();
    let group = common::unique("gd_bootstrap_group");
    let dir = test_dir(&name);
    let file = member_file(&db, "c.toml");
    let (mut a, _) = launch(&[&file], &group, dir.join("a.log"), &[]);
    a.wait_ready(Duration::from_secs(60));
    let bootstrap = common::kafka_bootstrap();
    let port = bootstrap.rsplit(':').next().unwrap();
    let other = format!("localhost:{port},{bootstrap}");
    let (mut b, _) = launch(
        &[&file],
        &group,
        dir.join("b.log"),
        &[("OUTBOXD_KAFKA_BOOTSTRAP", other.as_str())],
    );
    let label = format!("connector=\"{name}\"");
    wait_metric(
        &a,
        "outboxd_connector_standbys",
        &label,
        1.0,
        Duration::from_secs(60),
    );
    assert!(
        !b.log_text().contains("is defined differently"),
        "log:\n{}",
        b.log_text()
    );
    assert_eq!(b.stop(), Some(0));
    assert_eq!(a.stop(), Some(0));
}

/// A group's only member that lost its session (frozen by SIGSTOP past the 6 s session
/// timeout) is not told that another member takes its connector over: its log says it was
/// the group's only member and takes the connector back when it rejoins, which it does,
/// and then relays again.
#[tokio::test(flavor = "multi_thread")]
async fn a_lone_member_that_lost_its_session_says_it_takes_the_connector_back() {
    let db = MariaDb::new("gd_lone").await;
    let group = common::unique("gd_lone_group");
    let dir = test_dir(db.name());
    let file = member_file(&db, "lone.toml");
    let name = db.name().to_string();
    let (mut m, _) = launch(&[&file], &group, dir.join("lone.log"), &[]);
    m.wait_ready(Duration::from_secs(60));
    let owned = format!("connector=\"{name}\"");
    wait_metric(
        &m,
        "outboxd_connector_owned",
        &owned,
        1.0,
        Duration::from_secs(60),
    );
    // The member count has been looked at (every 5 s): one member.
    let deadline = Instant::now() + Duration::from_secs(30);
    while !m.metrics().lines().any(|l| l == "outboxd_group_members 1") {
        assert!(Instant::now() < deadline, "{}", m.metrics());
        std::thread::sleep(Duration::from_millis(300));
    }
    let pid = m.pid().unwrap().to_string();
    let signal = |sig: &str| {
        let ok = std::process::Command::new("kill")
            .args([sig, &pid])
            .status()
            .unwrap();
        assert!(ok.success());
    };
    signal("-STOP");
    std::thread::sleep(Duration::from_secs(10));
    signal("-CONT");
    let line = wait_log_line(&m, &["revoked (lost session"], Duration::from_secs(30));
    assert!(
        line.contains("while it was the group's only member"),
        "{line}"
    );
    assert!(line.contains("no other member takes it over"), "{line}");
    assert!(!line.contains("another member takes it over"), "{line}");
    wait_log_line(&m, &["back to this member"], Duration::from_secs(60));
    let e = event("Lone", "after-rejoin", 1);
    db.insert(std::slice::from_ref(&e), false).await;
    let got = read_expecting(&[topic(&db, "Lone")], 1);
    assert_eq!(got.len(), 1, "{}", m.log_text());
    assert_eq!(m.stop(), Some(0), "{}", m.log_text());
}
