"""Benchmark of downloading a saved output through the real hub, proxy and workspace service.

    sudo .venv/bin/python benchmarks/download.py [--gb 2] [--text 0.1] [--workdir /var/tmp] [--rounds 3]

Starts a hub (its own data directory and ports, homes on a loop-mounted btrfs as `make up` makes
them), starts a workspace that writes --gb GB into its home: model-like binary files (random bytes,
which deflate cannot shrink) and a --text share of CSV-like text in 2,000 files, and stops it, so
that all of it is one saved output. Then, in the same run, with the page cache warm for all:

- direct: every file of the output read from its snapshot directory (1 MiB reads), the baseline;
- tar.gz, zip: the whole output as one archive, streamed through http://127.0.0.1:PORT/services/
  workspace/api/... (curl, body discarded);
- tar.gz, zip straight at the service's own port (what the proxy costs);
- file: the largest file of the output alone.

It reads the service's peak RSS (VmHWM) after the downloads. The last line reads

    download_mb_s=<tar.gz> peak_rss_mb=<service> ratio=<tar.gz / direct> archive_ratio=<tar.gz / one file>

(`archive_ratio`, #34: the tar.gz against the largest file alone through the same hub and proxy, the
medians of --rounds of each, in turn.)

(MB/s of the output's bytes, not of the archive's).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from datasets import peak_rss_mb, service_process  # noqa: E402

from tests.integration.hub import Hub  # noqa: E402
from workspace.db import Database  # noqa: E402
from workspace.executions import find_workspace  # noqa: E402
from workspace.store.homes import mount_loop_btrfs  # noqa: E402

BLOCK = 1 << 20


def fill(hub: Hub, user: str, ws: str, total: int, text_share: float) -> None:
    """Write the output in the workspace: binary files of 256 MB (the last smaller) and 2,000 text files."""
    text = int(total * text_share)
    binary = total - text
    script = ["set -e", "mkdir -p ~/checkpoints ~/logs"]
    n, left = 0, binary
    while left > 0:
        size = min(256_000_000, left)
        script.append(f"head -c {size} /dev/urandom > ~/checkpoints/model-{n:02d}.bin")
        left, n = left - size, n + 1
    script.append(
        "python3 - <<'EOF'\n"
        "import os, random\n"
        "random.seed(1)\n"
        f"per = {text} // 2000\n"
        "for i in range(2000):\n"
        "    d = os.path.expanduser(f'~/logs/run{i // 100:02d}')\n"
        "    os.makedirs(d, exist_ok=True)\n"
        "    lines, size = [], 0\n"
        "    while size < per:\n"
        "        line = f'{size},{random.random():.6f},{random.gauss(0, 1):.6f},epoch {size % 97}\\n'\n"
        "        lines.append(line)\n"
        "        size += len(line)\n"
        "    with open(f'{d}/metrics-{i:04d}.csv', 'w') as f:\n"
        "        f.write(''.join(lines)[:per])\n"
        "EOF"
    )
    hub.sh(user, ws, "\n".join(script))


def snapshot_dir(hub: Hub, user: str, ws: str) -> Path:
    with Database(hub.settings.db_url, migrate=False, key_file=hub.settings.secret_key_file).session() as s:
        ex = max(find_workspace(s, user, ws).executions, key=lambda e: e.number)
        return hub.settings.store_dir / "snapshots" / ex.snapshot.key


def direct_read(root: Path) -> tuple[int, float]:
    """(bytes, seconds) of reading every regular file beneath `root`."""
    started, size = time.perf_counter(), 0
    for dirpath, _, names in os.walk(root):
        for name in names:
            path = os.path.join(dirpath, name)
            if os.path.islink(path):
                continue
            with open(path, "rb", buffering=0) as f:
                while block := f.read(BLOCK):
                    size += len(block)
    return size, time.perf_counter() - started


def curl(url: str, token: str) -> tuple[int, float, int]:
    """(bytes received, seconds, HTTP status) of one download, its body discarded."""
    out = subprocess.run(
        [
            "curl",
            "-sS",
            "-o",
            "/dev/null",
            "-H",
            f"Authorization: token {token}",
            "-w",
            "%{size_download} %{time_total} %{http_code}",
            url,
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return int(out[0]), float(out[1]), int(out[2])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gb", type=float, default=2.0)
    parser.add_argument("--text", type=float, default=0.1, help="the share of text (compressible) in the output")
    parser.add_argument("--workdir", default="/var/tmp")
    parser.add_argument("--rounds", type=int, default=3, help="tar.gz and one file, in turn: their medians")
    args = parser.parse_args()
    total = int(args.gb * 1e9)

    with tempfile.TemporaryDirectory(prefix="bench-download-", dir=args.workdir) as tmp:
        tmp = Path(tmp)
        mnt = tmp / "mnt"
        mount_loop_btrfs(tmp / "store.img", mnt, size=f"{max(8, int(args.gb * 3))}G")
        hub = None
        try:
            hub = Hub(tmp / "hub", store_dir=mnt / "store").start()
            user, ws = "bench", "train"
            token = hub.user_token(user)
            hub.start_workspace(user, ws, token)
            started = time.perf_counter()
            fill(hub, user, ws, total, args.text)
            print(f"wrote {total / 1e9:.1f} GB in the workspace in {time.perf_counter() - started:.0f} s", flush=True)
            hub.stop_workspace(user, ws, token)
            root = snapshot_dir(hub, user, ws)

            before = peak_rss_mb(service_process(hub))  # what the service took before any download
            direct_read(root)  # the page cache warm for every measurement
            size, direct_s = direct_read(root)
            direct = size / 1e6 / direct_s
            api = f"{hub.url}/services/workspace/api/workspaces/{ws}/executions/1/files"
            results = {}
            for kind in ("tar.gz", "zip"):
                got, seconds, status = curl(f"{api}?archive={kind}", token)
                # (the binary part is stored: at least that much is sent)
                assert status == 200 and got >= size * (1 - args.text) * 0.9, (kind, status, got)
                results[kind] = (got, seconds)
            # the same straight at the service's port: what the proxy costs
            service = f"http://127.0.0.1:{hub.env['WORKSPACE_SERVICE_PORT']}/services/workspace/api"
            for kind in ("tar.gz", "zip"):
                got, seconds, status = curl(f"{service}/workspaces/{ws}/executions/1/files?archive={kind}", token)
                assert status == 200, (kind, status)
                results[f"{kind}, no proxy"] = (got, seconds)
            biggest = max((p for p in (root / "checkpoints").iterdir()), key=lambda p: p.stat().st_size)
            one, one_s, status = curl(f"{api}/checkpoints/{biggest.name}", token)
            assert status == 200 and one == biggest.stat().st_size, (status, one)
            # archive_ratio's two, in rounds in turn (one figure alone moved by a sixth from run to run): medians
            tars, ones = [results["tar.gz"][1]], [one_s]
            for _ in range(args.rounds - 1):
                tars.append(curl(f"{api}?archive=tar.gz", token)[1])
                ones.append(curl(f"{api}/checkpoints/{biggest.name}", token)[1])
            results["tar.gz"] = (results["tar.gz"][0], statistics.median(tars))
            one_s = statistics.median(ones)
            rss = peak_rss_mb(service_process(hub))
        finally:
            if hub is not None:
                hub.stop()
            subprocess.run(["umount", "-l", str(mnt)], check=False)

    for kind, (got, seconds) in results.items():
        print(
            f"{kind}: {size / 1e6 / seconds:,.0f} MB/s of the output ({got / 1e9:.2f} GB sent for "
            f"{size / 1e9:.2f} GB, {seconds:.1f} s)",
            flush=True,
        )
    print(f"one file of {one / 1e6:,.0f} MB: {one / 1e6 / one_s:,.0f} MB/s", flush=True)
    mb_s = size / 1e6 / results["tar.gz"][1]
    print(
        f"{size / 1e9:.2f} GB: direct read {direct:,.0f} MB/s, tar.gz through hub, proxy and service "
        f"{mb_s:,.0f} MB/s, ratio {mb_s / direct:.2f}; the service's peak RSS {rss:.0f} MB "
        f"({before:.0f} MB before the downloads)",
        flush=True,
    )
    one_mb_s = one / 1e6 / one_s
    print(
        f"download_mb_s={mb_s:.1f} peak_rss_mb={rss:.1f} ratio={mb_s / direct:.3f} "
        f"archive_ratio={mb_s / one_mb_s:.3f}",  # #34: against one file through the same proxy, same run
        flush=True,
    )


if __name__ == "__main__":
    main()
