//! The topics each connector has used since it was created or its topics were last reset:
//! Kafka Connect's topic tracking (KIP-558), which `GET /connectors/{name}/topics` lists and
//! `PUT /connectors/{name}/topics/reset` clears.
//!
//! * A topic is the routed destination of a record (`KafkaRecord::topic`: a Kafka topic; on
//!   the other sinks what their subject, stream or routing key is made from). It is noted
//!   when the first record for it leaves the router ([`ActiveTopics::used`]); Connect notes it
//!   at that record's acknowledgement, so a topic whose first record Kafka refuses is listed
//!   here and not there.
//! * Notes are kept by a [`Keeper`]: in a group, the group's config topic, keyed as Connect's
//!   status topic keys them (`status-topic-<topic>:connector-<name>`, see
//!   `crate::group::configs::topic_record`), so that every member lists them; without a
//!   group, `.active-topics.json` in the `--rest-connectors` directory ([`FileKeeper`]); with
//!   neither, the process's memory only (the topics used since it started).
//! * As in Connect, deleting a connector keeps its topics: one created again under that name
//!   lists them until a reset.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::clock::now_ms;

/// Connector name → topic → when it was first noted (ms since the Unix epoch).
pub type Used = BTreeMap<String, BTreeMap<String, i64>>;

/// How long after a note that could not be kept the same topic is tried again.
const RETRY_AFTER: Duration = Duration::from_secs(10);

/// Where the notes are kept durably.
#[async_trait::async_trait]
pub trait Keeper: Send + Sync {
    /// Keeps that `connector` used `topic`, first at `at_ms`. Errors: it could not be kept
    /// (the message says where and why).
    async fn note(&self, connector: &str, topic: &str, at_ms: i64) -> Result<(), String>;
    /// Forgets that `connector` used `topics`. Errors as [`Keeper::note`].
    async fn forget(&self, connector: &str, topics: &[String]) -> Result<(), String>;
}

/// The process's record of the topics its connectors used; cheap to clone (shared).
#[derive(Clone, Default)]
pub struct ActiveTopics {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for ActiveTopics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ActiveTopics")
            .field("used", &self.state().used)
            .finish()
    }
}

#[derive(Default)]
struct Inner {
    state: Mutex<State>,
    keeper: Mutex<Option<Arc<dyn Keeper>>>,
    /// `topic.tracking.enable=false`: nothing is noted.
    off: std::sync::atomic::AtomicBool,
}

#[derive(Default)]
struct State {
    used: Used,
    /// Notes the keeper could not keep: listed all the same (the topic was used), noted
    /// again at a record for the topic after then.
    retry: BTreeMap<(String, String), Instant>,
    /// The last note could not be kept (its WARN was logged).
    failing: bool,
}

