"""Faults together (#30): a burst of starts, writes, saves and tasks on the swarm while the hub, the proxy, the
hub's three services, a node's store agent, a worker's engine and a whole worker are killed, at random
(a seed: WORKSPACE_CHAOS_SEED reruns a schedule) but a bounded number of times in a bounded window.

Afterwards, once things settle, the invariants (docs/swarm.md, "Faults"):
1. no saved output lost or changed: each hashed as its execution stopped hashes the same at the end, and
   each file a workspace wrote before its save is in its output;
2. no GPU of a node held by two executions at once (checked all along, not only at the end);
3. nothing left without an execution: no swarm service or running container, no proxy route, no owner
   network (once everything stopped), no queued start;
4. the executions' states agree with the engines: each running execution has its running container on
   its node, and each running container a running execution.
A start that a fault made fail is allowed (counted) but must end in a final state.
"""

from __future__ import annotations

import json
import os
import random
import secrets
import threading
import time
from collections import Counter

import pytest
import requests

from tests.cluster import chaos
from tests.cluster.conftest import running_swarm_hub
from tests.cluster.test_swarm_workspaces import sh
from tests.integration.hub import Hub
from workspace.executions import ACTIVE, UNFINISHED
from workspace.limits.fit import HOLDING
from workspace.setup.cluster import Cluster
from workspace.spawner import networks

SEED = int(os.environ.get("WORKSPACE_CHAOS_SEED") or random.SystemRandom().randrange(1 << 31))
WINDOW_S = 100  # the faults' window; the load runs through it
USERS = ("chaos1", "chaos2", "chaos3", "chaos4")
TASKER = "chaostask"
TYPES = [{"name": "cpu", "description": "CPU only"}, {"name": "gpu1", "description": "one GPU", "gpus": 1}]
SETTLING = ("queued", "preparing", "pulling", "restoring", "saving", "save_failed")


@pytest.fixture(scope="module")
def chaos_hub(cluster: Cluster, tmp_path_factory):
    with running_swarm_hub(
        cluster,
        tmp_path_factory.mktemp("chaos-hub"),
        WORKSPACE_RESOURCE_TYPES=json.dumps(TYPES),
        WORKSPACE_GPU_DEVICE_MODE="env",
        CONFIGPROXY_AUTH_TOKEN=secrets.token_hex(16),  # the test reads the proxy's routes
    ) as hub:
        yield hub


class Run:
    """What the load did and saw, shared by its threads."""

    def __init__(self, cluster: Cluster, hub: Hub):
        self.cluster, self.hub = cluster, hub
        self.central = cluster.root / f"central-{hub.data_dir.name}" / "store"
        self.counts: Counter = Counter()
        self.written: list[tuple[int, str, str, bool]] = []  # (execution id, file, content, a task's)
        self.hashed: dict[str, tuple[dict, dict]] = {}  # snapshot key: (its record, its files' hashes)
        self.clashes: list[str] = []
        self.lock = threading.Lock()
        self.done = threading.Event()  # the watcher's end
        self.stop = threading.Event()  # the load's end

    def count(self, what: str, n: int = 1) -> None:
        with self.lock:
            self.counts[what] += n

    def note(self, who: str, e: BaseException) -> None:
        self.count("load errors")
        print(f"[chaos] {who}: {type(e).__name__}: {str(e)[:200]}")

    def latest(self, user: str, server: str) -> dict:
        return max(
            (r for r in chaos.records(self.hub) if (r["owner"], r["name"]) == (user, server)), key=lambda r: r["number"]
        )


def settle(hub: Hub, user: str, timeout: float = 120) -> None:
    """Stop whatever server of `user` the hub has (a start a fault interrupted may have finished since).
    Right after its restart the hub checks each server it had (`pending check`) and answers a stop with
    500 meanwhile (JupyterHub's own): asked again until the check is over."""
    deadline = time.monotonic() + timeout
    while servers := hub.api("GET", f"/users/{user}").json().get("servers", {}):
        assert time.monotonic() < deadline, f"the servers of {user} did not stop in {timeout} s: {servers}"
        for name in servers:
            r = hub.api("DELETE", f"/users/{user}/servers/{name}")
            if r.status_code in (202, 204):
                hub.wait_stopped(user, name, timeout=max(1.0, deadline - time.monotonic()))
        time.sleep(2)


