"""Benchmark of the home store against rsync, measured in the same run.

    sudo .venv/bin/python benchmarks/homes.py [--runs 3] [--workdir /var/tmp]

Builds a home of 30,000 small files (200 B - 64 KiB, about 200 MB, 300
symlinks) plus 4 x 512 MiB files and saves it as the base snapshot. Then, per
run (median of --runs): restores it, changes 1 % of the small files, appends
64 MiB to one big file, adds 100 and deletes 100 files, and saves. In the same
run it times `rsync -a` of the whole home into an empty directory and
`rsync -a --link-dest=PREV` of the changed home, on the same filesystem.

Modified data is flushed (`sync`) before each timed save and rsync, so
neither pays for writing the test's own changes; our saves are durable
(fsync / btrfs commit) when they return, rsync's are not.

The last line is the default (btrfs) backend:
    restore_ratio=<restore / rsync full> save_ratio=<save / rsync link-dest>
    storage_ratio=<new disk use / changed bytes>   (all on one line)
An earlier line gives the same for the portable (copy) backend.
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
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from workspace.store.homes import BtrfsHomeStore, CopyHomeStore, HomeStore, mount_loop_btrfs  # noqa: E402

SMALL_FILES = 30_000
SYMLINKS = 300
BIG_FILES = 4
BIG_SIZE = 512 << 20
APPEND = 64 << 20


def small_size(rng: random.Random) -> int:
    # skewed toward small files: 200 B .. 64 KiB, about 200 MB for 30,000
    return int(200 * 327.68 ** (rng.random() ** 2))


def build_home(home: Path, rng: random.Random) -> None:
    block = os.urandom(1 << 20)
    for i in range(SMALL_FILES):
        d = home / f"src/pkg{i // 300:03d}"
        if i % 300 == 0:
            d.mkdir(parents=True)
        (d / f"file{i:05d}.py").write_bytes(rng.randbytes(small_size(rng)))
    for i in range(SYMLINKS):
        os.symlink(f"../src/pkg{i % 100:03d}/file{i * 3:05d}.py", home / f"links-{i:03d}")
    (home / "models").mkdir()
    for i in range(BIG_FILES):
        with open(home / f"models/checkpoint{i}.bin", "wb") as f:
            for j in range(BIG_SIZE >> 20):
                f.write(j.to_bytes(8, "little") + block[8:])
    for p in [home, *home.rglob("*")]:
        os.lchown(p, 1000, 1000)


def change_home(home: Path, rng: random.Random, run: int) -> int:
    """The edits of one session; returns the bytes changed."""
    changed = 0
    files = sorted((home / "src").rglob("*.py"))
    for p in rng.sample(files, SMALL_FILES // 100):
        size = small_size(rng)
        p.write_bytes(rng.randbytes(size))
        changed += size
    with open(home / "models/checkpoint0.bin", "ab") as f:
        f.write(os.urandom(APPEND))
    changed += APPEND
    (home / f"new{run}").mkdir()
    for i in range(100):
        size = small_size(rng)
        (home / f"new{run}/added{i}.py").write_bytes(rng.randbytes(size))
        changed += size
    for p in rng.sample([f for f in files if f.exists()], 100):
        p.unlink()
    return changed


def timed(fn) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def flush() -> None:
    os.sync()


def rsync(*args) -> None:
    subprocess.run(["rsync", "-a", *map(str, args)], check=True)


def save_base(store: HomeStore, rng: random.Random) -> None:
    """Build the home in `store` and save it as the snapshot `s0`."""
    store.restore(None, "base")
    build_home(store.live_path("base"), rng)
    flush()
    store.save("base", "s0", parent=None)
    store.release("base")
    flush()


def bench_store(store: HomeStore, scratch: Path, runs: int, seed: int) -> dict:
    rng = random.Random(seed)
    save_base(store, rng)

    restore_s, save_s, rsync_full_s, rsync_link_s, storage = [], [], [], [], []
    for run in range(runs):
        flush()
        _settle(store)
        before = store.usage()
        restore_s.append(timed(lambda: store.restore("s0", f"e{run}")))
        live = store.live_path(f"e{run}")
        flush()
        changed = change_home(live, rng, run)
        flush()
        save_s.append(timed(lambda: store.save(f"e{run}", f"s{run + 1}", parent="s0")))

        # rsync baselines on the same filesystem, same data
        full = scratch / f"rsync-full-{run}"
        rsync_full_s.append(timed(lambda: rsync(f"{store.snapshot_path('s0')}/", full)))
        shutil.rmtree(full)
        flush()
        link = scratch / f"rsync-link-{run}"
        rsync_link_s.append(timed(lambda: rsync(f"--link-dest={store.snapshot_path('s0')}", f"{live}/", link)))
        shutil.rmtree(link)

        store.release(f"e{run}")
        flush()
        _settle(store)
        storage.append((store.usage() - before) / changed)
        store.delete(f"s{run + 1}")
        _settle(store)

    med = statistics.median
    result = {
        "restore_s": med(restore_s),
        "save_s": med(save_s),
        "rsync_full_s": med(rsync_full_s),
        "rsync_link_dest_s": med(rsync_link_s),
        "restore_ratio": med(restore_s) / med(rsync_full_s),
        "save_ratio": med(save_s) / med(rsync_link_s),
        "storage_ratio": med(storage),
    }
    return result


def _settle(store: HomeStore) -> None:
    """Let btrfs finish cleaning deleted subvolumes so that usage is exact."""
    if isinstance(store, BtrfsHomeStore):
        subprocess.run(["btrfs", "subvolume", "sync", store.root], check=False, capture_output=True)
        subprocess.run(["btrfs", "filesystem", "sync", store.root], check=False, capture_output=True)


def report(name: str, r: dict) -> None:
    print(
        f"{name}: restore {r['restore_s']:.3f} s (rsync -a {r['rsync_full_s']:.3f} s), "
        f"save {r['save_s']:.3f} s (rsync --link-dest {r['rsync_link_dest_s']:.3f} s)",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--workdir", default="/var/tmp")
    parser.add_argument("--backends", default="copy,btrfs", help="comma-separated: copy, btrfs")
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("benchmarks/homes.py needs root (it mounts a btrfs image and chowns files)")
    if shutil.which("rsync") is None:
        sys.exit("rsync (the baseline) is not installed: `make bench` installs it, or apt-get install -y rsync")

    work = Path(tempfile.mkdtemp(prefix="bench-homes-", dir=args.workdir))
    mnt = work / "btrfs"
    try:
        if "copy" in args.backends:
            bench_copy(work, args.runs)
        if "btrfs" in args.backends:
            bench_btrfs(work, mnt, args.runs)
    finally:
        if os.path.ismount(mnt):
            subprocess.run(["umount", str(mnt)], check=False)
        shutil.rmtree(work, ignore_errors=True)


def bench_copy(work: Path, runs: int) -> None:
    store = CopyHomeStore(root=str(work / "copy-store")).setup()
    (work / "copy-scratch").mkdir()
    r = bench_store(store, work / "copy-scratch", runs, seed=1)
    report("copy backend (on the --workdir filesystem)", r)
    print(f"copy: {ratios(r)}", flush=True)
    shutil.rmtree(work / "copy-store")
    shutil.rmtree(work / "copy-scratch")


def bench_btrfs(work: Path, mnt: Path, runs: int) -> None:
    mount_loop_btrfs(work / "store.img", mnt, size="12G")
    store = BtrfsHomeStore(root=str(mnt / "store")).setup()
    (mnt / "scratch").mkdir()
    r = bench_store(store, mnt / "scratch", runs, seed=1)
    report("btrfs backend (loop-mounted image)", r)
    print(ratios(r), flush=True)


def ratios(r: dict) -> str:
    return (
        f"restore_ratio={r['restore_ratio']:.4f} save_ratio={r['save_ratio']:.4f} "
        f"storage_ratio={r['storage_ratio']:.3f}"
    )


if __name__ == "__main__":
    main()
