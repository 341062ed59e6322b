//! Ownership records: who runs each connector of a group, for the log and `outboxd status`.
//!
//! The assignment itself is the group coordinator's; these records only describe it. A member
//! writes to the connector's coordination topic (key `owner`, compacted):
//! * when it is assigned the connector: itself (member id, host, pid, since when);
//! * when it lets go of it — a revocation, its shutdown, a definite failure that stops the
//!   connector here —: the same record with `released` (when and why).
//!
//! A member that dies or freezes writes nothing more (nor does one that finds its session
//! lost when it wakes: its successor's record may already be there); its successor, reading the last record
//! as it takes over, finds it unreleased and says so in its log line ("after member X was
//! lost"). `status` names the last record's member as the owner only while it has not
//! released the connector and is still in the group (the coordinator's member list).
//!
//! Reads and writes run on one task per member, in order, so the member's handling of
//! assignments never waits for them; only a handover waits for its release record, briefly
//! ([`RELEASE_WAIT`]), so the next owner's line can say it was handed over.

use std::sync::Arc;
use std::time::Duration;

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{Offset, TopicPartitionList};
use serde::{Deserialize, Serialize};
use tokio::sync::{mpsc, oneshot};

use super::topics::{coordination_topic, group_id, host_name};
use crate::checkpoint::now_ms;
use crate::config::KafkaConfig;
use crate::sink::client;
use crate::sink::client::CreateClient;
use crate::sink::client_log::ClientLog;
use crate::sink::KafkaLink;

/// The record key of an ownership record.
const OWNER_KEY: &str = "owner";

/// How long one request to the cluster may take.
const KAFKA_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a new owner reads the previous ownership record for its log line.
const READ_WAIT: Duration = Duration::from_secs(3);

/// How long a handover waits for its release record to be written.
pub const RELEASE_WAIT: Duration = Duration::from_secs(1);

/// A member, as its ownership records name it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Owner {
    /// The member (`outboxd-<host>-<pid>`, its Kafka `client.id`).
    pub member: String,
    /// The member's host name.
    pub host: String,
    /// The member's process id.
    pub pid: u32,
    /// When it was assigned the connector, milliseconds since the Unix epoch.
    pub since_ms: i64,
    /// The member's REST API address (`host:port`, Kafka Connect's `worker_id`), when it
    /// serves one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker_id: Option<String>,
}

/// When and why a member let go of a connector.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Released {
    /// Milliseconds since the Unix epoch.
    pub at_ms: i64,
    /// Why, in words (`handed over on shutdown`, `rebalance`, `failed: ...`).
    pub reason: String,
}

/// One ownership record: `{"member":..,"host":..,"pid":..,"since_ms":..}`, plus
/// `"released":{"at_ms":..,"reason":..}` once that member let go.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OwnerRecord {
    /// Who was assigned the connector.
    #[serde(flatten)]
    pub owner: Owner,
    /// Set once it let go.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub released: Option<Released>,
}

impl OwnerRecord {
    /// Why the next owner gets the connector, as this (the last) record tells it, for the
    /// assignment's log line; `me`: the member reading it.
    pub fn describe_previous(previous: Option<&OwnerRecord>, me: &str) -> String {
        match previous {
            None => "no member ran it before".into(),
            Some(r) => match &r.released {
                Some(rel) if r.owner.member == me => {
                    format!(
                        "back to this member, which let go of it before: {}",
                        rel.reason
                    )
                }
                Some(rel) => format!("member {} let go of it: {}", r.owner.member, rel.reason),
                None if r.owner.member == me => {
                    "back to this member after it lost the connector without releasing it".into()
                }
                None => format!(
                    "takeover after member {} was lost (it left the group without handing over: \
                     killed, frozen, or cut off from Kafka past its session)",
                    r.owner.member
                ),
            },
        }
    }
}

enum Note {
    Assigned {
        connector: String,
        /// Started again under the same assignment (after a restart or a changed
        /// configuration): recorded without a log line.
        again: bool,
    },
    Released {
        connector: String,
        reason: String,
        done: oneshot::Sender<()>,
    },
}

/// This member's writer of ownership records (and reader of the previous ones).
pub struct OwnerLog {
    notes: mpsc::UnboundedSender<Note>,
}

