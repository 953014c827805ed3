"""Nodes (workspace/store/nodes.py) as a swarm manager describes them, and what the swarm spawner reads of a task
(pure)."""

import pytest

from workspace.spawner.swarm_spawner import published_port
from workspace.store.nodes import Node, inventories, parse_swarm


def node(hostname, state="ready", availability="active", **labels):
    return {
        "ID": f"id-{hostname}",
        "Description": {"Hostname": hostname},
        "Spec": {"Availability": availability, "Labels": labels},
        "Status": {"State": state, "Addr": f"10.0.0.{hostname[-1]}"},
    }


def test_nodes_their_stores_gpus_and_whether_they_take_work():
    nodes = parse_swarm(
        [
            node("node1", **{"workspace.store": "/s1"}),
            node("node2", **{"workspace.store": "/s2", "workspace.gpus": "0, 1,", "workspace.gpu-model": "A100"}),
            node("node3", state="down", **{"workspace.store": "/s3", "workspace.gpus": "0"}),
            node("node4", availability="pause", **{"workspace.store": "/s4"}),
            node("node5"),  # no store: never given a workspace
            node("node6", **{"workspace.store": "/s6", "workspace.store-agent": "http://10.0.0.6:8765"}),
        ]
    )
    assert nodes[0] == Node("node1", "id-node1", "10.0.0.1", "/s1", [], "", "", True, True)
    assert (nodes[1].gpus, nodes[1].gpu_model) == (["0", "1"], "A100")
    assert (nodes[2].ready, nodes[2].active) == (False, True)  # its workspaces are lost
    assert (nodes[3].ready, nodes[3].active) == (True, False)  # its workspaces run on; nothing new
    assert nodes[4].store == ""
    assert (nodes[0].agent, nodes[5].agent) == ("", "http://10.0.0.6:8765")  # a mount here; an agent there
    nodes = nodes[:5]
    assert [n.state for n in nodes] == ["up", "up", "down", "paused", "up"]
    # what admission places on: nodes that take work, and for a model, those of that model (or unlabelled)
    assert inventories(nodes) == {"node1": [], "node2": ["0", "1"], "node5": []}
    assert inventories(nodes, "a100") == {"node1": [], "node2": ["0", "1"], "node5": []}
    labelled = [Node("n1", gpus=["0"], gpu_model="V100"), Node("n2", gpus=["0"], gpu_model="A100")]
    assert inventories(labelled, "A100") == {"n2": ["0"]}


def test_the_port_a_task_publishes_is_read_from_its_own_status():
    task = {
        "Status": {
            "PortStatus": {
                "Ports": [{"TargetPort": 22, "PublishedPort": 30022}, {"TargetPort": 8888, "PublishedPort": 30888}]
            }
        }
    }
    assert published_port(task, 8888) == 30888
    assert published_port(task, 9999) is None
    assert published_port({"Status": {}}, 8888) is None  # not running yet
    assert published_port({}, 8888) is None


def test_each_node_s_store_is_its_agent_where_it_has_one():
    from workspace.store.agent_store import AgentStore
    from workspace.store.nodes import NodeStores

    central = object()
    listed = [Node("n1", store="/s1", agent="http://10.0.0.1:8765/"), Node("n2", store="")]
    stores = NodeStores(central, lambda: listed, agent_token="t" * 40)
    remote = stores.of("n1")
    assert isinstance(remote, AgentStore) and remote.url == "http://10.0.0.1:8765" and remote.root == "/s1"
    assert remote.dataset_path("v1").as_posix() == "/s1/datasets/v1"  # the node's path, for its engine's binds
    assert stores.of("n1") is remote  # made once
    assert stores.of("n2") is central and stores.of(None) is central and stores.of("unknown") is central
    assert stores.known("n1") and not stores.known("n2")
    # an agent without the token to call it is a configuration error, said at once
    with pytest.raises(RuntimeError, match="agent token"):
        NodeStores(central, lambda: listed).of("n1")

    # an engine that does not answer: no nodes now, the stores seen before still known
    def down():
        raise OSError("no manager")

    stores._list = down
    assert stores.nodes() == [] and stores.known("n1")


def test_a_user_namespaced_node_takes_the_root_allowed_types_and_only_them():
    """#32: `workspace.userns=remap` (workspace/setup/userns.py) marks a node whose engine remaps users: a type
    with `root` runs there only, and the other types never there."""
    nodes = parse_swarm(
        [
            node("node1", **{"workspace.store": "/s1"}),
            node("node4", **{"workspace.store": "/s4", "workspace.userns": "remap", "workspace.id-offset": "231072"}),
            node("node5", **{"workspace.store": "/s5", "workspace.userns": "yes", "workspace.id-offset": "-1"}),
        ]
    )
    assert [n.userns for n in nodes] == [False, True, False]  # node5: not the value, not such a node
    assert [n.id_offset for n in nodes] == [0, 231072, 0]  # a store the hub mounts shifts node4's homes by it
    assert list(inventories(nodes)) == ["node1", "node5"]
    assert list(inventories(nodes, root=True)) == ["node4"]
    assert inventories(nodes[:1], root=True) == {}  # a single engine here: a root type has nowhere to run
