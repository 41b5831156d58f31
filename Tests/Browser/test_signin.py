"""Web sign-in (`/v1/apple/signin…`) in a real browser, against a stand-in for Apple served by the test on loopback.

The stand-in plays Apple's part: its authorize page auto-submits a `form_post` (code, id_token, state, user JSON) to
the `redirect_uri` it was given, with an id_token signed by the test's RSA key over the nonce of the authorize
request; it serves that key's JWKS; and it serves the app's return page. Apple runs on `localhost`, the service on
`127.0.0.1`: the form post is cross-site, as Apple's is.

Every name, email, code and token here is a canary: after each test, no log or store file may hold it.
"""

from __future__ import annotations

import base64
import fcntl
import html
import json
import os
import secrets
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

from conftest import Folder, Node, Recorder, browser_requests, free_port, http, make_browser, scan_for_secrets

CLIENT_ID = "invalid.example.web"
BUNDLE_ID = "invalid.example.app"
APPLE_ISSUER = "https://appleid.apple.com"


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def wait_for(condition, timeout: float, what: str, interval: float = 0.1):
    """Polls `condition` until it returns something truthy; fails naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"not within {timeout} s: {what}")


class FakeApple:
    """Apple's authorize page, JWKS and the app's return page, on one loopback HTTP server.

    `mode` decides what the authorize page does: "auto" posts the form at once, as Apple does after the user agrees;
    "cancel" posts `error=user_cancelled_authorize`; "hold" shows the form and waits for a click on its button.
    """

    def __init__(self):
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.kid = "test-" + secrets.token_hex(4)
        self.port = free_port()
        self.mode = "auto"
        self.sub = "001234." + secrets.token_hex(16) + ".0101"
        self.first = "Canaryfirst" + secrets.token_hex(3)
        self.last = "Canarylast" + secrets.token_hex(3)
        self.email = f"canary.{secrets.token_hex(4)}@example.com"
        self.codes: list[str] = []
        self.tokens: list[str] = []
        self.authorizations: list[dict] = []
        self.last_form: tuple[str, list[tuple[str, str]]] | None = None
        self.jwks_fetches = 0
        self.returns: list[str] = []
        # The app's Sign in with Apple key (for its client secret) and what the token endpoint was asked.
        self.team_id, self.key_id = "TEAMID0001", "KEYID00001"
        self.app_key = ec.generate_private_key(ec.SECP256R1())
        self.exchanges: list[dict] = []
        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), self._handler())
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def origin(self) -> str:
        return f"http://localhost:{self.port}"

    @property
    def secrets(self) -> list[str]:
        """What no log or store file may hold."""
        return [self.first, self.last, self.email, *self.codes, *self.tokens]

    def jwks(self) -> dict:
        numbers = self.key.public_key().public_numbers()
        n = numbers.n.to_bytes((numbers.n.bit_length() + 7) // 8, "big")
        e = numbers.e.to_bytes((numbers.e.bit_length() + 7) // 8, "big")
        return {"keys": [{"kty": "RSA", "kid": self.kid, "use": "sig", "alg": "RS256", "n": b64url(n), "e": b64url(e)}]}

    def id_token(self, nonce: str | None) -> str:
        now = int(time.time())
        header = {"alg": "RS256", "kid": self.kid}
        claims = {
            "iss": APPLE_ISSUER, "aud": CLIENT_ID, "exp": now + 600, "iat": now, "sub": self.sub,
            "email": self.email, "email_verified": "true", "is_private_email": "false", "real_user_status": 2,
        }
        if nonce is not None:
            claims["nonce"] = nonce
        signing_input = b64url(json.dumps(header).encode()) + "." + b64url(json.dumps(claims).encode())
        signature = self.key.sign(signing_input.encode(), padding.PKCS1v15(), hashes.SHA256())
        token = signing_input + "." + b64url(signature)
        self.tokens.append(token)
        return token

    def authorize_form(self, query: dict) -> tuple[str, list[tuple[str, str]]]:
        """What Apple posts back for an authorize request: (redirect_uri, fields)."""
        self.authorizations.append(query)
        redirect_uri, state = query["redirect_uri"], query["state"]
        if self.mode == "cancel":
            return redirect_uri, [("error", "user_cancelled_authorize"), ("state", state)]
        code = "c" + secrets.token_hex(16) + ".0.canarycode"
        self.codes.append(code)
        user = json.dumps({"name": {"firstName": self.first, "lastName": self.last}, "email": self.email})
        return redirect_uri, [("state", state), ("code", code), ("id_token", self.id_token(query["nonce"])),
                              ("user", user)]

    @staticmethod
    def form_page(action: str, fields: list[tuple[str, str]], auto: bool) -> bytes:
        inputs = "".join(
            f'<input type="hidden" name="{html.escape(name)}" value="{html.escape(value)}">' for name, value in fields
        )
        script = "<script>document.getElementById('apple').submit();</script>" if auto else ""
        return (
            f'<!doctype html><html><head><title>Apple stand-in</title></head><body>'
            f'<form id="apple" method="post" action="{html.escape(action)}">{inputs}'
            f'<button id="continue" type="submit">Continue</button></form>{script}</body></html>'
        ).encode()

    def token_exchange(self, form: dict) -> tuple[int, dict]:
        """Apple's token endpoint: the code must be one it issued, once; the client secret an ES256 JWT of the app's
        key, from its team, about the Services ID; redirect_uri the one of the authorization."""
        record = {"client_id": form.get("client_id"), "redirect_uri": form.get("redirect_uri"), "valid": False}
        self.exchanges.append(record)
        try:
            header_part, claims_part, signature_part = form["client_secret"].split(".")
            header = json.loads(base64.urlsafe_b64decode(header_part + "=="))
            claims = json.loads(base64.urlsafe_b64decode(claims_part + "=="))
            raw = base64.urlsafe_b64decode(signature_part + "==")
            signature = encode_dss_signature(int.from_bytes(raw[:32], "big"), int.from_bytes(raw[32:], "big"))
            self.app_key.public_key().verify(signature, f"{header_part}.{claims_part}".encode(),
                                             ec.ECDSA(hashes.SHA256()))
        except Exception:
            return 400, {"error": "invalid_client"}
        used = [e for e in self.exchanges[:-1] if e.get("code") == form.get("code") and e["valid"]]
        record["code"] = form.get("code")
        if (header.get("alg"), header.get("kid")) != ("ES256", self.key_id) or claims.get("iss") != self.team_id \
                or claims.get("sub") != CLIENT_ID or claims.get("aud") != APPLE_ISSUER \
                or form.get("client_id") != CLIENT_ID or form.get("grant_type") != "authorization_code":
            return 400, {"error": "invalid_client"}
        if form.get("code") not in self.codes or used or \
                form.get("redirect_uri") != self.authorizations[-1]["redirect_uri"]:
            return 400, {"error": "invalid_grant"}
        record["valid"] = True
        return 200, {"access_token": "a" + secrets.token_hex(8), "token_type": "Bearer", "expires_in": 3600,
                     "refresh_token": "r" + secrets.token_hex(8), "id_token": self.id_token(None)}

    def _handler(self):
        apple = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet: the test's own output holds no secrets either
                pass

            def send(self, status: int, body: bytes, content_type: str, extra: dict | None = None):
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                for name, value in (extra or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self):
                if self.path != "/auth/token":
                    return self.send(404, b"not found", "text/plain")
                length = int(self.headers.get("Content-Length") or 0)
                form = dict(urllib.parse.parse_qsl(self.rfile.read(length).decode()))
                status, answer = apple.token_exchange(form)
                self.send(status, json.dumps(answer).encode(), "application/json")

            def do_GET(self):
                url = urllib.parse.urlsplit(self.path)
                query = dict(urllib.parse.parse_qsl(url.query))
                if url.path == "/auth/authorize":
                    action, fields = apple.authorize_form(query)
                    apple.last_form = (action, fields)
                    page = apple.form_page(action, fields, auto=apple.mode != "hold")
                    self.send(200, page, "text/html; charset=utf-8")
                elif url.path == "/replay" and apple.last_form:
                    # The last form Apple posted, posted again: a reload, a replay or another browser's attempt.
                    self.send(200, apple.form_page(*apple.last_form, auto=True), "text/html; charset=utf-8")
                elif url.path == "/auth/keys":
                    apple.jwks_fetches += 1
                    body = json.dumps(apple.jwks()).encode()
                    self.send(200, body, "application/json", {"Cache-Control": "public, max-age=3600"})
                elif url.path == "/app/signed-in":
                    apple.returns.append(url.query)
                    self.send(200, b"<!doctype html><title>App</title><p>back in the app</p>", "text/html")
                else:
                    self.send(404, b"not found", "text/plain")

        return Handler

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def apple():
    fake = FakeApple()
    yield fake
    fake.close()


def signin_node(folder: Folder, apple: FakeApple, *extra: str, jwks_file: bool = False,
                public_port: int | None = None, return_url: str | None = None, scheme: str = "http") -> Node:
    """A serve node with web sign-in against the stand-in, the replay worker off. Apple's keys are fetched from the
    stand-in's JWKS URL, or read from a file. With `public_port`, the browser's routes are on that listener."""
    if jwks_file:
        path = folder.root / "apple-jwks.json"
        path.write_text(json.dumps(apple.jwks()))
        keys = ["--apple-jwks", str(path)]
    else:
        keys = ["--apple-jwks-url", f"{apple.origin}/auth/keys"]
    node = Node(folder, "--no-worker")
    browser_base = f"{scheme}://127.0.0.1:{public_port or node.port}"
    if public_port is not None:
        node.args += ["--public-port", str(public_port)]
    node.args += [
        "--apple-audience", BUNDLE_ID, "--apple-audience", CLIENT_ID,
        *keys,
        "--signin-client-id", CLIENT_ID,
        "--signin-callback-url", f"{browser_base}/v1/apple/signin/callback",
        "--signin-return", f"app={return_url or apple.origin + '/app/signed-in'}",
        "--apple-authorize-url", f"{apple.origin}/auth/authorize",
        *extra,
    ]
    return node


def escrows(folder: Folder) -> list[dict]:
    return json.loads(folder.cli("list", "--format", "json").stdout)


def audit_events(folder: Folder, escrow_id: str) -> list[tuple[str, str | None]]:
    """The escrow's audit events as `inspect` shows them: (type, detail)."""
    events = json.loads(folder.cli("inspect", escrow_id, "--format", "json").stdout)["events"]
    return [(e["type"], e.get("detail")) for e in events]


