//! The Kafka producer's failures, classified from librdkafka's error codes.
//!
//! A record Kafka refuses for good (too large for the topic, no ACL, unknown partition), a
//! fenced or fatally failed producer and a configuration librdkafka rejects are definite;
//! everything else (timeouts, brokers unreachable, a transaction coordinator not available,
//! records purged as the consequence of another failure) is transient. Messages name the
//! record's topic and event id, never its payload.

use std::fmt;

use rdkafka::error::{KafkaError, RDKafkaErrorCode};

use super::missing_topic::{AutoCreate, CONFIRM_AFTER};
use crate::error::Class;

/// Why Kafka refused a record for good.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Larger than the topic's `max.message.bytes` (or the broker's `message.max.bytes`).
    TooLarge,
    /// The record names a partition the topic does not have.
    UnknownPartition,
    /// Anything else that will not change on a retry: ACLs, an invalid topic, the record
    /// format.
    Other,
}

/// What limits the size of a sink's records, for the error that names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RecordLimit {
    /// `kafka.max_record_bytes` (with the topic's `max.message.bytes`).
    #[default]
    Kafka,
    /// The NATS server's `max_payload` (and a stream's `max_msg_size`).
    Nats,
    /// Redis's largest string value (`proto-max-bulk-len`, 512 MiB by default).
    Redis,
    /// RabbitMQ's `max_message_size`.
    RabbitMq,
}

impl RecordLimit {
    /// "... more than " + the limit of `limit` bytes and what to change.
    fn advice(self, limit: usize) -> String {
        match self {
            RecordLimit::Kafka => format!(
                "kafka.max_record_bytes={limit}; raise kafka.max_record_bytes together with the \
                 topic's max.message.bytes (and the broker's message.max.bytes), or shrink the \
                 event"
            ),
            RecordLimit::Nats => format!(
                "the NATS server's max_payload ({limit}); raise max_payload in the server's \
                 configuration (and the stream's max_msg_size), or shrink the event"
            ),
            RecordLimit::Redis => {
                format!("Redis takes in one entry ({limit}, proto-max-bulk-len); shrink the event")
            }
            RecordLimit::RabbitMq => format!(
                "the RabbitMQ sink's max_message_bytes ({limit}); raise it in \
                 [connectors.sink] up to the broker's max_message_size (rabbitmq.conf), or \
                 shrink the event"
            ),
        }
    }
}

