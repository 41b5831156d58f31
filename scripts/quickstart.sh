#!/usr/bin/env bash
# The main job on the embedded default: SQLite under ./escrow-data and a development keyring created
# on first run. Captures an (obviously fake) profile, shows its status, confirms it (success, then
# purge), and prints the purge report with the audit chain verified.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
swift build --product profile-escrow 2>&1 | tail -n 1
bin="$(swift build --show-bin-path)/profile-escrow"

user="000000.demo$(date +%s%N | sha256sum | cut -c1-32).0001"
profile=$(cat <<JSON
{"userIdentifier": "$user",
 "fullName": {"givenName": "Testy", "familyName": "McTestface"},
 "email": "testy@example.invalid", "realUserStatus": "likelyReal"}
JSON
)

echo "== capture (the one-time profile, sealed before the backend is called)"
escrow_id=$(echo "$profile" | "$bin" capture)
echo "escrow id: $escrow_id"
echo
echo "== status (metadata only, never the profile)"
"$bin" status "$user"
echo
echo "== confirm (the backend registered the user: success, then purge)"
"$bin" confirm "$user"
echo
echo "== purge report"
"$bin" purge-report --verify
