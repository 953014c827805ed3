"""The store of record (WorkspaceMixin.record_store_root): every saved output copied off the node that saved it,
incrementally along its lineage; the records say where each output lives and whether it is replicated; a failed
send is recorded and retried; a deleted output's copy goes too. Two loop-mounted btrfs filesystems, a real database.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import subprocess
import time
from pathlib import Path

from workspace import lifecycle, replicas
from workspace.db import Database, move_clock, utcnow
from workspace.executions import Execution, Snapshot
from workspace.store import replication
from workspace.store.homes import HomeStoreError
from workspace.store.nodes import Node, NodeStores

from .test_replication import node  # noqa: F401  (fixture)

MB = 1_000_000


def run(db: Database, store, change, choice="latest") -> tuple[int, str]:
    """One execution of ada/thesis: restore, let `change(home)` edit the home, save. (id, output key)."""
    plan = lifecycle.begin(db, "ada", "thesis", choice, None)
    lifecycle.restore(db, store, plan, None)
    change(store.live_path(plan.live_key))
    lifecycle.transition(db, plan.execution_id, "running")
    assert lifecycle.save(db, store, plan.execution_id, "user", None) == "stopped"
    return plan.execution_id, lifecycle.snapshot_key_of(db, plan.execution_id)


def write(path, size: int) -> None:
    path.write_bytes(os.urandom(size))


def digest(root) -> dict:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.is_symlink()
    }


def dead_pid() -> int:
    """The pid of a process of this host that has ended."""
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


def snapshot(db: Database, key: str) -> Snapshot:
    with db.session() as s:
        snap = s.query(Snapshot).filter_by(key=key).one()
        s.expunge(snap)
        return snap


def test_outputs_reach_the_store_of_record_incrementally_and_the_records_say_so(node, tmp_path, monkeypatch):  # noqa: F811
    db = Database(f"sqlite:///{tmp_path / 'w.sqlite'}", key_file=tmp_path / "key")
    store, record = node("node-a", "1G"), node("record", "1G")
    first, key1 = run(db, store, lambda home: write(home / "model.bin", 30 * MB))
    assert replicas.replicate(db, store, record, key1)
    one = snapshot(db, key1)
    assert one.node == lifecycle.NODE and one.replicated_at is not None and one.replica_error is None
    assert one.replica_bytes > 30 * MB  # the first copy is whole
    assert digest(record.snapshot_path(key1)) == digest(store.snapshot_path(key1))
    with db.session() as s:
        shown = s.get(Execution, first).as_dict()
    assert shown["output_node"] == lifecycle.NODE and shown["replicated"]

    # #2 continues #1 with a small change: only the change travels
    second, key2 = run(db, store, lambda home: write(home / "results.csv", 200_000))
    assert replicas.replicate(db, store, record, key2)
    two = snapshot(db, key2)
    assert two.replica_bytes < 2 * MB, two.replica_bytes  # ~200 kB, not the 30 MB model again
    assert digest(record.snapshot_path(key2)) == digest(store.snapshot_path(key2))
    assert replicas.replicate(db, store, record, key2)  # already there: nothing sent, still true

    # a send that fails is recorded and retried at the service's next round
    def broken(*args, **kwargs):
        raise HomeStoreError("the store of record does not answer")

    with monkeypatch.context() as m:
        m.setattr(replication, "replicate", broken)
        _, key3 = run(db, store, lambda home: write(home / "more.csv", 100_000))
        assert not replicas.replicate(db, store, record, key3)
    three = snapshot(db, key3)
    assert three.replicated_at is None and "does not answer" in three.replica_error and three.replica_sender is None
    # #4's send is under way in a live process of another host, #5's was by a process of this host that died
    # (a hub killed mid-send), #6's by another host's process whose lease ran out: #4 is left to its sender
    _, key4 = run(db, store, lambda home: write(home / "last.csv", 100_000))
    _, key5 = run(db, store, lambda home: write(home / "killed.csv", 100_000))
    _, key6 = run(db, store, lambda home: write(home / "late.csv", 100_000))
    assert replicas.claim_send(db, key4, "elsewhere:1")
    assert not replicas.claim_send(db, key4, "elsewhere:2")  # one sender at a time
    assert replicas.claim_send(db, key5, f"{os.uname().nodename}:{dead_pid()}")
    assert replicas.claim_send(db, key6, "elsewhere:3", ttl=dt.timedelta(seconds=-1))
    assert not replicas.replicate(db, store, record, key4)  # a save's own send finds it taken: nothing sent
    assert replicas.replicate_pending(db, store, record, lifecycle.NODE) == 3  # #3, #5 and #6
    for key in (key3, key5, key6):
        done = snapshot(db, key)
        assert done.replicated_at is not None and done.replica_error is None and record.has_snapshot(key)
        assert done.replica_sender is None and done.replica_until is None
    assert snapshot(db, key4).replicated_at is None and not record.has_snapshot(key4)
    move_clock(replicas.SEND_LEASE + dt.timedelta(minutes=1))  # #4's sender said nothing since: its lease ran out
    try:
        assert replicas.replicate_pending(db, store, record, lifecycle.NODE) == 1
    finally:
        move_clock(-(replicas.SEND_LEASE + dt.timedelta(minutes=1)))
    assert record.has_snapshot(key4) and snapshot(db, key4).replica_sender is None

    # the owner deletes #2's output: its copy in the store of record goes too
    with db.session() as s:
        s.query(Snapshot).filter_by(key=key2).one().deleted = dt.datetime(2026, 12, 3)
    store.delete(key2)
    assert replicas.purge_deleted_replicas(db, record) == 1
    assert not record.has_snapshot(key2) and record.has_snapshot(key1) and record.has_snapshot(key3)
    assert replicas.purge_deleted_replicas(db, record) == 0


def test_a_save_finished_after_a_failure_is_sent_to_the_store_of_record_at_once(node, tmp_path):  # noqa: F811
    """#30 (found by tests/cluster/test_chaos.py): a save retried after its node's agent failed was left on
    that node alone for REPLICATION_GRACE; whoever finishes it sends it, as a stop's save sends its own."""
    db = Database(f"sqlite:///{tmp_path / 'w.sqlite'}", key_file=tmp_path / "key")
    store, record = node("retried", "1G"), node("record-retried", "1G")
    plan = lifecycle.begin(db, "bo", "thesis", "latest", None)
    lifecycle.restore(db, store, plan, None)
    write(store.live_path(plan.live_key) / "model.bin", MB)
    lifecycle.transition(db, plan.execution_id, "running")
    with db.session() as s:
        s.get(Execution, plan.execution_id).to(s, "saving")
        s.get(Execution, plan.execution_id).to(s, "save_failed")
    assert lifecycle.finish_pending_saves(db, store, record=record) == [plan.execution_id]
    key = lifecycle.snapshot_key_of(db, plan.execution_id)
    assert record.has_snapshot(key) and snapshot(db, key).replicated_at is not None
    assert digest(record.snapshot_path(key)) == digest(store.snapshot_path(key))


