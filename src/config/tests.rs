use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use super::*;
use crate::event::{Op, Row, RowChange};
use crate::router::{EventRouter, Routed};
use crate::value::ColumnValue;

fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let m: HashMap<String, String> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    move |k: &str| m.get(k).cloned()
}

fn parse_with(text: &str, cli: Option<&str>, env: &[(&str, &str)]) -> Result<Config, ConfigError> {
    parse(text, Path::new("test.conf"), cli, &env_of(env))
}

fn one(text: &str, cli: Option<&str>, env: &[(&str, &str)]) -> ConnectorConfig {
    let mut cfg = parse_with(text, cli, env).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(cfg.connectors.len(), 1);
    cfg.connectors.remove(0)
}

fn err(text: &str, cli: Option<&str>, env: &[(&str, &str)]) -> String {
    match parse_with(text, cli, env) {
        Ok(c) => panic!("expected an error, got {c:?}"),
        Err(e) => e.to_string(),
    }
}

fn ignored<'a>(c: &'a ConnectorConfig, key: &str) -> Option<&'a str> {
    c.ignored_keys
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, why)| why.as_str())
}

const FULL_TOML: &str = r#"
[metrics]
listen = "127.0.0.1:9187"

[log]
format = "json"

[[connectors]]
name = "shop"
tables = ["shop.outbox_events"]

[connectors.source]
kind = "mariadb"
host = "127.0.0.1"
port = 3306
user = "outboxd"
password_env = "OUTBOXD_SHOP_PASSWORD"
server_id = 184054
start = "earliest"
position_mode = "gtid"
heartbeat_interval = "5s"
connect_timeout = 2500
reconnect_backoff_max = "1m"
columns = { "shop.outbox_events" = ["id", "aggregate_type", "aggregate_id", "event_type", "payload"] }

[connectors.router]
"route.topic.replacement" = "outbox.event.${routedByValue}"
"table.fields.additional.placement" = "event_type:header:eventType"
route_tombstone_on_empty_payload = true
tombstone_on_empty_payload = true
"table.op.invalid.behavior" = "error"

[connectors.kafka]
bootstrap_servers = "127.0.0.1:9092"
producer = { "compression.type" = "lz4", "linger.ms" = 5 }
max_record_bytes = 2097152

[connectors.checkpoint]
store = "file"
path = "/var/lib/outboxd/shop.json"
"#;

#[test]
fn toml_full_example() {
    // `route_tombstone_on_empty_payload` is not a name: expect that error first.
    let e = err(FULL_TOML, None, &[("OUTBOXD_SHOP_PASSWORD", "pw")]);
    assert!(
        e.contains("route_tombstone_on_empty_payload") && e.contains("unknown router option"),
        "{e}"
    );

    let text = FULL_TOML.replace("route_tombstone_on_empty_payload = true\n", "");
    let cfg = parse_with(&text, None, &[("OUTBOXD_SHOP_PASSWORD", "pw")]).unwrap();
    assert_eq!(cfg.metrics.listen, Some("127.0.0.1:9187".parse().unwrap()));
    assert_eq!(cfg.log.format, LogFormat::Json);
    let c = &cfg.connectors[0];
    assert_eq!(c.name, "shop");
    assert_eq!(c.tables, vec![TableName::new("shop", "outbox_events")]);
    let SourceConfig::Mysql(m) = &c.source else {
        panic!("mysql expected")
    };
    assert_eq!(m.flavor, MysqlFlavor::Mariadb);
    assert_eq!(
        (m.host.as_str(), m.port, m.user.as_str()),
        ("127.0.0.1", 3306, "outboxd")
    );
    assert_eq!(m.password.expose(), "pw");
    assert_eq!(m.server_id, 184054);
    assert_eq!(m.start, StartPosition::Earliest);
    assert_eq!(m.position_mode, PositionMode::Gtid);
    assert_eq!(m.heartbeat_interval, Duration::from_secs(5));
    assert_eq!(m.connect_timeout, Duration::from_millis(2500));
    assert_eq!(m.reconnect_backoff_max, Duration::from_secs(60));
    assert_eq!(m.columns[&TableName::new("shop", "outbox_events")].len(), 5);
    assert!(c.router.tombstone_on_empty_payload);
    assert_eq!(c.router.op_invalid_behavior, InvalidOpBehavior::Error);
    assert_eq!(c.router.route_by_field, "aggregate_type");
    assert_eq!(c.router.field_event_key, "aggregate_id");
    assert_eq!(c.router.additional_placement.len(), 1);
    assert_eq!(c.kafka.bootstrap_servers, "127.0.0.1:9092");
    assert_eq!(c.kafka.producer["linger.ms"], "5");
    assert_eq!(c.kafka.max_record_bytes, 2 * 1024 * 1024);
    assert_eq!(
        c.checkpoint,
        CheckpointConfig::File {
            path: "/var/lib/outboxd/shop.json".into()
        }
    );
    assert!(c.ignored_keys.is_empty());
    // The secret never shows in Debug output.
    let dbg = format!("{cfg:?}");
    assert!(!dbg.contains("\"pw\"") && dbg.contains("***"), "{dbg}");
}

#[test]
fn toml_defaults() {
    let c = one(
        r#"
[[connectors]]
name = "pg.1"
tables = ["public.outbox_events"]
source = { kind = "postgres", host = "db", user = "u", password = "p", dbname = "app" }
"#,
        Some("k1:9092"),
        &[("OUTBOXD_STATE_DIR", "/state")],
    );
    let SourceConfig::Postgres(p) = &c.source else {
        panic!("postgres expected")
    };
    assert_eq!(p.port, 5432);
    assert_eq!(p.slot_name, "outboxd_pg_1");
    assert_eq!(p.publication_name, "outboxd_pg_1");
    assert_eq!(p.publication_autocreate, PublicationAutocreate::Filtered);
    assert!(p.slot_autocreate);
    assert!(p.message_prefixes.is_empty());
    assert_eq!(p.status_interval, Duration::from_secs(10));
    // outboxd's router defaults; the record format names the connector and its source.
    assert_eq!(
        RouterConfig {
            format: RouterConfig::default().format,
            ..c.router.clone()
        },
        RouterConfig::default()
    );
    assert_eq!(c.router.format.logical_name, c.name);
    assert_eq!(c.router.format.connector_type, "postgresql");
    assert_eq!(c.router.format.types, crate::typemap::TypeModes::POSTGRES);
    assert!(!c.router.format.extended_headers);
    assert_eq!(c.router.format.converters, None);
    assert_eq!(c.kafka.max_record_bytes, DEFAULT_MAX_RECORD_BYTES);
    assert_eq!(c.checkpoint, CheckpointConfig::kafka_default(&c.name));
    assert_eq!(default_pg_object_name(&"X-".repeat(40)).len(), 63);
}

#[test]
fn kafka_checkpoint_store_options() {
    let text = r#"
[[connectors]]
name = "k"
tables = ["shop.outbox_events"]
[connectors.source]
kind = "mariadb"
host = "h"
user = "u"
password = "p"
server_id = 5
[connectors.kafka]
bootstrap_servers = "b:9092"
[connectors.checkpoint]
store = "kafka"
topic = "ops.checkpoints"
delivery = "at_least_once"
batch_max_events = 500
"#;
    let cfg = parse(text, Path::new("k.toml"), None, &|_: &str| None).unwrap();
    match &cfg.connectors[0].checkpoint {
        CheckpointConfig::Kafka {
            topic,
            delivery,
            batch_max_events,
            batch_max_bytes,
            ..
        } => {
            assert_eq!(topic, "ops.checkpoints");
            assert_eq!(*delivery, crate::config::DeliveryMode::AtLeastOnce);
            assert_eq!(*batch_max_events, 500);
            assert_eq!(*batch_max_bytes, 32 * 1024 * 1024);
        }
        other => panic!("{other:?}"),
    }
    let bad = text.replace("batch_max_events = 500", "batch_max_events = 0");
    let err = parse(&bad, Path::new("k.toml"), None, &|_: &str| None)
        .unwrap_err()
        .to_string();
    assert!(err.contains("batch_max_events"), "{err}");
    let typo = text.replace("delivery = \"at_least_once\"", "delivery = \"once\"");
    assert!(parse(&typo, Path::new("k.toml"), None, &|_: &str| None).is_err());
}

