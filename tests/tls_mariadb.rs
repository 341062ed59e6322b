//! TLS and SASL end to end with MariaDB: the TLS-only server (`require_secure_transport=ON`)
//! into Kafka's SASL_SSL listener, configured through a Debezium JSON plus a Kafka Connect
//! worker file and through TOML (with mutual TLS); each refusal stops the relay at startup
//! with a definite error (exit 1) that names the connection, the setting and the cause; no
//! secret appears in any output.
//!
//! Needs `scripts/services.sh up` (all services, the secured ones included).

mod common;

use std::path::{Path, PathBuf};

use common::mariadb::MariaDb;
use common::relay::{free_port, run_cli_with_env, test_dir, Relay};
use common::suite::SourceDb;
use common::tls;

/// `[connectors.router]` of every connector here: topics `<db>.<aggregate_type>`, header
/// `eventType`.
fn router_toml(db: &MariaDb) -> String {
    format!(
        "[connectors.router]\n\"route.topic.replacement\" = \"{}.${{routedByValue}}\"\n\"table.fields.additional.placement\" = \"event_type:header:eventType\"\n",
        db.name()
    )
}

/// A Kafka Connect worker file for the SASL_SSL listener, as Connect users keep them
/// (worker-only keys included, the JAAS entry over continued lines).
fn worker_file(dir: &Path, mechanism: &str, password: &str) -> PathBuf {
    let path = dir.join("worker.properties");
    let text = format!(
        r#"# Kafka Connect worker
bootstrap.servers={bootstrap}
group.id=connect-cluster
key.converter=org.apache.kafka.connect.storage.StringConverter
value.converter=org.apache.kafka.connect.storage.StringConverter
offset.storage.topic=connect-offsets
plugin.path=/usr/share/java
security.protocol=SASL_SSL
sasl.mechanism={mechanism}
sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \
    username="{user}" \
    password="{password}";
ssl.truststore.location={truststore}
ssl.truststore.password={truststore_password}
ssl.truststore.type=PKCS12
ssl.endpoint.identification.algorithm=https
producer.compression.type=gzip
producer.security.protocol=SASL_SSL
"#,
        bootstrap = tls::kafka_sasl_bootstrap(),
        user = tls::sasl_user(),
        truststore = tls::file("truststore.p12"),
        truststore_password = tls::TRUSTSTORE_PASSWORD,
    );
    std::fs::write(&path, text).unwrap();
    path
}

/// The Debezium MariaDB connector JSON for `db` with `extra` keys (TLS, Kafka) on top, written
/// to `dir/file`.
fn debezium_json(db: &MariaDb, dir: &Path, file: &str, extra: serde_json::Value) -> PathBuf {
    let (host, port, user, password) = &db.relay;
    let mut json = serde_json::json!({
        "name": db.name(),
        "config": {
            "connector.class": "io.debezium.connector.mariadb.MariaDbConnector",
            "tasks.max": "1",
            "database.hostname": host,
            "database.port": port.to_string(),
            "database.user": user,
            "database.password": password,
            "database.server.id": common::unique_server_id().to_string(),
            "topic.prefix": "shop",
            "table.include.list": db.outbox_table(),
            "snapshot.mode": "no_data",
            "schema.history.internal.kafka.bootstrap.servers": "ignored:1",
            "schema.history.internal.kafka.topic": "schema-changes.shop",
            // Plain keys and values, as the stock-converter default would wrap them.
            "key.converter": "org.apache.kafka.connect.storage.StringConverter",
            "value.converter": "org.apache.kafka.connect.storage.StringConverter",
            "transforms": "outbox",
            "transforms.outbox.type": "io.debezium.transforms.outbox.EventRouter",
            "transforms.outbox.table.field.event.key": "aggregate_id",
            "transforms.outbox.route.by.field": "aggregate_type",
            "transforms.outbox.route.topic.replacement": format!("{}.${{routedByValue}}", db.name()),
            "transforms.outbox.table.fields.additional.placement": "event_type:header:eventType"
        }
    });
    let config = json["config"].as_object_mut().unwrap();
    for (k, v) in extra.as_object().unwrap() {
        config.insert(k.clone(), v.clone());
    }
    let path = dir.join(file);
    std::fs::write(&path, serde_json::to_string_pretty(&json).unwrap()).unwrap();
    path
}

