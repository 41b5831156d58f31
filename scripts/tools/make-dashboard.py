#!/usr/bin/env python3
"""Writes docs/deploy/grafana-dashboard.json: ProfileEscrow's Grafana dashboard, generated so that its layout and
queries stay consistent. scripts/check-dashboards.sh checks that the committed file is what this prints, that every
query parses (promtool) and that every series it names is one the service exports."""
import json
import sys

panels = []
row_y = 0


def panel(title, exprs, unit="short", kind="timeseries", legend=None, desc=""):
    global row_y
    x = 0 if len(panels) % 2 == 0 else 12
    targets = [
        {"refId": chr(65 + i), "expr": e, "legendFormat": legend[i] if legend else "__auto",
         "datasource": {"type": "prometheus", "uid": "${datasource}"}}
        for i, e in enumerate(exprs)
    ]
    p = {"id": len(panels) + 1, "type": kind, "title": title, "description": desc,
         "datasource": {"type": "prometheus", "uid": "${datasource}"},
         "gridPos": {"x": x, "y": row_y, "w": 12, "h": 8}, "targets": targets,
         "fieldConfig": {"defaults": {"unit": unit}, "overrides": []}, "options": {}}
    if kind == "stat":
        p["options"] = {"reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
                        "colorMode": "value", "graphMode": "area"}
    panels.append(p)
    if x == 12:
        row_y += 8


J = 'job=~"$job"'
R = "[$__rate_interval]"
panel("Live escrows by state", [f"sum by (state) (profile_escrow_live{{{J}}})"], legend=["{{state}}"],
      desc="Escrows held now, by state (read from the store by the worker after each sweep).")
panel("Oldest pending escrow", [f"max(profile_escrow_oldest_pending_age_seconds{{{J}}})"], unit="s",
      legend=["oldest pending"],
      desc="How long the oldest undelivered profile has waited. Alerts at 1 hour (warning) and 1 day (critical).")
panel("Captures", [f"sum(rate(profile_escrow_captures_total{{{J}}}{R}))",
                   f"sum by (code) (rate(profile_escrow_capture_failures_total{{{J}}}{R}))"],
      unit="reqps", legend=["captured", "failed: {{code}}"],
      desc="Profiles captured per second, and captures the store did not take (callers must retry).")
panel("Deliveries by outcome", [f"sum by (outcome) (rate(profile_escrow_deliveries_total{{{J}}}{R}))"],
      unit="reqps", legend=["{{outcome}}"],
      desc="Deliveries to the registration backend per second: confirmed, accepted (202), retry, rejected.")
panel("Delivery failure ratio",
      [f'sum(rate(profile_escrow_deliveries_total{{{J}, outcome=~"retry|rejected"}}{R}))'
       f" / sum(rate(profile_escrow_deliveries_total{{{J}}}{R}))"],
      unit="percentunit", legend=["failed / all"],
      desc="Share of deliveries retried or rejected. Alerts above 20% for 15 minutes.")
panel("Delivery latency",
      [f"histogram_quantile({q}, sum by (le) (rate(profile_escrow_delivery_duration_seconds_bucket{{{J}}}{R})))"
       for q in ("0.5", "0.99")],
      unit="s", legend=["p50", "p99"], desc="Time of one delivery to the backend.")
panel("Purges by reason", [f"sum by (reason) (rate(profile_escrow_purges_total{{{J}}}{R}))"], unit="reqps",
      legend=["{{reason}}"],
      desc="Escrows destroyed per second: confirmed, expired, revoked, account-deleted, erased, replaced.")
panel("Escrows made dead (last hour)", [f"sum by (code) (increase(profile_escrow_dead_total{{{J}}}[1h]))"],
      legend=["{{code}}"], desc="Deliveries given up, by code. Requeue them from the console once the cause is fixed.")
panel("HTTP requests by route and status",
      [f"sum by (route, status) (rate(http_server_requests_total{{{J}}}{R}))"], unit="reqps",
      legend=["{{route}} {{status}}"],
      desc="Requests answered per second, by route template (never a path: paths hold user identifiers).")
panel("HTTP latency p99 by route",
      [f"histogram_quantile(0.99, sum by (le, route) (rate(http_server_request_duration_seconds_bucket{{{J}}}{R})))"],
      unit="s", legend=["{{route}}"])
panel("Web sign-ins by outcome",
      [f"sum by (outcome) (rate(profile_escrow_signins_total{{{J}}}{R}))",
       f"sum by (outcome) (rate(profile_escrow_signin_redeems_total{{{J}}}{R}))"],
      unit="reqps", legend=["sign-in {{outcome}}", "redeem {{outcome}}"])
panel("Forwarded Apple notifications by outcome",
      [f"sum by (outcome) (increase(profile_escrow_notifications_forwarded_total{{{J}}}[1h]))"],
      legend=["{{outcome}}"],
      desc="Notifications forwarded to the backend over the last hour: delivered, rejected (4xx), and those the "
           "backend never heard of (given_up, unopenable, full). Alerts on any of the last three.")
panel("Notification outbox", [f"max(profile_escrow_notification_outbox_entries{{{J}}})"],
      legend=["waiting"],
      desc="Apple notifications waiting to be forwarded (one outbox per store: every node counts the same rows).")
panel("Apple notifications by type and outcome",
      [f"sum by (type, outcome) (increase(profile_escrow_apple_notifications_total{{{J}}}[1h]))"],
      legend=["{{type}} {{outcome}}"],
      desc="Verified notifications from Apple over the last hour (consent-revoked, account-delete, email-disabled, "
           "email-enabled) by what they did; the console's Notifications page lists the last ones.")
panel("Key custody", [f"min by (instance) (profile_escrow_custody_up{{{J}}})"], kind="stat",
      legend=["{{instance}}"],
      desc="1 when the custody engine unwrapped the keyring at the last start or reload. Alerts on 0 for 5 minutes.")

dashboard = {
    "title": "ProfileEscrow", "uid": "profile-escrow", "editable": True, "schemaVersion": 39, "version": 1,
    "tags": ["profile-escrow"], "time": {"from": "now-24h", "to": "now"}, "refresh": "1m", "timezone": "utc",
    "description": "Backlog, captures, deliveries, purges and requests of ProfileEscrow's serve and replay "
                   "processes. No series carries personal data.",
    "templating": {"list": [
        {"name": "datasource", "type": "datasource", "query": "prometheus", "label": "Prometheus", "current": {}},
        {"name": "job", "type": "query", "label": "Job",
         "datasource": {"type": "prometheus", "uid": "${datasource}"},
         "query": {"query": "label_values(profile_escrow_captures_total, job)", "refId": "job"},
         "definition": "label_values(profile_escrow_captures_total, job)", "refresh": 2,
         "includeAll": True, "multi": True, "current": {"text": "All", "value": "$__all"}, "allValue": ".*"},
    ]},
    "annotations": {"list": []},
    "panels": panels,
}
sys.stdout.write(json.dumps(dashboard, indent=2) + "\n")
