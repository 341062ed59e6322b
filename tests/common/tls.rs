//! The secured services of `scripts/services.sh` (`mariadb-tls`, `postgres-tls`, Kafka's
//! `SASL_SSL` and `SSL` listeners) and their test certificates in `.state/tls/`, as the
//! `OUTBOXD_TEST_*TLS*` / `OUTBOXD_KAFKA_SASL_*` variables of `services.sh up` name them.

use std::path::PathBuf;
use std::sync::Arc;

use mysql_async::{Opts, OptsBuilder, SslOpts};

/// `.state/tls/` (absolute).
pub fn dir() -> PathBuf {
    std::env::var("OUTBOXD_TEST_TLS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/.state/tls")))
}

/// A file of the test certificates, by name (`ca.pem`, `client.p12`, ...).
pub fn file(name: &str) -> String {
    dir().join(name).display().to_string()
}

/// The password of `server.p12` and `client.p12`.
pub const KEYSTORE_PASSWORD: &str = "keystore-secret";
/// The password of `truststore.p12` / `truststore.jks`.
pub const TRUSTSTORE_PASSWORD: &str = "truststore-secret";
/// The relay user's password on every database.
pub const RELAY_PASSWORD: &str = "outboxd-secret";
/// `outboxd_mtls`'s MariaDB password (it also needs its certificate).
pub const MTLS_PASSWORD: &str = "mtls-secret";

/// Every secret of the test services: none may appear in any output of the relay.
pub fn secrets() -> Vec<String> {
    vec![
        RELAY_PASSWORD.into(),
        MTLS_PASSWORD.into(),
        KEYSTORE_PASSWORD.into(),
        TRUSTSTORE_PASSWORD.into(),
        sasl_password(),
        "admin-secret".into(),
    ]
}

/// Panics when `text` (what the relay printed) holds one of [`secrets`].
pub fn assert_no_secret(what: &str, text: &str) {
    for s in secrets() {
        assert!(
            !text.contains(&s),
            "{what} contains the secret {s:?}:\n{text}"
        );
    }
}

/// Kafka's SASL_SSL listener (`localhost:PORT`).
pub fn kafka_sasl_bootstrap() -> String {
    std::env::var("OUTBOXD_KAFKA_SASL_BOOTSTRAP").unwrap_or_else(|_| "localhost:39094".into())
}

/// The SASL user of Kafka's SASL_SSL listener.
pub fn sasl_user() -> String {
    std::env::var("OUTBOXD_KAFKA_SASL_USER").unwrap_or_else(|_| "outboxd".into())
}

/// Its password.
pub fn sasl_password() -> String {
    std::env::var("OUTBOXD_KAFKA_SASL_PASSWORD").unwrap_or_else(|_| "outboxd-sasl-secret".into())
}

fn url_parts(var: &str, default: &str) -> (String, u16) {
    let url = std::env::var(var).unwrap_or_else(|_| default.into());
    let rest = url.split_once("@").map(|(_, r)| r).unwrap_or(&url);
    let hostport = rest.split('/').next().unwrap_or(rest);
    let (host, port) = hostport.rsplit_once(':').expect("host:port");
    (host.to_string(), port.parse().expect("port"))
}

/// `mariadb-tls`: (host `localhost`, port).
pub fn mariadb_tls_server() -> (String, u16) {
    url_parts(
        "OUTBOXD_TEST_MYSQL_TLS_URL",
        "mysql://outboxd:outboxd-secret@localhost:33307",
    )
}

/// `postgres-tls`: (host `localhost`, port).
pub fn postgres_tls_server() -> (String, u16) {
    url_parts(
        "OUTBOXD_TEST_PG_TLS_URL",
        "postgres://outboxd:outboxd-secret@localhost:35433/outboxd",
    )
}

/// Admin connection options of `mariadb-tls` (TLS verified against the test CA).
pub fn mariadb_admin_opts(db: Option<&str>) -> Opts {
    let url = std::env::var("OUTBOXD_TEST_MYSQL_TLS_ADMIN_URL")
        .unwrap_or_else(|_| "mysql://outboxd_admin:admin-secret@localhost:33307".into());
    let url = match db {
        Some(db) => format!("{url}/{db}"),
        None => url,
    };
    let ssl = SslOpts::default()
        .with_root_certs(vec![PathBuf::from(file("ca.pem")).into()])
        .with_disable_built_in_roots(true);
    OptsBuilder::from_opts(Opts::from_url(&url).expect("OUTBOXD_TEST_MYSQL_TLS_ADMIN_URL"))
        .ssl_opts(Some(ssl))
        .into()
}

