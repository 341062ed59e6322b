//! Issue 25 on PostgreSQL, against the real services: a publication that does not carry the
//! outbox. A configured outbox table that does not exist is refused at startup; a table
//! dropped, removed from the publication (and added back), or a publication dropped while
//! the relay streams is a definite stop that names publication and table, never confirms the
//! slot past the rows the publication no longer carried, and says that those rows must be
//! re-inserted (PostgreSQL decodes each change with the publication of its time: they never
//! come out of the slot again); `check` and `status` report it; partitioned outbox tables are
//! delivered, partitions created later included.

mod common;

use std::path::Path;
use std::time::Duration;

use common::edges::{self, event};
use common::kafka::read_topics;
use common::postgres::{db_error, Postgres};
use common::relay::{run_cli, Relay};
use common::suite::{self, topic, SourceDb, EXACTLY_ONCE};
use common::OutboxEvent;

/// The relay's role (owns the outbox tables, so `filtered` may add them to a publication).
fn relay_role(db: &Postgres) -> String {
    db.relay.2.clone()
}

/// Re-inserts outbox rows `events` (still in the table, never streamed): delete and insert
/// them again in one transaction, as the stop's message asks.
async fn reinsert(db: &Postgres, events: &[OutboxEvent]) {
    let ids = events
        .iter()
        .map(|e| format!("'{}'", e.id))
        .collect::<Vec<_>>()
        .join(", ");
    db.exec(&format!(
        "WITH r AS (DELETE FROM outbox_events WHERE id IN ({ids}) RETURNING *) \
         INSERT INTO outbox_events SELECT * FROM r"
    ))
    .await;
}

/// The slot's `confirmed_flush_lsn` as a byte offset.
async fn confirmed(db: &Postgres) -> i64 {
    db.slot_state().await.expect("the slot").0
}

/// `check` with `config`: (exit code, output).
fn check(config: &Path) -> (i32, String) {
    let (code, out, err) = run_cli(&["check", "--config", config.to_str().unwrap()]);
    (code, format!("{out}\n{err}"))
}

/// `status` with `config`: (exit code, the connector's line).
fn status(config: &Path) -> (i32, serde_json::Value) {
    let (code, out, err) = run_cli(&["status", "--config", config.to_str().unwrap()]);
    let line = out
        .lines()
        .next()
        .unwrap_or_else(|| panic!("no status line: {err}"));
    (code, serde_json::from_str(line).unwrap())
}

/// Reads the `Order` topic until `want.len()` records came (and 3 s more), and asserts each
/// of `want` was delivered exactly once.
fn delivered_exactly_once(db: &Postgres, want: &[OutboxEvent], log: &str) {
    let got = read_topics(
        &[topic(db, "Order")],
        want.len(),
        Duration::from_secs(90),
        Duration::from_secs(3),
    );
    suite::assert_exactly_once(want, &got, log);
}

/// A configured outbox table that does not exist (a typo): `check` fails naming it, and
/// `run` refuses to start with the same message, before creating a slot.
#[tokio::test(flavor = "multi_thread")]
async fn a_missing_outbox_table_is_refused_at_startup() {
    let db = Postgres::new("pg_pub_missing").await;
    let (path, port) = suite::write_config_with(
        &db,
        "public.outbox_evnets",
        "",
        EXACTLY_ONCE,
        "missing.toml",
    );
    let (code, out) = check(&path);
    assert_eq!(code, 1, "{out}");
    let line = format!("[FAIL] {}: table public.outbox_evnets:", db.name());
    assert!(out.contains(&line), "{out}");
    let cfg = path.to_str().unwrap();
    let mut relay = Relay::launch_with_args(&[cfg], port, path.with_extension("log"));
    let log = edges::expect_failed_exit(&mut relay, Duration::from_secs(60));
    assert!(
        log.contains("outbox table public.outbox_evnets not found") && log.contains("fix tables"),
        "log:\n{log}"
    );
    assert!(
        db.slot_state().await.is_none(),
        "no slot for a connector that cannot start; log:\n{log}"
    );
}

