//! Kafka preflight: the connection's security, and that the brokers answer a metadata
//! request with the connector's settings (credentials and TLS included).

use std::time::Duration;

use std::sync::Arc;

use super::{step, CheckResult, Status};
use crate::config::{ClientProperties, ConnectorConfig, Secret};
use crate::sink::missing_topic::AutoCreate;
use crate::sink::{client, KafkaLink, KafkaSink, SinkError};
use crate::tls::{self, ClientIdentity, TrustAnchors, Verification};

/// How long the brokers have to answer the metadata request.
const PROBE_TIMEOUT: Duration = Duration::from_secs(10);

/// Checks the Kafka connection of connector `cfg`: how it is secured (warns when it is not
/// encrypted or the brokers are not fully verified), then that the brokers answer.
pub async fn check(cfg: &ConnectorConfig) -> Vec<CheckResult> {
    let name = cfg.name.as_str();
    // What the record producer connects with (the probe below is made with it).
    let producer =
        client::as_clients_get_them(&cfg.kafka.producer_client(), &cfg.kafka.bootstrap_servers);
    let verification = client::verification(&producer);
    let probed = match verification {
        None => None,
        Some(v) => Some(probe_tls_version(&cfg.kafka.bootstrap_servers, &producer, v).await),
    };
    let expiry = match &probed {
        Some(Err(why)) => tls::expiry::validity_problem(why),
        _ => None,
    };
    let mut out = vec![match (verification, probed) {
        // The settings say what would be verified; a handshake that failed verified nothing.
        (Some(v), Some(Err(why))) => CheckResult::new(
            name,
            "kafka tls",
            Status::Warn,
            format!(
                "the TLS handshake with the first broker failed ({why}): nothing was encrypted or verified; configured: {}, {}",
                client::describe_protocol(&producer),
                v.describe_intent()
            ),
        ),
        (verification, probed) => {
            let version = probed.and_then(Result::ok).map(|version| {
                format!(
                    "{version}: what the first broker negotiates with a TLS 1.2/1.3 client; librdkafka does not report its own"
                )
            });
            let words = client::describe_security(&producer, version.as_deref());
            CheckResult::new(
                name,
                "kafka tls",
                match verification {
                    Some(Verification::ChainAndHost) => Status::Pass,
                    _ => Status::Warn,
                },
                match verification {
                    None => format!("{words}; set security.protocol=SASL_SSL or SSL (--kafka-config / [kafka]) for an encrypted connection"),
                    Some(Verification::ChainAndHost) => words,
                    Some(_) => format!("{words}; keep ssl.endpoint.identification.algorithm=https and certificate verification on"),
                },
            )
        }
    }];
    // Quiet: the outcome is this check's line, not librdkafka's retries on stderr.
    let link = KafkaLink::quiet(name, &cfg.kafka.bootstrap_servers);
    let Some(sink) = step(
        &mut out,
        name,
        "kafka producer",
        KafkaSink::new(&cfg.kafka, name, link.clone()),
    ) else {
        return out;
    };
    let reachable = sink.probe(PROBE_TIMEOUT).await;
    let answered = reachable.is_ok();
    out.push(match reachable {
        Ok(brokers) => CheckResult::new(
            name,
            "kafka",
            Status::Pass,
            format!(
                "{} reachable ({brokers} broker(s))",
                cfg.kafka.bootstrap_servers
            ),
        ),
        // librdkafka says only `certificate verify failed`; the probe above saw why.
        Err(f @ SinkError::Link(_)) => CheckResult::new(
            name,
            "kafka",
            Status::Fail,
            match (&f, expiry) {
                (SinkError::Link(crate::sink::LinkFailure::Tls { bootstrap, reason }), Some(p)) => {
                    format!("TLS with Kafka at {bootstrap} failed: {p} (librdkafka: {reason})")
                }
                _ => f.to_string(),
            },
        ),
        Err(f) => CheckResult::new(
            name,
            "kafka",
            Status::Fail,
            no_broker_answered(
                &cfg.kafka.bootstrap_servers,
                oidc_endpoint(&cfg.kafka.client),
                link.token_failure(),
                match link.last_error() {
                    None => f.to_string(),
                    Some(e) => format!("last connection error: {e}"),
                },
            ),
        ),
    });
    if answered {
        out.push(routed_topics(cfg, &sink).await);
        if let Some(plan) = &cfg.kafka.topic_creation {
            out.extend(topic_creation_groups(cfg, plan, link.clone()).await);
        }
        if let Some(line) = transactions(cfg).await {
            out.push(line);
        }
    }
    if let (Some(topic), true) = (cfg.errors.dead_letters(), answered) {
        out.push(dead_letter_topic(cfg, topic, link).await);
    }
    out
}

