"""Storage in a real browser: a start with a chosen resource type from the workspaces page, the quota's
warning on every page, the storage page (usage against the quota, what takes the space), "make a dataset
from this output", a start in cleanup mode, deleting one output and the one-click cleanup."""

from __future__ import annotations

import json
from pathlib import Path

from tests.browser.conftest import login, watch_errors
from tests.browser.test_journey import wait_for_lab
from tests.integration.hub import USER_PASSWORD

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "storage"
TYPES = [{"name": "small", "description": "1 core", "cpu": 1, "memory": "1G"}, {"name": "large", "cpu": 2}]


def test_storage_page_quota_cleanup_mode_and_deleting(start_hub, chromium):
    hub = start_hub(WORKSPACE_RESOURCE_TYPES=json.dumps(TYPES), WORKSPACE_QUOTA_BYTES="10M")
    user, ws = "sky", "big"
    token = hub.user_token(user)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    context = chromium.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    errors = watch_errors(page)
    pages = f"{hub.url}/services/workspace"
    try:
        login(page, hub, user, USER_PASSWORD)
        page.goto(f"{pages}/workspaces")
        options = page.locator("#resource_type option").all_inner_texts()
        assert options[0].startswith("small — ") and "large" in options[1], options
        assert page.locator("#continue_from").count() == 0  # a new workspace has nothing to continue from
        page.fill("#name", ws)
        page.select_option("#resource_type", "large")
        page.screenshot(path=str(ARTIFACTS / "01-new-with-a-type.png"), full_page=True)
        page.click("#new-workspace button[type=submit]")
        wait_for_lab(page, user, ws)
        assert hub.executions(user, ws)[-1]["resource_type"] == "large"
        hub.sh(user, ws, "head -c 12000000 /dev/urandom > $HOME/data.bin")
        page.goto(f"{pages}/workspaces")  # leave JupyterLab before its server goes (its requests would fail)
        hub.stop_workspace(user, ws, token)

        # over quota: every page says so, the storage page shows what takes the space
        page.goto(f"{pages}/workspaces")
        assert "over its quota" in page.inner_text("#storage-warning")
        page.goto(f"{pages}/storage")
        assert "over its quota" in page.inner_text("#quota-warning")
        space = page.inner_text(".usage-figure[data-what=space]")
        assert space.startswith("12.") and "of 10.5 MB" in space, space
        rows = page.locator("#items tbody tr.item").all_inner_texts()
        assert len(rows) == 1 and "the output of “big” #1" in rows[0], rows
        page.screenshot(path=str(ARTIFACTS / "02-over-quota.png"), full_page=True)

        # the workspace page: a dataset from the output, then a start in cleanup mode
        page.goto(f"{pages}/workspaces/{ws}")
        card = page.locator(".execution[data-number='1']")
        assert "large, 2.0 CPU" in card.inner_text() or "large, 2 CPU" in card.inner_text(), card.inner_text()
        card.locator(".make-dataset summary").click()
        card.locator(".dataset-form input[name=dsname]").fill("results")
        card.locator(".dataset-form button").click()
        page.wait_for_selector(".dataset-result.text-success:has-text('sky/results version 1: 12.')", timeout=60_000)
        page.screenshot(path=str(ARTIFACTS / "03-dataset-from-output.png"), full_page=True)
        page.click("#start-with-choices summary")
        assert page.input_value("#resource_type") == "large"  # prefilled from the execution continued from
        page.check("#cleanup")
        page.click("#start-form button[type=submit]")
        wait_for_lab(page, user, ws, launcher=False)
        ex = hub.executions(user, ws)[-1]
        assert ex["number"] == 2 and ex["cleanup"] and ex["resource_type"] == "cleanup", ex
        hub.sh(user, ws, "rm $HOME/data.bin")
        page.goto(f"{pages}/workspaces")
        hub.stop_workspace(user, ws, token)

        # deleting: one output from the workspace page, then the old ones in one click
        page.goto(f"{pages}/workspaces/{ws}")
        assert "cleanup mode" in page.inner_text(".execution[data-number='2']")
        page.locator(".execution[data-number='1'] .delete-output summary").click()
        page.locator(".execution[data-number='1'] .delete-output button").click()
        assert page.inner_text("#message").startswith("Deleted the output of #1 (12.")
        page.goto(f"{pages}/storage")
        assert {r.split("\n")[0] for r in page.locator("#items tbody tr.item td:first-child").all_inner_texts()} >= {
            "the output of “big” #2",
            "dataset sky/results v1",
        }
        page.click("#cleanup")
        assert page.inner_text("#message") == "There were no old outputs to delete."
        page.locator("#items tr.item[data-kind=output] .delete-output").click()
        assert page.inner_text("#message").startswith("Deleted the output of “big” #2 (")
        page.screenshot(path=str(ARTIFACTS / "04-after-deleting.png"), full_page=True)
        assert [e["has_output"] for e in hub.executions(user, ws)] == [False, False]
        # what is left is the dataset version, still over the quota of 10 MB
        assert "over its quota" in page.inner_text("#quota-warning")
        assert not errors, errors
    finally:
        context.close()
