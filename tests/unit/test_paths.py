"""paths.Tree: nothing beneath a user's tree leads out of it (both resolvers)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from workspace.datasets import DatasetRules
from workspace.errors import UserError
from workspace.store import paths
from workspace.store.copier import copy_tree
from workspace.store.homes import CopyHomeStore, HomeStoreError


@pytest.fixture(params=["openat2", "walk"])
def resolver(request, monkeypatch):
    if request.param == "walk":
        monkeypatch.setattr(paths, "_openat2_works", False)
    elif not paths._has_openat2():
        pytest.skip("this kernel has no openat2")
    return request.param


def chain_home(root: Path) -> None:
    """The link chain of the attack: t -> ., L -> t/.., u -> L/.. (u/… is the store above the home)."""
    root.mkdir(parents=True)
    (root / "work").mkdir()
    (root / "work/result.txt").write_text("mine")
    os.symlink(".", root / "t")
    os.symlink("t/..", root / "L")
    os.symlink("L/..", root / "u")
    os.symlink("/etc", root / "etc")


def test_link_chains_and_dotdot_are_refused(tmp_path, resolver):
    home = tmp_path / "store/snapshots/s1"
    chain_home(home)
    (tmp_path / "store/secret").write_text("another user's")
    with paths.Tree(home) as tree:
        assert tree.is_dir("work")
        assert os.read(tree.open("work/result.txt"), 10) == b"mine"
        for bad in (
            "u/secret",
            "u/snapshots",
            "L",
            "t/work",
            "etc/passwd",
            "etc",
            "../secret",
            "/etc/passwd",
            "work/../../secret",
        ):
            with pytest.raises((paths.Escape, NotADirectoryError)):
                os.close(tree.open(bad))
            assert not tree.is_dir(bad)
        # links are data: reported, never followed
        kinds = {e.rel: e.is_link() for e in tree.walk()}
        assert kinds[b"u"] and kinds[b"etc"] and not kinds[b"work"]
        assert b"u/secret" not in kinds and not any(k.startswith(b"etc/") for k in kinds)


def test_a_directory_swapped_for_a_link_mid_walk_is_an_escape(tmp_path, resolver):
    home = tmp_path / "home"
    (home / "a").mkdir(parents=True)
    (home / "a/f").write_text("x")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside/loot").write_text("not yours")
    seen = []
    with paths.Tree(home) as tree:
        with pytest.raises(paths.Escape):
            for e in tree.walk():
                seen.append(e.rel)
                if e.rel == b"a":  # listed as a directory; a student swaps it before the descent
                    shutil.rmtree(home / "a")
                    os.symlink(tmp_path / "outside", home / "a")
    assert b"a/loot" not in seen


def test_dataset_from_a_directory_through_links_is_refused(tmp_path, resolver):
    store = CopyHomeStore(root=str(tmp_path / "store")).setup()
    chain_home(store.snapshot_path("s1"))
    (tmp_path / "store/snapshots/s2").mkdir()
    (tmp_path / "store/snapshots/s2/other-users-file").write_text("private")
    for bad in ("u/snapshots", "u/live", "L/s2", "etc", "../s2", "work/../../s2"):
        with pytest.raises((HomeStoreError, FileNotFoundError)):
            store.dataset_from_snapshot("s1", bad, f"d{abs(hash(bad))}")
    assert not list((tmp_path / "store/datasets").iterdir())
    store.dataset_from_snapshot("s1", "work", "dgood")
    assert (tmp_path / "store/datasets/dgood/result.txt").read_text() == "mine"


def test_a_save_never_links_to_a_file_outside_through_the_parent(tmp_path, resolver):
    """The parent snapshot has `a -> <outside dir>`; the new home has a real a/f like the outside file."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "f").write_text("root's file")
    parent = tmp_path / "parent"
    parent.mkdir()
    os.symlink(outside, parent / "a")
    home = tmp_path / "home"
    (home / "a").mkdir(parents=True)
    (home / "a/f").write_text("root's file")
    st = os.stat(outside / "f")
    os.utime(home / "a/f", ns=(st.st_atime_ns, st.st_mtime_ns))
    os.chmod(home / "a/f", st.st_mode & 0o7777)
    stats = copy_tree(home, tmp_path / "snap", link_from=parent)
    assert stats.shared_files == 0
    assert os.stat(tmp_path / "snap/a/f").st_ino != st.st_ino


