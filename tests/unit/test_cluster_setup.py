"""Pure parts of the cluster set-up (workspace/setup/cluster.py); the cluster itself is tests/cluster/."""

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

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


@pytest.mark.skipif(os.geteuid() != 0, reason="changing owners, checked as another uid, needs root")
def test_the_remapped_root_may_pass_through_to_the_data_root_and_read_nothing_on_the_way(request):
    """The engine refuses a data root its remapped root cannot reach; the data directory stays root's alone."""
    from workspace.setup.userns import let_through

    # below a directory everyone may pass (as /tmp): the directories above it are the other tests' too
    base = Path(tempfile.mkdtemp(dir="/tmp"))
    base.chmod(0o711)
    request.addfinalizer(lambda: shutil.rmtree(base))
    top = base / "private"
    data = top / "cluster" / "node4" / "data"
    data.mkdir(parents=True)
    (top / "secret").write_text("root's")
    for d in (top, top / "cluster", top / "cluster" / "node4", data):
        d.chmod(0o700)
    let_through(data, 231072)
    let_through(data, 231072)  # again: nothing changes

    def as_ids(uid, gid, *cmd):
        return subprocess.run(["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", *cmd]).returncode

    assert as_ids(231072, 231072, "test", "-x", str(data.parent)) == 0  # passes through every directory above
    assert as_ids(231072, 231072, "ls", str(top)) != 0  # reads none of them
    assert as_ids(231073, 231073, "test", "-x", str(data.parent)) != 0  # nobody else passes
    assert (oct(top.stat().st_mode & 0o777), top.stat().st_gid) == ("0o710", 231072)
    os.chown(top / "cluster", -1, 50)  # a group with rights of its own there: not taken away, the operator is told
    (top / "cluster").chmod(0o750)
    with pytest.raises(SetupError, match="must pass through"):
        let_through(data, 231072)


def test_what_a_remapping_engine_leaves_beside_the_cluster_is_found_and_nothing_else(tmp_path):
    """`down` removes the remapped runtime directories dockerd makes beside the cluster's directory."""
    from workspace.setup.userns import runtime_leftovers

    root = tmp_path / "cluster"
    for name in ("cluster", "cluster.100000.100000", "cluster2.1.1", "cluster.x.1", "clusterx.100000.100000"):
        (tmp_path / name).mkdir()
    assert runtime_leftovers(root) == [tmp_path / "cluster.100000.100000"]
