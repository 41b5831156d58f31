#!/usr/bin/env python3
"""Fills a profile-escrow SQLite store (its schema already made by the binary) with a valid audit chain.

Usage: fill.py DATABASE EVENTS LIVE

EVENTS events of escrows long gone (a capture, then `confirmed` and `purged`, three events an escrow), spread over
the ten days before now, then LIVE escrow rows (random bytes of realistic sizes) with their `captured` events: the
chain a store holds after steady load, in the v2 encoding (`docs/FORMAT.md`). BLAKE2b-256 here is libsodium's
`crypto_generichash` with a 32-byte output; `audit verify` and `purge-report --verify` check every hash.
"""
import hashlib
import os
import sqlite3
import struct
import sys
import time


def field(value):
    data = b"" if value is None else str(value).encode()
    return struct.pack(">I", len(data)) + data


def commitment(escrow_id, prefix):
    return hashlib.blake2b(b"pe-prefix-2" + field(escrow_id) + field(prefix), digest_size=32).hexdigest()


def canonical(seq, at, kind, escrow_id, prefix, detail, status, actor, age):
    prefix_field = None if prefix is None else commitment(escrow_id, prefix)
    return b"pe-audit-2" + b"".join(
        field(v) for v in (seq, at, kind, escrow_id, prefix_field, detail, status, actor, age)
    )


def main():
    path, count, live = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    db = sqlite3.connect(path)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=OFF")
    head = db.execute("SELECT seq, hash FROM audit_head").fetchone()
    if head is not None:
        sys.exit(f"{path}: the store already holds events")
    now = int(time.time() * 1000)
    start = now - 10 * 86_400_000
    step = max(1, (10 * 86_400_000 - 3_600_000) // max(1, count))
    previous = bytes(32)
    seq = 0
    batch = []

    def append(at, kind, escrow_id, prefix, detail, actor, age):
        nonlocal previous, seq
        seq += 1
        digest = hashlib.blake2b(
            previous + canonical(seq, at, kind, escrow_id, prefix, detail, None, actor, age), digest_size=32
        ).digest()
        batch.append((seq, at, kind, escrow_id, prefix, detail, None, actor, age, digest, 2))
        previous = digest
        if len(batch) >= 50_000:
            flush()

    def flush():
        db.executemany(
            "INSERT INTO audit_event (seq, at, type, escrow_id, index_prefix, detail, http_status, actor, age_ms,"
            " hash, encoding) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            batch,
        )
        batch.clear()

    at = start
    while seq + 3 <= count:
        escrow_id = os.urandom(16).hex()
        prefix = os.urandom(8).hex()
        append(at, "captured", escrow_id, prefix, None, "http:registration", None)
        append(at + step, "confirmed", escrow_id, prefix, None, "http:registration", None)
        append(at + 2 * step, "purged", escrow_id, prefix, "confirmed", "http:registration", 2 * step)
        at += 3 * step
    rows = []
    for _ in range(live):
        escrow = os.urandom(16)
        append(now - 60_000, "captured", escrow.hex(), os.urandom(8).hex(), None, "http:registration", None)
        far = now + 30 * 86_400_000
        rows.append(
            (escrow, os.urandom(32), os.urandom(32), os.urandom(304), os.urandom(136), os.urandom(32),
             os.urandom(32), far, far, now, far, now)
        )
    flush()
    db.executemany(
        "INSERT INTO escrow (id, blind_index, key_version, public_key, sealed_profile, sealed_key, mac, content_tag,"
        " state, revision, attempts, next_attempt_at, due_at, created_at, expires_at, updated_at)"
        " VALUES (?, ?, 1, ?, ?, ?, ?, ?, 'pending', 1, 0, ?, ?, ?, ?, ?)",
        rows,
    )
    db.execute("INSERT OR REPLACE INTO audit_head (singleton, seq, hash) VALUES (1, ?, ?)", (seq, previous))
    db.commit()
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    print(f"filled {path}: {seq} events, {live} live escrows")


main()
