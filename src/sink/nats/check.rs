//! `outboxd check` for a NATS JetStream sink: the server reachable and the login taken,
//! JetStream enabled, the checkpoint bucket, and the stream(s) with their duplicate windows
//! (the exactly-once window of a restart).

use futures_util::TryStreamExt;

use super::connect::connect;
use crate::config::sinks::NatsSinkConfig;
use crate::requirement::{CheckResult, Status};

/// Most streams listed when no `stream` is configured.
const MAX_LISTED: usize = 10;

/// The checks of connector `name`'s NATS JetStream sink `cfg`.
pub async fn check(name: &str, cfg: &NatsSinkConfig) -> Vec<CheckResult> {
    let mut out = Vec::new();
    let client = match connect(cfg, &format!("outboxd:{name}:check"), None).await {
        Ok(c) => c,
        Err(f) => {
            out.push(CheckResult::new(name, "nats", Status::Fail, f.detail));
            return out;
        }
    };
    out.push(CheckResult::new(
        name,
        "nats",
        Status::Pass,
        format!("{} reachable, login taken", cfg.url),
    ));
    let js = async_nats::jetstream::ContextBuilder::new()
        .timeout(cfg.ack_timeout)
        .build(client);
    if let Err(e) = js.stream_names().try_next().await {
        out.push(CheckResult::new(
            name,
            "jetstream",
            Status::Fail,
            format!("JetStream does not answer for this account ({e}); enable it (jetstream {{}} in the server configuration, and for the account)"),
        ));
        return out;
    }
    let bucket = &cfg.checkpoint_bucket;
    out.push(match js.get_key_value(bucket).await {
        Ok(_) => CheckResult::new(
            name,
            "checkpoint bucket",
            Status::Pass,
            format!("key-value bucket {bucket} exists (key {name})"),
        ),
        Err(_) => CheckResult::new(
            name,
            "checkpoint bucket",
            Status::Pass,
            format!("key-value bucket {bucket} does not exist yet; run creates it (history 1)"),
        ),
    });
    match &cfg.stream {
        Some(s) => out.push(match js.get_stream(&s.name).await {
            Ok(st) => {
                let c = &st.cached_info().config;
                CheckResult::new(
                    name,
                    "stream",
                    Status::Pass,
                    format!(
                        "stream {} captures {:?}; duplicate window {:?}: a restart within it \
                         publishes nothing twice",
                        s.name, c.subjects, c.duplicate_window
                    ),
                )
            }
            Err(_) if s.create => CheckResult::new(
                name,
                "stream",
                Status::Pass,
                format!(
                    "stream {} does not exist; run creates it capturing {:?} (duplicate window \
                     {:?})",
                    s.name, s.subjects, s.duplicate_window
                ),
            ),
            Err(e) => CheckResult::new(
                name,
                "stream",
                Status::Fail,
                format!(
                    "stream {} cannot be read ({e}); create it (`nats stream add {} --subjects \
                     ... --dupe-window 2m`) or set create_stream = true and subjects",
                    s.name, s.name
                ),
            ),
        }),
        None => {
            let listed: Result<Vec<_>, _> = js.streams().try_collect().await;
            match listed {
                Ok(streams) if streams.is_empty() => out.push(CheckResult::new(
                    name,
                    "streams",
                    Status::Fail,
                    "no JetStream stream exists: records to subjects no stream captures fail; \
                     create one (`nats stream add OUTBOX --subjects 'outbox.>' --dupe-window \
                     2m`) or set stream, subjects and create_stream = true",
                )),
                Ok(streams) => {
                    for s in streams
                        .iter()
                        .filter(|s| !s.config.name.starts_with("KV_"))
                        .take(MAX_LISTED)
                    {
                        out.push(CheckResult::new(
                            name,
                            "stream",
                            Status::Pass,
                            format!(
                                "stream {} captures {:?}; duplicate window {:?}",
                                s.config.name, s.config.subjects, s.config.duplicate_window
                            ),
                        ));
                    }
                }
                Err(e) => out.push(CheckResult::new(
                    name,
                    "streams",
                    Status::Warn,
                    format!("cannot list the streams ({e})"),
                )),
            }
        }
    }
    out
}
