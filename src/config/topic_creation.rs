//! Kafka Connect's topic creation for source connectors (KIP-158): the `topic.creation.*`
//! keys of a connector, read as Kafka Connect reads them, so that outboxd creates a missing
//! routed topic with the partition count, replication factor and topic settings Kafka
//! Connect would have used. The partition count decides where a keyed record lands, so a
//! topic created with the broker's default count instead would put aggregates on other
//! partitions than under Debezium.
//!
//! The rules (Kafka Connect's `TopicCreationConfig`, `TopicCreationGroup`, `TopicCreation`):
//! - any `topic.creation.` key turns creation on for the connector (unless the worker sets
//!   `topic.creation.enable=false`), and then `topic.creation.default.replication.factor`
//!   and `topic.creation.default.partitions` are required;
//! - `topic.creation.groups` lists further groups, each with `include` / `exclude` (lists of
//!   regular expressions that must match the whole topic name; exclusion wins),
//!   `replication.factor` and `partitions` (the default group's when absent), and any other
//!   key as a topic config (`cleanup.policy`, `retention.ms`, ...);
//! - a topic takes the first listed group that matches it, else the default group (which
//!   matches every topic: its `include` / `exclude` are ignored);
//! - `-1` for partitions or replication factor means the broker's default (KIP-464); other
//!   values must be at least 1;
//! - a topic that exists is left as it is.
//!
//! One difference: the expressions are read with Rust's `regex` syntax, which has no
//! look-around and no `\Q...\E` (Java's has both): such an expression is refused at load,
//! naming the key, rather than matched differently.

use std::collections::BTreeMap;

use regex::Regex;

use super::KeyError;

/// The key prefix of Kafka Connect's topic creation settings.
pub const PREFIX: &str = "topic.creation.";

/// How a connector's missing topics are created (Kafka Connect's topic creation groups).
#[derive(Debug, Clone)]
pub struct TopicCreation {
    /// The groups of `topic.creation.groups`, in their listed order (the first match wins).
    pub groups: Vec<TopicCreationGroup>,
    /// The `default` group: every topic no other group matches.
    pub default: TopicCreationGroup,
}

impl PartialEq for TopicCreation {
    fn eq(&self, other: &Self) -> bool {
        self.groups == other.groups && self.default == other.default
    }
}

impl Eq for TopicCreation {}

/// One topic creation group: which topics, and how they are created.
#[derive(Debug, Clone)]
pub struct TopicCreationGroup {
    /// The group's name (`default` for the default group).
    pub name: String,
    /// Whole-name match of any `include` expression; `None` matches every topic.
    include: Option<Regex>,
    /// Whole-name match of any `exclude` expression; `None` excludes nothing.
    exclude: Option<Regex>,
    /// Partition count; -1 = the broker's `num.partitions`.
    pub partitions: i32,
    /// Replication factor; -1 = the broker's `default.replication.factor`.
    pub replication_factor: i32,
    /// Topic configs set at creation (`cleanup.policy` = `compact`, ...), by name.
    pub configs: BTreeMap<String, String>,
}

impl PartialEq for TopicCreationGroup {
    fn eq(&self, other: &Self) -> bool {
        let pattern = |r: &Option<Regex>| r.as_ref().map(|r| r.as_str().to_string());
        self.name == other.name
            && pattern(&self.include) == pattern(&other.include)
            && pattern(&self.exclude) == pattern(&other.exclude)
            && self.partitions == other.partitions
            && self.replication_factor == other.replication_factor
            && self.configs == other.configs
    }
}

impl Eq for TopicCreationGroup {}

impl TopicCreationGroup {
    /// Whether this group applies to `topic`: not excluded, and included.
    pub fn matches(&self, topic: &str) -> bool {
        !self.exclude.as_ref().is_some_and(|r| r.is_match(topic))
            && self.include.as_ref().is_none_or(|r| r.is_match(topic))
    }
}

impl TopicCreation {
    /// The group that creates `topic`: the first listed group that matches it, else the
    /// default group.
    pub fn group_for(&self, topic: &str) -> &TopicCreationGroup {
        self.groups
            .iter()
            .find(|g| g.matches(topic))
            .unwrap_or(&self.default)
    }