def follow(hub: Hub, user: str, token: str, seconds: float) -> bool:
    """Follow a start's progress for at most `seconds` (its stream may say its place in the queue for
    longer); whether it said ready."""
    deadline = time.monotonic() + seconds
    url = f"{hub.url}/hub/api/users/{user}/servers/w/progress"
    with requests.get(url, headers={"Authorization": f"token {token}"}, stream=True, timeout=30) as r:
        for line in r.iter_lines(decode_unicode=True):
            if line and line.startswith("data:"):
                event = json.loads(line[5:])
                if event.get("ready") or event.get("failed"):
                    return bool(event.get("ready"))
            if time.monotonic() > deadline:
                return False
    return False


def workspaces(run: Run, user: str, rng: random.Random, until: float) -> None:
    """Start, write a file, wait a little, stop (a save); again until `until`, when the last one is left
    running (the engines are compared with the records then); whatever a fault breaks is counted and the
    next round begins by stopping what the hub still has."""
    hub, token = run.hub, None
    while time.monotonic() < until and not run.stop.is_set():
        try:
            token = token or hub.user_token(user)
            settle(hub, user)
            r = hub.spawn(user, "w", token, {"resource_type": rng.choice(("cpu", "cpu", "gpu1"))})
            if r.status_code not in (201, 202):
                run.count(f"starts refused ({r.status_code})")
                time.sleep(2)
                continue
            if not follow(hub, user, token, 120):
                run.count("starts failed")
                continue
            run.count("starts ok")
            ex, content = run.latest(user, "w"), secrets.token_hex(16)
            sh(run.cluster, hub, user, "w", f"printf %s {content} > ~/chaos-{ex['number']}.txt")
            with run.lock:
                run.written.append((ex["id"], f"chaos-{ex['number']}.txt", content, False))
            run.count("writes")
            time.sleep(rng.uniform(1, 5))
            if time.monotonic() >= until:
                return
            hub.stop_workspace(user, "w")
            run.count("stops")
        except Exception as e:
            run.note(user, e)
            time.sleep(3)


def tasks(run: Run, rng: random.Random, until: float) -> None:
    """A task now and then: it writes a file and sleeps; the next once it ended (or after a while)."""
    hub, token = run.hub, None
    while time.monotonic() < until and not run.stop.is_set():
        try:
            token = token or hub.user_token(TASKER)
            content = secrets.token_hex(16)
            r = hub.service_call(
                "POST",
                "/workspaces/job/tasks",
                token,
                json={"command": f"printf %s {content} > result.txt; sleep {rng.randint(3, 12)}"},
            )
            if r.status_code != 202:
                run.count(f"tasks refused ({r.status_code})")
                time.sleep(3)
                continue
            run.count("tasks")
            number = r.json()["execution"]["number"]
            ex = next(x for x in chaos.records(hub) if (x["owner"], x["name"], x["number"]) == (TASKER, "job", number))
            with run.lock:
                run.written.append((ex["id"], "result.txt", content, True))
            deadline = time.monotonic() + 60
            while run.latest(TASKER, "job")["state"] in ACTIVE and time.monotonic() < deadline:
                time.sleep(1)
        except Exception as e:
            run.note(TASKER, e)
            time.sleep(3)


def watch(run: Run) -> None:
    """All along: two executions never hold one GPU; each output is hashed as soon as it is saved."""
    while True:
        try:
            recs = chaos.records(run.hub)
            held: dict[tuple[str, str], int] = {}
            for r in recs:
                for gpu in r["gpu_ids"] if r["state"] in HOLDING else ():
                    other = held.setdefault((r["node"], gpu), r["id"])
                    if other != r["id"]:
                        run.clashes.append(f"GPU {gpu} of {r['node']}: executions {other} and {r['id']}")
            for r in recs:
                if r["state"] == "stopped" and r["snapshot"] and r["snapshot"] not in run.hashed:
                    run.hashed[r["snapshot"]] = (r, chaos.hashes(chaos.output_path(run.cluster, run.central, r)))
        except Exception as e:
            run.note("watch", e)
        if run.done.wait(2):
            return


