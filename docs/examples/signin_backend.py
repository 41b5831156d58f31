"""A minimal app backend for ProfileEscrow's web sign-in, in Python (standard library + `cryptography`).

ProfileEscrow is the redirect URI registered with Apple. The "Sign in with Apple" button links to this backend's
`/login`, which gives the browser a random sign-in cookie and sends it on to ProfileEscrow's start with `appState`, the
SHA-256 of that cookie. ProfileEscrow sends the browser back to this backend's return URL, `/signed-in?ticket=…` (or
`?error=…`). This backend then, server to server:

1. redeems the ticket once at ProfileEscrow (`POST /v1/apple/signin/tickets/redeem`, a token of scope `signin`):
   the Apple user identifier, the authorization code, the email, and the `appState` given at start, which must be
   the hash of this browser's sign-in cookie: a ticket from a sign-in another browser started (login CSRF: an
   attacker's own sign-in, its ticket sent to a victim) is refused;
2. exchanges the authorization code with Apple (`POST https://appleid.apple.com/auth/token`, with a client secret:
   an ES256 JWT signed by your Sign in with Apple key);
3. reads the escrowed profile (name, email) when there is one (`POST /v1/escrows/{user}/replay`, scope `replay`),
   creates the account, and confirms the escrow (`POST /v1/escrows/{user}/confirm`, scope `confirm`), which purges
   it with an audit receipt.

Configuration, from the environment:
  ESCROW_URL      ProfileEscrow's internal API, e.g. http://127.0.0.1:8080
  ESCROW_PUBLIC_URL  ProfileEscrow's public listener, where browsers start a sign-in (default ESCROW_URL)
  ESCROW_TOKEN    a bearer token with the scopes signin, replay and confirm
  APPLE_TEAM_ID, APPLE_KEY_ID, APPLE_KEY_FILE   your team, and the Sign in with Apple key (.p8) and its id
  SERVICES_ID     the Services ID (ProfileEscrow's --signin-client-id)
  REDIRECT_URI    ProfileEscrow's callback URL (its --signin-callback-url): Apple wants the same one back
  APPLE_TOKEN_URL default https://appleid.apple.com/auth/token
  PORT            default 3000

    python3 signin_backend.py
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import html
import json
import os
import secrets
import time
import urllib.error
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

ESCROW_URL = os.environ.get("ESCROW_URL", "http://127.0.0.1:8080").rstrip("/")
ESCROW_PUBLIC_URL = os.environ.get("ESCROW_PUBLIC_URL", ESCROW_URL).rstrip("/")
ESCROW_TOKEN = os.environ["ESCROW_TOKEN"]
APPLE_TOKEN_URL = os.environ.get("APPLE_TOKEN_URL", "https://appleid.apple.com/auth/token")
TEAM_ID = os.environ["APPLE_TEAM_ID"]
KEY_ID = os.environ["APPLE_KEY_ID"]
SERVICES_ID = os.environ["SERVICES_ID"]
REDIRECT_URI = os.environ["REDIRECT_URI"]
with open(os.environ["APPLE_KEY_FILE"], "rb") as key_file:
    APPLE_KEY = serialization.load_pem_private_key(key_file.read(), password=None)

USERS: dict[str, dict] = {}  # your user table
SESSIONS: dict[str, str] = {}  # session id -> Apple user identifier


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def client_secret() -> str:
    """Apple's client secret: an ES256 JWT from your team to Apple, about the Services ID (at most 6 months)."""
    now = int(time.time())
    header = {"alg": "ES256", "kid": KEY_ID}
    claims = {"iss": TEAM_ID, "iat": now, "exp": now + 300, "aud": "https://appleid.apple.com", "sub": SERVICES_ID}
    signing_input = b64url(json.dumps(header).encode()) + "." + b64url(json.dumps(claims).encode())
    r, s = decode_dss_signature(APPLE_KEY.sign(signing_input.encode(), ec.ECDSA(hashes.SHA256())))
    return signing_input + "." + b64url(r.to_bytes(32, "big") + s.to_bytes(32, "big"))


