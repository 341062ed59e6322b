//! Issue 17's Kafka refusal by ACL, written once against [`SourceDb`]: events for a topic
//! the relay's Kafka user may not write to. The test broker authorizes with KRaft's
//! StandardAuthorizer, open to all unless a resource has ACLs
//! (`docker/kafka/secured.properties`); the relay connects as the SASL user of the SASL_SSL
//! listener, and a topic gets a DENY WRITE ACL for that user (and ALLOW DESCRIBE, so that
//! its metadata still answers: the refusal is the write's).
//!
//! At-least-once, Kafka refuses each record in its delivery report. Exactly-once it refuses
//! the topic for the whole transaction (`AddPartitionsToTxn`), and librdkafka purges what was
//! queued: no record says why.

use std::path::PathBuf;
use std::time::Duration;

use super::edges::{self, event, ids};
use super::kafka::read_topics;
use super::relay::Relay;
use super::suite::{self, topic, write_config_full, SourceDb};
use super::{tls, OutboxEvent};

/// Runs Kafka's AclCommand against the broker's PLAINTEXT listener, whose principal
/// (User:ANONYMOUS) is a super user: `args` after `--bootstrap-server`.
fn acl_command(args: &[&str]) {
    let bootstrap = super::kafka_bootstrap();
    let mut all = vec!["kafka-tool", "AclCommand", "--bootstrap-server", &bootstrap];
    all.extend_from_slice(args);
    suite::services(&all);
}

/// Takes WRITE on `topic` away from the relay's SASL user (DENY WRITE, ALLOW DESCRIBE).
pub fn deny_write(topic: &str) {
    let principal = format!("User:{}", tls::sasl_user());
    for (kind, operation) in [
        ("--allow-principal", "Describe"),
        ("--deny-principal", "Write"),
    ] {
        acl_command(&[
            "--add",
            kind,
            &principal,
            "--operation",
            operation,
            "--topic",
            topic,
        ]);
    }
}

/// Removes every ACL of `topic`: it is open to all again.
pub fn allow_all(topic: &str) {
    acl_command(&["--remove", "--force", "--topic", topic]);
}

/// The environment a relay on the SASL_SSL listener runs with: the harness's plaintext
/// bootstrap override unset, the SASL password for the config's `env` reference.
pub fn sasl_env() -> Vec<(&'static str, String)> {
    vec![
        ("OUTBOXD_KAFKA_BOOTSTRAP", String::new()),
        ("TEST_SASL_PASSWORD", tls::sasl_password()),
    ]
}

/// A connector config for `db` whose Kafka connection (records and checkpoint store) is the
/// SASL_SSL listener as the SASL user (`[kafka]`, where the security settings go);
/// `checkpoint` is the `[connectors.checkpoint]` body (with tables after it, as
/// [`write_config_full`] allows).
pub fn sasl_config<S: SourceDb>(db: &S, checkpoint: &str, file: &str) -> (PathBuf, u16) {
    let kafka = format!(
        "[kafka]\nbootstrap_servers = \"{}\"\n\"security.protocol\" = \"SASL_SSL\"\n\
         \"sasl.mechanism\" = \"SCRAM-SHA-256\"\n\"sasl.username\" = \"{}\"\n\
         \"sasl.password\" = {{ env = \"TEST_SASL_PASSWORD\" }}\n\"ssl.ca.location\" = \"{}\"\n\n",
        tls::kafka_sasl_bootstrap(),
        tls::sasl_user(),
        tls::file("ca.pem"),
    );
    let (path, port) = write_config_full(db, &db.outbox_table(), "", "", checkpoint, file);
    let text = std::fs::read_to_string(&path).unwrap().replace(
        &format!("bootstrap_servers = \"{}\"\n", super::kafka_bootstrap()),
        "",
    );
    std::fs::write(&path, format!("{kafka}{text}")).unwrap();
    (path, port)
}

/// Starts a relay with [`sasl_config`]'s `path` and waits until it is ready.
fn start(path: &std::path::Path, port: u16) -> Relay {
    let env = sasl_env();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let mut relay = Relay::launch_with_env(
        &[path.to_str().unwrap()],
        port,
        path.with_extension("log"),
        &env,
    );
    relay.wait_ready(Duration::from_secs(60));
    relay
}

