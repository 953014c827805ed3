"""Benchmark of concurrent starts on one node: spawn-to-ready under load against one start alone.

    .venv/bin/python benchmarks/starts.py [--starts 20]

A real hub (the integration tests' Hub: its own data directory, ports and
deployment name, homes on a loop-mounted btrfs) and the real image. The
baseline is one start with nothing else running; then N users each start a
workspace at the same moment, and every start is followed on its progress
stream to `ready`. Each time is from the spawn request to the ready event.
#15 compares these figures with the same load over a cluster's nodes.

The last line reads `starts=<N> failures=<k> solo_s=<one start> p50_s=<> p95_s=<> p95_ratio=<p95 / solo>`.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.integration.hub import Hub  # noqa: E402
from workspace.homes import mount_loop_btrfs  # noqa: E402


def timed_start(hub: Hub, user: str) -> float | None:
    """Seconds from the spawn request to ready, or None when the start failed."""
    token = hub.admin_token
    started = time.perf_counter()
    try:
        r = hub.spawn(user, "bench", token)
        if r.status_code not in (201, 202):
            print(f"{user}: spawn answered {r.status_code} {r.text[:200]}", flush=True)
            return None
        events = hub.progress(user, "bench", token, timeout=600)
    except Exception as e:  # a failed start is counted, not fatal
        print(f"{user}: {e}", flush=True)
        return None
    if not events or not events[-1].get("ready"):
        print(f"{user}: {events[-1] if events else 'no progress'}", flush=True)
        return None
    return time.perf_counter() - started


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--starts", type=int, default=20, help="concurrent starts (default 20)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-starts-") as tmp:
        base = Path(tmp)
        store = base / "store"
        mount_loop_btrfs(base / "store.img", store, size="20G")
        hub = Hub(base / "data", store_dir=store, WORKSPACE_MAX_RUNNING="0")
        try:
            hub.start()
            users = [f"load{i:03d}" for i in range(args.starts)]
            for user in ["solo", *users]:
                hub.create_user(user)
            solo = timed_start(hub, "solo")
            if solo is None:
                raise SystemExit("the baseline start failed: read the hub's log " + str(hub.log_path))
            hub.stop_workspace("solo", "bench", hub.admin_token)
            print(f"one start alone: {solo:.2f} s", flush=True)
            with ThreadPoolExecutor(len(users)) as pool:
                times = list(pool.map(lambda u: timed_start(hub, u), users))
            done = [t for t in times if t is not None]
            failures = len(times) - len(done)
            p50, p95 = statistics.median(done), percentile(done, 0.95)
            print(
                f"{args.starts} at once: p50 {p50:.2f} s, p95 {p95:.2f} s, slowest {max(done):.2f} s, {failures} failed"
            )
            for user in users:
                try:
                    hub.stop_workspace(user, "bench", hub.admin_token)
                except AssertionError as e:
                    print(f"{user}: stop: {e}")
            print(
                f"starts={args.starts} failures={failures} solo_s={solo:.2f} p50_s={p50:.2f} "
                f"p95_s={p95:.2f} p95_ratio={p95 / solo:.2f}"
            )
        finally:
            hub.stop()
            subprocess.run(["umount", "-l", str(store)], check=False)


if __name__ == "__main__":
    main()