impl OwnerLog {
    /// Starts the writer of member `member`'s records in group `group`; its clients report to
    /// `link` (the group's).
    /// `worker_id`: this member's REST address, recorded for the other members' statuses.
    pub fn start(
        kafka: &KafkaConfig,
        group: &str,
        member: &str,
        worker_id: Option<String>,
        link: Arc<KafkaLink>,
    ) -> Result<Self, String> {
        let producer: FutureProducer<ClientLog> = client::config(kafka)
            .set("enable.idempotence", "true")
            .set("linger.ms", "0")
            .create_client(ClientLog::new(link))
            .map_err(|e| format!("cannot create a Kafka producer: {e}"))?;
        let (notes, rx) = mpsc::unbounded_channel();
        let writer = Writer {
            producer,
            kafka: kafka.clone(),
            group: group.to_string(),
            member: member.to_string(),
            worker_id,
        };
        tokio::spawn(writer.serve(rx));
        Ok(Self { notes })
    }

    /// `connector` was assigned to this member: logs it (one INFO line, with what the
    /// previous record says of the previous owner) and records it.
    pub fn assigned(&self, connector: &str) {
        let _ = self.notes.send(Note::Assigned {
            connector: connector.to_string(),
            again: false,
        });
    }

    /// `connector`, still assigned to this member, was started again (a restart through the
    /// REST API, a changed configuration): recorded anew, so that a failure it released it
    /// for no longer shows.
    pub fn started_again(&self, connector: &str) {
        let _ = self.notes.send(Note::Assigned {
            connector: connector.to_string(),
            again: true,
        });
    }

    /// Records that this member let go of `connector` (`reason`); waits for the write at
    /// most `wait` (it goes on in the background after that).
    pub async fn released(&self, connector: &str, reason: &str, wait: Duration) {
        let (done, written) = oneshot::channel();
        let note = Note::Released {
            connector: connector.to_string(),
            reason: reason.to_string(),
            done,
        };
        if self.notes.send(note).is_ok() && !wait.is_zero() {
            let _ = tokio::time::timeout(wait, written).await;
        }
    }
}

struct Writer {
    producer: FutureProducer<ClientLog>,
    kafka: KafkaConfig,
    group: String,
    member: String,
    worker_id: Option<String>,
}

impl Writer {
    async fn serve(self, mut notes: mpsc::UnboundedReceiver<Note>) {
        let mut since = std::collections::BTreeMap::new();
        while let Some(note) = notes.recv().await {
            match note {
                Note::Assigned {
                    connector,
                    again: true,
                } => {
                    let at = now_ms();
                    since.insert(connector.clone(), at);
                    self.write(&connector, at, None).await;
                }
                Note::Assigned {
                    connector,
                    again: false,
                } => {
                    let (kafka, group, c) =
                        (self.kafka.clone(), self.group.clone(), connector.clone());
                    let previous = tokio::task::spawn_blocking(move || {
                        read_record(&kafka, &group, &c, READ_WAIT)
                    })
                    .await
                    .unwrap_or_else(|e| Err(e.to_string()));
                    let why = match &previous {
                        Ok(p) => OwnerRecord::describe_previous(p.as_ref(), &self.member),
                        Err(e) => format!("previous owner unknown: {e}"),
                    };
                    tracing::info!(group = %self.group, connector = %connector, member = %self.member, "assigned to this member by the group coordinator ({why}): starting it");
                    let at = now_ms();
                    since.insert(connector.clone(), at);
                    self.write(&connector, at, None).await;
                }
                Note::Released {
                    connector,
                    reason,
                    done,
                } => {
                    let at = since.remove(&connector).unwrap_or_else(now_ms);
                    let released = Released {
                        at_ms: now_ms(),
                        reason,
                    };
                    self.write(&connector, at, Some(released)).await;
                    let _ = done.send(());
                }
            }
        }
    }

