#!/usr/bin/env bash
# The purge report page at scale: for each size (default 1,000,000 escrows) a SQLite store is filled in the store's
# real row format (Benchmarks/admin/fill.sql: an escrow and a `captured` audit event a row), its audit chain made valid
# (Benchmarks/admin/rechain.py), `serve --no-worker` answers over it, and Benchmarks/admin/purge_report.py times the
# console's purge report page (verified from the store's recorded checkpoint) against the report verifying the whole
# chain on every load. One JSON line an answer.
#
#   Benchmarks/admin/purge-report.sh                      # 1000000
#   SIZES="1000 100000" REPEAT=10 Benchmarks/admin/purge-report.sh
#   PROFILE_ESCROW_BIN=.build/debug/profile-escrow Benchmarks/admin/purge-report.sh
#
# Everything goes to a temporary folder (ADMIN_BENCH_DIR to choose one), removed at the end unless KEEP=1.
. "$(dirname "$0")/store.sh"

for n in ${SIZES:-1000000}; do
    dir="$root/$n"
    fill_store "$n" "$dir"
    echo "{\"escrows\": $n, \"rechain\": $(python3 Benchmarks/admin/rechain.py "$dir/escrow.sqlite")}"
    token=$("$bin" tokens add bench --scope audit 2>/dev/null)
    start_serve "$dir"
    python3 Benchmarks/admin/purge_report.py "http://127.0.0.1:$port" "$token" "${REPEAT:-5}"
    stop_serve "$dir"
done
