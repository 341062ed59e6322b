//! The one set of client settings every Kafka client of the process starts from.
//!
//! The record producer, the checkpoint store's admin client, consumers and producer, `check`
//! and `status` all build their librdkafka configuration with [`config`], so a setting that
//! concerns the connection to the cluster (the bootstrap servers; security settings) is
//! made in one place and applies to all of them alike. (Group membership, which belongs to
//! no connector, builds its clients from a connector's settings too.)

use rdkafka::error::KafkaResult;
use rdkafka::ClientConfig;

use crate::config::{ClientProperties, KafkaConfig};
use crate::tls::Verification;

/// librdkafka's longest wait between two attempts to connect to a broker, in ms, unless the
/// client settings say otherwise. librdkafka's own default (10 s) let a broker restarted after
/// a 20 s outage wait up to 10 s more for the relay's clients to try again
/// (`benches/faults`); one attempt a second per broker costs nothing.
pub const RECONNECT_BACKOFF_MAX_MS: &str = "1000";

/// A librdkafka configuration holding the connection settings of `kafka` — the bootstrap
/// servers and [`KafkaConfig::client`] (security among them, secrets included) — for any
/// client (producer, consumer, admin); callers add what their client needs.
pub fn config(kafka: &KafkaConfig) -> ClientConfig {
    let mut cc = ClientConfig::new();
    cc.set("bootstrap.servers", &kafka.bootstrap_servers)
        .set("reconnect.backoff.max.ms", RECONNECT_BACKOFF_MAX_MS);
    for (k, v) in kafka.client.expose() {
        cc.set(k, value_for(&kafka.bootstrap_servers, k, v));
    }
    cc
}

/// The value librdkafka gets for client setting `key`: `value`, except that an AWS MSK IAM
/// token source without a region (`sasl.oauthbearer.config`) gets the one its bootstrap
/// host names say (`*.kafka.<region>.amazonaws.com`), as aws-msk-iam-auth reads it.
pub fn value_for<'a>(bootstrap: &str, key: &str, value: &'a str) -> std::borrow::Cow<'a, str> {
    if key == "sasl.oauthbearer.config" {
        if let Some(filled) = super::oauth::with_region_from(bootstrap, value) {
            return filled.into();
        }
    }
    value.into()
}

/// `props` as the clients get them from [`config`]: an MSK IAM token source's region filled
/// in from `bootstrap` ([`value_for`]), for `check` to describe.
pub fn as_clients_get_them(props: &ClientProperties, bootstrap: &str) -> ClientProperties {
    let mut out = props.clone();
    if let Some(config) = props.get_secret("sasl.oauthbearer.config") {
        let filled = value_for(bootstrap, "sasl.oauthbearer.config", config.expose());
        out.set("sasl.oauthbearer.config", filled.into_owned());
    }
    out
}

/// A Kafka client of any kind whose librdkafka handle outboxd can reach.
pub trait Handle {
    /// The client's `rd_kafka_t`.
    fn handle(&self) -> *mut rdkafka::types::RDKafka;
}

impl<C: rdkafka::ClientContext> Handle for rdkafka::admin::AdminClient<C> {
    fn handle(&self) -> *mut rdkafka::types::RDKafka {
        self.inner().native_ptr()
    }
}

impl<C: rdkafka::consumer::ConsumerContext> Handle for rdkafka::consumer::BaseConsumer<C> {
    fn handle(&self) -> *mut rdkafka::types::RDKafka {
        rdkafka::consumer::Consumer::client(self).native_ptr()
    }
}

impl<C: rdkafka::producer::ProducerContext> Handle for rdkafka::producer::BaseProducer<C> {
    fn handle(&self) -> *mut rdkafka::types::RDKafka {
        rdkafka::producer::Producer::client(self).native_ptr()
    }
}

impl<C: rdkafka::producer::ProducerContext + 'static> Handle
    for rdkafka::producer::ThreadedProducer<C>
{
    fn handle(&self) -> *mut rdkafka::types::RDKafka {
        rdkafka::producer::Producer::client(self).native_ptr()
    }
}

impl<C: rdkafka::ClientContext + 'static> Handle for rdkafka::producer::FutureProducer<C> {
    fn handle(&self) -> *mut rdkafka::types::RDKafka {
        rdkafka::producer::Producer::client(self).native_ptr()
    }
}

