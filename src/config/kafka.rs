//! Kafka client settings shared by every client of the process: a Kafka Connect worker
//! properties file (`--kafka-config FILE`), the TOML top-level `[kafka]` section, and a
//! Debezium JSON's `producer.override.*` security keys.
//!
//! # Names
//!
//! Java client names are translated to librdkafka's (librdkafka `CONFIGURATION.md`; Kafka's
//! "Security" chapter for the Java side):
//!
//! | Java (Kafka Connect worker) | librdkafka |
//! |---|---|
//! | `security.protocol` (`PLAINTEXT`, `SSL`, `SASL_PLAINTEXT`, `SASL_SSL`) | the same, lower-cased |
//! | `sasl.mechanism` (`PLAIN`, `SCRAM-SHA-256`, `SCRAM-SHA-512`) | `sasl.mechanisms` |
//! | `sasl.jaas.config` (`PlainLoginModule` / `ScramLoginModule` with `username`, `password`) | `sasl.username`, `sasl.password` |
//! | `ssl.truststore.location` + `.type` `PKCS12` + `.password` | `ssl.ca.pem` (the CA certificates, read from the store) |
//! | `ssl.truststore.location` + `.type` `PEM` | `ssl.ca.location` |
//! | `ssl.truststore.certificates` (PEM text) | `ssl.ca.pem` |
//! | `ssl.keystore.location` + `.type` `PKCS12` + `.password` | `ssl.keystore.location`, `ssl.keystore.password` |
//! | `ssl.keystore.location` + `.type` `PEM`, `ssl.key.password` | `ssl.certificate.location`, `ssl.key.location`, `ssl.key.password` |
//! | `ssl.keystore.certificate.chain`, `ssl.keystore.key` (PEM text) | `ssl.certificate.pem`, `ssl.key.pem` |
//! | `ssl.endpoint.identification.algorithm` (`https`, empty) | the same (`https`, `none`) |
//!
//! A store without a `.type` is recognised from its content (PKCS12 or PEM); JKS — Java's
//! default `.type` before Java 9 — is refused with the keytool command that converts it.
//! librdkafka names pass through as they are. Java settings librdkafka has no equivalent for
//! (`ssl.enabled.protocols`, `ssl.provider`, `sasl.login.*`, ...) and keys of the worker file
//! that are not client settings at all (`group.id`, converters, `*.storage.*`, `plugin.path`,
//! `rest.*`, ...) are reported by name, not used (in TOML they are errors: the schema is
//! closed).
//!
//! # Scopes
//!
//! Top-level keys apply to every client the process makes (record producers, the checkpoint
//! store's admin client, consumers and producer, `check`, `status`) — unlike Kafka Connect,
//! whose worker settings do not reach connector producers, but as the design asks: one set
//! of client settings. `producer.`-prefixed keys apply to the record producers only, on top.
//! `consumer.` and `admin.` keys are reported, not used.
//!
//! # Secrets
//!
//! Values of keys that hold secrets (every `*password*`, `*secret*`, `sasl.jaas.config`, the
//! PEM private keys) are kept as [`Secret`]s and never appear in a message.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use super::{KeyError, Secret};
use crate::tls::{StoreKind, TrustAnchors};

/// librdkafka properties, with the values of secret ones kept as [`Secret`]s.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct ClientProperties {
    plain: BTreeMap<String, String>,
    secret: BTreeMap<String, Secret>,
}

impl fmt::Debug for ClientProperties {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{{{}}}", self.describe())
    }
}

/// Whether a property (Java or librdkafka name) holds a secret.
pub fn is_secret_key(key: &str) -> bool {
    let k = key.to_ascii_lowercase();
    k.contains("password")
        || k.contains("secret")
        || k.contains("jaas")
        || k == "ssl.key.pem"
        || k == "ssl_key"
        || k == "ssl.keystore.key"
        || k.contains("passphrase")
        || k.ends_with("private.key.pem")
        || k.ends_with("sasl.oauthbearer.config")
}

impl ClientProperties {
    /// Sets `key` to `value`; a secret key's value is kept as a [`Secret`].
    pub fn set(&mut self, key: &str, value: impl Into<String>) {
        let value = value.into();
        self.plain.remove(key);
        self.secret.remove(key);
        if is_secret_key(key) {
            self.secret.insert(key.to_string(), Secret::new(value));
        } else {
            self.plain.insert(key.to_string(), value);
        }
    }

