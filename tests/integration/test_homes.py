"""The home store on real filesystems: a loop-mounted btrfs, and plain directories.

Every backend must keep a home exactly: symlinks, permissions, owners, mtimes,
empty directories, hard links, any file name, and directory renames.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from workspace.store.homes import BtrfsHomeStore, CopyHomeStore, HomeStoreError, StoreFullError, mount_loop_btrfs
from workspace.store.paths import walk as scan

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="mounting filesystems needs root")


@pytest.fixture
def mounted(tmp_path):
    """Mount helper; everything mounted is unmounted at the end."""
    mounts = []

    def mount(*args, target: Path):
        target.mkdir(parents=True, exist_ok=True)
        subprocess.run(["mount", *args, str(target)], check=True, capture_output=True)
        mounts.append(target)
        return target

    yield mount
    for m in reversed(mounts):
        subprocess.run(["umount", "-l", str(m)], check=False)


def btrfs_store(tmp_path, size="1G") -> BtrfsHomeStore:
    if shutil.which("mkfs.btrfs") is None:
        pytest.skip("btrfs-progs is not installed (make test installs it)")
    mnt = tmp_path / "btrfs"
    mount_loop_btrfs(tmp_path / "store.img", mnt, size=size)
    return BtrfsHomeStore(root=str(mnt / "store")).setup()


@pytest.fixture(params=["btrfs", "copy"])
def store(request, tmp_path):
    if os.geteuid() != 0:
        pytest.skip("the store runs as root (it chowns homes and mounts btrfs)")
    if request.param == "btrfs":
        s = btrfs_store(tmp_path)
        yield s
        subprocess.run(["umount", "-l", str(tmp_path / "btrfs")], check=False)
    else:
        yield CopyHomeStore(root=str(tmp_path / "store")).setup()


NASTY_NAMES = [b"with space.txt", b"new\nline.txt", b"latin1-\xe9\xff.bin", b"-dash", b"emoji-\xf0\x9f\x93\x9a"]


def build_home(root: Path) -> None:
    """A home with everything a home can hold."""
    r = os.fsencode(root)
    (root / "project/src").mkdir(parents=True)
    (root / "project/src/main.py").write_text("print('hi')\n")
    (root / "empty/dir/deep").mkdir(parents=True)
    (root / "data.bin").write_bytes(os.urandom(300_000))
    for name in NASTY_NAMES:
        with open(r + b"/" + name, "wb") as f:
            f.write(name * 3)
    os.symlink("project/src/main.py", root / "link-relative")
    os.symlink("/etc/hostname", root / "link-absolute")
    os.symlink("does/not/exist", root / "link-dangling")
    os.symlink("project", root / "link-to-dir")
    os.link(root / "data.bin", root / "data-hardlink.bin")
    os.mkfifo(root / "a-fifo")
    (root / "secret.txt").write_text("mine\n")
    os.chmod(root / "secret.txt", 0o600)
    (root / "script.sh").write_text("#!/bin/sh\n")
    os.chmod(root / "script.sh", 0o755)
    os.chmod(root / "project/src", 0o750)
    (root / "readonly").mkdir()
    (root / "readonly/file").write_text("x")
    os.chmod(root / "readonly", 0o555)
    for p in scan(r):
        path = r + b"/" + p.rel if p.rel else r
        os.lchown(path, 1000, 1000)
    os.utime(root / "data.bin", ns=(1_600_000_000_123_456_789, 1_600_000_000_123_456_789))
    os.utime(root / "empty/dir", ns=(1_500_000_000_000_000_001, 1_500_000_000_000_000_001))
    os.utime(root / "link-relative", ns=(1_400_000_000_000_000_000,) * 2, follow_symlinks=False)


def snapshot_of(root: Path) -> dict:
    """Everything that must survive, per path; hard links as groups of paths."""
    r = os.fsencode(root)
    out, inodes = {}, {}
    for e in scan(r):
        path = r + b"/" + e.rel if e.rel else r
        st = e.st
        item = {"type": stat.S_IFMT(st.st_mode), "mode": stat.S_IMODE(st.st_mode), "uid": st.st_uid, "gid": st.st_gid}
        if stat.S_ISLNK(st.st_mode):
            item["target"] = os.readlink(path)
            item["mtime"] = st.st_mtime_ns
        elif stat.S_ISREG(st.st_mode):
            item["sha"] = hashlib.sha256(Path(os.fsdecode(path)).read_bytes()).hexdigest()
            item["mtime"] = st.st_mtime_ns
            inodes.setdefault(st.st_ino, []).append(e.rel)
        elif stat.S_ISDIR(st.st_mode) and e.rel:
            item["mtime"] = st.st_mtime_ns
        out[e.rel] = item
    out["hardlinks"] = sorted(sorted(group) for group in inodes.values() if len(group) > 1)
    return out


def tree_hash(root: Path) -> str:
    """One digest of everything snapshot_of checks a tree by (paths as bytes, hard links by name)."""
    return hashlib.sha256(repr(sorted(snapshot_of(root).items(), key=lambda kv: repr(kv[0]))).encode()).hexdigest()


def test_roundtrip_keeps_everything(store):
    store.restore(None, "e1")
    home = store.live_path("e1")
    build_home(home)
    before = snapshot_of(home)
    assert before["hardlinks"] == [[b"data-hardlink.bin", b"data.bin"]]

    store.save("e1", "s1", parent=None)
    store.release("e1")
    assert not home.exists()
    assert snapshot_of(store.snapshot_path("s1")) == before

    store.restore("s1", "e2")
    assert snapshot_of(store.live_path("e2")) == before


def test_lineage_shares_and_snapshots_are_immutable(store):
    store.restore(None, "e1")
    build_home(store.live_path("e1"))
    store.save("e1", "s1", parent=None)
    store.release("e1")
    first = snapshot_of(store.snapshot_path("s1"))

    # #2 continues from #1: renames a directory (mv / git mv), edits, deletes
    store.restore("s1", "e2")
    live = store.live_path("e2")
    os.rename(live / "project", live / "project2")
    (live / "project2/src/main.py").write_text("print('changed')\n")
    (live / "secret.txt").unlink()
    with open(live / "data.bin", "ab") as f:
        f.write(b"appended")
    (live / "new-dir").mkdir()
    store.save("e2", "s2", parent="s1")
    store.release("e2")

    second = snapshot_of(store.snapshot_path("s2"))
    assert b"project2/src/main.py" in second and b"project" not in second
    assert b"secret.txt" not in second
    assert second[b"data.bin"]["sha"] != first[b"data.bin"]["sha"]
    # the appended file is still hard-linked to its twin
    assert second["hardlinks"] == [[b"data-hardlink.bin", b"data.bin"]]
    # #1's snapshot did not change
    assert snapshot_of(store.snapshot_path("s1")) == first

    # #3 continues from #1 and does not see #2's changes
    store.restore("s1", "e3")
    assert snapshot_of(store.live_path("e3")) == first


def test_restore_refuses_to_overwrite_a_live_home(store):
    store.restore(None, "e1")
    (store.live_path("e1") / "work.txt").write_text("unsaved")
    with pytest.raises(HomeStoreError):
        store.restore(None, "e1")
    assert (store.live_path("e1") / "work.txt").read_text() == "unsaved"


def test_a_partial_snapshot_is_removed_at_setup(store):
    store.restore(None, "e1")
    (store.live_path("e1") / "f").write_text("x")
    store.save("e1", "s1", parent=None)
    partial = store.snapshot_path("s1").with_name(".partial-s2")
    partial.mkdir()
    type(store)(root=store.root).setup()
    assert not partial.exists()
    assert store.has_snapshot("s1") and store.has_live("e1")


@needs_root
def test_full_disk_keeps_the_live_home_and_a_retry_succeeds(tmp_path, mounted):
    root = mounted("-t", "tmpfs", "-o", "size=10m", "tmpfs", target=tmp_path / "small")
    store = CopyHomeStore(root=str(root / "store")).setup()
    store.restore(None, "e1")
    live = store.live_path("e1")
    (live / "thesis.tex").write_bytes(os.urandom(3_000_000))
    (live / "results.csv").write_bytes(os.urandom(1_500_000))
    filler = root / "filler"
    filler.write_bytes(os.urandom(3_000_000))
    before = snapshot_of(live)

    with pytest.raises(StoreFullError):
        store.save("e1", "s1", parent=None)
    assert snapshot_of(live) == before, "the live home is untouched"
    assert not store.has_snapshot("s1")
    assert not list((root / "store/snapshots").iterdir()), "no partial snapshot is left"

    filler.unlink()
    store.save("e1", "s1", parent=None)
    assert snapshot_of(store.snapshot_path("s1")) == before


def test_btrfs_save_and_restore_share_blocks(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("mounting btrfs needs root")
    store = btrfs_store(tmp_path)
    try:
        store.restore(None, "e1")
        (store.live_path("e1") / "big").write_bytes(os.urandom(50_000_000))
        store.save("e1", "s1", parent=None)
        store.release("e1")
        os.sync()
        used = store.usage()
        store.restore("s1", "e2")
        with open(store.live_path("e2") / "big", "ab") as f:
            f.write(os.urandom(1_000_000))
        stats = store.save("e2", "s2", parent="s1")
        store.release("e2")
        os.sync()
        grown = store.usage() - used
        assert stats.bytes >= 1_000_000 and stats.files == 1, stats
        assert grown < 3_000_000, f"a 1 MB change grew the store by {grown} bytes"
    finally:
        subprocess.run(["umount", "-l", str(tmp_path / "btrfs")], check=False)
