#!/usr/bin/env bash
# What the Apple token exchange adds to the sign-in's answer path: two sign-in nodes of one build, the exchange off
# and on (every code queued: --apple-team-id, a file-kept key, the token URL a closed loopback port, so the exchanges
# retry in the background), their rounds interleaved, and serve's CPU per web callback and per native capture
# compared, a verified capture on each as the control (see exchange-vs-none.py). CAPTURE_ONLY=1 runs the "on" node on a
# public-only keyring, as a capture-only node at the edge: it queues every code and never claims one, so its figure
# is the answer path alone, without the exchanger's work in the background (which a node that can open escrows does).
#   Benchmarks/signin/exchange-vs-none.sh [operations] [connections] [rounds]     (BIN=<profile-escrow> skips the build)
set -euo pipefail
cd "$(dirname "$0")/../.."
. Benchmarks/lib/signin-python.sh
exec "$PYTHON" Benchmarks/signin/exchange-vs-none.py "$BIN" "${1:-3000}" "${2:-16}" "${3:-4}"
