//! TLS of the PostgreSQL connections with libpq's semantics for each `sslmode` (PostgreSQL
//! documentation, 34.19 "SSL Support": 34.19.1 and table 34.1), which pgjdbc — so Debezium's
//! `database.sslmode` — follows.
//!
//! | sslmode | first attempt | then | server certificate |
//! |---|---|---|---|
//! | `disable` | plaintext | — | — |
//! | `allow` | plaintext | TLS, if the server refused the plaintext connection (SQLSTATE 28000: `pg_hba.conf` has only `hostssl` for us) | as `require` |
//! | `prefer` | TLS if the server accepts the SSLRequest, else plaintext on the same connection | — | as `require` |
//! | `require` | TLS, or an error | — | verified against `sslrootcert` when one is set (libpq: "the same as verify-ca"), else not |
//! | `verify-ca` | TLS, or an error | — | chain verified against `sslrootcert` |
//! | `verify-full` | TLS, or an error | — | chain and host name verified |
//!
//! The SQL connection is negotiated here (SSLRequest, then a rustls handshake, then
//! tokio-postgres on the stream) so every step fails with a typed error and the TLS version
//! is known. The replication connection then uses what the SQL connection settled (TLS or
//! not) through pgwire-replication's own rustls setup ([`replication_tls`]).

use std::sync::Arc;

use pgwire_replication::TlsConfig;
use rustls::pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::config::tls::PgTlsNames;
use crate::config::{PgSslMode, PgTlsConfig, RootCert};
use crate::tls::{self, ClientIdentity, TlsError, TlsFacts, TrustAnchors, Verification};

/// libpq's `SSLRequest` code (PostgreSQL protocol, 55.2.10 "SSL Session Encryption").
const SSL_REQUEST_CODE: u32 = 80_877_103;

/// One connection attempt.
#[derive(Clone)]
pub(crate) enum Attempt {
    /// No TLS.
    Plain,
    /// TLS with this configuration.
    Tls {
        /// How far the server is verified.
        verification: Verification,
        /// The rustls configuration.
        config: Arc<rustls::ClientConfig>,
        /// `prefer`: plaintext when the server declines the SSLRequest.
        or_plain: bool,
        /// A client certificate is presented.
        client_certificate: bool,
    },
}

/// The attempts an `sslmode` makes: the first, and (`allow`) the one after the server
/// refused a plaintext connection.
pub(crate) struct Plan {
    pub(crate) first: Attempt,
    pub(crate) after_plaintext_refused: Option<Attempt>,
}

/// The attempts for `cfg`. Reads `sslrootcert`, `sslcert` and `sslkey` now: a bad file is a
/// definite error naming the setting (as `names` has it).
pub(crate) fn plan(cfg: &PgTlsConfig, names: &PgTlsNames) -> Result<Plan, TlsError> {
    if cfg.mode == PgSslMode::Disable {
        return Ok(Plan {
            first: Attempt::Plain,
            after_plaintext_refused: None,
        });
    }
    tls::install_crypto_provider();
    let verification = match cfg.mode {
        PgSslMode::VerifyFull => Verification::ChainAndHost,
        PgSslMode::VerifyCa => Verification::Chain,
        // libpq verifies in the weaker modes as well once a root certificate is configured.
        _ if cfg.rootcert.is_some() => Verification::Chain,
        _ => Verification::None,
    };
    let trust = match &cfg.rootcert {
        Some(RootCert::File(p)) => Some(TrustAnchors::load_pem(names.rootcert, p)?),
        Some(RootCert::System) => None,
        None if verification != Verification::None => {
            return Err(TlsError::Empty {
                setting: names.rootcert.into(),
                path: "(not set)".into(),
                what: "CA certificate: sslmode verify-ca and verify-full need it (a PEM file of the CA certificates, or `system` for the Mozilla roots)",
            })
        }
        None => None,
    };
    let identity = match (&cfg.cert, &cfg.key) {
        (Some(c), Some(k)) => Some(ClientIdentity::from_pem_files(names.cert, c, names.key, k)?),
        _ => None,
    };
    let config = Arc::new(tls::verify::client_config(
        verification,
        trust.as_ref(),
        identity.as_ref(),
        names.mode,
    )?);
    let tls = |or_plain| Attempt::Tls {
        verification,
        config: config.clone(),
        or_plain,
        client_certificate: identity.is_some(),
    };
    Ok(match cfg.mode {
        PgSslMode::Allow => Plan {
            first: Attempt::Plain,
            after_plaintext_refused: Some(tls(false)),
        },
        PgSslMode::Prefer => Plan {
            first: tls(true),
            after_plaintext_refused: None,
        },
        _ => Plan {
            first: tls(false),
            after_plaintext_refused: None,
        },
    })
}

