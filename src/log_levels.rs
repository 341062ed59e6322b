//! Log levels changed while the process runs: Kafka Connect's `/admin/loggers` (KIP-495,
//! KIP-976 for `scope=cluster`) over the tracing filter the process started with (`RUST_LOG`,
//! default `info`).
//!
//! * A logger is a log target: outboxd's modules (`outboxd::connector`, written
//!   `outboxd.connector` as Connect names loggers, or with `::`), a library's (`librdkafka`,
//!   `async_nats`), or `root` (every target no other level names).
//! * Connect's names of the code outboxd replaces stand for the target doing its work
//!   ([`ALIASES`]): `io.debezium.connector.postgresql` sets `outboxd::source::postgres`'s
//!   level, other `io.debezium` names `outboxd`'s, `org.apache.kafka` names `librdkafka`'s.
//! * Levels are Connect's (log4j's): `OFF`, `FATAL` (taken as `ERROR`), `ERROR`, `WARN`,
//!   `INFO`, `DEBUG`, `TRACE`, in any case.
//! * Like Connect's, levels set here last until the process stops.

use std::collections::BTreeMap;
use std::sync::{Mutex, OnceLock};

use tracing_subscriber::reload;
use tracing_subscriber::{EnvFilter, Registry};

use crate::clock::now_ms;

/// The levels set so far and the handle that applies them.
struct Levels {
    /// The filter the process started with, as text (`RUST_LOG` or `info`, with the
    /// directives silencing chatty clients).
    base: Vec<String>,
    /// Level of `root` as the process started (`RUST_LOG`'s bare level, or `INFO`).
    root: String,
    /// Targets silenced at start that a level for `root` leaves silenced (clients whose
    /// own error lines repeat what outboxd reports).
    quiet: Vec<String>,
    /// Target → (level, when set, ms since the Unix epoch); `root` included once set.
    set: Mutex<BTreeMap<String, (String, i64)>>,
    /// Debezium or Kafka logger names set ([`ALIASES`]) → the target they stand for: listed
    /// under the name given, as Connect lists the loggers it was asked to set.
    aliases: Mutex<BTreeMap<String, String>>,
    handle: reload::Handle<EnvFilter, Registry>,
}

static LEVELS: OnceLock<Levels> = OnceLock::new();

/// Why a level could not be set (Connect's 400 and 404 answers).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LevelError {
    /// Not one of Connect's levels (Connect: 404 `invalid log level '<level>'.`).
    Invalid(String),
    /// The filter could not be changed: logging was not set up with [`install`].
    NotInstalled,
}

impl std::fmt::Display for LevelError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LevelError::Invalid(l) => write!(f, "invalid log level '{l}'."),
            LevelError::NotInstalled => {
                write!(f, "log levels cannot be changed in this process")
            }
        }
    }
}

/// The reloadable filter layer for the process's subscriber, built from `directives` (the
/// `RUST_LOG` text split at commas, then `quiet` targets turned off; one that does not
/// parse is left out); remembers its handle so that [`set`] can change it (the first
/// call's only).
pub fn install(
    mut directives: Vec<String>,
    quiet: Vec<String>,
) -> reload::Layer<EnvFilter, Registry> {
    let filter = build(&directives, &BTreeMap::new());
    let root = directives
        .iter()
        .find(|d| !d.contains('=') && level_of(d).is_some())
        .and_then(|d| level_of(d))
        .unwrap_or("INFO")
        .to_string();
    directives.extend(quiet.iter().map(|t| format!("{t}=off")));
    let (layer, handle) = reload::Layer::new(filter);
    let _ = LEVELS.set(Levels {
        base: directives,
        root,
        quiet,
        set: Mutex::new(BTreeMap::new()),
        aliases: Mutex::new(BTreeMap::new()),
        handle,
    });
    layer
}

/// The filter of `base` directives with `set` levels replacing theirs for the same target.
fn build(base: &[String], set: &BTreeMap<String, (String, i64)>) -> EnvFilter {
    let mut filter = EnvFilter::new("");
    for d in base {
        let replaced = match d.split_once('=') {
            Some((t, _)) => set.contains_key(t),
            None => level_of(d).is_some() && set.contains_key("root"),
        };
        if replaced {
            continue;
        }
        if let Ok(d) = d.parse() {
            filter = filter.add_directive(d);
        }
    }
    for (target, (level, _)) in set {
        let d = if target == "root" {
            level.to_ascii_lowercase()
        } else {
            format!("{target}={}", level.to_ascii_lowercase())
        };
        if let Ok(d) = d.parse() {
            filter = filter.add_directive(d);
        }
    }
    filter
}

