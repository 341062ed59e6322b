//! The JetStream streams a connector's records go to, and their duplicate windows: logged
//! once per stream and run, and compared with the age of the checkpoint the run started
//! from. A restart within the window publishes again what the last run published after its
//! checkpoint and JetStream drops those copies (same `Nats-Msg-Id`); past the window they
//! are kept (at-least-once for that gap).

use std::collections::HashSet;
use std::sync::Mutex;
use std::time::Duration;

/// What a connector's run knows about its streams; shared by its checkpoint store (the
/// loaded checkpoint's time) and its sink (the streams acknowledging records).
#[derive(Debug)]
pub struct StreamNotes {
    connector: String,
    /// Streams whose window was logged (or is being looked up).
    seen: Mutex<HashSet<String>>,
    /// The loaded checkpoint's age when loaded, in ms (`None`: none loaded).
    checkpoint_age_ms: Mutex<Option<i64>>,
    /// The last error the server reported on the sink's connection (`-ERR`, e.g. a
    /// permissions violation on a subject: the publish then gets no acknowledgement).
    server_said: Mutex<Option<String>>,
}

impl StreamNotes {
    /// The notes of `connector` in this process (its checkpoint store and its sink are built
    /// apart and share them).
    pub fn of(connector: &str) -> std::sync::Arc<Self> {
        static ALL: std::sync::OnceLock<
            Mutex<std::collections::HashMap<String, std::sync::Arc<StreamNotes>>>,
        > = std::sync::OnceLock::new();
        ALL.get_or_init(Mutex::default)
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(connector.to_string())
            .or_insert_with(|| std::sync::Arc::new(Self::new(connector)))
            .clone()
    }

    /// Notes for `connector`.
    pub fn new(connector: &str) -> Self {
        Self {
            connector: connector.to_string(),
            seen: Mutex::default(),
            checkpoint_age_ms: Mutex::default(),
            server_said: Mutex::default(),
        }
    }

    /// The server reported `error` on the sink's connection: logged (WARN) when it differs
    /// from the last one, and kept for the failures it explains
    /// ([`server_said`](Self::server_said)).
    pub fn server_error(&self, error: &str) {
        let mut said = self.server_said.lock().unwrap_or_else(|e| e.into_inner());
        if said.as_deref() != Some(error) {
            tracing::warn!(connector = %self.connector, "the NATS server reported: {error}");
            *said = Some(error.to_string());
        }
    }

    /// The last error the server reported on the sink's connection, if any.
    pub fn server_said(&self) -> Option<String> {
        self.server_said
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The connector's name.
    pub fn connector(&self) -> &str {
        &self.connector
    }

    /// The run starts from a checkpoint written at `updated_at_ms` (ms since the epoch).
    /// Streams are looked at again (their windows logged) in this run.
    pub fn loaded(&self, updated_at_ms: Option<i64>) {
        let age = updated_at_ms.map(|t| (crate::clock::now_ms() - t).max(0));
        *self
            .checkpoint_age_ms
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = age;
        self.seen.lock().unwrap_or_else(|e| e.into_inner()).clear();
        *self.server_said.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }

    /// Whether `stream` is new to this run (and notes it).
    fn first(&self, stream: &str) -> bool {
        self.seen
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(stream.to_string())
    }

    /// `stream` acknowledged a record: the first time in this run, its duplicate window is
    /// looked up (in the background) and logged ([`window`](Self::window)).
    pub fn acknowledged_by(&self, stream: &str, js: &async_nats::jetstream::Context) {
        if stream.is_empty() || !self.first(stream) {
            return;
        }
        let (js, stream, notes) = (
            js.clone(),
            stream.to_string(),
            Self {
                connector: self.connector.clone(),
                seen: Mutex::default(),
                server_said: Mutex::default(),
                checkpoint_age_ms: Mutex::new(
                    *self
                        .checkpoint_age_ms
                        .lock()
                        .unwrap_or_else(|e| e.into_inner()),
                ),
            },
        );
        tokio::spawn(async move {
            match js.get_stream(&stream).await {
                Ok(s) => notes.window(&stream, s.cached_info().config.duplicate_window),
                Err(e) => {
                    tracing::debug!(connector = %notes.connector, "cannot read stream {stream}'s configuration: {e}")
                }
            }
        });
    }

    /// Logs `stream`'s duplicate window (`window`), and a WARN when the checkpoint the run
    /// started from is older than it. Marks the stream seen.
    pub fn window(&self, stream: &str, window: Duration) {
        self.first(stream);
        let connector = &self.connector;
        tracing::info!(connector, "JetStream stream {stream}: duplicate window {window:?} (a restart within it publishes nothing twice)");
        let age = *self
            .checkpoint_age_ms
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(age) = age {
            let age = Duration::from_millis(u64::try_from(age).unwrap_or(0));
            if age > window {
                tracing::warn!(connector, "the checkpoint this run started from was written {age:?} ago, longer than stream {stream}'s duplicate window ({window:?}): records the last run published after it (if any) are published again and JetStream no longer drops them as duplicates (at-least-once for that gap; consumers can dedupe by the id header). Restart within the window, or widen it (nats stream edit {stream} --dupe-window ...)");
            }
        }
    }
}
