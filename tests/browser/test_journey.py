"""A student's journey in a real browser, through the workspace pages and JupyterLab.

Log in; create a workspace with a dataset; watch the progress page reach
JupyterLab; run a cell that writes a file; type `echo $SHELL` in a terminal
and read `/bin/bash`; stop from the workspace page; continue from execution
#1 and find the file; the executions page shows both executions with their
stop reasons. A screenshot of every page is written under test-artifacts/,
and any browser console error fails the test.
"""

from __future__ import annotations

import io
import re
import tarfile
from pathlib import Path

import requests

from tests.browser.conftest import login, watch_errors
from tests.integration.hub import USER_PASSWORD

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "journey"


def make_dataset(hub, user: str, token: str) -> str:
    """A dataset `user/notes` with one version (an uploaded tar), through the REST API."""
    api = f"{hub.url}/services/workspace/api"
    auth = {"Authorization": f"token {token}"}
    assert requests.post(f"{api}/datasets", headers=auth, json={"name": "notes"}, timeout=30).status_code == 201
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        data = b"lecture notes\n"
        info = tarfile.TarInfo("notes.txt")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    body = buf.getvalue()
    import hashlib

    r = requests.post(
        f"{api}/datasets/{user}/notes/uploads",
        headers=auth,
        timeout=30,
        json={"filename": "notes.tar", "size": len(body), "sha256": hashlib.sha256(body).hexdigest(), "unpack": True},
    )
    assert r.status_code == 201, r.text
    upload = r.json()["id"]
    r = requests.put(
        f"{api}/datasets/{user}/notes/uploads/{upload}", params={"offset": 0}, data=body, headers=auth, timeout=30
    )
    assert r.status_code in (200, 204), r.text
    r = requests.post(f"{api}/datasets/{user}/notes/uploads/{upload}/complete", headers=auth, json={}, timeout=60)
    assert r.status_code in (200, 201), r.text
    return f"{user}/notes"


class Shots:
    def __init__(self, page):
        self.page, self.n = page, 0
        ARTIFACTS.mkdir(parents=True, exist_ok=True)

    def __call__(self, name: str) -> None:
        self.n += 1
        self.page.screenshot(path=str(ARTIFACTS / f"{self.n:02d}-{name}.png"), full_page=True)


def wait_for_lab(page, user: str, ws: str, launcher: bool = True) -> None:
    page.wait_for_url(re.compile(rf".*/user/{user}/{ws}/lab.*"), timeout=120_000)
    page.wait_for_selector(".jp-LabShell", timeout=90_000)
    if launcher:  # a fresh home; a continued one reopens the tabs it had (its layout is in the home)
        page.wait_for_selector(".jp-Launcher", timeout=60_000)


