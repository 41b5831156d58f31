#!/usr/bin/env bash
# Starts each example receiver (receiver.py, receiver.js, receiver.go) on a free loopback port and
# checks it the way docs/replay.md describes: a correctly signed request answers 200; a request
# signed with another secret, a tampered body and a stale timestamp answer 401; during a rotation
# (two secrets on each side) a request carrying both signatures answers 200.
#
#     docs/examples/verify-receivers.sh          # needs python3; node and go are checked when present
#
# Signatures are computed here with python3's hmac, independently of the receivers. Exit status 1
# when any check fails; a receiver whose runtime is missing is reported as skipped.
set -euo pipefail
cd "$(dirname "$0")"

work=$(mktemp -d)
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    rm -rf "$work"
}
trap cleanup EXIT

new_secret() { printf 'whsec_%s\n' "$(head -c 32 /dev/urandom | base64)"; }
secret=$(new_secret)
other=$(new_secret)

# The request sender: signs like ProfileEscrow (WebhookSignature.swift) with python3's hmac,
# independently of the receivers.
cat >"$work/send.py" <<'PY'
import base64, hashlib, hmac, sys, time, urllib.error, urllib.request

def signature(secret, msg_id, timestamp, body):
    key = base64.b64decode(secret[len("whsec_"):])
    mac = hmac.new(key, f"{msg_id}.{timestamp}.".encode() + body, hashlib.sha256).digest()
    return "v1," + base64.b64encode(mac).decode()

if sys.argv[1] == "known-answer":   # the example of the Standard Webhooks specification
    print(signature("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330,
                    b'{"test": 2432232314}'))
    sys.exit()

port, secrets = sys.argv[1], sys.argv[2].split()
offset = int(sys.argv[3]) if len(sys.argv) > 3 else 0
tamper = len(sys.argv) > 4 and sys.argv[4] == "tamper"
escrow_id = "6b3541404d4933d6a8f5263099a0fa69"
body = (b'{"escrowId":"6b3541404d4933d6a8f5263099a0fa69","userIdentifier":"000000.test0000000000000000000000000000.0001",'
        b'"fullName":{"givenName":"Testy","familyName":"McTestface","middleName":null,"namePrefix":null,'
        b'"nameSuffix":null,"nickname":null},"email":"testy@privaterelay.appleid.com","isPrivateEmail":true,'
        b'"realUserStatus":"likelyReal","capturedAt":"2026-11-21T10:00:00Z","verified":false,"attempt":1}')
timestamp = int(time.time()) + offset
header = " ".join(signature(secret, escrow_id, timestamp, body) for secret in secrets)
if tamper:
    body = body.replace(b"Testy", b"Tasty")
request = urllib.request.Request(f"http://127.0.0.1:{port}/register", data=body, method="POST", headers={
    "Content-Type": "application/json", "Idempotency-Key": escrow_id, "webhook-id": escrow_id,
    "webhook-timestamp": str(timestamp), "webhook-signature": header, "User-Agent": "ProfileEscrow-replay/1"})
try:
    with urllib.request.urlopen(request, timeout=10) as response:
        print(response.status)
except urllib.error.HTTPError as error:
    print(error.code)
PY

# send PORT SECRETS [TIMESTAMP_OFFSET] [tamper]: POSTs a replay body signed with every secret of
# SECRETS (space-separated, one v1 entry each) and prints the status code.
send() { python3 "$work/send.py" "$@"; }

# The sender signs exactly as ProfileEscrow does (the same vector is in its own tests).
known=$(python3 "$work/send.py" known-answer)
if [ "$known" != "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=" ]; then
    echo "the test signer does not match the Standard Webhooks example: $known"; exit 1
fi

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

wait_for() {   # PORT PID: until the port accepts connections (at most about 10 s)
    for _ in $(seq 100); do
        if python3 -c "import socket,sys; socket.create_connection(('127.0.0.1', int(sys.argv[1])), 0.2)" "$1" 2>/dev/null; then
            return 0
        fi
        kill -0 "$2" 2>/dev/null || return 1
        sleep 0.1
    done
    return 1
}

failures=0
expect() {   # NAME WANT GOT
    if [ "$2" = "$3" ]; then echo "  ok   $1: $3"; else echo "  FAIL $1: want $2, got $3"; failures=$((failures + 1)); fi
}

# check NAME COMMAND...: runs one receiver with $secret, then again with both secrets (a rotation).
check() {
    local name=$1; shift
    echo "$name"
    local port pid
    port=$(free_port)
    PROFILE_ESCROW_WEBHOOK_SECRET="$secret" PORT=$port "$@" >"$work/$name.log" 2>&1 &
    pid=$!; pids+=("$pid")
    if ! wait_for "$port" "$pid"; then
        echo "  FAIL $name did not start:"; sed 's/^/    /' "$work/$name.log"; failures=$((failures + 1)); return
    fi
    expect "correctly signed" 200 "$(send "$port" "$secret")"
    expect "signed with another secret" 401 "$(send "$port" "$other")"
    expect "body changed after signing" 401 "$(send "$port" "$secret" 0 tamper)"
    expect "timestamp 10 minutes old" 401 "$(send "$port" "$secret" -600)"
    expect "timestamp 10 minutes ahead" 401 "$(send "$port" "$secret" 600)"
    expect "no signature" 401 "$(send "$port" "")"
    kill "$pid"; wait "$pid" 2>/dev/null || true

    # Rotation: the backend holds the new and the old secret; deliveries carry one signature each.
    port=$(free_port)
    PROFILE_ESCROW_WEBHOOK_SECRET="$other $secret" PORT=$port "$@" >"$work/$name-rotation.log" 2>&1 &
    pid=$!; pids+=("$pid")
    if ! wait_for "$port" "$pid"; then
        echo "  FAIL $name did not start with two secrets:"; sed 's/^/    /' "$work/$name-rotation.log"
        failures=$((failures + 1)); return
    fi
    expect "rotation: both signatures" 200 "$(send "$port" "$other $secret")"
    expect "rotation: old signature only" 200 "$(send "$port" "$secret")"
    expect "rotation: new signature only" 200 "$(send "$port" "$other")"
    expect "rotation: a third secret" 401 "$(send "$port" "$(new_secret)")"
    kill "$pid"; wait "$pid" 2>/dev/null || true
}

check python python3 receiver.py

if command -v node >/dev/null; then
    check node node receiver.js
else
    echo "node: skipped (node is not installed)"
fi

if command -v go >/dev/null; then
    if (cd "$work" && cp "$OLDPWD/receiver.go" . && go build -o receiver-go receiver.go) >"$work/go-build.log" 2>&1; then
        check go "$work/receiver-go"
    else
        echo "go"; echo "  FAIL go build:"; sed 's/^/    /' "$work/go-build.log"; failures=$((failures + 1))
    fi
else
    echo "go: skipped (go is not installed; Debian: apt-get install golang-go)"
fi

if [ "$failures" -ne 0 ]; then
    echo "$failures check(s) failed"
    exit 1
fi
echo "all receivers passed"
