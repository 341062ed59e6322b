//! Issue 25 on MariaDB, against the real services: the paths that lost outbox events without
//! a word, or stopped where they could be delivered.
//!
//! * a configured outbox table that does not exist: `run` refuses, as `check` does, so the
//!   checkpoint does not move past rows written meanwhile to the real table;
//! * an outbox table dropped while streaming: a stop right after the DROP (a swap by `RENAME
//!   TABLE` goes on), and a table created again is delivered from there;
//! * an outbox INSERT (and a `LOAD DATA`) logged as a statement by a session with
//!   `binlog_format=STATEMENT`: a stop before its transaction, naming its GTID, and the
//!   documented way past it;
//! * XA transactions: a prepared one's rows are delivered at its `XA COMMIT` (from another
//!   connection), exactly once across a `kill -9` between PREPARE and COMMIT, nothing at
//!   `XA ROLLBACK`, `XA COMMIT ... ONE PHASE` like any transaction;
//! * `check` fails a `binlog_row_image` that can leave out a column the router reads.

mod common;

use std::time::{Duration, Instant};

use common::edges::{self, event, ids};
use common::kafka::read_topics;
use common::mariadb::{insert_events, MariaDb};
use common::relay::{run_cli, Relay};
use common::suite::{self, topic, write_config_full, SourceDb, EXACTLY_ONCE};
use common::OutboxEvent;
use mysql_async::prelude::Queryable;

/// The sequence number of a MariaDB GTID `domain-server-seq`.
fn seq_of(gtid: &str) -> u64 {
    gtid.rsplit('-').next().unwrap().parse().unwrap()
}

/// `gtid` with its sequence number lowered by one: the position right before it (one
/// domain, one server: the tests' MariaDB).
fn before(gtid: &str) -> String {
    let (head, _) = gtid.rsplit_once('-').unwrap();
    format!("{head}-{}", seq_of(gtid) - 1)
}

/// Waits (at most 30 s) until the stored checkpoint satisfies `ok`; returns it.
fn stored_when(path: &std::path::Path, ok: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let at = edges::stored_position(path);
        if ok(&at) {
            return at;
        }
        assert!(Instant::now() < deadline, "checkpoint stays at {at}");
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// Rolls back (at the end of a test, also a failed one) the XA transactions it may have
/// left prepared: XIDs are server-wide, and a prepared one holds its locks for ever.
struct XaCleanup(Vec<String>);

impl Drop for XaCleanup {
    fn drop(&mut self) {
        let xids = std::mem::take(&mut self.0);
        common::run_to_end(async move {
            let pool = mysql_async::Pool::new(
                mysql_async::Opts::from_url(&common::mariadb::admin_url()).unwrap(),
            );
            if let Ok(mut c) = pool.get_conn().await {
                for xid in xids {
                    let _ = c.query_drop(format!("XA ROLLBACK '{xid}'")).await;
                }
            }
            let _ = pool.disconnect().await;
        });
    }
}

/// `XA COMMIT` / `XA ROLLBACK` (`sql`) from another connection than the one that prepared
/// it: until the server has ended that (disconnected) session, the XID is unknown
/// (XAER_NOTA, 1397) to the others, so this retries for a while.
async fn xa_outcome(db: &MariaDb, sql: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let mut c = db.pool.get_conn().await.unwrap();
        match c.query_drop(sql).await {
            Ok(()) => return,
            Err(mysql_async::Error::Server(e)) if e.code == 1397 && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("{sql}: {e}"),
        }
    }
}

