"""Benchmark of concurrent starts: spawn-to-ready under load, on one node and on a swarm of several.

    .venv/bin/python benchmarks/starts.py [--starts 20] [--nodes 3]

A real hub (the integration tests' Hub: its own data directory, ports and
deployment name, homes on a loop-mounted btrfs) and the real image. The
baseline is one start with nothing else running; then N users each start a
workspace at the same moment, and every start is followed on its progress
stream to `ready`. Each time is from the spawn request to the ready event.
With `--nodes K` the same load then runs on a swarm of K namespaced engines
on this machine (workspace/setup/cluster.py: each node its own engine and
home store; SwarmWorkspaceSpawner places the starts), against the one-node
figures of the same run. The nodes share this machine's cores, so the figure
is the swarm's own cost (services, placement, a store per node), not the
speed-up of more machines.

The last line reads `starts=<N> failures=<k> solo_s=<one start> p50_s=<> p95_s=<> p95_ratio=<p95 / solo>`,
with `--nodes`: `... cluster_p50_s=<> cluster_p95_s=<> cluster_p95_ratio=<cluster p95 / one-node p95>`.
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
from workspace.settings import Settings  # noqa: E402
from workspace.setup.cluster import Cluster  # noqa: E402
from workspace.store.homes import mount_loop_btrfs  # noqa: E402


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


def load(hub: Hub, starts: int, label: str) -> tuple[float, list[float], int]:
    """One start alone, then `starts` at once, all stopped after: (solo s, the times that succeeded, failures)."""
    users = [f"load{i:03d}" for i in range(starts)]
    for user in ["solo", *users]:
        hub.create_user(user)
    solo = timed_start(hub, "solo")
    if solo is None:
        raise SystemExit(f"{label}: the baseline start failed: read the hub's log {hub.log_path}")
    hub.stop_workspace("solo", "bench", hub.admin_token)
    print(f"{label}: one start alone: {solo:.2f} s", flush=True)
    with ThreadPoolExecutor(len(users)) as pool:
        times = list(pool.map(lambda u: timed_start(hub, u), users))
    done = [t for t in times if t is not None]
    failures = len(times) - len(done)
    print(
        f"{label}: {starts} at once: p50 {statistics.median(done):.2f} s, p95 {percentile(done, 0.95):.2f} s, "
        f"slowest {max(done):.2f} s, {failures} failed",
        flush=True,
    )
    for user in users:
        try:
            hub.stop_workspace(user, "bench", hub.admin_token)
        except AssertionError as e:
            print(f"{user}: stop: {e}")
    return solo, done, failures


def one_node(base: Path, starts: int) -> tuple[float, list[float], int]:
    store = base / "store"
    mount_loop_btrfs(base / "store.img", store, size="20G")
    hub = Hub(base / "data", store_dir=store, WORKSPACE_MAX_RUNNING="0")
    try:
        hub.start()
        return load(hub, starts, "one node")
    finally:
        hub.stop()
        subprocess.run(["umount", "-l", str(store)], check=False)


def cluster(base: Path, starts: int, nodes: int) -> tuple[float, list[float], int]:
    """The same load on a swarm of `nodes` namespaced engines (make cluster-up's), each with its own store."""
    settings = Settings.from_env()
    c = Cluster(base / "cluster", nodes=nodes, cache=settings.path("cache"))
    hub = None
    try:
        c.up(settings.image, {}, store_size="10G")
        central = c.root / "central"
        mount_loop_btrfs(c.root / "central.btrfs", central, size="10G")
        hub = Hub(
            base / "cluster-hub", store_dir=central, WORKSPACE_MAX_RUNNING="0", WORKSPACE_SWARM_MANAGER=c.manager.socket
        )
        hub.start()
        solo, done, failures = load(hub, starts, f"{nodes} nodes")
        spread = {}
        for ex in (e for u in range(starts) for e in hub.executions(f"load{u:03d}", "bench")):
            spread[ex["node"]] = spread.get(ex["node"], 0) + 1
        print(f"{nodes} nodes: executions per node {dict(sorted(spread.items()))}", flush=True)
        return solo, done, failures
    finally:
        if hub is not None:
            hub.stop()
        c.down(purge=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--starts", type=int, default=20, help="concurrent starts (default 20)")
    parser.add_argument("--nodes", type=int, default=0, help="also run the load on a swarm of this many nodes")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-starts-") as tmp:
        base = Path(tmp)
        solo, done, failures = one_node(base, args.starts)
        p50, p95 = statistics.median(done), percentile(done, 0.95)
        line = f"starts={args.starts} failures={failures} solo_s={solo:.2f} p50_s={p50:.2f} p95_s={p95:.2f}"
        if not args.nodes:
            print(f"{line} p95_ratio={p95 / solo:.2f}")
            return
        c_solo, c_done, c_failures = cluster(base, args.starts, args.nodes)
        c_p50, c_p95 = statistics.median(c_done), percentile(c_done, 0.95)
        print(
            f"{line} nodes={args.nodes} cluster_failures={c_failures} cluster_solo_s={c_solo:.2f} "
            f"cluster_p50_s={c_p50:.2f} cluster_p95_s={c_p95:.2f} cluster_p95_ratio={c_p95 / p95:.2f}"
        )


if __name__ == "__main__":
    main()
