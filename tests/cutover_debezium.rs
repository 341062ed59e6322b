//! Issue 27: switching from a running Debezium to outboxd and back, with nothing lost and
//! nothing duplicated, against real Debezium (Kafka Connect 4.1.1 with the Maven Central
//! classpath: Debezium 3.5.0 MariaDB, 3.6.1 PostgreSQL) on the real MariaDB, PostgreSQL and
//! Kafka.
//!
//! Each switch test: a writer inserts outbox transactions (1-3 events over 6 aggregates,
//! each event's per-aggregate sequence number known) throughout; Debezium delivers; it is
//! stopped (kill -9 of a distributed worker, whose committed offset then lags what it
//! wrote; SIGTERM or KIP-875 `stop` of a standalone one); `outboxd checkpoint
//! import-debezium` (offsets topic, offsets file, REST) and `outboxd run` take over; then
//! outboxd stops, `outboxd checkpoint export-debezium` (offsets topic, offsets file, REST
//! `PATCH`) and Debezium resumes. Every event written must be on the topics exactly once for
//! a `read_committed` consumer, in per-aggregate order; the events outboxd skipped because
//! Debezium had written them are counted (`outboxd_events_skipped_total{reason="debezium"}`)
//! and Debezium's own duplicates after the way back are counted and reported.
//!
//! Also: the import refused while Debezium runs (REST, binlog dump thread, active slot);
//! positions the source no longer serves refused; bad input refused without a change; a
//! mid-transaction offset (`event`/`row`, `lsn_proc`) resuming at the right row, the same
//! row Debezium itself resumes at from that offset; `outboxd diff` of a shadow run.
//!
//! Connect workers of one classpath run one at a time (a lock per plugin): the machines
//! have 2 cores.

mod common;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::connect::{ConnectWorker, Plugin};
use common::kafka::{create_topic, read_topics, Consumed};
use common::mariadb::MariaDb;
use common::postgres::Postgres;
use common::relay::{free_port, metric, run_cli, Relay};
use mysql_async::prelude::Queryable;
use serde_json::{json, Map, Value};

/// One Connect worker per classpath at a time.
static MARIADB_CONNECT: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
static POSTGRES_CONNECT: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Aggregates the writer spreads events over; even ones are `Order`s, odd ones `Payment`s.
const AGGREGATES: usize = 6;

/// One event the writer committed.
#[derive(Debug, Clone)]
struct Written {
    id: String,
    aggregate: String,
    seq: u64,
}

/// The source database of a scenario.
enum Db {
    Maria {
        db: MariaDb,
        /// Debezium's own account (dropped at the end).
        user: String,
    },
    Pg(Postgres),
}

impl Db {
    /// A MariaDB database with table `ob` (Debezium's default outbox columns) and an account
    /// of its own for Debezium (and for outboxd, which runs on the same connector JSON).
    async fn maria(prefix: &str) -> Db {
        let db = MariaDb::new(prefix).await;
        db.exec(
            "CREATE TABLE ob (id CHAR(36) PRIMARY KEY, aggregatetype VARCHAR(64) NOT NULL,
               aggregateid VARCHAR(64) NOT NULL, type VARCHAR(64) NOT NULL, payload LONGTEXT);
             CREATE TABLE other (id INT AUTO_INCREMENT PRIMARY KEY, v INT)",
        )
        .await;
        let user = format!("dbz{}", &db.db[db.db.len().saturating_sub(12)..]).replace('_', "");
        db.exec(&format!(
            "CREATE USER '{user}'@'%' IDENTIFIED BY 'dbz-secret';
             GRANT SELECT, RELOAD, SHOW DATABASES, LOCK TABLES, REPLICATION SLAVE, BINLOG MONITOR,
               REPLICATION MASTER ADMIN ON *.* TO '{user}'@'%'"
        ))
        .await;
        Db::Maria { db, user }
    }

    /// A PostgreSQL database with table `ob` (owned by the replication user) and a
    /// publication for it.
    async fn pg(prefix: &str) -> Db {
        let db = Postgres::new(prefix).await;
        db.exec(
            "CREATE TABLE ob (id uuid PRIMARY KEY, aggregatetype varchar(64) NOT NULL,
               aggregateid varchar(64) NOT NULL, type varchar(64) NOT NULL, payload text);
             CREATE TABLE other (id serial PRIMARY KEY, v int);
             ALTER TABLE ob OWNER TO outboxd;
             ALTER TABLE other OWNER TO outboxd",
        )
        .await;
        db.exec(&format!(
            "CREATE PUBLICATION {} FOR TABLE ob WITH (publish = 'insert')",
            db.publication
        ))
        .await;
        Db::Pg(db)
    }

    fn name(&self) -> &str {
        match self {
            Db::Maria { db, .. } => &db.db,
            Db::Pg(p) => &p.db,
        }
    }

    fn plugin(&self) -> Plugin {
        match self {
            Db::Maria { .. } => Plugin::Mariadb,
            Db::Pg(_) => Plugin::Postgres,
        }
    }

    /// The Debezium connector JSON's config for connector `name`, routing to
    /// `<route>.<aggregatetype>`, with `slot` (PostgreSQL) and `server_id` (MariaDB).
    fn connector_config(
        &self,
        name: &str,
        route: &str,
        slot: &str,
        dir: &Path,
    ) -> Map<String, Value> {
        let mut c = Map::new();
        let mut set = |k: &str, v: String| {
            c.insert(k.into(), Value::String(v));
        };
        match self {
            Db::Maria { db, user } => {
                let url = mysql_async::Opts::from_url(&common::mariadb::admin_url()).unwrap();
                set(
                    "connector.class",
                    "io.debezium.connector.mariadb.MariaDbConnector".into(),
                );
                set("database.hostname", url.ip_or_hostname().to_string());
                set("database.port", url.tcp_port().to_string());
                set("database.user", user.clone());
                set("database.password", "dbz-secret".into());
                set("database.server.id", common::unique_server_id().to_string());
                set("database.include.list", db.db.clone());
                set("table.include.list", format!("{}.ob", db.db));
                set("snapshot.locking.mode", "none".into());
                set(
                    "schema.history.internal.store.only.captured.tables.ddl",
                    "true".into(),
                );
                set("include.schema.changes", "false".into());
                set(
                    "schema.history.internal",
                    "io.debezium.storage.file.history.FileSchemaHistory".into(),
                );
                set(
                    "schema.history.internal.file.filename",
                    dir.join(format!("{name}.history")).display().to_string(),
                );
            }
            Db::Pg(p) => {
                let (host, port, user, password) = common::postgres::replication_user();
                set(
                    "connector.class",
                    "io.debezium.connector.postgresql.PostgresConnector".into(),
                );
                set("database.hostname", host);
                set("database.port", port.to_string());
                set("database.user", user);
                set("database.password", password);
                set("database.dbname", p.db.clone());
                set("plugin.name", "pgoutput".into());
                set("slot.name", slot.into());
                set("publication.name", p.publication.clone());
                set("publication.autocreate.mode", "disabled".into());
                set("table.include.list", "public.ob".into());
            }
        }
        set("topic.prefix", name.into());
        set("snapshot.mode", "no_data".into());
        set("transforms", "outbox".into());
        set(
            "transforms.outbox.type",
            "io.debezium.transforms.outbox.EventRouter".into(),
        );
        set(
            "transforms.outbox.route.topic.replacement",
            format!("{route}.${{routedByValue}}"),
        );
        set(
            "transforms.outbox.table.fields.additional.placement",
            "type:header:eventType".into(),
        );
        c
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        if let Db::Maria { db, user } = self {
            let pool = db.pool.clone();
            let user = user.clone();
            common::run_to_end(async move {
                if let Ok(mut c) = pool.get_conn().await {
                    let _ = c
                        .query_drop(format!("DROP USER IF EXISTS '{user}'@'%'"))
                        .await;
                }
            });
        }
    }
}

