#!/usr/bin/env bash
# WAL frames per verified capture, native capture and app attempt, by table and index (see wal-frames.py).
#   Benchmarks/signin/wal-frames.sh [operations] [connections] [warm-up]     (BIN=<profile-escrow> skips the build)
set -euo pipefail
cd "$(dirname "$0")/../.."
. Benchmarks/lib/signin-python.sh
exec "$PYTHON" Benchmarks/signin/wal-frames.py "$BIN" "${1:-100}" "${2:-16}" "${3:-2000}"
