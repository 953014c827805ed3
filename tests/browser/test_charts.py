"""Charts from real samples: a notebook cell that keeps a core busy shows as a rising CPU curve on the
workspace's executions page; the admin page charts what ran and waited over the last day. The charting
library comes from the service itself."""

from __future__ import annotations

import re
import time

from tests.browser.conftest import login, watch_errors
from tests.browser.test_journey import wait_for_lab
from tests.integration.hub import ADMIN_PASSWORD, USER_PASSWORD

# one line per statement: the editor indents after a line ending in ":" by itself
# The cell prints the share of a core it was given: on a loaded machine (the suite runs two workers on
# two cores) a busy loop may get a fifth of one, and the chart is held to what the kernel really had.
CELL = (
    "import time\nt, c = time.time(), time.process_time()\nwhile time.time() - t < 8: pass\n"
    "print('busy done', round(100 * (time.process_time() - c) / (time.time() - t)))"
)


def chart(page, selector: str, least: int) -> dict:
    """The chart's data once it has at least `least` points: {"x": [...], "series": [[...], ...]}."""
    page.wait_for_function(
        "([s, n]) => { const f = document.querySelector(s); return f && f.chart && +f.dataset.points >= n }",
        arg=[selector, least],
        timeout=60_000,
    )
    return page.evaluate(
        "s => { const c = document.querySelector(s).chart; return {x: c.data[0], series: c.data.slice(1)} }",
        selector,
    )


def test_a_busy_cell_rises_on_the_usage_chart_and_the_admin_sees_the_days_activity(start_hub, chromium):
    hub = start_hub(WORKSPACE_USAGE_SAMPLE_INTERVAL="1", WORKSPACE_CULL_INTERVAL="1")
    user, ws = "cora", "plots"
    token = hub.user_token(user)
    hub.start_workspace(user, ws, token)
    context = chromium.new_context(viewport={"width": 1400, "height": 900})
    page = context.new_page()
    errors = watch_errors(page)
    scripts = []
    page.on("request", lambda r: scripts.append(r.url) if r.resource_type == "script" else None)
    try:
        login(page, hub, user, USER_PASSWORD)
        page.goto(f"{hub.url}/user/{user}/{ws}/lab")
        wait_for_lab(page, user, ws)
        page.click(".jp-LauncherCard[data-category='Notebook']")
        page.wait_for_selector(".jp-StatusBar-TextItem:has-text('| Idle')", timeout=60_000)
        time.sleep(3)  # a few samples of an idle workspace first
        page.locator(".jp-Notebook .jp-Cell .cm-content").first.click()
        page.keyboard.type(CELL)
        began = time.time()
        page.keyboard.press("Shift+Enter")
        said = page.wait_for_selector(".jp-OutputArea-output:has-text('busy done')", timeout=60_000)
        ended = time.time()
        got = int(said.inner_text().split()[-1])  # percent of one core the loop was given
        time.sleep(2)

        page.goto(f"{hub.url}/services/workspace/workspaces/{ws}")
        data = chart(page, "figure.usage-chart[data-number='1']", 8)
        cpu = data["series"][0]
        before = [v for x, v in zip(data["x"], cpu) if x < began - 0.5 and v is not None]
        during = [v for x, v in zip(data["x"], cpu) if began + 2 <= x <= ended and v is not None]
        assert before and during, (began, ended, data)
        # the curve rises to about what the kernel had (1 s samples of an 8 s loop) from an idle floor
        assert max(during) > max(0.6 * got, 10) and min(before) < max(during) / 2, (got, before, during)
        caption = page.inner_text("figure.usage-chart[data-number='1'] figcaption")
        assert re.search(r"\d+ samples: CPU up to \d+", caption), caption
        memory = data["series"][1]
        assert all(m is None or m > 10 for m in memory), memory  # MB: a JupyterLab server and a kernel
        # the library is the service's own copy: no script from anywhere else
        assert any(u.endswith("/services/workspace/static/vendor/uplot/uPlot.iife.min.js") for u in scripts), scripts
        assert all(u.startswith(hub.url) for u in scripts), [u for u in scripts if not u.startswith(hub.url)]

        context.clear_cookies()
        login(page, hub, hub.settings.admin_user, ADMIN_PASSWORD)
        page.goto(f"{hub.url}/services/workspace/admin")
        data = chart(page, "#activity-chart", 289)  # the last day, a moment every five minutes
        running, queued = data["series"]
        assert running[-1] >= 1 and queued[-1] == 0, (running[-3:], queued[-3:])
        assert "ran" in page.inner_text("#activity-chart figcaption")
    finally:
        context.close()
    hub.stop_workspace(user, ws, token)
    assert errors == [], errors