/// The token endpoint librdkafka asks for OAUTHBEARER tokens itself
/// (`sasl.oauthbearer.method=oidc`), if it does.
fn oidc_endpoint(client: &crate::config::kafka::ClientProperties) -> Option<String> {
    let oauth = client
        .get("sasl.mechanisms")
        .is_some_and(|m| m.eq_ignore_ascii_case("OAUTHBEARER"));
    let oidc = client
        .get("sasl.oauthbearer.method")
        .is_some_and(|m| m.eq_ignore_ascii_case("oidc"));
    (oauth && oidc)
        .then(|| client.get("sasl.oauthbearer.token.endpoint.url"))
        .flatten()
        .map(str::to_string)
}

/// The `kafka` line when no broker answered. Without an OAUTHBEARER token librdkafka asks
/// no broker: a token failure seen (`token_failure`) is the cause to name, not the
/// bootstrap servers; with OIDC and none seen yet (a token endpoint that hangs), both are.
fn no_broker_answered(
    bootstrap: &str,
    oidc: Option<String>,
    token_failure: Option<String>,
    last: String,
) -> String {
    let secs = PROBE_TIMEOUT.as_secs();
    match (token_failure, oidc) {
        (Some(t), endpoint) => format!(
            "no OAUTHBEARER token, so no broker of {bootstrap} was logged in to within \
             {secs}s: {t}; check the token endpoint{} (sasl.oauthbearer.token.endpoint.url: \
             that it answers, with JSON holding an access_token), the client id and secret, \
             and the scope",
            endpoint.map(|e| format!(" {e}")).unwrap_or_default()
        ),
        (None, Some(endpoint)) => format!(
            "no broker of {bootstrap} answered within {secs}s ({last}); no broker is asked \
             before the OIDC token endpoint {endpoint} (sasl.oauthbearer.token.endpoint.url) \
             gives a token: check that it answers, then kafka.bootstrap_servers / \
             --kafka-bootstrap and that the brokers listen there"
        ),
        (None, None) => format!(
            "no broker of {bootstrap} answered within {secs}s ({last}); check \
             kafka.bootstrap_servers / --kafka-bootstrap / the worker file's \
             bootstrap.servers (--kafka-config) and that the brokers listen there"
        ),
    }
}

/// The suffix of the `transactional.id` `check` tries transactions with: the connector's
/// own would fence a running relay (`init_transactions` bumps its epoch).
pub const PROBE_SUFFIX: &str = ".outboxd-check";

/// How long `check` waits for `init_transactions`.
const TXN_PROBE_TIMEOUT: Duration = Duration::from_secs(30);

/// The `kafka transactions` check of an exactly-once connector: `init_transactions` with
/// `<transactional.id>.outboxd-check` ([`PROBE_SUFFIX`]). A cluster without the
/// transactional APIs (Azure Event Hubs standard) or a principal without permission on the
/// transactional id fails it, with the choice to make (`delivery = "at_least_once"`);
/// `None` for at-least-once connectors.
async fn transactions(cfg: &ConnectorConfig) -> Option<CheckResult> {
    use crate::config::{CheckpointConfig, DeliveryMode};
    if !matches!(
        cfg.checkpoint,
        CheckpointConfig::Kafka {
            delivery: DeliveryMode::ExactlyOnce,
            ..
        }
    ) {
        return None;
    }
    let name = cfg.name.as_str();
    let id = format!("{}{PROBE_SUFFIX}", cfg.transactional_id());
    let link = KafkaLink::quiet(name, &cfg.kafka.bootstrap_servers);
    let result = match KafkaSink::new_transactional(&cfg.kafka, name, &id, link) {
        Err(e) => Err(e),
        Ok(sink) => match tokio::time::timeout(TXN_PROBE_TIMEOUT, sink.init_transactions()).await {
            Ok(r) => r,
            Err(_) => {
                return Some(CheckResult::new(
                    name,
                    "kafka transactions",
                    Status::Warn,
                    format!(
                        "init_transactions (transactional.id={id}) did not complete within {}s: the transaction coordinator may still be starting; exactly-once delivery needs it",
                        TXN_PROBE_TIMEOUT.as_secs()
                    ),
                ))
            }
        },
    };
    Some(match result {
        Ok(()) => CheckResult::new(
            name,
            "kafka transactions",
            Status::Pass,
            format!("init_transactions works (transactional.id={id}, beside the connector's own so that a running relay is not fenced): exactly-once delivery can start"),
        ),
        Err(e @ SinkError::TransactionsUnavailable { .. }) => {
            CheckResult::new(name, "kafka transactions", Status::Fail, e.to_string())
        }
        Err(e) => CheckResult::new(
            name,
            "kafka transactions",
            Status::Warn,
            format!("init_transactions (transactional.id={id}) failed: {e}"),
        ),
    })
}