/// Debezium JSON + worker file (`--kafka-config`), no `OUTBOXD_KAFKA_BOOTSTRAP`: MariaDB over
/// TLS (verify_identity, PKCS12 truststore) into SASL_SSL (SCRAM-SHA-512), exactly once
/// across a restart; `check` and `status` say how each connection is secured, and nothing
/// the relay printed holds a secret.
#[tokio::test(flavor = "multi_thread")]
async fn exactly_once_over_tls_and_sasl_from_debezium_json_and_worker_file() {
    let db = MariaDb::new_tls("tls_dbz").await;
    let dir = test_dir(db.name());
    let worker = worker_file(&dir, "SCRAM-SHA-512", &tls::sasl_password());
    // verify_identity against the PKCS12 truststore.
    let json = debezium_json(
        &db,
        &dir,
        "connector.json",
        serde_json::json!({
            "database.ssl.mode": "verify_identity",
            "database.ssl.truststore": tls::file("truststore.p12"),
            "database.ssl.truststore.password": tls::TRUSTSTORE_PASSWORD,
        }),
    );
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let args = [
        "--metrics-listen",
        listen.as_str(),
        "--kafka-config",
        worker.to_str().unwrap(),
        json.to_str().unwrap(),
    ];
    let no_env = [("OUTBOXD_KAFKA_BOOTSTRAP", "")];
    let mut relay = Relay::launch_with_env(&args, port, dir.join("relay.log"), &no_env);
    let log = tls::exactly_once_across_restart(&db, &mut relay).await;
    assert!(
        log.contains("Kafka Connect worker setting(s) ignored, with no role in outboxd")
            && log.contains("plugin.path"),
        "worker-only keys are reported (one INFO line):\n{log}"
    );

    let mut cli_args = [
        "check",
        "--kafka-config",
        worker.to_str().unwrap(),
        "--config",
        json.to_str().unwrap(),
    ];
    let out = tls::cli_ok(&cli_args, &no_env);
    assert!(
        out.contains(&format!("[ok  ] {}: tls: encrypted (TLSv1.3), server certificate verified against the CA and the host name", db.name())),
        "check reports the database TLS:\n{out}"
    );
    assert!(
        out.contains(
            "kafka tls: security.protocol=sasl_ssl, SASL SCRAM-SHA-512 as outboxd, encrypted"
        ),
        "check reports the Kafka security:\n{out}"
    );
    cli_args[0] = "status";
    let out = tls::cli_ok(&cli_args, &no_env);
    assert!(out.contains("\"checkpoint\":\"mariadb_gtid:"), "{out}");
}