    /// Writes this member's record for `connector` (best effort: `status` shows an older
    /// record at worst; the assignment itself is the coordinator's).
    async fn write(&self, connector: &str, since_ms: i64, released: Option<Released>) {
        let record = OwnerRecord {
            owner: Owner {
                member: self.member.clone(),
                host: host_name(),
                pid: std::process::id(),
                since_ms,
                worker_id: self.worker_id.clone(),
            },
            released,
        };
        let Ok(value) = serde_json::to_vec(&record) else {
            return;
        };
        let topic = coordination_topic(&self.group, connector);
        let sent = self
            .producer
            .send(
                FutureRecord::<str, [u8]>::to(&topic)
                    .key(OWNER_KEY)
                    .payload(&value),
                KAFKA_TIMEOUT,
            )
            .await;
        if let Err((e, _)) = sent {
            tracing::warn!(
                connector,
                "could not write this member's ownership record for `status`: {e}"
            );
        }
    }
}

/// The last ownership record of `connector` in group `group`, waiting at most `wait`;
/// `Ok(None)` when no member ever ran it.
pub fn read_record(
    kafka: &KafkaConfig,
    group: &str,
    connector: &str,
    wait: Duration,
) -> Result<Option<OwnerRecord>, String> {
    let link = KafkaLink::quiet("status", &kafka.bootstrap_servers);
    let consumer: BaseConsumer<ClientLog> = client::config(kafka)
        .set("group.id", format!("{}.status", group_id(group)))
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "true")
        .create_client(ClientLog::new(link))
        .map_err(|e| format!("cannot create a Kafka consumer: {e}"))?;
    let topic = coordination_topic(group, connector);
    let (low, high) = client::watermarks(&consumer, &topic, 0, wait)
        .map_err(|e| format!("reading coordination topic {topic}: {e}"))?;
    if high <= low {
        return Ok(None);
    }
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(&topic, 0, Offset::Offset(high - 1))
        .map_err(|e| e.to_string())?;
    consumer.assign(&tpl).map_err(|e| e.to_string())?;
    let deadline = std::time::Instant::now() + wait;
    let mut last = None;
    while std::time::Instant::now() < deadline {
        match consumer.poll(Duration::from_millis(100)) {
            Some(Ok(m)) => {
                if m.key() == Some(OWNER_KEY.as_bytes()) {
                    last = m.payload().and_then(|p| serde_json::from_slice(p).ok());
                }
                if m.offset() >= high - 1 {
                    break;
                }
            }
            Some(Err(rdkafka::error::KafkaError::PartitionEOF(_))) => break,
            Some(Err(e)) => return Err(format!("reading coordination topic {topic}: {e}")),
            None => {}
        }
    }
    Ok(last)
}

/// Reads group `group`'s member list from the group coordinator (a `DescribeGroups`), on a
/// client of its own.
pub struct MemberList {
    consumer: BaseConsumer<ClientLog>,
    group_id: String,
}

impl MemberList {
    /// A reader of group `group`'s members; its client reports to `link`.
    pub fn new(kafka: &KafkaConfig, group: &str, link: Arc<KafkaLink>) -> Result<Self, String> {
        let consumer = client::config(kafka)
            .set("group.id", format!("{}.status", group_id(group)))
            .create_client(ClientLog::new(link))
            .map_err(|e| format!("cannot create a Kafka consumer: {e}"))?;
        Ok(Self {
            consumer,
            group_id: group_id(group),
        })
    }

    /// The `client.id` of every member (a member's id, `outboxd-<host>-<pid>`). Blocking,
    /// at most `wait`.
    pub fn members(&self, wait: Duration) -> Result<Vec<String>, String> {
        let list = self
            .consumer
            .fetch_group_list(Some(&self.group_id), wait)
            .map_err(|e| format!("describing group {}: {e}", self.group_id))?;
        Ok(list
            .groups()
            .iter()
            .flat_map(|g| g.members().iter().map(|m| m.client_id().to_string()))
            .collect())
    }
}

