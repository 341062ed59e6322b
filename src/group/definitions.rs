//! The connector definitions of a group's members, compared.
//!
//! Every member runs from its own connector files, and nothing made them agree: two members
//! with different definitions of one connector name ran it by turns, so a takeover switched
//! its routing mid-stream; a connector only one member defines has no standby, and nothing
//! said so. Each member therefore publishes the definitions it runs with, and compares them
//! with the other members' before it joins.
//!
//! * [`Definition`]: what counts in a definition: the settings that decide which events a
//!   connector reads (source kind, host, port, database, server id or slot and publication,
//!   tables, column lists, message prefixes, where it starts), how they become records (every
//!   EventRouter option, the error policy and dead-letter topic), where they go and with which
//!   guarantee (`kafka.max_record_bytes`, the checkpoint store, topic, delivery mode and
//!   transactional id; not the bootstrap servers: members of one group share its cluster,
//!   whatever addresses they name it by), as `key = value` in the configuration's own terms.
//!   Never a secret, a credential (user names and passwords: two members may take them from
//!   different environment variables), a file location (TLS material may sit elsewhere on each
//!   host), nor a tuning knob (timeouts, intervals, batch sizes, producer properties). Only
//!   the keys both definitions hold are compared, so a later outboxd version that compares a
//!   setting more does not refuse a member of an earlier one.
//! * The group's definitions topic `outboxd.definitions.<group>` (one partition, compacted):
//!   one record per member and connector, key `["<connector>","<member>"]`, value a
//!   [`DefinitionRecord`] (the definition, its fingerprint, the member, when). A member that
//!   leaves deletes its records (tombstones); one that was killed leaves them behind, and the
//!   next member to join deletes the records of members neither in the group nor starting.
//!   Kafka Connect keeps its connectors' configurations in a compacted topic keyed by
//!   connector (`config.storage.topic`); this is a step that way, keyed by member as well
//!   because each member still brings its own files.
//! * At join ([`Verdict`]), before it takes any connector: a member publishes its
//!   definitions, reads the topic and the group's member list, and refuses to join (exit 1)
//!   when a present member defines one of its connectors differently, naming the connector,
//!   the member and the keys that differ. Present: in the group (the coordinator's member
//!   list), or starting beside it — a record written before its own, less than
//!   [`STARTING_FOR`] ago, whose member has not joined yet; of two members started together
//!   with different definitions, the later one is refused. Connectors some present members do
//!   not define are reported (one WARN each), and `outboxd_connector_standbys` says how many
//!   other members could take each of its connectors over. A member keeps watching
//!   (`group::watch_group`): members joining later with fewer connectors are reported the
//!   same way.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{Offset, TopicPartitionList};
use serde::{Deserialize, Serialize};

use super::topics::host_name;
use crate::checkpoint::now_ms;
use crate::config::{
    CheckpointConfig, ConnectorConfig, DeliveryMode, ErrorTolerance, KafkaConfig, PositionMode,
    PublicationAutocreate, SourceConfig, StartPosition,
};
use crate::sink::client;
use crate::sink::client::CreateClient;
use crate::sink::client_log::ClientLog;
use crate::sink::KafkaLink;

/// How long a record of a member that is not in the group yet counts as a member starting
/// beside this one: joining takes a few seconds (creating topics, the coordinator's
/// rebalance); a member killed longer ago than this after its start no longer counts.
pub const STARTING_FOR: Duration = Duration::from_secs(30);

/// How long one request to the cluster may take.
const KAFKA_TIMEOUT: Duration = Duration::from_secs(10);

/// How long deleting records (tombstones) may take, all together.
const DELETE_WAIT: Duration = Duration::from_secs(2);

/// The definitions topic of group `group`.
pub fn definitions_topic(group: &str) -> String {
    format!("outboxd.definitions.{group}")
}

/// A connector's definition as the members of a group compare it (see the module docs):
/// setting name → value, never a secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Definition(BTreeMap<String, String>);

