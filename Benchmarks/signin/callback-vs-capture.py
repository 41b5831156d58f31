"""Serve's CPU per web sign-in callback and per app's native capture beside its CPU per `POST /v1/escrows`, whole
processes, one run.

Two `serve --no-worker` processes on loopback, each with its own store:
  A. plain capture (no Apple configuration): N `POST /v1/escrows`;
  B. web sign-in and verified capture (a test RSA key's JWKS file, as a stand-in for Apple's):
     N verified `POST /v1/escrows` (an RS256 identity token each), N starts (`GET /v1/apple/signin`),
     N callbacks (Apple's form_post: state, code, an RS256 id_token over the attempt's nonce, the `user` JSON),
     N ticket redeems, N app-started attempts (`POST /v1/apple/attempts`) and N native captures
     (`POST /v1/apple/native/capture`: an RS256 identity token over the attempt's nonce hash, a name, a code); then N small malformed callbacks (an empty state: refused before any store read) and N hostile
     ones (4,000 distinct fields in 14,667 bytes, refused by the field cap), both answered 400, to show that a
     callback's cost does not grow with what an attacker packs into it.
The phases run in ROUNDS rounds (default 3), each of every phase in turn, so that a load that comes and goes on the
machine meets every phase alike. Each phase is driven by the same client (`CONNECTIONS` keep-alive connections, one
thread each) and timed by serve's own CPU (utime + stime from /proc/<pid>/stat) before and after the phase:
client-side work (signing the tokens, made before the phase starts) is not counted. Prints µs of serve CPU per
operation over all rounds, and the ratios the issue asks for (with the range of the callback's over the rounds).

    python3 Benchmarks/signin/callback-vs-capture.py BIN [N] [CONNECTIONS] [ROUNDS]

Diagnostics (each changes what it measures: compare its figures with each other, not with a plain run's):
  PERF_PHASE=verified,native  records serve's stacks in those phases into perf-<phase>.data (`perf report -i …`);
      PERF_FREQ (default 999) above about 1,000 Hz inflates a profiled phase's CPU unevenly (up to 1.7× at 4,999 Hz)
  PERF_STAT=1  counts serve's fdatasync and pwrite calls and context switches per operation in every phase (a WAL
      frame is two pwrite calls: its header and its page)
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import secrets
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from pathlib import Path

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa

BIN = sys.argv[1]
N = int(sys.argv[2]) if len(sys.argv) > 2 else 2000
CONNECTIONS = int(sys.argv[3]) if len(sys.argv) > 3 else 16
ROUNDS = int(sys.argv[4]) if len(sys.argv) > 4 else 3
CLIENT_ID = "invalid.example.bench.web"
BUNDLE_ID = "invalid.example.bench.app"
HZ = os.sysconf("SC_CLK_TCK")


def base36(number: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    text = ""
    while True:
        number, digit = divmod(number, 36)
        text = digits[digit] + text
        if number == 0:
            return text


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
KID = "bench-kid"


def jwks() -> dict:
    numbers = KEY.public_key().public_numbers()
    n = numbers.n.to_bytes((numbers.n.bit_length() + 7) // 8, "big")
    return {"keys": [{"kty": "RSA", "kid": KID, "use": "sig", "alg": "RS256", "n": b64url(n), "e": "AQAB"}]}


def sign(claims: dict) -> str:
    signing_input = b64url(json.dumps({"alg": "RS256", "kid": KID}).encode()) + "." + b64url(json.dumps(claims).encode())
    return signing_input + "." + b64url(KEY.sign(signing_input.encode(), padding.PKCS1v15(), hashes.SHA256()))


def code_hash(code: str) -> str:
    """OpenID Connect's `c_hash` of an authorization code (the left half of its SHA-256)."""
    digest = hashes.Hash(hashes.SHA256())
    digest.update(code.encode())
    return b64url(digest.finalize()[:16])


def claims(sub: str, audience: str, email: str, nonce: str | None = None) -> dict:
    now = int(time.time())
    result = {"iss": "https://appleid.apple.com", "aud": audience, "exp": now + 3600, "iat": now, "sub": sub,
              "email": email, "email_verified": "true"}
    if nonce:
        result["nonce"] = nonce
    return result