impl ActiveTopics {
    fn state(&self) -> MutexGuard<'_, State> {
        self.inner.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn keeper(&self) -> Option<Arc<dyn Keeper>> {
        self.inner
            .keeper
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Keeps every later note with `keeper`, after adding what it already kept (`kept`).
    pub fn keep_with(&self, keeper: Arc<dyn Keeper>, kept: Used) {
        {
            let mut s = self.state();
            for (connector, topics) in kept {
                s.used.entry(connector).or_default().extend(topics);
            }
        }
        *self.inner.keeper.lock().unwrap_or_else(|e| e.into_inner()) = Some(keeper);
    }

    /// Notes nothing from now on (Kafka Connect's `topic.tracking.enable=false`).
    pub fn turn_off(&self) {
        self.inner
            .off
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// Notes that `connector` sent a record to `topic`. The first note of a topic is kept in
    /// the background (on the tokio runtime, when there is one); one that could not be kept
    /// stays listed, is logged (one WARN until notes are kept again) and is noted again at a
    /// later record for the topic, at most every 10 s.
    pub fn used(&self, connector: &str, topic: &str) {
        if self.inner.off.load(std::sync::atomic::Ordering::Relaxed) {
            return;
        }
        let at_ms = {
            let mut s = self.state();
            let listed = s.used.get(connector).and_then(|t| t.get(topic)).copied();
            // Called for every record: a listed topic with no note to retry (the usual case)
            // returns before anything is allocated.
            if listed.is_some() && s.retry.is_empty() {
                return;
            }
            let key = (connector.to_string(), topic.to_string());
            match (listed, s.retry.get(&key)) {
                (Some(_), None) => return,
                (Some(_), Some(t)) if Instant::now() < *t => return,
                _ => {}
            }
            s.retry.remove(&key);
            match listed {
                Some(at_ms) => at_ms,
                None => {
                    let at_ms = now_ms();
                    s.used.entry(key.0).or_default().insert(key.1, at_ms);
                    at_ms
                }
            }
        };
        let Some(keeper) = self.keeper() else {
            return;
        };
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let (this, connector, topic) = (self.clone(), connector.to_string(), topic.to_string());
        rt.spawn(async move {
            let kept = keeper.note(&connector, &topic, at_ms).await;
            let mut s = this.state();
            match kept {
                Ok(()) if s.failing => {
                    s.failing = false;
                    tracing::info!("topic tracking: the topics connectors use are kept again");
                }
                Ok(()) => {}
                Err(e) => {
                    // One WARN per streak of failures, not one per topic.
                    if !s.failing {
                        s.failing = true;
                        tracing::warn!(connector = %connector, "topic tracking: cannot keep the topics connectors use: {e}; GET /connectors/{{name}}/topics lists them while this process runs, and each is kept at a later record for it (tried again at most every 10 s per topic; an INFO says when keeping works again)");
                    } else {
                        tracing::debug!(connector = %connector, "topic tracking: still cannot keep a used topic: {e}");
                    }
                    // Still listed (a reset since has removed it: nothing to retry).
                    if s.used.get(&connector).is_some_and(|t| t.contains_key(&topic)) {
                        s.retry
                            .insert((connector, topic), Instant::now() + RETRY_AFTER);
                    }
                }
            }
        });
    }

    /// What the keeper holds changed (a group member read it in the config topic): `connector`
    /// used `topic` first at `at_ms`, or (`None`) no longer lists it (a reset).
    pub fn kept(&self, connector: &str, topic: &str, at_ms: Option<i64>) {
        let mut s = self.state();
        let key = (connector.to_string(), topic.to_string());
        s.retry.remove(&key);
        match at_ms {
            Some(at) => {
                s.used.entry(key.0).or_default().insert(key.1, at);
            }
            None => {
                if let Some(t) = s.used.get_mut(connector) {
                    t.remove(topic);
                    if t.is_empty() {
                        s.used.remove(connector);
                    }
                }
            }
        }
    }

    /// The topics `connector` used, sorted (empty for a connector that used none, or that
    /// does not exist: Connect answers so too).
    pub fn list(&self, connector: &str) -> Vec<String> {
        self.state()
            .used
            .get(connector)
            .map(|t| t.keys().cloned().collect())
            .unwrap_or_default()
    }

    /// Forgets the topics `connector` used, here and in the keeper.
    ///
    /// Errors: the keeper could not forget them (they are forgotten here all the same, and
    /// listed again after a restart).
    pub async fn reset(&self, connector: &str) -> Result<(), String> {
        let topics: Vec<String> = {
            let mut s = self.state();
            s.retry.retain(|(c, _), _| c != connector);
            s.used
                .remove(connector)
                .map(|t| t.into_keys().collect())
                .unwrap_or_default()
        };
        match self.keeper() {
            Some(k) if !topics.is_empty() => k.forget(connector, &topics).await,
            _ => Ok(()),
        }
    }
}

/// Keeps the notes of a process without a group in a JSON file (`{"<connector>": {"<topic>":
/// <ms>}}`), replaced atomically (a temporary file renamed). Notes made while a write is
/// under way are written together by the next one, so that a connector reaching thousands
/// of topics does not rewrite the file once per topic.
pub struct FileKeeper {
    path: PathBuf,
    /// What the file should hold, and how many changes were made to it.
    wanted: Mutex<(Used, u64)>,
    /// How many changes the file holds, and the last write that failed (how many changes
    /// it held, why): the writer's lock, one write at a time.
    written: tokio::sync::Mutex<(u64, Option<(u64, String)>)>,
    /// How many times the file was written or tried.
    attempts: std::sync::atomic::AtomicU64,
}

impl FileKeeper {
    /// The keeper of file `path`, and what it holds (nothing when the file does not exist).
    ///
    /// Errors: the file exists but cannot be read or is not such a JSON object (the message
    /// names it and says to remove it).
    pub fn open(path: PathBuf) -> Result<(Self, Used), String> {
        let used: Used = match std::fs::read(&path) {
            Ok(b) => serde_json::from_slice(&b).map_err(|e| {
                format!(
                    "{} is not outboxd's record of the topics connectors used ({e})",
                    path.display()
                )
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Used::new(),
            Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
        };
        let keeper = Self {
            path,
            wanted: Mutex::new((used.clone(), 0)),
            written: tokio::sync::Mutex::new((0, None)),
            attempts: Default::default(),
        };
        Ok((keeper, used))
    }

    /// The keeper of file `path` holding nothing: it replaces the file at its first change
    /// (for a file [`FileKeeper::open`] could not read).
    pub fn empty(path: PathBuf) -> Self {
        Self {
            path,
            wanted: Mutex::new((Used::new(), 0)),
            written: tokio::sync::Mutex::new((0, None)),
            attempts: Default::default(),
        }
    }

    /// How many times this keeper wrote its file or tried to (each write holds every note
    /// made before it).
    #[cfg(test)]
    fn attempts(&self) -> u64 {
        self.attempts.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Applies `change` to what the file should hold, then returns once a write that holds
    /// it succeeded (its own, or one that another caller made meanwhile).
    async fn change(&self, change: impl FnOnce(&mut Used)) -> Result<(), String> {
        let mine = {
            let mut w = self.wanted.lock().unwrap_or_else(|e| e.into_inner());
            change(&mut w.0);
            w.1 += 1;
            w.1
        };
        let mut written = self.written.lock().await;
        if written.0 >= mine {
            return Ok(());
        }
        // A write that held this change failed while this caller waited: its answer, rather
        // than another write of the whole file per waiting caller.
        if let Some((held, why)) = &written.1 {
            if *held >= mine {
                return Err(why.clone());
            }
        }
        let (bytes, holds) = {
            let w = self.wanted.lock().unwrap_or_else(|e| e.into_inner());
            (
                serde_json::to_vec_pretty(&w.0).map_err(|e| e.to_string())?,
                w.1,
            )
        };
        let path = self.path.clone();
        self.attempts
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let done: Result<(), String> =
            tokio::task::spawn_blocking(move || -> std::io::Result<()> {
                if let Some(dir) = path.parent() {
                    std::fs::create_dir_all(dir)?;
                }
                let tmp = path.with_extension("tmp");
                std::fs::write(&tmp, bytes)?;
                std::fs::rename(&tmp, &path)
            })
            .await
            .map_err(|e| e.to_string())
            .and_then(|d| d.map_err(|e| format!("cannot write {}: {e}", self.path.display())));
        if let Err(why) = done {
            written.1 = Some((holds, why.clone()));
            return Err(why);
        }
        *written = (holds, None);
        Ok(())
    }
}

#[async_trait::async_trait]
impl Keeper for FileKeeper {
    async fn note(&self, connector: &str, topic: &str, at_ms: i64) -> Result<(), String> {
        self.change(|used| {
            used.entry(connector.to_string())
                .or_default()
                .insert(topic.to_string(), at_ms);
        })
        .await
    }

    async fn forget(&self, connector: &str, topics: &[String]) -> Result<(), String> {
        self.change(|used| {
            if let Some(t) = used.get_mut(connector) {
                for topic in topics {
                    t.remove(topic);
                }
                if t.is_empty() {
                    used.remove(connector);
                }
            }
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn notes_each_topic_once_and_a_reset_forgets_them() {
        let dir = std::env::temp_dir().join(format!("outboxd-active-topics-{}", now_ms()));
        let path = dir.join(".active-topics.json");
        let (keeper, kept) = FileKeeper::open(path.clone()).unwrap();
        assert!(kept.is_empty());
        let topics = ActiveTopics::default();
        topics.keep_with(Arc::new(keeper), kept);
        topics.used("a", "orders");
        topics.used("a", "orders");
        topics.used("a", "carts");
        topics.used("b", "orders");
        assert_eq!(topics.list("a"), ["carts", "orders"]);
        assert_eq!(topics.list("nope"), Vec::<String>::new());
        // Kept: a new process reads them back.
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let (_, kept) = FileKeeper::open(path.clone()).unwrap();
            if kept.get("a").map(|t| t.len()) == Some(2) && kept.contains_key("b") {
                break;
            }
            assert!(Instant::now() < deadline, "not kept: {kept:?}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        topics.reset("a").await.unwrap();
        assert!(topics.list("a").is_empty());
        let (_, kept) = FileKeeper::open(path.clone()).unwrap();
        assert!(!kept.contains_key("a"));
        assert_eq!(kept["b"].keys().collect::<Vec<_>>(), ["orders"]);
        // Used again after the reset: noted again.
        topics.used("a", "orders");
        assert_eq!(topics.list("a"), ["orders"]);
        // A file that is not the record: a clear error, no panic.
        std::fs::write(&path, b"[1,2]").unwrap();
        let e = FileKeeper::open(path.clone()).err().unwrap();
        assert!(e.contains("is not outboxd's record"), "{e}");
        let _ = std::fs::remove_dir_all(dir);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn notes_made_during_a_write_are_written_together() {
        let dir = std::env::temp_dir().join(format!("outboxd-active-topics-many-{}", now_ms()));
        let path = dir.join(".active-topics.json");
        let keeper = Arc::new(FileKeeper::empty(path.clone()));
        let topics = ActiveTopics::default();
        topics.keep_with(keeper.clone(), Used::new());
        const MANY: usize = 3000;
        for i in 0..MANY {
            topics.used("a", &format!("topic-{i}"));
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let kept = FileKeeper::open(path.clone())
                .map(|k| k.1)
                .unwrap_or_default();
            if kept.get("a").map(|t| t.len()) == Some(MANY) {
                break;
            }
            assert!(Instant::now() < deadline, "not all kept");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // Every note is in the file, written far fewer times than there were notes.
        assert!(
            keeper.attempts() < MANY as u64 / 2,
            "{} writes",
            keeper.attempts()
        );
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn turned_off_it_notes_nothing() {
        let topics = ActiveTopics::default();
        topics.turn_off();
        topics.used("a", "orders");
        assert!(topics.list("a").is_empty());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_note_not_kept_stays_listed_and_is_noted_again() {
        struct Failing(std::sync::atomic::AtomicU64);
        #[async_trait::async_trait]
        impl Keeper for Failing {
            async fn note(&self, _: &str, _: &str, _: i64) -> Result<(), String> {
                self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                Err("refused".into())
            }
            async fn forget(&self, _: &str, _: &[String]) -> Result<(), String> {
                Ok(())
            }
        }
        let keeper = Arc::new(Failing(Default::default()));
        let topics = ActiveTopics::default();
        topics.keep_with(keeper.clone(), Used::new());
        topics.used("a", "orders");
        let deadline = Instant::now() + Duration::from_secs(5);
        while !topics
            .state()
            .retry
            .contains_key(&("a".into(), "orders".into()))
        {
            assert!(Instant::now() < deadline, "the failure was not seen");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        // Listed all the same; the next records within 10 s do not note it again.
        assert_eq!(topics.list("a"), ["orders"]);
        topics.used("a", "orders");
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(keeper.0.load(std::sync::atomic::Ordering::Relaxed), 1);
        // Past its time, a record notes it again.
        topics
            .state()
            .retry
            .insert(("a".into(), "orders".into()), Instant::now());
        topics.used("a", "orders");
        let deadline = Instant::now() + Duration::from_secs(5);
        while keeper.0.load(std::sync::atomic::Ordering::Relaxed) < 2 {
            assert!(Instant::now() < deadline, "not noted again");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        // A reset forgets it, and its retry.
        topics.reset("a").await.unwrap();
        assert!(topics.list("a").is_empty());
        assert!(topics.state().retry.is_empty());
    }

    #[test]
    fn what_the_keeper_holds_is_listed() {
        let topics = ActiveTopics::default();
        topics.kept("a", "orders", Some(5));
        topics.kept("a", "carts", Some(6));
        topics.kept("b", "x", Some(7));
        assert_eq!(topics.list("a"), ["carts", "orders"]);
        topics.kept("a", "orders", None);
        topics.kept("a", "carts", None);
        topics.kept("a", "never", None);
        assert!(topics.list("a").is_empty());
        assert_eq!(topics.list("b"), ["x"]);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn notes_made_during_a_failed_write_share_its_answer() {
        let dir = std::env::temp_dir().join(format!("outboxd-active-topics-fail-{}", now_ms()));
        std::fs::create_dir_all(&dir).unwrap();
        // Its parent is a file: every write fails (whoever runs the test).
        let blocker = dir.join("blocker");
        std::fs::write(&blocker, b"").unwrap();
        let keeper = Arc::new(FileKeeper::empty(blocker.join(".active-topics.json")));
        const MANY: usize = 2000;
        let notes: Vec<_> = (0..MANY)
            .map(|i| {
                let k = keeper.clone();
                tokio::spawn(async move { k.note("a", &format!("t{i}"), 1).await })
            })
            .collect();
        for n in notes {
            assert!(n.await.unwrap().is_err());
        }
        assert!(
            keeper.attempts() < MANY as u64 / 2,
            "{} attempts",
            keeper.attempts()
        );
        let _ = std::fs::remove_dir_all(dir);
    }
}
