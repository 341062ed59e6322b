//! Where Kafka Connect keeps a connector's offsets, and its REST API: the worker properties
//! file's storage settings, the distributed worker's offsets topic, the standalone worker's
//! offsets file, and `GET`/`PATCH /connectors/<name>/offsets` (KIP-875).
//!
//! - Offsets topic (`offset.storage.topic`, distributed workers; 25 partitions by default):
//!   compacted, key and value as [`super::offsets`] describes; a worker reads it from the
//!   beginning and keeps the last value of each key (a null value removes the key). Read
//!   here `read_committed` (a worker with `exactly.once.source.support` writes offsets in
//!   transactions; others write plain records, which that sees too). Written to the
//!   partition the Java producer's default partitioner picks for the key, the only one a
//!   worker looks at for it.
//! - Offsets file (`offset.storage.file.filename`, standalone workers):
//!   [`super::java_serial`]. Written atomically (a temporary file, fsync, rename); a running
//!   standalone worker rewrites the whole file from memory at every flush, so it must be
//!   stopped first.
//! - REST (`listeners`, `rest.advertised.*`): `GET /connectors/<name>/status` (is it
//!   running?), `GET /connectors/<name>/offsets` and `PATCH /connectors/<name>/offsets`
//!   (`{"offsets":[{"partition":{..},"offset":{..}}]}`; the connector must be stopped first:
//!   `PUT /connectors/<name>/stop`).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
use rdkafka::{Offset, TopicPartitionList};

use super::java_serial;
use super::offsets::OffsetKey;
use super::CutoverError;
use crate::config::KafkaConfig;
use crate::sink::client;

/// How long one Kafka round trip may take.
const KAFKA_TIMEOUT: Duration = Duration::from_secs(30);

/// What a Kafka Connect worker properties file says about offsets and its REST API.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WorkerFile {
    /// The file.
    pub path: PathBuf,
    /// `offset.storage.topic` (distributed workers).
    pub offsets_topic: Option<String>,
    /// `offset.storage.file.filename` (standalone workers).
    pub offsets_file: Option<PathBuf>,
    /// `group.id` (distributed workers).
    pub group_id: Option<String>,
    /// The worker's REST API: `rest.advertised.*`, else the first `http://` of `listeners`
    /// (the scheme in any case, as Kafka Connect reads it; a wildcard host read as
    /// 127.0.0.1), else `rest.host.name` / `rest.port`, else Kafka Connect's default
    /// listener `http://:8083` (`None` only when the listeners are all `https://`).
    pub rest_url: Option<String>,
}

impl WorkerFile {
    /// Reads `path` (values through Kafka Connect's config providers).
    ///
    /// Errors when it cannot be read or is not a properties file.
    pub fn read(path: &Path) -> Result<Self, CutoverError> {
        let env = |k: &str| std::env::var(k).ok();
        let keys = crate::config::kafka::worker_properties(path, &env).map_err(|(k, m)| {
            CutoverError::refused(format!("worker file {}: {k}: {m}", path.display()))
        })?;
        Ok(Self::from_keys(path, &keys))
    }

    fn from_keys(path: &Path, keys: &BTreeMap<String, String>) -> Self {
        let get = |k: &str| {
            keys.get(k)
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty())
        };
        let rest_url = match (
            get("rest.advertised.host.name"),
            get("rest.advertised.port"),
            get("rest.advertised.listener"),
        ) {
            (Some(h), Some(p), l) if l.as_deref().is_none_or(|l| l == "http") => {
                Some(format!("http://{h}:{p}"))
            }
            _ => match get("listeners") {
                Some(ls) => ls.split(',').map(str::trim).find_map(|l| {
                    let (scheme, rest) = l.split_once("://")?;
                    scheme.eq_ignore_ascii_case("http").then(|| {
                        let rest = rest
                            .strip_prefix("0.0.0.0:")
                            .or_else(|| rest.strip_prefix(':'))
                            .map_or_else(|| rest.to_string(), |port| format!("127.0.0.1:{port}"));
                        format!("http://{rest}")
                    })
                }),
                None => Some(match get("rest.port") {
                    Some(p) => format!(
                        "http://{}:{p}",
                        get("rest.host.name").unwrap_or_else(|| "127.0.0.1".into())
                    ),
                    // Kafka Connect's default `listeners`: http://:8083.
                    None => "http://127.0.0.1:8083".into(),
                }),
            },
        };
        Self {
            path: path.to_path_buf(),
            offsets_topic: get("offset.storage.topic"),
            offsets_file: get("offset.storage.file.filename").map(PathBuf::from),
            group_id: get("group.id"),
            rest_url,
        }
    }
}