#[test]
fn toml_unknown_keys_are_readable_errors() {
    let base = r#"
[[connectors]]
name = "shop"
tables = ["shop.outbox_events"]
[connectors.source]
kind = "mysql"
hots = "127.0.0.1"
user = "u"
server_id = 1
"#;
    let e = err(base, Some("k:1"), &[]);
    assert!(e.contains("unknown field `hots`"), "{e}");
    assert!(e.contains("line 7"), "{e}");
    assert!(e.contains("host"), "{e}");

    let e = err(
        "[[connectors]]\nname = \"a\"\ntables=[]\nfoo = 1\n",
        None,
        &[],
    );
    assert!(e.contains("unknown field `foo`"), "{e}");

    let pg_key_on_mysql = base
        .replace("hots", "host")
        .replace("server_id = 1", "server_id = 1\nslot_name = \"s\"");
    let e = err(&pg_key_on_mysql, Some("k:1"), &[]);
    assert!(
        e.contains("slot_name") && e.contains("does not apply to kind = \"mysql\""),
        "{e}"
    );

    let no_server_id = base.replace("hots", "host").replace("server_id = 1\n", "");
    let e = err(&no_server_id, Some("k:1"), &[]);
    assert!(e.contains("server_id") && e.contains("required"), "{e}");

    let both_names = base.replace("hots", "host")
        + "[connectors.router]\nroute_by_field = \"a\"\n\"route.by.field\" = \"b\"\n";
    let e = err(&both_names, Some("k:1"), &[]);
    assert!(e.contains("same option"), "{e}");

    let no_effect =
        base.replace("hots", "host") + "[connectors.router]\n\"tracing.operation.name\" = \"v\"\n";
    let e = err(&no_effect, Some("k:1"), &[]);
    assert!(e.contains("no effect"), "{e}");

    let bad_placement = base.replace("hots", "host")
        + "[connectors.router]\nadditional_placement = \"event_type:body\"\n";
    let e = err(&bad_placement, Some("k:1"), &[]);
    assert!(e.contains("header, envelope, partition"), "{e}");

    let table_placement = base.replace("hots", "host")
        + "[connectors.router]\nadditional_placement = [{ column = \"event_type\", placement = \"header\", alias = \"eventType\" }, \"p:partition\"]\n";
    let c = one(&table_placement, Some("k:1"), &[]);
    assert_eq!(
        c.router.additional_placement,
        AdditionalField::parse_list("event_type:header:eventType,p:partition").unwrap()
    );

    let bad_regex =
        base.replace("hots", "host") + "[connectors.router]\nroute_topic_regex = \"(?<=x)\"\n";
    let e = err(&bad_regex, Some("k:1"), &[]);
    assert!(e.contains("route.topic.regex"), "{e}");

    let e = err(&base.replace("hots", "host"), None, &[]);
    assert!(
        e.contains("--kafka-bootstrap") && e.contains("OUTBOXD_KAFKA_BOOTSTRAP"),
        "{e}"
    );

    let e = err(
        &base
            .replace("hots", "host")
            .replace("user = \"u\"", "user = \"u\"\npassword_env = \"NOPE\""),
        Some("k:1"),
        &[],
    );
    assert!(e.contains("NOPE is not set"), "{e}");
}

#[test]
fn bootstrap_precedence() {
    let text = r#"
[[connectors]]
name = "a"
tables = ["s.t"]
source = { kind = "mysql", host = "h", user = "u", server_id = 7 }
kafka = { bootstrap_servers = "file:1" }
"#;
    assert_eq!(one(text, None, &[]).kafka.bootstrap_servers, "file:1");
    assert_eq!(
        one(text, None, &[(ENV_KAFKA_BOOTSTRAP, "env:1")])
            .kafka
            .bootstrap_servers,
        "env:1"
    );
    assert_eq!(
        one(text, Some("cli:1"), &[(ENV_KAFKA_BOOTSTRAP, "env:1")])
            .kafka
            .bootstrap_servers,
        "cli:1"
    );
}

fn seed_004_json() -> String {
    let seed = std::fs::read_dir("/work/shared/seeds")
        .ok()
        .and_then(|d| {
            d.filter_map(Result::ok)
                .find(|e| e.file_name().to_string_lossy().starts_with("004_"))
        })
        .and_then(|e| std::fs::read_to_string(e.path()).ok());
    let from_seed = seed.and_then(|text| {
        let start = text.find("{\n  \"name\": \"outbox-connector\"")?;
        let end = start + text[start..].find("\n}\n")? + 2;
        Some(text[start..end].to_string())
    });
    // The seed's connector JSON, verbatim (used when the seeds are not on this machine).
    from_seed.unwrap_or_else(|| {
        r#"{
  "name": "outbox-connector",
  "config": {
    "connector.class": "io.debezium.connector.mysql.MySqlConnector",
    "database.hostname": "mysql",
    "database.port": "3306",
    "database.user": "debezium",
    "database.password": "dbz_pass",
    "database.server.id": "184054",
    "database.server.name": "outbox_server",
    "database.include.list": "order_db",
    "table.include.list": "order_db.outbox_events",
    "database.history.kafka.bootstrap.servers": "kafka:9092",
    "database.history.kafka.topic": "schema-changes",
    "transforms": "outbox",
    "transforms.outbox.type": "io.debezium.transforms.outbox.EventRouter",
    "transforms.outbox.route.topic.replacement": "order-events",
    "transforms.outbox.table.field.event.id": "id",
    "transforms.outbox.table.field.event.key": "aggregate_id",
    "transforms.outbox.table.field.event.type": "event_type",
    "transforms.outbox.table.field.event.payload": "payload",
    "transforms.outbox.table.fields.additional.placement": "status:header:eventStatus"
  }
}"#
        .to_string()
    })
}

#[test]
fn debezium_seed_004_with_bootstrap_given() {
    let json = seed_004_json();
    assert!(json.contains("\"outbox-connector\""));
    let c = one(&json, Some("127.0.0.1:39092"), &[]);
    assert_eq!(c.name, "outbox-connector");
    assert_eq!(c.tables, vec![TableName::new("order_db", "outbox_events")]);
    let SourceConfig::Mysql(m) = &c.source else {
        panic!("mysql expected")
    };
    assert_eq!(m.flavor, MysqlFlavor::Auto);
    assert_eq!(
        (m.host.as_str(), m.port, m.user.as_str()),
        ("mysql", 3306, "debezium")
    );
    assert_eq!(m.password.expose(), "dbz_pass");
    assert_eq!(m.server_id, 184054);
    assert_eq!(m.start, StartPosition::Current);
    assert_eq!(c.kafka.bootstrap_servers, "127.0.0.1:39092");

    let r = &c.router;
    assert_eq!(r.route_topic_replacement, "order-events");
    assert_eq!(r.field_event_key, "aggregate_id");
    assert_eq!(r.field_event_type, "event_type");
    // Not set in the seed: Debezium's default, not outboxd's.
    assert_eq!(r.route_by_field, "aggregatetype");
    assert_eq!(r.route_topic_regex, DEFAULT_ROUTE_TOPIC_REGEX);
    assert_eq!(
        r.additional_placement,
        vec![AdditionalField {
            column: "status".into(),
            placement: Placement::Header,
            alias: Some("eventStatus".into())
        }]
    );

    // Debezium 1.x's database.server.name (no topic.prefix) names the Debezium series.
    assert_eq!(c.debezium_server(), "outbox_server");
    for key in [
        "database.history.kafka.bootstrap.servers",
        "database.history.kafka.topic",
        "snapshot.mode",
    ] {
        assert!(
            ignored(&c, key).is_some(),
            "{key} should be reported: {:?}",
            c.ignored_keys
        );
    }
    assert!(ignored(&c, "database.history.kafka.bootstrap.servers")
        .unwrap()
        .contains("schema history"));
    // The consumed keys are not reported.
    for key in [
        "database.include.list",
        "table.include.list",
        "transforms",
        "database.password",
    ] {
        assert!(ignored(&c, key).is_none(), "{key}");
    }
    assert_eq!(c.checkpoint, CheckpointConfig::kafka_default(&c.name));
    let dbg = format!("{c:?}");
    assert!(!dbg.contains("dbz_pass"), "{dbg}");

    // Without any bootstrap the history's servers are the last resort, reported loudly.
    let c = one(&json, None, &[]);
    assert_eq!(c.kafka.bootstrap_servers, "kafka:9092");
    assert!(ignored(&c, "database.history.kafka.bootstrap.servers")
        .unwrap()
        .starts_with("USED"));
}