/// One setting two definitions of a connector disagree on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Difference {
    /// The setting (`route.topic.replacement`, `source.server_id`, ...).
    pub key: String,
    /// Its value here.
    pub here: String,
    /// Its value in the other definition.
    pub there: String,
}

impl std::fmt::Display for Difference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let shown = |v: &String| {
            if v.chars().count() > 120 {
                format!("{:?}...", v.chars().take(120).collect::<String>())
            } else {
                format!("{v:?}")
            }
        };
        write!(
            f,
            "{} (here {}, there {})",
            self.key,
            shown(&self.here),
            shown(&self.there)
        )
    }
}

impl Definition {
    /// The definition of `cfg` (what counts: see the module docs).
    pub fn of(cfg: &ConnectorConfig) -> Self {
        let mut d = BTreeMap::new();
        let mut put = |k: &str, v: String| {
            d.insert(k.to_string(), v);
        };
        let mut tables: Vec<String> = cfg.tables.iter().map(|t| t.to_string()).collect();
        tables.sort();
        put("tables", tables.join(","));
        match &cfg.source {
            SourceConfig::Mysql(m) => {
                // MySQL and MariaDB speak one binlog protocol; the flavour only picks the
                // dialect, which the server decides.
                put("source.kind", "mysql".into());
                put("source.host", m.host.clone());
                put("source.port", m.port.to_string());
                put("source.server_id", m.server_id.to_string());
                put(
                    "source.start",
                    match m.start {
                        StartPosition::Current => "current",
                        StartPosition::Earliest => "earliest",
                    }
                    .into(),
                );
                put(
                    "source.position_mode",
                    match m.position_mode {
                        PositionMode::Auto => "auto",
                        PositionMode::Gtid => "gtid",
                        PositionMode::File => "file",
                    }
                    .into(),
                );
                for (table, columns) in &m.columns {
                    put(&format!("source.columns.{table}"), columns.join(","));
                }
            }
            SourceConfig::Postgres(p) => {
                put("source.kind", "postgres".into());
                put("source.host", p.host.clone());
                put("source.port", p.port.to_string());
                put("source.dbname", p.dbname.clone());
                put("source.slot_name", p.slot_name.clone());
                put("source.publication_name", p.publication_name.clone());
                put(
                    "source.publication_autocreate",
                    match p.publication_autocreate {
                        PublicationAutocreate::Disabled => "disabled",
                        PublicationAutocreate::AllTables => "all_tables",
                        PublicationAutocreate::Filtered => "filtered",
                    }
                    .into(),
                );
                put("source.slot_autocreate", p.slot_autocreate.to_string());
                let mut prefixes = p.message_prefixes.clone();
                prefixes.sort();
                put("source.message_prefixes", prefixes.join(","));
                put(
                    "source.all_message_prefixes",
                    p.all_message_prefixes.to_string(),
                );
            }
        }
        for (option, value) in cfg
            .router
            .options()
            .into_iter()
            .chain(cfg.router.format_options())
        {
            put(option, value);
        }
        // Where records go, when not Kafka (so that a Kafka connector's definition reads as
        // before); secrets print as `***`: a differing password is not told apart.
        if !cfg.sink.is_kafka() {
            put("sink", format!("{:?}", cfg.sink));
        }
        // Not `kafka.bootstrap_servers`: every member of a group reaches the group's cluster
        // (the group lives there, and a member's connectors must use that cluster), whatever
        // addresses its files or environment list for it, in whatever order.
        put(
            "kafka.max_record_bytes",
            cfg.kafka.max_record_bytes.to_string(),
        );
        match &cfg.checkpoint {
            CheckpointConfig::File { .. } => put("checkpoint.store", "file".into()),
            CheckpointConfig::Sink {} => put("checkpoint.store", "sink".into()),
            CheckpointConfig::Kafka {
                topic,
                delivery,
                transactional_id,
                ..
            } => {
                put("checkpoint.store", "kafka".into());
                put("checkpoint.topic", topic.clone());
                put(
                    "checkpoint.delivery",
                    match delivery {
                        DeliveryMode::ExactlyOnce => "exactly_once",
                        DeliveryMode::AtLeastOnce => "at_least_once",
                    }
                    .into(),
                );
                put(
                    "checkpoint.transactional_id",
                    transactional_id
                        .clone()
                        .unwrap_or_else(|| format!("outboxd-{}", cfg.name)),
                );
            }
        }
        put(
            "errors.tolerance",
            match cfg.errors.tolerance {
                ErrorTolerance::None => "none",
                ErrorTolerance::All => "all",
            }
            .into(),
        );
        put(
            "errors.dead_letter_topic",
            cfg.errors.dead_letter_topic.clone().unwrap_or_default(),
        );
        put(
            "errors.context_headers",
            cfg.errors.context_headers.to_string(),
        );
        Self(d)
    }

