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


def test_a_user_namespaced_engines_range_is_added_after_every_other_and_kept(tmp_path):
    """workspace/setup/userns.py: `dockremap`'s range in /etc/subuid and /etc/subgid, made once."""
    from workspace.setup.userns import subordinate_range

    (tmp_path / "subuid").write_text("ada:100000:65536\nbob:165536:65536\n")
    (tmp_path / "subgid").write_text("ada:100000:65536\n")
    assert subordinate_range("dockremap", tmp_path) == 231072
    assert (tmp_path / "subuid").read_text().endswith("dockremap:231072:65536\n")
    assert (tmp_path / "subgid").read_text().endswith("dockremap:231072:65536\n")
    assert subordinate_range("dockremap", tmp_path) == 231072  # kept, not added again
    assert (tmp_path / "subuid").read_text().count("dockremap") == 1
    (tmp_path / "subgid").write_text("dockremap:300000:65536\n")
    with pytest.raises(SetupError, match="different ranges"):
        subordinate_range("dockremap", tmp_path)
