"""Label Studio in a real browser (#36): opened from the workspace page, its app runs under the server's
address (its router and API calls are built from the address the page gives it) and signs the owner in."""

from __future__ import annotations

import time

from tests.browser.conftest import login
from tests.integration.hub import USER_PASSWORD
from tests.integration.test_labelling import LABELLING, labelling  # noqa: F401  (fixture)


def test_label_studio_opens_from_the_workspace_page_signed_in(hub, chromium, labelling):  # noqa: F811
    user, ws = "lotte", "labels"
    token = hub.user_token(user)
    hub.start_workspace(user, ws, token, image=LABELLING)
    context = chromium.new_context()
    page = context.new_page()
    try:
        login(page, hub, user, USER_PASSWORD)
        page.goto(f"{hub.url}/services/workspace/workspaces/{ws}")
        api_calls = []  # every tab's, from before the new tab opens (its first calls come at once)
        context.on("response", lambda r: api_calls.append((r.url, r.status)) if "/api/" in r.url else None)
        with context.expect_page(timeout=30_000) as opened:
            page.click("#open-label-studio")
        tab = opened.value
        # its projects page, drawn by its own app: the empty list offers a first project
        tab.wait_for_selector("text=Create Project", timeout=120_000)
        assert tab.url.startswith(f"{hub.url}/user/{user}/{ws}/label-studio/"), tab.url
        # its app called its API under the server's address, signed in as the owner
        ours = f"/user/{user}/{ws}/label-studio/api/projects"
        deadline = time.monotonic() + 60
        while not any(ours in url for url, _ in api_calls) and time.monotonic() < deadline:
            tab.wait_for_timeout(500)  # its list of projects, asked by its app once it runs
        mine = [(url, status) for url, status in api_calls if f"/user/{user}/{ws}/label-studio/api/" in url]
        assert mine and all(status < 400 for _, status in mine), api_calls
        assert not [url for url, _ in api_calls if url.startswith(f"{hub.url}/api/")], api_calls
        assert "Sign Up" not in tab.content() and "/user/login" not in tab.url
    finally:
        context.close()
        hub.stop_workspace(user, ws, token)
