"""Which of the store's tables and indexes each kind of write touches: WAL frames per operation, by b-tree.

Starts one `serve --no-worker` as callback-vs-capture.py's sign-in node (a test RSA key's JWKS file standing in for
Apple's), grows its store with WARM verified and native captures, then, for K operations of each kind, empties the
WAL (`PRAGMA wal_checkpoint(TRUNCATE)` from a connection of this script), sends the operations over CONNECTIONS
keep-alive connections, and reads the page number of every frame back from the `-wal` file (its 24-byte frame
headers), naming each page's b-tree with SQLite's `dbstat` on a copy of the database. Every frame is a page written
twice (to the WAL, then by the checkpoint to the database), after an fsync of the batch's commit.

K must stay small enough that the WAL is not checkpointed by serve during a phase (1,000 frames): 100 by default.

    python3 Benchmarks/signin/wal-frames.py BIN [K] [CONNECTIONS] [WARM]
"""

from __future__ import annotations

import collections
import importlib.util
import json
import os
import secrets
import shutil
import sqlite3
import struct
import sys
import tempfile
from pathlib import Path

BIN = sys.argv[1]
K = int(sys.argv[2]) if len(sys.argv) > 2 else 100
CONNECTIONS = sys.argv[3] if len(sys.argv) > 3 else "16"
WARM = int(sys.argv[4]) if len(sys.argv) > 4 else 2000

# The sign-in benchmark's serve, token signing and client, with its arguments.
sys.argv = [sys.argv[0], BIN, str(K), CONNECTIONS, "1"]
spec = importlib.util.spec_from_file_location("bench", Path(__file__).with_name("callback-vs-capture.py"))
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)


def frames(database: str) -> list[tuple[int, bool]]:
    """(page, whether it ends a commit) of each frame of the WAL's current generation, in order."""
    data = Path(database + "-wal").read_bytes()
    if len(data) < 32:
        return []
    page_size, _, salt1, salt2 = struct.unpack(">IIII", data[8:24])
    found, offset = [], 32
    while offset + 24 + page_size <= len(data):
        page, commit_size, frame_salt1, frame_salt2 = struct.unpack(">IIII", data[offset:offset + 16])
        if (frame_salt1, frame_salt2) != (salt1, salt2):
            break
        found.append((page, commit_size != 0))
        offset += 24 + page_size
    return found


def checkpoint(database: str):
    with sqlite3.connect(database, timeout=10) as connection:
        busy, _, _ = connection.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    if busy:
        raise SystemExit("the WAL could not be emptied: a reader or writer held it")


def btrees(database: str) -> dict[int, str]:
    descriptor, copy = tempfile.mkstemp(suffix=".sqlite")
    os.close(descriptor)
    shutil.copy(database, copy)
    try:
        with sqlite3.connect(copy) as connection:
            return {page: name for name, page in connection.execute("SELECT name, pageno FROM dbstat")}
    finally:
        os.unlink(copy)


def measure(serve, database: str, label: str, requests: list, expect: set[int]):
    checkpoint(database)
    bench.run(serve, requests, expect)
    written = frames(database)
    checkpoint(database)
    names = btrees(database)
    commits = sum(1 for _, ends in written if ends)
    print(f"{label}: {len(written) / len(requests):.2f} frames and {commits / len(requests):.2f} commits an operation")
    for name, count in collections.Counter(names.get(page, "(freed)") for page, _ in written).most_common():
        print(f"  {count / len(requests):6.2f}  {name}")


def verified(tag: str, count: int, headers: dict) -> list:
    requests = []
    for i in range(count):
        sub, email, _ = bench.profile(i, tag)
        body = {"userIdentifier": sub, "fullName": {"givenName": "Testy", "familyName": f"Bench{i}"}, "email": email,
                "identityToken": bench.sign(bench.claims(sub, bench.BUNDLE_ID, email))}
        requests.append(("POST", "/v1/escrows", headers, json.dumps(body)))
    return requests


def native(serve, tag: str, count: int) -> list:
    app = {"Content-Type": "application/json"}
    _, answers = bench.run(serve, [("POST", "/v1/apple/attempts", app, "{}")] * count, {201})
    requests = []
    for i, (_, _, data) in enumerate(answers):
        attempt = json.loads(data)
        sub, email, _ = bench.profile(i, tag)
        code = "c" + secrets.token_hex(16)
        claims = {**bench.claims(sub, bench.BUNDLE_ID, email, attempt["nonceSHA256"]), "c_hash": bench.code_hash(code)}
        body = {"attempt": attempt["attempt"], "identityToken": bench.sign(claims), "authorizationCode": code,
                "fullName": {"givenName": "Testy", "familyName": f"Bench{i}"}, "email": email}
        requests.append(("POST", "/v1/apple/native/capture", app, json.dumps(body)))
    return requests


def main():
    root = Path(tempfile.mkdtemp(prefix="pe-wal-frames-"))
    (root / "b").mkdir()
    (root / "b" / "jwks.json").write_text(json.dumps(bench.jwks()))
    port = bench.free_port()
    serve = bench.Serve(root / "b", "--apple-audience", f"{bench.BUNDLE_ID},{bench.CLIENT_ID}", "--apple-jwks",
                        str(root / "b" / "jwks.json"), "--signin-client-id", bench.CLIENT_ID, "--signin-callback-url",
                        f"http://127.0.0.1:{port}/v1/apple/signin/callback", "--signin-return",
                        "app=http://127.0.0.1:9/signed-in", port=port)
    database = str(root / "b" / "escrow.sqlite")
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {serve.token}"}
    try:
        bench.run(serve, verified("warm", WARM, headers), {201})
        bench.run(serve, native(serve, "warmnative", WARM), {201})
        measure(serve, database, "verified capture", verified("verified", K, headers), {201})
        measure(serve, database, "native capture", native(serve, "native", K), {201})
        measure(serve, database, "app attempt",
                [("POST", "/v1/apple/attempts", {"Content-Type": "application/json"}, "{}")] * K, {201})
    finally:
        serve.stop()
        shutil.rmtree(root, ignore_errors=True)


main()
