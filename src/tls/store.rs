//! Trust anchors and client identities from the files users have: PEM (what libpq and
//! OpenSSL read) and PKCS12 (keytool's default store format since Java 9, what Debezium and
//! Kafka Connect users keep). JKS, the older Java format, is recognised and refused with the
//! keytool command that converts it.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use base64::Engine;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use super::TlsError;
use crate::secret::Secret;

/// The format of a truststore or keystore file (Java's `ssl.truststore.type` /
/// `ssl.keystore.type`, Debezium's `database.ssl.truststore.type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreKind {
    /// PKCS#12 (`.p12`, `.pfx`): keytool's default since Java 9.
    Pkcs12,
    /// PEM text: `-----BEGIN CERTIFICATE-----` blocks (and, for a keystore, a private key).
    Pem,
    /// Java KeyStore: recognised, refused with the conversion command ([`TlsError::Jks`]).
    Jks,
}

impl fmt::Display for StoreKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            StoreKind::Pkcs12 => "PKCS12",
            StoreKind::Pem => "PEM",
            StoreKind::Jks => "JKS",
        })
    }
}

impl StoreKind {
    /// Parses a Java store type name (`PKCS12`, `PEM`, `JKS`; case-insensitive, `P12`
    /// accepted). `setting` names the type setting in the error.
    pub fn parse(setting: &str, given: &str) -> Result<Self, TlsError> {
        match given.trim().to_ascii_uppercase().as_str() {
            "PKCS12" | "P12" => Ok(StoreKind::Pkcs12),
            "PEM" => Ok(StoreKind::Pem),
            "JKS" | "JCEKS" => Ok(StoreKind::Jks),
            _ => Err(TlsError::UnknownType {
                setting: setting.to_string(),
                given: given.to_string(),
            }),
        }
    }

    /// What the bytes of a store file look like: JKS/JCEKS by their magic number, PEM by a
    /// `-----BEGIN` line, anything else is taken for DER (PKCS12).
    fn sniff(bytes: &[u8]) -> StoreKind {
        if bytes.starts_with(&[0xFE, 0xED, 0xFE, 0xED]) || bytes.starts_with(&[0xCE; 4]) {
            StoreKind::Jks
        } else if bytes.windows(10).any(|w| w == b"-----BEGIN") {
            StoreKind::Pem
        } else {
            StoreKind::Pkcs12
        }
    }
}

/// Reads a store file and settles its kind: the configured one (checked against the content)
/// or, when none is configured, the one the content shows.
fn read_store(
    setting: &str,
    path: &Path,
    kind: Option<StoreKind>,
) -> Result<(Vec<u8>, StoreKind), TlsError> {
    let bytes = read(setting, path)?;
    let found = StoreKind::sniff(&bytes);
    if found == StoreKind::Jks {
        return Err(TlsError::Jks {
            setting: setting.to_string(),
            path: path.to_path_buf(),
        });
    }
    match kind {
        None => Ok((bytes, found)),
        Some(StoreKind::Jks) => Err(TlsError::Jks {
            setting: setting.to_string(),
            path: path.to_path_buf(),
        }),
        Some(k) if k == found => Ok((bytes, k)),
        Some(k) => Err(TlsError::WrongType {
            setting: setting.to_string(),
            path: path.to_path_buf(),
            expected: k,
            found: match found {
                StoreKind::Pem => "PEM",
                _ => "binary DER (PKCS12)",
            },
        }),
    }
}

/// The bytes of `path`, named by `setting`: a file that cannot be read is [`TlsError::Read`]
/// with the I/O error in words.
pub(crate) fn read(setting: &str, path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|e| TlsError::Read {
        setting: setting.to_string(),
        path: path.to_path_buf(),
        cause: crate::error::io_cause(&e),
    })
}

/// Certificates a client trusts to sign the server's certificate.
#[derive(Clone, PartialEq, Eq)]
pub struct TrustAnchors {
    /// DER certificates, in file order.
    pub certs: Vec<CertificateDer<'static>>,
}

