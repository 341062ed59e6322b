//! The pgoutput decoder on arbitrary bytes: the input is one XLogData payload. Errors are
//! expected; a panic is a bug.
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use outboxd::source::postgres::pgoutput::decode;

fuzz_target!(|data: &[u8]| {
    if let Ok(message) = decode(&Bytes::copy_from_slice(data)) {
        std::hint::black_box(format!("{message:?}"));
    }
});