/// A stop at a topic the relay may not write to, `errors.tolerance=none`: after e0 is
/// delivered and the relay stopped, a backlog of e1 (deliverable), e2 (for the denied
/// topic) and e3 shares one batch. The relay delivers and checkpoints e1 (exactly-once:
/// nothing of e2's transaction or after it), and stops with exit 1 and an error naming e2, its topic and the
/// authorization failure (exactly-once: not a transient failure retried for ever). Once the
/// ACL is gone a restart delivers e2 and e3: exactly once with `exactly_once`, none lost
/// otherwise. `checkpoint` is the `[connectors.checkpoint]` body.
pub async fn a_topic_without_write_access_stops<S: SourceDb>(
    db: &S,
    checkpoint: &str,
    exactly_once: bool,
) {
    let (orders, denied) = (topic(db, "Order"), topic(db, "Denied"));
    suite::topic_with_max_bytes(&denied, 1024 * 1024).await;
    deny_write(&denied);
    let (path, port) = sasl_config(db, checkpoint, "acl.toml");
    let mut relay = start(&path, port);
    let e0 = edges::one_delivered(db).await;
    assert_eq!(relay.stop(), Some(0), "log:\n{}", relay.log_text());
    let (e1, e2, e3) = (
        event("Order", "o-1", 1),
        event("Denied", "o-2", 2),
        event("Order", "o-1", 3),
    );
    for e in [&e1, &e2, &e3] {
        db.insert(std::slice::from_ref(e), false).await;
    }
    relay.spawn();
    let log = edges::expect_failed_exit(&mut relay, Duration::from_secs(120));
    for part in [
        format!("outbox event {} in {}", e2.id, db.outbox_table()),
        format!("Kafka refused outbox event {} for topic {denied}", e2.id),
        "Topic authorization failed".to_string(),
        "Everything before its source transaction is delivered and checkpointed".to_string(),
    ] {
        assert!(log.contains(&part), "{part:?} in the log:\n{log}");
    }
    let got = read_topics(
        std::slice::from_ref(&orders),
        2,
        Duration::from_secs(60),
        Duration::from_secs(3),
    );
    let delivered = ids(&got);
    assert!(delivered.contains(&e1.id), "{delivered:?}; log:\n{log}");
    if exactly_once {
        // e3 went into the aborted transaction with e2; at-least-once it may have been
        // acknowledged before e2's refusal was known (and is delivered again below).
        assert_eq!(delivered, vec![e0.id.clone(), e1.id.clone()]);
    }
    allow_all(&denied);
    relay.spawn();
    relay.wait_ready(Duration::from_secs(60));
    let want = [e0, e1, e2, e3];
    let got = read_topics(
        &[orders, denied],
        want.len(),
        Duration::from_secs(90),
        Duration::from_secs(3),
    );
    suite::assert_delivered(exactly_once, &want, &got, &relay.log_text());
    assert_eq!(relay.stop(), Some(0));
}

/// The same topic with `errors.tolerance=all`, exactly-once: events for it between good
/// ones, in several source transactions, become dead letters (with their value: it was the
/// ACL, not the size), in source order and exactly once, and every good event is delivered
/// exactly once; the denied topic gets nothing.
pub async fn a_topic_without_write_access_is_dead_lettered<S: SourceDb>(db: &S) {
    let (orders, denied) = (topic(db, "Order"), topic(db, "Denied"));
    let dlq = format!("{}.dlq", db.name());
    suite::topic_with_max_bytes(&denied, 1024 * 1024).await;
    deny_write(&denied);
    let checkpoint = format!(
        "{}\n\n[connectors.errors]\ntolerance = \"all\"\ndead_letter_topic = \"{dlq}\"",
        suite::EXACTLY_ONCE
    );
    let (path, port) = sasl_config(db, &checkpoint, "acl-dlq.toml");
    let mut relay = start(&path, port);
    let mut good = Vec::new();
    let mut poisons: Vec<OutboxEvent> = Vec::new();
    let mut all = Vec::new();
    for i in 0..120usize {
        let e = if i % 17 == 3 {
            let e = event("Denied", &format!("o-{}", i % 3), i);
            poisons.push(e.clone());
            e
        } else {
            let e = suite::sequenced_range("Order", 3, i..i + 1, 10).remove(0);
            good.push(e.clone());
            e
        };
        all.push(e);
    }
    assert!(poisons.len() >= 5);
    suite::write_in_random_transactions(db, &all, 6).await;
    let got = read_topics(
        std::slice::from_ref(&orders),
        good.len(),
        Duration::from_secs(180),
        Duration::from_secs(3),
    );
    let log = relay.log_text();
    suite::assert_exactly_once(&good, &got, &log);
    let dead = read_topics(
        std::slice::from_ref(&dlq),
        poisons.len(),
        Duration::from_secs(60),
        Duration::from_secs(3),
    );
    let want: Vec<String> = poisons.iter().map(|p| p.id.clone()).collect();
    assert_eq!(ids(&dead), want, "once each, in source order; log:\n{log}");
    for (r, p) in dead.iter().zip(&poisons) {
        let h = |name: &str| r.header(name).unwrap_or_else(|| panic!("{name} on {r:?}"));
        assert_eq!(h("__connect.errors.topic"), denied);
        assert_eq!(
            h("__connect.errors.exception.class.name"),
            "outboxd.kafka.refused"
        );
        assert!(h("__connect.errors.exception.message").contains("Topic authorization failed"));
        assert_eq!(
            r.value_str(),
            p.payload,
            "kept: it was the ACL, not the size"
        );
    }
    allow_all(&denied);
    let refused = read_topics(&[denied], 0, Duration::from_secs(5), Duration::from_secs(1));
    assert!(refused.is_empty(), "the denied topic got {refused:?}");
    assert_eq!(relay.stop(), Some(0), "log:\n{}", relay.log_text());
}
