"""Who owns a home's files on a node whose engine runs workspaces in a user namespace (#32).

A root-allowed resource type runs on a node whose Docker engine was started
with `userns-remap`: the container's uid `u` is the host's uid `offset + u`, so
its root is an unprivileged host account. A bind-mounted home is not remapped
by the engine: while it runs there its files must belong to `offset + 1000`
(the workspace's user as the host sees it), and in every saved snapshot to the
owner's uid (1000), whatever root inside created.

`give` does both: it sets every entry of a tree to one owner and clears the
setuid and setgid bits (a home is data; a program root made setuid inside must
not become the owner's setuid program elsewhere). It walks with directory file
descriptors and never follows a link (`os.fwalk`, `follow_symlinks=False`): the
tree is the student's, and a link in it may point anywhere on the node. It runs
only while no container has the tree mounted (before the start, after the stop).

Its cost is one `lchown` per entry: about a second per 100,000 files, paid at
each start and save of a root-allowed type only.
"""

from __future__ import annotations

import os
import stat

SETID = stat.S_ISUID | stat.S_ISGID


def give(root: str | os.PathLike, uid: int, gid: int) -> int:
    """Make every entry under `root` (and `root`) owned by uid:gid, without setuid/setgid bits; the count."""
    top = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        _own(top, None, uid, gid)
    finally:
        os.close(top)
    count = 1
    for _dirpath, dirnames, filenames, dir_fd in os.fwalk(root, follow_symlinks=False):
        for name in (*dirnames, *filenames):
            _own(dir_fd, name, uid, gid)
            count += 1
    return count


def _own(dir_fd: int, name: str | None, uid: int, gid: int) -> None:
    """One entry (`name` in `dir_fd`; None: `dir_fd` itself), never through a link."""
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False) if name else os.fstat(dir_fd)
    except FileNotFoundError:
        return
    if (st.st_uid, st.st_gid) != (uid, gid):
        if name:
            os.chown(name, uid, gid, dir_fd=dir_fd, follow_symlinks=False)
        else:
            os.fchown(dir_fd, uid, gid)
    # chown clears a regular file's setuid/setgid itself, not a directory's setgid nor an unchanged owner's
    # bits: cleared here, on regular files and directories only (nothing else runs or inherits a group)
    if st.st_mode & SETID and (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
        if not name:
            os.fchmod(dir_fd, stat.S_IMODE(st.st_mode) & ~SETID)
            return
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY, dir_fd=dir_fd)
        try:
            now = os.fstat(fd)  # the entry opened is the one to change (not one swapped in meanwhile)
            if stat.S_ISREG(now.st_mode) or stat.S_ISDIR(now.st_mode):
                os.fchmod(fd, stat.S_IMODE(now.st_mode) & ~SETID)
        finally:
            os.close(fd)
