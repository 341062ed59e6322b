//! The at-least-once delivery loop ([`super::run`]) on the in-memory sink and store: order,
//! the checkpoint never past an unacknowledged record, failed deliveries, refusals,
//! events that cannot be routed, store failures and the drain at shutdown — without a
//! broker.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures_util::FutureExt;
use tokio::sync::{mpsc, watch};

use super::poison::{Ending, Plan};
use super::{run, Error, LoopContext, PipelineOptions};
use crate::checkpoint::memory::MemoryStore;
use crate::checkpoint::Checkpoint;
use crate::config::ErrorPolicy;
use crate::error::Class;
use crate::event::{Op, Row, RowChange, SourceEvent, TableName};
use crate::position::{Lsn, SourcePosition};
use crate::router::{EventRouter, RouterConfig};
use crate::sink::memory::{MemorySink, OnSend};
use crate::sink::{RecordSink, SinkError};
use crate::source::SourceError;
use crate::value::ColumnValue;

/// An outbox row: event `id` of aggregate `aggregate`.
fn row(id: &str, aggregate: &str) -> SourceEvent {
    row_with(
        &["id", "aggregate_type", "aggregate_id", "payload"],
        &[id, "order", aggregate, "{}"],
    )
}

/// An outbox row with these columns and values.
fn row_with(columns: &[&str], values: &[&str]) -> SourceEvent {
    let names: Arc<[Arc<str>]> = columns.iter().map(|c| Arc::from(*c)).collect();
    let values = values
        .iter()
        .map(|v| ColumnValue::Text((*v).into()))
        .collect();
    SourceEvent::Change(RowChange {
        table: TableName::new("shop", "outbox_events"),
        op: Op::Insert,
        row: Row::new(names, values),
        source_ts_ms: 1,
        undecodable: None,
    })
}

fn lsn(n: u64) -> SourcePosition {
    SourcePosition::Lsn(Lsn(n))
}

fn commit(n: u64) -> SourceEvent {
    SourceEvent::Commit {
        position: lsn(n),
        commit_ts_ms: 1,
    }
}

/// Sends `events` into the loop's channel, in order.
async fn feed(
    tx: &mpsc::Sender<Result<SourceEvent, SourceError>>,
    events: impl IntoIterator<Item = SourceEvent>,
) {
    for e in events {
        tx.send(Ok(e)).await.unwrap();
    }
}

/// Waits until `cond` holds (a bound for a failing test, not a timing assertion).
async fn until(what: &str, cond: impl Fn() -> bool) {
    for _ in 0..1000 {
        if cond() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("never happened: {what}");
}

/// Lets the loop take every turn it can now.
async fn settle() {
    tokio::time::sleep(Duration::from_millis(50)).await;
}

fn stored(store: &MemoryStore) -> Option<SourcePosition> {
    store.last().map(|c| c.position)
}

/// What both loops run with in these tests: the default router and error policy, where
/// stored positions are published, and the shutdown signal (held here too: a dropped
/// sender reads as a shutdown).
struct Fixture {
    router: EventRouter,
    policy: ErrorPolicy,
    checkpointed: watch::Sender<Option<SourcePosition>>,
    shutdown: Arc<watch::Sender<bool>>,
}

impl Fixture {
    fn new() -> Self {
        Self {
            router: EventRouter::new(&RouterConfig::default()).unwrap(),
            policy: ErrorPolicy::default(),
            checkpointed: watch::channel(None).0,
            shutdown: Arc::new(watch::channel(false).0),
        }
    }

    /// A loop context over `sink`, the source channel's receiving end for the loop and its
    /// sending end for the script.
    #[allow(clippy::type_complexity)]
    fn context<'a>(
        &'a self,
        sink: &'a MemorySink,
    ) -> (
        LoopContext<'a, MemorySink>,
        mpsc::Receiver<Result<SourceEvent, SourceError>>,
        mpsc::Sender<Result<SourceEvent, SourceError>>,
    ) {
        let (tx, rx) = mpsc::channel(64);
        let ctx = LoopContext {
            connector: "shop",
            router: &self.router,
            policy: &self.policy,
            sink,
            checkpointed: &self.checkpointed,
            shutdown: self.shutdown.subscribe(),
            dedupe: None,
            paused: watch::channel(false).1,
            topics: None,
        };
        (ctx, rx, tx)
    }
}