/// A connector's offsets as found where Kafka Connect keeps them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lookup {
    /// The value stored under the key asked for (`None`: no such key, or its last value is a
    /// tombstone: the offsets were reset).
    pub value: Option<Vec<u8>>,
    /// Whether the key was present with a null value (offsets reset through the REST API).
    pub reset: bool,
    /// Where it was found (for the report): `offsets topic X, partition 3, offset 17`.
    pub at: String,
    /// The other keys present (connector and partition), to name in an error when the
    /// key asked for is not there.
    pub others: Vec<OffsetKey>,
    /// Records whose key is the one asked for written with other bytes (spaces, another
    /// key order: hand-written), and where: not used, as Kafka Connect matches keys byte
    /// for byte (its offset stores are maps of the raw key bytes).
    pub written_otherwise: Vec<String>,
}

impl Lookup {
    fn empty(at: String) -> Self {
        Self {
            value: None,
            reset: false,
            at,
            others: Vec::new(),
            written_otherwise: Vec::new(),
        }
    }

    /// Notes the key `key` with `value` (in storage order: later ones win). Only the exact
    /// bytes Kafka Connect writes for `want` are its key, as for Connect.
    fn see(&mut self, want: &OffsetKey, key: &[u8], value: Option<&[u8]>, at: String) {
        if key == want.to_bytes().as_slice() {
            self.value = value.map(<[u8]>::to_vec);
            self.reset = value.is_none();
            self.at = at;
            return;
        }
        match OffsetKey::parse(key) {
            Ok(k) if k == *want => {
                if self.written_otherwise.len() < 10 {
                    self.written_otherwise
                        .push(format!("{} ({at})", String::from_utf8_lossy(key)));
                }
            }
            Ok(k) => {
                if !self.others.contains(&k) && self.others.len() < 50 {
                    self.others.push(k);
                }
            }
            // Kafka Connect also keeps other things in some offsets topics: not ours.
            Err(_) => {}
        }
    }
}

/// Reads the offsets topic `topic` to its end and returns what it holds for `want`.
///
/// Errors: transient when Kafka does not answer; definite when the topic does not exist.
pub fn read_offsets_topic(
    kafka: &KafkaConfig,
    topic: &str,
    want: &OffsetKey,
) -> Result<Lookup, CutoverError> {
    let kafka_err = |what: &str, e: rdkafka::error::KafkaError| {
        CutoverError::unavailable(format!("{what} (offsets topic {topic})"), e.to_string())
    };
    let consumer: BaseConsumer = client::config(kafka)
        .set("group.id", "outboxd-import-debezium")
        .set("enable.auto.commit", "false")
        .set("isolation.level", "read_committed")
        .create()
        .map_err(|e| kafka_err("creating a Kafka consumer", e))?;
    let md = consumer
        .fetch_metadata(Some(topic), KAFKA_TIMEOUT)
        .map_err(|e| kafka_err("reading topic metadata", e))?;
    let partitions: Vec<i32> = md
        .topics()
        .iter()
        .filter(|t| t.error().is_none())
        .flat_map(|t| t.partitions().iter().map(|p| p.id()))
        .collect();
    if partitions.is_empty() {
        return Err(CutoverError::refused(format!(
            "the offsets topic {topic} does not exist on Kafka at {} (check \
             offset.storage.topic in the worker file, and that it is the cluster Kafka \
             Connect uses)",
            kafka.bootstrap_servers
        )));
    }
    let mut lookup = Lookup::empty(format!("offsets topic {topic}"));
    let mut tpl = TopicPartitionList::new();
    let mut ends = BTreeMap::new();
    for p in partitions {
        let (low, high) = client::watermarks(&consumer, topic, p, KAFKA_TIMEOUT)
            .map_err(|e| kafka_err("reading offsets", e))?;
        if high > low {
            tpl.add_partition_offset(topic, p, Offset::Beginning)
                .map_err(|e| kafka_err("assigning", e))?;
            ends.insert(p, high);
        }
    }
    if ends.is_empty() {
        return Ok(lookup);
    }
    consumer
        .assign(&tpl)
        .map_err(|e| kafka_err("assigning", e))?;
    let deadline = Instant::now() + KAFKA_TIMEOUT * 4;
    while !ends.is_empty() {
        if Instant::now() > deadline {
            return Err(CutoverError::unavailable(
                format!("reading offsets topic {topic} to its end"),
                "timed out (an open transaction on it?)".into(),
            ));
        }
        if let Ok(pos) = consumer.position() {
            ends.retain(|p, high| {
                !matches!(pos.find_partition(topic, *p).map(|e| e.offset()),
                    Some(Offset::Offset(o)) if o >= *high)
            });
        }
        let Some(msg) = consumer.poll(Duration::from_millis(200)) else {
            continue;
        };
        let msg = msg.map_err(|e| kafka_err("reading", e))?;
        let Some(key) = msg.key() else { continue };
        let at = format!(
            "offsets topic {topic}, partition {}, offset {}",
            msg.partition(),
            msg.offset()
        );
        lookup.see(want, key, msg.payload(), at);
    }
    Ok(lookup)
}

