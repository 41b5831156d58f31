#!/usr/bin/env python3
"""Gives the audit events of a store filled by fill.sql a valid hash chain, so the purge report verifies it.

Usage: rechain.py DATABASE

fill.sql writes its `captured` events with random hashes and a gap in their numbering (a fast fill for queries that
never read the chain). This numbers the events 1, 2, 3… in their order and recomputes every event's hash, in the v3 encoding (docs/FORMAT.md: BLAKE2b-256 of the previous hash and the
event's canonical fields, the blind-index prefix replaced by its commitment), rewrites `encoding` to 3, and points
`audit_head` at the last one. Prints one JSON line: events rechained and seconds taken.
"""
import hashlib
import json
import sqlite3
import struct
import sys
import time


def field(value) -> bytes:
    data = b"" if value is None else str(value).encode()
    return struct.pack(">I", len(data)) + data


def blake(data: bytes) -> bytes:
    return hashlib.blake2b(data, digest_size=32).digest()


def main():
    started = time.monotonic()
    db = sqlite3.connect(sys.argv[1])
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("PRAGMA synchronous = OFF")
    previous = bytes(32)
    rows = db.execute(
        "SELECT seq, at, type, escrow_id, index_prefix, detail, http_status, actor, age_ms, reason FROM audit_event "
        "ORDER BY seq"
    ).fetchall()
    updates = []
    for number, (seq, at, kind, escrow_id, prefix, detail, status, actor, age, reason) in enumerate(rows, start=1):
        commitment = None
        if prefix is not None:
            commitment = blake(b"pe-prefix-2" + field(escrow_id) + field(prefix)).hex()
        canonical = b"pe-audit-3" + b"".join(
            field(v) for v in (number, at, kind, escrow_id, commitment, detail, status, actor, age, reason)
        )
        previous = blake(previous + canonical)
        updates.append((number, previous, seq))
    # In order: an event only moves down, into a number the ones before it have left.
    db.executemany("UPDATE audit_event SET seq = ?, hash = ?, encoding = 3 WHERE seq = ?", updates)
    if rows:
        db.execute("UPDATE audit_head SET seq = ?, hash = ?", (len(rows), previous))
    db.commit()
    print(json.dumps({"rechained": len(rows), "seconds": round(time.monotonic() - started, 3)}))


if __name__ == "__main__":
    main()