    /// The value of a non-secret property.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.plain.get(key).map(String::as_str)
    }

    /// Whether `key` is set (secret or not).
    pub fn contains(&self, key: &str) -> bool {
        self.plain.contains_key(key) || self.secret.contains_key(key)
    }

    /// The value of a secret property, to read settings outboxd itself acts on (never to
    /// show it).
    pub(crate) fn get_secret(&self, key: &str) -> Option<&Secret> {
        self.secret.get(key)
    }

    /// The non-secret properties.
    pub fn plain(&self) -> &BTreeMap<String, String> {
        &self.plain
    }

    /// A copy holding only the secret properties.
    pub fn secrets_only(&self) -> ClientProperties {
        ClientProperties {
            plain: BTreeMap::new(),
            secret: self.secret.clone(),
        }
    }

    /// The names of the properties whose values differ between this and `other` (set in one
    /// only, or set to different values), sorted; never a value.
    pub fn differing_keys(&self, other: &ClientProperties) -> Vec<String> {
        let mut keys: Vec<String> = self
            .plain
            .keys()
            .chain(self.secret.keys())
            .chain(other.plain.keys())
            .chain(other.secret.keys())
            .filter(|k| {
                self.plain.get(*k) != other.plain.get(*k)
                    || self.secret.get(*k) != other.secret.get(*k)
            })
            .cloned()
            .collect();
        keys.sort();
        keys.dedup();
        keys
    }

    /// No property set.
    pub fn is_empty(&self) -> bool {
        self.plain.is_empty() && self.secret.is_empty()
    }

    /// Every property of `over` replaces this one's.
    pub fn merge(&mut self, over: &ClientProperties) {
        for (k, v) in &over.plain {
            self.set(k, v.clone());
        }
        for (k, v) in &over.secret {
            self.plain.remove(k);
            self.secret.insert(k.clone(), v.clone());
        }
    }

    /// Every property with its value, secrets exposed: only to hand them to librdkafka.
    pub fn expose(&self) -> impl Iterator<Item = (&str, &str)> {
        self.plain
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .chain(self.secret.iter().map(|(k, v)| (k.as_str(), v.expose())))
    }

    /// `key=value, ...` with secret values as `***` and PEM text as `(PEM)`, for `check`.
    pub fn describe(&self) -> String {
        let mut parts: Vec<String> = self
            .plain
            .iter()
            .map(|(k, v)| {
                if v.contains("-----BEGIN") {
                    format!("{k}=(PEM)")
                } else {
                    format!("{k}={v}")
                }
            })
            .chain(self.secret.keys().map(|k| format!("{k}=***")))
            .collect();
        parts.sort();
        parts.join(", ")
    }
}

/// The process-wide Kafka client settings: `--kafka-config` over the TOML `[kafka]` section.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KafkaClientSettings {
    /// `bootstrap.servers`, used by connectors that name none themselves (below
    /// `--kafka-bootstrap` and `OUTBOXD_KAFKA_BOOTSTRAP`, above a Debezium JSON's schema
    /// history servers).
    pub bootstrap_servers: Option<String>,
    /// Settings of every client.
    pub client: ClientProperties,
    /// Settings of the record producers only (`producer.`-prefixed keys), over `client`.
    pub producer: ClientProperties,
    /// Keys that are not used, with the reason (logged by `run`, listed by `check`, a
    /// warning each): their effect is not reproduced.
    pub ignored_keys: Vec<(String, String)>,
    /// Kafka Connect worker keys with no role in outboxd (worker group, REST API,
    /// config/offset/status topics, plugins), sorted: one INFO line lists them.
    pub worker_keys: Vec<String>,
    /// The worker's converters (`key.converter`, `value.converter`, `header.converter` and
    /// their options), for the Debezium JSON connectors that name none (Kafka Connect's
    /// resolution; see `crate::connect::converter`).
    pub converters: BTreeMap<String, String>,
    /// The worker's `topic.creation.enable` (Kafka Connect's default: true): false turns
    /// every connector's `topic.creation.*` off.
    pub topic_creation_enable: Option<bool>,
}

impl KafkaClientSettings {
    /// `over`'s settings replace these, key by key.
    pub fn merge(&mut self, over: &KafkaClientSettings) {
        if over.bootstrap_servers.is_some() {
            self.bootstrap_servers = over.bootstrap_servers.clone();
        }
        self.client.merge(&over.client);
        self.producer.merge(&over.producer);
        self.converters
            .extend(over.converters.iter().map(|(k, v)| (k.clone(), v.clone())));
        if over.topic_creation_enable.is_some() {
            self.topic_creation_enable = over.topic_creation_enable;
        }
        self.ignored_keys.extend(over.ignored_keys.iter().cloned());
        self.worker_keys.extend(over.worker_keys.iter().cloned());
        self.worker_keys.sort();
        self.worker_keys.dedup();
    }
}

