//! The workload: outbox events as an application would write them, and the writers that put
//! them into MariaDB and PostgreSQL through the schema in `migrations/`.
//!
//! Every event carries a sequence number in its id (`00000000-0000-4000-8000-<seq:012>`),
//! which comes back to the collector as the `id` header of the Kafka record (EventRouter's
//! `table.field.event.id`), so each record is matched to its source commit time.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use mysql_async::prelude::Queryable;
use tokio::sync::mpsc;

use crate::clock::now_us;

/// Aggregate types; each routes to its own topic (`route.by.field = aggregate_type`).
pub const AGGREGATE_TYPES: [&str; 4] = ["Order", "Customer", "Payment", "Shipment"];
/// Distinct aggregate ids (the Kafka keys).
pub const AGGREGATES: u64 = 100;

const EVENT_TYPES: [[&str; 3]; 4] = [
    ["OrderCreated", "OrderPaid", "OrderShipped"],
    ["CustomerRegistered", "CustomerUpdated", "CustomerVerified"],
    ["PaymentAuthorized", "PaymentCaptured", "PaymentRefunded"],
    ["ShipmentBooked", "ShipmentDispatched", "ShipmentDelivered"],
];

/// The event id for sequence number `seq` (a valid UUID, so it fits PostgreSQL's `uuid`).
pub fn event_id(seq: u64) -> String {
    format!("00000000-0000-4000-8000-{seq:012}")
}

/// The sequence number in an event id written by [`event_id`]; `None` for other ids.
pub fn seq_of(id: &[u8]) -> Option<u64> {
    let id = std::str::from_utf8(id).ok()?;
    id.strip_prefix("00000000-0000-4000-8000-")?.parse().ok()
}

/// One outbox row.
pub struct Event {
    pub id: String,
    pub aggregate_type: &'static str,
    pub aggregate_id: String,
    pub event_type: &'static str,
    /// JSON text of about `payload_bytes` bytes, with no `'` or `\` in it.
    pub payload: String,
}

impl Event {
    /// The event with sequence number `seq` and a JSON payload of `payload_bytes` bytes
    /// (at least the ~150 bytes the fixed fields take).
    pub fn new(seq: u64, payload_bytes: usize) -> Event {
        let aggregate = seq % AGGREGATES;
        let kind = (aggregate % AGGREGATE_TYPES.len() as u64) as usize;
        let event_type = EVENT_TYPES[kind][(seq / AGGREGATES % 3) as usize];
        let head = format!(
            r#"{{"seq":{seq},"aggregate":"agg-{aggregate}","type":"{event_type}","amount_cents":{},"currency":"EUR","lines":[{{"sku":"SKU-{}","qty":{}}}],"note":""#,
            (seq * 7919) % 100_000,
            seq % 977,
            1 + seq % 5
        );
        let pad = payload_bytes.saturating_sub(head.len() + 2);
        let payload = format!("{head}{}\"}}", "x".repeat(pad));
        Event {
            id: event_id(seq),
            aggregate_type: AGGREGATE_TYPES[kind],
            aggregate_id: format!("agg-{aggregate}"),
            event_type,
            payload,
        }
    }
}

/// A multi-row INSERT of events `seqs` into `table` (text protocol; the generated strings
/// contain no quote or backslash, so they are literal as written).
fn insert_sql(table: &str, seqs: std::ops::Range<u64>, payload_bytes: usize, pg: bool) -> String {
    let mut sql = format!(
        "INSERT INTO {table} (id, aggregate_type, aggregate_id, event_type, payload) VALUES "
    );
    for (i, seq) in seqs.enumerate() {
        let e = Event::new(seq, payload_bytes);
        if i > 0 {
            sql.push(',');
        }
        let cast = if pg { "::jsonb" } else { "" };
        sql.push_str(&format!(
            "('{}','{}','{}','{}','{}'{cast})",
            e.id, e.aggregate_type, e.aggregate_id, e.event_type, e.payload
        ));
    }
    sql
}

/// A connection pool to one lane's database.
#[derive(Clone)]
pub enum Db {
    MariaDb(mysql_async::Pool),
    Postgres(Arc<Vec<tokio_postgres::Client>>),
}

