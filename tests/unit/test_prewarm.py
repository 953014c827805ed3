"""A course's pre-warm: which node each student gets (spread by load, the same plan for the same course),
what their next start restores, the record the spawner's placement reads, and the job's progress as it
goes (homes done of total, bytes, images; failures kept to their step; one at a time per course).

The stores, the engines and the nodes' listing are stand-ins here (the real ones: tests/integration/
test_prewarm.py on one host, tests/cluster/test_prewarm.py on a swarm); the database is real."""

from __future__ import annotations

import threading
import time

import pytest

from workspace.courses import Course
from workspace.errors import UserError
from workspace.executions import Snapshot, get_or_create_workspace, new_execution
from workspace.limits.resource_types import ResourceType
from workspace.prewarm import assignment, job
from workspace.prewarm.assignment import Home, Plan
from workspace.store.nodes import Node

NODES = [Node("node1", cpus=2), Node("node2", cpus=2), Node("node3", cpus=2)]


def homes(*names: str, snapshot: str | None = "s") -> list[Home]:
    return [Home(n, "lab1", f"{snapshot}-{n}" if snapshot else None) for n in names]


def placed(plan: list[Home]) -> dict[str, str | None]:
    return {h.student: h.node for h in plan}


def counts(plan: list[Home]) -> dict[str, int]:
    out: dict[str, int] = {}
    for h in plan:
        if h.node:
            out[h.node] = out.get(h.node, 0) + 1
    return out


# -- the assignment ---------------------------------------------------------------------------------


def test_students_are_spread_evenly_in_their_order_and_the_same_course_gets_the_same_plan():
    names = ["gus", "ann", "cat", "bob", "eve", "dan", "fay"]
    plan = assignment.assign(homes(*names), NODES, {})
    assert counts(plan) == {"node1": 3, "node2": 2, "node3": 2}
    # in the students' order (not the roster's), round the nodes: ties go to the first by name
    assert placed(plan) == {
        "ann": "node1",
        "bob": "node2",
        "cat": "node3",
        "dan": "node1",
        "eve": "node2",
        "fay": "node3",
        "gus": "node1",
    }
    assert placed(assignment.assign(homes(*reversed(names)), NODES, {})) == placed(plan)


def test_the_load_now_and_the_nodes_cores_weigh():
    # node1 runs four already: the class goes to the others first
    plan = assignment.assign(homes("a", "b", "c", "d", "e"), NODES, {"node1": 4})
    assert counts(plan) == {"node2": 3, "node3": 2}
    # a node with three times the cores takes three times the students
    big = [Node("node1", cpus=6), Node("node2", cpus=2)]
    assert counts(assignment.assign(homes(*"abcdefgh"), big, {})) == {"node1": 6, "node2": 2}
    # cores unknown on one node: each node counts as one
    unknown = [Node("node1", cpus=6), Node("node2")]
    assert counts(assignment.assign(homes(*"abcd"), unknown, {})) == {"node1": 2, "node2": 2}


def test_nothing_to_bring_gets_no_node():
    plan = homes("ann", "bob") + homes("cat", snapshot=None)
    plan[1].running = True
    assert placed(assignment.assign(plan, NODES, {})) == {"ann": "node1", "bob": None, "cat": None}
    assert placed(assignment.assign(homes("ann"), [], {})) == {"ann": None}


def test_only_nodes_that_take_work_and_fit_the_type_are_eligible():
    nodes = [
        Node("cpu1", cpus=4),
        Node("a100", gpus=["0", "1"], gpu_model="A100"),
        Node("v100", gpus=["0", "1", "2", "3"], gpu_model="V100"),
        Node("paused", active=False),
        Node("down", ready=False),
    ]
    names = lambda rtype: [n.name for n in assignment.eligible(nodes, rtype)]  # noqa: E731
    assert names(None) == ["cpu1", "a100", "v100"]
    assert names(ResourceType.from_config({"name": "cpu"})) == ["cpu1", "a100", "v100"]
    assert names(ResourceType.from_config({"name": "g", "gpus": 1, "gpu_model": "a100"})) == ["a100"]
    assert names(ResourceType.from_config({"name": "g4", "gpus": 4})) == ["v100"]


# -- what a start restores, the plan and the record ------------------------------------------------------


@pytest.fixture
def course_db(database):
    """cs101 (workspace lab1, starter prof/prep #1): ann saved twice, bob never started (the starter), cat
    has no workspace (an empty home), dan runs now, eve's only execution saved nothing (the starter)."""
    db = database
    with db.session() as s:
        prep = get_or_create_workspace(s, "prof", "prep")
        starter = new_execution(s, prep, None, None)
        starter.snapshot = Snapshot(key=starter.snapshot_key, backend="btrfs", bytes=100)
        starter.state = "stopped"
        s.add(Course(name="cs101", workspace="lab1", starter=starter, resource_type="cpu"))
        for student in ("ann", "bob", "dan", "eve"):
            ws = get_or_create_workspace(s, student, "lab1")
            ws.course = "cs101"
        ann = get_or_create_workspace(s, "ann", "lab1")
        for size in (10, 20):
            ex = new_execution(s, ann, ann.latest, ann.latest)
            ex.snapshot, ex.state = Snapshot(key=ex.snapshot_key, backend="btrfs", bytes=size), "stopped"
        dan = get_or_create_workspace(s, "dan", "lab1")
        new_execution(s, dan, None, None).state = "running"
        new_execution(s, get_or_create_workspace(s, "eve", "lab1"), None, None).state = "stopped"
        s.flush()
        keys = {"starter": starter.snapshot_key, "ann": ann.latest.snapshot_key}
    return db, keys


