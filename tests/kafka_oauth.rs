//! SASL OAUTHBEARER end to end (issue 31): a Kafka broker of this test's own whose
//! OAUTHBEARER listener validates RS256 tokens against the JWKS of an OIDC provider the
//! test runs (`tests/common/oauth.rs`: 20 s tokens, re-authentication forced every 10 s),
//! MariaDB as the source.
//!
//! - OIDC client credentials from a Kafka Connect worker file in Java's names, translated
//!   to librdkafka's built-in OIDC: exactly once while tokens are refreshed and the broker
//!   makes every connection re-authenticate, under a writer and after an idle spell longer
//!   than a token lives; `check` says how the relay logs in.
//! - A token file (Kafka's `file:` token endpoint), which outboxd reads itself in every
//!   client's token refresh callback — the path AWS MSK IAM's tokens take: exactly once
//!   while another process keeps replacing the file.
//! - Refusals: a wrong client secret, and tokens the provider makes wrong (expired, for
//!   another audience, unsigned): `run` stops at startup with exit 1 and a message that
//!   names the setting; no client secret or token in any output.
//!
//! - A cluster without transactions for the relay (its principal denied WRITE and DESCRIBE
//!   on its transactional ids by ACL, as close to Azure Event Hubs' standard tier as a Kafka
//!   broker gets): `check` fails its `kafka transactions` line saying to choose
//!   `at_least_once`, `run` refuses exactly-once with that message at once (exit 1, no retry
//!   loop), and at-least-once delivers there.
//!
//! Needs `scripts/services.sh up` (MariaDB, and the Kafka jars in `.state/kafka/libs`).

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::mariadb::MariaDb;
use common::oauth::{secret_of, OAuthKafka, TOKEN_LIFETIME};
use common::relay::{run_cli_with_env, test_dir, Relay};
use common::suite::{self, SourceDb};
use common::tls::write_more;

/// Kafka's OIDC login callback handler.
const OIDC_HANDLER: &str =
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler";

/// The environment of every relay here: the harness's plaintext bootstrap override unset.
const NO_BOOTSTRAP: [(&str, &str); 1] = [("OUTBOXD_KAFKA_BOOTSTRAP", "")];

/// A Kafka Connect worker file for the OAUTHBEARER listener, as a Java client would log in
/// with OIDC client credentials.
fn oidc_worker_file(dir: &Path, broker: &OAuthKafka, client: &str, secret: &str) -> PathBuf {
    let path = dir.join(format!("worker-{client}.properties"));
    let text = format!(
        r#"bootstrap.servers={bootstrap}
group.id=connect-cluster
security.protocol=SASL_PLAINTEXT
sasl.mechanism=OAUTHBEARER
sasl.login.callback.handler.class={OIDC_HANDLER}
sasl.oauthbearer.token.endpoint.url={endpoint}
sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required \
    clientId="{client}" \
    clientSecret="{secret}" \
    scope="kafka";
sasl.login.connect.timeout.ms=10000
"#,
        bootstrap = broker.oauth,
        endpoint = broker.idp.url("/token"),
    );
    std::fs::write(&path, text).unwrap();
    path
}

/// A TOML connector config for `db` on the broker's OAUTHBEARER listener: `kafka` is the
/// `[kafka]` section's body (the listener's address is added), `checkpoint` the
/// `[connectors.checkpoint]` body.
fn connector_config(db: &MariaDb, kafka: &str, checkpoint: &str, file: &str) -> (PathBuf, u16) {
    let (path, port) = suite::write_config_full(db, &db.outbox_table(), "", "", checkpoint, file);
    let text = std::fs::read_to_string(&path).unwrap().replace(
        &format!("bootstrap_servers = \"{}\"\n", common::kafka_bootstrap()),
        "",
    );
    std::fs::write(&path, format!("[kafka]\n{kafka}\n\n{text}")).unwrap();
    (path, port)
}

/// Panics when `text` holds the client secret `secret` or a JWT.
fn assert_no_token_or_secret(what: &str, text: &str, secret: &str) {
    assert!(
        !text.contains(secret),
        "{what} holds the client secret:\n{text}"
    );
    // Every JWT starts with the base64url of `{"`.
    assert!(!text.contains("eyJ"), "{what} holds a token:\n{text}");
    common::tls::assert_no_secret(what, text);
}