/// Writes `value` for `key` to the offsets topic `topic`, to the partition Kafka Connect
/// reads it from; returns that partition and the record's offset.
///
/// Errors: transient when Kafka does not acknowledge; definite when the topic does not exist.
pub async fn write_offsets_topic(
    kafka: &KafkaConfig,
    topic: &str,
    key: &OffsetKey,
    value: &[u8],
) -> Result<(i32, i64), CutoverError> {
    let kafka_err = |what: &str, e: rdkafka::error::KafkaError| {
        CutoverError::unavailable(format!("{what} (offsets topic {topic})"), e.to_string())
    };
    let producer: FutureProducer = client::config(kafka)
        .set("enable.idempotence", "true")
        .set("acks", "all")
        .create()
        .map_err(|e| kafka_err("creating a Kafka producer", e))?;
    let md = producer
        .client()
        .fetch_metadata(Some(topic), KAFKA_TIMEOUT)
        .map_err(|e| kafka_err("reading topic metadata", e))?;
    let partitions = md
        .topics()
        .iter()
        .filter(|t| t.error().is_none())
        .map(|t| t.partitions().len())
        .sum::<usize>();
    if partitions == 0 {
        return Err(CutoverError::refused(format!(
            "the offsets topic {topic} does not exist (start the Kafka Connect worker once, \
             it creates it; or check offset.storage.topic)"
        )));
    }
    let partition = key.partition(partitions as i32);
    let key_bytes = key.to_bytes();
    let record = FutureRecord::to(topic)
        .key(&key_bytes)
        .payload(value)
        .partition(partition);
    let delivered = producer
        .send(record, KAFKA_TIMEOUT)
        .await
        .map_err(|(e, _)| kafka_err("writing the offset", e))?;
    Ok((delivered.partition, delivered.offset))
}

/// Reads a standalone worker's offsets file and returns what it holds for `want`.
///
/// Errors (definite) when the file cannot be read or is not an offsets file.
pub fn read_offsets_file(path: &Path, want: &OffsetKey) -> Result<Lookup, CutoverError> {
    let bytes = std::fs::read(path).map_err(|e| {
        CutoverError::refused(format!(
            "cannot read the offsets file {}: {e} (offset.storage.file.filename of the \
             standalone worker)",
            path.display()
        ))
    })?;
    let entries = java_serial::parse(&bytes).map_err(|e| {
        CutoverError::refused(format!(
            "{} is not a Kafka Connect offsets file: {e}",
            path.display()
        ))
    })?;
    let mut lookup = Lookup::empty(format!("offsets file {}", path.display()));
    for (k, v) in &entries {
        if let Some(k) = k {
            lookup.see(
                want,
                k,
                v.as_deref(),
                format!("offsets file {}", path.display()),
            );
        }
    }
    Ok(lookup)
}

/// Sets `key` to `value` in a standalone worker's offsets file (created when missing; the
/// other connectors' entries kept), atomically: a temporary file beside it, fsync, rename,
/// fsync of the directory.
///
/// Errors (definite) when the file exists but is not an offsets file, or cannot be written.
pub fn write_offsets_file(path: &Path, key: &OffsetKey, value: &[u8]) -> Result<(), CutoverError> {
    let io = |what: &str, e: std::io::Error| {
        CutoverError::refused(format!("{what} {}: {e}", path.display()))
    };
    let mut entries = match std::fs::read(path) {
        Ok(bytes) => java_serial::parse(&bytes).map_err(|e| {
            CutoverError::refused(format!(
                "{} is not a Kafka Connect offsets file ({e}); it is left as it is",
                path.display()
            ))
        })?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(io("cannot read", e)),
    };
    let key_bytes = key.to_bytes();
    entries.retain(|(k, _)| {
        k.as_deref()
            .map(|k| OffsetKey::parse(k).ok().as_ref() != Some(key) && k != key_bytes)
            .unwrap_or(true)
    });
    entries.push((Some(key_bytes), Some(value.to_vec())));
    let bytes = java_serial::write(&entries);
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let tmp = dir.join(format!(
        ".{}.outboxd-tmp",
        path.file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("offsets")
    ));
    {
        let mut f = std::fs::File::create(&tmp).map_err(|e| io("cannot write beside", e))?;
        f.write_all(&bytes)
            .map_err(|e| io("cannot write beside", e))?;
        f.sync_all().map_err(|e| io("cannot write beside", e))?;
    }
    std::fs::rename(&tmp, path).map_err(|e| io("cannot replace", e))?;
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

/// A connector's state as Kafka Connect's REST API reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectorStatus {
    /// The connector's state: `RUNNING`, `PAUSED`, `STOPPED`, `FAILED`, `UNASSIGNED`.
    pub state: String,
    /// Each task's state.
    pub tasks: Vec<String>,
    /// The worker running it.
    pub worker_id: Option<String>,
}