def test_student_journey(start_hub, chromium):
    hub = start_hub()
    user, ws = "mia", "thesis"
    token = hub.user_token(user)
    dataset = make_dataset(hub, user, token)

    context = chromium.new_context(viewport={"width": 1400, "height": 900})
    page = context.new_page()
    errors = watch_errors(page)
    shot = Shots(page)
    try:
        # log in at the hub, then the workspace pages (OAuth, no confirmation)
        login(page, hub, user, USER_PASSWORD)
        page.goto(f"{hub.url}/services/workspace/")
        page.wait_for_url("**/services/workspace/workspaces")
        shot("workspaces-empty")

        # a bad name is a sentence, and nothing starts
        page.fill("#name", "My Thesis!")
        page.evaluate("document.getElementById('name').removeAttribute('pattern')")
        page.click("#new-workspace button[type=submit]")
        assert "cannot be a workspace name" in page.inner_text("#error")
        shot("bad-name")
        # the page came with its 400, which the browser logs; that one is expected, nothing else
        assert [e for e in errors if "status of 400" not in e] == [], errors
        errors.clear()

        # create with a dataset: the progress page, then JupyterLab
        page.fill("#name", ws)
        page.fill("#datasets", dataset)
        page.click("#new-workspace button[type=submit]")
        page.wait_for_url(f"**/hub/spawn-pending/{user}/{ws}", timeout=30_000)
        page.wait_for_selector("#progress-message, .progress", timeout=30_000)
        shot("progress")
        wait_for_lab(page, user, ws)
        shot("lab")
        # terminals in screen-reader mode put their text in the page (xterm draws on a canvas)
        r = requests.put(
            f"{hub.url}/user/{user}/{ws}/lab/api/settings/@jupyterlab/terminal-extension:plugin",
            headers={"Authorization": f"token {token}"},
            json={"raw": '{"screenReaderMode": true}'},
            timeout=30,
        )
        assert r.status_code in (200, 204), r.text
        page.reload()
        page.wait_for_selector(".jp-Launcher", timeout=60_000)

        # a notebook cell writes a file (and reads the dataset)
        page.click(".jp-LauncherCard[data-category='Notebook']")
        page.wait_for_selector(".jp-Notebook .jp-Cell .cm-content", timeout=60_000)
        page.wait_for_selector(".jp-Notebook .jp-Spinner", state="detached", timeout=60_000)
        # the kernel is connected and idle (status bar), or the cell's request would be lost
        page.wait_for_selector(".jp-StatusBar-TextItem:has-text('| Idle')", timeout=60_000)
        page.locator(".jp-Notebook .jp-Cell .cm-content").first.click()
        page.keyboard.type("open('from-cell.txt', 'w').write('written by #1'); print(open('/input0/notes.txt').read())")
        page.keyboard.press("Shift+Enter")
        page.wait_for_selector(".jp-OutputArea-output:has-text('lecture notes')", timeout=60_000)
        shot("notebook")

        # a terminal runs bash
        page.click("text=File")
        page.click("li:has-text('New') >> nth=0")
        page.click(".lm-Menu-item:has-text('Terminal')")
        term = page.wait_for_selector(".jp-Terminal .xterm-helper-textarea", timeout=60_000)
        term.focus()
        page.keyboard.type("echo $SHELL")
        page.keyboard.press("Enter")
        page.wait_for_function(
            "() => [...document.querySelectorAll('.jp-Terminal .xterm-accessibility-tree')]"
            ".some(e => /^\\/bin\\/bash\\s*$/m.test(e.innerText))",
            timeout=30_000,
        )
        shot("terminal")

        # stop from the workspace page; the home is saved
        page.goto(f"{hub.url}/services/workspace/workspaces/{ws}")
        shot("workspace-running")
        page.click("#stop")
        page.wait_for_selector("#state:has-text('stopped')", timeout=90_000)
        shot("workspace-stopped")

        # continue from #1: the file is there
        page.click(".execution[data-number='1'] button.continue")
        wait_for_lab(page, user, ws, launcher=False)
        page.wait_for_selector(".jp-DirListing-item:has-text('from-cell.txt')", timeout=60_000)
        shot("continued")
        assert hub.sh(user, ws, "cat from-cell.txt") == "written by #1"

        page.goto(f"{hub.url}/services/workspace/workspaces/{ws}")
        page.click("#stop")
        page.wait_for_selector("#state:has-text('stopped')", timeout=90_000)
        cards = page.query_selector_all(".execution")
        assert [c.get_attribute("data-number") for c in cards] == ["2", "1"]
        for c in cards:
            assert "stopped: user" in c.inner_text(), c.inner_text()
            assert f"{dataset}:1 at /input0" in c.inner_text()  # continuing keeps the datasets
        assert (
            "Continued from#1" in cards[0].inner_text().replace("\n", "").replace(" ", "")
            or "#1" in cards[0].query_selector("dl").inner_text()
        )
        shot("executions")
    except Exception:
        shot("failure")
        (ARTIFACTS / "failure.html").write_text(page.content())
        raise
    finally:
        context.close()
    assert errors == [], "browser console errors:\n" + "\n".join(errors)
