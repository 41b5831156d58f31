#!/usr/bin/env bash
# A throwaway SoftHSM2 token for the key custody tests, in a temporary folder: its own configuration file
# (SOFTHSM2_CONF), its own token directory, one token initialised with softhsm2-util.
#
#   eval "$(scripts/softhsm.sh start)"   # prints export lines (SOFTHSM2_CONF, PROFILE_ESCROW_TEST_PKCS11_MODULE, …)
#   scripts/softhsm.sh stop              # deletes the folder (reads PROFILE_ESCROW_TEST_PKCS11_DIR)
#
# Uses Debian's `softhsm2` (the module /usr/lib/softhsm/libsofthsm2.so and softhsm2-util). Nothing outside the
# temporary folder changes.
set -euo pipefail

module=/usr/lib/softhsm/libsofthsm2.so

start() {
    local dir pin so_pin
    [ -e "$module" ] && command -v softhsm2-util >/dev/null || {
        echo "softhsm.sh: SoftHSM2 is not installed (apt-get install softhsm2)" >&2
        exit 1
    }
    dir=$(mktemp -d /tmp/profile-escrow-hsm.XXXXXX)
    chmod 0700 "$dir"
    mkdir -p "$dir/tokens"
    cat >"$dir/softhsm2.conf" <<CONF
directories.tokendir = $dir/tokens
objectstore.backend = file
log.level = ERROR
slots.removable = false
CONF
    pin=$(python3 -c 'import secrets; print(secrets.token_hex(8))')
    so_pin=$(python3 -c 'import secrets; print(secrets.token_hex(8))')
    SOFTHSM2_CONF="$dir/softhsm2.conf" softhsm2-util --init-token --free --label profile-escrow-test \
        --pin "$pin" --so-pin "$so_pin" >"$dir/init.log" 2>&1 || {
        cat "$dir/init.log" >&2
        exit 1
    }
    echo "export SOFTHSM2_CONF='$dir/softhsm2.conf'"
    echo "export PROFILE_ESCROW_TEST_PKCS11_MODULE='$module'"
    echo "export PROFILE_ESCROW_TEST_PKCS11_TOKEN='profile-escrow-test'"
    echo "export PROFILE_ESCROW_TEST_PKCS11_PIN='$pin'"
    echo "export PROFILE_ESCROW_TEST_PKCS11_DIR='$dir'"
}

stop() {
    local dir=${PROFILE_ESCROW_TEST_PKCS11_DIR:-${1:-}}
    [ -n "$dir" ] && [ -d "$dir/tokens" ] || { echo "softhsm.sh: nothing to stop" >&2; return 0; }
    case "$dir" in /tmp/profile-escrow-hsm.*) ;; *) echo "softhsm.sh: refusing to remove $dir" >&2; exit 1 ;; esac
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