/// The outbox table dropped while the relay streams, and a replacement created outside the
/// publication (a migration that swaps tables): the relay stops (exit 1) naming the table and
/// the publication, after delivering what was committed before the drop, and without
/// confirming the slot past the drop; the row written to the replacement never comes out of
/// the slot. After the restart (outboxd adds the new table to its publication) new rows and
/// the re-inserted row are delivered, each once.
#[tokio::test(flavor = "multi_thread")]
async fn a_dropped_outbox_table_stops_before_the_slot_passes_it() {
    let db = Postgres::new("pg_pub_droptable").await;
    let (path, port) =
        suite::write_config_with(&db, &db.outbox_table(), "", EXACTLY_ONCE, "drop.toml");
    let (mut relay, e0) = edges::started_with_one_delivered(&db, &path, port).await;
    db.exec("CREATE TABLE outbox_next (LIKE outbox_events INCLUDING ALL)")
        .await;
    let e1 = event("Order", "o-1", 1);
    db.insert(std::slice::from_ref(&e1), false).await;
    db.exec("DROP TABLE outbox_events").await;
    let dropped = db.current_wal().await;
    db.exec(&format!(
        "ALTER TABLE outbox_next RENAME TO outbox_events; \
         ALTER TABLE outbox_events OWNER TO {}",
        relay_role(&db)
    ))
    .await;
    let lost = event("Order", "gone-1", 2);
    db.insert(std::slice::from_ref(&lost), false).await;
    let log = edges::expect_failed_exit(&mut relay, Duration::from_secs(60));
    assert!(
        log.contains("outbox table public.outbox_events")
            && log.contains(&format!("\"{}\"", db.publication))
            && log.contains("never come out of the replication slot")
            && log.contains("re-insert the outbox rows committed since"),
        "log:\n{log}"
    );
    let at = confirmed(&db).await;
    assert!(
        at < dropped,
        "confirmed_flush_lsn {at} passed the drop ({dropped}); log:\n{log}"
    );
    // check and status report the table the publication does not carry.
    let (_, out) = check(&path);
    assert!(
        out.contains("does not cover outbox table(s) public.outbox_events"),
        "{out}"
    );
    let (code, v) = status(&path);
    assert_eq!(code, 1, "{v}");
    assert!(
        v["uncovered"]
            .as_str()
            .is_some_and(|s| s.contains("does not include outbox table public.outbox_events")),
        "{v}"
    );
    relay.spawn();
    relay.wait_ready(Duration::from_secs(60));
    let e3 = event("Order", "o-1", 3);
    db.insert(std::slice::from_ref(&e3), false).await;
    reinsert(&db, std::slice::from_ref(&lost)).await;
    delivered_exactly_once(&db, &[e0, e1, e3, lost], &relay.log_text());
    assert_eq!(relay.stop(), Some(0));
}