def test_the_plan_brings_what_each_next_start_restores(course_db):
    db, keys = course_db
    asked = []

    def nodes_for(rtype):
        asked.append(rtype)
        return NODES

    plan = assignment.plan(db, "cs101", ["ann", "bob", "cat", "dan", "eve"], nodes_for, {})
    assert asked == ["cpu"] and (plan.workspace, plan.image) == ("lab1", None)
    got = {h.student: (h.snapshot, h.bytes, h.running, h.node) for h in plan.homes}
    assert got == {
        "ann": (keys["ann"], 20, False, "node1"),  # the newest of her own
        "bob": (keys["starter"], 100, False, "node2"),  # never started: the course's starter
        "cat": (None, None, False, None),  # no workspace: an empty home
        "dan": (keys["starter"], 100, True, None),  # runs now: his stop saves what is restored next
        "eve": (keys["starter"], 100, False, "node3"),  # saved nothing: still the starter
    }
    with pytest.raises(UserError) as err:
        assignment.plan(db, "cs999", ["ann"], nodes_for, {})
    assert err.value.status_code == 404 and "not set up yet" in err.value.jupyterhub_message


def test_the_record_names_the_node_only_for_the_snapshot_brought(course_db):
    db, keys = course_db
    home = Home("bob", "lab1", keys["starter"], node="node2")
    assert assignment.noted_node(db, "bob", "lab1", keys["starter"]) is None
    assignment.record(db, "cs101", home)
    assert assignment.noted_node(db, "bob", "lab1", keys["starter"]) == "node2"
    # saved since: another snapshot; nothing recorded for it
    assert assignment.noted_node(db, "bob", "lab1", "a-newer-one") is None
    assert assignment.noted_node(db, "bob", "lab1", None) is None
    home.node = "node3"  # pre-warmed again, elsewhere: one record per workspace
    assignment.record(db, "cs101", home)
    assert assignment.noted_node(db, "bob", "lab1", keys["starter"]) == "node3"


# -- the job's progress ------------------------------------------------------------------------------


def a_plan(n_students: int = 4) -> Plan:
    plan = homes(*[f"s{i}" for i in range(n_students)]) + homes("empty", snapshot=None)
    return Plan("cs101", "lab1", None, assignment.assign(plan, NODES[:2], {}), NODES[:2])


def test_progress_counts_homes_bytes_and_images_as_they_go_and_failures_stay_their_own():
    prewarm = job.Prewarm(a_plan(), "prof", "workspace-base:latest")
    gate, sending = threading.Event(), threading.Barrier(3)  # both nodes' first homes, and this test
    recorded = []

    def send_home(home, progress):
        if home.student in ("s0", "s1"):  # the first on each node: held half-way until the test looks
            progress(500)
            sending.wait(10)
            gate.wait(10)
        if home.student == "s3":
            raise OSError("the node's store is full")
        progress(1000)
        return home.student != "s2"  # s2's home was there already

    def copy_image(node, progress):
        progress(7)
        return {"node1": "copied", "node2": "present"}[node.name]

    worker = threading.Thread(target=prewarm.run, args=(send_home, copy_image, recorded.append))
    worker.start()
    sending.wait(10)
    status = prewarm.status()
    assert status["state"] == "running" and status["homes"]["total"] == 4 and status["homes"]["done"] == 0
    assert status["homes"]["empty"] == 1 and status["bytes"] == 1000  # half of each of two homes
    assert status["message"].startswith("Pre-warming: 0 of 4 home(s) on their nodes (0.0 MB sent)")
    assert {s["name"]: s["state"] for s in status["students"]}["s0"] == "sending"
    gate.set()
    worker.join(10)
    status = prewarm.status()
    assert status["state"] == "done" and status["finished"] is not None
    assert status["homes"] == {"total": 4, "done": 3, "failed": 1, "empty": 1, "running": 0}
    assert status["bytes"] == 3000  # s3 failed before it sent anything
    assert status["images"] == {"total": 2, "done": 2, "failed": 0, "registry": 0, "bytes": 14}
    states = {s["name"]: (s["node"], s["state"], s["error"]) for s in status["students"]}
    assert states == {
        "s0": ("node1", "sent", None),
        "s1": ("node2", "sent", None),
        "s2": ("node1", "there", None),
        "s3": ("node2", "failed", "the node's store is full"),
        "empty": (None, "empty", None),
    }
    assert sorted(h.student for h in recorded) == ["s0", "s1", "s2"]  # a failed home is not noted
    assert [(n["name"], n["homes"], n["image"]) for n in status["nodes"]] == [
        ("node1", 2, "copied"),
        ("node2", 2, "present"),
    ]
    message = status["message"]
    assert message.startswith("Pre-warmed in ") and "3 of 4 home(s) on their nodes (0.0 MB sent)" in message
    assert "the image on 2 of 2 node(s)" in message
    assert "1 home(s) could not be sent ahead" in message and "1 student(s) start with an empty home" in message