/// A failure of the Kafka producer or of one of its records.
#[derive(Debug, Clone, thiserror::Error)]
pub enum SinkError {
    /// librdkafka rejected the producer's configuration.
    #[error("cannot create the Kafka producer: {source}; check the kafka.producer properties")]
    Client {
        /// librdkafka's error.
        #[source]
        source: Box<KafkaError>,
    },
    /// A `kafka.producer` property would weaken a setting the guarantees rest on.
    #[error(
        "kafka.producer.{key}={value} would break outboxd's delivery guarantees; remove it \
         (outboxd always sets {key}={fixed})"
    )]
    FixedProperty {
        /// The property.
        key: String,
        /// The value given.
        value: String,
        /// The value outboxd sets.
        fixed: &'static str,
    },
    /// An outbox event is larger than the sink takes (Kafka: `kafka.max_record_bytes`):
    /// refused before sending.
    #[error(
        "outbox event {id} for topic {topic} is {size} bytes, more than {}",
        limit_of.advice(*limit)
    )]
    RecordTooLarge {
        /// The event id (`id` header).
        id: String,
        /// Destination topic.
        topic: String,
        /// The record's size (`KafkaRecord::approx_size`).
        size: usize,
        /// The largest record the sink takes (Kafka: `kafka.max_record_bytes`).
        limit: usize,
        /// What sets that limit.
        limit_of: RecordLimit,
    },
    /// `kafka.max_record_bytes` and the producer's size settings do not fit together (a
    /// record of the allowed size could never be produced): refused at startup.
    #[error("{detail}")]
    RecordLimit {
        /// Which settings, what they are and what to change.
        detail: String,
    },
    /// The producer's queue stayed full until shutdown: the record was not enqueued.
    #[error("the Kafka producer's queue was still full at shutdown (waited {waited:?} to enqueue a record for topic {topic}): Kafka did not acknowledge what was queued")]
    QueueFull {
        /// Destination topic of the record that waited.
        topic: String,
        /// How long it waited.
        waited: std::time::Duration,
    },
    /// Records waited without a delivery report although the cluster answered a metadata
    /// request ([`super::stall`]): the producer is stalled; the batch is sent again on a new
    /// one.
    #[error(
        "the Kafka producer stalled: {records} record(s) got no delivery report for {quiet:.0?} \
         although Kafka answers; restarting the batch on a new producer"
    )]
    Stalled {
        /// Records waiting.
        records: u64,
        /// How long no report came.
        quiet: std::time::Duration,
    },
    /// Records wait for (or failed on) topics the cluster says do not exist, asked twice
    /// ([`super::missing_topic`]). Definite when nothing creates them (auto-creation off) and
    /// they are topics events are routed to; transient otherwise (auto-creation on but the
    /// broker did not create them, or unknown; or a topic outboxd creates itself at start: the
    /// checkpoint or dead-letter topic, which a restart creates again).
    #[error("{}", missing_topics(topics, *records, auto_create, *own))]
    TopicMissing {
        /// The topics, as the records name them.
        topics: Vec<String>,
        /// Records waiting without a delivery report (or failed) when the batch ended.
        records: u64,
        /// Whether the cluster creates missing topics.
        auto_create: AutoCreate,
        /// Every one of them is a topic outboxd creates when the connector starts (its
        /// checkpoint or dead-letter topic).
        own: bool,
    },
    /// The dead-letter topic could not be created.
    #[error("cannot create the dead-letter topic {topic}: {detail}; {}", if *definite { "create it by hand (one partition keeps dead letters in source order) or allow the relay to" } else { "is Kafka reachable?" })]
    DeadLetterTopic {
        /// The topic.
        topic: String,
        /// What Kafka said.
        detail: String,
        /// Refused for good (ACLs, policy), or Kafka did not answer.
        definite: bool,
    },
    /// The dead-letter topic takes smaller records than the connector may send there:
    /// refused at startup (a large dead letter would otherwise stop the connector later).
    #[error(
        "the dead-letter topic {topic} takes records of at most max.message.bytes={limit} \
         bytes, less than the producer may send there (message.max.bytes={required}: \
         kafka.max_record_bytes={max_record_bytes} plus framing); a larger dead letter would be \
         refused and stop the connector: raise the topic's max.message.bytes to at least \
         {required} (kafka-configs --alter --entity-type topics --entity-name {topic} \
         --add-config max.message.bytes={required}){}",
        lower_to(*limit, *required, *max_record_bytes)
    )]
    DeadLetterTopicTooSmall {
        /// The topic.
        topic: String,
        /// Its `max.message.bytes`.
        limit: usize,
        /// The producer's `message.max.bytes`.
        required: usize,
        /// `kafka.max_record_bytes`.
        max_record_bytes: usize,
    },
    /// librdkafka refused to enqueue a record for good.
    #[error("{}", refused_on_send(*reason, id, topic, partition, source))]
    RefusedOnSend {
        /// Why.
        reason: Refusal,
        /// The event id.
        id: String,
        /// Destination topic.
        topic: String,
        /// The partition the record named, if any.
        partition: Option<i32>,
        /// librdkafka's error.
        #[source]
        source: Box<KafkaError>,
    },
    /// librdkafka could not enqueue a record (transient).
    #[error("enqueuing a record for topic {topic}: {source}")]
    Enqueue {
        /// Destination topic.
        topic: String,
        /// librdkafka's error.
        #[source]
        source: Box<KafkaError>,
    },
    /// The broker refused a record for good (its delivery report).
    #[error("{}", refused(*reason, id, topic, source))]
    Refused {
        /// Why.
        reason: Refusal,
        /// The event id.
        id: String,
        /// Destination topic.
        topic: String,
        /// librdkafka's error.
        #[source]
        source: Box<KafkaError>,
    },
    /// A record's delivery failed for a reason a retry may cure (timeout, brokers down,
    /// purged by an abort).
    #[error("delivery of outbox event {id} to topic {topic} failed: {source}")]
    Delivery {
        /// The event id.
        id: String,
        /// Destination topic.
        topic: String,
        /// librdkafka's error.
        #[source]
        source: Box<KafkaError>,
    },
    /// A routed topic could not be made sure of before its first record (Kafka Connect's
    /// topic creation, `topic.creation.*`): Kafka did not answer, did not create it, or
    /// refused to (definite: ACLs, policy, a replication factor above the broker count).
    #[error(
        "topic {topic} was not created (topic creation group {group}: {partitions} \
         partitions, replication factor {replication_factor}; -1 = the broker's default): \
         {detail}{}",
        if *definite { "; grant the principal CREATE on the topic (or the cluster), fix the group's settings, or create the topic beforehand" } else { "" }
    )]
    TopicCreation {
        /// The topic.
        topic: String,
        /// Its topic creation group.
        group: String,
        /// The group's partition count.
        partitions: i32,
        /// The group's replication factor.
        replication_factor: i32,
        /// Kafka refused for good.
        definite: bool,
        /// What happened.
        detail: String,
    },
    /// librdkafka reported a record written without the broker confirming it: a later
    /// batch to the same partition was acknowledged while this one had failed, and the
    /// idempotent producer infers ("implicitly acks") the earlier one. A broker that holds no
    /// producer state for the partition (new, empty, or just loaded) accepts the later batch
    /// as the first one and the earlier one is never written (KAFKA-15591; librdkafka's
    /// `rd_kafka_dr_implicit_ack`). The sign is a success report without an offset. The
    /// record counts as not delivered: transient, the connector sends again from its
    /// checkpoint (at-least-once) or aborts the transaction (exactly-once).
    #[error(
        "Kafka did not confirm outbox event {id} to {topic} [{partition}]: librdkafka counted \
         it written because a later batch to that partition was acknowledged, which a broker \
         also does when it never wrote this one (a partition just created or loaded, \
         KAFKA-15591); it is not counted as delivered and is sent again from the checkpoint"
    )]
    Unconfirmed {
        /// The event id.
        id: String,
        /// Destination topic.
        topic: String,
        /// Destination partition.
        partition: i32,
    },
    /// The producer's fatal error (other than fencing): nothing more can be sent on it. A
    /// new producer cures most (e.g. a transaction the coordinator lost in a broker crash:
    /// `INVALID_TXN_STATE`): transient; not a refused permission or an unsupported broker
    /// ([`restart_cures`]).
    #[error(
        "fatal Kafka producer error ({code}): {reason}; the producer cannot go on (the last \
         committed checkpoint is intact){}",
        if restart_cures(Some(*code)) { "" } else { "; check the ACLs of the transactional id and the cluster, and the broker version" }
    )]
    Fatal {
        /// librdkafka's error code.
        code: RDKafkaErrorCode,
        /// librdkafka's description.
        reason: String,
    },
    /// The cluster gives this connector no transactions: `init_transactions` was refused
    /// for want of permission (`TRANSACTIONAL_ID_AUTHORIZATION_FAILED`,
    /// `CLUSTER_AUTHORIZATION_FAILED`) or because the brokers do not offer the transactional
    /// APIs (librdkafka's `_UNSUPPORTED_FEATURE`: Azure Event Hubs' standard tier, proxies).
    /// A restart meets the same answer: definite, with the choice to make.
    #[error(
        "Kafka transactions are not available to this connector: init_transactions with \
         transactional.id={transactional_id} failed: {reason}. Exactly-once delivery needs \
         them (records and checkpoint in one Kafka transaction), and so do a group's \
         fenced checkpoints. Either set [connectors.checkpoint] delivery = \"at_least_once\" \
         (outside a group: every event delivered at least once; after a crash the last \
         events may be delivered again), or give the principal WRITE and DESCRIBE on \
         TransactionalId {transactional_id} (a cluster without transactions at all, e.g. \
         Azure Event Hubs standard, has no such choice)"
    )]
    TransactionsUnavailable {
        /// The `transactional.id` tried.
        transactional_id: String,
        /// librdkafka's description.
        reason: String,
    },
    /// Another instance with the same `transactional.id` took over (Kafka's zombie fencing).
    #[error(
        "{what}: this instance was fenced: another outboxd instance with the same \
         transactional.id took over the connector ({detail}); this one stops without writing \
         anything more (run one instance per connector)"
    )]
    Fenced {
        /// The call that found out.
        what: &'static str,
        /// librdkafka's description.
        detail: String,
    },
    /// A transactional call failed (`init`, `begin`, `commit`, `abort`).
    #[error("{what}: {}{source}{}", if *fatal { "fatal Kafka transaction error: " } else { "" }, if *fatal { "; the producer cannot go on (the last committed checkpoint is intact)" } else { "" })]
    Transaction {
        /// The call.
        what: &'static str,
        /// librdkafka says the producer cannot go on.
        fatal: bool,
        /// librdkafka's error.
        #[source]
        source: Box<KafkaError>,
    },
    /// The producer still held unacknowledged records at a flush's timeout.
    #[error("flushing the Kafka producer: {source}")]
    Flush {
        /// librdkafka's error.
        #[source]
        source: Box<KafkaError>,
    },
    /// A metadata request got no answer.
    #[error("Kafka is not reachable: {source}")]
    Unreachable {
        /// librdkafka's error.
        #[source]
        source: Box<KafkaError>,
    },
    /// The cluster refused the credentials, or TLS with it failed verification.
    #[error(transparent)]
    Link(#[from] super::link::LinkFailure),
    /// A non-Kafka broker's failure (NATS JetStream, Redis, RabbitMQ), classified by its
    /// sink from the client's error kinds: see [`SinkError::broker`] and
    /// [`SinkError::broker_record`].
    #[error("{broker}: {detail}")]
    Broker {
        /// The broker: `NATS JetStream`, `Redis`, `RabbitMQ`.
        broker: &'static str,
        /// What failed and what to do (never a payload or a secret).
        detail: String,
        /// Transient (retry from the checkpoint) or definite (stop).
        class: Class,
        /// The record it is about, when one: event id and destination.
        record: Option<(String, String)>,
        /// Set when the broker refused that record for good (it can be dead-lettered).
        refusal: Option<Refusal>,
    },
    /// A call handed to the blocking pool did not come back (the runtime is shutting down).
    #[error("{what}: {source}")]
    Abandoned {
        /// The call.
        what: &'static str,
        /// Why it did not complete.
        #[source]
        source: std::sync::Arc<tokio::task::JoinError>,
    },
    /// Kafka did not answer a call within its bound.
    #[error("{what}: Kafka did not answer within {within:?}")]
    NoAnswer {
        /// The call.
        what: &'static str,
        /// How long it was waited for.
        within: std::time::Duration,
    },
}

