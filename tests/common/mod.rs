//! Test harness shared by the integration suites: service settings, unique names, the
//! outboxd binary as a child process, and a Kafka reader.
//!
//! Services are the real ones started by `scripts/services.sh up`; their settings come from
//! the same `OUTBOXD_TEST_*` variables that script prints, with its defaults.

#![allow(dead_code)]

pub mod acl;
pub mod connect;
pub mod edges;
pub mod faults;
pub mod group;
pub mod kafka;
pub mod mariadb;
pub mod nats;
pub mod oauth;
pub mod postgres;
pub mod relay;
pub mod suite;
pub mod tls;

use std::sync::atomic::{AtomicU32, Ordering};

/// Kafka bootstrap servers of the test broker.
pub fn kafka_bootstrap() -> String {
    std::env::var("OUTBOXD_KAFKA_BOOTSTRAP").unwrap_or_else(|_| "127.0.0.1:39092".into())
}

/// Runs `cleanup` to the end on a thread of its own with its own runtime, for `Drop`
/// implementations (which may run inside a runtime, where blocking on it would panic).
pub fn run_to_end<F>(cleanup: F)
where
    F: std::future::Future<Output = ()> + Send + 'static,
{
    let worker = std::thread::spawn(move || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime for cleanup")
            .block_on(cleanup)
    });
    let _ = worker.join();
}

/// A name unique to this test process and call: `<prefix>_<pid>_<n>`, lower-case, safe as a
/// database, table, slot or topic name.
pub fn unique(prefix: &str) -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    let salt: u32 = rand::random::<u32>() % 10_000;
    format!("{prefix}_{}_{n}_{salt}", std::process::id()).to_lowercase()
}

/// A replica server id unique to this test: two replicas with one server_id would
/// disconnect each other.
pub fn unique_server_id() -> u32 {
    static N: AtomicU32 = AtomicU32::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    1_000_000
        + (std::process::id() % 100_000) * 100
        + n % 100
        + rand::random::<u32>() % 7 * 10_000_000
}

/// One outbox event as a test writes it.
#[derive(Debug, Clone, PartialEq)]
pub struct OutboxEvent {
    /// Event id (a UUID string).
    pub id: String,
    /// Routes the event to `<prefix>.<aggregate_type>`.
    pub aggregate_type: String,
    /// Kafka key.
    pub aggregate_id: String,
    /// Goes to the `eventType` header in the tests' connector config.
    pub event_type: String,
    /// JSON text or NULL.
    pub payload: Option<String>,
}

impl OutboxEvent {
    /// An event with a fresh random id.
    pub fn new(
        aggregate_type: &str,
        aggregate_id: &str,
        event_type: &str,
        payload: Option<&str>,
    ) -> Self {
        Self {
            id: new_uuid(),
            aggregate_type: aggregate_type.into(),
            aggregate_id: aggregate_id.into(),
            event_type: event_type.into(),
            payload: payload.map(str::to_string),
        }
    }
}

/// A random v4-shaped UUID string.
pub fn new_uuid() -> String {
    let b: [u8; 16] = rand::random();
    format!(
        "{:08x}-{:04x}-4{:03x}-a{:03x}-{:012x}",
        u32::from_be_bytes([b[0], b[1], b[2], b[3]]),
        u16::from_be_bytes([b[4], b[5]]),
        u16::from_be_bytes([b[6], b[7]]) & 0x0fff,
        u16::from_be_bytes([b[8], b[9]]) & 0x0fff,
        u64::from_be_bytes([0, 0, b[10], b[11], b[12], b[13], b[14], b[15]])
    )
}

/// Kafka's Java `Utils.murmur2` (the hash of the default partitioner and of librdkafka's
/// `murmur2_random` for keyed records).
pub fn java_murmur2(data: &[u8]) -> i32 {
    let seed: u32 = 0x9747_b28c;
    let m: u32 = 0x5bd1_e995;
    let r = 24;
    let len = data.len();
    let mut h: u32 = seed ^ (len as u32);
    let chunks = len / 4;
    for i in 0..chunks {
        let mut k = u32::from_le_bytes([
            data[4 * i],
            data[4 * i + 1],
            data[4 * i + 2],
            data[4 * i + 3],
        ]);
        k = k.wrapping_mul(m);
        k ^= k >> r;
        k = k.wrapping_mul(m);
        h = h.wrapping_mul(m);
        h ^= k;
    }
    let tail = &data[chunks * 4..];
    if tail.len() >= 3 {
        h ^= u32::from(tail[2]) << 16;
    }
    if tail.len() >= 2 {
        h ^= u32::from(tail[1]) << 8;
    }
    if !tail.is_empty() {
        h ^= u32::from(tail[0]);
        h = h.wrapping_mul(m);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(m);
    h ^= h >> 15;
    h as i32
}

/// The partition the Java producer's default partitioner picks for `key` among `partitions`.
pub fn java_partition(key: &[u8], partitions: i32) -> i32 {
    (java_murmur2(key) & 0x7fff_ffff) % partitions
}

#[cfg(test)]
mod murmur_tests {
    /// Vectors from Kafka's own UtilsTest.
    #[test]
    fn matches_kafka_vectors() {
        assert_eq!(super::java_murmur2(b"21"), -973_932_308);
        assert_eq!(super::java_murmur2(b"foobar"), -790_332_482);
        assert_eq!(
            super::java_murmur2(b"a-little-bit-long-string"),
            -985_981_536
        );
        assert_eq!(
            super::java_murmur2(b"a-little-bit-longer-string"),
            -1_486_304_829
        );
        assert_eq!(
            super::java_murmur2(b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8"),
            -58_897_971
        );
        assert_eq!(super::java_murmur2(b"abc"), 479_470_107);
    }
}