fn agg_index(agg: &str) -> usize {
    agg.trim_start_matches('a').parse().unwrap_or(0)
}

/// A writer inserting outbox transactions until stopped.
struct Writer {
    stop: Arc<AtomicBool>,
    written: Arc<Mutex<Vec<Written>>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Writer {
    /// Starts writing to a fresh connection of `db` (MariaDB pool / PostgreSQL admin
    /// connection): ~40 transactions a second.
    async fn start(db: &Db) -> Writer {
        let stop = Arc::new(AtomicBool::new(false));
        let written: Arc<Mutex<Vec<Written>>> = Arc::default();
        let (s, w) = (stop.clone(), written.clone());
        let conn: WriterConn = match db {
            Db::Maria { db, .. } => WriterConn::Maria(db.pool.clone()),
            Db::Pg(p) => WriterConn::Pg(common::postgres::admin_connect(&p.db).await),
        };
        let task = tokio::spawn(async move {
            let mut seqs = [0u64; AGGREGATES];
            let mut n = 0usize;
            while !s.load(Ordering::Relaxed) {
                n += 1;
                let size = 1 + n % 3;
                let mut events = Vec::new();
                for k in 0..size {
                    let a = (n * 5 + k * 7) % AGGREGATES;
                    seqs[a] += 1;
                    events.push((common::new_uuid(), format!("a{a}"), seqs[a]));
                }
                let rows: Vec<String> = events
                    .iter()
                    .map(|(id, agg, seq)| {
                        let kind = if agg_index(agg).is_multiple_of(2) { "Order" } else { "Payment" };
                        format!("('{id}', '{kind}', '{agg}', '{kind}Changed', '{{\"agg\":\"{agg}\",\"seq\":{seq}}}')")
                    })
                    .collect();
                let sql = format!("INSERT INTO ob VALUES {}", rows.join(","));
                let ok = match &conn {
                    WriterConn::Maria(pool) => match pool.get_conn().await {
                        Ok(mut c) => c.query_drop(&sql).await.is_ok(),
                        Err(_) => false,
                    },
                    WriterConn::Pg(client) => client.batch_execute(&sql).await.is_ok(),
                };
                assert!(ok, "the writer's insert failed");
                w.lock()
                    .unwrap()
                    .extend(events.into_iter().map(|(id, aggregate, seq)| Written {
                        id,
                        aggregate,
                        seq,
                    }));
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
        });
        Writer {
            stop,
            written,
            task: Some(task),
        }
    }

    fn count(&self) -> usize {
        self.written.lock().unwrap().len()
    }

    async fn finish(mut self) -> Vec<Written> {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.task.take() {
            t.await.expect("writer task");
        }
        self.written.lock().unwrap().clone()
    }
}

enum WriterConn {
    Maria(mysql_async::Pool),
    Pg(tokio_postgres::Client),
}

/// The routed topics of route prefix `route`, created with 3 partitions.
async fn topics(route: &str) -> Vec<String> {
    let t = vec![format!("{route}.Order"), format!("{route}.Payment")];
    for topic in &t {
        create_topic(topic, 3).await;
    }
    t
}

/// Waits until `n` records are readable on `topics` (read_committed).
fn wait_records(topics: &[String], n: usize, timeout: Duration) -> Vec<Consumed> {
    let got = read_topics(topics, n, timeout, Duration::ZERO);
    assert!(
        got.len() >= n,
        "only {} of {n} records arrived within {timeout:?}",
        got.len()
    );
    got
}

/// Waits until Debezium streams: a task reported RUNNING may not have read its start
/// position yet, and rows written before it are not Debezium's to deliver (the writer's
/// first transaction was once "lost" so, under load). Inserts a warm-up row (its own
/// aggregate, not among the written events) every few seconds until one reaches `topics`.
async fn warm_up(db: &Db, topics: &[String]) {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let id = common::new_uuid();
        let sql = format!(
            "INSERT INTO ob VALUES ('{id}', 'Order', 'warm', 'OrderWarmedUp', '{{\"warm\":true}}')"
        );
        match db {
            Db::Maria { db, .. } => {
                let mut c = db.pool.get_conn().await.expect("warm-up connection");
                c.query_drop(&sql).await.expect("warm-up insert");
            }
            Db::Pg(p) => {
                let client = common::postgres::admin_connect(&p.db).await;
                client.batch_execute(&sql).await.expect("warm-up insert");
            }
        }
        let got = read_topics(topics, 1, Duration::from_secs(5), Duration::ZERO);
        if !got.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "Debezium delivers no warm-up row"
        );
    }
}

/// What the topics hold against what was written.
#[derive(Debug, Default)]
struct Outcome {
    lost: Vec<String>,
    /// Events on the topics more than once: (id, times).
    duplicates: Vec<(String, usize)>,
    /// Per-aggregate order violations.
    disorder: Vec<String>,
}

