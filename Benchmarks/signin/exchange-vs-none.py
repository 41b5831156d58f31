"""What Apple's code exchange adds to a sign-in's answer path: two sign-in nodes of one build side by side, one with
the exchange off and one with every code queued for its exchange (APPLE_EXCHANGE=1 as in callback-vs-capture.py:
--apple-team-id, a file-kept key, the token URL a closed loopback port), and serve's CPU per web callback and per
native capture compared, with a verified POST /v1/escrows (an identity token, no code) on each node as the control:
it queues nothing, so its ratio shows what the two nodes differ by without the exchange.

Each phase runs on the two nodes one right after the other (which goes first alternating), round after round, so
that a drift of the machine's speed, which on a VM can be 10–15% from one minute to the next, meets both alike: two
runs one after the other would put the drift into the ratio.

CAPTURE_ONLY=1 runs the "on" node on a public-only keyring, as a capture-only node at the edge: it queues every code
and never claims one, so its figure is the answer path alone.

    python3 Benchmarks/signin/exchange-vs-none.py BIN [operations] [connections] [rounds]
"""

from __future__ import annotations

import importlib.util
import json
import os
import secrets
import shutil
import statistics
import sys
import tempfile
import urllib.parse
from pathlib import Path

BIN = sys.argv[1]
N = int(sys.argv[2]) if len(sys.argv) > 2 else 3000
CONNECTIONS = sys.argv[3] if len(sys.argv) > 3 else "16"
ROUNDS = int(sys.argv[4]) if len(sys.argv) > 4 else 4

# The sign-in benchmark's serve, token signing and client.
sys.argv = [sys.argv[0], BIN, str(N), CONNECTIONS, "1"]
spec = importlib.util.spec_from_file_location("bench", Path(__file__).with_name("callback-vs-capture.py"))
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)

def node(root: Path, exchange: bool) -> bench.Serve:
    """A sign-in node; with `exchange`, APPLE_EXCHANGE=1 (and CAPTURE_ONLY as given) for its start alone."""
    root.mkdir()
    (root / "jwks.json").write_text(json.dumps(bench.jwks()))
    port = bench.free_port()
    saved = {name: os.environ.get(name) for name in ("APPLE_EXCHANGE", "CAPTURE_ONLY")}
    os.environ["APPLE_EXCHANGE"] = "1" if exchange else "0"
    if not exchange:
        os.environ["CAPTURE_ONLY"] = "0"
    try:
        return bench.Serve(root, "--apple-audience", f"{bench.BUNDLE_ID},{bench.CLIENT_ID}", "--apple-jwks",
                           str(root / "jwks.json"), "--signin-client-id", bench.CLIENT_ID, "--signin-callback-url",
                           f"http://127.0.0.1:{port}/v1/apple/signin/callback", "--signin-return",
                           "app=http://127.0.0.1:9/signed-in", port=port)
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def verified(serve: bench.Serve, tag: str) -> float:
    """Serve's CPU seconds for N verified captures (an identity token, no code)."""
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {serve.token}"}
    requests = []
    for i in range(N):
        sub, email, _ = bench.profile(i, f"verified{tag}x")
        body = {"userIdentifier": sub, "fullName": {"givenName": "Testy", "familyName": f"Bench{i}"}, "email": email,
                "identityToken": bench.sign(bench.claims(sub, bench.BUNDLE_ID, email))}
        requests.append(("POST", "/v1/escrows", headers, json.dumps(body)))
    return bench.run(serve, requests, {201})[0]


def verified_with_code(serve: bench.Serve, tag: str) -> float:
    """Serve's CPU seconds for N verified captures each with its authorization code (the token's c_hash binds it), as
    a backend relays a native sign-in."""
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {serve.token}"}
    requests = []
    for i in range(N):
        sub, email, _ = bench.profile(i, f"coded{tag}x")
        code = "c" + secrets.token_hex(16)
        token = bench.sign({**bench.claims(sub, bench.BUNDLE_ID, email), "c_hash": bench.code_hash(code)})
        body = {"userIdentifier": sub, "fullName": {"givenName": "Testy", "familyName": f"Bench{i}"}, "email": email,
                "identityToken": token, "authorizationCode": code}
        requests.append(("POST", "/v1/escrows", headers, json.dumps(body)))
    return bench.run(serve, requests, {201})[0]


