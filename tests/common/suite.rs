//! The acceptance cases every source must pass, written once against [`SourceDb`] and run
//! by each source's integration test file.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;
use std::time::Duration;

use super::kafka::{read_expecting, read_topics, Consumed};
use super::relay::{free_port, test_dir, Relay};
use super::OutboxEvent;

/// What the shared cases need from a source database.
#[allow(async_fn_in_trait)]
pub trait SourceDb {
    /// A short name unique to this test (used for topic names and files).
    fn name(&self) -> &str;
    /// The `[connectors.source]` table body of a connector config, plus `tables = [...]`
    /// lines, for outbox table `table` (fully qualified).
    fn source_toml(&self, table: &str) -> String;
    /// The default outbox table, fully qualified.
    fn outbox_table(&self) -> String;
    /// Inserts `events` in one transaction, committed unless `rollback`.
    async fn insert(&self, events: &[OutboxEvent], rollback: bool);
    /// The seeds' CreateOrderWithOutbox: an order, its items and the outbox rows in one
    /// transaction.
    async fn create_order_with_outbox(
        &self,
        customer_id: i64,
        items: &[(&str, i32, i64)],
        events: &[OutboxEvent],
    );
    /// `UPDATE outbox SET event_type = 'Changed' WHERE id = ?`.
    async fn update_event(&self, id: &str);
    /// `DELETE FROM outbox WHERE id = ?`.
    async fn delete_event(&self, id: &str);
}

/// Topic the tests' router sends aggregate type `agg` to.
pub fn topic<S: SourceDb>(db: &S, agg: &str) -> String {
    format!("{}.{agg}", db.name())
}

/// `[connectors.checkpoint]` body: the Kafka store, exactly-once (the default store).
pub const EXACTLY_ONCE: &str = "store = \"kafka\"\ndelivery = \"exactly_once\"";
/// `[connectors.checkpoint]` body: the Kafka store without transactions.
pub const AT_LEAST_ONCE_KAFKA: &str = "store = \"kafka\"\ndelivery = \"at_least_once\"";

/// Writes a TOML connector config for `db` and returns (path, metrics port).
/// `router_extra` adds lines to `[connectors.router]`. The checkpoint is a file store.
pub fn write_config<S: SourceDb>(db: &S, table: &str, router_extra: &str) -> (PathBuf, u16) {
    write_config_with(
        db,
        table,
        router_extra,
        &file_checkpoint(db),
        "connector.toml",
    )
}

/// A `[connectors.checkpoint]` body for a file store in `db`'s test directory.
pub fn file_checkpoint<S: SourceDb>(db: &S) -> String {
    let checkpoint = test_dir(db.name()).join("checkpoint.json");
    format!("store = \"file\"\npath = \"{}\"", checkpoint.display())
}

/// Like [`write_config`] with `checkpoint` as the `[connectors.checkpoint]` body, written to
/// `file_name` in the test's directory (a fresh source `server_id` each time).
pub fn write_config_with<S: SourceDb>(
    db: &S,
    table: &str,
    router_extra: &str,
    checkpoint: &str,
    file_name: &str,
) -> (PathBuf, u16) {
    write_config_full(db, table, router_extra, "", checkpoint, file_name)
}

/// Like [`write_config_with`], with `kafka_extra` added to `[connectors.kafka]`; tables
/// after `[connectors.checkpoint]` (e.g. `[connectors.errors]`) may follow in `checkpoint`.
pub fn write_config_full<S: SourceDb>(
    db: &S,
    table: &str,
    router_extra: &str,
    kafka_extra: &str,
    checkpoint: &str,
    file_name: &str,
) -> (PathBuf, u16) {
    let rest = format!(
        r#"[connectors.kafka]
bootstrap_servers = "{bootstrap}"
{kafka_extra}

[connectors.checkpoint]
{checkpoint}"#,
        bootstrap = super::kafka_bootstrap(),
    );
    write_connector(db, table, router_extra, &rest, file_name)
}

/// Writes a TOML connector config for `db` (its default outbox table, the tests' standard
/// routing) delivering to another broker: `sink` is the `[connectors.sink]` table, and any
/// tables after it (e.g. `[connectors.checkpoint]`). Written to `file_name` in the test's
/// directory with a free metrics port; returns (path, metrics port).
pub fn write_sink_config<S: SourceDb>(db: &S, sink: &str, file_name: &str) -> (PathBuf, u16) {
    write_connector(db, &db.outbox_table(), "", sink, file_name)
}