def returned_query(driver, apple: FakeApple) -> dict:
    """Waits until the browser is back on the app's page; its query."""
    wait_for(lambda: driver.current_url.startswith(apple.origin + "/app/signed-in"), 30, "back in the app")
    return dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(driver.current_url).query))


def redeem(node: Node, token: str, ticket: str):
    return http("POST", node.url + "/v1/apple/signin/tickets/redeem", {"ticket": ticket},
                {"Authorization": f"Bearer {token}"})


def assert_no_secret_in_urls(requests: list[dict], apple: FakeApple):
    assert requests, "the browser's requests were logged"
    for request in requests:
        for secret in apple.secrets:
            assert secret not in request["url"] and urllib.parse.quote(secret, safe="") not in request["url"], \
                f"a canary in a URL the browser requested ({request['method']} {request['url'][:40]}…)"


def test_full_flow_captures_durably_and_redeems_once(folder, nodes, browser, apple):
    node = signin_node(folder, apple)
    nodes.append(node.start())
    token = folder.token("app-backend", "signin")

    browser.get(node.url + "/v1/apple/signin?return=app")
    query = returned_query(browser, apple)
    requests = browser_requests(browser)

    # The binding cookie went with Apple's cross-site form post (else: signin_invalid) and the state and nonce matched.
    assert "error" not in query, f"the sign-in ended with {query.get('error')}"
    ticket = query["ticket"]
    assert len(ticket) >= 40
    # Durable before the redirect: the store holds the escrow now, read by another process.
    listed = escrows(folder)
    assert len(listed) == 1 and listed[0]["state"] == "pending"
    status = json.loads(folder.cli("status", apple.sub, "--format", "json").stdout)
    assert status["escrowId"] == listed[0]["escrowId"], "escrowed under the id_token's sub"
    assert audit_events(folder, listed[0]["escrowId"]) == [("captured", "web-signin")]

    # The redirect chain: start (302) → Apple → callback (303) → the app; the callback's 303 cleared the cookie.
    callback = [r for r in requests if r["url"].endswith("/v1/apple/signin/callback")]
    assert [(r["method"], r.get("status")) for r in callback] == [("POST", 303)]
    starts = [r for r in requests if "/v1/apple/signin?" in r["url"]]
    assert [r.get("status") for r in starts] == [302]
    assert browser.get_cookies() == [] or all(not c["name"].startswith("__Host-pe-signin") for c in browser.get_cookies())

    # No code or id_token in any URL the browser visited, history or redirect; the ticket only in the app's URL.
    assert_no_secret_in_urls(requests, apple)
    history = browser.execute_script(
        "return performance.getEntriesByType('navigation').map(e => e.name).concat([location.href, document.referrer])"
    )
    for url in history:
        assert not any(secret in url for secret in apple.secrets)
    assert browser.execute_script("return document.referrer") == "", "Referrer-Policy: no-referrer"
    assert [r["url"] for r in requests if ticket in r["url"]] == [f"{apple.origin}/app/signed-in?ticket={ticket}"]

    # The app's backend redeems the ticket once: the code, the escrow; then 410.
    status_code, _, body = redeem(node, token, ticket)
    assert status_code == 200, body
    result = json.loads(body)
    assert result["authorizationCode"] == apple.codes[-1]
    assert result["userIdentifier"] == apple.sub
    assert result["escrowId"] == listed[0]["escrowId"]
    assert result["return"] == "app"
    assert apple.jwks_fetches == 1, "Apple's keys fetched once, at start, and cached (max-age=3600)"
    status_code, _, body = redeem(node, token, ticket)
    assert status_code == 410, body
    assert json.loads(body)["code"] == "ticket_gone"
    # A token without the signin scope cannot redeem.
    other = folder.token("capture-only", "capture")
    assert redeem(node, other, "x" * 43)[0] == 403

    node.stop()
    scan_for_secrets(folder, apple.secrets + [ticket])