#[test]
fn debezium_mariadb_and_postgres() {
    let maria = r#"{
      "connector.class": "io.debezium.connector.mariadb.MariaDbConnector",
      "name": "maria",
      "database.hostname": "db", "database.port": 3307, "database.user": "u",
      "database.password": "${env:PW}",
      "database.server.id": "5",
      "table.include.list": "shop\\.outbox_events",
      "snapshot.mode": "initial",
      "transforms": "outbox",
      "transforms.outbox.type": "io.debezium.transforms.outbox.EventRouter",
      "transforms.outbox.route.by.field": "aggregate_type",
      "transforms.outbox.table.expand.json.payload": "true",
      "value.converter": "org.apache.kafka.connect.json.JsonConverter",
      "value.converter.schemas.enable": "false",
      "some.typo.key": "1"
    }"#;
    let c = one(maria, Some("k:9092"), &[("PW", "from-env")]);
    let SourceConfig::Mysql(m) = &c.source else {
        panic!("mysql expected")
    };
    assert_eq!(m.flavor, MysqlFlavor::Mariadb);
    assert_eq!(m.port, 3307);
    assert_eq!(m.password.expose(), "from-env");
    assert_eq!(c.tables, vec![TableName::new("shop", "outbox_events")]);
    assert!(c.router.expand_json_payload);
    assert!(ignored(&c, "some.typo.key")
        .unwrap()
        .starts_with("unknown key"));
    assert!(ignored(&c, "snapshot.mode")
        .unwrap()
        .contains("not emitted"));

    let adapter = maria
        .replace(
            "io.debezium.connector.mariadb.MariaDbConnector",
            "io.debezium.connector.mysql.MySqlConnector",
        )
        .replace(
            "\"name\": \"maria\",",
            "\"name\": \"maria\", \"connector.adapter\": \"mariadb\",",
        );
    let c = one(&adapter, Some("k:9092"), &[("PW", "x")]);
    let SourceConfig::Mysql(m) = &c.source else {
        panic!("mysql expected")
    };
    assert_eq!(m.flavor, MysqlFlavor::Mariadb);

    let pg = r#"{
      "name": "pg",
      "config": {
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "database.hostname": "pg", "database.user": "u", "database.password": "p",
        "database.dbname": "app",
        "plugin.name": "pgoutput",
        "schema.include.list": "public",
        "table.include.list": "public.outbox_events",
        "topic.prefix": "app",
        "snapshot.mode": "no_data",
        "status.update.interval.ms": "2000",
        "transforms": "outbox",
        "transforms.outbox.type": "io.debezium.transforms.outbox.EventRouter",
        "transforms.outbox.route.tombstone.on.empty.payload": "true",
        "transforms.outbox.table.field.event.schema.version": "v"
      },
      "tasks": []
    }"#;
    let c = one(pg, Some("k:9092"), &[]);
    let SourceConfig::Postgres(p) = &c.source else {
        panic!("postgres expected")
    };
    assert_eq!(
        (p.host.as_str(), p.port, p.dbname.as_str()),
        ("pg", 5432, "app")
    );
    assert_eq!(p.slot_name, "debezium");
    assert_eq!(p.publication_name, "dbz_publication");
    assert_eq!(p.publication_autocreate, PublicationAutocreate::AllTables);
    assert_eq!(p.status_interval, Duration::from_secs(2));
    assert!(c.router.tombstone_on_empty_payload);
    assert_eq!(c.router.route_by_field, "aggregatetype");
    // topic.prefix names the Debezium series (Debezium's MBean `server`).
    assert!(ignored(&c, "topic.prefix").is_none());
    assert_eq!(c.metrics_server.as_deref(), Some("app"));
    assert_eq!(c.debezium_server(), "app");
    assert!(ignored(&c, "tasks").is_some());
    assert!(ignored(&c, "transforms.outbox.table.field.event.schema.version").is_none());
    assert_eq!(c.router.field_schema_version.as_deref(), Some("v"));
    assert!(ignored(&c, "snapshot.mode").is_none());
}

