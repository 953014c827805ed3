"""Snapshots between two nodes' stores: each a loop-mounted btrfs of its own, as two nodes have.

Full then incremental sends (the delta's size, measured), exact copies, links
kept as links, idempotence, parents along a chain of stores, and failures (a
full target, a receive killed, the sending process killed) that publish nothing.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from workspace.store.btrfs_send import subvolume_ids
from workspace.store.homes import BtrfsHomeStore, HomeStoreError, StoreFullError, mount_loop_btrfs
from workspace.store.replication import replicate, replicate_dataset

from .test_homes import build_home, snapshot_of

MB = 1_000_000


@pytest.fixture
def node(tmp_path):
    """node(name, size) -> a store on a btrfs filesystem of its own; all are unmounted at the end."""
    if os.geteuid() != 0 or shutil.which("mkfs.btrfs") is None:
        pytest.skip("replication between btrfs stores needs root and btrfs-progs (make test installs them)")
    mounts = []

    def make(name: str, size: str = "512M") -> BtrfsHomeStore:
        mnt = tmp_path / name
        mount_loop_btrfs(tmp_path / f"{name}.img", mnt, size=size)
        mounts.append(mnt)
        return BtrfsHomeStore(root=str(mnt / "store")).setup()

    yield make
    for mnt in mounts:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def saved(store: BtrfsHomeStore, key: str, parent: str | None, change) -> None:
    """A save on `store`: restore `parent`, let `change(home)` edit it, save it as `key`."""
    live = f"live-{key}"
    store.restore(parent, live)
    change(store.live_path(live))
    store.save(live, key, parent=parent)
    store.release(live)


def random_file(path: Path, size: int) -> None:
    path.write_bytes(os.urandom(size))
    os.lchown(path, 1000, 1000)


def first_home(home: Path) -> None:
    build_home(home)  # links, hard links, a fifo, odd names, modes, mtimes
    random_file(home / "model.bin", 20 * MB)


def small_change(home: Path) -> None:
    random_file(home / "results.csv", 100_000)
    (home / "project/src/main.py").write_text("print('changed')\n")
    (home / "secret.txt").unlink()


def test_full_then_incremental_sends_only_the_change(node):
    a, b = node("a"), node("b")
    saved(a, "s1", None, first_home)
    reports = []
    full = replicate(a, "s1", b, [], progress=lambda t: reports.append(t.bytes), progress_interval=0)
    assert full.parent is None and full.sent
    assert 20 * MB < full.bytes < 22 * MB, full
    assert reports == sorted(reports) and len(reports) > 3 and reports[-1] == full.bytes, reports
    assert snapshot_of(b.snapshot_path("s1")) == snapshot_of(a.snapshot_path("s1"))

    saved(a, "s2", "s1", small_change)
    delta = replicate(a, "s2", b, ["s1"])
    assert delta.parent == "s1"
    # the change is 100 kB of data plus a few names and times: the stream is that, not the 20 MB home
    assert 100_000 < delta.bytes < 200_000, delta
    assert delta.bytes < full.bytes / 100
    assert snapshot_of(b.snapshot_path("s2")) == snapshot_of(a.snapshot_path("s2"))

    received = subvolume_ids(b, b.snapshot_path("s2"))
    assert received.readonly and received.received_uuid == subvolume_ids(a, a.snapshot_path("s2")).uuid
    with pytest.raises(OSError):
        (b.snapshot_path("s2") / "results.csv").write_text("tampered")
    # the node uses it as it uses its own snapshots
    b.restore("s2", "e3")
    assert (b.live_path("e3") / "results.csv").stat().st_size == 100_000


def test_links_arrive_as_links_and_are_never_followed(node):
    a, b = node("a"), node("b")
    shadow = Path("/etc/shadow").read_bytes() if Path("/etc/shadow").exists() else None

    def hostile(home: Path) -> None:
        os.symlink("/etc/shadow", home / "shadow")
        os.symlink("/", home / "root")
        os.symlink("../../../..", home / "up")
        (home / "dir").mkdir()
        os.symlink("/etc", home / "dir/etc")
        (home / "dir/etc-file").write_text("mine\n")

    saved(a, "s1", None, hostile)
    replicate(a, "s1", b, [])
    got = b.snapshot_path("s1")
    for name, target in [("shadow", "/etc/shadow"), ("root", "/"), ("up", "../../../.."), ("dir/etc", "/etc")]:
        assert (got / name).is_symlink() and os.readlink(got / name) == target
    assert (got / "dir/etc-file").read_text() == "mine\n"
    assert sorted(p.name for p in got.iterdir()) == ["dir", "root", "shadow", "up"]
    if shadow is not None:
        assert Path("/etc/shadow").read_bytes() == shadow


def test_a_second_send_sends_nothing(node):
    a, b = node("a"), node("b")
    saved(a, "s1", None, first_home)
    replicate(a, "s1", b, [])
    before = subvolume_ids(b, b.snapshot_path("s1"))
    again = replicate(a, "s1", b, [])
    assert not again.sent and again.bytes == 0
    assert subvolume_ids(b, b.snapshot_path("s1")) == before


def test_parents_along_a_chain_of_stores(node):
    """A node saves, the store of record receives, a third node receives from it, and sends back."""
    a, record, c = node("a"), node("record"), node("c")
    saved(a, "s1", None, first_home)
    saved(a, "s2", "s1", small_change)
    replicate(a, "s1", record, [])
    replicate(a, "s2", record, ["s1"])

    # from the store of record (received copies) to a node that has none, then the delta
    assert replicate(record, "s1", c, []).parent is None
    delta = replicate(record, "s2", c, ["s1"])
    assert delta.parent == "s1" and delta.bytes < 200_000, delta

    # node c continues #2 and saves #3; the store of record and node a (which saved s2) get the delta
    saved(c, "s3", "s2", lambda home: random_file(home / "more.bin", 300_000))
    for store in (record, a):
        back = replicate(c, "s3", store, ["s2", "s1"])
        assert back.parent == "s2" and 300_000 < back.bytes < 400_000, back
        assert snapshot_of(store.snapshot_path("s3")) == snapshot_of(c.snapshot_path("s3"))


def test_a_namesake_of_another_origin_is_no_parent(node):
    a, b = node("a"), node("b")
    saved(a, "s1", None, first_home)
    saved(a, "s2", "s1", small_change)
    saved(b, "s1", None, lambda home: random_file(home / "other.bin", 1000))  # b's own s1
    with pytest.raises(HomeStoreError, match="another origin"):
        replicate(a, "s1", b, [])
    sent = replicate(a, "s2", b, ["s1"])
    assert sent.parent is None, "a delta against b's s1 would be applied to other data"
    assert snapshot_of(b.snapshot_path("s2")) == snapshot_of(a.snapshot_path("s2"))


def nothing_published(store: BtrfsHomeStore, key: str) -> bool:
    return not store.has_snapshot(key) and not list(Path(store.root, "snapshots").glob(f".partial-{key}"))


def test_a_full_target_publishes_nothing_and_the_source_is_untouched(node):
    a, small = node("a"), node("small", size="160M")
    saved(a, "s1", None, lambda home: random_file(home / "big.bin", 200 * MB))
    before = snapshot_of(a.snapshot_path("s1"))
    with pytest.raises(StoreFullError, match="No space left"):
        replicate(a, "s1", small, [])
    assert nothing_published(small, "s1")
    assert snapshot_of(a.snapshot_path("s1")) == before


def children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(p) for p in (task / "children").read_text().split()]
    return found


def is_receive(pid: int) -> bool:
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except FileNotFoundError:
        return False
    # the verb, not any word: this test's own temporary paths (the send's arguments) say "receive" too
    return argv[1:2] == [b"receive"]


def test_a_receive_killed_mid_way_publishes_nothing_and_a_retry_succeeds(node):
    a, b = node("a"), node("b")
    saved(a, "s1", None, first_home)
    before = snapshot_of(a.snapshot_path("s1"))

    def kill_receive(t):
        if t.bytes:
            for pid in filter(is_receive, children(os.getpid())):
                os.kill(pid, signal.SIGKILL)

    with pytest.raises(HomeStoreError, match="btrfs receive failed"):
        replicate(a, "s1", b, [], progress=kill_receive, progress_interval=0)
    assert nothing_published(b, "s1")
    assert snapshot_of(a.snapshot_path("s1")) == before
    replicate(a, "s1", b, [])
    assert snapshot_of(b.snapshot_path("s1")) == before


SENDER = """
import sys, time
from workspace.store.homes import BtrfsHomeStore
from workspace.store.replication import replicate