def test_cancelled_authorization_captures_nothing(folder, nodes, browser, apple):
    node = signin_node(folder, apple, jwks_file=True)
    nodes.append(node.start())
    apple.mode = "cancel"
    browser.get(node.url + "/v1/apple/signin")  # one return URL: `return` may be omitted
    query = returned_query(browser, apple)
    assert query == {"error": "user_cancelled_authorize"}
    assert escrows(folder) == []
    node.stop()
    scan_for_secrets(folder, apple.secrets)


def test_expired_state_captures_nothing(folder, nodes, browser, apple):
    node = signin_node(folder, apple, "--signin-ttl", "1s")
    nodes.append(node.start())
    apple.mode = "hold"
    browser.get(node.url + "/v1/apple/signin?return=app")
    button = wait_for(lambda: browser.find_elements("id", "continue"), 15, "Apple's page")[0]
    time.sleep(2.5)  # the attempt's 1 s life is over
    button.click()
    assert returned_query(browser, apple) == {"error": "signin_expired"}
    assert escrows(folder) == []
    node.stop()
    scan_for_secrets(folder, apple.secrets)


def test_replayed_state_captures_nothing_twice(folder, nodes, browser, apple):
    node = signin_node(folder, apple)
    nodes.append(node.start())
    browser.get(node.url + "/v1/apple/signin?return=app")
    ticket = returned_query(browser, apple)["ticket"]
    first = escrows(folder)
    assert len(first) == 1

    # The same form posted again (a reload after success, or a replay): used, so expired; nothing captured again.
    browser.get(apple.origin + "/replay")
    assert returned_query(browser, apple) == {"error": "signin_expired"}
    assert escrows(folder) == first
    assert audit_events(folder, first[0]["escrowId"]) == [("captured", "web-signin")]
    node.stop()
    scan_for_secrets(folder, apple.secrets + [ticket])


