#!/usr/bin/env bash
# Replays, against a built binary, the ways a robustness review took the service down or stalled it: malformed
# stored rows, an unauthenticated /metrics under load over a large store, slow and idle clients, hostile keyring
# values, a crash's output, and the smaller findings. Each check prints `ok` or `FAIL` with what it saw; the exit
# status is the number of failures. The test suite covers the same ground in debug builds; this script is for the
# build you ship (release by default).
#
# Usage: scripts/robustness-check.sh [escrows for the /metrics check, default 300000]
#   BIN=path/to/profile-escrow   (default .build-release/release/profile-escrow;
#                                 build it with: swift build -c release --scratch-path .build-release)
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=$(realpath "${BIN:-.build-release/release/profile-escrow}")
ESCROWS=${1:-300000}
[ -x "$BIN" ] || { echo "robustness-check: no binary at $BIN (set BIN, or build it first)" >&2; exit 2; }
for tool in sqlite3 curl wrk python3; do
    command -v "$tool" >/dev/null || { echo "robustness-check: needs $tool" >&2; exit 2; }
done

WORK=$(mktemp -d /tmp/profile-escrow-robustness.XXXXXX)
PIDS=()
cleanup() {
    for pid in "${PIDS[@]}"; do kill -9 "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; done
    rm -rf "$WORK"
}
trap cleanup EXIT
FAILURES=0
ok() { echo "ok    $*"; }
fail() {
    echo "FAIL  $*"
    FAILURES=$((FAILURES + 1))
}
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
crashed() { [ "$1" -ge 128 ]; }

# A fresh store with a keyring and `count` escrows of obviously fake users, in directory $1.
new_store() {
    local dir=$1 count=$2
    mkdir -p "$dir"
    export PROFILE_ESCROW_DATABASE=$dir/escrow.sqlite PROFILE_ESCROW_KEYRING=$dir/keyring
    "$BIN" keys init >/dev/null
    for n in $(seq 1 "$count"); do
        printf '{"userIdentifier":"000000.robust%020d.0001","email":"fake%d@example.invalid"}' "$n" "$n" |
            "$BIN" capture >/dev/null 2>&1
    done
}
state_count() { sqlite3 "$PROFILE_ESCROW_DATABASE" "SELECT COUNT(*) FROM escrow WHERE state = '$1'"; }