def inject(run: Run, faults: list[chaos.Fault], start: float) -> None:
    injector = chaos.Injector(run.cluster, run.hub)
    try:
        for fault in faults:
            time.sleep(max(0.0, start + fault.at - time.monotonic()))
            print(f"[chaos] fault at {time.monotonic() - start:5.1f} s: {fault}")
            injector.inject(fault)
            run.count(f"fault {fault.kind}")
    finally:
        injector.bring_back()  # everything of the cluster up again, even after a fault that failed


def wait_for(what: str, check, timeout: float) -> None:
    """Wait until check() says nothing is left (an empty answer); fail with what is left."""
    deadline = time.monotonic() + timeout
    while left := check():
        assert time.monotonic() < deadline, f"{what} did not happen in {timeout} s: {left}"
        time.sleep(1)


def test_faults_together_lose_no_output_and_leave_nothing_behind(cluster, chaos_hub):
    run, rng = Run(cluster, chaos_hub), random.Random(SEED)
    faults = chaos.schedule(SEED, WINDOW_S)
    print(f"\n[chaos] seed {SEED} (WORKSPACE_CHAOS_SEED={SEED} reruns it); faults:\n  " + "\n  ".join(map(str, faults)))
    start = time.monotonic()
    until = start + WINDOW_S + 10
    load = [
        threading.Thread(target=workspaces, args=(run, u, random.Random(rng.random()), until), daemon=True)
        for u in USERS
    ]
    load.append(threading.Thread(target=tasks, args=(run, random.Random(rng.random()), until), daemon=True))
    watcher = threading.Thread(target=watch, args=(run,), daemon=True)
    for t in [*load, watcher]:
        t.start()
    try:
        inject(run, faults, start)
        for t in load:  # a round ends within its start's, write's and stop's bounds
            t.join(max(1.0, until + 240 - time.monotonic()))
        run.stop.set()
        quiet_and_agreeing(run, faults)
        everything_stopped(run)
        run.done.set()
        watcher.join(60)
        run.count("GPU clashes", len(run.clashes))
        assert not run.clashes, run.clashes
        outputs_intact(run)
    finally:
        run.stop.set()
        run.done.set()
        counts = json.dumps(dict(sorted(run.counts.items())))
        print(f"[chaos] seed {SEED}, {time.monotonic() - start:.0f} s; counts: {counts}")
        for node in cluster.nodes:  # what a failure needs to be understood: an engine that did not come back
            if node.pid() is None:
                log = (node.dir / "dockerd.log").read_text(errors="replace")[-3000:]
                print(f"[chaos] the engine of {node.name} is down; the end of its log:\n{log}")


def quiet_and_agreeing(run: Run, faults: list[chaos.Fault]) -> None:
    """Once nothing is starting or saving: what was killed runs again, and the records agree with the engines."""
    hub = run.hub
    wait_for("every start and save ending", lambda: [r for r in chaos.records(hub) if r["state"] in SETTLING], 180)
    for kind in chaos.SERVICES:  # JupyterHub restarts its services (its poll: up to 30 s)
        wait_for(f"the hub restarting its {kind}", lambda k=kind: not chaos.service_pids(hub, k), 90)
    proxy = int((hub.data_dir / "run" / "proxy.pid").read_text())
    assert proxy not in [f.killed for f in faults] and os.path.exists(f"/proc/{proxy}")

    def disagreements() -> dict:
        """What the records and the engines disagree on now: containers without a running execution, and
        running executions without their container on their node."""
        recs = {r["id"]: r for r in chaos.records(hub)}
        running = {i: r for i, r in recs.items() if r["state"] == "running"}
        containers = {}
        for node in run.cluster.nodes:
            for c in node.client().containers.list(filters={"label": f"workspace.deployment={hub.deployment}"}):
                containers[int(c.labels["workspace.execution"])] = node.name
        orphans = {i: (n, recs.get(i)) for i, n in containers.items() if i not in running}
        missing = {i: r for i, r in running.items() if containers.get(i) != r["node"]}
        return {k: v for k, v in (("orphan containers", orphans), ("missing containers", missing)) if v}

    # a container a fault ended is noticed by the hub's poll of its server (every 30 s) and by the
    # reconciliation after a restart: the records agree with the engines within two polls, not at once
    wait_for("the records agreeing with the engines", disagreements, 90)
    recs = {r["id"]: r for r in chaos.records(hub)}
    run.count("running at the end of the faults", len([r for r in recs.values() if r["state"] == "running"]))
    services = run.cluster.manager.client().services.list(filters={"label": f"workspace.deployment={hub.deployment}"})
    stray = [
        s.name for s in services if recs[int(s.attrs["Spec"]["Labels"]["workspace.execution"])]["state"] not in ACTIVE
    ]
    run.count("orphan services", len(stray))
    assert not stray, f"swarm services of ended executions: {stray}"
    routes_match_servers(run)


