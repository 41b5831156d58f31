"""The browser suite's harness: real `profile-escrow` processes on loopback, driven by headless Chromium.

Each test gets a fresh folder (store, keyring, tokens, logs), `serve` nodes started by `Node`, the CLI through
`cli`, and a Chromium through Selenium (Debian's `chromium` and `chromium-driver`). `scan_for_secrets` reads every
file a test left (logs, store files) for the canary values it must never find.

Run by scripts/browser-tests.sh (which scripts/test.sh calls) with PROFILE_ESCROW_BIN set to the binary to test.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

BIN = os.environ.get("PROFILE_ESCROW_BIN", str(Path(__file__).resolve().parents[2] / ".build/debug/profile-escrow"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Folder:
    """A test's store folder and the environment every process of the test shares."""

    def __init__(self, root: Path):
        self.root = root
        self.env = dict(os.environ)
        self.env.update(
            PROFILE_ESCROW_DATABASE=str(root / "escrow.sqlite"),
            PROFILE_ESCROW_KEYRING=str(root / "keyring"),
            PROFILE_ESCROW_TOKENS=str(root / "tokens.sqlite"),
            PROFILE_ESCROW_LOG_LEVEL="debug",
        )
        self.logs: list[Path] = []

    def cli(self, *args: str, stdin: str | None = None, check: bool = True, env: dict | None = None):
        """Runs the CLI; returns the CompletedProcess (text). Fails the test on a non-zero exit when `check`."""
        result = subprocess.run(
            [BIN, *args], input=stdin, capture_output=True, text=True, timeout=60, env={**self.env, **(env or {})}
        )
        # What the command logs is scanned for secrets; what it prints on stdout is its answer (a new token, say),
        # given to the test.
        log = self.root / f"cli-{len(self.logs)}.log"
        log.write_text(result.stderr)
        self.logs.append(log)
        if check and result.returncode != 0:
            raise AssertionError(f"profile-escrow {' '.join(args[:2])} exited {result.returncode}: {result.stderr[-2000:]}")
        return result

    def token(self, name: str, *scopes: str) -> str:
        return self.cli("tokens", "add", name, "--scope", *scopes).stdout.strip()


class Node:
    """One `profile-escrow serve` process; its output goes to a log file the secret scan reads."""

    def __init__(self, folder: Folder, *args: str, env: dict | None = None, name: str = "serve"):
        self.folder = folder
        self.port = free_port()
        self.args = ["serve", "--host", "127.0.0.1", "--port", str(self.port), *args]
        self.env = {**folder.env, **(env or {})}
        self.log = folder.root / f"{name}-{self.port}.log"
        folder.logs.append(self.log)
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, health_url: str | None = None, timeout: float = 30, tls: ssl.SSLContext | None = None) -> "Node":
        """Starts the process and waits until /healthz answers 200 (over HTTPS with `tls`, the client's context)."""
        out = open(self.log, "ab")
        self.process = subprocess.Popen([BIN, *self.args], stdout=out, stderr=subprocess.STDOUT, env=self.env)
        out.close()
        deadline = time.monotonic() + timeout
        url = (health_url or (self.url.replace("http://", "https://") if tls else self.url)) + "/healthz"
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"serve exited {self.process.returncode}: {self.log.read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(url, timeout=1, context=tls) as response:
                    if response.status == 200:
                        return self
            except (urllib.error.URLError, ConnectionError, TimeoutError, ssl.SSLError):
                pass
            time.sleep(0.1)
        raise AssertionError(f"serve not healthy within {timeout} s: {self.log.read_text()[-2000:]}")

    def stop(self, sig: int = signal.SIGTERM):
        if self.process and self.process.poll() is None:
            self.process.send_signal(sig)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=5)