/// The loop's result once the script ended; a failed script fails the test, showing how the
/// loop ended (a loop that ended early is the usual cause).
fn ended(
    result: Result<Ending, Error>,
    scripted: std::thread::Result<()>,
) -> Result<Ending, Error> {
    if let Err(panic) = scripted {
        eprintln!("the loop ended with {result:?}");
        std::panic::resume_unwind(panic);
    }
    result
}

/// The at-least-once loop over `sink` and `store` (resuming at `resume`), beside
/// `script(events, shutdown)`; returns the loop's result once both ended.
async fn drive<F, Fut>(
    sink: &MemorySink,
    store: &MemoryStore,
    resume: Option<Checkpoint>,
    script: F,
) -> Result<Ending, Error>
where
    F: FnOnce(mpsc::Sender<Result<SourceEvent, SourceError>>, Arc<watch::Sender<bool>>) -> Fut,
    Fut: Future<Output = ()>,
{
    let fixture = Fixture::new();
    let (ctx, rx, tx) = fixture.context(sink);
    let opts = PipelineOptions {
        max_in_flight: 100,
        checkpoint_interval: Duration::from_millis(1),
    };
    let mut loop_store = store.clone();
    let (result, scripted) = tokio::join!(
        run(ctx, rx, &mut loop_store, resume, Plan::default(), &opts),
        std::panic::AssertUnwindSafe(script(tx, fixture.shutdown.clone())).catch_unwind()
    );
    ended(result, scripted)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_checkpoint_waits_for_every_record_before_it_and_order_is_kept() {
    let sink = &MemorySink::new(1 << 20, false);
    let store = &MemoryStore::default();
    let ended = drive(sink, store, None, |tx, _| async move {
        feed(
            &tx,
            [
                row("e1", "a-1"),
                row("e2", "a-2"),
                commit(10),
                row("e3", "a-1"),
                commit(20),
                row("e4", "a-1"),
                commit(30),
            ],
        )
        .await;
        until("four records sent", || sink.unanswered().len() == 4).await;
        // The first transaction's records and the third's, not the second's.
        sink.answer(0, Ok(()));
        sink.answer(1, Ok(()));
        sink.answer(3, Ok(()));
        until("the first transaction stored", || {
            stored(store) == Some(lsn(10))
        })
        .await;
        settle().await;
        assert_eq!(
            stored(store),
            Some(lsn(10)),
            "nothing past an unacknowledged record"
        );
        sink.answer(2, Ok(()));
        until("the third transaction stored", || {
            stored(store) == Some(lsn(30))
        })
        .await;
        drop(tx);
    })
    .await;
    assert!(matches!(ended, Ok(Ending::Done)), "{ended:?}");
    let ids: Vec<String> = sink.records().iter().map(|r| r.event_id()).collect();
    assert_eq!(ids, ["e1", "e2", "e3", "e4"], "source order");
    let keys: Vec<Option<Vec<u8>>> = sink.records().into_iter().map(|r| r.key).collect();
    assert_eq!(keys[0].as_deref(), Some(&b"a-1"[..]));
    let positions: Vec<SourcePosition> = store.log().into_iter().map(|c| c.position).collect();
    assert!(
        positions
            .windows(2)
            .all(|w| w[0].is_at_or_before(&w[1]) == Some(true)),
        "never backward: {positions:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_delivery_ends_the_loop_before_its_transaction() {
    let sink = &MemorySink::new(1 << 20, false);
    let store = &MemoryStore::default();
    let ended = drive(sink, store, None, |tx, _| async move {
        feed(
            &tx,
            [
                row("e1", "a"),
                commit(10),
                row("e2", "a"),
                commit(20),
                row("e3", "a"),
                commit(30),
            ],
        )
        .await;
        until("three records sent", || sink.unanswered().len() == 3).await;
        sink.answer(0, Ok(()));
        until("the first transaction stored", || {
            stored(store) == Some(lsn(10))
        })
        .await;
        let second = sink.record(1);
        sink.answer(1, Err(MemorySink::timed_out(&second)));
        sink.answer(2, Ok(()));
    })
    .await;
    let e = ended.expect_err("a failed delivery fails the loop");
    assert_eq!(e.class(), Class::Transient, "{e}");
    assert!(e.to_string().contains("e2"), "{e}");
    assert_eq!(stored(store), Some(lsn(10)), "{:?}", store.log());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_record_replays_from_the_checkpoint_before_it() {
    let sink = &MemorySink::new(1 << 20, false);
    let store = &MemoryStore::default();
    let ended = drive(sink, store, None, |tx, _| async move {
        feed(
            &tx,
            [
                row("e1", "a"),
                commit(10),
                row("e2", "a"),
                row("e3", "a"),
                commit(20),
            ],
        )
        .await;
        until("three records sent", || sink.unanswered().len() == 3).await;
        sink.answer(0, Ok(()));
        let refused = sink.record(2);
        sink.answer(1, Ok(()));
        sink.answer(2, Err(MemorySink::refused(&refused)));
    })
    .await;
    let Ok(Ending::Replay(replay)) = ended else {
        panic!("a replay: {ended:?}")
    };
    assert_eq!(
        replay.from.position,
        lsn(10),
        "the checkpoint before the refused record"
    );
    assert_eq!(stored(store), Some(lsn(10)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_that_cannot_be_routed_stops_after_everything_ahead_is_delivered() {
    let sink = &MemorySink::new(1 << 20, true);
    let store = &MemoryStore::default();
    let ended = drive(sink, store, None, |tx, _| async move {
        tx.send(Ok(row("e1", "a"))).await.unwrap();
        tx.send(Ok(commit(10))).await.unwrap();
        tx.send(Ok(row("e2", "a"))).await.unwrap();
        // No aggregate_type column: the router cannot route it.
        tx.send(Ok(row_with(
            &["id", "aggregate_id", "payload"],
            &["e3", "a", "{}"],
        )))
        .await
        .unwrap();
        tx.send(Ok(commit(20))).await.unwrap();
    })
    .await;
    let e = ended.expect_err("a stop");
    assert!(matches!(e, Error::Poison(_)), "{e}");
    assert_eq!(e.class(), Class::Definite);
    assert!(e.to_string().contains("e3"), "{e}");
    let ids: Vec<String> = sink.records().iter().map(|r| r.event_id()).collect();
    assert_eq!(ids, ["e1"], "nothing of the poison's transaction is sent");
    assert_eq!(stored(store), Some(lsn(10)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_too_large_stops_before_its_transaction_and_a_failing_send_ends_the_loop() {
    // Larger than the sink takes: met when routed, a stop with everything ahead delivered.
    let sink = &MemorySink::new(300, true);
    let store = &MemoryStore::default();
    let big = "x".repeat(400);
    let ended = drive(sink, store, None, |tx, _| async move {
        feed(
            &tx,
            [
                row("e1", "a"),
                commit(10),
                row_with(
                    &["id", "aggregate_type", "aggregate_id", "payload"],
                    &["e2", "order", "a", &big],
                ),
                commit(20),
            ],
        )
        .await;
    })
    .await;
    let e = ended.expect_err("a stop");
    assert!(matches!(e, Error::Poison(_)), "{e}");
    assert!(e.to_string().contains("kafka.max_record_bytes=300"), "{e}");
    assert_eq!(stored(store), Some(lsn(10)));

    // A send that fails otherwise ends the loop with that failure.
    let sink = &MemorySink::new(1 << 20, true);
    let store = &MemoryStore::default();
    sink.on_next_send(OnSend::Keep);
    let record = crate::sink::KafkaRecord {
        topic: "outbox.event.order".into(),
        key: None,
        value: None,
        headers: vec![("id".into(), Some(b"e2".to_vec()))],
        timestamp_ms: None,
        partition: None,
    };
    sink.on_next_send(OnSend::Fail(MemorySink::timed_out(&record)));
    let ended = drive(sink, store, None, |tx, _| async move {
        for e in [row("e1", "a"), commit(10), row("e2", "a"), commit(20)] {
            let _ = tx.send(Ok(e)).await;
        }
    })
    .await;
    let e = ended.expect_err("the send's failure");
    assert_eq!(e.class(), Class::Transient, "{e}");
    assert_eq!(stored(store), Some(lsn(10)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_that_fails_stops_the_loop_and_nothing_later_is_claimed() {
    let sink = &MemorySink::new(1 << 20, true);
    let store = &MemoryStore::default();
    let ended = drive(sink, store, None, |tx, _| async move {
        tx.send(Ok(row("e1", "a"))).await.unwrap();
        tx.send(Ok(commit(10))).await.unwrap();
        until("the first checkpoint", || stored(store) == Some(lsn(10))).await;
        store.fail_next_writes(u32::MAX);
        tx.send(Ok(row("e2", "a"))).await.unwrap();
        tx.send(Ok(commit(20))).await.unwrap();
        settle().await;
    })
    .await;
    let e = ended.expect_err("the store's failure");
    assert!(matches!(e, Error::Checkpoint(_)), "{e}");
    assert_eq!(stored(store), Some(lsn(10)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_drains_what_was_read_and_writes_the_final_checkpoint() {
    let sink = &MemorySink::new(1 << 20, false);
    let store = &MemoryStore::default();
    let ended = drive(sink, store, None, |tx, shutdown| async move {
        feed(
            &tx,
            [row("e1", "a"), commit(10), row("e2", "a"), commit(20)],
        )
        .await;
        until("two records sent", || sink.unanswered().len() == 2).await;
        shutdown.send(true).unwrap();
        settle().await;
        assert_eq!(stored(store), None, "nothing acknowledged yet");
        sink.ack_all();
        // The source is not closed by the script: the loop stops reading on its own.
        let _keep = tx;
        until("the final checkpoint", || stored(store) == Some(lsn(20))).await;
    })
    .await;
    assert!(matches!(ended, Ok(Ending::Done)), "{ended:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resumed_split_transaction_skips_the_rows_already_delivered() {
    let sink = &MemorySink::new(1 << 20, true);
    let store = &MemoryStore::default();
    let resume = Checkpoint {
        connector: "shop".into(),
        position: lsn(10),
        skip: 2,
        updated_at_ms: 0,
        cutover: None,
    };
    let ended = drive(sink, store, Some(resume), |tx, _| async move {
        feed(
            &tx,
            [row("e1", "a"), row("e2", "a"), row("e3", "a"), commit(20)],
        )
        .await;
    })
    .await;
    assert!(matches!(ended, Ok(Ending::Done)), "{ended:?}");
    let ids: Vec<String> = sink.records().iter().map(|r| r.event_id()).collect();
    assert_eq!(
        ids,
        ["e3"],
        "the two rows of the checkpoint's skip are not sent again"
    );
    assert_eq!(
        store.last().map(|c| (c.position, c.skip)),
        Some((lsn(20), 0))
    );
    let _ = sink.deliveries().sent();
}

/// The exactly-once loop ([`super::transactional::run`]) on the in-memory sink: records and
/// checkpoint visible together or not at all.
mod exactly_once {
    use super::*;
    use crate::checkpoint::{CheckpointError, CheckpointRecords};
    use crate::pipeline::transactional::{self, BatchOptions};
    use crate::record::KafkaRecord;

    /// Checkpoint records as the Kafka store makes them, to a topic of their own.
    struct Records;

    const CHECKPOINTS: &str = "outboxd.checkpoints";

    impl CheckpointRecords for Records {
        fn record(&self, c: &Checkpoint) -> Result<KafkaRecord, CheckpointError> {
            Ok(KafkaRecord {
                topic: CHECKPOINTS.into(),
                key: Some(c.connector.clone().into_bytes()),
                value: Some(serde_json::to_vec(c).unwrap()),
                headers: Vec::new(),
                timestamp_ms: None,
                partition: None,
            })
        }
    }

    /// What committed transactions made visible: the events' ids, and the checkpoints'
    /// positions, in order.
    fn visible(sink: &MemorySink) -> (Vec<String>, Vec<SourcePosition>) {
        let (mut ids, mut checkpoints) = (Vec::new(), Vec::new());
        for r in sink.committed() {
            if r.topic == CHECKPOINTS {
                let c: Checkpoint = serde_json::from_slice(r.value.as_deref().unwrap()).unwrap();
                checkpoints.push(c.position);
            } else {
                ids.push(r.event_id());
            }
        }
        (ids, checkpoints)
    }

    async fn drive_eos<F, Fut>(
        sink: &MemorySink,
        resume: Option<Checkpoint>,
        script: F,
    ) -> (
        Result<Ending, Error>,
        watch::Receiver<Option<SourcePosition>>,
    )
    where
        F: FnOnce(mpsc::Sender<Result<SourceEvent, SourceError>>, Arc<watch::Sender<bool>>) -> Fut,
        Fut: Future<Output = ()>,
    {
        let fixture = Fixture::new();
        let published = fixture.checkpointed.subscribe();
        let (ctx, rx, tx) = fixture.context(sink);
        let opts = BatchOptions {
            max_wait: Duration::from_millis(20),
            ..BatchOptions::default()
        };
        let (result, scripted) = tokio::join!(
            transactional::run(ctx, rx, &Records, resume, Plan::default(), &opts),
            std::panic::AssertUnwindSafe(script(tx, fixture.shutdown.clone())).catch_unwind()
        );
        (ended(result, scripted), published)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn records_and_their_checkpoint_become_visible_together() {
        let sink = &MemorySink::new(1 << 20, true);
        let (ended, published) = drive_eos(sink, None, |tx, _| async move {
            feed(
                &tx,
                [
                    row("e1", "a"),
                    row("e2", "b"),
                    commit(10),
                    row("e3", "a"),
                    commit(20),
                ],
            )
            .await;
            until("committed through the second transaction", || {
                visible(sink).1.last() == Some(&lsn(20))
            })
            .await;
        })
        .await;
        assert!(matches!(ended, Ok(Ending::Done)), "{ended:?}");
        let (ids, checkpoints) = visible(sink);
        assert_eq!(ids, ["e1", "e2", "e3"]);
        assert!(checkpoints.contains(&lsn(20)), "{checkpoints:?}");
        assert_eq!(*published.borrow(), Some(lsn(20)));
        // Every checkpoint is the last record of its transaction: nothing visible is past it.
        let committed = sink.committed();
        assert_eq!(
            committed.last().map(|r| r.topic.as_str()),
            Some(CHECKPOINTS)
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_failed_commit_shows_nothing_of_its_batch() {
        let sink = &MemorySink::new(1 << 20, true);
        sink.fail_next_commit(MemorySink::coordinator_timed_out(
            "committing a transaction",
        ));
        let (ended, published) = drive_eos(sink, None, |tx, _| async move {
            feed(&tx, [row("e1", "a"), commit(10)]).await;
            settle().await;
        })
        .await;
        let e = ended.expect_err("the commit's failure");
        assert_eq!(e.class(), Class::Transient, "{e}");
        assert_eq!(visible(sink), (vec![], vec![]), "nothing of the batch");
        assert_eq!(sink.aborts(), 1, "the open transaction is aborted");
        assert_eq!(*published.borrow(), None, "no checkpoint published");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_event_that_cannot_be_routed_commits_what_is_ahead_and_stops() {
        let sink = &MemorySink::new(1 << 20, true);
        let (ended, published) = drive_eos(sink, None, |tx, _| async move {
            feed(
                &tx,
                [
                    row("e1", "a"),
                    commit(10),
                    row("e2", "a"),
                    row_with(&["id", "aggregate_id", "payload"], &["e3", "a", "{}"]),
                    commit(20),
                ],
            )
            .await;
        })
        .await;
        let e = ended.expect_err("a stop");
        assert!(matches!(e, Error::Poison(_)), "{e}");
        assert!(e.to_string().contains("e3"), "{e}");
        let (ids, checkpoints) = visible(sink);
        assert_eq!(ids, ["e1"], "nothing of the poison's transaction");
        assert_eq!(checkpoints.last(), Some(&lsn(10)));
        assert_eq!(*published.borrow(), Some(lsn(10)));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_fenced_producer_stops_without_an_abort() {
        let sink = &MemorySink::new(1 << 20, false);
        let (ended, _) = drive_eos(sink, None, |tx, _| async move {
            feed(&tx, [row("e1", "a"), commit(10)]).await;
            until("e1 sent", || sink.unanswered().len() == 1).await;
            sink.set_fatal(SinkError::Fenced {
                what: "committing a transaction",
                detail: "another instance".into(),
            });
            let r = sink.record(0);
            sink.answer(0, Err(MemorySink::timed_out(&r)));
        })
        .await;
        let e = ended.expect_err("fenced");
        assert!(e.is_fenced(), "{e}");
        assert_eq!(sink.aborts(), 0, "a fenced producer sends nothing more");
        assert_eq!(visible(sink), (vec![], vec![]));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn shutdown_commits_the_open_batch() {
        let sink = &MemorySink::new(1 << 20, true);
        let (ended, published) = drive_eos(sink, None, |tx, shutdown| async move {
            feed(
                &tx,
                [row("e1", "a"), commit(10), row("e2", "a"), commit(20)],
            )
            .await;
            // Everything read (e2 sent) before the signal: a shutdown stops the reading.
            until("e2 sent", || {
                sink.records().iter().any(|r| r.event_id() == "e2")
            })
            .await;
            shutdown.send(true).unwrap();
            let _keep = tx;
            until("the final commit", || {
                visible(sink).1.last() == Some(&lsn(20))
            })
            .await;
        })
        .await;
        assert!(matches!(ended, Ok(Ending::Done)), "{ended:?}");
        assert_eq!(visible(sink).0, ["e1", "e2"]);
        assert_eq!(*published.borrow(), Some(lsn(20)));
    }
}
