"""Chromium aborts a navigation with net::ERR_NETWORK_CHANGED when a network interface appears on the
host, which every container start (of any test, on this machine) does. A navigation aborted so is
tried again; any other failure, or the same one too often, is the test's failure."""

from __future__ import annotations

import functools
import time

NETWORK_CHANGED = "ERR_NETWORK_CHANGED"
ATTEMPTS = 4


def again_on_network_change(navigate, error_type: type[Exception]):
    """`navigate` (Page.goto, Page.reload), tried again when Chromium says the network changed."""

    @functools.wraps(navigate)
    def navigate_again(page, *args, **kwargs):
        for attempt in range(ATTEMPTS):
            try:
                return navigate(page, *args, **kwargs)
            except error_type as e:
                if NETWORK_CHANGED not in str(e) or attempt == ATTEMPTS - 1:
                    raise

    navigate_again.unwrapped = navigate
    return navigate_again


# A fetch cut short, by such a change or by the test itself leaving the page (Chromium cancels the
# old page's requests with net::ERR_ABORTED), makes the page's script say "TypeError: Failed to fetch"
# (JupyterLab logs it when a settings request of its start is cut). That is not the page's error; a
# fetch that failed any other way (refused, reset, empty answer) is. Chromium says a network change
# on the console ("Failed to load resource: net::ERR_NETWORK_CHANGED", not always with a Playwright
# `requestfailed`), before the script hears of it.
LEFT = "ERR_ABORTED"
FAILED_FETCH = "Failed to fetch"
WINDOW_S = 10.0


class CutRequests:
    """The requests of one page cut short by a network change or by leaving the page; each excuses
    one "Failed to fetch" the page logs within WINDOW_S after it."""

    def __init__(self, clock=time.monotonic):
        self.clock = clock
        self.times: list[float] = []
        self.excused: list[str] = []

    def request_failed(self, failure: str | None) -> None:
        """Playwright's `requestfailed`: a request cancelled because the page was left."""
        if failure and LEFT in failure:
            self.times.append(self.clock())

    def excuses(self, error: str) -> bool:
        """Whether the page's console error `error` is not the page's own: Chromium's line about a
        network change, or a failed fetch that a cut request explains."""
        now = self.clock()
        if NETWORK_CHANGED in error:
            self.times.append(now)
            return True
        if FAILED_FETCH not in error:
            return False
        self.times = [t for t in self.times if now - t <= WINDOW_S]
        if not self.times:
            return False
        self.times.pop(0)
        self.excused.append(error)
        return True