/// The publication an admin made (`publication_autocreate = "disabled"`) loses the outbox
/// table while the relay streams (`ALTER PUBLICATION ... DROP TABLE`): rows written then are
/// never sent by pgoutput. The relay stops (exit 1) naming publication and table, the
/// `ALTER PUBLICATION ... ADD TABLE` that fixes it, and that those rows must be re-inserted;
/// the slot is not confirmed past the ALTER. `check` and `status` report the table; `run`
/// refuses until the admin adds it back; then new rows, and the re-inserted ones, are
/// delivered once each.
#[tokio::test(flavor = "multi_thread")]
async fn a_table_removed_from_the_publication_stops_before_the_slot_passes_it() {
    let db = Postgres::with_publication("pg_pub_alter", "insert").await;
    let (path, port) =
        suite::write_config_with(&db, &db.outbox_table(), "", EXACTLY_ONCE, "alter.toml");
    let (mut relay, e0) = edges::started_with_one_delivered(&db, &path, port).await;
    let e1 = event("Order", "o-1", 1);
    db.insert(std::slice::from_ref(&e1), false).await;
    db.exec(&format!(
        "ALTER PUBLICATION {} DROP TABLE outbox_events",
        db.publication
    ))
    .await;
    let removed = db.current_wal().await;
    let lost = [event("Order", "gone-1", 2), event("Order", "gone-2", 3)];
    db.insert(&lost[..1], false).await;
    db.insert(&lost[1..], false).await;
    let log = edges::expect_failed_exit(&mut relay, Duration::from_secs(60));
    let fix = format!(
        "ALTER PUBLICATION \"{}\" ADD TABLE \"public\".\"outbox_events\"",
        db.publication
    );
    for part in [
        format!(
            "publication \"{}\" does not include outbox table public.outbox_events",
            db.publication
        ),
        fix.clone(),
        "never come out of the replication slot, not even after the publication is fixed"
            .to_string(),
        "re-insert the outbox rows committed since".to_string(),
    ] {
        assert!(log.contains(&part), "{part:?} in the log:\n{log}");
    }
    let at = confirmed(&db).await;
    assert!(
        at < removed,
        "confirmed_flush_lsn {at} passed the ALTER ({removed}); log:\n{log}"
    );
    let (code, out) = check(&path);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains(&format!(
            "[FAIL] {}: publication {}: publication \"{}\" does not cover outbox table(s) \
             public.outbox_events; run `{fix}`",
            db.name(),
            db.publication,
            db.publication
        )) && out.contains("re-insert"),
        "{out}"
    );
    let (code, v) = status(&path);
    assert_eq!(code, 1, "{v}");
    assert!(
        v["uncovered"]
            .as_str()
            .is_some_and(|s| s.contains("does not include outbox table public.outbox_events")),
        "{v}"
    );
    assert_eq!(
        v["publication"]["uncovered"][0].as_str(),
        Some(
            format!(
                "publication \"{}\" does not include outbox table public.outbox_events",
                db.publication
            )
            .as_str()
        ),
        "{v}"
    );
    // Until the admin adds it back, run refuses to start.
    relay.spawn();
    let again = edges::expect_failed_exit(&mut relay, Duration::from_secs(60));
    assert!(again.matches(fix.as_str()).count() >= 2, "log:\n{again}");
    db.exec(&fix).await;
    relay.spawn();
    relay.wait_ready(Duration::from_secs(60));
    let e4 = event("Order", "o-1", 4);
    db.insert(std::slice::from_ref(&e4), false).await;
    let got = read_topics(
        &[topic(&db, "Order")],
        3,
        Duration::from_secs(60),
        Duration::from_secs(3),
    );
    assert_eq!(
        edges::ids(&got),
        [&e0, &e1, &e4].map(|e| e.id.clone()),
        "the rows written while the table was outside the publication are not in the slot"
    );
    reinsert(&db, &lost).await;
    let want = [e0, e1, e4, lost[0].clone(), lost[1].clone()];
    delivered_exactly_once(&db, &want, &relay.log_text());
    assert_eq!(relay.stop(), Some(0));
}