def apple_exchange(root: Path, env: dict) -> tuple[str, ...]:
    """APPLE_EXCHANGE=1: every sign-in's code is queued for its exchange at Apple (a .p8 made here, kept as a file;
    the token URL APPLE_TOKEN_URL, else a closed loopback port, so the exchanges only retry in the background): the
    options to add."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    p8 = root / "AuthKey_BENCHKEY01.p8"
    p8.write_bytes(ec.generate_private_key(ec.SECP256R1()).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    p8.chmod(0o600)
    subprocess.run([BIN, "apple", "key", "import", "--p8", str(p8), "--key-id", "BENCHKEY01", "--team-id",
                    "BENCHTEAM1", "--custody", "file"], env=env, check=True, capture_output=True)
    token_url = os.environ.get("APPLE_TOKEN_URL", f"http://127.0.0.1:{free_port()}/auth/token")
    return ("--apple-team-id", "BENCHTEAM1", "--apple-token-url", token_url)


def capture_only(root: Path, env: dict):
    """CAPTURE_ONLY=1: the sign-in node runs on a public-only keyring (`keys export-public`), as a capture-only
    node at the edge does: it captures and queues codes but never claims an exchange (a node that can open escrows
    does that), so its CPU is the answer path alone. The Apple key's record follows the keyring."""
    public = root / "keyring.public"
    subprocess.run([BIN, "keys", "export-public", "--out", str(public)], env=env, check=True, capture_output=True)
    record = Path(env["PROFILE_ESCROW_KEYRING"] + ".apple-key")
    if record.exists():
        (root / "keyring.public.apple-key").write_bytes(record.read_bytes())
    env["PROFILE_ESCROW_KEYRING"] = str(public)


class Serve:
    def __init__(self, root: Path, *args: str, port: int | None = None):
        self.root = root
        self.port = port or free_port()
        self.env = {**os.environ, "PROFILE_ESCROW_DATABASE": str(root / "escrow.sqlite"),
                    "PROFILE_ESCROW_KEYRING": str(root / "keyring"), "PROFILE_ESCROW_TOKENS": str(root / "tokens.sqlite")}
        subprocess.run([BIN, "keys", "init"], env=self.env, check=True, capture_output=True)
        self.token = subprocess.run([BIN, "tokens", "add", "bench", "--scope", "capture", "signin"], env=self.env,
                                    check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1]
        if os.environ.get("APPLE_EXCHANGE") == "1" and "--apple-audience" in args:
            args = (*args, *apple_exchange(root, self.env))
        if os.environ.get("CAPTURE_ONLY") == "1" and "--apple-audience" in args:
            capture_only(root, self.env)
        self.log = open(root / "serve.log", "wb")
        self.process = subprocess.Popen(
            [BIN, "serve", "--host", "127.0.0.1", "--port", str(self.port), "--no-worker", "--rate-limit", "1000000",
             "--rate-burst", "1000000", "--anonymous-rate-limit", "1000000",
             "--anonymous-overall-rate-limit", "1000000", "--log-level", "warning", *args],
            env=self.env, stdout=self.log, stderr=subprocess.STDOUT)
        for _ in range(300):
            try:
                connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=1)
                connection.request("GET", "/healthz")
                if connection.getresponse().status == 200:
                    return
            except OSError:
                time.sleep(0.1)
        raise SystemExit(f"serve did not start: {(root / 'serve.log').read_text()[-2000:]}")

    def ticks(self) -> int:
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])

    def stop(self):
        self.process.terminate()
        self.process.wait(timeout=30)


