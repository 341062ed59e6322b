//! What a group member's REST API sees and changes: the group's connectors as this member
//! knows them (its connector files and the group's config topic, [`super::configs`]), and
//! the changes it writes to the config topic for every member to apply.
//!
//! The member ([`super::run_member`]) keeps the list up to date; a change made here is
//! written to the config topic, read back by every member (this one included), and applied
//! by the connector's owner: a new connector is assigned to one member by the group
//! coordinator, a changed one restarts with its new configuration, a deleted one stops, a
//! target state (pause, resume, stop) or a restart request is carried out where it runs.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use tokio::sync::watch;

use super::configs::{self, ConfigMap, SharedConfigs};
use crate::supervisor::{Listed, OpError, Target};

/// How long a change made through the REST API waits for this member to apply what it
/// wrote (before answering with the connector's new info).
const APPLIED_WAIT: Duration = Duration::from_secs(10);

/// The group's connectors as one member sees them, shared by the member and its REST API.
pub struct GroupView {
    /// The group's name.
    pub group: String,
    /// This member's id.
    pub member: String,
    shared: OnceLock<Arc<SharedConfigs>>,
    listed: Mutex<BTreeMap<String, Listed>>,
    /// Connectors some member defines in its connector files (from the definitions topic),
    /// by name → a member defining it.
    in_files: Mutex<BTreeMap<String, String>>,
    changed: watch::Sender<u64>,
    /// Held by an offsets change (KIP-875) from its check that the connector is stopped to
    /// its end, and by the member while it starts a connector: a resume read meanwhile
    /// starts the connector only after the change, from the checkpoint it made.
    pub offsets: Arc<tokio::sync::Mutex<()>>,
}

impl GroupView {
    /// An empty view of member `member` of group `group`.
    pub fn new(group: &str, member: &str) -> Arc<Self> {
        Arc::new(Self {
            group: group.to_string(),
            member: member.to_string(),
            shared: OnceLock::new(),
            listed: Mutex::new(BTreeMap::new()),
            in_files: Mutex::new(BTreeMap::new()),
            changed: watch::channel(0).0,
            offsets: Arc::new(tokio::sync::Mutex::new(())),
        })
    }

    /// Sets the config topic's handle, once the member opened it.
    pub fn set_shared(&self, shared: Arc<SharedConfigs>) {
        let _ = self.shared.set(shared);
    }

    /// Replaces the list (the member's doing).
    pub fn set_listed(&self, listed: BTreeMap<String, Listed>) {
        *self.listed.lock().unwrap_or_else(|e| e.into_inner()) = listed;
        self.changed.send_modify(|n| *n += 1);
    }

    /// Replaces the connectors the members' files define (name → a member).
    pub fn set_in_files(&self, names: BTreeMap<String, String>) {
        *self.in_files.lock().unwrap_or_else(|e| e.into_inner()) = names;
    }

    /// The connectors this member knows, by name.
    pub fn list(&self) -> BTreeMap<String, Listed> {
        self.listed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The configuration map of `name` as the config topic holds it (`None`: not one of the
    /// topic's, or the topic is not open yet).
    pub fn config_map(&self, name: &str) -> Option<ConfigMap> {
        self.shared.get()?.current().connectors.get(name).cloned()
    }

    /// The member whose connector files define `name`, if one does (this one included).
    pub fn defined_in_files(&self, name: &str) -> Option<String> {
        self.in_files
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)
            .cloned()
    }

    /// Every connector name this member knows of in the group: listed here, or defined in
    /// some member's files.
    pub fn known_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.list().into_keys().collect();
        if let Some(shared) = self.shared.get() {
            names.extend(shared.current().connectors.into_keys());
        }
        names.extend(
            self.in_files
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .keys()
                .cloned(),
        );
        names
    }

    /// Sets logger `name` to `level` on every member running now (Connect's
    /// `PUT /admin/loggers/{name}?scope=cluster`): written to the config topic, applied by
    /// each member as it reads it (this one before this returns).
    ///
    /// Errors: the member has not joined yet, or the config topic did not take the record.
    pub async fn set_logger_level(&self, name: &str, level: &str) -> Result<(), OpError> {
        let shared = self.shared()?;
        shared
            .write(&[configs::logger_record(name, level)])
            .await
            .map_err(OpError::Store)?;
        Ok(())
    }

