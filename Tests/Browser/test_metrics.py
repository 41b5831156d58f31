"""Capture failures are counted where operators alert on them: a capture the store cannot take (here, another
process holds SQLite's write lock past the busy timeout) answers 503 and adds to
profile_escrow_capture_failures_total{code}; bad input does not. The profile is taken once the lock is gone."""

from __future__ import annotations

import json
import re
import sqlite3

from conftest import Node, http


def failures(node: Node) -> dict[str, float]:
    status, _, body = http("GET", node.url + "/metrics")
    assert status == 200
    found = re.findall(r'^profile_escrow_capture_failures_total\{code="([a-z_]+)"\} ([0-9.e+]+)$', body.decode(), re.M)
    return {code: float(value) for code, value in found}


def test_a_capture_the_store_cannot_take_is_counted_by_code(folder, nodes):
    token = folder.token("capturer", "capture")
    node = Node(folder, "--no-worker").start()
    nodes.append(node)
    headers = {"Authorization": f"Bearer {token}"}
    profile = {"userIdentifier": "000000.metricscanary.0001", "email": "metrics.canary@example.invalid"}

    # Bad input is the caller's problem, not a capture failure.
    status, _, _ = http("POST", node.url + "/v1/escrows", {"userIdentifier": "x"}, headers=headers)
    assert status == 400
    assert failures(node) == {}

    # Another process takes the write lock and keeps it past the store's busy timeout (5 s).
    holder = sqlite3.connect(folder.root / "escrow.sqlite", timeout=10, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        status, _, body = http("POST", node.url + "/v1/escrows", profile, headers=headers, timeout=30)
        assert status == 503, body
        assert json.loads(body)["code"] == "store_unavailable"
        counted = failures(node)
        assert counted == {"store_busy": 1.0}, counted
    finally:
        holder.execute("ROLLBACK")
        holder.close()

    status, _, body = http("POST", node.url + "/v1/escrows", profile, headers=headers, timeout=30)
    assert status == 201, body
    assert failures(node) == counted