/// The "or lower kafka.max_record_bytes" part of [`SinkError::DeadLetterTopicTooSmall`], when
/// a limit that fits the topic is large enough to be worth proposing (1 KiB).
fn lower_to(limit: usize, required: usize, max_record_bytes: usize) -> String {
    let fits = limit.saturating_sub(required.saturating_sub(max_record_bytes));
    if fits >= 1024 {
        format!(", or lower kafka.max_record_bytes to at most {fits}")
    } else {
        String::new()
    }
}

/// The message of [`SinkError::TopicMissing`].
fn missing_topics(topics: &[String], records: u64, auto_create: &AutoCreate, own: bool) -> String {
    let (noun, names) = match topics {
        [one] => (format!("topic {one} does"), one.clone()),
        _ => (
            format!("topics {} do", topics.join(", ")),
            topics.join(", "),
        ),
    };
    let seen = format!(
        "{noun} not exist (Kafka answered UNKNOWN_TOPIC_OR_PARTITION twice, {}s apart), and \
         {records} record(s) wait without a delivery report",
        CONFIRM_AFTER.as_secs()
    );
    if own {
        return format!(
            "the connector's own {seen} (deleted while it ran?); restarting from the checkpoint \
             creates {} again",
            if topics.len() == 1 { "it" } else { "them" }
        );
    }
    match auto_create {
        AutoCreate::Off(_) => format!(
            "{seen}: {}. Create {names} (kafka-topics.sh --create --topic <name>, with the \
             partitions and replication the consumers expect) or turn auto-creation on \
             (auto.create.topics.enable=true on the brokers, and no kafka.producer \
             allow.auto.create.topics=false), then start the connector again: its checkpoint \
             stays before the events routed there, so they are delivered then",
            auto_create.describe()
        ),
        AutoCreate::On => format!(
            "{seen}, although {}: the broker did not create it (the Kafka principal needs CREATE \
             on the cluster or the topic, or a create.topic.policy refused it); create {names} \
             or allow the creation; restarting from the checkpoint meanwhile",
            auto_create.describe()
        ),
        AutoCreate::Unknown(_) => format!(
            "{seen}; {}: if they do not, create {names}; restarting from the checkpoint \
             meanwhile",
            auto_create.describe()
        ),
    }
}

