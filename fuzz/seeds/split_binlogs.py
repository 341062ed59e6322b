#!/usr/bin/env python3
"""Seeds for the binlog fuzz target from real binlog files (scripts/fuzz.sh runs it on
../shared/fixtures/mysql-binlogs; the files themselves are not part of this repository).

  python3 fuzz/seeds/split_binlogs.py SRC_DIR OUT_DIR [MAX_LEN]

Writes, named by content hash: each file whole when it is at most MAX_LEN bytes (damaged
ones included), and per event a small file of its own: the magic, the file's
FORMAT_DESCRIPTION_EVENT (checksums and post-header lengths depend on it), for a rows event
the TABLE_MAP_EVENTs of its statement, then the event. Prints how many it wrote.
"""
import hashlib
import os
import struct
import sys

MAGIC = b"\xfebin"
HEADER = 19
FORMAT_DESCRIPTION, TABLE_MAP = 15, 19
# Rows events: v1 (23-25), v2 (30-32), PARTIAL_UPDATE_ROWS (39), MariaDB compressed (166-171).
ROWS = {23, 24, 25, 30, 31, 32, 39} | set(range(166, 172))


def events(data):
    """(type, bytes) of each complete event after the magic; stops at damaged framing."""
    pos = len(MAGIC)
    while pos + HEADER <= len(data):
        size = struct.unpack_from("<I", data, pos + 9)[0]
        if size < HEADER or pos + size > len(data):
            return
        yield data[pos + 4], data[pos:pos + size]
        pos += size


def main():
    src, out = sys.argv[1], sys.argv[2]
    max_len = int(sys.argv[3]) if len(sys.argv) > 3 else 65536
    os.makedirs(out, exist_ok=True)
    seeds = set()

    def put(data):
        if len(data) > max_len:
            return
        name = hashlib.sha1(data).hexdigest()
        if name not in seeds:
            seeds.add(name)
            with open(os.path.join(out, name), "wb") as f:
                f.write(data)

    for entry in sorted(os.listdir(src)):
        path = os.path.join(src, entry)
        if entry.endswith(".md") or not os.path.isfile(path):
            continue
        with open(path, "rb") as f:
            data = f.read()
        put(data)
        if not data.startswith(MAGIC):
            continue
        fde = b""
        table_maps = []
        for ty, ev in events(data):
            if ty == FORMAT_DESCRIPTION:
                fde = ev
                put(MAGIC + ev)
                continue
            if ty == TABLE_MAP:
                table_maps.append(ev)
            elif ty in ROWS:
                put(MAGIC + fde + b"".join(table_maps) + ev)
                continue
            else:
                table_maps = []
            put(MAGIC + fde + ev)
    print(len(seeds))


if __name__ == "__main__":
    main()