impl fmt::Debug for TrustAnchors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TrustAnchors({} certificate(s))", self.certs.len())
    }
}

impl TrustAnchors {
    /// Reads the CA certificates of a truststore: every certificate of a PEM file, or every
    /// certificate entry of a PKCS12 store that is not the certificate of a private key
    /// (keytool's `-importcert` entries). `password` opens a PKCS12 store (Java lets a
    /// truststore have none: empty). Errors name `setting` and the file.
    pub fn load(
        setting: &str,
        path: &Path,
        kind: Option<StoreKind>,
        password: &Secret,
    ) -> Result<Self, TlsError> {
        let (bytes, kind) = read_store(setting, path, kind)?;
        let certs = match kind {
            StoreKind::Pem => pem_certs(setting, path, &bytes)?,
            _ => {
                let archive = p12_keystore::Pkcs12Archive::from_pkcs12(&bytes, password.expose())
                    .map_err(|e| pkcs12_error(setting, path, e))?;
                archive
                    .certs
                    .iter()
                    .filter(|c| c.trusted || c.local_key_id.is_none())
                    .map(|c| CertificateDer::from(c.cert.as_der().to_vec()))
                    .collect()
            }
        };
        Self::non_empty(setting, path, certs)
    }

    fn non_empty(
        setting: &str,
        path: &Path,
        certs: Vec<CertificateDer<'static>>,
    ) -> Result<Self, TlsError> {
        if certs.is_empty() {
            return Err(TlsError::Empty {
                setting: setting.to_string(),
                path: path.to_path_buf(),
                what: "certificate",
            });
        }
        Ok(Self { certs })
    }

    /// Reads a PEM CA file (libpq's `sslrootcert`).
    pub fn load_pem(setting: &str, path: &Path) -> Result<Self, TlsError> {
        Self::load(setting, path, Some(StoreKind::Pem), &Secret::default())
    }

    /// CA certificates given as PEM text (librdkafka's `ssl.ca.pem`).
    pub fn from_pem_text(setting: &str, text: &str) -> Result<Self, TlsError> {
        let path = Path::new("(inline PEM)");
        Self::non_empty(setting, path, pem_certs(setting, path, text.as_bytes())?)
    }

    /// The certificates as PEM text (for librdkafka's `ssl.ca.pem`).
    pub fn to_pem(&self) -> String {
        let mut out = String::new();
        for c in &self.certs {
            out.push_str("-----BEGIN CERTIFICATE-----\n");
            let b64 = base64::engine::general_purpose::STANDARD.encode(c.as_ref());
            for line in b64.as_bytes().chunks(64) {
                out.push_str(std::str::from_utf8(line).unwrap_or_default());
                out.push('\n');
            }
            out.push_str("-----END CERTIFICATE-----\n");
        }
        out
    }
}

/// A client certificate chain and its private key, for mutual TLS.
#[derive(PartialEq, Eq)]
pub struct ClientIdentity {
    /// The client certificate first, then its issuers as the store had them.
    pub chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
}

impl Clone for ClientIdentity {
    fn clone(&self) -> Self {
        Self {
            chain: self.chain.clone(),
            key: self.key.clone_key(),
        }
    }
}

impl fmt::Debug for ClientIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "ClientIdentity({} certificate(s), key ***)",
            self.chain.len()
        )
    }
}