def callback(serve: bench.Serve, tag: str) -> float:
    """Serve's CPU seconds for N web callbacks, each with its code (the starts not counted)."""
    _, answers = bench.run(serve, [("GET", "/v1/apple/signin", {}, None)] * N, {302})
    forms = []
    for i, (_, answer, _) in enumerate(answers):
        query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(answer["Location"]).query))
        sub, email, user = bench.profile(i, f"signin{tag}x")
        code = "c" + secrets.token_hex(16)
        form = urllib.parse.urlencode({
            "state": query["state"], "code": code,
            "id_token": bench.sign({**bench.claims(sub, bench.CLIENT_ID, email, query["nonce"]),
                                    "c_hash": bench.code_hash(code)}),
            "user": json.dumps(user)})
        forms.append(("POST", "/v1/apple/signin/callback", {"Content-Type": "application/x-www-form-urlencoded",
                                                            "Cookie": answer["Set-Cookie"].split(";")[0]}, form))
    seconds, answers = bench.run(serve, forms, {303})
    if any("ticket=" not in answer["Location"] for _, answer, _ in answers):
        raise SystemExit("a callback did not complete")
    return seconds


def native(serve: bench.Serve, tag: str) -> float:
    """Serve's CPU seconds for N native captures, each with its code (the app attempts not counted)."""
    app = {"Content-Type": "application/json"}
    _, answers = bench.run(serve, [("POST", "/v1/apple/attempts", app, "{}")] * N, {201})
    credentials = []
    for i, (_, _, data) in enumerate(answers):
        attempt = json.loads(data)
        sub, email, _ = bench.profile(i, f"native{tag}x")
        code = "c" + secrets.token_hex(16)
        claims = {**bench.claims(sub, bench.BUNDLE_ID, email, attempt["nonceSHA256"]), "c_hash": bench.code_hash(code)}
        body = {"attempt": attempt["attempt"], "identityToken": bench.sign(claims), "authorizationCode": code,
                "fullName": {"givenName": "Testy", "familyName": f"Bench{i}"}, "email": email}
        credentials.append(("POST", "/v1/apple/native/capture", app, json.dumps(body)))
    return bench.run(serve, credentials, {201})[0]


PHASES = {"verified capture": verified, "with its code": verified_with_code, "callback": callback,
          "native capture": native}


def main():
    root = Path(tempfile.mkdtemp(prefix="pe-exchange-bench-"))
    off = node(root / "off", exchange=False)
    on = node(root / "on", exchange=True)
    results = {name: {phase: [] for phase in PHASES} for name in ("off", "on")}
    try:
        for r in range(ROUNDS):
            for k, (phase, measure) in enumerate(PHASES.items()):
                # The two nodes' runs of a phase one right after the other, which goes first alternating.
                order = (("off", off), ("on", on)) if (r + k) % 2 == 0 else (("on", on), ("off", off))
                for name, serve in order:
                    results[name][phase].append(measure(serve, f"{name}{r}"))
    finally:
        off.stop()
        on.stop()
        shutil.rmtree(root, ignore_errors=True)

    print(f"{N} operations a phase, {ROUNDS} rounds interleaved, {CONNECTIONS} connections; serve's CPU (user + "
          "system) per operation, all rounds:")
    for phase in PHASES:
        cpu = {name: sum(results[name][phase]) / (N * ROUNDS) * 1e6 for name in results}
        rounds = sorted(a / b for a, b in zip(results["on"][phase], results["off"][phase]))
        print(f"  {phase:15s} exchange off {cpu['off']:6.0f} us, on {cpu['on']:6.0f} us: on / off "
              f"{cpu['on'] / cpu['off']:.3f} (rounds {rounds[0]:.2f}–{rounds[-1]:.2f}, median "
              f"{statistics.median(rounds):.2f})")


if __name__ == "__main__":
    main()
