"""Runs beside a workspace (#31): a task on a JupyterHub server of its own, started while the workspace is
open and beside its other runs; from the open home as it is now, or a saved output; a branch of the
workspace's lineage that "latest" never continues from. A real hub, real containers, a btrfs store."""

from __future__ import annotations

import json
import time

import pytest
import requests

from workspace.store.homes import store_for

from .hub import Hub

TYPES = [
    {"name": "standard", "description": "no limit"},
    {"name": "single", "description": "one at a time", "capacity": 1},
]


@pytest.fixture(scope="module")
def runs_hub(start_hub) -> Hub:
    # the culler removes the hub's records of ended runs every cycle
    return start_hub(
        WORKSPACE_CULL_INTERVAL="1",
        WORKSPACE_RESOURCE_TYPES=json.dumps(TYPES),
        WORKSPACE_DEFAULT_RESOURCE_TYPE="standard",
    )


def checkpoints(hub: Hub) -> dict[str, bool]:
    """The snapshots runs from `now` took of open homes: {key: whether the store still holds it}, of
    those the records do not say deleted."""
    from workspace.db import Database
    from workspace.executions import Snapshot

    store = store_for(hub.settings.store_dir, clean=False)
    with Database(hub.settings.db_url, migrate=False, key_file=hub.settings.secret_key_file).session() as s:
        keys = [k for (k,) in s.query(Snapshot.key).filter(Snapshot.deleted.is_(None)) if k.startswith("c")]
    return {k: store.has_snapshot(k) for k in keys}


def run(hub: Hub, token: str, name: str, command: str, status: int = 202, **body) -> dict:
    r = hub.service_call("POST", f"/workspaces/{name}/runs", token, json={"command": command, **body})
    assert r.status_code == status, r.text
    return r.json()


def record(hub: Hub, user: str, name: str, number: int) -> dict:
    return next(e for e in hub.executions(user, name) if e["number"] == number)


def wait_ended(hub: Hub, user: str, name: str, number: int, timeout: float = 120) -> dict:
    deadline = time.monotonic() + timeout
    while (ex := record(hub, user, name, number))["state"] not in ("stopped", "failed"):
        assert time.monotonic() < deadline, ex
        time.sleep(0.3)
    return ex


def output_file(hub: Hub, token: str, name: str, number: int, path: str) -> str | None:
    """A file of execution #number's saved output (None: not there)."""
    r = hub.service_call("GET", f"/workspaces/{name}/executions/{number}/files/{path}?inline=1", token)
    if r.status_code == 404:
        return None
    assert r.status_code == 200, r.text
    return r.text


def servers(hub: Hub, user: str) -> dict:
    return hub.api("GET", f"/users/{user}?include_stopped_servers=1").json().get("servers") or {}


def test_a_run_from_now_sees_the_open_home_and_never_changes_the_workspace(runs_hub: Hub):
    hub, user, name = runs_hub, "rhea", "thesis"
    token = hub.user_token(user)
    hub.start_workspace(user, name, token)
    hub.sh(user, name, "echo draft-3 > ~/unsaved.txt")  # written in the open workspace, not saved yet
    started = run(hub, token, name, "cat unsaved.txt > seen.txt; echo mine > run-only.txt", **{"from": "now"})
    ex = started["execution"]
    assert ex["beside"] and ex["kind"] == "task" and ex["parent"] == 1, started
    assert started["server"].startswith("run-") and started["server"] != name
    done = wait_ended(hub, user, name, ex["number"])
    assert done["state"] == "stopped" and done["exit_code"] == 0, done
    assert output_file(hub, token, name, ex["number"], "seen.txt").strip() == "draft-3"
    assert checkpoints(hub) == {}  # the snapshot of the open home went once the run's home held it
    # the workspace was not disturbed: still open, its home without the run's file
    assert servers(hub, user)[name]["ready"]
    assert "run-only" not in hub.sh(user, name, "ls ~")
    listed = {w["name"]: w for w in hub.service_call("GET", "/workspaces", token).json()}
    assert list(listed) == [name] and listed[name]["current"] == {"number": 1, "state": "running"}, listed
    # the workspace's next start continues from its own save, never from the run
    hub.stop_workspace(user, name, token)
    events = hub.start_workspace(user, name, token)
    assert any("continues from #1" in (e.get("message") or "") for e in events), events
    listing = hub.sh(user, name, "ls ~")
    assert "unsaved.txt" in listing and "run-only" not in listing and "seen.txt" not in listing
    hub.stop_workspace(user, name, token)
    # the ended run's own server leaves the hub's records (the culler), so runs never fill its limit
    deadline = time.monotonic() + 30
    while started["server"] in servers(hub, user):
        assert time.monotonic() < deadline, servers(hub, user)
        time.sleep(0.5)