/// TOML with the `[kafka]` section (SCRAM-SHA-256, the password from the environment, the CA
/// as PEM) and mutual TLS to MariaDB: `outboxd_mtls` needs its client certificate (a PKCS12
/// keystore); verify_ca to `127.0.0.1`, an address the certificate does not name; exactly
/// once across a restart.
#[tokio::test(flavor = "multi_thread")]
async fn mutual_tls_from_toml_exactly_once() {
    let mut db = MariaDb::new_tls("tls_mtls").await;
    let (_, port, _, _) = db.relay.clone();
    db.relay = (
        "127.0.0.1".into(),
        port,
        "outboxd_mtls".into(),
        tls::MTLS_PASSWORD.into(),
    );
    db.source_extra = format!(
        "[connectors.source.tls]\nmode = \"verify_ca\"\ntruststore = \"{}\"\nkeystore = \"{}\"\nkeystore_password_env = \"TEST_KEYSTORE_PASSWORD\"\n",
        tls::file("ca.pem"),
        tls::file("client.p12"),
    );
    let dir = test_dir(db.name());
    let metrics = free_port();
    let cfg = format!(
        r#"[metrics]
listen = "127.0.0.1:{metrics}"

[kafka]
bootstrap_servers = "{bootstrap}"
"security.protocol" = "SASL_SSL"
"sasl.mechanism" = "SCRAM-SHA-256"
"sasl.username" = "{user}"
"sasl.password" = {{ env = "TEST_SASL_PASSWORD" }}
"ssl.ca.location" = "{ca}"

[[connectors]]
name = "{name}"
{source}
{router}
"#,
        bootstrap = tls::kafka_sasl_bootstrap(),
        user = tls::sasl_user(),
        ca = tls::file("ca.pem"),
        name = db.name(),
        source = db.source_toml(&db.outbox_table()),
        router = router_toml(&db),
    );
    let path = dir.join("connector.toml");
    std::fs::write(&path, cfg).unwrap();
    let sasl = tls::sasl_password();
    let env = [
        ("OUTBOXD_KAFKA_BOOTSTRAP", ""),
        ("TEST_SASL_PASSWORD", sasl.as_str()),
        ("TEST_KEYSTORE_PASSWORD", tls::KEYSTORE_PASSWORD),
    ];
    let mut relay = Relay::launch_with_env(
        &[path.to_str().unwrap()],
        metrics,
        dir.join("relay.log"),
        &env,
    );
    tls::exactly_once_across_restart(&db, &mut relay).await;
    let out = tls::cli_ok(&["check", "--config", path.to_str().unwrap()], &env);
    assert!(
        out.contains("tls: encrypted (TLSv1.3), server certificate verified against the CA (host name not checked), client certificate presented"),
        "check warns that verify_ca does not check the host name:\n{out}"
    );
    assert!(out.contains("[warn]") && out.contains(": tls: "), "{out}");
}

/// A connector on `db` with `tls` as its `[connectors.source.tls]` body and `kafka` as the
/// whole Kafka part, written to `file`.
fn refusal_config(db: &MariaDb, tls_body: &str, kafka: &str, file: &str) -> PathBuf {
    let dir = test_dir(db.name());
    let cfg = format!(
        "[[connectors]]\nname = \"{name}\"\n{source}\n[connectors.source.tls]\n{tls_body}\n{router}\n{kafka}\n[connectors.checkpoint]\nstore = \"file\"\npath = \"{cp}\"\n",
        name = db.name(),
        source = db.source_toml(&db.outbox_table()),
        router = router_toml(db),
        cp = dir.join(format!("{file}.checkpoint.json")).display(),
    );
    let path = dir.join(file);
    std::fs::write(&path, cfg).unwrap();
    path
}