def http(method: str, url: str, body: bytes | dict | None = None, headers: dict | None = None, timeout: float = 10,
         context=None):
    """One request with urllib, never following redirects: returns (status, headers, body bytes). `context`: an
    ssl.SSLContext for https."""
    data = json.dumps(body).encode() if isinstance(body, dict) else body
    request = urllib.request.Request(url, data=data, method=method, headers=headers or {})
    if isinstance(body, dict):
        request.add_header("Content-Type", "application/json")

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args, **kwargs):
            return None

    opener = urllib.request.build_opener(NoRedirect, urllib.request.HTTPSHandler(context=context))
    try:
        with opener.open(request, timeout=timeout) as response:
            return response.status, response.headers, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.headers, error.read()



class Recorder:
    """A loopback HTTP(S) server standing in for a backend or a collector: it records every POST (path, headers with
    lower-case names, body, and the client's certificate over mutual TLS) and answers `status`, or `status(n)` for
    the n-th request (1-based). With `tls`, a server-side SSL context, it speaks HTTPS."""

    @dataclass
    class Request:
        path: str
        headers: dict
        body: bytes
        peer: dict | None

    def __init__(self, status=200, tls: ssl.SSLContext | None = None):
        self.requests: list[Recorder.Request] = []
        self.lock = threading.Lock()
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                peer = self.connection.getpeercert() if tls else None
                with recorder.lock:
                    recorder.requests.append(Recorder.Request(
                        self.path, {k.lower(): v for k, v in self.headers.items()}, body, peer))
                    count = len(recorder.requests)
                self.send_response(status(count) if callable(status) else status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        if tls:
            self.server.socket = tls.wrap_socket(self.server.socket, server_side=True)
        self.scheme = "https" if tls else "http"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.server.server_address[1]}"

    def snapshot(self) -> list["Recorder.Request"]:
        with self.lock:
            return list(self.requests)

    def close(self):
        self.server.shutdown()
        self.server.server_close()

def scan_for_secrets(folder: Folder, secrets: list[str], extra: list[Path] = ()):
    """Fails if any of `secrets` appears in a log of the test, any file of its folder, or `extra`."""
    files = [p for p in folder.root.rglob("*") if p.is_file()] + list(extra)
    for path in files:
        data = path.read_bytes()
        for secret in secrets:
            if secret and secret.encode() in data:
                raise AssertionError(f"{path.name} holds a value it must never hold (secret #{secrets.index(secret)})")


@pytest.fixture
def folder(tmp_path: Path):
    f = Folder(tmp_path)
    f.cli("keys", "init")
    yield f


@pytest.fixture
def nodes():
    started: list[Node] = []
    yield started
    for node in started:
        node.stop()


def make_browser(*flags: str):
    """A headless Chromium with a fresh profile (its own cookies), logging every network event (see `browser_requests`);
    `flags` are added to its command line."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--disable-background-networking", "--window-size=1280,1600", *flags):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"performance": "ALL"})
    service = Service(executable_path=shutil.which("chromedriver") or "/usr/bin/chromedriver")
    driver = webdriver.Chrome(service=service, options=options)
    driver.set_page_load_timeout(30)
    return driver


def browser_requests(driver) -> list[dict]:
    """Every request the browser made since the last call, redirects included: dicts with `url`, `method` and, once
    answered, `status` (from the DevTools performance log)."""
    requests: dict[str, dict] = {}
    order: list[dict] = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        params = message.get("params", {})
        if message.get("method") == "Network.requestWillBeSent":
            redirect = params.get("redirectResponse")
            if redirect and params["requestId"] in requests:
                requests[params["requestId"]]["status"] = redirect.get("status")
            record = {"url": params["request"]["url"], "method": params["request"]["method"]}
            requests[params["requestId"]] = record
            order.append(record)
        elif message.get("method") == "Network.responseReceived" and params.get("requestId") in requests:
            requests[params["requestId"]]["status"] = params["response"].get("status")
    return order


@pytest.fixture
def browser():
    driver = make_browser()
    yield driver
    driver.quit()
