"""The manual from the pages (#35): "Help" in the header opens it in the reader's language, an error page
links the section that explains it; and the manual's pictures of the pages are taken here, in English and
Chinese, so they show the pages as they are (docs/_ext/screenshots.py)."""

from __future__ import annotations

import re

from tests.browser.conftest import login, watch_errors
from tests.integration.hub import USER_PASSWORD
from workspace.setup import manual

CJK = re.compile(r"[\u4e00-\u9fff]")
SHOTS = manual.DOCS / "_static" / "screenshots"
# the manual's pictures: name -> the page (the student's own, after a login)
PICTURES = {
    "workspaces": "/services/workspace/workspaces",
    "start-form": "/hub/spawn/{user}/new",
    "datasets": "/services/workspace/datasets",
    "storage": "/services/workspace/storage",
    "ssh": "/services/workspace/ssh",
}


def test_help_opens_the_manual_in_the_readers_language_and_the_pages_are_pictured(hub, chromium):
    if not all((manual.OUT / locale / "index.html").is_file() for locale in ("en", "zh_CN")):
        manual.build()
    context = chromium.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    errors = watch_errors(page)
    user = "tao"
    token = hub.user_token(user)
    hub.start_workspace(user, "thesis", token)  # (the pictures show a workspace with a saved execution)
    hub.stop_workspace(user, "thesis", token)
    try:
        login(page, hub, user, USER_PASSWORD)
        for language in ("en", "zh_CN"):
            context.add_cookies([{"name": "workspace-lang", "value": language, "url": hub.url}])
            for name, path in PICTURES.items():
                page.goto(f"{hub.url}{path.format(user=user)}")
                page.wait_for_load_state("networkidle")
                (SHOTS / language).mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(SHOTS / language / f"{name}.png"))
            page.goto(f"{hub.url}/services/workspace/workspaces")
            page.click("#thenavbar a.nav-link[href$='/docs/']")
            page.wait_for_url(f"**/services/workspace/docs/{language}/")
            body = page.locator("body").inner_text()
            assert bool(CJK.search(body)) == (language == "zh_CN"), body[:300]

            # an error page: its section of the manual, one click away
            page.goto(f"{hub.url}/services/workspace/no-such-page")
            page.click("#error-help")
            page.wait_for_url(f"**/services/workspace/docs/{language}/students/errors.html#errors")
            assert page.locator("#errors").count() == 1
        # (the page of an address that is not there answers 404, as it should: that line only)
        assert not [e for e in errors if "/no-such-page: Failed to load resource" not in e], errors
    finally:
        context.close()
