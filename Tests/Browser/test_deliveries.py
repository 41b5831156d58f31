"""Pausing and resuming deliveries from the console's overview in a real Chromium: a viewer sees the switch and no
form, an operator flips it with a reason (a forged CSRF token is refused), and the CLI reads the same switch from the
store with the console's actor and reason."""

from __future__ import annotations

from conftest import Node, scan_for_secrets
from test_console import click, sign_in, title

USER = "001234.canarypause{:04d}.0001"
EMAIL = "canarypause{}@example.invalid"


def profile(number: int) -> str:
    return '{"userIdentifier":"%s","email":"%s","fullName":{"givenName":"Testy","familyName":"Pause%d"}}' % (
        USER.format(number),
        EMAIL.format(number),
        number,
    )


def test_pause_and_resume_deliveries_from_the_console(folder, nodes, browser):
    for number in range(2):
        folder.cli("capture", stdin=profile(number))
    viewer = folder.token("viewer", "read")
    operator = folder.token("operator", "read", "operate")
    node = Node(folder, "--no-worker")
    nodes.append(node)
    node.start()

    sign_in(browser, node, viewer)
    assert browser.find_element("id", "deliveries-state").text == "Running"
    assert "expire within 24 hours" in browser.find_element("id", "expiring-while-paused").text
    assert not browser.find_elements("id", "pause-deliveries"), "a viewer gets no form"

    sign_in(browser, node, operator)
    browser.find_element("id", "deliveries-reason").send_keys("OPS-201 backend deploy")
    click(browser, browser.find_element("id", "pause-deliveries"))
    assert browser.find_element("id", "notice").text == "Deliveries paused on every node."
    status = folder.cli("deliveries", "status").stdout
    assert "deliveries: paused" in status and "by: console:operator" in status and "OPS-201 backend deploy" in status

    browser.get(node.url + "/console/")
    state = browser.find_element("id", "deliveries-state").text
    assert state.startswith("Paused since") and "OPS-201 backend deploy" in state, state
    browser.execute_script(
        "document.querySelector('form[action$=\"/deliveries/resume\"] input[name=csrf]').value='forged'"
    )
    browser.find_element("id", "deliveries-reason").send_keys("OPS-202 forged")
    click(browser, browser.find_element("id", "resume-deliveries"))
    assert title(browser) == "Not allowed"
    assert "deliveries: paused" in folder.cli("deliveries", "status").stdout, "the forged form changed nothing"

    browser.get(node.url + "/console/")
    browser.find_element("id", "deliveries-reason").send_keys("OPS-201 deploy done")
    click(browser, browser.find_element("id", "resume-deliveries"))
    assert browser.find_element("id", "notice").text == "Deliveries resumed on every node."
    assert "deliveries: running" in folder.cli("deliveries", "status").stdout

    node.stop()
    scan_for_secrets(folder, [USER.format(n) for n in range(2)] + [EMAIL.format(n) for n in range(2)])