/// Makes a client of any kind from `settings` and `context` — how every Kafka client of the
/// process is made — and, when outboxd makes its OAUTHBEARER tokens itself (AWS MSK IAM, a
/// token file: `sasl.oauthbearer.config`), sets its first token at once.
///
/// librdkafka asks for a token through the client's main queue, which rdkafka serves only
/// while the client is polled: a consumer before its first `poll` (watermarks, metadata),
/// an admin client or a bare `BaseProducer` would otherwise never log in. Later refreshes
/// (at 80 % of the token's lifetime) come through [`super::oauth::generate`] for the
/// clients that are polled; the others live for a request or two. With OIDC librdkafka
/// fetches every token itself, on its background thread.
pub fn create<T, C>(settings: &ClientConfig, context: C) -> KafkaResult<T>
where
    T: rdkafka::config::FromClientConfigAndContext<C> + Handle,
    C: rdkafka::ClientContext,
{
    let client = T::from_config_and_context(settings, context)?;
    if let Some(config) = settings
        .get("sasl.oauthbearer.config")
        .filter(|c| crate::config::kafka_oauth::TokenSource::parse(c).is_some())
    {
        set_first_token(client.handle(), config);
    }
    Ok(client)
}

/// [`create`] as a method of a client configuration, for the builder chains that make
/// clients (`client::config(kafka).set(..).create_client(context)`).
pub trait CreateClient {
    /// See [`create`].
    fn create_client<T, C>(&self, context: C) -> KafkaResult<T>
    where
        T: rdkafka::config::FromClientConfigAndContext<C> + Handle,
        C: rdkafka::ClientContext;
}

impl CreateClient for ClientConfig {
    fn create_client<T, C>(&self, context: C) -> KafkaResult<T>
    where
        T: rdkafka::config::FromClientConfigAndContext<C> + Handle,
        C: rdkafka::ClientContext,
    {
        create(self, context)
    }
}

/// Sets a token from [`super::oauth::generate`] on `rk`, or tells librdkafka why there is
/// none (its error callback then reports it, as for a failed refresh).
fn set_first_token(rk: *mut rdkafka::types::RDKafka, config: &str) {
    use std::ffi::CString;
    let reason = match super::oauth::generate(Some(config)) {
        Ok(token) => {
            let (Ok(value), Ok(principal)) = (
                CString::new(token.token),
                CString::new(token.principal_name),
            ) else {
                return;
            };
            let mut errstr = [0 as std::os::raw::c_char; 512];
            // SAFETY: `rk` is a live client handle (the caller owns the client); the strings
            // and the error buffer outlive the call, which copies them.
            let err = unsafe {
                rdkafka::bindings::rd_kafka_oauthbearer_set_token(
                    rk,
                    value.as_ptr(),
                    token.lifetime_ms,
                    principal.as_ptr(),
                    std::ptr::null_mut(),
                    0,
                    errstr.as_mut_ptr(),
                    errstr.len(),
                )
            };
            if err == rdkafka::bindings::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR {
                return;
            }
            // SAFETY: librdkafka wrote a NUL-terminated message into the buffer.
            unsafe { std::ffi::CStr::from_ptr(errstr.as_ptr()) }
                .to_string_lossy()
                .into_owned()
        }
        Err(e) => e.to_string(),
    };
    if let Ok(reason) = CString::new(reason) {
        // SAFETY: as above; librdkafka copies the message.
        unsafe { rdkafka::bindings::rd_kafka_oauthbearer_set_token_failure(rk, reason.as_ptr()) };
    }
}

/// How far a client with settings `props` verifies the brokers: `None` when it does not
/// encrypt.
pub fn verification(props: &ClientProperties) -> Option<Verification> {
    let protocol = props
        .get("security.protocol")
        .unwrap_or("plaintext")
        .to_ascii_lowercase();
    if !protocol.ends_with("ssl") {
        return None;
    }
    let chain = props
        .get("enable.ssl.certificate.verification")
        .is_none_or(|v| v != "false");
    let host = props
        .get("ssl.endpoint.identification.algorithm")
        .is_none_or(|v| v != "none");
    Some(match (chain, host) {
        (true, true) => Verification::ChainAndHost,
        (true, false) => Verification::Chain,
        (false, _) => Verification::None,
    })
}

/// `security.protocol=sasl_ssl, SASL SCRAM-SHA-512 as outboxd`: the protocol and the SASL
/// mechanism and user of `props` (never a password).
pub fn describe_protocol(props: &ClientProperties) -> String {
    let protocol = props
        .get("security.protocol")
        .unwrap_or("plaintext")
        .to_ascii_lowercase();
    let mut words = format!("security.protocol={protocol}");
    match props.get("sasl.mechanisms") {
        Some(m) if m.eq_ignore_ascii_case("OAUTHBEARER") => {
            words.push_str(&format!(
                ", SASL OAUTHBEARER with {}",
                describe_token(props)
            ));
        }
        Some(m) => {
            let user = props.get("sasl.username").unwrap_or("(none)");
            words.push_str(&format!(", SASL {m} as {user}"));
        }
        None => {}
    }
    words
}