/// Each refusal of the issue, MariaDB side: wrong CA, wrong host name, plaintext to the
/// TLS-only server, TLS asked of the plaintext server; and a wrong SASL password.
#[tokio::test(flavor = "multi_thread")]
async fn refusals_are_definite_and_say_why() {
    let plain_kafka = format!(
        "[connectors.kafka]\nbootstrap_servers = \"{}\"\n",
        common::kafka_bootstrap()
    );
    // verify_identity against the test CA.
    let verified = format!(
        "mode = \"verify_identity\"\ntruststore = \"{}\"",
        tls::file("ca.pem")
    );
    let mut db = MariaDb::new_tls("tls_refuse").await;
    let (host, port, _, _) = db.relay.clone();

    // A CA that did not sign the server's certificate.
    let p = refusal_config(
        &db,
        &format!(
            "mode = \"verify_ca\"\ntruststore = \"{}\"",
            tls::file("other-ca.pem")
        ),
        &plain_kafka,
        "wrong-ca.toml",
    );
    tls::assert_config_refused(
        &p,
        &[
            &format!("TLS with MySQL/MariaDB at {host}:{port} failed"),
            "certificate verify failed",
            "tls.truststore",
        ],
    );

    // The right CA, but 127.0.0.1 is not a name the certificate is issued for.
    db.relay.0 = "127.0.0.1".into();
    let p = refusal_config(&db, &verified, &plain_kafka, "wrong-host.toml");
    tls::assert_config_refused(
        &p,
        &[
            &format!("TLS with MySQL/MariaDB at 127.0.0.1:{port} failed"),
            "certificate verify failed",
            "verify_identity also checks the host name",
        ],
    );
    db.relay.0 = host.clone();

    // Plaintext to require_secure_transport=ON: MariaDB says "access denied".
    let p = refusal_config(&db, "mode = \"disabled\"", &plain_kafka, "plaintext.toml");
    tls::assert_config_refused(
        &p,
        &[
            &format!("MySQL/MariaDB at {host}:{port} refused user \"outboxd\": access denied"),
            "require_secure_transport",
            "tls.mode",
        ],
    );

    // TLS asked of the plaintext server.
    let plain = MariaDb::new("tls_refuse_plain").await;
    let (phost, pport, _, _) = plain.relay.clone();
    let p = refusal_config(&plain, "mode = \"required\"", &plain_kafka, "no-tls.toml");
    tls::assert_config_refused(
        &p,
        &[
            &format!("MySQL/MariaDB at {phost}:{pport} does not offer TLS"),
            "tls.mode",
        ],
    );

    // Debezium's modes that encrypt without verifying, as `check` reports them: `preferred`
    // (the default) and `required` on the TLS-only server are encrypted, with a warning that
    // the server is not verified; `preferred` on the plaintext server falls back to no TLS.
    for (server, mode, facts) in [
        (
            &db,
            "preferred",
            "tls: encrypted (TLSv1.3), server certificate NOT verified",
        ),
        (
            &db,
            "required",
            "tls: encrypted (TLSv1.3), server certificate NOT verified",
        ),
        (&plain, "preferred", "tls: not encrypted"),
    ] {
        let file = format!("{mode}-{}.toml", server.name());
        let p = refusal_config(server, &format!("mode = \"{mode}\""), &plain_kafka, &file);
        let out = tls::cli_ok(&["check", "--config", p.to_str().unwrap()], &[]);
        assert!(
            out.contains(&format!("[warn] {}: {facts}", server.name())),
            "{mode} on {}: {out}",
            server.name()
        );
        assert!(
            out.contains(&format!("[ok  ] {}: connect:", server.name())),
            "{out}"
        );
    }

    // A JKS truststore, for the database and for Kafka: refused at startup with the keytool
    // command that converts it.
    let jks = tls::file("truststore.jks");
    let p = refusal_config(
        &db,
        &format!("mode = \"verify_identity\"\ntruststore = \"{jks}\""),
        &plain_kafka,
        "jks.toml",
    );
    tls::assert_config_refused(
        &p,
        &[
            "is a JKS keystore, which outboxd does not read",
            &format!("keytool -importkeystore -srckeystore {jks} -destkeystore {jks}.p12 -deststoretype PKCS12"),
        ],
    );
    let worker = test_dir(db.name()).join("jks.properties");
    std::fs::write(
        &worker,
        format!(
            "bootstrap.servers={}\nsecurity.protocol=SSL\nssl.truststore.location={jks}\nssl.truststore.password={}\n",
            tls::kafka_sasl_bootstrap(),
            tls::TRUSTSTORE_PASSWORD
        ),
    )
    .unwrap();
    let p = refusal_config(&db, &verified, "", "jks-kafka.toml");
    tls::assert_refused(
        &[
            "--kafka-config",
            worker.to_str().unwrap(),
            p.to_str().unwrap(),
        ],
        p.with_extension("log"),
        &[("OUTBOXD_KAFKA_BOOTSTRAP", "")],
        &[
            "ssl.truststore.location",
            "is a JKS keystore",
            "keytool -importkeystore",
        ],
    );

    // A wrong SASL password: at-least-once with a file checkpoint, so nothing but the
    // record producer talks to Kafka before the source starts.
    let wrong_sasl = format!(
        "[kafka]\nbootstrap_servers = \"{}\"\n\"security.protocol\" = \"SASL_SSL\"\n\"sasl.mechanism\" = \"SCRAM-SHA-512\"\n\"sasl.jaas.config\" = 'org.apache.kafka.common.security.scram.ScramLoginModule required username=\"{}\" password=\"wrong-sasl-password\";'\n\"ssl.truststore.location\" = \"{}\"\n\"ssl.truststore.password\" = \"{}\"\n",
        tls::kafka_sasl_bootstrap(),
        tls::sasl_user(),
        tls::file("truststore.p12"),
        tls::TRUSTSTORE_PASSWORD,
    );
    let p = refusal_config(&db, &verified, "", "wrong-sasl.toml");
    let text = std::fs::read_to_string(&p).unwrap();
    std::fs::write(&p, format!("{wrong_sasl}\n{text}")).unwrap();
    let log = tls::assert_refused(
        &[p.to_str().unwrap()],
        p.with_extension("log"),
        &[("OUTBOXD_KAFKA_BOOTSTRAP", "")],
        &[
            "SASL authentication failed at",
            &tls::kafka_sasl_bootstrap(),
            "sasl.jaas.config",
        ],
    );
    assert!(!log.contains("wrong-sasl-password"), "{log}");
}

