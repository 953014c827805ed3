"""The student's journey and the instructor's course page in both languages, chosen by the browser's
Accept-Language: log in, land on the workspaces, start, follow the progress, reach JupyterLab, whose menus
are in Chinese for a student who reads Chinese; the header's switch changes the language and every page,
the hub's and the service's, remembers it."""

from __future__ import annotations

import json
import re

import pytest
import requests

from tests.browser.conftest import watch_errors
from tests.integration.hub import USER_PASSWORD

CJK = re.compile(r"[\u4e00-\u9fff]")
# what each language calls things, as a student reads them
WORDS = {
    "en-US": {"nav": "Workspaces", "file_menu": "File", "login": "Sign in"},
    "zh-CN": {"nav": "工作空间", "file_menu": "文件", "login": "登录"},
}


# the progress page's event stream, recorded in the tab's sessionStorage (it outlives the page's own
# reload into JupyterLab, on the same origin)
RECORD_PROGRESS = """
if (window.EventSource) {
  const Original = window.EventSource;
  window.EventSource = function (url, options) {
    const source = new Original(url, options);
    source.addEventListener("message", (e) => {
      const said = JSON.parse(sessionStorage.getItem("progress") || "[]");
      said.push(JSON.parse(e.data).message || "");
      sessionStorage.setItem("progress", JSON.stringify(said));
    });
    return source;
  };
}
"""


@pytest.fixture(scope="module")
def lang_hub(start_hub):
    return start_hub(WORKSPACE_COURSES=json.dumps({"cs201": {"instructors": ["teach"]}}))


def log_in(page, hub, user: str) -> None:
    page.goto(f"{hub.url}/hub/login")
    page.fill("input[name=username]", user)
    page.fill("input[name=password]", USER_PASSWORD)
    page.click("input[type=submit], button[type=submit]")
    page.wait_for_url("**/services/workspace/workspaces")


@pytest.mark.parametrize("language", ["en-US", "zh-CN"])
def test_the_student_journey_in_the_browsers_language(lang_hub, chromium, language):
    hub, words = lang_hub, WORDS[language]
    user = "stu" + language[:2]
    hub.create_user(user)
    context = chromium.new_context(locale=language, viewport={"width": 1400, "height": 900})
    context.add_init_script(RECORD_PROGRESS)
    page = context.new_page()
    errors = watch_errors(page)
    try:
        page.goto(f"{hub.url}/hub/login")
        assert words["login"] in page.inner_text("body"), page.inner_text("body")[:500]
        log_in(page, hub, user)
        assert page.locator("html").get_attribute("lang") == language.replace("en-US", "en")
        assert words["nav"] in page.locator("#thenavbar").inner_text()

        page.fill("#name", "thesis")
        page.click("#new-workspace button[type=submit]")
        page.wait_for_url(f"**/hub/spawn-pending/{user}/thesis", timeout=30_000)
        page.wait_for_selector("#progress-message", state="attached", timeout=30_000)
        page.wait_for_url(re.compile(rf".*/user/{user}/thesis/lab.*"), timeout=120_000)
        page.wait_for_selector(".jp-LabShell", timeout=90_000)
        page.wait_for_selector(f".lm-MenuBar-itemLabel:text-is('{words['file_menu']}')", timeout=60_000)
        # what the progress page showed (recorded as it came: the page moves on as soon as it is ready)
        said = page.evaluate("JSON.parse(sessionStorage.getItem('progress') || '[]')")
        assert said and any(CJK.search(m) for m in said) == (language == "zh-CN"), said
    finally:
        context.close()
    hub.stop_workspace(user, "thesis", hub.user_token(user))
    assert not [e for e in errors if "/user/" not in e], errors