    /// A short, stable digest of the definition (CRC-32 of its `key=value` lines, hex): equal
    /// definitions have equal fingerprints, whatever outboxd version computed them.
    pub fn fingerprint(&self) -> String {
        let mut hasher = crc32fast::Hasher::new();
        for (k, v) in &self.0 {
            hasher.update(k.as_bytes());
            hasher.update(b"=");
            hasher.update(v.as_bytes());
            hasher.update(b"\n");
        }
        format!("{:08x}", hasher.finalize())
    }

    /// The settings this definition and `there` disagree on, by key. Only keys both hold
    /// are compared: every key is always written (an unset setting as its default or
    /// empty), so a key one side lacks comes from another outboxd version, which does not
    /// know that setting (a rolling upgrade that adds one is not refused).
    pub fn differences(&self, there: &Definition) -> Vec<Difference> {
        self.0
            .iter()
            .filter_map(|(k, here)| {
                let theirs = there.0.get(k)?;
                (theirs != here).then(|| Difference {
                    key: k.clone(),
                    here: here.clone(),
                    there: theirs.clone(),
                })
            })
            .collect()
    }

    /// Whether `there` defines the connector alike ([`differences`](Self::differences) finds
    /// none).
    pub fn alike(&self, there: &Definition) -> bool {
        self.differences(there).is_empty()
    }
}

/// One member's definition of one connector, as published in the definitions topic:
/// `{"connector":..,"member":..,"host":..,"pid":..,"written_ms":..,"fingerprint":..,
/// "definition":{..}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DefinitionRecord {
    /// The connector's name.
    pub connector: String,
    /// The member (`outboxd-<host>-<pid>`, its Kafka `client.id`).
    pub member: String,
    /// The member's host name.
    pub host: String,
    /// The member's process id.
    pub pid: u32,
    /// When the member published it, milliseconds since the Unix epoch.
    pub written_ms: i64,
    /// [`Definition::fingerprint`].
    pub fingerprint: String,
    /// The definition.
    pub definition: Definition,
}

/// The record key of `member`'s definition of `connector`: `["<connector>","<member>"]`.
fn record_key(connector: &str, member: &str) -> String {
    serde_json::json!([connector, member]).to_string()
}

/// What the definitions topic holds: the last record of each member and connector, with its
/// offset.
#[derive(Debug, Clone, Default)]
pub struct Catalog {
    records: BTreeMap<(String, String), (i64, DefinitionRecord)>,
}

impl Catalog {
    /// Applies one record of the topic (a tombstone, `value` = `None`, deletes).
    fn apply(&mut self, key: &[u8], value: Option<&[u8]>, offset: i64) {
        let Ok((connector, member)) = serde_json::from_slice::<(String, String)>(key) else {
            return;
        };
        match value.and_then(|v| serde_json::from_slice::<DefinitionRecord>(v).ok()) {
            Some(r) => {
                self.records.insert((connector, member), (offset, r));
            }
            None => {
                self.records.remove(&(connector, member));
            }
        }
    }