/// Kafka's SSL listener that requires client certificates: the worker file's PKCS12
/// keystore reaches every client (the exactly-once producer, the checkpoint store, `check`),
/// and so does the same identity as a PEM keystore.
#[tokio::test(flavor = "multi_thread")]
async fn kafka_mutual_tls_with_pkcs12_and_pem_keystores() {
    let db = MariaDb::new("tls_kafka_mtls").await;
    let dir = test_dir(db.name());
    let ssl =
        std::env::var("OUTBOXD_KAFKA_SSL_BOOTSTRAP").unwrap_or_else(|_| "localhost:39095".into());
    let worker = dir.join("worker.properties");
    std::fs::write(
        &worker,
        format!(
            "bootstrap.servers={ssl}\nsecurity.protocol=SSL\nssl.truststore.location={}\nssl.truststore.password={}\nssl.keystore.location={}\nssl.keystore.password={}\nssl.key.password={}\n",
            tls::file("truststore.p12"),
            tls::TRUSTSTORE_PASSWORD,
            tls::file("client.p12"),
            tls::KEYSTORE_PASSWORD,
            tls::KEYSTORE_PASSWORD,
        ),
    )
    .unwrap();
    let metrics = free_port();
    let path = dir.join("connector.toml");
    std::fs::write(
        &path,
        format!(
            "[metrics]\nlisten = \"127.0.0.1:{metrics}\"\n\n[[connectors]]\nname = \"{}\"\n{}\n{}",
            db.name(),
            db.source_toml(&db.outbox_table()),
            router_toml(&db),
        ),
    )
    .unwrap();
    // The same client identity as a PEM keystore (Java's `ssl.keystore.type=PEM`: the
    // private key and the certificate in one file).
    let pem = dir.join("keystore.pem");
    std::fs::write(
        &pem,
        format!(
            "{}{}",
            std::fs::read_to_string(tls::file("client.key")).unwrap(),
            std::fs::read_to_string(tls::file("client.pem")).unwrap()
        ),
    )
    .unwrap();
    let pem_worker = dir.join("worker-pem.properties");
    std::fs::write(
        &pem_worker,
        format!(
            "bootstrap.servers={ssl}\nsecurity.protocol=SSL\nssl.truststore.location={}\nssl.truststore.type=PEM\nssl.keystore.type=PEM\nssl.keystore.location={}\n",
            tls::file("ca.pem"),
            pem.display(),
        ),
    )
    .unwrap();
    let no_env = [("OUTBOXD_KAFKA_BOOTSTRAP", "")];
    for (worker, log, aggregate, n) in [
        (&worker, "relay.log", "Invoice", 6),
        (&pem_worker, "relay-pem.log", "Receipt", 4),
    ] {
        let worker = worker.to_str().unwrap();
        let out = tls::cli_ok(
            &[
                "check",
                "--kafka-config",
                worker,
                "--config",
                path.to_str().unwrap(),
            ],
            &no_env,
        );
        assert!(
            out.contains("kafka tls: security.protocol=ssl, encrypted (TLSv1.3")
                && out.contains("client certificate presented")
                && out.contains(&format!("kafka: {ssl} reachable")),
            "{worker}: {out}"
        );
        let mut relay = Relay::launch_with_env(
            &["--kafka-config", worker, path.to_str().unwrap()],
            metrics,
            dir.join(log),
            &no_env,
        );
        tls::delivers(&db, &mut relay, aggregate, n).await;
    }
}