def test_the_switch_changes_every_page_and_is_remembered(lang_hub, chromium):
    hub = lang_hub
    hub.create_user("teach")
    context = chromium.new_context(locale="en-US", viewport={"width": 1400, "height": 900})
    page = context.new_page()
    errors = watch_errors(page)
    try:
        log_in(page, hub, "teach")
        page.click("nav a:has-text('Course')")
        page.wait_for_url("**/services/workspace/course")
        assert not CJK.search(page.inner_text("main, .container")), "English first, as the browser asks"
        page.click("#language-zh_CN")
        page.wait_for_url("**/services/workspace/course")  # back where it was chosen
        assert CJK.search(page.inner_text("h1")), page.inner_text("h1")
        assert page.locator("html").get_attribute("lang") == "zh-CN"
        # the hub's pages read the same choice
        page.goto(f"{hub.url}/hub/token")
        assert "工作空间" in page.locator("#thenavbar").inner_text()
        assert page.evaluate("document.documentElement.lang") == "zh-CN"
        # the hub's script's relative times too (moment's zh-cn: "几秒前", "1 分钟前"); the service's
        # login made an authorization, listed with its times
        page.wait_for_function(
            "() => [...document.querySelectorAll('.time-col')].some(e => /前/.test(e.innerText))", timeout=10_000
        )
        # and it stays after logging out and in again
        page.goto(f"{hub.url}/hub/logout")
        log_in(page, hub, "teach")
        assert "工作空间" in page.locator("#thenavbar").inner_text()
        page.click("#language-en")
        page.wait_for_url("**/services/workspace/workspaces")
        assert "Workspaces" in page.locator("#thenavbar").inner_text()
    finally:
        context.close()
    assert errors == [], errors


def test_the_progress_page_stops_its_own_workspace_and_speaks_chinese(lang_hub, chromium):
    """The progress page's stop button interrupts the start of the named workspace it shows (JupyterHub 6.1's
    own script stopped the user's default server instead), and every word it writes is in Chinese."""
    hub, user, ws = lang_hub, "ting", "slow"
    token = hub.user_token(user)
    # a start script that sleeps: the start stays pending long enough to be stopped from the page
    hub.start_workspace(user, ws, token)
    hub.sh(user, ws, "mkdir -p ~/.workspace && echo 'sleep 60' > ~/.workspace/start.sh")
    hub.stop_workspace(user, ws, token)
    context = chromium.new_context(locale="zh-CN", viewport={"width": 1400, "height": 900})
    page = context.new_page()
    errors = watch_errors(page)
    try:
        log_in(page, hub, user)
        # started in Chinese (as the service's pages start it for a student who reads Chinese)
        r = requests.post(
            f"{hub.url}/hub/api/users/{user}/servers/{ws}",
            headers={"Authorization": f"token {token}", "Accept-Language": "zh-CN"},
            json={"user_options": {}, "display_name": ws},
            timeout=60,
        )
        assert r.status_code in (201, 202), r.text
        page.goto(f"{hub.url}/hub/spawn-pending/{user}/{ws}")
        # the hub's first event ("Server requested") and the spawner's, in Chinese
        page.wait_for_function("() => document.querySelectorAll('#progress-log .progress-log-event').length >= 3")
        first = page.text_content("#progress-log .progress-log-event >> nth=0")  # in a closed <details>
        assert CJK.search(first) and "requested" not in first, first
        page.click("#stop-server-btn")
        page.wait_for_selector("#stop-server-status.alert-success", timeout=60_000)
        assert page.inner_text("#stop-server-status") == "工作空间已停止。"
        hub.wait_stopped(user, ws, timeout=60)
        assert hub.executions(user, ws)[-1]["state"] in ("stopped", "failed")
        assert not running_servers(hub, user), "nothing else of the user's was started or is left running"
    finally:
        context.close()
    assert not [e for e in errors if "/user/" not in e and "EventSource" not in e], errors


def running_servers(hub, user: str) -> dict:
    return {k: v for k, v in hub.api("GET", f"/users/{user}").json().get("servers", {}).items() if v.get("ready")}