    /// The connectors the members in `live` define in their files: name → one such member.
    pub fn defined_by(&self, live: &BTreeSet<String>) -> BTreeMap<String, String> {
        self.records
            .keys()
            .filter(|(_, m)| live.contains(m))
            .map(|(c, m)| (c.clone(), m.clone()))
            .collect()
    }

    /// How many connectors member `member` has a record of.
    pub fn count_of(&self, member: &str) -> usize {
        self.of_member(member).count()
    }

    /// The records of member `member`, by connector.
    fn of_member<'a>(&'a self, member: &'a str) -> impl Iterator<Item = &'a DefinitionRecord> + 'a {
        self.records
            .iter()
            .filter(move |((_, m), _)| m == member)
            .map(|(_, (_, r))| r)
    }

    /// The members other than `me` that count as present (see [`Verdict`]): in `live` (the
    /// group's member list), or starting (a record written before `my_offset`, less than
    /// [`STARTING_FOR`] before `now_ms`; without `my_offset`, only the live ones).
    fn present(
        &self,
        me: &str,
        live: &BTreeSet<String>,
        my_offset: Option<i64>,
        now_ms: i64,
    ) -> BTreeSet<String> {
        self.records
            .iter()
            .filter(|((_, m), _)| m != me)
            .filter(|((_, m), (offset, r))| {
                live.contains(m)
                    || my_offset.is_some_and(|mine| {
                        *offset < mine
                            && now_ms.saturating_sub(r.written_ms) < STARTING_FOR.as_millis() as i64
                    })
            })
            .map(|((_, m), _)| m.clone())
            .collect()
    }

    /// The records of members neither `me`, nor in `live`, nor started less than
    /// [`STARTING_FOR`] before `now_ms`: left behind by members that were killed, by
    /// `(connector, member)`.
    pub fn stale(&self, me: &str, live: &BTreeSet<String>, now_ms: i64) -> Vec<(String, String)> {
        self.records
            .iter()
            .filter(|((_, m), (_, r))| {
                m != me
                    && !live.contains(m)
                    && now_ms.saturating_sub(r.written_ms) >= STARTING_FOR.as_millis() as i64
            })
            .map(|(k, _)| k.clone())
            .collect()
    }
}

/// A connector defined differently by another present member.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    /// The connector.
    pub connector: String,
    /// The member that defines it differently.
    pub member: String,
    /// Where they disagree.
    pub differences: Vec<Difference>,
}

impl std::fmt::Display for Conflict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let keys: Vec<String> = self.differences.iter().map(|d| d.to_string()).collect();
        write!(
            f,
            "connector {} is defined differently here than in member {}: {}",
            self.connector,
            self.member,
            keys.join(", ")
        )
    }
}

/// Which present members can run a connector, and which cannot.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Coverage {
    /// Other present members with the same definition as this member's (its standbys).
    pub same: BTreeSet<String>,
    /// Other present members without a definition of it.
    pub lacking: BTreeSet<String>,
    /// Other present members with another definition of it.
    pub different: BTreeSet<String>,
}

/// What this member's definitions meet in the group: differing definitions of its
/// connectors (refused at join), and for every connector a present member defines (this
/// one's and the others'), who can run it.
#[derive(Debug, Clone, Default)]
pub struct Verdict {
    /// This member's connectors another present member defines differently.
    pub conflicts: Vec<Conflict>,
    /// Each connector this member defines: which other present members can run it.
    pub mine: BTreeMap<String, Coverage>,
    /// Each connector other present members define and this one does not: who does.
    pub others: BTreeMap<String, BTreeSet<String>>,
    /// The other present members.
    pub present: BTreeSet<String>,
}

