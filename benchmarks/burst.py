"""Benchmark of a class's burst: N starts requested within one second, ours against a plain JupyterHub.

    .venv/bin/python benchmarks/burst.py [--starts 100] [--plain-http-timeout 300] [--skip-plain]

Ours: a real hub of this project (the integration tests' Hub: its own data
directory, ports and deployment; homes on a loop-mounted btrfs), every start a
new execution that waits for its node's start-up turn (`startup_slots`,
workspace/limits/queue.py). The baseline, in the same run and on the same
engine: a plain JupyterHub 6 with DockerSpawner, the same image and JupyterHub's
default settings except its timeouts (JupyterHub's defaults, 30 s for the
server to answer and 60 s for the container to start, fail most of a burst on
this machine; both are 300 s here, as in the issue's comparison, so that the
plain hub shows its best; `--plain-http-timeout 30 --plain-start-timeout 60`
shows JupyterHub's own). Each start's time runs from its spawn
request to the `ready` event of its progress stream; a start that ends `failed`
(or not within 15 min) is a failure.

Both runs also measure the CPU the machine spent from the requests to the last ready, and the share of
it spent inside the servers' containers (the same image and server for both hubs: the same work). The
`floor_ratio` is the p95 a hub of no CPU of its own could reach, over the plain hub's: 95 % of the
servers' CPU spread over every core.

The last line reads `starts=<N> burst_failures=<ours failed> p50_s=<> p95_s=<> cpu_s_per_start=<>
plain_failures=<> plain_p50_s=<> plain_p95_s=<> plain_cpu_s_per_start=<> server_cpu_s_per_start=<>
floor_ratio=<> p95_ratio=<ours p95 / plain p95>`; ours must have no failures.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.integration.hub import Hub, free_port  # noqa: E402
from workspace.settings import Settings  # noqa: E402
from workspace.setup import deploy, engine  # noqa: E402
from workspace.store.homes import mount_loop_btrfs  # noqa: E402

PATIENCE = 900  # seconds a start may take before it counts as failed


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


class Target:
    """A hub the burst goes to: its URL, an admin token, and where a user's server is."""

    def __init__(self, url: str, token: str, server: str):
        self.url, self.token, self.server = url, token, server
        self.headers = {"Authorization": f"token {token}"}

    def path(self, user: str) -> str:
        return f"/hub/api/users/{user}/servers/{self.server}" if self.server else f"/hub/api/users/{user}/server"

    def create_users(self, users: list[str]) -> None:
        r = requests.post(f"{self.url}/hub/api/users", headers=self.headers, json={"usernames": users}, timeout=60)
        assert r.status_code in (201, 409), r.text

    def timed_start(self, user: str, waits: list[str]) -> float | None:
        """Seconds from the spawn request to ready; None when it failed. Waiting messages go to `waits`."""
        started = time.perf_counter()
        try:
            r = requests.post(f"{self.url}{self.path(user)}", headers=self.headers, json={}, timeout=120)
            if r.status_code not in (201, 202):
                print(f"{user}: spawn answered {r.status_code} {r.text[:200]}", flush=True)
                return None
            with requests.get(
                f"{self.url}{self.path(user)}/progress", headers=self.headers, stream=True, timeout=PATIENCE
            ) as stream:
                for line in stream.iter_lines(decode_unicode=True):
                    if not line or not line.startswith("data:"):
                        continue
                    event = json.loads(line[5:])
                    if "position" in (event.get("message") or ""):
                        waits.append(event["message"])
                    if event.get("ready"):
                        return time.perf_counter() - started
                    if event.get("failed"):
                        print(f"{user}: {event.get('message')}", flush=True)
                        return None
        except Exception as e:  # a failed start is counted, not fatal
            print(f"{user}: {e}", flush=True)
        return None

    def stop(self, user: str) -> None:
        requests.delete(f"{self.url}{self.path(user)}", headers=self.headers, timeout=300)

    def wait_stopped(self, users: list[str], timeout: float = 300) -> None:
        deadline = time.monotonic() + timeout
        for user in users:
            while time.monotonic() < deadline:
                info = requests.get(f"{self.url}/hub/api/users/{user}", headers=self.headers, timeout=60).json()
                server = (info.get("servers") or {}).get(self.server)
                if not server or not (server.get("pending") or server.get("ready")):
                    break
                time.sleep(1)