/// What a set of Java/librdkafka keys translated to.
#[derive(Debug, Default)]
pub(crate) struct Translated {
    pub(crate) props: ClientProperties,
    pub(crate) ignored: Vec<(String, String)>,
    /// Kafka Connect worker keys with no role here ([`CONNECT_WORKER`]).
    pub(crate) worker: Vec<String>,
}

/// Java settings librdkafka has no equivalent for, with the reason they are not used.
const NOT_IN_LIBRDKAFKA: &[(&str, &str)] = &[
    ("ssl.protocol", "librdkafka negotiates the highest TLS version both sides support"),
    ("ssl.enabled.protocols", "librdkafka negotiates the highest TLS version both sides support"),
    ("ssl.provider", "librdkafka uses OpenSSL"),
    ("ssl.cipher.suites", "Java cipher suite names; set librdkafka's ssl.cipher.suites (OpenSSL names) instead if needed"),
    ("ssl.keymanager.algorithm", "a Java (JSSE) setting"),
    ("ssl.trustmanager.algorithm", "a Java (JSSE) setting"),
    ("ssl.secure.random.implementation", "a Java (JSSE) setting"),
    ("ssl.engine.factory.class", "a Java (JSSE) setting"),
    ("sasl.login.*", "Java login callback settings; librdkafka logs in itself"),
    ("sasl.client.callback.handler.class", "Java login callback settings; librdkafka logs in itself"),
    ("sasl.login.callback.handler.class", "Java login callback settings; librdkafka logs in itself"),
];

/// Kafka Connect worker keys that are not client settings and whose effect outboxd does not
/// need to reproduce: Connect's own machinery (worker group, REST API, config/offset/status
/// topics, plugins). A stock worker file is full of them: they are listed once, at INFO.
const CONNECT_WORKER: &[&str] = &[
    "group.id",
    "client.id",
    "offset.*",
    "config.*",
    "status.*",
    "plugin.*",
    "rest.*",
    "listeners*",
    "admin.listeners*",
    "task.*",
    "connector.client.config.override.policy",
    "exactly.once.source.support",
    "scheduled.rebalance.max.delay.ms",
    "worker.*",
    "topic.creation.enable",
];

/// Kafka Connect worker keys the REST API reads (`crate::rest::listener`): its TLS, its Basic
/// authentication and topic tracking; neither client settings nor ignored.
const REST_WORKER: &[&str] = &[
    "listeners.https.*",
    "rest.extension.classes",
    "topic.tracking.*",
];

/// The settings of Kafka Connect's other clients, with the reason: outboxd's clients do not
/// take their effect (a warning each).
const WORKER_ONLY: &[(&str, &str)] = &[
    (
        "consumer.*",
        "outboxd's checkpoint store clients use the top-level settings",
    ),
    (
        "admin.*",
        "outboxd's checkpoint store clients use the top-level settings",
    ),
];

/// Producer settings outboxd fixes (librdkafka name, the values in Java or librdkafka spelling
/// that ask for what it always does, the value it sets): the idempotent producer every
/// guarantee rests on. The record producer sets them last (`crate::sink::kafka`).
pub(crate) const FIXED_PRODUCER: &[(&str, &[&str], &str)] = &[
    ("acks", &["all", "-1"], "all"),
    ("enable.idempotence", &["true"], "true"),
    ("partitioner", &["murmur2_random"], "murmur2_random"),
];

/// Kafka's Java partitioners that place keyed records as librdkafka's `murmur2_random` does.
const JAVA_DEFAULT_PARTITIONERS: &[&str] =
    &["org.apache.kafka.clients.producer.internals.DefaultPartitioner"];

/// Takes outboxd's fixed producer settings out of `producer` (one scope: keys without their
/// `producer.` / `producer.override.` prefix, given as `prefix` for messages), the same way
/// for a worker file's `producer.*` and a connector JSON's `producer.override.*`: a value
/// that asks for what outboxd always does is reported in `ignored` as such; another value is
/// an error naming the key and what outboxd fixes. A Java `partitioner.class` other than
/// Kafka's default partitioner is an error too: keyed records would land on other
/// partitions than under Kafka Connect.
pub(crate) fn take_fixed_producer(
    producer: &mut BTreeMap<String, String>,
    prefix: &str,
    ignored: &mut Vec<(String, String)>,
) -> Result<(), KeyError> {
    for (key, same, fixed) in FIXED_PRODUCER {
        if let Some(v) = producer.remove(*key) {
            let t = v.trim().to_ascii_lowercase();
            if !same.contains(&t.as_str()) {
                return Err((
                    format!("{prefix}{key}"),
                    format!(
                        "`{v}` cannot be applied: outboxd's producer always uses {key}={fixed} \
                         (the idempotent producer its delivery guarantees rest on); remove it"
                    ),
                ));
            }
            ignored.push((
                format!("{prefix}{key}"),
                format!("{key}={fixed} is what outboxd's producer always uses"),
            ));
        }
    }
    if let Some(v) = producer.remove("partitioner.class") {
        if !JAVA_DEFAULT_PARTITIONERS.contains(&v.trim()) {
            return Err((
                format!("{prefix}partitioner.class"),
                format!(
                    "`{v}` cannot be applied: outboxd places keyed records as Kafka's default \
                     partitioner does (murmur2 of the key), so an aggregate keeps its \
                     partition; remove it"
                ),
            ));
        }
        ignored.push((
            format!("{prefix}partitioner.class"),
            "Kafka's default partitioner is what outboxd's producer always uses (murmur2)".into(),
        ));
    }
    Ok(())
}

