"""A node whose engine keeps its containers in a user namespace: where root-allowed types run (#32).

    python -m workspace.setup.cluster up --nodes 4 --userns node4

Its `dockerd` runs with `--userns-remap=dockremap`: a container's uid `u` is
the host's `offset + u` (the range /etc/subuid and /etc/subgid give the
`dockremap` account, made here if missing), so a workspace's root is an
ordinary host account that owns nothing of the host's. Its store agent is told
the offset (`--id-offset`): homes are handed to the remapped user at restore
and back to the owner at save (workspace/store/ownership.py).

A root-allowed workspace writes its root filesystem (apt-get writes /usr and
/var), which the other types keep read-only. What it writes there is bounded:
the node's data root (images and containers' writable layers) is a
filesystem of its own, a loop image of `DATA_SIZE`, so a full layer fills
that and never the host's disk. A bound per container needs project quotas
(overlay2's `size` on XFS with `pquota`), which this machine's kernel lacks
("XFS: quota support not available"); a site whose kernel has them adds
`--storage-opt overlay2.size=10G` to such a node's engine (SECURITY.md, "Root
inside").
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from workspace.setup.steps import SetupError, run_logged

USER = "dockremap"  # the account Docker's `--userns-remap=default` would make; made here, ranged here
RANGE = 65536  # uids 0..65535 inside
FIRST = 100000  # no range starts below this (the host's own accounts)
DATA_SIZE = "16G"  # the node's images and writable layers, all of them (a sparse image: used as written)


def remap_offset(user: str = USER, etc: Path = Path("/etc")) -> int:
    """The first host uid (and gid) of `user`'s subordinate range, the account and its range made if missing."""
    if subprocess.run(["getent", "passwd", user], capture_output=True).returncode != 0:
        proc = subprocess.run(["useradd", "--system", "--shell", "/bin/false", user], capture_output=True, text=True)
        if proc.returncode != 0:
            raise SetupError(f"The account {user} (a user-namespaced engine's) could not be made: {proc.stderr}")
    return subordinate_range(user, etc)


def subordinate_range(user: str, etc: Path) -> int:
    """`user`'s range in `etc`/subuid and `etc`/subgid (the same start in both), added after every range
    there if it has none."""
    offsets = {_range_of(etc / name, user) for name in ("subuid", "subgid")}
    if offsets == {None}:
        start = max(FIRST, _first_free(etc / "subuid"), _first_free(etc / "subgid"))
        for name in ("subuid", "subgid"):
            with open(etc / name, "a") as f:
                f.write(f"{user}:{start}:{RANGE}\n")
        return start
    if len(offsets) != 1 or None in offsets:
        raise SetupError(f"{user} has different ranges in {etc}/subuid and {etc}/subgid; give it the same one in both.")
    return offsets.pop()


def _entries(path: Path) -> list[tuple[str, int, int]]:
    out = []
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError:
        return out
    for line in lines:
        parts = line.strip().split(":")
        if len(parts) == 3 and parts[1].isdigit() and parts[2].isdigit():
            out.append((parts[0], int(parts[1]), int(parts[2])))
    return out


def _range_of(path: Path, user: str) -> int | None:
    return next((start for name, start, count in _entries(path) if name == user and count >= RANGE), None)


def _first_free(path: Path) -> int:
    return max((start + count for _name, start, count in _entries(path)), default=FIRST)


def bounded_data_root(node_dir: Path, log: Path, offset: int, size: str = DATA_SIZE) -> Path:
    """The engine's data root on a filesystem of its own (`node_dir/data`, an ext4 loop image of `size`,
    mounted if it is not), on a path the remapped root (`offset`) may pass through."""
    data = node_dir / "data"
    data.mkdir(parents=True, exist_ok=True)
    if not os.path.ismount(data):
        image = node_dir / "data.ext4"
        if not image.exists():
            subprocess.run(["truncate", "-s", size, str(image)], check=True)
            run_logged(["mkfs.ext4", "-q", "-F", "-m", "0", str(image)], log, "Making a node's data root failed")
        run_logged(["mount", "-o", "loop", str(image), str(data)], log, "Mounting a node's data root failed")
    let_through(data, offset)
    return data


ACL = "system.posix_acl_access"


def let_through(path: Path, gid: int) -> None:
    """Let the remapped root's group (`gid`) pass through each directory above `path` that others may not pass
    (search, not read: group `--x`), as Docker makes its own data root (0710, root and the remapped group):
    the engine refuses a data root its remapped root cannot reach. A root-only directory (the data
    directory, #28) gets that group; a directory that gives its group anything else is left for the
    administrator."""
    for directory in path.parents:
        st = os.stat(directory)
        if st.st_mode & 0o001:
            continue
        if ACL in os.listxattr(directory):  # its group bits are an ACL's mask: what a group may do is the ACL's
            raise SetupError(
                f"The engine's remapped root must pass through {directory}, which has an access ACL: let everyone "
                "pass (chmod o+x), remove the ACL (setfacl -b) or put the cluster's directory elsewhere."
            )
        if st.st_gid == gid and st.st_mode & 0o010:
            continue
        if st.st_mode & 0o070:
            raise SetupError(
                f"The engine's remapped root must pass through {directory}, whose group ({st.st_gid}) has rights "
                "there: let everyone pass (chmod o+x) or put the cluster's directory elsewhere."
            )
        os.chown(directory, -1, gid)
        os.chmod(directory, (st.st_mode & 0o7777) | 0o010)


def runtime_leftovers(cluster_root: Path) -> list[Path]:
    """What a remapping engine made beside the cluster's directory: its runtime directories for the remapped
    root (`<root>.<uid>.<gid>/node4.<uid>.<gid>/run.<uid>.<gid>/containerd...`, empty once it stopped)."""
    return [
        p
        for p in cluster_root.parent.glob(f"{cluster_root.name}.*.*")
        if re.fullmatch(r"\.\d+\.\d+", p.name[len(cluster_root.name) :])
    ]


def dockerd_args() -> list[str]:
    """What a user-namespaced node's `dockerd` adds to a node's arguments."""
    return [f"--userns-remap={USER}"]
