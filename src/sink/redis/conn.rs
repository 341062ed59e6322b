//! Connecting to Redis (URL, ACL login, TLS), classifying its errors, and the startup check
//! of its persistence settings.

use std::collections::HashSet;
use std::sync::Mutex;
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, Client, ErrorKind, IntoConnectionInfo, RedisError};

use crate::config::sinks::redis::RedisSinkConfig;
use crate::error::Class;

/// The broker name in errors and logs.
pub(crate) const BROKER: &str = "Redis";

/// How long connecting (TCP, TLS, login) may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// How long a command may wait for its answer: a batch's script (up to the batch bounds'
/// records) and `WAIT` (plus its own timeout) included.
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(60);

/// Opens a connection of its own to the server `cfg` names, logged in as its user (the
/// URL's user and password unless `user`/`password*` are set), over TLS for `rediss://`
/// (verified with `tls_ca` when set, else the system's roots; `tls_cert` + `tls_key` for
/// mutual TLS). Errors: see [`classify`]; unreadable TLS files are definite, and so is
/// `rediss://` to a port that answers plain Redis ([`super::plaintext`]).
pub(crate) async fn connect(
    cfg: &RedisSinkConfig,
    extra_response_time: Duration,
) -> Result<MultiplexedConnection, (Class, String)> {
    crate::tls::install_crypto_provider();
    let bad_url = |e: RedisError| {
        (
            Class::Definite,
            format!(
                "the sink url is not a Redis URL ({}); use redis://host:port/db or rediss://...",
                e.kind_text()
            ),
        )
    };
    let mut info = cfg.url.as_str().into_connection_info().map_err(bad_url)?;
    let mut login = info.redis_settings().clone();
    if let Some(user) = &cfg.auth.user {
        login = login.set_username(user);
    }
    if let Some(password) = &cfg.auth.password {
        login = login.set_password(password.expose());
    }
    info = info.set_redis_settings(login);
    let probe_info = info.clone();
    let tls_files = cfg.auth.tls_ca.is_some() || cfg.auth.tls_cert.is_some();
    let client = if tls_files {
        let read = |p: &std::path::Path| {
            std::fs::read(p).map_err(|e| {
                (
                    Class::Definite,
                    format!("cannot read TLS file {}: {e}", p.display()),
                )
            })
        };
        let root_cert = cfg.auth.tls_ca.as_deref().map(read).transpose()?;
        let client_tls = match (&cfg.auth.tls_cert, &cfg.auth.tls_key) {
            (Some(c), Some(k)) => Some(redis::ClientTlsConfig {
                client_cert: read(c)?,
                client_key: read(k)?,
            }),
            _ => None,
        };
        Client::build_with_tls(
            info,
            redis::TlsCertificates {
                client_tls,
                root_cert,
            },
        )
    } else {
        Client::open(info)
    }
    .map_err(|e| classify(&e, "setting up the client"))?;
    let config = AsyncConnectionConfig::new()
        .set_connection_timeout(Some(CONNECT_TIMEOUT))
        .set_response_timeout(Some(RESPONSE_TIMEOUT + extra_response_time));
    match client
        .get_multiplexed_async_connection_with_config(&config)
        .await
    {
        Ok(conn) => Ok(conn),
        Err(e) => match super::plaintext::tls_to_a_plaintext_port(&probe_info, &e).await {
            Some(advice) => Err((Class::Definite, format!("connecting: {advice}"))),
            None => Err(classify(&e, "connecting")),
        },
    }
}

/// Short, secret-free text of an error kind.
trait KindText {
    fn kind_text(&self) -> String;
}

impl KindText for RedisError {
    fn kind_text(&self) -> String {
        match (self.code(), self.detail()) {
            (Some(code), Some(detail)) => format!("{code} {detail}"),
            (Some(code), None) => code.to_string(),
            _ => self.to_string(),
        }
    }
}

/// Whether `e` means the server could not be reached or the connection broke (refused,
/// reset, closed, timed out): the outage kind of failure.
pub(crate) fn is_unreachable(e: &RedisError) -> bool {
    e.is_io_error() || e.is_connection_refusal() || e.is_connection_dropped() || e.is_timeout()
}

