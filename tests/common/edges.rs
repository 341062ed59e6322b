//! The edge cases of issue 17 that every source must pass, written once against
//! [`SourceDb`]: an event that cannot be delivered (stop after committing what is ahead of
//! it, then step past it; or the dead-letter topic, exactly once across `kill -9`), and a
//! record larger than the old producer queue.

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use super::kafka::{read_topics, Consumed};
use super::relay::{run_cli, Relay};
use super::suite::{self, topic, write_config_full, SourceDb, EXACTLY_ONCE};
use super::OutboxEvent;

/// `aggregate_type` of an event whose topic is not a legal Kafka topic name.
pub const BAD_TYPE: &str = "bad topic/name";

/// An event routed to `agg` with payload `{"seq":n}`.
pub fn event(agg: &str, key: &str, seq: usize) -> OutboxEvent {
    OutboxEvent::new(agg, key, "Changed", Some(&format!(r#"{{"seq":{seq}}}"#)))
}

/// The ids of `records`, in (topic, partition, offset) order.
pub fn ids(records: &[Consumed]) -> Vec<String> {
    let mut sorted: Vec<&Consumed> = records.iter().collect();
    sorted.sort_by_key(|r| (r.topic.clone(), r.partition, r.offset));
    sorted.iter().filter_map(|r| r.header("id")).collect()
}

/// The `--position ...` (and `--skip N`) of the first `outboxd checkpoint set` the log
/// proposes after `after`, as CLI arguments.
pub fn proposed_step_past(log: &str, after: &str) -> Vec<String> {
    let from = log.find(after).unwrap_or(0);
    let at = log[from..]
        .find("outboxd checkpoint set --config <its file>")
        .map(|i| from + i)
        .unwrap_or_else(|| panic!("no checkpoint set proposed; log:\n{log}"));
    let cmd = &log[at..at
        + log[at..]
            .find('`')
            .expect("the command ends with a backtick")];
    let mut out = Vec::new();
    let mut words = cmd.split_whitespace();
    while let Some(w) = words.next() {
        if w == "--position" || w == "--skip" {
            out.push(w.to_string());
            out.push(words.next().expect("a value").to_string());
        }
    }
    assert!(out.len() >= 2, "no position in {cmd}");
    out
}

/// Runs `outboxd checkpoint set --config <config>` with `args`.
pub fn checkpoint_set(config: &Path, args: &[String]) {
    let mut cli = vec!["checkpoint", "set", "--config", config.to_str().unwrap()];
    cli.extend(args.iter().map(String::as_str));
    let (code, out, err) = run_cli(&cli);
    assert_eq!(code, 0, "checkpoint set {args:?}: {out}\n{err}");
}

/// Starts the relay of `config` (metrics on `port`) and waits until a first event of
/// `db`'s is delivered (so a checkpoint exists); returns the relay and that event.
pub async fn started_with_one_delivered<S: SourceDb>(
    db: &S,
    config: &Path,
    port: u16,
) -> (Relay, OutboxEvent) {
    let relay = Relay::start(config.to_path_buf(), port);
    (relay, one_delivered(db).await)
}

/// Inserts a first event for `db`'s `Order` topic and waits (at most 60 s) until a relay
/// delivered it; returns it.
pub async fn one_delivered<S: SourceDb>(db: &S) -> OutboxEvent {
    let first = event("Order", "o-1", 0);
    db.insert(std::slice::from_ref(&first), false).await;
    read_topics(
        &[topic(db, "Order")],
        1,
        Duration::from_secs(60),
        Duration::ZERO,
    );
    first
}

/// Waits (at most `within`) for the relay to stop by itself with a failure: exit status 1,
/// as the README promises for a connector that fails definitely; returns its log.
pub fn expect_failed_exit(relay: &mut Relay, within: Duration) -> String {
    let code = relay.wait_exit(within);
    let log = relay.log_text();
    assert_eq!(
        code,
        Some(1),
        "the relay must stop with an error, exit 1; log:\n{log}"
    );
    log
}

/// Runs `outboxd run --config <config>` (its `[metrics]` on `metrics_port`, the log beside
/// the file), which must stop by itself within `within` with a failure ([`expect_failed_exit`]);
/// returns its log.
pub fn run_expecting_failure(config: &Path, metrics_port: u16, within: Duration) -> String {
    let mut relay = Relay::launch_with_args(
        &[config.to_str().unwrap()],
        metrics_port,
        config.with_extension("log"),
    );
    expect_failed_exit(&mut relay, within)
}

/// The stored checkpoint's position as `outboxd checkpoint show` gives it, `kind:value`.
pub fn stored_position(config: &Path) -> String {
    let (code, out, err) = run_cli(&["checkpoint", "show", "--config", config.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}\n{err}");
    let v: serde_json::Value = serde_json::from_str(out.lines().next().unwrap()).unwrap();
    let p = &v["checkpoint"]["position"];
    format!(
        "{}:{}",
        p["kind"].as_str().unwrap(),
        p["value"].as_str().unwrap()
    )
}

/// `outboxd checkpoint reset` with `config` removes checkpoint `old` (`kind:value`) and
/// says that the gap is not delivered; the restarted relay then starts fresh: a new event is
/// delivered after `delivered` (the ids `db`'s `Order` topic held), and nothing of the gap.
pub async fn reset_then_start_fresh<S: SourceDb>(
    db: &S,
    relay: &mut Relay,
    config: &Path,
    old: &str,
    delivered: &[String],
) {
    let (code, out, err) = run_cli(&["checkpoint", "reset", "--config", config.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(
        out.contains(&format!("checkpoint {old} removed")) && out.contains("will not be delivered"),
        "{out}"
    );
    relay.spawn();
    relay.wait_ready(Duration::from_secs(60));
    let fresh = event("Order", "o-1", 99);
    db.insert(std::slice::from_ref(&fresh), false).await;
    let mut want = delivered.to_vec();
    want.push(fresh.id);
    let got = read_topics(
        &[topic(db, "Order")],
        want.len(),
        Duration::from_secs(60),
        Duration::from_secs(3),
    );
    assert_eq!(ids(&got), want, "the events of the gap are not delivered");
    assert_eq!(relay.stop(), Some(0));
}

/// Issue 17, case 2: e1, e2 committed, then a transaction with a good event, e3 whose topic
/// is illegal and another good one, then e4, all in one backlog (so one Kafka transaction).
/// The relay delivers and checkpoints e1 and e2, nothing of e3's transaction, and stops
/// with an error naming e3 and the `checkpoint set` past its transaction; following it
/// delivers e4 and what comes next, and e2 is never lost. `exactly_once`: nothing is
/// duplicated either.
pub async fn poison_stop_commits_ahead_then_steps_past<S: SourceDb>(
    db: &S,
    checkpoint: &str,
    exactly_once: bool,
) {
    let (path, port) = write_config_full(db, &db.outbox_table(), "", "", checkpoint, "poison.toml");
    let orders = topic(db, "Order");
    let (mut relay, e0) = started_with_one_delivered(db, &path, port).await;
    assert_eq!(relay.stop(), Some(0), "log:\n{}", relay.log_text());
    let (e1, e2, e3a, e3c, e4) = (
        event("Order", "o-1", 1),
        event("Order", "o-2", 2),
        event("Order", "o-1", 3),
        event("Order", "o-2", 5),
        event("Order", "o-1", 6),
    );
    let e3 = event(BAD_TYPE, "o-3", 4);
    db.insert(std::slice::from_ref(&e1), false).await;
    db.insert(std::slice::from_ref(&e2), false).await;
    db.insert(&[e3a.clone(), e3.clone(), e3c.clone()], false)
        .await;
    db.insert(std::slice::from_ref(&e4), false).await;
    relay.spawn();
    let log = expect_failed_exit(&mut relay, Duration::from_secs(90));
    for part in [
        format!("outbox event {} in {}", e3.id, db.outbox_table()),
        "row 2 of the source transaction after".to_string(),
        "not a valid Kafka topic name".to_string(),
        "Everything before its source transaction is delivered and checkpointed".to_string(),
        format!(
            "outboxd checkpoint set --config <its file> --connector {} --position",
            db.name()
        ),
    ] {
        assert!(log.contains(&part), "{part:?} in the log:\n{log}");
    }
    let step = proposed_step_past(&log, &e3.id);
    assert_eq!(
        (step[0].as_str(), step.len()),
        ("--position", 2),
        "a transaction step, no --skip: {step:?}"
    );
    let kind = stored_position(&path);
    assert!(
        step[1].starts_with(&kind[..=kind.find(':').unwrap()]),
        "the step names a position of the kind the connector tracks ({kind}): {step:?}"
    );
    let got = read_topics(
        std::slice::from_ref(&orders),
        3,
        Duration::from_secs(60),
        Duration::from_secs(3),
    );
    let delivered = ids(&got);
    for e in [&e0, &e1, &e2] {
        assert!(
            delivered.contains(&e.id),
            "{} delivered: {delivered:?}",
            e.id
        );
    }
    for e in [&e3a, &e3c, &e4] {
        assert!(
            !delivered.contains(&e.id),
            "{} (in or after the stopped transaction) must not be visible yet; log:\n{log}",
            e.id
        );
    }
    if exactly_once {
        assert_eq!(delivered.len(), 3, "{delivered:?}");
    }
    // The documented step-past: exactly that transaction, nothing before it.
    checkpoint_set(&path, &step);
    relay.spawn();
    relay.wait_ready(Duration::from_secs(60));
    let e5 = event("Order", "o-2", 7);
    db.insert(std::slice::from_ref(&e5), false).await;
    let want = [e0, e1, e2, e4, e5];
    let got = read_topics(
        &[orders],
        want.len(),
        Duration::from_secs(90),
        Duration::from_secs(3),
    );
    let delivered = ids(&got);
    for e in [&e3a, &e3c] {
        assert!(!delivered.contains(&e.id), "stepped past: {delivered:?}");
    }
    suite::assert_delivered(exactly_once, &want, &got, &relay.log_text());
    assert_eq!(relay.stop(), Some(0));
}

/// One poison of the dead-letter case: its event and whether Kafka refuses it (else the
/// router does).
struct Poisoned {
    event: OutboxEvent,
    refused: bool,
}

/// Issue 17, case 2, the dead-letter policy: good events with several poison events between
/// them — unroutable ones (illegal topic) and ones Kafka refuses (larger than their topic's
/// `max.message.bytes`) — with a `kill -9` in the middle: while the events are written, once
/// some records and dead letters are visible, and not all. With `exactly_once` a
/// read_committed consumer sees every good event once, in per-aggregate order, and every
/// poison event once on the dead-letter topic, in source order; at-least-once, none is lost
/// and their first appearances keep that order. Dead letters carry headers saying why and
/// where from (never the payload), those of refused records no value (they were too large);
/// the refusing topic gets nothing. `checkpoint` is the
/// `[connectors.checkpoint]` body.
pub async fn dead_letters_in_order<S: SourceDb>(db: &S, checkpoint: &str, exactly_once: bool) {
    let orders = topic(db, "Order");
    let big = topic(db, "Big");
    let dlq = format!("{}.dlq", db.name());
    suite::topic_with_max_bytes(&big, 16 * 1024).await;
    let checkpoint = format!(
        "{checkpoint}\n\n[connectors.errors]\ntolerance = \"all\"\ndead_letter_topic = \"{dlq}\""
    );
    let (path, port) = write_config_full(db, &db.outbox_table(), "", "", &checkpoint, "dlq.toml");
    let mut relay = Relay::start(path, port);
    // Random hex: lz4 cannot shrink it below the topic's limit.
    let secret: String = (0..40_000)
        .map(|_| char::from_digit(rand::random::<u32>() % 16, 16).unwrap())
        .collect();
    let mut good = Vec::new();
    let mut all = Vec::new();
    let mut poisons: Vec<Poisoned> = Vec::new();
    for i in 0..400usize {
        let e = if i % 37 == 5 {
            let e = OutboxEvent::new(
                BAD_TYPE,
                &format!("o-{}", i % 4),
                "Changed",
                Some(&format!(r#"{{"seq":{i},"bad":"{}"}}"#, &secret[..32])),
            );
            poisons.push(Poisoned {
                event: e.clone(),
                refused: false,
            });
            e
        } else if i % 53 == 11 {
            let e = OutboxEvent::new(
                "Big",
                &format!("o-{}", i % 4),
                "Changed",
                Some(&format!(r#"{{"seq":{i},"blob":"{secret}"}}"#)),
            );
            poisons.push(Poisoned {
                event: e.clone(),
                refused: true,
            });
            e
        } else {
            let e = suite::sequenced_range("Order", 4, i..i + 1, 10).remove(0);
            good.push(e.clone());
            e
        };
        all.push(e);
    }
    assert!(poisons.iter().filter(|p| p.refused).count() >= 5);
    assert!(poisons.iter().filter(|p| !p.refused).count() >= 5);
    // The writer writes two thirds paced, then waits for the kill before the rest; the kill
    // comes once a good record and a dead letter are visible: provably mid-stream (some but
    // not all of either visible, the relay fed while it is killed).
    let (first, rest) = all.split_at(all.len() * 2 / 3);
    let killed = tokio::sync::Notify::new();
    let writer = async {
        let mut i = 0;
        while i < first.len() {
            let end = (i + 1 + rand::random::<u32>() as usize % 6).min(first.len());
            db.insert(&first[i..end], false).await;
            i = end;
            tokio::time::sleep(Duration::from_millis(40)).await;
        }
        killed.notified().await;
        suite::write_in_random_transactions(db, rest, 6).await;
    };
    let killer = async {
        for t in [&orders, &dlq] {
            let t = t.clone();
            tokio::task::spawn_blocking(move || {
                read_topics(&[t], 1, Duration::from_secs(120), Duration::ZERO)
            })
            .await
            .unwrap();
        }
        relay.kill9();
        let (o, d) = (orders.clone(), dlq.clone());
        let (good_n, dead_n) = (good.len(), poisons.len());
        let (seen_good, seen_dead) = tokio::task::spawn_blocking(move || {
            // Distinct events: at-least-once, a replay may have written some twice.
            let count = |t: &String, n| {
                let got = read_topics(
                    std::slice::from_ref(t),
                    n,
                    Duration::from_secs(5),
                    Duration::ZERO,
                );
                ids(&got)
                    .into_iter()
                    .collect::<std::collections::HashSet<_>>()
                    .len()
            };
            (count(&o, good_n), count(&d, dead_n))
        })
        .await
        .unwrap();
        assert!(
            (1..good.len()).contains(&seen_good) && (1..poisons.len()).contains(&seen_dead),
            "killed mid-stream: {seen_good} of {} records, {seen_dead} of {} dead letters \
             visible at the kill",
            good.len(),
            poisons.len()
        );
        killed.notify_one();
        relay.spawn();
        tokio::task::block_in_place(|| relay.wait_ready(Duration::from_secs(60)));
    };
    tokio::join!(writer, killer);
    let got = read_topics(
        std::slice::from_ref(&orders),
        good.len(),
        Duration::from_secs(180),
        Duration::from_secs(3),
    );
    let log = relay.log_text();
    suite::assert_delivered(exactly_once, &good, &got, &log);
    let dead = read_topics(
        std::slice::from_ref(&dlq),
        poisons.len(),
        Duration::from_secs(60),
        Duration::from_secs(3),
    );
    let mut dead_ids = ids(&dead);
    if !exactly_once {
        // At-least-once: a dead letter may come again after a restart; its first
        // appearance keeps its place.
        let mut seen = std::collections::HashSet::new();
        dead_ids.retain(|id| seen.insert(id.clone()));
    }
    let want: Vec<String> = poisons.iter().map(|p| p.event.id.clone()).collect();
    assert_eq!(
        dead_ids,
        want,
        "every poison event once on the dead-letter topic, in source order; log tail:\n{}",
        &log[log.len().saturating_sub(8000)..]
    );
    let by_id: HashMap<String, &Consumed> = dead
        .iter()
        .map(|r| (r.header("id").unwrap_or_default(), r))
        .collect();
    for p in &poisons {
        let r = by_id[&p.event.id];
        let h = |name: &str| r.header(name).unwrap_or_else(|| panic!("{name} on {r:?}"));
        assert_eq!(h("__connect.errors.connector.name"), db.name());
        assert_eq!(h("__outboxd.event.id"), p.event.id);
        assert_eq!(h("__outboxd.source.table"), db.outbox_table());
        assert!(h("__outboxd.source.position").contains(':'), "{r:?}");
        assert!(h("__outboxd.source.row").parse::<u64>().unwrap() >= 1);
        assert!(h("__outboxd.source.commit").contains(':'), "{r:?}");
        assert_eq!(r.key_str().as_deref(), Some(p.event.aggregate_id.as_str()));
        if p.refused {
            assert_eq!(h("__connect.errors.stage"), "KAFKA_PRODUCE");
            assert_eq!(
                h("__connect.errors.exception.class.name"),
                "outboxd.kafka.record_too_large"
            );
            assert_eq!(h("__connect.errors.topic"), big);
            assert!(h("__connect.errors.exception.message").contains("too large"));
            assert_eq!(r.value, None, "a copy would be as large");
            assert!(h("__outboxd.value.dropped").contains("too large"));
            assert!(h("__outboxd.record.bytes").parse::<usize>().unwrap() > 40_000);
        } else {
            assert_eq!(h("__connect.errors.stage"), "TRANSFORMATION");
            assert_eq!(
                h("__connect.errors.exception.class.name"),
                "outboxd.route.invalid_topic"
            );
            assert_eq!(r.value_str(), p.event.payload, "the payload as written");
        }
        for (name, value) in &r.headers {
            assert!(
                !String::from_utf8_lossy(value).contains(&secret[..32]),
                "header {name} carries the payload"
            );
        }
    }
    assert!(
        !log.contains(&secret[..32]),
        "the log must not contain payloads"
    );
    let refused = read_topics(&[big], 0, Duration::from_secs(5), Duration::from_secs(1));
    assert!(refused.is_empty(), "the refusing topic got {refused:?}");
    assert_eq!(relay.stop(), Some(0), "log:\n{}", relay.log_text());
}

/// Issue 17, case 3: after a large event was refused, `kafka.max_record_bytes` and the
/// topic's `max.message.bytes` are raised above it (32 MiB, beyond the old fixed 16 MiB
/// producer queue): a 20 MB event is delivered between small ones, exactly once, and
/// SIGTERM then stops the relay cleanly (exit 0, not the stop deadline's exit 1).
pub async fn twenty_megabyte_event_is_delivered<S: SourceDb>(db: &S) {
    let orders = topic(db, "Order");
    suite::topic_with_max_bytes(&orders, 32 * 1024 * 1024).await;
    let (path, port) = write_config_full(
        db,
        &db.outbox_table(),
        "",
        "max_record_bytes = 33554432",
        EXACTLY_ONCE,
        "large.toml",
    );
    let mut relay = Relay::start(path, port);
    let blob: String = (0..20_000_000)
        .map(|i: u32| char::from(b'a' + (i.wrapping_mul(2_654_435_761) >> 27) as u8 % 26))
        .collect();
    let before = event("Order", "o-1", 0);
    let large = OutboxEvent::new(
        "Order",
        "o-2",
        "Large",
        Some(&format!(r#"{{"seq":1,"blob":"{blob}"}}"#)),
    );
    let after = event("Order", "o-1", 2);
    db.insert(std::slice::from_ref(&before), false).await;
    db.insert(std::slice::from_ref(&large), false).await;
    db.insert(std::slice::from_ref(&after), false).await;
    let want = [before, large, after];
    let got = read_topics(
        std::slice::from_ref(&orders),
        want.len(),
        Duration::from_secs(120),
        Duration::from_secs(3),
    );
    let log = relay.log_text();
    suite::assert_exactly_once(&want, &got, &log);
    // Exit 0: the connector drained and stopped before the process's stop deadline.
    assert_eq!(relay.stop(), Some(0), "log:\n{log}");
}

/// `chars` characters of random text over 64 symbols (6 bits each): lz4 finds next to no
/// matches in it, so its compressed record is as large as it is.
pub fn incompressible(chars: usize) -> String {
    const SYMBOLS: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    (0..chars)
        .map(|_| char::from(SYMBOLS[rand::random::<u8>() as usize % 64]))
        .collect()
}

/// Issue 17 on a broker's defaults: with `errors.tolerance=all`, an event larger than its
/// topic's `max.message.bytes` (a topic created with the broker's defaults: 16 MiB on the
/// test broker, 1 MB on a stock one) but within `kafka.max_record_bytes` (32 MiB here) is
/// refused by Kafka, and its dead letter goes to a dead-letter topic the relay creates:
/// without the value (a copy would be refused just the same), with headers saying why, how
/// large, where from. The stream goes on, exactly once on both topics.
pub async fn too_large_for_its_topic_is_dead_lettered_without_its_value<S: SourceDb>(db: &S) {
    let orders = topic(db, "Order");
    let huge_topic = topic(db, "Huge");
    let dlq = format!("{}.dlq", db.name());
    let checkpoint = format!(
        "{EXACTLY_ONCE}\n\n[connectors.errors]\ntolerance = \"all\"\ndead_letter_topic = \"{dlq}\""
    );
    let (path, port) = write_config_full(
        db,
        &db.outbox_table(),
        "",
        "max_record_bytes = 33554432",
        &checkpoint,
        "huge.toml",
    );
    let (mut relay, e0) = started_with_one_delivered(db, &path, port).await;
    let blob = incompressible(17 * 1024 * 1024);
    let huge = OutboxEvent::new(
        "Huge",
        "o-2",
        "Changed",
        Some(&format!(r#"{{"seq":1,"blob":"{blob}"}}"#)),
    );
    let e2 = event("Order", "o-1", 2);
    db.insert(std::slice::from_ref(&huge), false).await;
    db.insert(std::slice::from_ref(&e2), false).await;
    let got = read_topics(
        std::slice::from_ref(&orders),
        2,
        Duration::from_secs(120),
        Duration::from_secs(3),
    );
    let log = relay.log_text();
    suite::assert_exactly_once(&[e0, e2], &got, &log);
    let dead = read_topics(
        std::slice::from_ref(&dlq),
        1,
        Duration::from_secs(60),
        Duration::from_secs(3),
    );
    assert_eq!(ids(&dead), vec![huge.id.clone()], "log:\n{log}");
    let r = &dead[0];
    let h = |name: &str| r.header(name).unwrap_or_else(|| panic!("{name} on {r:?}"));
    assert_eq!(r.value, None);
    assert_eq!(r.key_str().as_deref(), Some("o-2"));
    assert_eq!(
        h("__connect.errors.exception.class.name"),
        "outboxd.kafka.record_too_large"
    );
    assert_eq!(h("__connect.errors.stage"), "KAFKA_PRODUCE");
    assert_eq!(h("__connect.errors.topic"), huge_topic);
    assert!(h("__outboxd.value.dropped").contains("too large"));
    let size: usize = h("__outboxd.record.bytes").parse().unwrap();
    assert!(size > blob.len(), "{size}");
    assert_eq!(h("__outboxd.event.id"), huge.id);
    assert!(h("__outboxd.source.position").contains(':'));
    assert!(h("__outboxd.source.commit").contains(':'));
    let refused = read_topics(
        &[huge_topic],
        0,
        Duration::from_secs(5),
        Duration::from_secs(1),
    );
    assert!(
        refused.is_empty(),
        "the refusing topic got {} record(s)",
        refused.len()
    );
    assert!(
        !log.contains(&blob[..64]),
        "the log must not contain payloads"
    );
    assert_eq!(relay.stop(), Some(0), "log:\n{}", relay.log_text());
}
