"""A home's owner on a user-namespaced node (workspace/store/ownership.py), on a real tree (as root)."""

from __future__ import annotations

import os
import stat

import pytest

from workspace.store import ownership

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="changing owners needs root")

OFFSET = 231072


def owners(root) -> set[tuple[int, int]]:
    """The (uid, gid) pairs found under `root`, `root` included (never through a link)."""
    st = os.lstat(root)
    found = {(st.st_uid, st.st_gid)}
    for dirpath, dirnames, filenames, _fd in os.fwalk(root, follow_symlinks=False):
        for name in (*dirnames, *filenames):
            st = os.lstat(os.path.join(dirpath, name))
            found.add((st.st_uid, st.st_gid))
    return found


def tree(root):
    """A home as root inside left it: root's files, a setuid program, a setgid folder, a FIFO, links out."""
    home = root / "home"
    (home / "sub").mkdir(parents=True)
    (home / "mine").write_text("x")
    (home / "by-root").write_text("y")
    os.chown(home / "by-root", OFFSET, OFFSET)
    (home / "suid").write_text("#!/bin/sh\n")
    os.chown(home / "suid", OFFSET + 1000, OFFSET + 1000)
    os.chmod(home / "suid", 0o4755)
    os.chmod(home / "sub", 0o2775)
    os.mkfifo(home / "sub" / "fifo")
    outside = root / "host-file"
    outside.write_text("the host's")
    os.chown(outside, 0, 0)
    os.chmod(outside, 0o4700)
    (home / "link-out").symlink_to(outside)
    (home / "sub" / "dir-link").symlink_to(root)
    return home, outside


def test_give_hands_every_entry_to_one_owner_and_clears_setuid_and_setgid(tmp_path):
    home, outside = tree(tmp_path)
    count = ownership.give(home, 1000, 1000)
    assert count == 8  # home, sub, mine, by-root, suid, link-out, fifo, dir-link
    assert owners(home) == {(1000, 1000)}
    assert stat.S_IMODE(os.stat(home / "suid").st_mode) == 0o755
    assert stat.S_IMODE(os.stat(home / "sub").st_mode) == 0o775
    # the links are the home's; what they point at is not, and is left as it was
    assert os.lstat(home / "link-out").st_uid == 1000
    st = os.stat(outside)
    assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (0, 0o4700)
    assert os.stat(tmp_path).st_uid == 0


def test_give_to_the_remapped_user_and_back(tmp_path):
    home, _ = tree(tmp_path)
    ownership.give(home, OFFSET + 1000, OFFSET + 1000)
    assert owners(home) == {(OFFSET + 1000, OFFSET + 1000)}
    ownership.give(home, 1000, 1000)
    assert owners(home) == {(1000, 1000)}


def test_a_link_as_the_tree_itself_is_refused(tmp_path):
    """The top is opened without following a link: a home swapped for a link to the host is not walked."""
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "home").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(OSError):
        ownership.give(tmp_path / "home", 1000, 1000)
    assert os.stat(tmp_path / "elsewhere").st_uid == 0
