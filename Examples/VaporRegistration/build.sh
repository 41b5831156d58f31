#!/usr/bin/env bash
# Builds the Vapor example (its own package, depending on ProfileEscrow by path). Not part of scripts/test.sh:
# Vapor takes minutes to build. With --run, also starts it on a scratch store and registers a fake user.
set -euo pipefail
cd "$(dirname "$0")"
swift build --scratch-path .build 2>&1 | tail -n 3
[ "${1:-}" = --run ] || exit 0
bin="$(swift build --scratch-path .build --show-bin-path)/VaporRegistration"
# The build's warnings must not end up in the path: both commands' standard error is discarded.
(cd ../.. && swift build --product profile-escrow >/dev/null 2>&1)
cli="$(cd ../.. && swift build --show-bin-path 2>/dev/null)/profile-escrow"
work="$(mktemp -d)"
# Only the example's own process: `kill 0` would signal this script's whole process group.
trap 'if [ -n "${pid:-}" ]; then kill "$pid" 2>/dev/null || true; fi; rm -rf "$work"' EXIT
"$cli" keys init --keyring "$work/keyring" >/dev/null
port=$((20000 + RANDOM % 20000))
ESCROW_DIRECTORY="$work" "$bin" serve --port "$port" >"$work/log" 2>&1 &
pid=$!
for _ in $(seq 50); do curl -s -o /dev/null "localhost:$port/" && break; sleep 0.2; done
answer="$(curl -fsS -X POST "localhost:$port/register" -H 'Content-Type: application/json' \
    -d '{"userIdentifier":"000000.vapordemo.0001","fullName":{"givenName":"Testy"},"email":"testy@example.invalid"}')"
echo "register: $answer"
echo "$answer" | grep -q '"registered":"true"'
PROFILE_ESCROW_DATABASE="$work/escrow.sqlite" "$cli" purge-report --verify | grep -E "confirmed|audit chain"
