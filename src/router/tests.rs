use std::sync::Arc;

use super::*;
use crate::event::Row;

fn row(cols: &[(&str, ColumnValue)]) -> Row {
    let names: Arc<[Arc<str>]> = cols.iter().map(|(n, _)| Arc::<str>::from(*n)).collect();
    Row::new(names, cols.iter().map(|(_, v)| v.clone()).collect())
}

fn text(s: &str) -> ColumnValue {
    ColumnValue::Text(s.into())
}

fn outbox_row(payload: ColumnValue) -> Row {
    row(&[
        ("id", ColumnValue::Int(42)),
        ("aggregate_type", text("Order")),
        ("aggregate_id", text("order-7")),
        ("event_type", text("OrderCreated")),
        ("payload", payload),
        ("created_at", ColumnValue::DateTime(1_700_000_000_123_456)),
    ])
}

fn change(op: Op, row: Row) -> RowChange {
    RowChange {
        table: TableName::new("shop", "outbox_events"),
        op,
        row,
        source_ts_ms: 1_700_000_999_000,
        undecodable: None,
    }
}

fn insert(payload: ColumnValue) -> RowChange {
    change(Op::Insert, outbox_row(payload))
}

fn router(f: impl FnOnce(&mut RouterConfig)) -> EventRouter {
    let mut cfg = RouterConfig::default();
    f(&mut cfg);
    EventRouter::new(&cfg).unwrap()
}

fn record(r: &EventRouter, c: &RowChange) -> KafkaRecord {
    match r.route(c).unwrap() {
        Routed::Record(rec) => rec,
        other => panic!("expected a record, got {other:?}"),
    }
}