def test_a_node_s_own_store_its_pending_save_a_received_output_and_deleted_copies(node, tmp_path):  # noqa: F811
    """A swarm's nodes keep homes in stores of their own: what the service does to each (nodes.NodeStores)."""
    db = Database(f"sqlite:///{tmp_path / 'w.sqlite'}", key_file=tmp_path / "key")
    node_a, node_b, central = node("swarm-a", "1G"), node("swarm-b", "1G"), node("central", "1G")
    stores = NodeStores(central, lambda: [Node("a", store=node_a.root), Node("b", store=node_b.root)])
    assert stores.of("a").root == node_a.root and stores.of(None) is central and stores.of("gone") is central
    # #1 ran on node a and its save failed there (a full disk): the retry saves it in a's store, not central's
    plan = lifecycle.begin(db, "ada", "thesis", "latest", None)
    with db.session() as s:
        s.get(Execution, plan.execution_id).node = "a"
    lifecycle.restore(db, node_a, plan, None)
    write(node_a.live_path(plan.live_key) / "model.bin", 5 * MB)
    lifecycle.transition(db, plan.execution_id, "running")
    with db.session() as s:
        s.get(Execution, plan.execution_id).to(s, "saving")
        s.get(Execution, plan.execution_id).to(s, "save_failed")
    assert lifecycle.finish_pending_saves(db, central, store_of=stores.of) == [plan.execution_id]
    key = lifecycle.snapshot_key_of(db, plan.execution_id)
    assert node_a.has_snapshot(key) and not central.has_snapshot(key) and snapshot(db, key).node == "a"
    # a start on node b receives it from whichever store holds it (central has not got it yet)
    got = replicas.receive(db, key, node_b, [central, node_a])
    assert got.sent and got.parent is None and digest(node_b.snapshot_path(key)) == digest(node_a.snapshot_path(key))
    assert replicas.replicate_pending(db, node_a, central, node="b") == 0  # only what `node` saved
    # the owner deletes it: the copies on the nodes go too, and only those
    with db.session() as s:
        s.query(Snapshot).filter_by(key=key).one().deleted = utcnow()
    assert [replicas.purge_deleted_copies(db, st) for _, st in stores.own()] == [1, 1]
    assert not node_a.has_snapshot(key) and not node_b.has_snapshot(key)
    assert replicas.purge_deleted_copies(db, node_a) == 0


def test_a_hub_sends_each_saved_output_to_the_store_of_record(start_hub, node, tmp_path):  # noqa: F811
    """The spawner's part: after a stop, the output is in the store of record and the API says so."""
    record = node("hub-record", "1G")
    hub = start_hub(WORKSPACE_RECORD_STORE=record.root)
    token = hub.user_token("rex")
    hub.start_workspace("rex", "thesis", token)
    hub.sh("rex", "thesis", "head -c 3000000 /dev/urandom > /openbayes/home/weights.bin")
    hub.stop_workspace("rex", "thesis", token)
    deadline, shown = time.monotonic() + 60, {}
    while time.monotonic() < deadline:
        (shown,) = hub.service_api("/workspaces/thesis/executions", token).json()
        if shown.get("replicated"):
            break
        time.sleep(0.5)
    assert shown["replicated"] and shown["output_node"], shown
    snapshots = [p for p in (Path(record.root) / "snapshots").iterdir() if not p.name.startswith(".")]
    assert len(snapshots) == 1 and (snapshots[0] / "weights.bin").stat().st_size == 3_000_000
