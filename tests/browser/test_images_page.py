"""The Images page in a real browser (#18): the site's images with their versions, a build from the form whose
log follows as it is written, the image ready on the reloaded page, then deleted; a bad name gets a sentence."""

from __future__ import annotations

import os
import tarfile
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


def test_build_an_image_from_a_dockerfile_and_its_folder_on_the_page(hub, chromium, tmp_path):
    """#32: the Dockerfile form sends the text and the folder's tar archive (base64, the API's one shape); an
    instruction the builder does not take is refused naming its line, nothing built."""
    user = "dfivy"
    token = hub.user_token(user)
    folder = tmp_path / "lab"
    folder.mkdir()
    marker = "made-from-the-folder-" + os.urandom(4).hex()
    (folder / "hello.txt").write_text(marker + "\n")
    archive = tmp_path / "lab.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(folder / "hello.txt", arcname="hello.txt")
    page = chromium.new_context(viewport={"width": 1300, "height": 900}).new_page()
    errors = watch_errors(page)
    login(page, hub, user, USER_PASSWORD)
    page.goto(f"{hub.url}/services/workspace/images")
    page.fill("#dockerfile-name", "lab")
    page.fill("#dockerfile-text", "FROM workspace-base:latest\nVOLUME /data\n")
    page.click("#build-dockerfile")
    page.wait_for_function("document.getElementById('dockerfile-result').textContent.includes('Line 2')")
    said = page.inner_text("#dockerfile-result")
    assert "VOLUME" in said, said
    page.fill("#dockerfile-text", "FROM workspace-base:latest\nCOPY hello.txt /opt/hello.txt\nRUN cat /opt/hello.txt\n")
    page.set_input_files("#dockerfile-context", str(archive))
    page.click("#build-dockerfile")
    shown = f"document.getElementById('build-log').textContent.includes('{marker}')"
    try:
        page.wait_for_function(shown, timeout=180_000)
    except Exception:  # what the page and the API said, for a failure under CI's load to be read
        state = hub.service_call("GET", f"/images/{user}/lab", token).text
        log = hub.service_call("GET", f"/images/{user}/lab/log", token).text
        result, on_page = page.inner_text("#dockerfile-result"), page.inner_text("#build-log")
        raise AssertionError(f"page: {result!r}, log: {on_page[-2000:]!r}; API: {state}; log: {log[-3000:]!r}")
    page.wait_for_selector(f".user-image[data-name='{user}/lab'][data-state=ready]", timeout=300_000)
    # the page reloaded at the build's end keeps the log just watched (a fast build's log was on the page for
    # a moment only, then gone)
    page.wait_for_function(shown)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "04-dockerfile-ready.png"), full_page=True)
    # the only error is the page's 400 for the refused line
    assert all("status of 400" in e for e in errors) and len(errors) == 1, errors


def test_an_administrator_approves_a_shared_image_from_the_page(hub, chromium):
    """#28: a public image waits on the administrator's Images page with what it adds; the Approve button (a
    POST with the XSRF token) lets it run for others, the Revoke button takes that back."""
    from tests.browser.test_accessibility import violations
    from tests.integration.hub import ADMIN_PASSWORD
    from tests.integration.test_user_images import wait_image

    owner = "pubowner"
    token = hub.user_token(owner)
    body = {
        "name": "shared",
        "from": "workspace-base:latest",
        "script": "echo mark > /opt/mark\n",
        "visibility": "public",
    }
    r = hub.service_call("POST", "/images", token, json=body)
    assert r.status_code == 202, r.text
    name = r.json()["name"]
    assert wait_image(hub, token, name)["state"] == "ready"
    admin = hub.settings.admin_user
    page = chromium.new_context(viewport={"width": 1300, "height": 900}).new_page()
    errors = watch_errors(page)
    login(page, hub, admin, ADMIN_PASSWORD)
    page.goto(f"{hub.url}/services/workspace/images")
    row = f".pending-image[data-name='{name}']"
    waiting = page.inner_text(row)
    assert owner in waiting and "everyone" in waiting, waiting
    page.click(f"{row} summary")  # the script it runs, read before approving
    assert "echo mark" in page.inner_text(row)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "03-pending.png"), full_page=True)
    page.click(f"{row} .approve-image")
    page.wait_for_selector(row, state="detached")  # reloaded: nothing waits any more
    mine = f".user-image[data-name='{name}']"
    assert f"approved for everyone by {admin}" in page.inner_text(mine)
    assert [i for i in hub.service_call("GET", "/images", hub.user_token("pubreader")).json() if i["name"] == name][0][
        "startable"
    ]
    page.on("dialog", lambda d: d.accept())
    page.click(f"{mine} .revoke-approval")
    page.wait_for_selector(row)  # waiting again
    assert "approved for everyone" not in page.inner_text(mine)
    assert errors == [], errors
    # the approver's table as accessible as the rest (axe: nothing serious or critical); last, as axe's own
    # fetches of the hub's stylesheets log 404s that are not the page's
    assert violations(page) == []
    assert hub.service_call("DELETE", f"/images/{name}", token).status_code == 204
