//! The connectors of a process without a group, each kept in the state its operator asked
//! for: running, paused or stopped (Kafka Connect's target states: `PUT
//! /connectors/{name}/pause`, `/resume`, `/stop`), restarted on request, and replaced one by
//! one when the configuration changes (SIGHUP, or a connector created or changed through the
//! REST API).
//!
//! * [`Supervisor::reload`] re-reads the configuration (the [`Loader`]) and applies it
//!   connector by connector: a new one starts, one that is gone stops (drained, final
//!   checkpoint) and is forgotten, one whose configuration changed stops and starts again
//!   with the new one (from its checkpoint), and an unchanged one keeps streaming untouched.
//!   A configuration that does not load changes nothing.
//! * A connector that ends by itself (a definite failure) stays listed, `failed`, until it is
//!   restarted, reconfigured or removed.
//! * Operations are applied one at a time; reads ([`Supervisor::list`]) never wait for them.
//!
//! Stopping a connector drains it and writes its final checkpoint, as on SIGTERM; pausing it
//! keeps its source connection and takes no more events ([`Connector::paused_by`]).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::watch;

use crate::config::{Config, ConfigError, ConnectorConfig};
use crate::connector::{Connector, StopHandle};
use crate::health::Health;

/// The state an operator asked a connector to be in (Kafka Connect's `TargetState`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Target {
    /// Reading and delivering.
    Running,
    /// Started, its source connected, delivering nothing more until resumed.
    Paused,
    /// Not started; its source released.
    Stopped,
}

/// Reads the whole configuration again: the files given on the command line and those the
/// REST API wrote.
pub type Loader = Box<dyn Fn() -> Result<Config, ConfigError> + Send + Sync>;

/// One connector as the supervisor holds it.
#[derive(Debug, Clone)]
pub struct Listed {
    /// Its configuration, as last applied.
    pub cfg: ConnectorConfig,
    /// What it was asked to be.
    pub target: Target,
    /// Whether a run of it is under way (started and not ended).
    pub running: bool,
    /// Whether its last run ended on a failure of its own (not on a stop).
    pub failed: bool,
    /// In a group, the member that runs it when another one does (its REST address, else
    /// its member id); `None`: this process runs it, or nobody does.
    pub worker: Option<String>,
    /// In a group, why it failed in the member `worker` names (its task's `trace` there).
    pub trace: Option<String>,
}

/// What an operation found wrong.
#[derive(Debug, thiserror::Error)]
pub enum OpError {
    /// No connector of that name.
    #[error("Connector {0} not found")]
    NotFound(String),
    /// The configuration did not load; nothing changed.
    #[error("{0}")]
    Config(String),
    /// The process is shutting down.
    #[error("outboxd is shutting down; nothing changed")]
    Closing,
    /// Not possible yet (a group member that has not joined its group): try again.
    #[error("{0}")]
    NotYet(String),
    /// Where configurations are kept did not take the change (the group's config topic).
    #[error("{0}")]
    Store(String),
}

struct Run {
    stop: StopHandle,
    pause: watch::Sender<bool>,
    /// Turns `Some(failed)` when the run has ended.
    ended: watch::Receiver<Option<bool>>,
}

struct Slot {
    cfg: ConnectorConfig,
    target: Target,
    run: Option<Run>,
    failed: bool,
}

/// The connectors of the process and what each was asked to be.
pub struct Supervisor {
    slots: Mutex<BTreeMap<String, Slot>>,
    /// Held for the length of one operation: they are applied one at a time.
    ops: tokio::sync::Mutex<()>,
    health: Health,
    loader: Loader,
    /// Bumped when a run ends or an operation completes ([`Supervisor::changes`]).
    changed: watch::Sender<u64>,
    /// Set at shutdown: nothing starts any more.
    closing: AtomicBool,
    /// Where the target states other than running are kept across restarts
    /// ([`Supervisor::keep_targets_in`]).
    targets: Option<std::path::PathBuf>,
}

