//! TLS and SASL end to end with PostgreSQL: the `hostssl`-only server (SCRAM, and `cert`
//! authentication for `outboxd_mtls`) into Kafka's SASL_SSL listener, configured through a
//! Debezium JSON plus a Kafka Connect worker file and through TOML (with mutual TLS); libpq's
//! `allow` and `prefer`; each refusal stops the relay at startup with a definite error
//! (exit 1) naming the connection, the setting and the cause; no secret in any output.
//!
//! Needs `scripts/services.sh up` (all services, the secured ones included).

mod common;

use std::path::{Path, PathBuf};

use common::postgres::Postgres;
use common::relay::{free_port, run_cli_with_env, test_dir, Relay};
use common::suite::SourceDb;
use common::tls;

fn router_toml(db: &Postgres) -> String {
    format!(
        "[connectors.router]\n\"route.topic.replacement\" = \"{}.${{routedByValue}}\"\n\"table.fields.additional.placement\" = \"event_type:header:eventType\"\n",
        db.name()
    )
}

/// A worker file for the SASL_SSL listener with SASL PLAIN and a PEM truststore.
fn worker_file(dir: &Path) -> PathBuf {
    let path = dir.join("worker.properties");
    let text = format!(
        "bootstrap.servers={}\ngroup.id=connect-cluster\nkey.converter=org.apache.kafka.connect.storage.StringConverter\nvalue.converter=org.apache.kafka.connect.storage.StringConverter\nconfig.storage.topic=connect-configs\nsecurity.protocol=SASL_SSL\nsasl.mechanism=PLAIN\nsasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username=\"{}\" password=\"{}\";\nssl.truststore.type=PEM\nssl.truststore.location={}\n",
        tls::kafka_sasl_bootstrap(),
        tls::sasl_user(),
        tls::sasl_password(),
        tls::file("ca.pem"),
    );
    std::fs::write(&path, text).unwrap();
    path
}

/// Debezium JSON + worker file: PostgreSQL over TLS (verify-full) into SASL_SSL (PLAIN),
/// exactly once across a restart; `check` and `status` report it; no secret printed.
#[tokio::test(flavor = "multi_thread")]
async fn exactly_once_over_tls_and_sasl_from_debezium_json_and_worker_file() {
    let db = Postgres::new_tls("tlsp_dbz").await;
    let dir = test_dir(db.name());
    let worker = worker_file(&dir);
    let (host, port, user, password) = &db.relay;
    let json = serde_json::json!({
        "name": db.name(),
        "config": {
            "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
            "database.hostname": host,
            "database.port": port.to_string(),
            "database.user": user,
            "database.password": password,
            "database.dbname": db.db,
            "slot.name": db.slot,
            "publication.name": db.publication,
            "publication.autocreate.mode": "filtered",
            "plugin.name": "pgoutput",
            "table.include.list": "public.outbox_events",
            "snapshot.mode": "no_data",
            "database.sslmode": "verify-full",
            "database.sslrootcert": tls::file("ca.pem"),
            "status.update.interval.ms": "1000",
            "topic.prefix": "shop",
            "transforms": "outbox",
            "transforms.outbox.type": "io.debezium.transforms.outbox.EventRouter",
            "transforms.outbox.table.field.event.key": "aggregate_id",
            "transforms.outbox.route.by.field": "aggregate_type",
            "transforms.outbox.route.topic.replacement": format!("{}.${{routedByValue}}", db.name()),
            "transforms.outbox.table.fields.additional.placement": "event_type:header:eventType"
        }
    });
    let json_path = dir.join("connector.json");
    std::fs::write(&json_path, serde_json::to_string_pretty(&json).unwrap()).unwrap();
    let metrics = free_port();
    let listen = format!("127.0.0.1:{metrics}");
    let args = [
        "--metrics-listen",
        listen.as_str(),
        "--kafka-config",
        worker.to_str().unwrap(),
        json_path.to_str().unwrap(),
    ];
    let no_env = [("OUTBOXD_KAFKA_BOOTSTRAP", "")];
    let mut relay = Relay::launch_with_env(&args, metrics, dir.join("relay.log"), &no_env);
    tls::exactly_once_across_restart(&db, &mut relay).await;

    let mut cli_args = [
        "check",
        "--kafka-config",
        worker.to_str().unwrap(),
        "--config",
        json_path.to_str().unwrap(),
    ];
    let out = tls::cli_ok(&cli_args, &no_env);
    assert!(
        out.contains(&format!("[ok  ] {}: tls: encrypted (TLSv1.3), server certificate verified against the CA and the host name", db.name())),
        "{out}"
    );
    assert!(out.contains("SASL PLAIN as outboxd"), "{out}");
    cli_args[0] = "status";
    let out = tls::cli_ok(&cli_args, &no_env);
    assert!(out.contains("\"checkpoint\":\"lsn:"), "{out}");
}

