"""The datasets page in a real browser: create, upload with a progress bar that survives a dropped
connection, share with a group."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import requests

from tests.browser.conftest import login, watch_errors
from tests.integration.hub import USER_PASSWORD

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "datasets"


def test_create_upload_resume_and_share(start_hub, chromium, tmp_path):
    hub = start_hub()
    user = "ola"
    token = hub.user_token(user)
    data = os.urandom(20 << 20)  # three chunks of 8 MiB
    path = tmp_path / "images.bin"
    path.write_bytes(data)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)

    context = chromium.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    errors: list[str] = []
    watch_errors(page, errors)
    try:
        login(page, hub, user, USER_PASSWORD)
        page.goto(f"{hub.url}/services/workspace/datasets")
        page.fill("#ds-name", "images")
        page.fill("#ds-description", "scans for the lab")
        page.click("#new-dataset button[type=submit]")
        card = page.wait_for_selector(f".dataset[data-ref='{user}/images']")
        assert "no versions yet" in card.inner_text()

        # the second chunk's connection drops once: the upload resumes from the server's offset
        dropped = []

        def drop_once(route):
            if "offset=8388608" in route.request.url and not dropped:
                dropped.append(route.request.url)
                return route.abort("connectionreset")
            return route.continue_()

        page.route("**/uploads/*?offset=*", drop_once)
        card.query_selector("input[type=file]").set_input_files(str(path))
        card.query_selector(".upload-form button").click()
        page.wait_for_selector(".upload-text:has-text('resuming')", timeout=30_000)
        page.screenshot(path=str(ARTIFACTS / "01-resuming.png"), full_page=True)
        page.wait_for_selector(".upload-text:has-text('Version 1')", timeout=60_000)
        page.screenshot(path=str(ARTIFACTS / "02-uploaded.png"), full_page=True)
        assert dropped, "the connection was never dropped"
        page.wait_for_selector(f".dataset[data-ref='{user}/images'] .versions:has-text('version 1: 21.0 MB, 1 files')")

        card = page.wait_for_selector(f".dataset[data-ref='{user}/images']")
        card.query_selector(".share-form input[name=principal]").fill("cs101")
        card.query_selector(".share-form button").click()
        page.wait_for_selector(f".dataset[data-ref='{user}/images'] .shares:has-text('group cs101')")
        page.screenshot(path=str(ARTIFACTS / "03-shared.png"), full_page=True)
    finally:
        context.close()
    # the version holds exactly the file
    api = f"{hub.url}/services/workspace/api"
    ds = requests.get(f"{api}/datasets/{user}/images", headers={"Authorization": f"token {token}"}, timeout=30).json()
    assert [(v["version"], v["bytes"], v["files"]) for v in ds["versions"]] == [(1, len(data), 1)], ds
    assert ds["shares"] == [{"kind": "group", "principal": "cs101"}]
    # mounted in a workspace, it is byte for byte the file
    hub.start_workspace(user, "check", token, datasets=[f"{user}/images"])
    assert hub.sh(user, "check", "sha256sum < /input0/images.bin").split()[0] == hashlib.sha256(data).hexdigest()
    hub.stop_workspace(user, "check", token)
    assert [e for e in errors if "ERR_CONNECTION_RESET" not in e and "Failed to fetch" not in e] == [], errors
