"""The output browser in a real browser (#17): from the workspace page to a saved output, its directories,
a text file's preview (markup shown as text), an image, a notebook (its text; its HTML output not run), a
link shown with its target and not followed, a directory downloaded as .zip, and an HTML file of the
output opened straight from the API: shown as text, its script never run."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

from tests.browser.conftest import login, watch_errors
from tests.integration.hub import USER_PASSWORD

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "outputs"
PNG = (  # 2x2 red pixels
    "iVBORw0KGgoAAAANSUhEUgAAAAIAAAACCAIAAAD91JpzAAAAEElEQVR4nGP4z8AARAwQCgAf7gP9i18U1AAAAABJRU5ErkJggg=="
)
NOTEBOOK = {
    "cells": [
        {"cell_type": "markdown", "metadata": {}, "source": ["# Week 1\n", "<b>not bold</b>"]},
        {
            "cell_type": "code",
            "execution_count": 1,
            "metadata": {},
            "source": ["print(6 * 7)"],
            "outputs": [
                {"output_type": "stream", "name": "stdout", "text": ["42\n"]},
                {
                    "output_type": "display_data",
                    "metadata": {},
                    "data": {
                        "text/html": ["<script>document.title='pwned'</script>"],
                        "text/plain": ["<IPython.HTML>"],
                    },
                },
            ],
        },
    ],
    "metadata": {},
    "nbformat": 4,
    "nbformat_minor": 5,
}


def test_the_output_browser_lists_previews_and_downloads(start_hub, chromium, tmp_path):
    hub = start_hub()
    user, ws = "paz", "thesis"
    token = hub.user_token(user)
    hub.start_workspace(user, ws, token)
    script = (
        "cd ~ && mkdir -p notes figs && printf 'Results:\\n<b>bold?</b> & more\\n' > notes/readme.txt "
        f"&& echo {PNG} | base64 -d > figs/plot.png && ln -s /etc/passwd notes/passwd "
        "&& echo \"<script>document.title='pwned'; alert(1)</script>\" > page.html "
        f"&& cat > week1.ipynb <<'EOF'\n{json.dumps(NOTEBOOK)}\nEOF"
    )
    hub.sh(user, ws, script)
    hub.stop_workspace(user, ws, token)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    context = chromium.new_context(viewport={"width": 1300, "height": 900}, accept_downloads=True)
    page = context.new_page()
    errors = watch_errors(page)
    dialogs = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    pages = f"{hub.url}/services/workspace"
    try:
        login(page, hub, user, USER_PASSWORD)
        page.goto(f"{pages}/workspaces/{ws}")
        page.click(".execution[data-number='1'] .browse-output")
        page.wait_for_selector("#entries")
        names = page.locator("#entries tr.entry").evaluate_all("rows => rows.map(r => r.dataset.name)")
        shown = [n for n in names if not n.startswith(".")]  # .ipython, .local: what JupyterLab made
        assert shown == ["figs", "notes", "page.html", "week1.ipynb"], names
        page.screenshot(path=str(ARTIFACTS / "01-output.png"), full_page=True)

        page.click("#entries tr.entry[data-name='notes'] a")
        link = page.locator("#entries tr.entry[data-name='passwd']")
        assert link.get_attribute("data-type") == "link" and "→ /etc/passwd" in link.inner_text()
        assert link.locator("a").count() == 0  # a link is not something to open
        page.click("#entries tr.entry[data-name='readme.txt'] a")
        assert page.inner_text("#preview") == "Results:\n<b>bold?</b> & more\n"
        assert page.locator("#preview b").count() == 0
        page.screenshot(path=str(ARTIFACTS / "02-text-preview.png"), full_page=True)

        page.goto(f"{pages}/workspaces/{ws}/executions/1/files/figs/plot.png")
        page.wait_for_function("document.getElementById('preview-image').naturalWidth === 2")

        page.goto(f"{pages}/workspaces/{ws}/executions/1/files/week1.ipynb")
        sources = page.locator("#notebook .nb-source").all_inner_texts()
        assert sources == ["# Week 1\n<b>not bold</b>", "print(6 * 7)"], sources
        outputs = page.locator("#notebook .nb-output").all_inner_texts()
        assert outputs[0] == "42\n" and outputs[1] == "<IPython.HTML>" and "text/html" in outputs[2], outputs
        page.screenshot(path=str(ARTIFACTS / "03-notebook.png"), full_page=True)

        # a directory as a .zip, from its page
        page.goto(f"{pages}/workspaces/{ws}/executions/1/files/notes")
        with page.expect_download() as info:
            page.click("#download-zip")
        saved = tmp_path / "notes.zip"
        info.value.save_as(saved)
        assert info.value.suggested_filename == "notes.zip"
        with zipfile.ZipFile(io.BytesIO(saved.read_bytes())) as z:
            assert z.read("notes/readme.txt") == b"Results:\n<b>bold?</b> & more\n"
            assert "notes/passwd" not in z.namelist()

        # an HTML file of the output, opened from the API as a preview: text, and nothing runs
        page.goto(f"{pages}/api/workspaces/{ws}/executions/1/files/page.html?inline=1")
        assert "<script>" in page.inner_text("body")
        assert page.title() != "pwned" and not dialogs
        assert not errors, errors
    finally:
        context.close()