def test_another_browser_cannot_use_the_state(folder, nodes, browser, apple):
    node = signin_node(folder, apple)
    nodes.append(node.start())
    apple.mode = "hold"
    browser.get(node.url + "/v1/apple/signin?return=app")
    button = wait_for(lambda: browser.find_elements("id", "continue"), 15, "Apple's page")[0]

    # Another browser profile (no binding cookie) posts the same state, code and token: refused, nothing captured.
    other = make_browser()
    try:
        other.get(apple.origin + "/replay")
        assert returned_query(other, apple) == {"error": "signin_invalid"}
    finally:
        other.quit()
    assert escrows(folder) == []

    # The real user's attempt is intact (its cookie was not cleared): it completes.
    button.click()
    assert "ticket" in returned_query(browser, apple)
    assert len(escrows(folder)) == 1
    node.stop()
    scan_for_secrets(folder, apple.secrets)


class WriteLockHolder:
    """Takes the SQLite store's cross-process write lock (`<database>.write-lock`, an exclusive flock) away from serve:
    every write then fails once serve has waited its 30 s for the lock, as with a store that is down."""

    def __init__(self, database: Path):
        self.fd = os.open(str(database) + ".write-lock", os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(self.fd, fcntl.LOCK_EX)

    def release(self):
        if self.fd is not None:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = None


def test_store_down_mid_flow_the_page_resubmits_once_it_is_back(folder, nodes, browser, apple):
    node = signin_node(folder, apple)
    nodes.append(node.start())
    apple.mode = "hold"
    browser.get(node.url + "/v1/apple/signin?return=app")
    wait_for(lambda: browser.find_elements("id", "continue"), 15, "Apple's page")

    # serve waits up to 30 s for the write lock before it gives up on the store: the page loads after that.
    browser.set_page_load_timeout(120)
    lock = WriteLockHolder(folder.root / "escrow.sqlite")
    try:
        # Submitted by script: a click would wait for the answer, which waits for the store.
        browser.execute_script("setTimeout(function () { document.getElementById('apple').submit(); }, 0)")
        # The store cannot write: the 503 page, which holds the form and posts it again by itself.
        wait_for(lambda: browser.title == "Saving your sign-in", 90, "the 503 page that posts the form again")
        assert escrows(folder) == []
        requests = browser_requests(browser)
        assert [r.get("status") for r in requests if r["url"].endswith("/callback")] == [503]
        assert not browser.current_url.startswith(apple.origin)
    finally:
        lock.release()

    # The store is back: the page's own resubmission (no click) is captured, once, and the browser reaches the app.
    query = returned_query(browser, apple)
    assert "ticket" in query, query
    requests = browser_requests(browser)
    assert [r.get("status") for r in requests if r["url"].endswith("/callback")] == [303]
    assert len(escrows(folder)) == 1
    assert_no_secret_in_urls(requests, apple)

    token = folder.token("app-backend", "signin")
    status_code, _, body = redeem(node, token, query["ticket"])
    assert status_code == 200 and json.loads(body)["authorizationCode"] == apple.codes[-1]
    node.stop()
    scan_for_secrets(folder, apple.secrets + [query["ticket"]])


def test_public_listener_serves_the_browser_and_nothing_token_guarded(folder, nodes, browser, apple):
    public = free_port()
    node = signin_node(folder, apple, public_port=public)
    nodes.append(node.start())
    public_url = f"http://127.0.0.1:{public}"
    token = folder.token("app-backend", "signin", "capture", "metrics")

    browser.get(public_url + "/v1/apple/signin?return=app")
    ticket = returned_query(browser, apple)["ticket"]
    assert len(escrows(folder)) == 1

    # The public listener: the browser's routes, Apple notifications and /healthz; nothing token-guarded.
    assert http("GET", public_url + "/healthz")[0] == 200
    assert http("POST", public_url + "/v1/apple/notifications", {"payload": "x"})[0] == 401, "served: a bad JWS"
    auth = {"Authorization": f"Bearer {token}"}
    for method, path in [("POST", "/v1/apple/signin/tickets/redeem"), ("POST", "/v1/escrows"),
                         ("GET", "/readyz"), ("GET", "/metrics")]:
        assert http(method, public_url + path, {"ticket": ticket}, auth)[0] == 404, f"{path} not on the public port"
    # The internal listener: the token-guarded API, not the browser's routes.
    assert http("GET", node.url + "/v1/apple/signin?return=app")[0] == 404
    assert http("GET", node.url + "/readyz")[0] == 200
    status_code, _, body = redeem(node, token, ticket)
    assert status_code == 200 and json.loads(body)["authorizationCode"] == apple.codes[-1]
    node.stop()
    scan_for_secrets(folder, apple.secrets + [ticket])


EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "examples"


@pytest.mark.parametrize("language", ["python", "node"])
def test_the_documented_app_backend_signs_the_user_in(folder, nodes, browser, apple, language):
    """docs/examples/signin_backend.{py,js} as written: redeem, code exchange with (the stand-in for) Apple, the
    escrowed name read and the escrow confirmed."""
    import shutil
    import subprocess
    import sys

    program = {"python": [sys.executable, str(EXAMPLES / "signin_backend.py")],
               "node": [shutil.which("node") or "node", str(EXAMPLES / "signin_backend.js")]}[language]
    if language == "node" and not shutil.which("node"):
        pytest.skip("node is not installed")
    backend_port = free_port()
    node = signin_node(folder, apple, return_url=f"http://localhost:{backend_port}/signed-in")
    nodes.append(node.start())
    key_file = folder.root / "AuthKey.p8"
    key_file.write_bytes(apple.app_key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                     serialization.NoEncryption()))
    env = {**os.environ, "ESCROW_URL": node.url, "ESCROW_TOKEN": folder.token("web", "signin", "replay", "confirm"),
           "APPLE_TEAM_ID": apple.team_id, "APPLE_KEY_ID": apple.key_id, "APPLE_KEY_FILE": str(key_file),
           "SERVICES_ID": CLIENT_ID, "REDIRECT_URI": f"{node.url}/v1/apple/signin/callback",
           "APPLE_TOKEN_URL": f"{apple.origin}/auth/token", "PORT": str(backend_port),
           "ESCROW_PUBLIC_URL": node.url}
    log = folder.root / f"backend-{language}.log"
    with open(log, "wb") as out:
        backend = subprocess.Popen(program, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_for(lambda: http("GET", f"http://127.0.0.1:{backend_port}/")[0] == 200
                 if _listening(backend_port) else False, 20, "the example backend listening")
        # Login CSRF: a sign-in this browser did not start at the app (no sign-in cookie: an attacker's own sign-in,
        # its ticket sent to a victim) is refused by the backend, which compares the redeem answer's appState.
        browser.get(node.url + "/v1/apple/signin?return=app")
        wait_for(lambda: browser.current_url.startswith(f"http://localhost:{backend_port}/signed-in"), 30,
                 "the app's return page")
        text = browser.find_element("tag name", "body").text
        assert text == "Sign-in failed. Please try again.", text
        # Through the app's own button: its cookie's hash goes through as appState and comes back at redeem.
        browser.get(f"http://localhost:{backend_port}/login")
        wait_for(lambda: browser.current_url == f"http://localhost:{backend_port}/", 30, "the app's home page")
        text = browser.find_element("tag name", "body").text
        assert text == f"Hello {apple.first}, you are signed in.", text
        assert len(apple.exchanges) == 1 and [e["valid"] for e in apple.exchanges] == [True], \
            "one code exchange (none for the refused ticket), with a valid client secret"
        assert escrows(folder) == [], "the backend confirmed: the escrow is purged"
    finally:
        backend.terminate()
        backend.wait(timeout=10)
    node.stop()
    scan_for_secrets(folder, apple.secrets)


def _listening(port: int) -> bool:
    import socket

    with socket.socket() as s:
        s.settimeout(0.2)
        return s.connect_ex(("127.0.0.1", port)) == 0


def test_full_flow_over_https_with_the_service_s_own_tls(folder, nodes, apple):
    """--tls-certificate/--tls-key on both listeners: the flow as Apple requires it (https), the redeem over TLS."""
    import ssl
    import subprocess

    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                    "-keyout", str(folder.root / "tls.key"), "-out", str(folder.root / "tls.pem"), "-days", "1",
                    "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True, timeout=30)
    context = ssl.create_default_context(cafile=str(folder.root / "tls.pem"))
    public = free_port()
    node = signin_node(folder, apple, "--tls-certificate", str(folder.root / "tls.pem"), "--tls-key",
                       str(folder.root / "tls.key"), public_port=public, scheme="https")
    nodes.append(node.start(tls=context))
    token = folder.token("app-backend", "signin")
    # Plain HTTP is not served.
    with pytest.raises(Exception):
        http("GET", f"http://127.0.0.1:{public}/healthz", timeout=3)
    browser = make_browser("--ignore-certificate-errors")
    try:
        browser.get(f"https://127.0.0.1:{public}/v1/apple/signin?return=app")
        ticket = returned_query(browser, apple)["ticket"]
        requests = browser_requests(browser)
    finally:
        browser.quit()
    assert [r.get("status") for r in requests if r["url"].endswith("/callback")] == [303]
    assert all(r["url"].startswith("https://") for r in requests if "/v1/apple/signin" in r["url"])
    assert len(escrows(folder)) == 1
    status_code, _, body = http("POST", f"https://127.0.0.1:{node.port}/v1/apple/signin/tickets/redeem",
                                {"ticket": ticket}, {"Authorization": f"Bearer {token}"}, context=context)
    assert status_code == 200 and json.loads(body)["authorizationCode"] == apple.codes[-1]
    node.stop()
    scan_for_secrets(folder, apple.secrets + [ticket])


def test_verified_notifications_are_forwarded_signed(folder, nodes, apple):
    """serve --forward-notifications: Apple's notification (on the public listener) is applied and queued sealed in
    the store, then POSTed to the backend with Standard Webhooks headers that verify with the webhook secret, retried
    after a 503; a forged one is not forwarded, and the JWS is never in a file in clear."""
    import hashlib
    import hmac

    backend = Recorder(status=lambda n: 503 if n == 1 else 204)  # the first attempt fails: the forwarder retries
    secret = "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()  # not through the CLI: its output is logged
    public = free_port()
    node = signin_node(folder, apple, "--forward-notifications", backend.url + "/apple",
                       "--backend", backend.url + "/register", public_port=public)
    node.env["PROFILE_ESCROW_WEBHOOK_SECRET"] = secret
    nodes.append(node.start())
    try:
        now = int(time.time())
        events = json.dumps({"type": "consent-revoked", "sub": apple.sub, "event_time": now * 1000})
        header = {"alg": "RS256", "kid": apple.kid}
        claims = {"iss": APPLE_ISSUER, "aud": CLIENT_ID, "iat": now, "jti": secrets.token_hex(8), "events": events}
        signing_input = b64url(json.dumps(header).encode()) + "." + b64url(json.dumps(claims).encode())
        jws = signing_input + "." + b64url(apple.key.sign(signing_input.encode(), padding.PKCS1v15(), hashes.SHA256()))
        forged = signing_input + "." + b64url(b"\x00" * 256)
        assert http("POST", f"http://127.0.0.1:{public}/v1/apple/notifications", {"payload": forged})[0] == 401
        status, _, body = http("POST", f"http://127.0.0.1:{public}/v1/apple/notifications", {"payload": jws})
        assert status == 200, body
        wait_for(lambda: len(backend.snapshot()) >= 2, 20, "the notification forwarded after one retry")
        time.sleep(0.5)
        received = backend.snapshot()
        assert len(received) == 2, "the forged notification was not forwarded, the verified one once more after 503"
        headers, body = received[1].headers, received[1].body
        key = base64.b64decode(secret.removeprefix("whsec_"))
        signed = f"{headers['webhook-id']}.{headers['webhook-timestamp']}.".encode() + body
        expected = "v1," + base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
        assert expected in headers["webhook-signature"].split(" ")
        assert received[0].headers["webhook-id"] == headers["webhook-id"]
        forwarded = json.loads(body)
        assert (forwarded["type"], forwarded["event"], forwarded["payload"]) == ("apple-notification", "consent-revoked",
                                                                                 jws)
    finally:
        backend.close()
    node.stop()
    # The outbox held the notification sealed: Apple's JWS never reached a file in clear.
    scan_for_secrets(folder, apple.secrets + [secret, jws])