def test_a_node_without_an_engine_of_its_own_pulls_the_image_and_a_failed_load_is_said():
    prewarm = job.Prewarm(a_plan(0), "prof", "img")

    def copy_image(node, progress):
        if node.name == "node2":
            raise RuntimeError("the engine at unix:///x refused img")
        return "registry"

    prewarm.run(lambda h, p: True, copy_image, lambda h: None)
    status = prewarm.status()
    assert status["images"]["registry"] == 1 and status["images"]["failed"] == 1
    assert status["nodes"][1]["image_error"] == "the engine at unix:///x refused img"
    assert "fetch the image from the site's registry themselves" in status["message"]
    assert "could not be loaded into 1 node(s)" in status["message"]
    # a node without an engine label is left to pull it: nothing is asked of any engine
    copier = job.ImageCopier("img", lambda: pytest.fail("no engine is asked"))
    assert copier.copy(Node("node9"), lambda n: None) == "registry"


def test_the_sentences_are_in_the_callers_language():
    prewarm = job.Prewarm(a_plan(1), "prof", "img")
    prewarm.run(lambda h, p: True, lambda n, p: "present", lambda h: None)
    assert "预热" in prewarm.status("zh_CN")["message"]
    assert "无需预热" in job.without_job("cs101", True, "zh_CN")["message"]
    assert "尚未预热" in job.without_job("cs101", False, "zh_CN")["message"]


class Stores:
    """The nodes as the service's NodeStores lists them."""

    def __init__(self, nodes):
        self.listed = nodes

    def nodes(self):
        return self.listed


class HeldPrewarms(job.Prewarms):
    """Homes held until `release` is set, so that a second start meets the first one under way."""

    release = threading.Event()

    def send_home(self, home, progress):
        self.release.wait(10)
        return True


def test_one_pre_warm_at_a_time_per_course_and_the_next_once_it_ended(course_db):
    db, _ = course_db
    jobs = HeldPrewarms(db, Stores(NODES), None, [], lambda name: "img", lambda: None)
    HeldPrewarms.release.clear()
    first = jobs.start("cs101", ["ann", "bob"], "prof")
    assert first.running and jobs.of("cs101") is first
    with pytest.raises(UserError) as err:
        jobs.start("cs101", ["ann", "bob"], "prof")
    assert err.value.status_code == 409 and "under way already" in err.value.jupyterhub_message
    HeldPrewarms.release.set()
    deadline = time.monotonic() + 10
    while first.running and time.monotonic() < deadline:
        time.sleep(0.05)
    assert first.state == "done" and first.counts()["homes"]["done"] == 2
    # the image: these nodes have no engine of their own, so each pulls it from the registry
    assert first.counts()["images"]["registry"] == 3
    second = jobs.start("cs101", ["ann"], "prof")
    assert second is not first and jobs.of("cs101") is second
    # no node takes work: a 503, and the last pre-warm stays what a GET shows
    jobs.stores = Stores([Node("node1", active=False)])
    deadline = time.monotonic() + 10
    while second.running and time.monotonic() < deadline:
        time.sleep(0.05)
    with pytest.raises(UserError) as err:
        jobs.start("cs101", ["ann"], "prof")
    assert err.value.status_code == 503 and jobs.of("cs101") is second


# -- the start: the recorded node first among those holding the snapshot ---------------------------------


class Holding:
    def __init__(self, keys):
        self.keys = keys

    def has_snapshot(self, key):
        return key in self.keys


def test_a_start_names_the_node_its_pre_warm_chose_first_among_those_holding_its_home(course_db):
    from types import SimpleNamespace

    from workspace.spawner.placement import PlacementMixin

    db, keys = course_db
    starter = keys["starter"]
    stores = {"node1": Holding({starter}), "node2": Holding({starter}), "node3": Holding(set())}
    spawner = PlacementMixin()
    spawner.db, spawner.user, spawner.store_of = db, SimpleNamespace(name="bob"), stores.get
    spawner.workspace_name = "lab1"  # the workspace a start is of (a run's too: spawner/runs.py)
    names = ["node1", "node2", "node3"]
    assert spawner.nodes_holding(starter, names) == ["node1", "node2"]  # no record: the nodes' order
    assignment.record(db, "cs101", Home("bob", "lab1", starter, node="node2"))
    assert spawner.nodes_holding(starter, names) == ["node2", "node1"]
    assert spawner.nodes_holding("another", names) == []
    # another workspace of the same snapshot (the course's starter) is not bob's: its own order
    spawner.user = SimpleNamespace(name="eve")
    assert spawner.nodes_holding(starter, names) == ["node1", "node2"]