/// The one connector file every helper above writes: `[metrics]` on a free port, the
/// connector on `table` of `db`, the tests' standard routing plus `router_extra`, then the
/// tables of `rest`; to `file_name` in the test's directory. Returns (path, metrics port).
fn write_connector<S: SourceDb>(
    db: &S,
    table: &str,
    router_extra: &str,
    rest: &str,
    file_name: &str,
) -> (PathBuf, u16) {
    let port = free_port();
    let cfg = format!(
        r#"[metrics]
listen = "127.0.0.1:{port}"

[[connectors]]
name = "{name}"
{source}

[connectors.router]
"route.topic.replacement" = "{name}.${{routedByValue}}"
"table.fields.additional.placement" = "event_type:header:eventType"
{router_extra}

{rest}
"#,
        name = db.name(),
        source = db.source_toml(table),
    );
    let path = test_dir(db.name()).join(file_name);
    std::fs::write(&path, cfg).unwrap();
    (path, port)
}

/// Starts a relay on `db`'s default outbox table with the tests' standard routing.
pub fn start_relay<S: SourceDb>(db: &S, router_extra: &str) -> Relay {
    let (path, port) = write_config(db, &db.outbox_table(), router_extra);
    Relay::start(path, port)
}

fn payload_of(e: &OutboxEvent) -> Option<Vec<u8>> {
    e.payload.as_ref().map(|p| p.as_bytes().to_vec())
}

/// Asserts that `got` holds exactly `events`, each once, with the record contract
/// (topic, key, value bytes, `id` and `eventType` headers).
pub fn assert_records<S: SourceDb>(db: &S, events: &[OutboxEvent], got: &[Consumed]) {
    let by_id: HashMap<String, &Consumed> = got
        .iter()
        .map(|r| (r.header("id").unwrap_or_default(), r))
        .collect();
    assert_eq!(
        got.len(),
        events.len(),
        "record count; ids: {:?}",
        got.iter().map(|r| r.header("id")).collect::<Vec<_>>()
    );
    for e in events {
        let r = by_id
            .get(&e.id)
            .unwrap_or_else(|| panic!("event {} not delivered", e.id));
        assert_eq!(r.topic, topic(db, &e.aggregate_type));
        assert_eq!(r.key_str().as_deref(), Some(e.aggregate_id.as_str()));
        assert_eq!(r.value, payload_of(e), "value of {}", e.id);
        assert_eq!(
            r.header("eventType").as_deref(),
            Some(e.event_type.as_str())
        );
        assert!(
            r.timestamp_ms.unwrap_or(0) > 1_600_000_000_000,
            "record timestamp set"
        );
        // The test topics are auto-created with 3 partitions: the key must land where the
        // Java client (and so Debezium) would put it.
        assert_eq!(
            r.partition,
            super::java_partition(e.aggregate_id.as_bytes(), 3),
            "partition of key {}",
            e.aggregate_id
        );
    }
}

/// Asserts that, per key, records arrive in the order of the `seq` field of their payloads.
pub fn assert_per_key_order(got: &[Consumed]) {
    let mut last: HashMap<(String, Option<String>), i64> = HashMap::new();
    let mut sorted: Vec<&Consumed> = got.iter().collect();
    sorted.sort_by_key(|r| (r.topic.clone(), r.partition, r.offset));
    for r in sorted {
        let v: serde_json::Value = serde_json::from_slice(r.value.as_ref().unwrap()).unwrap();
        let seq = v["seq"].as_i64().unwrap();
        let k = (r.topic.clone(), r.key_str());
        if let Some(prev) = last.get(&k) {
            assert!(seq > *prev, "key {k:?}: seq {seq} after {prev}");
        }
        last.insert(k, seq);
    }
}

/// Events for `n` sequenced changes spread over `aggregates` aggregates of type `agg`.
pub fn sequenced_events(agg: &str, aggregates: usize, n: usize, pad: usize) -> Vec<OutboxEvent> {
    sequenced_range(agg, aggregates, 0..n, pad)
}

/// Like [`sequenced_events`] for sequence numbers `seqs` (to continue an earlier batch).
pub fn sequenced_range(
    agg: &str,
    aggregates: usize,
    seqs: std::ops::Range<usize>,
    pad: usize,
) -> Vec<OutboxEvent> {
    let filler = "x".repeat(pad);
    seqs.map(|i| {
        let a = i % aggregates;
        OutboxEvent::new(
            agg,
            &format!("{agg}-{a}"),
            "Changed",
            Some(&format!(
                r#"{{"seq":{i},"aggregate":{a},"pad":"{filler}"}}"#
            )),
        )
    })
    .collect()
}

// ---------------------------------------------------------------- cases

