"""The activity series: what ran and waited at each moment, from the executions' own records."""

from __future__ import annotations

import datetime as dt

import pytest

from workspace.errors import UserError
from workspace.executions import Execution, Transition, get_or_create_workspace
from workspace.reports import activity

NOW = dt.datetime(2026, 12, 5, 12, 0, 0)


def at(minutes_ago: float) -> dt.datetime:
    return NOW - dt.timedelta(minutes=minutes_ago)


def add(s, ws, number, created, admitted=None, started=None, stopped=None):
    ex = Execution(
        workspace_id=ws.id,
        number=number,
        live_key=f"l{number}",
        snapshot_key=f"s{number}",
        created=created,
        started=started,
        stopped=stopped,
        state="stopped" if stopped else "running",
    )
    s.add(ex)
    s.flush()
    s.add(Transition(execution_id=ex.id, state="queued", at=created))
    if admitted:
        s.add(Transition(execution_id=ex.id, state="starting", at=admitted))


def test_counts_what_ran_and_waited_at_each_moment(database):
    with database.session() as s:
        ws = get_or_create_workspace(s, "ada", "lab")
        add(s, ws, 1, at(50), admitted=at(50), started=at(49), stopped=at(21))  # ran 49..21 min ago
        add(s, ws, 2, at(35), admitted=at(12), started=at(11))  # waited 35..12, runs since 11
        add(s, ws, 3, at(8))  # waits still
        add(s, ws, 4, at(500), admitted=at(500), started=at(500), stopped=at(400))  # before the window
    out = activity.series(database, hours=1, step=600, now=NOW)
    assert len(out["at"]) == 7 and out["at"][-1].startswith("2026-12-05T12:00")
    # moments: 60, 50, 40, 30, 20, 10, 0 minutes ago
    assert out["running"] == [0, 0, 1, 1, 0, 1, 1]
    assert out["queued"] == [0, 0, 0, 1, 1, 0, 1]


@pytest.mark.parametrize(
    ("hours", "step"), [("0", None), ("-1", None), ("nan", None), ("x", None), (None, "5"), ("400", None), ("24", "60")]
)
def test_a_bad_window_is_the_users_400(hours, step):
    with pytest.raises(UserError) as e:
        activity.window(hours, step)
    assert e.value.status_code == 400


def test_the_default_window_is_the_last_day_in_five_minutes():
    assert activity.window(None, None) == (24.0, 300)