/// TOML with the `[kafka]` section and mutual TLS: `outboxd_mtls` logs in by its client
/// certificate alone (pg_hba `cert`), on both the SQL and the replication connection;
/// verify-ca to `127.0.0.1`, an address the certificate does not name; exactly once across
/// a restart.
#[tokio::test(flavor = "multi_thread")]
async fn mutual_tls_from_toml_exactly_once() {
    let mut db = Postgres::new_tls("tlsp_mtls").await;
    db.exec(&format!(
        "GRANT CONNECT ON DATABASE {} TO outboxd_mtls; GRANT SELECT ON outbox_events TO outboxd_mtls; \
         CREATE PUBLICATION {} FOR TABLE outbox_events WITH (publish = 'insert')",
        db.db, db.publication
    ))
    .await;
    db.autocreate = "disabled";
    let (_, port, _, _) = db.relay.clone();
    db.relay = (
        "127.0.0.1".into(),
        port,
        "outboxd_mtls".into(),
        String::new(),
    );
    db.source_extra = format!(
        "[connectors.source.tls]\nmode = \"verify-ca\"\nrootcert = \"{}\"\ncert = \"{}\"\nkey = \"{}\"\n",
        tls::file("ca.pem"),
        tls::file("client.pem"),
        tls::file("client.key"),
    );
    let dir = test_dir(db.name());
    let metrics = free_port();
    let cfg = format!(
        r#"[metrics]
listen = "127.0.0.1:{metrics}"

[kafka]
bootstrap_servers = "{bootstrap}"
security.protocol = "SASL_SSL"
sasl.mechanism = "SCRAM-SHA-512"
sasl.jaas.config = {{ env = "TEST_JAAS" }}
ssl.truststore.location = "{truststore}"
ssl.truststore.password = {{ env = "TEST_TRUSTSTORE_PASSWORD" }}

[[connectors]]
name = "{name}"
{source}
{router}
"#,
        bootstrap = tls::kafka_sasl_bootstrap(),
        truststore = tls::file("truststore.p12"),
        name = db.name(),
        source = db.source_toml(&db.outbox_table()),
        router = router_toml(&db),
    );
    let path = dir.join("connector.toml");
    std::fs::write(&path, cfg).unwrap();
    let jaas = format!(
        r#"org.apache.kafka.common.security.scram.ScramLoginModule required username="{}" password="{}";"#,
        tls::sasl_user(),
        tls::sasl_password()
    );
    let env = [
        ("OUTBOXD_KAFKA_BOOTSTRAP", ""),
        ("TEST_JAAS", jaas.as_str()),
        ("TEST_TRUSTSTORE_PASSWORD", tls::TRUSTSTORE_PASSWORD),
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
        out.contains("[warn]")
            && out.contains("tls: encrypted (TLSv1.3), server certificate verified against the CA (host name not checked), client certificate presented"),
        "{out}"
    );
}

/// A connector on `db` with `tls_body` as `[connectors.source.tls]`, plaintext Kafka and a
/// file checkpoint, written to `file`.
fn config_with_tls(db: &Postgres, tls_body: &str, file: &str) -> PathBuf {
    let dir = test_dir(db.name());
    let cfg = format!(
        "[[connectors]]\nname = \"{name}\"\n{source}\n[connectors.source.tls]\n{tls_body}\n{router}\n[connectors.kafka]\nbootstrap_servers = \"{kafka}\"\n[connectors.checkpoint]\nstore = \"file\"\npath = \"{cp}\"\n",
        name = db.name(),
        source = db.source_toml(&db.outbox_table()),
        router = router_toml(db),
        kafka = common::kafka_bootstrap(),
        cp = dir.join(format!("{file}.checkpoint.json")).display(),
    );
    let path = dir.join(file);
    std::fs::write(&path, cfg).unwrap();
    path
}

