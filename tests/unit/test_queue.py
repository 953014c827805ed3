"""Resource types, admission, GPU allocation and the queue, on real databases with a movable clock."""

import contextlib
import datetime as dt
import threading
import time

import pytest
from sqlalchemy import event, select

from workspace import lifecycle, start_request
from workspace.db import Database, move_clock, utcnow
from workspace.errors import UserError
from workspace.executions import Execution, get_or_create_workspace, new_execution
from workspace.limits import fit, queue, queue_views
from workspace.limits.fit import free_gpus
from workspace.limits.queue import QUEUE_HEARTBEAT, RENEW_AFTER, admit
from workspace.limits.resource_types import ResourceType, choose
from workspace.store.nodes import Node

GPU2 = ResourceType(name="gpu2", gpus=2, gpu_model="A100")
ONE = ResourceType(name="one", capacity=1)
INVENTORY = ["0", "1", "2", "3"]


@pytest.fixture
def db(database):
    return database


def queued(db, owner: str, rtype: ResourceType) -> int:
    with db.session() as s:
        ex = new_execution(s, get_or_create_workspace(s, owner, "ws"), None, None)
        ex.resource_type = rtype.name
        return ex.id


def try_admit(db, execution_id: int, rtype: ResourceType) -> queue.Admission:
    with db.session() as s:
        ex = s.get(Execution, execution_id)
        a = admit(s, ex, rtype, {"node1": INVENTORY})
        if a.admitted:
            ex.to(s, "preparing")
        return a


def end(db, execution_id: int, started_minutes_ago: float = 30) -> None:
    with db.session() as s:
        ex = s.get(Execution, execution_id)
        for state in ("restoring", "running", "saving", "stopped"):
            ex.to(s, state)
        ex.started = utcnow() - dt.timedelta(minutes=started_minutes_ago)


def test_gpus_are_disjoint_and_the_third_waits_first_come_first_served(db):
    a, b, c, d = (queued(db, u, GPU2) for u in "abcd")
    first, second = try_admit(db, a, GPU2), try_admit(db, b, GPU2)
    assert first.admitted and second.admitted
    assert set(first.gpu_ids).isdisjoint(second.gpu_ids) and len(first.gpu_ids + second.gpu_ids) == 4
    # d asks before c: c is first in line, d second
    late = try_admit(db, d, GPU2)
    assert not late.admitted and (late.position, late.waiting) == (2, 2)
    waiting = try_admit(db, c, GPU2)
    assert not waiting.admitted and waiting.position == 1
    end(db, a)  # a stops: its GPUs are free again
    with db.session() as s:
        assert free_gpus(s, INVENTORY, "node1") == first.gpu_ids
    assert not try_admit(db, d, GPU2).admitted  # not d's turn
    assert try_admit(db, c, GPU2).gpu_ids == first.gpu_ids


def test_capacity_and_the_estimate_from_recent_run_lengths(db):
    done = queued(db, "old", ONE)
    assert try_admit(db, done, ONE).admitted
    end(db, done, started_minutes_ago=40)  # a past run of 40 min
    a, b, c = (queued(db, u, ONE) for u in "abc")
    assert try_admit(db, a, ONE).admitted
    with db.session() as s:
        s.get(Execution, a).started = utcnow() - dt.timedelta(minutes=10)
    wait_b, wait_c = try_admit(db, b, ONE), try_admit(db, c, ONE)
    assert (wait_b.position, wait_c.position) == (1, 2)
    assert wait_b.estimate_s == pytest.approx(30 * 60, abs=5)  # 40 min typical, 10 run
    assert wait_c.estimate_s == pytest.approx(70 * 60, abs=5)  # then one more run
    assert "position 1 of 2" in wait_b.describe(ONE) and "about 30 min" in wait_b.describe(ONE)


