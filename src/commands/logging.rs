//! The process's log output: tracing-subscriber's text or JSON lines on stderr.
//!
//! In JSON, a field logged as a list (`tables = ?names`, a `Vec<String>` in Debug form,
//! which is JSON text; the known ones are [`LIST_FIELDS`]) is written as a JSON array, not
//! as a string holding one: tracing
//! records such values as text, and the JSON formatter quotes them. [`JsonLists`] rewrites
//! each line's `fields` once formatted; log lines are rare, so parsing them again costs
//! nothing that matters.

use std::io::{self, Write};

use tracing_subscriber::fmt::MakeWriter;

use crate::cli::LogFormat;

/// The log target of pgwire-replication's replication worker, which logs an ERROR of its own
/// ("replication worker terminated with error") for every replication connection that ends;
/// the session returns the same error, and the supervisor's one WARN line says it with what
/// happens next. Silenced unless `RUST_LOG` names pgwire_replication.
const PGWIRE_WORKER_TARGET: &str = "pgwire_replication::client::tokio_client";

/// The log target of the NATS client (async-nats), which logs every connection event ("event:
/// disconnected" at INFO, "authorization violation" at ERROR) on its own; the NATS sink says
/// each outage once (WARN) and each refusal with what to check. Silenced unless `RUST_LOG`
/// names async_nats.
const NATS_CLIENT_TARGET: &str = "async_nats";

/// The AMQP client's log target: lapin logs ERROR lines of its own for every connection a
/// broker restart or network failure ends ("error doing IO", "Connection error"); the
/// RabbitMQ sink reports the same failure with what happens next (one WARN per outage).
/// Silenced unless `RUST_LOG` names lapin.
const LAPIN_TARGET: &str = "lapin";

/// Installs the tracing subscriber: a reloadable `RUST_LOG` filter (default `info`; the replication
/// worker's own error lines off, `PGWIRE_WORKER_TARGET`, and the NATS and AMQP clients',
/// `NATS_CLIENT_TARGET`, `LAPIN_TARGET`), text or JSON lines on stderr.
/// Text is coloured only when stderr is a terminal and `NO_COLOR` is unset (no-color.org),
/// so logs redirected to a file or a collector carry no escape codes.
pub fn init_logging(format: LogFormat) {
    use std::io::IsTerminal;
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let rust_log = std::env::var("RUST_LOG").unwrap_or_default();
    let mut directives: Vec<String> = rust_log
        .split(',')
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .map(str::to_string)
        .collect();
    // As tracing-subscriber's `EnvFilter::from_default_env`: `info` when RUST_LOG gives
    // nothing that parses.
    if directives
        .iter()
        .all(|d| d.parse::<tracing_subscriber::filter::Directive>().is_err())
    {
        directives = vec!["info".into()];
    }
    let quiet: Vec<String> = [PGWIRE_WORKER_TARGET, NATS_CLIENT_TARGET, LAPIN_TARGET]
        .into_iter()
        .filter(|t| !rust_log.contains(t.split("::").next().unwrap_or(t)))
        .map(str::to_string)
        .collect();
    // Reloadable, for Kafka Connect's /admin/loggers (crate::log_levels).
    let filter = crate::log_levels::install(directives, quiet);
    let colour = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    let (text, json) = match format {
        LogFormat::Text => (
            Some(
                tracing_subscriber::fmt::layer()
                    .with_ansi(colour)
                    .with_writer(std::io::stderr),
            ),
            None,
        ),
        LogFormat::Json => (
            None,
            Some(
                tracing_subscriber::fmt::layer()
                    .json()
                    .with_writer(JsonLists),
            ),
        ),
    };
    tracing_subscriber::registry()
        .with(filter)
        .with(text)
        .with(json)
        .init();
}

/// Makes stderr writers that turn list-valued fields of JSON log lines into arrays.
struct JsonLists;

impl<'a> MakeWriter<'a> for JsonLists {
    type Writer = ListWriter;

    fn make_writer(&'a self) -> Self::Writer {
        ListWriter { line: Vec::new() }
    }
}

/// Collects one formatted event and writes it, rewritten, to stderr.
struct ListWriter {
    line: Vec<u8>,
}

impl Write for ListWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.line.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        if self.line.is_empty() {
            return Ok(());
        }
        let line = std::mem::take(&mut self.line);
        let mut err = io::stderr().lock();
        match lists_as_arrays(&line) {
            Some(rewritten) => err.write_all(&rewritten),
            None => err.write_all(&line),
        }
    }
}

impl Drop for ListWriter {
    fn drop(&mut self) {
        let _ = self.flush();
    }
}

/// The fields logged as lists (`tables = ?names`, `connectors = ?names`): only these are
/// turned into arrays, so a string that merely looks like one (a position, a reason quoting
/// JSON) stays the string it was.
const LIST_FIELDS: &[&str] = &["tables", "connectors"];

/// `line` (one JSON object and a newline) with each of [`LIST_FIELDS`] in its `fields`
/// object that holds a JSON array as a string replaced by that array; `None` when nothing
/// changes (or the line is not such an object).
fn lists_as_arrays(line: &[u8]) -> Option<Vec<u8>> {
    let mut event: serde_json::Value = serde_json::from_slice(line).ok()?;
    let fields = event.get_mut("fields")?.as_object_mut()?;
    let mut changed = false;
    for (name, value) in fields.iter_mut() {
        let Some(text) = value.as_str() else {
            continue;
        };
        if !LIST_FIELDS.contains(&name.as_str()) || !text.starts_with('[') {
            continue;
        }
        if let Ok(list @ serde_json::Value::Array(_)) = serde_json::from_str(text) {
            *value = list;
            changed = true;
        }
    }
    if !changed {
        return None;
    }
    let mut out = serde_json::to_vec(&event).ok()?;
    out.push(b'\n');
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::lists_as_arrays;

    #[test]
    fn list_fields_become_arrays() {
        let line = br#"{"timestamp":"t","level":"INFO","fields":{"message":"[x] starting","connector":"shop","tables":"[\"shop.outbox_events\", \"shop.b\"]"},"target":"outboxd"}
"#;
        let out = lists_as_arrays(line).expect("rewritten");
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(
            v["fields"]["tables"],
            serde_json::json!(["shop.outbox_events", "shop.b"])
        );
        assert_eq!(v["fields"]["message"], "[x] starting");
        assert!(out.ends_with(b"\n"));
        // Not a list, not JSON, or not a log object: left as it is.
        assert!(lists_as_arrays(br#"{"fields":{"tables":"[not json"}}"#).is_none());
        // Another field that happens to hold JSON-array text stays a string.
        let other = br#"{"fields":{"message":"m","reason":"[1, 2]","connectors":"[\"a\"]"}}
"#;
        let v: serde_json::Value =
            serde_json::from_slice(&lists_as_arrays(other).expect("connectors rewritten")).unwrap();
        assert_eq!(v["fields"]["reason"], "[1, 2]");
        assert_eq!(v["fields"]["connectors"], serde_json::json!(["a"]));
        assert!(lists_as_arrays(br#"{"fields":{"position":"[\"x\"]"}}"#).is_none());
        assert!(lists_as_arrays(b"plain text\n").is_none());
    }
}
