#!/usr/bin/env bash
# The console's purge report page on PostgreSQL: for each size (default 1,000,000 escrows) a new database on the server
# of PROFILE_ESCROW_TEST_POSTGRES_URL (`eval "$(scripts/postgres.sh start)"`) is made a store by the CLI, filled by
# Benchmarks/admin/fill_postgres.py (fill.sql's rows, a `captured` event each, the chain valid), `serve --no-worker`
# answers over it, and Benchmarks/admin/purge_report.py times the page as purge-report.sh does. The database is dropped
# at the end.
#
#   eval "$(scripts/postgres.sh start)"
#   PSQL=$PROFILE_ESCROW_TEST_POSTGRES_BIN/psql Benchmarks/admin/purge-report-postgres.sh
#   SIZES="100000" REPEAT=5 PSQL=… PROFILE_ESCROW_BIN=.build/debug/profile-escrow Benchmarks/admin/purge-report-postgres.sh
. "$(dirname "$0")/store.sh"
server=${PROFILE_ESCROW_TEST_POSTGRES_URL:?"no PostgreSQL server: eval \"\$(scripts/postgres.sh start)\""}
psql=${PSQL:-psql}

for n in ${SIZES:-1000000}; do
    name="purge_report_bench_${n}_$$"
    "$psql" "$server" -qc "CREATE DATABASE $name"
    url=$(python3 -c 'import sys, urllib.parse as u; p = u.urlsplit(sys.argv[1]); print(u.urlunsplit(p._replace(path="/" + sys.argv[2])))' "$server" "$name")
    dir="$root/$n"
    mkdir -p "$dir"
    export PROFILE_ESCROW_DATABASE="$url" PROFILE_ESCROW_KEYRING="$dir/keyring" PROFILE_ESCROW_LOG_LEVEL=warning
    "$bin" keys init >/dev/null 2>&1
    echo '{"userIdentifier":"000000.benchtemplate.0001","email":"bench@example.invalid"}' | "$bin" capture >/dev/null
    python3 Benchmarks/admin/fill_postgres.py "$url" "$n" "$psql"
    token=$("$bin" tokens add bench --scope audit 2>/dev/null)
    start_serve "$dir"
    python3 Benchmarks/admin/purge_report.py "http://127.0.0.1:$port" "$token" "${REPEAT:-5}"
    stop_serve "$dir"
    "$psql" "$server" -qc "DROP DATABASE $name"
done
