//! TLS settings of the database connections, as Debezium (MySQL/MariaDB) and libpq
//! (PostgreSQL) name them, and their TOML form (`[connectors.source.tls]`).
//!
//! Files named here are read when a connection is made (and so by `check`), not at load time:
//! an error then names the setting and the file.

use std::path::PathBuf;

use super::{ConfigFormat, Secret};
use crate::tls::StoreKind;

/// Debezium's `database.ssl.mode` for MySQL/MariaDB (Debezium MySQL connector documentation,
/// "database.ssl.mode"; MySQL Connector/J `sslMode`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum MysqlSslMode {
    /// No TLS.
    Disabled,
    /// TLS when the server offers it, else plaintext; the certificate is not verified.
    /// Debezium's default.
    #[default]
    Preferred,
    /// TLS or no connection; the certificate is not verified.
    Required,
    /// TLS, the certificate verified against the truststore (not the host name).
    VerifyCa,
    /// TLS, the certificate verified against the truststore and the host name.
    VerifyIdentity,
}

impl MysqlSslMode {
    /// Parses Debezium's names (`disabled`, `preferred`, `required`, `verify_ca`,
    /// `verify_identity`; case-insensitive, `-` for `_` accepted).
    pub fn parse(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_lowercase().replace('-', "_").as_str() {
            "disabled" | "disable" => Ok(Self::Disabled),
            "preferred" | "prefer" => Ok(Self::Preferred),
            "required" | "require" => Ok(Self::Required),
            "verify_ca" => Ok(Self::VerifyCa),
            "verify_identity" => Ok(Self::VerifyIdentity),
            _ => Err(format!(
                "{s:?} is not an ssl mode; use disabled, preferred, required, verify_ca or verify_identity"
            )),
        }
    }

    /// Debezium's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Disabled => "disabled",
            Self::Preferred => "preferred",
            Self::Required => "required",
            Self::VerifyCa => "verify_ca",
            Self::VerifyIdentity => "verify_identity",
        }
    }
}

/// A truststore or keystore file: Debezium's `database.ssl.truststore` (+ `.password`,
/// `.type`), `database.ssl.keystore` (+ `.password`, `.type`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreFile {
    /// The file.
    pub path: PathBuf,
    /// Its format; `None`: recognised from the content (PKCS12 or PEM; JKS is refused).
    pub kind: Option<StoreKind>,
    /// The store password (empty: none).
    pub password: Secret,
}

/// TLS of a MySQL/MariaDB source (the binlog connection and the SQL one alike).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MysqlTlsConfig {
    /// Debezium `database.ssl.mode`; default `preferred` (Debezium's).
    pub mode: MysqlSslMode,
    /// CA certificates to verify the server with (verify_ca, verify_identity); `None`: the
    /// Mozilla roots and the system's. Debezium `database.ssl.truststore`.
    pub truststore: Option<StoreFile>,
    /// Client certificate and key for mutual TLS, PKCS12. Debezium `database.ssl.keystore`.
    pub keystore: Option<StoreFile>,
}

/// libpq's `sslmode` (PostgreSQL documentation, 34.19 "SSL Support", table 34.1), Debezium's
/// `database.sslmode`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum PgSslMode {
    /// No TLS.
    Disable,
    /// Plaintext first; TLS only when the server refuses that.
    Allow,
    /// TLS when the server accepts it, else plaintext. libpq's and Debezium's default.
    #[default]
    Prefer,
    /// TLS or no connection; the certificate is verified against `sslrootcert` when one is
    /// set (libpq: then the same as verify-ca), else not at all.
    Require,
    /// TLS, the certificate verified against `sslrootcert`.
    VerifyCa,
    /// TLS, the certificate verified against `sslrootcert` and the host name.
    VerifyFull,
}

impl PgSslMode {
    /// Parses libpq's names (`disable`, `allow`, `prefer`, `require`, `verify-ca`,
    /// `verify-full`; case-insensitive, `_` for `-` accepted).
    pub fn parse(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_lowercase().replace('_', "-").as_str() {
            "disable" | "disabled" => Ok(Self::Disable),
            "allow" => Ok(Self::Allow),
            "prefer" | "preferred" => Ok(Self::Prefer),
            "require" | "required" => Ok(Self::Require),
            "verify-ca" => Ok(Self::VerifyCa),
            "verify-full" => Ok(Self::VerifyFull),
            _ => Err(format!(
                "{s:?} is not an sslmode; use disable, allow, prefer, require, verify-ca or verify-full"
            )),
        }
    }