impl Db {
    /// Writes events `seqs` in one transaction; returns the wall-clock time (µs since the
    /// epoch) at which COMMIT returned.
    async fn write_txn(
        &self,
        worker: usize,
        seqs: std::ops::Range<u64>,
        payload: usize,
    ) -> Result<u64> {
        match self {
            Db::MariaDb(pool) => {
                let sql = insert_sql("outbox_events", seqs, payload, false);
                let mut conn = pool.get_conn().await.context("MariaDB connection")?;
                let mut tx = conn
                    .start_transaction(mysql_async::TxOpts::default())
                    .await?;
                tx.query_drop(sql).await.context("INSERT into the outbox")?;
                tx.commit().await.context("COMMIT")?;
            }
            Db::Postgres(clients) => {
                let sql = insert_sql("outbox_events", seqs, payload, true);
                let client = &clients[worker % clients.len()];
                client
                    .batch_execute(&format!("BEGIN; {sql}; COMMIT"))
                    .await
                    .context("INSERT into the outbox")?;
            }
        }
        Ok(now_us())
    }
}

/// What the writers did.
pub struct Written {
    /// Commit time (µs since the epoch) of every event written, by sequence number.
    pub commit_us: HashMap<u64, u64>,
    /// Wall time from the first transaction's start to the last commit.
    pub elapsed: Duration,
}

impl Written {
    /// Events per second the writers achieved.
    pub fn rate(&self) -> f64 {
        self.commit_us.len() as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

/// Writes events `first..first + count` in transactions of `txn_size`, over `writers`
/// concurrent connections, either as fast as the database takes them (`rate = None`) or
/// paced to `rate` events per second.
pub async fn write(
    db: &Db,
    first: u64,
    count: u64,
    txn_size: u64,
    payload: usize,
    writers: usize,
    rate: Option<f64>,
) -> Result<Written> {
    let (tx, rx) = mpsc::channel::<std::ops::Range<u64>>(writers * 4);
    let rx = Arc::new(tokio::sync::Mutex::new(rx));
    let commits = Arc::new(Mutex::new(HashMap::with_capacity(count as usize)));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for worker in 0..writers {
        let (rx, db, commits) = (rx.clone(), db.clone(), commits.clone());
        tasks.push(tokio::spawn(async move {
            loop {
                let job = rx.lock().await.recv().await;
                let Some(seqs) = job else {
                    return Ok::<_, anyhow::Error>(());
                };
                let at = db.write_txn(worker, seqs.clone(), payload).await?;
                let mut c = commits.lock().unwrap();
                for s in seqs {
                    c.insert(s, at);
                }
            }
        }));
    }
    let end = first + count;
    let mut next = first;
    while next < end {
        crate::interrupt::check()?;
        if let Some(rate) = rate {
            // Pace by the schedule, not by sleeps: a slow commit is made up for afterwards.
            let due = first + (started.elapsed().as_secs_f64() * rate) as u64;
            if next >= due {
                tokio::time::sleep(Duration::from_micros(500)).await;
                continue;
            }
        }
        let hi = (next + txn_size).min(end);
        if tx.send(next..hi).await.is_err() {
            break;
        }
        next = hi;
    }
    drop(tx);
    for t in tasks {
        t.await??;
    }
    let commit_us = Arc::try_unwrap(commits).unwrap().into_inner().unwrap();
    Ok(Written {
        commit_us,
        elapsed: started.elapsed(),
    })
}

/// Opens `writers` connections to a lane's database.
pub async fn connect(source: crate::Source, database: &str, writers: usize) -> Result<Db> {
    Ok(match source {
        crate::Source::MariaDb => {
            let opts =
                mysql_async::OptsBuilder::from_opts(mysql_async::Opts::from_url(
                    &crate::env::mariadb_admin_url(),
                )?)
                .db_name(Some(database))
                .pool_opts(mysql_async::PoolOpts::default().with_constraints(
                    mysql_async::PoolConstraints::new(1, writers.max(1)).unwrap(),
                ));
            Db::MariaDb(mysql_async::Pool::new(opts))
        }
        crate::Source::Postgres => {
            let mut clients = Vec::new();
            for _ in 0..writers.max(1) {
                clients.push(crate::env::pg_connect(database).await?);
            }
            Db::Postgres(Arc::new(clients))
        }
    })
}
