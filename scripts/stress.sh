#!/usr/bin/env bash
# Many processes on one SQLite store for longer than the test suite's few seconds: `serve` under HTTP load, two
# `replay` workers (one killed with SIGKILL and replaced), and a loop of operator commands (erase, requeue, sweep,
# purge-report, keys cycle). Usage: scripts/stress.sh [seconds]   (default 120)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --tests
export PROFILE_ESCROW_STRESS_SECONDS="${1:-120}"
exec timeout $((PROFILE_ESCROW_STRESS_SECONDS + 600)) swift test --filter "MultiProcessStressTests"
