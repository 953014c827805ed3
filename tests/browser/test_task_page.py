"""Tasks on the workspace page in a real browser (#17): the form runs a command, its log follows as it is written,
Cancel stops it and its output is saved; a bad command gets a sentence."""

from __future__ import annotations

import time
from pathlib import Path

from tests.browser.conftest import login, watch_errors
from tests.integration.hub import USER_PASSWORD

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "tasks"


def test_run_a_task_from_the_page_follow_its_log_and_cancel_it(start_hub, chromium):
    hub = start_hub()
    user, ws = "tess", "train"
    token = hub.user_token(user)
    # the workspace exists (a first task through the API)
    r = hub.service_call("POST", f"/workspaces/{ws}/tasks", token, json={"command": "echo first > first.txt"})
    assert r.status_code == 202, r.text
    deadline = time.monotonic() + 120
    while hub.executions(user, ws)[-1]["state"] != "stopped":
        assert time.monotonic() < deadline, hub.executions(user, ws)
        time.sleep(0.5)
    hub.wait_stopped(user, ws)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page = chromium.new_context(viewport={"width": 1300, "height": 900}).new_page()
    errors = watch_errors(page)
    login(page, hub, user, USER_PASSWORD)
    pages = f"{hub.url}/services/workspace"
    page.goto(f"{pages}/workspaces/{ws}")
    page.click("#start-with-choices summary")
    # no command: a sentence, nothing started
    page.click("#run-task")
    assert "needs a “command”" in page.inner_text(".alert-danger")
    page.click("#start-with-choices summary")
    page.fill("#task-command", "for i in $(seq 1 300); do echo epoch $i; sleep 1; done")
    page.click("#run-task")
    # the log shows lines while it runs (the page reloads itself as the state changes)
    page.wait_for_selector(".execution[data-number='2'][data-state=running] .task-log", timeout=120_000)
    page.wait_for_function(
        """document.querySelector('.execution[data-number="2"][data-state=running] .task-log')
           .textContent.includes('epoch 3')""",
        timeout=60_000,
    )
    assert "for i in" in page.inner_text(".task-command")
    page.screenshot(path=str(ARTIFACTS / "01-task-running.png"), full_page=True)
    page.click(".cancel-task")
    page.wait_for_selector(".execution[data-number='2'][data-state=stopped]", timeout=120_000)
    card = page.inner_text(".execution[data-number='2'][data-state=stopped]")
    assert "cancelled" in card and "Task:" in card, card
    ex = hub.executions(user, ws)[-1]
    assert ex["kind"] == "task" and ex["stop_reason"] == "user" and ex["has_output"], ex
    # a finished task's log is read when its box is opened
    page.click(".execution[data-number='2'][data-state=stopped] .task-log-box summary")
    page.wait_for_function(
        """document.querySelector('.execution[data-number="2"] .task-log').textContent.includes('epoch 2')""",
        timeout=30_000,
    )
    page.screenshot(path=str(ARTIFACTS / "02-task-cancelled.png"), full_page=True)
    # the only error is the page answering the empty command with its 400
    assert all("status of 400" in e for e in errors) and len(errors) == 1, errors
