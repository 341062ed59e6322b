//! Where and how the REST API listens, read as Kafka Connect reads it: the address
//! (`--rest-listen`, `http://` or `https://` as in Connect's `listeners`), the server
//! certificate of an `https://` listener from the worker file (`listeners.https.ssl.keystore.*`,
//! else `ssl.keystore.*`: PKCS12, or PEM with the certificate chain and key in the one file),
//! and HTTP Basic authentication when the worker file's `rest.extension.classes` names
//! Connect's `BasicAuthSecurityRestExtension`: the users come from the same JAAS file Connect
//! reads (`KafkaConnect { ...PropertyFileLoginModule required file="..."; }`), given with
//! `--rest-jaas` or, as for Connect, `-Djava.security.auth.login.config=...` in `KAFKA_OPTS`.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::secret::Secret;
use crate::tls::{ClientIdentity, StoreKind};

/// Connect's Basic authentication extension, as `rest.extension.classes` names it.
pub const BASIC_AUTH_EXTENSION: &str =
    "org.apache.kafka.connect.rest.basic.auth.extension.BasicAuthSecurityRestExtension";

/// The listener's settings.
pub struct Listener {
    /// The address bound.
    pub addr: SocketAddr,
    /// The server side of TLS (`https://`).
    pub tls: Option<Arc<rustls::ServerConfig>>,
    /// The users allowed in (HTTP Basic), when authentication is on.
    pub users: Option<Users>,
    /// Whether `GET /connectors/{name}/topics` and its reset answer.
    pub tracking: Tracking,
}

/// Kafka Connect's topic tracking settings (KIP-558), from the worker file:
/// `topic.tracking.enable` and `topic.tracking.allow.reset`, both `true` by default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tracking {
    /// `topic.tracking.enable`: off, both endpoints answer 403 "Topic tracking is disabled.".
    pub enabled: bool,
    /// `topic.tracking.allow.reset`: off, the reset answers 403 "Topic tracking reset is
    /// disabled.".
    pub allow_reset: bool,
}

impl Default for Tracking {
    fn default() -> Self {
        Self {
            enabled: true,
            allow_reset: true,
        }
    }
}

impl Tracking {
    /// The settings of worker file keys `worker`.
    ///
    /// Errors: a value other than `true` or `false` (either case), naming the key.
    pub fn read(worker: &BTreeMap<String, String>) -> Result<Self, String> {
        let flag = |key: &str| match worker.get(key).map(|v| v.trim().to_ascii_lowercase()) {
            None => Ok(true),
            Some(v) if v == "true" => Ok(true),
            Some(v) if v == "false" => Ok(false),
            Some(v) => Err(format!(
                "the worker file's {key} is {v:?}; set it to true or false"
            )),
        };
        Ok(Self {
            enabled: flag("topic.tracking.enable")?,
            allow_reset: flag("topic.tracking.allow.reset")?,
        })
    }
}

/// User names and their passwords (a `PropertyFileLoginModule` file).
#[derive(Clone)]
pub struct Users(Arc<BTreeMap<String, Secret>>);

