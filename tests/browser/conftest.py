"""Browser tests: real Chromium (Debian's) driven by Playwright against a real hub.

They use the integration fixtures (a real hub, real containers) and are
marked `docker` too: they skip with a reason when no engine, no Chromium or
no Playwright is there, and under CI=true such a skip fails the run.
"""

from __future__ import annotations

import shutil

import pytest

from tests.browser.network import CutRequests, again_on_network_change
from tests.integration.conftest import (  # noqa: F401  (fixtures)
    btrfs_dir,
    docker_client,
    hub,
    image,
    pytest_runtest_makereport,
    start_hub,
)


def pytest_collection_modifyitems(items):
    for item in items:
        if "/browser/" in str(item.fspath):
            item.add_marker(pytest.mark.docker)


@pytest.fixture(scope="module")
def chromium():
    # module scope: Playwright's sync API runs an event loop in this thread
    # until it is closed, and later tests call asyncio.run()
    path = shutil.which("chromium")
    if path is None:
        pytest.skip("Chromium is not installed: `make test` installs Debian's chromium")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("Playwright is not installed: `make test` installs the test dependencies")
    from playwright.sync_api import Error, Page

    # a navigation aborted because a container's interface appeared is tried again (network.py)
    goto, reload = Page.goto, Page.reload
    Page.goto, Page.reload = again_on_network_change(goto, Error), again_on_network_change(reload, Error)
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=path, args=["--no-sandbox"])
            yield browser
            browser.close()
    finally:
        Page.goto, Page.reload = goto, reload


def login(page, server, user: str, password: str) -> None:
    """Log in through the hub's login form (of `server`, a Hub), as a student would."""
    page.goto(f"{server.url}/hub/login")
    page.fill("input[name=username]", user)
    page.fill("input[name=password]", password)
    page.click("input[type=submit], button[type=submit]")
    page.wait_for_url("**/services/workspace/workspaces")


def watch_errors(page, errors: list[str] | None = None) -> list[str]:
    """Collect the page's console errors and uncaught exceptions (with the page's address) into `errors`
    (a new list unless given); the tests fail on any."""
    errors = [] if errors is None else errors
    # a request cut by a host network change (any test's docker network appearing), or by the test
    # leaving the page, is not the page's error (network.py)
    cut = CutRequests()
    page.on("requestfailed", lambda request: cut.request_failed(request.failure))

    def error(text: str) -> None:
        line = f"{page.url}: {text}"
        if not cut.excuses(line):
            errors.append(line)

    page.on("console", lambda message: error(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda e: error(str(e)))
    return errors
