"""The admin page in a real browser: every running execution with its usage, the queue with each waiting
start's place; stopping one records `admin` (and admits the one waiting)."""

from __future__ import annotations

import json
import time
from pathlib import Path

from tests.browser.conftest import login, watch_errors
from tests.integration.hub import ADMIN_PASSWORD, USER_PASSWORD

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "admin"


def test_admin_sees_running_executions_and_stops_one(start_hub, chromium):
    hub = start_hub(
        WORKSPACE_CULL_INTERVAL="1",
        WORKSPACE_USAGE_SAMPLE_INTERVAL="1",
        WORKSPACE_RESOURCE_TYPES=json.dumps([{"name": "small", "cpu": 1, "capacity": 1}]),
    )
    student, ws = "noa", "lab"
    token = hub.user_token(student)
    hub.start_workspace(student, ws, token)
    waiting = hub.user_token("ola")
    assert hub.spawn("ola", "next", waiting, {}).status_code == 202  # the type is full: it waits
    deadline = time.monotonic() + 30
    while not hub.executions("ola", "next") or hub.executions("ola", "next")[-1]["state"] != "queued":
        assert time.monotonic() < deadline, hub.executions("ola", "next")
        time.sleep(0.3)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    errors: list[str] = []

    # a student may not see it
    context = chromium.new_context()
    page = context.new_page()
    login(page, hub, student, USER_PASSWORD)
    r = page.goto(f"{hub.url}/services/workspace/admin")
    assert r.status == 403 and "Only administrators" in page.inner_text("#error-message")
    context.close()

    context = chromium.new_context(viewport={"width": 1400, "height": 900})
    page = context.new_page()
    watch_errors(page, errors)
    try:
        login(page, hub, hub.settings.admin_user, ADMIN_PASSWORD)
        page.goto(f"{hub.url}/services/workspace/admin")
        row = page.wait_for_selector(f"#running tr[data-owner='{student}'][data-workspace='{ws}']")
        assert "#1" in row.inner_text() and "running" in row.inner_text().lower()
        page.wait_for_timeout(2500)  # a usage sample or two
        page.reload()
        row = page.wait_for_selector(f"#running tr[data-owner='{student}'][data-workspace='{ws}']")
        assert "CPU" in row.inner_text() and "no browser" in row.inner_text(), row.inner_text()
        queued = page.locator("#running tr[data-owner='ola'][data-workspace='next']").inner_text()
        assert "position 1 of 1 for “small”" in queued and "queued" in queued.lower(), queued
        page.screenshot(path=str(ARTIFACTS / "01-running.png"), full_page=True)
        row.query_selector("button.stop").click()
        page.wait_for_url("**/services/workspace/admin")
        hub.wait_stopped(student, ws)
        events = hub.progress("ola", "next", waiting, timeout=120)  # the freed place goes to the one waiting
        assert events[-1].get("ready"), events
        page.reload()
        cells = page.locator(f"#storage tr[data-owner='{student}'] td").all_inner_texts()
        assert cells[1] == "1" and "files" in cells[4] and "measured" in cells[4], cells  # the saved output
        page.screenshot(path=str(ARTIFACTS / "02-stopped.png"), full_page=True)
    finally:
        context.close()
    (ex,) = hub.executions(student, ws)
    assert ex["state"] == "stopped" and ex["stop_reason"] == "admin" and ex["has_output"], ex
    assert ex["stop_detail"] == f"Stopped by the administrator {hub.settings.admin_user}.", ex
    assert errors == [], errors
    hub.stop_workspace("ola", "next", waiting)
