#!/usr/bin/env bash
# The admin API at scale: for each size (default 1,000 and 1,000,000 escrows) a SQLite store is filled in the store's
# real row format (Benchmarks/admin/fill.sql: one escrow captured by the CLI, copied with fresh ids and blind
# indexes), `serve --no-worker` answers the admin API over it, and Benchmarks/admin/bench.py times each answer (list
# first page, a deep page by cursor, the same within state=dead, one escrow with its history, the overview) against
# the same SQL run raw on the same file, with each query's plan. One JSON line an answer.
#
#   Benchmarks/admin/scale.sh                 # 1000 and 1000000
#   SIZES="1000 100000" REPEAT=500 Benchmarks/admin/scale.sh
#   PROFILE_ESCROW_BIN=.build/debug/profile-escrow Benchmarks/admin/scale.sh
#
# Everything goes to a temporary folder (ADMIN_BENCH_DIR to choose one), removed at the end unless KEEP=1.
. "$(dirname "$0")/store.sh"

for n in ${SIZES:-1000 1000000}; do
    dir="$root/$n"
    fill_store "$n" "$dir"
    echo "{\"escrows\": $n, \"fill_seconds\": $fill_seconds, \"store_bytes\": $(stat -c %s "$dir/escrow.sqlite")}"
    token=$("$bin" tokens add bench --scope read 2>/dev/null)
    start_serve "$dir"
    python3 Benchmarks/admin/bench.py "$dir/escrow.sqlite" "http://127.0.0.1:$port" "$token" "${REPEAT:-200}"
    stop_serve "$dir"
done
