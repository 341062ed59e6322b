//! TLS of the MySQL/MariaDB connections, as Debezium's `database.ssl.mode` says (Debezium
//! MySQL connector, "database.ssl.mode"; MySQL Connector/J `sslMode`), through mysql_async's
//! native-tls (OpenSSL) backend.
//!
//! | mode | TLS | server certificate | without TLS on the server |
//! |---|---|---|---|
//! | `disabled` | never | — | plaintext |
//! | `preferred` | when the server offers it | not verified | plaintext |
//! | `required` | always | not verified | error |
//! | `verify_ca` | always | chain verified against the truststore | error |
//! | `verify_identity` | always | chain and host name verified | error |
//!
//! Without `database.ssl.truststore` the verifying modes trust the system's CAs (OpenSSL's
//! default store), as a JVM trusts its default truststore. The truststore's certificates
//! (PKCS12 or PEM) are handed to OpenSSL as DER; the keystore (PKCS12) as it is, with its
//! password.

use mysql_async::prelude::*;
use mysql_async::{ClientIdentity, Conn, SslOpts};

use crate::config::tls::MysqlTlsNames;
use crate::config::{MysqlSslMode, MysqlTlsConfig};
use crate::tls::{store, StoreKind, TlsError, TlsFacts, TrustAnchors, Verification};

/// mysql_async's TLS options for `cfg` (`None`: plaintext). Reads the truststore and checks
/// the keystore now, so a bad file is a definite error naming the setting (as `names` has
/// it).
pub(crate) fn ssl_opts(
    cfg: &MysqlTlsConfig,
    names: &MysqlTlsNames,
) -> Result<Option<SslOpts>, TlsError> {
    let mut opts = SslOpts::default();
    match cfg.mode {
        MysqlSslMode::Disabled => return Ok(None),
        MysqlSslMode::Preferred | MysqlSslMode::Required => {
            opts = opts.with_danger_accept_invalid_certs(true);
        }
        MysqlSslMode::VerifyCa => opts = opts.with_danger_skip_domain_validation(true),
        MysqlSslMode::VerifyIdentity => {}
    }
    if let Some(ts) = &cfg.truststore {
        let anchors = TrustAnchors::load(names.truststore, &ts.path, ts.kind, &ts.password)?;
        opts = opts
            .with_root_certs(
                anchors
                    .certs
                    .iter()
                    .map(|c| c.as_ref().to_vec().into())
                    .collect(),
            )
            .with_disable_built_in_roots(true);
    }
    if let Some(ks) = &cfg.keystore {
        if let Some(kind @ (StoreKind::Pem | StoreKind::Jks)) = ks.kind {
            return Err(match kind {
                StoreKind::Jks => TlsError::Jks {
                    setting: names.keystore.into(),
                    path: ks.path.clone(),
                },
                _ => TlsError::UnknownType {
                    setting: format!("{} type", names.keystore),
                    given: "PEM (the MySQL keystore must be PKCS12, as Debezium's)".into(),
                },
            });
        }
        // Opens it once here: a wrong password or a JKS file fails now, by name.
        store::ClientIdentity::from_pkcs12(names.keystore, &ks.path, &ks.password)?;
        let archive = store::read(names.keystore, &ks.path)?;
        opts = opts.with_client_identity(Some(
            ClientIdentity::new(archive.into()).with_password(ks.password.expose().to_string()),
        ));
    }
    Ok(Some(opts))
}

/// How far `mode` verifies the server.
pub(crate) fn verification(mode: MysqlSslMode) -> Verification {
    match mode {
        MysqlSslMode::VerifyIdentity => Verification::ChainAndHost,
        MysqlSslMode::VerifyCa => Verification::Chain,
        _ => Verification::None,
    }
}

/// The TLS of an open connection, as the server sees it (`Ssl_version` of the session:
/// empty for a plaintext one).
pub async fn facts(conn: &mut Conn, cfg: &MysqlTlsConfig) -> Result<TlsFacts, mysql_async::Error> {
    let row: Option<(String, String)> = conn
        .query_first("SHOW SESSION STATUS LIKE 'Ssl_version'")
        .await?;
    let version = row.map(|(_, v)| v).filter(|v| !v.is_empty());
    Ok(match version {
        None => TlsFacts::plaintext(),
        Some(v) => TlsFacts {
            version: Some(v),
            verified: verification(cfg.mode),
            client_certificate: cfg.keystore.is_some(),
        },
    })
}
