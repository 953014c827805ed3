"""What the hub's own processes (the workspace service, the culler) share about their lives."""

from __future__ import annotations

import ctypes
import signal


def die_with_the_hub() -> None:
    """Ask the kernel to end this process when the hub that started it dies (Linux): a hub that crashed
    and restarts starts its services anew on the same ports."""
    try:
        PR_SET_PDEATHSIG = 1
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except OSError:
        pass