#[test]
fn insert_makes_the_debezium_record() {
    let r = router(|_| {});
    let rec = record(&r, &insert(ColumnValue::Json(r#"{"orderId": 7}"#.into())));
    assert_eq!(rec.topic, "outbox.event.Order");
    assert_eq!(rec.key.as_deref(), Some(&b"order-7"[..]));
    assert_eq!(rec.value.as_deref(), Some(&br#"{"orderId": 7}"#[..]));
    assert_eq!(rec.headers, vec![("id".to_string(), Some(b"42".to_vec()))]);
    assert_eq!(rec.timestamp_ms, Some(1_700_000_999_000));
    assert_eq!(rec.partition, None);
    assert_eq!(rec.approx_size(), 18 + 7 + 14 + 2 + 2);
}

#[test]
fn route_taking_moves_the_payload_and_leaves_a_failed_row_alone() {
    let r = router(|_| {});
    let payload = r#"{"orderId": 7}"#;
    let mut c = insert(ColumnValue::Json(payload.into()));
    let expected = record(&r, &c);
    match r.route_taking(&mut c).unwrap() {
        Routed::Record(rec) => assert_eq!(rec, expected),
        other => panic!("expected a record, got {other:?}"),
    }
    assert_eq!(c.row.get("payload"), Some(&ColumnValue::Null), "moved out");

    // The route-by column is NULL: no topic, so the row must stay whole for the error.
    let r = router(|cfg| cfg.route_by_field = "event_type".into());
    let mut c = insert(ColumnValue::Json(payload.into()));
    c.row = row(&[
        ("id", ColumnValue::Int(42)),
        ("aggregate_type", text("Order")),
        ("aggregate_id", text("order-7")),
        ("event_type", ColumnValue::Null),
        ("payload", ColumnValue::Json(payload.into())),
    ]);
    assert!(r.route_taking(&mut c).is_err());
    assert_eq!(
        c.row.get("payload"),
        Some(&ColumnValue::Json(payload.into()))
    );
}

#[test]
fn deletes_skip_silently_and_updates_follow_the_behaviour() {
    let r = router(|_| {});
    let del = change(Op::Delete, outbox_row(ColumnValue::Null));
    assert_eq!(r.route(&del).unwrap(), Routed::Skipped(SkipReason::Delete));
    let upd = change(Op::Update, outbox_row(ColumnValue::Null));
    assert_eq!(
        r.route(&upd).unwrap(),
        Routed::Skipped(SkipReason::InvalidOpWarned)
    );
    let r = router(|c| c.op_invalid_behavior = InvalidOpBehavior::Error);
    assert_eq!(
        r.route(&upd).unwrap(),
        Routed::Skipped(SkipReason::InvalidOpErrorLogged)
    );
    assert_eq!(r.route(&del).unwrap(), Routed::Skipped(SkipReason::Delete));
    let r = router(|c| c.op_invalid_behavior = InvalidOpBehavior::Fatal);
    let e = r.route(&upd).unwrap_err();
    assert!(matches!(e, RouteError::InvalidOperation { .. }));
    assert!(e.to_string().contains("table.op.invalid.behavior"), "{e}");
    assert!(SkipReason::Delete.to_string().contains("delete"));
}

#[test]
fn topic_regex_and_replacement() {
    let r = router(|c| {
        c.route_topic_regex = "(?<kind>[A-Z][a-z]+)(?<rest>.*)".into();
        c.route_topic_replacement = "events.${kind}.$2x\\$".into();
    });
    assert_eq!(r.topic_for("OrderLine"), "events.Order.Linex$");
    assert_eq!(r.fixed_topic(), None, "the topic depends on the value");
    let fixed = router(|c| c.route_topic_replacement = "shop.\\$events".into());
    assert_eq!(fixed.fixed_topic().as_deref(), Some("shop.$events"));
    assert_eq!(router(|_| {}).fixed_topic(), None, "Debezium's default");
    // No match (starts lower-case): the value itself, as RegexRouter leaves the topic.
    assert_eq!(r.topic_for("order"), "order");
    // Java's matches() is a full match: a partial match does not count.
    let r = router(|c| {
        c.route_topic_regex = "Ord".into();
        c.route_topic_replacement = "x".into();
    });
    assert_eq!(r.topic_for("Order"), "Order");
    // $12 with one group is group 1 then "2" (Java's greedy-while-valid rule).
    let r = router(|c| {
        c.route_topic_regex = "(.*)".into();
        c.route_topic_replacement = "t.$12".into();
    });
    assert_eq!(r.topic_for("a"), "t.a2");

    for (re, rep) in [
        ("(.*)", "x.${nope}"),
        ("(.*)", "x.$2"),
        ("(.*)", "x.$"),
        ("(.*)", "x.\\"),
        ("(.*)", "x.$a"),
    ] {
        let cfg = RouterConfig {
            route_topic_regex: re.into(),
            route_topic_replacement: rep.into(),
            ..RouterConfig::default()
        };
        let e = EventRouter::new(&cfg).unwrap_err();
        assert!(
            matches!(e, RouterConfigError::Replacement { .. }),
            "{rep}: {e}"
        );
    }
    let mut cfg = RouterConfig {
        route_topic_regex: "(?<=a)b".into(),
        ..RouterConfig::default()
    };
    assert!(matches!(
        EventRouter::new(&cfg).unwrap_err(),
        RouterConfigError::Regex { .. }
    ));
    cfg.route_topic_regex = "a)(b".into();
    assert!(EventRouter::new(&cfg).is_err());
}

#[test]
fn route_value_problems_are_errors() {
    let r = router(|_| {});
    let mut c = insert(text("{}"));
    c.row = row(&[
        ("id", ColumnValue::Int(1)),
        ("aggregate_type", ColumnValue::Null),
        ("aggregate_id", text("a")),
        ("payload", text("{}")),
    ]);
    let e = r.route(&c).unwrap_err();
    assert!(matches!(e, RouteError::NullRouteValue { .. }), "{e}");
    assert!(e.to_string().contains("aggregate_type"));

    c.row = row(&[
        ("id", ColumnValue::Int(1)),
        ("aggregate_id", text("a")),
        ("payload", text("{}")),
    ]);
    let e = r.route(&c).unwrap_err();
    assert!(e.to_string().contains("route.by.field"), "{e}");
    assert!(e.to_string().contains("aggregate_type"), "{e}");

    c.row = row(&[
        ("id", ColumnValue::Int(1)),
        ("aggregate_type", text("has space")),
        ("aggregate_id", text("a")),
        ("payload", text("{}")),
    ]);
    let e = r.route(&c).unwrap_err();
    assert!(matches!(e, RouteError::InvalidTopic { .. }), "{e}");

    c.row = row(&[
        ("id", ColumnValue::Int(1)),
        ("aggregate_type", ColumnValue::Bytes(vec![0xff, 0xfe])),
        ("aggregate_id", text("a")),
        ("payload", text("{}")),
    ]);
    assert!(matches!(
        r.route(&c).unwrap_err(),
        RouteError::RouteValueNotText { .. }
    ));
}

#[test]
fn missing_payload_id_and_key_columns_name_the_option() {
    let r = router(|_| {});
    for (missing, option) in [
        ("payload", "table.field.event.payload"),
        ("id", "table.field.event.id"),
        ("aggregate_id", "table.field.event.key"),
    ] {
        let cols: Vec<(&str, ColumnValue)> = [
            ("id", ColumnValue::Int(1)),
            ("aggregate_type", text("Order")),
            ("aggregate_id", text("a")),
            ("payload", text("{}")),
        ]
        .into_iter()
        .filter(|(n, _)| *n != missing)
        .collect();
        let e = r.route(&change(Op::Insert, row(&cols))).unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains(option) && msg.contains(missing), "{msg}");
    }
}

#[test]
fn a_column_left_out_of_a_minimal_row_image_says_so() {
    let r = router(|c| {
        c.set_option("table.fields.additional.placement", "status:header")
            .unwrap();
    });
    let image = row(&[
        ("id", ColumnValue::Int(1)),
        ("aggregate_type", text("Order")),
        ("aggregate_id", text("a")),
        ("payload", text("{}")),
    ]);
    let omitted: Arc<[Arc<str>]> = [Arc::<str>::from("status")].into_iter().collect();
    let e = r
        .route(&change(Op::Insert, image.clone().with_omitted(omitted)))
        .unwrap_err();
    assert!(matches!(e, RouteError::NotInRowImage { .. }), "{e:?}");
    let msg = e.to_string();
    assert!(
        msg.contains("has column `status`")
            && msg.contains("row image")
            && msg.contains("binlog_row_image=FULL"),
        "{msg}"
    );
    // A column the table does not have at all is still "no column".
    let e = r.route(&change(Op::Insert, image)).unwrap_err();
    assert!(e.to_string().contains("has no column `status`"), "{e}");
}

#[test]
fn a_logical_message_without_a_field_says_message_not_table() {
    let r = router(|_| {});
    let mut c = change(
        Op::Insert,
        row(&[
            ("aggregate_type", text("Order")),
            ("aggregate_id", text("a")),
            ("payload", text("{}")),
        ]),
    );
    c.table = TableName::new(crate::event::MESSAGE_SCHEMA, "outbox");
    let e = r.route(&c).unwrap_err();
    assert!(matches!(e, RouteError::MissingMessageField { .. }), "{e:?}");
    let msg = e.to_string();
    assert!(
        msg.contains("logical decoding message with prefix `outbox` has no field `id`")
            && msg.contains("message's JSON content")
            && !msg.contains("outbox table"),
        "{msg}"
    );
}
#[test]
fn null_key_gives_no_key() {
    let r = router(|_| {});
    let mut c = insert(text("{}"));
    c.row = row(&[
        (
            "id",
            ColumnValue::Uuid("4d47e190-0402-4048-bc2c-89dd54343cdc".into()),
        ),
        ("aggregate_type", text("Order")),
        ("aggregate_id", ColumnValue::Null),
        ("payload", text("{}")),
    ]);
    let rec = record(&r, &c);
    assert_eq!(rec.key, None);
    assert_eq!(
        rec.headers[0].1.as_deref(),
        Some(&b"4d47e190-0402-4048-bc2c-89dd54343cdc"[..])
    );
}

#[test]
fn empty_and_null_payloads() {
    let plain = router(|_| {});
    let tomb = router(|c| c.tombstone_on_empty_payload = true);
    // NULL: no value either way (Debezium passes the null payload through).
    assert_eq!(record(&plain, &insert(ColumnValue::Null)).value, None);
    assert_eq!(record(&tomb, &insert(ColumnValue::Null)).value, None);
    // Blank: tombstone only when enabled; otherwise the bytes as they are.
    assert_eq!(record(&tomb, &insert(text(" \n\t"))).value, None);
    assert_eq!(
        record(&plain, &insert(text(" \n\t"))).value.as_deref(),
        Some(&b" \n\t"[..])
    );
    assert_eq!(
        record(&plain, &insert(text(""))).value.as_deref(),
        Some(&b""[..])
    );
    assert_eq!(record(&tomb, &insert(text(""))).value, None);
    // Tombstones keep topic, key and id header.
    let rec = record(&tomb, &insert(ColumnValue::Null));
    assert_eq!(rec.topic, "outbox.event.Order");
    assert_eq!(rec.key.as_deref(), Some(&b"order-7"[..]));
    assert_eq!(rec.headers.len(), 1);
}

#[test]
fn payload_bytes_pass_through_verbatim() {
    let r = router(|_| {});
    let utf8 = "{\"emoji\":\"😀𝄞\",\"han\":\"汉字\"}";
    assert_eq!(utf8.chars().filter(|c| c.len_utf8() == 4).count(), 2);
    let rec = record(&r, &insert(ColumnValue::Json(utf8.into())));
    assert_eq!(rec.value.as_deref(), Some(utf8.as_bytes()));

    let mut big = String::with_capacity(1 << 20);
    big.push_str("{\"blob\":\"");
    while big.len() < (1 << 20) - 2 {
        big.push_str("abcdefghij😀");
    }
    big.truncate((1 << 20) - 2);
    while !big.is_char_boundary(big.len()) {
        big.pop();
    }
    big.push_str("\"}");
    let rec = record(&r, &insert(ColumnValue::Json(big.clone())));
    assert_eq!(rec.value.as_deref(), Some(big.as_bytes()));
    let bin: Vec<u8> = (0..=255u8).cycle().take(1 << 20).collect();
    let rec = record(&r, &insert(ColumnValue::Bytes(bin.clone())));
    assert_eq!(rec.value, Some(bin));
}

#[test]
fn expand_json_payload() {
    let r = router(|c| c.expand_json_payload = true);
    let rec = record(
        &r,
        &insert(ColumnValue::Json(
            r#"{"a": 1, "n": null, "p": 39.98}"#.into(),
        )),
    );
    assert_eq!(rec.value.as_deref(), Some(&br#"{"a":1,"p":39.98}"#[..]));
    // Not JSON: unchanged (Debezium warns and emits the record unchanged), which the value
    // converter (JsonConverter without schemas, outboxd's default for expanded payloads)
    // writes as a JSON string, as Debezium's does.
    let rec = record(&r, &insert(text("not json")));
    assert_eq!(rec.value.as_deref(), Some(&b"\"not json\""[..]));
    let rec = record(&r, &insert(text("{broken")));
    assert_eq!(rec.value.as_deref(), Some(&b"\"{broken\""[..]));
    assert_eq!(
        record(&r, &insert(ColumnValue::Null)).value.as_deref(),
        Some(&b"null"[..])
    );
    // A top-level array: the schema is inferred but the value does not fit it: JsonConverter
    // refuses it (Debezium's task fails), so it is an event that cannot be delivered.
    assert!(matches!(
        r.route(&insert(text("[1,2]"))).unwrap_err(),
        RouteError::Convert { .. }
    ));
}

#[test]
fn envelope_placement() {
    let r = router(|c| {
        c.additional_placement = AdditionalField::parse_list(
            "event_type:envelope:type,id:envelope,created_at:envelope:at",
        )
        .unwrap();
    });
    let rec = record(&r, &insert(ColumnValue::Json(r#"{"a":1}"#.into())));
    assert_eq!(
        String::from_utf8(rec.value.unwrap()).unwrap(),
        r#"{"payload":"{\"a\":1}","type":"OrderCreated","id":42,"at":1700000000123456}"#
    );
    let r = router(|c| {
        c.expand_json_payload = true;
        c.additional_placement = AdditionalField::parse_list("event_type:envelope:type").unwrap();
    });
    let rec = record(&r, &insert(ColumnValue::Json(r#"{"a":1}"#.into())));
    assert_eq!(
        String::from_utf8(rec.value.unwrap()).unwrap(),
        r#"{"payload":{"a":1},"type":"OrderCreated"}"#
    );
    let rec = record(&r, &insert(ColumnValue::Null));
    assert_eq!(
        String::from_utf8(rec.value.unwrap()).unwrap(),
        r#"{"payload":null,"type":"OrderCreated"}"#
    );
    let cfg = RouterConfig {
        additional_placement: AdditionalField::parse_list("event_type:envelope:payload").unwrap(),
        ..RouterConfig::default()
    };
    assert!(matches!(
        EventRouter::new(&cfg).unwrap_err(),
        RouterConfigError::DuplicateEnvelopeField { .. }
    ));
}

#[test]
fn header_placement_and_no_default_type_header() {
    let r = router(|_| {});
    let rec = record(&r, &insert(text("{}")));
    assert_eq!(rec.headers.len(), 1, "no eventType header unless placed");

    let r = router(|c| {
        c.additional_placement = AdditionalField::parse_list(
            "event_type:header:eventType,aggregate_type:header,nothing:header",
        )
        .unwrap();
        c.additional_field_missing = MissingFieldBehavior::Ignore;
    });
    let mut c = insert(text("{}"));
    let rec = record(&r, &c);
    assert_eq!(
        rec.headers,
        vec![
            ("id".to_string(), Some(b"42".to_vec())),
            ("eventType".to_string(), Some(b"OrderCreated".to_vec())),
            ("aggregate_type".to_string(), Some(b"Order".to_vec())),
        ]
    );
    // NULL header column: a header without value (Debezium's null header).
    c.row = row(&[
        ("id", ColumnValue::Int(1)),
        ("aggregate_type", text("Order")),
        ("aggregate_id", text("a")),
        ("event_type", ColumnValue::Null),
        ("payload", text("{}")),
    ]);
    let headers = record(&r, &c).headers;
    assert_eq!(headers.len(), 3);
    assert_eq!(headers[1], ("eventType".to_string(), None));
    // Missing column with the default `error`.
    let r =
        router(|c| c.additional_placement = AdditionalField::parse_list("nothing:header").unwrap());
    let e = r.route(&insert(text("{}"))).unwrap_err();
    assert!(
        e.to_string().contains("table.fields.additional.placement"),
        "{e}"
    );
}

#[test]
fn partition_placement() {
    let r =
        router(|c| c.additional_placement = AdditionalField::parse_list("p:partition").unwrap());
    let mk = |p: ColumnValue| {
        change(
            Op::Insert,
            row(&[
                ("id", ColumnValue::Int(1)),
                ("aggregate_type", text("Order")),
                ("aggregate_id", text("a")),
                ("payload", text("{}")),
                ("p", p),
            ]),
        )
    };
    assert_eq!(record(&r, &mk(ColumnValue::Int(3))).partition, Some(3));
    assert_eq!(record(&r, &mk(ColumnValue::UInt(5))).partition, Some(5));
    assert_eq!(record(&r, &mk(ColumnValue::Null)).partition, None);
    assert!(matches!(
        r.route(&mk(ColumnValue::Int(-1))).unwrap_err(),
        RouteError::PartitionValue { .. }
    ));
    assert!(r.route(&mk(ColumnValue::Int(1 << 40))).is_err());
    assert!(r.route(&mk(text("3"))).is_err());
}

#[test]
fn timestamp_column() {
    let r = router(|c| c.field_event_timestamp = Some("created_at".into()));
    assert_eq!(
        record(&r, &insert(text("{}"))).timestamp_ms,
        Some(1_700_000_000_123)
    );
    let r = router(|c| c.field_event_timestamp = Some("event_type".into()));
    assert!(matches!(
        r.route(&insert(text("{}"))).unwrap_err(),
        RouteError::TimestampType { .. }
    ));
    let r = router(|c| c.field_event_timestamp = Some("nope".into()));
    assert!(r
        .route(&insert(text("{}")))
        .unwrap_err()
        .to_string()
        .contains("table.field.event.timestamp"));
    // NULL falls back to the source timestamp.
    let r = router(|c| c.field_event_timestamp = Some("ts".into()));
    let c = change(
        Op::Insert,
        row(&[
            ("id", ColumnValue::Int(1)),
            ("aggregate_type", text("Order")),
            ("aggregate_id", text("a")),
            ("payload", text("{}")),
            ("ts", ColumnValue::Null),
        ]),
    );
    assert_eq!(record(&r, &c).timestamp_ms, Some(1_700_000_999_000));
}

#[test]
fn empty_column_option_is_a_config_error() {
    let cfg = RouterConfig {
        field_event_payload: String::new(),
        ..RouterConfig::default()
    };
    assert!(matches!(
        EventRouter::new(&cfg).unwrap_err(),
        RouterConfigError::EmptyColumn {
            option: "table.field.event.payload"
        }
    ));
}

/// break26 finding 1: Debezium's column options reach the row before the router: a masked
/// header, a truncated payload, an excluded column missing; messages are not touched.
#[test]
fn column_options_apply_before_routing() {
    let r = router(|c| {
        c.additional_placement =
            AdditionalField::parse_list("aggregate_id:header,event_type:header").unwrap();
        c.additional_field_missing = MissingFieldBehavior::Ignore;
        let cols = &mut c.format.columns;
        cols.add_mapper(
            "column.truncate.to.3.chars",
            "shop.outbox_events.payload",
            ColumnMapper::Truncate(3),
        )
        .unwrap();
        cols.add_mapper(
            "column.mask.with.4.chars",
            "shop.outbox_events.aggregate_id",
            ColumnMapper::Mask("****".into()),
        )
        .unwrap();
        cols.set_filter(false, "shop.outbox_events.event_type")
            .unwrap();
    });
    let mut c = insert(text("payloadtext"));
    let rec = record(&r, &c);
    assert_eq!(rec.value.as_deref(), Some(&b"pay"[..]));
    assert_eq!(
        rec.headers,
        vec![
            ("id".to_string(), Some(b"42".to_vec())),
            ("aggregate_id".to_string(), Some(b"****".to_vec())),
        ]
    );
    assert_eq!(rec.key.as_deref(), Some(&b"****"[..]));
    // A failed route leaves the row masked (a dead letter carries no secret).
    c.row.put("aggregate_type", ColumnValue::Null);
    let mut c2 = c.clone();
    c2.table = TableName::new("shop", "outbox_events");
    r.apply_column_options(&mut c2);
    assert_eq!(c2.row.get("aggregate_id"), Some(&text("****")));
    assert_eq!(c2.row.get("event_type"), None);
}

/// break26 finding 6: a NULL of a type outboxd does not map does not stop the connector.
#[test]
fn null_of_an_unmapped_type_is_routed() {
    use crate::typemap::{ColumnType, SqlType};
    let r = router(|c| {
        c.additional_placement = AdditionalField::parse_list("geo:envelope").unwrap();
    });
    let names: Arc<[Arc<str>]> = [
        "id",
        "aggregate_type",
        "aggregate_id",
        "event_type",
        "payload",
        "geo",
    ]
    .iter()
    .map(|n| Arc::<str>::from(*n))
    .collect();
    let types: Arc<[ColumnType]> = [
        SqlType::Integer {
            bits: 32,
            unsigned: false,
        },
        SqlType::Text,
        SqlType::Text,
        SqlType::Text,
        SqlType::Text,
        SqlType::Unsupported("point (oid 600)".into()),
    ]
    .into_iter()
    .map(ColumnType::nullable)
    .collect();
    let mk = |geo: ColumnValue| {
        change(
            Op::Insert,
            Row::new(
                names.clone(),
                vec![
                    ColumnValue::Int(1),
                    text("A"),
                    text("k"),
                    text("E"),
                    text("{}"),
                    geo,
                ],
            )
            .with_types(types.clone()),
        )
    };
    let rec = record(&r, &mk(ColumnValue::Null));
    assert_eq!(
        String::from_utf8(rec.value.unwrap()).unwrap(),
        r#"{"payload":"{}","geo":null}"#
    );
    let e = r.route(&mk(text("(1,2)"))).unwrap_err();
    assert!(e.to_string().contains("point (oid 600)"), "{e}");
}

/// break26 finding 8: a NULL schema version gives an unversioned envelope; without an
/// envelope the version column is not read (a text column is fine); with one it must be an
/// integer (Debezium's task fails otherwise).
#[test]
fn schema_version_null_or_unread() {
    let with_env = router(|c| {
        c.field_schema_version = Some("event_type".into());
        c.additional_placement = AdditionalField::parse_list("aggregate_id:envelope").unwrap();
    });
    let mut c = insert(text("{}"));
    c.row.put("event_type", ColumnValue::Null);
    let rec = record(&with_env, &c);
    assert!(rec.value.is_some());
    c.row.put("event_type", text("v1"));
    assert!(with_env.route(&c).is_err());
    c.row.put("event_type", ColumnValue::Int(3));
    assert!(record(&with_env, &c).value.is_some());
    let no_env = router(|c| c.field_schema_version = Some("event_type".into()));
    let rec = record(&no_env, &insert(text("{}")));
    assert_eq!(rec.value.as_deref(), Some(&b"{}"[..]));
}

/// break26 finding 9: Debezium names an envelope's schema before it decides on a tombstone,
/// so a tombstone that comes first names the envelopes of its payload schema after it.
#[test]
fn a_tombstone_first_names_the_envelopes_after_it() {
    let r = router(|c| {
        c.tombstone_on_empty_payload = true;
        c.additional_placement = AdditionalField::parse_list("event_type:envelope:type").unwrap();
        c.format
            .resolve_converters(true, &Default::default(), true)
            .unwrap();
    });
    let first = record(&r, &insert(ColumnValue::Null));
    assert!(first.value.is_none(), "a tombstone");
    let other = row(&[
        ("id", ColumnValue::Int(43)),
        ("aggregate_type", text("Invoice")),
        ("aggregate_id", text("invoice-1")),
        ("event_type", text("InvoiceSent")),
        ("payload", text("{}")),
        ("created_at", ColumnValue::DateTime(1_700_000_000_123_456)),
    ]);
    let rec = record(&r, &change(Op::Insert, other));
    let value: serde_json::Value = serde_json::from_slice(&rec.value.unwrap()).unwrap();
    assert_eq!(
        value["schema"]["name"], "shop.outbox_events.Order.Value",
        "the tombstone's route value names the envelope: {value}"
    );
}

/// Debezium's `table.fields.additional.error.on.missing=false`: a header of a column the row
/// lacks is left out; an envelope field of one still fails the event (fix26's observation
/// of Debezium 3.5/3.6).
#[test]
fn error_on_missing_false_leaves_out_missing_headers_only() {
    let mut cfg = RouterConfig::default();
    cfg.set_option("table.fields.additional.error.on.missing", "false")
        .unwrap();
    cfg.additional_placement =
        AdditionalField::parse_list("event_type:header:eventType,nothing:header").unwrap();
    let r = EventRouter::new(&cfg).unwrap();
    let rec = record(&r, &insert(text("{}")));
    let names: Vec<_> = rec.headers.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["id", "eventType"]);

    cfg.additional_placement = AdditionalField::parse_list("nothing:envelope").unwrap();
    let r = EventRouter::new(&cfg).unwrap();
    assert!(
        r.route(&insert(text("{}"))).is_err(),
        "an envelope field still fails"
    );

    // The default (true) fails on a missing header column.
    let r = router(|c| {
        c.additional_placement = AdditionalField::parse_list("nothing:header").unwrap();
    });
    assert!(r.route(&insert(text("{}"))).is_err());
}

/// `check` asks the table for the columns the router needs: placements left out when
/// missing are not among them (break28 F3).
#[test]
fn columns_needed_leave_out_placements_that_may_be_missing() {
    let mut cfg = RouterConfig {
        additional_placement: AdditionalField::parse_list("h:header,e:envelope,p:partition")
            .unwrap(),
        ..RouterConfig::default()
    };
    let needed = |c: &RouterConfig| {
        c.columns_read()
            .into_iter()
            .filter(|n| n.len() == 1)
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    assert_eq!(needed(&cfg), ["h", "e", "p"]);
    cfg.additional_error_on_missing = false;
    assert_eq!(needed(&cfg), ["e", "p"]);
    cfg.additional_field_missing = MissingFieldBehavior::Ignore;
    assert!(needed(&cfg).is_empty());
}

#[test]
fn placement_lists_are_split_as_debezium_splits_them() {
    let names = |list: &str| {
        AdditionalField::parse_list(list)
            .map(|l| l.into_iter().map(|f| f.column).collect::<Vec<_>>())
    };
    assert_eq!(names("").unwrap(), Vec::<String>::new());
    assert_eq!(
        names(",,").unwrap(),
        Vec::<String>::new(),
        "only trailing commas"
    );
    assert_eq!(
        names("a:header,,").unwrap(),
        vec!["a"],
        "trailing commas are dropped"
    );
    assert_eq!(names(" a:header").unwrap(), vec!["a"], "parts are trimmed");
    for bad in [
        "a:header,,b:header",
        ",a:header",
        "a:header, ,b:header",
        " , ,",
        // Not trimmed first: Debezium's task fails on the blank entry.
        "a:header, ",
    ] {
        assert!(names(bad).unwrap_err().contains("empty entry"), "{bad}");
    }
}
