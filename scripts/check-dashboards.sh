#!/usr/bin/env bash
# Checks the monitoring recipes in docs/deploy/ with promtool (Debian's `prometheus` package; only its promtool is
# used, scripts/setup.sh --tests installs it):
#   prometheus-alerts.yml       promtool check rules, and promtool test rules against prometheus-alerts.test.yml
#   grafana-dashboard.json      the file scripts/tools/make-dashboard.py writes; every query parses (checked by
#                               promtool as recording rules); every series it or the alerts name is one the service
#                               exports (the names in Sources/EscrowHTTP/Operations/EscrowPrometheus.swift)
set -euo pipefail
cd "$(dirname "$0")/.."
command -v promtool >/dev/null || { echo "promtool missing: apt-get install -y prometheus" >&2; exit 2; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
deploy=docs/deploy

promtool check rules "$deploy/prometheus-alerts.yml"
(cd "$deploy" && promtool test rules prometheus-alerts.test.yml)

scripts/tools/make-dashboard.py > "$work/dashboard.json"
if ! cmp -s "$work/dashboard.json" "$deploy/grafana-dashboard.json"; then
    echo "FAIL: $deploy/grafana-dashboard.json is not what scripts/tools/make-dashboard.py writes: regenerate it" >&2
    exit 1
fi

python3 - "$deploy/grafana-dashboard.json" "$deploy/prometheus-alerts.yml" Sources/EscrowHTTP/Operations/EscrowPrometheus.swift \
    "$work/queries.yml" <<'PY'
import json, re, sys
dashboard_path, alerts_path, names_path, out_path = sys.argv[1:]
dashboard = json.load(open(dashboard_path))
queries = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
# Grafana's variables, as Grafana would fill them in.
filled = [q.replace("$__rate_interval", "5m").replace("$job", "profile-escrow") for q in queries]
with open(out_path, "w") as out:
    out.write("groups:\n  - name: dashboard-queries\n    rules:\n")
    for i, q in enumerate(filled):
        out.write(f"      - record: dashboard:query_{i}\n        expr: {json.dumps(q)}\n")
exported = set(re.findall(r'"((?:profile_escrow|http_server)_[a-z_]+)"', open(names_path).read()))
named = set()
for text in queries + [open(alerts_path).read()]:
    for name in re.findall(r"\b((?:profile_escrow|http_server)_[a-z_]+)\b", text):
        named.add(re.sub(r"_(bucket|sum|count)$", "", name))
unknown = sorted(named - exported)
if unknown:
    sys.exit(f"FAIL: the dashboard or the alerts name series the service does not export: {unknown}")
print(f"ok: {len(queries)} dashboard queries; {len(named)} series named, all exported")
PY
promtool check rules "$work/queries.yml" >/dev/null || { promtool check rules "$work/queries.yml"; exit 1; }
echo "ok: every dashboard query parses"
