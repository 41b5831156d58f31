"""The operator console in a real Chromium: each role signs in with its token, sees and does what its scopes allow
and is refused the rest, a forged CSRF token is refused, the session cookie has its flags, no page holds a name,
email or user identifier, and every console action is in the audit trail with its actor and reason.

Screenshots go to $CONSOLE_SCREENSHOTS (docs/ when refreshing the ones the docs show), else to the test's folder.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from conftest import Node, Recorder, free_port, http, scan_for_secrets

GIVEN, FAMILY = "Testy", "Canary"
EMAIL = "canary{}@example.invalid"
USER = "001234.canaryconsole{:04d}.0001"
COUNT = 12


def profile(number: int) -> str:
    return (
        '{"userIdentifier":"%s","email":"%s","fullName":{"givenName":"%s","familyName":"%s%d"}}'
        % (USER.format(number), EMAIL.format(number), GIVEN, FAMILY, number)
    )


def secrets() -> list[str]:
    values = [GIVEN + " " + FAMILY, FAMILY + "1", "canaryconsole"]
    values += [EMAIL.format(n) for n in range(COUNT)] + [USER.format(n) for n in range(COUNT)]
    return values


@pytest.fixture
def store(folder):
    """Twelve escrows: 0-3 dead as attempts_exhausted (a refused backend), 4-5 dead as backend_rejected (a backend
    answering 410), 6-11 pending. Tokens for a viewer, an operator and an auditor."""
    env = {"PROFILE_ESCROW_WEBHOOK_SECRET": folder.cli("webhook-secret").stdout.strip()}
    replay = ("replay", "--once", "--max-attempts", "1", "--delivery-timeout", "2s")
    ids = [folder.cli("capture", stdin=profile(n)).stdout.strip() for n in range(4)]
    folder.cli(*replay, "--backend", f"http://127.0.0.1:{free_port()}/register", env=env)
    ids += [folder.cli("capture", stdin=profile(n)).stdout.strip() for n in range(4, 6)]
    rejecting = Recorder(status=410)  # the escrows it gets die as backend_rejected
    try:
        folder.cli(*replay, "--backend", rejecting.url + "/register", env=env)
    finally:
        rejecting.close()
    ids += [folder.cli("capture", stdin=profile(n)).stdout.strip() for n in range(6, COUNT)]
    tokens = {
        "viewer": folder.token("viewer", "read"),
        "operator": folder.token("operator", "read", "operate", "erase"),
        "auditor": folder.token("auditor", "audit"),
    }
    return ids, tokens, env


def click(browser, element):
    """Clicks a submit button or link and waits until the next page has replaced this one."""
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.support.ui import WebDriverWait

    page = browser.find_element("tag name", "html")
    element.click()

    def replaced(_):
        try:
            page.is_enabled()
            return False
        except WebDriverException:  # stale, or (Chromium's words) a node that no longer belongs to the document
            return True

    WebDriverWait(browser, 15).until(replaced)


def sign_in(browser, node: Node, token: str):
    browser.delete_all_cookies()
    browser.get(node.url + "/console/signin")
    browser.find_element("id", "token").send_keys(token)
    click(browser, browser.find_element("id", "signin"))
    errors = browser.find_elements("id", "error")
    return errors[0].text if errors else None


def title(browser) -> str:
    return browser.find_element("tag name", "h1").text


class Pages:
    """Every page source the test saw, for the scan at the end."""

    def __init__(self, root: Path):
        self.path = root / "pages.html"
        self.path.write_text("")

    def keep(self, browser):
        with self.path.open("a") as f:
            f.write(browser.page_source)


def shots_dir(folder) -> Path:
    path = Path(os.environ.get("CONSOLE_SCREENSHOTS") or folder.root / "shots")
    path.mkdir(parents=True, exist_ok=True)
    return path


def test_roles_actions_csrf_and_audit(folder, nodes, browser, store):
    ids, tokens, env = store
    node = Node(folder, "--no-worker")
    nodes.append(node)
    node.start()
    pages = Pages(folder.root)
    shots = shots_dir(folder)

    # Some escrows are dead, with the code the refused backend gave.
    status, _, body = http("GET", node.url + "/v1/admin/escrows?state=dead&limit=500",
                           headers={"Authorization": "Bearer " + tokens["viewer"]})
    assert status == 200
    dead = re.findall(r'"escrowId":"([0-9a-f]{32})"', body.decode())
    assert len(dead) >= 2, body

    # --- The viewer: sees, filters, is refused changes and the purge report.
    refusal = sign_in(browser, node, tokens["viewer"])
    assert title(browser) == "Overview", refusal
    cookie = browser.get_cookie("__Host-pe_session")
    assert cookie and cookie["httpOnly"] and cookie["secure"] and cookie["sameSite"] == "Strict"
    assert cookie["path"] == "/"
    assert browser.find_elements("css selector", "svg rect"), "the overview draws its charts"
    pages.keep(browser)
    browser.save_screenshot(str(shots / "console-overview.png"))

    browser.get(node.url + "/console/escrows")
    browser.find_element("css selector", "select#state option[value=dead]").click()
    click(browser, browser.find_element("id", "filter"))
    assert "state=dead" in browser.current_url
    rows = browser.find_elements("css selector", "table#escrows tbody tr td.id a")
    assert sorted(a.text for a in rows) == sorted(dead)
    pages.keep(browser)
    browser.save_screenshot(str(shots / "console-escrows.png"))
    assert not browser.find_elements("id", "bulk-requeue"), "a viewer gets no requeue form"

    # Next-page links walk every escrow once.
    browser.get(node.url + "/console/escrows?limit=5")
    seen = []
    for _ in range(10):
        seen += [a.text for a in browser.find_elements("css selector", "table#escrows tbody tr td.id a")]
        pages.keep(browser)
        nexts = browser.find_elements("id", "next")
        if not nexts:
            break
        click(browser, nexts[0])
    assert sorted(seen) == sorted(ids)

    browser.get(node.url + f"/console/escrows/{dead[0]}")
    assert not browser.find_elements("id", "requeue") and not browser.find_elements("id", "erase")
    pages.keep(browser)
    # A viewer who forges the operator's form (the right CSRF token of their own session) is refused by role.
    csrf = browser.find_element("css selector", "input[name=csrf]").get_attribute("value")
    browser.execute_script(
        "const f=document.createElement('form');f.method='post';f.action=arguments[0];"
        "for (const [n,v] of [['csrf',arguments[1]],['reason','viewer tries']]) {"
        "const i=document.createElement('input');i.name=n;i.value=v;f.appendChild(i);}"
        "document.body.appendChild(f);f.submit();",
        f"/console/escrows/{dead[0]}/requeue", csrf)
    from selenium.webdriver.support.ui import WebDriverWait
    WebDriverWait(browser, 15).until(lambda b: b.find_element("tag name", "h1").text != "Escrow")
    assert title(browser) == "Not allowed"
    assert "operate" in browser.find_element("id", "error").text
    browser.get(node.url + "/console/purge-report")
    assert title(browser) == "Not allowed"
    pages.keep(browser)

    # The lookup answers yes or no, and never shows the identifier: POST, redirect, GET, the answer shown once.
    browser.get(node.url + "/console/")
    browser.find_element("name", "userIdentifier").send_keys(USER.format(7))
    click(browser, browser.find_element("id", "lookup"))
    assert browser.find_element("id", "lookup-result").text.startswith("Yes")
    assert "/console/result/" in browser.current_url and "canaryconsole" not in browser.current_url
    pages.keep(browser)
    browser.refresh()
    assert title(browser) == "Already shown", "a reload neither posts again nor shows the answer again"
    assert not browser.find_elements("id", "lookup-result")

    # The token list is an operator's: no link, and the page is refused.
    assert not browser.find_elements("css selector", "nav a[href='/console/tokens']")
    browser.get(node.url + "/console/tokens")
    assert title(browser) == "Not allowed"
    assert "operate" in browser.find_element("id", "error").text

    # --- The operator: requeues one, erases one, requeues by filter; a forged CSRF token is refused.
    sign_in(browser, node, tokens["operator"])
    browser.get(node.url + f"/console/escrows/{dead[0]}")
    browser.find_element("id", "requeue-reason").send_keys("OPS-101 backend is back")
    click(browser, browser.find_element("id", "requeue"))
    assert browser.find_element("id", "notice").text == "Requeued."
    pages.keep(browser)
    browser.save_screenshot(str(shots / "console-escrow.png"))

    browser.get(node.url + f"/console/escrows/{dead[1]}")
    browser.execute_script("document.querySelector('form[action$=\"/requeue\"] input[name=csrf]').value='forged'")
    browser.find_element("id", "requeue-reason").send_keys("OPS-102 forged")
    click(browser, browser.find_element("id", "requeue"))
    assert title(browser) == "Not allowed"
    assert "CSRF" in browser.find_element("id", "error").text
    pages.keep(browser)

    browser.get(node.url + f"/console/escrows/{dead[1]}")
    browser.find_element("id", "erase-reason").send_keys("OPS-103 user asked to be forgotten")
    click(browser, browser.find_element("id", "erase"))
    assert browser.find_element("id", "notice").text == "Erased."
    assert browser.find_elements("id", "purged")
    pages.keep(browser)

    browser.get(node.url + "/console/escrows?state=dead")
    browser.find_element("id", "bulk-reason").send_keys("OPS-104 bulk requeue")
    click(browser, browser.find_element("id", "bulk-requeue"))
    notice = browser.find_element("id", "notice").text
    assert re.match(r"Requeued \d+ dead escrows\.", notice), notice
    pages.keep(browser)
    browser.get(node.url + "/console/purge-report")
    assert title(browser) == "Not allowed", "an operator is no auditor"

    browser.get(node.url + "/console/keys")
    assert browser.find_element("id", "active-version").text == "1"
    pages.keep(browser)
    assert browser.find_elements("css selector", "nav a[href='/console/tokens']"), "an operator gets the link"
    browser.get(node.url + "/console/tokens")
    names = [td.text for td in browser.find_elements("css selector", "table#tokens tbody tr td:first-child")]
    assert names == ["auditor", "operator", "viewer"]
    pages.keep(browser)

    # --- The auditor: the purge report; the escrow pages are refused.
    sign_in(browser, node, tokens["auditor"])
    browser.get(node.url + "/console/purge-report")
    assert "purge report" in browser.title.lower()
    pages.keep(browser)
    browser.save_screenshot(str(shots / "console-purge-report.png"))
    browser.get(node.url + "/console/escrows")
    assert title(browser) == "Not allowed"
    browser.get(node.url + "/console/tokens")
    assert title(browser) == "Not allowed", "an auditor is no operator"

    # Sign out ends the session: the old cookie no longer opens a page.
    browser.get(node.url + "/console/")
    click(browser, browser.find_element("css selector", "nav form button"))
    assert browser.current_url.endswith("/console/signin")

    # The audit trail has each console action with its actor and reason.
    first = folder.cli("inspect", dead[0]).stdout
    assert "requeued" in first and "(console:operator)" in first and "OPS-101 backend is back" in first
    erased = folder.cli("inspect", dead[1]).stdout
    assert "purged" in erased and "erased" in erased and "OPS-103 user asked to be forgotten" in erased
    assert "OPS-102" not in erased, "the forged request changed nothing"
    report = folder.cli("purge-report", "--verify").stdout
    assert "verified" in report

    node.stop()
    scan_for_secrets(folder, secrets(), extra=[pages.path])


def test_forged_sign_in_and_revoked_token(folder, nodes, browser, store):
    _, tokens, _ = store
    node = Node(folder, "--no-worker")
    nodes.append(node)
    node.start()

    # A sign-in posted from elsewhere (no sign-in cookie, no matching form token) is refused.
    status, _, _ = http("POST", node.url + "/console/signin", body=b"csrf=x&token=" + tokens["operator"].encode(),
                        headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert status == 403

    # A wrong token is refused; then revoking a signed-in token ends its session at the next request.
    sign_in(browser, node, "pe_not_a_token")
    assert browser.find_element("id", "error").text == "That token is not valid."
    sign_in(browser, node, tokens["operator"])
    assert title(browser) == "Overview"
    folder.cli("tokens", "revoke", "operator")
    browser.get(node.url + "/console/escrows")
    assert browser.current_url.endswith("/console/signin")

    # Headers of every page: a strict policy, no caching.
    status, headers, _ = http("GET", node.url + "/console/signin")
    assert status == 200
    policy = headers["Content-Security-Policy"]
    for part in ("default-src 'none'", "form-action 'self'", "frame-ancestors 'none'", "img-src 'self' data:"):
        assert part in policy
    assert "unsafe-inline" not in policy and headers["Cache-Control"] == "no-store"
    node.stop()
    scan_for_secrets(folder, secrets())


def test_lookup_leaves_nothing_typed_in_the_browser_profile(folder, nodes, store):
    """Chromium keeps each tab's history, POST bodies included, in its profile's session files (restored at the next
    start). The lookup is POST, redirect, GET: after it, the profile on disk holds no identifier typed."""
    from conftest import browser_requests, make_browser

    _, tokens, _ = store
    node = Node(folder, "--no-worker")
    nodes.append(node)
    node.start()
    profile_dir = folder.root / "chromium-profile"
    browser = make_browser(f"--user-data-dir={profile_dir}")
    try:
        assert sign_in(browser, node, tokens["viewer"]) is None
        for number in (3, 99):  # one held, one not
            browser.get(node.url + "/console/")
            browser_requests(browser)  # forget what came before
            browser.find_element("name", "userIdentifier").send_keys(USER.format(number))
            click(browser, browser.find_element("id", "lookup"))
            answer = browser.find_element("id", "lookup-result").text
            assert answer.startswith("Yes" if number == 3 else "No"), answer
            posts = [r for r in browser_requests(browser) if r["url"].endswith("/console/lookup")]
            assert posts and posts[0]["method"] == "POST" and posts[0]["status"] == 303, posts
        # Back to the overview, then forward again: the entry is the GET of the result, never the form's POST (the
        # page may come back from Chromium's memory, or as "Already shown"; nothing is posted again).
        browser_requests(browser)
        browser.back()
        browser.forward()
        assert "/console/result/" in browser.current_url
        assert title(browser) in ("Lookup", "Already shown")
        assert not [r for r in browser_requests(browser) if r["method"] == "POST"], "history posts nothing again"
    finally:
        browser.quit()  # writes the session files
    sessions = [p for p in profile_dir.rglob("*") if p.is_file() and p.name.startswith(("Session_", "Tabs_"))]
    # They hold the tab's history (so they would hold a form's POST body): the result page's URL is there.
    assert any(b"/console/result/" in p.read_bytes() for p in sessions), f"session files: {sessions}"
    for path in profile_dir.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            for number in (3, 99):
                for encoded in (USER.format(number).encode(), USER.format(number).encode("utf-16-le")):
                    assert encoded not in data, f"{path.relative_to(profile_dir)} keeps an identifier typed"
    node.stop()
    scan_for_secrets(folder, secrets())