/// Where an OAUTHBEARER client's tokens come from, in words (never a secret): OIDC's grant,
/// client id and token endpoint, or outboxd's own token source.
fn describe_token(props: &ClientProperties) -> String {
    if props.get("sasl.oauthbearer.method") == Some("oidc") {
        let endpoint = props
            .get("sasl.oauthbearer.token.endpoint.url")
            .unwrap_or("(no token endpoint)");
        let scope = props
            .get("sasl.oauthbearer.scope")
            .map(|s| format!(", scope {s}"))
            .unwrap_or_default();
        return match props.get("sasl.oauthbearer.grant.type") {
            Some(crate::config::kafka_oauth::JWT_BEARER_GRANT) => {
                format!("OIDC tokens (JWT bearer grant{scope}) from {endpoint}, refreshed by librdkafka")
            }
            _ => format!(
                "OIDC tokens (client credentials of client {}{scope}) from {endpoint}, refreshed by librdkafka",
                props.get("sasl.oauthbearer.client.id").unwrap_or("(none)")
            ),
        };
    }
    let source = props
        .get_secret("sasl.oauthbearer.config")
        .and_then(|c| crate::config::kafka_oauth::TokenSource::parse(c.expose()));
    match source {
        Some(Ok(source)) => format!("tokens from {}", source.describe()),
        Some(Err(why)) => why,
        None => "no token source (set sasl.oauthbearer.token.endpoint.url or AWS MSK IAM)".into(),
    }
}

/// The security client settings `props` ask for, in words for `check`: `security.protocol`,
/// the SASL mechanism and user, whether it encrypts (with `version`, when known), how far the
/// brokers are verified, a client certificate; never a secret.
pub fn describe_security(props: &ClientProperties, version: Option<&str>) -> String {
    let mut words = describe_protocol(props);
    let Some(verification) = verification(props) else {
        words.push_str(", not encrypted");
        return words;
    };
    words.push_str(&format!(
        ", encrypted ({}), {}",
        version.unwrap_or("TLS version unknown"),
        verification.describe()
    ));
    if [
        "ssl.keystore.location",
        "ssl.certificate.location",
        "ssl.certificate.pem",
    ]
    .iter()
    .any(|k| props.contains(k))
    {
        words.push_str(", client certificate presented");
    }
    words
}

/// The low and high watermarks (offsets) of `topic`/`partition`, as
/// [`Consumer::fetch_watermarks`](rdkafka::consumer::Consumer::fetch_watermarks) gives them,
/// asked again for up to `timeout` while the partition has no leader yet.
///
/// A partition of a topic created moments ago answers `NOT_LEADER_OR_FOLLOWER` or
/// `LEADER_NOT_AVAILABLE` until its leader is elected (Kafka protocol, ListOffsets errors;
/// both are retriable), though the topic's metadata already lists it.
///
/// Errors: the last error when the leader is not known within `timeout`; any other error at once.
pub fn watermarks<C, X>(
    consumer: &C,
    topic: &str,
    partition: i32,
    timeout: std::time::Duration,
) -> KafkaResult<(i64, i64)>
where
    C: rdkafka::consumer::Consumer<X>,
    X: rdkafka::consumer::ConsumerContext + 'static,
{
    use rdkafka::types::RDKafkaErrorCode as Code;
    let deadline = std::time::Instant::now() + timeout;
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match consumer.fetch_watermarks(topic, partition, left) {
            Err(e)
                if matches!(
                    e.rdkafka_error_code(),
                    Some(Code::NotLeaderForPartition | Code::LeaderNotAvailable)
                ) && std::time::Instant::now() + LEADER_RETRY < deadline =>
            {
                std::thread::sleep(LEADER_RETRY);
            }
            other => return other,
        }
    }
}

/// How long [`watermarks`] waits before asking again for a partition without a leader.
const LEADER_RETRY: std::time::Duration = std::time::Duration::from_millis(200);

#[cfg(test)]
mod tests {
    use super::*;

    /// `check` describes what the record producer connects with: `producer.`-prefixed
    /// settings over the ones of every client.
    #[test]
    fn the_producer_settings_are_described() {
        let mut kafka = KafkaConfig {
            bootstrap_servers: "b:1".into(),
            client: ClientProperties::default(),
            producer: Default::default(),
            producer_secrets: ClientProperties::default(),
            max_record_bytes: 1,
            topic_creation: None,
        };
        kafka.client.set("security.protocol", "plaintext");
        kafka
            .producer
            .insert("security.protocol".into(), "sasl_ssl".into());
        kafka
            .producer
            .insert("sasl.mechanisms".into(), "SCRAM-SHA-512".into());
        kafka
            .producer
            .insert("sasl.username".into(), "relay".into());
        kafka.producer.insert(
            "ssl.endpoint.identification.algorithm".into(),
            "none".into(),
        );
        kafka.producer_secrets.set("sasl.password", "pw-not-shown");
        let props = kafka.producer_client();
        assert_eq!(verification(&props), Some(Verification::Chain));
        let words = describe_security(&props, Some("TLSv1.3"));
        assert_eq!(
            words,
            "security.protocol=sasl_ssl, SASL SCRAM-SHA-512 as relay, encrypted (TLSv1.3), \
             server certificate verified against the CA (host name not checked)"
        );
        assert_eq!(verification(&kafka.client), None);
    }
}