/// Classifies `e`, met while `doing`, by its kind and server error code (ARCHITECTURE.md
/// invariant 4): the server unreachable or restarting (`LOADING`, `BUSY`, `READONLY` after a
/// failover, `OOM`, `TRYAGAIN`, `MASTERDOWN`) is transient; a refused login (`WRONGPASS`),
/// a missing permission (`NOPERM`), a TLS certificate the client cannot verify, and any
/// other server answer are definite, with what to check.
pub(crate) fn classify(e: &RedisError, doing: &str) -> (Class, String) {
    use redis::ServerErrorKind as S;
    let text = e.kind_text();
    let code = e.code().unwrap_or_default();
    match e.kind() {
        ErrorKind::AuthenticationFailed => (
            Class::Definite,
            format!("{doing}: Redis refused the login ({text}); check the sink's user and password (an ACL user needs `on` and that password)"),
        ),
        _ if code == "WRONGPASS" => (
            Class::Definite,
            format!("{doing}: Redis refused the login ({text}); check the sink's user and password (an ACL user needs `on` and that password)"),
        ),
        ErrorKind::Server(S::NoPerm) => (
            Class::Definite,
            format!("{doing}: the Redis user may not ({text}); grant it EVAL, EVALSHA, GET, SET, INCR, TYPE, XADD (and WAIT) on the stream and checkpoint keys, e.g. ACL SETUSER <user> +@read +@write +@scripting +wait ~*"),
        ),
        ErrorKind::Io if io_kind(e) == Some(std::io::ErrorKind::InvalidData) => (
            Class::Definite,
            format!("{doing}: the TLS handshake with Redis failed ({text}); check tls_ca (the CA that signed the server's certificate), the host name in the URL, and tls_cert/tls_key"),
        ),
        ErrorKind::InvalidClientConfig => (
            Class::Definite,
            format!("{doing}: {text}; check the sink's url and TLS settings"),
        ),
        _ if is_unreachable(e) => (
            Class::Transient,
            format!("{doing}: Redis is not reachable ({text})"),
        ),
        ErrorKind::Server(S::BusyLoading | S::TryAgain | S::MasterDown | S::ReadOnly) => (
            Class::Transient,
            format!("{doing}: Redis cannot take writes right now ({text})"),
        ),
        _ if code == "OOM" => (
            Class::Transient,
            format!("{doing}: Redis is out of memory ({text}); nothing of the batch was written; raise maxmemory, trim the streams (the sink's maxlen) or let consumers catch up"),
        ),
        _ if code == "BUSY" => (
            Class::Transient,
            format!("{doing}: Redis is busy running another script ({text})"),
        ),
        _ => (Class::Definite, format!("{doing}: Redis answered {text}")),
    }
}

/// The kind of the I/O error under `e`, if it is one (redis-rs keeps it as an
/// `Arc<dyn Error>`).
pub(super) fn io_kind(e: &RedisError) -> Option<std::io::ErrorKind> {
    type Shared = std::sync::Arc<dyn std::error::Error + Send + Sync>;
    let source = std::error::Error::source(e)?;
    let io = match source.downcast_ref::<Shared>() {
        Some(shared) => shared.downcast_ref::<std::io::Error>(),
        None => source.downcast_ref::<std::io::Error>(),
    };
    io.map(std::io::Error::kind)
}

/// Connectors whose Redis outage was announced (one WARN per outage): set when a failure
/// found Redis unreachable, cleared when it answers again.
static OUTAGES: Mutex<Option<HashSet<String>>> = Mutex::new(None);

/// Notes that connector `connector` found Redis unreachable; `true` when this starts an
/// outage (nobody announced it yet).
pub(crate) fn outage_began(connector: &str) -> bool {
    let mut o = OUTAGES.lock().unwrap_or_else(|e| e.into_inner());
    o.get_or_insert_with(HashSet::new)
        .insert(connector.to_string())
}

/// Notes that Redis answered connector `connector`; `true` when this ends an outage.
pub(crate) fn outage_ended(connector: &str) -> bool {
    let mut o = OUTAGES.lock().unwrap_or_else(|e| e.into_inner());
    o.as_mut().is_some_and(|s| s.remove(connector))
}