impl Verdict {
    /// Compares `mine` (this member `me`'s definitions) with `catalog`: members in `live`
    /// count, and, when `my_offset` is the offset of this member's last published record,
    /// those that published before it less than [`STARTING_FOR`] before `now_ms`.
    pub fn of(
        mine: &BTreeMap<String, Definition>,
        me: &str,
        catalog: &Catalog,
        live: &BTreeSet<String>,
        my_offset: Option<i64>,
        now_ms: i64,
    ) -> Self {
        let present = catalog.present(me, live, my_offset, now_ms);
        let mut verdict = Verdict {
            present: present.clone(),
            ..Default::default()
        };
        for (name, def) in mine {
            let mut coverage = Coverage {
                lacking: present.clone(),
                ..Default::default()
            };
            for member in &present {
                let Some((_, theirs)) = catalog.records.get(&(name.clone(), member.clone())) else {
                    continue;
                };
                coverage.lacking.remove(member);
                if def.alike(&theirs.definition) {
                    coverage.same.insert(member.clone());
                } else {
                    coverage.different.insert(member.clone());
                    verdict.conflicts.push(Conflict {
                        connector: name.clone(),
                        member: member.clone(),
                        differences: def.differences(&theirs.definition),
                    });
                }
            }
            verdict.mine.insert(name.clone(), coverage);
        }
        for member in &present {
            for r in catalog.of_member(member) {
                if !mine.contains_key(&r.connector) {
                    verdict
                        .others
                        .entry(r.connector.clone())
                        .or_default()
                        .insert(member.clone());
                }
            }
        }
        verdict
    }

    /// One line per connector some present member cannot run (this member's connectors
    /// other members lack or define differently, and the connectors of other members this
    /// one lacks), for a WARN each: `(connector, words)`.
    pub fn gaps(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        for (name, c) in &self.mine {
            if c.lacking.is_empty() {
                continue;
            }
            out.push((
                name.clone(),
                format!(
                    "connector {name} is not defined in member(s) {}: they cannot take it over \
                     ({} other member(s) can: {}); give every member of the group the same \
                     connector files",
                    join(&c.lacking),
                    c.same.len(),
                    if c.same.is_empty() {
                        "it has no standby".to_string()
                    } else {
                        join(&c.same)
                    }
                ),
            ));
        }
        for (name, members) in &self.others {
            out.push((
                name.clone(),
                format!(
                    "connector {name} (defined in member(s) {}) is not defined here: this member \
                     cannot take it over; give every member of the group the same connector files",
                    join(members)
                ),
            ));
        }
        out
    }
}

fn join(members: &BTreeSet<String>) -> String {
    members.iter().cloned().collect::<Vec<_>>().join(", ")
}

/// This member's access to the definitions topic: its publisher and a reader that follows
/// the topic.
pub struct Registry {
    producer: FutureProducer<ClientLog>,
    reader: Arc<std::sync::Mutex<Reader>>,
    group: String,
    member: String,
}

/// Follows the definitions topic from its start.
struct Reader {
    consumer: BaseConsumer<ClientLog>,
    topic: String,
    catalog: Catalog,
}

impl Reader {
    /// Reads up to the topic's end as of now (at most `wait`); the catalog after it.
    fn catch_up(&mut self, wait: Duration) -> Result<Catalog, String> {
        let (low, high) = client::watermarks(&self.consumer, &self.topic, 0, wait)
            .map_err(|e| format!("reading {}: {e}", self.topic))?;
        if high <= low {
            // Nothing to read (an empty topic has no position to compare with).
            return Ok(self.catalog.clone());
        }
        let deadline = std::time::Instant::now() + wait;
        loop {
            let position = self
                .consumer
                .position()
                .ok()
                .and_then(|p| {
                    p.find_partition(&self.topic, 0)
                        .and_then(|e| e.offset().to_raw())
                })
                .unwrap_or(-1);
            if position >= high {
                return Ok(self.catalog.clone());
            }
            if std::time::Instant::now() >= deadline {
                return Err(format!(
                    "reading {}: not at its end (offset {high}) within {wait:?}",
                    self.topic
                ));
            }
            match self.consumer.poll(Duration::from_millis(100)) {
                Some(Ok(m)) => {
                    if let Some(key) = m.key() {
                        self.catalog.apply(key, m.payload(), m.offset());
                    }
                }
                Some(Err(rdkafka::error::KafkaError::PartitionEOF(_))) | None => {}
                Some(Err(e)) => return Err(format!("reading {}: {e}", self.topic)),
            }
        }
    }
}

