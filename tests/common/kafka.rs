//! Reading what the relay produced, with a real Kafka consumer.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Headers, Message};
use rdkafka::{Offset, TopicPartitionList};

/// A record as a consumer sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct Consumed {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    pub headers: Vec<(String, Vec<u8>)>,
    /// The headers exactly, a header without value as `None`.
    pub raw_headers: Vec<(String, Option<Vec<u8>>)>,
    pub timestamp_ms: Option<i64>,
}

impl Consumed {
    /// The value of header `name`, as UTF-8.
    pub fn header(&self, name: &str) -> Option<String> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| String::from_utf8_lossy(v).into_owned())
    }

    /// The key as UTF-8.
    pub fn key_str(&self) -> Option<String> {
        self.key
            .as_ref()
            .map(|k| String::from_utf8_lossy(k).into_owned())
    }

    /// The value as UTF-8.
    pub fn value_str(&self) -> Option<String> {
        self.value
            .as_ref()
            .map(|k| String::from_utf8_lossy(k).into_owned())
    }
}

/// A `read_committed` consumer that is assigned partitions (never joins a consumer group, so
/// a broker restart costs it no rebalance).
pub fn consumer() -> BaseConsumer {
    ClientConfig::new()
        .set("bootstrap.servers", super::kafka_bootstrap())
        .set("group.id", super::unique("test_reader"))
        .set("enable.auto.commit", "false")
        .set("isolation.level", "read_committed")
        .set("enable.partition.eof", "false")
        .create()
        .expect("kafka consumer")
}

/// Assigns `consumer` every partition, from the beginning, of the topics of `assigned` not
/// assigned yet (`false`) that exist now, and marks them assigned.
pub fn assign_from_beginning(consumer: &BaseConsumer, assigned: &mut HashMap<String, bool>) {
    if assigned.values().all(|v| *v) {
        return;
    }
    let mut tpl = TopicPartitionList::new();
    for (topic, done) in assigned.iter_mut().filter(|(_, d)| !**d) {
        if let Ok(md) = consumer.fetch_metadata(Some(topic), Duration::from_secs(2)) {
            if let Some(t) = md.topics().first() {
                if t.error().is_none() && !t.partitions().is_empty() {
                    for p in t.partitions() {
                        tpl.add_partition_offset(topic, p.id(), Offset::Beginning)
                            .unwrap();
                    }
                    *done = true;
                }
            }
        }
    }
    if tpl.count() > 0 {
        // Incremental: partitions already being read keep their positions.
        consumer.incremental_assign(&tpl).expect("assign");
    }
}

/// Reads every record of `topics` from the beginning until `expected` records have arrived
/// and then `settle` passes with nothing new, or `timeout` runs out. Topics that do not
/// exist yet are waited for.
pub fn read_topics(
    topics: &[String],
    expected: usize,
    timeout: Duration,
    settle: Duration,
) -> Vec<Consumed> {
    let consumer = consumer();
    let deadline = Instant::now() + timeout;
    let mut assigned: HashMap<String, bool> = topics.iter().map(|t| (t.clone(), false)).collect();
    let mut out = Vec::new();
    let mut last_new = Instant::now();
    loop {
        assign_from_beginning(&consumer, &mut assigned);
        if let Some(msg) = consumer.poll(Duration::from_millis(200)) {
            let msg = msg.expect("kafka consume");
            let raw_headers: Vec<(String, Option<Vec<u8>>)> = msg
                .headers()
                .map(|h| {
                    h.iter()
                        .map(|h| (h.key.to_string(), h.value.map(|v| v.to_vec())))
                        .collect()
                })
                .unwrap_or_default();
            let headers = raw_headers
                .iter()
                .map(|(k, v)| (k.clone(), v.clone().unwrap_or_default()))
                .collect();
            out.push(Consumed {
                topic: msg.topic().to_string(),
                partition: msg.partition(),
                offset: msg.offset(),
                key: msg.key().map(|k| k.to_vec()),
                value: msg.payload().map(|v| v.to_vec()),
                headers,
                raw_headers,
                timestamp_ms: msg.timestamp().to_millis(),
            });
            last_new = Instant::now();
            continue;
        }
        if out.len() >= expected && last_new.elapsed() >= settle {
            break;
        }
        if Instant::now() >= deadline {
            break;
        }
    }
    out
}

/// Like [`read_topics`] with a 60 s timeout and a 2 s settle time (to catch extras).
pub fn read_expecting(topics: &[String], expected: usize) -> Vec<Consumed> {
    read_topics(
        topics,
        expected,
        Duration::from_secs(90),
        Duration::from_secs(2),
    )
}

/// An admin client of the test broker.
fn admin() -> rdkafka::admin::AdminClient<rdkafka::client::DefaultClientContext> {
    ClientConfig::new()
        .set("bootstrap.servers", super::kafka_bootstrap())
        .create()
        .expect("kafka admin client")
}

/// Whether the broker knows `topic` (a metadata request that never creates it).
pub fn topic_exists(topic: &str) -> bool {
    partition_count(topic) > 0
}

/// The number of partitions the broker lists for `topic`, 0 when it does not know it (a
/// metadata request that never creates it).
pub fn partition_count(topic: &str) -> usize {
    let probe: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", super::kafka_bootstrap())
        .set("allow.auto.create.topics", "false")
        .create()
        .expect("kafka consumer");
    let md = probe
        .fetch_metadata(Some(topic), Duration::from_secs(5))
        .expect("metadata");
    md.topics()
        .iter()
        .find(|t| t.name() == topic && t.error().is_none())
        .map_or(0, |t| t.partitions().len())
}

/// Creates `topic` with `partitions` partitions; waits until the broker lists it.
pub async fn create_topic(topic: &str, partitions: i32) {
    use rdkafka::admin::{AdminOptions, NewTopic, TopicReplication};
    let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)));
    let created = admin()
        .create_topics(
            &[NewTopic::new(topic, partitions, TopicReplication::Fixed(1))],
            &opts,
        )
        .await
        .expect("create_topics");
    assert!(created.iter().all(|r| r.is_ok()), "{created:?}");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !topic_exists(topic) {
        assert!(
            Instant::now() < deadline,
            "topic {topic} not listed after creation"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Deletes `topic`; waits until the broker no longer lists it.
pub async fn delete_topic(topic: &str) {
    use rdkafka::admin::AdminOptions;
    let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)));
    let deleted = admin()
        .delete_topics(&[topic], &opts)
        .await
        .expect("delete_topics");
    assert!(deleted.iter().all(|r| r.is_ok()), "{deleted:?}");
    let deadline = Instant::now() + Duration::from_secs(30);
    while topic_exists(topic) {
        assert!(
            Instant::now() < deadline,
            "topic {topic} still listed after deletion"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Topic config `name` of `topic` as the broker describes it (`None` when not listed).
pub async fn topic_config(topic: &str, name: &str) -> Option<String> {
    use rdkafka::admin::{AdminOptions, ResourceSpecifier};
    let described = admin()
        .describe_configs([&ResourceSpecifier::Topic(topic)], &AdminOptions::new())
        .await
        .expect("describe_configs");
    described
        .into_iter()
        .flatten()
        .flat_map(|r| r.entries)
        .find(|e| e.name == name)
        .and_then(|e| e.value)
}
