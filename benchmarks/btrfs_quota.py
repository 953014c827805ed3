"""What btrfs quotas cost a home store (#28: every live home gets a qgroup limit by default).

Two loop-mounted btrfs images, one with quotas enabled; in each a home of FILES files, then ROUNDS times:
restore (a writable snapshot of the saved home), limit it (with quotas), write a few changed files, save
(a read-only snapshot) and drop the live home. Prints the median of each step, without and with quotas.

    sudo .venv/bin/python benchmarks/btrfs_quota.py [FILES] [ROUNDS]
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from workspace.store.homes import BtrfsHomeStore, mount_loop_btrfs


def run(quota: bool, files: int, rounds: int) -> dict[str, float]:
    base = Path(tempfile.mkdtemp(prefix="btrfs-quota-"))
    mnt = base / "mnt"
    mount_loop_btrfs(base / "store.img", mnt, size="4G")
    try:
        BtrfsHomeStore._quota_enabled = False
        store = BtrfsHomeStore(root=str(mnt)).setup()
        store.restore(None, "live0")
        home = store.live_path("live0")
        for i in range(files):
            (home / f"f{i // 1000}").mkdir(exist_ok=True)
            (home / f"f{i // 1000}" / f"{i}.txt").write_bytes(b"x" * 2000)
        if quota:
            store.limit_home("live0", 1 << 30)
        store.save("live0", "snap0", None)
        store.release("live0")
        times: dict[str, list[float]] = {"restore": [], "limit": [], "save": [], "release": []}
        parent = "snap0"
        for r in range(1, rounds + 1):
            live, snap = f"live{r}", f"snap{r}"
            t = time.perf_counter()
            store.restore(parent, live)
            times["restore"].append(time.perf_counter() - t)
            t = time.perf_counter()
            if quota:
                store.limit_home(live, 1 << 30)
            times["limit"].append(time.perf_counter() - t)
            for i in range(20):
                (store.live_path(live) / f"changed{i}.txt").write_bytes(b"y" * 100_000)
            t = time.perf_counter()
            store.save(live, snap, parent)
            times["save"].append(time.perf_counter() - t)
            t = time.perf_counter()
            store.release(live)
            times["release"].append(time.perf_counter() - t)
            parent = snap
        return {k: statistics.median(v) * 1000 for k, v in times.items()}
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)
        subprocess.run(["rm", "-rf", str(base)], check=False)


def main() -> None:
    files = int(sys.argv[1]) if len(sys.argv) > 1 else 20_000
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 15
    off, on = run(False, files, rounds), run(True, files, rounds)
    print(f"home of {files:,} files, {rounds} rounds, median ms per step")
    for step in off:
        print(f"  {step:8} without quotas {off[step]:8.1f}   with quotas {on[step]:8.1f}")


if __name__ == "__main__":
    main()