fn matches(pattern: &str, key: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => key.starts_with(prefix),
        None => key == pattern,
    }
}

/// Translates client settings in Java or librdkafka names (one scope: no `producer.`
/// prefix). `is_librdkafka` says whether librdkafka knows a name. Reading a PKCS12
/// truststore happens here (its certificates become `ssl.ca.pem`).
pub(crate) fn translate(
    mut keys: BTreeMap<String, String>,
    is_librdkafka: &dyn Fn(&str, &str) -> bool,
) -> Result<Translated, KeyError> {
    let mut out = Translated::default();
    let err = |k: &str, m: String| (k.to_string(), m);

    if let Some(p) = keys.remove("security.protocol") {
        let v = p.trim().to_ascii_lowercase();
        if !matches!(
            v.as_str(),
            "plaintext" | "ssl" | "sasl_plaintext" | "sasl_ssl"
        ) {
            return Err(err(
                "security.protocol",
                format!("{p:?} is not PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL"),
            ));
        }
        out.props.set("security.protocol", v);
    }
    let mechanism = keys
        .remove("sasl.mechanism")
        .map(|m| ("sasl.mechanism", m))
        .or_else(|| {
            keys.remove("sasl.mechanisms")
                .map(|m| ("sasl.mechanisms", m))
        });
    let mut jaas = keys.remove("sasl.jaas.config");
    let mut token_login = false;
    if let Some((k, m)) = mechanism {
        let v = m.trim().to_ascii_uppercase();
        match v.as_str() {
            "PLAIN" | "SCRAM-SHA-256" | "SCRAM-SHA-512" => out.props.set("sasl.mechanisms", v),
            "GSSAPI" => return Err(err(k, "GSSAPI (Kerberos) is not supported: outboxd's librdkafka is built without Cyrus SASL; use PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER or AWS_MSK_IAM".into())),
            "OAUTHBEARER" | "AWS_MSK_IAM" => {
                super::kafka_oauth::translate(k, &v, jaas.take(), &mut keys, &mut out)?;
                token_login = true;
            }
            _ => return Err(err(k, format!("{m:?} is not a SASL mechanism outboxd supports (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER, AWS_MSK_IAM)"))),
        }
    }
    if let Some(jaas) = jaas {
        let (user, password) = parse_jaas(&jaas).map_err(|m| err("sasl.jaas.config", m))?;
        if keys.contains_key("sasl.username") || keys.contains_key("sasl.password") {
            return Err(err(
                "sasl.jaas.config",
                "set either sasl.jaas.config or sasl.username/sasl.password, not both".into(),
            ));
        }
        out.props.set("sasl.username", user);
        out.props.set("sasl.password", password);
    }

    // Truststore.
    let ts_type = take_kind(&mut keys, "ssl.truststore.type")?;
    let ts_password = Secret::new(keys.remove("ssl.truststore.password").unwrap_or_default());
    if let Some(loc) = keys.remove("ssl.truststore.location") {
        let path = PathBuf::from(loc.trim());
        let anchors = TrustAnchors::load("ssl.truststore.location", &path, ts_type, &ts_password)
            .map_err(|e| err("ssl.truststore.location", e.to_string()))?;
        match ts_type {
            Some(StoreKind::Pem) => out.props.set("ssl.ca.location", path.display().to_string()),
            _ => out.props.set("ssl.ca.pem", anchors.to_pem()),
        }
    }
    if let Some(pem) = keys.remove("ssl.truststore.certificates") {
        out.props.set("ssl.ca.pem", pem);
    }

    // Keystore.
    let ks_type = take_kind(&mut keys, "ssl.keystore.type")?;
    let ks_password = keys.remove("ssl.keystore.password");
    if let Some(loc) = keys.remove("ssl.keystore.location") {
        let path = PathBuf::from(loc.trim());
        let kind = keystore_kind(&path, ks_type).map_err(|m| err("ssl.keystore.location", m))?;
        let location = path.display().to_string();
        match kind {
            StoreKind::Pem => {
                out.props.set("ssl.certificate.location", location.clone());
                out.props.set("ssl.key.location", location);
                if let Some(pw) = &ks_password {
                    if !keys.contains_key("ssl.key.password") {
                        out.props.set("ssl.key.password", pw.clone());
                    }
                }
            }
            _ => {
                out.props.set("ssl.keystore.location", location);
                if let Some(pw) = &ks_password {
                    out.props.set("ssl.keystore.password", pw.clone());
                }
            }
        }
    } else if let Some(pw) = ks_password {
        // librdkafka's own name, with its own ssl.keystore.location given as such: none here.
        out.props.set("ssl.keystore.password", pw);
    }
    if let Some(chain) = keys.remove("ssl.keystore.certificate.chain") {
        out.props.set("ssl.certificate.pem", chain);
    }
    if let Some(key) = keys.remove("ssl.keystore.key") {
        out.props.set("ssl.key.pem", key);
    }
    if let Some(alg) = keys.remove("ssl.endpoint.identification.algorithm") {
        let v = alg.trim().to_ascii_lowercase();
        match v.as_str() {
            "" | "none" => out
                .props
                .set("ssl.endpoint.identification.algorithm", "none"),
            "https" => out
                .props
                .set("ssl.endpoint.identification.algorithm", "https"),
            _ => {
                return Err(err(
                    "ssl.endpoint.identification.algorithm",
                    format!("{alg:?} is not https or empty (no host name verification)"),
                ))
            }
        }
    }

    for (k, v) in keys {
        if k == "bootstrap.servers" || k == "metadata.broker.list" {
            return Err(err(&k, "is set in the wrong place here".into()));
        }
        if REST_WORKER.iter().any(|p| matches(p, &k)) {
            continue;
        }
        if CONNECT_WORKER.iter().any(|p| matches(p, &k)) {
            out.worker.push(k);
        } else if let Some((_, why)) = NOT_IN_LIBRDKAFKA.iter().find(|(p, _)| matches(p, &k)) {
            out.ignored.push((k, (*why).to_string()));
        } else if let Some((_, why)) = WORKER_ONLY.iter().find(|(p, _)| matches(p, &k)) {
            out.ignored.push((k, (*why).to_string()));
        } else if is_librdkafka(&k, &v) {
            out.props.set(&k, v);
        } else if k.starts_with("topic.creation.") {
            out.ignored.push((
                k,
                "a connector setting (Kafka Connect reads topic.creation.* from the connector's \
                 config, not the worker's): put it in the connector JSON"
                    .into(),
            ));
        } else {
            out.ignored.push((
                k,
                "neither a librdkafka property nor a Java client setting outboxd translates".into(),
            ));
        }
    }
    if let Some(m) = out.props.get("sasl.mechanisms").filter(|_| !token_login) {
        let m = m.to_string();
        if !out.props.contains("sasl.username") {
            return Err(err(
                "sasl.jaas.config",
                format!("sasl.mechanism={m} needs credentials: set sasl.jaas.config (PlainLoginModule / ScramLoginModule with username and password) or sasl.username and sasl.password"),
            ));
        }
    }
    Ok(out)
}

