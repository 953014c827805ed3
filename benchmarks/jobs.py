"""Benchmark of a job's gang start (#31): request to every rank running, against separate starts.

    .venv/bin/python benchmarks/jobs.py [--nodes 3] [--rounds 3]

A real hub (the integration tests' Hub: its own data directory, ports and deployment name, homes on a
loop-mounted btrfs) and the real image, on this machine's engine. A job of N ranks is asked for, and its
time is from the request to the moment its last rank's command began (the engine's time of the runner's
first line, `[workspace] $ …`, in each rank's log). The baseline, in the same run: N separate runs
beside the same workspace asked for at once, timed the same way to the last of them. Rounds alternate
the two; the medians are compared. A job does more than N runs (each rank's home and container, the
hostfile, SSH entries, rank 0 last), all admitted in one transaction, so the ratio is the price of the
gang: near 1 means starting the ranks together costs about what starting as many runs does.

The last line reads `nodes=<N> rounds=<k> job_s=<median> separate_s=<median> gang_ratio=<job / separate>`.
"""

from __future__ import annotations

import argparse
import datetime as dt
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.integration.hub import Hub  # noqa: E402
from workspace.store.homes import mount_loop_btrfs  # noqa: E402
from workspace.tasks import stamp_ns  # noqa: E402

USER, NAME = "bench", "grid"
COMMAND = "sleep 3"


def began(hub: Hub, token: str, number: int, rank: int = 0, timeout: float = 300) -> float:
    """The engine's time (UNIX seconds) of the first line of execution `number`'s (rank's) log."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        r = hub.service_call("GET", f"/workspaces/{NAME}/executions/{number}/logs?rank={rank}", token)
        if r.status_code == 200:
            for line in r.content.splitlines():
                if b"[workspace] $" in line and (ns := stamp_ns(line)) is not None:
                    return ns / 1e9
        time.sleep(0.2)
    raise SystemExit(f"#{number} rank {rank} never began: read the hub's log {hub.log_path}")


def asked(hub: Hub, token: str, body: dict) -> tuple[float, int]:
    t0 = dt.datetime.now(dt.timezone.utc).timestamp()
    r = hub.service_call("POST", f"/workspaces/{NAME}/runs", token, json=body)
    if r.status_code != 202:
        raise SystemExit(f"the run was refused: {r.status_code} {r.text[:300]}")
    return t0, r.json()["execution"]["number"]


def wait_ended(hub: Hub, number: int, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ex = next(e for e in hub.executions(USER, NAME) if e["number"] == number)
        if ex["state"] in ("stopped", "failed"):
            return
        time.sleep(0.3)
    raise SystemExit(f"#{number} did not end")


def job_round(hub: Hub, token: str, nodes: int) -> float:
    t0, number = asked(hub, token, {"command": COMMAND, "job": {"nodes": nodes}})
    last = max(began(hub, token, number, rank) for rank in range(nodes))
    wait_ended(hub, number)
    return last - t0


def separate_round(hub: Hub, token: str, nodes: int) -> float:
    t0 = dt.datetime.now(dt.timezone.utc).timestamp()
    numbers = [asked(hub, token, {"command": COMMAND})[1] for _ in range(nodes)]
    last = max(began(hub, token, n) for n in numbers)
    for n in numbers:
        wait_ended(hub, n)
    return last - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=3, help="ranks of the job (default 3)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of each (default 3)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-jobs-") as tmp:
        base = Path(tmp)
        store = base / "store"
        mount_loop_btrfs(base / "store.img", store, size="10G")
        hub = Hub(base / "data", store_dir=store, WORKSPACE_MAX_RUNNING="0")
        try:
            hub.start()
            hub.create_user(USER)
            token = hub.user_token(USER)
            _, first = asked_task(hub, token)
            wait_ended(hub, first)
            jobs, separate = [], []
            for i in range(args.rounds):
                jobs.append(job_round(hub, token, args.nodes))
                separate.append(separate_round(hub, token, args.nodes))
                print(
                    f"round {i + 1}: job {jobs[-1]:.2f} s, {args.nodes} separate runs {separate[-1]:.2f} s", flush=True
                )
        finally:
            hub.stop()
            subprocess.run(["umount", "-l", str(store)], check=False)
    job_s, separate_s = statistics.median(jobs), statistics.median(separate)
    print(
        f"nodes={args.nodes} rounds={args.rounds} job_s={job_s:.2f} separate_s={separate_s:.2f} "
        f"gang_ratio={job_s / separate_s:.2f}"
    )


def asked_task(hub: Hub, token: str) -> tuple[float, int]:
    """The workspace's first execution (a task), that runs continue from."""
    r = hub.service_call("POST", f"/workspaces/{NAME}/tasks", token, json={"command": "echo ready"})
    if r.status_code != 202:
        raise SystemExit(f"the first task was refused: {r.status_code} {r.text[:300]}")
    return 0.0, r.json()["execution"]["number"]


if __name__ == "__main__":
    main()