impl ConnectorStatus {
    /// Whether the connector or one of its tasks is running or paused (a paused task keeps
    /// its binlog / replication connection).
    pub fn running(&self) -> bool {
        let busy = |s: &str| s == "RUNNING" || s == "PAUSED" || s == "RESTARTING";
        busy(&self.state) || self.tasks.iter().any(|t| busy(t))
    }
}

/// Kafka Connect's REST API at a base URL (`http://[user:password@]host:port`).
#[derive(Clone)]
pub struct ConnectRest {
    /// The URL as shown: its password replaced by `***`.
    base: String,
    host: String,
    port: u16,
    prefix: String,
    /// `Basic ...`: the URL's `user:password`, sent as HTTP Basic credentials.
    authorization: Option<String>,
}

impl std::fmt::Debug for ConnectRest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnectRest")
            .field("url", &self.base)
            .field("credentials", &self.authorization.is_some())
            .finish()
    }
}

/// Whether Kafka Connect runs a connector, as far as its REST API tells.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Liveness {
    /// Connect knows the connector: its status.
    Known(ConnectorStatus),
    /// Connect answered its own 404 (`{"error_code":404,"message":"Connector ... not
    /// found"}`): it does not run the connector.
    Unknown,
    /// Nothing listens at the URL's port (connection refused): no worker runs there.
    NotListening(String),
}

/// A REST call that got no answer: whether the connection was refused (nothing listens:
/// no worker there) or something else failed (a name that does not resolve, no answer).
struct NoAnswer {
    connection_refused: bool,
    detail: String,
}

/// `url` with the password of its `user:password@` part replaced by `***` (for messages).
pub fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let end = rest.find('/').unwrap_or(rest.len());
    let (authority, path) = rest.split_at(end);
    match authority.rsplit_once('@') {
        Some((userinfo, hostport)) => {
            let user = userinfo.split_once(':').map_or(userinfo, |(u, _)| u);
            let hidden = if userinfo.contains(':') { ":***" } else { "" };
            format!("{scheme}://{user}{hidden}@{hostport}{path}")
        }
        None => url.to_string(),
    }
}

/// Percent-decodes a URL's user or password (RFC 3986 `%XX`; other bytes as they are).
fn percent_decode(s: &str) -> String {
    percent_encoding::percent_decode_str(s)
        .decode_utf8_lossy()
        .into_owned()
}

/// What a REST call answered: the status code and the body.
type Answer = (u16, Vec<u8>);

impl ConnectRest {
    /// The API at `url` (`http://host:port[/prefix]`).
    ///
    /// Errors for another scheme (`https` is not supported here: use the offsets topic or
    /// file) or a URL without host.
    pub fn new(url: &str) -> Result<Self, CutoverError> {
        let given = url.trim().trim_end_matches('/').to_string();
        let base = redact_url(&given);
        let Some(rest) = given.strip_prefix("http://") else {
            return Err(CutoverError::refused(format!(
                "Kafka Connect REST URL {base:?}: only http:// URLs are supported (for an \
                 https worker, read the offsets topic or file instead)"
            )));
        };
        let (authority, prefix) = match rest.split_once('/') {
            Some((a, p)) => (a, format!("/{p}")),
            None => (rest, String::new()),
        };
        let (authorization, authority) = match authority.rsplit_once('@') {
            Some((userinfo, hostport)) => {
                use base64::Engine;
                let (user, password) = userinfo.split_once(':').unwrap_or((userinfo, ""));
                let pair = format!("{}:{}", percent_decode(user), percent_decode(password));
                (
                    Some(format!(
                        "Basic {}",
                        base64::engine::general_purpose::STANDARD.encode(pair)
                    )),
                    hostport,
                )
            }
            None => (None, authority),
        };
        let (host, port) = match authority.rsplit_once(':') {
            Some((h, p)) => (
                h.trim_matches(['[', ']']).to_string(),
                p.parse().map_err(|_| {
                    CutoverError::refused(format!("Kafka Connect REST URL {base:?}: bad port"))
                })?,
            ),
            None => (authority.to_string(), 80),
        };
        if host.is_empty() {
            return Err(CutoverError::refused(format!(
                "Kafka Connect REST URL {base:?} names no host"
            )));
        }
        Ok(Self {
            base,
            host,
            port,
            prefix,
            authorization,
        })
    }