impl Registry {
    /// Opens member `member`'s registry in group `group`; its clients report to `link`.
    pub fn open(
        kafka: &KafkaConfig,
        group: &str,
        member: &str,
        link: Arc<KafkaLink>,
    ) -> Result<Self, String> {
        let producer: FutureProducer<ClientLog> = client::config(kafka)
            .set("enable.idempotence", "true")
            .set("linger.ms", "0")
            .create_client(ClientLog::new(link.clone()))
            .map_err(|e| format!("cannot create a Kafka producer: {e}"))?;
        let reader = open_reader(kafka, group, link)?;
        Ok(Self {
            producer,
            reader: Arc::new(std::sync::Mutex::new(reader)),
            group: group.to_string(),
            member: member.to_string(),
        })
    }

    /// Publishes this member's `definitions`; the offset of the last record written.
    pub async fn publish(&self, definitions: &BTreeMap<String, Definition>) -> Result<i64, String> {
        let topic = definitions_topic(&self.group);
        let mut last = -1;
        for (connector, definition) in definitions {
            let record = DefinitionRecord {
                connector: connector.clone(),
                member: self.member.clone(),
                host: host_name(),
                pid: std::process::id(),
                written_ms: now_ms(),
                fingerprint: definition.fingerprint(),
                definition: definition.clone(),
            };
            let value = serde_json::to_vec(&record).map_err(|e| e.to_string())?;
            let key = record_key(connector, &self.member);
            let delivered = self
                .producer
                .send(
                    FutureRecord::<str, [u8]>::to(&topic)
                        .key(&key)
                        .payload(&value),
                    KAFKA_TIMEOUT,
                )
                .await
                .map_err(|(e, _)| format!("writing to {topic}: {e}"))?;
            last = last.max(delivered.offset);
        }
        Ok(last)
    }

    /// Deletes the records `keys` (`(connector, member)`: tombstones), best effort, waiting
    /// at most [`DELETE_WAIT`] (a stopping member must not be held by an unreachable Kafka).
    pub async fn delete(&self, keys: &[(String, String)]) {
        let topic = definitions_topic(&self.group);
        let sends = keys.iter().map(|(connector, member)| {
            let key = record_key(connector, member);
            let topic = &topic;
            async move {
                let _ = self
                    .producer
                    .send(FutureRecord::<str, [u8]>::to(topic).key(&key), DELETE_WAIT)
                    .await;
            }
        });
        let _ = tokio::time::timeout(DELETE_WAIT, futures_util::future::join_all(sends)).await;
    }

    /// Deletes this member's records of `connectors` (when it leaves, or is refused).
    pub async fn withdraw(&self, connectors: impl IntoIterator<Item = &String>) {
        let keys: Vec<(String, String)> = connectors
            .into_iter()
            .map(|c| (c.clone(), self.member.clone()))
            .collect();
        self.delete(&keys).await;
    }

    /// The topic as of now (read up to its end, at most `wait`).
    pub async fn catalog(&self, wait: Duration) -> Result<Catalog, String> {
        let reader = self.reader.clone();
        tokio::task::spawn_blocking(move || {
            reader
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .catch_up(wait)
        })
        .await
        .map_err(|e| e.to_string())?
    }
}

/// A reader of group `group`'s definitions topic from its start.
fn open_reader(kafka: &KafkaConfig, group: &str, link: Arc<KafkaLink>) -> Result<Reader, String> {
    let consumer: BaseConsumer<ClientLog> = client::config(kafka)
        .set(
            "group.id",
            format!("{}.definitions", super::topics::group_id(group)),
        )
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "false")
        .create_client(ClientLog::new(link))
        .map_err(|e| format!("cannot create a Kafka consumer: {e}"))?;
    let topic = definitions_topic(group);
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(&topic, 0, Offset::Beginning)
        .map_err(|e| e.to_string())?;
    consumer.assign(&tpl).map_err(|e| e.to_string())?;
    Ok(Reader {
        consumer,
        topic,
        catalog: Catalog::default(),
    })
}

