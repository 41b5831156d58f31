#!/usr/bin/env bash
# Builds one libFuzzer target (Fuzz/TARGET) with AddressSanitizer and LeakSanitizer and runs it, as one
# process, over its checked-in seed corpus for at most SECONDS (default 60), with a scratch corpus under
# .build-fuzz/. Further arguments go to libFuzzer (e.g. -runs=10000000 to stop after 10^7 executions).
#
#   scripts/fuzz.sh FuzzProfileJSON 600
#   scripts/fuzz.sh FuzzRetryAfter 3600 -runs=10000000
#   scripts/fuzz.sh --build-only          # build every target
#
# Targets: FuzzProfileJSON FuzzKeyringFile FuzzStoredRow FuzzAppleNotification FuzzRetryAfter
# Crashes are written to .build-fuzz/artifacts/TARGET/; see docs/fuzzing.md.
set -euo pipefail
cd "$(dirname "$0")/.."

TARGETS=(FuzzProfileJSON FuzzKeyringFile FuzzStoredRow FuzzAppleNotification FuzzRetryAfter)
SCRATCH=.build-fuzz
build() {
    # `--sanitize fuzzer` alone instruments only the fuzz target's own module for coverage (SwiftPM 6.3):
    # -sanitize=fuzzer on every Swift module gives libFuzzer the decoders' coverage too.
    ENABLE_ESCROW_FUZZING=1 swift build -c release --scratch-path "$SCRATCH" \
        --sanitize fuzzer --sanitize address -Xswiftc -sanitize=fuzzer,address "$@"
}

if [[ "${1:-}" == "--build-only" ]]; then
    for target in "${TARGETS[@]}"; do build --product "$target"; done
    exit 0
fi

target="${1:?usage: scripts/fuzz.sh TARGET [seconds]}"
seconds="${2:-60}"
shift $(( $# < 2 ? $# : 2 ))
[[ " ${TARGETS[*]} " == *" $target "* ]] || { echo "unknown target: $target (${TARGETS[*]})" >&2; exit 2; }
build --product "$target"
binary="$(build --show-bin-path)/$target"
corpus="$SCRATCH/corpus/$target"
artifacts="$SCRATCH/artifacts/$target"
mkdir -p "$corpus" "$artifacts"
# detect_leaks: every leak fails the run, as a crash does.
ASAN_OPTIONS="detect_leaks=1:${ASAN_OPTIONS:-}" "$binary" "$corpus" "Fuzz/Corpus/$target" \
    -max_total_time="$seconds" -max_len=4096 -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$artifacts/" "$@"
