#!/usr/bin/env bash
# Sets up what the tests need and runs the whole suite (real SQLite files, real libsodium).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
# The explicit import check makes an import without its arrow in Package.swift a build error.
# A crashed test process can leave `swift test` hanging: bound it.
exec timeout 2400 swift test --explicit-target-dependency-import-check error "$@"
