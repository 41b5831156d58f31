#!/usr/bin/env bash
# The browser suite (Tests/Browser): headless Chromium, driven by Selenium, against real `profile-escrow serve`
# processes on loopback. Needs Debian's `chromium` and `chromium-driver` (scripts/setup.sh --tests installs them) and
# Selenium, pytest and cryptography from PyPI, installed here in .venv-browser/ when missing.
#
#   PROFILE_ESCROW_BIN=.build/debug/profile-escrow scripts/browser-tests.sh [pytest arguments]
set -euo pipefail
cd "$(dirname "$0")/.."
venv=.venv-browser
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
fi
if ! "$venv/bin/python" -c 'import selenium, pytest, cryptography, opentelemetry.proto' 2>/dev/null; then
    "$venv/bin/pip" install -q selenium pytest cryptography opentelemetry-proto
fi
export PROFILE_ESCROW_BIN="${PROFILE_ESCROW_BIN:-.build/debug/profile-escrow}"
export PROFILE_ESCROW_BIN="$(cd "$(dirname "$PROFILE_ESCROW_BIN")" && pwd)/$(basename "$PROFILE_ESCROW_BIN")"
# Selenium must not try to download a browser or a driver: Debian's are the ones to test with.
export SE_OFFLINE=true
exec timeout 1800 "$venv/bin/python" -m pytest -p no:cacheprovider -q Tests/Browser "$@"