/// The start's directives that name a target and a level: target → level.
fn start_levels(base: &[String]) -> BTreeMap<String, String> {
    base.iter()
        .filter_map(|d| {
            let (t, l) = d.split_once('=')?;
            Some((t.to_string(), level_of(l)?.to_string()))
        })
        .collect()
}

/// Connect's level name of `text` (`warn` → `WARN`, `FATAL` → `ERROR`), `None` when it is
/// not one.
fn level_of(text: &str) -> Option<&'static str> {
    Some(match text.trim().to_ascii_uppercase().as_str() {
        "OFF" => "OFF",
        "FATAL" | "ERROR" => "ERROR",
        "WARN" => "WARN",
        "INFO" => "INFO",
        "DEBUG" => "DEBUG",
        "TRACE" => "TRACE",
        _ => return None,
    })
}

/// Debezium's and Kafka's logger names → the log target doing their work here, most
/// specific first: a name under one of these stands for its target.
const ALIASES: &[(&str, &str)] = &[
    ("io.debezium.connector.mysql", "outboxd::source::mysql"),
    ("io.debezium.connector.mariadb", "outboxd::source::mysql"),
    ("io.debezium.connector.binlog", "outboxd::source::mysql"),
    (
        "io.debezium.connector.postgresql",
        "outboxd::source::postgres",
    ),
    ("io.debezium.transforms.outbox", "outboxd::router"),
    ("io.debezium", "outboxd"),
    ("org.apache.kafka.connect", "outboxd"),
    ("org.apache.kafka", "librdkafka"),
];

/// The log target logger `name` stands for: `root`; a Debezium or Kafka name
/// ([`ALIASES`]: `io.debezium.connector.postgresql…` → `outboxd::source::postgres`,
/// `io.debezium…` → `outboxd`, `org.apache.kafka…` → `librdkafka`); otherwise `name` with
/// `.` read as `::`.
pub fn target_of(name: &str) -> String {
    let under = |prefix: &str| name == prefix || name.starts_with(&format!("{prefix}."));
    if name == "root" {
        return "root".into();
    }
    match ALIASES.iter().find(|(prefix, _)| under(prefix)) {
        Some((_, target)) => target.to_string(),
        None => name.replace('.', "::"),
    }
}

/// The loggers whose level was set (by `RUST_LOG`, the clients silenced at start, or
/// [`set`]): logger name (a target written with `.` for `::`, or the Debezium or Kafka
/// name it was set by) → (level, when set). Connect lists every logger the JVM has;
/// outboxd's log targets are not enumerable, so those with a level of their own.
pub fn list() -> BTreeMap<String, (String, Option<i64>)> {
    let Some(levels) = LEVELS.get() else {
        return BTreeMap::new();
    };
    let set = levels.set.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let mut out = listed(&levels.base, &set);
    for (name, target) in levels
        .aliases
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
    {
        if let Some((level, at)) = set.get(target) {
            out.insert(name.clone(), (level.clone(), Some(*at)));
        }
    }
    out
}

/// [`list`] of `base` and `set`.
fn listed(
    base: &[String],
    set: &BTreeMap<String, (String, i64)>,
) -> BTreeMap<String, (String, Option<i64>)> {
    let mut out: BTreeMap<String, (String, Option<i64>)> = start_levels(base)
        .into_iter()
        .map(|(t, l)| (t.replace("::", "."), (l, None)))
        .collect();
    for (target, (level, at)) in set {
        if target != "root" {
            out.insert(target.replace("::", "."), (level.clone(), Some(*at)));
        }
    }
    out
}