fn refused_on_send(
    reason: Refusal,
    id: &str,
    topic: &str,
    partition: &Option<i32>,
    e: &KafkaError,
) -> String {
    match reason {
        Refusal::TooLarge => format!(
            "Kafka refused outbox event {id} for topic {topic}: record too large ({e}); raise the \
             topic's max.message.bytes and kafka.max_record_bytes"
        ),
        Refusal::UnknownPartition => format!(
            "outbox event {id} names partition {partition:?} that topic {topic} does not have \
             ({e}); fix the partition placement column or add partitions"
        ),
        Refusal::Other => format!("Kafka refused outbox event {id} for topic {topic}: {e}"),
    }
}

fn refused(reason: Refusal, id: &str, topic: &str, e: &KafkaError) -> String {
    match reason {
        Refusal::TooLarge => format!(
            "Kafka refused outbox event {id} for topic {topic} as too large ({e}); raise the \
             topic's max.message.bytes (and the broker's message.max.bytes) or shrink the \
             event, then restart (nothing after the last delivered event was checkpointed)"
        ),
        Refusal::UnknownPartition | Refusal::Other => format!(
            "Kafka refused outbox event {id} for topic {topic}: {e}; fix the topic or its \
             ACLs/limits, then restart (nothing after the last delivered event was \
             checkpointed)"
        ),
    }
}