/// Reads `topics` until every written event arrived (or 120 s) and compares.
///
/// The topics may hold more records than were written (events of the warm-up, a sink's
/// at-least-once repeats), so reaching the count alone does not mean every event arrived:
/// the topics are read again while written events are missing, until the deadline. An
/// event really lost stays missing in every reading.
fn check(topics: &[String], written: &[Written]) -> Outcome {
    let deadline = Instant::now() + Duration::from_secs(120);
    let got = loop {
        let got = read_topics(
            topics,
            written.len(),
            deadline.saturating_duration_since(Instant::now()),
            Duration::from_secs(3),
        );
        let seen: std::collections::HashSet<String> =
            got.iter().filter_map(|r| r.header("id")).collect();
        if written.iter().all(|w| seen.contains(&w.id)) || Instant::now() >= deadline {
            break got;
        }
        std::thread::sleep(Duration::from_secs(2));
    };
    let mut times: HashMap<String, usize> = HashMap::new();
    for r in &got {
        if let Some(id) = r.header("id") {
            *times.entry(id).or_default() += 1;
        }
    }
    let mut out = Outcome::default();
    let seq_of: HashMap<&str, (&str, u64)> = written
        .iter()
        .map(|w| (w.id.as_str(), (w.aggregate.as_str(), w.seq)))
        .collect();
    for w in written {
        if !times.contains_key(&w.id) {
            out.lost.push(w.id.clone());
        }
    }
    for (id, n) in &times {
        if *n > 1 {
            out.duplicates.push((id.clone(), *n));
        }
    }
    // Per aggregate: the first occurrences, in partition order, have rising sequence numbers.
    let mut by_partition: BTreeMap<(String, i32), Vec<&Consumed>> = BTreeMap::new();
    for r in &got {
        by_partition
            .entry((r.topic.clone(), r.partition))
            .or_default()
            .push(r);
    }
    let mut seen = std::collections::HashSet::new();
    let mut last: HashMap<String, u64> = HashMap::new();
    for (_, mut rs) in by_partition {
        rs.sort_by_key(|r| r.offset);
        for r in rs {
            let Some(id) = r.header("id") else { continue };
            let Some((agg, seq)) = seq_of.get(id.as_str()) else {
                continue;
            };
            if !seen.insert(id.clone()) {
                continue;
            }
            if let Some(prev) = last.insert(agg.to_string(), *seq) {
                if prev >= *seq {
                    out.disorder.push(format!("{agg}: {seq} after {prev}"));
                }
            }
        }
    }
    out
}

/// Writes the connector JSON to `dir`.
fn write_json(dir: &Path, name: &str, config: &Map<String, Value>) -> PathBuf {
    let path = dir.join(format!("{name}.json"));
    std::fs::write(&path, json!({"name": name, "config": config}).to_string()).unwrap();
    path
}

/// Runs `outboxd` with `args`; returns (exit code, stdout, stderr).
fn cli(args: &[&str]) -> (i32, String, String) {
    run_cli(args)
}

/// The last JSON line of `out`.
fn last_json(out: &str) -> Value {
    out.lines()
        .rev()
        .find_map(|l| serde_json::from_str(l).ok())
        .unwrap_or(Value::Null)
}

/// `outboxd checkpoint import-debezium` until it succeeds (a killed Debezium's binlog dump
/// thread lingers until the server notices, a killed worker's REST port stays open for a
/// moment); returns its JSON. Panics after 90 s with the last refusal.
fn import_when_stopped(args: &[&str]) -> Value {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let (code, out, err) = cli(args);
        if code == 0 {
            eprintln!("import: {out}");
            return last_json(&out);
        }
        assert!(
            Instant::now() < deadline,
            "import-debezium kept failing:\n{out}\n{err}"
        );
        std::thread::sleep(Duration::from_secs(2));
    }
}

/// Starts outboxd on the connector JSON with the worker file; returns it ready.
fn start_outboxd(json: &Path, worker: &ConnectWorker, dir: &Path, tag: &str) -> Relay {
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    Relay::start_with_args(
        &[
            json.to_str().unwrap(),
            "--kafka-config",
            worker.worker_file.to_str().unwrap(),
            "--metrics-listen",
            &listen,
        ],
        port,
        dir.join(format!("{tag}.outboxd.log")),
    )
}

/// A copy of the worker file without its REST listener (so the import cannot ask Kafka
/// Connect and must find a running Debezium from the source's side).
fn worker_without_rest(worker: &ConnectWorker) -> PathBuf {
    let text = std::fs::read_to_string(&worker.worker_file).unwrap();
    let kept: String = text
        .lines()
        .filter(|l| !l.starts_with("listeners="))
        .map(|l| format!("{l}\n"))
        .collect();
    let path = worker.dir.join("worker-norest.properties");
    std::fs::write(&path, kept).unwrap();
    path
}

/// Prints what the topics hold and asserts that nothing was lost, duplicated or reordered.
/// Duplicates are split by who wrote the event: written before outboxd stopped (`handed_back`
/// events: the switch to outboxd, whose exactly-once this checks) or after (Debezium's run on
/// the exported offset: it writes none from one clean start, so one would mean the exported
/// offset lies before what outboxd delivered; reported as Debezium's at-least-once
/// redeliveries if that ever changes).
fn report(what: &str, o: &Outcome, written: &[Written], handed_back: usize, skipped: f64) {
    let index: HashMap<&str, usize> = written
        .iter()
        .enumerate()
        .map(|(i, w)| (w.id.as_str(), i))
        .collect();
    let (before, after): (Vec<_>, Vec<_>) = o
        .duplicates
        .iter()
        .partition(|(id, _)| index.get(id.as_str()).is_some_and(|i| *i < handed_back));
    eprintln!(
        "[{what}] {} events written ({handed_back} before outboxd stopped); lost {}, out of \
         order {}; duplicated: {} written before the way back, {} by Debezium after it; \
         outboxd skipped {skipped} event(s) Debezium had already written",
        written.len(),
        o.lost.len(),
        o.disorder.len(),
        before.len(),
        after.len()
    );
    assert!(
        o.lost.is_empty(),
        "lost {} events: {:?}",
        o.lost.len(),
        &o.lost[..o.lost.len().min(5)]
    );
    assert!(o.disorder.is_empty(), "{:?}", o.disorder);
    assert!(
        before.is_empty(),
        "duplicated across the switch to outboxd: {before:?}"
    );
    assert!(
        after.is_empty(),
        "Debezium wrote events twice after resuming from the exported offset: {after:?}"
    );
}

