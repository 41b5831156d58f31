#!/usr/bin/env bash
# Two `serve` nodes and two `replay` workers on one PostgreSQL database (a server of its own, started and stopped
# here), under a client that spreads captures over both nodes and a backend that fails 20% of its deliveries, with
# SIGKILLs of a node and of workers and an immediate PostgreSQL restart during the run. It then checks that every
# acknowledged capture was confirmed and purged exactly once, that nothing was purged as confirmed without a 2xx,
# that one audit chain verifies, and that no fake name or email is in a log or in PostgreSQL's files.
# The test suite runs the same check with 2,000 captures.
#
# Usage: scripts/pg-cluster-check.sh [captures]   (default 10000)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --tests
swift build --build-tests
export PROFILE_ESCROW_CLUSTER_CAPTURES="${1:-10000}"
exec timeout 1800 swift test --skip-build --filter "ClusterCheckTests"
