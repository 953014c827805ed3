"""Sweeps (#31): one command once per combination of parameters, each a run beside the workspace, waiting
in the queue as capacity allows; the sweep's page and API list them (state, place in the queue, exit
code, duration, last log line), cancel them all, and hand every output over as one archive. A real hub,
real containers, a btrfs store."""

from __future__ import annotations

import io
import json
import os
import subprocess
import tarfile
import time

import pytest

from .hub import Hub
from .test_runs import run_task_to_end
from .test_tasks import WORKSPACE

TYPES = [
    {"name": "standard", "description": "no limit"},
    {"name": "pair", "description": "two at a time", "capacity": 2},
]
ACTIVE = ("starting", "queued", "preparing", "pulling", "restoring", "running", "saving")


@pytest.fixture(scope="module")
def sweeps_hub(start_hub) -> Hub:
    return start_hub(
        WORKSPACE_CULL_INTERVAL="1",
        WORKSPACE_RESOURCE_TYPES=json.dumps(TYPES),
        WORKSPACE_DEFAULT_RESOURCE_TYPE="standard",
        WORKSPACE_MAX_RUNS="8",
    )


def sweep(hub: Hub, token: str, name: str, command: str, params: dict, status: int = 202, **body) -> dict:
    r = hub.service_call(
        "POST", f"/workspaces/{name}/sweeps", token, json={"command": command, "sweep": params, **body}
    )
    assert r.status_code == status, r.text
    return r.json()


def read(hub: Hub, token: str, name: str, number: int) -> dict:
    r = hub.service_call("GET", f"/workspaces/{name}/sweeps/{number}", token)
    assert r.status_code == 200, r.text
    return r.json()


def wait_done(hub: Hub, token: str, name: str, number: int, timeout: float = 240) -> dict:
    deadline = time.monotonic() + timeout
    while not (s := read(hub, token, name, number))["done"]:
        assert time.monotonic() < deadline, s
        time.sleep(1)
    return s


def test_a_sweep_of_six_on_a_type_of_two_runs_two_and_queues_four_with_positions(sweeps_hub: Hub):
    hub, user, name = sweeps_hub, "sven", "grid"
    token = hub.user_token(user)
    run_task_to_end(hub, token, user, name, "echo base > base.txt")
    command = "echo lr={lr} seed={seed} > params.txt; sleep 6; echo done {lr} {seed}"
    started = sweep(hub, token, name, command, {"lr": ["0.1", "0.01", "0.001"], "seed": [1, 2]}, resource_type="pair")
    assert started["number"] == 1 and started["runs_total"] == 6, started
    assert [r["params"] for r in started["runs"]][:2] == [{"lr": "0.1", "seed": "1"}, {"lr": "0.1", "seed": "2"}]
    # while the first two run, the other four wait in the type's line, each with its place
    seen_positions = set()
    deadline = time.monotonic() + 120
    while True:
        now = read(hub, token, name, 1)
        holding = [r for r in now["runs"] if r["state"] in ("preparing", "pulling", "restoring", "running", "saving")]
        waiting = [r for r in now["runs"] if r["state"] == "queued"]
        assert len(holding) <= 2, now  # never more than the type allows
        if len(holding) == 2 and len(waiting) == 4:
            seen_positions = {(r["queue"]["position"], r["queue"]["waiting"]) for r in waiting}
            break
        assert time.monotonic() < deadline, now
        time.sleep(0.3)
    assert seen_positions == {(1, 4), (2, 4), (3, 4), (4, 4)}, now
    done = wait_done(hub, token, name, 1)
    assert done["succeeded"] == 6 and done["states"] == {"stopped": 6}, done
    for r in done["runs"]:
        assert r["exit_code"] == 0 and r["seconds"] >= 6, r
        assert r["last_line"] == f"done {r['params']['lr']} {r['params']['seed']}", r
        assert r["label"] == f"lr={r['params']['lr']} seed={r['params']['seed']}"
    # every run's output in one archive, a folder per run with its parameters, and the manifests
    r = hub.service_call("GET", f"/workspaces/{name}/sweeps/1/outputs", token)
    assert r.status_code == 200, r.text[:300]
    with tarfile.open(fileobj=io.BytesIO(r.content), mode="r:gz") as tar:
        files = {m.name: tar.extractfile(m).read().decode() for m in tar.getmembers() if m.isfile()}
    for i, r in enumerate(done["runs"], 1):
        lr, seed = r["params"]["lr"], r["params"]["seed"]
        folder = f"{name}-sweep-1/runs/{i:02d}_lr={lr}_seed={seed}"
        assert files[f"{folder}/params.txt"].strip() == f"lr={lr} seed={seed}", sorted(files)
        assert files[f"{folder}/base.txt"].strip() == "base"  # each from the latest output
    manifest = json.loads(files[f"{name}-sweep-1/sweep.json"])
    assert [row["status"] for row in manifest["runs"]] == ["collected"] * 6
    assert manifest["command"] == command and manifest["params"] == {"lr": ["0.1", "0.01", "0.001"], "seed": ["1", "2"]}
    # the runs are branches: the workspace's latest is still its own
    listed = hub.service_call("GET", f"/workspaces/{name}/sweeps", token).json()
    assert [(s["number"], s["done"]) for s in listed] == [(1, True)]