/// One INSERT becomes one record with the Debezium EventRouter contract.
pub async fn single_insert<S: SourceDb>(db: &S) {
    let relay = start_relay(db, "");
    let e = OutboxEvent::new(
        "Order",
        "order-1",
        "OrderCreated",
        Some(r#"{"orderId":1,"total":"12.50"}"#),
    );
    db.insert(std::slice::from_ref(&e), false).await;
    let got = read_expecting(&[topic(db, "Order")], 1);
    assert_records(db, &[e], &got);
    let metrics = relay.metrics();
    assert!(
        metrics.contains("outboxd_events_produced_total"),
        "metrics:\n{metrics}"
    );
}

/// The seeds' order flow: order + items + OrderCreated in one transaction, then the saga's
/// steps and, on a failed shipment, its compensations, in order per aggregate.
pub async fn order_saga_flow<S: SourceDb>(db: &S) {
    let _relay = start_relay(db, "");
    let created = OutboxEvent::new(
        "Order",
        "1001",
        "OrderCreated",
        Some(r#"{"orderId":1001,"items":[{"sku":"A-1","qty":2}]}"#),
    );
    db.create_order_with_outbox(
        42,
        &[("A-1", 2, 1250), ("B-7", 1, 999)],
        std::slice::from_ref(&created),
    )
    .await;
    let steps = [
        ("Inventory", "StockReserved"),
        ("Payment", "PaymentCharged"),
        ("Shipment", "ShipmentCreated"),
        ("Payment", "PaymentRefunded"),
        ("Inventory", "StockReleased"),
    ];
    let mut all = vec![created];
    for (agg, ty) in steps {
        let e = OutboxEvent::new(
            agg,
            "1001",
            ty,
            Some(&format!(r#"{{"orderId":1001,"step":"{ty}"}}"#)),
        );
        db.insert(std::slice::from_ref(&e), false).await;
        all.push(e);
    }
    let topics: Vec<String> = ["Order", "Inventory", "Payment", "Shipment"]
        .iter()
        .map(|a| topic(db, a))
        .collect();
    let got = read_expecting(&topics, all.len());
    assert_records(db, &all, &got);
    let payment: Vec<String> = got
        .iter()
        .filter(|r| r.topic == topic(db, "Payment"))
        .map(|r| r.header("eventType").unwrap())
        .collect();
    assert_eq!(payment, ["PaymentCharged", "PaymentRefunded"]);
    let inventory: Vec<String> = got
        .iter()
        .filter(|r| r.topic == topic(db, "Inventory"))
        .map(|r| r.header("eventType").unwrap())
        .collect();
    assert_eq!(inventory, ["StockReserved", "StockReleased"]);
}

/// A rolled-back transaction emits nothing; the committed one after it does.
pub async fn rolled_back_emits_nothing<S: SourceDb>(db: &S) {
    let _relay = start_relay(db, "");
    let lost = OutboxEvent::new(
        "Order",
        "o-rb",
        "OrderCreated",
        Some(r#"{"rolledBack":true}"#),
    );
    db.insert(std::slice::from_ref(&lost), true).await;
    let kept = OutboxEvent::new(
        "Order",
        "o-ok",
        "OrderCreated",
        Some(r#"{"rolledBack":false}"#),
    );
    db.insert(std::slice::from_ref(&kept), false).await;
    let got = read_expecting(&[topic(db, "Order")], 1);
    assert_records(db, &[kept], &got);
}

/// Several transactions with several rows each: every aggregate type reaches its own topic.
pub async fn aggregate_types_get_own_topics<S: SourceDb>(db: &S) {
    let _relay = start_relay(db, "");
    let mut all = Vec::new();
    for round in 0..3 {
        let tx: Vec<OutboxEvent> = ["Order", "Customer", "Payment"]
            .iter()
            .map(|agg| {
                OutboxEvent::new(
                    agg,
                    &format!("{agg}-{round}"),
                    &format!("{agg}Changed"),
                    Some(&format!(r#"{{"round":{round}}}"#)),
                )
            })
            .collect();
        db.insert(&tx, false).await;
        all.extend(tx);
    }
    let topics: Vec<String> = ["Order", "Customer", "Payment"]
        .iter()
        .map(|a| topic(db, a))
        .collect();
    let got = read_expecting(&topics, all.len());
    assert_records(db, &all, &got);
}

/// 10,000 events over 100 aggregates, in transactions of 50: all delivered once, per
/// aggregate in commit order.
pub async fn ten_thousand_keep_order<S: SourceDb>(db: &S) {
    let _relay = start_relay(db, "");
    let events = sequenced_events("Account", 100, 10_000, 0);
    for chunk in events.chunks(50) {
        db.insert(chunk, false).await;
    }
    let got = read_topics(
        &[topic(db, "Account")],
        events.len(),
        Duration::from_secs(180),
        Duration::from_secs(2),
    );
    assert_records(db, &events, &got);
    assert_per_key_order(&got);
}

/// Stop (SIGTERM) and kill -9 the relay while a writer keeps inserting; after restarts every
/// event is delivered (at-least-once: duplicates allowed, losses not) and per-key order of
/// first deliveries holds.
pub async fn restart_mid_stream_loses_nothing<S: SourceDb>(db: &S) {
    let mut relay = start_relay(db, "");
    let events = sequenced_events("Ledger", 20, 3_000, 200);
    let chunks: Vec<Vec<OutboxEvent>> = events.chunks(10).map(|c| c.to_vec()).collect();
    for (i, chunk) in chunks.iter().enumerate() {
        db.insert(chunk, false).await;
        if i == 100 {
            assert_eq!(
                relay.stop(),
                Some(0),
                "clean stop; log:\n{}",
                relay.log_text()
            );
        }
        if i == 130 {
            relay.spawn();
            relay.wait_ready(Duration::from_secs(60));
        }
        if i == 200 {
            relay.crash_and_restart();
        }
    }
    let got = read_topics(
        &[topic(db, "Ledger")],
        events.len(),
        Duration::from_secs(180),
        Duration::from_secs(3),
    );
    assert_none_lost(&events, &got, &relay.log_text());
    // First delivery of each event per key is in commit order.
    let mut seen = HashSet::new();
    let mut first: Vec<Consumed> = Vec::new();
    let mut sorted = got.clone();
    sorted.sort_by_key(|r| (r.partition, r.offset));
    for r in sorted {
        if seen.insert(r.header("id").unwrap()) {
            first.push(r);
        }
    }
    assert_per_key_order(&first);
}

/// DELETEs on the outbox are dropped silently; UPDATEs warn (default
/// `table.op.invalid.behavior=warn`) and make no record.
pub async fn delete_and_update_make_no_records<S: SourceDb>(db: &S) {
    let relay = start_relay(db, "");
    let a = OutboxEvent::new("Order", "o-a", "OrderCreated", Some(r#"{"n":1}"#));
    db.insert(std::slice::from_ref(&a), false).await;
    db.update_event(&a.id).await;
    db.delete_event(&a.id).await;
    let b = OutboxEvent::new("Order", "o-b", "OrderCreated", Some(r#"{"n":2}"#));
    db.insert(std::slice::from_ref(&b), false).await;
    let got = read_expecting(&[topic(db, "Order")], 2);
    assert_records(db, &[a, b], &got);
    std::thread::sleep(Duration::from_millis(500));
    let log = relay.log_text();
    assert!(
        log.contains("UPDATE") || log.contains("update"),
        "the update is warned about; log:\n{log}"
    );
}

/// `table.op.invalid.behavior=fatal`: an UPDATE stops the relay with a clear error, and
/// the checkpoint stays before it.
pub async fn update_with_fatal_behavior_stops<S: SourceDb>(db: &S) {
    let mut relay = start_relay(db, r#""table.op.invalid.behavior" = "fatal""#);
    let a = OutboxEvent::new("Order", "o-f", "OrderCreated", Some(r#"{"n":1}"#));
    db.insert(std::slice::from_ref(&a), false).await;
    db.update_event(&a.id).await;
    let code = relay.wait_exit(Duration::from_secs(60));
    assert!(
        matches!(code, Some(c) if c != 0),
        "relay must stop with an error; log:\n{}",
        relay.log_text()
    );
    let log = relay.log_text();
    assert!(
        log.contains("table.op.invalid.behavior"),
        "error names the option; log:\n{log}"
    );
    let got = read_expecting(&[topic(db, "Order")], 1);
    assert_records(db, &[a], &got);
}

/// NULL payload: with `route.tombstone.on.empty.payload=true` a tombstone (null value)
/// keyed by the aggregate id.
pub async fn null_payload_tombstone<S: SourceDb>(db: &S) {
    let _relay = start_relay(db, r#""route.tombstone.on.empty.payload" = true"#);
    let e = OutboxEvent::new("Order", "o-del", "OrderDeleted", None);
    db.insert(std::slice::from_ref(&e), false).await;
    let got = read_expecting(&[topic(db, "Order")], 1);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].value, None, "tombstone");
    assert_eq!(got[0].key_str().as_deref(), Some("o-del"));
}

/// 4-byte UTF-8 (emoji, CJK extension B) and a 1 MiB payload arrive byte-identical.
pub async fn utf8_and_large_payloads<S: SourceDb>(db: &S) {
    let _relay = start_relay(db, "");
    let emoji = OutboxEvent::new(
        "Order",
        "заказ-😀",
        "OrderCreated",
        Some(r#"{"note":"😀 𠜎 ü 中","k":"𝄞"}"#),
    );
    let big_text = "é".repeat(512 * 1024); // 1 MiB of UTF-8
    let big = OutboxEvent::new(
        "Order",
        "o-big",
        "OrderCreated",
        Some(&format!(r#"{{"blob":"{big_text}"}}"#)),
    );
    db.insert(std::slice::from_ref(&emoji), false).await;
    db.insert(std::slice::from_ref(&big), false).await;
    let got = read_expecting(&[topic(db, "Order")], 2);
    assert_records(db, &[emoji, big], &got);
}

/// A record without its topic and offset: what must match between two relays.
type RecordBody = (
    Option<Vec<u8>>,
    Option<Vec<u8>>,
    Vec<(String, Vec<u8>)>,
    i32,
);

/// Checks that two record sets are the same records modulo topic prefix.
pub fn same_records(a: &[Consumed], b: &[Consumed]) {
    let norm = |rs: &[Consumed]| -> BTreeMap<String, RecordBody> {
        rs.iter()
            .map(|r| {
                let body = (
                    r.key.clone(),
                    r.value.clone(),
                    r.headers.clone(),
                    r.partition,
                );
                (r.header("id").unwrap(), body)
            })
            .collect()
    };
    assert_eq!(norm(a), norm(b));
}

// ---------------------------------------------------------------- delivery guarantees

/// Asserts that every event of `events` was delivered exactly once (by `id` header) and,
/// per key, in commit order.
pub fn assert_exactly_once(events: &[OutboxEvent], got: &[Consumed], log: &str) {
    assert_exactly_once_unordered(events, got, log);
    assert_per_key_order(got);
}

/// [`assert_exactly_once`] without the order: for a sink that documents that an outage can
/// reorder a key's records (NATS JetStream: a publish that got no acknowledgement while
/// later ones did is published again after them).
#[allow(dead_code)]
pub fn assert_exactly_once_unordered(events: &[OutboxEvent], got: &[Consumed], log: &str) {
    let mut count: HashMap<String, usize> = HashMap::new();
    for r in got {
        *count.entry(r.header("id").unwrap_or_default()).or_default() += 1;
    }
    let missing: Vec<&str> = events
        .iter()
        .filter(|e| !count.contains_key(&e.id))
        .map(|e| e.id.as_str())
        .collect();
    let dups: Vec<(&String, &usize)> = count.iter().filter(|(_, n)| **n > 1).collect();
    assert!(
        missing.is_empty() && dups.is_empty(),
        "{} of {} events missing (e.g. {:?}), {} duplicated (e.g. {:?}); {} records; log tail:\n{}",
        missing.len(),
        events.len(),
        &missing[..missing.len().min(3)],
        dups.len(),
        &dups[..dups.len().min(3)],
        got.len(),
        &log[log.len().saturating_sub(6000)..]
    );
    assert_eq!(got.len(), events.len());
}

/// [`assert_exactly_once`] with `exactly_once`, else [`assert_none_lost`].
pub fn assert_delivered(exactly_once: bool, events: &[OutboxEvent], got: &[Consumed], log: &str) {
    if exactly_once {
        assert_exactly_once(events, got, log);
    } else {
        assert_none_lost(events, got, log);
    }
}

/// Asserts that every event of `events` was delivered at least once (by `id` header).
pub fn assert_none_lost(events: &[OutboxEvent], got: &[Consumed], log: &str) {
    let ids: HashSet<String> = got.iter().filter_map(|r| r.header("id")).collect();
    let missing: Vec<&str> = events
        .iter()
        .filter(|e| !ids.contains(&e.id))
        .map(|e| e.id.as_str())
        .collect();
    assert!(
        missing.is_empty(),
        "{} events lost, e.g. {:?}; log:\n{}",
        missing.len(),
        &missing[..missing.len().min(5)],
        log
    );
}

/// Writes `events` in transactions of 1..=`max_txn` rows with short pauses.
pub async fn write_in_random_transactions<S: SourceDb>(
    db: &S,
    events: &[OutboxEvent],
    max_txn: usize,
) {
    let mut i = 0;
    while i < events.len() {
        let n = 1 + rand::random::<u32>() as usize % max_txn;
        let end = (i + n).min(events.len());
        db.insert(&events[i..end], false).await;
        i = end;
        tokio::time::sleep(Duration::from_millis(rand::random::<u64>() % 15)).await;
    }
}

/// Crashes `relay` (`kill -9`, restarted at once: [`Relay::crash_and_restart`]) `kills`
/// times, 150 to 750 ms apart, on a blocking thread so that a writer can insert meanwhile;
/// the handle gives the relay back, running.
pub fn kill_at_random_moments(relay: Relay, kills: usize) -> tokio::task::JoinHandle<Relay> {
    tokio::task::spawn_blocking(move || {
        let mut relay = relay;
        for _ in 0..kills {
            std::thread::sleep(Duration::from_millis(150 + rand::random::<u64>() % 600));
            relay.crash_and_restart();
        }
        relay
    })
}

/// kill -9 the relay at `kills` random moments while a writer inserts (several aggregates,
/// multi-row transactions). With `exactly_once`, a read_committed consumer must see each
/// event once, in per-aggregate order; otherwise (at-least-once) nothing may be lost.
pub async fn crash_loop<S: SourceDb>(db: &S, checkpoint: &str, exactly_once: bool, kills: usize) {
    let (path, port) = write_config_with(db, &db.outbox_table(), "", checkpoint, "connector.toml");
    let relay = Relay::start(path, port);
    let events = sequenced_events("Wallet", 10, 4_000, 50);
    let killer = kill_at_random_moments(relay, kills);
    let (_, relay) = tokio::join!(write_in_random_transactions(db, &events, 12), killer);
    let relay = relay.unwrap();
    let got = read_topics(
        &[topic(db, "Wallet")],
        events.len(),
        Duration::from_secs(180),
        Duration::from_secs(4),
    );
    let log = relay.log_text();
    if exactly_once {
        assert_exactly_once(&events, &got, &log);
    } else {
        let ids: HashSet<String> = got.iter().filter_map(|r| r.header("id")).collect();
        let missing = events.iter().filter(|e| !ids.contains(&e.id)).count();
        assert_eq!(
            missing,
            0,
            "{missing} events lost; log:\n{}",
            &log[log.len().saturating_sub(6000)..]
        );
        println!(
            "at-least-once: {} records for {} events ({} duplicates)",
            got.len(),
            events.len(),
            got.len() - events.len()
        );
    }
}

/// A second instance of the same connector (same transactional.id) fences the first: the
/// first stops with a clear message and never writes again; every event arrives once.
pub async fn second_instance_fences_first<S: SourceDb>(db: &S) {
    let (path_a, port_a) = write_config_with(db, &db.outbox_table(), "", EXACTLY_ONCE, "a.toml");
    let mut a = Relay::start(path_a, port_a);
    let first = sequenced_range("Order", 3, 0..10, 0);
    db.insert(&first, false).await;
    let got = read_expecting(&[topic(db, "Order")], first.len());
    assert_eq!(got.len(), first.len());
    let (path_b, port_b) = write_config_with(db, &db.outbox_table(), "", EXACTLY_ONCE, "b.toml");
    let mut b = Relay::start(path_b, port_b);
    let second = sequenced_range("Order", 3, 10..20, 0);
    db.insert(&second, false).await;
    let code = a.wait_exit(Duration::from_secs(90));
    let log_a = a.log_text();
    assert!(
        matches!(code, Some(c) if c != 0),
        "the fenced instance must stop with an error; log:\n{log_a}"
    );
    assert!(
        log_a.contains("fenced"),
        "the message says it was fenced; log:\n{log_a}"
    );
    let all: Vec<OutboxEvent> = first.into_iter().chain(second).collect();
    let got = read_expecting(&[topic(db, "Order")], all.len());
    assert_exactly_once(&all, &got, &b.log_text());
    b.stop();
}

/// Peak resident memory of a process in KiB (`VmHWM`).
pub fn peak_rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// One source transaction of `rows` outbox rows is delivered exactly once, split across
/// Kafka transactions, even with a kill -9 in the middle of its delivery; prints the
/// relay's peak memory.
pub async fn huge_transaction_exactly_once<S: SourceDb>(db: &S, rows: usize) {
    let (path, port) =
        write_config_with(db, &db.outbox_table(), "", EXACTLY_ONCE, "connector.toml");
    let mut relay = Relay::start(path, port);
    let events = sequenced_events("Bulk", 50, rows, 20);
    db.insert(&events, false).await;
    // Let part of it through, then crash in the middle.
    let partial = read_topics(
        &[topic(db, "Bulk")],
        rows / 4,
        Duration::from_secs(300),
        Duration::from_millis(1),
    );
    let before = relay.pid().and_then(peak_rss_kib);
    relay.kill9();
    println!(
        "killed after {} of {rows} rows were visible; peak RSS so far {before:?} KiB",
        partial.len()
    );
    relay.spawn();
    relay.wait_ready(Duration::from_secs(120));
    let got = read_topics(
        &[topic(db, "Bulk")],
        rows,
        Duration::from_secs(600),
        Duration::from_secs(4),
    );
    let peak = relay.pid().and_then(peak_rss_kib).unwrap_or(0);
    println!(
        "huge transaction: {rows} rows delivered; relay peak RSS {} MiB",
        peak / 1024
    );
    assert_exactly_once(&events, &got, &relay.log_text());
    assert!(
        peak < 1024 * 1024,
        "relay memory must stay bounded: peak {peak} KiB"
    );
}

/// Runs `scripts/services.sh <args>` (e.g. `stop kafka`), panicking on failure.
pub fn services(args: &[&str]) {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/services.sh");
    let out = std::process::Command::new("bash")
        .arg(script)
        .args(args)
        .output()
        .expect("run services.sh");
    assert!(
        out.status.success(),
        "services.sh {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Kafka stops for a while mid-stream (the broker process is stopped and started again):
/// in exactly-once mode nothing is lost and nothing duplicated.
pub async fn kafka_outage_mid_stream<S: SourceDb>(db: &S) {
    let (path, port) =
        write_config_with(db, &db.outbox_table(), "", EXACTLY_ONCE, "connector.toml");
    let relay = Relay::start(path, port);
    let events = sequenced_events("Invoice", 10, 2_000, 100);
    let outage = tokio::task::spawn_blocking(|| {
        std::thread::sleep(Duration::from_secs(2));
        services(&["stop", "kafka"]);
        std::thread::sleep(Duration::from_secs(10));
        services(&["start", "kafka"]);
    });
    let (_, o) = tokio::join!(write_in_random_transactions(db, &events, 8), outage);
    o.unwrap();
    let got = read_topics(
        &[topic(db, "Invoice")],
        events.len(),
        Duration::from_secs(300),
        Duration::from_secs(4),
    );
    assert_exactly_once(&events, &got, &relay.log_text());
}

/// SIGTERM while Kafka is down and records are waiting for acknowledgement: the relay stops
/// within its shutdown grace (10 s; the process's stop deadline, 15 s, when a checkpoint
/// write blocks) instead of waiting out librdkafka's timeouts, and exits 1 because its final checkpoint could not cover them. After Kafka and
/// the relay are back every event is delivered: exactly once with `exactly_once`, at least
/// once otherwise. `checkpoint` is the `[connectors.checkpoint]` body.
pub async fn stop_during_kafka_outage<S: SourceDb>(db: &S, checkpoint: &str, exactly_once: bool) {
    let (path, port) = write_config_with(db, &db.outbox_table(), "", checkpoint, "connector.toml");
    let mut relay = Relay::start(path, port);
    let events = sequenced_events("Refund", 5, 600, 100);
    let (before, during) = events.split_at(300);
    write_in_random_transactions(db, before, 5).await;
    let got = read_topics(
        &[topic(db, "Refund")],
        before.len(),
        Duration::from_secs(60),
        Duration::from_secs(3),
    );
    // Every event written before the outage is in the topic before Kafka stops (a record
    // librdkafka counted written without the broker confirming it was lost here once).
    assert_none_lost(before, &got, &relay.log_text());
    services(&["stop", "kafka"]);
    let restart_kafka = scopeguard(|| services(&["start", "kafka"]));
    write_in_random_transactions(db, during, 5).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let signalled = std::time::Instant::now();
    let code = relay.stop();
    let took = signalled.elapsed();
    let log = relay.log_text();
    // The connector's own 10 s grace, or (a checkpoint write to the unreachable Kafka store
    // blocking the at-least-once loop) the process's 15 s stop deadline; plus a margin.
    assert!(
        took < Duration::from_secs(17),
        "stopping took {took:?}, more than the 15 s stop deadline plus a margin; log:\n{log}"
    );
    assert_eq!(
        code,
        Some(1),
        "the last batch was not committed; log:\n{log}"
    );
    assert!(
        log.contains("stopped without a final checkpoint")
            || log.contains("exiting without their final checkpoints"),
        "log:\n{log}"
    );
    drop(restart_kafka);
    relay.spawn();
    relay.wait_ready(Duration::from_secs(120));
    let got = read_topics(
        &[topic(db, "Refund")],
        events.len(),
        Duration::from_secs(180),
        Duration::from_secs(4),
    );
    assert_delivered(exactly_once, &events, &got, &relay.log_text());
}

/// Runs `f` when dropped (also when the test panics), e.g. to restart a stopped service.
pub fn scopeguard(f: impl FnOnce()) -> impl Drop {
    struct Guard<F: FnOnce()>(Option<F>);
    impl<F: FnOnce()> Drop for Guard<F> {
        fn drop(&mut self) {
            if let Some(f) = self.0.take() {
                f();
            }
        }
    }
    Guard(Some(f))
}

/// Creates `topic` (3 partitions) with `max.message.bytes` = `max_bytes`, or sets that on
/// it if it exists.
pub async fn topic_with_max_bytes(topic: &str, max_bytes: usize) {
    use rdkafka::admin::{
        AdminClient, AdminOptions, AlterConfig, NewTopic, ResourceSpecifier, TopicReplication,
    };
    use rdkafka::client::DefaultClientContext;
    let admin: AdminClient<DefaultClientContext> = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", super::kafka_bootstrap())
        .create()
        .expect("kafka admin client");
    let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)));
    let max = max_bytes.to_string();
    let created = admin
        .create_topics(
            &[NewTopic::new(topic, 3, TopicReplication::Fixed(1)).set("max.message.bytes", &max)],
            &opts,
        )
        .await
        .expect("create_topics");
    if created.iter().any(|r| r.is_err()) {
        let altered =
            admin
                .alter_configs(
                    &[AlterConfig::new(ResourceSpecifier::Topic(topic))
                        .set("max.message.bytes", &max)],
                    &opts,
                )
                .await
                .expect("alter_configs");
        assert!(altered.iter().all(|r| r.is_ok()), "{altered:?}");
    }
}

/// A record Kafka refuses (larger than the topic's `max.message.bytes`, within the relay's
/// `kafka.max_record_bytes`), in the middle of a backlog: the relay stops with a definite
/// error naming that event (not its payload, not a record purged with it), and its
/// checkpoint does not pass the event. Once the topic accepts it, a restart delivers that
/// event and what came after: exactly once with `exactly_once`, at least once otherwise.
/// `checkpoint` is the `[connectors.checkpoint]` body.
pub async fn kafka_refusal_stops_then_resumes<S: SourceDb>(
    db: &S,
    checkpoint: &str,
    exactly_once: bool,
) {
    let orders = topic(db, "Order");
    topic_with_max_bytes(&orders, 16 * 1024).await;
    let (path, port) = write_config_with(db, &db.outbox_table(), "", checkpoint, "connector.toml");
    let mut relay = Relay::start(path, port);
    let first = OutboxEvent::new("Order", "o-1", "OrderCreated", Some(r#"{"seq":0}"#));
    db.insert(std::slice::from_ref(&first), false).await;
    read_topics(
        std::slice::from_ref(&orders),
        1,
        Duration::from_secs(60),
        Duration::ZERO,
    );
    // A backlog with the refused event in the middle, so that it shares its produce request
    // and its Kafka transaction with others.
    assert_eq!(relay.stop(), Some(0));
    // Random hex: lz4 cannot shrink it below the topic's limit.
    let secret: String = (0..100_000)
        .map(|_| char::from_digit(rand::random::<u32>() % 16, 16).unwrap())
        .collect();
    let big = OutboxEvent::new(
        "Order",
        "o-2",
        "OrderCreated",
        Some(&format!(r#"{{"seq":0,"blob":"{secret}"}}"#)),
    );
    let before = sequenced_range("Order", 3, 0..300, 10);
    let after = sequenced_range("Order", 3, 300..600, 10);
    write_in_random_transactions(db, &before, 20).await;
    db.insert(std::slice::from_ref(&big), false).await;
    write_in_random_transactions(db, &after, 20).await;
    relay.spawn();
    let code = relay.wait_exit(Duration::from_secs(90));
    let log = relay.log_text();
    assert!(
        matches!(code, Some(c) if c != 0),
        "the relay must stop on a refused record (exit {code:?}); log:\n{log}"
    );
    assert!(
        log.contains("Kafka refused outbox event")
            && log.contains(&format!("{} for topic", big.id)),
        "the error names the refused event {}; log:\n{log}",
        big.id
    );
    assert!(
        !log.contains(&secret[..64]),
        "the log must not contain the payload"
    );
    topic_with_max_bytes(&orders, 1024 * 1024).await;
    relay.spawn();
    relay.wait_ready(Duration::from_secs(120));
    let mut events = vec![first, big];
    events.extend(before);
    events.extend(after);
    let got = read_topics(
        &[orders],
        events.len(),
        Duration::from_secs(120),
        Duration::from_secs(3),
    );
    assert_delivered(exactly_once, &events, &got, &relay.log_text());
}