def test_three_runs_at_once_each_with_its_own_output(runs_hub: Hub):
    hub, user, name = runs_hub, "remy", "grid"
    token = hub.user_token(user)
    first = run_task_to_end(hub, token, user, name, "echo base > base.txt")
    numbers = [
        run(hub, token, name, f"echo {lr} > lr.txt; sleep 3", **{"from": "latest"})["execution"]["number"]
        for lr in ("0.1", "0.01", "0.001")
    ]
    assert len(set(numbers)) == 3
    running = {record(hub, user, name, n)["state"] for n in numbers}
    assert running & {"queued", "preparing", "pulling", "restoring", "running"}, running  # all asked at once
    for n, lr in zip(numbers, ("0.1", "0.01", "0.001")):
        assert wait_ended(hub, user, name, n)["exit_code"] == 0
        assert output_file(hub, token, name, n, "lr.txt").strip() == lr
        assert output_file(hub, token, name, n, "base.txt").strip() == "base"  # each from the latest: #first
        assert record(hub, user, name, n)["parent"] == first
    # a run's output is a branch: "latest" is still the workspace's own
    again = run(hub, token, name, "cat lr.txt 2>/dev/null || echo none > lr-seen.txt", **{"from": "latest"})
    wait_ended(hub, user, name, again["execution"]["number"])
    assert again["execution"]["parent"] == first
    # continuing from a run is asked by its number
    picked = run(hub, token, name, "cp lr.txt picked.txt", **{"from": numbers[1]})
    wait_ended(hub, user, name, picked["execution"]["number"])
    assert output_file(hub, token, name, picked["execution"]["number"], "picked.txt").strip() == "0.01"


def run_task_to_end(hub: Hub, token: str, user: str, name: str, command: str) -> int:
    r = hub.service_call("POST", f"/workspaces/{name}/tasks", token, json={"command": command})
    assert r.status_code == 202, r.text
    number = r.json()["execution"]["number"]
    assert wait_ended(hub, user, name, number)["exit_code"] == 0
    hub.wait_stopped(user, name)
    return number


def test_bad_runs_are_refused_with_a_sentence_and_change_nothing(runs_hub: Hub):
    hub, user = runs_hub, "rosa"
    token = hub.user_token(user)
    run_task_to_end(hub, token, user, "mine", "true")
    before = hub.executions(user, "mine")
    for body, status, words in [
        ({"command": "true", "from": "now"}, 409, "not open"),  # nothing open to take a snapshot of
        ({"command": "true", "from": 9}, 400, "no execution #9"),
        ({"command": "", "from": "latest"}, 400, "command"),
        ({"command": "true", "continue": 1}, 400, "Unknown field"),
    ]:
        r = hub.service_call("POST", "/workspaces/mine/runs", token, json=body)
        assert r.status_code == status and words in r.json()["message"], (body, r.text)
    r = hub.service_call("POST", "/workspaces/nothing/runs", token, json={"command": "true"})
    assert r.status_code == 404 and "no workspace" in r.json()["message"], r.text
    assert hub.executions(user, "nothing") == []  # no workspace was made by a refused run
    assert hub.executions(user, "mine") == before
    # a run's name is the platform's: no workspace may take it
    r = hub.service_call("POST", "/workspaces/run-0123456789ab/tasks", token, json={"command": "true"})
    assert r.status_code == 400 and "the platform gives its own servers" in r.json()["message"], r.text
    # nor "now" for the workspace's own start (only a run has an open home beside it)
    r = hub.service_call("POST", "/workspaces/mine/tasks", token, json={"command": "true", "continue_from": "now"})
    assert r.status_code == 400 and "runs beside" in r.json()["message"], r.text