/// Whether a new producer cures a producer's fatal error with librdkafka code `code`
/// (librdkafka INTRODUCTION.md, "Fatal producer errors": the application must create a new
/// producer): yes for a transaction or sequence state lost or broken, e.g. by a broker crash
/// (`INVALID_TXN_STATE`, `UNKNOWN_PRODUCER_ID`, `OUT_OF_ORDER_SEQUENCE_NUMBER`); no for a
/// refused permission, an unsupported broker or a setting the broker refuses, which a new
/// producer meets again.
pub fn restart_cures(code: Option<RDKafkaErrorCode>) -> bool {
    use RDKafkaErrorCode as C;
    !matches!(
        code,
        Some(
            C::TransactionalIdAuthorizationFailed
                | C::ClusterAuthorizationFailed
                | C::UnsupportedFeature
                | C::TopicAuthorizationFailed
                | C::UnsupportedVersion
                | C::UnsupportedForMessageFormat
                | C::InvalidTransactionTimeout
                | C::InvalidConfig
        )
    )
}

/// Whether librdkafka's error `code` says the producer was fenced by a newer instance with
/// its `transactional.id` (`_FENCED`, `PRODUCER_FENCED`; `INVALID_PRODUCER_EPOCH` is what
/// brokers before KIP-588 answer a fenced producer).
pub(crate) fn is_fenced(code: RDKafkaErrorCode) -> bool {
    matches!(
        code,
        RDKafkaErrorCode::Fenced
            | RDKafkaErrorCode::ProducerFenced
            | RDKafkaErrorCode::InvalidProducerEpoch
    )
}