/// The `kafka topics` check: whether the cluster creates a topic events are routed to when
/// it does not exist, and, when `route.topic.replacement` names one topic, whether it exists.
/// Without auto-creation, a missing topic stops the connector at the first event routed
/// there ([`SinkError::TopicMissing`]); the topics of a replacement with `${routedByValue}`
/// cannot be known before the events.
async fn routed_topics(cfg: &ConnectorConfig, sink: &KafkaSink) -> CheckResult {
    let name = cfg.name.as_str();
    if let Some(plan) = &cfg.kafka.topic_creation {
        let groups: Vec<String> = plan
            .groups
            .iter()
            .chain(std::iter::once(&plan.default))
            .map(|g| {
                format!(
                    "{} ({} partitions, replication factor {})",
                    g.name, g.partitions, g.replication_factor
                )
            })
            .collect();
        return CheckResult::new(
            name,
            "kafka topics",
            Status::Pass,
            format!(
                "events go to the topics route.topic.replacement={} names; one that does not \
                 exist is created by outboxd before its first event with its Kafka Connect \
                 topic creation group (first match of {}; -1 = the broker's default), an \
                 existing one is left as it is",
                cfg.router.route_topic_replacement,
                groups.join(", ")
            ),
        );
    }
    let auto = sink.auto_create().await;
    let replacement = &cfg.router.route_topic_replacement;
    let fixed = crate::router::EventRouter::new(&cfg.router)
        .ok()
        .and_then(|r| r.fixed_topic());
    let (status, words) = match fixed {
        Some(topic) => {
            let missing = !sink.missing_among(vec![topic.clone()]).await.is_empty();
            match (missing, &auto) {
                (false, _) => (
                    Status::Pass,
                    format!("route.topic.replacement sends every event to topic {topic}, which exists; {}", auto.describe()),
                ),
                (true, AutoCreate::Off(_)) => (
                    Status::Fail,
                    format!("route.topic.replacement sends every event to topic {topic}, which does not exist, and {}: the first event would stop the connector; create {topic}, or turn auto-creation on (auto.create.topics.enable=true on the brokers, and no kafka.producer allow.auto.create.topics=false)", auto.describe()),
                ),
                (true, AutoCreate::On) => (
                    Status::Pass,
                    format!("route.topic.replacement sends every event to topic {topic}, which does not exist yet: {}, so the first event creates it", auto.describe()),
                ),
                (true, AutoCreate::Unknown(_)) => (
                    Status::Warn,
                    format!("route.topic.replacement sends every event to topic {topic}, which does not exist, and {}: if they are not, create {topic} or the first event stops the connector", auto.describe()),
                ),
            }
        }
        None => match &auto {
            AutoCreate::Off(_) => (
                Status::Pass,
                format!("events go to the topics route.topic.replacement={replacement} names, which cannot be known before the events, and {}: each must exist before its first event, or the connector stops there, naming it", auto.describe()),
            ),
            AutoCreate::On => (
                Status::Pass,
                format!("events go to the topics route.topic.replacement={replacement} names; {}", auto.describe()),
            ),
            AutoCreate::Unknown(_) => (
                Status::Warn,
                format!("events go to the topics route.topic.replacement={replacement} names, and {}: if they are not, each must exist before its first event, or the connector stops there, naming it", auto.describe()),
            ),
        },
    };
    CheckResult::new(name, "kafka topics", status, words)
}