# A backend on loopback that answers 200 to every delivery.
BACKEND_PORT=$(free_port)
python3 - "$BACKEND_PORT" >/dev/null 2>&1 <<'PY' &
import http.server, sys
class Handler(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.send_response(200); self.send_header("Content-Length", "0"); self.end_headers()
    def log_message(self, *args): pass
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
PY
PIDS+=($!)
BACKEND=http://127.0.0.1:$BACKEND_PORT/register
export PROFILE_ESCROW_WEBHOOK_SECRET
PROFILE_ESCROW_WEBHOOK_SECRET=$("$BIN" webhook-secret)

wait_healthy() {
    for _ in $(seq 1 100); do
        curl -sf -o /dev/null "http://127.0.0.1:$1/healthz" && return 0
        sleep 0.1
    done
    return 1
}

echo "binary: $BIN ($("$BIN" --version))"

# 1 and 2. Malformed rows: a key_version outside 32 bits, an id of the wrong length. Each is quarantined alone
# (dead, ciphertext_invalid); every other escrow is delivered; nothing crashes or stalls.
new_store "$WORK/rows" 20
sqlite3 "$PROFILE_ESCROW_DATABASE" "
    UPDATE escrow SET key_version = -1 WHERE rowid = (SELECT rowid FROM escrow ORDER BY rowid LIMIT 1 OFFSET 0);
    UPDATE escrow SET key_version = 4294967297 WHERE rowid = (SELECT rowid FROM escrow ORDER BY rowid LIMIT 1 OFFSET 1);
    UPDATE escrow SET id = X'' WHERE rowid = (SELECT rowid FROM escrow ORDER BY rowid LIMIT 1 OFFSET 2);
    UPDATE escrow SET id = zeroblob(15) WHERE rowid = (SELECT rowid FROM escrow ORDER BY rowid LIMIT 1 OFFSET 3);"
cp "$PROFILE_ESCROW_DATABASE" "$WORK/rows/copy.sqlite"
"$BIN" status 000000.robust00000000000000000001.0001 >/dev/null 2>&1
status=$?
crashed $status && fail "1: status of a user whose row has key_version -1 exited $status" || ok "1: status exited $status"
"$BIN" keys rewrap >/dev/null 2>&1
status=$?
crashed $status && fail "1: keys rewrap over malformed rows exited $status" || ok "1: keys rewrap exited $status"
timeout 120 "$BIN" replay --once --backend "$BACKEND" >"$WORK/rows/replay.out" 2>&1
status=$?
dead=$(sqlite3 "$PROFILE_ESCROW_DATABASE" "SELECT COUNT(*) FROM escrow WHERE state = 'dead' AND dead_code = 'ciphertext_invalid'")
left=$(sqlite3 "$PROFILE_ESCROW_DATABASE" "SELECT COUNT(*) FROM escrow WHERE state <> 'dead'")
if [ $status -eq 0 ] && [ "$dead" -eq 4 ] && [ "$left" -eq 0 ]; then
    ok "1, 2: replay --once delivered the 16 intact escrows and quarantined the 4 malformed rows (exit 0)"
else
    fail "1, 2: replay --once exited $status, $dead quarantined, $left not delivered: $(tail -2 "$WORK/rows/replay.out")"
fi
# The same store, before the replay, under serve with its worker.
export PROFILE_ESCROW_DATABASE=$WORK/rows/copy.sqlite
PORT=$(free_port)
"$BIN" serve --port "$PORT" --backend "$BACKEND" --poll-interval 100ms >"$WORK/rows/serve.log" 2>&1 &
SERVE=$!
PIDS+=($SERVE)
sleep 5
left=$(sqlite3 "$PROFILE_ESCROW_DATABASE" "SELECT COUNT(*) FROM escrow WHERE state <> 'dead'")
if kill -0 $SERVE 2>/dev/null && curl -sf -o /dev/null "http://127.0.0.1:$PORT/healthz" && [ "$left" -eq 0 ]; then
    ok "1, 2: serve with its worker stayed up over the malformed rows and delivered the others"
else
    fail "1, 2: serve over malformed rows: alive=$(kill -0 $SERVE 2>/dev/null && echo yes || echo no), $left not delivered"
fi
kill $SERVE 2>/dev/null
wait $SERVE 2>/dev/null
status=$?
[ $status -eq 0 ] && ok "1: serve exited 0 on SIGTERM" || fail "1: serve exited $status on SIGTERM"

# 4. /metrics over a large store, scraped by 16 clients without a token: captures and /healthz stay fast.
new_store "$WORK/metrics" 1
columns=$(sqlite3 "$PROFILE_ESCROW_DATABASE" "SELECT group_concat(name, ', ') FROM pragma_table_info('escrow')")
copied=$(echo "$columns" | sed -e 's/^id, blind_index/randomblob(16), randomblob(32)/')
sqlite3 "$PROFILE_ESCROW_DATABASE" "
    WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < $ESCROWS - 1)
    INSERT INTO escrow ($columns) SELECT $copied FROM escrow, n;"