/// Takes a store type key (`ssl.truststore.type`, `ssl.keystore.type`).
fn take_kind(
    keys: &mut BTreeMap<String, String>,
    key: &str,
) -> Result<Option<StoreKind>, KeyError> {
    keys.remove(key)
        .map(|t| StoreKind::parse(key, &t))
        .transpose()
        .map_err(|e| (key.to_string(), e.to_string()))
}

/// The kind of a keystore: the configured one, else from the content. JKS is refused.
fn keystore_kind(path: &Path, kind: Option<StoreKind>) -> Result<StoreKind, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let jks = bytes.starts_with(&[0xFE, 0xED, 0xFE, 0xED]) || bytes.starts_with(&[0xCE; 4]);
    let pem = bytes.windows(10).any(|w| w == b"-----BEGIN");
    if jks || kind == Some(StoreKind::Jks) {
        return Err(crate::tls::TlsError::Jks {
            setting: "ssl.keystore.location".into(),
            path: path.to_path_buf(),
        }
        .to_string());
    }
    Ok(match kind {
        Some(k) => k,
        None if pem => StoreKind::Pem,
        None => StoreKind::Pkcs12,
    })
}

/// One JAAS login module entry as Kafka's `sasl.jaas.config` holds it:
/// `<LoginModule class> <control flag> [option=value ...];` (Kafka's `JaasConfig` syntax:
/// values quoted with `"` or `'` and `\` escapes, or bare words).
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct JaasEntry {
    /// The login module's class name.
    pub(crate) class: String,
    /// The options, by name (values may be secrets: never shown).
    pub(crate) options: BTreeMap<String, String>,
}

