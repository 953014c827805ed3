"""Accounting from the execution records, with a movable clock and a real SQLite database."""

import datetime as dt

import pytest

from workspace.db import freeze_clock, move_clock, utcnow
from workspace.errors import UserError
from workspace.executions import Execution, UsageSample, get_or_create_workspace, new_execution
from workspace.reports import accounting


@pytest.fixture
def db(database):
    return database


@pytest.fixture
def clock():
    # frozen: only the test moves time, so a slow machine adds nothing to a run time
    freeze_clock()
    moved = dt.timedelta(0)

    def advance(**kw):
        nonlocal moved
        delta = dt.timedelta(**kw)
        move_clock(delta)
        moved += delta

    yield advance
    move_clock(-moved)
    freeze_clock(False)


def start(db, owner, cpu=None, gpus=()):
    with db.session() as s:
        ex = new_execution(s, get_or_create_workspace(s, owner, "ws"), None, None)
        ex.cpu, ex.gpu_ids = cpu, list(gpus)
        for state in ("preparing", "restoring", "running"):
            ex.to(s, state)
        return ex.id


def stop(db, execution_id):
    with db.session() as s:
        ex = s.get(Execution, execution_id)
        ex.to(s, "saving")
        ex.to(s, "stopped")


def sample(db, execution_id, cpu_percent):
    with db.session() as s:
        s.add(UsageSample(execution_id=execution_id, at=utcnow(), cpu_percent=cpu_percent))


def report(db, owners=None, since=None, until=None):
    with db.session() as s:
        return accounting.report(s, owners, since, until)


def test_hours_are_cores_and_gpus_times_run_time_until_the_save_began(db, clock):
    a = start(db, "ann", cpu=4, gpus=["0", "1"])
    clock(minutes=30)
    sample(db, a, 50.0)  # half a core for the first 30 min
    clock(minutes=30)
    sample(db, a, 100.0)
    stop(db, a)
    clock(hours=5)  # stopped: time no longer counts
    b = start(db, "bob")  # no CPU limit: charged what it used
    clock(hours=1)
    sample(db, b, 200.0)
    r = report(db)
    ann, bob = r["executions"]
    assert ann["runtime_s"] == 3600 and ann["cpu_hours"] == 4 and ann["gpu_hours"] == 2
    assert ann["cpu_used_hours"] == pytest.approx(0.75, abs=1e-3)
    assert bob["state"] == "running" and bob["cpu_hours"] == pytest.approx(2.0, abs=1e-3)
    assert {u["user"]: u["executions"] for u in r["users"]} == {"ann": 1, "bob": 1}
    assert report(db, ["ann"])["users"][0]["gpu_hours"] == 2


def test_a_period_counts_only_the_part_inside(db, clock):
    t0 = utcnow()
    a = start(db, "ann", cpu=2)
    clock(hours=2)
    stop(db, a)
    r = report(db, since=t0 + dt.timedelta(hours=1), until=t0 + dt.timedelta(hours=5))
    assert r["executions"][0]["runtime_s"] == pytest.approx(3600, abs=1) and r["users"][0]["cpu_hours"] == 2
    assert report(db, since=t0 + dt.timedelta(hours=3))["executions"] == []


def test_a_start_that_never_ran_costs_nothing_and_bad_periods_are_400(db):
    with db.session() as s:
        new_execution(s, get_or_create_workspace(s, "ann", "ws"), None, None)
    assert report(db)["executions"] == []
    with pytest.raises(UserError) as e:
        accounting.parse_time("yesterday", "since")
    assert e.value.status_code == 400 and "2026-12-01" in e.value.jupyterhub_message
    assert accounting.parse_time("2026-12-01T08:00:00+01:00", "since") == dt.datetime(2026, 12, 1, 7)
    with pytest.raises(UserError):
        report(db, since=dt.datetime(2026, 12, 2), until=dt.datetime(2026, 12, 1))
