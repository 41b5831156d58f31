#!/usr/bin/env bash
# Archives a large audit trail as an operator would, and measures it: a SQLite store filled with EVENTS events of
# escrows long gone plus LIVE live escrows (Benchmarks/audit-archive/fill.py, a valid v2 chain), then
#   1. `audit archive` (wall time, max RSS), 2. `audit verify` of the segment against the store (wall, max RSS),
#   3. VACUUM, and the store's size before and after, 4. `purge-report --verify` over what is left.
#
#   Benchmarks/audit-archive/archive.sh [EVENTS] [LIVE]      # defaults: 1000000 1000
#   PROFILE_ESCROW_BIN=.build/release/profile-escrow Benchmarks/audit-archive/archive.sh 10000000
#   CHUNK=100000000 Benchmarks/audit-archive/archive.sh 2000000    # the delete in one transaction
#
# Everything goes to a temporary folder (AUDIT_ARCHIVE_DIR to choose one), removed at the end unless KEEP=1.
set -euo pipefail
cd "$(dirname "$0")/../.."
events=${1:-1000000}
live=${2:-1000}
bin=${PROFILE_ESCROW_BIN:-.build/release/profile-escrow}
[ -x "$bin" ] || bin=.build/debug/profile-escrow
[ -x "$bin" ] || { echo "no profile-escrow binary: swift build -c release --product profile-escrow" >&2; exit 2; }
dir=${AUDIT_ARCHIVE_DIR:-$(mktemp -d)}
mkdir -p "$dir"
[ "${KEEP:-0}" = 1 ] || trap 'rm -rf "$dir"' EXIT
db="$dir/escrow.sqlite"
export PROFILE_ESCROW_DATABASE="$db"

size() { stat -c %s "$1" 2>/dev/null || echo 0; }
mib() { awk -v b="$1" 'BEGIN { printf "%.1f MiB", b / 1048576 }'; }
store_size() { echo $(( $(size "$db") + $(size "$db-wal") )); }
# Runs a command under /usr/bin/time -v; prints its wall time and max RSS after its own output.
measured() {
    local label=$1
    shift
    /usr/bin/time -v -o "$dir/time.txt" "$@"
    local wall rss
    wall=$(awk -F': ' '/Elapsed \(wall clock\)/ { print $2 }' "$dir/time.txt")
    rss=$(awk -F': ' '/Maximum resident set size/ { print $2 }' "$dir/time.txt")
    echo "== $label: wall $wall, max RSS $((rss / 1024)) MiB"
}

echo "binary: $bin; folder: $dir"
"$bin" audit archive --before 0s --out "$dir/none.jsonl" >/dev/null   # makes the schema
started=$(date +%s)
python3 Benchmarks/audit-archive/fill.py "$db" "$events" "$live"
echo "== fill: $(( $(date +%s) - started )) s"
before=$(store_size)
echo "== store before: $(mib "$before")"

measured "audit archive" "$bin" audit archive --before 0s --out "$dir/segment-1.jsonl" ${CHUNK:+--chunk "$CHUNK"}
echo "== segment: $(mib "$(size "$dir/segment-1.jsonl")"), $(wc -l < "$dir/segment-1.jsonl") lines"
echo "== store after archive, before vacuum: $(mib "$(store_size)")"
measured "audit verify --database" "$bin" audit verify "$dir/segment-1.jsonl" --database "$db"
# The operator's vacuum (docs/operations.md): the deleted events' pages go back to the file system.
started=$(date +%s)
python3 -c "import sqlite3, sys; db = sqlite3.connect(sys.argv[1]); db.execute('VACUUM'); db.execute('PRAGMA wal_checkpoint(TRUNCATE)'); db.close()" "$db"
echo "== vacuum: $(( $(date +%s) - started )) s"
after=$(store_size)
echo "== store after vacuum: $(mib "$after") (was $(mib "$before"))"
echo "== left in the store: $(sqlite3 "$db" 'SELECT COUNT(*) FROM escrow') live escrows, $(sqlite3 "$db" 'SELECT COUNT(*) FROM audit_event') events"
measured "purge-report --verify" "$bin" purge-report --verify --format json > "$dir/report.json"
grep -E '"(verified|fromSequence|events)"' "$dir/report.json" | tr -s ' ' | tr '\n' ' '
echo
