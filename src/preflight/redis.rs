//! Redis preflight (`outboxd check` for a connector with a Redis Streams sink): that the
//! server answers and takes the login, how the connection is secured, and whether its
//! persistence settings keep the exactly-once promise (`appendonly yes`, `appendfsync
//! always`). Nothing is written: the check does not take a fencing epoch.

use super::{CheckResult, Status};
use crate::config::sinks::RedisSinkConfig;
use crate::config::ConnectorConfig;
use crate::sink::redis::{classify, connect, durability};

/// Checks the Redis sink `r` of connector `cfg`.
pub async fn check(cfg: &ConnectorConfig, r: &RedisSinkConfig) -> Vec<CheckResult> {
    let name = cfg.name.as_str();
    let tls = if r.url.starts_with("rediss://") {
        CheckResult::new(
            name,
            "redis tls",
            Status::Pass,
            match &r.auth.tls_ca {
                Some(ca) => format!("rediss://, the server verified with {}", ca.display()),
                None => "rediss://, the server verified with the system's CA certificates".into(),
            },
        )
    } else {
        CheckResult::new(
            name,
            "redis tls",
            Status::Warn,
            "redis:// is not encrypted; use rediss:// (with tls_ca) for TLS",
        )
    };
    let mut out = vec![tls];
    let mut conn = match connect(r, std::time::Duration::ZERO).await {
        Ok(c) => c,
        Err((_, why)) => {
            out.push(CheckResult::new(name, "redis", Status::Fail, why));
            return out;
        }
    };
    let who: Result<String, redis::RedisError> =
        redis::cmd("ACL").arg("WHOAMI").query_async(&mut conn).await;
    out.push(match who {
        Ok(user) => CheckResult::new(
            name,
            "redis",
            Status::Pass,
            format!(
                "{} answers, logged in as {user}; checkpoint in {}",
                redacted_host(&r.url),
                r.checkpoint_key(name)
            ),
        ),
        Err(e) => CheckResult::new(name, "redis", Status::Fail, classify(&e, "ACL WHOAMI").1),
    });
    out.push(match durability(&mut conn).await {
        Ok(ok) => CheckResult::new(name, "redis persistence", Status::Pass, ok),
        Err(warn) => CheckResult::new(name, "redis persistence", Status::Warn, warn),
    });
    out
}

/// `url`'s host part, without a login.
fn redacted_host(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let host = rest.rsplit_once('@').map_or(rest, |(_, h)| h);
    host.split('/').next().unwrap_or(host).to_string()
}