/// An admin connection to database `db` of `postgres-tls`, TLS verified against the test CA
/// (negotiated by hand: the SSLRequest, a rustls handshake, tokio-postgres on the stream).
pub async fn postgres_admin_connect(db: &str) -> tokio_postgres::Client {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (host, port) = postgres_tls_server();
    let mut tcp = tokio::net::TcpStream::connect((host.as_str(), port))
        .await
        .expect("connect to postgres-tls: run scripts/services.sh up");
    let mut req = Vec::new();
    req.extend_from_slice(&8u32.to_be_bytes());
    req.extend_from_slice(&80_877_103u32.to_be_bytes());
    tcp.write_all(&req).await.unwrap();
    let mut b = [0u8; 1];
    tcp.read_exact(&mut b).await.unwrap();
    assert_eq!(b[0], b'S', "postgres-tls accepts TLS");
    let mut roots = rustls::RootCertStore::empty();
    let pem = std::fs::read(file("ca.pem")).unwrap();
    for c in rustls::pki_types::pem::PemObject::pem_slice_iter(&pem) {
        let c: rustls::pki_types::CertificateDer<'static> = c.unwrap();
        roots.add(c).unwrap();
    }
    let cfg = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    let name = rustls::pki_types::ServerName::try_from(host.clone()).unwrap();
    let stream = tokio_rustls::TlsConnector::from(Arc::new(cfg))
        .connect(name, tcp)
        .await
        .expect("TLS to postgres-tls");
    let mut pg = tokio_postgres::Config::new();
    pg.host(&host)
        .port(port)
        .user("outboxd_admin")
        .password("admin-secret")
        .dbname(db)
        .ssl_mode(tokio_postgres::config::SslMode::Disable);
    let (client, conn) = pg
        .connect_raw(stream, tokio_postgres::NoTls)
        .await
        .unwrap_or_else(|e| {
            panic!(
                "admin login on postgres-tls: {}",
                super::postgres::db_error(&e)
            )
        });
    tokio::spawn(async move {
        let _ = conn.await;
    });
    client
}

/// Runs `outboxd` with `args` to completion, expecting exit 0 and no secret in its output;
/// returns its stdout.
pub fn cli_ok(args: &[&str], env: &[(&str, &str)]) -> String {
    let (code, out, err) = super::relay::run_cli_with_env(args, env);
    assert_eq!(code, 0, "outboxd {args:?} passes:\n{out}\n{err}");
    assert_no_secret(
        &format!("the output of outboxd {args:?}"),
        &format!("{out}\n{err}"),
    );
    out
}

/// `outboxd run ARGS` must stop at startup: exit 1 within a minute, its log (`log`) holding
/// every one of `expected` and no secret. Returns the log.
pub fn assert_refused(
    args: &[&str],
    log: PathBuf,
    env: &[(&str, &str)],
    expected: &[&str],
) -> String {
    let metrics = super::relay::free_port();
    let listen = format!("127.0.0.1:{metrics}");
    let mut all = vec!["--metrics-listen", listen.as_str()];
    all.extend_from_slice(args);
    let mut relay = super::relay::Relay::launch_with_env(&all, metrics, log, env);
    let code = relay.wait_exit(std::time::Duration::from_secs(60));
    let text = relay.log_text();
    assert_eq!(code, Some(1), "refused with exit 1; log:\n{text}");
    for e in expected {
        assert!(text.contains(e), "the log names {e:?}:\n{text}");
    }
    assert_no_secret("the relay's log", &text);
    text
}

/// Inserts `n` events of aggregate type `agg` after `written` (transactions of 5 events)
/// and adds them to it.
pub async fn write_more<S: super::suite::SourceDb>(
    db: &S,
    agg: &str,
    n: usize,
    written: &mut Vec<super::OutboxEvent>,
) {
    let from = written.len();
    let new = super::suite::sequenced_range(agg, 5, from..from + n, 0);
    for chunk in new.chunks(5) {
        db.insert(chunk, false).await;
    }
    written.extend(new);
}

/// The started relay delivers 20 events, stops cleanly, and after a restart delivers the 15
/// written while it was stopped: the topic holds each of the 35 exactly once. Returns the
/// relay's log (no secret in it).
pub async fn exactly_once_across_restart<S: super::suite::SourceDb>(
    db: &S,
    relay: &mut super::relay::Relay,
) -> String {
    use std::time::Duration;
    let topic = super::suite::topic(db, "Order");
    let mut written = Vec::new();
    relay.wait_ready(Duration::from_secs(90));
    write_more(db, "Order", 20, &mut written).await;
    let got = super::kafka::read_expecting(std::slice::from_ref(&topic), written.len());
    super::suite::assert_records(db, &written, &got);
    assert_eq!(
        relay.stop(),
        Some(0),
        "clean stop; log:\n{}",
        relay.log_text()
    );
    write_more(db, "Order", 15, &mut written).await;
    relay.spawn();
    relay.wait_ready(Duration::from_secs(90));
    let got = super::kafka::read_expecting(std::slice::from_ref(&topic), written.len());
    super::suite::assert_records(db, &written, &got);
    assert_no_secret("/metrics", &relay.metrics());
    assert_eq!(relay.stop(), Some(0));
    let log = relay.log_text();
    assert_no_secret("the relay's log", &log);
    log
}

/// The started relay delivers `n` events of type `agg`, each once, and stops cleanly; no
/// secret in its log.
pub async fn delivers<S: super::suite::SourceDb>(
    db: &S,
    relay: &mut super::relay::Relay,
    agg: &str,
    n: usize,
) {
    relay.wait_ready(std::time::Duration::from_secs(90));
    let mut written = Vec::new();
    write_more(db, agg, n, &mut written).await;
    let got = super::kafka::read_expecting(&[super::suite::topic(db, agg)], n);
    super::suite::assert_records(db, &written, &got);
    assert_eq!(relay.stop(), Some(0));
    assert_no_secret("the relay's log", &relay.log_text());
}

/// [`assert_refused`] for one connector file `path` (log beside it, no extra environment).
pub fn assert_config_refused(path: &std::path::Path, expected: &[&str]) -> String {
    assert_refused(
        &[path.to_str().unwrap()],
        path.with_extension("log"),
        &[],
        expected,
    )
}
