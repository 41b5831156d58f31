"""Console sessions live in the store: in a real Chromium, a session survives a restart of `serve` on the same SQLite
file, is served by either of two nodes on one PostgreSQL database (signed in on one, a form posted on the other with
the same CSRF token), and a token revoked through the store ends the session on both at their next request.

The PostgreSQL test needs a server (`eval "$(scripts/postgres.sh start)"`, which sets PROFILE_ESCROW_TEST_POSTGRES_URL);
without one it is skipped.
"""

from __future__ import annotations

import os
import secrets as random
import subprocess
from pathlib import Path

import pytest

from conftest import Node, scan_for_secrets
from test_console import click, sign_in, title


def test_session_survives_a_restart(folder, nodes, browser):
    operator = folder.token("operator", "read", "operate")
    first = Node(folder, "--no-worker")
    nodes.append(first)
    first.start()
    assert sign_in(browser, first, operator) is None
    assert title(browser) == "Overview"
    first.stop()

    # A new process on the same store (another port: cookies are the host's, whatever the port).
    second = Node(folder, "--no-worker")
    nodes.append(second)
    second.start()
    browser.get(second.url + "/console/")
    assert title(browser) == "Overview", "the restart signed nobody out"
    # A form posted after the restart: its CSRF token still matches, its answer is held and shown.
    pause(browser, "OPS-301 after a restart")
    second.stop()
    scan_for_secrets(folder, [operator])


def pause(browser, reason: str):
    """Pauses deliveries from the overview the browser shows, and checks the answer held for the redirect's GET."""
    browser.find_element("id", "deliveries-reason").send_keys(reason)
    click(browser, browser.find_element("id", "pause-deliveries"))
    assert "/console/result/" in browser.current_url
    assert browser.find_element("id", "notice").text == "Deliveries paused on every node."


@pytest.fixture
def postgres_database():
    """A new database on the test server, dropped after the test."""
    server = os.environ.get("PROFILE_ESCROW_TEST_POSTGRES_URL")
    if not server:
        pytest.skip("no PostgreSQL server: eval \"$(scripts/postgres.sh start)\"")
    name = "browser_" + random.token_hex(6)
    psql = str(Path(os.environ.get("PROFILE_ESCROW_TEST_POSTGRES_BIN", "/usr/bin")) / "psql")
    subprocess.run([psql, server, "-c", f"CREATE DATABASE {name}"], check=True, capture_output=True, timeout=30)
    base, _, query = server.partition("?")
    yield base.rsplit("/", 1)[0] + "/" + name + ("?" + query if query else "")
    subprocess.run([psql, server, "-c", f"DROP DATABASE {name} WITH (FORCE)"], capture_output=True, timeout=30)


def test_session_across_two_nodes_on_postgres(folder, nodes, browser, postgres_database):
    database = postgres_database
    folder.env["PROFILE_ESCROW_DATABASE"] = database
    operator = folder.token("operator", "read", "operate")
    one, two = Node(folder, "--no-worker", name="one"), Node(folder, "--no-worker", name="two")
    nodes += [one, two]
    one.start()
    two.start()

    assert sign_in(browser, one, operator) is None
    browser.get(two.url + "/console/")
    assert title(browser) == "Overview", "the other node serves the session"

    # A form of the other node, posted there: the CSRF token derived from the cookie matches on every node.
    pause(browser, "OPS-302 on the second node")
    assert "deliveries: paused" in folder.cli("deliveries", "status").stdout
    browser.get(one.url + "/console/")
    assert "paused" in browser.find_element("id", "deliveries-state").text.lower()

    # Revoked in the shared database (the CLI), the session ends on both nodes at its next request.
    folder.cli("tokens", "revoke", "operator")
    browser.get(two.url + "/console/escrows")
    assert browser.current_url.endswith("/console/signin")
    browser.get(one.url + "/console/")
    assert browser.current_url.endswith("/console/signin")
    one.stop()
    two.stop()
    scan_for_secrets(folder, [operator])
