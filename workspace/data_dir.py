"""The data directory is the hub's alone (#28).

It holds every home (the store or its btrfs image), both databases (with
every student's keys, sealed: workspace/vault.py), the logs of what students
ran, the gateway's keys and the hub's secrets. No other account of the host
may read any of it, so:

- every process we start runs with a umask of 077 (`UMASK`): what it creates
  is 0600, its directories 0700 (the hub, the proxy it starts, the services,
  the culler, the SSH gateway; dockerd keeps a stock umask of its own, but its
  log file here is 0600);
- `close()`, at every `make up` and hub start, makes the directory 0700 and
  takes group and other bits away from what the hub keeps there, which also
  mends a deployment made before (its database and logs were 0644).

Users' trees are left as they are: homes, snapshots and dataset versions keep
the modes their owner (uid 1000 in a container) gave them, which their
containers need; the store's directories above them are 0700 and root's
(homes.py), and a container sees only its own mount, never the path above
it. A cluster's nodes and the cache of downloads are closed at their top
only (their insides are engines' and tools' own). The test PostgreSQL (make
test) runs as its own account, which must reach `data/postgres`: the data
directory then lets that account's group pass through it (0710), and no one
else.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

UMASK = 0o077
OPEN = 0o077  # the bits another account reads, writes or enters by
# what the hub writes here, all of it its own: closed throughout
HUB_TREES = ("logs", "run", "secrets", "gateway", "execution-logs", "jupyterhub_config.d")
TEST_POSTGRES = "postgres"  # workspace/setup/postgres.py: the tests' server, as an ordinary user


def restrict_umask() -> None:
    """This process, and every process it starts, creates files only its own account reads."""
    os.umask(UMASK)


def close(data_dir: str | os.PathLike) -> list[Path]:
    """Make the data directory the hub's alone (see above); the paths whose mode changed."""
    root = Path(data_dir)
    root.mkdir(mode=0o700, parents=True, exist_ok=True)
    changed = []
    _restrict(root, 0o700, changed)
    with os.scandir(root) as entries:
        for entry in entries:
            path = Path(entry.path)
            if entry.is_symlink():
                continue  # a site's link (a store elsewhere): its target is the site's to set
            if entry.is_dir() and entry.name in HUB_TREES:
                _close_tree(path, changed)
            elif entry.is_dir() and entry.name == TEST_POSTGRES:
                continue  # its server's own (initdb makes its data 0700)
            else:
                # a file (the databases, their -wal and -shm, the store's image, the cookie secret) or
                # a directory closed at its top (the store, a cluster's nodes, the cache)
                _restrict(path, None, changed)
    return changed


def _close_tree(top: Path, changed: list) -> None:
    _restrict(top, None, changed)
    for here, dirs, files in os.walk(top):  # os.walk does not follow links to directories
        for name in dirs + files:
            _restrict(Path(here, name), None, changed)


def _restrict(path: Path, mode: int | None, changed: list) -> None:
    """Set `path`'s mode to `mode`, or (None) take the group and other bits away; never through a link."""
    try:
        st = path.lstat()
    except FileNotFoundError:
        return  # gone meanwhile (a log rotated, a pid file removed)
    if stat.S_ISLNK(st.st_mode) or stat.S_ISSOCK(st.st_mode):
        return
    current = stat.S_IMODE(st.st_mode)
    wanted = current & ~OPEN if mode is None else mode
    if current != wanted:
        os.chmod(path, wanted)  # not a link (lstat above), in a directory only root writes
        changed.append(path)
