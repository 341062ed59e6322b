#!/usr/bin/env python3
"""Writes the committed seed inputs of the fuzz targets pgoutput, pg_value and mysql_value
(fuzz/seeds/<target>/), hand-built messages and values in the formats the decoders read.
Our own bytes: rerun after changing this file and commit what it writes.

  python3 fuzz/seeds/make_seeds.py
"""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def write(target, name, data):
    d = os.path.join(HERE, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


# --- pgoutput, protocol version 1 (PostgreSQL docs, "Logical Replication Message Formats") ---
def s(text):
    return text.encode() + b"\0"


def tuple_data(*cols):
    out = struct.pack(">h", len(cols))
    for c in cols:
        if c is None:
            out += b"n"
        elif c == "TOAST":
            out += b"u"
        else:
            v = c.encode() if isinstance(c, str) else c
            out += b"t" + struct.pack(">i", len(v)) + v
    return out


OID = 16401
ROW = ("6f2c4e0a-0000-4000-8000-000000000001", "order", "42", "created",
       '{"id":42,"total":"9.90"}', "2024-02-29 01:02:03.123456+00")
pg = {
    # Begin, Commit and Message: pgwire-replication parses these before the decoder sees
    # anything; as seeds they are the unknown-tag path and material for mutations.
    "begin": b"B" + struct.pack(">qqi", 0x16B3748, 762_000_000_000_000, 731),
    "commit": b"C" + struct.pack(">bqqq", 0, 0x16B3748, 0x16B3780, 762_000_000_000_000),
    "message": b"M" + struct.pack(">bq", 1, 0x16B3700) + s("outbox")
    + struct.pack(">i", 25) + b'{"aggregatetype":"order"}',
    "relation": b"R" + struct.pack(">i", OID) + s("public") + s("outbox_events") + b"d"
    + struct.pack(">h", 6)
    + b"\x01" + s("id") + struct.pack(">ii", 2950, -1)
    + b"\x00" + s("aggregatetype") + struct.pack(">ii", 1043, 259)
    + b"\x00" + s("aggregateid") + struct.pack(">ii", 25, -1)
    + b"\x00" + s("type") + struct.pack(">ii", 25, -1)
    + b"\x00" + s("payload") + struct.pack(">ii", 3802, -1)
    + b"\x00" + s("created_at") + struct.pack(">ii", 1184, -1),
    "insert": b"I" + struct.pack(">i", OID) + b"N" + tuple_data(*ROW),
    "insert_nulls": b"I" + struct.pack(">i", OID) + b"N"
    + tuple_data(ROW[0], None, "", "x", None, None),
    "update_key": b"U" + struct.pack(">i", OID) + b"K" + tuple_data(ROW[0], None, None, None, None, None)
    + b"N" + tuple_data(ROW[0], "order", "42", "paid", "TOAST", None),
    "delete_old": b"D" + struct.pack(">i", OID) + b"O" + tuple_data(*ROW),
    "truncate": b"T" + struct.pack(">ib", 2, 3) + struct.pack(">ii", OID, OID + 1),
    "origin": b"O" + struct.pack(">q", 0x3000060) + s("node_a"),
    "type": b"Y" + struct.pack(">i", 16500) + s("public") + s("mood"),
}
for name, data in pg.items():
    write("pgoutput", name, data)

# --- pg_value: a byte picking the type (OIDS in fuzz_targets/pg_value.rs; 0: a logical
# decoding message's content), then the text-format value ---
OIDS = [16, 17, 18, 19, 20, 21, 23, 25, 26, 114, 700, 701, 1042, 1043, 1082, 1083, 1114,
        1184, 1700, 2950, 3802, 1007]
values = [
    (16, "t"), (17, "\\x00ff10"), (17, "a\\\\b\\001"), (20, "-9223372036854775808"),
    (21, "32767"), (23, "-2147483648"), (25, "h\u00e9llo"), (26, "4294967295"),
    (114, '{"a": [1, 2.5, null]}'), (700, "NaN"), (701, "-1.5e300"), (701, "Infinity"),
    (1042, "ab  "), (1082, "2024-02-29"), (1082, "infinity"), (1082, "0044-03-15 BC"),
    (1083, "23:59:59.999999"), (1114, "2024-02-29 01:02:03.123456"),
    (1114, "-infinity"), (1184, "2024-02-29 01:02:03.5+05:30"), (1184, "1999-12-31 23:59:59-08"),
    (1700, "-123.4500"), (1700, "NaN"), (2950, "6f2c4e0a-0000-4000-8000-000000000001"),
    (3802, '{"id": 42, "nested": {"k": "v"}}'), (1007, "{1,2,3}"),
]
for i, (oid, text) in enumerate(values):
    pick = OIDS.index(oid) or len(OIDS)
    write("pg_value", f"{i:02}_{oid}", bytes([pick]) + text.encode())
write("pg_value", "message_object",
      b"\0" + b'{"id":"6f2c4e0a","aggregatetype":"order","aggregateid":42,"type":"created",'
      b'"payload":{"total":"9.90"},"flag":true,"none":null}')
write("pg_value", "message_not_object", b"\0[1,2]")

# --- mysql_value: type byte, flags (1 UNSIGNED, 2 collation, 4 ENUM/SET labels, 8 partial
# JSON), 2 metadata bytes, 2 collation bytes (little-endian), then the cell ---
def cell(ty, meta=(0, 0), data=b"", flags=0, collation=0):
    return bytes([ty, flags, meta[0], meta[1]]) + struct.pack("<H", collation) + data


def jsonb_doc():
    # A small object {"a": 1}: count, size, key entry (offset, length), value entry (int16
    # inlined), key bytes.
    obj = struct.pack("<HH", 1, 12) + struct.pack("<HH", 11, 1) + b"\x05" + struct.pack("<h", 1) + b"a"
    return b"\x00" + obj


mysql = {
    "tiny_unsigned": cell(1, data=b"\xff", flags=1),
    "short": cell(2, data=struct.pack("<h", -2)),
    "long": cell(3, data=struct.pack("<i", -2147483648)),
    "longlong_unsigned": cell(8, data=b"\xff" * 8, flags=1),
    "int24": cell(9, data=b"\xff\xff\x7f"),
    "float": cell(4, (4, 0), struct.pack("<f", 1.5)),
    "double": cell(5, (8, 0), struct.pack("<d", -0.25)),
    "decimal": cell(246, (10, 2), bytes([0x80, 0x00, 0x30, 0x39, 0x63])),
    "year": cell(13, data=b"\x7c"),
    "date": cell(10, data=bytes([0x5d, 0xc8, 0x0f])),
    "time2": cell(19, (3, 0), bytes([0x80, 0x10, 0x83, 0x00, 0x7b])),
    "datetime2": cell(18, (6, 0), bytes([0x99, 0xb2, 0x7a, 0x10, 0x83, 0x01, 0xe2, 0x40])),
    "timestamp2": cell(17, (0, 0), struct.pack(">I", 1709168523)),
    "varchar_utf8": cell(15, (200, 0), bytes([6]) + "h\u00e9llo".encode(), flags=2, collation=45),
    "varchar_latin1": cell(15, (200, 0), b"\x03caf", flags=2, collation=8),
    "string_binary": cell(254, (0xfe, 8), b"\x04\x00\x01\x02\xff", flags=2, collation=63),
    "enum": cell(254, (0xf7, 1), b"\x02", flags=4),
    "set": cell(254, (0xf8, 1), b"\x05", flags=4),
    "bit": cell(16, (1, 1), b"\x01\xff"),
    "blob": cell(252, (2, 0), b"\x03\x00abc"),
    "json": cell(245, (4, 0), struct.pack("<I", len(jsonb_doc())) + jsonb_doc()),
    "json_partial": cell(245, (4, 0), struct.pack("<I", len(jsonb_doc())) + jsonb_doc(), flags=8),
    "geometry": cell(255, (4, 0), struct.pack("<I", 4) + b"\0\0\0\0"),
}
for name, data in mysql.items():
    write("mysql_value", name, data)