/// Writes 5-event transactions of aggregate type `agg` for `for_` (one every `pause`),
/// appending them to `written`.
async fn write_for(
    db: &MariaDb,
    agg: &str,
    for_: Duration,
    pause: Duration,
    written: &mut Vec<common::OutboxEvent>,
) {
    let end = Instant::now() + for_;
    while Instant::now() < end {
        write_more(db, agg, 5, written).await;
        tokio::time::sleep(pause).await;
    }
}

/// How many times the broker re-authenticated a connection (its authenticator's DEBUG
/// lines).
fn reauthentications(broker: &OAuthKafka) -> usize {
    broker
        .log_text()
        .lines()
        .filter(|l| l.contains("Beginning re-authentication"))
        .count()
}

/// OIDC client credentials in Java's names, exactly once through token refreshes and
/// forced re-authentication under a writer, then after an idle spell longer than a token
/// lives (the idle clients' tokens were refreshed too).
#[tokio::test(flavor = "multi_thread")]
async fn oidc_exactly_once_through_token_refresh_and_reauthentication() {
    let broker = OAuthKafka::shared();
    let db = MariaDb::new("oauth_oidc").await;
    let dir = test_dir(db.name());
    let client = "relay-oidc";
    let secret = secret_of(client);
    let worker = oidc_worker_file(&dir, broker, client, &secret);
    let (config, port) = connector_config(&db, "", suite::EXACTLY_ONCE, "oidc.toml");
    let args = [
        "--kafka-config",
        worker.to_str().unwrap(),
        config.to_str().unwrap(),
    ];
    let mut relay = Relay::launch_with_env(&args, port, dir.join("relay.log"), &NO_BOOTSTRAP);
    relay.wait_ready(Duration::from_secs(120));
    let (issued_at_start, reauth_at_start) = (broker.idp.issued(client), reauthentications(broker));
    assert!(
        issued_at_start >= 1,
        "the relay got its tokens from the provider"
    );

    // A writer for three token lifetimes: every token is refreshed at least twice, every
    // connection re-authenticates several times.
    let topic = suite::topic(&db, "Order");
    let mut written = Vec::new();
    write_for(
        &db,
        "Order",
        TOKEN_LIFETIME * 3,
        Duration::from_millis(250),
        &mut written,
    )
    .await;
    // Idle for longer than a token lives, then more.
    tokio::time::sleep(TOKEN_LIFETIME + Duration::from_secs(5)).await;
    write_more(&db, "Order", 20, &mut written).await;
    let got = common::kafka::read_topics(
        std::slice::from_ref(&topic),
        written.len(),
        Duration::from_secs(120),
        Duration::from_secs(3),
    );
    let log = relay.log_text();
    suite::assert_exactly_once(&written, &got, &log);

    let refreshed = broker.idp.issued(client) - issued_at_start;
    assert!(
        refreshed >= 3,
        "tokens were refreshed ({refreshed} new); log:\n{log}"
    );
    let reauthenticated = reauthentications(broker) - reauth_at_start;
    assert!(
        reauthenticated >= 3,
        "the broker re-authenticated the relay's connections ({reauthenticated} times)"
    );
    for bad in [
        "unreachable",
        "SASL authentication",
        "Failed to acquire SASL",
        "OAUTHBEARER cannot log in",
    ] {
        assert!(
            !log.contains(bad),
            "no login trouble ({bad:?}); log:\n{log}"
        );
    }
    assert_eq!(relay.stop(), Some(0), "log:\n{}", relay.log_text());
    assert_no_token_or_secret("the relay's log", &relay.log_text(), &secret);

    // `check` says how the relay logs in, and that transactions work there.
    let (code, out, err) = run_cli_with_env(
        &[
            "check",
            "--kafka-config",
            worker.to_str().unwrap(),
            "--config",
            config.to_str().unwrap(),
        ],
        &NO_BOOTSTRAP,
    );
    assert_eq!(code, 0, "check passes:\n{out}\n{err}");
    let login = format!(
        "kafka tls: security.protocol=sasl_plaintext, SASL OAUTHBEARER with OIDC tokens (client credentials of client {client}, scope kafka) from {}, refreshed by librdkafka",
        broker.idp.url("/token")
    );
    assert!(out.contains(&login), "{login:?} in:\n{out}");
    assert!(
        out.contains("kafka transactions: init_transactions works"),
        "{out}"
    );
    assert_no_token_or_secret("check's output", &format!("{out}\n{err}"), &secret);
}

