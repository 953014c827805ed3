"""A real multi-node swarm on this machine (workspace/setup/cluster.py), for the cluster tests.

Marked `docker`: without root, a Docker engine or the image the tests skip with
a reason, and under CI=true such a skip fails the run (tests/conftest.py).
"""

from __future__ import annotations

import os
import subprocess

import pytest

from tests.integration.conftest import docker_client, image  # noqa: F401  (fixtures)
from workspace.settings import Settings
from workspace.setup.cluster import BRIDGE, Cluster

GPUS = {"node2": ["0", "1"], "node3": ["0", "1", "2", "3"]}


def pytest_collection_modifyitems(items):
    for item in items:
        if "/cluster/" in str(item.fspath):
            item.add_marker(pytest.mark.docker)


@pytest.fixture(scope="session")
def cluster(tmp_path_factory, image):  # noqa: F811
    if os.geteuid() != 0:
        pytest.skip("a cluster of namespaced engines needs root")
    if subprocess.run(["ip", "link", "show", BRIDGE], capture_output=True).returncode == 0:
        pytest.fail(f"a cluster is up already (bridge {BRIDGE}): `make cluster-down` first")
    c = Cluster(tmp_path_factory.mktemp("cluster"), nodes=3, cache=Settings.from_env().path("cache"))
    try:
        c.up(image, GPUS, store_size="2G")
        yield c
    finally:
        pids = [n.pid() for n in c.nodes]
        c.down(purge=True)
    # `down` leaves nothing behind: no engine, bridge, namespace or mount of the cluster's
    assert not [p for p in pids if p and os.path.exists(f"/proc/{p}")], "an engine outlived `down`"
    assert subprocess.run(["ip", "link", "show", BRIDGE], capture_output=True).returncode != 0
    netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert not any(n.name in netns.split() for n in c.nodes), netns
    assert str(c.root) not in open("/proc/self/mounts").read()
