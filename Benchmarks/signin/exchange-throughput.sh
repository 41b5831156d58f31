#!/usr/bin/env bash
# How fast one node redeems authorization codes at an Apple answering after LATENCY seconds (a stand-in on loopback),
# beside one request at a time: see exchange-throughput.py.
#   Benchmarks/signin/exchange-throughput.sh [codes] [latency]     (BIN=<profile-escrow> skips the build)
set -euo pipefail
cd "$(dirname "$0")/../.."
. Benchmarks/lib/signin-python.sh
exec "$PYTHON" Benchmarks/signin/exchange-throughput.py "$BIN" "${1:-400}" "${2:-0.2}"