/// A token file another process keeps current (Kafka's `file:` token endpoint), read in
/// every client's token refresh callback — the path MSK IAM tokens take: exactly once while
/// the file is replaced by tokens that live 20 s.
#[tokio::test(flavor = "multi_thread")]
async fn token_file_exactly_once_through_refreshes() {
    let broker = OAuthKafka::shared();
    let db = MariaDb::new("oauth_file").await;
    let dir = test_dir(db.name());
    let token_path = dir.join("kafka-token.jwt");
    let write_token = |sub: &str| {
        let tmp = token_path.with_extension("tmp");
        std::fs::write(
            &tmp,
            broker.idp.token_for(sub, TOKEN_LIFETIME.as_secs() as i64),
        )
        .unwrap();
        std::fs::rename(&tmp, &token_path).unwrap();
    };
    write_token("relay-file");
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let keeper = {
        let stop = stop.clone();
        let path = token_path.clone();
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                std::thread::sleep(Duration::from_secs(5));
                let tmp = path.with_extension("tmp");
                std::fs::write(&tmp, OAuthKafka::shared().idp.token_for("relay-file", 20)).unwrap();
                std::fs::rename(&tmp, &path).unwrap();
            }
        })
    };
    let kafka = token_file_kafka(&broker.oauth, &token_path);
    let (config, port) = connector_config(&db, &kafka, suite::EXACTLY_ONCE, "file.toml");
    let mut relay = Relay::launch_with_env(
        &[config.to_str().unwrap()],
        port,
        dir.join("relay.log"),
        &NO_BOOTSTRAP,
    );
    relay.wait_ready(Duration::from_secs(120));
    let topic = suite::topic(&db, "Order");
    let mut written = Vec::new();
    write_for(
        &db,
        "Order",
        TOKEN_LIFETIME * 2,
        Duration::from_millis(300),
        &mut written,
    )
    .await;
    tokio::time::sleep(TOKEN_LIFETIME + Duration::from_secs(5)).await;
    write_more(&db, "Order", 20, &mut written).await;
    let got = common::kafka::read_topics(
        std::slice::from_ref(&topic),
        written.len(),
        Duration::from_secs(120),
        Duration::from_secs(3),
    );
    let log = relay.log_text();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    suite::assert_exactly_once(&written, &got, &log);
    for bad in [
        "unreachable",
        "SASL authentication",
        "Failed to acquire SASL",
        "OAUTHBEARER cannot log in",
    ] {
        assert!(
            !log.contains(bad),
            "no login trouble ({bad:?}); log:\n{log}"
        );
    }
    assert_eq!(relay.stop(), Some(0), "log:\n{}", relay.log_text());
    assert_no_token_or_secret(
        "the relay's log",
        &relay.log_text(),
        "no-client-secret-here",
    );
    let _ = keeper.join();
}

