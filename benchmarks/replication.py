"""Benchmark of sending a saved home to another node's store: incremental against full and rsync.

    sudo .venv/bin/python benchmarks/replication.py [--runs 3] [--workdir /var/tmp]

Two loop-mounted btrfs images, each a filesystem of its own, stand for two
nodes. Node A builds the home of benchmarks/homes.py (30,000 small files, 300
symlinks, 4 x 512 MiB) and saves it as s0, which is sent to node B in full,
untimed. Then, per run (median of --runs), A restores s0, makes the homes
benchmark's change (1 % of the small files rewritten, 64 MiB appended to a big
file, 100 files added, 100 deleted), saves it, and in the same run times:

- incremental: `replicate(A, s, B, parents=[s0])`, i.e. `btrfs send -p s0 s |
  btrfs receive` through this process;
- full: the same snapshot sent whole (B's incremental copy deleted first);
- rsync: `rsync -a --delete` of the changed home into a copy of s0 on B (a
  writable snapshot of B's s0, made untimed), then a sync of B.

All three are durable on B when their time stops (replicate commits B's
filesystem; rsync is followed by `btrfs filesystem sync`). Data written
before a timed step is flushed first, so no step pays for another's writes.

The last line:
    delta_ratio=<incremental / full> rsync_ratio=<incremental / rsync>
    delta_bytes=<incremental stream> full_bytes=<full stream> changed_bytes=<the change>
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from homes import change_home, flush, save_base, timed  # noqa: E402

from workspace.store.homes import BtrfsHomeStore, mount_loop_btrfs  # noqa: E402
from workspace.store.replication import replicate  # noqa: E402


def settle(store: BtrfsHomeStore) -> None:
    """Let btrfs finish removing deleted subvolumes, so that a timed step does not pay for it."""
    subprocess.run(["btrfs", "subvolume", "sync", store.root], check=False, capture_output=True)
    subprocess.run(["btrfs", "filesystem", "sync", store.root], check=True, capture_output=True)


def sent(a: BtrfsHomeStore, snap: str, b: BtrfsHomeStore, parents: list[str]):
    """(seconds, Replication) of one call, all of it: choosing the parent, estimating, sending, committing."""
    result = []
    return timed(lambda: result.append(replicate(a, snap, b, parents))), result[0]


def bench(a: BtrfsHomeStore, b: BtrfsHomeStore, runs: int, seed: int) -> dict:
    rng = random.Random(seed)
    save_base(a, rng)
    seconds, first = sent(a, "s0", b, [])
    home_bytes = a.measure("s0")[0]
    print(f"home: {home_bytes / 1e6:,.0f} MB; first full send {seconds:.2f} s, {first.bytes / 1e6:,.0f} MB", flush=True)

    delta_s, full_s, rsync_s, delta_bytes, full_bytes, changed = [], [], [], [], [], []
    for run in range(runs):
        snap = f"s{run + 1}"
        a.restore("s0", f"e{run}")
        changed.append(change_home(a.live_path(f"e{run}"), rng, run))
        flush()
        a.save(f"e{run}", snap, parent="s0")
        a.release(f"e{run}")
        flush()

        seconds, delta = sent(a, snap, b, ["s0"])
        assert delta.parent == "s0", delta
        delta_s.append(seconds)
        delta_bytes.append(delta.bytes)

        b.delete(snap)
        settle(b)
        seconds, full = sent(a, snap, b, [])
        assert full.parent is None, full
        full_s.append(seconds)
        full_bytes.append(full.bytes)
        b.delete(snap)

        b.restore("s0", f"r{run}")
        settle(b)
        copy = b.live_path(f"r{run}")

        def rsync() -> None:
            subprocess.run(["rsync", "-a", "--delete", f"{a.snapshot_path(snap)}/", f"{copy}/"], check=True)
            subprocess.run(["btrfs", "filesystem", "sync", b.root], check=True)

        rsync_s.append(timed(rsync))
        b.release(f"r{run}")
        a.delete(snap)
        settle(a)
        settle(b)
        print(
            f"run {run + 1}: changed {changed[-1] / 1e6:,.1f} MB; incremental {delta_s[-1]:.3f} s "
            f"({delta_bytes[-1] / 1e6:,.1f} MB), full {full_s[-1]:.2f} s ({full_bytes[-1] / 1e6:,.0f} MB), "
            f"rsync {rsync_s[-1]:.2f} s",
            flush=True,
        )

    med = statistics.median
    return {
        "home_bytes": home_bytes,
        "changed_bytes": med(changed),
        "delta_s": med(delta_s),
        "full_s": med(full_s),
        "rsync_s": med(rsync_s),
        "delta_bytes": med(delta_bytes),
        "full_bytes": med(full_bytes),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--workdir", default="/var/tmp")
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("benchmarks/replication.py needs root (it mounts btrfs images and chowns files)")
    for tool in ("rsync", "mkfs.btrfs"):
        if shutil.which(tool) is None:
            sys.exit(f"{tool} is not installed: `make bench` installs it, or apt-get install -y rsync btrfs-progs")

    work = Path(tempfile.mkdtemp(prefix="bench-replication-", dir=args.workdir))
    mounts = [work / "node-a", work / "node-b"]
    try:
        for mnt in mounts:  # two filesystems: two nodes
            mount_loop_btrfs(work / f"{mnt.name}.img", mnt, size="8G")
        a, b = (BtrfsHomeStore(root=str(mnt / "store")).setup() for mnt in mounts)
        r = bench(a, b, args.runs, seed=1)
    finally:
        for mnt in mounts:
            if os.path.ismount(mnt):
                subprocess.run(["umount", str(mnt)], check=False)
        shutil.rmtree(work, ignore_errors=True)

    print(
        f"home {r['home_bytes'] / 1e6:,.0f} MB, change {r['changed_bytes'] / 1e6:,.1f} MB "
        f"({100 * r['changed_bytes'] / r['home_bytes']:.1f} %): incremental send {r['delta_s']:.3f} s, "
        f"full send {r['full_s']:.2f} s, rsync -a {r['rsync_s']:.2f} s",
        flush=True,
    )
    print(
        f"delta_ratio={r['delta_s'] / r['full_s']:.4f} rsync_ratio={r['delta_s'] / r['rsync_s']:.4f} "
        f"delta_bytes={r['delta_bytes']:.0f} full_bytes={r['full_bytes']:.0f} changed_bytes={r['changed_bytes']:.0f}"
    )


if __name__ == "__main__":
    main()