    /// libpq's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Disable => "disable",
            Self::Allow => "allow",
            Self::Prefer => "prefer",
            Self::Require => "require",
            Self::VerifyCa => "verify-ca",
            Self::VerifyFull => "verify-full",
        }
    }
}

/// libpq's `sslrootcert`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RootCert {
    /// A PEM file of CA certificates.
    File(PathBuf),
    /// `sslrootcert=system`: the Mozilla roots (webpki-roots).
    System,
}

/// TLS of a PostgreSQL source (replication and SQL connections alike).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PgTlsConfig {
    /// libpq `sslmode`; default `prefer` (libpq's and Debezium's).
    pub mode: PgSslMode,
    /// libpq `sslrootcert`, Debezium `database.sslrootcert`. Unset: verify-ca and verify-full
    /// fail with an error saying to set it (libpq's `~/.postgresql/root.crt` is not read).
    pub rootcert: Option<RootCert>,
    /// libpq `sslcert` (PEM), Debezium `database.sslcert`: client certificate.
    pub cert: Option<PathBuf>,
    /// libpq `sslkey` (PEM, unencrypted), Debezium `database.sslkey`: its key.
    pub key: Option<PathBuf>,
}

/// The TLS settings of a MySQL/MariaDB source as one configuration format names them, for
/// messages: a TOML user is told `tls.mode`, a Debezium JSON user `database.ssl.mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MysqlTlsNames {
    /// `tls.mode` / `database.ssl.mode`.
    pub mode: &'static str,
    /// `tls.truststore` / `database.ssl.truststore`.
    pub truststore: &'static str,
    /// `tls.keystore` / `database.ssl.keystore`.
    pub keystore: &'static str,
    /// The mode value that verifies the chain and the host name (`verify_identity`).
    pub verify_full: &'static str,
}

impl MysqlTlsNames {
    /// The names in `format`.
    pub fn of(format: ConfigFormat) -> &'static Self {
        const TOML: MysqlTlsNames = MysqlTlsNames {
            mode: "tls.mode",
            truststore: "tls.truststore",
            keystore: "tls.keystore",
            verify_full: "verify_identity",
        };
        const DEBEZIUM: MysqlTlsNames = MysqlTlsNames {
            mode: "database.ssl.mode",
            truststore: "database.ssl.truststore",
            keystore: "database.ssl.keystore",
            verify_full: "verify_identity",
        };
        match format {
            ConfigFormat::Toml => &TOML,
            ConfigFormat::DebeziumJson => &DEBEZIUM,
        }
    }
}

/// The TLS settings of a PostgreSQL source as one configuration format names them, for
/// messages: a TOML user is told `tls.rootcert`, a Debezium JSON user `database.sslrootcert`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PgTlsNames {
    /// `tls.mode` / `database.sslmode`.
    pub mode: &'static str,
    /// `tls.rootcert` / `database.sslrootcert`.
    pub rootcert: &'static str,
    /// `tls.cert` / `database.sslcert`.
    pub cert: &'static str,
    /// `tls.key` / `database.sslkey`.
    pub key: &'static str,
    /// The mode value that verifies the chain and the host name (`verify-full`).
    pub verify_full: &'static str,
}

impl PgTlsNames {
    /// The names in `format`.
    pub fn of(format: ConfigFormat) -> &'static Self {
        const TOML: PgTlsNames = PgTlsNames {
            mode: "tls.mode",
            rootcert: "tls.rootcert",
            cert: "tls.cert",
            key: "tls.key",
            verify_full: "verify-full",
        };
        const DEBEZIUM: PgTlsNames = PgTlsNames {
            mode: "database.sslmode",
            rootcert: "database.sslrootcert",
            cert: "database.sslcert",
            key: "database.sslkey",
            verify_full: "verify-full",
        };
        match format {
            ConfigFormat::Toml => &TOML,
            ConfigFormat::DebeziumJson => &DEBEZIUM,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_parse_in_both_spellings() {
        assert_eq!(
            MysqlSslMode::parse("VERIFY_IDENTITY").unwrap(),
            MysqlSslMode::VerifyIdentity
        );
        assert_eq!(
            MysqlSslMode::parse("verify-ca").unwrap(),
            MysqlSslMode::VerifyCa
        );
        assert!(MysqlSslMode::parse("verify_full").is_err());
        assert_eq!(
            PgSslMode::parse("verify_full").unwrap(),
            PgSslMode::VerifyFull
        );
        assert_eq!(PgSslMode::parse("allow").unwrap(), PgSslMode::Allow);
        assert!(PgSslMode::parse("verify_identity").is_err());
    }
}