/// The switch both ways with a distributed worker killed with kill -9.
async fn distributed_kill9(db: Db) {
    let _lock = match db.plugin() {
        Plugin::Mariadb => MARIADB_CONNECT.lock().await,
        Plugin::Postgres => POSTGRES_CONNECT.lock().await,
    };
    let name = db.name().to_string();
    let slot = format!("{name}_dbz");
    let Some(mut worker) = ConnectWorker::start_distributed(
        db.plugin(),
        &name,
        &[("offset.flush.interval.ms", "5000")],
    ) else {
        return;
    };
    let dir = worker.dir.clone();
    let topics = topics(&name).await;
    let config = db.connector_config(&name, &name, &slot, &dir);
    let json = write_json(&dir, &name, &config);
    worker.create(&name, &config);
    let (state, trace) = worker.wait_task(&name, Duration::from_secs(120));
    assert_eq!(state, "RUNNING", "{trace}");
    warm_up(&db, &topics).await;
    let writer = Writer::start(&db).await;
    // Debezium delivers.
    let deadline = Instant::now() + Duration::from_secs(60);
    while writer.count() < 20 {
        assert!(Instant::now() < deadline, "the writer does not write");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    wait_records(&topics, 20, Duration::from_secs(90));

    let worker_file = worker.worker_file.to_str().unwrap().to_string();
    if let Db::Maria { .. } = db {
        // The shadow run beside Debezium, and the diff that shows they write the same.
        let sid = common::unique_server_id().to_string();
        let port = free_port();
        let listen = format!("127.0.0.1:{port}");
        let mut shadow = Relay::start_with_args(
            &[
                json.to_str().unwrap(),
                "--kafka-config",
                &worker_file,
                "--shadow",
                "sh",
                "--shadow-server-id",
                &sid,
                "--metrics-listen",
                &listen,
            ],
            port,
            dir.join("shadow.outboxd.log"),
        );
        let ready = Instant::now();
        tokio::time::sleep(Duration::from_secs(10)).await;
        // The window: from 2 s after the shadow was ready to 2 s ago.
        let since = format!("{}ms", ready.elapsed().as_millis() - 2_000);
        let (code, out, err) = cli(&[
            "diff",
            "--config",
            json.to_str().unwrap(),
            "--kafka-config",
            &worker_file,
            "--shadow",
            "sh",
            "--since",
            &since,
            "--until",
            "2s",
        ]);
        eprintln!("diff:\n{out}");
        assert_eq!(
            code, 0,
            "the shadow's records are Debezium's:\n{out}\n{err}"
        );
        let summary = &last_json(&out)["summary"];
        assert!(
            summary["identical"].as_u64().unwrap_or(0) > 20 && summary["match"] == true,
            "{summary}"
        );
        // Stopped before the switch: it reads the binlog with Debezium's account.
        shadow.stop();
    }

    // Refused while Debezium runs: Kafka Connect says so ...
    let (code, out, err) = cli(&[
        "checkpoint",
        "import-debezium",
        "--config",
        json.to_str().unwrap(),
        "--kafka-config",
        &worker_file,
    ]);
    assert_eq!(code, 1, "import while Debezium runs:\n{out}\n{err}");
    assert!(
        err.contains("still runs connector") && err.contains("/stop"),
        "{err}"
    );
    // ... and without REST, the source does.
    let norest = worker_without_rest(&worker);
    let (code, _, err) = cli(&[
        "checkpoint",
        "import-debezium",
        "--config",
        json.to_str().unwrap(),
        "--kafka-config",
        norest.to_str().unwrap(),
    ]);
    assert_eq!(code, 1, "import while Debezium reads the source:\n{err}");
    match &db {
        Db::Maria { .. } => assert!(
            err.contains("binlog dump thread") && err.contains("--debezium-stopped"),
            "{err}"
        ),
        Db::Pg(_) => assert!(err.contains("is in use by") && err.contains(&slot), "{err}"),
    }
    let (_, show, _) = cli(&[
        "checkpoint",
        "show",
        "--config",
        json.to_str().unwrap(),
        "--kafka-config",
        &worker_file,
    ]);
    assert!(
        show.contains("\"checkpoint\":null"),
        "refused imports change nothing: {show}"
    );

    // Debezium killed mid-stream: its committed offset lags what it wrote.
    tokio::time::sleep(Duration::from_millis(6_500)).await;
    worker.kill9();
    let imported = import_when_stopped(&[
        "checkpoint",
        "import-debezium",
        "--config",
        json.to_str().unwrap(),
        "--kafka-config",
        &worker_file,
    ]);
    assert!(
        imported["debezium"]["from"]
            .as_str()
            .unwrap_or_default()
            .contains("offsets topic"),
        "{imported}"
    );
    assert!(
        imported["checkpoint"]["cutover"]["topics"]
            .as_array()
            .is_some_and(|t| t.len() == 2),
        "{imported}"
    );
    let mut relay = start_outboxd(&json, &worker, &dir, "cutover");
    // outboxd delivers for a while (events written while nobody delivered among them).
    let target = writer.count() + 120;
    let deadline = Instant::now() + Duration::from_secs(90);
    while writer.count() < target {
        assert!(Instant::now() < deadline, "the writer stalled");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let skipped = metric(
        &relay.metrics(),
        "outboxd_events_skipped_total",
        &format!("connector=\"{name}\",reason=\"debezium\""),
    )
    .unwrap_or(0.0);
    // The way back.
    assert_eq!(relay.stop(), Some(0), "{}", relay.log_text());
    let handed_back = writer.count();
    let (code, out, err) = cli(&[
        "checkpoint",
        "export-debezium",
        "--config",
        json.to_str().unwrap(),
        "--kafka-config",
        &worker_file,
    ]);
    assert_eq!(code, 0, "export:\n{out}\n{err}");
    let exported = last_json(&out);
    assert!(
        exported["debezium"]["written"]["offsets_topic"].is_string(),
        "{exported}"
    );
    eprintln!("export: {out}");
    worker.restart();
    let (state, trace) = worker.wait_task(&name, Duration::from_secs(120));
    assert_eq!(
        state, "RUNNING",
        "Debezium resumes from the exported offset: {trace}"
    );
    let target = writer.count() + 120;
    let deadline = Instant::now() + Duration::from_secs(90);
    while writer.count() < target {
        assert!(Instant::now() < deadline, "the writer stalled");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let written = writer.finish().await;
    let outcome = check(&topics, &written);
    report(
        &format!("{name} distributed, kill -9"),
        &outcome,
        &written,
        handed_back,
        skipped,
    );
    assert!(
        skipped > 0.0,
        "Debezium's offset lagged what it wrote, and outboxd skipped nothing?\n{}",
        relay.log_text()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn mariadb_distributed_kill9_to_outboxd_and_back() {
    distributed_kill9(Db::maria("cut_md").await).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn postgres_distributed_kill9_to_outboxd_and_back() {
    distributed_kill9(Db::pg("cut_pd").await).await;
}

/// The switch both ways with a standalone worker: MariaDB stopped with SIGTERM, offsets
/// file both ways; PostgreSQL stopped with KIP-875 `stop`, REST both ways.
async fn standalone(db: Db) {
    let _lock = match db.plugin() {
        Plugin::Mariadb => MARIADB_CONNECT.lock().await,
        Plugin::Postgres => POSTGRES_CONNECT.lock().await,
    };
    let rest_way = matches!(db, Db::Pg(_));
    let name = db.name().to_string();
    let slot = format!("{name}_dbz");
    let Some(mut worker) =
        ConnectWorker::start(db.plugin(), &name, &[("offset.flush.interval.ms", "5000")])
    else {
        return;
    };
    let dir = worker.dir.clone();
    let topics = topics(&name).await;
    let config = db.connector_config(&name, &name, &slot, &dir);
    let json = write_json(&dir, &name, &config);
    worker.create(&name, &config);
    let (state, trace) = worker.wait_task(&name, Duration::from_secs(120));
    assert_eq!(state, "RUNNING", "{trace}");
    warm_up(&db, &topics).await;
    let writer = Writer::start(&db).await;
    wait_records(&topics, 30, Duration::from_secs(90));
    let worker_file = worker.worker_file.to_str().unwrap().to_string();
    let url = format!("http://127.0.0.1:{}", worker.port);
    let imported = if rest_way {
        // KIP-875: stop the connector (offsets kept), read them over REST.
        worker.stop_connector(&name);
        let v = import_when_stopped(&[
            "checkpoint",
            "import-debezium",
            "--config",
            json.to_str().unwrap(),
            "--kafka-config",
            &worker_file,
            "--from",
            "rest",
            "--connect-url",
            &url,
        ]);
        worker.stop();
        v
    } else {
        worker.stop();
        import_when_stopped(&[
            "checkpoint",
            "import-debezium",
            "--config",
            json.to_str().unwrap(),
            "--kafka-config",
            &worker_file,
        ])
    };
    eprintln!("imported: {imported}");
    let mut relay = start_outboxd(&json, &worker, &dir, "cutover");
    let target = writer.count() + 120;
    let deadline = Instant::now() + Duration::from_secs(90);
    while writer.count() < target {
        assert!(Instant::now() < deadline, "the writer stalled");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let skipped = metric(
        &relay.metrics(),
        "outboxd_events_skipped_total",
        &format!("connector=\"{name}\",reason=\"debezium\""),
    )
    .unwrap_or(0.0);
    assert_eq!(relay.stop(), Some(0), "{}", relay.log_text());
    let handed_back = writer.count();
    if rest_way {
        // The worker back, the connector created stopped (KIP-980), its offsets PATCHed.
        worker.restart();
        worker.create_stopped(&name, &config);
        let (code, out, err) = cli(&[
            "checkpoint",
            "export-debezium",
            "--config",
            json.to_str().unwrap(),
            "--kafka-config",
            &worker_file,
            "--to",
            "rest",
            "--connect-url",
            &url,
        ]);
        assert_eq!(code, 0, "export:\n{out}\n{err}");
        eprintln!("export: {out}");
        worker.resume_connector(&name);
    } else {
        let (code, out, err) = cli(&[
            "checkpoint",
            "export-debezium",
            "--config",
            json.to_str().unwrap(),
            "--kafka-config",
            &worker_file,
        ]);
        assert_eq!(code, 0, "export:\n{out}\n{err}");
        assert!(
            last_json(&out)["debezium"]["written"]["offsets_file"].is_string(),
            "{out}"
        );
        eprintln!("export: {out}");
        worker.restart();
        worker.create(&name, &config);
    }
    let (state, trace) = worker.wait_task(&name, Duration::from_secs(120));
    assert_eq!(
        state, "RUNNING",
        "Debezium resumes from the exported offset: {trace}"
    );
    let target = writer.count() + 120;
    let deadline = Instant::now() + Duration::from_secs(90);
    while writer.count() < target {
        assert!(Instant::now() < deadline, "the writer stalled");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let written = writer.finish().await;
    let outcome = check(&topics, &written);
    report(
        &format!("{name} standalone"),
        &outcome,
        &written,
        handed_back,
        skipped,
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn mariadb_standalone_sigterm_offsets_file_both_ways() {
    standalone(Db::maria("cut_ms").await).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn postgres_standalone_rest_stop_both_ways() {
    standalone(Db::pg("cut_ps").await).await;
}

/// Ids of the records of `topics` (read until `n` arrived and 3 s passed without more).
fn ids_on(topics: &[String], n: usize) -> Vec<String> {
    let mut got = read_topics(topics, n, Duration::from_secs(120), Duration::from_secs(3));
    got.sort_by_key(|r| (r.topic.clone(), r.partition, r.offset));
    got.iter().filter_map(|r| r.header("id")).collect()
}

/// Writes Debezium offset `offset` for connector `name` (`topic.prefix` = `name`) as a
/// standalone worker's offsets file `path`.
fn write_offsets_file(path: &Path, name: &str, offset: &Value) {
    use outboxd::cutover::{java_serial, offsets::OffsetKey};
    let key = OffsetKey::debezium(name, name);
    let bytes =
        java_serial::write(&[(Some(key.to_bytes()), Some(offset.to_string().into_bytes()))]);
    std::fs::write(path, bytes).unwrap();
}

/// A Debezium offset inside a transaction resumes outboxd at the row Debezium itself
/// resumes at: transaction T = a row of another table, then outbox rows e1 e2 (one
/// statement), e3, e4 e5 e6 (one statement); the offset says e1-e4 were delivered (MariaDB:
/// `event` 8 = GTID, table map + rows of `other`, table map + rows e1 e2, table map + rows
/// e3, table map; `row` 1 = e4 of the last rows event. PostgreSQL: `lsn_proc` = e4's LSN,
/// `lsn_commit` before T). outboxd, imported from it, delivers e5 e6; Debezium, started from
/// the same offset (on its own topics, and for PostgreSQL its own copy of the slot), too.
async fn mid_transaction(db: Db) {
    let _lock = match db.plugin() {
        Plugin::Mariadb => MARIADB_CONNECT.lock().await,
        Plugin::Postgres => POSTGRES_CONNECT.lock().await,
    };
    let name = db.name().to_string();
    let dir = common::relay::test_dir(&name);
    let (slot, slot2) = (format!("{name}_oxd"), format!("{name}_dbz"));
    let ours = topics(&name).await;
    let theirs = topics(&format!("{name}_dbz")).await;
    let ids: Vec<String> = (0..6).map(|_| common::new_uuid()).collect();
    let row = |i: usize| {
        format!(
            "('{}', 'Order', 'a0', 'OrderChanged', '{{\"seq\":{}}}')",
            ids[i],
            i + 1
        )
    };
    let body = format!(
        "INSERT INTO other (v) VALUES (1); INSERT INTO ob VALUES {},{}; INSERT INTO ob VALUES {}; \
         INSERT INTO ob VALUES {},{},{};",
        row(0),
        row(1),
        row(2),
        row(3),
        row(4),
        row(5)
    );
    let offset = match &db {
        Db::Maria { db, .. } => {
            let mut c = db.pool.get_conn().await.unwrap();
            c.query_drop(format!("BEGIN; {body} COMMIT")).await.unwrap();
            let gtid: String = c.query_first("SELECT @@last_gtid").await.unwrap().unwrap();
            let (file, _): (String, u64) = c
                .query_first("SHOW MASTER STATUS")
                .await
                .unwrap()
                .map(|r: mysql_async::Row| (r.get(0).unwrap(), r.get(1).unwrap()))
                .unwrap();
            let events: Vec<mysql_async::Row> = c
                .query(format!("SHOW BINLOG EVENTS IN '{file}'"))
                .await
                .unwrap();
            let pos: u64 = events
                .iter()
                .find(|r| {
                    r.get::<String, _>(2).as_deref() == Some("Gtid")
                        && r.get::<String, _>(5)
                            .is_some_and(|i| i.ends_with(&format!("GTID {gtid}")))
                })
                .and_then(|r| r.get(1))
                .unwrap_or_else(|| panic!("GTID {gtid} not found in {file}"));
            let mut parts = gtid.split('-');
            let (d, s, n): (u32, u32, u64) = (
                parts.next().unwrap().parse().unwrap(),
                parts.next().unwrap().parse().unwrap(),
                parts.next().unwrap().parse().unwrap(),
            );
            json!({"ts_sec": 1, "file": file, "pos": pos, "gtids": format!("{d}-{s}-{}", n - 1),
                   "event": 8, "row": 1, "server_id": s})
        }
        Db::Pg(p) => {
            let created: String = p
                .client
                .query_one(
                    "SELECT lsn::text FROM pg_create_logical_replication_slot($1, 'pgoutput')",
                    &[&slot],
                )
                .await
                .unwrap()
                .get(0);
            p.exec("BEGIN").await;
            let xid: i64 = p
                .client
                .query_one("SELECT txid_current()", &[])
                .await
                .unwrap()
                .get(0);
            p.exec(&body).await;
            p.exec("COMMIT").await;
            p.client
                .execute(
                    "SELECT pg_copy_logical_replication_slot($1, $2)",
                    &[&slot, &slot2],
                )
                .await
                .unwrap();
            let oid: u32 = p
                .client
                .query_one("SELECT 'public.ob'::regclass::oid", &[])
                .await
                .unwrap()
                .get(0);
            let rows = p
                .client
                .query(
                    "SELECT (lsn - '0/0'::pg_lsn)::int8, data FROM pg_logical_slot_peek_binary_changes($1, NULL, NULL, \
                     'proto_version', '1', 'publication_names', $2)",
                    &[&slot, &p.publication],
                )
                .await
                .unwrap();
            let inserts: Vec<i64> = rows
                .iter()
                .filter(|r| {
                    let d: Vec<u8> = r.get(1);
                    d.first() == Some(&b'I') && d.get(1..5) == Some(&oid.to_be_bytes()[..])
                })
                .map(|r| r.get(0))
                .collect();
            assert_eq!(inserts.len(), 6, "T's outbox inserts in the slot");
            let commit: i64 = p
                .client
                .query_one(
                    "SELECT ($1::text::pg_lsn - '0/0'::pg_lsn)::int8",
                    &[&created],
                )
                .await
                .unwrap()
                .get(0);
            json!({"lsn_proc": inserts[3], "lsn": inserts[3], "lsn_commit": commit,
                   "txId": xid, "messageType": "INSERT", "ts_usec": 1_000_000})
        }
    };
    let offsets = dir.join("connect.offsets");
    write_offsets_file(&offsets, &name, &offset);

    // outboxd, imported from the offset.
    let config = db.connector_config(&name, &name, &slot, &dir);
    let json = write_json(&dir, &name, &config);
    let (code, out, err) = import_offsets_file(&json, &offsets);
    assert_eq!(code, 0, "import:\n{out}\n{err}");
    let imported = last_json(&out);
    assert_eq!(imported["checkpoint"]["skip"], 4, "{imported}");
    assert_eq!(imported["in_transaction"]["outbox_rows"], 6, "{imported}");
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let mut relay = Relay::start_with_args(
        &[json.to_str().unwrap(), "--metrics-listen", &listen],
        port,
        dir.join("mid.outboxd.log"),
    );
    let by_outboxd = ids_on(&ours, 2);
    relay.stop();
    assert_eq!(
        by_outboxd,
        ids[4..].to_vec(),
        "outboxd resumes at e5\n{}",
        relay.log_text()
    );

    // Debezium from the same offset: on its own topics (and its own copy of the slot).
    let mut config2 = db.connector_config(&name, &format!("{name}_dbz"), &slot2, &dir);
    if let Db::Maria { .. } = db {
        // No schema history yet: rebuilt from the tables, then streaming from the offset.
        config2.insert("snapshot.mode".into(), Value::String("recovery".into()));
    }
    let Some(worker) = ConnectWorker::start(db.plugin(), &name, &[]) else {
        return;
    };
    worker.create(&name, &config2);
    let (state, trace) = worker.wait_task(&name, Duration::from_secs(120));
    assert_eq!(state, "RUNNING", "{trace}");
    let by_debezium = ids_on(&theirs, 2);
    assert_eq!(
        by_debezium,
        ids[4..].to_vec(),
        "Debezium resumes at e5 too\n{}",
        worker.log_text()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn mariadb_mid_transaction_offset_resumes_at_the_right_row() {
    mid_transaction(Db::maria("cut_mm").await).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn postgres_mid_transaction_offset_resumes_at_the_right_row() {
    mid_transaction(Db::pg("cut_pm").await).await;
}

/// A PostgreSQL offset with `lsn` alone (a new connector's heartbeat offset, written before
/// any change: no `lsn_proc`, no `lsn_commit`) is where Debezium started streaming, not a
/// change it delivered: Debezium resumes from it passing every transaction the server sends
/// from there. Here `lsn` is the LSN of the next transaction's first change (the constructed
/// case of break27's finding 1: it was read as "that change delivered", `skip=1`, and one of
/// the 3 rows was lost). The slot's own start (the heartbeat's usual `lsn`) imports too; an
/// `lsn` behind the slot is refused with the `checkpoint reset` hint.
#[tokio::test(flavor = "multi_thread")]
async fn postgres_lsn_only_offset_delivers_the_whole_next_transaction() {
    let db = Db::pg("cut_pl").await;
    let Db::Pg(p) = &db else { unreachable!() };
    let name = db.name().to_string();
    let dir = common::relay::test_dir(&name);
    let slot = format!("{name}_oxd");
    let ours = topics(&name).await;
    let created: i64 = p
        .client
        .query_one(
            "SELECT (lsn - '0/0'::pg_lsn)::int8 FROM pg_create_logical_replication_slot($1, 'pgoutput')",
            &[&slot],
        )
        .await
        .unwrap()
        .get(0);
    let ids: Vec<String> = (0..3).map(|_| common::new_uuid()).collect();
    p.exec("BEGIN").await;
    let xid: i64 = p
        .client
        .query_one("SELECT txid_current()", &[])
        .await
        .unwrap()
        .get(0);
    for (i, id) in ids.iter().enumerate() {
        p.exec(&format!(
            "INSERT INTO ob VALUES ('{id}', 'Order', 'a0', 'OrderChanged', '{{\"seq\":{}}}')",
            i + 1
        ))
        .await;
    }
    p.exec("COMMIT").await;
    let first: i64 = p
        .client
        .query_one(
            "SELECT (lsn - '0/0'::pg_lsn)::int8 FROM pg_logical_slot_peek_binary_changes($1, NULL, NULL, \
             'proto_version', '1', 'publication_names', $2) WHERE substr(data, 1, 1) = 'I' LIMIT 1",
            &[&slot, &p.publication],
        )
        .await
        .unwrap()
        .get(0);
    let config = db.connector_config(&name, &name, &slot, &dir);
    let json = write_json(&dir, &name, &config);
    let offsets = dir.join("connect.offsets");
    let import = |lsn: i64| {
        write_offsets_file(
            &offsets,
            &name,
            &json!({"lsn": lsn, "txId": xid, "ts_usec": 1_000_000}),
        );
        import_offsets_file(&json, &offsets)
    };
    // Behind the slot: not served, with what to do.
    let (code, out, err) = import(created - 1);
    assert_eq!(code, 1, "{out}\n{err}");
    assert!(err.contains("checkpoint reset"), "{err}");
    // The slot's start, then the first change's LSN: boundaries, nothing skipped.
    for lsn in [created, first] {
        let (code, out, err) = import(lsn);
        assert_eq!(code, 0, "import of lsn {lsn}:\n{out}\n{err}");
        let imported = last_json(&out);
        // `skip` 0 is left out of the JSON.
        assert_eq!(imported["checkpoint"]["skip"], Value::Null, "{imported}");
        assert_eq!(
            imported["checkpoint"]["position"]["value"],
            format!("{:X}/{:X}", lsn >> 32, lsn & 0xFFFF_FFFF),
            "{imported}"
        );
    }
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let mut relay = Relay::start_with_args(
        &[json.to_str().unwrap(), "--metrics-listen", &listen],
        port,
        dir.join("lsn_only.outboxd.log"),
    );
    let delivered = ids_on(&ours, 3);
    relay.stop();
    assert_eq!(delivered, ids, "all 3 rows\n{}", relay.log_text());
}

/// Bad input, and positions the source no longer serves, are refused with what was found,
/// and change nothing.
#[tokio::test(flavor = "multi_thread")]
async fn bad_input_and_unserved_positions_are_refused_changing_nothing() {
    let maria = Db::maria("cut_bad").await;
    let name = maria.name().to_string();
    let dir = common::relay::test_dir(&name);
    let json = write_json(&dir, &name, &maria.connector_config(&name, &name, "", &dir));
    let file = dir.join("connect.offsets");
    let import = |extra: &[&str]| {
        let mut args = vec![
            "checkpoint",
            "import-debezium",
            "--config",
            json.to_str().unwrap(),
            "--debezium-stopped",
            "--dedupe-window",
            "0",
        ];
        args.extend_from_slice(extra);
        cli(&args)
    };
    let unchanged = |json: &Path| {
        let (_, show, _) = cli(&["checkpoint", "show", "--config", json.to_str().unwrap()]);
        assert!(
            show.contains("\"checkpoint\":null"),
            "nothing changed: {show}"
        );
    };
    let f = file.to_str().unwrap();
    let refused = |what: &str, extra: &[&str], needle: &str| {
        let (code, out, err) = import(extra);
        assert_eq!(code, 1, "{what}:\n{out}\n{err}");
        assert!(err.contains(needle), "{what}: {needle:?} in\n{err}");
        eprintln!("[{what}] {}", err.trim());
    };
    // A standalone file of another format.
    std::fs::write(&file, "offset.storage.file.filename=/tmp/x\n").unwrap();
    refused(
        "another format",
        &["--offsets-file", f],
        "is not a Kafka Connect offsets file",
    );
    // The file without this connector: another topic.prefix, and another connector.
    use outboxd::cutover::{java_serial, offsets::OffsetKey};
    let other = |k: OffsetKey| {
        java_serial::write(&[(
            Some(k.to_bytes()),
            Some(b"{\"file\":\"x\",\"pos\":4}".to_vec()),
        )])
    };
    std::fs::write(&file, other(OffsetKey::debezium(&name, "elsewhere"))).unwrap();
    refused(
        "another topic.prefix",
        &["--offsets-file", f],
        "is `topic.prefix` (--topic-prefix) the one Debezium ran with",
    );
    std::fs::write(&file, other(OffsetKey::debezium("someone-else", &name))).unwrap();
    refused(
        "another connector name",
        &["--offsets-file", f],
        "is the connector `name`",
    );
    // A malformed offset.
    write_offsets_file(
        &file,
        &name,
        &json!({"file": "mariadb-bin.000001", "pos": "four"}),
    );
    refused("malformed offset", &["--offsets-file", f], "malformed");
    // An offsets topic without the connector.
    let topic = format!("{name}-offsets");
    create_topic(&topic, 25).await;
    {
        use rdkafka::producer::{FutureProducer, FutureRecord};
        let p: FutureProducer = rdkafka::ClientConfig::new()
            .set("bootstrap.servers", common::kafka_bootstrap())
            .create()
            .unwrap();
        let key = OffsetKey::debezium("someone-else", "x").to_bytes();
        p.send(
            FutureRecord::to(&topic).key(&key).payload("{}"),
            Duration::from_secs(30),
        )
        .await
        .unwrap();
    }
    refused(
        "offsets topic without the connector",
        &["--offsets-topic", &topic],
        "holds no offsets for",
    );
    // Positions the server does not serve: a GTID domain it never had (or, when binlogs were
    // purged past 0-1-5, purged ones: refused by the check of the oldest binlog's GTID state),
    // a binlog file it no longer has.
    write_offsets_file(
        &file,
        &name,
        &json!({"file": "mariadb-bin.000001", "pos": 4, "gtids": "0-1-5,77-7-100"}),
    );
    // Served by no binlog of this server: refused as purged (when binlogs were purged past
    // 0-1-5) or as another server's position (domain 77 was never in this binlog).
    let (code, out, err) = import(&["--offsets-file", f]);
    assert_eq!(code, 1, "unserved GTID position:\n{out}\n{err}");
    assert!(
        err.contains("no longer served")
            || err.contains("77-7-100 is in domain 77, which this server's binlog never had"),
        "{err}"
    );
    // A sequence number ahead of the server's binlog.
    write_offsets_file(
        &file,
        &name,
        &json!({"file": "mariadb-bin.000001", "pos": 4, "gtids": format!("0-1-{}", u32::MAX)}),
    );
    refused(
        "GTID ahead of the server",
        &["--offsets-file", f],
        "is beyond this server's last GTID",
    );
    write_offsets_file(
        &file,
        &name,
        &json!({"file": "mariadb-bin.000000", "pos": 4}),
    );
    refused(
        "purged binlog file",
        &["--offsets-file", f],
        "no longer serve",
    );
    unchanged(&json);

    // PostgreSQL: Debezium's slot is gone.
    let pg = Db::pg("cut_bad").await;
    let pg_name = pg.name().to_string();
    let pg_dir = common::relay::test_dir(&pg_name);
    let pg_json = write_json(
        &pg_dir,
        &pg_name,
        &pg.connector_config(&pg_name, &pg_name, "gone_slot", &pg_dir),
    );
    let pg_file = pg_dir.join("connect.offsets");
    write_offsets_file(
        &pg_file,
        &pg_name,
        &json!({"lsn": 1000, "lsn_proc": 1000, "lsn_commit": 900, "messageType": "INSERT", "txId": 5}),
    );
    let (code, out, err) = cli(&[
        "checkpoint",
        "import-debezium",
        "--config",
        pg_json.to_str().unwrap(),
        "--offsets-file",
        pg_file.to_str().unwrap(),
        "--dedupe-window",
        "0",
    ]);
    assert_eq!(code, 1, "{out}\n{err}");
    assert!(
        err.contains("\"gone_slot\"")
            && err.contains("does not exist")
            && err.contains("checkpoint reset"),
        "{err}"
    );
    unchanged(&pg_json);

    // PostgreSQL: an LSN the server has not written yet (the slot would take it as
    // confirmed, and every change committed before the server reaches it would be lost).
    let Db::Pg(p) = &pg else { unreachable!() };
    p.exec(&format!(
        "SELECT pg_create_logical_replication_slot('{}', 'pgoutput')",
        p.slot
    ))
    .await;
    let pg_json = write_json(
        &pg_dir,
        &pg_name,
        &pg.connector_config(&pg_name, &pg_name, &p.slot, &pg_dir),
    );
    let ahead = p.current_wal().await + (1 << 32);
    write_offsets_file(&pg_file, &pg_name, &json!({"lsn": ahead}));
    let (code, out, err) = cli(&[
        "checkpoint",
        "import-debezium",
        "--config",
        pg_json.to_str().unwrap(),
        "--offsets-file",
        pg_file.to_str().unwrap(),
        "--dedupe-window",
        "0",
    ]);
    assert_eq!(code, 1, "{out}\n{err}");
    assert!(err.contains("past the end of this server's WAL"), "{err}");
    unchanged(&pg_json);
}

/// `outboxd checkpoint import-debezium` of connector JSON `json` from the standalone
/// offsets file `offsets`, Debezium known stopped, no read-back: (exit code, stdout, stderr).
fn import_offsets_file(json: &Path, offsets: &Path) -> (i32, String, String) {
    cli(&[
        "checkpoint",
        "import-debezium",
        "--config",
        json.to_str().unwrap(),
        "--offsets-file",
        offsets.to_str().unwrap(),
        "--debezium-stopped",
        "--dedupe-window",
        "0",
    ])
}
