//! The topics a connector's router writes: `route.topic.replacement` (Java
//! `Matcher.appendReplacement` syntax: `$n` and `${name}` stand for the groups of
//! `route.topic.regex`, `\` escapes the next character) read as a pattern over topic names,
//! with a shadow run's prefix. `outboxd diff` and the import's read-back list the cluster's
//! topics and keep those the pattern matches. (A `route.by.field` value the regex does not
//! match is a topic of its own name, which no pattern can foresee: name such topics with
//! `--topics`.)

use std::time::Duration;

use regex::Regex;

use super::CutoverError;
use crate::config::{KafkaConfig, RouterConfig};
use crate::sink::client;

/// A regex matching every topic `router` routes to (with its shadow prefix, if any), or
/// with `prefix` put before instead.
pub(crate) fn pattern(router: &RouterConfig, prefix: Option<&str>) -> Regex {
    let mut re = String::from(r"\A");
    if let Some(p) = prefix.or(router.topic_prefix.as_deref()) {
        re.push_str(&regex::escape(p));
    }
    let mut chars = router.route_topic_replacement.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                if let Some(n) = chars.next() {
                    re.push_str(&regex::escape(&n.to_string()));
                }
            }
            '$' => {
                match chars.peek() {
                    Some('{') => {
                        for n in chars.by_ref() {
                            if n == '}' {
                                break;
                            }
                        }
                    }
                    _ => {
                        while chars.peek().is_some_and(char::is_ascii_digit) {
                            chars.next();
                        }
                    }
                }
                re.push_str(".*");
            }
            other => re.push_str(&regex::escape(&other.to_string())),
        }
    }
    re.push_str(r"\z");
    Regex::new(&re).unwrap_or_else(|_| Regex::new(r"\A\z").expect("a valid regex"))
}

/// The cluster's topics `pattern` matches, sorted (internal ones, `__*`, left out).
///
/// Errors: transient when Kafka does not answer.
pub(crate) fn matching(kafka: &KafkaConfig, pattern: &Regex) -> Result<Vec<String>, CutoverError> {
    let consumer: rdkafka::consumer::BaseConsumer = client::config(kafka)
        .create()
        .map_err(|e| CutoverError::unavailable("creating a Kafka client", e.to_string()))?;
    let md = rdkafka::consumer::Consumer::fetch_metadata(&consumer, None, Duration::from_secs(30))
        .map_err(|e| {
            CutoverError::unavailable(
                format!("listing the topics of Kafka at {}", kafka.bootstrap_servers),
                e.to_string(),
            )
        })?;
    let mut topics: Vec<String> = md
        .topics()
        .iter()
        .map(|t| t.name().to_string())
        .filter(|t| !t.starts_with("__") && pattern.is_match(t))
        .collect();
    topics.sort();
    Ok(topics)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn router(replacement: &str, prefix: Option<&str>) -> RouterConfig {
        RouterConfig {
            route_topic_replacement: replacement.into(),
            topic_prefix: prefix.map(str::to_string),
            ..RouterConfig::default()
        }
    }

    #[test]
    fn replacement_as_a_topic_pattern() {
        let p = pattern(&router("outbox.event.${routedByValue}", None), None);
        assert!(p.is_match("outbox.event.Order"));
        assert!(!p.is_match("sh.outbox.event.Order"));
        assert!(!p.is_match("outbox.eventXOrder"));
        let p = pattern(&router("outbox.event.${routedByValue}", Some("sh.")), None);
        assert!(p.is_match("sh.outbox.event.Order"));
        assert!(!p.is_match("outbox.event.Order"));
        let p = pattern(&router("t.$1-\\$x", None), None);
        assert!(p.is_match("t.abc-$x"));
        let p = pattern(&router("fixed", None), Some("sh."));
        assert!(p.is_match("sh.fixed") && !p.is_match("fixed"));
    }
}
