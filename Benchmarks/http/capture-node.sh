# Sourced by the HTTP benchmarks (capture-threads.sh, capture-vs-ceiling.sh, capture-vs-transit.sh): what each runs the
# same way. Expects to run from the repository's root.

# BIN: a release profile-escrow, as given, or built.
release_binary() {
    if [ -z "${BIN:-}" ]; then
        swift build -c release --product profile-escrow 2>&1 | tail -n 1
        BIN="$(swift build -c release --show-bin-path)/profile-escrow"
    fi
    command -v wrk >/dev/null || apt-get install -y -qq wrk >/dev/null
}

# A free TCP port on 127.0.0.1.
free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

# start_capture_node DIRECTORY: a keyring, a store and a capture token in DIRECTORY, then `serve --no-worker` on a free
# loopback port with its rate limit out of the way, waited for until /healthz answers (its log in
# DIRECTORY/serve.log). Sets node_pid, node_port and node_token; stop it with stop_capture_node.
start_capture_node() {
    export PROFILE_ESCROW_DATABASE="$1/escrow.sqlite" PROFILE_ESCROW_KEYRING="$1/keyring"
    "$BIN" keys init >/dev/null
    node_token=$("$BIN" tokens add load --scope capture 2>/dev/null | tail -n 1)
    node_port=$(free_port)
    "$BIN" serve --host 127.0.0.1 --port "$node_port" --no-worker --rate-limit 1000000 --rate-burst 1000000 \
        >"$1/serve.log" 2>&1 &
    node_pid=$!
    for _ in $(seq 1 50); do curl -fs "http://127.0.0.1:$node_port/healthz" >/dev/null && return 0; sleep 0.2; done
    echo "serve did not answer /healthz; its log:" >&2
    cat "$1/serve.log" >&2
    return 1
}

stop_capture_node() {
    if [ -n "${node_pid:-}" ]; then
        kill "$node_pid" 2>/dev/null || true
        wait "$node_pid" 2>/dev/null || true
        node_pid=""
    fi
}
