"""How fast one node redeems authorization codes at an Apple that takes its time, beside the rate sign-ins queue them.

Apple's token endpoint answers in a few hundred milliseconds. A node that redeemed one code at a time would manage a
handful a second, and a burst of sign-ins would outlive its five-minute codes. This runs one `serve` (exchange on,
its key in a file) against a stand-in token endpoint on loopback that answers every request after LATENCY seconds
with Apple's JSON (an id_token signed by the key the node's --apple-jwks names, for the code's user), queues N codes
with N native captures (each an app attempt and its credential), and times from the first capture until the stand-in
has answered every code once. Prints codes/s, the stand-in's most requests in flight at once, and the ratio to what
one request at a time would reach (1 / LATENCY).

    python3 Benchmarks/signin/exchange-throughput.py BIN [N] [LATENCY]
"""

from __future__ import annotations

import importlib.util
import json
import os
import secrets
import sys
import tempfile
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

BIN = sys.argv[1]
N = int(sys.argv[2]) if len(sys.argv) > 2 else 400
LATENCY = float(sys.argv[3]) if len(sys.argv) > 3 else 0.2

# The sign-in benchmark's pieces: its test RSA key and JWKS, tokens, profiles and the serve it starts.
sys.argv = [sys.argv[0], BIN, "1", "16", "1"]
spec = importlib.util.spec_from_file_location("signin_bench", Path(__file__).with_name("callback-vs-capture.py"))
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)


class StandInToken:
    """Apple's /auth/token as far as the exchanger needs it: the code's user in a signed id_token, after LATENCY."""

    def __init__(self):
        self.users: dict[str, str] = {}
        self.lock = threading.Lock()
        self.answered: set[str] = set()
        self.in_flight = 0
        self.most_in_flight = 0
        self.done = threading.Event()
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                form = dict(urllib.parse.parse_qsl(self.rfile.read(int(self.headers["Content-Length"])).decode()))
                with stand_in.lock:
                    stand_in.in_flight += 1
                    stand_in.most_in_flight = max(stand_in.most_in_flight, stand_in.in_flight)
                time.sleep(LATENCY)
                code, client = form.get("code", ""), form.get("client_id", "")
                claims = bench.claims(stand_in.users.get(code, "unknown"), client, "bench@example.invalid")
                body = json.dumps({"access_token": "a" + secrets.token_hex(8), "token_type": "Bearer",
                                   "expires_in": 3600, "refresh_token": "r" + secrets.token_hex(16),
                                   "id_token": bench.sign(claims)}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                with stand_in.lock:
                    stand_in.in_flight -= 1
                    stand_in.answered.add(code)
                    if len(stand_in.answered) >= N:
                        stand_in.done.set()

        # A listen backlog of 128 (socketserver's default is 5: a sixth connection at once waited a second for its
        # SYN to be sent again, and that was the stand-in's limit, not the exchanger's).
        ThreadingHTTPServer.request_queue_size = 128
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/auth/token"


def main():
    root = Path(tempfile.mkdtemp(prefix="pe-exchange-bench-"))
    (root / "jwks.json").write_text(json.dumps(bench.jwks()))
    apple = StandInToken()
    os.environ["APPLE_EXCHANGE"] = "1"
    os.environ["APPLE_TOKEN_URL"] = apple.url
    port = bench.free_port()
    serve = bench.Serve(root, "--apple-audience", f"{bench.BUNDLE_ID},{bench.CLIENT_ID}", "--apple-jwks",
                        str(root / "jwks.json"), "--signin-client-id", bench.CLIENT_ID, "--signin-callback-url",
                        f"http://127.0.0.1:{port}/v1/apple/signin/callback", "--signin-return",
                        "app=http://127.0.0.1:9/signed-in", port=port)
    try:
        headers = {"Content-Type": "application/json"}
        _, answers = bench.run(serve, [("POST", "/v1/apple/attempts", headers, "{}")] * N, {201})
        credentials = []
        for i, (_, _, data) in enumerate(answers):
            attempt = json.loads(data)
            sub, email, _ = bench.profile(i, "exchange")
            code = "c" + secrets.token_hex(16)
            apple.users[code] = sub
            token = bench.sign({**bench.claims(sub, bench.BUNDLE_ID, email, attempt["nonceSHA256"]),
                                "c_hash": bench.code_hash(code)})
            credentials.append(("POST", "/v1/apple/native/capture", headers, json.dumps(
                {"attempt": attempt["attempt"], "identityToken": token, "authorizationCode": code,
                 "fullName": {"givenName": "Testy", "familyName": f"Bench{i}"}, "email": email})))
        started = time.monotonic()
        bench.run(serve, credentials, {201})
        captured = time.monotonic() - started
        if not apple.done.wait(timeout=N * LATENCY + 60):
            raise SystemExit(f"only {len(apple.answered)} of {N} codes redeemed")
        took = time.monotonic() - started
    finally:
        serve.stop()
        apple.server.shutdown()
    print(f"{N} codes, Apple answering after {LATENCY * 1000:.0f} ms: captured in {captured:.1f} s "
          f"({N / captured:.0f} sign-ins/s), all redeemed after {took:.1f} s: {N / took:.1f} codes/s "
          f"(at most {apple.most_in_flight} at Apple at once)")
    print(f"codes/s / one at a time (1 / latency = {1 / LATENCY:.1f}/s): {N / took * LATENCY:.1f}")


if __name__ == "__main__":
    main()