/// The outbox table made `UNLOGGED` while the relay streams, under a `FOR TABLES IN SCHEMA`
/// publication (PostgreSQL refuses it for a table in a `FOR TABLE` publication, not there):
/// its rows are no longer written to the WAL, so logical decoding never sees them. The
/// relay stops (exit 1) naming the table and `ALTER TABLE ... SET LOGGED`, without
/// confirming the slot past the change; `check` fails it and `run` refuses until it is
/// logged again; the rows written meanwhile, re-inserted, are delivered. Before, the relay
/// stayed `streaming` and confirmed the slot past them: lost without a word.
#[tokio::test(flavor = "multi_thread")]
async fn an_unlogged_outbox_table_stops_before_the_slot_passes_its_rows() {
    let mut db = Postgres::new("pg_pub_unlogged").await;
    db.exec(&format!(
        "CREATE PUBLICATION {} FOR TABLES IN SCHEMA public WITH (publish = 'insert')",
        db.publication
    ))
    .await;
    db.autocreate = "disabled";
    let (path, port) =
        suite::write_config_with(&db, &db.outbox_table(), "", EXACTLY_ONCE, "unlogged.toml");
    let (mut relay, e0) = edges::started_with_one_delivered(&db, &path, port).await;
    db.exec("ALTER TABLE outbox_events SET UNLOGGED").await;
    let changed = db.current_wal().await;
    let lost = [event("Order", "gone-1", 1), event("Order", "gone-2", 2)];
    db.insert(&lost[..1], false).await;
    db.insert(&lost[1..], false).await;
    let log = edges::expect_failed_exit(&mut relay, Duration::from_secs(60));
    for part in [
        "outbox table public.outbox_events (or a partition of it) is UNLOGGED",
        "ALTER TABLE \"public\".\"outbox_events\" SET LOGGED",
    ] {
        assert!(log.contains(part), "{part:?} in the log:\n{log}");
    }
    let at = confirmed(&db).await;
    assert!(
        at < changed,
        "confirmed_flush_lsn {at} passed the ALTER ({changed}); log:\n{log}"
    );
    let (code, out) = check(&path);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains(&format!(
            "[FAIL] {}: publication {}: outbox table public.outbox_events (or a partition of \
             it) is UNLOGGED",
            db.name(),
            db.publication
        )),
        "{out}"
    );
    relay.spawn();
    let again = edges::expect_failed_exit(&mut relay, Duration::from_secs(60));
    assert!(
        again.matches("SET LOGGED").count() >= 2,
        "run refuses; log:\n{again}"
    );
    db.exec("ALTER TABLE outbox_events SET LOGGED").await;
    relay.spawn();
    relay.wait_ready(Duration::from_secs(60));
    reinsert(&db, &lost).await;
    let want = [e0, lost[0].clone(), lost[1].clone()];
    delivered_exactly_once(&db, &want, &relay.log_text());
    assert_eq!(relay.stop(), Some(0));
}

/// A row filter on the outbox table (`FOR TABLE outbox_events WHERE (...)`, PostgreSQL 15)
/// publishes only the rows it matches: the others never come out of the slot. `check`
/// warns with the filter, and `run` logs it when it starts; a filter changed while the
/// relay streams is a new catalog entry, and stops it like a removal, saying so. Before,
/// `check` said the publication covers the table and the rows it filtered out were lost
/// without a word.
#[tokio::test(flavor = "multi_thread")]
async fn a_row_filter_on_the_outbox_table_is_reported() {
    let mut db = Postgres::new("pg_pub_filter").await;
    db.exec(&format!(
        "CREATE PUBLICATION {} FOR TABLE outbox_events WHERE (aggregate_type <> 'Secret') \
         WITH (publish = 'insert')",
        db.publication
    ))
    .await;
    db.autocreate = "disabled";
    let (path, port) =
        suite::write_config_with(&db, &db.outbox_table(), "", EXACTLY_ONCE, "filter.toml");
    let said = format!(
        "publication \"{}\" carries only the rows of outbox table public.outbox_events that \
         match its row filter WHERE ((aggregate_type)::text <> 'Secret'::text): outbox rows it \
         filters out are never published, so never delivered",
        db.publication
    );
    let (code, out) = check(&path);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains(&format!(
            "[warn] {}: publication {}: covers public.outbox_events",
            db.name(),
            db.publication
        )) && out.contains(&said),
        "{out}"
    );
    let (mut relay, _e0) = edges::started_with_one_delivered(&db, &path, port).await;
    assert!(relay.log_text().contains(&said), "{}", relay.log_text());
    db.exec(&format!(
        "ALTER PUBLICATION {} SET TABLE outbox_events WHERE (aggregate_type <> 'Other')",
        db.publication
    ))
    .await;
    let log = edges::expect_failed_exit(&mut relay, Duration::from_secs(60));
    assert!(
        log.contains("(or its row filter or column list there was changed"),
        "log:\n{log}"
    );
}

