//! Whether a configuration can run as a group, checked before anything is contacted.

use std::time::Duration;

use crate::config::{CheckpointConfig, Config, GroupConfig};

/// The shortest session timeout accepted: the brokers' default
/// `group.min.session.timeout.ms`. A lower one would be refused by the group coordinator at
/// every join (`INVALID_SESSION_TIMEOUT`).
pub const MIN_SESSION_TIMEOUT: Duration = Duration::from_secs(6);

/// Why a group cannot be formed with this configuration (definite: change the configuration).
#[derive(Debug, Clone, thiserror::Error)]
pub enum GroupError {
    /// The group name has characters a Kafka group id / topic name cannot hold.
    #[error("group name {name:?} must be 1 to 128 characters of A-Z a-z 0-9 . _ - (it names a Kafka consumer group and topics)")]
    Name {
        /// The name given.
        name: String,
    },
    /// A connector keeps its checkpoint in a local file, which the other members cannot read.
    #[error("connector {connector} uses the file checkpoint store, which the other members of group {group} cannot read: a takeover would start without its checkpoint. Use the Kafka store ([connectors.checkpoint] store = \"kafka\", the default) with --group")]
    FileStore {
        /// The connector.
        connector: String,
        /// The group.
        group: String,
    },
    /// Records go to another broker and no Kafka cluster is named for the group to live on.
    #[error("connector {connector} delivers to {sink}, and group {group} coordinates its members through Kafka: name the group's cluster with --kafka-bootstrap, OUTBOXD_KAFKA_BOOTSTRAP or [kafka] bootstrap_servers (the connector's records still go to {sink})")]
    NoCluster {
        /// The connector.
        connector: String,
        /// Its sink type.
        sink: &'static str,
        /// The group.
        group: String,
    },
    /// The connectors do not all use one Kafka cluster (the group lives on one).
    #[error("connectors {first} and {other} use different Kafka clusters ({first_bootstrap} and {other_bootstrap}); a group's members and connectors share one cluster")]
    Clusters {
        /// A connector.
        first: String,
        /// Its bootstrap servers.
        first_bootstrap: String,
        /// Another connector.
        other: String,
        /// Its bootstrap servers.
        other_bootstrap: String,
    },
    /// The connectors reach the cluster with different client settings (security among them),
    /// so there is no one set for the group's own clients to use.
    #[error("connectors {first} and {other} reach Kafka with different client settings ({keys}); the group's membership connects with one set for all of them, so give every connector of group {group} the same Kafka client (security) settings")]
    ClientSettings {
        /// A connector.
        first: String,
        /// Another connector.
        other: String,
        /// The properties that differ (names only: values may be secrets).
        keys: String,
        /// The group.
        group: String,
    },
    /// The heartbeat is too slow for the session timeout.
    #[error("group heartbeat_interval {heartbeat:?} must be at most a third of session_timeout {session:?}")]
    Timing {
        /// `heartbeat_interval`.
        heartbeat: Duration,
        /// `session_timeout`.
        session: Duration,
    },
    /// The session timeout is below what the brokers accept by default.
    #[error("group session_timeout {session:?} is below 6s, the brokers' default group.min.session.timeout.ms: the group coordinator would refuse every member. Set [group] session_timeout to 6s or more")]
    SessionTooShort {
        /// `session_timeout`.
        session: Duration,
    },
}

/// The group settings of a process that runs in a group, checked against its connectors.
#[derive(Debug, Clone)]
pub struct GroupPlan {
    /// The group's name.
    pub name: String,
    /// Its timing.
    pub settings: GroupConfig,
}

