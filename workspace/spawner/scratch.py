"""Scratch space: where a workspace's container may write besides its home, each place with a size.

A student's code writes anywhere it may. Left alone, that is the container's
writable layer (on the engine's disk, with no limit: overlay2 bounds it only
when Docker's data root is XFS mounted with `pquota`, and the hosts' roots
are ext4) and `/tmp`. So the root filesystem is **read-only**, and the few
places the image's programs write outside the home are **tmpfs mounts with a
size** (`DockerWorkspaceSpawner.scratch_space`):

- `/tmp` and `/var/tmp`: world-writable with the sticky bit, as usual;
- `/run/workspace`: the user's alone (mode 0700, owned by the image's user),
  where `workspace-start` writes sshd's host key, authorized keys, pid file
  and log (sshd's StrictModes refuses a key file under a directory others may
  write).

`/dev/shm` is the engine's own tmpfs (64 MB). A write past a size fails with
"No space left on device"; one anywhere else with "Read-only file system".

A tmpfs is memory: what is written there counts against the container's
memory limit (the cgroup of the writer is charged), so together they are
at most `memory_fraction` of the limit (each scaled down alike where the
configured sizes are more), and full ones leave the rest to the programs
instead of getting the workspace killed for memory. The same plan is a `--tmpfs` on Docker, a tmpfs volume on a Swarm
(whose tmpfs mounts cannot set an owner) and an `emptyDir` of medium Memory
with a `sizeLimit` on Kubernetes (workspace/spawner/kubernetes.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from workspace.sizes import parse_bytes

DEFAULT = {"/tmp": "1G", "/var/tmp": "256M", "/run/workspace": {"size": "16M", "private": True}}


@dataclass(frozen=True)
class Scratch:
    """One tmpfs: where, how large (bytes), and whether it is the user's alone (0700) or shared (1777)."""

    path: str
    size: int
    private: bool

    def options(self, uid: int, gid: int) -> str:
        """The tmpfs mount options (`mount -t tmpfs -o ...`): no device files, no setuid programs."""
        mode = f"uid={uid},gid={gid},mode=0700" if self.private else "mode=1777"
        return f"size={self.size},{mode},nosuid,nodev"


def plan(config: Mapping[str, object], memory: int | None, memory_fraction: float) -> list[Scratch]:
    """The tmpfs mounts of a start from `scratch_space` (path -> "1G" or {"size", "private"}),
    together no larger than `memory_fraction` of the memory limit (None: no limit)."""
    out = []
    for path, value in sorted(config.items()):
        if not isinstance(path, str) or not path.startswith("/") or path == "/":
            raise ValueError(f"scratch_space: {path!r} is not an absolute path inside the container")
        settings = value if isinstance(value, Mapping) else {"size": value}
        unknown = set(settings) - {"size", "private"}
        if unknown:
            raise ValueError(f"scratch_space {path}: unknown setting(s) {', '.join(sorted(unknown))}")
        size = parse_bytes(settings.get("size"))
        if not size:
            raise ValueError(f"scratch_space {path}: a size is needed (a tmpfs without one may take all memory)")
        out.append(Scratch(path, size, bool(settings.get("private", False))))
    total = sum(s.size for s in out)
    budget = int(memory * memory_fraction) if memory else None
    if budget is not None and total > budget:
        out = [Scratch(s.path, max(1 << 20, s.size * budget // total), s.private) for s in out]
    return out


def docker_tmpfs(scratch: list[Scratch], uid: int, gid: int) -> dict[str, str]:
    """HostConfig.Tmpfs of a container: {path: options}."""
    return {s.path: s.options(uid, gid) for s in scratch}


def swarm_mounts(scratch: list[Scratch], uid: int, gid: int) -> list:
    """A service's mounts: a tmpfs volume of the local driver for each (anonymous: removed with the task's
    container). Not a `tmpfs` mount: the Swarm API gives those a size and a mode but not an owner."""
    from docker.types import DriverConfig, Mount

    return [
        Mount(
            s.path,
            None,
            type="volume",
            driver_config=DriverConfig("local", {"type": "tmpfs", "device": "tmpfs", "o": s.options(uid, gid)}),
        )
        for s in scratch
    ]
