#!/usr/bin/env bash
# Runs `serve` and `replay --metrics-port` on a scratch store, makes some traffic, and checks both /metrics
# endpoints with promtool (Debian: apt-get install -y prometheus; only its promtool is used).
# Also checks that /readyz answers 503 while serve drains after SIGTERM (--drain-delay).
set -euo pipefail
cd "$(dirname "$0")/.."
command -v promtool >/dev/null || { echo "promtool missing: apt-get install -y prometheus" >&2; exit 2; }
swift build --product profile-escrow 2>&1 | tail -n 1
bin="$(swift build --show-bin-path)/profile-escrow"
work="$(mktemp -d)"
pids=()
cleanup() { for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT
export PROFILE_ESCROW_DATABASE="$work/escrow.sqlite" PROFILE_ESCROW_KEYRING="$work/keyring"
export PROFILE_ESCROW_WEBHOOK_SECRET="whsec_$(head -c 32 /dev/urandom | base64)"
export PROFILE_ESCROW_BACKEND_URL="http://127.0.0.1:9/unreachable"   # deliveries fail and retry: counted too
"$bin" keys init >/dev/null
token="$("$bin" tokens add checker --scope capture read confirm | tail -n 1)"
port=$((20000 + RANDOM % 20000))
metrics_port=$((port + 1))

PROFILE_ESCROW_PORT=$port PROFILE_ESCROW_DRAIN_DELAY=2s "$bin" serve 2>"$work/serve.log" &
serve_pid=$!
pids+=("$serve_pid")
"$bin" replay --metrics-port "$metrics_port" 2>"$work/replay.log" &
pids+=($!)
for _ in $(seq 50); do curl -fs "localhost:$port/healthz" >/dev/null && curl -fs "localhost:$metrics_port/metrics" >/dev/null && break; sleep 0.2; done

for n in 1 2 3; do
    curl -fs -X POST "localhost:$port/v1/escrows" -H "Authorization: Bearer $token" -H 'Content-Type: application/json' \
        -d "{\"userIdentifier\":\"000000.metrics$n.0001\",\"email\":\"someone$n@example.invalid\"}" >/dev/null
done
curl -fs -X POST "localhost:$port/v1/escrows/000000.metrics1.0001/confirm" -H "Authorization: Bearer $token" >/dev/null
curl -s "localhost:$port/v1/escrows/000000.nobody.0001" -H "Authorization: Bearer $token" >/dev/null
sleep 2

status=0
for endpoint in "localhost:$port/metrics" "localhost:$metrics_port/metrics"; do
    curl -fs "$endpoint" > "$work/metrics.txt"
    if promtool check metrics < "$work/metrics.txt"; then
        echo "ok: promtool check metrics $endpoint ($(grep -c '^# HELP' "$work/metrics.txt") families)"
    else
        echo "FAIL: promtool check metrics $endpoint" >&2
        status=1
    fi
done
grep -q '^http_server_requests_total{' <(curl -fs "localhost:$port/metrics") || { echo "FAIL: no http_server_requests_total" >&2; status=1; }

# Logs: one JSON object a line, and no token in them.
for log in "$work/serve.log" "$work/replay.log"; do
    python3 -c 'import json,sys; [json.loads(l) for l in open(sys.argv[1]) if l.strip()]' "$log" \
        || { echo "FAIL: $log is not JSON lines" >&2; status=1; }
    if grep -q "$token" "$log"; then echo "FAIL: the token is in $log" >&2; status=1; fi
done
grep -q '"http.token":"checker"' "$work/serve.log" || { echo "FAIL: no token name in access lines" >&2; status=1; }

# Draining: after SIGTERM, /readyz answers 503 for the drain delay.
kill -TERM "$serve_pid"
sleep 0.5
code="$(curl -s -o /dev/null -w '%{http_code}' "localhost:$port/readyz" || true)"
if [ "$code" = 503 ]; then echo "ok: /readyz 503 while draining"; else echo "FAIL: /readyz answered $code while draining" >&2; status=1; fi
wait "$serve_pid" || true
exit $status