def routes_match_servers(run: Run) -> None:
    """No proxy route to a server the hub does not have running."""
    stray = []
    for spec, route in chaos.proxy_routes(run.hub).items():
        data = route.get("data") or {}
        if "user" not in data:
            continue  # the hub's and the services' routes
        servers = run.hub.api("GET", f"/users/{data['user']}").json().get("servers", {})
        if not servers.get(data.get("server_name", ""), {}).get("ready"):
            stray.append(spec)
    run.count("orphan routes", len(stray))
    assert not stray, f"proxy routes to servers not running: {stray}"


def everything_stopped(run: Run) -> None:
    """Every server stopped: nothing of any execution is left on the swarm or in the queue."""
    hub = run.hub
    for user in (*USERS, TASKER):
        settle(hub, user)
    wait_for("every execution ending", lambda: [r for r in chaos.records(hub) if r["state"] in UNFINISHED], 120)
    manager = run.cluster.manager.client()
    label = f"workspace.deployment={hub.deployment}"
    wait_for("the services' removal", lambda: [s.name for s in manager.services.list(filters={"label": label})], 60)
    for node in run.cluster.nodes:
        assert not node.client().containers.list(filters={"label": label}), f"containers left running on {node.name}"
    # an owner's network goes once the swarm lets it go: a task on a node that died leaves the overlay only
    # once the node is written off, and the stop goes on trying in the background (docker_spawner.py)
    owner_networks = lambda: [n.name for n in manager.networks.list(filters={"label": [label, networks.LABEL]})]  # noqa: E731
    run.count("orphan networks", len(owner_networks()))
    wait_for("the owner networks' removal, none of their workspaces running", owner_networks, 90)
    routes_match_servers(run)
    recs = chaos.records(hub)
    assert not [r for r in recs if r["state"] == "queued"]
    run.count("executions", len(recs))
    run.count("executions failed", sum(r["state"] == "failed" for r in recs))
    run.count("executions lost", sum(r["stop_reason"] == "lost" for r in recs))
    wait_for(
        "every output reaching the store of record",
        lambda: [r for r in chaos.records(hub) if r["snapshot"] and not r["replicated"]],
        90,
    )


def outputs_intact(run: Run) -> None:
    """Each output hashed as it was saved hashes the same now (in the store of record), and holds what
    its workspace wrote."""
    recs = {r["id"]: r for r in chaos.records(run.hub)}
    by_key = {r["snapshot"]: r for r in recs.values() if r["snapshot"]}
    for key, (then, files) in run.hashed.items():
        now = recs[then["id"]]
        assert now["state"] == "stopped" and now["snapshot"] == key, f"output lost: {then} is now {now}"
        assert chaos.hashes(chaos.output_path(run.cluster, run.central, now)) == files, f"output changed: {now}"
    run.count("outputs hashed", len(run.hashed))
    for ex_id, name, content, task in run.written:
        r = recs[ex_id]
        if task and (r["stop_reason"], r["exit_code"]) != ("completed", 0):
            continue  # a task a fault ended wrote its file or did not
        assert r["state"] == "stopped" and r["snapshot"], f"{r} was written to and ended without its output"
        path = chaos.output_path(run.cluster, run.central, r) / name
        assert path.read_text() == content, f"{path} of {r} does not hold what was written"
        run.count("writes found in outputs")
    assert set(by_key) >= set(run.hashed)