/// The outbox table removed from the publication and added back at once (`publication
/// _autocreate = "filtered"`), a row written in between: no read of the catalog finds it
/// missing, but it is another `pg_publication_rel` entry now, so the relay stops all the
/// same, saying the table is back and the row must be re-inserted.
#[tokio::test(flavor = "multi_thread")]
async fn a_table_removed_and_added_back_at_once_is_noticed() {
    let db = Postgres::new("pg_pub_readd").await;
    let (path, port) =
        suite::write_config_with(&db, &db.outbox_table(), "", EXACTLY_ONCE, "readd.toml");
    let (mut relay, e0) = edges::started_with_one_delivered(&db, &path, port).await;
    let lost = event("Order", "gone-1", 1);
    // Three transactions in one round trip, a few milliseconds: no read of the catalog
    // (every second) is likely to fall in between.
    let p = &db.publication;
    let rows = db
        .client
        .simple_query(&format!(
            "BEGIN; ALTER PUBLICATION {p} DROP TABLE outbox_events; COMMIT; \
             SELECT (pg_current_wal_insert_lsn() - '0/0'::pg_lsn)::int8::text; \
             BEGIN; INSERT INTO outbox_events (id, aggregate_type, aggregate_id, event_type, \
               payload) VALUES ('{}', '{}', '{}', '{}', '{}'); COMMIT; \
             BEGIN; ALTER PUBLICATION {p} ADD TABLE outbox_events; COMMIT",
            lost.id,
            lost.aggregate_type,
            lost.aggregate_id,
            lost.event_type,
            lost.payload.as_deref().unwrap()
        ))
        .await
        .unwrap_or_else(|e| panic!("{}", db_error(&e)));
    let removed: i64 = rows
        .iter()
        .find_map(|m| match m {
            tokio_postgres::SimpleQueryMessage::Row(r) => r.get(0).map(|v| v.parse().unwrap()),
            _ => None,
        })
        .expect("the WAL position after the removal");
    let log = edges::expect_failed_exit(&mut relay, Duration::from_secs(60));
    let back = format!(
        "outbox table public.outbox_events was removed from publication \"{p}\" and added back"
    );
    // A read that fell between the removal and the re-addition finds it missing instead.
    let missing = format!("publication \"{p}\" does not include outbox table public.outbox_events");
    assert!(
        (log.contains(&back) && log.contains("the table is back in the publication now")
            || log.contains(&missing))
            && log.contains("re-insert the outbox rows committed since"),
        "log:\n{log}"
    );
    let at = confirmed(&db).await;
    assert!(
        at < removed,
        "confirmed_flush_lsn {at} passed the removal ({removed}); log:\n{log}"
    );
    relay.spawn();
    relay.wait_ready(Duration::from_secs(60));
    let e2 = event("Order", "o-1", 2);
    db.insert(std::slice::from_ref(&e2), false).await;
    reinsert(&db, std::slice::from_ref(&lost)).await;
    delivered_exactly_once(&db, &[e0, e2, lost], &relay.log_text());
    assert_eq!(relay.stop(), Some(0));
}

