"""The pages' figures: how long each state of an execution lasted."""

import datetime as dt

from workspace.service.pages import _timeline


def at(seconds: float) -> str:
    return (dt.datetime(2026, 12, 3, 8, 0) + dt.timedelta(seconds=seconds)).isoformat() + "Z"


def test_each_state_lasts_until_the_next_and_a_final_one_has_no_duration():
    ex = {
        "transitions": [
            {"state": "preparing", "at": at(0), "message": None},
            {"state": "running", "at": at(2.5), "message": None},
            {"state": "saving", "at": at(62.5), "message": "stopped by the user"},
            {"state": "stopped", "at": at(64), "message": None},
        ]
    }
    assert [(t["state"], t["seconds"]) for t in _timeline(ex)] == [
        ("preparing", 2.5),
        ("running", 60.0),
        ("saving", 1.5),
        ("stopped", None),
    ]


def test_the_current_state_lasts_until_now():
    started = (dt.datetime.now(dt.timezone.utc).replace(tzinfo=None) - dt.timedelta(seconds=30)).isoformat() + "Z"
    (running,) = _timeline({"transitions": [{"state": "running", "at": started, "message": None}]})
    assert 29 < running["seconds"] < 120
    assert _timeline({}) == []