def test_cancel_stops_every_run_of_a_sweep_running_or_waiting(sweeps_hub: Hub):
    hub, user, name = sweeps_hub, "sia", "long"
    token = hub.user_token(user)
    run_task_to_end(hub, token, user, name, "true")
    sweep(hub, token, name, "sleep 600 # {i}", {"i": [1, 2, 3]}, resource_type="pair")
    deadline = time.monotonic() + 120
    while sum(r["state"] == "running" for r in read(hub, token, name, 1)["runs"]) < 2:
        assert time.monotonic() < deadline
        time.sleep(0.5)
    r = hub.service_call("POST", f"/workspaces/{name}/sweeps/1/cancel", token)
    assert r.status_code == 202 and r.json()["cancelled"] == 3, r.text
    done = wait_done(hub, token, name, 1, timeout=120)
    assert done["cancelled"] and done["states"] == {"stopped": 3}, done
    assert all(r["detail"] for r in done["runs"]), done  # how each ended is said


def test_bad_sweeps_are_refused_whole_and_change_nothing(sweeps_hub: Hub):
    hub, user, name = sweeps_hub, "saul", "mine"
    token = hub.user_token(user)
    run_task_to_end(hub, token, user, name, "true")
    before = hub.executions(user, name)
    for params, extra, status, words in [
        ({"lr": ["1", "2"]}, {}, 400, "never uses the sweep parameter “lr”"),
        ({"a": ["1", "2", "3"], "b": ["1", "2", "3"]}, {}, 400, "would make 9 runs; at most 8"),
        ({"a": ["1"]}, {"resource_type": "nope"}, 400, "nope"),  # the hub refuses the first run: nothing kept
        ({"a": ["1"]}, {"from": 7}, 400, "no execution #7"),
        ({"a": "1"}, {}, 400, "list of values"),
    ]:
        command = "echo {a} {b}" if "b" in params else "echo {a}"
        r = hub.service_call(
            "POST", f"/workspaces/{name}/sweeps", token, json={"command": command, "sweep": params, **extra}
        )
        assert r.status_code == status and words in r.json()["message"], (params, extra, r.text)
    r = hub.service_call("POST", "/workspaces/nothing/sweeps", token, json={"command": "echo {a}", "sweep": {"a": [1]}})
    assert r.status_code == 404, r.text
    assert hub.executions(user, name) == before
    assert hub.service_call("GET", f"/workspaces/{name}/sweeps", token).json() == []
    # the runs' bound (8 here): a sweep that would pass it is refused before anything starts
    sweep(hub, token, name, "sleep 600 # {i}", {"i": list(range(6))}, resource_type="pair")
    r = hub.service_call(
        "POST", f"/workspaces/{name}/sweeps", token, json={"command": "echo {i}", "sweep": {"i": [1, 2, 3]}}
    )
    assert r.status_code == 429 and "You have 6 runs waiting or running and may have 8" in r.json()["message"], r.text
    assert [s["number"] for s in hub.service_call("GET", f"/workspaces/{name}/sweeps", token).json()] == [1]
    assert hub.service_call("POST", f"/workspaces/{name}/sweeps/1/cancel", token).status_code == 202
    wait_done(hub, token, name, 1, timeout=120)


