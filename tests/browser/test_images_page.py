"""The Images page in a real browser (#18): the site's images with their versions, a build from the form whose
log follows as it is written, the image ready on the reloaded page, then deleted; a bad name gets a sentence."""

from __future__ import annotations

from pathlib import Path

from tests.browser.conftest import login, watch_errors
from tests.integration.hub import USER_PASSWORD

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "images"


def test_build_an_image_from_the_page_and_follow_its_log(hub, chromium):
    user = "ivy"
    hub.user_token(user)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page = chromium.new_context(viewport={"width": 1300, "height": 900}).new_page()
    errors = watch_errors(page)
    login(page, hub, user, USER_PASSWORD)
    page.goto(f"{hub.url}/services/workspace/images")
    site = page.inner_text("#site-images")
    assert "workspace-base:latest" in site and "python 3." in site, site
    # a bad name: the API's sentence on the page, nothing built
    page.fill("#image-name", "Bad Name")
    page.eval_on_selector("#image-name", "e => e.removeAttribute('pattern')")
    page.fill("#image-apt", "cowsay")
    page.click("#build")
    page.wait_for_function("document.getElementById('build-result').textContent.includes('lower-case')")
    page.fill("#image-name", "moo")
    page.click("#build")
    page.wait_for_function(
        "document.getElementById('build-log').textContent.includes('[image] step 1/1: apt-get install 1 package(s)')",
        timeout=120_000,
    )
    page.screenshot(path=str(ARTIFACTS / "01-building.png"), full_page=True)
    # the log's end reloads the page: the image is ready, with its size
    page.wait_for_selector(f".user-image[data-name='{user}/moo'][data-state=ready]", timeout=300_000)
    row = page.inner_text(f".user-image[data-name='{user}/moo']")
    assert "ready" in row and "MB" in row and "apt: cowsay" in row, row
    page.screenshot(path=str(ARTIFACTS / "02-ready.png"), full_page=True)
    page.on("dialog", lambda d: d.accept())
    page.click(f".user-image[data-name='{user}/moo'] .delete-image")
    page.wait_for_selector(f".user-image[data-name='{user}/moo']", state="detached")
    page.reload()
    assert "None yet." in page.inner_text("#user-images")
    # the only error is the page's 400 for the bad name
    assert all("status of 400" in e for e in errors) and len(errors) == 1, errors
