"""Per-user origins (workspace/origins.py) in Chromium: a script on a student's page, opened by an
administrator, cannot read the hub's pages. Without subdomains (the control) it can: that is the attack."""

from __future__ import annotations

import json

from tests.browser.conftest import login
from tests.integration.hub import ADMIN_PASSWORD

# What a student's script does in the page of their server (they control that server: a `.pth` in their
# user site-packages runs in it, see tests/security): read the hub's pages (their forms carry the XSRF
# token that unlocks everything else) and its API, with the visitor's session.
ATTACK = """hub => {
    const page = fetch(hub + "/hub/home", {credentials: "include"})
        .then(r => r.text()).then(t => t.includes("Logout") ? "read" : "refused").catch(() => "blocked");
    const api = fetch(hub + "/hub/api/user", {credentials: "include"})
        .then(r => r.json()).then(j => j.name ? "read " + j.name : "refused").catch(() => "blocked");
    return Promise.all([page, api]).then(([page, api]) => ({page, api}));
}"""


def open_as_admin(chromium, hub, url: str) -> dict:
    context = chromium.new_context()
    page = context.new_page()
    try:
        login(page, hub, hub.settings.admin_user, ADMIN_PASSWORD)
        page.goto(url)
        authorize = page.query_selector("input[value=Authorize], button:has-text('Authorize')")
        if authorize is not None:  # the hub asks the admin to confirm access to another's server
            authorize.click()
        page.wait_for_selector(".jp-LabShell", timeout=90_000)
        return {"url": page.url, **page.evaluate(ATTACK, hub.url)}
    finally:
        page.close()
        context.close()


def student_workspace(hub) -> str:
    token = hub.user_token("stu")
    events = hub.start_workspace("stu", "ws", token)
    return events[-1]["url"]


def test_a_students_page_cannot_read_the_hub_with_an_admins_session(start_hub, chromium):
    hub = start_hub(WORKSPACE_SUBDOMAIN_HOST="localhost")
    url = student_workspace(hub)
    port = hub.settings.port
    assert url.startswith(f"http://stu.localhost:{port}/user/stu/ws/"), url
    seen = open_as_admin(chromium, hub, url + "lab")
    assert seen["url"].startswith(f"http://stu.localhost:{port}/"), seen
    assert seen["page"] == "blocked" and not seen["api"].startswith("read"), seen
    # the workspace service's pages stay on the hub's origin and link to the user's own origin
    r = hub.service_api("/workspaces", hub.user_token("stu"))
    assert r.status_code == 200 and r.json()[0]["name"] == "ws", r.text


def test_control_on_one_origin_the_same_script_reads_the_hub(start_hub, chromium):
    hub = start_hub()
    url = student_workspace(hub)
    seen = open_as_admin(chromium, hub, f"{hub.url}{url}lab")
    assert seen["page"] == "read", json.dumps(seen)