def test_attack_another_user_cannot_read_cancel_or_download_a_sweep(sweeps_hub: Hub):
    hub, owner, other = sweeps_hub, "selma", "mallory"
    token, theirs = hub.user_token(owner), hub.user_token(other)
    run_task_to_end(hub, token, owner, "secret", "echo s3cret > key.txt")
    sweep(hub, token, "secret", "sleep 300 # {i}", {"i": [1, 2]})
    for method, path in [
        ("GET", "/workspaces/secret/sweeps/1"),
        ("GET", "/workspaces/secret/sweeps"),
        ("POST", "/workspaces/secret/sweeps/1/cancel"),
        ("GET", "/workspaces/secret/sweeps/1/outputs"),
    ]:
        for suffix in (f"?user={owner}", ""):
            r = hub.service_call(method, path + suffix, theirs)
            # another's: 403; their own (none of that name): 404, or an empty list
            assert r.status_code in (403, 404) or (r.status_code == 200 and r.json() == []), (path, suffix, r.text)
    r = hub.service_call(
        "POST",
        f"/workspaces/secret/sweeps?user={owner}",
        theirs,
        json={"command": "cat {f}", "sweep": {"f": ["key.txt"]}},
    )
    assert r.status_code == 403, r.text
    # the pages: another's sweep page is refused; a cancel without the XSRF token is refused
    browser = hub.browser_login(other)
    page = f"{hub.url}/services/workspace/workspaces/secret/sweeps/1"
    assert browser.get(f"{page}?user={owner}", timeout=30).status_code == 403
    own = hub.browser_login(owner)
    shown = own.get(page, timeout=30)
    assert shown.status_code == 200 and 'id="cancel-sweep"' in shown.text, shown.text[:300]
    assert "sleep 300 # {i}" in shown.text and "i=2" in shown.text
    forged = own.post(page, data={"action": "cancel"}, allow_redirects=False, timeout=30)
    assert forged.status_code == 403, forged.text[:300]
    assert any(r["state"] in ACTIVE for r in read(hub, token, "secret", 1)["runs"])
    xsrf = own.cookies.get("_xsrf", path="/services/workspace/")
    r = own.post(page, data={"action": "cancel", "_xsrf": xsrf}, timeout=60)
    assert r.status_code == 200 and 'id="message"' in r.text, r.text[:300]
    assert wait_done(hub, token, "secret", 1, timeout=120)["cancelled"]


def test_the_workspace_page_starts_a_sweep_from_its_run_form(sweeps_hub: Hub):
    hub, user, name = sweeps_hub, "sora", "page"
    token = hub.user_token(user)
    hub.start_workspace(user, name, token)
    hub.sh(user, name, "echo open > ~/open.txt")
    browser = hub.browser_login(user)
    page = f"{hub.url}/services/workspace/workspaces/{name}"
    assert 'id="run-sweep"' in browser.get(page, timeout=30).text
    xsrf = browser.cookies.get("_xsrf", path="/services/workspace/")
    form = {"action": "run", "command": "cat open.txt > got-{x}.txt", "from": "now", "sweep": "x=a,b\n", "_xsrf": xsrf}
    r = browser.post(page, data=form, allow_redirects=False, timeout=60)
    assert r.status_code == 302 and r.headers["Location"].endswith(f"/workspaces/{name}/sweeps/1"), r.text[:300]
    done = wait_done(hub, token, name, 1)
    assert done["succeeded"] == 2, done
    shown = browser.get(page, timeout=30).text
    assert 'id="sweeps"' in shown and "2 runs, 2 finished successfully" in shown
    hub.stop_workspace(user, name, token)


def test_the_cli_starts_a_sweep_waits_for_it_and_downloads_its_outputs(sweeps_hub: Hub, tmp_path):
    hub, user, name = sweeps_hub, "saga", "cli"
    token = hub.user_token(user)
    run_task_to_end(hub, token, user, name, "true")
    env = dict(os.environ, WORKSPACE_URL=hub.url, WORKSPACE_TOKEN=token)
    started = [
        WORKSPACE,
        "run",
        name,
        "--sweep",
        "a=1,2",
        "--sweep",
        "b=x",
        "--",
        "sh",
        "-c",
        "echo a{a}b{b} > out.txt",
    ]
    p = subprocess.run(started, capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0 and f"sweep {name}#1: 2 runs" in p.stdout, (p.stdout, p.stderr)
    assert "2 runs, 2 finished successfully" in p.stdout, p.stdout  # it waited for them (no --detach)
    archive = tmp_path / "all.zip"
    p = subprocess.run(
        [WORKSPACE, "sweep", f"{name}#1", "--download", str(archive)], capture_output=True, text=True, env=env
    )
    assert p.returncode == 0, p.stderr
    import zipfile

    with zipfile.ZipFile(archive) as z:
        got = {n: z.read(n).decode().strip() for n in z.namelist() if n.endswith("out.txt")}
    assert got == {
        f"{name}-sweep-1/runs/01_a=1_b=x/out.txt": "a1bx",
        f"{name}-sweep-1/runs/02_a=2_b=x/out.txt": "a2bx",
    }, got
    p = subprocess.run([WORKSPACE, "sweep", f"{name}#2"], capture_output=True, text=True, env=env)
    assert p.returncode == 1 and "no sweep #2" in p.stderr, p.stderr