/// A byte stream tokio-postgres can run on: plaintext or TLS.
pub(crate) trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

/// What the TLS negotiation of a SQL connection settled.
#[derive(Debug, Clone)]
pub struct Negotiated {
    /// Version, verification, client certificate.
    pub facts: TlsFacts,
    /// The DNS names the server's certificate is issued for (empty without TLS).
    pub server_dns_names: Vec<String>,
}

/// Why a negotiation failed.
pub(crate) enum NegotiationError {
    /// The socket failed.
    Io(std::io::Error),
    /// The server declined the SSLRequest and the mode needs TLS.
    Declined,
    /// The server answered the SSLRequest with something else than `S` or `N`.
    Unexpected(u8),
    /// The handshake failed (verification, protocol).
    Handshake(std::io::Error),
}

/// Sends the SSLRequest on `tcp` and runs the handshake as `attempt` says.
pub(crate) async fn negotiate(
    mut tcp: TcpStream,
    attempt: &Attempt,
    host: &str,
) -> Result<(Box<dyn Io>, Negotiated), NegotiationError> {
    let plaintext = Negotiated {
        facts: TlsFacts::plaintext(),
        server_dns_names: Vec::new(),
    };
    let Attempt::Tls {
        verification,
        config,
        or_plain,
        client_certificate,
    } = attempt
    else {
        return Ok((Box::new(tcp), plaintext));
    };
    let mut request = [0u8; 8];
    request[..4].copy_from_slice(&8u32.to_be_bytes());
    request[4..].copy_from_slice(&SSL_REQUEST_CODE.to_be_bytes());
    tcp.write_all(&request)
        .await
        .map_err(NegotiationError::Io)?;
    let mut answer = [0u8; 1];
    tcp.read_exact(&mut answer)
        .await
        .map_err(NegotiationError::Io)?;
    match answer[0] {
        b'S' => {}
        b'N' if *or_plain => return Ok((Box::new(tcp), plaintext)),
        b'N' => return Err(NegotiationError::Declined),
        other => return Err(NegotiationError::Unexpected(other)),
    }
    let name = ServerName::try_from(host.to_string()).map_err(|e| {
        NegotiationError::Handshake(std::io::Error::new(std::io::ErrorKind::InvalidInput, e))
    })?;
    let stream = tokio_rustls::TlsConnector::from(config.clone())
        .connect(name, tcp)
        .await
        .map_err(NegotiationError::Handshake)?;
    let (_, conn) = stream.get_ref();
    let version = conn.protocol_version().map(tls::version_name);
    let server_dns_names = conn
        .peer_certificates()
        .and_then(|c| c.first())
        .map(|c| dns_names(c.as_ref()))
        .unwrap_or_default();
    Ok((
        Box::new(stream),
        Negotiated {
            facts: TlsFacts {
                version,
                verified: *verification,
                client_certificate: *client_certificate,
            },
            server_dns_names,
        },
    ))
}

/// Whether a failed handshake is rustls' refusal (certificate, protocol, an alert from the
/// server) rather than the socket failing.
pub(crate) fn is_tls_refusal(e: &std::io::Error) -> bool {
    e.get_ref()
        .is_some_and(|inner| inner.downcast_ref::<rustls::Error>().is_some())
}

/// A failed handshake in words: a certificate rustls refused reads `certificate verify
/// failed: <why>` (as OpenSSL, so libpq, says it), anything else as it is.
pub(crate) fn handshake_cause(e: &std::io::Error) -> String {
    match e
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
    {
        Some(rustls::Error::InvalidCertificate(why)) => {
            format!("certificate verify failed: {why}")
        }
        _ => e.to_string(),
    }
}

/// The DNS names of a certificate's subjectAltName extension.
fn dns_names(der: &[u8]) -> Vec<String> {
    let Ok((_, cert)) = x509_parser::parse_x509_certificate(der) else {
        return Vec::new();
    };
    let Ok(Some(san)) = cert.subject_alternative_name() else {
        return Vec::new();
    };
    san.value
        .general_names
        .iter()
        .filter_map(|n| match n {
            x509_parser::extensions::GeneralName::DNSName(d) => Some(d.to_string()),
            _ => None,
        })
        .collect()
}