    /// The base URL.
    pub fn url(&self) -> &str {
        &self.base
    }

    async fn call(
        &self,
        method: &str,
        path: &str,
        body: Option<&[u8]>,
    ) -> Result<Answer, CutoverError> {
        self.ask(method, path, body).await.map_err(|e| {
            CutoverError::unavailable(format!("Kafka Connect at {}", self.base), e.detail)
        })
    }

    async fn ask(&self, method: &str, path: &str, body: Option<&[u8]>) -> Result<Answer, NoAnswer> {
        use http_body_util::{BodyExt, Full};
        let unavailable = |detail: String| NoAnswer {
            connection_refused: false,
            detail,
        };
        let ask = async {
            let stream = tokio::net::TcpStream::connect((self.host.as_str(), self.port))
                .await
                .map_err(|e| NoAnswer {
                    connection_refused: e.kind() == std::io::ErrorKind::ConnectionRefused,
                    detail: crate::error::io_cause(&e),
                })?;
            let (mut sender, conn) =
                hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
                    .await
                    .map_err(|e| unavailable(e.to_string()))?;
            tokio::spawn(conn);
            let mut request = hyper::Request::builder()
                .method(method)
                .uri(format!("{}{path}", self.prefix))
                .header(hyper::header::HOST, format!("{}:{}", self.host, self.port))
                .header(hyper::header::CONTENT_TYPE, "application/json")
                .header(hyper::header::ACCEPT, "application/json");
            if let Some(a) = &self.authorization {
                request = request.header(hyper::header::AUTHORIZATION, a.as_str());
            }
            let request = request
                .body(Full::new(bytes::Bytes::from(
                    body.unwrap_or_default().to_vec(),
                )))
                .map_err(|e| unavailable(e.to_string()))?;
            let response = sender
                .send_request(request)
                .await
                .map_err(|e| unavailable(e.to_string()))?;
            let status = response.status().as_u16();
            let body = response
                .into_body()
                .collect()
                .await
                .map_err(|e| unavailable(e.to_string()))?
                .to_bytes();
            Ok((status, body.to_vec()))
        };
        tokio::time::timeout(Duration::from_secs(30), ask)
            .await
            .unwrap_or_else(|_| Err(unavailable("no answer within 30 s".into())))
    }

    /// `GET /connectors/<name>/status`: whether Connect runs the connector. Only two
    /// answers say it does not: Connect's own 404 for the connector, and a refused
    /// connection (nothing listens there).
    ///
    /// Errors (definite, saying what to do): any other failure — a host name that does not
    /// resolve, no answer, a 404 that is not Connect's, 401/403 (credentials), an answer
    /// that is not Connect's status — since then nobody can tell whether Debezium runs.
    pub async fn liveness(&self, name: &str) -> Result<Liveness, CutoverError> {
        let (code, body) = match self
            .ask("GET", &format!("/connectors/{}/status", encode(name)), None)
            .await
        {
            Ok(a) => a,
            Err(NoAnswer {
                connection_refused: true,
                detail,
            }) => return Ok(Liveness::NotListening(detail)),
            Err(NoAnswer { detail, .. }) => {
                return Err(CutoverError::refused(format!(
                    "Kafka Connect at {} cannot be asked whether it still runs connector \
                     {name} ({detail}), so it cannot be taken for stopped. Fix the URL \
                     (--connect-url, or `listeners` / `rest.advertised.*` in the worker \
                     file), or stop Debezium yourself and pass --debezium-stopped",
                    self.base
                )))
            }
        };
        if code == 404 {
            return if connect_not_found(&body) {
                Ok(Liveness::Unknown)
            } else {
                Err(CutoverError::refused(format!(
                    "{} answered 404 to GET /connectors/{name}/status, but not with Kafka \
                     Connect's error body (`{{\"error_code\":404,\"message\":\"Connector \
                     {name} not found\"}}`): {}. Is it Kafka Connect's REST API? Fix the URL \
                     (--connect-url), or stop Debezium yourself and pass --debezium-stopped",
                    self.base,
                    shown(&body)
                )))
            };
        }
        if code == 401 || code == 403 {
            let what = if self.authorization.is_some() {
                "refused the credentials of the URL"
            } else {
                "requires credentials"
            };
            return Err(CutoverError::refused(format!(
                "Kafka Connect at {} {what} ({code} to GET /connectors/{name}/status): give \
                 them in the URL, --connect-url http://USER:PASSWORD@HOST:PORT (sent as HTTP \
                 Basic; the password is never printed), or stop Debezium yourself and pass \
                 --debezium-stopped",
                self.base
            )));
        }
        self.status_of(code, &body).map(Liveness::Known)
    }

