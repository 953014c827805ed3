"""JupyterLab in a real browser: the workspace plugin shows notices, and the tab counts as a browser."""

from __future__ import annotations

import time

import requests

from tests.browser.conftest import login, watch_errors
from tests.integration.hub import USER_PASSWORD


def test_a_notice_shows_in_jupyterlab_and_the_open_tab_counts_as_a_browser(start_hub, chromium):
    hub = start_hub()
    user, ws = "lin", "lab"
    token = hub.user_token(user)
    hub.start_workspace(user, ws, token)
    base = f"{hub.url}/user/{user}/{ws}"
    auth = hub.report_auth(user, ws)  # the culler's header: the execution's own key, no hub token
    # what the culler posts before a cull
    r = requests.post(
        f"{base}/api/workspace/report/notices",
        headers=auth,
        timeout=10,
        json={
            "id": "cull-idle",
            "level": "warning",
            "message": "This workspace seems idle and will be stopped at 10:00 UTC (in 5 min).",
        },
    )
    assert r.status_code == 201, r.text
    before = requests.get(f"{base}/api/workspace/activity", headers=auth, timeout=10).json()
    assert before["last_browser_request"] is None, before  # the culler's requests are not a browser
    # attack: anyone can send a cookie; requests nobody signed in with keep the workspace from nothing
    for path in ("/api/contents", "/lab", "/api/kernels"):
        r = requests.get(f"{base}{path}", headers={"Cookie": "x=1"}, timeout=10, allow_redirects=False)
        assert r.status_code in (302, 403), (path, r.status_code)
    after = requests.get(f"{base}/api/workspace/activity", headers=auth, timeout=10).json()
    assert after["last_browser_request"] is None, after
    # a hub token (even the user's own) does not open the culler's address
    r = requests.get(f"{base}/api/workspace/activity", headers={"Authorization": f"token {token}"}, timeout=10)
    assert r.status_code == 403, r.text

    page = chromium.new_page()
    errors = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" and "workspace" in m.text else None)
    try:
        login(page, hub, user, USER_PASSWORD)
        page.goto(f"{base}/lab")
        page.wait_for_selector(".jp-LabShell", timeout=90_000)
        assert "@workspace/lab" in page.evaluate("Object.keys(window._JUPYTERLAB || {})")
        toast = page.wait_for_selector("text=will be stopped at 10:00 UTC", timeout=60_000)
        assert toast.is_visible()

        # the open tab is a browser for the culler, seen by the extension
        deadline = time.monotonic() + 30
        report = {}
        while time.monotonic() < deadline:
            report = requests.get(f"{base}/api/workspace/activity", headers=auth, timeout=10).json()
            if report["last_browser_request"]:
                break
            time.sleep(0.5)
        assert report["last_browser_request"], report
        assert errors == [], errors

        # without a GPU the status bar shows none; with one (the usage answer of a GPU machine), it does
        assert page.query_selector("#workspace-gpu-usage") is None
        gpu = {
            "cpu_percent": 3.0,
            "memory_bytes": 1,
            "memory_limit_bytes": None,
            "gpu": {
                "available": True,
                "gpus": [
                    {
                        "index": 0,
                        "name": "NVIDIA H200",
                        "utilization_percent": 87,
                        "memory_used_bytes": 40 << 30,
                        "memory_total_bytes": 141 << 30,
                    }
                ],
            },
        }
        page.route("**/api/workspace/usage", lambda route: route.fulfill(json=gpu))
        item = page.wait_for_selector("#workspace-gpu-usage", timeout=20_000)
        assert item.inner_text() == "GPU0 87% 40.0/141.0 GB"
    finally:
        page.close()
    hub.stop_workspace(user, ws, token)


# A background tab, as JupyterLab and the workspace plugin see it: JupyterLab's own polls stand by
# and the plugin reads no usage; only its notices, every 30 s, say the tab is open.
BACKGROUND_TAB = """
Object.defineProperty(document, "hidden", {get: () => true});
Object.defineProperty(document, "visibilityState", {get: () => "hidden"});
"""


def test_an_open_idle_tab_keeps_its_workspace_and_a_closed_one_is_culled(start_hub, chromium):
    """#28: the tab open in the background, on the launcher, no kernel, CPU idle: kept past the browser
    timeout. The same workspace with its tab closed: culled. With per-user origins, as `make up` runs
    (the culler found no server there, judged every workspace by the hub's stale last activity and
    culled open tabs as closed ones)."""
    timeout = 45  # over the plugin's 30 s between two notices reads
    hub = start_hub(
        WORKSPACE_SUBDOMAIN_HOST="localhost",
        WORKSPACE_CULL_INTERVAL="2",
        WORKSPACE_CULL_BROWSER_TIMEOUT=str(timeout),
        WORKSPACE_CULL_CPU_WINDOW="5",
        WORKSPACE_CULL_WARN_BEFORE="0",
    )
    user = "tab"
    token = hub.user_token(user)
    hub.start_workspace(user, "open", token)
    hub.start_workspace(user, "closed", token)
    servers = hub.api("GET", f"/users/{user}").json()["servers"]
    assert servers["open"]["url"].startswith("http://tab.localhost:"), servers  # its own origin

    background = chromium.new_context()
    background.add_init_script(BACKGROUND_TAB)
    tab = background.new_page()
    errors = watch_errors(tab)
    closing = chromium.new_context()
    try:
        login(tab, hub, user, USER_PASSWORD)
        tab.goto(f"{servers['open']['url']}lab")
        tab.wait_for_selector(".jp-LabShell", timeout=90_000)
        opened = time.monotonic()
        assert tab.evaluate("document.hidden") is True

        other = closing.new_page()
        login(other, hub, user, USER_PASSWORD)
        other.goto(f"{servers['closed']['url']}lab")
        other.wait_for_selector(".jp-LabShell", timeout=90_000)
        closing.close()  # the tab is closed
        closed = time.monotonic()

        while running(hub, user, "closed") and time.monotonic() < closed + timeout + 60:
            tab.wait_for_timeout(1000)  # Playwright's wait: the open tab's page keeps running
        (ex,) = hub.executions(user, "closed")
        assert ex["stop_reason"] == "idle" and "no browser for" in ex["stop_detail"], ex
        assert time.monotonic() - closed >= timeout - 5, "culled before its timeout"

        # the open tab's workspace outlives the timeout by a margin (the culler looks every 2 s)
        while time.monotonic() < opened + timeout + 20:
            tab.wait_for_timeout(1000)
        assert running(hub, user, "open"), hub.executions(user, "open")
        host = {"Host": servers["open"]["url"].split("/")[2]}  # its origin, through the proxy
        report = requests.get(
            f"{hub.url}/user/{user}/open/api/workspace/activity",
            headers=hub.report_auth(user, "open") | host,
            timeout=10,
        )
        assert report.status_code == 200, report.text
        assert report.json()["kernel_connections"] == 0, report.json()  # no kernel: the tab alone kept it
        assert errors == [], errors
    finally:
        background.close()
    hub.stop_workspace(user, "open", token)
    (ex,) = hub.executions(user, "open")
    assert ex["stop_reason"] == "user", ex


def running(hub, user: str, server: str) -> bool:
    return bool(hub.api("GET", f"/users/{user}").json().get("servers", {}).get(server))