def busy_cpu() -> float:
    """CPU seconds this machine spent busy so far (all cores, /proc/stat: everything but idle and iowait)."""
    with open("/proc/stat") as f:
        ticks = [int(v) for v in f.readline().split()[1:]]
    return (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")


def containers_cpu() -> dict[str, float]:
    """CPU seconds each running container spent so far, by its cgroup (v1 cpuacct or v2 cpu.stat)."""
    found = {}
    for path in Path("/sys/fs/cgroup/cpuacct/docker").glob("*/cpuacct.usage"):
        found[path.parent.name] = int(path.read_text()) / 1e9
    for path in Path("/sys/fs/cgroup/system.slice").glob("docker-*.scope/cpu.stat"):
        usage = dict(line.split() for line in path.read_text().splitlines())
        found[path.parent.name] = int(usage["usage_usec"]) / 1e6
    return found


@dataclass
class Burst:
    """What a burst measured: each start's seconds, the failures, the queue's messages, and the CPU the
    machine spent from the requests to the last ready (all of it, and the containers' share: the servers
    coming up, the same work for any hub)."""

    done: list[float]
    failures: int
    waits: list[str]
    cpu: float
    servers_cpu: float


def burst(target: Target, starts: int, label: str) -> Burst:
    """N starts requested at once (one thread each), all stopped after."""
    users = [f"burst{i:03d}" for i in range(starts)]
    target.create_users(users)
    waits: list[str] = []
    began, cpu, before = time.perf_counter(), busy_cpu(), containers_cpu()
    with ThreadPoolExecutor(starts) as pool:
        times = list(pool.map(lambda u: target.timed_start(u, waits), users))
    cpu, after = busy_cpu() - cpu, containers_cpu()
    servers_cpu = sum(v - before.get(k, 0.0) for k, v in after.items())
    done = [t for t in times if t is not None]
    failures = len(times) - len(done)
    print(
        f"{label}: {starts} at once: {len(done)} started, {failures} failed; "
        f"p50 {statistics.median(done or [0]):.1f} s, p95 {percentile(done, 0.95):.1f} s, "
        f"all in {time.perf_counter() - began:.1f} s",
        flush=True,
    )
    print(
        f"{label}: CPU until the last was ready: {cpu:.1f} s ({cpu / starts:.2f} a start), of which the "
        f"servers' containers {servers_cpu:.1f} s ({servers_cpu / starts:.2f} a start)",
        flush=True,
    )
    if waits:
        print(f"{label}: a waiting start read: {waits[len(waits) // 2]}", flush=True)
    stopping = time.perf_counter()
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(target.stop, users))
    target.wait_stopped(users)
    print(f"{label}: stopping all {starts} took {time.perf_counter() - stopping:.1f} s", flush=True)
    return Burst(done, failures, waits, cpu, servers_cpu)


def ours(base: Path, starts: int) -> Burst:
    store = base / "store"
    mount_loop_btrfs(base / "store.img", store, size="20G")
    hub = Hub(base / "data", store_dir=store, WORKSPACE_MAX_RUNNING="0")
    try:
        hub.start()
        return burst(Target(hub.url, hub.admin_token, "bench"), starts, "ours")
    finally:
        hub.stop()
        subprocess.run(["umount", "-l", str(store)], check=False)


PLAIN_CONFIG = """
c = get_config()  # noqa
c.JupyterHub.ip, c.JupyterHub.port = "127.0.0.1", {port}
c.JupyterHub.hub_ip = c.JupyterHub.hub_connect_ip = "{gateway}"
c.JupyterHub.hub_port = {hub_port}
c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:{proxy_api}"
c.ConfigurableHTTPProxy.command = ["{chp}"]
c.JupyterHub.db_url = "sqlite:///{data}/jupyterhub.sqlite"
c.JupyterHub.cookie_secret_file = "{data}/cookie_secret"
c.JupyterHub.authenticator_class = "dummy"
c.Authenticator.allow_all = True
c.JupyterHub.services = [{{"name": "bench", "api_token": "{token}"}}]
c.JupyterHub.load_roles = [{{"name": "bench", "scopes": ["admin:users", "admin:servers"], "services": ["bench"]}}]
c.JupyterHub.spawner_class = "dockerspawner.DockerSpawner"
c.DockerSpawner.image = "{image}"
c.DockerSpawner.name_template = "plain-{tag}-{{username}}"
c.DockerSpawner.remove = True
c.Spawner.http_timeout = {http_timeout}
c.Spawner.start_timeout = {start_timeout}
"""