    /// Reads the `topic.creation.*` entries of `keys` (full key names, values as written).
    /// `Ok(None)` when there is none: the connector creates no topics (the broker may
    /// auto-create them with its defaults).
    ///
    /// Errors name the key: a missing `topic.creation.default.partitions` /
    /// `.replication.factor`, a value that is not -1 or a positive integer, an invalid
    /// regular expression, `topic.creation.enable` (a worker setting) in a connector.
    pub fn from_keys(keys: &BTreeMap<String, String>) -> Result<Option<Self>, KeyError> {
        let ours: BTreeMap<&str, &str> = keys
            .iter()
            .filter_map(|(k, v)| Some((k.strip_prefix(PREFIX)?, v.trim())))
            .collect();
        if ours.is_empty() {
            return Ok(None);
        }
        if ours.contains_key("enable") {
            return Err((
                format!("{PREFIX}enable"),
                "is a Kafka Connect worker setting: set it in the worker file (--kafka-config)"
                    .into(),
            ));
        }
        let names: Vec<&str> = ours
            .get("groups")
            .map(|v| {
                v.split(',')
                    .map(str::trim)
                    .filter(|n| !n.is_empty())
                    .collect()
            })
            .unwrap_or_default();
        if let Some(twice) = names
            .iter()
            .enumerate()
            .find_map(|(i, n)| names[..i].contains(n).then_some(*n))
        {
            return Err((
                format!("{PREFIX}groups"),
                format!("names group `{twice}` twice (Kafka Connect: duplicate alias)"),
            ));
        }
        let required = |key: &str| -> Result<i32, KeyError> {
            let full = format!("{PREFIX}default.{key}");
            let v = ours.get(format!("default.{key}").as_str()).ok_or_else(|| {
                (
                    full.clone(),
                    "is required when any topic.creation.* key is set (Kafka Connect's \
                     topic creation; -1 = the broker's default)"
                        .to_string(),
                )
            })?;
            count(&full, v)
        };
        let default_partitions = required("partitions")?;
        let default_replication = required("replication.factor")?;
        // The default group matches every topic: Kafka Connect ignores its include/exclude.
        let default = group(
            "default",
            &ours,
            default_partitions,
            default_replication,
            false,
        )?;
        let groups = names
            .iter()
            .filter(|n| **n != "default")
            .map(|n| group(n, &ours, default_partitions, default_replication, true))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Some(TopicCreation { groups, default }))
    }
}

/// Group `name`'s settings from `ours` (keys without the `topic.creation.` prefix);
/// `patterns`: whether its `include` / `exclude` apply (not for the default group).
fn group(
    name: &str,
    ours: &BTreeMap<&str, &str>,
    default_partitions: i32,
    default_replication: i32,
    patterns: bool,
) -> Result<TopicCreationGroup, KeyError> {
    let at = format!("{name}.");
    let mut g = TopicCreationGroup {
        name: name.to_string(),
        include: None,
        exclude: None,
        partitions: default_partitions,
        replication_factor: default_replication,
        configs: BTreeMap::new(),
    };
    for (key, value) in ours
        .iter()
        .filter_map(|(k, v)| Some((k.strip_prefix(&at)?, *v)))
    {
        let full = format!("{PREFIX}{name}.{key}");
        match key {
            "include" if patterns => g.include = Some(whole_match(&full, value)?),
            "exclude" if patterns => g.exclude = Some(whole_match(&full, value)?),
            "include" | "exclude" => {}
            "partitions" => g.partitions = count(&full, value)?,
            "replication.factor" => g.replication_factor = count(&full, value)?,
            config => {
                g.configs.insert(config.to_string(), value.to_string());
            }
        }
    }
    if patterns && g.include.is_none() {
        // Kafka Connect's non-default groups include nothing unless told.
        g.include = Some(whole_match(&format!("{PREFIX}{name}.include"), "")?);
    }
    Ok(g)
}

/// A comma-separated list of regular expressions as one whole-name match; an empty list
/// matches no topic name (a topic name is never empty).
fn whole_match(key: &str, list: &str) -> Result<Regex, KeyError> {
    let parts: Vec<&str> = list
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .collect();
    if parts.is_empty() {
        return Regex::new("^$").map_err(|e| (key.to_string(), e.to_string()));
    }
    let joined = parts
        .iter()
        .map(|p| format!("(?:{p})"))
        .collect::<Vec<_>>()
        .join("|");
    Regex::new(&format!("^(?:{joined})$")).map_err(|e| {
        (
            key.to_string(),
            format!("is not a valid regular expression: {e}"),
        )
    })
}

