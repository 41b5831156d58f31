#!/usr/bin/env python3
"""A registration endpoint that receives ProfileEscrow replays (docs/replay.md). Standard library only.

    PROFILE_ESCROW_WEBHOOK_SECRET=whsec_... PORT=8000 python3 receiver.py

PROFILE_ESCROW_WEBHOOK_SECRET holds one or more whsec_ secrets, space-separated (several during a
rotation). Answers 401 when the Standard Webhooks signature or timestamp does not check out, 200
after registering. It registers nobody: put your registration where the comment says.
"""
import base64
import binascii
import hashlib
import hmac
import http.server
import os
import sys
import time

TOLERANCE = 5 * 60  # seconds between webhook-timestamp and this machine's clock, either way
MAX_BODY = 64 * 1024  # a replay body is a few hundred bytes


def load_keys(text):
    """The HMAC keys of `whsec_<base64>` secrets, space-separated."""
    keys = []
    for secret in text.split():
        if not secret.startswith("whsec_"):
            sys.exit("PROFILE_ESCROW_WEBHOOK_SECRET: every secret must start with whsec_")
        try:
            key = base64.b64decode(secret[len("whsec_"):], validate=True)
        except binascii.Error:
            sys.exit("PROFILE_ESCROW_WEBHOOK_SECRET: not valid base64 after whsec_")
        if not 16 <= len(key) <= 64:
            sys.exit("PROFILE_ESCROW_WEBHOOK_SECRET: a secret must decode to 16 to 64 bytes")
        keys.append(key)
    if not keys:
        sys.exit("set PROFILE_ESCROW_WEBHOOK_SECRET to whsec_<base64> (several: space-separated)")
    return keys


KEYS = load_keys(os.environ.get("PROFILE_ESCROW_WEBHOOK_SECRET", ""))


def verified(headers, body):
    """Whether any `v1,` signature matches any key, over `<id>.<timestamp>.<body>`, and the timestamp is fresh."""
    msg_id = headers.get("webhook-id", "")
    timestamp = headers.get("webhook-timestamp", "")
    if not (timestamp.isascii() and timestamp.isdigit()) or abs(time.time() - int(timestamp)) > TOLERANCE:
        return False
    signed = f"{msg_id}.{timestamp}.".encode() + body
    given = [entry[3:].encode() for entry in headers.get("webhook-signature", "").split(" ") if entry.startswith("v1,")]
    for key in KEYS:
        expected = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest())
        # compare_digest: constant time. Every entry is checked, so the time does not depend on which matched.
        matches = [hmac.compare_digest(signature, expected) for signature in given]
        if any(matches):
            return True
    return False


class Receiver(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        try:
            length = int(self.headers.get("Content-Length", ""))
        except ValueError:
            return self.answer(411)
        if not 0 <= length <= MAX_BODY:
            return self.answer(413)
        body = self.rfile.read(length)  # the raw bytes: verify before parsing
        if not verified(self.headers, body):
            return self.answer(401)  # retried by ProfileEscrow: a secret mismatch loses nothing
        # Verified. Register the user from json.loads(body) here, idempotently by the
        # Idempotency-Key header (= escrowId): answer 200 when registered, 409 if the user already
        # exists, 503 to be asked again later; 400/410/422 only if it can never be registered
        # (ProfileEscrow then gives the profile up for good).
        self.answer(200)

    def answer(self, status):
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format, *args):  # no request details in logs
        pass


if __name__ == "__main__":
    port = int(os.environ.get("PORT", "8000"))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Receiver)
    print(f"listening on 127.0.0.1:{port}", flush=True)
    server.serve_forever()
