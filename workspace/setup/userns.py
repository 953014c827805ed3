"""A node whose engine keeps its containers in a user namespace: where root-allowed types run (#32).

    python -m workspace.setup.cluster up --nodes 4 --userns node4

Its `dockerd` runs with `--userns-remap=dockremap`: a container's uid `u` is
the host's `offset + u` (the range /etc/subuid and /etc/subgid give the
`dockremap` account, made here if missing), so a workspace's root is an
ordinary host account that owns nothing of the host's. Its store agent is told
the offset (`--id-offset`): homes are handed to the remapped user at restore
and back to the owner at save (workspace/store/ownership.py).

A root-allowed workspace writes its root filesystem (apt-get writes /usr and
/var), which the other types keep read-only. Its writable layer is bounded:
the node's data root is an XFS image mounted with project quotas, where
overlay2 gives every container a layer of at most `overlay2.size`
(`--storage-opt`, the engine's default for all its containers, so a swarm
task gets it too). SECURITY.md ("Root inside") says what this protects and
what it does not.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from workspace.setup.steps import SetupError, apt_install

USER = "dockremap"  # the account Docker's `--userns-remap=default` would make; made here, ranged here
RANGE = 65536  # uids 0..65535 inside
FIRST = 100000  # no range starts below this (the host's own accounts)


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


def bounded_data_root(node_dir: Path, log: Path, size: str = "40G") -> Path:
    """The engine's data root on an XFS image with project quotas (`node_dir/data`, mounted if it is not)."""
    data = node_dir / "data"
    data.mkdir(parents=True, exist_ok=True)
    if _fstype(data) == "xfs":
        return data
    if shutil.which("mkfs.xfs") is None:
        apt_install(["xfsprogs"], log, "A user-namespaced node's bounded container layers")
    image = node_dir / "data.xfs"
    if not image.exists():
        subprocess.run(["truncate", "-s", size, str(image)], check=True)
        _run(["mkfs.xfs", "-q", str(image)], log)
    _run(["mount", "-o", "loop,pquota", str(image), str(data)], log)
    return data


def dockerd_args(layer_size: str) -> list[str]:
    """What a user-namespaced node's `dockerd` adds to a node's arguments."""
    return [f"--userns-remap={USER}", f"--storage-opt=overlay2.size={layer_size}"]


def _fstype(path: Path) -> str:
    out = subprocess.run(["stat", "-f", "-c", "%T", str(path)], capture_output=True, text=True)
    return out.stdout.strip()


def _run(cmd: list[str], log: Path) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True)
    with open(log, "a") as f:
        f.write(f"$ {' '.join(cmd)}\n{proc.stdout}{proc.stderr}")
    if proc.returncode != 0:
        raise SetupError(f"`{' '.join(cmd)}` failed: {(proc.stderr or proc.stdout).strip()[-300:]}", log)