def post(url: str, body: bytes | None, headers: dict) -> tuple[int, dict]:
    request = urllib.request.Request(url, data=body or b"", method="POST", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as error:
        return error.code, {}


def escrow(path: str, body: dict | None = None) -> tuple[int, dict]:
    headers = {"Authorization": f"Bearer {ESCROW_TOKEN}", "Content-Type": "application/json"}
    return post(ESCROW_URL + path, json.dumps(body).encode() if body is not None else None, headers)


def app_state(signin_cookie: str) -> str:
    """What this browser's sign-in passes through ProfileEscrow: a hash of its cookie, never the cookie itself."""
    return b64url(hashlib.sha256(signin_cookie.encode()).digest())


def sign_in(ticket: str, signin_cookie: str) -> str:
    """The Apple user identifier of a completed sign-in that this browser started; raises on any failure."""
    status, result = escrow("/v1/apple/signin/tickets/redeem", {"ticket": ticket})
    if status != 200:
        raise RuntimeError("the ticket is unknown, used or expired")  # 410: sign in again
    # Login CSRF: the sign-in must be the one this browser started (its cookie's hash went through as appState).
    if not signin_cookie or not hmac.compare_digest(result.get("appState") or "", app_state(signin_cookie)):
        raise RuntimeError("this browser did not start that sign-in")
    user = result["userIdentifier"]
    # The code proves the sign-in to Apple, and gives you Apple's tokens (keep the refresh token to revoke later).
    form = urllib.parse.urlencode({
        "client_id": SERVICES_ID, "client_secret": client_secret(), "code": result["authorizationCode"],
        "grant_type": "authorization_code", "redirect_uri": REDIRECT_URI,
    }).encode()
    status, tokens = post(APPLE_TOKEN_URL, form, {"Content-Type": "application/x-www-form-urlencoded"})
    if status != 200 or "id_token" not in tokens:
        raise RuntimeError("Apple refused the authorization code")
    account = USERS.setdefault(user, {"email": result.get("email"), "appleRefreshToken": tokens.get("refresh_token")})
    if result.get("escrowId"):
        # A first sign-in: the name (and the email Apple gave the browser) wait in the escrow.
        status, profile = escrow(f"/v1/escrows/{urllib.parse.quote(user)}/replay")
        if status == 200:
            account["name"] = profile.get("fullName")
            account["email"] = profile.get("email") or account["email"]
            escrow(f"/v1/escrows/{urllib.parse.quote(user)}/confirm")  # registered: purge it, with a receipt
    return user


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):  # the request line holds the ticket: never log it
        pass

    def page(self, status: int, text: str, headers: dict | None = None):
        body = f"<!doctype html><title>App</title><p>{html.escape(text)}</p>".encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Cache-Control", "no-store")
        self.send_header("Referrer-Policy", "no-referrer")
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        url = urllib.parse.urlsplit(self.path)
        query = dict(urllib.parse.parse_qsl(url.query))
        cookies = dict(c.strip().split("=", 1) for c in (self.headers.get("Cookie") or "").split(";") if "=" in c)
        if url.path == "/login":
            # The button's target: a fresh sign-in cookie for this browser, its hash through ProfileEscrow.
            cookie = secrets.token_urlsafe(32)
            start = ESCROW_PUBLIC_URL + "/v1/apple/signin?" + urllib.parse.urlencode(
                {"return": "app", "appState": app_state(cookie)})
            self.send_response(303)
            self.send_header("Location", start)
            self.send_header("Set-Cookie", f"signin={cookie}; Path=/; Max-Age=900; HttpOnly; Secure; SameSite=Lax")
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif url.path == "/signed-in":
            if "error" in query:
                return self.page(200, f"Sign-in did not complete ({query['error']}). Please try again.")
            try:
                user = sign_in(query.get("ticket", ""), cookies.get("signin", ""))
            except (RuntimeError, OSError, KeyError, ValueError):
                return self.page(400, "Sign-in failed. Please try again.")
            session = secrets.token_urlsafe(32)
            SESSIONS[session] = user
            # Away from the URL that carried the ticket; the sign-in cookie has served.
            self.send_response(303)
            self.send_header("Location", "/")
            self.send_header("Set-Cookie", f"session={session}; Path=/; HttpOnly; Secure; SameSite=Lax")
            self.send_header("Set-Cookie", "signin=; Path=/; Max-Age=0; HttpOnly; Secure; SameSite=Lax")
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif url.path == "/":
            user = SESSIONS.get(cookies.get("session", ""))
            if not user:
                return self.page(200, "Not signed in.")
            name = (USERS[user].get("name") or {}).get("givenName") or "there"
            self.page(200, f"Hello {name}, you are signed in.")
        else:
            self.page(404, "Not found.")


if __name__ == "__main__":
    ThreadingHTTPServer(("127.0.0.1", int(os.environ.get("PORT", "3000"))), Handler).serve_forever()
