//! TLS for the relay's own connections: reading trust and identity material in the formats
//! Debezium and libpq users have (PEM files, PKCS12 stores as keytool makes them), rustls
//! client configurations for each level of verification, and the facts `check` reports about
//! an established connection.
//!
//! Which library speaks TLS on which connection:
//!
//! | connection | TLS stack | settings |
//! |---|---|---|
//! | PostgreSQL SQL (`check`, `status`, slot/publication) | rustls, negotiated by `source::postgres::tls` | libpq's `sslmode`, `sslrootcert`, `sslcert`, `sslkey` |
//! | PostgreSQL replication | rustls inside pgwire-replication | the same |
//! | MySQL/MariaDB (SQL and binlog) | OpenSSL through mysql_async's native-tls | Debezium's `database.ssl.*` |
//! | Kafka | OpenSSL inside librdkafka | Kafka Connect's `security.protocol`, `ssl.*`, `sasl.*` |
//!
//! Nothing here logs or formats a password or a private key.

pub mod expiry;
pub mod store;
pub mod verify;

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

pub use store::{ClientIdentity, StoreKind, TrustAnchors};
pub use verify::Verification;

/// A TLS setting that cannot be used: a file that does not read, a store that does not open,
/// a format outboxd does not read. Always definite: the same files fail again.
///
/// Every message names the setting (`database.ssl.truststore`, `ssl.keystore.location`, ...)
/// and the file, never a password.
#[derive(Debug, Clone, thiserror::Error)]
pub enum TlsError {
    /// The file cannot be read.
    #[error("{setting}: cannot read {}: {cause}", path.display())]
    Read {
        /// The setting naming the file.
        setting: String,
        /// The file.
        path: PathBuf,
        /// The I/O error, in words.
        cause: String,
    },
    /// The file holds no certificate (or no private key) where one was expected.
    #[error("{setting}: {} holds no {what}", path.display())]
    Empty {
        /// The setting naming the file.
        setting: String,
        /// The file.
        path: PathBuf,
        /// `certificate`, `private key`, `private key with its certificate`.
        what: &'static str,
    },
    /// PEM that does not parse.
    #[error("{setting}: {} is not valid PEM: {source}", path.display())]
    Pem {
        /// The setting naming the file.
        setting: String,
        /// The file.
        path: PathBuf,
        /// The parser's error.
        #[source]
        source: Arc<rustls::pki_types::pem::Error>,
    },
    /// A PKCS12 store that does not open (wrong password, damaged, unsupported encryption).
    #[error("{setting}: cannot open the PKCS12 store {}: {source}; check its password setting (a wrong password shows as a MAC error)", path.display())]
    Pkcs12 {
        /// The setting naming the file.
        setting: String,
        /// The file.
        path: PathBuf,
        /// The parser's error (never the password).
        #[source]
        source: Arc<p12_keystore::error::Error>,
    },
    /// A Java KeyStore (JKS) file: no well-kept Rust library reads the format.
    #[error("{setting}: {} is a JKS keystore, which outboxd does not read; convert it to PKCS12 (keytool's default since Java 9): keytool -importkeystore -srckeystore {} -destkeystore {}.p12 -deststoretype PKCS12, then point {setting} at the .p12 file (type PKCS12)", path.display(), path.display(), path.display())]
    Jks {
        /// The setting naming the file.
        setting: String,
        /// The file.
        path: PathBuf,
    },
    /// A store type outboxd does not know.
    #[error("{setting}: store type {given:?} is not supported; use PKCS12 or PEM")]
    UnknownType {
        /// The type setting.
        setting: String,
        /// What it says.
        given: String,
    },
    /// The file's content does not match the configured type.
    #[error("{setting}: {} is not a {expected} file (it looks like {found}); fix the type setting or the file", path.display())]
    WrongType {
        /// The type setting.
        setting: String,
        /// The file.
        path: PathBuf,
        /// The configured type.
        expected: StoreKind,
        /// What the content looks like.
        found: &'static str,
    },
    /// rustls refused the material (a key it cannot use, a certificate it cannot parse).
    #[error("{setting}: {detail}")]
    Unusable {
        /// The setting naming the material.
        setting: String,
        /// rustls' message.
        detail: String,
    },
}

/// What is known about the TLS of an established connection, for `check`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFacts {
    /// The protocol version (`TLSv1.3`); `None` for a plaintext connection.
    pub version: Option<String>,
    /// How far the server's certificate was verified (nothing for a plaintext connection).
    pub verified: Verification,
    /// A client certificate was presented (mutual TLS).
    pub client_certificate: bool,
}

impl TlsFacts {
    /// A plaintext connection.
    pub fn plaintext() -> Self {
        Self {
            version: None,
            verified: Verification::None,
            client_certificate: false,
        }
    }

    /// Whether the connection is encrypted.
    pub fn encrypted(&self) -> bool {
        self.version.is_some()
    }
}

impl fmt::Display for TlsFacts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.version {
            None => f.write_str("not encrypted"),
            Some(v) => {
                write!(f, "encrypted ({v}), {}", self.verified.describe())?;
                if self.client_certificate {
                    f.write_str(", client certificate presented")?;
                }
                Ok(())
            }
        }
    }
}

/// The name rustls gives a protocol version, in the form servers report it (`TLSv1.3`).
pub fn version_name(v: rustls::ProtocolVersion) -> String {
    match v {
        rustls::ProtocolVersion::TLSv1_3 => "TLSv1.3".into(),
        rustls::ProtocolVersion::TLSv1_2 => "TLSv1.2".into(),
        other => format!("{other:?}"),
    }
}

/// Process-wide TLS set-up, first thing in `main`: initialises OpenSSL (which librdkafka and
/// mysql_async's native-tls use) with `OPENSSL_INIT_NO_ATEXIT`, so that its exit-time
/// cleanup does not free OpenSSL's state under librdkafka threads still running when the
/// process exits (a blocking Kafka call abandoned at shutdown): without this, such an exit
/// could crash. Also installs rustls' provider (`install_crypto_provider`).
pub fn init_process() {
    openssl_sys::init();
    install_crypto_provider();
}

/// Makes ring the process's rustls provider (idempotent). pgwire-replication does the same;
/// doing it here first makes the choice independent of which connection comes first.
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}
