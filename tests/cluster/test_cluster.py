"""`make cluster-up`'s swarm: nodes of their own, placement by label, a store per node, a clean `down`."""

from __future__ import annotations

import os
import secrets
import time

import requests
from docker.types import EndpointSpec, Mount, RestartPolicy

from workspace.setup import userns
from workspace.setup.cluster import Cluster
from workspace.store import homes

from .conftest import GPUS, USERNS_NODE


def test_four_engines_one_swarm_labelled_with_their_gpus_and_user_namespaces(cluster: Cluster):
    nodes = {n.attrs["Description"]["Hostname"]: n.attrs for n in cluster.manager.client().nodes.list()}
    assert sorted(nodes) == ["node1", "node2", "node3", "node4"]
    assert {n["Status"]["State"] for n in nodes.values()} == {"ready"}
    assert {n["Status"]["Addr"] for n in nodes.values()} == {"10.250.0.11", "10.250.0.12", "10.250.0.13", "10.250.0.14"}
    # four engines with identities of their own (one /etc/docker each), not one answering four times
    assert len({node.client().info()["ID"] for node in cluster.nodes}) == 4
    for name, attrs in nodes.items():
        labels = attrs["Spec"].get("Labels", {})
        assert labels["node"] == name
        assert labels.get("workspace.gpus", "") == ",".join(GPUS.get(name, []))
        assert labels.get("workspace.userns") == ("remap" if name == USERNS_NODE else None)
        offset = str(userns.remap_offset()) if name == USERNS_NODE else None
        assert labels.get("workspace.id-offset") == offset  # a hub that mounts the node's store shifts by it
    # the user-namespaced node's engine remaps users, and keeps its layers on a filesystem of its own
    for node in cluster.nodes:
        info = node.client().info()
        assert ("name=userns" in info["SecurityOptions"]) == (node.name == USERNS_NODE), info["SecurityOptions"]
        assert os.path.ismount(node.dir / "data") == (node.name == USERNS_NODE)


def test_a_service_placed_on_a_node_answers_from_that_node_with_that_nodes_store(cluster: Cluster):
    node2 = cluster.nodes[1]
    assert homes.is_btrfs(node2.store)
    assert len({n.store.stat().st_dev for n in cluster.nodes}) == 4  # a filesystem each
    token = secrets.token_hex(8)
    (node2.store / "token.txt").write_text(token)
    service = cluster.manager.client().services.create(
        cluster.recorded()["image"],
        command=["python3", "-m", "http.server", "8888", "--directory", "/store"],
        name=f"probe-{token}",
        user="0",  # the store's top is root's alone (0700, #28): the probe reads it as root
        constraints=["node.labels.node==node2"],
        endpoint_spec=EndpointSpec(mode="dnsrr", ports={18888: (8888, "tcp", "host")}),
        mounts=[Mount(target="/store", source=str(node2.store), type="bind", read_only=True)],
        restart_policy=RestartPolicy(condition="none"),
    )
    try:
        deadline, answer = time.monotonic() + 90, None
        while time.monotonic() < deadline:
            try:
                answer = requests.get(f"http://{node2.address}:18888/token.txt", timeout=2)
                if answer.ok:
                    break
            except requests.RequestException:
                pass
            time.sleep(0.2)
        assert answer is not None and answer.text == token  # our container, on node2, reading node2's store
        task = service.tasks()[0]
        assert cluster.manager.client().nodes.get(task["NodeID"]).attrs["Description"]["Hostname"] == "node2"
    finally:
        service.remove()
