#!/usr/bin/env bash
# A throwaway PostgreSQL server for the tests, in a temporary folder, on 127.0.0.1 and a free port.
#
#   eval "$(scripts/postgres.sh start)"   # starts it; prints export lines (PROFILE_ESCROW_TEST_POSTGRES_URL, …)
#   scripts/postgres.sh stop              # stops it and deletes its folder (reads PROFILE_ESCROW_TEST_POSTGRES_DIR)
#
# Uses Debian's `postgresql` package (initdb and pg_ctl from /usr/lib/postgresql/*/bin). PostgreSQL refuses to run as
# root: as root, the server runs as the unprivileged `postgres` user. Nothing outside the temporary folder changes.
set -euo pipefail

find_bin() {
    local dir
    for dir in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
        if [ -x "$dir/initdb" ] && [ -x "$dir/pg_ctl" ]; then
            echo "$dir"
            return 0
        fi
    done
    echo "postgres.sh: no PostgreSQL server found in /usr/lib/postgresql/*/bin (apt-get install postgresql)" >&2
    return 1
}

# Runs a command as the server's owner: `postgres` when we are root, ourselves otherwise.
as_owner() {
    if [ "$(id -u)" -eq 0 ]; then
        runuser -u postgres -- "$@"
    else
        "$@"
    fi
}

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

start() {
    local bin dir port user
    bin=$(find_bin)
    dir=$(mktemp -d /tmp/profile-escrow-pg.XXXXXX)
    chmod 0755 "$dir"
    mkdir -p "$dir/data" "$dir/socket"
    if [ "$(id -u)" -eq 0 ]; then
        id postgres >/dev/null 2>&1 || { echo "postgres.sh: no 'postgres' user (apt-get install postgresql)" >&2; exit 1; }
        chown -R postgres: "$dir"
        user=postgres
    else
        user=$(id -un)
    fi
    chmod 0700 "$dir/data"
    port=$(free_port)
    as_owner "$bin/initdb" -D "$dir/data" -U "$user" --auth=trust --encoding=UTF8 --no-locale >"$dir/initdb.log" 2>&1 || {
        cat "$dir/initdb.log" >&2
        exit 1
    }
    # Durable commits (the store refuses synchronous_commit=off); fsync stays on, as in production.
    cat >>"$dir/data/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '$dir/socket'
# The PostgreSQL suite runs its suites in parallel, and several start whole serve nodes with pools of their own:
# 200 was exhausted on CI ("sorry, too many clients already"). Each idle slot costs a few hundred kB of shared memory.
max_connections = 1000
synchronous_commit = on
fsync = on
CONF
    as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 start >/dev/null || {
        cat "$dir/server.log" >&2
        exit 1
    }
    as_owner "$bin/psql" -h "$dir/socket" -p "$port" -U "$user" -d postgres -q -v ON_ERROR_STOP=1 \
        -c "CREATE DATABASE profile_escrow_test" >/dev/null
    echo "export PROFILE_ESCROW_TEST_POSTGRES_URL='postgresql://$user@127.0.0.1:$port/profile_escrow_test?sslmode=disable'"
    echo "export PROFILE_ESCROW_TEST_POSTGRES_DIR='$dir'"
    echo "export PROFILE_ESCROW_TEST_POSTGRES_BIN='$bin'"
}

stop() {
    local dir=${PROFILE_ESCROW_TEST_POSTGRES_DIR:-${1:-}}
    [ -n "$dir" ] && [ -d "$dir/data" ] || { echo "postgres.sh: nothing to stop" >&2; return 0; }
    case "$dir" in /tmp/profile-escrow-pg.*) ;; *) echo "postgres.sh: refusing to remove $dir" >&2; exit 1 ;; esac
    local bin
    bin=$(find_bin)
    as_owner "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null 2>&1 || true
    rm -rf "$dir"
}

case "${1:-}" in
start) start ;;
stop) stop "${2:-}" ;;
*)
    echo "usage: $0 start|stop [dir]" >&2
    exit 2
    ;;
esac