echo "      (a store of $(sqlite3 "$PROFILE_ESCROW_DATABASE" 'SELECT COUNT(*) FROM escrow') escrows)"
TOKEN=$("$BIN" tokens add robustness.check --scope capture 2>/dev/null | tail -1)
PORT=$(free_port)
"$BIN" serve --port "$PORT" --no-worker --log-level warning >"$WORK/metrics/serve.log" 2>&1 &
SERVE=$!
PIDS+=($SERVE)
wait_healthy "$PORT" || fail "4: serve did not start"
# p50 and max of 100 captures and of 100 /healthz, in ms.
timings() {
    local label=$1 n
    : >"$WORK/metrics/$label.captures"
    : >"$WORK/metrics/$label.health"
    for n in $(seq 1 100); do
        curl -s -o /dev/null -w '%{time_total}\n' -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' \
            -d "{\"userIdentifier\":\"000000.robust$label$(printf %015d "$n").0002\",\"email\":\"m$n@example.invalid\"}" \
            "http://127.0.0.1:$PORT/v1/escrows" >>"$WORK/metrics/$label.captures"
        curl -s -o /dev/null -w '%{time_total}\n' "http://127.0.0.1:$PORT/healthz" >>"$WORK/metrics/$label.health"
    done
}
summary() { sort -n "$1" | awk '{ a[NR] = $1 * 1000 } END { printf "p50 %.1f ms, max %.1f ms", a[int(NR / 2)], a[NR] }'; }
worst() { sort -n "$1" | tail -1 | awk '{ print int($1 * 1000) }'; }
timings quiet
wrk -t2 -c16 -d15s "http://127.0.0.1:$PORT/metrics" >"$WORK/metrics/wrk.out" 2>&1 &
WRK=$!
PIDS+=($WRK)
sleep 2
timings scraped
wait $WRK
scrapes=$(awk '/requests in/ { print $1 }' "$WORK/metrics/wrk.out")
limited=$(awk '/Non-2xx/ { print $NF }' "$WORK/metrics/wrk.out")
echo "      /metrics: $scrapes scrapes in 15 s by 16 clients without a token, ${limited:-0} of them refused (429, rate limit)"
echo "      captures without scrapes: $(summary "$WORK/metrics/quiet.captures"); with 16 clients on /metrics: $(summary "$WORK/metrics/scraped.captures")"
echo "      /healthz without scrapes: $(summary "$WORK/metrics/quiet.health"); with 16 clients on /metrics: $(summary "$WORK/metrics/scraped.health")"
if [ "$(worst "$WORK/metrics/scraped.captures")" -lt 1000 ] && [ "$(worst "$WORK/metrics/scraped.health")" -lt 1000 ]; then
    ok "4: no capture or /healthz took a second while 16 clients scraped /metrics"
else
    fail "4: a capture or /healthz took over a second while /metrics was scraped"
fi
kill $SERVE 2>/dev/null
wait $SERVE 2>/dev/null

# 5. Slow and idle clients: a body dribbled one byte every 2 s, and 200 connections that send nothing, are closed by
# the server (body deadline 20 s, head deadline 10 s), not held open.
new_store "$WORK/slow" 0
PORT=$(free_port)
"$BIN" serve --port "$PORT" --no-worker >"$WORK/slow/serve.log" 2>&1 &
SERVE=$!
PIDS+=($SERVE)
wait_healthy "$PORT" || fail "5: serve did not start"
if python3 - "$PORT" <<'PY'; then
import socket, sys, time
port = int(sys.argv[1])
idle = [socket.create_connection(("127.0.0.1", port)) for _ in range(200)]
slow = socket.create_connection(("127.0.0.1", port))
slow.sendall(b"POST /v1/apple/notifications HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n")
start = time.time()
closed = None
while time.time() - start < 40:
    try:
        slow.sendall(b" ")
        slow.settimeout(2)
        if slow.recv(4096) == b"":
            closed = time.time() - start
            break
    except socket.timeout:
        continue
    except OSError:
        closed = time.time() - start
        break
still_open = 0
for s in idle:
    s.settimeout(0.5)
    try:
        if s.recv(1) != b"":
            still_open += 1
    except socket.timeout:
        still_open += 1
    except OSError:
        pass
print(f"      dribbled body closed after {closed and round(closed, 1)} s; idle connections still open: {still_open} of 200")
sys.exit(0 if closed is not None and closed < 30 and still_open == 0 else 1)
PY
    ok "5: a dribbled body and 200 idle connections were closed by the server"
else
    fail "5: slow or idle clients held their connections"
fi
curl -sf -o /dev/null "http://127.0.0.1:$PORT/healthz" && ok "5: serve answers after the slow clients" || fail "5: serve stopped answering"