def test_a_start_whose_hub_died_leaves_the_queue(db):
    blocker = queued(db, "z", ONE)
    assert try_admit(db, blocker, ONE).admitted
    a, b = queued(db, "a", ONE), queued(db, "b", ONE)
    assert try_admit(db, a, ONE).position == 1
    assert try_admit(db, b, ONE).position == 2
    gone = QUEUE_HEARTBEAT + dt.timedelta(seconds=15)
    move_clock(gone)  # a's hub is gone: no heartbeat since
    try:
        assert try_admit(db, b, ONE).position == 1
    finally:
        move_clock(-gone)
    with db.session() as s:
        ex = s.get(Execution, a)
        assert ex.state == "stopped" and ex.stop_reason == "lost" and "hub restarted" in ex.stop_detail


def test_a_waiting_starts_looks_write_its_heartbeat_only_when_due(db):
    """A class in line looks often: most looks read, and only a due renewal writes (one commit that
    every other writer waits behind); the lease never comes near its end between looks."""
    blocker = queued(db, "z", ONE)
    assert try_admit(db, blocker, ONE).admitted
    a = queued(db, "a", ONE)

    def lease():
        with db.session() as s:
            return s.get(Execution, a).lease_until

    try_admit(db, a, ONE)
    first = lease()
    writes = []
    event.listen(db.engine, "before_cursor_execute", lambda *args: writes.append(args[2]))
    soon = RENEW_AFTER - dt.timedelta(seconds=1)
    move_clock(soon)
    try:
        assert try_admit(db, a, ONE).position == 1
        assert lease() == first and not [w for w in writes if w.lstrip().upper().startswith("UPDATE")], writes
        move_clock(dt.timedelta(seconds=2))  # past RENEW_AFTER: this look renews
        assert try_admit(db, a, ONE).position == 1
        renewed = lease()
        assert renewed - first >= RENEW_AFTER and abs(renewed - utcnow() - QUEUE_HEARTBEAT).total_seconds() < 5
    finally:
        move_clock(-(soon + dt.timedelta(seconds=2)))


def test_choosing_a_type():
    types = [ResourceType(name="cpu"), ResourceType(name="staff", groups=("staff",))]
    assert choose(types, None, None, []).name == "cpu"
    assert choose(types, "staff", None, ["staff"]).name == "staff"
    with pytest.raises(UserError, match="There is no resource type “gpu”. Choose one of: cpu, staff."):
        choose(types, "gpu", None, [])
    with pytest.raises(UserError, match="is for the group"):
        choose(types, "staff", None, ["students"])
    assert choose([], None, None, []) is None
    with pytest.raises(UserError, match="no resource types"):
        choose([], "gpu", None, [])


def test_types_from_configuration():
    t = ResourceType.from_config(
        {
            "name": "a100",
            "cpu": 8,
            "memory": "64G",
            "gpus": 1,
            "max_runtime": 10800,
            "home_size": "50G",
            "capacity": 4,
            "groups": ["ml"],
        }
    )
    assert (t.memory, t.home_size, t.gpus, t.capacity, t.groups) == (64 << 30, 50 << 30, 1, 4, ("ml",))
    assert t.limited and t.summary() == "8 CPU, 64 GB memory, 1 × GPU, at most 3 h"
    with pytest.raises(ValueError, match="unknown setting"):
        ResourceType.from_config({"name": "x", "gpu": 1})


# -- several nodes: a start is placed on one node, never split -------------------------

GPU1 = ResourceType(name="gpu1", gpus=1)
NODES = {"node1": [], "node2": ["0", "1"], "node3": ["0", "1", "2", "3"]}


def place_on(db, execution_id: int, rtype: ResourceType, inventories=NODES, prefer=()) -> queue.Admission:
    with db.session() as s:
        ex = s.get(Execution, execution_id)
        a = admit(s, ex, rtype, inventories, prefer)
        if a.admitted:
            ex.to(s, "preparing")
        return a


def test_a_gpu_start_lands_where_its_gpus_are_free_on_one_node_and_never_split(db):
    small = place_on(db, queued(db, "a", GPU1), GPU1)
    assert (small.node, small.gpu_ids) == ("node2", ["0"])  # best fit: the smaller node, node3 stays whole
    big = place_on(db, queued(db, "b", GPU2), GPU2)
    assert (big.node, big.gpu_ids) == ("node3", ["0", "1"])
    again = place_on(db, queued(db, "c", GPU2), GPU2)
    assert (again.node, again.gpu_ids) == ("node3", ["2", "3"])
    # node2 has 1 free, node3 none: 3 GPUs free in the cluster, but no node has 2 -> wait, not split
    waits = place_on(db, queued(db, "d", GPU2), GPU2)
    assert not waits.admitted and waits.position == 1
    with db.session() as s:
        assert {n: fit.free_gpus(s, ids, n) for n, ids in NODES.items()} == {
            "node1": [],
            "node2": ["1"],
            "node3": [],
        }


