"""A real multi-node swarm on this machine (workspace/setup/cluster.py), for the cluster tests.

Marked `docker`: without root, a Docker engine or the image the tests skip with
a reason, and under CI=true such a skip fails the run (tests/conftest.py).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tests.integration.conftest import docker_client, image  # noqa: F401  (fixtures)
from tests.integration.hub import Hub, free_port
from tests.integration.test_framework_images import SCIENTIFIC
from workspace.settings import Settings
from workspace.setup import engine
from workspace.setup.cluster import BRIDGE, NET, Cluster
from workspace.spawner import networks
from workspace.store import homes

GPUS = {"node2": ["0", "1"], "node3": ["0", "1", "2", "3"]}
USERNS_NODE = "node4"  # its engine remaps users: the root-allowed types' node (test_root_inside.py)
NET_GATEWAY = f"{NET}.1"  # the host on the cluster's bridge


def pytest_collection_modifyitems(items):
    for item in items:
        if "/cluster/" in str(item.fspath):
            item.add_marker(pytest.mark.docker)
    # the chaos test last (a stable sort): should it fail with a node still down, no other test begins there
    items.sort(key=lambda item: str(item.fspath).endswith("/cluster/test_chaos.py"))


@pytest.fixture(scope="session")
def cluster(tmp_path_factory, image):  # noqa: F811
    if os.geteuid() != 0:
        pytest.skip("a cluster of namespaced engines needs root")
    if subprocess.run(["ip", "link", "show", BRIDGE], capture_output=True).returncode == 0:
        pytest.fail(f"a cluster is up already (bridge {BRIDGE}): `make cluster-down` first")
    # not under pytest's own directory, which pytest makes root's alone again at a session's start: the
    # user-namespaced node's remapped root passes through the directories above its data root (userns.py)
    root = Path(tempfile.mkdtemp(prefix="workspace-cluster-", dir="/tmp"))
    c = Cluster(root, nodes=4, cache=Settings.from_env().path("cache"))
    loading = concurrent.futures.ThreadPoolExecutor(1)
    try:
        c.up(image, GPUS, store_size="2G", user_namespaced=[USERNS_NODE])
        # the scientific image (Open MPI) for the jobs' tests, loaded into the nodes while the first tests run
        # (not into the user-namespaced node, where no job runs)
        workers = [n for n in c.nodes if n.name != USERNS_NODE]
        c.more_images = {SCIENTIFIC: loading.submit(c.copy_image, SCIENTIFIC, workers)}
        yield c
    finally:
        loading.shutdown(wait=True)
        pids = [n.pid() for n in c.nodes]
        c.down(purge=True)
    # `down` leaves nothing behind: no engine, bridge, namespace or mount of the cluster's
    assert not [p for p in pids if p and os.path.exists(f"/proc/{p}")], "an engine outlived `down`"
    assert subprocess.run(["ip", "link", "show", BRIDGE], capture_output=True).returncode != 0
    netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert not any(n.name in netns.split() for n in c.nodes), netns
    assert str(c.root) not in open("/proc/self/mounts").read()
    assert not list(c.root.parent.glob(f"{c.root.name}*")), "the engines' runtime directories outlived `down`"


def bring_back(cluster: Cluster) -> list[str]:
    """Start again what is down of `cluster` (an engine, a node's processes, an agent), as `make cluster-up`
    would; the nodes that were down."""
    down = [n.name for n in cluster.nodes if n.pid() is None]
    recorded = cluster.recorded()
    cluster.up(recorded["image"], recorded["gpus"], store_size="2G")
    return down


@pytest.fixture(scope="module", autouse=True)
def whole_cluster(cluster: Cluster):
    """Every module begins on a whole cluster: a test that killed an engine and failed before it brought it
    back (a lost worker's, the chaos test) leaves the next module a cluster that answers."""
    down = bring_back(cluster)
    if down:
        print(f"[cluster] brought back before this module: {', '.join(down)}")
    yield


@contextlib.contextmanager
def running_swarm_hub(cluster: Cluster, data: Path, **env):
    """A hub on the swarm (`env`: its WORKSPACE_* settings), its own store (the store of record, a btrfs of
    its own under the cluster) served by a store agent as the nodes' are; everything it made removed at
    the end."""
    central = cluster.root / f"central-{data.name}"
    homes.mount_loop_btrfs(cluster.root / f"{central.name}.btrfs", central, size="2G")  # unmounted by cluster.down
    # the hub's own store has an agent too: the nodes' agents pull from it and send to it, node to node
    port = free_port(NET_GATEWAY)
    agent = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "workspace.store.agent",
            "--root",
            str(central / "store"),
            "--listen",
            f"{NET_GATEWAY}:{port}",
            "--token-file",
            str(cluster.agent_token_file),
        ],
        stdout=open(cluster.root / f"{central.name}-agent.log", "ab"),
        stderr=subprocess.STDOUT,
    )
    site = data / "jupyterhub_config.d"
    site.mkdir()
    # the hub notices a dead workspace (a lost node) within seconds; node changes are seen at once; the
    # nodes' stores are reached only through their agents, as on separate machines
    (site / "cluster.py").write_text(
        "c.Spawner.poll_interval = 2\n"
        "c.SwarmWorkspaceSpawner.node_refresh = 0.5\n"
        f"c.SwarmWorkspaceSpawner.store_agent_url = 'http://{NET_GATEWAY}:{port}'\n"
        f"c.SwarmWorkspaceSpawner.store_agent_token_file = {str(cluster.agent_token_file)!r}\n"
    )
    hub = Hub(
        data,
        store_dir=central / "store",
        WORKSPACE_SWARM_MANAGER=cluster.manager.socket,
        WORKSPACE_CULL_BROWSER_TIMEOUT="86400",
        WORKSPACE_SAVE_RETRY_INTERVAL="2",
        **env,
    )
    # the nodes' egress rules let the hub's API through (it is the host's, not a node's: forwarded)
    allowed = [a for a in hub.env["WORKSPACE_EGRESS_ALLOWED"].split(",") if a]
    cluster.guard_egress((engine.bridge_gateway(), int(hub.env["WORKSPACE_HUB_PORT"])), allowed)
    try:
        hub.start()
        yield hub
    finally:
        hub.stop()
        agent.terminate()
        agent.wait(10)
        manager = cluster.manager.client()
        for service in manager.services.list(filters={"label": f"workspace.deployment={hub.deployment}"}):
            service.remove()
        time.sleep(2)  # the tasks' containers leave the owners' overlays
        networks.remove_all(manager, hub.deployment)


