#!/usr/bin/env python3
"""Open one ProfileEscrow row with PyNaCl, independently of the Swift code (docs/FORMAT.md).

    pip install pynacl
    python3 open_escrow.py KEYRING --id HEX --blind-index HEX --key-version N \
        --public-key HEX --sealed-profile HEX --sealed-key HEX --mac HEX > profile.json

The row's columns are given in hex (SQLite: `SELECT hex(column)`). The profile bytes are written to stdout.
Exit status 1 with a generic message when the row does not verify or open.
"""
import argparse
import base64
import hashlib
import hmac
import os
import struct
import sys

from nacl.bindings import crypto_box_seal_open, crypto_scalarmult_base, sodium_unpad
from nacl.exceptions import CryptoError


def load_keyring(path):
    """Parses the keyring file: {'index_key', 'row_key', 'active', 'public_only', 'keys': {v: (pk, sk|None)}}."""
    if os.stat(path).st_mode & 0o077:
        sys.exit(f"{path} is accessible by group or others: chmod 600 {path}")
    with open(path, "rb") as file:
        text = file.read().decode("ascii")
    if not text.endswith("\n"):
        sys.exit("keyring: the last line does not end with a newline")
    lines = [line.split(" ") for line in text[:-1].split("\n")]

    def key32(token):
        raw = base64.b64decode(token, validate=True)
        if len(raw) != 32:
            raise ValueError("not 32 bytes")
        return raw

    if lines[0] != ["profile-escrow-keyring", "1"]:
        sys.exit("keyring: line 1 is not `profile-escrow-keyring 1`")
    keyring = {"public_only": lines[1] == ["mode", "public-only"], "active": int(lines[2][1]),
               "index_key": key32(lines[3][1]), "row_key": key32(lines[4][1]), "keys": {}}
    for fields in lines[5:]:
        _, version, _created, public, secret = fields
        public_key = key32(public)
        secret_key = None if secret == "-" else key32(secret)
        if secret_key is not None and crypto_scalarmult_base(secret_key) != public_key:
            sys.exit(f"keyring: key {version}: the secret key does not match its public key")
        keyring["keys"][int(version)] = (public_key, secret_key)
    return keyring


def u32(value):
    return struct.pack(">I", value)


def open_escrow(keyring, escrow_id, blind_index, key_version, public_key, sealed_profile, sealed_key, mac):
    """Returns the profile bytes, or raises ValueError (tampered/invalid) or LookupError (no secret key)."""
    # 1. Row MAC: crypto_auth = HMAC-SHA-512 truncated to 32 bytes, keyed with the row key.
    mac_input = (b"PEM1" + escrow_id + blind_index + u32(key_version) + public_key
                 + u32(len(sealed_profile)) + sealed_profile + u32(len(sealed_key)) + sealed_key)
    expected = hmac.new(keyring["row_key"], mac_input, hashlib.sha512).digest()[:32]
    if not hmac.compare_digest(expected, mac):
        raise ValueError("ciphertext_invalid")
    # 2. The master key pair of the row's version.
    if key_version not in keyring["keys"]:
        raise LookupError("unknown_key_version")
    master_public, master_secret = keyring["keys"][key_version]
    if master_secret is None:
        raise LookupError("secret_key_unavailable")
    binding = escrow_id + blind_index
    try:
        # 3. Key box: "PEK1" || id || blind index || u32be(version) || escrow secret key (32).
        key_box = crypto_box_seal_open(sealed_key, master_public, master_secret)
        if len(key_box) != 88 or key_box[:56] != b"PEK1" + binding + u32(key_version):
            raise ValueError("ciphertext_invalid")
        # 4. Profile box: "PEP1" || id || blind index || u32be(version sealed under) || profile, sodium_pad 64.
        padded = crypto_box_seal_open(sealed_profile, public_key, key_box[56:])
        sealed_under = struct.unpack(">I", padded[52:56])[0]
        if padded[:52] != b"PEP1" + binding or not 1 <= sealed_under <= key_version:
            raise ValueError("ciphertext_invalid")
        plaintext = sodium_unpad(padded, 64)
    except CryptoError as error:
        raise ValueError("ciphertext_invalid") from error
    if len(plaintext) < 56:
        raise ValueError("ciphertext_invalid")
    return plaintext[56:]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("keyring")
    for name in ("id", "blind-index", "public-key", "sealed-profile", "sealed-key", "mac"):
        parser.add_argument("--" + name, required=True, type=bytes.fromhex)
    parser.add_argument("--key-version", required=True, type=int)
    args = parser.parse_args()
    try:
        profile = open_escrow(load_keyring(args.keyring), args.id, args.blind_index, args.key_version,
                              args.public_key, args.sealed_profile, args.sealed_key, args.mac)
    except (ValueError, LookupError) as error:
        sys.exit(f"cannot open the escrow: {error}")
    sys.stdout.buffer.write(profile)


if __name__ == "__main__":
    main()
