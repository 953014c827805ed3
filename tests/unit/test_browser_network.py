"""The browser tests' answer to Chromium's net::ERR_NETWORK_CHANGED (tests/browser/network.py)."""

import pytest

from tests.browser.network import ATTEMPTS, again_on_network_change


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
