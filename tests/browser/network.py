"""Chromium aborts a navigation with net::ERR_NETWORK_CHANGED when a network interface appears on the
host, which every container start (of any test, on this machine) does. A navigation aborted so is
tried again; any other failure, or the same one too often, is the test's failure."""

from __future__ import annotations

import functools

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
