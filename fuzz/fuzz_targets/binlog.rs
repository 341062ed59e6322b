//! The MySQL / MariaDB binlog decoder on arbitrary bytes: the input is a binlog file (magic,
//! then events), read by the framing (`BinlogFileReader`) and decoded event by event by two
//! decoders: one as `outboxd binlog decode` runs it (positions from the file's offsets,
//! positional column names) and one as the live stream does (positions from the events'
//! `log_pos`, missing column names an error). Any outcome but a panic (or an allocation or
//! a run libFuzzer deems too large or too long) is fine: errors are expected.
#![no_main]

use libfuzzer_sys::fuzz_target;
use outboxd::position::BinlogFilePosition;
use outboxd::source::mysql::{BinlogDecoder, BinlogFileReader, MissingColumnNames};

fuzz_target!(|data: &[u8]| {
    let Ok(mut reader) = BinlogFileReader::new(data, "fuzz-bin.000001") else {
        return;
    };
    let mut offline = BinlogDecoder::new().with_missing_names(MissingColumnNames::Positional);
    offline.set_file("fuzz-bin.000001", reader.offset());
    let mut offline_ok = true;
    let mut live = BinlogDecoder::new();
    let mut live_ok = true;
    let mut out = Vec::new();
    while let Ok(Some(framed)) = reader.next_event() {
        let at = BinlogFilePosition::new("fuzz-bin.000001", framed.offset);
        if offline_ok {
            out.clear();
            offline_ok = offline
                .decode_event_into(&framed.event, Some(&at), &mut out)
                .is_ok();
            // What the callers do with the messages: print them, keep positions.
            for m in &out {
                std::hint::black_box(format!("{m:?}"));
            }
            std::hint::black_box(offline.current_position().to_string());
            std::hint::black_box(offline.take_notes());
        }
        if live_ok {
            out.clear();
            live_ok = live
                .decode_event_into(&framed.event, None, &mut out)
                .is_ok();
            std::hint::black_box(live.current_position().to_string());
        }
        if !offline_ok && !live_ok {
            break;
        }
    }
});