def test_the_node_holding_the_home_is_preferred_when_it_has_room(db):
    assert place_on(db, queued(db, "a", GPU1), GPU1, prefer=["node3"]).node == "node3"
    # a preferred node without room is passed over, not waited for
    full = {"node2": ["0"], "node3": ["0"]}
    assert place_on(db, queued(db, "b", GPU1), GPU1, full, prefer=["node3"]).node == "node2"


def test_capacity_counts_per_node(db):
    per_node = ResourceType(name="cpu", capacity=1)
    two = {"node1": [], "node2": []}
    first = place_on(db, queued(db, "a", per_node), per_node, two)
    second = place_on(db, queued(db, "b", per_node), per_node, two)
    assert {first.node, second.node} == {"node1", "node2"}
    assert not place_on(db, queued(db, "c", per_node), per_node, two).admitted


@pytest.mark.postgres
def test_two_hub_processes_on_postgresql_never_take_the_same_gpus(postgres_url, monkeypatch, tmp_path):
    # two types that share a node's 2 GPUs, each with a start first in line, admitted at the same
    # time by two "hubs": their own engines and no shared thread lock, as two processes have
    a_type, b_type = ResourceType(name="a", gpus=2), ResourceType(name="b", gpus=2)
    hubs = [Database(postgres_url, key_file=tmp_path / "key"), Database(postgres_url, key_file=tmp_path / "key")]
    a, b = queued(hubs[0], "ada", a_type), queued(hubs[0], "bob", b_type)
    monkeypatch.setattr(queue, "_admit_lock", contextlib.nullcontext())
    read_gpus = fit.used_gpus

    def slow_used_gpus(*args):
        used = read_gpus(*args)
        time.sleep(0.3)  # both read before either writes, unless admission is serialized
        return used

    monkeypatch.setattr(fit, "used_gpus", slow_used_gpus)
    results = {}

    def hub(db, execution_id, rtype):
        results[execution_id] = queue.admit_execution(db, execution_id, rtype, {"node1": ["0", "1"]})

    threads = [threading.Thread(target=hub, args=args) for args in ((hubs[0], a, a_type), (hubs[1], b, b_type))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(r.admitted for r in results.values()) == [False, True]
    for db in hubs:
        db.engine.dispose()


# -- start-up turns: a node brings up only so many at once; the rest wait and spread ----------


def untyped(db, owner: str) -> int:
    """A start where no resource types are configured (one line for all), recorded as the spawner does."""
    return lifecycle.begin(db, owner, "ws", "latest", None, queued=True).execution_id


def turn(db, execution_id: int, nodes, startup, prefer=()) -> queue.Admission:
    return queue.admit_execution(db, execution_id, None, {n: [] for n in nodes}, prefer, startup)


def test_a_burst_is_brought_up_in_turns_first_come_first_served(db):
    startup = queue.StartupLimit({"node1": 2})
    burst = [untyped(db, f"s{i:02d}") for i in range(5)]
    outcomes = [turn(db, e, ["node1"], startup) for e in burst]
    assert [o.admitted for o in outcomes] == [True, True, False, False, False]
    assert [(o.position, o.waiting, o.reason) for o in outcomes[2:]] == [
        (1, 3, "startup"),
        (2, 3, "startup"),
        (3, 3, "startup"),
    ]
    assert outcomes[2].estimate_s is None  # no start-up has finished yet: no made-up number
    # the last asks first: its place is still its request's
    assert turn(db, burst[4], ["node1"], startup).position == 3
    # the first is ready (its server answered): its slot is the next in line's, not the last's
    with db.session() as s:
        first = s.get(Execution, burst[0])
        first.to(s, "pulling"), first.to(s, "restoring"), first.to(s, "running")
        first.admitted = utcnow() - dt.timedelta(seconds=6)
    queue.mark_ready(db, burst[0])
    assert not turn(db, burst[4], ["node1"], startup).admitted
    third = turn(db, burst[2], ["node1"], startup)
    assert third.admitted and third.node == "node1"
    # the estimate: the two waiting, behind two slots of about 6 s start-ups
    waiting = turn(db, burst[4], ["node1"], startup)
    assert waiting.position == 2 and waiting.estimate_s == pytest.approx(6, abs=1)
    assert "position 2 of 2" in waiting.describe(None) and "about 1 min" in waiting.describe(None)


def test_a_running_start_up_that_never_became_ready_frees_its_slot_after_the_bound(db):
    startup = queue.StartupLimit({"node1": 1}, bound_s=300)
    stuck, next_one = untyped(db, "a"), untyped(db, "b")
    assert turn(db, stuck, ["node1"], startup).admitted
    with db.session() as s:  # its hub died while its server came up: running, never ready
        ex = s.get(Execution, stuck)
        ex.to(s, "pulling"), ex.to(s, "restoring"), ex.to(s, "running")
    assert not turn(db, next_one, ["node1"], startup).admitted
    move_clock(dt.timedelta(seconds=301))
    try:
        assert turn(db, next_one, ["node1"], startup).admitted
    finally:
        move_clock(dt.timedelta(seconds=-301))


def test_starts_spread_over_the_nodes_prefer_the_home_and_respect_each_nodes_slots(db):
    nodes = ["node1", "node2", "node3"]
    startup = queue.StartupLimit({"node1": 1, "node2": 1, "node3": 2})
    placed = [turn(db, untyped(db, owner), nodes, startup).node for owner in "abc"]
    assert sorted(placed) == nodes  # one each, not three on the first
    # the node holding the home's snapshot wins over a less busy one while it has a free slot
    assert turn(db, untyped(db, "d"), nodes, startup, prefer=["node3"]).node == "node3"
    # node3's two slots are taken: the home's node is passed over, not waited for; then every slot is busy
    e = untyped(db, "e")
    assert turn(db, e, nodes, startup, prefer=["node3"]).admitted is False
    # and a node with a free slot takes the first in line, whichever node its home is on
    with_node4 = queue.StartupLimit({**startup.slots, "node4": 1})
    assert turn(db, e, nodes + ["node4"], with_node4, prefer=["node3"]).node == "node4"


def test_a_full_type_waits_for_its_type_not_for_a_turn(db):
    startup = queue.StartupLimit({"node1": 4})
    first = queued(db, "a", ONE)
    assert queue.admit_execution(db, first, ONE, {"node1": []}, (), startup).admitted
    second = queued(db, "b", ONE)
    waits = queue.admit_execution(db, second, ONE, {"node1": []}, (), startup)
    assert not waits.admitted and waits.reason == "type" and "“one”" in waits.describe(ONE)


def test_the_admin_overview_of_nodes_counts_free_gpus_per_node_and_model(db):
    nodes = [
        Node("node1"),
        Node("node2", gpus=["0", "1"], gpu_model="A100"),
        Node("node3", gpus=["0", "1", "2", "3"], gpu_model="A100"),
        Node("node4", gpus=["0"], gpu_model="V100", active=False),
    ]
    inventories = {n.name: n.gpus for n in nodes}
    place_on(db, queued(db, "a", GPU1), GPU1, inventories)  # node4 (best fit, 1 GPU)
    place_on(db, queued(db, "b", GPU2), GPU2, inventories)  # node2
    rows = queue_views.node_overview(db, nodes)
    assert [(r["name"], r["state"], r["free_gpus"], r["executions"]) for r in rows] == [
        ("node1", "up", [], 0),
        ("node2", "up", [], 1),
        ("node3", "up", ["0", "1", "2", "3"], 0),
        ("node4", "paused", [], 1),
    ]
    assert queue_views.by_gpu_model(rows) == [
        {"model": "A100", "total": 6, "free": 4, "most": 4},
        {"model": "V100", "total": 1, "free": 0, "most": 0},
    ]


# -- the per-user limit of a type, counted where the start is recorded ------------------------


def slow_per_user_count(monkeypatch) -> None:
    """The per-user count takes 0.3 s, so that two starts at once both count before either records."""
    count = queue.check_per_user

    def slow_count(*args):
        count(*args)
        time.sleep(0.3)

    monkeypatch.setattr(queue, "check_per_user", slow_count)


def test_two_starts_at_once_never_both_pass_the_per_user_gpu_limit(db, monkeypatch):
    # one student asks for two GPU workspaces at the same moment (two tabs, two `+start`s): each start
    # is checked, then recorded, as the spawner does; both read before either writes unless the count
    # and the record are one serialized transaction
    gpu = ResourceType.from_config({"name": "gpu", "gpus": 1})  # per_user 1, the default of a GPU type
    assert gpu.per_user == 1
    slow_per_user_count(monkeypatch)
    outcomes: dict[str, object] = {}

    def start(name: str):
        try:
            start_request.within_per_user_limit(db, "ada", name, gpu)
            outcomes[name] = lifecycle.begin(db, "ada", name, "latest", None, resource_type=gpu).execution_id
        except UserError as e:
            outcomes[name] = e

    threads = [threading.Thread(target=start, args=(name,)) for name in ("one", "two")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    refused = [o for o in outcomes.values() if isinstance(o, UserError)]
    assert len(refused) == 1, outcomes
    assert refused[0].status_code == 403 and "the most one person may" in refused[0].message
    with db.session() as s:
        recorded = s.scalars(select(Execution).where(Execution.resource_type == "gpu")).all()
        assert [e.state for e in recorded] == ["queued"]  # the refused start left no record


@pytest.mark.postgres
def test_two_hub_processes_on_postgresql_never_both_pass_the_per_user_limit(postgres_url, monkeypatch, tmp_path):
    # as above, from two "hubs": their own engines and no shared thread lock; the advisory lock alone
    gpu = ResourceType.from_config({"name": "gpu", "gpus": 1})
    hubs = [Database(postgres_url, key_file=tmp_path / "key"), Database(postgres_url, key_file=tmp_path / "key")]
    monkeypatch.setattr(queue, "_admit_lock", contextlib.nullcontext())
    slow_per_user_count(monkeypatch)
    outcomes: dict[str, object] = {}

    def start(db, name: str):
        try:
            outcomes[name] = lifecycle.begin(db, "ada", name, "latest", None, resource_type=gpu).execution_id
        except UserError as e:
            outcomes[name] = e

    threads = [threading.Thread(target=start, args=(db, name)) for db, name in zip(hubs, ("one", "two"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(isinstance(o, UserError) for o in outcomes.values()) == 1, outcomes
    for db in hubs:
        db.engine.dispose()


def test_one_start_up_per_owner_at_a_time_and_the_others_go_past(db):
    # a student whose start script never lets the server answer would hold every slot of the node, start
    # after start: an owner holds one start-up slot at a time, and the others are not stuck behind them
    startup = queue.StartupLimit({"node1": 2})
    mine = lifecycle.begin(db, "mallory", "one", "latest", None, queued=True).execution_id
    mine_too = lifecycle.begin(db, "mallory", "two", "latest", None, queued=True).execution_id
    theirs = untyped(db, "ada")
    assert turn(db, mine, ["node1"], startup).admitted
    second = turn(db, mine_too, ["node1"], startup)
    assert not second.admitted and second.reason == "own" and "other workspace" in second.describe(None)
    assert turn(db, theirs, ["node1"], startup).admitted  # past mallory's second, into the free slot
    with db.session() as s:
        assert s.get(Execution, mine_too).state == "queued"


def test_the_wait_of_a_burst_is_estimated_from_its_measured_pace(db):
    # ten start-ups became ready 3 s apart, each taking 5 s with two at once (a node under a burst's load):
    # position 20 waits about 20 × 3 s, not 20 × 5 s / 2
    now = utcnow()
    with db.session() as s:
        for i in range(10):
            ex = new_execution(s, get_or_create_workspace(s, f"p{i}", "ws"), None, None)
            ex.ready = now - dt.timedelta(seconds=3 * (9 - i))
            ex.admitted = ex.ready - dt.timedelta(seconds=5)
    with db.session() as s:
        assert queue.estimate_turn(s, 20, 2) == pytest.approx(60, abs=2)
    move_clock(dt.timedelta(minutes=10))  # long after: no burst under way, the rounds of start-ups
    try:
        with db.session() as s:
            assert queue.estimate_turn(s, 20, 2) == pytest.approx(50, abs=1)
    finally:
        move_clock(dt.timedelta(minutes=-10))


def queued_run(db, owner: str, rtype: ResourceType, server: str) -> int:
    """A run beside workspace "ws" (#31): an execution on a server of its own."""
    with db.session() as s:
        ex = new_execution(s, get_or_create_workspace(s, owner, "ws"), None, None)
        ex.resource_type, ex.server = rtype.name, server
        return ex.id


def admit_run(db, execution_id: int, rtype: ResourceType, own: queue.OwnLimits) -> queue.Admission:
    with db.session() as s:
        ex = s.get(Execution, execution_id)
        a = admit(s, ex, rtype, {"node1": INVENTORY}, own=own)
        if a.admitted:
            ex.to(s, "preparing")
        return a


def test_a_users_runs_past_their_limit_wait_aside_and_never_block_another_user(db):
    """A sweep's runs wait for their owner's limit (the type's per-user limit, max_running_per_user)
    instead of being refused, and other users' starts go past them in the type's line."""
    gpu = ResourceType(name="gpu1", gpus=1, per_user=1)
    own = queue.OwnLimits(running=3)
    runs = [queued_run(db, "ana", gpu, f"run-00000000000{i}") for i in range(3)]
    first = admit_run(db, runs[0], gpu, own)
    assert first.admitted
    second, third = admit_run(db, runs[1], gpu, own), admit_run(db, runs[2], gpu, own)
    assert (second.reason, second.limit, second.position, second.waiting) == ("own_limit", 1, 1, 2)
    assert (third.reason, third.position) == ("own_limit", 2)
    assert "one person may run 1 at once" in second.describe(gpu)
    # bo asks after ana's waiting runs: first in line all the same, and admitted (GPUs are free)
    bo = queued_run(db, "bo", gpu, "run-0000000000bb")
    assert admit_run(db, bo, gpu, own).admitted
    end(db, runs[0])  # ana's run ends: her next one starts
    assert admit_run(db, runs[1], gpu, own).admitted
    assert admit_run(db, runs[2], gpu, own).reason == "own_limit"
    # an administrator's runs are not held by the limit
    assert admit_run(db, runs[2], gpu, queue.OwnLimits(running=3, exempt=True)).admitted


def test_runs_wait_for_max_running_per_user_across_types(db):
    plain = ResourceType(name="plain")
    own = queue.OwnLimits(running=2)
    with db.session() as s:  # an open workspace holds one place
        ex = new_execution(s, get_or_create_workspace(s, "ana", "open"), None, None)
        ex.to(s, "preparing")
    a, b = (queued_run(db, "ana", plain, f"run-00000000000{i}") for i in range(2))
    assert admit_run(db, a, plain, own).admitted
    waiting = admit_run(db, b, plain, own)
    assert not waiting.admitted and (waiting.reason, waiting.limit) == ("own_limit", 2)
    # without the limit (a workspace's own start is refused by its 403 instead, start_request)
    assert admit_run(db, b, plain, queue.OwnLimits()).admitted


def test_a_run_is_never_refused_by_the_per_user_limits_but_the_runs_bound_is_kept(db):
    gpu = ResourceType(name="gpu1", gpus=1, per_user=1)
    queued_run(db, "ana", gpu, "run-000000000001")
    with db.session() as s:  # a workspace start is refused at the type's per-user limit
        with pytest.raises(UserError) as e:
            queue.check_per_user(s, "ana", "other", gpu)
        assert e.value.status_code == 403
        queue.check_per_user(s, "ana", "ws", gpu, server="run-000000000002")  # a run: it waits instead
    start_request.runs_within(db, "ana", 1, 2)
    with pytest.raises(UserError) as e:
        start_request.runs_within(db, "ana", 2, 2)
    assert e.value.status_code == 429 and "You have 1 runs waiting or running" in e.value.message
