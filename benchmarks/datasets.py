"""Benchmark of dataset uploads through the real hub, proxy and workspace service.

    sudo .venv/bin/python benchmarks/datasets.py [--gb 2] [--chunk-mb 256]

Starts a hub (its own data directory and ports), uploads a file of --gb GB in
chunks of --chunk-mb MB through the chunked upload API (each with its Content-Length, as the CLI and a
browser send them), completes it (size
and SHA-256 checked), and reads the service's peak RSS (VmHWM). The baseline,
measured in the same run on the same filesystem, is writing the same bytes
to a file directly. The last line reads

    upload_mb_s=<x> peak_rss_mb=<y> upload_ratio=<x / the direct write>
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import tempfile
import time
from pathlib import Path

import psutil
import requests

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.integration.hub import Hub  # noqa: E402

BLOCK = 4 << 20


def blocks(total: int, seed: bytes):
    """The file's content, generated block by block (never whole in memory)."""
    block = hashlib.sha256(seed).digest() * (BLOCK // 32)
    sent = 0
    while sent < total:
        n = min(BLOCK, total - sent)
        yield block[:n]
        sent += n


class Body:
    """`size` bytes of `gen`, sent with their Content-Length as the CLI sends a file (workspace/cli/datasets.py,
    Part) and a browser a Blob; a generator would go chunked."""

    def __init__(self, gen, size: int):
        self.gen, self.left = gen, size

    def __len__(self) -> int:
        return self.left

    def read(self, n: int = -1) -> bytes:
        if self.left <= 0:
            return b""
        b = next(self.gen)
        self.left -= len(b)
        return b


def service_process(hub: Hub) -> psutil.Process:
    for child in psutil.Process(hub.proc.pid).children(recursive=True):
        if "workspace.service" in " ".join(child.cmdline()):
            return child
    raise RuntimeError("the workspace service is not running")


def peak_rss_mb(proc: psutil.Process) -> float:
    for line in Path(f"/proc/{proc.pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return proc.memory_info().rss / 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gb", type=float, default=2.0)
    parser.add_argument("--chunk-mb", type=int, default=256)
    args = parser.parse_args()
    total = int(args.gb * 1e9)
    chunk = args.chunk_mb << 20

    with tempfile.TemporaryDirectory(prefix="bench-datasets-", dir="/var/tmp") as tmp:
        tmp = Path(tmp)
        # baseline: the same bytes written straight to the same filesystem
        started = time.perf_counter()
        with open(tmp / "baseline.bin", "wb") as f:
            for b in blocks(total, b"x"):
                f.write(b)
            f.flush()
            os.fsync(f.fileno())
        disk_s = time.perf_counter() - started
        (tmp / "baseline.bin").unlink()

        hub = Hub(tmp / "hub").start()
        try:
            token = hub.user_token("bench")
            auth = {"Authorization": f"token {token}"}
            api = f"{hub.url}/services/workspace/api/datasets"
            requests.post(api, json={"name": "big"}, headers=auth, timeout=30).raise_for_status()
            digest = hashlib.sha256()
            for b in blocks(total, b"x"):
                digest.update(b)
            r = requests.post(
                f"{api}/bench/big/uploads",
                headers=auth,
                timeout=30,
                json={"filename": "big.bin", "size": total, "sha256": digest.hexdigest()},
            )
            r.raise_for_status()
            upload = f"{api}/bench/big/uploads/{r.json()['id']}"

            started = time.perf_counter()
            gen = blocks(total, b"x")
            offset = 0
            while offset < total:
                size = min(chunk, total - offset)

                r = requests.put(f"{upload}?offset={offset}", data=Body(gen, size), headers=auth, timeout=600)
                r.raise_for_status()
                offset = r.json()["offset"]
            requests.post(f"{upload}/complete", json={}, headers=auth, timeout=600).raise_for_status()
            upload_s = time.perf_counter() - started
            rss = peak_rss_mb(service_process(hub))
        finally:
            hub.stop()

    disk_mb_s = total / 1e6 / disk_s
    upload_mb_s = total / 1e6 / upload_s
    print(
        f"{total / 1e9:.1f} GB: direct write {disk_mb_s:,.0f} MB/s, upload through the API {upload_mb_s:,.0f} MB/s "
        f"(including the SHA-256 check), ratio {upload_mb_s / disk_mb_s:.2f}",
        flush=True,
    )
    print(f"upload_mb_s={upload_mb_s:.1f} peak_rss_mb={rss:.1f} upload_ratio={upload_mb_s / disk_mb_s:.3f}", flush=True)


if __name__ == "__main__":
    main()