impl SinkError {
    /// Transient or definite, from the variant and librdkafka's error code.
    pub fn class(&self) -> Class {
        match self {
            // A new producer (the connector restarting) cures most fatal errors.
            SinkError::Fatal { code, .. } => Self::fatal_class(Some(*code)),
            SinkError::Broker { class, .. } => *class,
            SinkError::Transaction {
                fatal: true,
                source,
                ..
            } => Self::fatal_class(source.rdkafka_error_code()),
            SinkError::TopicCreation { definite, .. } => {
                if *definite {
                    Class::Definite
                } else {
                    Class::Transient
                }
            }
            SinkError::TopicMissing {
                auto_create, own, ..
            } => {
                if !*own && matches!(auto_create, AutoCreate::Off(_)) {
                    Class::Definite
                } else {
                    Class::Transient
                }
            }
            SinkError::Enqueue { .. }
            | SinkError::QueueFull { .. }
            | SinkError::Stalled { .. }
            | SinkError::Delivery { .. }
            | SinkError::Unconfirmed { .. }
            | SinkError::Flush { .. }
            | SinkError::Unreachable { .. }
            | SinkError::Abandoned { .. }
            | SinkError::NoAnswer { .. }
            | SinkError::Transaction { fatal: false, .. }
            | SinkError::DeadLetterTopic {
                definite: false, ..
            } => Class::Transient,
            SinkError::Client { .. }
            | SinkError::FixedProperty { .. }
            | SinkError::RecordLimit { .. }
            | SinkError::RecordTooLarge { .. }
            | SinkError::RefusedOnSend { .. }
            | SinkError::Refused { .. }
            | SinkError::Fenced { .. }
            | SinkError::TransactionsUnavailable { .. }
            | SinkError::Link(_)
            | SinkError::DeadLetterTopic { definite: true, .. }
            | SinkError::DeadLetterTopicTooSmall { .. } => Class::Definite,
        }
    }

    /// The class of a producer's fatal error with `code`: see [`restart_cures`].
    fn fatal_class(code: Option<RDKafkaErrorCode>) -> Class {
        if restart_cures(code) {
            Class::Transient
        } else {
            Class::Definite
        }
    }

    /// A failed call of the transactional API: fenced ([`is_fenced`]), fatal or transient.
    pub fn transaction(what: &'static str, e: &KafkaError) -> Self {
        if e.rdkafka_error_code().is_some_and(is_fenced) {
            return SinkError::Fenced {
                what,
                detail: e.to_string(),
            };
        }
        let fatal = matches!(e, KafkaError::Transaction(rd) if rd.is_fatal());
        SinkError::Transaction {
            what,
            fatal,
            source: Box::new(e.clone()),
        }
    }

    /// This error of `init_transactions` as [`SinkError::TransactionsUnavailable`] when it
    /// says the cluster gives `transactional_id` no transactions (see there); else as it is.
    pub fn of_init_transactions(self, transactional_id: &str) -> Self {
        use RDKafkaErrorCode as C;
        match self {
            SinkError::Transaction { source, .. }
                if matches!(
                    source.rdkafka_error_code(),
                    Some(
                        C::TransactionalIdAuthorizationFailed
                            | C::ClusterAuthorizationFailed
                            | C::UnsupportedFeature
                            | C::UnsupportedVersion
                    )
                ) =>
            {
                SinkError::TransactionsUnavailable {
                    transactional_id: transactional_id.to_string(),
                    reason: source.to_string(),
                }
            }
            other => other,
        }
    }

    /// A record librdkafka would not enqueue: definite for what will not change on a retry.
    pub fn on_send(e: &KafkaError, id: String, topic: &str, partition: Option<i32>) -> Self {
        let reason = match e.rdkafka_error_code() {
            Some(RDKafkaErrorCode::MessageSizeTooLarge) => Some(Refusal::TooLarge),
            Some(RDKafkaErrorCode::UnknownPartition) => Some(Refusal::UnknownPartition),
            _ => None,
        };
        match reason {
            Some(reason) => SinkError::RefusedOnSend {
                reason,
                id,
                topic: topic.to_string(),
                partition,
                source: Box::new(e.clone()),
            },
            None => SinkError::Enqueue {
                topic: topic.to_string(),
                source: Box::new(e.clone()),
            },
        }
    }

