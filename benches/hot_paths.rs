//! criterion micro-benchmarks of the per-event hot paths:
//! - binlog decoding (real MariaDB/MySQL binlog files from `../shared/fixtures/mysql-binlogs`,
//!   skipped with a printed reason when absent),
//! - pgoutput decoding of an outbox Insert (bytes as the server sends them),
//! - routing and record building for a typical ~1 KB outbox row.
//!
//! `cargo bench --bench hot_paths`; results go to `target/criterion/`.

use std::path::Path;
use std::sync::Arc;

use bytes::{BufMut, Bytes, BytesMut};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};

use outboxd::config::RouterConfig;
use outboxd::event::{Op, Row, RowChange, TableName};
use outboxd::router::EventRouter;
use outboxd::source::mysql::decode::{BinlogDecoder, MissingColumnNames};
use outboxd::source::mysql::framing::BinlogFileReader;
use outboxd::source::postgres::pgoutput;
use outboxd::value::ColumnValue;

fn payload_1k() -> String {
    format!(
        r#"{{"orderId":1001,"customer":42,"items":[{{"sku":"A-1","qty":2}}],"note":"{}"}}"#,
        "x".repeat(930)
    )
}

fn outbox_row() -> RowChange {
    let columns: Arc<[Arc<str>]> = [
        "id",
        "aggregate_type",
        "aggregate_id",
        "event_type",
        "payload",
        "created_at",
    ]
    .iter()
    .map(|c| Arc::<str>::from(*c))
    .collect();
    let values = vec![
        ColumnValue::Text("6f1c2a9e-8f5b-4c8e-9a51-0b6f6d2c7e11".into()),
        ColumnValue::Text("Order".into()),
        ColumnValue::Text("order-1001".into()),
        ColumnValue::Text("OrderCreated".into()),
        ColumnValue::Json(payload_1k()),
        ColumnValue::DateTime(1_764_440_000_000_000),
    ];
    RowChange {
        table: TableName::new("shop", "outbox_events"),
        op: Op::Insert,
        row: Row::new(columns, values),
        source_ts_ms: 1_764_440_000_000,
        undecodable: None,
    }
}

fn bench_route(c: &mut Criterion) {
    let cfg = RouterConfig {
        additional_placement: outboxd::config::AdditionalField::parse_list(
            "event_type:header:eventType",
        )
        .unwrap(),
        ..RouterConfig::default()
    };
    let router = EventRouter::new(&cfg).unwrap();
    let change = outbox_row();
    let mut g = c.benchmark_group("router");
    g.throughput(Throughput::Elements(1));
    g.bench_function("route_1k_outbox_row", |b| {
        b.iter(|| router.route(std::hint::black_box(&change)).unwrap())
    });
    g.finish();
}

/// A pgoutput Insert of the outbox row: 'I', relation id, 'N', column count, text columns.
fn pgoutput_insert() -> Bytes {
    let cols = [
        "6f1c2a9e-8f5b-4c8e-9a51-0b6f6d2c7e11".to_string(),
        "Order".into(),
        "order-1001".into(),
        "OrderCreated".into(),
        payload_1k(),
        "2026-11-29 20:00:00.123456+00".into(),
    ];
    let mut b = BytesMut::new();
    b.put_u8(b'I');
    b.put_u32(16_384);
    b.put_u8(b'N');
    b.put_u16(cols.len() as u16);
    for c in &cols {
        b.put_u8(b't');
        b.put_u32(c.len() as u32);
        b.put_slice(c.as_bytes());
    }
    b.freeze()
}

fn bench_pgoutput(c: &mut Criterion) {
    let msg = pgoutput_insert();
    let mut g = c.benchmark_group("pgoutput");
    g.throughput(Throughput::Bytes(msg.len() as u64));
    g.bench_function("decode_insert_1k", |b| {
        b.iter(|| pgoutput::decode(std::hint::black_box(&msg)).unwrap())
    });
    g.finish();
}

fn bench_binlog(c: &mut Criterion) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures/mysql-binlogs");
    if !dir.is_dir() {
        println!("skipping binlog benchmarks: {} is absent", dir.display());
        return;
    }
    let mut g = c.benchmark_group("binlog");
    for name in [
        "mariadb-bin.000001",
        "json.binlog.000001",
        "write-full-row.binlog",
    ] {
        let path = dir.join(name);
        let events: Vec<_> = BinlogFileReader::open(&path)
            .unwrap()
            .map(|e| e.unwrap().event)
            .collect();
        let bytes: u64 = std::fs::metadata(&path).unwrap().len();
        g.throughput(Throughput::Bytes(bytes));
        g.bench_function(format!("decode_file/{name}"), |b| {
            b.iter(|| {
                let mut decoder =
                    BinlogDecoder::new().with_missing_names(MissingColumnNames::Positional);
                let mut out = Vec::new();
                for e in &events {
                    decoder.decode_event_into(e, None, &mut out).unwrap();
                }
                out.len()
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench_route, bench_pgoutput, bench_binlog);
criterion_main!(benches);