/// The publication dropped while the relay streams, a row written then. PostgreSQL cannot
/// decode any change written while the publication does not exist through it, ever: the
/// relay stops (exit 1) naming the publication, without confirming the slot past the drop;
/// `status` and `check` report it. The restart creates the publication again and stops at
/// that change, proposing the `checkpoint set` to where it created it; following it and
/// re-inserting the row delivers it, and new rows, once each.
#[tokio::test(flavor = "multi_thread")]
async fn a_dropped_publication_stops_and_says_how_to_step_past() {
    let db = Postgres::new("pg_pub_droppub").await;
    let (path, port) =
        suite::write_config_with(&db, &db.outbox_table(), "", EXACTLY_ONCE, "droppub.toml");
    let (mut relay, e0) = edges::started_with_one_delivered(&db, &path, port).await;
    db.exec(&format!("DROP PUBLICATION {}", db.publication))
        .await;
    let dropped = db.current_wal().await;
    let lost = event("Order", "gone-1", 1);
    db.insert(std::slice::from_ref(&lost), false).await;
    let log = edges::expect_failed_exit(&mut relay, Duration::from_secs(60));
    let named = format!("publication \"{}\"", db.publication);
    assert!(
        log.contains(&named) && log.contains("does not exist") && log.contains("re-insert"),
        "log:\n{log}"
    );
    let at = confirmed(&db).await;
    assert!(
        at < dropped,
        "confirmed_flush_lsn {at} passed the drop ({dropped}); log:\n{log}"
    );
    let (_, out) = check(&path);
    assert!(
        out.contains("It existed when the connector streamed"),
        "{out}"
    );
    let (code, v) = status(&path);
    assert_eq!(code, 1, "{v}");
    assert!(
        v["uncovered"]
            .as_str()
            .is_some_and(|s| s.contains(&format!("{named} does not exist"))),
        "{v}"
    );
    // The restart creates it again, then meets the change written without it.
    relay.spawn();
    let log = edges::expect_failed_exit(&mut relay, Duration::from_secs(60));
    let marker = "PostgreSQL cannot decode the changes after LSN";
    assert!(
        log.contains(marker) && log.contains("where outboxd created it again"),
        "log:\n{log}"
    );
    let step = edges::proposed_step_past(&log[log.rfind(marker).unwrap()..], marker);
    assert_eq!(step[0], "--position", "{step:?}");
    edges::checkpoint_set(&path, &step);
    relay.spawn();
    relay.wait_ready(Duration::from_secs(60));
    let e2 = event("Order", "o-1", 2);
    db.insert(std::slice::from_ref(&e2), false).await;
    reinsert(&db, std::slice::from_ref(&lost)).await;
    delivered_exactly_once(&db, &[e0, e2, lost], &relay.log_text());
    assert_eq!(relay.stop(), Some(0));
}

/// Turns `db`'s outbox into a table partitioned by range of `created_at`, with one partition
/// for 2000-2100, owned by the relay's role.
async fn partitioned(db: &Postgres) {
    let role = relay_role(db);
    db.exec(&format!(
        "ALTER TABLE outbox_events RENAME TO outbox_plain; \
         CREATE TABLE outbox_events (LIKE outbox_plain INCLUDING DEFAULTS INCLUDING CONSTRAINTS) \
           PARTITION BY RANGE (created_at); \
         DROP TABLE outbox_plain; \
         CREATE TABLE outbox_events_2000 PARTITION OF outbox_events \
           FOR VALUES FROM ('2000-01-01') TO ('2100-01-01'); \
         ALTER TABLE outbox_events OWNER TO {role}; \
         ALTER TABLE outbox_events_2000 OWNER TO {role}"
    ))
    .await;
}

/// Inserts `events` with `created_at` = `at` in one transaction.
async fn insert_at(db: &Postgres, events: &[OutboxEvent], at: &str) {
    for e in events {
        db.client
            .execute(
                "INSERT INTO outbox_events (id, aggregate_type, aggregate_id, event_type, \
                 payload, created_at) \
                 VALUES ($1::text::uuid, $2, $3, $4, $5::text::json, $6::text::timestamptz)",
                &[
                    &e.id,
                    &e.aggregate_type,
                    &e.aggregate_id,
                    &e.event_type,
                    &e.payload,
                    &at,
                ],
            )
            .await
            .unwrap_or_else(|err| panic!("insert: {}", db_error(&err)));
    }
}