impl GroupPlan {
    /// The plan for `cfg` with group `name` (`--group`, else `[group] name`); `Ok(None)`
    /// without a group.
    ///
    /// Errors when the name is not usable, a connector uses the file checkpoint store, the
    /// connectors use different Kafka clusters or client settings, the session timeout is
    /// below [`MIN_SESSION_TIMEOUT`], or the heartbeat is too slow.
    pub fn for_config(cfg: &Config, name: Option<&str>) -> Result<Option<Self>, GroupError> {
        let Some(name) = name.or(cfg.group.name.as_deref()) else {
            return Ok(None);
        };
        if name.is_empty()
            || name.len() > 128
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
        {
            return Err(GroupError::Name {
                name: name.to_string(),
            });
        }
        let settings = cfg.group.clone();
        if settings.session_timeout < MIN_SESSION_TIMEOUT {
            return Err(GroupError::SessionTooShort {
                session: settings.session_timeout,
            });
        }
        if settings.heartbeat_interval * 3 > settings.session_timeout {
            return Err(GroupError::Timing {
                heartbeat: settings.heartbeat_interval,
                session: settings.session_timeout,
            });
        }
        for c in &cfg.connectors {
            if c.kafka.bootstrap_servers.trim().is_empty() {
                return Err(GroupError::NoCluster {
                    connector: c.name.clone(),
                    sink: c.sink.kind(),
                    group: name.to_string(),
                });
            }
            if let CheckpointConfig::File { .. } = c.checkpoint {
                return Err(GroupError::FileStore {
                    connector: c.name.clone(),
                    group: name.to_string(),
                });
            }
        }
        if let Some(first) = cfg.connectors.first() {
            for other in &cfg.connectors[1..] {
                if other.kafka.bootstrap_servers != first.kafka.bootstrap_servers {
                    return Err(GroupError::Clusters {
                        first: first.name.clone(),
                        first_bootstrap: first.kafka.bootstrap_servers.clone(),
                        other: other.name.clone(),
                        other_bootstrap: other.kafka.bootstrap_servers.clone(),
                    });
                }
                let keys = first.kafka.client.differing_keys(&other.kafka.client);
                if !keys.is_empty() {
                    return Err(GroupError::ClientSettings {
                        first: first.name.clone(),
                        other: other.name.clone(),
                        keys: keys.join(", "),
                        group: name.to_string(),
                    });
                }
            }
        }
        Ok(Some(Self {
            name: name.to_string(),
            settings,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(text: &str) -> Config {
        crate::config::parse(
            text,
            std::path::Path::new("t.toml"),
            Some("k:9092"),
            &|_| None,
        )
        .unwrap()
    }

    fn connector(name: &str, extra: &str) -> String {
        format!(
            r#"
[[connectors]]
name = "{name}"
tables = ["s.outbox"]
[connectors.source]
kind = "mariadb"
host = "h"
user = "u"
password = "p"
server_id = 7
{extra}
"#
        )
    }

    #[test]
    fn a_group_with_another_broker_needs_a_kafka_cluster_named() {
        let redis = connector(
            "r",
            "[connectors.sink]\ntype = \"redis\"\nurl = \"redis://h:6379\"",
        );
        let none =
            crate::config::parse(&redis, std::path::Path::new("t.toml"), None, &|_| None).unwrap();
        let e = GroupPlan::for_config(&none, Some("prod")).unwrap_err();
        assert!(matches!(e, GroupError::NoCluster { .. }), "{e}");
        assert!(e.to_string().contains("--kafka-bootstrap"), "{e}");
        assert!(GroupPlan::for_config(&config(&redis), Some("prod")).is_ok());
    }

    #[test]
    fn a_group_needs_the_kafka_store_and_a_fast_enough_heartbeat() {
        let one = connector("a", "");
        let cfg = config(&one);
        assert!(GroupPlan::for_config(&cfg, None).unwrap().is_none());
        let plan = GroupPlan::for_config(&cfg, Some("prod")).unwrap().unwrap();
        assert_eq!(plan.name, "prod");
        assert!(matches!(
            GroupPlan::for_config(&cfg, Some("bad name")),
            Err(GroupError::Name { .. })
        ));
        let file = config(&format!(
            "{one}[connectors.checkpoint]\nstore = \"file\"\npath = \"x.json\"\n"
        ));
        let e = GroupPlan::for_config(&file, Some("prod")).unwrap_err();
        assert!(matches!(e, GroupError::FileStore { .. }), "{e}");
        assert!(e.to_string().contains("store = \"kafka\""), "{e}");
        let slow = config(&format!(
            "[group]\nname = \"g\"\nsession_timeout = \"6s\"\nheartbeat_interval = \"3s\"\n{one}"
        ));
        assert!(matches!(
            GroupPlan::for_config(&slow, None),
            Err(GroupError::Timing { .. })
        ));
        let short = config(&format!(
            "[group]\nname = \"g\"\nsession_timeout = \"3s\"\nheartbeat_interval = \"1s\"\n{one}"
        ));
        let e = GroupPlan::for_config(&short, None).unwrap_err();
        assert!(matches!(e, GroupError::SessionTooShort { .. }), "{e}");
        assert!(
            e.to_string().contains("group.min.session.timeout.ms"),
            "{e}"
        );
    }

    #[test]
    fn a_groups_connectors_share_one_cluster_and_one_set_of_client_settings() {
        let mut cfg = config(&format!("{}{}", connector("a", ""), connector("b", "")));
        let sasl = |c: &mut crate::config::ConnectorConfig, password: &str| {
            let client = &mut c.kafka.client;
            client.set("security.protocol", "sasl_ssl");
            client.set("sasl.mechanism", "PLAIN");
            client.set("sasl.username", "relay");
            client.set("sasl.password", password);
        };
        sasl(&mut cfg.connectors[0], "hunter2");
        sasl(&mut cfg.connectors[1], "hunter2");
        assert!(GroupPlan::for_config(&cfg, Some("g")).unwrap().is_some());

        sasl(&mut cfg.connectors[1], "swordfish");
        let e = GroupPlan::for_config(&cfg, Some("g")).unwrap_err();
        let text = e.to_string();
        assert!(matches!(e, GroupError::ClientSettings { .. }), "{text}");
        assert!(text.contains("connectors a and b"), "{text}");
        assert!(text.contains("(sasl.password)"), "{text}");
        assert!(
            !text.contains("hunter2") && !text.contains("swordfish"),
            "{text}"
        );

        cfg.connectors[1].kafka.client = Default::default();
        let e = GroupPlan::for_config(&cfg, Some("g")).unwrap_err();
        assert!(e.to_string().contains("security.protocol"), "{e}");

        let mut cluster = config(&format!("{}{}", connector("a", ""), connector("b", "")));
        cluster.connectors[1].kafka.bootstrap_servers = "other:9092".into();
        assert!(matches!(
            GroupPlan::for_config(&cluster, Some("g")),
            Err(GroupError::Clusters { .. })
        ));
    }
}
