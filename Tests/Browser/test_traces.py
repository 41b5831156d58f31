"""Traces: `serve` exports its spans over OTLP/HTTP to a receiver this test runs, decoded with opentelemetry-proto.

A capture continues the caller's trace (its `traceparent`), with seal and commit under it; the worker's claim,
delivery and commit are spans too, and the delivery carries a `traceparent` that names the worker's client span, so
the backend's trace continues it. No span holds a name, an email or a user identifier. With no OTEL_* variable,
nothing is exported and deliveries carry no `traceparent`.
"""

from __future__ import annotations

import base64
import json
import os
import time

from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

from conftest import Node, Recorder, free_port, http, scan_for_secrets

CANARY_NAME = "Canary-Tracewatch"
CANARY_EMAIL = "canary.tracewatch@example.invalid"
CANARY_USER = "000000.tracecanary.0001"


def exported_spans(collector: Recorder):
    """Every span the collector was sent, decoded."""
    spans = []
    for request in collector.snapshot():
        assert request.path == "/v1/traces", request.path
        assert request.headers.get("content-type") == "application/x-protobuf", request.headers.get("content-type")
        export = trace_service_pb2.ExportTraceServiceRequest()
        export.ParseFromString(request.body)
        for resource_spans in export.resource_spans:
            for scope_spans in resource_spans.scope_spans:
                spans.extend(scope_spans.spans)
    return spans


def wait_for(predicate, timeout: float = 20, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def profile() -> dict:
    return {"userIdentifier": CANARY_USER, "fullName": {"givenName": CANARY_NAME}, "email": CANARY_EMAIL}


def webhook_secret() -> str:
    return "whsec_" + base64.b64encode(os.urandom(32)).decode()


def test_spans_follow_a_capture_and_its_delivery_without_personal_data(folder, nodes):
    collector, backend = Recorder(), Recorder(status=200)
    try:
        token = folder.token("tracer", "capture", "read")
        node = Node(folder, "--poll-interval", "200ms", env={
            "OTEL_EXPORTER_OTLP_ENDPOINT": collector.url,
            "OTEL_BSP_SCHEDULE_DELAY": "100",
            "PROFILE_ESCROW_BACKEND_URL": backend.url + "/register",
            "PROFILE_ESCROW_WEBHOOK_SECRET": webhook_secret(),
        })
        nodes.append(node.start())

        caller_trace = os.urandom(16).hex()
        caller_span = os.urandom(8).hex()
        status, _, body = http("POST", node.url + "/v1/escrows", profile(), headers={
            "Authorization": f"Bearer {token}", "traceparent": f"00-{caller_trace}-{caller_span}-01"})
        assert status == 201, body
        escrow_id = json.loads(body)["escrowId"]
        # A read by user identifier: its path holds the identifier, which must not reach a span.
        status, _, _ = http("GET", f"{node.url}/v1/escrows/{CANARY_USER}", headers={"Authorization": f"Bearer {token}"})
        assert status in (200, 404)

        delivery = wait_for(lambda: next((r for r in backend.snapshot() if r.path == "/register"), None),
                            what="the delivery")
        names = lambda: {s.name for s in exported_spans(collector)}
        wait_for(lambda: {"POST /v1/escrows", "escrow.capture", "escrow.seal", "escrow.commit", "escrow.claim",
                          "escrow.delivery", "POST"} <= names(), what=f"every span (have {sorted(names())})")
        spans = exported_spans(collector)
        by_id = {s.span_id.hex(): s for s in spans}

        # The capture continues the caller's trace: request span under the caller's, capture under the request,
        # seal and commit under the capture.
        request = next(s for s in spans if s.name == "POST /v1/escrows")
        assert request.trace_id.hex() == caller_trace
        assert request.parent_span_id.hex() == caller_span
        assert request.kind == request.SPAN_KIND_SERVER
        capture = next(s for s in spans if s.name == "escrow.capture")
        assert capture.parent_span_id == request.span_id
        seal = next(s for s in spans if s.name == "escrow.seal" and s.parent_span_id == capture.span_id)
        commit = next(s for s in spans if s.name == "escrow.commit" and s.parent_span_id == capture.span_id)
        assert seal.trace_id.hex() == commit.trace_id.hex() == caller_trace
        attributes = {a.key: a.value for a in capture.attributes}
        assert attributes["escrow.id"].string_value == escrow_id

        # The delivery: its request's traceparent names the worker's client span, child of the delivery span.
        traceparent = delivery.headers.get("traceparent")
        assert traceparent, f"no traceparent on the delivery: {sorted(delivery.headers)}"
        _, trace_id, span_id, _ = traceparent.split("-")
        client = by_id[span_id]
        assert client.name == "POST" and client.kind == client.SPAN_KIND_CLIENT
        assert client.trace_id.hex() == trace_id
        delivered = by_id[client.parent_span_id.hex()]
        assert delivered.name == "escrow.delivery"
        assert {a.key: a.value for a in delivered.attributes}["escrow.id"].string_value == escrow_id
        assert any(s.name == "escrow.commit" and s.parent_span_id == delivered.span_id for s in spans)
        client_attributes = {a.key: a.value for a in client.attributes}
        assert client_attributes["http.response.status_code"].int_value == 200

        # No personal data in any span, any attribute, any event; no path either.
        raw = b"".join(request.body for request in collector.snapshot())
        for secret in (CANARY_NAME, CANARY_EMAIL, CANARY_USER):
            assert secret.encode() not in raw
        for span in spans:
            assert "url.path" not in {a.key for a in span.attributes}
    finally:
        collector.close()
        backend.close()
    scan_for_secrets(folder, [CANARY_NAME, CANARY_EMAIL, token])


def test_without_otel_variables_nothing_is_exported_and_deliveries_carry_no_traceparent(folder, nodes):
    collector, backend = Recorder(), Recorder(status=200)
    try:
        token = folder.token("untraced", "capture")
        node = Node(folder, "--poll-interval", "200ms", env={
            "PROFILE_ESCROW_BACKEND_URL": backend.url + "/register",
            "PROFILE_ESCROW_WEBHOOK_SECRET": webhook_secret(),
            "OTEL_SERVICE_NAME": "untraced",  # names the service, turns nothing on
        })
        node.env = {k: v for k, v in node.env.items() if not k.startswith("OTEL_") or k == "OTEL_SERVICE_NAME"}
        nodes.append(node.start())
        status, _, body = http("POST", node.url + "/v1/escrows", profile(),
                               headers={"Authorization": f"Bearer {token}", "traceparent":
                                        f"00-{os.urandom(16).hex()}-{os.urandom(8).hex()}-01"})
        assert status == 201, body
        delivery = wait_for(lambda: next((r for r in backend.snapshot() if r.path == "/register"), None),
                            what="the delivery")
        assert "traceparent" not in delivery.headers
        time.sleep(1)
        assert collector.snapshot() == []
    finally:
        collector.close()
        backend.close()


def test_a_grpc_protocol_is_refused_by_name(folder):
    result = folder.cli("serve", "--no-worker", "--port", str(free_port()), check=False, env={
        "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"})
    assert result.returncode == 2, result.stderr
    assert "OTEL_EXPORTER_OTLP_PROTOCOL=grpc" in result.stderr