impl Users {
    /// Whether an `Authorization` header value lets its user in (`Basic base64(user:pass)`).
    pub fn admits(&self, authorization: Option<&str>) -> bool {
        use base64::Engine;
        let Some(encoded) = authorization.and_then(|a| a.strip_prefix("Basic ")) else {
            return false;
        };
        let Ok(decoded) = base64::engine::general_purpose::STANDARD.decode(encoded.trim()) else {
            return false;
        };
        let Ok(text) = String::from_utf8(decoded) else {
            return false;
        };
        let Some((user, password)) = text.split_once(':') else {
            return false;
        };
        self.0
            .get(user)
            .is_some_and(|p| constant_time_eq(p.expose().as_bytes(), password.as_bytes()))
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Reads the listener's settings: `listen` (`[http://|https://]host:port`), `worker` (the
/// `--kafka-config` worker file's keys), `jaas` (`--rest-jaas`, else `KAFKA_OPTS`'s
/// `java.security.auth.login.config`).
///
/// Errors, each saying what to set: an address that does not parse, an `https://` listener
/// without a keystore or with one that does not load, Basic authentication without a JAAS
/// file or with one that names no users file.
pub fn read(
    listen: &str,
    worker: &BTreeMap<String, String>,
    jaas: Option<&Path>,
    kafka_opts: Option<&str>,
) -> Result<Listener, String> {
    let (https, addr) = match listen.split_once("://") {
        Some((scheme, rest)) if scheme.eq_ignore_ascii_case("https") => (true, rest),
        Some((scheme, rest)) if scheme.eq_ignore_ascii_case("http") => (false, rest),
        Some((scheme, _)) => {
            return Err(format!(
                "--rest-listen {listen}: the scheme is http:// or https://, not {scheme}://"
            ))
        }
        None => (false, listen),
    };
    let addr: SocketAddr = addr.trim_end_matches('/').parse().map_err(|e| {
        format!("--rest-listen {listen}: not [http://|https://]IP:PORT ({e}), e.g. 127.0.0.1:8083")
    })?;
    let tls = if https {
        Some(server_tls(worker)?)
    } else {
        None
    };
    let extensions = worker
        .get("rest.extension.classes")
        .map(|v| {
            v.split(',')
                .map(str::trim)
                .any(|c| c == BASIC_AUTH_EXTENSION)
        })
        .unwrap_or(false);
    let users = if extensions {
        let jaas = jaas
            .map(Path::to_path_buf)
            .or_else(|| kafka_opts.and_then(jaas_from_kafka_opts))
            .ok_or_else(|| {
                format!(
                    "the worker file's rest.extension.classes names {BASIC_AUTH_EXTENSION}, \
                     whose users are in a JAAS file: give it with --rest-jaas FILE (or \
                     KAFKA_OPTS=-Djava.security.auth.login.config=FILE, as for Kafka Connect)"
                )
            })?;
        Some(users_from_jaas(&jaas)?)
    } else {
        None
    };
    Ok(Listener {
        addr,
        tls,
        users,
        tracking: Tracking::read(worker)?,
    })
}

/// The JAAS file `KAFKA_OPTS` names (`-Djava.security.auth.login.config=FILE`).
fn jaas_from_kafka_opts(opts: &str) -> Option<PathBuf> {
    opts.split_whitespace()
        .find_map(|o| o.strip_prefix("-Djava.security.auth.login.config="))
        .map(|p| PathBuf::from(p.trim_matches('"')))
}

/// The users of JAAS file `path`: its `KafkaConnect` entry's `file` option, a properties
/// file of `user: password` lines (Connect's `PropertyFileLoginModule`).
fn users_from_jaas(path: &Path) -> Result<Users, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read the JAAS file {}: {e}", path.display()))?;
    let entry = text
        .find("KafkaConnect")
        .map(|i| &text[i..])
        .and_then(|t| t.find('{').zip(t.find("};")).map(|(a, b)| &t[a..b]))
        .ok_or_else(|| {
            format!(
                "the JAAS file {} has no KafkaConnect {{ ... }}; entry (Connect's realm)",
                path.display()
            )
        })?;
    let file = entry
        .split(|c: char| c.is_whitespace() || c == ';')
        .find_map(|w| w.strip_prefix("file="))
        .map(|f| f.trim_matches('"'))
        .ok_or_else(|| {
            format!(
                "the JAAS file {}'s KafkaConnect entry has no file=\"...\" option (the \
                 PropertyFileLoginModule's users file)",
                path.display()
            )
        })?;
    let users_file = std::fs::File::open(file).map_err(|e| {
        format!(
            "cannot read the users file {file} (JAAS {}): {e}",
            path.display()
        )
    })?;
    let raw = java_properties::read(std::io::BufReader::new(users_file))
        .map_err(|e| format!("the users file {file} is not a properties file: {e}"))?;
    if raw.is_empty() {
        return Err(format!(
            "the users file {file} names no user: nobody could log in"
        ));
    }
    Ok(Users(Arc::new(
        raw.into_iter().map(|(u, p)| (u, Secret::new(p))).collect(),
    )))
}

/// The server certificate of an `https://` listener, from the worker file.
fn server_tls(worker: &BTreeMap<String, String>) -> Result<Arc<rustls::ServerConfig>, String> {
    let get = |k: &str| {
        worker
            .get(&format!("listeners.https.{k}"))
            .or_else(|| worker.get(k))
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
    };
    let location = get("ssl.keystore.location").ok_or(
        "an https:// REST listener needs its certificate: set \
         listeners.https.ssl.keystore.location (and .password, .type PKCS12 or PEM) in the \
         worker file given with --kafka-config",
    )?;
    let path = PathBuf::from(&location);
    let kind = match get("ssl.keystore.type") {
        Some(t) => {
            StoreKind::parse("listeners.https.ssl.keystore.type", &t).map_err(|e| e.to_string())?
        }
        None => StoreKind::Pkcs12,
    };
    let setting = "listeners.https.ssl.keystore.location";
    let identity = match kind {
        StoreKind::Pem => ClientIdentity::from_pem_files(setting, &path, setting, &path),
        _ => ClientIdentity::from_pkcs12(
            setting,
            &path,
            &Secret::new(get("ssl.keystore.password").unwrap_or_default()),
        ),
    }
    .map_err(|e| e.to_string())?;
    let config = rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(identity.chain.clone(), identity.key())
        .map_err(|e| format!("the REST listener's certificate {location} is not usable: {e}"))?;
    Ok(Arc::new(config))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topic_tracking_settings_are_read_from_the_worker_file() {
        let worker = |kv: &[(&str, &str)]| -> BTreeMap<String, String> {
            kv.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        assert_eq!(Tracking::read(&worker(&[])), Ok(Tracking::default()));
        assert_eq!(
            Tracking::read(&worker(&[
                ("topic.tracking.enable", "FALSE"),
                ("topic.tracking.allow.reset", " true "),
            ])),
            Ok(Tracking {
                enabled: false,
                allow_reset: true
            })
        );
        let e = Tracking::read(&worker(&[("topic.tracking.allow.reset", "no")])).unwrap_err();
        assert!(
            e.contains("topic.tracking.allow.reset") && e.contains("true or false"),
            "{e}"
        );
    }

    #[test]
    fn basic_credentials_are_checked() {
        let users = Users(Arc::new(
            [("admin".to_string(), Secret::new("s3cret"))].into(),
        ));
        use base64::Engine;
        let b = |s: &str| {
            format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(s)
            )
        };
        assert!(users.admits(Some(&b("admin:s3cret"))));
        assert!(!users.admits(Some(&b("admin:wrong"))));
        assert!(!users.admits(Some(&b("other:s3cret"))));
        assert!(!users.admits(Some("Bearer x")));
        assert!(!users.admits(Some("Basic !!!")));
        assert!(!users.admits(None));
    }

    #[test]
    fn listen_addresses_and_jaas() {
        let none = BTreeMap::new();
        assert!(read("127.0.0.1:8083", &none, None, None)
            .unwrap()
            .tls
            .is_none());
        assert!(read("http://127.0.0.1:8083", &none, None, None).is_ok());
        assert!(read("ftp://127.0.0.1:1", &none, None, None)
            .err()
            .unwrap()
            .contains("http:// or https://"));
        assert!(read("https://127.0.0.1:8443", &none, None, None)
            .err()
            .unwrap()
            .contains("listeners.https.ssl.keystore.location"));
        let mut w = BTreeMap::new();
        w.insert(
            "rest.extension.classes".to_string(),
            BASIC_AUTH_EXTENSION.to_string(),
        );
        assert!(read("127.0.0.1:1", &w, None, None)
            .err()
            .unwrap()
            .contains("--rest-jaas"));
        let dir = std::env::temp_dir().join(format!("outboxd-jaas-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let users = dir.join("users.properties");
        std::fs::write(&users, "admin: s3cret\n").unwrap();
        let jaas = dir.join("jaas.conf");
        std::fs::write(
            &jaas,
            format!(
                "KafkaConnect {{\n  org.apache.kafka.connect.rest.basic.auth.extension.PropertyFileLoginModule required\n  file=\"{}\";\n}};\n",
                users.display()
            ),
        )
        .unwrap();
        let opts = format!(
            "-Xmx1g -Djava.security.auth.login.config={}",
            jaas.display()
        );
        let l = read("127.0.0.1:1", &w, None, Some(&opts)).unwrap();
        assert!(l.users.is_some());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
