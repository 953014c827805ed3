"""Faults together (#30): the faults a chaos test injects into a swarm hub, and what it reads to check it.

A fault is a process killed at once (SIGKILL: nothing is flushed, nothing says goodbye) and, where an
operator's supervisor would, brought back: the hub (restarted as systemd would), the proxy and the
hub's managed services (JupyterHub restarts them itself: not helped here), a node's store agent, a
worker's engine, a whole worker (every process in its namespace: engine, agent, workspaces). node1 is
the swarm's only manager here, so its engine is left alone (a real swarm runs three managers); its
store agent is fair game.
"""

from __future__ import annotations

import hashlib
import os
import random
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import psutil
import requests

from tests.cluster.conftest import bring_back
from tests.integration.hub import Hub
from workspace.db import Database
from workspace.executions import Execution
from workspace.setup.cluster import Cluster

KINDS = ("hub", "proxy", "service", "culler", "gateway", "agent", "engine", "node")
# the hub's managed services, by the module each runs (jupyterhub_config.py)
SERVICES = {"service": "workspace.service", "culler": "workspace.culler", "gateway": "workspace.gateway"}
WORKERS = ("node2", "node3")  # node1 manages the swarm (above)
DOWN_S = 8  # how long a killed hub, engine or node stays down before it is brought back


@dataclass
class Fault:
    at: float  # seconds into the window
    kind: str
    node: str | None = None
    killed: int | None = None  # the process killed (its first, for a node)

    def __str__(self) -> str:
        return f"{self.at:5.1f} s {self.kind}{' ' + self.node if self.node else ''}"


def schedule(seed: int, window: float, count: int = len(KINDS)) -> list[Fault]:
    """`count` faults over `window` seconds, each kind at least once (count >= len(KINDS)), in an order
    and at times the seed chooses: a failing run is rerun with its seed."""
    rng = random.Random(seed)
    kinds = list(KINDS) + [rng.choice(KINDS) for _ in range(count - len(KINDS))]
    rng.shuffle(kinds)
    slot = window / len(kinds)
    faults = []
    for i, kind in enumerate(kinds):
        node = None
        if kind == "agent":
            node = rng.choice(("node1", *WORKERS))
        elif kind in ("engine", "node"):
            node = rng.choice(WORKERS)
        faults.append(Fault(round(i * slot + rng.uniform(0, slot / 2), 1), kind, node))
    return faults


class Injector:
    """Injects faults into one hub on one cluster and brings back what an operator would."""

    def __init__(self, cluster: Cluster, hub: Hub):
        self.cluster, self.hub = cluster, hub

    def node(self, name: str):
        return next(n for n in self.cluster.nodes if n.name == name)

    def inject(self, fault: Fault) -> None:
        getattr(self, f"_{fault.kind}" if fault.kind not in SERVICES else "_managed")(fault)

    def _hub(self, fault: Fault) -> None:
        fault.killed = self.hub.proc.pid
        self.hub.proc.send_signal(signal.SIGKILL)  # its services die with it (workspace/process.py)
        self.hub.proc.wait(30)
        time.sleep(DOWN_S)
        self.hub.start(timeout=120)  # what a supervisor (systemd's Restart=) does

    def _proxy(self, fault: Fault) -> None:
        fault.killed = int((self.hub.data_dir / "run" / "proxy.pid").read_text())
        os.kill(fault.killed, signal.SIGKILL)  # the hub notices within 5 s and starts another

    def _managed(self, fault: Fault) -> None:
        deadline = time.monotonic() + 60  # a hub just restarted may not have started it yet
        while not (pids := service_pids(self.hub, fault.kind)):
            assert time.monotonic() < deadline, f"the hub runs no {fault.kind}"
            time.sleep(0.5)
        fault.killed = pids[0]
        os.kill(fault.killed, signal.SIGKILL)  # the hub restarts it (its poll)

    def _agent(self, fault: Fault) -> None:
        fault.killed = self.node(fault.node).agent_pid()
        if fault.killed:  # None: down already (brought back below)
            os.kill(fault.killed, signal.SIGKILL)
        time.sleep(DOWN_S)
        self.bring_back()

    def _engine(self, fault: Fault) -> None:
        fault.killed = self.node(fault.node).pid()
        if fault.killed:
            os.kill(fault.killed, signal.SIGKILL)
        time.sleep(DOWN_S)
        self.bring_back()

    def _node(self, fault: Fault) -> None:
        """The machine dies: every process in its namespace at once (its store's disk stays)."""
        pids = subprocess.run(["ip", "netns", "pids", fault.node], capture_output=True, text=True).stdout.split()
        fault.killed = int(pids[0]) if pids else None
        for pid in pids:
            try:
                os.kill(int(pid), signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(DOWN_S)
        self.bring_back()

    def bring_back(self) -> None:
        """What is down of the cluster (an engine, an agent) is started again; what runs is left alone."""
        bring_back(self.cluster)


def service_pids(hub: Hub, kind: str) -> list[int]:
    """The processes of a managed service (`service`, `culler`, `gateway`) the hub runs now."""
    module = SERVICES[kind]
    out = []
    for child in psutil.Process(hub.proc.pid).children():
        try:
            cmd = child.cmdline()
        except psutil.NoSuchProcess:
            continue
        if module in cmd and child.status() != psutil.STATUS_ZOMBIE:
            out.append(child.pid)
    return out


def proxy_routes(hub: Hub) -> dict:
    """The proxy's routing table, as the proxy itself has it."""
    r = requests.get(
        f"http://127.0.0.1:{hub.env['WORKSPACE_PROXY_API_PORT']}/api/routes",
        headers={"Authorization": f"token {hub.env['CONFIGPROXY_AUTH_TOKEN']}"},
        timeout=10,
    )
    r.raise_for_status()
    return r.json()


def records(hub: Hub) -> list[dict]:
    """Every execution of the hub, with its workspace and output, read from the workspace database."""
    db = Database(hub.settings.db_url, migrate=False, key_file=hub.settings.secret_key_file)
    with db.session() as s:
        out = []
        for e in s.query(Execution).all():
            snap = e.snapshot if e.has_output else None
            out.append(
                {
                    "id": e.id,
                    "owner": e.workspace.owner,
                    "name": e.workspace.name,
                    "number": e.number,
                    "kind": e.kind,
                    "state": e.state,
                    "stop_reason": e.stop_reason,
                    "exit_code": e.exit_code,
                    "node": e.node,
                    "gpu_ids": list(e.gpu_ids or []),
                    "snapshot": snap.key if snap else None,
                    "output_node": snap.node if snap else None,
                    "replicated": bool(snap and snap.replicated_at),
                }
            )
    db.engine.dispose()
    return out


def output_path(cluster: Cluster, central: Path, record: dict) -> Path:
    """Where an output is read: its copy in the store of record once there, else its node's store."""
    if record["replicated"]:
        return central / "snapshots" / record["snapshot"]
    node = next(n for n in cluster.nodes if n.name == record["output_node"])
    return node.store / "snapshots" / record["snapshot"]


def hashes(root: Path) -> dict[str, str]:
    """{path: sha256} of every regular file of a saved output (its content; where it is kept aside)."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.is_symlink()
    }