/// What Redis's persistence settings mean for the exactly-once promise: `Ok` when a
/// committed batch survives a Redis crash (`appendonly yes` with `appendfsync always`),
/// `Err(warning)` otherwise (or when `CONFIG GET` is refused: then it could not be checked).
pub(crate) async fn durability(conn: &mut MultiplexedConnection) -> Result<String, String> {
    let got: Result<Vec<String>, RedisError> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("append*")
        .query_async(conn)
        .await;
    let pairs = match got {
        Ok(p) => p,
        Err(e) => {
            return Err(format!(
                "could not read Redis's persistence settings (CONFIG GET append*: {}); make sure the server runs with appendonly yes and appendfsync always (or everysec, which can lose the last second of commits in a power loss)",
                e.kind_text()
            ))
        }
    };
    let get = |name: &str| {
        pairs
            .chunks(2)
            .find(|kv| kv.first().is_some_and(|k| k == name))
            .and_then(|kv| kv.get(1).cloned())
            .unwrap_or_default()
    };
    let (aof, fsync) = (get("appendonly"), get("appendfsync"));
    match (aof.as_str(), fsync.as_str()) {
        ("yes", "always") => Ok(format!("appendonly {aof}, appendfsync {fsync}: a committed batch survives a Redis crash")),
        ("yes", "everysec") => Err(format!("appendonly {aof}, appendfsync {fsync}: a Redis or host crash can lose the last second of committed batches together with their checkpoint (never one without the other: nothing is duplicated); the relay then resumes from the older checkpoint, which brings them back only while the source still has them (a PostgreSQL slot may have released them); set appendfsync always for no window")),
        ("yes", _) => Err(format!("appendonly {aof}, appendfsync {fsync}: the operating system decides when committed batches reach the disk; set appendfsync always (or everysec)")),
        _ => Err(format!("appendonly {aof}: without the append-only file a Redis restart loses everything since the last RDB snapshot, records and checkpoint alike; set appendonly yes and appendfsync always")),
    }
}

/// Whether the server would drop the sink's commits when it replays its append-only file:
/// Redis (7.0 at least) replays a script's writes as a `MULTI`/`EXEC` block run by the
/// `default` user, and when `default` is off every block fails with NOPERM and is skipped
/// (redis/redis#14541): after a restart the streams lose every batch while the checkpoint,
/// written alone when a batch holds no record, survives. `Ok(Some(problem))` when `default`
/// is off and the append-only file is on; `Ok(None)` when not; `Err(why)` when it cannot be
/// read (`ACL GETUSER` refused).
pub(crate) async fn aof_replay_hazard(
    conn: &mut MultiplexedConnection,
) -> Result<Option<String>, String> {
    let user: redis::Value = redis::cmd("ACL")
        .arg("GETUSER")
        .arg("default")
        .query_async(conn)
        .await
        .map_err(|e| format!("ACL GETUSER default: {}", e.kind_text()))?;
    if !default_user_off(&user) {
        return Ok(None);
    }
    let aof: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("appendonly")
        .query_async(conn)
        .await
        .map_err(|e| format!("CONFIG GET appendonly: {}", e.kind_text()))?;
    if aof.get(1).map(String::as_str) != Some("yes") {
        return Ok(None);
    }
    Ok(Some(
        "Redis's `default` user is off: Redis replays the append-only file's transactions as \
         `default` and, with it off, drops them all (NOPERM, redis/redis#14541), so after a \
         Redis restart every committed batch would be gone from the streams while its \
         checkpoint stays; turn `default` on with a password of its own (ACL SETUSER default \
         on >PASSWORD, or requirepass), or, on a Redis with the fix, set \
         allow_default_user_off = true in [connectors.sink]"
            .to_string(),
    ))
}

/// Whether an `ACL GETUSER` answer's `flags` hold `off`.
fn default_user_off(user: &redis::Value) -> bool {
    use redis::Value as V;
    let text = |v: &V| match v {
        V::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
        V::SimpleString(s) => Some(s.clone()),
        _ => None,
    };
    let pairs: Vec<(&V, &V)> = match user {
        V::Array(items) => items
            .chunks(2)
            .filter_map(|kv| Some((kv.first()?, kv.get(1)?)))
            .collect(),
        V::Map(m) => m.iter().map(|(k, v)| (k, v)).collect(),
        _ => return false,
    };
    pairs.into_iter().any(|(k, v)| {
        text(k).as_deref() == Some("flags")
            && matches!(v, V::Array(flags) | V::Set(flags) if flags.iter().any(|f| text(f).as_deref() == Some("off")))
    })
}

#[cfg(test)]
mod hazard_tests {
    use super::default_user_off;
    use redis::Value as V;

    fn getuser(flags: &[&str]) -> V {
        V::Array(vec![
            V::BulkString(b"flags".to_vec()),
            V::Array(
                flags
                    .iter()
                    .map(|f| V::BulkString(f.as_bytes().to_vec()))
                    .collect(),
            ),
            V::BulkString(b"passwords".to_vec()),
            V::Array(vec![]),
        ])
    }

    #[test]
    fn the_default_users_off_flag_is_read_from_acl_getuser() {
        assert!(default_user_off(&getuser(&["off", "sanitize-payload"])));
        assert!(!default_user_off(&getuser(&["on", "sanitize-payload"])));
        assert!(!default_user_off(&V::Nil));
    }
}