/// Who runs a connector now, as `outboxd status` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OwnerStatus {
    /// The live owner; `None` when nobody runs it (or it cannot be told).
    pub owner: Option<Owner>,
    /// Why there is no owner, or what could not be checked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl OwnerStatus {
    /// Reads `connector`'s last ownership record and the group's member list.
    pub fn read(kafka: &KafkaConfig, group: &str, connector: &str) -> Result<Self, String> {
        let record = read_record(kafka, group, connector, KAFKA_TIMEOUT)?;
        let link = KafkaLink::quiet("status", &kafka.bootstrap_servers);
        let members = MemberList::new(kafka, group, link).and_then(|l| l.members(KAFKA_TIMEOUT));
        Ok(Self::of(record, members))
    }

    /// What `record` (the last ownership record) and `members` (the group's member ids) say.
    pub fn of(record: Option<OwnerRecord>, members: Result<Vec<String>, String>) -> Self {
        let none = |note: String| Self {
            owner: None,
            note: Some(note),
        };
        let Some(r) = record else {
            return none("no owner: no member has run it yet".into());
        };
        if let Some(rel) = &r.released {
            return none(format!(
                "no owner: member {} let go of it at {} ms ({}); the next owner records itself \
                 when the group coordinator assigns it",
                r.owner.member, rel.at_ms, rel.reason
            ));
        }
        match members {
            Ok(m) if m.contains(&r.owner.member) => Self {
                owner: Some(r.owner),
                note: None,
            },
            Ok(m) if m.is_empty() => none(format!(
                "no owner: member {} (host {}, pid {}) ran it but is no longer in the group, and \
                 the group has no member now: the next member to join (or that one, once it \
                 rejoins) takes it over from the last committed checkpoint",
                r.owner.member, r.owner.host, r.owner.pid
            )),
            Ok(_) => none(format!(
                "no owner: member {} (host {}, pid {}) ran it but is no longer in the group \
                 (killed, frozen or cut off from Kafka); another member takes it over after the \
                 session timeout",
                r.owner.member, r.owner.host, r.owner.pid
            )),
            Err(e) => Self {
                owner: Some(r.owner),
                note: Some(format!(
                    "could not check that this member is in the group: {e}"
                )),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(member: &str, released: Option<&str>) -> OwnerRecord {
        OwnerRecord {
            owner: Owner {
                member: member.into(),
                host: "h".into(),
                pid: 7,
                since_ms: 1,
                worker_id: None,
            },
            released: released.map(|r| Released {
                at_ms: 2,
                reason: r.into(),
            }),
        }
    }

    #[test]
    fn records_read_back_and_name_the_previous_owner() {
        let old: OwnerRecord =
            serde_json::from_str(r#"{"member":"m1","host":"h","pid":7,"since_ms":1}"#).unwrap();
        assert_eq!(old, record("m1", None));
        let released = record("m1", Some("handed over on shutdown"));
        let json = serde_json::to_string(&released).unwrap();
        assert!(json.contains(r#""released":{"at_ms":2"#), "{json}");
        assert_eq!(
            serde_json::from_str::<OwnerRecord>(&json).unwrap(),
            released
        );

        let say = |r: Option<&OwnerRecord>| OwnerRecord::describe_previous(r, "me");
        assert_eq!(say(None), "no member ran it before");
        assert_eq!(
            say(Some(&released)),
            "member m1 let go of it: handed over on shutdown"
        );
        assert!(say(Some(&record("me", Some("lost session")))).contains("back to this member"));
        assert!(say(Some(&record("m1", None))).contains("after member m1 was lost"));
        assert!(say(Some(&record("me", None))).contains("back to this member"));
    }

    #[test]
    fn status_names_only_a_live_owner() {
        let live = OwnerStatus::of(Some(record("m1", None)), Ok(vec!["m1".into()]));
        assert_eq!(live.owner.as_ref().map(|o| o.member.as_str()), Some("m1"));
        assert_eq!(live.note, None);

        let alone = OwnerStatus::of(Some(record("m1", None)), Ok(vec![]));
        let note = alone.note.unwrap_or_default();
        assert!(note.contains("the group has no member now"), "{note}");
        assert!(!note.contains("another member"), "{note}");

        let gone = OwnerStatus::of(Some(record("m1", None)), Ok(vec!["m2".into()]));
        assert_eq!(gone.owner, None);
        assert!(gone.note.unwrap().contains("no longer in the group"));

        let released = OwnerStatus::of(
            Some(record("m1", Some("handed over on shutdown"))),
            Ok(vec!["m1".into()]),
        );
        assert_eq!(released.owner, None);
        assert!(released.note.unwrap().contains("handed over on shutdown"));

        let never = OwnerStatus::of(None, Ok(vec![]));
        assert_eq!(never.owner, None);
        assert!(never.note.unwrap().contains("no member has run it yet"));

        let unknown = OwnerStatus::of(Some(record("m1", None)), Err("timed out".into()));
        assert!(unknown.owner.is_some() && unknown.note.unwrap().contains("timed out"));
    }
}