impl fmt::Debug for JaasEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&String> = self.options.keys().collect();
        write!(
            f,
            "JaasEntry {{ class: {:?}, options: {names:?} }}",
            self.class
        )
    }
}

/// Parses a JAAS entry (`<class> required name="value" ...;`). Errors never contain the
/// values.
pub(crate) fn parse_jaas_entry(text: &str) -> Result<JaasEntry, String> {
    let text = text.trim();
    let (class, rest) = text
        .split_once(char::is_whitespace)
        .ok_or("expected `<LoginModule class> required option=\"value\" ...;`")?;
    let class = class.to_string();
    let rest = rest.trim_start();
    let (flag, mut rest) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
    let flag = flag.trim_end_matches(';');
    if !matches!(flag, "required" | "requisite" | "sufficient" | "optional") {
        return Err(format!("expected a control flag (required) after {class}"));
    }
    let mut options: BTreeMap<String, String> = BTreeMap::new();
    loop {
        rest = rest.trim_start();
        if rest.is_empty() || rest.starts_with(';') {
            break;
        }
        let (name, after) = rest
            .split_once('=')
            .ok_or("expected option=value pairs after the control flag")?;
        let name = name.trim().to_string();
        let after = after.trim_start();
        // Kafka's `JaasConfig` reads the entry with Java's `StreamTokenizer`, whose quote
        // characters are both `"` and `'`: `clientId='relay'` is `relay`.
        let quote = after.chars().next().filter(|c| *c == '"' || *c == '\'');
        let (value, tail) = if let Some(quote) = quote {
            let q = &after[1..];
            let mut value = String::new();
            let mut chars = q.char_indices();
            let mut end = None;
            while let Some((i, c)) = chars.next() {
                match c {
                    '\\' => {
                        if let Some((_, n)) = chars.next() {
                            value.push(n);
                        }
                    }
                    c if c == quote => {
                        end = Some(i + 1);
                        break;
                    }
                    c => value.push(c),
                }
            }
            let end =
                end.ok_or_else(|| format!("the value of option {name} has no closing quote"))?;
            (value, &q[end..])
        } else {
            let end = after
                .find(|c: char| c.is_whitespace() || c == ';')
                .unwrap_or(after.len());
            (after[..end].to_string(), &after[end..])
        };
        options.insert(name, value);
        rest = tail;
    }
    Ok(JaasEntry { class, options })
}

/// The username and password of a JAAS `PlainLoginModule` or `ScramLoginModule` entry
/// (`<class> required username="..." password="...";`). Errors never contain the values.
fn parse_jaas(text: &str) -> Result<(String, String), String> {
    let mut entry = parse_jaas_entry(text)?;
    let class = entry.class.as_str();
    let known = [
        "org.apache.kafka.common.security.plain.PlainLoginModule",
        "org.apache.kafka.common.security.scram.ScramLoginModule",
    ];
    if !known.contains(&class) {
        return Err(format!(
            "login module {class} is not supported with this sasl.mechanism; outboxd reads PlainLoginModule and ScramLoginModule (username and password) for PLAIN and SCRAM, OAuthBearerLoginModule for OAUTHBEARER, IAMLoginModule for AWS_MSK_IAM"
        ));
    }
    match (
        entry.options.remove("username"),
        entry.options.remove("password"),
    ) {
        (Some(u), Some(p)) => Ok((u, p)),
        _ => Err(format!(
            "{class} needs both username=\"...\" and password=\"...\""
        )),
    }
}

/// Reads a Kafka Connect worker properties file (Java properties: `key=value`, `key: value`,
/// `#`/`!` comments, `\` line continuations and escapes) into the process-wide settings.
/// Values are resolved through Kafka Connect's `${env:VAR}` / `${file:...}` /
/// `${directory:...}` config providers.
pub(crate) fn from_worker_file(
    path: &Path,
    env: &dyn Fn(&str) -> Option<String>,
    is_librdkafka: &dyn Fn(&str, &str) -> bool,
) -> Result<KafkaClientSettings, KeyError> {
    from_keys(worker_properties(path, env)?, is_librdkafka)
}

