//! rustls client configurations for the three levels of server verification that libpq's
//! and Debezium's TLS modes come down to.

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, RootCertStore, SignatureScheme};

use super::{ClientIdentity, TlsError, TrustAnchors};

/// How far a client verifies the server's certificate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verification {
    /// Not at all: encrypted, but anyone in between can pose as the server (libpq `require`
    /// without a root certificate, Debezium `required`).
    None,
    /// The chain up to a trusted CA, not the host name (libpq `verify-ca`, Debezium
    /// `verify_ca`).
    Chain,
    /// The chain and the host name (libpq `verify-full`, Debezium `verify_identity`).
    ChainAndHost,
}

impl Verification {
    /// In words, for `check`: `server certificate not verified`, ...
    pub fn describe(self) -> &'static str {
        match self {
            Verification::None => "server certificate NOT verified",
            Verification::Chain => {
                "server certificate verified against the CA (host name not checked)"
            }
            Verification::ChainAndHost => {
                "server certificate verified against the CA and the host name"
            }
        }
    }

    /// What the settings ask to verify, for a connection whose handshake did not complete:
    /// `server certificate to be verified against the CA and the host name`, ...
    pub fn describe_intent(self) -> &'static str {
        match self {
            Verification::None => "server certificate not to be verified",
            Verification::Chain => {
                "server certificate to be verified against the CA (host name not checked)"
            }
            Verification::ChainAndHost => {
                "server certificate to be verified against the CA and the host name"
            }
        }
    }
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A rustls client configuration that verifies the server as `verification` says, trusting
/// `trust` (or, when `None`, the Mozilla roots of webpki-roots: libpq's
/// `sslrootcert=system`), presenting `identity` if given. `setting` names the TLS settings
/// in errors.
pub fn client_config(
    verification: Verification,
    trust: Option<&TrustAnchors>,
    identity: Option<&ClientIdentity>,
    setting: &str,
) -> Result<rustls::ClientConfig, TlsError> {
    let unusable = |detail: String| TlsError::Unusable {
        setting: setting.to_string(),
        detail,
    };
    let provider = provider();
    let mut roots = RootCertStore::empty();
    match trust {
        Some(t) => {
            for c in &t.certs {
                roots
                    .add(c.clone())
                    .map_err(|e| unusable(format!("a CA certificate is not usable: {e}")))?;
            }
        }
        None => roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned()),
    }
    let webpki = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .build()
        .map_err(|e| unusable(e.to_string()))?;
    let verifier: Arc<dyn ServerCertVerifier> = match verification {
        Verification::ChainAndHost => webpki,
        Verification::Chain | Verification::None => Arc::new(Lenient {
            inner: webpki,
            check_chain: verification == Verification::Chain,
        }),
    };
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| unusable(e.to_string()))?
        .dangerous()
        .with_custom_certificate_verifier(verifier);
    match identity {
        Some(id) => builder
            .with_client_auth_cert(id.chain.clone(), id.key())
            .map_err(|e| unusable(format!("the client certificate or key is not usable: {e}"))),
        None => Ok(builder.with_no_client_auth()),
    }
}

/// The weaker modes over webpki's verifier. verify-ca (`check_chain`): the chain must
/// verify, a certificate issued for another name is accepted (webpki checks the chain before
/// the name, so a name error means the chain verified). No verification (libpq `require`
/// without a root certificate, Debezium `required`): any certificate is accepted. Either
/// way the handshake signatures are checked, so the peer holds the key of the certificate
/// it showed.
#[derive(Debug)]
struct Lenient {
    inner: Arc<WebPkiServerVerifier>,
    check_chain: bool,
}

impl ServerCertVerifier for Lenient {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        if !self.check_chain {
            return Ok(ServerCertVerified::assertion());
        }
        match self
            .inner
            .verify_server_cert(end_entity, intermediates, server_name, ocsp, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}