# 9. The smaller ones: Transfer-Encoding xchunked (on the route that needs no token) is a 400 with a problem+json
# body.
answer=$(python3 - "$PORT" <<'PY'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(b"POST /v1/apple/notifications HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
          b"Transfer-Encoding: xchunked\r\n\r\n{}")
s.settimeout(15)
data = b""
try:
    while True:
        chunk = s.recv(4096)
        if not chunk:
            break
        data += chunk
except OSError:
    pass
head = data.split(b"\r\n\r\n")[0].decode("latin-1").lower()
status = head.split("\r\n")[0][9:12]
kind = [line.split(":", 1)[1].strip() for line in head.split("\r\n") if line.startswith("content-type:")]
print(status, kind[0] if kind else "-")
PY
)
case "$answer" in
400\ application/problem+json*) ok "9: Transfer-Encoding xchunked answers $answer" ;;
*) fail "9: Transfer-Encoding xchunked answers $answer" ;;
esac

# 7. A crash prints one fixed line, no registers or memory, and exits 128 + the signal.
kill -SEGV $SERVE
wait $SERVE 2>/dev/null
status=$?
last=$(tail -1 "$WORK/slow/serve.log")
if [ $status -eq 139 ] && ! grep -qiE 'registers|rax|backtrace|0x[0-9a-f]{8}' "$WORK/slow/serve.log"; then
    ok "7: SIGSEGV: exit 139, last line: $last"
else
    fail "7: SIGSEGV: exit $status; the log shows memory or registers: $(tail -3 "$WORK/slow/serve.log")"
fi

# 6. Hostile keyring values: the highest version, then a rotation; a created-at at Int64.max.
new_store "$WORK/keys" 0
sed -i -e 's/^active 1$/active 4294967295/' -e 's/^key 1 /key 4294967295 /' "$PROFILE_ESCROW_KEYRING"
"$BIN" keys rotate >"$WORK/keys/rotate.out" 2>&1
status=$?
if ! crashed $status && [ $status -ne 0 ]; then
    ok "6: keys rotate past version 4294967295 exits $status: $(tail -1 "$WORK/keys/rotate.out")"
else
    fail "6: keys rotate past version 4294967295 exited $status"
fi
new_store "$WORK/keys2" 0
sed -i -e 's/^key 1 [0-9]* /key 1 9223372036854775807 /' "$PROFILE_ESCROW_KEYRING"
for command in "keys export-public --out $WORK/keys2/public" "keys rotate" "keys show"; do
    # shellcheck disable=SC2086
    "$BIN" $command >"$WORK/keys2/out" 2>&1
    status=$?
    crashed $status && fail "6: $command with created-at 9223372036854775807 exited $status" ||
        ok "6: $command with created-at 9223372036854775807 exits $status: $(tail -1 "$WORK/keys2/out")"
done

# 9. keys retire of an unknown version exits 3 (not found).
new_store "$WORK/retire" 0
"$BIN" keys retire 99 >/dev/null 2>&1
status=$?
[ $status -eq 3 ] && ok "9: keys retire 99 exits 3" || fail "9: keys retire 99 exits $status"

# 9. Owner-only files whatever the umask.
(
    umask 000
    new_store "$WORK/modes" 2
)
modes=$(stat -c '%a %n' "$WORK/modes"/escrow.sqlite* | awk '{ print $1 }' | sort -u | tr '\n' ' ')
[ "$modes" = "600 " ] && ok "9: under umask 000 the store's files are 0600" || fail "9: store file modes under umask 000: $modes"

# 9. A keyring path that is a FIFO fails at once rather than hang.
mkfifo "$WORK/fifo"
timeout 10 "$BIN" keys show --keyring "$WORK/fifo" >"$WORK/fifo.out" 2>&1
status=$?
if [ $status -ne 124 ] && ! crashed $status && [ $status -ne 0 ]; then
    ok "9: a FIFO keyring is refused (exit $status): $(tail -1 "$WORK/fifo.out")"
else
    fail "9: a FIFO keyring: exit $status"
fi

echo "3 (attempts burnt without the key) and 8 (notifications by event_time, emailForwarding) need a retired key and"
echo "signed Apple notifications: ReplayWorkerTests, ReplayCLITests and AppleNotificationTests cover them."
echo "$FAILURES failed"
exit "$FAILURES"