#[test]
fn debezium_settings_outboxd_cannot_reproduce_are_errors() {
    let base = r#"{
      "name": "x",
      "connector.class": "io.debezium.connector.mysql.MySqlConnector",
      "database.hostname": "h", "database.user": "u", "database.password": "topsecret",
      "database.server.id": "9",
      "table.include.list": "s.outbox",
      "transforms": "outbox",
      "transforms.outbox.type": "io.debezium.transforms.outbox.EventRouter"
    }"#;
    let with = |extra: &str| {
        let mut m: serde_json::Map<String, serde_json::Value> = serde_json::from_str(base).unwrap();
        let e: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(&format!("{{{extra}}}")).unwrap();
        m.extend(e);
        serde_json::Value::Object(m).to_string()
    };
    let cases: &[(&str, &str)] = &[
        (
            r#""value.converter": "io.confluent.connect.avro.AvroConverter""#,
            "not supported",
        ),
        (
            r#""value.converter": "org.apache.kafka.connect.json.JsonConverter", "value.converter.decimal.format": "HEX""#,
            "BASE64 or NUMERIC",
        ),
        (
            r#""decimal.handling.mode": "fancy""#,
            "precise, double, string",
        ),
        (r#""snapshot.mode": "initial_only""#, "snapshot"),
        (r#""database.ssl.mode": "verify_full""#, "not an ssl mode"),
        (
            r#""database.ssl.truststore": "/t", "database.ssl.truststore.type": "BKS""#,
            "not supported",
        ),
        (
            r#""database.ssl.keystore.password": "topsecret""#,
            "database.ssl.keystore",
        ),
        (
            r#""producer.override.sasl.mechanism": "GSSAPI""#,
            "Kerberos",
        ),
        (r#""database.include.list": "other_db""#, "does not include"),
        (r#""table.include.list": "s.outbox_.*""#, "literal"),
        (
            r#""transforms.outbox.table.fields.additional.placement": "a:b:c:d""#,
            "column:placement",
        ),
        (
            r#""transforms.outbox.route.topic.replacement": "x.${nope}""#,
            "no group named",
        ),
        (
            r#""connector.class": "io.debezium.connector.sqlserver.SqlServerConnector""#,
            "not supported",
        ),
        // Column options outboxd cannot honour are refused, never ignored (break26 finding 1).
        (
            r#""column.mask.hash.SHA-256.with.salt.CzQMA0cB5K": "s.outbox.secret""#,
            "publish the column unhashed",
        ),
        (
            r#""column.mask.hash.v2.SHA-256.with.salt.x": "s.outbox.secret""#,
            "publish the column unhashed",
        ),
        (r#""column.truncate.to.0.chars": "s.outbox.p""#, "positive"),
        (
            r#""column.include.list": "s.outbox.a", "column.exclude.list": "s.outbox.b""#,
            "column.include.list",
        ),
        (
            r#""column.exclude.list": "s.outbox.(""#,
            "not a regular expression",
        ),
    ];
    for (extra, needle) in cases {
        let text = with(extra);
        let e = err(&text, Some("k:1"), &[]);
        assert!(e.contains(needle), "{extra}: {e}");
        assert!(!e.contains("topsecret"), "{e}");
    }
    let chained = base.replace(
        r#""transforms": "outbox","#,
        r#""transforms": "outbox,unwrap", "transforms.unwrap.type": "io.debezium.transforms.ExtractNewRecordState","#,
    );
    let e = err(&chained, Some("k:1"), &[]);
    assert!(
        e.contains("ExtractNewRecordState") && e.contains("not supported"),
        "{e}"
    );
    let stray = base.replace(
        r#""transforms": "outbox","#,
        r#""transforms": "outbox", "transforms.unwrap.type": "x","#,
    );
    let c = one(&stray, Some("k:1"), &[]);
    assert!(
        ignored(&c, "transforms.unwrap.type")
            .unwrap()
            .contains("not listed"),
        "{:?}",
        c.ignored_keys
    );
    let e = err(
        &base.replace(r#""transforms": "outbox","#, ""),
        Some("k:1"),
        &[],
    );
    assert!(e.contains("transforms"), "{e}");
    let e = err(base, None, &[]);
    assert!(e.contains("no Kafka bootstrap servers"), "{e}");
    let pg = base
        .replace("mysql.MySqlConnector", "postgresql.PostgresConnector")
        .replacen(
            '{',
            r#"{ "database.dbname": "d", "plugin.name": "decoderbufs","#,
            1,
        );
    let e = err(&pg, Some("k:1"), &[]);
    assert!(e.contains("pgoutput"), "{e}");
}

fn connector_file(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("connectors")
        .join(name)
}

fn example_env() -> impl Fn(&str) -> Option<String> {
    env_of(&[
        ("OUTBOXD_MYSQL_PASSWORD", "outboxd-secret"),
        ("OUTBOXD_PG_PASSWORD", "outboxd-secret"),
        ("OUTBOXD_NATS_PASSWORD", "nats-secret"),
        ("OUTBOXD_REDIS_PASSWORD", "redis-secret"),
        ("OUTBOXD_RABBITMQ_PASSWORD", "rabbit-secret"),
    ])
}

#[test]
fn example_connector_files_parse() {
    let env = example_env();
    let files = [
        "shop-mariadb.toml",
        "shop-mariadb.debezium.json",
        "shop-postgres.toml",
    ];
    // The two descriptions of the demo connector keep their checkpoint in one store (two
    // stores for one connector are refused at startup), and so does the PostgreSQL example.
    for f in files {
        let cfg = load_many_with_env(&[connector_file(f)], None, &env).unwrap();
        assert_eq!(
            cfg.connectors[0].checkpoint,
            CheckpointConfig::kafka_default(&cfg.connectors[0].name),
            "{f}"
        );
    }
    // The compose connector parses too (and serves /metrics for the compose Prometheus).
    let compose = Path::new(env!("CARGO_MANIFEST_DIR")).join("docker/outboxd.toml");
    let cfg = load_many_with_env(&[compose], None, &env).unwrap();
    assert_eq!(cfg.metrics.listen, Some("0.0.0.0:9187".parse().unwrap()));
    // Every file in connectors/ (but its README) loads, alone, as one connector, with the
    // sink its name says and the sink's password from the environment (none written inline).
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("connectors");
    let mut seen = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let f = path.file_name().unwrap().to_string_lossy().into_owned();
        if f == "README.md" {
            continue;
        }
        let cfg = load_many_with_env(&[&path], None, &env).unwrap_or_else(|e| panic!("{f}: {e}"));
        assert_eq!(cfg.connectors.len(), 1, "{f}");
        let c = &cfg.connectors[0];
        let kind = ["nats", "redis", "rabbitmq"]
            .into_iter()
            .find(|k| f.contains(&format!("-{k}")))
            .map_or("kafka", |k| if k == "nats" { "nats-jetstream" } else { k });
        assert_eq!(c.sink.kind(), kind, "{f}");
        let sink_password = match &c.sink {
            SinkConfig::Kafka => None,
            SinkConfig::Nats(n) => n.auth.password.as_ref(),
            SinkConfig::Redis(r) => r.auth.password.as_ref(),
            SinkConfig::RabbitMq(r) => r.auth.password.as_ref(),
        };
        if let Some(p) = sink_password {
            assert!(
                p.expose().ends_with("-secret"),
                "{f}: the sink's password from the environment"
            );
        }
        let text = std::fs::read_to_string(&path).unwrap();
        for secret in [
            "outboxd-secret",
            "nats-secret",
            "redis-secret",
            "rabbit-secret",
        ] {
            assert!(!text.contains(secret), "{f}: a password written inline");
        }
        for line in text.lines().map(str::trim_start) {
            assert!(
                !line.starts_with("password =") && !line.starts_with("password="),
                "{f}: an inline password ({line}); use password_env"
            );
        }
        seen.push(f);
    }
    for f in files.iter().chain(&[
        "shop-mariadb-nats.toml",
        "shop-mariadb-redis.toml",
        "shop-mariadb-rabbitmq.toml",
        "shop-postgres-nats.application.properties",
    ]) {
        assert!(
            seen.iter().any(|s| s == f),
            "{f} is missing from connectors/"
        );
    }
    // Both MariaDB files describe the same connector: loading them together is a name clash.
    let e = load_many_with_env(
        &[connector_file(files[0]), connector_file(files[1])],
        None,
        &env,
    )
    .unwrap_err();
    assert!(matches!(e, ConfigError::DuplicateConnector { .. }), "{e}");
    let both = load_many_with_env(
        &[connector_file(files[0]), connector_file(files[2])],
        None,
        &env,
    )
    .unwrap();
    assert_eq!(both.connectors.len(), 2);

    let pg = &both.connectors[1];
    let SourceConfig::Postgres(p) = &pg.source else {
        panic!("postgres expected")
    };
    assert_eq!(
        (p.host.as_str(), p.port, p.dbname.as_str()),
        ("127.0.0.1", 35432, "outboxd")
    );
    assert_eq!(
        (p.slot_name.as_str(), p.publication_name.as_str()),
        ("outboxd_shop", "outboxd_shop")
    );
    assert_eq!(p.message_prefixes, vec!["outbox".to_string()]);
    assert_eq!(pg.tables, vec![TableName::new("public", "outbox_events")]);
}

/// Acceptance: the TOML and the Debezium JSON of the demo give equal router settings, and the
/// router makes identical records from them.
#[test]
fn toml_and_debezium_json_route_identically() {
    let env = example_env();
    let toml = load_many_with_env(&[connector_file("shop-mariadb.toml")], None, &env).unwrap();
    let json =
        load_many_with_env(&[connector_file("shop-mariadb.debezium.json")], None, &env).unwrap();
    let (t, j) = (&toml.connectors[0], &json.connectors[0]);
    // The same routing; the record formats differ only where the JSON names Kafka Connect's
    // converters (StringConverter) and TOML takes outboxd's default (BinaryDataConverter
    // with a StringConverter delegate: the same bytes for text columns).
    assert_eq!(
        RouterConfig {
            format: t.router.format.clone(),
            ..j.router.clone()
        },
        t.router
    );
    assert!(!j.router.format.extended_headers);
    assert_eq!(j.router.format.logical_name, "shop");
    assert_eq!(t.tables, j.tables);
    assert_eq!(t.name, j.name);
    assert_eq!(t.kafka.bootstrap_servers, j.kafka.bootstrap_servers);
    let (SourceConfig::Mysql(ts), SourceConfig::Mysql(js)) = (&t.source, &j.source) else {
        panic!("mysql expected")
    };
    assert_eq!(
        (
            ts.flavor,
            &ts.host,
            ts.port,
            &ts.user,
            ts.password.expose(),
            ts.server_id,
            ts.start
        ),
        (
            js.flavor,
            &js.host,
            js.port,
            &js.user,
            js.password.expose(),
            js.server_id,
            js.start
        )
    );

    let cols: Arc<[Arc<str>]> = [
        "id",
        "aggregate_type",
        "aggregate_id",
        "event_type",
        "payload",
        "created_at",
    ]
    .into_iter()
    .map(Arc::<str>::from)
    .collect();
    let change = RowChange {
        table: TableName::new("shop", "outbox_events"),
        op: Op::Insert,
        row: Row::new(
            cols,
            vec![
                ColumnValue::Int(1),
                ColumnValue::Text("Order".into()),
                ColumnValue::Text("42".into()),
                ColumnValue::Text("OrderCreated".into()),
                ColumnValue::Json(r#"{"orderId":42,"note":"😀"}"#.into()),
                ColumnValue::DateTime(0),
            ],
        ),
        source_ts_ms: 1_700_000_000_000,
        undecodable: None,
    };
    let rt = EventRouter::new(&t.router).unwrap().route(&change).unwrap();
    let rj = EventRouter::new(&j.router).unwrap().route(&change).unwrap();
    assert_eq!(rt, rj);
    let Routed::Record(rec) = rt else {
        panic!("record expected")
    };
    assert_eq!(rec.topic, "outbox.event.Order");
    assert_eq!(rec.key.as_deref(), Some(&b"42"[..]));
    assert_eq!(
        rec.headers,
        vec![
            ("id".to_string(), Some(b"1".to_vec())),
            ("eventType".to_string(), Some(b"OrderCreated".to_vec()))
        ]
    );
}

#[test]
fn load_many_rejects_duplicates_and_conflicting_sections() {
    let dir = std::env::temp_dir().join(format!("outboxd-config-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let conn = |name: &str, extra: &str| {
        format!(
            "{extra}\n[[connectors]]\nname = \"{name}\"\ntables = [\"s.t\"]\nsource = {{ kind = \"mysql\", host = \"h\", user = \"u\", server_id = 3 }}\n"
        )
    };
    let a = dir.join("a.toml");
    let b = dir.join("b.toml");
    let c = dir.join("c.toml");
    std::fs::write(&a, conn("one", "[metrics]\nlisten = \"127.0.0.1:1\"")).unwrap();
    std::fs::write(&b, conn("two", "[metrics]\nlisten = \"127.0.0.1:2\"")).unwrap();
    std::fs::write(&c, conn("one", "")).unwrap();
    let env = env_of(&[]);
    let e = load_many_with_env(&[&a, &b], Some("k:1"), &env).unwrap_err();
    assert!(
        matches!(
            e,
            ConfigError::ConflictingSection {
                section: "metrics",
                ..
            }
        ),
        "{e}"
    );
    let e = load_many_with_env(&[&a, &c], Some("k:1"), &env).unwrap_err();
    assert!(e.to_string().contains("defined twice"), "{e}");
    let ok = load_many_with_env(&[&a, &dir.join("missing.toml")], Some("k:1"), &env).unwrap_err();
    assert!(ok.to_string().contains("missing.toml"), "{ok}");
    let empty: [&Path; 0] = [];
    assert!(matches!(
        load_many_with_env(&empty, None, &env),
        Err(ConfigError::NoFiles)
    ));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn password_file_and_exclusivity() {
    let dir = std::env::temp_dir().join(format!("outboxd-pw-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("pw");
    std::fs::write(&f, "s3cret\n").unwrap();
    let text = format!(
        "[[connectors]]\nname = \"a\"\ntables = [\"s.t\"]\nsource = {{ kind = \"mysql\", host = \"h\", user = \"u\", server_id = 3, password_file = {:?} }}\n",
        f.display().to_string()
    );
    let c = one(&text, Some("k:1"), &[]);
    let SourceConfig::Mysql(m) = &c.source else {
        panic!("mysql expected")
    };
    assert_eq!(m.password.expose(), "s3cret");
    let e = err(
        &text.replace("server_id = 3,", "server_id = 3, password = \"x\","),
        Some("k:1"),
        &[],
    );
    assert!(e.contains("only one of"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

const MINIMAL_TOML: &str = r#"
[[connectors]]
name = "shop"
tables = ["shop.outbox_events"]
source = { kind = "mariadb", host = "db", user = "u", server_id = 7 }
"#;

#[test]
fn toml_error_policy() {
    let c = one(MINIMAL_TOML, Some("k:9092"), &[]);
    assert_eq!(c.errors.tolerance, ErrorTolerance::None);
    assert!(c.errors.context_headers, "TOML default: context headers on");
    assert_eq!(c.errors.dead_letters(), None);

    let c = one(
        &format!("{MINIMAL_TOML}\n[connectors.errors]\ntolerance = \"all\"\ndead_letter_topic = \"shop.dlq\"\ncontext_headers = false\n"),
        Some("k:9092"),
        &[],
    );
    assert_eq!(c.errors.tolerance, ErrorTolerance::All);
    assert_eq!(c.errors.dead_letters(), Some("shop.dlq"));
    assert!(!c.errors.context_headers);

    for (body, expect) in [
        ("tolerance = \"all\"", "needs a dead-letter topic"),
        (
            "dead_letter_topic = \"x\"",
            "only used with tolerance = \"all\"",
        ),
        (
            "tolerance = \"all\"\ndead_letter_topic = \"bad topic\"",
            "not a valid Kafka topic",
        ),
        (
            "tolerance = \"all\"\ndead_letter_topic = \"outboxd.checkpoints.shop\"",
            "is the checkpoint topic",
        ),
        ("tolerance = \"some\"", "unknown variant"),
        ("tolerence = \"all\"", "unknown field"),
    ] {
        let e = err(
            &format!("{MINIMAL_TOML}\n[connectors.errors]\n{body}\n"),
            Some("k:9092"),
            &[],
        );
        assert!(e.contains(expect), "{body}: {e}");
    }
}

#[test]
fn debezium_error_policy_keys() {
    let base = r#"{"name": "shop", "config": {
        "connector.class": "io.debezium.connector.mariadb.MariaDbConnector",
        "database.hostname": "db", "database.user": "u", "database.server.id": "7",
        "table.include.list": "shop.outbox_events",
        "transforms": "outbox",
        "transforms.outbox.type": "io.debezium.transforms.outbox.EventRouter"
        EXTRA }}"#;
    let with = |extra: &str| base.replace("EXTRA", extra);
    let c = one(&with(""), Some("k:9092"), &[]);
    assert_eq!(c.errors, ErrorPolicy::default());

    let c = one(
        &with(
            r#", "errors.tolerance": "all", "errors.deadletterqueue.topic.name": "shop-dlq",
            "errors.deadletterqueue.context.headers.enable": "true",
            "errors.log.enable": "true", "errors.retry.timeout": "0""#,
        ),
        Some("k:9092"),
        &[],
    );
    assert_eq!(c.errors.dead_letters(), Some("shop-dlq"));
    assert!(c.errors.context_headers);
    assert!(ignored(&c, "errors.log.enable").is_some());
    assert!(ignored(&c, "errors.retry.timeout").is_some());
    assert!(ignored(&c, "errors.tolerance").is_none(), "used");

    // Connect's default for context headers is false; a DLQ topic without `all` is unused.
    let c = one(
        &with(r#", "errors.deadletterqueue.topic.name": "shop-dlq""#),
        Some("k:9092"),
        &[],
    );
    assert_eq!(c.errors.dead_letters(), None);
    assert!(ignored(&c, "errors.deadletterqueue.topic.name")
        .unwrap()
        .contains("errors.tolerance=all"));
    let e = err(&with(r#", "errors.tolerance": "all""#), Some("k:9092"), &[]);
    assert!(e.contains("needs a dead-letter topic"), "{e}");
    let e = err(
        &with(r#", "errors.tolerance": "sometimes""#),
        Some("k:9092"),
        &[],
    );
    assert!(e.contains("errors.tolerance"), "{e}");
}

#[test]
fn database_tls_settings_from_toml_and_debezium() {
    let toml = r#"
[[connectors]]
name = "m"
tables = ["s.outbox"]
[connectors.source]
kind = "mariadb"
host = "db"
user = "u"
server_id = 7
[connectors.source.tls]
mode = "verify_identity"
truststore = "/etc/trust.p12"
truststore_password_env = "TRUST_PW"
keystore = "/etc/client.p12"
keystore_password = "kpw"
[connectors.kafka]
bootstrap_servers = "k:1"
"#;
    let c = one(toml, None, &[("TRUST_PW", "tpw")]);
    let SourceConfig::Mysql(m) = &c.source else {
        panic!("mysql")
    };
    assert_eq!(m.tls.mode, MysqlSslMode::VerifyIdentity);
    let ts = m.tls.truststore.as_ref().unwrap();
    assert_eq!(ts.path, std::path::PathBuf::from("/etc/trust.p12"));
    assert_eq!(ts.password.expose(), "tpw");
    assert_eq!(m.tls.keystore.as_ref().unwrap().password.expose(), "kpw");
    assert!(!format!("{c:?}").contains("kpw"), "secrets stay hidden");
    // The default is Debezium's: preferred / prefer.
    let plain = one(&toml.replace("[connectors.source.tls]\nmode = \"verify_identity\"\ntruststore = \"/etc/trust.p12\"\ntruststore_password_env = \"TRUST_PW\"\nkeystore = \"/etc/client.p12\"\nkeystore_password = \"kpw\"\n", ""), None, &[]);
    let SourceConfig::Mysql(m) = &plain.source else {
        panic!("mysql")
    };
    assert_eq!(m.tls.mode, MysqlSslMode::Preferred);
    // A PostgreSQL key under a MySQL source is misplaced.
    let e = err(
        &toml.replace("keystore_password = \"kpw\"", "rootcert = \"/ca.pem\""),
        None,
        &[("TRUST_PW", "x")],
    );
    assert!(
        e.contains("tls.rootcert") && e.contains("does not apply"),
        "{e}"
    );

    let pg = r#"{"name": "p", "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
      "database.hostname": "h", "database.user": "u", "database.password": "topsecret",
      "database.dbname": "d", "table.include.list": "public.outbox",
      "database.sslmode": "verify-full", "database.sslrootcert": "/ca.pem",
      "database.sslcert": "/c.pem", "database.sslkey": "/c.key",
      "transforms": "outbox", "transforms.outbox.type": "io.debezium.transforms.outbox.EventRouter"}"#;
    let c = one(pg, Some("k:1"), &[]);
    let SourceConfig::Postgres(p) = &c.source else {
        panic!("pg")
    };
    assert_eq!(p.tls.mode, PgSslMode::VerifyFull);
    assert_eq!(p.tls.rootcert, Some(RootCert::File("/ca.pem".into())));
    assert_eq!(p.tls.cert, Some("/c.pem".into()));
    assert!(
        c.ignored_keys
            .iter()
            .all(|(k, _)| !k.starts_with("database.ssl")),
        "{:?}",
        c.ignored_keys
    );
    let e = err(
        &pg.replace(r#""database.sslkey": "/c.key","#, ""),
        Some("k:1"),
        &[],
    );
    assert!(
        e.contains("database.sslcert") && e.contains("together"),
        "{e}"
    );
}

/// Secret-valued keys of a connector's `[connectors.kafka.producer]` map are kept as secrets
/// (handed to the record producer, never printed), with the process-wide ones.
#[test]
fn connector_producer_secrets_stay_secret() {
    let text = FULL_TOML.replace("route_tombstone_on_empty_payload = true\n", "").replace(
        r#"producer = { "compression.type" = "lz4", "linger.ms" = 5 }"#,
        r#"producer = { "compression.type" = "lz4", "sasl.password" = "conn-sasl-pw", "ssl.key.password" = "conn-key-pw", "sasl.username" = "relay" }"#,
    );
    let cfg = parse_with(&text, None, &[("OUTBOXD_SHOP_PASSWORD", "pw")]).unwrap();
    let k = &cfg.connectors[0].kafka;
    assert_eq!(
        k.producer.get("sasl.username").map(String::as_str),
        Some("relay")
    );
    assert_eq!(
        k.producer.get("compression.type").map(String::as_str),
        Some("lz4")
    );
    assert!(!k.producer.contains_key("sasl.password"));
    let secrets: BTreeMap<&str, &str> = k.producer_secrets.expose().collect();
    assert_eq!(secrets["sasl.password"], "conn-sasl-pw");
    assert_eq!(secrets["ssl.key.password"], "conn-key-pw");
    for shown in [
        format!("{cfg:?}"),
        format!("{k:?}"),
        k.producer_secrets.describe(),
    ] {
        assert!(
            !shown.contains("conn-sasl-pw") && !shown.contains("conn-key-pw"),
            "{shown}"
        );
    }
    assert!(k.producer_secrets.describe().contains("sasl.password=***"));
}

#[test]
fn kafka_section_producer_override_and_worker_file() {
    let toml = r#"
[kafka]
bootstrap_servers = "broker:9093"
"security.protocol" = "SASL_SSL"
"sasl.mechanism" = "SCRAM-SHA-512"
"sasl.jaas.config" = { env = "JAAS" }
ssl.endpoint.identification.algorithm = ""
[kafka.producer]
"linger.ms" = 20

[[connectors]]
name = "m"
tables = ["s.outbox"]
[connectors.source]
kind = "mariadb"
host = "db"
user = "u"
server_id = 7
"#;
    let jaas = r#"org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" password="s3cret";"#;
    let cfg = parse_with(toml, None, &[("JAAS", jaas)]).unwrap();
    let k = &cfg.connectors[0].kafka;
    assert_eq!(k.bootstrap_servers, "broker:9093", "process-wide bootstrap");
    assert_eq!(k.client.get("security.protocol"), Some("sasl_ssl"));
    assert_eq!(k.client.get("sasl.username"), Some("alice"));
    assert_eq!(
        k.client.get("ssl.endpoint.identification.algorithm"),
        Some("none")
    );
    assert_eq!(k.producer["linger.ms"], "20");
    let exposed: BTreeMap<&str, &str> = k.client.expose().collect();
    assert_eq!(exposed["sasl.password"], "s3cret");
    assert!(!format!("{cfg:?}").contains("s3cret"));
    // The TOML section is closed: a worker-only key is an error there.
    let e = err(
        &toml.replace("[kafka.producer]", "\"group.id\" = \"g\"\n[kafka.producer]"),
        None,
        &[("JAAS", jaas)],
    );
    assert!(e.contains("group.id") && e.contains("remove it"), "{e}");
    // A connector's own bootstrap servers beat the process-wide ones; the CLI beats both.
    let own = toml.replace(
        "server_id = 7",
        "server_id = 7\n[connectors.kafka]\nbootstrap_servers = \"own:1\"",
    );
    assert_eq!(
        one(&own, None, &[("JAAS", jaas)]).kafka.bootstrap_servers,
        "own:1"
    );
    assert_eq!(
        one(&own, Some("cli:1"), &[("JAAS", jaas)])
            .kafka
            .bootstrap_servers,
        "cli:1"
    );

    // Debezium JSON: producer.override.* security keys apply to the connector's clients.
    let json = r#"{"name": "x", "connector.class": "io.debezium.connector.mysql.MySqlConnector",
      "database.hostname": "h", "database.user": "u", "database.server.id": "9",
      "table.include.list": "s.outbox",
      "producer.override.security.protocol": "SSL",
      "producer.override.ssl.endpoint.identification.algorithm": "https",
      "producer.override.ssl.enabled.protocols": "TLSv1.3",
      "producer.override.linger.ms": "7",
      "transforms": "outbox", "transforms.outbox.type": "io.debezium.transforms.outbox.EventRouter"}"#;
    let c = one(json, Some("k:1"), &[]);
    assert_eq!(c.kafka.client.get("security.protocol"), Some("ssl"));
    let with_secrets = json.replace(
        r#""producer.override.linger.ms": "7","#,
        r#""producer.override.linger.ms": "7", "producer.override.sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule required username=\"u\" password=\"dbz-sasl-pw\";", "producer.override.ssl.key.password": "dbz-key-pw","#,
    );
    let c2 = one(&with_secrets, Some("k:1"), &[]);
    let exposed: BTreeMap<&str, &str> = c2.kafka.client.expose().collect();
    assert_eq!(exposed["sasl.password"], "dbz-sasl-pw");
    assert_eq!(exposed["ssl.key.password"], "dbz-key-pw");
    let debug = format!("{c2:?}");
    assert!(
        !debug.contains("dbz-sasl-pw") && !debug.contains("dbz-key-pw"),
        "{debug}"
    );
    assert!(ignored(&c, "producer.override.ssl.enabled.protocols").is_some());
    // Applied as a worker file's producer.linger.ms would be.
    assert_eq!(
        c.kafka.producer.get("linger.ms").map(String::as_str),
        Some("7")
    );
    assert!(ignored(&c, "producer.override.linger.ms").is_none());

    // A worker file (`--kafka-config`) beats the TOML section, key by key.
    let dir = std::env::temp_dir().join(format!("outboxd-worker-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let worker = dir.join("worker.properties");
    std::fs::write(&worker, "bootstrap.servers=w:1\nsecurity.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.username=bob\nsasl.password=${env:PW}\nrest.port=8083\n").unwrap();
    let conn = dir.join("c.toml");
    std::fs::write(&conn, toml).unwrap();
    let env = env_of(&[("JAAS", jaas), ("PW", "pw2")]);
    let cfg = load_all_with_env(
        &[&conn],
        LoadOptions {
            kafka_bootstrap: None,
            kafka_config: Some(&worker),
            without_source_secrets: false,
            none_is_empty: false,
            shadow: None,
        },
        &env,
    )
    .unwrap();
    let k = &cfg.connectors[0].kafka;
    assert_eq!(k.bootstrap_servers, "w:1");
    assert_eq!(k.client.get("security.protocol"), Some("sasl_plaintext"));
    assert_eq!(k.client.get("sasl.mechanisms"), Some("PLAIN"));
    assert_eq!(k.client.get("sasl.username"), Some("bob"));
    assert_eq!(
        k.client
            .expose()
            .find(|(k, _)| *k == "sasl.password")
            .unwrap()
            .1,
        "pw2"
    );
    assert!(cfg.kafka.worker_keys.iter().any(|k| k == "rest.port"));
    assert!(!cfg
        .kafka
        .ignored_keys
        .iter()
        .any(|(k, _)| k == "bootstrap.servers"));

    // OUTBOXD_KAFKA_BOOTSTRAP (or --kafka-bootstrap) beats the worker file's
    // bootstrap.servers, and says so: `check` lists it, `run` logs it.
    let overridden = |flag: Option<&str>, env_value: &str| {
        let env = env_of(&[
            ("JAAS", jaas),
            ("PW", "pw2"),
            (ENV_KAFKA_BOOTSTRAP, env_value),
        ]);
        let opts = LoadOptions {
            kafka_bootstrap: flag,
            kafka_config: Some(&worker),
            without_source_secrets: false,
            none_is_empty: false,
            shadow: None,
        };
        let cfg = load_all_with_env(&[&conn], opts, &env).unwrap();
        let note = cfg
            .kafka
            .ignored_keys
            .iter()
            .find(|(k, _)| k == "bootstrap.servers")
            .map(|(_, why)| why.clone());
        (cfg.connectors[0].kafka.bootstrap_servers.clone(), note)
    };
    let (servers, note) = overridden(None, "env:9");
    assert_eq!(servers, "env:9");
    let note = note.expect("the override is noted");
    assert!(
        note.contains("OUTBOXD_KAFKA_BOOTSTRAP=env:9") && note.contains("w:1"),
        "{note}"
    );
    // clap fills the flag from the variable: still named as the variable.
    let (_, note) = overridden(Some("env:9"), "env:9");
    assert!(note.unwrap().contains("OUTBOXD_KAFKA_BOOTSTRAP=env:9"));
    let (servers, note) = overridden(Some("cli:9"), "env:9");
    assert_eq!(servers, "cli:9");
    assert!(note.unwrap().contains("--kafka-bootstrap=cli:9"));
    // An empty variable (read into the flag as "") overrides nothing.
    assert_eq!(overridden(Some(""), "").1, None);
    // The same list: nothing to say.
    assert_eq!(overridden(None, "w:1").1, None);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The `checkpoint` commands load a connector whose source password comes from a variable
/// that is not set (they never connect to the source); everything else refuses it.
#[test]
fn checkpoint_commands_need_no_source_password() {
    let dir = std::env::temp_dir().join(format!("outboxd-nopw-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let conn = dir.join("c.toml");
    std::fs::write(
        &conn,
        r#"
[[connectors]]
name = "a"
tables = ["s.t"]
source = { kind = "mysql", host = "h", user = "u", server_id = 7, password_env = "UNSET_PW_VAR" }
kafka = { bootstrap_servers = "k:1" }
"#,
    )
    .unwrap();
    let env = env_of(&[]);
    let load = |without_source_secrets| {
        let opts = LoadOptions {
            kafka_bootstrap: None,
            kafka_config: None,
            without_source_secrets,
            none_is_empty: false,
            shadow: None,
        };
        load_all_with_env(&[&conn], opts, &env)
    };
    let e = load(false).unwrap_err().to_string();
    assert!(e.contains("UNSET_PW_VAR is not set"), "{e}");
    let cfg = load(true).unwrap();
    assert_eq!(cfg.connectors[0].kafka.bootstrap_servers, "k:1");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn shadow_runs_own_nothing_of_the_live_connector() {
    let dir = std::env::temp_dir().join(format!("outboxd-shadow-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pg = dir.join("pg.json");
    std::fs::write(
        &pg,
        r#"{"name":"orders","config":{"connector.class":"io.debezium.connector.postgresql.PostgresConnector",
        "database.hostname":"h","database.user":"u","database.password":"p","database.dbname":"d",
        "topic.prefix":"app","slot.name":"dbz_orders","table.include.list":"public.outbox",
        "transforms":"outbox","transforms.outbox.type":"io.debezium.transforms.outbox.EventRouter",
        "errors.tolerance":"all","errors.deadletterqueue.topic.name":"dlq"}}"#,
    )
    .unwrap();
    let env = env_of(&[]);
    let opts = |name, server_id| LoadOptions {
        kafka_bootstrap: Some("k:1"),
        kafka_config: None,
        without_source_secrets: false,
        none_is_empty: false,
        shadow: Some(crate::config::Shadow { name, server_id }),
    };
    let cfg = load_all_with_env(&[&pg], opts("shadow", None), &env).unwrap();
    let c = &cfg.connectors[0];
    assert_eq!(c.name, "orders.shadow");
    assert_eq!(c.router.topic_prefix.as_deref(), Some("shadow."));
    assert_eq!(c.errors.dead_letter_topic.as_deref(), Some("shadow.dlq"));
    assert_eq!(
        c.checkpoint,
        CheckpointConfig::kafka_default("orders.shadow")
    );
    let SourceConfig::Postgres(p) = &c.source else {
        panic!("postgres")
    };
    assert_eq!(p.slot_name, "dbz_orders_shadow");
    assert_eq!(c.debezium_server(), "app");
    let e = load_all_with_env(&[&pg], opts("Bad-Name", None), &env)
        .unwrap_err()
        .to_string();
    assert!(e.contains("a-z, 0-9 and _"), "{e}");
    let my = dir.join("my.json");
    std::fs::write(
        &my,
        r#"{"name":"m","config":{"connector.class":"io.debezium.connector.mariadb.MariaDbConnector",
        "database.hostname":"h","database.user":"u","database.password":"p","database.server.id":"5",
        "table.include.list":"s.outbox","transforms":"outbox",
        "transforms.outbox.type":"io.debezium.transforms.outbox.EventRouter"}}"#,
    )
    .unwrap();
    let e = load_all_with_env(&[&my], opts("shadow", None), &env)
        .unwrap_err()
        .to_string();
    assert!(e.contains("--shadow-server-id"), "{e}");
    let e = load_all_with_env(&[&my], opts("shadow", Some(5)), &env)
        .unwrap_err()
        .to_string();
    assert!(e.contains("must differ"), "{e}");
    let cfg = load_all_with_env(&[&my], opts("shadow", Some(77)), &env).unwrap();
    let SourceConfig::Mysql(m) = &cfg.connectors[0].source else {
        panic!("mysql")
    };
    assert_eq!(m.server_id, 77);
}

/// break26 finding 1: the column options reach the router (masking before the EventRouter);
/// keys Debezium ignores are reported, not silently dropped.
#[test]
fn debezium_column_options_are_applied() {
    let text = r#"{
      "name": "x",
      "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
      "database.hostname": "h", "database.user": "u", "database.password": "p",
      "database.dbname": "d", "table.include.list": "public.outbox",
      "column.mask.with.3.chars": "public.outbox.aggregateid",
      "column.truncate.to.2.chars": "public.outbox.payload",
      "column.mask.other": "x",
      "transforms": "outbox",
      "transforms.outbox.type": "io.debezium.transforms.outbox.EventRouter"
    }"#;
    let c = one(text, Some("k:1"), &[]);
    assert!(ignored(&c, "column.mask.other").is_some());
    assert!(ignored(&c, "column.mask.with.3.chars").is_none());
    let router = EventRouter::new(&c.router).unwrap();
    let names: Arc<[Arc<str>]> = ["id", "aggregatetype", "aggregateid", "type", "payload"]
        .iter()
        .map(|n| Arc::<str>::from(*n))
        .collect();
    let t = |s: &str| ColumnValue::Text(s.into());
    let change = RowChange {
        table: crate::event::TableName::new("public", "outbox"),
        op: Op::Insert,
        row: Row::new(names, vec![t("1"), t("A"), t("secret"), t("E"), t("abc")]),
        source_ts_ms: 0,
        undecodable: None,
    };
    let Routed::Record(rec) = router.route(&change).unwrap() else {
        panic!("no record")
    };
    // outboxd's default converters for a Debezium JSON: JsonConverter with schemas.
    let key = String::from_utf8(rec.key.unwrap()).unwrap();
    assert!(key.contains(r#""parameters":{"masked":"true"}"#), "{key}");
    assert!(key.contains(r#""payload":"***""#), "{key}");
    let value = String::from_utf8(rec.value.unwrap()).unwrap();
    assert!(value.contains("\"ab\""), "{value}");
}

/// break28 F1: two connectors keeping their checkpoints in one file would overwrite each
/// other's and resume at the other's position.
#[test]
fn two_connectors_cannot_share_a_checkpoint_file() {
    let dir = std::env::temp_dir().join(format!("outboxd-shared-cp-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let one = |name: &str| {
        format!(
            "[[connectors]]\nname = \"{name}\"\ntables = [\"shop.outbox\"]\n\
             [connectors.source]\nkind = \"mariadb\"\nhost = \"h\"\nuser = \"u\"\n\
             password = \"p\"\nserver_id = {}\n[connectors.kafka]\n\
             bootstrap_servers = \"k:9092\"\n[connectors.checkpoint]\nstore = \"file\"\n\
             path = \"{}\"\n",
            name.len() + 7,
            dir.join("cp.json").display()
        )
    };
    let (a, b) = (dir.join("a.toml"), dir.join("b.toml"));
    std::fs::write(&a, one("alpha")).unwrap();
    std::fs::write(&b, one("beta")).unwrap();
    let e = load_all(&[&a, &b], LoadOptions::default()).unwrap_err();
    assert!(matches!(e, ConfigError::SharedCheckpointFile { .. }), "{e}");
    assert!(e.to_string().contains("`alpha` and `beta`"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Kafka Connect's `topic.creation.*` keys of a connector JSON are taken (not reported as
/// unused), read as Connect reads them, errors name the key, and a worker file's
/// `topic.creation.enable=false` turns them off.
#[test]
fn debezium_topic_creation_keys() {
    let json = seed_004_json().replace(
        "\"transforms\": \"outbox\",",
        "\"transforms\": \"outbox\",\n    \"topic.creation.default.partitions\": \"6\",\n    \"topic.creation.default.replication.factor\": \"-1\",\n    \"topic.creation.groups\": \"big\",\n    \"topic.creation.big.include\": \"order-.*\",\n    \"topic.creation.big.partitions\": \"12\",\n    \"topic.creation.big.compression.type\": \"zstd\",",
    );
    let c = one(&json, Some("k:9092"), &[]);
    let tc = c.kafka.topic_creation.as_ref().expect("topic creation");
    let g = tc.group_for("order-events");
    assert_eq!(
        (g.name.as_str(), g.partitions, g.replication_factor),
        ("big", 12, -1)
    );
    assert_eq!(g.configs["compression.type"], "zstd");
    assert_eq!(tc.group_for("other").partitions, 6);
    assert!(ignored(&c, "topic.creation.default.partitions").is_none());
    let e = err(
        &seed_004_json().replace(
            "\"transforms\": \"outbox\",",
            "\"transforms\": \"outbox\",\n    \"topic.creation.default.partitions\": \"0\",",
        ),
        Some("k:9092"),
        &[],
    );
    assert!(e.contains("topic.creation.default"), "{e}");

    let dir = std::env::temp_dir().join(format!("outboxd-tc-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let worker = dir.join("worker.properties");
    std::fs::write(
        &worker,
        "bootstrap.servers=w:1\ntopic.creation.enable=false\n",
    )
    .unwrap();
    let conn = dir.join("c.json");
    std::fs::write(&conn, &json).unwrap();
    let opts = LoadOptions {
        kafka_bootstrap: None,
        kafka_config: Some(&worker),
        without_source_secrets: false,
        none_is_empty: false,
        shadow: None,
    };
    let cfg = load_all_with_env(&[&conn], opts, &env_of(&[])).unwrap();
    assert_eq!(cfg.connectors[0].kafka.topic_creation, None);
    assert!(!cfg
        .kafka
        .ignored_keys
        .iter()
        .any(|(k, _)| k == "topic.creation.enable"));
    std::fs::remove_dir_all(&dir).ok();
}

/// Connector configs Kafka Connect / Debezium refuse are refused here too, naming the key:
/// a `topic.prefix` with characters a topic name cannot have, a non-boolean value of a
/// boolean Debezium option, an empty entry inside `table.fields.additional.placement`.
#[test]
fn configs_debezium_refuses_are_refused() {
    let with = |line: &str| {
        seed_004_json().replace(
            "\"transforms\": \"outbox\",",
            &format!("\"transforms\": \"outbox\",\n    {line},"),
        )
    };
    let e = err(&with("\"topic.prefix\": \"my shop\""), Some("k:9092"), &[]);
    assert!(e.contains("topic.prefix") && e.contains("' '"), "{e}");
    let e = err(
        &with("\"tombstones.on.delete\": \"bogus\""),
        Some("k:9092"),
        &[],
    );
    assert!(
        e.contains("tombstones.on.delete") && e.contains("not true or false"),
        "{e}"
    );
    let c = one(
        &with("\"tombstones.on.delete\": \" FALSE \""),
        Some("k:9092"),
        &[],
    );
    assert!(ignored(&c, "tombstones.on.delete").is_some());
    let c = one(
        &with("\"topic.prefix\": \"shop-1.eu_west\""),
        Some("k:9092"),
        &[],
    );
    assert_eq!(c.metrics_server.as_deref(), Some("shop-1.eu_west"));
    let e = err(
        &seed_004_json().replace(
            "\"status:header:eventStatus\"",
            "\"status:header:eventStatus,,id:header\"",
        ),
        Some("k:9092"),
        &[],
    );
    assert!(e.contains("empty entry"), "{e}");
    one(
        &seed_004_json().replace(
            "\"status:header:eventStatus\"",
            "\"status:header:eventStatus,,\"",
        ),
        Some("k:9092"),
        &[],
    );
    // Per connector, as Debezium's: the MariaDB/MySQL connector takes any value for
    // slot.drop.on.stop (a PostgreSQL option), the PostgreSQL one refuses it.
    one(
        &with("\"slot.drop.on.stop\": \"maybe\""),
        Some("k:9092"),
        &[],
    );
}

/// A connector JSON's `producer.override.*` and a worker file's `producer.*` are applied
/// the same way: librdkafka and Java names alike, outboxd's fixed settings reported when
/// they ask for what it does anyway and refused otherwise, secrets kept secret.
#[test]
fn producer_overrides_and_worker_producer_keys_are_applied_alike() {
    let with = |lines: &str| {
        seed_004_json().replace(
            "\"transforms\": \"outbox\",",
            &format!("\"transforms\": \"outbox\",\n    {lines},"),
        )
    };
    let c = one(
        &with(
            r#""producer.override.compression.type": "zstd", "producer.override.acks": "-1", "producer.override.enable.idempotence": "true", "producer.override.max.in.flight.requests.per.connection": "5""#,
        ),
        Some("k:9092"),
        &[],
    );
    let c2 = one(
        &with(r#""producer.override.client.id": "mine""#),
        Some("k:9092"),
        &[],
    );
    assert!(
        ignored(&c2, "producer.override.client.id").is_some(),
        "a worker key is reported, not dropped"
    );
    assert_eq!(c.kafka.producer["compression.type"], "zstd");
    assert_eq!(
        c.kafka.producer["max.in.flight.requests.per.connection"],
        "5"
    );
    assert!(!c.kafka.producer.contains_key("acks"));
    assert!(ignored(&c, "producer.override.acks").is_some_and(|w| w.contains("always uses")));
    for (line, key) in [
        (r#""producer.override.acks": "1""#, "producer.override.acks"),
        (
            r#""producer.override.enable.idempotence": "false""#,
            "producer.override.enable.idempotence",
        ),
        (
            r#""producer.override.partitioner.class": "org.apache.kafka.clients.producer.RoundRobinPartitioner""#,
            "producer.override.partitioner.class",
        ),
    ] {
        let e = err(&with(line), Some("k:9092"), &[]);
        assert!(e.contains(key) && e.contains("cannot be applied"), "{e}");
    }

    let dir = std::env::temp_dir().join(format!("outboxd-po-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let worker = dir.join("worker.properties");
    let conn = dir.join("c.json");
    std::fs::write(&conn, seed_004_json()).unwrap();
    let load = |props: &str| {
        std::fs::write(&worker, format!("bootstrap.servers=w:1\n{props}")).unwrap();
        let opts = LoadOptions {
            kafka_bootstrap: None,
            kafka_config: Some(&worker),
            without_source_secrets: false,
            none_is_empty: false,
            shadow: None,
        };
        load_all_with_env(&[&conn], opts, &env_of(&[]))
    };
    let cfg = load("producer.acks=all\nproducer.compression.type=zstd\n").unwrap();
    assert_eq!(cfg.connectors[0].kafka.producer["compression.type"], "zstd");
    assert!(cfg
        .kafka
        .ignored_keys
        .iter()
        .any(|(k, why)| k == "producer.acks" && why.contains("always uses")));
    let e = load("producer.acks=1\n").unwrap_err().to_string();
    assert!(
        e.contains("producer.acks") && e.contains("cannot be applied"),
        "{e}"
    );
    std::fs::remove_dir_all(&dir).ok();
}

/// A misspelt key in a Debezium connector JSON gets "did you mean" as in the TOML: an
/// optional connector key, an EventRouter option, and a required key the file lacks but
/// has misspelt.
#[test]
fn debezium_json_typos_name_the_key_meant() {
    let json = |extra: &str, host_key: &str| {
        format!(
            r#"{{
      "connector.class": "io.debezium.connector.mariadb.MariaDbConnector",
      "name": "maria",
      "{host_key}": "db", "database.port": 3307, "database.user": "u",
      "database.password": "pw",
      "database.server.id": "5",
      "table.include.list": "shop\\.outbox_events",
      "transforms": "outbox",
      "transforms.outbox.type": "io.debezium.transforms.outbox.EventRouter",
      {extra}
      "topic.prefx": "shop"
    }}"#
        )
    };
    let c = one(
        &json(
            r#""transforms.outbox.route.by.feild": "aggregate_type","#,
            "database.hostname",
        ),
        Some("k:9092"),
        &[],
    );
    let said = ignored(&c, "topic.prefx").unwrap();
    assert!(said.ends_with("(did you mean `topic.prefix`?)"), "{said}");
    let said = ignored(&c, "transforms.outbox.route.by.feild").unwrap();
    assert!(
        said.ends_with("(did you mean `transforms.outbox.route.by.field`?)"),
        "{said}"
    );
    // Nothing close: no suggestion.
    let c = one(
        &json(r#""zz.qq": "1","#, "database.hostname"),
        Some("k:9092"),
        &[],
    );
    assert!(!ignored(&c, "zz.qq").unwrap().contains("did you mean"));
    let e = parse(
        &json("", "database.hostnmae"),
        Path::new("c.json"),
        Some("k:9092"),
        &|_: &str| None,
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("database.hostname: is required (the file has `database.hostnmae`: a misspelling of it?)"),
        "{e}"
    );
}
