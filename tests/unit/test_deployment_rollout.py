"""The deployments' controller decisions (#33, workspace/deployments/rollout.py): pure, so every rule is
checked here on made-up views; the real controller, hub and replicas are tests/integration/test_deployments.py."""

from __future__ import annotations

import datetime as dt

from workspace import i18n
from workspace.deployments.rollout import DeploymentView, ReplicaView, Rules, plan

NOW = dt.datetime(2026, 12, 7, 12, 0, 0)
RULES = Rules(ready_timeout=600, failures_before_giving_up=3, drain_seconds=5, restart_backoff_max=60)


def said(kept: str) -> str:
    return i18n.said(i18n.DEFAULT, kept)


def replica(id, version=1, state="ready", run="running", **kw) -> ReplicaView:
    kw.setdefault("ready_at", NOW - dt.timedelta(hours=1) if state == "ready" else None)
    return ReplicaView(id=id, server=f"serve-{id:012x}", version=version, state=state, run_state=run, **kw)


def view(*replicas, replicas_wanted=2, serving=1, rolling=None, **kw) -> DeploymentView:
    return DeploymentView(
        id=1,
        running=kw.pop("running", True),
        deleted=kw.pop("deleted", False),
        replicas=replicas_wanted,
        serving=serving,
        rolling=rolling,
        rolling_since=kw.pop("rolling_since", NOW - dt.timedelta(seconds=10)),
        replica_list=list(replicas),
        **kw,
    )


def test_a_new_deployment_records_its_replicas_and_asks_for_them():
    p = plan(view(serving=None, rolling=1), NOW, RULES)
    assert p.new == [(1, 0, None), (1, 0, None)]
    assert not p.ask and not p.stop and not p.remove


def test_waiting_replicas_are_asked_for_once_their_backoff_has_passed():
    due = replica(1, state="waiting", run=None)
    later = replica(2, state="waiting", run=None, not_before=NOW + dt.timedelta(seconds=4))
    p = plan(view(due, later), NOW, RULES)
    assert [r.id for r in p.ask] == [1] and p.changes[1]["state"] == "starting"
    assert 2 not in p.changes and not p.new


def test_a_replica_that_answers_is_ready_and_one_that_stops_answering_gets_no_requests():
    starting = replica(1, state="starting", check=True)
    failing = replica(2, failed_checks=2, check=False)
    p = plan(view(starting, failing), NOW, RULES)
    assert p.changes[1]["state"] == "ready" and p.changes[1]["ready_at"] == NOW
    assert p.changes[2] == {"failed_checks": 3, "state": "unready"}
    back = plan(view(replica(3, state="unready", failed_checks=3, check=True)), NOW, RULES)
    assert back.changes[3]["state"] == "ready" and back.changes[3]["failed_checks"] == 0


def test_a_replica_that_died_serving_is_replaced_at_once_one_that_dies_young_after_a_backoff():
    old = replica(1, run="stopped", run_detail="killed")
    young = replica(2, run="failed", ready_at=NOW - dt.timedelta(seconds=5), restarts=3)
    p = plan(view(old, young), NOW, RULES)
    assert sorted(p.forget) == [1, 2] and p.restarted == 2
    assert (1, 1, None) in p.new  # served for an hour: at once
    assert (1, 4, NOW + dt.timedelta(seconds=8)) in p.new  # 4th restart in a row: 2**3 s
    assert "ended (" in said(p.deployment["message"])


def test_the_backoff_stops_doubling_at_its_maximum():
    p = plan(view(replica(1, run="failed", ready_at=NOW, restarts=20), replicas_wanted=1), NOW, RULES)
    assert p.new == [(1, 21, NOW + dt.timedelta(seconds=60))]


