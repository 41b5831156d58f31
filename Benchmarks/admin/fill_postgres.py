#!/usr/bin/env python3
"""Fills a PostgreSQL store made by `profile-escrow` (its schema, one captured escrow as the template row) with N
escrows and a `captured` audit event each, the chain valid: fill.sql's rows for PostgreSQL, through `psql`.

Usage: fill_postgres.py DATABASE_URL N [PSQL]

The escrows copy the template's sealed columns with a random id and blind index, created one second apart before it,
1 in 20 dead; the events are numbered after the template's and hashed in the v3 encoding (as rechain.py does), and
`audit_head` points at the last. Prints one JSON line: escrows, events and seconds.
"""
import csv
import hashlib
import io
import json
import struct
import subprocess
import sys
import time


def psql(url, sql, stdin=None, tool="psql"):
    return subprocess.run([tool, url, "-v", "ON_ERROR_STOP=1", "-qAt", "-c", sql], input=stdin, capture_output=True,
                          text=True, check=True).stdout


def field(value) -> bytes:
    data = b"" if value is None or value == "" else str(value).encode()
    return struct.pack(">I", len(data)) + data


def blake(data: bytes) -> bytes:
    return hashlib.blake2b(data, digest_size=32).digest()


def main():
    url, n = sys.argv[1], int(sys.argv[2])
    tool = sys.argv[3] if len(sys.argv) > 3 else "psql"
    started = time.monotonic()
    psql(url, f"""
        INSERT INTO escrow (id, blind_index, key_version, public_key, sealed_profile, sealed_key, mac, content_tag,
            state, revision, attempts, next_attempt_at, created_at, expires_at, updated_at, due_at, dead_code,
            last_status)
        SELECT decode(md5(random()::text || i), 'hex'), sha256((random()::text || i)::bytea), t.key_version,
            t.public_key, t.sealed_profile, t.sealed_key, t.mac, t.content_tag,
            CASE WHEN i % 20 = 0 THEN 'dead' ELSE 'pending' END, 1, CASE WHEN i % 20 = 0 THEN 3 ELSE 0 END,
            t.created_at - ({n} - i + 1) * 1000, t.created_at - ({n} - i + 1) * 1000,
            t.expires_at - ({n} - i + 1) * 1000, t.created_at - ({n} - i + 1) * 1000,
            CASE WHEN i % 20 = 0 THEN NULL ELSE t.created_at - ({n} - i + 1) * 1000 END,
            CASE WHEN i % 40 = 0 THEN 'backend_rejected' WHEN i % 20 = 0 THEN 'attempts_exhausted' END,
            CASE WHEN i % 40 = 0 THEN 410 END
        FROM generate_series(1, {n}) AS i, (SELECT * FROM escrow ORDER BY created_at DESC LIMIT 1) AS t""", tool=tool)
    head = psql(url, "SELECT seq, encode(hash, 'hex') FROM audit_head", tool=tool).strip().split("|")
    seq, previous = int(head[0]), bytes.fromhex(head[1])
    template_at = int(psql(url, "SELECT max(at) FROM audit_event", tool=tool).strip())
    rows = psql(url, f"""SELECT encode(id, 'hex'), encode(substr(blind_index, 1, 8), 'hex'), created_at FROM escrow
        WHERE created_at < (SELECT max(created_at) FROM escrow) ORDER BY created_at""", tool=tool).split()
    out = io.StringIO()
    writer = csv.writer(out)
    for row in rows:
        escrow_id, prefix, created = row.split("|")
        seq += 1
        at = max(int(created), template_at - 86_000_000)
        commitment = blake(b"pe-prefix-2" + field(escrow_id) + field(prefix)).hex()
        canonical = b"pe-audit-3" + b"".join(
            field(v) for v in (seq, at, "captured", escrow_id, commitment, None, None, "http:registration", None, None)
        )
        previous = blake(previous + canonical)
        writer.writerow([seq, at, "captured", escrow_id, prefix, "http:registration", "\\x" + previous.hex(), 3])
    subprocess.run([tool, url, "-v", "ON_ERROR_STOP=1", "-q", "-c",
                    "\\copy audit_event (seq, at, type, escrow_id, index_prefix, actor, hash, encoding) FROM STDIN "
                    "WITH (FORMAT csv)"], input=out.getvalue(), text=True, check=True, capture_output=True)
    psql(url, f"UPDATE audit_head SET seq = {seq}, hash = '\\x{previous.hex()}'; ANALYZE", tool=tool)
    print(json.dumps({"escrows": n, "events": seq, "seconds": round(time.monotonic() - started, 1)}))


if __name__ == "__main__":
    main()
