#!/usr/bin/env python3
"""Times the purge report page: the console's (verified from the store's recorded checkpoint) against the same report
verifying the whole chain on every load (the admin API's `format=html&verify=true`, which the console page did before).

Usage: purge_report.py BASE_URL TOKEN [REPEAT] [WAIT]

TOKEN needs the `audit` scope. Signs in to the console as a browser does (the sign-in form's CSRF token and cookie,
then the session cookie), loads /console/purge-report once (the first load, which records the checkpoint when there
is none), then REPEAT times; and REPEAT times the admin API's full verification. Prints one JSON line each (ms). A load the
server closes before answering (its idle timeout) is timed to the close and counted; after a first load so closed it
waits WAIT seconds (default 60) for the report, which goes on, to record its checkpoint.
"""
import http.client
import json
import re
import statistics
import sys
import time
from urllib.parse import urlencode, urlparse


def cookies(response):
    jar = {}
    for name, value in response.getheaders():
        if name.lower() == "set-cookie":
            pair = value.split(";", 1)[0]
            key, _, content = pair.partition("=")
            jar[key] = content
    return jar


def sign_in(connection, token):
    connection.request("GET", "/console/signin")
    form = connection.getresponse()
    body = form.read().decode()
    jar = cookies(form)
    csrf = re.search(r'name="csrf" value="([^"]+)"', body).group(1)
    cookie = "; ".join(f"{k}={v}" for k, v in jar.items())
    connection.request(
        "POST",
        "/console/signin",
        body=urlencode({"csrf": csrf, "token": token}),
        headers={"Content-Type": "application/x-www-form-urlencoded", "Cookie": cookie},
    )
    signed = connection.getresponse()
    signed.read()
    session = cookies(signed).get("__Host-pe_session")
    if not session:
        sys.exit(f"console sign-in failed: {signed.status}")
    return f"__Host-pe_session={session}"


def load(connection, path, headers):
    """The answer's time (ms) and body; None for the body when the server closed the connection first (its 30 s
    idle timeout: a debug build verifying a million events takes longer)."""
    start = time.perf_counter()
    connection.request("GET", path, headers=headers)
    try:
        response = connection.getresponse()
    except http.client.RemoteDisconnected:
        connection.close()
        return (time.perf_counter() - start) * 1000, None
    body = response.read().decode()
    elapsed = (time.perf_counter() - start) * 1000
    if response.status != 200:
        sys.exit(f"{path}: {response.status}")
    return elapsed, body


def summary(name, samples, **extra):
    samples = sorted(samples)
    line = {
        "answer": name,
        "loads": len(samples),
        "median_ms": round(statistics.median(samples), 1),
        "max_ms": round(samples[-1], 1),
    }
    line.update(extra)
    print(json.dumps(line), flush=True)


def main():
    base, token = sys.argv[1], sys.argv[2]
    repeat = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    url = urlparse(base)
    connection = http.client.HTTPConnection(url.hostname, url.port, timeout=600)
    console = {"Cookie": sign_in(connection, token)}
    first, body = load(connection, "/console/purge-report", console)
    verdict = "no answer: closed by the server" if body is None else "verified" if "verdict ok" in body else "NOT verified"
    summary("console first load (no checkpoint yet: the whole chain)", [first], chain=verdict)
    if body is None:
        time.sleep(float(sys.argv[4]) if len(sys.argv) > 4 else 60)  # the report goes on and records its checkpoint
    samples = []
    for _ in range(repeat):
        elapsed, body = load(connection, "/console/purge-report", console)
        samples.append(elapsed)
    recorded = re.search(r"Events up to sequence (\d+) were verified", body)
    summary(
        "console, from the recorded checkpoint",
        samples,
        chain="verified" if "verdict ok" in body else "NOT verified",
        recorded_through=int(recorded.group(1)) if recorded else None,
    )
    api = {"Authorization": f"Bearer {token}"}
    loads = [load(connection, "/v1/admin/purge-report?format=html&verify=true", api) for _ in range(repeat)]
    closed = sum(1 for _, body in loads if body is None)
    summary("whole chain verified on every load (admin API html, verify=true)", [ms for ms, _ in loads],
            closed_by_server=closed)


if __name__ == "__main__":
    main()
