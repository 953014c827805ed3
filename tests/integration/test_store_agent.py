"""The store agent (workspace/store/agent.py): a node's home store served over HTTP, real agents on real btrfs
stores. What a node does for the hub when the hub cannot reach its disk, and what it refuses."""

from __future__ import annotations

import hashlib
import os
import secrets
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests

from tests.integration.hub import free_port
from workspace.store import replication
from workspace.store.agent_store import AgentStore
from workspace.store.homes import HomeStoreError

from .test_replication import node  # noqa: F401  (fixture)

MB = 1_000_000


@pytest.fixture
def agents(node, tmp_path):  # noqa: F811
    """agents(name) -> an AgentStore of a real agent process on a btrfs store of its own."""
    token = secrets.token_urlsafe(33)
    token_file = tmp_path / "agent-token"
    token_file.write_text(token)
    token_file.chmod(0o600)
    procs = []

    def start(name: str) -> AgentStore:
        store = node(name, "1G")
        port = free_port("127.0.0.1")
        log = open(tmp_path / f"{name}.log", "ab")
        procs.append(
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "workspace.store.agent",
                    "--root",
                    store.root,
                    "--listen",
                    f"127.0.0.1:{port}",
                    "--token-file",
                    str(token_file),
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        )
        agent = AgentStore(f"http://127.0.0.1:{port}", store.root, token)
        deadline = time.monotonic() + 20
        while True:
            try:
                agent.usage()
                return agent
            except HomeStoreError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    yield start
    for proc in procs:
        proc.terminate()
        proc.wait(10)


def digest(root: Path) -> dict:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def test_a_home_lives_and_is_saved_through_the_agent_and_only_the_change_travels(agents):
    a, b = agents("agent-a"), agents("agent-b")
    assert a.restore(None, "live-1").files == 0
    (a.live_path("live-1") / "model.bin").write_bytes(os.urandom(20 * MB))  # the container writes here
    saved = a.save("live-1", "snap-1", None)
    assert saved.bytes >= 20 * MB and a.has_snapshot("snap-1") and not b.has_snapshot("snap-1")
    a.release("live-1")
    assert not a.has_live("live-1")
    assert a.measure("snap-1")[0] >= 20 * MB
    # b pulls it from a (node to node); a second, changed output travels as its delta
    first = replication.replicate(a, "snap-1", b, [])
    assert first.sent and first.parent is None and first.bytes > 20 * MB
    a.restore("snap-1", "live-2")
    (a.live_path("live-2") / "notes.txt").write_bytes(os.urandom(300_000))
    a.save("live-2", "snap-2", "snap-1")
    seen = []
    second = replication.replicate(a, "snap-2", b, ["snap-1"], progress=lambda t: seen.append(t.bytes))
    assert second.parent == "snap-1" and second.bytes < 2 * MB, second
    assert seen and seen[-1] == second.bytes
    assert digest(Path(b.root) / "snapshots" / "snap-2") == digest(Path(a.root) / "snapshots" / "snap-2")
    assert not replication.replicate(a, "snap-2", b, ["snap-1"]).sent  # there already
    # a restore on b of what it received, and the limits and measures a start uses
    b.restore("snap-2", "live-3")
    assert b.limit_home("live-3", 100 * MB) and b.home_usage("live-3") >= 0
    b.release("live-3")
    b.delete("snap-2")
    assert not b.has_snapshot("snap-2") and b.has_snapshot("snap-1")
    with pytest.raises(HomeStoreError, match="does not exist"):
        a.restore("no-such-snapshot", "live-4")


def test_the_agent_refuses_callers_without_its_token_and_every_path_or_unknown_call(agents):
    a = agents("agent-c")
    a.restore(None, "live-1")
    a.save("live-1", "snap-1", None)
    call = f"{a.url}/v1/call"
    # no token, a wrong one, a prefix of the right one
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Bearer {a.token[:-1]}"}):
        r = requests.post(call, json={"op": "usage", "args": {}}, headers=headers, timeout=10)
        assert r.status_code == 401, r.text
        r = requests.get(f"{a.url}/v1/send?area=snapshots&key=snap-1", headers=headers, timeout=10)
        assert r.status_code == 401 and b"btrfs-stream" not in r.content
    auth = {"Authorization": f"Bearer {a.token}"}
    refused = [
        {"op": "restore", "args": {"snapshot": None, "live": "../../etc"}},
        {"op": "restore", "args": {"snapshot": "../snapshots/snap-1", "live": "x"}},
        {"op": "delete", "args": {"snapshot": "/"}},
        {"op": "release", "args": {"live": ".."}},
        {"op": "_remove", "args": {"path": "/"}},  # not an operation of the store's interface
        {"op": "ids", "args": {"area": "live", "key": "live-1"}},  # only saved snapshots and datasets
        {"op": "save", "args": {"live": "live-1", "snapshot": "s", "parent": None, "root": "/"}},  # no extra argument
        {"op": "limit_home", "args": {"live": "live-1", "limit": -1}},
        {"op": "has_snapshot", "args": {"key": 7}},
    ]
    for body in refused:
        r = requests.post(call, json=body, headers=auth, timeout=10)
        assert r.status_code == 400, (body, r.text)
    assert a.has_snapshot("snap-1") and a.has_live("live-1")  # nothing changed
    for query in ("area=live&key=live-1", "area=snapshots&key=../live/live-1", "area=snapshots&key=snap-1&parent=.."):
        r = requests.get(f"{a.url}/v1/send?{query}", headers=auth, timeout=10)
        assert r.status_code == 400 and b"btrfs-stream" not in r.content, (query, r.text)
    # a receive pulls only from another agent's URL, never a file or another scheme
    for source in ("file:///etc", "/etc", "ftp://x", ""):
        body = {"area": "snapshots", "key": "x", "identity": "u", "source": source, "parent": None}
        r = requests.post(f"{a.url}/v1/receive", json=body, headers=auth, timeout=10)
        assert r.status_code == 400, (source, r.text)
    r = requests.post(call, data=b"{" * 100_000, headers=auth, timeout=10)
    assert r.status_code == 400