/// Logins the provider or the broker refuses stop the relay at startup (exit 1) with the
/// setting named: a wrong client secret; a token already expired; one for another
/// audience; an unsigned one. Nothing secret in the log.
#[tokio::test(flavor = "multi_thread")]
async fn refused_tokens_stop_the_relay_naming_the_setting() {
    let broker = OAuthKafka::shared();
    let db = MariaDb::new("oauth_refused").await;
    let dir = test_dir(db.name());
    let cases: [(&str, String, &[&str]); 4] = [
        (
            "relay-wrong",
            "not-the-secret".to_string(),
            &[
                "the OAUTHBEARER login at Kafka",
                "invalid_client",
                "sasl.oauthbearer.token.endpoint.url",
                "clientSecret",
            ],
        ),
        (
            "expired",
            secret_of("expired"),
            &[
                "the OAUTHBEARER login at Kafka",
                "unexpired token",
                "sasl.oauthbearer.token.endpoint.url",
            ],
        ),
        (
            "wrong-aud",
            secret_of("wrong-aud"),
            &[
                "the OAUTHBEARER login at Kafka",
                "invalid_token",
                "audience and issuer the brokers expect",
            ],
        ),
        (
            "unsigned",
            secret_of("unsigned"),
            &[
                "the OAUTHBEARER login at Kafka",
                "invalid_token",
                "sasl.oauthbearer.token.endpoint.url",
            ],
        ),
    ];
    for (client, secret, expected) in cases {
        let worker = oidc_worker_file(&dir, broker, client, &secret);
        let (config, port) = connector_config(
            &db,
            "",
            suite::EXACTLY_ONCE,
            &format!("refused-{client}.toml"),
        );
        let args = [
            "--kafka-config",
            worker.to_str().unwrap(),
            config.to_str().unwrap(),
        ];
        let mut relay = Relay::launch_with_env(
            &args,
            port,
            dir.join(format!("refused-{client}.log")),
            &NO_BOOTSTRAP,
        );
        let code = relay.wait_exit(Duration::from_secs(90));
        let log = relay.log_text();
        assert_eq!(
            code,
            Some(1),
            "{client}: a definite stop, exit 1; log:\n{log}"
        );
        for e in expected {
            assert!(log.contains(e), "{client}: the log says {e:?}:\n{log}");
        }
        assert_no_token_or_secret("the relay's log", &log, &secret);
    }
    assert!(
        broker.idp.refused("relay-wrong") >= 1,
        "the provider refused the wrong secret"
    );
    // A token file holding an expired token: its writer is not keeping it current; a
    // definite stop (exit 1) naming the file setting, not a retry loop.
    let token_path = dir.join("expired.jwt");
    let expired = broker.idp.token_for("relay-file", -60);
    std::fs::write(&token_path, &expired).unwrap();
    let kafka = token_file_kafka(&broker.oauth, &token_path);
    let (config, port) = connector_config(&db, &kafka, suite::EXACTLY_ONCE, "expired-file.toml");
    let mut relay = Relay::launch_with_env(
        &[config.to_str().unwrap()],
        port,
        dir.join("expired-file.log"),
        &NO_BOOTSTRAP,
    );
    let code = relay.wait_exit(Duration::from_secs(90));
    let log = relay.log_text();
    assert_eq!(code, Some(1), "expired token file: exit 1; log:\n{log}");
    for e in ["expired at", "whatever keeps that file current"] {
        assert!(
            log.contains(e),
            "expired token file: the log says {e:?}:\n{log}"
        );
    }
    assert_no_token_or_secret("the relay's log", &log, &expired);

    // A token endpoint that refuses connections: `check` names it, not only the bootstrap
    // servers (no broker is asked before there is a token).
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let endpoint = format!("http://127.0.0.1:{closed}/token");
    let worker = oidc_worker_file(&dir, broker, "relay-down", "x");
    let text = std::fs::read_to_string(&worker)
        .unwrap()
        .replace(&broker.idp.url("/token"), &endpoint);
    std::fs::write(&worker, text).unwrap();
    let (config, _) = connector_config(&db, "", suite::EXACTLY_ONCE, "check-idp-down.toml");
    let (code, out, err) = common::relay::run_cli_with_env(
        &[
            "check",
            "--kafka-config",
            worker.to_str().unwrap(),
            "--config",
            config.to_str().unwrap(),
        ],
        &NO_BOOTSTRAP,
    );
    let line = out
        .lines()
        .chain(err.lines())
        .find(|l| l.starts_with("[FAIL]") && l.contains(": kafka: "))
        .unwrap_or_else(|| panic!("a failed kafka line:\n{out}\n{err}"))
        .to_string();
    eprintln!("[token endpoint down] {line}");
    assert_ne!(code, 0);
    assert!(
        line.contains(&endpoint) && line.contains("no OAUTHBEARER token"),
        "{line}"
    );
}

