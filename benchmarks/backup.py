"""Benchmark of `workspace-admin backup`: an incremental backup after a 1 % change against the full one before it.

    sudo .venv/bin/python benchmarks/backup.py [--users 20] [--mb 25] [--workdir /var/tmp]

A deployment's data on a loop-mounted btrfs (the home store, as `make up` mounts it) with its SQLite database:
--users users, each with one saved output of --mb MB (a large file and 200 small ones), made through the
records' own API (lifecycle.begin/restore/save). The backups go to a second filesystem (DEST's own disk).

- full: the first backup into an empty DEST (the baseline, measured in the same run);
- then every user continues with a change of 1 % of their home (a new file of 1 % of its size, two small
  files rewritten) and saves a new output;
- incremental: the next backup (each new output a `btrfs send -p` delta from the one it continued);
- restore: the whole chain onto a third filesystem (every output checked against its digest).

Each timed step begins with the page cache's dirty data flushed, and ends when its last file is durable.

The last line:
    backup_delta_ratio=<incremental bytes / full bytes> time_ratio=<incremental s / full s>
    full_bytes=... incremental_bytes=... changed_bytes=... full_s=... incremental_s=... restore_s=...
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from homes import flush, timed  # noqa: E402

from workspace import lifecycle  # noqa: E402
from workspace.db import Database  # noqa: E402
from workspace.settings import Settings  # noqa: E402
from workspace.setup import backup, restore  # noqa: E402
from workspace.store.homes import mount_loop_btrfs, store_for  # noqa: E402

SMALL = 200


def run(db: Database, store, owner: str, change) -> int:
    """One execution of owner/thesis that changes its home with `change(home) -> bytes` and saves."""
    plan = lifecycle.begin(db, owner, "thesis", "latest", None)
    lifecycle.restore(db, store, plan, None)
    changed = change(store.live_path(plan.live_key))
    lifecycle.transition(db, plan.execution_id, "running")
    assert lifecycle.save(db, store, plan.execution_id, "user", None) == "stopped"
    return changed


def write(path: Path, data: bytes) -> int:
    path.write_bytes(data)
    os.chown(path, 1000, 1000)
    return len(data)


def first_home(rng: random.Random, size: int):
    def make(home: Path) -> int:
        (home / "src").mkdir()
        done = sum(write(home / "src" / f"f{i}.py", rng.randbytes(4096)) for i in range(SMALL))
        return done + write(home / "model.bin", rng.randbytes(size - done))

    return make


def one_percent(rng: random.Random, size: int):
    def change(home: Path) -> int:
        done = sum(write(home / "src" / f"f{i}.py", rng.randbytes(4096)) for i in (3, 7))
        return done + write(home / "results.bin", rng.randbytes(size // 100 - done))

    return change


def bench(work: Path, users: int, size: int) -> dict:
    site = Settings.from_env({"WORKSPACE_DATA_DIR": str(work / "data"), "WORKSPACE_STORE_DIR": str(work / "a/store")})
    site.data_dir.mkdir(mode=0o700)
    site.generate_missing_secrets()
    db = Database(site.db_url, key_file=site.secret_key_file)
    (site.data_dir / "jupyterhub.sqlite").touch()
    store = store_for(site.store_dir)
    rng = random.Random(1)
    for n in range(users):
        run(db, store, f"u{n}", first_home(rng, size))
    dest, keys = work / "b" / "backups", work / "keys"
    flush()
    full_s = timed(lambda: backup.backup(site, dest, keys))
    changed = sum(run(db, store, f"u{n}", one_percent(rng, size)) for n in range(users))
    flush()
    incremental_s = timed(lambda: backup.backup(site, dest, keys))
    (_, full), (_, incremental) = backup.sets(dest)
    target = Settings.from_env({"WORKSPACE_DATA_DIR": str(work / "new"), "WORKSPACE_STORE_DIR": str(work / "c/store")})
    flush()
    restore_s = timed(lambda: restore.restore(target, dest, next(keys.iterdir())))
    db.engine.dispose()
    return {
        "home_bytes": users * size,
        "changed_bytes": changed,
        "full_bytes": full.stats["sent_bytes"],
        "incremental_bytes": incremental.stats["sent_bytes"],
        "full_s": full_s,
        "incremental_s": incremental_s,
        "restore_s": restore_s,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--users", type=int, default=20)
    parser.add_argument("--mb", type=float, default=25, help="each user's home, MB")
    parser.add_argument("--workdir", default="/var/tmp")
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("benchmarks/backup.py needs root (it mounts btrfs images and chowns files)")
    if shutil.which("mkfs.btrfs") is None:
        sys.exit("mkfs.btrfs is not installed: `make bench` installs it, or apt-get install -y btrfs-progs")
    os.umask(0o077)  # as workspace-admin runs
    work = Path(tempfile.mkdtemp(prefix="bench-backup-", dir=args.workdir))
    size = int(args.mb * 1e6)
    disk = f"{max(2, int(3 * args.users * size / 1e9) + 1)}G"
    mounts = [work / "a", work / "b", work / "c"]  # the deployment's disk, the backups' disk, a new machine's
    try:
        for mnt in mounts:
            mount_loop_btrfs(work / f"{mnt.name}.img", mnt, size=disk)
        r = bench(work, args.users, size)
    finally:
        for mnt in mounts:
            if os.path.ismount(mnt):
                subprocess.run(["umount", str(mnt)], check=False)
        shutil.rmtree(work, ignore_errors=True)

    print(
        f"{args.users} users, {r['home_bytes'] / 1e6:,.0f} MB of outputs; change {r['changed_bytes'] / 1e6:,.1f} MB "
        f"({100 * r['changed_bytes'] / r['home_bytes']:.2f} %): full backup {r['full_bytes'] / 1e6:,.1f} MB in "
        f"{r['full_s']:.2f} s, incremental {r['incremental_bytes'] / 1e6:,.2f} MB in {r['incremental_s']:.2f} s, "
        f"restore of the chain {r['restore_s']:.2f} s",
        flush=True,
    )
    print(
        f"backup_delta_ratio={r['incremental_bytes'] / r['full_bytes']:.4f} "
        f"time_ratio={r['incremental_s'] / r['full_s']:.4f} full_bytes={r['full_bytes']} "
        f"incremental_bytes={r['incremental_bytes']} changed_bytes={r['changed_bytes']} "
        f"full_s={r['full_s']:.3f} incremental_s={r['incremental_s']:.3f} restore_s={r['restore_s']:.3f}"
    )


if __name__ == "__main__":
    main()