def test_check_tree_reads_links_without_following(tmp_path, resolver):
    root = tmp_path / "v"
    root.mkdir()
    os.symlink("/", root / "rootfs")
    os.symlink("sub/../../x", root / "sneaky")
    (root / "sub").mkdir()
    os.symlink("../sub", root / "sub/fine")
    with pytest.raises(UserError) as e:
        DatasetRules().check_tree(root, "v")
    assert "rootfs" in e.value.jupyterhub_message and "sneaky" in e.value.jupyterhub_message
    assert "sub/fine" not in e.value.jupyterhub_message


@pytest.mark.parametrize(
    "rel,target,escapes",
    [
        (b"a", b"b", False),
        (b"a", b"../b", True),
        (b"d/a", b"../b", False),
        (b"d/a", b"../../b", True),
        (b"a", b"/etc", True),
        (b"d/a", b"./x/../../y", False),
        (b"d/a", b"x/../../../y", True),
    ],
)
def test_link_escapes(rel, target, escapes):
    assert paths.link_escapes(rel, target) is escapes


def test_measure_streams_and_counts_hard_links_once(tmp_path, resolver):
    (tmp_path / "t/d").mkdir(parents=True)
    (tmp_path / "t/d/a").write_bytes(b"x" * 1000)
    os.link(tmp_path / "t/d/a", tmp_path / "t/b")
    os.symlink("/etc/passwd", tmp_path / "t/c")
    assert paths.measure(tmp_path / "t") == (1000, 3)
    assert paths.measure(tmp_path / "t", limit_files=1)[1] == 2


def test_digest_is_the_content_not_the_order_and_never_follows_a_link(tmp_path, resolver):
    """What a backup checks an output by: equal for a faithful copy (other listing order, hard links or
    none), different for any change of content, name, mode or time; a link's text, never its target."""
    home = tmp_path / "home"
    chain_home(home)
    (home / "data.bin").write_bytes(os.urandom(3 << 20))  # several chunks
    os.link(home / "data.bin", home / "again.bin")
    before = paths.digest(home)
    assert len(before) == 64

    copy = tmp_path / "copy"
    copy_tree(home, copy)  # the copy's files are made in another order, its hard link kept
    assert paths.digest(copy) == before
    (copy / "again.bin").unlink()
    shutil.copy2(copy / "data.bin", copy / "again.bin")  # the same bytes, no longer a hard link
    assert paths.digest(copy) == before

    outside = tmp_path / "outside.txt"
    outside.write_text("secret")
    os.symlink(str(outside), copy / "out")
    with_link = paths.digest(copy)
    outside.write_text("changed")  # what a link points to is not the tree's
    assert paths.digest(copy) == with_link != before
    (copy / "out").unlink()
    assert paths.digest(copy) == before

    for change in (
        lambda: (copy / "work/result.txt").write_text("minE"),
        lambda: os.chmod(copy / "work/result.txt", 0o600),
        lambda: os.utime(copy / "work/result.txt", ns=(1, 1)),
        lambda: os.rename(copy / "work/result.txt", copy / "work/result.csv"),
    ):
        change()
        assert paths.digest(copy) != before
        shutil.rmtree(copy)
        copy_tree(home, copy)
        assert paths.digest(copy) == before


def test_a_copy_keeps_a_fifo_s_mode_under_the_hub_s_umask(tmp_path):
    """The hub (and workspace-admin) create with a umask of 077: a copied fifo keeps its own mode all the same,
    as a backup's digest of it checks."""
    home = tmp_path / "home"
    home.mkdir()
    os.mkfifo(home / "pipe", 0o644)
    os.chmod(home / "pipe", 0o664)
    umask = os.umask(0o077)
    try:
        copy_tree(home, tmp_path / "copy")
    finally:
        os.umask(umask)
    assert (tmp_path / "copy/pipe").stat().st_mode & 0o777 == 0o664
    assert paths.digest(tmp_path / "copy") == paths.digest(home)