/// A principal denied the transactional APIs (ACL: DENY WRITE and DESCRIBE on every
/// transactional id starting `outboxd-<connector>`): `check` fails `kafka transactions` saying to choose
/// at_least_once; `run` with exactly-once stops at once with that message (exit 1, not a
/// retry loop); `run` with at_least_once delivers every event.
#[tokio::test(flavor = "multi_thread")]
async fn a_cluster_without_transactions_refuses_exactly_once_and_says_what_to_choose() {
    let broker = OAuthKafka::shared();
    let db = MariaDb::new("oauth_notxn").await;
    let dir = test_dir(db.name());
    let client = "relay-notxn";
    // Only this connector's transactional ids: an ACL on a resource ends the broker's
    // allow-everyone default for it, for every principal (the other tests run beside).
    let prefix = format!("outboxd-{}", db.name());
    suite::services(&[
        "kafka-tool",
        "AclCommand",
        "--bootstrap-server",
        &broker.plaintext,
        "--add",
        "--deny-principal",
        &format!("User:{client}"),
        "--operation",
        "Write",
        "--operation",
        "Describe",
        "--transactional-id",
        &prefix,
        "--resource-pattern-type",
        "prefixed",
    ]);
    let worker = oidc_worker_file(&dir, broker, client, &secret_of(client));
    let (config, port) = connector_config(&db, "", suite::EXACTLY_ONCE, "notxn.toml");

    let (code, out, err) = run_cli_with_env(
        &[
            "check",
            "--kafka-config",
            worker.to_str().unwrap(),
            "--config",
            config.to_str().unwrap(),
        ],
        &NO_BOOTSTRAP,
    );
    assert_ne!(code, 0, "check fails:\n{out}\n{err}");
    let line = out
        .lines()
        .find(|l| l.contains("kafka transactions"))
        .unwrap_or_else(|| panic!("a kafka transactions line:\n{out}"));
    for part in [
        "FAIL",
        "Kafka transactions are not available to this connector",
        &format!("transactional.id=outboxd-{}.outboxd-check", db.name()),
        "Transactional Id authorization failed",
        "delivery = \"at_least_once\"",
    ] {
        assert!(line.contains(part), "{part:?} in {line}");
    }

    let args = [
        "--kafka-config",
        worker.to_str().unwrap(),
        config.to_str().unwrap(),
    ];
    let mut relay = Relay::launch_with_env(&args, port, dir.join("notxn.log"), &NO_BOOTSTRAP);
    let started = Instant::now();
    let code = relay.wait_exit(Duration::from_secs(120));
    let log = relay.log_text();
    assert_eq!(
        code,
        Some(1),
        "exactly-once is refused, exit 1; log:\n{log}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(90),
        "at once, not after retries"
    );
    for part in [
        "Kafka transactions are not available to this connector",
        &format!("transactional.id=outboxd-{}", db.name()),
        "delivery = \"at_least_once\"",
    ] {
        assert!(log.contains(part), "{part:?} in the log:\n{log}");
    }
    assert!(
        !log.contains("transient failure, restarting"),
        "no retry loop:\n{log}"
    );

    // at_least_once needs no transactions.
    let (config, port) = connector_config(&db, "", suite::AT_LEAST_ONCE_KAFKA, "notxn-alo.toml");
    let args = [
        "--kafka-config",
        worker.to_str().unwrap(),
        config.to_str().unwrap(),
    ];
    let mut relay = Relay::launch_with_env(&args, port, dir.join("notxn-alo.log"), &NO_BOOTSTRAP);
    relay.wait_ready(Duration::from_secs(120));
    let mut written = Vec::new();
    write_more(&db, "Order", 25, &mut written).await;
    let got = common::kafka::read_expecting(&[suite::topic(&db, "Order")], written.len());
    suite::assert_none_lost(&written, &got, &relay.log_text());
    assert_eq!(relay.stop(), Some(0), "log:\n{}", relay.log_text());
}

/// A `[connectors.kafka]` body for the OAuth broker's `bootstrap` with tokens read from the
/// file at `token_path` (`sasl.oauthbearer.token.endpoint.url = file:...`).
fn token_file_kafka(bootstrap: &str, token_path: &std::path::Path) -> String {
    format!(
        "bootstrap_servers = \"{bootstrap}\"\n\"security.protocol\" = \"SASL_PLAINTEXT\"\n\"sasl.mechanism\" = \"OAUTHBEARER\"\n\"sasl.oauthbearer.token.endpoint.url\" = \"file:{}\"\n\"sasl.jaas.config\" = \"org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;\"",
        token_path.display()
    )
}
