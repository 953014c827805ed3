"""The browser tests' answer to Chromium's net::ERR_NETWORK_CHANGED (tests/browser/network.py)."""

import pytest

from tests.browser.network import ATTEMPTS, WINDOW_S, CutRequests, again_on_network_change


class PlaywrightError(Exception):
    pass


def navigation(failures: list[str]):
    calls = []

    def goto(page, url, **kwargs):
        calls.append(url)
        if failures:
            raise PlaywrightError(failures.pop(0))
        return f"response of {url}"

    return goto, calls


def test_a_navigation_aborted_by_a_network_change_is_tried_again():
    goto, calls = navigation(["Page.goto: net::ERR_NETWORK_CHANGED at http://127.0.0.1:8000/hub/login"] * 2)
    assert again_on_network_change(goto, PlaywrightError)(None, "http://x/") == "response of http://x/"
    assert calls == ["http://x/"] * 3


def test_any_other_failure_and_a_network_that_keeps_changing_fail_the_test():
    goto, calls = navigation(["Page.goto: net::ERR_CONNECTION_REFUSED"])
    with pytest.raises(PlaywrightError, match="REFUSED"):
        again_on_network_change(goto, PlaywrightError)(None, "http://x/")
    assert len(calls) == 1
    goto, calls = navigation(["net::ERR_NETWORK_CHANGED"] * ATTEMPTS)
    with pytest.raises(PlaywrightError, match="NETWORK_CHANGED"):
        again_on_network_change(goto, PlaywrightError)(None, "http://x/")
    assert len(calls) == ATTEMPTS


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_a_fetch_cut_short_excuses_one_failed_fetch_soon_after():
    clock = Clock()
    cut = CutRequests(clock)
    cut.request_failed("net::ERR_ABORTED")  # the test left the page while it loaded
    clock.now += 1
    assert cut.excuses("lab: Failed to load toolbar items TypeError: Failed to fetch")
    assert not cut.excuses("lab: Failed to load toolbar items TypeError: Failed to fetch")  # one each
    assert cut.excuses("lab: Failed to load resource: net::ERR_NETWORK_CHANGED")  # Chromium's line
    clock.now += 2
    assert cut.excuses("lab: TypeError: Failed to fetch")
    cut.request_failed("net::ERR_ABORTED")
    clock.now += WINDOW_S + 1
    assert not cut.excuses("TypeError: Failed to fetch")  # too long ago to be its cause
    assert len(cut.excused) == 2


def test_other_failures_and_other_errors_are_the_pages():
    cut = CutRequests(Clock())
    cut.request_failed("net::ERR_CONNECTION_RESET")
    cut.request_failed("net::ERR_NETWORK_CHANGED")  # said on the console, counted there
    cut.request_failed(None)
    assert not cut.excuses("TypeError: Failed to fetch")
    cut.request_failed("net::ERR_ABORTED")
    assert not cut.excuses("Uncaught ReferenceError: x is not defined")
    assert cut.excuses("TypeError: Failed to fetch")