def stop(t):
    if t.bytes:
        print("sending", flush=True)
        time.sleep(60)

replicate(BtrfsHomeStore(root=sys.argv[1]), "s1", BtrfsHomeStore(root=sys.argv[2]), [], stop, progress_interval=0)
"""


def test_a_crash_mid_way_leaves_a_partial_that_setup_removes(node):
    a, b = node("a"), node("b")
    saved(a, "s1", None, first_home)
    sender = subprocess.Popen(
        [sys.executable, "-c", SENDER, a.root, b.root], stdout=subprocess.PIPE, cwd=Path(__file__).parents[2]
    )
    try:
        assert sender.stdout.readline() == b"sending\n"
        helpers = children(sender.pid)
        sender.kill()  # the hub dies: no cleanup runs
    finally:
        sender.wait()
    deadline = time.monotonic() + 30  # its send and receive end once their pipes close
    while any(Path(f"/proc/{pid}").exists() for pid in helpers) and time.monotonic() < deadline:
        time.sleep(0.1)

    assert not b.has_snapshot("s1"), "nothing looks complete"
    assert (Path(b.root) / "snapshots/.partial-s1").exists()
    BtrfsHomeStore(root=b.root).setup(clean=True)
    assert nothing_published(b, "s1")
    replicate(a, "s1", b, [])
    assert snapshot_of(b.snapshot_path("s1")) == snapshot_of(a.snapshot_path("s1"))


def test_a_dataset_version_arrives_read_only(node):
    a, b = node("a"), node("b")

    def fill(directory: Path) -> None:
        (directory / "train").mkdir()
        random_file(directory / "train/images.bin", 2 * MB)
        os.symlink("/etc/passwd", directory / "link")

    a.dataset_from_files("d1v1", fill)
    sent = replicate_dataset(a, "d1v1", b)
    got = b.dataset_path("d1v1")
    assert sent.parent is None and 2 * MB < sent.bytes < 3 * MB
    assert snapshot_of(got) == snapshot_of(a.dataset_path("d1v1"))
    assert subvolume_ids(b, got).readonly
    with pytest.raises(OSError):
        (got / "train/new").write_text("x")
    assert not replicate_dataset(a, "d1v1", b).sent