/// Logger `name`'s level and when it was set (`None`: as the process started), the
/// level of the most specific logger above it when it has none; `None` for a name that is
/// neither `root`, outboxd's, Connect's names for it, nor one with a level.
pub fn get(name: &str) -> Option<(String, Option<i64>)> {
    let levels = LEVELS.get()?;
    let target = target_of(name);
    let set = levels.set.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let base = start_levels(&levels.base);
    let known = target == "root"
        || target == "outboxd"
        || target.starts_with("outboxd::")
        || target == "librdkafka"
        || set.contains_key(&target)
        || base.contains_key(&target);
    if !known {
        return None;
    }
    // The most specific target that is `target` or a parent of it: set levels first.
    let mut probe = target.as_str();
    loop {
        if let Some((l, at)) = set.get(probe) {
            return Some((l.clone(), Some(*at)));
        }
        if let Some(l) = base.get(probe) {
            return Some((l.clone(), None));
        }
        match probe.rsplit_once("::") {
            Some((parent, _)) => probe = parent,
            None => break,
        }
    }
    Some(match set.get("root") {
        Some((l, at)) => (l.clone(), Some(*at)),
        None => (levels.root.clone(), None),
    })
}

/// Whether `level` is one of Connect's levels. Errors: [`LevelError::Invalid`].
pub fn check(level: &str) -> Result<(), LevelError> {
    level_of(level)
        .map(|_| ())
        .ok_or_else(|| LevelError::Invalid(level.to_string()))
}

/// Sets logger `name`'s level to `level` and returns the loggers it changed (`name`, and
/// those below it with a level of their own, which take it too, as Connect does).
///
/// Errors: [`LevelError::Invalid`] for a level that is not Connect's,
/// [`LevelError::NotInstalled`] when the process's logging has no reloadable filter.
pub fn set(name: &str, level: &str) -> Result<Vec<String>, LevelError> {
    let level = level_of(level).ok_or_else(|| LevelError::Invalid(level.to_string()))?;
    let levels = LEVELS.get().ok_or(LevelError::NotInstalled)?;
    let target = target_of(name);
    let at = now_ms();
    let mut set = levels.set.lock().unwrap_or_else(|e| e.into_inner());
    let below = |t: &str| {
        (target == "root" && !levels.quiet.iter().any(|q| q == t))
            || t.starts_with(&format!("{target}::"))
    };
    let mut changed = vec![name.to_string()];
    let children: Vec<String> = listed(&levels.base, &set)
        .into_keys()
        .map(|t| t.replace('.', "::"))
        .filter(|t| below(t))
        .collect();
    for child in children {
        changed.push(child.replace("::", "."));
        set.insert(child, (level.to_string(), at));
    }
    if target != name.replace('.', "::") && target != "root" {
        levels
            .aliases
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(name.to_string(), target.clone());
    }
    set.insert(target, (level.to_string(), at));
    levels
        .handle
        .reload(build(&levels.base, &set))
        .map_err(|_| LevelError::NotInstalled)?;
    changed.sort();
    changed.dedup();
    Ok(changed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_levels_as_connect_gives_them() {
        assert_eq!(target_of("outboxd.connector"), "outboxd::connector");
        assert_eq!(target_of("outboxd::connector"), "outboxd::connector");
        assert_eq!(target_of("io.debezium"), "outboxd");
        assert_eq!(
            target_of("io.debezium.connector.mysql"),
            "outboxd::source::mysql"
        );
        assert_eq!(
            target_of("io.debezium.connector.postgresql.PostgresConnector"),
            "outboxd::source::postgres"
        );
        assert_eq!(target_of("io.debezium.connector"), "outboxd");
        assert_eq!(target_of("io.debeziumx"), "io::debeziumx");
        assert_eq!(target_of("org.apache.kafka.clients"), "librdkafka");
        assert_eq!(target_of("root"), "root");
        assert_eq!(level_of("fatal"), Some("ERROR"));
        assert_eq!(level_of(" Debug "), Some("DEBUG"));
        assert_eq!(level_of("LOUD"), None);
    }

    #[test]
    fn set_levels_come_after_the_start_ones() {
        let mut set = BTreeMap::new();
        set.insert("outboxd::connector".to_string(), ("DEBUG".to_string(), 1));
        let f = build(&["info".into(), "outboxd::connector=warn".into()], &set);
        let text = f.to_string();
        assert!(text.contains("outboxd::connector=debug"), "{text}");
        assert!(!text.contains("outboxd::connector=warn"), "{text}");
        let mut set = BTreeMap::new();
        set.insert("root".to_string(), ("WARN".to_string(), 1));
        let text = build(&["info".into(), "lapin=off".into()], &set).to_string();
        assert!(
            text.contains("lapin=off") && text.contains("warn"),
            "{text}"
        );
        assert!(!text.contains("info"), "{text}");
    }
}
