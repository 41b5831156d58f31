#!/usr/bin/env bash
# How fast one node redeems authorization codes at an Apple answering after LATENCY seconds (a stand-in on loopback),
# beside one request at a time: see exchange-throughput.py.
#   Benchmarks/signin/exchange-throughput.sh [codes] [latency]     (BIN=<profile-escrow> skips the build)
set -euo pipefail
cd "$(dirname "$0")/../.."
if [ -z "${BIN:-}" ]; then
    swift build -c release --scratch-path .build-rel --product profile-escrow 2>&1 | tail -n 1
    BIN="$(swift build -c release --scratch-path .build-rel --show-bin-path)/profile-escrow"
fi
venv=.venv-browser
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/python" -c 'import cryptography' 2>/dev/null || "$venv/bin/pip" install -q cryptography
exec "$venv/bin/python" Benchmarks/signin/exchange-throughput.py "$BIN" "${1:-400}" "${2:-0.2}"