def test_a_new_version_is_promoted_once_all_its_replicas_are_ready_and_the_old_one_drains():
    old = [replica(1), replica(2)]
    new = [replica(3, version=2, state="starting", check=True), replica(4, version=2, state="ready")]
    p = plan(view(*old, *new, rolling=2), NOW, RULES)
    assert p.deployment["serving"] == 2 and p.deployment["rolling"] is None
    assert p.versions[1]["state"] == "retired" and p.versions[2]["state"] == "serving"
    for r in (1, 2):  # out of the router's table now, stopped after drain_seconds
        assert p.changes[r] == {"state": "draining", "not_before": NOW + dt.timedelta(seconds=5)}
    assert not p.stop


def test_a_new_version_half_ready_waits_and_the_old_one_serves_on():
    old = [replica(1), replica(2)]
    new = [replica(3, version=2, state="ready"), replica(4, version=2, state="starting")]
    p = plan(view(*old, *new, rolling=2), NOW, RULES)
    assert "serving" not in p.deployment and not p.changes and not p.new


def test_the_first_version_serves_as_soon_as_one_replica_is_ready():
    p = plan(view(replica(1), replica(2, state="starting"), serving=None, rolling=1), NOW, RULES)
    assert p.deployment["serving"] == 1 and p.deployment["last_request"] == NOW  # idle counts from now


def test_a_version_whose_replicas_keep_ending_is_given_up_and_the_old_one_serves_on():
    old = [replica(1), replica(2)]
    dying = replica(3, version=2, state="starting", run="failed", run_detail="exit code 1")
    p = plan(view(*old, dying, rolling=2, failed_starts={2: 2}), NOW, RULES)
    assert p.versions[2]["state"] == "failed" and "exit code 1" in said(p.versions[2]["failure"])
    assert p.deployment["rolling"] is None and "Version 1 goes on serving" in said(p.deployment["message"])
    assert "3 times" in said(p.deployment["message"])
    assert not any(v == 2 for v, _, _ in p.new)  # not started again
    assert all(r not in p.changes for r in (1, 2))  # the old ones untouched


def test_a_version_not_ready_in_time_is_given_up_and_its_replicas_stop():
    old = [replica(1), replica(2)]
    slow = replica(3, version=2, state="starting")
    since = NOW - dt.timedelta(seconds=601)
    p = plan(view(*old, slow, rolling=2, rolling_since=since), NOW, RULES)
    assert "within 600 seconds" in said(p.versions[2]["failure"])
    assert p.changes[3]["state"] == "stopping" and [r.id for r in p.stop] == [3]  # never served: at once


def test_scaling_down_drains_the_least_useful_replica_first():
    p = plan(view(replica(1), replica(2), replica(3, state="starting"), replicas_wanted=2), NOW, RULES)
    assert p.changes == {3: {"state": "stopping", "not_before": NOW + dt.timedelta(seconds=30)}}


def test_a_stopped_deployment_drains_all_and_a_deleted_one_goes_once_nothing_runs():
    p = plan(view(replica(1), replica(2, state="waiting", run=None), running=False), NOW, RULES)
    assert p.changes[1]["state"] == "draining" and 2 in p.forget and not p.new and not p.remove
    gone = plan(view(replica(1, state="stopping", run="stopped"), deleted=True, running=False), NOW, RULES)
    assert gone.forget == [1] and gone.remove and gone.restarted == 0  # stopped on purpose: not a restart


def test_an_idle_deployment_sleeps_and_a_request_wakes_it():
    idle = view(replica(1), replica(2), idle_seconds=60, last_request=NOW - dt.timedelta(seconds=61))
    p = plan(idle, NOW, RULES)
    assert p.deployment["asleep"] is True and {p.changes[1]["state"], p.changes[2]["state"]} == {"draining"}
    asleep = plan(view(serving=1, asleep=True, idle_seconds=60), NOW, RULES)
    assert not asleep.new
    woken = plan(view(serving=1, asleep=True, woken=NOW, idle_seconds=60), NOW, RULES)
    assert woken.deployment == {"asleep": False, "woken": None, "last_request": NOW} and len(woken.new) == 2
    busy = plan(view(replica(1), replica(2), idle_seconds=60, last_request=NOW), NOW, RULES)
    assert "asleep" not in busy.deployment