/// A partitioned outbox (`PARTITION BY RANGE`) with the publication outboxd creates: rows of
/// every partition are delivered as rows of the outbox table, a partition created while the
/// relay streams included, exactly once across a `kill -9`; `check` says the publication
/// publishes via the partition root.
#[tokio::test(flavor = "multi_thread")]
async fn a_partitioned_outbox_is_delivered_exactly_once() {
    let db = Postgres::new("pg_pub_part").await;
    partitioned(&db).await;
    let (path, port) =
        suite::write_config_with(&db, &db.outbox_table(), "", EXACTLY_ONCE, "part.toml");
    let (mut relay, e0) = edges::started_with_one_delivered(&db, &path, port).await;
    let first: Vec<OutboxEvent> = (1..4).map(|i| event("Order", "o-1", i)).collect();
    db.insert(&first, false).await;
    db.exec(&format!(
        "CREATE TABLE outbox_events_2100 PARTITION OF outbox_events \
           FOR VALUES FROM ('2100-01-01') TO ('2200-01-01'); \
         ALTER TABLE outbox_events_2100 OWNER TO {}",
        relay_role(&db)
    ))
    .await;
    let later: Vec<OutboxEvent> = (4..7).map(|i| event("Order", "o-2", i)).collect();
    insert_at(&db, &later, "2150-06-01 00:00:00+00").await;
    let mut want = vec![e0];
    want.extend(first);
    want.extend(later);
    delivered_exactly_once(&db, &want, &relay.log_text());
    relay.kill9();
    let more = [event("Order", "o-1", 7), event("Order", "o-2", 8)];
    db.insert(&more[..1], false).await;
    insert_at(&db, &more[1..], "2150-06-02 00:00:00+00").await;
    relay.spawn();
    relay.wait_ready(Duration::from_secs(60));
    want.extend(more);
    delivered_exactly_once(&db, &want, &relay.log_text());
    let (code, out) = check(&path);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains(&format!(
            "[ok  ] {}: publication {}: covers public.outbox_events (publish = 'insert', \
             publish_via_partition_root)",
            db.name(),
            db.publication
        )),
        "{out}"
    );
    assert_eq!(relay.stop(), Some(0));
}

/// A partitioned outbox and a publication made without `publish_via_partition_root` (as an
/// admin, or an older outboxd, made it): it would publish the rows under the partitions'
/// names. With `publication_autocreate = "disabled"`, `check` and `run` refuse it, naming
/// the `ALTER PUBLICATION ... SET (publish_via_partition_root = true)` that fixes it; with
/// `"filtered"` the relay runs that very statement itself and delivers the rows.
#[tokio::test(flavor = "multi_thread")]
async fn a_publication_without_publish_via_partition_root_is_refused_or_fixed() {
    let mut db = Postgres::new("pg_pub_viaroot").await;
    partitioned(&db).await;
    db.exec(&format!(
        "CREATE PUBLICATION {p} FOR TABLE outbox_events WITH (publish = 'insert'); \
         ALTER PUBLICATION {p} OWNER TO {}",
        relay_role(&db),
        p = db.publication
    ))
    .await;
    db.autocreate = "disabled";
    let (path, port) =
        suite::write_config_with(&db, &db.outbox_table(), "", EXACTLY_ONCE, "viaroot.toml");
    let fix = format!(
        "ALTER PUBLICATION \"{}\" SET (publish_via_partition_root = true)",
        db.publication
    );
    let (code, out) = check(&path);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("publish_via_partition_root off") && out.contains(&format!("run `{fix}`")),
        "{out}"
    );
    let mut relay =
        Relay::launch_with_args(&[path.to_str().unwrap()], port, path.with_extension("log"));
    let log = edges::expect_failed_exit(&mut relay, Duration::from_secs(60));
    assert!(log.contains(&format!("run `{fix}`")), "log:\n{log}");
    // The same statement, run by the relay's role, makes it work.
    db.autocreate = "filtered";
    let (path, port) =
        suite::write_config_with(&db, &db.outbox_table(), "", EXACTLY_ONCE, "viaroot.toml");
    let (mut relay, e0) = edges::started_with_one_delivered(&db, &path, port).await;
    let log = relay.log_text();
    assert!(
        log.contains(&format!(
            "changed the publication to carry the outbox: {fix}"
        )),
        "log:\n{log}"
    );
    let e1 = event("Order", "o-1", 1);
    db.insert(std::slice::from_ref(&e1), false).await;
    delivered_exactly_once(&db, &[e0, e1], &relay.log_text());
    assert_eq!(relay.stop(), Some(0));
}
