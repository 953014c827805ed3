"""The workspace service's REST API, through the proxy, with JupyterHub tokens."""

import time

from .hub import ADMIN_PASSWORD, Hub


def test_executions_api(hub: Hub):
    user, ws = "ivy", "paper"
    token = hub.user_token(user)
    hub.start_workspace(user, ws, token)
    hub.sh(user, ws, "head -c 2000000 /dev/urandom > data.bin; mkdir d; echo x > d/x")

    running = hub.service_api(f"/workspaces/{ws}/executions/1", token)
    assert running.status_code == 200, running.text
    assert running.json()["state"] == "running"
    hub.stop_workspace(user, ws, token)
    hub.start_workspace(user, ws, token)
    hub.stop_workspace(user, ws, token)

    r = hub.service_api("/workspaces", token)
    assert r.status_code == 200, r.text
    (summary,) = r.json()
    assert summary["name"] == ws and summary["executions"] == 2
    assert summary["current"] == {"number": 2, "state": "stopped"}

    r = hub.service_api(f"/workspaces/{ws}/executions", token)
    assert r.status_code == 200, r.text
    first, second = r.json()
    for field in (
        "number",
        "state",
        "parent",
        "restored_from",
        "stop_reason",
        "started",
        "stopped",
        "snapshot_bytes",
        "snapshot_files",
        "restore",
        "save",
    ):
        assert field in first, field
    assert (first["number"], first["parent"], first["stop_reason"]) == (1, None, "user")
    assert (second["parent"], second["restored_from"]) == (1, 1)
    assert first["save"]["files"] >= 2 and first["save"]["seconds"] >= 0, first
    assert second["restore"]["files"] >= 2, second
    # the snapshot is measured after the stop, off the stop path
    for _ in range(40):
        if first["snapshot_files"] is not None:
            break
        time.sleep(0.25)
        first = hub.service_api(f"/workspaces/{ws}/executions/1", token).json()
    assert first["snapshot_files"] >= 2 and first["snapshot_bytes"] >= 2_000_000, first
    assert [t["state"] for t in first["transitions"]] == [
        "queued",
        "preparing",
        "pulling",
        "restoring",
        "running",
        "saving",
        "stopped",
    ]


def test_api_rights_and_errors(hub: Hub):
    token = hub.user_token("jon")
    hub.user_token("kim")
    assert hub.service_api("/workspaces", None).status_code in (302, 403)
    r = hub.service_api("/workspaces", token, user="kim")
    assert r.status_code == 403 and "Only administrators" in r.json()["message"], r.text
    r = hub.service_api("/workspaces/nope/executions", token)
    assert r.status_code == 404 and r.json()["message"] == "There is no workspace “nope”.", r.text

    admin = hub.user_token(hub.settings.admin_user, password=ADMIN_PASSWORD)
    r = hub.service_api("/workspaces", admin, user="jon")
    assert r.status_code == 200 and r.json() == [], r.text


def test_cookie_requests_need_the_xsrf_token(hub: Hub):
    """Another site cannot make a logged-in browser change anything (CSRF); the pages' own scripts can."""
    hub.user_token("csrf")
    browser = hub.browser_login("csrf")
    assert browser.get(f"{hub.url}/services/workspace/workspaces", timeout=30).status_code == 200  # OAuth
    api = f"{hub.url}/services/workspace/api"
    r = browser.post(f"{api}/datasets", json={"name": "forged"}, timeout=30)
    assert r.status_code == 403 and "X-XSRFToken" in r.json()["message"], r.text
    xsrf = browser.cookies.get("_xsrf", path="/services/workspace/")
    r = browser.post(f"{api}/datasets", json={"name": "mine"}, headers={"X-XSRFToken": xsrf}, timeout=30)
    assert r.status_code == 201, r.text
    assert browser.get(f"{api}/datasets", timeout=30).json()["mine"][0]["name"] == "mine"
