#!/usr/bin/env bash
# Regenerates docs/purge-report.png: the auditor's HTML report over two weeks of made-up traffic (the test
# PurgeReportDocumentTests writes it), opened in headless Chromium and screenshotted.
# Needs Chromium (Debian: apt-get install -y chromium).
set -euo pipefail
cd "$(dirname "$0")/.."
command -v chromium >/dev/null || { echo "chromium missing: apt-get install -y chromium" >&2; exit 2; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
PURGE_REPORT_HTML_OUT="$work/purge-report.html" \
    swift test --filter PurgeReportDocumentTests 2>&1 | tail -n 3
[ -s "$work/purge-report.html" ] || { echo "the test wrote no report" >&2; exit 1; }
# Offline: the document must need nothing from the network.
chromium --headless --no-sandbox --disable-gpu --disable-background-networking --hide-scrollbars \
    --window-size=1200,1600 --screenshot="$work/purge-report.png" "file://$work/purge-report.html" 2>/dev/null
cp "$work/purge-report.png" docs/purge-report.png
cp "$work/purge-report.html" "${PURGE_REPORT_HTML_KEEP:-/dev/null}" 2>/dev/null || true
echo "wrote docs/purge-report.png"
