#!/usr/bin/env bash
# Sets up what the tests need and runs the whole suite (real SQLite files, real libsodium, and a real PostgreSQL
# server started here in a temporary folder and stopped at the end: see scripts/postgres.sh; and, for key custody, an
# OpenBao server and a SoftHSM2 token: scripts/openbao.sh, scripts/softhsm.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --tests
trap 'scripts/postgres.sh stop; scripts/openbao.sh stop; scripts/softhsm.sh stop' EXIT
eval "$(scripts/postgres.sh start)"
echo "PostgreSQL for the tests: $PROFILE_ESCROW_TEST_POSTGRES_URL" >&2
# The key custody engines (EscrowCustodyTests): an OpenBao server with Transit, and a SoftHSM2 token.
eval "$(scripts/openbao.sh start)"
eval "$(scripts/softhsm.sh start)"
echo "OpenBao for the tests: $PROFILE_ESCROW_TEST_BAO_ADDR; SoftHSM2 token: $PROFILE_ESCROW_TEST_PKCS11_TOKEN" >&2
# The explicit import check makes an import without its arrow in Package.swift a build error.
# A crashed test process can leave `swift test` hanging: bound it.
if [ $# -gt 0 ]; then
    timeout 2400 swift test --explicit-target-dependency-import-check error "$@"
    exit
fi
# The PostgreSQL tests run after the others, on their own: their load (a server, several nodes' worth of concurrent
# transactions, a killed `serve` node) would otherwise skew the timing checks of the other suites on a small machine.
# The key custody tests run on their own too: each starts OpenBao servers and `serve` processes, and beside them the
# deadlines of the backend client's and the replay worker's timing tests have been missed on two cores.
timeout 2400 swift test --explicit-target-dependency-import-check error --skip EscrowPostgresTests \
    --skip EscrowCustodyTests
timeout 1200 swift test --explicit-target-dependency-import-check error --skip-build --filter EscrowCustodyTests
timeout 1200 swift test --explicit-target-dependency-import-check error --skip-build --filter EscrowPostgresTests
# Every shell block of README.md and docs/ runs as written, with the profile-escrow the tests just built.
PROFILE_ESCROW_BIN=.build/debug/profile-escrow timeout 900 scripts/check-docs.py
# The alert rules (with their unit tests) and the Grafana dashboard's queries, with promtool.
scripts/check-dashboards.sh
# The browser suite: headless Chromium through Selenium against real `serve` processes (Tests/Browser).
PROFILE_ESCROW_BIN=.build/debug/profile-escrow scripts/browser-tests.sh