/// Every key of a Kafka Connect worker properties file, values resolved through the config
/// providers: for the settings that are not Kafka client settings (the offsets storage, the
/// REST listeners) that `outboxd checkpoint import-debezium` / `export-debezium` read.
pub(crate) fn worker_properties(
    path: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<BTreeMap<String, String>, KeyError> {
    let file = std::fs::File::open(path)
        .map_err(|e| ("file".to_string(), format!("cannot read it: {e}")))?;
    let raw = java_properties::read(std::io::BufReader::new(file)).map_err(|e| {
        (
            "file".to_string(),
            format!("not a Java properties file: {e}"),
        )
    })?;
    let mut keys = BTreeMap::new();
    for (k, v) in raw {
        let v = super::providers::substitute_providers(&v, env).map_err(|m| (k.clone(), m))?;
        keys.insert(k, v);
    }
    Ok(keys)
}

/// The process-wide settings from flat keys (worker file or flattened TOML `[kafka]`):
/// `bootstrap.servers`, `producer.`-prefixed keys for the record producers, the rest for
/// every client.
pub(crate) fn from_keys(
    keys: BTreeMap<String, String>,
    is_librdkafka: &dyn Fn(&str, &str) -> bool,
) -> Result<KafkaClientSettings, KeyError> {
    let mut settings = KafkaClientSettings::default();
    let mut top = BTreeMap::new();
    let mut producer = BTreeMap::new();
    for (k, v) in keys {
        if k == "bootstrap.servers" || k == "bootstrap_servers" {
            let v = v.trim().to_string();
            if !v.is_empty() {
                settings.bootstrap_servers = Some(v);
            }
        } else if ["key.converter", "value.converter", "header.converter"]
            .iter()
            .any(|c| k == *c || k.starts_with(&format!("{c}.")))
        {
            settings.converters.insert(k, v.trim().to_string());
        } else if k == "topic.creation.enable" {
            settings.topic_creation_enable = Some(match v.trim().to_ascii_lowercase().as_str() {
                "true" => true,
                "false" => false,
                _ => return Err((k, format!("must be true or false, not `{}`", v.trim()))),
            });
        } else if let Some(p) = k.strip_prefix("producer.") {
            if p == "bootstrap.servers" {
                settings.ignored_keys.push((
                    k.clone(),
                    "the record producers use bootstrap.servers (one cluster)".into(),
                ));
            } else {
                producer.insert(p.to_string(), v);
            }
        } else {
            top.insert(k, v);
        }
    }
    let t = translate(top, is_librdkafka)?;
    settings.client = t.props;
    settings.ignored_keys.extend(t.ignored);
    settings.worker_keys.extend(t.worker);
    take_fixed_producer(&mut producer, "producer.", &mut settings.ignored_keys)?;
    let p = translate(producer, is_librdkafka).map_err(|(k, m)| (format!("producer.{k}"), m))?;
    settings.producer = p.props;
    settings.ignored_keys.extend(
        p.ignored
            .into_iter()
            .map(|(k, m)| (format!("producer.{k}"), m)),
    );
    settings
        .worker_keys
        .extend(p.worker.into_iter().map(|k| format!("producer.{k}")));
    settings.worker_keys.sort();
    Ok(settings)
}

/// Whether librdkafka knows a configuration property by this name (librdkafka
/// `CONFIGURATION.md`, global and topic properties): asked of librdkafka itself, by setting
/// it to `value` on a fresh configuration. A known name with a value librdkafka refuses
/// counts as known: creating the client then fails with librdkafka's own message.
pub fn knows_property(name: &str, value: &str) -> bool {
    !matches!(
        rdkafka::ClientConfig::new()
            .set(name, value)
            .create_native_config(),
        Err(rdkafka::error::KafkaError::ClientConfig(
            rdkafka::types::RDKafkaConfRes::RD_KAFKA_CONF_UNKNOWN,
            ..
        ))
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn any(_: &str, _: &str) -> bool {
        true
    }

    #[test]
    fn jaas_plain_and_scram() {
        let (u, p) = parse_jaas(
            r#"org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="s3\"cret";"#,
        )
        .unwrap();
        assert_eq!((u.as_str(), p.as_str()), ("alice", "s3\"cret"));
        // Single quotes, as Kafka's JaasConfig (Java's StreamTokenizer) reads them.
        let (u, p) = parse_jaas(
            r#"org.apache.kafka.common.security.plain.PlainLoginModule required username='relay' password='S3cr"t\'x';"#,
        )
        .unwrap();
        assert_eq!((u.as_str(), p.as_str()), ("relay", "S3cr\"t'x"));
        let e = parse_jaas_entry(r#"M required a='x;"#).unwrap_err();
        assert!(e.contains("no closing quote"), "{e}");
        let e = parse_jaas(
            r#"org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required clientSecret="x";"#,
        )
        .unwrap_err();
        assert!(e.contains("not supported"), "{e}");
        let e = parse_jaas(
            r#"org.apache.kafka.common.security.plain.PlainLoginModule required username="a" password="hunter2"#,
        )
        .unwrap_err();
        assert!(!e.contains("hunter2"), "{e}");
    }

    #[test]
    fn worker_keys_translate_and_report() {
        let keys: BTreeMap<String, String> = [
            ("bootstrap.servers", "b:1"),
            ("security.protocol", "SASL_SSL"),
            ("sasl.mechanism", "SCRAM-SHA-512"),
            ("sasl.jaas.config", r#"org.apache.kafka.common.security.scram.ScramLoginModule required username="u" password="pw";"#),
            ("ssl.endpoint.identification.algorithm", ""),
            ("group.id", "connect-cluster"),
            ("key.converter", "org.apache.kafka.connect.storage.StringConverter"),
            ("producer.compression.type", "zstd"),
            ("producer.security.protocol", "SSL"),
            ("ssl.enabled.protocols", "TLSv1.3"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let s = from_keys(keys, &|k, _| k == "compression.type").unwrap();
        assert_eq!(s.bootstrap_servers.as_deref(), Some("b:1"));
        assert_eq!(s.client.get("security.protocol"), Some("sasl_ssl"));
        assert_eq!(s.client.get("sasl.mechanisms"), Some("SCRAM-SHA-512"));
        assert_eq!(s.client.get("sasl.username"), Some("u"));
        assert_eq!(s.client.get("sasl.password"), None, "secret");
        assert!(s.client.contains("sasl.password"));
        assert_eq!(
            s.client.get("ssl.endpoint.identification.algorithm"),
            Some("none")
        );
        assert_eq!(s.producer.get("compression.type"), Some("zstd"));
        assert_eq!(s.producer.get("security.protocol"), Some("ssl"));
        let ignored: Vec<&str> = s.ignored_keys.iter().map(|(k, _)| k.as_str()).collect();
        // Connect's own machinery is listed apart (one INFO line); a setting whose effect
        // is not reproduced stays a warning.
        assert_eq!(ignored, ["ssl.enabled.protocols"]);
        assert_eq!(s.worker_keys, ["group.id"]);
        assert_eq!(
            s.converters.get("key.converter").map(String::as_str),
            Some("org.apache.kafka.connect.storage.StringConverter")
        );
        let shown = format!("{:?} {}", s, s.client.describe());
        assert!(!shown.contains("password=pw"), "{shown}");
        assert!(shown.contains("sasl.password=***"), "{shown}");
    }

    #[test]
    fn sasl_needs_credentials_and_known_mechanisms() {
        let k = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let (key, m) = translate(k(&[("sasl.mechanism", "SCRAM-SHA-256")]), &any).unwrap_err();
        assert_eq!(key, "sasl.jaas.config");
        assert!(m.contains("needs credentials"), "{m}");
        let (_, m) = translate(k(&[("sasl.mechanism", "GSSAPI")]), &any).unwrap_err();
        assert!(m.contains("Kerberos"), "{m}");
        let (_, m) = translate(k(&[("security.protocol", "TLS")]), &any).unwrap_err();
        assert!(m.contains("SASL_SSL"), "{m}");
    }

    #[test]
    fn secrets_are_kept_apart() {
        let mut p = ClientProperties::default();
        p.set("sasl.password", "hunter2");
        p.set("ssl.key.password", "k");
        p.set("security.protocol", "ssl");
        assert!(!format!("{p:?}").contains("hunter2"));
        assert!(!p.describe().contains("hunter2"));
        let exposed: BTreeMap<&str, &str> = p.expose().collect();
        assert_eq!(exposed["sasl.password"], "hunter2");
    }

    #[test]
    fn librdkafka_knows_its_own_names_only() {
        assert!(knows_property("ssl.ca.pem", "x"));
        assert!(knows_property("sasl.username", "u"));
        assert!(knows_property("linger.ms", "not a number"));
        assert!(!knows_property("key.converter", "x"));
        assert!(!knows_property("ssl.keymanager.algorithm", "SunX509"));
    }

    #[test]
    fn topic_creation_in_a_worker_file_is_said_to_belong_to_the_connector() {
        let keys: BTreeMap<String, String> = [(
            "topic.creation.default.partitions".to_string(),
            "3".to_string(),
        )]
        .into();
        let s = from_keys(keys, &knows_property).unwrap();
        let why = &s.ignored_keys.first().expect("reported").1;
        assert!(why.contains("put it in the connector JSON"), "{why}");
    }
}