/// A Debezium JSON whose `producer.override.*` keys alone secure Kafka (SASL_SSL, SCRAM,
/// PKCS12 truststore; no worker file), addressed as `127.0.0.1`, a name the brokers'
/// certificate does not carry: with `ssl.endpoint.identification.algorithm` empty (Java's
/// "no host name check") it delivers and `check` warns; with the default it is refused.
#[tokio::test(flavor = "multi_thread")]
async fn debezium_producer_overrides_without_host_name_check() {
    let db = MariaDb::new("tls_dbz_override").await;
    let dir = test_dir(db.name());
    let port = tls::kafka_sasl_bootstrap()
        .rsplit_once(':')
        .map(|(_, p)| p.to_string())
        .unwrap();
    let mut overrides = serde_json::json!({
        "producer.override.bootstrap.servers": format!("127.0.0.1:{port}"),
        "producer.override.security.protocol": "SASL_SSL",
        "producer.override.sasl.mechanism": "SCRAM-SHA-512",
        "producer.override.sasl.jaas.config": format!(
            "org.apache.kafka.common.security.scram.ScramLoginModule required username=\"{}\" password=\"{}\";",
            tls::sasl_user(),
            tls::sasl_password()
        ),
        "producer.override.ssl.truststore.location": tls::file("truststore.p12"),
        "producer.override.ssl.truststore.password": tls::TRUSTSTORE_PASSWORD,
        "producer.override.ssl.endpoint.identification.algorithm": "",
    });
    let json = debezium_json(&db, &dir, "no-host-check.json", overrides.clone());
    let no_env = [("OUTBOXD_KAFKA_BOOTSTRAP", "")];
    let out = tls::cli_ok(&["check", "--config", json.to_str().unwrap()], &no_env);
    assert!(
        out.contains("[warn]")
            && out.contains(
                "kafka tls: security.protocol=sasl_ssl, SASL SCRAM-SHA-512 as outboxd, encrypted"
            )
            && out.contains("server certificate verified against the CA (host name not checked)")
            && out.contains(&format!("kafka: 127.0.0.1:{port} reachable")),
        "{out}"
    );
    let metrics = free_port();
    let listen = format!("127.0.0.1:{metrics}");
    let mut relay = Relay::launch_with_env(
        &["--metrics-listen", listen.as_str(), json.to_str().unwrap()],
        metrics,
        dir.join("relay.log"),
        &no_env,
    );
    // The Debezium series carry topic.prefix as their `name`, as Debezium's MBeans do.
    relay.wait_ready(std::time::Duration::from_secs(90));
    let text = relay.metrics();
    assert!(
        text.contains(
            "debezium_metrics_Connected{plugin=\"mariadb\",name=\"shop\",context=\"streaming\"} 1"
        ),
        "{text}"
    );
    tls::delivers(&db, &mut relay, "Shipment", 5).await;

    // The default (https) checks the host name: 127.0.0.1 is not in the certificate.
    overrides
        .as_object_mut()
        .unwrap()
        .remove("producer.override.ssl.endpoint.identification.algorithm");
    let json = debezium_json(&db, &dir, "host-check.json", overrides);
    let (code, out, err) =
        run_cli_with_env(&["check", "--config", json.to_str().unwrap()], &no_env);
    assert_eq!(code, 1, "{out}\n{err}");
    assert!(
        out.lines().any(|l| l.starts_with("[FAIL]")
            && l.contains(": kafka: TLS with Kafka at 127.0.0.1:")
            && l.contains("certificate verify failed")),
        "{out}"
    );
    tls::assert_no_secret("check's output", &format!("{out}\n{err}"));
}
