"""The console's delivery tools and Apple's notifications in a real Chromium: an operator sends a test delivery and
reads its status, time and outcome (a forged CSRF token sends nothing); a viewer gets no button; every notification is
listed and counted by type and outcome, never with its user identifier."""

from __future__ import annotations

import json
import secrets
import time

from conftest import Node, Recorder, http, scan_for_secrets
from test_console import click, sign_in, title
from test_signin import APPLE_ISSUER, CLIENT_ID, apple, b64url, signin_node  # noqa: F401 (apple: a fixture)
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding

SECRET = "whsec_" + "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="


def test_test_delivery_from_the_console(folder, nodes, browser):
    backend = Recorder(status=lambda n: 204 if n == 1 else 503)
    viewer = folder.token("viewer", "read")
    operator = folder.token("operator", "read", "operate")
    node = Node(folder, "--backend", backend.url + "/register", env={"PROFILE_ESCROW_WEBHOOK_SECRET": SECRET})
    nodes.append(node.start())
    try:
        sign_in(browser, node, viewer)
        assert not browser.find_elements("id", "test-delivery"), "a viewer gets no test delivery button"

        sign_in(browser, node, operator)
        click(browser, browser.find_element("id", "test-delivery"))
        assert title(browser) == "Test delivery"
        assert browser.find_element("id", "test-delivery-result").text.startswith("The backend answered 204 in ")
        assert browser.find_element("css selector", "#test-status .value").text == "204"
        assert browser.find_element("css selector", "#test-time .value").text.endswith(" ms")
        assert browser.find_element("css selector", "#test-outcome .value").text == "confirmed"
        received = backend.snapshot()
        assert len(received) == 1 and received[0].headers["webhook-id"].startswith("test-")
        assert json.loads(received[0].body)["type"] == "test-delivery"

        # A refusing backend is shown as such.
        browser.get(node.url + "/console/")
        click(browser, browser.find_element("id", "test-delivery"))
        assert "answered 503" in browser.find_element("id", "test-delivery-result").text
        assert browser.find_element("css selector", "#test-outcome .value").text == "retry"

        # A forged CSRF token sends nothing.
        browser.get(node.url + "/console/")
        browser.execute_script(
            "document.querySelector('form[action$=\"/deliveries/test\"] input[name=csrf]').value='forged'"
        )
        click(browser, browser.find_element("id", "test-delivery"))
        assert title(browser) == "Not allowed"
        assert len(backend.snapshot()) == 2, "the forged form sent no request"
    finally:
        backend.close()
    node.stop()
    scan_for_secrets(folder, [SECRET])


def notification(apple, kind: str, jti: str) -> str:
    now = int(time.time())
    events = json.dumps({"type": kind, "sub": apple.sub, "event_time": now * 1000})
    header = {"alg": "RS256", "kid": apple.kid}
    claims = {"iss": APPLE_ISSUER, "aud": CLIENT_ID, "iat": now, "jti": jti, "events": events}
    signing_input = b64url(json.dumps(header).encode()) + "." + b64url(json.dumps(claims).encode())
    return signing_input + "." + b64url(apple.key.sign(signing_input.encode(), padding.PKCS1v15(), hashes.SHA256()))


def test_apple_notifications_listed_and_counted(folder, nodes, browser, apple):
    viewer = folder.token("viewer", "read")
    node = signin_node(folder, apple, jwks_file=True)
    nodes.append(node.start())
    sent = []
    # The second consent-revoked is Apple's retry of the first (the same jti): a duplicate.
    retried = secrets.token_hex(8)
    for kind, jti in [("email-disabled", secrets.token_hex(8)), ("consent-revoked", retried),
                      ("consent-revoked", retried), ("account-delete", secrets.token_hex(8))]:
        jws = notification(apple, kind, jti)
        sent.append(jws)
        status, _, body = http("POST", f"{node.url}/v1/apple/notifications", {"payload": jws})
        assert status == 200, body

    sign_in(browser, node, viewer)
    browser.get(node.url + "/console/notifications")
    assert title(browser) == "Apple notifications"
    rows = [[cell.text for cell in row.find_elements("tag name", "td")]
            for row in browser.find_elements("css selector", "#notifications tbody tr")]
    assert [row[1:] for row in rows] == [
        ["account-delete", "not-held"], ["consent-revoked", "duplicate"], ["consent-revoked", "not-held"],
        ["email-disabled", "not-held"],
    ], rows
    counts = {(row[0], row[1]): row[2] for row in
              ([cell.text for cell in r.find_elements("tag name", "td")]
               for r in browser.find_elements("css selector", "#notification-counts tbody tr"))}
    assert counts == {("account-delete", "not-held"): "1", ("consent-revoked", "duplicate"): "1",
                      ("consent-revoked", "not-held"): "1", ("email-disabled", "not-held"): "1"}, counts
    assert apple.sub not in browser.page_source, "never a user identifier"

    token = folder.token("reader", "read")
    status, _, body = http("GET", f"{node.url}/v1/admin/overview", headers={"Authorization": f"Bearer {token}"})
    assert status == 200
    window = json.loads(body)["last24h"]["appleNotifications"]
    assert window["consent-revoked"] == {"not-held": 1, "duplicate": 1}, window
    node.stop()
    scan_for_secrets(folder, apple.secrets + sent)