    /// A failed delivery report: a refusal for what Kafka will not accept on a retry,
    /// a transient failure otherwise.
    pub fn on_delivery(e: &KafkaError, id: String, topic: &str) -> Self {
        use RDKafkaErrorCode as C;
        let reason = match e.rdkafka_error_code() {
            Some(C::MessageSizeTooLarge | C::MessageBatchTooLarge) => Some(Refusal::TooLarge),
            Some(C::UnknownPartition) => Some(Refusal::UnknownPartition),
            Some(
                C::InvalidRecord
                | C::TopicAuthorizationFailed
                | C::ClusterAuthorizationFailed
                | C::InvalidTopic
                | C::UnsupportedForMessageFormat,
            ) => Some(Refusal::Other),
            Some(C::Fatal) => {
                return SinkError::Fatal {
                    code: C::Fatal,
                    reason: format!("delivery to topic {topic}: {e}"),
                }
            }
            _ => None,
        };
        match reason {
            Some(reason) => SinkError::Refused {
                reason,
                id,
                topic: topic.to_string(),
                source: Box::new(e.clone()),
            },
            None => SinkError::Delivery {
                id,
                topic: topic.to_string(),
                source: Box::new(e.clone()),
            },
        }
    }

    /// Whether a batch that ended with this failure may have met a topic that does not exist
    /// ([`super::missing_topic`]): records waited without a delivery report (stalled), a
    /// record's delivery failed (purged ones too: exactly-once, `AddPartitionsToTxn` may fail
    /// the whole transaction for a deleted topic's partitions, and its records are then purged,
    /// the checkpoint record among them), records were refused for a partition their topic
    /// does not have (what librdkafka reports for the records of a deleted topic), or the
    /// transaction's records were not all sent (a flush, an abortable transaction error).
    pub fn may_be_missing_topic(&self) -> bool {
        match self {
            SinkError::Stalled { .. }
            | SinkError::Delivery { .. }
            | SinkError::Flush { .. }
            | SinkError::Transaction { fatal: false, .. } => true,
            SinkError::Refused { reason, .. } => *reason == Refusal::UnknownPartition,
            _ => false,
        }
    }

    /// True for a record purged from the producer's queues (an abort, a fatal error): a
    /// consequence of another failure, never its cause.
    pub fn is_purged(&self) -> bool {
        matches!(
            self,
            SinkError::Delivery { source, .. }
                if matches!(
                    source.rdkafka_error_code(),
                    Some(RDKafkaErrorCode::PurgeQueue | RDKafkaErrorCode::PurgeInflight)
                )
        )
    }

    /// A non-Kafka broker's failure not about one record (connection, login, a missing
    /// stream): `detail` says what failed and what to do.
    pub fn broker(broker: &'static str, class: Class, detail: impl Into<String>) -> Self {
        SinkError::Broker {
            broker,
            detail: detail.into(),
            class,
            record: None,
            refusal: None,
        }
    }

    /// A non-Kafka broker's failure to take the record with event id `id` for `topic` (its
    /// routed destination): refused for good when `refusal` is set (definite; the record
    /// can be dead-lettered), else a transient failure (the batch is sent again).
    pub fn broker_record(
        broker: &'static str,
        id: &str,
        topic: &str,
        refusal: Option<Refusal>,
        detail: impl Into<String>,
    ) -> Self {
        SinkError::Broker {
            broker,
            detail: detail.into(),
            class: if refusal.is_some() {
                Class::Definite
            } else {
                Class::Transient
            },
            record: Some((id.to_string(), topic.to_string())),
            refusal,
        }
    }

    /// The event id and topic of the record a delivery failure (or refusal) is about.
    pub fn record(&self) -> Option<(&str, &str)> {
        match self {
            SinkError::Delivery { id, topic, .. } | SinkError::Unconfirmed { id, topic, .. } => {
                Some((id, topic))
            }
            SinkError::Broker {
                record: Some((id, topic)),
                ..
            } => Some((id, topic)),
            other => other.refused_record(),
        }
    }

    /// The refused record's event id and topic, for a record Kafka refused for good (or
    /// that was too large to send).
    pub fn refused_record(&self) -> Option<(&str, &str)> {
        match self {
            SinkError::Refused { id, topic, .. }
            | SinkError::RefusedOnSend { id, topic, .. }
            | SinkError::RecordTooLarge { id, topic, .. } => Some((id, topic)),
            SinkError::Broker {
                record: Some((id, topic)),
                refusal: Some(_),
                ..
            } => Some((id, topic)),
            _ => None,
        }
    }

