#!/usr/bin/env python3
"""Capture and console pages of two `profile-escrow` binaries, alternated in one run.

    python3 Benchmarks/http/house-before-after.py BEFORE_BIN AFTER_BIN [--rounds 3] [--captures 2000]
        [--pages 200] [--threads 8]

For each round and each binary (the order alternates every round): a fresh store and keyring in a temporary folder,
`serve --no-worker` on a free loopback port, then

- capture: `--captures` POST /v1/escrows over `--threads` keep-alive connections (obviously fake profiles), timed
  from the first request to the last answer: captures per second;
- console: one console session (the sign-in form, its CSRF cookie and the token typed), then `--pages` GETs of each
  page (home, escrow list, one escrow, purge report) on one connection: milliseconds per page, median and p90.

Every answer's status is checked (201 for a capture, 200 for a page): a page that fails is an error, not a fast
answer. One JSON line per binary and round, then the ratio after/before of each median across rounds.
Nothing here is personal: users are `000000.house.<n>.0001`, emails `@example.invalid`.
"""

import argparse
import http.client
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

PAGES = ["/console", "/console/escrows", "/console/escrows/{id}", "/console/purge-report"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Node:
    def __init__(self, binary, folder):
        self.binary = binary
        self.env = dict(
            os.environ,
            PROFILE_ESCROW_DATABASE=f"{folder}/escrow.sqlite",
            PROFILE_ESCROW_KEYRING=f"{folder}/keyring",
            PROFILE_ESCROW_TOKENS=f"{folder}/tokens.sqlite",
            PROFILE_ESCROW_LOG_LEVEL="warning",
        )
        self.run("keys", "init")
        self.capture_token = self.run("tokens", "add", "house-capture", "--scope", "capture").split()[-1]
        self.console_token = self.run(
            "tokens", "add", "house-console", "--scope", "read", "--scope", "operate", "--scope", "audit"
        ).split()[-1]
        self.port = free_port()
        self.log = open(f"{folder}/serve.log", "w")
        self.process = subprocess.Popen(
            [binary, "serve", "--no-worker", "--host", "127.0.0.1", "--port", str(self.port),
             "--rate-limit", "1000000", "--rate-burst", "1000000",
             "--anonymous-rate-limit", "1000000", "--anonymous-overall-rate-limit", "1000000"],
            env=self.env, stdout=self.log, stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 60
        while True:
            try:
                if self.request("GET", "/healthz")[0] == 200:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline or self.process.poll() is not None:
                raise SystemExit(f"{binary}: serve did not answer /healthz (see {folder}/serve.log)")
            time.sleep(0.1)  # polling a process that is starting

    def run(self, *arguments):
        done = subprocess.run([self.binary, *arguments], env=self.env, capture_output=True, text=True, timeout=60)
        if done.returncode != 0:
            raise SystemExit(f"{' '.join(arguments[:2])} failed: {done.stderr.strip()}")
        return done.stdout.strip()

    def connection(self):
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)

    def request(self, method, path, body=None, headers=None):
        connection = self.connection()
        try:
            connection.request(method, path, body=body, headers=headers or {})
            response = connection.getresponse()
            return response.status, response.getheaders(), response.read()
        finally:
            connection.close()

    def stop(self):
        self.process.terminate()
        self.process.wait(timeout=30)
        self.log.close()


def captures(node, count, threads):
    """Captures per second over `threads` keep-alive connections; every answer must be 201."""
    failures = []
    per_thread = count // threads

    def work(index):
        connection = node.connection()
        for number in range(per_thread):
            user = f"000000.house{index:02d}{number:08d}.0001"
            body = json.dumps({
                "userIdentifier": user,
                "fullName": {"givenName": "Testy", "familyName": "House"},
                "email": f"house{index}.{number}@example.invalid",
            })
            connection.request("POST", "/v1/escrows", body=body, headers={
                "Content-Type": "application/json", "Authorization": f"Bearer {node.capture_token}",
            })
            response = connection.getresponse()
            payload = response.read()
            if response.status != 201:
                failures.append(response.status)
                return
            if index == 0 and number == 0:
                node.escrow_id = json.loads(payload)["escrowId"]
        connection.close()

    workers = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
    started = time.perf_counter()
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    elapsed = time.perf_counter() - started
    if failures:
        raise SystemExit(f"{node.binary}: capture answered {failures[0]}")
    return per_thread * threads / elapsed


def console_session(node):
    """Signs in as a browser does: the form's CSRF cookie and field, then the token typed."""
    status, headers, body = node.request("GET", "/console/signin")
    if status != 200:
        raise SystemExit(f"{node.binary}: sign-in page answered {status}")
    cookie = next(v for k, v in headers if k.lower() == "set-cookie").split(";")[0]
    csrf = re.search(rb'name="csrf"[^>]*value="([^"]+)"|value="([^"]+)"[^>]*name="csrf"', body)
    value = (csrf.group(1) or csrf.group(2)).decode()
    form = urllib.parse.urlencode({"csrf": value, "token": node.console_token})
    status, headers, _ = node.request("POST", "/console/signin", body=form, headers={
        "Content-Type": "application/x-www-form-urlencoded", "Cookie": cookie,
    })
    if status != 303:
        raise SystemExit(f"{node.binary}: console sign-in answered {status}")
    return next(v for k, v in headers if k.lower() == "set-cookie" and "pe_session" in v).split(";")[0]


def pages(node, repeat):
    """Milliseconds per GET of each console page on one keep-alive connection; every answer must be 200."""
    session = console_session(node)
    connection = node.connection()
    timings = {}
    for template in PAGES:
        path = template.format(id=node.escrow_id)
        samples = []
        for _ in range(repeat):
            started = time.perf_counter()
            connection.request("GET", path, headers={"Cookie": session})
            response = connection.getresponse()
            response.read()
            samples.append((time.perf_counter() - started) * 1000)
            if response.status != 200:
                raise SystemExit(f"{node.binary}: {template} answered {response.status}")
        samples.sort()
        timings[template] = {
            "median_ms": round(statistics.median(samples), 3),
            "p90_ms": round(samples[int(len(samples) * 0.9)], 3),
        }
    connection.close()
    return timings


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("before")
    parser.add_argument("after")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--captures", type=int, default=2000)
    parser.add_argument("--pages", type=int, default=200)
    parser.add_argument("--threads", type=int, default=8)
    arguments = parser.parse_args()
    results = {"before": [], "after": []}
    for round_number in range(arguments.rounds):
        order = ["before", "after"] if round_number % 2 == 0 else ["after", "before"]
        for name in order:
            binary = os.path.abspath(getattr(arguments, name))
            with tempfile.TemporaryDirectory() as folder:
                node = Node(binary, folder)
                try:
                    rate = captures(node, arguments.captures, arguments.threads)
                    timings = pages(node, arguments.pages)
                finally:
                    node.stop()
            line = {"binary": name, "round": round_number + 1, "captures_per_second": round(rate, 1),
                    "pages": timings}
            results[name].append(line)
            print(json.dumps(line), flush=True)

    def median(name, pick):
        return statistics.median(pick(line) for line in results[name])

    summary = {"captures_per_second": round(
        median("after", lambda l: l["captures_per_second"]) / median("before", lambda l: l["captures_per_second"]), 3
    )}
    for page in PAGES:
        summary[page + " median"] = round(
            median("after", lambda l: l["pages"][page]["median_ms"])
            / median("before", lambda l: l["pages"][page]["median_ms"]), 3
        )
    print(json.dumps({"ratio_after_over_before": summary}))


if __name__ == "__main__":
    sys.exit(main())