/// What `status` reads of group `group`: its definitions topic and its members (as the
/// coordinator lists them). Blocking, a few seconds at most.
pub fn read_view(kafka: &KafkaConfig, group: &str) -> Result<(Catalog, BTreeSet<String>), String> {
    let link = KafkaLink::quiet("status", &kafka.bootstrap_servers);
    let catalog = open_reader(kafka, group, link.clone())?.catch_up(Duration::from_secs(5))?;
    let live = super::owners::MemberList::new(kafka, group, link)?
        .members(Duration::from_secs(2))?
        .into_iter()
        .collect();
    Ok((catalog, live))
}

/// What `status` says of connector `name` (defined as `definition` in its files) across the
/// group's members in `live`: `{"same": [...], "different": [...], "lacking": [...]}`.
pub fn status_of(
    name: &str,
    definition: &Definition,
    catalog: &Catalog,
    live: &BTreeSet<String>,
) -> serde_json::Value {
    let mine = BTreeMap::from([(name.to_string(), definition.clone())]);
    // `status` is no member: every live member is another one.
    let verdict = Verdict::of(&mine, "", catalog, live, None, now_ms());
    let coverage = verdict.mine.get(name).cloned().unwrap_or_default();
    serde_json::json!({
        "same": coverage.same,
        "different": coverage.different,
        "lacking": coverage.lacking,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(extra_router: &str, password: &str) -> ConnectorConfig {
        let text = format!(
            r#"
[[connectors]]
name = "shop"
tables = ["s.outbox"]
[connectors.source]
kind = "mariadb"
host = "db"
user = "u"
password = "{password}"
server_id = 7
[connectors.router]
{extra_router}
"#
        );
        crate::config::parse(
            &text,
            std::path::Path::new("t.toml"),
            Some("k:9092"),
            &|_| None,
        )
        .unwrap()
        .connectors
        .remove(0)
    }

    fn record(
        connector: &str,
        member: &str,
        def: &Definition,
        written_ms: i64,
    ) -> DefinitionRecord {
        DefinitionRecord {
            connector: connector.into(),
            member: member.into(),
            host: "h".into(),
            pid: 1,
            written_ms,
            fingerprint: def.fingerprint(),
            definition: def.clone(),
        }
    }

    fn catalog(records: &[(i64, DefinitionRecord)]) -> Catalog {
        let mut c = Catalog::default();
        for (offset, r) in records {
            c.apply(
                record_key(&r.connector, &r.member).as_bytes(),
                Some(&serde_json::to_vec(r).unwrap()),
                *offset,
            );
        }
        c
    }

    #[test]
    fn routing_counts_secrets_do_not() {
        let a = Definition::of(&cfg("", "hunter2"));
        let b = Definition::of(&cfg("", "swordfish"));
        assert_eq!(a, b, "passwords never count");
        assert_eq!(a.fingerprint(), b.fingerprint());
        let text = serde_json::to_string(&a).unwrap();
        assert!(
            !text.contains("hunter2") && !text.contains("\"u\""),
            "{text}"
        );
        let c = Definition::of(&cfg(
            "\"route.topic.replacement\" = \"other.${routedByValue}\"\n\
             \"table.fields.additional.placement\" = \"event_type:header:type\"",
            "hunter2",
        ));
        assert_ne!(a.fingerprint(), c.fingerprint());
        let keys: Vec<String> = a.differences(&c).into_iter().map(|d| d.key).collect();
        assert_eq!(
            keys,
            vec![
                "route.topic.replacement",
                "table.fields.additional.placement"
            ]
        );
        let shown = a.differences(&c)[0].to_string();
        assert!(shown.contains("\"other.${routedByValue}\""), "{shown}");
    }

    #[test]
    fn a_setting_another_version_does_not_know_is_no_difference() {
        let a = Definition::of(&cfg("", "p"));
        let mut newer = a.clone();
        newer
            .0
            .insert("source.some_future_setting".into(), "x".into());
        assert!(a.alike(&newer) && newer.alike(&a));
        newer.0.insert("source.host".into(), "elsewhere".into());
        assert!(!a.alike(&newer));
    }

    #[test]
    fn present_members_with_another_definition_are_conflicts() {
        let mine = Definition::of(&cfg("", "p"));
        let other = Definition::of(&cfg("\"route.topic.replacement\" = \"x\"", "p"));
        let now = 1_000_000;
        let c = catalog(&[
            (0, record("shop", "a", &other, now - 600_000)),
            (1, record("shop", "b", &mine, now - 600_000)),
            (2, record("extra", "b", &mine, now - 600_000)),
            (3, record("shop", "dead", &other, now - 600_000)),
            (4, record("shop", "me", &mine, now)),
        ]);
        let mine_map = BTreeMap::from([("shop".to_string(), mine.clone())]);
        let live: BTreeSet<String> = ["a", "b"].map(String::from).into();
        let v = Verdict::of(&mine_map, "me", &c, &live, Some(4), now);
        assert_eq!(v.conflicts.len(), 1, "{v:?}");
        assert_eq!(v.conflicts[0].member, "a");
        assert!(v.conflicts[0].to_string().starts_with(
            "connector shop is defined differently here than in member a: route.topic.replacement"
        ));
        assert_eq!(v.mine["shop"].same, BTreeSet::from(["b".to_string()]));
        assert_eq!(v.others["extra"], BTreeSet::from(["b".to_string()]));
        assert_eq!(
            c.stale("me", &live, now),
            vec![("shop".into(), "dead".into())]
        );
        let gaps = v.gaps();
        assert!(gaps
            .iter()
            .any(|(c, w)| c == "extra" && w.contains("not defined here")));
    }

    #[test]
    fn of_two_members_starting_together_the_later_is_refused() {
        let mine = Definition::of(&cfg("", "p"));
        let other = Definition::of(&cfg("\"route.topic.replacement\" = \"x\"", "p"));
        let now = 1_000_000;
        let c = catalog(&[
            (10, record("shop", "early", &other, now - 2_000)),
            (11, record("shop", "late", &mine, now - 1_000)),
        ]);
        let none = BTreeSet::new();
        let late = Verdict::of(
            &BTreeMap::from([("shop".to_string(), mine.clone())]),
            "late",
            &c,
            &none,
            Some(11),
            now,
        );
        assert_eq!(late.conflicts.len(), 1, "the later one sees the earlier");
        let early = Verdict::of(
            &BTreeMap::from([("shop".to_string(), other)]),
            "early",
            &c,
            &none,
            Some(10),
            now,
        );
        assert!(early.conflicts.is_empty(), "the earlier one goes on");
        // Long ago and not in the group: a killed member, not a starting one.
        let stale = Verdict::of(
            &BTreeMap::from([("shop".to_string(), mine)]),
            "late",
            &c,
            &none,
            Some(11),
            now + STARTING_FOR.as_millis() as i64,
        );
        assert!(stale.conflicts.is_empty());
    }

    #[test]
    fn a_connector_some_members_lack_has_fewer_standbys() {
        let x = Definition::of(&cfg("", "p"));
        let now = 1_000_000;
        let c = catalog(&[(0, record("z", "b", &x, now - 600_000))]);
        let mine = BTreeMap::from([("x".to_string(), x.clone()), ("z".to_string(), x)]);
        let live: BTreeSet<String> = ["b".to_string()].into();
        let v = Verdict::of(&mine, "me", &c, &live, None, now);
        assert!(v.conflicts.is_empty());
        assert_eq!(v.mine["x"].lacking, live);
        assert!(v.mine["x"].same.is_empty());
        assert_eq!(v.mine["z"].same, live);
        let gaps = v.gaps();
        assert_eq!(gaps.len(), 1, "{gaps:?}");
        assert!(gaps[0].1.contains("it has no standby"), "{}", gaps[0].1);
    }
}