    /// A stable short name of a refusal, for dead-letter headers
    /// (`__connect.errors.exception.class.name`): `outboxd.kafka.<kind>`.
    pub fn kind(&self) -> &'static str {
        match self.refusal() {
            Some(Refusal::TooLarge) => "outboxd.kafka.record_too_large",
            Some(Refusal::UnknownPartition) => "outboxd.kafka.unknown_partition",
            Some(Refusal::Other) => "outboxd.kafka.refused",
            None => "outboxd.kafka.failed",
        }
    }

    /// The refusal, when Kafka refused a record for good.
    pub fn refusal(&self) -> Option<Refusal> {
        match self {
            SinkError::Refused { reason, .. } | SinkError::RefusedOnSend { reason, .. } => {
                Some(*reason)
            }
            SinkError::RecordTooLarge { .. } => Some(Refusal::TooLarge),
            SinkError::Broker { refusal, .. } => *refusal,
            _ => None,
        }
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Refusal::TooLarge => "record too large",
            Refusal::UnknownPartition => "unknown partition",
            Refusal::Other => "refused",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_topic_is_definite_only_when_nothing_creates_it() {
        let missing = |auto_create, own| SinkError::TopicMissing {
            topics: vec!["shop.Order".into()],
            records: 3,
            auto_create,
            own,
        };
        let off = missing(
            AutoCreate::Off("the producer's allow.auto.create.topics=false".into()),
            false,
        );
        assert_eq!(off.class(), Class::Definite);
        let text = off.to_string();
        for words in [
            "topic shop.Order does not exist",
            "3 record(s) wait",
            "allow.auto.create.topics=false",
            "Create shop.Order",
            "auto.create.topics.enable=true",
            "checkpoint stays before",
        ] {
            assert!(text.contains(words), "{words:?} in {text}");
        }
        assert!(!text.contains("  ") && !text.contains('\n'), "{text:?}");
        assert_eq!(missing(AutoCreate::On, false).class(), Class::Transient);
        assert_eq!(
            missing(AutoCreate::Unknown("denied".into()), false).class(),
            Class::Transient
        );
        let own = missing(AutoCreate::Off("x".into()), true);
        assert_eq!(own.class(), Class::Transient, "a restart creates it again");
        assert!(own.to_string().contains("creates it again"), "{own}");
    }

    #[test]
    fn failures_of_waiting_records_may_come_from_a_missing_topic() {
        let delivery =
            |code| SinkError::on_delivery(&KafkaError::MessageProduction(code), "e".into(), "t");
        for suspect in [
            SinkError::Stalled {
                records: 1,
                quiet: std::time::Duration::from_secs(4),
            },
            delivery(RDKafkaErrorCode::UnknownTopicOrPartition),
            delivery(RDKafkaErrorCode::UnknownPartition),
            // Exactly-once: the transaction failed adding a deleted topic's partitions.
            delivery(RDKafkaErrorCode::PurgeQueue),
        ] {
            assert!(suspect.may_be_missing_topic(), "{suspect}");
        }
        for other in [
            delivery(RDKafkaErrorCode::MessageSizeTooLarge),
            delivery(RDKafkaErrorCode::TopicAuthorizationFailed),
            SinkError::Fenced {
                what: "producing",
                detail: "x".into(),
            },
        ] {
            assert!(!other.may_be_missing_topic(), "{other}");
        }
    }

    #[test]
    fn a_new_producer_cures_lost_transaction_state_not_refused_permissions() {
        let fatal = |code| SinkError::Fatal {
            code,
            reason: "test".into(),
        };
        assert_eq!(
            fatal(RDKafkaErrorCode::InvalidTransactionalState).class(),
            Class::Transient,
            "a transaction the coordinator lost in a broker crash"
        );
        assert_eq!(
            fatal(RDKafkaErrorCode::UnknownProducerId).class(),
            Class::Transient
        );
        let refused = fatal(RDKafkaErrorCode::TransactionalIdAuthorizationFailed);
        assert_eq!(refused.class(), Class::Definite);
        assert!(refused.to_string().contains("check the ACLs"), "{refused}");
    }
}