def test_attack_another_user_cannot_run_beside_read_or_cancel_a_run(runs_hub: Hub):
    hub, owner, other = runs_hub, "ruth", "mallory"
    token, theirs = hub.user_token(owner), hub.user_token(other)
    run_task_to_end(hub, token, owner, "secret", "echo s3cret > key.txt")
    started = run(hub, token, "secret", "sleep 60", **{"from": "latest"})
    number, server = started["execution"]["number"], started["server"]
    # their API: another's workspace is not theirs to run beside, read or cancel
    r = hub.service_call("POST", f"/workspaces/secret/runs?user={owner}", theirs, json={"command": "cat key.txt"})
    assert r.status_code in (403, 404), r.text
    for method, path in [
        ("GET", f"/workspaces/secret/executions/{number}/logs?user={owner}"),
        ("POST", f"/workspaces/secret/executions/{number}/cancel?user={owner}"),
    ]:
        r = hub.service_call(method, path, theirs)
        assert r.status_code in (403, 404), (path, r.text)
    # the hub's: a run server of another's is not theirs to stop or reach
    headers = {"Authorization": f"token {theirs}"}
    r = requests.delete(f"{hub.url}/hub/api/users/{owner}/servers/{server}", headers=headers, timeout=30)
    assert r.status_code in (403, 404), r.text
    # a run server of their own "beside" the other's workspace name runs beside their own workspace only
    r = requests.post(
        f"{hub.url}/hub/api/users/{other}/servers/run-00000000abcd",
        headers=headers,
        json={"user_options": {"task": {"command": "cat key.txt"}, "beside": "secret"}},
        timeout=60,
    )
    assert r.status_code == 404 and "no workspace" in r.json()["message"], r.text
    # and a server named as a run must say what it is beside
    r = requests.post(
        f"{hub.url}/hub/api/users/{other}/servers/run-00000000abce",
        headers=headers,
        json={"user_options": {"task": {"command": "true"}}},
        timeout=60,
    )
    assert r.status_code == 400 and "beside" in r.json()["message"], r.text
    assert record(hub, owner, "secret", number)["state"] in ("queued", "preparing", "restoring", "running")
    r = hub.service_call("POST", f"/workspaces/secret/executions/{number}/cancel", token)
    assert r.status_code == 202, r.text
    assert wait_ended(hub, owner, "secret", number)["stop_reason"] == "user"


def test_the_page_runs_beside_the_open_workspace_by_a_post_with_the_xsrf_token(runs_hub: Hub):
    hub, user, name = runs_hub, "rory", "lab"
    token = hub.user_token(user)
    hub.start_workspace(user, name, token)
    hub.sh(user, name, "echo from-the-page > ~/note.txt")
    browser = hub.browser_login(user)
    page = f"{hub.url}/services/workspace/workspaces/{name}"
    shown = browser.get(page, timeout=30)
    assert shown.status_code == 200 and 'id="run-beside"' in shown.text, shown.text[:500]
    form = {"action": "run", "command": "cp note.txt copied.txt", "from": "now"}
    # a page of another site cannot start one (no XSRF token): nothing is recorded
    forged = browser.post(page, data=form, allow_redirects=False, timeout=30)
    assert forged.status_code == 403, forged.text[:300]
    assert [e["number"] for e in hub.executions(user, name)] == [1]
    xsrf = browser.cookies.get("_xsrf", path="/services/workspace/")
    r = browser.post(page, data={**form, "_xsrf": xsrf}, allow_redirects=False, timeout=60)
    assert r.status_code == 302, r.text[:300]
    (ran,) = [e for e in hub.executions(user, name) if e["beside"]]
    assert wait_ended(hub, user, name, ran["number"])["exit_code"] == 0
    assert output_file(hub, token, name, ran["number"], "copied.txt").strip() == "from-the-page"
    shown = browser.get(page, timeout=30).text
    assert 'class="badge text-bg-light border ms-1 beside"' in shown and 'id="open"' in shown  # still open
    hub.stop_workspace(user, name, token)


def test_a_run_from_now_stopped_while_it_waits_leaves_no_snapshot_behind(runs_hub: Hub):
    hub, user, name = runs_hub, "rita", "queue"
    token = hub.user_token(user)
    hub.start_workspace(user, name, token, resource_type="single")  # the type's one place is taken
    started = run(hub, token, name, "true", **{"from": "now", "resource_type": "single"})
    number = started["execution"]["number"]
    assert record(hub, user, name, number)["state"] == "queued"
    (key,) = checkpoints(hub)  # taken at the request, before its turn
    r = hub.service_call("POST", f"/workspaces/{name}/executions/{number}/cancel", token)
    assert r.status_code == 202, r.text
    ended = wait_ended(hub, user, name, number)
    assert ended["state"] == "stopped" and not ended["has_output"], ended
    assert checkpoints(hub) == {}
    hub.stop_workspace(user, name, token)
