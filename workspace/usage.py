"""CPU, memory and GPU use of a workspace, measured from the host.

CPU and memory come from the container's cgroup files (cgroup v1 or v2),
which the kernel keeps up to date: reading them costs microseconds, where
`docker stats` waits a second per container. CPU use is the difference of
two readings of the cumulative counter, as a percentage of one core.

GPU use comes from NVML (nvidia-ml-py) when it is there; without it, or
without GPUs, the report says so instead of failing.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")


def _read_int(path: Path) -> int | None:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _read_stat(path: Path) -> dict[str, int]:
    out = {}
    try:
        for line in path.read_text().splitlines():
            key, _, value = line.partition(" ")
            if value.strip().isdigit():
                out[key] = int(value)
    except OSError:
        pass
    return out


class Cgroup:
    """The CPU and memory files of one cgroup, v2 (unified) or v1 (one directory per controller).

    Subclasses say where the directories are: `ContainerCgroup` for a Docker
    container seen from the host, `OwnCgroup` for the process's own cgroup
    (inside a container, its root is the container's).
    """

    root: Path = CGROUP_ROOT

    def _v2_candidates(self) -> list[str]:
        raise NotImplementedError

    def _v1_candidates(self, controller: str) -> list[str]:
        raise NotImplementedError

    def _v2_dir(self) -> Path | None:
        for rel in self._v2_candidates():
            d = self.root / rel
            if (d / "cpu.stat").exists():
                return d
        return None

    def _v1_dir(self, controller: str) -> Path | None:
        for rel in self._v1_candidates(controller):
            d = self.root / rel
            if d.is_dir():
                return d
        return None

    def cpu_ns(self) -> int | None:
        """CPU time used since the cgroup was created, in nanoseconds."""
        if (d := self._v2_dir()) is not None:
            usec = _read_stat(d / "cpu.stat").get("usage_usec")
            return None if usec is None else usec * 1000
        for controller in ("cpuacct", "cpu,cpuacct"):
            if (d := self._v1_dir(controller)) is not None:
                return _read_int(d / "cpuacct.usage")
        return None

    def memory_bytes(self) -> int | None:
        """Memory in use, without the page cache the kernel can drop (as `docker stats` shows it)."""
        if (d := self._v2_dir()) is not None:
            current = _read_int(d / "memory.current")
            if current is None:
                return None
            return max(0, current - _read_stat(d / "memory.stat").get("inactive_file", 0))
        if (d := self._v1_dir("memory")) is not None:
            usage = _read_int(d / "memory.usage_in_bytes")
            if usage is None:
                return None
            return max(0, usage - _read_stat(d / "memory.stat").get("total_inactive_file", 0))
        return None

    def memory_limit_bytes(self) -> int | None:
        """The memory limit, or None when there is none (v2 `max`, v1's huge default)."""
        if (d := self._v2_dir()) is not None:
            return _read_int(d / "memory.max")  # "max" reads as None
        if (d := self._v1_dir("memory")) is not None:
            limit = _read_int(d / "memory.limit_in_bytes")
            return None if limit is None or limit >= 1 << 62 else limit
        return None


@dataclass
class ContainerCgroup(Cgroup):
    """The cgroup of a Docker container, read on the host (cgroupfs or systemd driver)."""

    container_id: str
    root: Path = CGROUP_ROOT

    def _v2_candidates(self) -> list[str]:
        return [f"system.slice/docker-{self.container_id}.scope", f"docker/{self.container_id}"]

    def _v1_candidates(self, controller: str) -> list[str]:
        return [
            f"{controller}/docker/{self.container_id}",
            f"{controller}/system.slice/docker-{self.container_id}.scope",
        ]


@dataclass
class OwnCgroup(Cgroup):
    """This process's cgroup as mounted inside its container (the container's cgroup is the root)."""

    root: Path = CGROUP_ROOT

    def _v2_candidates(self) -> list[str]:
        return [""]

    def _v1_candidates(self, controller: str) -> list[str]:
        return [controller]


class CpuMeter:
    """CPU use between two readings, in percent of one core (200 = two cores busy)."""

    def __init__(self, cgroup: Cgroup, clock=time.monotonic):
        self.cgroup, self.clock = cgroup, clock
        self.last: tuple[float, int] | None = None

    def sample(self) -> float | None:
        ns, now = self.cgroup.cpu_ns(), self.clock()
        if ns is None:
            return None
        previous, self.last = self.last, (now, ns)
        if previous is None or now <= previous[0]:
            return None
        return 100.0 * (ns - previous[1]) / ((now - previous[0]) * 1e9)


def gpu_usage(nvml=None) -> dict:
    """Per-GPU utilisation and memory from NVML, or {"available": False, "reason": ...}."""
    if nvml is None:
        try:
            import pynvml as nvml
        except ImportError:
            return {"available": False, "reason": "no GPU library (nvidia-ml-py) is installed"}
    try:
        nvml.nvmlInit()
    except Exception as e:  # NVMLError_LibraryNotFound, DriverNotLoaded, ...
        return {"available": False, "reason": f"no GPU: {e}"}
    try:
        gpus = []
        for i in range(nvml.nvmlDeviceGetCount()):
            h = nvml.nvmlDeviceGetHandleByIndex(i)
            util = nvml.nvmlDeviceGetUtilizationRates(h)
            mem = nvml.nvmlDeviceGetMemoryInfo(h)
            name = nvml.nvmlDeviceGetName(h)
            gpus.append(
                {
                    "index": i,
                    "name": name.decode() if isinstance(name, bytes) else name,
                    "utilization_percent": util.gpu,
                    "memory_used_bytes": mem.used,
                    "memory_total_bytes": mem.total,
                }
            )
        if not gpus:
            return {"available": False, "reason": "no GPU on this machine"}
        return {"available": True, "gpus": gpus}
    finally:
        nvml.nvmlShutdown()
