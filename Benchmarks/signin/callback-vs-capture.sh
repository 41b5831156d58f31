#!/usr/bin/env bash
# Serve's CPU per web sign-in callback beside its CPU per `POST /v1/escrows`, whole processes, one run (see
# callback-vs-capture.py: plain and verified capture, start, callback, redeem; serve's own CPU from /proc).
#   Benchmarks/signin/callback-vs-capture.sh [operations] [connections] [rounds]     (BIN=<profile-escrow> skips the build)
set -euo pipefail
cd "$(dirname "$0")/../.."
. Benchmarks/lib/signin-python.sh
exec "$PYTHON" Benchmarks/signin/callback-vs-capture.py "$BIN" "${1:-2000}" "${2:-16}" "${3:-3}"
