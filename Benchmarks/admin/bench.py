#!/usr/bin/env python3
"""Times the admin API's answers against the same query run raw, on a store filled by fill.sql.

Usage: bench.py DATABASE BASE_URL TOKEN [REPEAT]

For each answer (the list's first page, a deep page by cursor, a filtered first and deep page, the overview, one
escrow with its history) it times REPEAT requests over one keep-alive HTTP connection, and REPEAT runs of the SQL the
store runs for it, through Python's sqlite3 on the same file (read-only). Prints one JSON line per answer (median and
p95 in ms, their difference and ratio) and the query plan of each raw query.
"""
import base64
import http.client
import json
import sqlite3
import statistics
import struct
import sys
import time
from urllib.parse import urlparse

COLUMNS = "rowid, *"


def cursor(created_at: int, escrow_id: bytes) -> str:
    return base64.urlsafe_b64encode(struct.pack(">q", created_at) + escrow_id).decode().rstrip("=")


def timed(function, repeat):
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        function()
        samples.append((time.perf_counter() - start) * 1000)
    samples.sort()
    return statistics.median(samples), samples[int(len(samples) * 0.95) - 1]


def main():
    path, base, token = sys.argv[1], sys.argv[2], sys.argv[3]
    repeat = int(sys.argv[4]) if len(sys.argv) > 4 else 200
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    total = db.execute("SELECT COUNT(*) FROM escrow").fetchone()[0]
    # The deep page starts after the row at 90% of the walk (created_at, id): what a cursor 90% in points at.
    deep = db.execute(
        "SELECT created_at, id FROM escrow ORDER BY created_at, id LIMIT 1 OFFSET ?", (int(total * 0.9),)
    ).fetchone()
    dead_total = db.execute("SELECT COUNT(*) FROM escrow WHERE state = 'dead'").fetchone()[0]
    deep_dead = db.execute(
        "SELECT created_at, id FROM escrow WHERE state = 'dead' ORDER BY created_at, id LIMIT 1 OFFSET ?",
        (int(dead_total * 0.9),),
    ).fetchone()
    one = deep[1].hex()

    url = urlparse(base)
    connection = http.client.HTTPConnection(url.hostname, url.port, timeout=10)
    headers = {"Authorization": "Bearer " + token}

    def get(target):
        def run():
            connection.request("GET", target, headers=headers)
            response = connection.getresponse()
            body = response.read()
            assert response.status == 200, (target, response.status, body[:200])
        return run

    def raw(sql, args):
        def run():
            db.execute(sql, args).fetchall()
        return run

    list_sql = f"SELECT {COLUMNS} FROM escrow WHERE 1 ORDER BY created_at, id LIMIT ?"
    deep_sql = f"SELECT {COLUMNS} FROM escrow WHERE (created_at, id) > (?, ?) ORDER BY created_at, id LIMIT ?"
    dead_sql = f"SELECT {COLUMNS} FROM escrow WHERE state = ? ORDER BY created_at, id LIMIT ?"
    dead_deep_sql = (
        f"SELECT {COLUMNS} FROM escrow WHERE state = ? AND (created_at, id) > (?, ?) ORDER BY created_at, id LIMIT ?"
    )
    one_sql = f"SELECT {COLUMNS} FROM escrow WHERE id = ?"
    history_sql = "SELECT * FROM audit_event WHERE escrow_id = ? ORDER BY seq LIMIT ?"
    # The overview is published off the request path; its raw counterpart is what a request would cost without that
    # (the counts it publishes), shown for scale, and the cheapest raw read (the audit head) as the floor.
    head_sql = "SELECT seq, hash FROM audit_head WHERE singleton = 1"
    cases = [
        ("list first page (50)", get("/v1/admin/escrows?limit=50"), [(list_sql, (51,))]),
        (
            "list deep page (90%, cursor)",
            get(f"/v1/admin/escrows?limit=50&cursor={cursor(deep[0], deep[1])}"),
            [(deep_sql, (deep[0], deep[1], 51))],
        ),
        ("list state=dead first page", get("/v1/admin/escrows?state=dead&limit=50"), [(dead_sql, ("dead", 51))]),
        (
            "list state=dead deep page",
            get(f"/v1/admin/escrows?state=dead&limit=50&cursor={cursor(deep_dead[0], deep_dead[1])}"),
            [(dead_deep_sql, ("dead", deep_dead[0], deep_dead[1], 51))],
        ),
        (
            "one escrow with history",
            get(f"/v1/admin/escrows/{one}"),
            [(one_sql, (deep[1],)), (history_sql, (one, 1000))],
        ),
        ("overview (published)", get("/v1/admin/overview"), [(head_sql, ())]),
    ]
    print(json.dumps({"escrows": total, "dead": dead_total}))
    for name, request, queries in cases:
        request()  # warm: the statement cache, the connection
        http_median, http_p95 = timed(request, repeat)

        def all_raw():
            for sql, args in queries:
                raw(sql, args)()

        all_raw()
        raw_median, raw_p95 = timed(all_raw, repeat)
        plans = [" | ".join(r[3] for r in db.execute("EXPLAIN QUERY PLAN " + sql, args)) for sql, args in queries]
        print(json.dumps({
            "escrows": total, "answer": name,
            "http_ms": round(http_median, 3), "http_p95_ms": round(http_p95, 3),
            "raw_ms": round(raw_median, 3), "raw_p95_ms": round(raw_p95, 3),
            "difference_ms": round(http_median - raw_median, 3),
            "ratio": round(http_median / raw_median, 1) if raw_median > 0 else None,
            "plan": plans,
        }))
    # What publishing the overview costs (the service does this every 10 s, off the request path).
    summary = [
        "SELECT state, COUNT(*) FROM escrow GROUP BY state",
        "SELECT MIN(created_at) FROM escrow",
        "SELECT MIN(created_at) FROM escrow WHERE state = 'pending'",
        "SELECT COUNT(*) FROM escrow WHERE expires_at <= 0",
        "SELECT id, dead_code FROM escrow WHERE state = 'dead' ORDER BY created_at",
        "SELECT key_version, COUNT(*) FROM escrow GROUP BY key_version",
        "SELECT type, detail, COUNT(*) FROM audit_event WHERE at >= 0 AND type IN ('captured', 'delivery-attempted',"
        " 'purged', 'dead', 'requeued') GROUP BY type, detail",
    ]
    median, _ = timed(lambda: [db.execute(sql).fetchall() for sql in summary], 3)
    print(json.dumps({"escrows": total, "answer": "overview publication (background, every 10 s)", "raw_ms": round(median, 1)}))


if __name__ == "__main__":
    main()
