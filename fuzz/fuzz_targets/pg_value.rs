//! PostgreSQL values from outside bytes: the first byte picks a built-in type OID (or, for
//! 0, a logical decoding message's content), the rest is the text-format value. Errors are
//! expected; a panic is a bug.
#![no_main]

use libfuzzer_sys::fuzz_target;
use outboxd::fuzzing::{pg_message_row, pg_value};

/// The built-in types the value decoder knows (`source::postgres::values::oid`), and one it
/// does not (`int4[]`).
const OIDS: [u32; 22] = [
    16, 17, 18, 19, 20, 21, 23, 25, 26, 114, 700, 701, 1042, 1043, 1082, 1083, 1114, 1184, 1700,
    2950, 3802, 1007,
];

fuzz_target!(|data: &[u8]| {
    let Some((&pick, raw)) = data.split_first() else {
        return;
    };
    if pick == 0 {
        let _ = std::hint::black_box(pg_message_row(raw));
        return;
    }
    let oid = OIDS[usize::from(pick) % OIDS.len()];
    if let Ok(v) = pg_value(oid, raw) {
        std::hint::black_box(format!("{v:?}"));
    }
});