impl ClientIdentity {
    /// The private key (hand it to the TLS library only).
    pub fn key(&self) -> PrivateKeyDer<'static> {
        self.key.clone_key()
    }

    /// A certificate file and a key file in PEM (libpq's `sslcert` / `sslkey`; the key
    /// PKCS#8, PKCS#1 or SEC1, unencrypted).
    pub fn from_pem_files(
        cert_setting: &str,
        cert: &Path,
        key_setting: &str,
        key: &Path,
    ) -> Result<Self, TlsError> {
        let chain = pem_certs(cert_setting, cert, &read(cert_setting, cert)?)?;
        if chain.is_empty() {
            return Err(TlsError::Empty {
                setting: cert_setting.to_string(),
                path: cert.to_path_buf(),
                what: "certificate",
            });
        }
        let key_bytes = read(key_setting, key)?;
        let key_der = PrivateKeyDer::from_pem_slice(&key_bytes).map_err(|e| match e {
            rustls::pki_types::pem::Error::NoItemsFound => TlsError::Empty {
                setting: key_setting.to_string(),
                path: key.to_path_buf(),
                what: "unencrypted private key (an encrypted one must be decrypted first: openssl pkey -in KEY -out KEY.plain)",
            },
            other => TlsError::Pem {
                setting: key_setting.to_string(),
                path: key.to_path_buf(),
                source: Arc::new(other),
            },
        })?;
        Ok(Self {
            chain,
            key: key_der,
        })
    }

    /// The first private key entry of a PKCS12 keystore with its certificate chain
    /// (Debezium's `database.ssl.keystore`, Java's `ssl.keystore.location`).
    pub fn from_pkcs12(setting: &str, path: &Path, password: &Secret) -> Result<Self, TlsError> {
        let (bytes, _) = read_store(setting, path, Some(StoreKind::Pkcs12))?;
        let store = p12_keystore::KeyStore::from_pkcs12(
            &bytes,
            password.expose(),
            p12_keystore::Pkcs12ImportPolicy::Strict,
        )
        .map_err(|e| pkcs12_error(setting, path, e))?;
        let chain = store.entries().find_map(|(_, e)| match e {
            p12_keystore::KeyStoreEntry::PrivateKeyChain(c) => Some(c.clone()),
            _ => None,
        });
        let Some(chain) = chain else {
            return Err(TlsError::Empty {
                setting: setting.to_string(),
                path: path.to_path_buf(),
                what: "private key with its certificate",
            });
        };
        let key = PrivateKeyDer::try_from(chain.key().as_der().to_vec()).map_err(|e| {
            TlsError::Unusable {
                setting: setting.to_string(),
                detail: format!("the private key in {} is not usable: {e}", path.display()),
            }
        })?;
        Ok(Self {
            chain: chain
                .certs()
                .iter()
                .map(|c| CertificateDer::from(c.as_der().to_vec()))
                .collect(),
            key,
        })
    }
}

fn pem_certs(
    setting: &str,
    path: &Path,
    bytes: &[u8],
) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    CertificateDer::pem_slice_iter(bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsError::Pem {
            setting: setting.to_string(),
            path: path.to_path_buf(),
            source: Arc::new(e),
        })
}

fn pkcs12_error(setting: &str, path: &Path, e: p12_keystore::error::Error) -> TlsError {
    TlsError::Pkcs12 {
        setting: setting.to_string(),
        path: PathBuf::from(path),
        source: Arc::new(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_are_sniffed_and_checked() {
        assert_eq!(
            StoreKind::sniff(&[0xFE, 0xED, 0xFE, 0xED, 0]),
            StoreKind::Jks
        );
        assert_eq!(
            StoreKind::sniff(b"x\n-----BEGIN CERTIFICATE-----\n"),
            StoreKind::Pem
        );
        assert_eq!(StoreKind::sniff(&[0x30, 0x82]), StoreKind::Pkcs12);
        assert_eq!(StoreKind::parse("t", "pkcs12").unwrap(), StoreKind::Pkcs12);
        assert!(matches!(
            StoreKind::parse("t", "BKS"),
            Err(TlsError::UnknownType { .. })
        ));
    }

    #[test]
    fn jks_is_refused_with_the_conversion() {
        let dir = std::env::temp_dir().join(format!("outboxd-jks-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("trust.jks");
        std::fs::write(&f, [0xFE, 0xED, 0xFE, 0xED, 0, 0, 0, 2]).unwrap();
        let e = TrustAnchors::load("ssl.truststore.location", &f, None, &Secret::new("pw"))
            .unwrap_err();
        let m = e.to_string();
        assert!(m.contains("keytool -importkeystore"), "{m}");
        assert!(m.contains("ssl.truststore.location"), "{m}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