    fn shared(&self) -> Result<&Arc<SharedConfigs>, OpError> {
        self.shared.get().ok_or_else(|| {
            OpError::NotYet(format!(
                "this member has not joined group {} yet (its config topic is not read): try \
                 again in a few seconds",
                self.group
            ))
        })
    }

    /// Writes `records` and waits until this member's list satisfies `applied` (at most
    /// [`APPLIED_WAIT`]; the change is made either way once written).
    async fn write(
        &self,
        records: &[configs::Write],
        applied: impl Fn(&BTreeMap<String, Listed>) -> bool,
    ) -> Result<(), OpError> {
        let shared = self.shared()?;
        shared.write(records).await.map_err(OpError::Store)?;
        let mut rx = self.changed.subscribe();
        let _ = tokio::time::timeout(APPLIED_WAIT, async {
            loop {
                if applied(&self.list()) {
                    return;
                }
                if rx.changed().await.is_err() {
                    return;
                }
            }
        })
        .await;
        Ok(())
    }

    /// Reads the config topic to its current end (a record of no consequence, written and
    /// read back, marks it); the target states then.
    ///
    /// Errors when the member has not joined yet, or Kafka does not take the write.
    pub async fn read_to_end(&self) -> Result<BTreeMap<String, Target>, OpError> {
        let mark = (format!("sync-{}", self.member), None);
        let read = self
            .shared()?
            .write(&[mark])
            .await
            .map_err(OpError::Store)?;
        Ok(read.targets)
    }

    /// Creates or replaces `name`'s configuration in the config topic; whether it was
    /// created. `create_only`: refused (`Ok(None)`) when it exists.
    pub async fn put(
        &self,
        name: &str,
        config: &ConfigMap,
        create_only: bool,
    ) -> Result<Option<bool>, OpError> {
        let before = self.shared()?.current();
        let exists = before.connectors.contains_key(name);
        if create_only && exists {
            return Ok(None);
        }
        if before.connectors.get(name) == Some(config) {
            return Ok(Some(false));
        }
        let mut exists = exists;
        if !exists {
            // Two members creating one name at the same moment: the claim read first wins.
            static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
            let claim = configs::Claim {
                nonce: format!(
                    "{}-{}",
                    self.member,
                    NEXT.fetch_add(1, std::sync::atomic::Ordering::SeqCst)
                ),
                at_ms: crate::checkpoint::now_ms(),
            };
            let read = self
                .shared()?
                .write(&[configs::claim_record(name, Some(&claim))])
                .await
                .map_err(OpError::Store)?;
            if read.claims.get(name) != Some(&claim) {
                // Another member created it first.
                if create_only {
                    return Ok(None);
                }
                exists = true;
            }
        }
        let record = configs::connector_record(name, Some(config));
        let n = name.to_string();
        let shared = self.shared()?.clone();
        // Listed with this configuration, or with a later one another member wrote meanwhile.
        self.write(&[record], move |l| {
            l.contains_key(&n) && shared.current().connectors.contains_key(&n)
        })
        .await?;
        Ok(Some(!exists))
    }

    /// Deletes `name` from the config topic (its owner stops it).
    pub async fn delete(&self, name: &str) -> Result<(), OpError> {
        if !self.shared()?.current().connectors.contains_key(name) {
            return Err(OpError::NotFound(name.into()));
        }
        let n = name.to_string();
        self.write(
            &[
                configs::connector_record(name, None),
                configs::target_record(name, Target::Running),
            ],
            move |l| !l.contains_key(&n),
        )
        .await
    }

    /// Sets `name`'s target state for the group (its owner applies it).
    pub async fn set_target(&self, name: &str, target: Target) -> Result<(), OpError> {
        if !self.list().contains_key(name) {
            return Err(OpError::NotFound(name.into()));
        }
        let n = name.to_string();
        self.write(&[configs::target_record(name, target)], move |l| {
            l.get(&n).is_some_and(|c| c.target == target)
        })
        .await
    }

    /// Asks `name`'s owner to restart it (`only_failed`: only if its last run failed).
    pub async fn restart(&self, name: &str, only_failed: bool) -> Result<(), OpError> {
        if !self.list().contains_key(name) {
            return Err(OpError::NotFound(name.into()));
        }
        self.write(&[configs::restart_record(name, only_failed, true)], |_| {
            true
        })
        .await
    }
}