/// Runs `sql` on a fresh connection to `db`'s database and returns `@@last_gtid` after it.
async fn exec_gtid(db: &MariaDb, sql: &str) -> String {
    let mut c = db.pool.get_conn().await.unwrap();
    c.query_drop(sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    c.query_first::<String, _>("SELECT @@last_gtid")
        .await
        .unwrap()
        .unwrap()
}

/// A connector whose configured outbox table does not exist (a typo) is refused by `run`
/// with `check`'s own message, without touching its checkpoint: rows written to the real
/// table meanwhile are delivered once the configuration is fixed. Before, `run` streamed
/// and moved the checkpoint past them on heartbeats.
#[tokio::test(flavor = "multi_thread")]
async fn a_configured_table_that_does_not_exist_is_refused_by_run_as_by_check() {
    let db = MariaDb::new("s25_missing").await;
    let (path, port) = suite::write_config(&db, &db.outbox_table(), "");
    let (mut relay, e1) = edges::started_with_one_delivered(&db, &path, port).await;
    assert_eq!(relay.stop(), Some(0));
    let checkpoint = edges::stored_position(&path);

    let typo = format!("{}.outbox_evnets", db.db);
    let (typo_path, typo_port) = suite::write_config(&db, &typo, "");
    let cfg = typo_path.to_str().unwrap();
    let said = format!(
        "outbox table {typo} not found (or not visible to the user: it needs a privilege on \
         the table, e.g. SELECT); create it (migrations/mysql) or fix tables"
    );
    let (code, out, _) = run_cli(&["check", "--config", cfg]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains(&format!("[FAIL] {}: table {typo}: {said}", db.name())),
        "{out}"
    );
    let mut typo_relay =
        Relay::launch_with_args(&[cfg], typo_port, typo_path.with_extension("log"));
    let e2 = event("Order", "o-1", 1);
    db.insert(std::slice::from_ref(&e2), false).await;
    let log = edges::expect_failed_exit(&mut typo_relay, Duration::from_secs(60));
    assert!(log.contains(&said), "log:\n{log}");
    assert_eq!(edges::stored_position(&path), checkpoint, "untouched");

    let (path, port) = suite::write_config(&db, &db.outbox_table(), "");
    let mut relay = Relay::start(path, port);
    let got = read_topics(
        &[topic(&db, "Order")],
        2,
        Duration::from_secs(60),
        Duration::from_secs(3),
    );
    suite::assert_exactly_once(&[e1, e2], &got, &relay.log_text());
    assert_eq!(relay.stop(), Some(0));
}

/// On a first start (no checkpoint yet) a configured table that does not exist is refused
/// after the start position is checkpointed: a row written to the real table meanwhile is
/// delivered once the configuration is fixed. Before, the fixed relay started at the then
/// current position and the row was never delivered.
#[tokio::test(flavor = "multi_thread")]
async fn a_first_start_with_a_missing_table_keeps_what_is_written_meanwhile() {
    let db = MariaDb::new("s25_first").await;
    let typo = format!("{}.outbx", db.db);
    let (typo_path, typo_port) = suite::write_config(&db, &typo, "");
    let mut typo_relay = Relay::launch_with_args(
        &[typo_path.to_str().unwrap()],
        typo_port,
        typo_path.with_extension("log"),
    );
    let log = edges::expect_failed_exit(&mut typo_relay, Duration::from_secs(60));
    assert!(
        log.contains(&format!("outbox table {typo} not found")),
        "log:\n{log}"
    );
    let start = edges::stored_position(&typo_path);
    assert!(start.starts_with("mariadb_gtid:"), "{start}");
    let e1 = event("Order", "o-1", 1);
    db.insert(std::slice::from_ref(&e1), false).await;

    let (path, port) = suite::write_config(&db, &db.outbox_table(), "");
    let mut relay = Relay::start(path, port);
    let got = read_topics(
        &[topic(&db, "Order")],
        1,
        Duration::from_secs(60),
        Duration::from_secs(3),
    );
    suite::assert_exactly_once(&[e1], &got, &relay.log_text());
    assert_eq!(relay.stop(), Some(0));
}

/// A view is no outbox table: the binlog logs the rows written through it as rows of its
/// base table, never under the view's name. `check` fails one named in `tables` and `run`
/// refuses it; an outbox table renamed away while streaming, a view put in its place, stops
/// the connector as a drop does. Before, both streamed and moved the checkpoint past every
/// row written through the view without a word.
#[tokio::test(flavor = "multi_thread")]
async fn a_view_in_place_of_the_outbox_table_is_refused() {
    let db = MariaDb::new("s25_view").await;
    db.exec("CREATE VIEW outbox_view AS SELECT * FROM outbox_events")
        .await;
    let view = format!("{}.outbox_view", db.db);
    let (path, port) = suite::write_config(&db, &view, "");
    let cfg = path.to_str().unwrap();
    let said = format!("outbox table {view} is a view");
    let (code, out, _) = run_cli(&["check", "--config", cfg]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains(&format!("[FAIL] {}: table {view}: {said}", db.name())),
        "{out}"
    );
    let mut relay = Relay::launch_with_args(&[cfg], port, path.with_extension("log"));
    let log = edges::expect_failed_exit(&mut relay, Duration::from_secs(60));
    assert!(log.contains(&said), "log:\n{log}");
    // The refused first start checkpointed its start position (in this configuration's file
    // store); the second part runs another store for the same connector: start it afresh.
    let (code, out, err) = run_cli(&["checkpoint", "reset", "--config", cfg]);
    assert_eq!(code, 0, "{out}\n{err}");

    let (path, port) = write_config_full(&db, &db.outbox_table(), "", "", EXACTLY_ONCE, "c.toml");
    let (mut relay, _e1) = edges::started_with_one_delivered(&db, &path, port).await;
    let rename = exec_gtid(&db, "RENAME TABLE outbox_events TO outbox_base").await;
    db.exec("CREATE VIEW outbox_events AS SELECT * FROM outbox_base")
        .await;
    let e2 = event("Order", "o-1", 1);
    db.insert(std::slice::from_ref(&e2), false).await;
    let log = edges::expect_failed_exit(&mut relay, Duration::from_secs(60));
    assert!(
        log.contains(&format!(
            "outbox table {} was renamed to {}.outbox_base (DDL {rename}) and does not exist now",
            db.outbox_table(),
            db.db
        )),
        "log:\n{log}"
    );
    assert_eq!(
        edges::stored_position(&path),
        format!("mariadb_gtid:{rename}")
    );
}

/// An outbox table swapped by `RENAME TABLE a TO old, new TO a` goes on streaming. One
/// dropped while streaming stops the connector right after the DROP (checkpointed there,
/// everything before delivered), naming the table; created again, its rows are delivered
/// from there, exactly once. Before, the relay read on past the DROP without a word.
#[tokio::test(flavor = "multi_thread")]
async fn a_dropped_outbox_table_stops_the_connector_after_the_drop() {
    let db = MariaDb::new("s25_drop").await;
    let (path, port) = write_config_full(&db, &db.outbox_table(), "", "", EXACTLY_ONCE, "c.toml");
    let (mut relay, e1) = edges::started_with_one_delivered(&db, &path, port).await;
    let orders = topic(&db, "Order");

    db.exec(
        "CREATE TABLE outbox_new LIKE outbox_events; \
         RENAME TABLE outbox_events TO outbox_old, outbox_new TO outbox_events",
    )
    .await;
    let e2 = event("Order", "o-1", 1);
    db.insert(std::slice::from_ref(&e2), false).await;
    let got = read_topics(
        std::slice::from_ref(&orders),
        2,
        Duration::from_secs(60),
        Duration::ZERO,
    );
    assert_eq!(ids(&got), vec![e1.id.clone(), e2.id.clone()]);
    assert_eq!(relay.wait_exit(Duration::ZERO), None, "still running");

    let drop = exec_gtid(&db, "DROP TABLE outbox_events").await;
    let log = edges::expect_failed_exit(&mut relay, Duration::from_secs(60));
    assert!(
        log.contains(&format!(
            "outbox table {} was dropped (DDL {drop}) and does not exist now",
            db.outbox_table()
        )) && log.contains(&format!("checkpointed (mariadb_gtid:{drop})")),
        "log:\n{log}"
    );
    assert_eq!(
        edges::stored_position(&path),
        format!("mariadb_gtid:{drop}")
    );

    // Created again while the relay is down: its rows come from the checkpoint on.
    db.exec("CREATE TABLE outbox_events LIKE outbox_old").await;
    let e3 = event("Order", "o-1", 2);
    db.insert(std::slice::from_ref(&e3), false).await;
    relay.spawn();
    let got = read_topics(
        &[orders],
        3,
        Duration::from_secs(60),
        Duration::from_secs(3),
    );
    suite::assert_exactly_once(&[e1, e2, e3], &got, &relay.log_text());
    assert_eq!(relay.stop(), Some(0));
}

/// A session with `binlog_format=STATEMENT` writes its outbox INSERT as a statement. The
/// connector delivers and checkpoints everything before that transaction, and stops
/// naming its GTID, the session format and the `checkpoint set` past it, never the
/// statement's values; `check` warns who can change binlog_format per session. Following
/// the advice (the row re-inserted in ROW format, the transaction stepped past) delivers
/// everything exactly once. A `LOAD DATA` logged as a statement stops the same way. Before,
/// the statement was skipped without a log line.
#[tokio::test(flavor = "multi_thread")]
async fn a_statement_logged_outbox_insert_stops_before_its_transaction() {
    let db = MariaDb::new("s25_stmt").await;
    let (path, port) = write_config_full(&db, &db.outbox_table(), "", "", EXACTLY_ONCE, "c.toml");
    let (code, out, _) = run_cli(&["check", "--config", path.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains(&format!(
            "[warn] {}: binlog_format per session: accounts with SUPER or BINLOG ADMIN can \
             change their own session's binlog_format: ",
            db.name()
        )) && out.contains("'outboxd_admin'@")
            && out.contains("sql_log_bin=0"),
        "{out}"
    );
    let (mut relay, e1) = edges::started_with_one_delivered(&db, &path, port).await;
    let orders = topic(&db, "Order");

    let secret = "statement-secret-payload-7d1f";
    // Its seq puts it after e3: it is written again, in ROW format, after e3.
    let e2 = OutboxEvent::new(
        "Order",
        "o-1",
        "Changed",
        Some(&format!(r#"{{"seq":5,"s":"{secret}"}}"#)),
    );
    let mut c = db.pool.get_conn().await.unwrap();
    c.query_drop("SET SESSION binlog_format = 'STATEMENT'")
        .await
        .unwrap();
    insert_events(&mut c, "outbox_events", std::slice::from_ref(&e2)).await;
    let g2: String = c.query_first("SELECT @@last_gtid").await.unwrap().unwrap();
    drop(c);
    let e3 = event("Order", "o-1", 3);
    db.insert(std::slice::from_ref(&e3), false).await;

    let log = edges::expect_failed_exit(&mut relay, Duration::from_secs(60));
    assert!(
        log.contains(&format!(
            "transaction {g2} wrote outbox table {} with an INSERT logged as a statement",
            db.outbox_table()
        )) && log.contains("binlog_format was STATEMENT or MIXED")
            && log.contains(&format!(
                "delivered and checkpointed (mariadb_gtid:{})",
                before(&g2)
            ))
            && log.contains(&format!("--position mariadb_gtid:{g2}")),
        "log:\n{log}"
    );
    assert!(
        !log.contains(secret) && !log.contains(&e2.id),
        "the statement's values are never logged; log:\n{log}"
    );
    assert_eq!(
        edges::stored_position(&path),
        format!("mariadb_gtid:{}", before(&g2))
    );
    let got = read_topics(
        std::slice::from_ref(&orders),
        1,
        Duration::from_secs(30),
        Duration::from_secs(3),
    );
    assert_eq!(
        ids(&got),
        vec![e1.id.clone()],
        "nothing after the statement"
    );

    // The advice: write the event again in ROW format, step past the transaction.
    db.exec(&format!("DELETE FROM outbox_events WHERE id = '{}'", e2.id))
        .await;
    db.insert(std::slice::from_ref(&e2), false).await;
    let step = edges::proposed_step_past(&log, "binlog_format was STATEMENT");
    edges::checkpoint_set(&path, &step);
    relay.spawn();
    let got = read_topics(
        std::slice::from_ref(&orders),
        3,
        Duration::from_secs(60),
        Duration::from_secs(3),
    );
    suite::assert_exactly_once(
        &[e1.clone(), e3.clone(), e2.clone()],
        &got,
        &relay.log_text(),
    );
    assert_eq!(ids(&got), vec![e1.id.clone(), e3.id.clone(), e2.id.clone()]);

    // LOAD DATA logged as a statement (BEGIN_LOAD_QUERY + EXECUTE_LOAD_QUERY).
    let e4 = event("Order", "o-1", 6);
    let file = std::env::temp_dir().join(format!("{}.tsv", db.name()));
    std::fs::write(
        &file,
        format!(
            "{}\tOrder\to-1\tChanged\t{}\n",
            e4.id,
            e4.payload.as_deref().unwrap()
        ),
    )
    .unwrap();
    let g4 = exec_gtid(
        &db,
        &format!(
            "SET SESSION binlog_format = 'STATEMENT'; LOAD DATA INFILE '{}' INTO TABLE \
             outbox_events (id, aggregate_type, aggregate_id, event_type, payload)",
            file.display()
        ),
    )
    .await;
    let _ = std::fs::remove_file(&file);
    let log = edges::expect_failed_exit(&mut relay, Duration::from_secs(60));
    assert!(
        log.contains(&format!(
            "transaction {g4} wrote outbox table {} with a LOAD DATA logged as a statement",
            db.outbox_table()
        )),
        "log:\n{log}"
    );
}

/// MariaDB logs `SET STATEMENT var = value FOR INSERT ...` and `ANALYZE INSERT ...` as
/// written: statements that write the outbox as surely as a plain INSERT. Each stops the
/// connector before its transaction like any statement-logged outbox write. Before, the
/// statement's first word (`SET`, `ANALYZE`) hid the INSERT and its row was lost without a
/// word.
#[tokio::test(flavor = "multi_thread")]
async fn statements_behind_set_statement_or_analyze_stop_like_any_statement_write() {
    let db = MariaDb::new("s25_stmt_prefix").await;
    let (path, port) = write_config_full(&db, &db.outbox_table(), "", "", EXACTLY_ONCE, "c.toml");
    let (mut relay, _e1) = edges::started_with_one_delivered(&db, &path, port).await;
    let row = |e: &OutboxEvent| {
        format!(
            "INSERT INTO outbox_events (id, aggregate_type, aggregate_id, event_type, payload) \
             VALUES ('{}', 'Order', 'o-1', 'Changed', '{}')",
            e.id,
            e.payload.as_deref().unwrap()
        )
    };
    for (n, prefix) in ["SET STATEMENT max_statement_time = 100 FOR", "ANALYZE"]
        .iter()
        .enumerate()
    {
        let e = event("Order", "o-1", n + 1);
        let g = exec_gtid(
            &db,
            &format!(
                "SET SESSION binlog_format = 'STATEMENT'; {prefix} {}",
                row(&e)
            ),
        )
        .await;
        let log = edges::expect_failed_exit(&mut relay, Duration::from_secs(60));
        assert!(
            log.contains(&format!(
                "transaction {g} wrote outbox table {} with an INSERT logged as a statement",
                db.outbox_table()
            )) && log.contains(&format!("checkpointed (mariadb_gtid:{})", before(&g))),
            "{prefix}: log:\n{log}"
        );
        // Step past it, as the stop proposes, for the next one.
        let from = log.rfind(&format!("transaction {g} wrote")).unwrap();
        let step = edges::proposed_step_past(&log[from..], "binlog_format was STATEMENT");
        edges::checkpoint_set(&path, &step);
        relay.spawn();
        relay.wait_ready(Duration::from_secs(60));
    }
    assert_eq!(relay.stop(), Some(0));
}

/// Stored programs whose bodies write the outbox (a trigger, a procedure: the usual way to
/// fill an outbox from other tables' changes) are logged as one QUERY event with `;`
/// inside. Defining them writes nothing; what their bodies write when they run is logged
/// as rows (ROW format), and delivered. Before, every statement of the body counted as
/// written by the CREATE, so `CREATE TRIGGER ... BEGIN ...; INSERT INTO outbox_events ...;
/// END` stopped a healthy connector as a "statement-logged outbox write", at every restart.
#[tokio::test(flavor = "multi_thread")]
async fn a_stored_program_whose_body_writes_the_outbox_does_not_stop_the_connector() {
    let db = MariaDb::new("s25_trigger").await;
    let (path, port) = write_config_full(&db, &db.outbox_table(), "", "", EXACTLY_ONCE, "c.toml");
    let (mut relay, _e1) = edges::started_with_one_delivered(&db, &path, port).await;
    db.exec(
        "CREATE TRIGGER orders_outbox AFTER INSERT ON orders FOR EACH ROW BEGIN \
           SET @last_order = NEW.id; \
           INSERT INTO outbox_events (aggregate_type, aggregate_id, event_type, payload) \
             VALUES ('Order', CONCAT('o-', NEW.id), 'Created', JSON_OBJECT('seq', 100)); \
         END",
    )
    .await;
    db.exec(
        "CREATE PROCEDURE ship(IN o BIGINT) BEGIN \
           UPDATE orders SET status = 'SHIPPED' WHERE id = o; \
           INSERT INTO outbox_events (aggregate_type, aggregate_id, event_type, payload) \
             VALUES ('Order', CONCAT('o-', o), 'Shipped', JSON_OBJECT('seq', 101)); \
           DROP TABLE IF EXISTS no_such_table_here; \
         END",
    )
    .await;
    db.exec("INSERT INTO orders (customer_id, status) VALUES (7, 'NEW')")
        .await;
    db.exec("CALL ship(LAST_INSERT_ID())").await;
    let got = read_topics(
        &[topic(&db, "Order")],
        3,
        Duration::from_secs(60),
        Duration::from_secs(3),
    );
    assert_eq!(got.len(), 3, "log:\n{}", relay.log_text());
    assert_eq!(relay.wait_exit(Duration::ZERO), None, "still running");
    assert_eq!(relay.stop(), Some(0));
}

/// XA on MariaDB: a prepared XA transaction's outbox rows are held until its `XA COMMIT`
/// (from another connection) and delivered there, after what committed in between; the
/// checkpoint meanwhile resumes before its PREPARE (`xa_pending:`), so a `kill -9` between
/// PREPARE and COMMIT loses nothing and, exactly-once, repeats nothing, whether the COMMIT
/// comes while the relay is down or after it is back. `XA ROLLBACK` delivers nothing; `XA
/// COMMIT ... ONE PHASE` is an ordinary transaction. Before, any XA transaction with outbox
/// rows stopped the connector.
#[tokio::test(flavor = "multi_thread")]
async fn xa_transactions_are_delivered_at_their_commit_exactly_once_across_kill9() {
    let db = MariaDb::new("s25_xa").await;
    let (path, port) = write_config_full(&db, &db.outbox_table(), "", "", EXACTLY_ONCE, "c.toml");
    let (mut relay, e1) = edges::started_with_one_delivered(&db, &path, port).await;
    let orders = topic(&db, "Order");
    // Prepared on a connection that then disconnects; committed from another.
    // XIDs are server-wide: this test's own.
    let xid = |n: u32| format!("{}-x{n}", db.name());
    let _cleanup = XaCleanup((1..10).map(xid).collect());
    let prepare = |xid: String, e: OutboxEvent| {
        let pool = db.pool.clone();
        async move {
            let mut c = pool.get_conn().await.unwrap();
            c.query_drop(format!("XA START '{xid}'")).await.unwrap();
            insert_events(&mut c, "outbox_events", std::slice::from_ref(&e)).await;
            c.query_drop(format!("XA END '{xid}'")).await.unwrap();
            c.query_drop(format!("XA PREPARE '{xid}'")).await.unwrap();
            let gtid: String = c.query_first("SELECT @@last_gtid").await.unwrap().unwrap();
            c.disconnect().await.unwrap();
            gtid
        }
    };
    let wait_for = |n: usize| {
        read_topics(
            std::slice::from_ref(&orders),
            n,
            Duration::from_secs(60),
            Duration::from_secs(2),
        )
    };

    let e2 = event("Order", "o-1", 3);
    let p2 = prepare(xid(2), e2.clone()).await;
    let e3 = event("Order", "o-1", 1);
    db.insert(std::slice::from_ref(&e3), false).await;
    assert_eq!(ids(&wait_for(2)), vec![e1.id.clone(), e3.id.clone()]);
    let pending = stored_when(&path, |p| p.starts_with("xa_pending:"));
    assert!(
        pending.starts_with(&format!("xa_pending:mariadb_gtid:{}@", before(&p2))),
        "resume before the PREPARE {p2}: {pending}"
    );

    // (Each event's seq is its place in commit order, which per-key order checks.)
    // kill -9 between PREPARE and COMMIT; back before the COMMIT.
    relay.kill9();
    relay.spawn();
    relay.wait_ready(Duration::from_secs(60));
    let e4 = event("Order", "o-1", 2);
    db.insert(std::slice::from_ref(&e4), false).await;
    assert_eq!(
        ids(&wait_for(3)),
        vec![e1.id.clone(), e3.id.clone(), e4.id.clone()]
    );
    xa_outcome(&db, &format!("XA COMMIT '{}'", xid(2))).await;
    assert_eq!(
        ids(&wait_for(4)),
        vec![e1.id.clone(), e3.id.clone(), e4.id.clone(), e2.id.clone()]
    );
    stored_when(&path, |p| p.starts_with("mariadb_gtid:"));

    // kill -9 between PREPARE and COMMIT; the COMMIT while the relay is down.
    let e5 = event("Order", "o-1", 5);
    prepare(xid(5), e5.clone()).await;
    let e6 = event("Order", "o-1", 4);
    db.insert(std::slice::from_ref(&e6), false).await;
    wait_for(5);
    stored_when(&path, |p| p.starts_with("xa_pending:"));
    relay.kill9();
    xa_outcome(&db, &format!("XA COMMIT '{}'", xid(5))).await;

    // Rolled back: nothing. One phase: like any transaction.
    let e7 = event("Order", "o-1", 99);
    prepare(xid(7), e7.clone()).await;
    xa_outcome(&db, &format!("XA ROLLBACK '{}'", xid(7))).await;
    let e8 = event("Order", "o-1", 6);
    let mut c = db.pool.get_conn().await.unwrap();
    c.query_drop(format!("XA START '{}'", xid(8)))
        .await
        .unwrap();
    insert_events(&mut c, "outbox_events", std::slice::from_ref(&e8)).await;
    c.query_drop(format!("XA END '{}'", xid(8))).await.unwrap();
    c.query_drop(format!("XA COMMIT '{}' ONE PHASE", xid(8)))
        .await
        .unwrap();
    drop(c);
    let e9 = event("Order", "o-1", 7);
    db.insert(std::slice::from_ref(&e9), false).await;
    relay.spawn();
    let want = [&e1, &e3, &e4, &e2, &e6, &e5, &e8, &e9];
    let got = read_topics(
        std::slice::from_ref(&orders),
        want.len(),
        Duration::from_secs(60),
        Duration::from_secs(3),
    );
    let log = relay.log_text();
    suite::assert_exactly_once(
        &want.iter().map(|e| (*e).clone()).collect::<Vec<_>>(),
        &got,
        &log,
    );
    assert_eq!(
        ids(&got),
        want.iter().map(|e| e.id.clone()).collect::<Vec<_>>(),
        "commit order; log:\n{log}"
    );
    assert!(!ids(&got).contains(&e7.id), "rolled back");
    stored_when(&path, |p| p.starts_with("mariadb_gtid:"));
    assert_eq!(relay.stop(), Some(0));
}

/// Prepared XA transactions' outbox rows are held in memory, at most `xa_max_held_bytes`:
/// beyond it the connector stops before the transaction that would exceed it, everything
/// before delivered and checkpointed, naming the setting; raised, the restart holds the rows
/// and delivers them at the `XA COMMIT`, exactly once.
#[tokio::test(flavor = "multi_thread")]
async fn prepared_xa_rows_beyond_the_bound_stop_until_it_is_raised() {
    let mut db = MariaDb::new("s25_xa_bound").await;
    db.source_extra = "xa_max_held_bytes = 4096".into();
    let (path, port) = write_config_full(&db, &db.outbox_table(), "", "", EXACTLY_ONCE, "c.toml");
    let (mut relay, e1) = edges::started_with_one_delivered(&db, &path, port).await;
    let xid = format!("{}-big", db.name());
    let _cleanup = XaCleanup(vec![xid.clone()]);
    let big = OutboxEvent::new(
        "Order",
        "o-1",
        "Changed",
        Some(&format!(r#"{{"seq":1,"f":"{}"}}"#, "x".repeat(8000))),
    );
    let mut c = db.pool.get_conn().await.unwrap();
    c.query_drop(format!("XA START '{xid}'")).await.unwrap();
    insert_events(&mut c, "outbox_events", std::slice::from_ref(&big)).await;
    c.query_drop(format!("XA END '{xid}'")).await.unwrap();
    c.query_drop(format!("XA PREPARE '{xid}'")).await.unwrap();
    let p: String = c.query_first("SELECT @@last_gtid").await.unwrap().unwrap();
    c.disconnect().await.unwrap();
    let log = edges::expect_failed_exit(&mut relay, Duration::from_secs(60));
    assert!(
        log.contains(&format!(
            "prepared XA transaction {p} makes the outbox rows held until their XA COMMIT \
             exceed xa_max_held_bytes=4096"
        )) && log.contains(&format!("checkpointed (mariadb_gtid:{})", before(&p))),
        "log:\n{log}"
    );
    assert_eq!(
        edges::stored_position(&path),
        format!("mariadb_gtid:{}", before(&p))
    );
    xa_outcome(&db, &format!("XA COMMIT '{xid}'")).await;

    db.source_extra = "xa_max_held_bytes = 1048576".into();
    let (path, port) = write_config_full(&db, &db.outbox_table(), "", "", EXACTLY_ONCE, "c.toml");
    let mut relay = Relay::start(path, port);
    let got = read_topics(
        &[topic(&db, "Order")],
        2,
        Duration::from_secs(60),
        Duration::from_secs(3),
    );
    suite::assert_exactly_once(&[e1, big], &got, &relay.log_text());
    assert_eq!(relay.stop(), Some(0));
}

/// Restores the TLS twin's global `binlog_row_image` to FULL, also when the test fails.
struct RowImageReset;

impl Drop for RowImageReset {
    fn drop(&mut self) {
        common::run_to_end(async {
            let pool = mysql_async::Pool::new(common::tls::mariadb_admin_opts(None));
            if let Ok(mut c) = pool.get_conn().await {
                let _ = c.query_drop("SET GLOBAL binlog_row_image = 'FULL'").await;
            }
            let _ = pool.disconnect().await;
        });
    }
}

/// `check` fails (instead of warning) when the server's `binlog_row_image` can leave out a
/// column the router reads: MINIMAL with the migration's `id DEFAULT (UUID())` and nullable
/// `payload`, NOBLOB with the nullable JSON `payload`; it only warns once every column the
/// router reads is NOT NULL without a default (an INSERT must name it). On the TLS twin
/// (`mariadb-tls`), whose global setting only this changes, briefly.
#[tokio::test(flavor = "multi_thread")]
async fn check_fails_a_row_image_that_can_leave_out_a_router_column() {
    let mut db = MariaDb::new_tls("s25_image").await;
    db.source_extra = format!(
        "[connectors.source.tls]\nmode = \"verify_ca\"\ntruststore = \"{}\"\n",
        common::tls::file("ca.pem")
    );
    let (path, _) = suite::write_config(&db, &db.outbox_table(), "");
    let cfg = path.to_str().unwrap().to_string();
    let admin = mysql_async::Pool::new(common::tls::mariadb_admin_opts(None));
    let _reset = RowImageReset;
    let check_with = |image: &'static str| {
        let admin = admin.clone();
        let cfg = cfg.clone();
        async move {
            let mut c = admin.get_conn().await.unwrap();
            c.query_drop(format!("SET GLOBAL binlog_row_image = '{image}'"))
                .await
                .unwrap();
            let out = run_cli(&["check", "--config", &cfg]);
            c.query_drop("SET GLOBAL binlog_row_image = 'FULL'")
                .await
                .unwrap();
            out
        }
    };
    let table = db.outbox_table();
    let line = format!("{}: binlog_row_image: binlog_row_image is", db.name());

    let (code, out, _) = check_with("MINIMAL").await;
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains(&format!("[FAIL] {line} MINIMAL"))
            && out.contains(&format!("{table}.id (DEFAULT uuid())"))
            && out.contains(&format!("{table}.payload (NULL allowed)"))
            && !out.contains(&format!("{table}.aggregate_id ("))
            && out.contains("set binlog_row_image=FULL"),
        "{out}"
    );
    let (code, out, _) = check_with("NOBLOB").await;
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains(&format!("[FAIL] {line} NOBLOB"))
            && out.contains(&format!("{table}.payload (NULL allowed)"))
            && !out.contains(&format!("{table}.id (")),
        "{out}"
    );

    db.exec("ALTER TABLE outbox_events MODIFY id CHAR(36) NOT NULL, MODIFY payload JSON NOT NULL")
        .await;
    for image in ["MINIMAL", "NOBLOB"] {
        let (code, out, _) = check_with(image).await;
        assert_eq!(code, 0, "{out}");
        assert!(out.contains(&format!("[warn] {line} {image}")), "{out}");
    }
    let (code, out, _) = run_cli(&["check", "--config", &cfg]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains(&format!("[ok  ] {}: binlog_row_image: FULL", db.name())),
        "{out}"
    );
    admin.disconnect().await.unwrap();
}
