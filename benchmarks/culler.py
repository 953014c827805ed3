"""Benchmark of one idle-culler cycle over 200 running workspaces.

    .venv/bin/python benchmarks/culler.py [--servers 200]

A fake hub API and fake workspaces answer on 127.0.0.1 (benchmarks/fakehub.py),
the CPU counters are fake cgroup files on disk, the workspace database is a
real SQLite file with one running execution per server. It times a cycle
(hub lists, every workspace's activity, cgroups, policy, the database) with
the culler's concurrency, and the same cycle asking one workspace at a time
as the baseline, each the median of 5 cycles after a first one.

The last line reads `cycle_s=<median cycle with concurrency>`.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from fakehub import FakeHub  # noqa: E402


async def timed_cycles(culler, runs: int) -> float:
    await culler.cycle()  # the first one reads every counter once and creates the watches
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        counts = await culler.cycle()
        times.append(time.perf_counter() - started)
        assert counts["servers"] == culler._n, counts
    return statistics.median(times)


async def main(n: int, runs: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        hub = FakeHub(n, Path(tmp))
        hub.start()
        results = {}
        for name, concurrency in (("one at a time", 1), ("concurrent", None)):
            culler = hub.culler(culler={"concurrency": concurrency} if concurrency else {})
            culler._n = n
            results[name] = await timed_cycles(culler, runs)
            print(f"{name:>14}: one cycle over {n} servers in {results[name]:.3f} s (concurrency {culler.concurrency})")
        print(f"ratio={results['concurrent'] / results['one at a time']:.3f} (concurrent / one at a time)")
        print(f"cycle_s={results['concurrent']:.3f}")


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--servers", type=int, default=200)
    p.add_argument("--runs", type=int, default=5)
    args = p.parse_args()
    asyncio.run(main(args.servers, args.runs))