/// Each refusal of the issue, PostgreSQL side, and libpq's `allow` / `prefer` falling
/// through to what the server offers (as `check` reports it).
#[tokio::test(flavor = "multi_thread")]
async fn refusals_are_definite_and_libpq_modes_fall_through() {
    let mut db = Postgres::new_tls("tlsp_refuse").await;
    let (host, port, _, _) = db.relay.clone();
    let at = format!("{host}:{port}/{}", db.db);

    let p = config_with_tls(
        &db,
        &format!(
            "mode = \"verify-ca\"\nrootcert = \"{}\"",
            tls::file("other-ca.pem")
        ),
        "wrong-ca.toml",
    );
    tls::assert_config_refused(
        &p,
        &[
            &format!("TLS with PostgreSQL at {at} failed"),
            "certificate verify failed: UnknownIssuer",
            "tls.rootcert",
        ],
    );

    db.relay.0 = "127.0.0.1".into();
    let p = config_with_tls(
        &db,
        &format!(
            "mode = \"verify-full\"\nrootcert = \"{}\"",
            tls::file("ca.pem")
        ),
        "wrong-host.toml",
    );
    tls::assert_config_refused(
        &p,
        &[
            &format!("TLS with PostgreSQL at 127.0.0.1:{port}/{} failed", db.db),
            "not valid for name",
            "verify-full also checks the host name",
        ],
    );

    // libpq's require with a root certificate is verify-ca: the chain is verified (not the
    // host name, so 127.0.0.1 passes), and a CA that did not sign the server's certificate
    // is refused.
    let p = config_with_tls(
        &db,
        &format!("mode = \"require\"\nrootcert = \"{}\"", tls::file("ca.pem")),
        "require-rootcert.toml",
    );
    let out = tls::cli_ok(&["check", "--config", p.to_str().unwrap()], &[]);
    assert!(
        out.contains(&format!("[warn] {}: tls: encrypted (TLSv1.3), server certificate verified against the CA (host name not checked)", db.name())),
        "{out}"
    );
    let p = config_with_tls(
        &db,
        &format!(
            "mode = \"require\"\nrootcert = \"{}\"",
            tls::file("other-ca.pem")
        ),
        "require-wrong-ca.toml",
    );
    tls::assert_config_refused(
        &p,
        &[
            &format!("TLS with PostgreSQL at 127.0.0.1:{port}/{} failed", db.db),
            "certificate verify failed: UnknownIssuer",
        ],
    );

    // libpq's allow: plaintext first, TLS after the hostssl-only server refused it.
    let p = config_with_tls(&db, "mode = \"allow\"", "allow.toml");
    let out = tls::cli_ok(&["check", "--config", p.to_str().unwrap()], &[]);
    assert!(
        out.contains("tls: encrypted (TLSv1.3), server certificate NOT verified"),
        "{out}"
    );
    db.relay.0 = host.clone();

    let p = config_with_tls(&db, "mode = \"disable\"", "plaintext.toml");
    tls::assert_config_refused(
        &p,
        &[
            &format!("PostgreSQL at {at} refused user \"outboxd\" without TLS"),
            "tls.mode",
        ],
    );

    // TLS asked of the plaintext server; prefer falls back to plaintext there.
    let plain = Postgres::new("tlsp_refuse_plain").await;
    let (phost, pport, _, _) = plain.relay.clone();
    let p = config_with_tls(&plain, "mode = \"require\"", "no-tls.toml");
    tls::assert_config_refused(
        &p,
        &[
            &format!(
                "PostgreSQL at {phost}:{pport}/{} does not accept TLS",
                plain.db
            ),
            "tls.mode",
        ],
    );
    let p = config_with_tls(&plain, "mode = \"prefer\"", "prefer.toml");
    let out = tls::cli_ok(&["check", "--config", p.to_str().unwrap()], &[]);
    assert!(
        out.contains("[warn]") && out.contains("tls: not encrypted"),
        "{out}"
    );
}

