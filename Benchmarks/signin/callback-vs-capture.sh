#!/usr/bin/env bash
# Serve's CPU per web sign-in callback beside its CPU per `POST /v1/escrows`, whole processes, one run (see
# callback-vs-capture.py: plain and verified capture, start, callback, redeem; serve's own CPU from /proc).
#   Benchmarks/signin/callback-vs-capture.sh [operations] [connections] [rounds]     (BIN=<profile-escrow> skips the build)
set -euo pipefail
cd "$(dirname "$0")/../.."
if [ -z "${BIN:-}" ]; then
    swift build -c release --scratch-path .build-rel --product profile-escrow 2>&1 | tail -n 1
    BIN="$(swift build -c release --scratch-path .build-rel --show-bin-path)/profile-escrow"
fi
venv=.venv-browser
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/python" -c 'import cryptography' 2>/dev/null || "$venv/bin/pip" install -q cryptography
exec "$venv/bin/python" Benchmarks/signin/callback-vs-capture.py "$BIN" "${1:-2000}" "${2:-16}" "${3:-3}"
