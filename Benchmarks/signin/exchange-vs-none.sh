#!/usr/bin/env bash
# What the Apple token exchange adds to the sign-in's answer path: callback-vs-capture.py run twice on one build,
# without and with every code queued for its exchange (APPLE_EXCHANGE=1: --apple-team-id, a file-kept key, the
# token URL a closed loopback port so the exchanges retry in the background), and serve's CPU per web callback and
# per native capture compared. CAPTURE_ONLY=1 runs the sign-in node on a public-only keyring, as a capture-only node
# at the edge: it queues every code and never claims one, so the "on" figure is the answer path alone, without the
# exchanger's work in the background (which a node that can open escrows does).
#   Benchmarks/signin/exchange-vs-none.sh [operations] [connections] [rounds]     (BIN=<profile-escrow> skips the build)
set -euo pipefail
cd "$(dirname "$0")/../.."
if [ -z "${BIN:-}" ]; then
    swift build -c release --scratch-path .build-rel --product profile-escrow 2>&1 | tail -n 1
    BIN="$(swift build -c release --scratch-path .build-rel --show-bin-path)/profile-escrow"
fi
export BIN
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
APPLE_EXCHANGE=0 Benchmarks/signin/callback-vs-capture.sh "$@" | tee "$work/off"
APPLE_EXCHANGE=1 Benchmarks/signin/callback-vs-capture.sh "$@" | tee "$work/on"
python3 - "$work/off" "$work/on" <<'PY'
import re, sys
def read(path):
    return {m[1].strip(): float(m[2]) for m in re.finditer(r"^  (.{18}) +(\d+) us$", open(path).read(), re.M)}
off, on = read(sys.argv[1]), read(sys.argv[2])
for phase in ("callback", "native capture", "capture"):
    print(f"{phase:15s} exchange off {off[phase]:6.0f} us, on {on[phase]:6.0f} us: on / off {on[phase] / off[phase]:.2f}")
PY
