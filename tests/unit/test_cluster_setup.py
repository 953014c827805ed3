"""Pure parts of the cluster set-up (workspace/setup/cluster.py); the cluster itself is tests/cluster/."""

import pytest

from workspace.setup.cluster import Node, parse_gpus
from workspace.setup.steps import SetupError


def test_gpus_per_node():
    assert parse_gpus(["node2=0,1", "node3=0, 1,2,3"]) == {"node2": ["0", "1"], "node3": ["0", "1", "2", "3"]}
    for bad in ("0,1", "node2=", "gpu=0"):
        with pytest.raises(SetupError, match="NODE=ID"):
            parse_gpus([bad])


def test_node_addresses_and_paths(tmp_path):
    node = Node(2, tmp_path / "node2")
    assert (node.name, node.address) == ("node2", "10.250.0.12")
    assert node.socket == f"unix://{tmp_path}/node2/docker.sock"
    assert node.store == tmp_path / "node2" / "store"
    assert node.pid() is None
