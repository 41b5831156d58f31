#!/usr/bin/env bash
# Sets up what the tests need and runs the whole suite (real SQLite files, real libsodium).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
# A crashed test process can leave `swift test` hanging: bound it.
exec timeout 2400 swift test "$@"