def run(serve: Serve, requests: list, expect: set[int], phase: str = "") -> tuple[float, list]:
    """Sends every (method, path, headers, body) over CONNECTIONS keep-alive connections; serve's CPU seconds and
    the answers (status, headers, body), in the order of `requests`."""
    answers: list = [None] * len(requests)
    failures: list[str] = []

    def worker(indices):
        connection = http.client.HTTPConnection("127.0.0.1", serve.port, timeout=60)
        for i in indices:
            method, path, headers, body = requests[i]
            connection.request(method, path, body=body, headers=headers)
            response = connection.getresponse()
            data = response.read()
            answers[i] = (response.status, response.headers, data)
            if response.status not in expect:
                failures.append(f"{method} {path}: {response.status} {data[:200]!r}")
        connection.close()

    threads = [threading.Thread(target=worker, args=(range(k, len(requests), CONNECTIONS),)) for k in range(CONNECTIONS)]
    perf = None
    if phase and phase in os.environ.get("PERF_PHASE", "").split(","):
        perf = subprocess.Popen(["perf", "record", "-e", "cpu-clock", "-F", os.environ.get("PERF_FREQ", "999"), "-g", "-p", str(serve.process.pid), "-o",
                                 f"perf-{phase}.data"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(1)
    stat = None
    if phase and os.environ.get("PERF_STAT") == "1":
        events = "syscalls:sys_enter_fdatasync,syscalls:sys_enter_pwrite64,context-switches"
        stat = subprocess.Popen(["perf", "stat", "-x", ",", "-e", events, "-p", str(serve.process.pid)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        time.sleep(0.5)
    before = serve.ticks()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    seconds = (serve.ticks() - before) / HZ
    if stat:
        stat.send_signal(2)
        _, report = stat.communicate(timeout=60)
        counts = [int(line.split(",")[0]) for line in report.splitlines() if line[:1].isdigit()]
        print(f"  {phase}: per operation, fdatasync {counts[0] / len(requests):.2f}, pwrite "
              f"{counts[1] / len(requests):.2f}, context switches {counts[2] / len(requests):.2f}", flush=True)
    if perf:
        perf.send_signal(2)
        perf.wait(timeout=60)
    if failures:
        raise SystemExit(f"{len(failures)} unexpected answers, first: {failures[0]}")
    return seconds, answers


def profile(i: int, prefix: str) -> tuple[str, str, dict]:
    sub = f"000000.{prefix}{i:012d}.0001"
    email = f"{prefix}{i}@example.invalid"
    return sub, email, {"name": {"firstName": "Testy", "lastName": f"Bench{i}"}, "email": email}


def main():
    root = Path(tempfile.mkdtemp(prefix="pe-signin-bench-"))
    (root / "a").mkdir()
    (root / "b").mkdir()
    (root / "b" / "jwks.json").write_text(json.dumps(jwks()))
    phases = ["capture", "verified capture", "start", "callback", "redeem", "app attempt", "native capture",
              "small refused", "4,000 fields"]
    results = {name: [] for name in phases}

    a = Serve(root / "a")
    # The callback URL names serve's own port: chosen first.
    port_b = free_port()
    callback = f"http://127.0.0.1:{port_b}/v1/apple/signin/callback"
    b = Serve(root / "b", "--apple-audience", f"{BUNDLE_ID},{CLIENT_ID}", "--apple-jwks", str(root / "b" / "jwks.json"),
              "--signin-client-id", CLIENT_ID, "--signin-callback-url", callback,
              "--signin-return", "app=http://127.0.0.1:9/signed-in", port=port_b)
    try:
        # Rounds, each of every phase in turn: a load that comes and goes on the machine meets every phase alike.
        for r in range(ROUNDS):
            plain_headers = {"Content-Type": "application/json", "Authorization": f"Bearer {a.token}"}
            requests = []
            for i in range(N):
                sub, email, user = profile(i, f"plain{r}x")
                body = {"userIdentifier": sub, "fullName": {"givenName": "Testy", "familyName": f"Bench{i}"},
                        "email": email}
                requests.append(("POST", "/v1/escrows", plain_headers, json.dumps(body)))
            results["capture"].append(run(a, requests, {201}, "capture")[0])

            json_headers = {"Content-Type": "application/json", "Authorization": f"Bearer {b.token}"}
            # Verified capture: the same POST /v1/escrows with an RS256 identity token, as the native app sends it.
            requests = []
            for i in range(N):
                sub, email, _ = profile(i, f"verified{r}x")
                body = {"userIdentifier": sub, "fullName": {"givenName": "Testy", "familyName": f"Bench{i}"},
                        "email": email, "identityToken": sign(claims(sub, BUNDLE_ID, email))}
                requests.append(("POST", "/v1/escrows", json_headers, json.dumps(body)))
            results["verified capture"].append(run(b, requests, {201}, "verified")[0])

            seconds, answers = run(b, [("GET", "/v1/apple/signin", {}, None)] * N, {302}, "start")
            results["start"].append(seconds)
            forms = []
            for i, (_, headers, _) in enumerate(answers):
                query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(headers["Location"]).query))
                cookie = headers["Set-Cookie"].split(";")[0]
                sub, email, user = profile(i, f"signin{r}x")
                form = urllib.parse.urlencode({
                    "state": query["state"], "code": "c" + secrets.token_hex(16),
                    "id_token": sign(claims(sub, CLIENT_ID, email, query["nonce"])), "user": json.dumps(user)})
                forms.append(("POST", "/v1/apple/signin/callback",
                              {"Content-Type": "application/x-www-form-urlencoded", "Cookie": cookie}, form))
            seconds, answers = run(b, forms, {303}, "callback")
            results["callback"].append(seconds)
            tickets = []
            for status, headers, _ in answers:
                query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(headers["Location"]).query))
                if "ticket" not in query:
                    raise SystemExit(f"a callback did not complete: {headers['Location'][:80]}")
                tickets.append(query["ticket"])
            results["redeem"].append(run(b, [("POST", "/v1/apple/signin/tickets/redeem", json_headers,
                                              json.dumps({"ticket": t})) for t in tickets], {200})[0])
            # An app's sign-in: the attempt, then the credential as ASAuthorizationAppleIDCredential gives it.
            app_headers = {"Content-Type": "application/json"}
            seconds, answers = run(b, [("POST", "/v1/apple/attempts", app_headers, "{}")] * N, {201}, "attempt")
            results["app attempt"].append(seconds)
            credentials = []
            for i, (_, _, data) in enumerate(answers):
                attempt = json.loads(data)
                sub, email, _ = profile(i, f"native{r}x")
                code = "c" + secrets.token_hex(16)
                token_claims = {**claims(sub, BUNDLE_ID, email, attempt["nonceSHA256"]), "c_hash": code_hash(code)}
                body = {"attempt": attempt["attempt"], "identityToken": sign(token_claims), "authorizationCode": code,
                        "fullName": {"givenName": "Testy", "familyName": f"Bench{i}"}, "email": email}
                credentials.append(("POST", "/v1/apple/native/capture", app_headers, json.dumps(body)))
            results["native capture"].append(run(b, credentials, {201}, "native")[0])
            form_headers = {"Content-Type": "application/x-www-form-urlencoded"}
            small = "state=&code=c0"
            hostile = "&".join(base36(i) for i in range(4000))  # 4,000 distinct names, no value: 14,667 bytes
            results["small refused"].append(
                run(b, [("POST", "/v1/apple/signin/callback", form_headers, small)] * N, {400})[0])
            results["4,000 fields"].append(
                run(b, [("POST", "/v1/apple/signin/callback", form_headers, hostile)] * N, {400}, "hostile")[0])
    finally:
        a.stop()
        b.stop()

    total = {name: sum(values) for name, values in results.items()}
    print(f"{N} operations a phase, {ROUNDS} rounds, {CONNECTIONS} connections; serve's CPU (user + system) per "
          "operation, all rounds:")
    for name in phases:
        print(f"  {name:18s} {total[name] / (N * ROUNDS) * 1e6:8.0f} us")
    rounds = sorted(c / p for c, p in zip(results["callback"], results["capture"]))
    print(f"callback / capture:          {total['callback'] / total['capture']:.2f}  (goal <= 1.3; rounds "
          f"{rounds[0]:.2f}–{rounds[-1]:.2f})")
    print(f"callback / verified capture: {total['callback'] / total['verified capture']:.2f}")
    natives = sorted(n / p for n, p in zip(results["native capture"], results["capture"]))
    print(f"native capture / capture:    {total['native capture'] / total['capture']:.2f}  (goal <= 1.3; rounds "
          f"{natives[0]:.2f}–{natives[-1]:.2f})")
    print(f"native / verified capture:   {total['native capture'] / total['verified capture']:.2f}")
    print(f"start / capture:             {total['start'] / total['capture']:.2f}")
    print(f"redeem / capture:            {total['redeem'] / total['capture']:.2f}")
    print(f"4,000-field callback / small refused one: {total['4,000 fields'] / total['small refused']:.2f}")


if __name__ == "__main__":
    main()
