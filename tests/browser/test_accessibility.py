"""Every page passes axe-core (the rules accessibility audits use) with no serious or critical violation, as
a student, an instructor and an administrator, in English and in Chinese; and a student can log in, start
a workspace, follow its progress and open it with the keyboard alone."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from tests.browser.conftest import login, watch_errors
from tests.integration.hub import ADMIN_PASSWORD, USER_PASSWORD

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "accessibility"
SERIOUS = ("serious", "critical")

STUDENT_PAGES = [
    "/services/workspace/workspaces",
    "/services/workspace/workspaces/lab",
    "/services/workspace/workspaces/lab/executions/1/files",
    "/services/workspace/workspaces/lab/sweeps/1",
    "/services/workspace/datasets",
    "/services/workspace/images",
    "/services/workspace/deployments",
    "/services/workspace/deployments/demo",
    "/services/workspace/labelling",
    "/services/workspace/storage",
    "/services/workspace/ssh",
    "/hub/token",
    "/hub/home",
    "/hub/spawn/{user}/other",
    "/services/workspace/no-such-page",
]
INSTRUCTOR_PAGES = [
    "/services/workspace/course",
    "/services/workspace/workspaces/lab?user=stu",
    "/services/workspace/workspaces/lab/sweeps/1?user=stu",
]
ADMIN_PAGES = ["/services/workspace/admin", "/hub/admin"]


@pytest.fixture(scope="module")
def a11y_hub(start_hub):
    hub = start_hub(
        WORKSPACE_COURSES=json.dumps({"cs101": {"instructors": ["prof"]}}),
        WORKSPACE_RESOURCE_TYPES=json.dumps([{"name": "small", "cpu": 1}, {"name": "large", "cpu": 2}]),
        WORKSPACE_USAGE_SAMPLE_INTERVAL="1",
        WORKSPACE_CULL_INTERVAL="1",
    )
    token = hub.user_token("stu")
    hub.create_user("prof")
    assert hub.api("POST", "/groups/cs101").status_code == 201
    assert hub.api("POST", "/groups/cs101/users", json={"users": ["stu"]}).status_code == 200
    hub.start_workspace("stu", "lab", token)
    hub.sh("stu", "lab", "echo notes > $HOME/notes.txt")
    hub.stop_workspace("stu", "lab", token)
    # a sweep of two runs beside it (#31), ended, for the sweep's page
    r = hub.service_call("POST", "/workspaces/lab/sweeps", token, json={"command": "echo {x}", "sweep": {"x": [1, 2]}})
    assert r.status_code == 202, r.text
    deadline = time.monotonic() + 120
    while not hub.service_call("GET", "/workspaces/lab/sweeps/1", token).json()["done"]:
        assert time.monotonic() < deadline
        time.sleep(1)
    # a deployment of its output (#33), for the deployments' pages
    body = {"name": "demo", "from": "lab#1", "image": hub.settings.image, "port": 8080}
    r = hub.service_call("POST", "/deployments", token, json={**body, "command": "python3 -m http.server 8080"})
    assert r.status_code == 201, r.text
    return hub


def violations(page) -> list[str]:
    from axe_playwright_python.sync_playwright import Axe

    results = Axe().run(page)
    found = []
    for v in results.response["violations"]:
        if v["impact"] in SERIOUS:
            targets = "; ".join(" ".join(n["target"]) for n in v["nodes"][:5])
            found.append(f"{v['id']} ({v['impact']}): {v['help']} — {targets}")
    return found


def audit(page, hub, paths: list[str], user: str, found: dict) -> None:
    for path in paths:
        page.goto(f"{hub.url}{path.format(user=user)}")
        page.wait_for_load_state("networkidle")
        problems = violations(page)
        if problems:
            found[f"{user} {path}"] = problems
            ARTIFACTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / (re.sub(r"\W+", "-", f"{user}{path}") + ".png")), full_page=True)


@pytest.mark.parametrize("language", ["en-US", "zh-CN"])
def test_every_page_passes_axe_for_every_role(a11y_hub, chromium, language):
    hub = a11y_hub
    found: dict[str, list[str]] = {}
    for user, password, paths in (
        ("stu", USER_PASSWORD, STUDENT_PAGES),
        ("prof", USER_PASSWORD, INSTRUCTOR_PAGES),
        (hub.settings.admin_user, ADMIN_PASSWORD, ADMIN_PAGES),
    ):
        context = chromium.new_context(locale=language, viewport={"width": 1280, "height": 900})
        page = context.new_page()
        try:
            login(page, hub, user, password)
            audit(page, hub, paths, user, found)
        finally:
            context.close()
    # the login page itself, before anyone logs in
    context = chromium.new_context(locale=language)
    page = context.new_page()
    audit(page, hub, ["/hub/login"], "nobody", found)
    context.close()
    assert not found, "serious or critical accessibility violations:\n" + "\n".join(
        f"{where}:\n  " + "\n  ".join(problems) for where, problems in found.items()
    )


def tab_to(page, selector: str, most: int = 60) -> None:
    """Press Tab until the element `selector` has the focus (as a keyboard user moves through a page)."""
    for _ in range(most):
        page.keyboard.press("Tab")
        if page.evaluate("s => document.activeElement && document.activeElement.matches(s)", selector):
            return
    raise AssertionError(f"{selector} never got the focus with Tab on {page.url}")


def test_a_student_logs_in_starts_follows_and_opens_a_workspace_with_the_keyboard_alone(a11y_hub, chromium):
    hub = a11y_hub
    context = chromium.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    errors = watch_errors(page)
    try:
        page.goto(f"{hub.url}/hub/login")
        tab_to(page, "input[name=username]")
        page.keyboard.type("kim")
        tab_to(page, "input[name=password]")
        page.keyboard.type(USER_PASSWORD)
        page.keyboard.press("Enter")
        page.wait_for_url("**/services/workspace/workspaces")

        tab_to(page, "#name")
        page.keyboard.type("keys")
        tab_to(page, "#new-workspace button[type=submit]")
        page.keyboard.press("Enter")
        page.wait_for_url("**/hub/spawn-pending/kim/keys", timeout=30_000)
        # the progress is announced as it changes (a live region), and the page moves on by itself
        page.wait_for_selector("#progress-message", timeout=30_000)
        page.wait_for_url(re.compile(r".*/user/kim/keys/lab.*"), timeout=120_000)
        page.wait_for_selector(".jp-LabShell", timeout=90_000)
        # the workspace page's link to the running workspace is reached and followed with the keyboard
        page.goto(f"{hub.url}/services/workspace/workspaces/keys")
        tab_to(page, "a#open")
        page.keyboard.press("Enter")
        page.wait_for_url(re.compile(r".*/user/kim/keys/lab.*"), timeout=60_000)
        page.wait_for_selector(".jp-LabShell", timeout=90_000)
    finally:
        context.close()
    hub.stop_workspace("kim", "keys", hub.user_token("kim"))
    assert not [e for e in errors if "/user/kim/keys/" not in e], errors
