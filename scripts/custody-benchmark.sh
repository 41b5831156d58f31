#!/usr/bin/env bash
# Capture and replay with a plain keyring and with a keyring in custody, in the same run (ordo-one benchmarks, release
# build): starts a SoftHSM2 token (scripts/softhsm.sh), or OpenBao with PROFILE_ESCROW_BENCH_ENGINE=transit
# (scripts/openbao.sh), runs the "Custody:" benchmarks, stops the engine. See docs/performance.md.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --tests
trap 'scripts/softhsm.sh stop; scripts/openbao.sh stop' EXIT
if [ "${PROFILE_ESCROW_BENCH_ENGINE:-pkcs11}" = transit ]; then
    eval "$(scripts/openbao.sh start)"
else
    eval "$(scripts/softhsm.sh start)"
fi
ENABLE_ESCROW_BENCHMARKS=1 swift package --scratch-path .build-bench benchmark --filter '^Custody:.*' "$@"
