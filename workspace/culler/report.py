"""A workspace's activity report, as the culler reads it: hostile input, cleaned and bounded.

The workspace extension in the container (workspace/singleuser) reports its browser connections, its
last browser request and its usage. Whatever answers on the workspace's port is the student's to
choose: the culler shows it only the execution's report key (REPORT_SCHEME), reads at most MAX_REPORT
bytes, and keeps of the answer only what `clean_report` finds well formed.
"""

from __future__ import annotations

import datetime as dt

MAX_REPORT = 256 << 10  # bytes of a workspace's report read at most
REPORT_SCHEME = "workspace-report"


def epoch(t: dt.datetime | str | None) -> float | None:
    """A stored UTC time (naive) or an ISO 8601 string from an API, as seconds since the epoch."""
    if t is None:
        return None
    if isinstance(t, str):
        t = dt.datetime.fromisoformat(t.replace("Z", "+00:00"))
    if t.tzinfo is None:
        t = t.replace(tzinfo=dt.timezone.utc)
    return t.timestamp()


def _number(value, low: float, high: float) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        return None
    return float(min(max(value, low), high))


def clean_report(raw, now: float) -> dict | None:
    """A workspace's activity report, validated and bounded; None when it is not one.

    It comes from inside the workspace, which its student controls: every
    field is checked, numbers are clamped, a browser time in the future counts
    as now. A faked report can only keep that one workspace up (to its
    maximum run time); the host's CPU reading stays the ground truth.
    """
    if not isinstance(raw, dict):
        return None
    kernels = _number(raw.get("kernel_connections"), 0, 10_000)
    terminals = _number(raw.get("terminal_connections"), 0, 10_000)
    if kernels is None or terminals is None:
        return None
    ssh = _number(raw.get("ssh_connections", 0), 0, 10_000) or 0  # absent from images before #16
    last = raw.get("last_browser_request")
    try:
        last = min(epoch(last), now) if isinstance(last, str) and len(last) <= 64 else None
    except (ValueError, TypeError, OverflowError):
        last = None
    usage = raw.get("usage") if isinstance(raw.get("usage"), dict) else {}
    gpu = usage.get("gpu") if isinstance(usage.get("gpu"), dict) else {}
    gpus = []
    for g in (gpu.get("gpus") if isinstance(gpu.get("gpus"), list) else [])[:64]:
        if isinstance(g, dict) and _number(g.get("utilization_percent"), 0, 100) is not None:
            gpus.append(
                {
                    "utilization_percent": _number(g["utilization_percent"], 0, 100),
                    "memory_used_bytes": int(_number(g.get("memory_used_bytes"), 0, 1 << 50) or 0),
                }
            )
    memory = _number(usage.get("memory_bytes"), 0, 1 << 50)
    return {
        # an open SSH session (through the gateway, or from another of the owner's workspaces) counts as a browser
        "browser_connections": int(kernels + terminals + ssh),
        "last_browser": last,
        "cpu_percent": _number(usage.get("cpu_percent"), 0, 100_000),
        "memory_bytes": int(memory) if memory is not None else None,
        "gpus": gpus,
    }
