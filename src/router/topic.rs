//! Topic routing: `route.by.field` value -> topic, the way Kafka's `RegexRouter` does it
//! (Debezium EventRouter options `route.topic.regex` and `route.topic.replacement`).
//!
//! The value must match the regex *entirely* (Java `Matcher.matches()`); the topic is then the
//! replacement with `$n` / `${name}` replaced by the groups (Java `appendReplacement` syntax).
//! A value the regex does not match is the topic itself.

use regex::Regex;

use super::RouterConfigError;

/// A compiled `route.topic.regex` + `route.topic.replacement`, with a cache of the topics
/// already worked out.
#[derive(Debug, Clone)]
pub(crate) struct TopicRoute {
    /// `route.topic.regex` anchored at both ends (Java `matches()`).
    regex: Regex,
    replacement: Vec<Piece>,
    cache: TopicCache,
}

impl TopicRoute {
    /// Compiles `regex` and parses `replacement` against its groups.
    ///
    /// Errors when the regex does not compile or the replacement refers to a group the regex
    /// does not have (Java would fail on the first record).
    pub(crate) fn new(regex: &str, replacement: &str) -> Result<Self, RouterConfigError> {
        let compile = |re: &str| {
            Regex::new(re).map_err(|e| RouterConfigError::Regex {
                regex: regex.to_string(),
                source: Box::new(e),
            })
        };
        // Compile alone first so an unbalanced ')' cannot escape the anchoring group.
        compile(regex)?;
        let anchored = compile(&format!(r"\A(?:{regex})\z"))?;
        let pieces = parse_replacement(replacement, &anchored).map_err(|message| {
            RouterConfigError::Replacement {
                replacement: replacement.to_string(),
                message,
            }
        })?;
        Ok(Self {
            regex: anchored,
            replacement: pieces,
            cache: TopicCache::default(),
        })
    }

    /// The one topic every value the regex matches goes to, when `route.topic.replacement`
    /// refers to no group (e.g. `shop.events`); `None` when the topic depends on the value.
    pub(crate) fn fixed_topic(&self) -> Option<String> {
        let mut out = String::new();
        for p in &self.replacement {
            match p {
                Piece::Literal(s) => out.push_str(s),
                Piece::Group(_) => return None,
            }
        }
        Some(out)
    }

    /// The topic for `routed_by_value`, from the cache when it was worked out before.
    pub(crate) fn topic(&self, routed_by_value: &str) -> String {
        self.cache
            .get_or_insert(routed_by_value, || self.topic_for(routed_by_value))
    }

    /// The topic for a `route.by.field` value: the replacement when the regex matches the whole
    /// value, else the value itself (Kafka `RegexRouter` semantics).
    pub(crate) fn topic_for(&self, routed_by_value: &str) -> String {
        let Some(caps) = self.regex.captures(routed_by_value) else {
            return routed_by_value.to_string();
        };
        let mut out = String::new();
        for p in &self.replacement {
            match p {
                Piece::Literal(s) => out.push_str(s),
                Piece::Group(i) => {
                    if let Some(m) = caps.get(*i) {
                        out.push_str(m.as_str());
                    }
                }
            }
        }
        out
    }
}

/// One piece of a parsed `route.topic.replacement`.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    Literal(String),
    Group(usize),
}

/// Topics already worked out per `route.by.field` value: the regex ran on every event
/// otherwise, and aggregate types are few. Holds at most [`TopicCache::LIMIT`] values; past
/// that (a high-cardinality routing column) topics are computed each time.
#[derive(Debug, Default)]
struct TopicCache(std::sync::Mutex<std::collections::HashMap<String, String>>);

impl TopicCache {
    const LIMIT: usize = 1024;

    fn get_or_insert(&self, value: &str, compute: impl FnOnce() -> String) -> String {
        let mut map = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(t) = map.get(value) {
            return t.clone();
        }
        let topic = compute();
        if map.len() < Self::LIMIT {
            map.insert(value.to_string(), topic.clone());
        }
        topic
    }
}

impl Clone for TopicCache {
    fn clone(&self) -> Self {
        Self::default()
    }
}

/// Parses a Java `Matcher.appendReplacement` string: `\x` is a literal `x`, `$n` a group number
/// (digits taken while the number stays a valid group), `${name}` a named group.
fn parse_replacement(rep: &str, regex: &Regex) -> Result<Vec<Piece>, String> {
    let group_count = regex.captures_len() - 1;
    let mut pieces = Vec::new();
    let mut lit = String::new();
    let mut chars = rep.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some(n) => lit.push(n),
                None => return Err("ends with a lone '\\' (escape a backslash as \\\\)".into()),
            },
            '$' => {
                let group = match chars.peek().copied() {
                    Some('{') => {
                        chars.next();
                        let mut name = String::new();
                        loop {
                            match chars.next() {
                                Some('}') => break,
                                Some(ch) if ch.is_ascii_alphanumeric() => name.push(ch),
                                _ => {
                                    return Err(
                                        "a named group reference must look like ${name} (letters and digits)"
                                            .into(),
                                    )
                                }
                            }
                        }
                        if !name.starts_with(|ch: char| ch.is_ascii_alphabetic()) {
                            return Err(format!("group name {name:?} must start with a letter"));
                        }
                        regex
                            .capture_names()
                            .position(|n| n == Some(name.as_str()))
                            .ok_or_else(|| {
                                format!("route.topic.regex has no group named {name:?}")
                            })?
                    }
                    Some(d) if d.is_ascii_digit() => {
                        chars.next();
                        let mut n = d as usize - '0' as usize;
                        if n > group_count {
                            return Err(format!("route.topic.regex has no group {n}"));
                        }
                        while let Some(d) = chars.peek().copied().filter(char::is_ascii_digit) {
                            let next = n * 10 + (d as usize - '0' as usize);
                            if next > group_count {
                                break;
                            }
                            n = next;
                            chars.next();
                        }
                        n
                    }
                    _ => {
                        return Err(
                            "'$' must start a group reference ($1 or ${name}); write \\$ for a literal dollar"
                                .into(),
                        )
                    }
                };
                if !lit.is_empty() {
                    pieces.push(Piece::Literal(std::mem::take(&mut lit)));
                }
                pieces.push(Piece::Group(group));
            }
            c => lit.push(c),
        }
    }
    if !lit.is_empty() {
        pieces.push(Piece::Literal(lit));
    }
    Ok(pieces)
}

/// Kafka topic name rules: 1-249 characters of `a-z A-Z 0-9 . _ -`, not `.` or `..`.
pub(crate) fn is_valid_topic(t: &str) -> bool {
    !t.is_empty()
        && t.len() <= 249
        && t != "."
        && t != ".."
        && t.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}