/// Kafka refusals: a wrong SASL password, a truststore without the brokers' CA, a host name
/// the brokers' certificate does not carry, a plaintext client on the SASL_SSL listener and
/// TLS asked of the PLAINTEXT listener stop `check`, `status` and `checkpoint show` with the
/// cause (not as an unreachable cluster), and `run` with exit 1.
#[tokio::test(flavor = "multi_thread")]
async fn kafka_refusals_stop_with_the_cause() {
    let db = Postgres::new_tls("tlsp_kafka").await;
    let dir = test_dir(db.name());
    let p = dir.join("connector.toml");
    std::fs::write(
        &p,
        format!(
            "[[connectors]]\nname = \"{}\"\n{}\n[connectors.source.tls]\nmode = \"verify-full\"\nrootcert = \"{}\"\n{}",
            db.name(),
            db.source_toml(&db.outbox_table()),
            tls::file("ca.pem"),
            router_toml(&db),
        ),
    )
    .unwrap();
    let jaas = |password: &str| {
        format!(
            "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username=\"{}\" password=\"{password}\";\n",
            tls::sasl_user()
        )
    };
    let (sasl_host, sasl_port) = tls::kafka_sasl_bootstrap()
        .rsplit_once(':')
        .map(|(h, p)| (h.to_string(), p.to_string()))
        .unwrap();
    assert_eq!(sasl_host, "localhost");
    let sasl_ssl = "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-256\n";
    let cases = [
        (
            "wrong-password",
            format!("{sasl_ssl}bootstrap.servers={}\n{}ssl.truststore.location={}\nssl.truststore.password={}\n", tls::kafka_sasl_bootstrap(), jaas("not-the-password"), tls::file("truststore.p12"), tls::TRUSTSTORE_PASSWORD),
            "SASL authentication failed",
        ),
        (
            "wrong-ca",
            format!("{sasl_ssl}bootstrap.servers={}\n{}ssl.truststore.location={}\nssl.truststore.type=PEM\n", tls::kafka_sasl_bootstrap(), jaas(&tls::sasl_password()), tls::file("other-ca.pem")),
            "certificate verify failed",
        ),
        (
            "wrong-host",
            format!("{sasl_ssl}bootstrap.servers=127.0.0.1:{sasl_port}\n{}ssl.truststore.location={}\nssl.truststore.type=PEM\n", jaas(&tls::sasl_password()), tls::file("ca.pem")),
            "certificate verify failed",
        ),
        (
            "plaintext-on-tls",
            format!("security.protocol=PLAINTEXT\nbootstrap.servers={}\n", tls::kafka_sasl_bootstrap()),
            "the listener there expects TLS (an SSL or SASL_SSL listener?)",
        ),
        (
            "tls-on-plaintext",
            format!("security.protocol=SSL\nbootstrap.servers={}\nssl.truststore.location={}\nssl.truststore.type=PEM\n", common::kafka_bootstrap(), tls::file("ca.pem")),
            "the listener there does not speak TLS (a PLAINTEXT or SASL_PLAINTEXT listener?)",
        ),
    ];
    for (name, body, cause) in &cases {
        let worker = dir.join(format!("{name}.properties"));
        std::fs::write(&worker, body).unwrap();
        for cmd in [&["check"][..], &["status"][..], &["checkpoint", "show"][..]] {
            let mut args: Vec<&str> = cmd.to_vec();
            args.extend([
                "--kafka-config",
                worker.to_str().unwrap(),
                "--config",
                p.to_str().unwrap(),
            ]);
            let (code, out, err) = run_cli_with_env(&args, &[("OUTBOXD_KAFKA_BOOTSTRAP", "")]);
            let text = format!("{out}\n{err}");
            assert_eq!(code, 1, "{name}: {cmd:?} fails:\n{text}");
            assert!(
                text.contains(cause),
                "{name}: {cmd:?} names {cause:?}:\n{text}"
            );
            if cmd == ["check"] {
                assert!(
                    out.lines().any(|l| l.starts_with("[FAIL]")
                        && l.contains(": kafka: ")
                        && l.contains(cause)),
                    "{name}: check's kafka line names the cause:\n{out}"
                );
                // A handshake that failed verified nothing: the TLS line must not say so.
                if ["wrong-ca", "wrong-host", "tls-on-plaintext"].contains(name) {
                    assert!(
                        out.lines().any(|l| l.contains(
                            ": kafka tls: the TLS handshake with the first broker failed"
                        )) && !out.lines().any(|l| l.contains(": kafka tls: ")
                            && l.contains("server certificate verified")),
                        "{name}: check's kafka tls line says the handshake failed:\n{out}"
                    );
                }
            }
            assert!(!text.contains("not-the-password"), "{text}");
            tls::assert_no_secret("the command's output", &text);
        }
        tls::assert_refused(
            &[
                "--kafka-config",
                worker.to_str().unwrap(),
                p.to_str().unwrap(),
            ],
            dir.join(format!("{name}.log")),
            &[("OUTBOXD_KAFKA_BOOTSTRAP", "")],
            &[cause],
        );
    }
}
