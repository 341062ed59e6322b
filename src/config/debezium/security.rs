//! The security keys of a Debezium connector JSON: the database TLS settings (Debezium's
//! MySQL `database.ssl.*`, pgjdbc's `database.ssl*`) and the Kafka producer's
//! `producer.override.security.protocol` / `sasl.*` / `ssl.*`.

use std::collections::BTreeMap;
use std::path::PathBuf;

use super::Keys;
use crate::config::{
    ClientProperties, KeyError, MysqlSslMode, MysqlTlsConfig, PgSslMode, PgTlsConfig, RootCert,
    Secret, StoreFile,
};
use crate::tls::StoreKind;

/// Debezium's MySQL TLS keys: `database.ssl.mode`, `database.ssl.truststore` (+ `.password`,
/// `.type`), `database.ssl.keystore` (+ `.password`, `.type`).
pub(super) fn mysql_tls(keys: &mut Keys) -> Result<MysqlTlsConfig, KeyError> {
    let mode = match keys.take_nonempty("database.ssl.mode") {
        None => MysqlSslMode::default(),
        Some(m) => MysqlSslMode::parse(&m).map_err(|e| ("database.ssl.mode".to_string(), e))?,
    };
    let mut store = |name: &str| -> Result<Option<StoreFile>, KeyError> {
        let type_key = format!("{name}.type");
        let kind = keys
            .take_nonempty(&type_key)
            .map(|t| StoreKind::parse(&type_key, &t))
            .transpose()
            .map_err(|e| (type_key.clone(), e.to_string()))?;
        let password = keys.take(&format!("{name}.password"));
        match keys.take_nonempty(name) {
            Some(path) => Ok(Some(StoreFile {
                path: PathBuf::from(path),
                kind,
                password: Secret::new(password.unwrap_or_default()),
            })),
            None if kind.is_some() || password.is_some() => Err((
                name.to_string(),
                format!("is missing, but {name}.type / {name}.password are set"),
            )),
            None => Ok(None),
        }
    };
    let truststore = store("database.ssl.truststore")?;
    let keystore = store("database.ssl.keystore")?;
    Ok(MysqlTlsConfig {
        mode,
        truststore,
        keystore,
    })
}

/// Debezium's PostgreSQL TLS keys (pgjdbc's, which follow libpq's): `database.sslmode`,
/// `database.sslrootcert`, `database.sslcert`, `database.sslkey`.
pub(super) fn pg_tls(keys: &mut Keys) -> Result<PgTlsConfig, KeyError> {
    let mode = match keys.take_nonempty("database.sslmode") {
        None => PgSslMode::default(),
        Some(m) => PgSslMode::parse(&m).map_err(|e| ("database.sslmode".to_string(), e))?,
    };
    if keys.take_nonempty("database.sslpassword").is_some() {
        return Err((
            "database.sslpassword".into(),
            "encrypted client keys are not supported: decrypt the key (openssl pkey -in KEY -out KEY.plain, mode 0600) and remove database.sslpassword".into(),
        ));
    }
    let rootcert = keys.take_nonempty("database.sslrootcert").map(|r| {
        if r == "system" {
            RootCert::System
        } else {
            RootCert::File(PathBuf::from(r))
        }
    });
    let cert = keys.take_nonempty("database.sslcert").map(PathBuf::from);
    let key = keys.take_nonempty("database.sslkey").map(PathBuf::from);
    if cert.is_some() != key.is_some() {
        return Err((
            "database.sslcert".into(),
            "set database.sslcert and database.sslkey together (the client certificate and its private key, PEM)".into(),
        ));
    }
    Ok(PgTlsConfig {
        mode,
        rootcert,
        cert,
        key,
    })
}

/// The prefix of a connector's producer settings in Kafka Connect.
const OVERRIDE: &str = "producer.override.";

/// Takes the `producer.override.*` keys whose rest `wanted` accepts, reports or refuses
/// outboxd's fixed producer settings among them when `fixed` (see
/// [`take_fixed_producer`](crate::config::kafka::take_fixed_producer)), translates Java names
/// to librdkafka's and reports what is not used (with the reason). Errors name the key.
fn take_overrides(
    keys: &mut Keys,
    wanted: impl Fn(&str) -> bool,
    fixed: bool,
) -> Result<ClientProperties, KeyError> {
    let names: Vec<String> = keys
        .map
        .keys()
        .filter(|k| k.strip_prefix(OVERRIDE).is_some_and(&wanted))
        .cloned()
        .collect();
    let mut java = BTreeMap::new();
    for k in names {
        if let Some(v) = keys.take(&k) {
            java.insert(k[OVERRIDE.len()..].to_string(), v);
        }
    }
    if fixed {
        let mut notes = Vec::new();
        crate::config::kafka::take_fixed_producer(&mut java, OVERRIDE, &mut notes)?;
        for (k, why) in notes {
            keys.ignore(&k, why);
        }
    }
    let t = crate::config::kafka::translate(java, &crate::config::kafka::knows_property)
        .map_err(|(k, m)| (format!("{OVERRIDE}{k}"), m))?;
    for (k, why) in t.ignored {
        keys.ignore(&format!("{OVERRIDE}{k}"), why);
    }
    for k in t.worker {
        keys.ignore(
            &format!("{OVERRIDE}{k}"),
            "a Kafka Connect worker setting, not a producer's",
        );
    }
    Ok(t.props)
}

/// Whether `key` (without `producer.override.`) is a security setting of every client.
fn is_security(key: &str) -> bool {
    key == "security.protocol" || key.starts_with("sasl.") || key.starts_with("ssl.")
}

/// The other `producer.override.*` keys (not security, not `bootstrap.servers`), applied as
/// a worker file's `producer.*` keys are: outboxd's fixed settings reported or refused
/// ([`take_fixed_producer`](crate::config::kafka::take_fixed_producer)), Java names
/// translated, librdkafka's own names applied, the rest reported. Returns the plain and the
/// secret-valued producer properties.
pub(super) fn producer_overrides(
    keys: &mut Keys,
) -> Result<(BTreeMap<String, String>, ClientProperties), KeyError> {
    let props = take_overrides(keys, |k| k != "bootstrap.servers" && !is_security(k), true)?;
    let mut plain = BTreeMap::new();
    let mut secrets = ClientProperties::default();
    for (k, v) in props.expose() {
        if crate::config::kafka::is_secret_key(k) {
            secrets.set(k, v.to_string());
        } else {
            plain.insert(k.to_string(), v.to_string());
        }
    }
    Ok((plain, secrets))
}

/// The `producer.override.*` security keys (`security.protocol`, `sasl.*`, `ssl.*`), Java
/// names translated to librdkafka's: the settings of every Kafka client of the connector
/// (its record producer writes the checkpoints, its store reads them: one cluster, one set
/// of credentials). The other `producer.override.*` keys: [`producer_overrides`].
pub(super) fn producer_security(keys: &mut Keys) -> Result<ClientProperties, KeyError> {
    take_overrides(keys, is_security, false)
}