/// One `topic creation group` check per group of `plan`: whether the brokers would create a
/// topic with the group's partition count, replication factor and topic configs (a
/// validate-only `CreateTopics` for a topic name that is never created), so that a refusal
/// (a replication factor above the broker count, a topic config Kafka does not know) shows
/// here rather than at the first event.
async fn topic_creation_groups(
    cfg: &ConnectorConfig,
    plan: &crate::config::topic_creation::TopicCreation,
    link: Arc<KafkaLink>,
) -> Vec<CheckResult> {
    use rdkafka::admin::{AdminOptions, NewTopic, TopicReplication};
    let name = cfg.name.as_str();
    let admin = match crate::pipeline::dead_letter::admin(&cfg.kafka, link) {
        Ok(a) => a,
        Err(f) => {
            return vec![CheckResult::new(
                name,
                "topic creation",
                Status::Warn,
                format!("not validated: {f}"),
            )]
        }
    };
    let opts = AdminOptions::new()
        .validate_only(true)
        .operation_timeout(Some(PROBE_TIMEOUT));
    let mut out = Vec::new();
    for g in plan.groups.iter().chain(std::iter::once(&plan.default)) {
        let label = format!("topic creation group {}", g.name);
        let safe: String = g
            .name
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        let probe = format!("outboxd-check.{name}.{safe}");
        let topic = g.configs.iter().fold(
            NewTopic::new(
                &probe,
                g.partitions,
                TopicReplication::Fixed(g.replication_factor),
            ),
            |t, (k, v)| t.set(k, v),
        );
        let settings = format!(
            "{} partitions, replication factor {}{}",
            g.partitions,
            g.replication_factor,
            if g.configs.is_empty() {
                String::new()
            } else {
                format!(
                    ", {}",
                    g.configs
                        .iter()
                        .map(|(k, v)| format!("{k}={v}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            }
        );
        let answer =
            tokio::time::timeout(PROBE_TIMEOUT, admin.create_topics([&topic], &opts)).await;
        out.push(match answer {
            Ok(Ok(results)) => match results.into_iter().next() {
                Some(Ok(_)) | None => CheckResult::new(
                    name,
                    &label,
                    Status::Pass,
                    format!("the brokers accept its settings ({settings})"),
                ),
                Some(Err((_, code))) if crate::sink::topics::is_refusal(code) => CheckResult::new(
                    name,
                    &label,
                    Status::Fail,
                    format!(
                        "the brokers would refuse to create its topics ({settings}): {code}; \
                         fix the group's settings (topic.creation.{}.*) or grant CREATE; the \
                         first event to a missing topic of this group would stop the connector",
                        g.name
                    ),
                ),
                Some(Err((_, code))) => CheckResult::new(
                    name,
                    &label,
                    Status::Warn,
                    format!("not validated ({settings}): the brokers answered {code}"),
                ),
            },
            Ok(Err(e)) => CheckResult::new(
                name,
                &label,
                Status::Warn,
                format!("not validated ({settings}): {e}"),
            ),
            Err(_) => CheckResult::new(
                name,
                &label,
                Status::Warn,
                format!("not validated ({settings}): no answer within {PROBE_TIMEOUT:?}"),
            ),
        });
    }
    out
}

/// The `dead-letter topic` check: whether the topic takes every dead letter the connector
/// may send there (its `max.message.bytes` against the producer's `message.max.bytes`).
async fn dead_letter_topic(
    cfg: &ConnectorConfig,
    topic: &str,
    link: Arc<KafkaLink>,
) -> CheckResult {
    use crate::pipeline::dead_letter::{self, Limit};
    let name = cfg.name.as_str();
    let label = format!("dead-letter topic {topic}");
    let limit = match dead_letter::admin(&cfg.kafka, link) {
        Ok(admin) => dead_letter::topic_limit(&admin, topic).await,
        Err(f) => Err(f),
    };
    match limit {
        Ok(Limit::Bytes(limit)) => match dead_letter::too_small(&cfg.kafka, topic, limit) {
            Some(f) => CheckResult::new(name, &label, Status::Fail, f.to_string()),
            None => CheckResult::new(
                name,
                &label,
                Status::Pass,
                format!(
                    "max.message.bytes={limit} takes every dead letter (kafka.max_record_bytes={} \
                     plus framing)",
                    cfg.kafka.max_record_bytes
                ),
            ),
        },
        Ok(Limit::Missing) => CheckResult::new(
            name,
            &label,
            Status::Pass,
            "does not exist yet; the connector creates it (one partition, max.message.bytes \
             from kafka.max_record_bytes)",
        ),
        Ok(Limit::Unknown(why)) => CheckResult::new(
            name,
            &label,
            Status::Warn,
            format!(
                "cannot read its max.message.bytes ({why}); it must take kafka.max_record_bytes \
                 plus framing, or a large dead letter stops the connector"
            ),
        ),
        Err(f) => CheckResult::new(name, &label, Status::Fail, f.to_string()),
    }
}

/// The TLS version the first bootstrap broker negotiates: librdkafka does not report the
/// version of its connections, so `check` makes one TLS handshake of its own (rustls, TLS 1.2
/// and 1.3, the same CA, verification and client certificate) and reports what the broker
/// chose. Errors say why no version was learned (never a secret).
async fn probe_tls_version(
    bootstrap: &str,
    settings: &ClientProperties,
    verification: Verification,
) -> Result<String, String> {
    let props: std::collections::BTreeMap<&str, &str> = settings.expose().collect();
    let trust = if let Some(pem) = props.get("ssl.ca.pem") {
        Some(TrustAnchors::from_pem_text("ssl.ca.pem", pem).map_err(|e| e.to_string())?)
    } else if let Some(path) = props.get("ssl.ca.location") {
        Some(
            TrustAnchors::load_pem("ssl.ca.location", std::path::Path::new(path))
                .map_err(|e| e.to_string())?,
        )
    } else {
        None
    };
    let identity = match (
        props.get("ssl.keystore.location"),
        props.get("ssl.certificate.location"),
        props.get("ssl.key.location"),
    ) {
        (Some(ks), _, _) => Some(
            ClientIdentity::from_pkcs12(
                "ssl.keystore.location",
                std::path::Path::new(ks),
                &Secret::new(
                    props
                        .get("ssl.keystore.password")
                        .copied()
                        .unwrap_or_default(),
                ),
            )
            .map_err(|e| e.to_string())?,
        ),
        (None, Some(cert), Some(key)) => Some(
            ClientIdentity::from_pem_files(
                "ssl.certificate.location",
                std::path::Path::new(cert),
                "ssl.key.location",
                std::path::Path::new(key),
            )
            .map_err(|e| e.to_string())?,
        ),
        _ => None,
    };
    let config =
        tls::verify::client_config(verification, trust.as_ref(), identity.as_ref(), "kafka")
            .map_err(|e| e.to_string())?;
    let first = bootstrap
        .split(',')
        .next()
        .unwrap_or_default()
        .trim()
        .to_string();
    let (host, port) = first
        .rsplit_once(':')
        .ok_or_else(|| format!("bootstrap server {first:?} is not host:port"))?;
    let host = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_string();
    let port: u16 = port
        .parse()
        .map_err(|_| format!("bootstrap server {first:?} is not host:port"))?;
    let handshake = async {
        let tcp = tokio::net::TcpStream::connect((host.as_str(), port))
            .await
            .map_err(|e| e.to_string())?;
        let name =
            rustls::pki_types::ServerName::try_from(host.clone()).map_err(|e| e.to_string())?;
        let stream = tokio_rustls::TlsConnector::from(Arc::new(config))
            .connect(name, tcp)
            .await
            .map_err(|e| format!("handshake failed: {e}"))?;
        stream
            .get_ref()
            .1
            .protocol_version()
            .map(tls::version_name)
            .ok_or_else(|| "no version negotiated".to_string())
    };
    tokio::time::timeout(Duration::from_secs(10), handshake)
        .await
        .map_err(|_| "the broker did not complete a TLS handshake within 10 s".to_string())?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_broker_answered_names_the_token_endpoint_when_the_token_failed() {
        let url = "https://idp.example/token".to_string();
        let m = no_broker_answered(
            "k:9094",
            Some(url.clone()),
            Some(
                r#"Failed to retrieve OIDC token from "https://idp.example/token": oops (500)"#
                    .into(),
            ),
            "last connection error: x".into(),
        );
        assert!(
            m.starts_with("no OAUTHBEARER token") && m.contains("(500)") && m.contains(&url),
            "{m}"
        );
        assert!(!m.contains("bootstrap_servers"), "{m}");
        // OIDC, no failure seen yet (an endpoint that hangs): both named.
        let m = no_broker_answered("k:9094", Some(url.clone()), None, "x".into());
        assert!(m.contains(&url) && m.contains("bootstrap_servers"), "{m}");
        let m = no_broker_answered("k:9094", None, None, "x".into());
        assert!(
            !m.contains("OIDC") && m.contains("bootstrap_servers"),
            "{m}"
        );
    }

    #[test]
    fn the_oidc_endpoint_only_with_librdkafka_oidc() {
        let mut c = crate::config::kafka::ClientProperties::default();
        c.set("sasl.oauthbearer.token.endpoint.url", "https://idp/t");
        assert_eq!(oidc_endpoint(&c), None);
        c.set("sasl.mechanisms", "OAUTHBEARER");
        c.set("sasl.oauthbearer.method", "oidc");
        assert_eq!(oidc_endpoint(&c).as_deref(), Some("https://idp/t"));
    }
}