def plain(base: Path, starts: int, timeouts: tuple[int, int]) -> Burst:
    """The same burst on a plain JupyterHub + DockerSpawner with the same image; `timeouts`: its
    (http_timeout, start_timeout)."""
    settings = Settings.from_env()
    data = base / "plain"
    data.mkdir(parents=True)
    token, tag = uuid.uuid4().hex, uuid.uuid4().hex[:6]
    port = free_port("127.0.0.1")
    config = data / "jupyterhub_config.py"
    config.write_text(
        PLAIN_CONFIG.format(
            port=port,
            gateway=engine.bridge_gateway(),
            hub_port=free_port(engine.bridge_gateway()),
            proxy_api=free_port("127.0.0.1"),
            chp=deploy.ensure_proxy(settings),
            data=data,
            token=token,
            image=settings.image,
            tag=tag,
            http_timeout=timeouts[0],
            start_timeout=timeouts[1],
        )
    )
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}")
    with open(data / "jupyterhub.log", "wb") as log:
        proc = subprocess.Popen(
            [str(Path(sys.executable).parent / "jupyterhub"), "-f", str(config)],
            cwd=data,
            env=env,
            stdout=log,
            stderr=log,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if requests.get(f"{url}/hub/api/", timeout=2).status_code == 200:
                    break
            except requests.RequestException:
                time.sleep(0.3)
        else:
            raise SystemExit(f"the plain hub did not answer; read {data / 'jupyterhub.log'}")
        return burst(Target(url, token, ""), starts, "plain JupyterHub + DockerSpawner")
    finally:
        proc.terminate()
        proc.wait(60)
        names = subprocess.run(
            ["docker", "ps", "-aq", "--filter", f"name=plain-{tag}-"], capture_output=True, text=True
        ).stdout.split()
        if names:
            subprocess.run(["docker", "rm", "-f", *names], capture_output=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--starts", type=int, default=100, help="starts requested at once (default 100)")
    parser.add_argument(
        "--plain-http-timeout", type=int, default=300, help="the plain hub's http_timeout (JupyterHub's: 30)"
    )
    parser.add_argument("--plain-start-timeout", type=int, default=300, help="its start_timeout (JupyterHub's: 60)")
    parser.add_argument("--skip-plain", action="store_true", help="only ours (no ratio)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-burst-") as tmp:
        base = Path(tmp)
        mine = ours(base, args.starts)
        done = mine.done
        line = (
            f"starts={args.starts} burst_failures={mine.failures} p50_s={statistics.median(done or [0]):.1f} "
            f"p95_s={percentile(done, 0.95):.1f} cpu_s_per_start={mine.cpu / args.starts:.2f}"
        )
        if args.skip_plain:
            print(line)
            return
        theirs = plain(base, args.starts, (args.plain_http_timeout, args.plain_start_timeout))
        p95, p_p95 = percentile(done, 0.95), percentile(theirs.done, 0.95)
        # The floor: a hub that spent no CPU of its own, its starts in turn on every core, would have its 95th
        # start ready once 95 % of the servers' own CPU (the plain run's containers) was spent.
        cores = os.cpu_count() or 1
        floor = 0.95 * theirs.servers_cpu / cores
        print(
            f"{line} plain_failures={theirs.failures} plain_p50_s={statistics.median(theirs.done or [0]):.1f} "
            f"plain_p95_s={p_p95:.1f} plain_cpu_s_per_start={theirs.cpu / args.starts:.2f} "
            f"server_cpu_s_per_start={theirs.servers_cpu / args.starts:.2f} floor_ratio={floor / p_p95:.2f} "
            f"p95_ratio={p95 / p_p95:.2f}"
        )


if __name__ == "__main__":
    main()
