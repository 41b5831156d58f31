#!/usr/bin/env bash
# Installs the system libraries ProfileEscrow links (libsodium, SQLite) when they are missing; with --tests, also the
# PostgreSQL server the tests start (Debian's `postgresql`), python3 and curl for scripts/check-docs.py, and gcc for
# the fault-injection shim the tests build (scripts/faults/faultshim.c).
set -euo pipefail
packages=(libsodium-dev libsqlite3-dev pkg-config)
[ "${1:-}" = --tests ] && packages+=(postgresql python3 curl gcc)
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
