"""What the hub's own processes (the workspace service, the culler) share about their lives."""

from __future__ import annotations

import ctypes
import os
import signal


def die_with_the_hub() -> None:
    """Ask the kernel to end this process when the hub that started it dies (Linux): a hub that crashed
    and restarts starts its services anew on the same ports."""
    try:
        PR_SET_PDEATHSIG = 1
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except OSError:
        pass


HOST = os.uname().nodename  # this machine, as leases and outputs name it


def identity() -> str:
    """This process as a lease names its holder: host and pid (`host:pid`)."""
    return f"{HOST}:{os.getpid()}"


def gone(holder: str | None) -> bool:
    """Whether a lease's holder (`host:pid`, as `identity`) is a process of this host that no longer
    exists (a crashed hub): its lease may be taken over at once. A holder on another host is never
    known gone; its lease runs out instead."""
    if not holder:
        return False
    host, _, pid = holder.rpartition(":")
    return host == HOST and pid.isdigit() and not os.path.exists(f"/proc/{pid}")
