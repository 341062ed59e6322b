//! Redis preflight (`outboxd check` for a connector with a Redis Streams sink): that the
//! server answers and takes the login, how the connection is secured, and whether its
//! persistence settings keep the exactly-once promise (`appendonly yes`, `appendfsync
//! always`). Nothing is written: the check does not take a fencing epoch.

use super::{CheckResult, Status};
use crate::config::sinks::RedisSinkConfig;
use crate::config::ConnectorConfig;
use crate::sink::redis::{aof_replay_hazard, classify, connect, durability};

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
    if matches!(cfg.checkpoint, crate::config::CheckpointConfig::Sink {}) {
        out.push(match aof_replay_hazard(&mut conn).await {
            Ok(None) => CheckResult::new(name, "redis default user", Status::Pass, "on: the append-only file's transactions replay"),
            Ok(Some(_)) if r.allow_default_user_off => CheckResult::new(name, "redis default user", Status::Warn, "off, allowed by allow_default_user_off: make sure this Redis has the fix of redis/redis#14541, or a restart drops every committed batch"),
            Ok(Some(problem)) => CheckResult::new(name, "redis default user", Status::Fail, problem),
            Err(why) => CheckResult::new(name, "redis default user", Status::Warn, format!("could not be checked ({why}); with it off, Redis drops the sink's commits when it replays its append-only file (redis/redis#14541)")),
        });
    }
    out
}

/// `url`'s host part, without a login.
fn redacted_host(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let host = rest.rsplit_once('@').map_or(rest, |(_, h)| h);
    host.split('/').next().unwrap_or(host).to_string()
}