@contextlib.contextmanager
def host_on_bridge(cluster: Cluster, addresses: list[str], directory: Path, port: int = 8765):
    """A host of the test's own: a namespace on the cluster's bridge holding `addresses`, which the nodes
    route there, serving `directory` over HTTP on `port` (the host's routes and FORWARD stay as they are:
    bridge to bridge is the cluster's FORWARD_RULE)."""
    tag = os.urandom(3).hex()
    ns, host_end, ns_end = f"wsswsite{tag}", f"vsw{tag}h", f"vsw{tag}n"
    own = f"{NET}.{random.randrange(200, 250)}"
    inside = ["ip", "netns", "exec", ns]

    def run(*cmd):
        subprocess.run(cmd, check=True, capture_output=True, text=True)

    server = None
    try:
        run("ip", "netns", "add", ns)
        run("ip", "link", "add", host_end, "type", "veth", "peer", "name", ns_end, "netns", ns)
        run("ip", "link", "set", host_end, "master", BRIDGE, "up")
        run(*inside, "ip", "addr", "add", f"{own}/24", "dev", ns_end)
        for address in addresses:
            run(*inside, "ip", "addr", "add", f"{address}/32", "dev", ns_end)
        run(*inside, "ip", "link", "set", ns_end, "up")
        run(*inside, "ip", "link", "set", "lo", "up")
        for node in cluster.nodes:
            for address in addresses:
                run("ip", "-n", node.name, "route", "replace", f"{address}/32", "via", own)
        server = subprocess.Popen(
            [*inside, "python3", "-m", "http.server", str(port), "--bind", "0.0.0.0"],
            cwd=directory,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        yield
    finally:
        if server is not None:
            server.terminate()
            server.wait(10)
        for node in cluster.nodes:
            for address in addresses:
                subprocess.run(["ip", "-n", node.name, "route", "del", f"{address}/32"], capture_output=True)
        subprocess.run(["ip", "link", "del", host_end], capture_output=True)
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)
