//! One MySQL / MariaDB row-image cell from outside bytes, for a column type and metadata
//! that are part of the input too (`outboxd::fuzzing::mysql_cell`). Layout: type byte,
//! flags (bit 0 UNSIGNED, bit 1 a collation follows, bit 2 ENUM/SET labels, bit 3 a partial
//! JSON update), 2 metadata bytes, 2 collation bytes (little-endian), then the cell. Errors
//! are expected; a panic is a bug.
#![no_main]

use libfuzzer_sys::fuzz_target;
use outboxd::fuzzing::mysql_cell;

fuzz_target!(|data: &[u8]| {
    let [ty, flags, m0, m1, c0, c1, cell @ ..] = data else {
        return;
    };
    let collation = (flags & 2 != 0).then(|| u16::from_le_bytes([*c0, *c1]));
    let labels = (flags & 4 != 0).then(|| vec!["a".to_owned(), "bb".to_owned(), "".to_owned()]);
    if let Ok((value, used)) = mysql_cell(
        *ty,
        &[*m0, *m1],
        flags & 1 != 0,
        collation,
        labels,
        flags & 8 != 0,
        cell,
    ) {
        assert!(used <= cell.len(), "a cell took more bytes than there are");
        std::hint::black_box(format!("{value:?}"));
    }
});