    fn status_of(&self, code: u16, body: &[u8]) -> Result<ConnectorStatus, CutoverError> {
        let v = self.json(code, body, "the connector's status")?;
        let state = |v: &serde_json::Value| {
            v.get("state")
                .and_then(|s| s.as_str())
                .unwrap_or("UNKNOWN")
                .to_string()
        };
        if v.get("connector").and_then(|c| c.get("state")).is_none() {
            return Err(CutoverError::refused(format!(
                "{} answered GET /connectors/.../status without a connector state: {}. Is it \
                 Kafka Connect's REST API?",
                self.base,
                shown(body)
            )));
        }
        Ok(ConnectorStatus {
            state: v.get("connector").map(state).unwrap_or_default(),
            tasks: v
                .get("tasks")
                .and_then(|t| t.as_array())
                .map(|ts| ts.iter().map(state).collect())
                .unwrap_or_default(),
            worker_id: v
                .get("connector")
                .and_then(|c| c.get("worker_id"))
                .and_then(|w| w.as_str())
                .map(str::to_string),
        })
    }

    /// `GET /connectors/<name>/offsets` (KIP-875): the offset stored for `key`'s partition.
    ///
    /// Errors: transient when nothing answers; definite when the worker does not know the
    /// connector or answers something else.
    pub async fn offsets(&self, key: &OffsetKey) -> Result<Lookup, CutoverError> {
        let name = &key.connector;
        let (code, body) = self
            .call(
                "GET",
                &format!("/connectors/{}/offsets", encode(name)),
                None,
            )
            .await?;
        if code == 404 {
            return Err(CutoverError::refused(format!(
                "Kafka Connect at {} has no connector named {name:?} (GET \
                 /connectors/{name}/offsets answered 404: check the connector's `name`)",
                self.base
            )));
        }
        let v = self.json(code, &body, "the connector's offsets")?;
        let mut lookup = Lookup::empty(format!(
            "Kafka Connect at {} (GET /connectors/{name}/offsets)",
            self.base
        ));
        let Some(list) = v.get("offsets").and_then(|o| o.as_array()) else {
            return Err(CutoverError::refused(format!(
                "Kafka Connect at {} answered GET /connectors/{name}/offsets without an \
                 `offsets` list (a worker before Kafka 3.6 lacks KIP-875: read the offsets \
                 topic or file instead)",
                self.base
            )));
        };
        for item in list {
            let (Some(serde_json::Value::Object(partition)), offset) =
                (item.get("partition"), item.get("offset"))
            else {
                continue;
            };
            let k = OffsetKey {
                connector: name.clone(),
                partition: partition.clone(),
            };
            let value = offset
                .filter(|o| !o.is_null())
                .map(|o| o.to_string().into_bytes());
            let at = lookup.at.clone();
            lookup.see(key, &k.to_bytes(), value.as_deref(), at);
        }
        Ok(lookup)
    }

    /// `PATCH /connectors/<name>/offsets` with `body` (KIP-875); the connector must be
    /// stopped. Returns Connect's message.
    ///
    /// Errors: transient when nothing answers; definite when Connect refuses (its message
    /// says why: e.g. the connector is not stopped).
    pub async fn patch_offsets(&self, name: &str, body: &[u8]) -> Result<String, CutoverError> {
        let (code, answer) = self
            .call(
                "PATCH",
                &format!("/connectors/{}/offsets", encode(name)),
                Some(body),
            )
            .await?;
        let text = String::from_utf8_lossy(&answer).into_owned();
        if !(200..300).contains(&code) {
            return Err(CutoverError::refused(format!(
                "Kafka Connect at {} refused PATCH /connectors/{name}/offsets ({code}): {text} \
                 (stop the connector first: PUT /connectors/{name}/stop)",
                self.base
            )));
        }
        Ok(text)
    }

    fn json(&self, code: u16, body: &[u8], what: &str) -> Result<serde_json::Value, CutoverError> {
        if !(200..300).contains(&code) {
            return Err(CutoverError::refused(format!(
                "Kafka Connect at {} answered {code} when asked for {what}: {}",
                self.base,
                String::from_utf8_lossy(body)
                    .chars()
                    .take(300)
                    .collect::<String>()
            )));
        }
        serde_json::from_slice(body).map_err(|e| {
            CutoverError::refused(format!(
                "{} did not answer JSON when asked for {what} ({e}): is it Kafka Connect?",
                self.base
            ))
        })
    }
}