/// A partition count or replication factor: -1 or at least 1.
fn count(key: &str, value: &str) -> Result<i32, KeyError> {
    match value.parse::<i32>() {
        Ok(n) if n == -1 || n >= 1 => Ok(n),
        _ => Err((
            key.to_string(),
            format!("must be -1 (the broker's default) or at least 1, not `{value}`"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn no_key_means_no_creation() {
        let k = keys(&[("transforms", "outbox")]);
        assert_eq!(TopicCreation::from_keys(&k).unwrap(), None);
    }

    #[test]
    fn the_first_listed_group_that_matches_wins_and_exclusion_beats_inclusion() {
        let k = keys(&[
            ("topic.creation.default.partitions", "5"),
            ("topic.creation.default.replication.factor", "-1"),
            ("topic.creation.default.include", "nothing"),
            ("topic.creation.default.cleanup.policy", "delete"),
            ("topic.creation.groups", "orders, compacted"),
            (
                "topic.creation.orders.include",
                "outbox\\.event\\.Order.*, other",
            ),
            ("topic.creation.orders.exclude", ".*Audit"),
            ("topic.creation.orders.partitions", "2"),
            ("topic.creation.compacted.include", ".*"),
            ("topic.creation.compacted.replication.factor", "1"),
            ("topic.creation.compacted.cleanup.policy", "compact"),
        ]);
        let tc = TopicCreation::from_keys(&k).unwrap().unwrap();
        let order = tc.group_for("outbox.event.Order");
        assert_eq!((order.name.as_str(), order.partitions), ("orders", 2));
        assert_eq!(
            order.replication_factor, -1,
            "inherited from the default group"
        );
        assert!(order.configs.is_empty(), "topic configs are not inherited");
        let audit = tc.group_for("outbox.event.OrderAudit");
        assert_eq!(audit.name, "compacted", "excluded from orders");
        assert_eq!((audit.partitions, audit.replication_factor), (5, 1));
        assert_eq!(audit.configs["cleanup.policy"], "compact");
        assert_eq!(tc.group_for("other").name, "orders", "a second expression");
        assert_eq!(
            tc.group_for("xother").name,
            "compacted",
            "expressions match whole names"
        );
        let no_groups = keys(&[
            ("topic.creation.default.partitions", "5"),
            ("topic.creation.default.replication.factor", "-1"),
            ("topic.creation.default.include", "nothing"),
        ]);
        let tc = TopicCreation::from_keys(&no_groups).unwrap().unwrap();
        assert_eq!(
            tc.group_for("anything").name,
            "default",
            "the default group's include is ignored"
        );
    }

    #[test]
    fn a_group_without_include_takes_no_topic() {
        let k = keys(&[
            ("topic.creation.default.partitions", "3"),
            ("topic.creation.default.replication.factor", "1"),
            ("topic.creation.groups", "g"),
            ("topic.creation.g.partitions", "9"),
        ]);
        let tc = TopicCreation::from_keys(&k).unwrap().unwrap();
        assert_eq!(tc.group_for("t").name, "default");
    }

    #[test]
    fn the_default_counts_are_required_and_checked() {
        let e = TopicCreation::from_keys(&keys(&[("topic.creation.default.partitions", "3")]))
            .unwrap_err();
        assert_eq!(e.0, "topic.creation.default.replication.factor");
        assert!(e.1.contains("is required"), "{}", e.1);
        for bad in ["0", "-2", "x", ""] {
            let e = TopicCreation::from_keys(&keys(&[
                ("topic.creation.default.partitions", bad),
                ("topic.creation.default.replication.factor", "1"),
            ]))
            .unwrap_err();
            assert_eq!(e.0, "topic.creation.default.partitions");
            assert!(
                e.1.contains("-1 (the broker's default) or at least 1"),
                "{}",
                e.1
            );
        }
        let e = TopicCreation::from_keys(&keys(&[
            ("topic.creation.default.partitions", "1"),
            ("topic.creation.default.replication.factor", "1"),
            ("topic.creation.groups", "g"),
            ("topic.creation.g.include", "(unclosed"),
        ]))
        .unwrap_err();
        assert_eq!(e.0, "topic.creation.g.include");
        let e = TopicCreation::from_keys(&keys(&[
            ("topic.creation.default.partitions", "1"),
            ("topic.creation.default.replication.factor", "1"),
            ("topic.creation.groups", "g, h ,g"),
        ]))
        .unwrap_err();
        assert!(e.1.contains("`g` twice"), "{}", e.1);
        let e = TopicCreation::from_keys(&keys(&[("topic.creation.enable", "true")])).unwrap_err();
        assert!(e.1.contains("worker setting"), "{}", e.1);
    }
}
