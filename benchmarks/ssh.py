"""Benchmark of the SSH gateway (#16): scp throughput through it against scp to the container directly, and the
gateway's memory with many sessions open.

    .venv/bin/python benchmarks/ssh.py [--mb 1024] [--sessions 50] [--rounds 3]

A real hub (the integration tests' Hub, homes on a loop-mounted btrfs), the real image, Debian's OpenSSH
client. One workspace runs; a file of `--mb` MiB of random bytes is copied into it with `scp`:

- directly: to the container's sshd on its address (the baseline; the gateway's client key, which the
  workspace authorizes from the host's address on the owner's network),
- through the gateway: `scp -P PORT user+workspace@127.0.0.1:`, the user's key.

Each copy is checked by its hash inside. Then `--sessions` sessions are opened through the gateway at once
(each running `sleep`; half of them each by two users, as one user may hold 32 channels), and the gateway
process's resident memory is read before and with them.

Each copy is made `--rounds` times, the two in turn, and the medians compared. The last line reads
`ssh_ratio=<gateway MB/s / direct MB/s> gateway_mb_s=... direct_mb_s=... rss_idle_mb=...
rss_sessions_mb=...`.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.integration.hub import Hub  # noqa: E402
from tests.integration.test_ssh import Client  # noqa: E402
from workspace.store.homes import mount_loop_btrfs  # noqa: E402


def scp(args: list[str], source: Path, target: str) -> float:
    started = time.perf_counter()
    subprocess.run(["scp", "-q", *args, str(source), target], check=True, timeout=1800)
    return time.perf_counter() - started


def gateway_rss_mb(hub: Hub) -> float:
    """The resident memory of this hub's gateway (the service process whose data dir is the hub's)."""
    for p in psutil.process_iter(["cmdline"]):
        try:
            if "workspace.gateway" in " ".join(p.info["cmdline"] or []) and p.environ().get(
                "WORKSPACE_DATA_DIR"
            ) == str(hub.data_dir):
                return p.memory_info().rss / 2**20
        except psutil.Error:
            continue
    raise RuntimeError("the gateway's process was not found")


def run(base: Path, mb: int, sessions: int, rounds: int) -> None:
    store = base / "store"
    mount_loop_btrfs(base / "store.img", store, size="20G")
    hub = Hub(base / "data", store_dir=store)
    try:
        hub.start()
        ada = Client(hub, base / "ada", "bench")
        ada.register()
        hub.start_workspace("bench", "data", ada.token)
        data = base / "data.bin"
        with open(data, "wb") as f:
            for _ in range(mb):
                f.write(os.urandom(1 << 20))
        digest = hashlib.sha256(data.read_bytes()).hexdigest()

        (container,) = hub.containers(user="bench", server="data")
        address = next(iter(container.attrs["NetworkSettings"]["Networks"].values()))["IPAddress"]
        known = base / "direct_known_hosts"
        scan = subprocess.run(["ssh-keyscan", "-p", "2222", address], capture_output=True, text=True, timeout=30)
        known.write_text(scan.stdout)
        direct_args = ["-F", "/dev/null", "-o", f"UserKnownHostsFile={known}", "-o", "BatchMode=yes"]
        direct_args += ["-i", str(hub.data_dir / "gateway" / "client_key"), "-P", "2222"]
        # rounds in turn, each after `sync`: a copy is not slowed by the last one's writeback; the median of
        # each (one copy's figure moved by a fifth from one run to the next on this machine)
        directs, throughs = [], []
        for i in range(rounds):
            subprocess.run(["sync"], check=True)
            directs.append(scp(direct_args, data, f"jovyan@{address}:direct.bin"))
            subprocess.run(["sync"], check=True)
            throughs.append(scp([*ada.options(), "-P", ada.port], data, f"{ada.login('data')}:gateway.bin"))
            print(f"round {i + 1}: direct {mb / directs[-1]:.0f} MiB/s, gateway {mb / throughs[-1]:.0f} MiB/s")
        sums = ada.ssh("data", "sha256sum direct.bin gateway.bin").stdout.split()
        assert sums[0] == sums[2] == digest, sums
        direct_mb_s, gateway_mb_s = mb / statistics.median(directs), mb / statistics.median(throughs)
        print(f"direct:  {mb} MiB, median {direct_mb_s:.0f} MiB/s")
        print(f"gateway: {mb} MiB, median {gateway_mb_s:.0f} MiB/s")

        # the sessions: half of them each for two users, under the gateway's bound on one user's channels
        # (`max_channels_per_user`, 32); counted in each workspace (no session of their own)
        bob = Client(hub, base / "bob", "bench2")
        bob.register()
        hub.start_workspace("bench2", "data", bob.token)
        idle = gateway_rss_mb(hub)
        procs = [
            subprocess.Popen(
                ["ssh", *who.options(), "-p", who.port, who.login("data"), "sleep 120"],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            for i in range(sessions)
            for who in [(ada, bob)[i % 2]]
        ]
        count = ["python", "-c", "from workspace.singleuser.activity import ssh_connections as c; print(c())"]
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            open_now = sum(
                int(c.exec_run(count, user="1000").output) for u in ("bench", "bench2") for c in hub.containers(user=u)
            )
            if open_now >= sessions:
                break
            time.sleep(1)
        loaded = gateway_rss_mb(hub)
        print(f"gateway memory: {idle:.0f} MiB idle, {loaded:.0f} MiB with {open_now} sessions open")
        for p in procs:
            p.terminate()
        print(
            f"ssh_ratio={gateway_mb_s / direct_mb_s:.3f} gateway_mb_s={gateway_mb_s:.0f} direct_mb_s={direct_mb_s:.0f} "
            f"rss_idle_mb={idle:.0f} rss_sessions_mb={loaded:.0f} sessions={open_now}"
        )
    finally:
        hub.stop()
        subprocess.run(["umount", "-l", str(store)], check=False)


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mb", type=int, default=1024)
    p.add_argument("--sessions", type=int, default=50)
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-ssh-") as tmp:
        run(Path(tmp), args.mb, args.sessions, args.rounds)