/// Whether a 404 body is Kafka Connect's own for an unknown connector:
/// `{"error_code":404,"message":"Connector <name> not found"}`.
fn connect_not_found(body: &[u8]) -> bool {
    let Ok(v) = serde_json::from_slice::<serde_json::Value>(body) else {
        return false;
    };
    v.get("error_code").and_then(|c| c.as_u64()) == Some(404)
        && v.get("message")
            .and_then(|m| m.as_str())
            .is_some_and(|m| m.starts_with("Connector ") && m.ends_with(" not found"))
}

/// A body for a message: at most 300 characters, or `(empty)`.
fn shown(body: &[u8]) -> String {
    let text: String = String::from_utf8_lossy(body).chars().take(300).collect();
    if text.trim().is_empty() {
        "(empty body)".into()
    } else {
        text
    }
}

/// Percent-encodes a connector name for a URL path.
fn encode(name: &str) -> String {
    let mut out = String::new();
    for b in name.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn worker_file_storage_and_rest() {
        let w = WorkerFile::from_keys(
            Path::new("w.properties"),
            &keys(&[
                ("offset.storage.topic", "connect-offsets"),
                ("group.id", "connect-cluster"),
                ("listeners", "https://:8443, http://0.0.0.0:8083"),
            ]),
        );
        assert_eq!(w.offsets_topic.as_deref(), Some("connect-offsets"));
        assert_eq!(w.rest_url.as_deref(), Some("http://127.0.0.1:8083"));
        let s = WorkerFile::from_keys(
            Path::new("s.properties"),
            &keys(&[
                ("offset.storage.file.filename", "/tmp/connect.offsets"),
                ("rest.advertised.host.name", "connect1"),
                ("rest.advertised.port", "18083"),
            ]),
        );
        assert_eq!(s.offsets_file, Some(PathBuf::from("/tmp/connect.offsets")));
        assert_eq!(s.rest_url.as_deref(), Some("http://connect1:18083"));
        assert_eq!(
            WorkerFile::from_keys(Path::new("x"), &keys(&[("rest.port", "9")])).rest_url,
            Some("http://127.0.0.1:9".into())
        );
        let url = |listeners: &str| {
            WorkerFile::from_keys(Path::new("x"), &keys(&[("listeners", listeners)])).rest_url
        };
        // Kafka's stock worker files spell the scheme in capitals.
        assert_eq!(url("HTTP://:8083"), Some("http://127.0.0.1:8083".into()));
        assert_eq!(
            url("HTTP://localhost:18083"),
            Some("http://localhost:18083".into())
        );
        assert_eq!(url("https://:8443"), None, "only TLS listeners: not asked");
        // No listeners at all: Kafka Connect listens on its default, http://:8083.
        assert_eq!(
            WorkerFile::from_keys(Path::new("x"), &keys(&[("group.id", "g")])).rest_url,
            Some("http://127.0.0.1:8083".into())
        );
    }

    #[test]
    fn rest_urls() {
        let r = ConnectRest::new("http://connect:8083/").unwrap();
        assert_eq!(
            (r.host.as_str(), r.port, r.prefix.as_str()),
            ("connect", 8083, "")
        );
        let r = ConnectRest::new("http://h/api").unwrap();
        assert_eq!((r.port, r.prefix.as_str()), (80, "/api"));
        assert!(ConnectRest::new("https://h:8443").is_err());
        assert!(ConnectRest::new("http://:1").is_err());
        assert_eq!(encode("a b/c"), "a%20b%2Fc");
    }

    #[test]
    fn rest_url_credentials_are_basic_auth_and_never_shown() {
        let r = ConnectRest::new("http://admin:Super%40Secret42@127.0.0.1:28382/x").unwrap();
        assert_eq!((r.host.as_str(), r.port), ("127.0.0.1", 28382));
        assert_eq!(r.url(), "http://admin:***@127.0.0.1:28382/x");
        // base64("admin:Super@Secret42")
        assert_eq!(
            r.authorization.as_deref(),
            Some("Basic YWRtaW46U3VwZXJAU2VjcmV0NDI=")
        );
        assert!(!format!("{r:?}").contains("Secret42"));
        let e = ConnectRest::new("http://admin:Secret42@h:port").unwrap_err();
        assert!(!e.to_string().contains("Secret42"), "{e}");
        let e = ConnectRest::new("https://admin:Secret42@h:1").unwrap_err();
        assert!(!e.to_string().contains("Secret42"), "{e}");
        assert_eq!(redact_url("http://h:1"), "http://h:1");
        assert_eq!(redact_url("http://u@h:1"), "http://u@h:1");
    }

    /// A one-shot HTTP server answering `status` and `body`; returns its URL.
    async fn answer_once(status: &'static str, body: &'static str) -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = l.local_addr().unwrap().port();
        tokio::spawn(async move {
            let (mut c, _) = l.accept().await.unwrap();
            let mut buf = vec![0; 4096];
            let _ = c.read(&mut buf).await;
            let reply = format!(
                "HTTP/1.1 {status}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = c.write_all(reply.as_bytes()).await;
        });
        format!("http://127.0.0.1:{port}")
    }

    #[tokio::test]
    async fn liveness_fails_closed() {
        let live = |url: String| async move { ConnectRest::new(&url).unwrap().liveness("c").await };
        // Connect's own 404: the connector is unknown.
        let url = answer_once(
            "404 Not Found",
            r#"{"error_code":404,"message":"Connector c not found"}"#,
        )
        .await;
        assert_eq!(live(url).await.unwrap(), Liveness::Unknown);
        // Any other 404: refused.
        let url = answer_once("404 Not Found", "").await;
        let e = live(url).await.unwrap_err().to_string();
        assert!(
            e.contains("not with Kafka Connect's error body") && e.contains("--debezium-stopped"),
            "{e}"
        );
        // 401: say how to give credentials.
        let url = answer_once("401 Unauthorized", "{}").await;
        let e = live(url).await.unwrap_err().to_string();
        assert!(
            e.contains("requires credentials") && e.contains("USER:PASSWORD@"),
            "{e}"
        );
        // Running.
        let url = answer_once(
            "200 OK",
            r#"{"name":"c","connector":{"state":"RUNNING","worker_id":"w:8083"},"tasks":[{"id":0,"state":"RUNNING"}]}"#,
        )
        .await;
        assert!(matches!(live(url).await.unwrap(), Liveness::Known(s) if s.running()));
        // Nothing listens: no worker there.
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        assert!(matches!(
            live(format!("http://127.0.0.1:{port}")).await.unwrap(),
            Liveness::NotListening(_)
        ));
        // A name that does not resolve: refused, the password not shown.
        let e = live("http://admin:Secret42@no-such-host.invalid:8083".into())
            .await
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("cannot be taken for stopped") && !e.contains("Secret42"),
            "{e}"
        );
        assert!(e.contains("admin:***@"), "{e}");
    }

    #[test]
    fn lookups_take_the_last_value_and_name_the_others() {
        let want = OffsetKey::debezium("shop", "shop");
        let mut l = Lookup::empty("t".into());
        l.see(&want, &want.to_bytes(), Some(b"1"), "a".into());
        l.see(
            &want,
            &OffsetKey::debezium("shop", "other").to_bytes(),
            Some(b"x"),
            "b".into(),
        );
        l.see(&want, b"not json", Some(b"x"), "c".into());
        l.see(&want, &want.to_bytes(), Some(b"2"), "d".into());
        assert_eq!((l.value.as_deref(), l.at.as_str()), (Some(&b"2"[..]), "d"));
        assert_eq!(l.others, vec![OffsetKey::debezium("shop", "other")]);
        l.see(&want, &want.to_bytes(), None, "e".into());
        assert!(l.value.is_none() && l.reset);
        // The same key written with other bytes is not Connect's key: not used, noted.
        let mut l = Lookup::empty("t".into());
        l.see(&want, &want.to_bytes(), Some(b"534"), "p11".into());
        l.see(
            &want,
            br#"["shop", {"server": "shop"}]"#,
            Some(b"600"),
            "p15".into(),
        );
        assert_eq!(
            (l.value.as_deref(), l.at.as_str()),
            (Some(&b"534"[..]), "p11")
        );
        assert_eq!(l.written_otherwise.len(), 1);
        assert!(l.written_otherwise[0].contains("(p15)"));
    }

    #[test]
    fn offsets_file_write_keeps_other_connectors() {
        let dir = std::env::temp_dir().join(format!("outboxd-offsets-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("connect.offsets");
        let _ = std::fs::remove_file(&path);
        let a = OffsetKey::debezium("a", "a");
        let b = OffsetKey::debezium("b", "b");
        write_offsets_file(&path, &a, b"{\"pos\":1}").unwrap();
        write_offsets_file(&path, &b, b"{\"pos\":2}").unwrap();
        write_offsets_file(&path, &a, b"{\"pos\":3}").unwrap();
        let la = read_offsets_file(&path, &a).unwrap();
        assert_eq!(la.value.as_deref(), Some(&b"{\"pos\":3}"[..]));
        assert_eq!(la.others, vec![b.clone()]);
        std::fs::write(&path, b"hello").unwrap();
        let e = write_offsets_file(&path, &a, b"{}")
            .unwrap_err()
            .to_string();
        assert!(e.contains("not a Kafka Connect offsets file"), "{e}");
        assert_eq!(std::fs::read(&path).unwrap(), b"hello", "left as it was");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