impl Supervisor {
    /// A supervisor with no connectors yet; `loader` gives the configuration at
    /// [`reload`](Self::reload).
    pub fn new(health: Health, loader: Loader) -> Arc<Self> {
        Arc::new(Self {
            slots: Mutex::new(BTreeMap::new()),
            ops: tokio::sync::Mutex::new(()),
            health,
            loader,
            changed: watch::channel(0).0,
            closing: AtomicBool::new(false),
            targets: None,
        })
    }

    /// A supervisor that keeps its connectors' target states in file `path` (a JSON object,
    /// name to `"paused"` or `"stopped"`): a connector paused or stopped stays so after the
    /// process restarts, as Kafka Connect keeps target states in its config topic.
    pub fn keep_targets_in(health: Health, loader: Loader, path: std::path::PathBuf) -> Arc<Self> {
        let mut s = Self::new(health, loader);
        if let Some(me) = Arc::get_mut(&mut s) {
            me.targets = Some(path);
        }
        s
    }

    /// The kept target states (none when there is no file or it cannot be read).
    fn kept_targets(&self) -> BTreeMap<String, Target> {
        self.targets
            .as_ref()
            .and_then(|p| std::fs::read(p).ok())
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default()
    }

    /// Writes the target states other than running to the file, if there is one.
    fn keep_targets(&self) {
        let Some(path) = &self.targets else { return };
        let kept: BTreeMap<String, Target> = self
            .slots()
            .iter()
            .filter(|(_, s)| s.target != Target::Running)
            .map(|(n, s)| (n.clone(), s.target))
            .collect();
        let write = || -> std::io::Result<()> {
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir)?;
            }
            let tmp = path.with_extension("tmp");
            std::fs::write(&tmp, serde_json::to_vec_pretty(&kept)?)?;
            std::fs::rename(&tmp, path)
        };
        if let Err(e) = write() {
            tracing::error!(
                "cannot keep the connectors' target states in {}: {e}; a paused or stopped \
                 connector runs again after a restart",
                path.display()
            );
        }
    }

    fn slots(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Slot>> {
        self.slots.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn bump(&self) {
        self.changed.send_modify(|n| *n += 1);
    }

    /// Turns on every change: a run ended, an operation completed.
    pub fn changes(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }

    /// Every connector, by name.
    pub fn list(&self) -> BTreeMap<String, Listed> {
        self.slots()
            .iter()
            .map(|(name, s)| {
                let running = s.run.as_ref().is_some_and(|r| r.ended.borrow().is_none());
                (
                    name.clone(),
                    Listed {
                        cfg: s.cfg.clone(),
                        target: s.target,
                        running,
                        failed: s.failed,
                        worker: None,
                        trace: None,
                    },
                )
            })
            .collect()
    }

    /// How many runs are under way.
    pub fn live(&self) -> usize {
        self.list().values().filter(|l| l.running).count()
    }

    /// Whether an operation is being applied.
    pub fn busy(&self) -> bool {
        self.ops.try_lock().is_err()
    }

    /// Starts every connector of `cfg` (at process start).
    pub async fn start_all(self: &Arc<Self>, cfg: Config) -> Result<(), OpError> {
        let _op = self.ops.lock().await;
        for c in cfg.connectors {
            self.add(c)?;
        }
        Ok(())
    }

    /// Re-reads the configuration and applies it connector by connector (see the module
    /// docs); returns the names of those started, changed and removed.
    ///
    /// Errors when it does not load (nothing changed) or the process is shutting down.
    pub async fn reload(self: &Arc<Self>) -> Result<Applied, OpError> {
        let _op = self.ops.lock().await;
        let result = self.reload_locked().await;
        self.bump();
        result
    }

    async fn reload_locked(self: &Arc<Self>) -> Result<Applied, OpError> {
        let cfg = (self.loader)().map_err(|e| OpError::Config(format!("{e:#}")))?;
        let mut applied = Applied::default();
        let wanted: BTreeMap<String, ConnectorConfig> = cfg
            .connectors
            .into_iter()
            .map(|c| (c.name.clone(), c))
            .collect();
        let gone: Vec<String> = self
            .slots()
            .keys()
            .filter(|n| !wanted.contains_key(*n))
            .cloned()
            .collect();
        for name in gone {
            self.remove_locked(&name).await?;
            applied.removed.push(name);
        }
        for (name, c) in wanted {
            let current = self.slots().get(&name).map(|s| s.cfg.clone());
            match current {
                None => {
                    self.add(c)?;
                    applied.started.push(name);
                }
                Some(old) if old != c => {
                    self.stop_run(&name).await;
                    let target = {
                        let mut slots = self.slots();
                        let slot = slots.get_mut(&name).expect("listed above");
                        slot.cfg = c;
                        slot.failed = false;
                        slot.target
                    };
                    if target != Target::Stopped {
                        self.spawn(&name)?;
                    }
                    applied.changed.push(name);
                }
                Some(_) => {}
            }
        }
        Ok(applied)
    }

    /// Adds connector `c` (not yet known) and starts it.
    fn add(self: &Arc<Self>, c: ConnectorConfig) -> Result<(), OpError> {
        let name = c.name.clone();
        let target = self
            .kept_targets()
            .get(&name)
            .copied()
            .unwrap_or(Target::Running);
        self.slots().insert(
            name.clone(),
            Slot {
                cfg: c.clone(),
                target,
                run: None,
                failed: false,
            },
        );
        if target == Target::Stopped {
            tracing::info!(connector = %name, "connector stopped (its target state, kept): not started");
            return Ok(());
        }
        tracing::info!(connector = %name, tables = ?c.tables.iter().map(|t| t.to_string()).collect::<Vec<_>>(), ?target, "starting connector");
        self.spawn(&name)
    }

    /// Starts a run of `name` in its target state (paused or running).
    fn spawn(self: &Arc<Self>, name: &str) -> Result<(), OpError> {
        if self.closing.load(Ordering::SeqCst) {
            return Err(OpError::Closing);
        }
        let mut slots = self.slots();
        let slot = slots
            .get_mut(name)
            .ok_or_else(|| OpError::NotFound(name.into()))?;
        let connector = Connector::new(slot.cfg.clone())
            .map_err(|e| OpError::Config(format!("connector {name}: {e}")))?;
        let (pause, paused) = watch::channel(slot.target == Target::Paused);
        let running = connector.paused_by(paused).start(self.health.clone());
        let (done, ended) = watch::channel(None);
        slot.run = Some(Run {
            stop: running.stop_handle(),
            pause,
            ended,
        });
        slot.failed = false;
        let me = Arc::downgrade(self);
        let name = name.to_string();
        tokio::spawn(async move {
            let failed = running.join().await.is_err();
            let me = me.upgrade();
            // Recorded before the end is announced: whoever waits for it (a restart) sees it.
            if let (Some(me), true) = (&me, failed) {
                if let Some(slot) = me.slots().get_mut(&name) {
                    slot.failed = true;
                }
            }
            done.send_replace(Some(failed));
            if let Some(me) = me {
                me.bump();
            }
        });
        Ok(())
    }

    /// Stops the run of `name`, if any (drained, final checkpoint), and waits for its end.
    async fn stop_run(&self, name: &str) {
        let run = self.slots().get_mut(name).and_then(|s| s.run.take());
        if let Some(mut run) = run {
            run.stop.stop();
            let _ = run.ended.wait_for(Option::is_some).await;
        }
    }

    async fn remove_locked(&self, name: &str) -> Result<(), OpError> {
        if !self.slots().contains_key(name) {
            return Err(OpError::NotFound(name.into()));
        }
        tracing::info!(connector = %name, "removing connector: stopping it");
        self.stop_run(name).await;
        self.slots().remove(name);
        self.health.remove(name);
        self.keep_targets();
        Ok(())
    }

    /// Pauses `name`: no more events are taken; a stopped connector starts paused.
    pub async fn pause(self: &Arc<Self>, name: &str) -> Result<(), OpError> {
        self.set_target(name, Target::Paused).await
    }

    /// Resumes `name` (paused or stopped): it delivers from where it was.
    pub async fn resume(self: &Arc<Self>, name: &str) -> Result<(), OpError> {
        self.set_target(name, Target::Running).await
    }

    /// Stops `name`: drained, final checkpoint written, its source released; it stays listed.
    pub async fn stop(self: &Arc<Self>, name: &str) -> Result<(), OpError> {
        self.set_target(name, Target::Stopped).await
    }

    async fn set_target(self: &Arc<Self>, name: &str, target: Target) -> Result<(), OpError> {
        let _op = self.ops.lock().await;
        let result = self.set_target_locked(name, target).await;
        self.bump();
        result
    }

    async fn set_target_locked(
        self: &Arc<Self>,
        name: &str,
        target: Target,
    ) -> Result<(), OpError> {
        let (live, was_stopped) = {
            let mut slots = self.slots();
            let slot = slots
                .get_mut(name)
                .ok_or_else(|| OpError::NotFound(name.into()))?;
            let was_stopped = slot.target == Target::Stopped;
            slot.target = target;
            let live = match &slot.run {
                Some(run) if run.ended.borrow().is_none() => {
                    run.pause.send_replace(target == Target::Paused);
                    true
                }
                _ => false,
            };
            (live, was_stopped)
        };
        tracing::info!(connector = %name, ?target, "connector target state set");
        self.keep_targets();
        match (target, live) {
            (Target::Stopped, true) => self.stop_run(name).await,
            (Target::Stopped, false) => {
                self.slots().get_mut(name).map(|s| s.run.take());
            }
            // A failed connector stays failed until restarted, as in Kafka Connect; one
            // that was stopped starts afresh.
            (_, false) if was_stopped || !self.slots().get(name).is_some_and(|s| s.failed) => {
                self.spawn(name)?
            }
            _ => {}
        }
        Ok(())
    }

    /// Restarts `name` from its checkpoint (startup and its checks run again), in its target
    /// state; a stopped connector stays stopped. `only_failed`: only when its last run failed.
    pub async fn restart(self: &Arc<Self>, name: &str, only_failed: bool) -> Result<(), OpError> {
        let _op = self.ops.lock().await;
        let result = async {
            let (target, failed) = {
                let slots = self.slots();
                let slot = slots
                    .get(name)
                    .ok_or_else(|| OpError::NotFound(name.into()))?;
                (slot.target, slot.failed)
            };
            if target == Target::Stopped || (only_failed && !failed) {
                return Ok(());
            }
            tracing::info!(connector = %name, "restarting connector");
            self.stop_run(name).await;
            self.spawn(name)
        }
        .await;
        self.bump();
        result
    }

    /// Stops every connector (drained, final checkpoints) and starts none after: the
    /// process is shutting down. Returns at once; [`live`](Self::live) says when all ended.
    pub fn shutdown(&self) {
        self.closing.store(true, Ordering::SeqCst);
        for slot in self.slots().values() {
            if let Some(run) = &slot.run {
                run.stop.stop();
            }
        }
        self.bump();
    }
}

/// What a [`Supervisor::reload`] did, by connector name.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Applied {
    /// Connectors new in the configuration, started.
    pub started: Vec<String>,
    /// Connectors whose configuration changed, restarted with the new one.
    pub changed: Vec<String>,
    /// Connectors no longer in the configuration, stopped and forgotten.
    pub removed: Vec<String>,
}

impl Applied {
    /// Whether nothing changed.
    pub fn is_empty(&self) -> bool {
        self.started.is_empty() && self.changed.is_empty() && self.removed.is_empty()
    }
}