/// pgwire-replication's TLS settings for the replication connection of `cfg`, given what
/// the SQL connection settled (`sql`): TLS exactly when the SQL connection has it (so `allow`
/// and `prefer` decide once), verified as far as `sslmode` says, with the client certificate.
///
/// verify-ca: pgwire-replication recognises a host-name mismatch only by rustls' older error
/// variant (`NotValidForName`, not `NotValidForNameContext`), so its verify-ca rejects a
/// certificate issued for another name. The replication connection therefore verifies the
/// chain *and* the name the server's certificate carries (learned from the SQL connection,
/// whose chain was verified): as strict as verify-ca, or stricter.
pub(crate) fn replication_tls(cfg: &PgTlsConfig, sql: &Negotiated) -> TlsConfig {
    if !sql.facts.encrypted() {
        return TlsConfig::disabled();
    }
    let ca = match &cfg.rootcert {
        Some(RootCert::File(p)) => Some(p.clone()),
        _ => None,
    };
    let tls = match sql.facts.verified {
        Verification::None => TlsConfig::require(),
        Verification::ChainAndHost => TlsConfig::verify_full(ca),
        Verification::Chain => match sql.server_dns_names.first() {
            Some(name) => TlsConfig::verify_full(ca).with_sni_hostname(name.clone()),
            None => TlsConfig::verify_ca(ca),
        },
    };
    match (&cfg.cert, &cfg.key) {
        (Some(c), Some(k)) => tls.with_client_cert(c.clone(), k.clone()),
        _ => tls,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An attempt in short: `None` for plaintext, else (verification, plaintext when the
    /// server declines TLS).
    fn shape(a: &Attempt) -> Option<(Verification, bool)> {
        match a {
            Attempt::Plain => None,
            Attempt::Tls {
                verification,
                or_plain,
                ..
            } => Some((*verification, *or_plain)),
        }
    }

    /// libpq's table 34.1 for each sslmode, without and with `sslrootcert` (`system`: no
    /// file to read): a root certificate makes every mode that encrypts verify the chain,
    /// `require` thus the same as `verify-ca`.
    #[test]
    fn every_sslmode_with_and_without_a_root_certificate() {
        use PgSslMode::*;
        use Verification::{Chain, ChainAndHost};
        let none = Verification::None;
        // (mode, without sslrootcert: (first, after plaintext refused), with it)
        type Shapes = (
            Option<(Verification, bool)>,
            Option<Option<(Verification, bool)>>,
        );
        let cases: [(PgSslMode, Option<Shapes>, Shapes); 6] = [
            (Disable, Some((None, None)), (None, None)),
            (
                Allow,
                Some((None, Some(Some((none, false))))),
                (None, Some(Some((Chain, false)))),
            ),
            (
                Prefer,
                Some((Some((none, true)), None)),
                (Some((Chain, true)), None),
            ),
            (
                Require,
                Some((Some((none, false)), None)),
                (Some((Chain, false)), None),
            ),
            // verify-ca and verify-full need sslrootcert.
            (VerifyCa, None, (Some((Chain, false)), None)),
            (VerifyFull, None, (Some((ChainAndHost, false)), None)),
        ];
        for (mode, without, with) in cases {
            let cfg = |rootcert| PgTlsConfig {
                mode,
                rootcert,
                cert: None,
                key: None,
            };
            let got = |p: Plan| {
                (
                    shape(&p.first),
                    p.after_plaintext_refused.as_ref().map(shape),
                )
            };
            let names = PgTlsNames::of(crate::config::ConfigFormat::DebeziumJson);
            match (without, plan(&cfg(None), names)) {
                (Some(want), Ok(p)) => assert_eq!(got(p), want, "{mode:?} without sslrootcert"),
                (None, Err(e)) => assert!(
                    e.to_string().contains("database.sslrootcert"),
                    "{mode:?}: {e}"
                ),
                (want, Ok(p)) => panic!("{mode:?}: want {want:?}, got {:?}", got(p)),
                (want, Err(e)) => panic!("{mode:?}: want {want:?}, got {e}"),
            }
            let p =
                plan(&cfg(Some(RootCert::System)), names).expect("plans with sslrootcert=system");
            assert_eq!(got(p), with, "{mode:?} with sslrootcert");
        }
        // A root certificate file is read when the plan is made: a missing one names the
        // setting (disable reads nothing).
        let missing = Some(RootCert::File("/nonexistent/root.crt".into()));
        for mode in [Allow, Prefer, Require, VerifyCa, VerifyFull] {
            let toml = PgTlsNames::of(crate::config::ConfigFormat::Toml);
            let e = plan(
                &PgTlsConfig {
                    mode,
                    rootcert: missing.clone(),
                    cert: None,
                    key: None,
                },
                toml,
            )
            .err()
            .unwrap_or_else(|| panic!("{mode:?} reads sslrootcert"));
            assert!(e.to_string().starts_with("tls.rootcert: "), "{mode:?}: {e}");
        }
        let names = PgTlsNames::of(crate::config::ConfigFormat::Toml);
        let disable = PgTlsConfig {
            mode: Disable,
            rootcert: missing,
            cert: None,
            key: None,
        };
        assert!(plan(&disable, names).is_ok());
    }
}
