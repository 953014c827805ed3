"""Workspaces on a real three-node swarm (SwarmWorkspaceSpawner): a real hub, real services on namespaced engines.

node1 has no GPU, node2 GPUs 0,1, node3 GPUs 0-3 (conftest.GPUS; labels, not devices: the containers get
NVIDIA_VISIBLE_DEVICES). Each node has its own btrfs home store; the hub's store (the store of record) is a
fourth. The tests pause nodes (an admin's `docker node update --availability pause`) to steer placement.
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import time

import pytest
import requests

from tests.cluster.conftest import NET_GATEWAY, host_on_bridge, running_swarm_hub
from tests.integration.hub import ADMIN_PASSWORD, Hub
from tests.security.test_egress import PROBE
from workspace import ssh_identities
from workspace.gateway_keys import GatewayKeys
from workspace.setup.cluster import AGENT_PORT, Cluster
from workspace.spawner import networks

TYPES = [
    {"name": "cpu", "description": "CPU only"},
    {"name": "gpu1", "description": "one GPU", "gpus": 1},
    {"name": "gpu2", "description": "two GPUs", "gpus": 2},
]
MB = 1_000_000


@pytest.fixture(scope="module")
def swarm_hub(cluster: Cluster, tmp_path_factory):
    with running_swarm_hub(
        cluster,
        tmp_path_factory.mktemp("swarm-hub"),
        WORKSPACE_RESOURCE_TYPES=json.dumps(TYPES),
        WORKSPACE_GPU_DEVICE_MODE="env",
    ) as hub:
        yield hub


def set_availability(cluster: Cluster, availability: dict[str, str]) -> None:
    """Pause or activate nodes ({"node1": "pause"}): paused nodes keep what runs, take nothing new."""
    manager = cluster.manager.client()
    for node in manager.nodes.list():
        name = node.attrs["Description"]["Hostname"]
        if name in availability:
            node.update(dict(node.attrs["Spec"], Availability=availability[name]))
    time.sleep(1)  # the hub's view of the nodes is at most node_refresh old


@pytest.fixture
def only_on(cluster: Cluster):
    """only_on("node2"): new starts go to node2 alone (the others paused) until the test ends."""

    def steer(*names: str) -> None:
        set_availability(cluster, {n.name: "active" if n.name in names else "pause" for n in cluster.nodes})

    yield steer
    set_availability(cluster, {n.name: "active" for n in cluster.nodes})


def container_of(cluster: Cluster, hub: Hub, user: str, server: str):
    """(node, container) of a running workspace, found on the nodes' own engines."""
    labels = [f"workspace.deployment={hub.deployment}", f"workspace.user={user}", f"workspace.server={server}"]
    for node in cluster.nodes:
        if node.pid() is None:
            continue
        found = node.client().containers.list(filters={"label": labels, "status": "running"})
        if found:
            return node, found[0]
    raise AssertionError(f"no running container of {user}/{server} on any node")


def sh(cluster: Cluster, hub: Hub, user: str, server: str, script: str) -> str:
    _, container = container_of(cluster, hub, user, server)
    code, out = container.exec_run(["bash", "-lc", script], user="1000")
    text = out.decode(errors="replace")
    assert code == 0, f"exit {code}: {text}"
    return text


def latest(hub: Hub, user: str, server: str) -> dict:
    return max(hub.executions(user, server), key=lambda e: e["number"])


def messages(events: list[dict]) -> str:
    return "\n".join(e.get("message", "") for e in events)


def test_gpu_starts_land_where_their_devices_are_free_and_are_never_split(cluster, swarm_hub):
    hub = swarm_hub
    tokens = {u: hub.user_token(u) for u in ("gpa", "gpb", "gpc", "gpd")}
    # best fit: node2 (2 free) before node3 (4 free), so that node3 stays whole for larger starts
    hub.start_workspace("gpa", "w", tokens["gpa"], resource_type="gpu1")
    one = latest(hub, "gpa", "w")
    assert (one["node"], one["gpu_ids"]) == ("node2", ["0"])
    node, _ = container_of(cluster, hub, "gpa", "w")
    assert node.name == "node2"
    assert sh(cluster, hub, "gpa", "w", "echo $NVIDIA_VISIBLE_DEVICES").strip() == "0"
    # two GPUs: node2 has one left, so node3; then node3's other two
    hub.start_workspace("gpb", "w", tokens["gpb"], resource_type="gpu2")
    hub.start_workspace("gpc", "w", tokens["gpc"], resource_type="gpu2")
    placed = [(latest(hub, u, "w")["node"], latest(hub, u, "w")["gpu_ids"]) for u in ("gpb", "gpc")]
    assert placed == [("node3", ["0", "1"]), ("node3", ["2", "3"])]
    # three GPUs are free in the cluster (node2: 1) but no node has two: the start waits, not split
    r = hub.spawn("gpd", "w", tokens["gpd"], {"resource_type": "gpu2"})
    assert r.status_code in (201, 202), r.text
    deadline = time.monotonic() + 30
    while latest(hub, "gpd", "w")["state"] != "queued" and time.monotonic() < deadline:
        time.sleep(0.3)
    time.sleep(3)
    waiting = latest(hub, "gpd", "w")
    assert waiting["state"] == "queued" and not waiting["gpu_ids"], waiting
    # what is free is counted over the cluster and per node: the types' API and the admin page
    types = {t["name"]: t for t in hub.service_api("/resource-types", tokens["gpd"]).json()["types"]}
    assert (types["gpu2"]["gpus_free"], types["gpu2"]["gpus_free_on_one_node"]) == (1, 1)
    admin = hub.user_token(hub.settings.admin_user, password=ADMIN_PASSWORD)
    page = requests.get(f"{hub.url}/services/workspace/admin", headers={"Authorization": f"token {admin}"}, timeout=30)
    assert page.status_code == 200, page.text
    rows = dict(re.findall(r'<tr data-node="(node\d)">(.*?)</tr>', page.text, re.S))
    assert 'class="free-gpus">1 (1)<' in rows["node2"] and 'class="free-gpus">0<' in rows["node3"], rows
    assert "none (CPU only)" in rows["node1"]
    hub.stop_workspace("gpa", "w")  # node2 has two free GPUs again
    events = hub.progress("gpd", "w", tokens["gpd"])
    assert events[-1].get("ready"), events
    assert "position 1 of 1" in messages(events)
    admitted = latest(hub, "gpd", "w")
    assert (admitted["node"], sorted(admitted["gpu_ids"])) == ("node2", ["0", "1"])
    for user in ("gpb", "gpc", "gpd"):
        hub.stop_workspace(user, "w")


def test_continue_on_another_node_receives_only_the_delta(cluster, swarm_hub, only_on):
    hub, user = swarm_hub, "delta"
    token = hub.user_token(user)
    only_on("node1")
    hub.start_workspace(user, "w", token, resource_type="cpu")
    sh(cluster, hub, user, "w", "head -c 20000000 /dev/urandom > ~/big.bin")
    hub.stop_workspace(user, "w")
    first = latest(hub, user, "w")
    assert first["output_node"] == "node1"
    # node2 holds nothing of this workspace: the whole home comes from the store of record
    only_on("node2")
    events = hub.start_workspace(user, "w", token, resource_type="cpu")
    assert "Sending the home of #1 to node2" in messages(events), messages(events)
    sh(cluster, hub, user, "w", "head -c 1000000 /dev/urandom > ~/small.bin")
    before = sh(cluster, hub, user, "w", "cd ~ && sha256sum big.bin small.bin")
    hub.stop_workspace(user, "w")
    second = latest(hub, user, "w")
    assert second["output_node"] == "node2"
    deadline = time.monotonic() + 30  # replication runs after the save, off the stop path
    while not latest(hub, user, "w")["replicated"] and time.monotonic() < deadline:
        time.sleep(0.3)
    assert latest(hub, user, "w")["replicated"]
    # back to node1, which holds #1: only what #2 changed travels
    only_on("node1")
    events = hub.start_workspace(user, "w", token, resource_type="cpu")
    sent = [e["message"] for e in events if e.get("message", "").startswith("The home of #2 is on node1")]
    assert sent and "changes since" in sent[0], messages(events)
    mb = float(sent[0].split(": ")[1].split(" MB")[0].replace(",", ""))
    assert 0.9 <= mb < 3, sent  # about the 1 MB file, not the 21 MB home
    assert sh(cluster, hub, user, "w", "cd ~ && sha256sum big.bin small.bin") == before
    third = latest(hub, user, "w")
    assert third["node"] == "node1"
    hub.stop_workspace(user, "w")


def reaches(cluster: Cluster, hub: Hub, user: str, server: str, address: str) -> bool:
    """Whether the workspace user/server opens a connection to address:8888 (a workspace's Jupyter port)."""
    _, container = container_of(cluster, hub, user, server)
    code, _ = container.exec_run(
        ["python3", "-c", f"import socket; socket.create_connection(({address!r}, 8888), timeout=3)"], user="1000"
    )
    return code == 0


def overlay_address(cluster: Cluster, hub: Hub, user: str, server: str) -> str:
    _, container = container_of(cluster, hub, user, server)
    (net,) = [
        n
        for n in container.attrs["NetworkSettings"]["Networks"].items()
        if n[0] == networks.name_for(hub.deployment, user)
    ]
    return net[1]["IPAddress"]


def test_an_owners_workspaces_reach_each_other_across_nodes_and_nobody_elses(cluster, swarm_hub, only_on):
    hub = swarm_hub
    ada, bob = hub.user_token("isoada"), hub.user_token("isobob")
    only_on("node1")
    hub.start_workspace("isoada", "one", ada, resource_type="cpu")
    only_on("node2")
    hub.start_workspace("isoada", "two", ada, resource_type="cpu")
    hub.start_workspace("isobob", "w", bob, resource_type="cpu")
    two = overlay_address(cluster, hub, "isoada", "two")
    assert reaches(cluster, hub, "isoada", "one", two)  # node1 -> node2, on ada's own overlay
    # bob's workspace runs on the same node as ada's second one: it reaches neither by address
    assert not reaches(cluster, hub, "isobob", "w", two)
    assert not reaches(cluster, hub, "isobob", "w", overlay_address(cluster, hub, "isoada", "one"))
    # the workspace's task runs without capabilities, as on one engine
    assert sh(cluster, hub, "isobob", "w", "grep CapBnd /proc/self/status").split()[1] == "0000000000000000"
    for user, server in (("isoada", "one"), ("isoada", "two"), ("isobob", "w")):
        hub.stop_workspace(user, server)


def test_a_dataset_version_reaches_a_node_on_first_use_and_stays(cluster, swarm_hub, only_on):
    hub, user = swarm_hub, "dsuser"
    token = hub.user_token(user)
    only_on("node2")
    hub.start_workspace(user, "maker", token, resource_type="cpu")
    sh(cluster, hub, user, "maker", "mkdir -p ~/data && head -c 3000000 /dev/urandom > ~/data/train.bin")
    digest = sh(cluster, hub, user, "maker", "sha256sum ~/data/train.bin").split()[0]
    hub.stop_workspace(user, "maker")
    deadline = time.monotonic() + 30  # the output reaches the store of record after its save
    while not latest(hub, user, "maker")["replicated"] and time.monotonic() < deadline:
        time.sleep(0.3)
    r = hub.service_call("POST", "/datasets", token, json={"name": "train"})
    assert r.status_code == 201, r.text
    r = hub.service_call(
        "POST",
        f"/datasets/{user}/train/versions",
        token,
        json={"from_execution": {"workspace": "maker", "number": 1, "path": "data"}},
    )
    assert r.status_code == 201, r.text
    only_on("node3")  # node3 has never seen the dataset
    events = hub.start_workspace(user, "reader", token, resource_type="cpu", datasets=[f"{user}/train"])
    assert "Sending dataset" in messages(events) and "to node3" in messages(events), messages(events)
    assert sh(cluster, hub, user, "reader", "sha256sum /input0/train.bin").split()[0] == digest
    assert "Read-only" in sh(cluster, hub, user, "reader", "touch /input0/x 2>&1 || true")
    hub.stop_workspace(user, "reader")
    events = hub.start_workspace(user, "reader", token, resource_type="cpu", datasets=[f"{user}/train"])
    assert "Sending dataset" not in messages(events)  # kept on node3
    hub.stop_workspace(user, "reader")


def test_a_hub_restart_keeps_a_workspace_running_on_its_node(cluster, swarm_hub, only_on):
    hub, user = swarm_hub, "restart"
    token = hub.user_token(user)
    only_on("node3")
    hub.start_workspace(user, "w", token, resource_type="cpu")
    sh(cluster, hub, user, "w", "echo kept > ~/note.txt")
    hub.proc.send_signal(signal.SIGTERM)  # cleanup_servers is off: the workspaces keep running
    hub.proc.wait(30)
    hub.start()
    node, _ = container_of(cluster, hub, user, "w")
    assert node.name == "node3"
    r = hub.api("GET", f"/users/{user}")
    assert r.json()["servers"]["w"]["ready"], r.json()
    # the proxy still routes to node3's address and the task's port
    answer = requests.get(
        f"{hub.url}/user/{user}/w/api/status", headers={"Authorization": f"token {token}"}, timeout=30
    )
    assert answer.status_code == 200, answer.text
    hub.stop_workspace(user, "w")
    ex = latest(hub, user, "w")
    assert ex["state"] == "stopped" and ex["output_node"] == "node3", ex


def test_a_killed_worker_ends_its_executions_lost_and_their_outputs_restore_elsewhere(cluster, swarm_hub, only_on):
    hub, user = swarm_hub, "lost"
    token = hub.user_token(user)
    only_on("node3")
    hub.start_workspace(user, "w", token, resource_type="cpu")
    sh(cluster, hub, user, "w", "echo saved > ~/first.txt")
    hub.stop_workspace(user, "w")
    hub.start_workspace(user, "w", token, resource_type="cpu")
    sh(cluster, hub, user, "w", "echo running > ~/second.txt")
    node3 = cluster.nodes[2]
    try:
        # the machine dies: its engine, its store agent and the workspace's processes at once
        pids = subprocess.run(["ip", "netns", "pids", node3.name], capture_output=True, text=True).stdout.split()
        for pid in pids:
            os.kill(int(pid), signal.SIGKILL)
        deadline = time.monotonic() + 120
        lost = latest(hub, user, "w")
        while lost["state"] not in ("save_failed", "stopped") and time.monotonic() < deadline:
            time.sleep(1)
            # the record as it was seen failing: a retry of its save may already be under way again
            lost = latest(hub, user, "w")
        # its home is on the dead machine: the save waits (kept, retried), the execution is over
        assert lost["state"] == "save_failed" and lost["stop_reason"] == "lost", lost
        assert "node3" in (lost["stop_detail"] or ""), lost
        hub.wait_stopped(user, "w")
        # the last saved output continues elsewhere, from the store of record
        only_on("node1", "node2")
        events = hub.start_workspace(user, "w", token, resource_type="cpu")
        text = messages(events)
        # the latest saved output is #1's (#2's save waits on the dead machine)
        assert "continues from #1" in text and "Sending the home of #1" in text, text
        assert latest(hub, user, "w")["node"] in ("node1", "node2")
        assert sh(cluster, hub, user, "w", "cat ~/first.txt; ls ~").split() == ["saved", "first.txt"]
        hub.stop_workspace(user, "w")
    finally:
        cluster.up(cluster.recorded()["image"], cluster.recorded()["gpus"], store_size="2G")  # node3 again
    # back, node3's agent gives the service the kept home: #2's save finishes, nothing written was lost
    deadline = time.monotonic() + 60
    while hub.executions(user, "w")[1]["state"] != "stopped" and time.monotonic() < deadline:
        time.sleep(1)
    second = sorted(hub.executions(user, "w"), key=lambda e: e["number"])[1]
    assert second["state"] == "stopped" and second["has_output"] and second["output_node"] == "node3", second


def test_ssh_through_the_gateway_and_between_an_owners_workspaces_on_two_nodes(cluster, swarm_hub, only_on, tmp_path):
    from tests.integration.test_ssh import Client

    hub = swarm_hub
    ada = Client(hub, tmp_path / "ada", "sshswarm")
    ada.register()
    only_on("node1")
    hub.start_workspace("sshswarm", "one", ada.token, resource_type="cpu")
    only_on("node2")
    hub.start_workspace("sshswarm", "two", ada.token, resource_type="cpu")
    # through the gateway, to each node's published sshd port
    assert ada.ssh("one", "echo $WORKSPACE_NAME").stdout.strip() == "one"
    # node2 -> node1 by name on ada's overlay, no password, the host key pinned
    r = ada.ssh("two", "ssh -o BatchMode=yes one 'echo from $WORKSPACE_NAME'")
    assert r.stdout.strip() == "from one", r.stdout + r.stderr
    # #28: sshd's files are on the user's own sized tmpfs volume of a read-only root, as on one host
    out = sh(
        cluster,
        hub,
        "sshswarm",
        "two",
        "stat -c '%u %a' /run/workspace; df -B1 --output=size /tmp | tail -1; touch /x 2>&1 || true",
    )
    owner, size, refused = out.strip().splitlines()
    assert owner == "1000 700" and 0 < int(size) <= 1 << 30 and "Read-only file system" in refused, out
    # #28: the gateway's key is accepted from the hub's machine as the node sees it (the host on the
    # cluster's bridge: nothing translates the published port's source) and from nowhere else
    written = sh(cluster, hub, "sshswarm", "one", "cat /run/workspace/ssh/authorized_keys")
    (line,) = [x for x in written.splitlines() if x.endswith("workspace-gateway")]
    assert line.startswith(f'from="{NET_GATEWAY}",'), line
    node1, container = container_of(cluster, hub, "sshswarm", "one")
    port = container.attrs["NetworkSettings"]["Ports"][f"{ssh_identities.WORKSPACE_PORT}/tcp"][0]["HostPort"]
    key = tmp_path / "gateway_key"
    key.write_text(GatewayKeys(hub.data_dir / "gateway").client_key.read_text())
    key.chmod(0o600)
    login = [
        *("ssh", "-F", "/dev/null", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no", "-i", str(key)),
        *("-o", "UserKnownHostsFile=/dev/null", "-o", "ConnectTimeout=10", "-o", "IdentitiesOnly=yes"),
        *("-p", str(port), f"{ssh_identities.WORKSPACE_USER}@{node1.address}", "echo in"),
    ]
    r = subprocess.run(login, capture_output=True, text=True, timeout=60)
    assert r.stdout.strip() == "in", r.stderr  # from the host: where the gateway connects from
    # the same key from another node (node2's address): refused
    r = subprocess.run(["ip", "netns", "exec", "node2", *login], capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "Permission denied" in r.stderr, (r.stdout, r.stderr)
    for server in ("one", "two"):
        hub.stop_workspace("sshswarm", server)


def test_a_task_runs_on_a_worker_node_and_its_log_and_exit_code_come_back(cluster, swarm_hub, only_on):
    """Tasks (#17) on the swarm: the same spawner, a service on node2; its log is read through the manager
    (live, and kept at its end) and its output is saved on node2."""
    hub, user = swarm_hub, "tasker"
    token = hub.user_token(user)
    only_on("node2")
    r = hub.service_call(
        "POST",
        "/workspaces/job/tasks",
        token,
        json={"command": "hostname > where; for i in 1 2 3; do echo step $i; sleep 1; done; exit 6"},
    )
    assert r.status_code == 202, r.text
    number = r.json()["execution"]["number"]
    follow = hub.service_call("GET", f"/workspaces/job/executions/{number}/logs?follow=1", token)
    assert follow.status_code == 200 and "step 3" in follow.text, follow.text
    deadline = time.monotonic() + 120
    while latest(hub, user, "job")["state"] not in ("stopped", "failed"):
        assert time.monotonic() < deadline, latest(hub, user, "job")
        time.sleep(0.5)
    ex = latest(hub, user, "job")
    assert (ex["node"], ex["output_node"], ex["exit_code"], ex["stop_reason"]) == ("node2", "node2", 6, "completed"), ex
    kept = hub.service_call("GET", f"/workspaces/job/executions/{number}/logs", token).text
    assert "step 1" in kept and "exit=6" in kept.splitlines()[-1], kept


@pytest.fixture
def site(cluster: Cluster, tmp_path):
    """Listeners at the cloud's metadata address, a campus 192.168.x and a public stand-in (11.x: a routed
    range, so the rules treat it as the internet; routed here only, see tests/security/test_egress.py), on
    a host of the test's own on the cluster's bridge (conftest.host_on_bridge)."""
    r = random.randrange(1, 250)
    addresses = {"metadata": "169.254.169.254", "campus": f"192.168.{r}.10", "public": f"11.249.{r}.10"}
    canary = os.urandom(8).hex()
    (tmp_path / "canary").write_text(canary)
    with host_on_bridge(cluster, list(addresses.values()), tmp_path):
        yield addresses, canary


def test_a_workspace_on_a_worker_reaches_the_internet_and_the_hub_not_the_site(cluster, swarm_hub, only_on, site):
    """#28: on a swarm the rules are the nodes' (egress.node_policy on docker_gwbridge): from a workspace on
    node2, the metadata address, a campus host and node2's own store agent are refused, a public address
    and the hub's API are not."""
    hub, user = swarm_hub, "egressw"
    addresses, canary = site
    token = hub.user_token(user)
    only_on("node2")
    hub.start_workspace(user, "w", token, resource_type="cpu")
    node, container = container_of(cluster, hub, user, "w")
    assert node.name == "node2"
    urls = {name: f"http://{address}:8765/canary" for name, address in addresses.items()}
    env = dict(e.split("=", 1) for e in container.attrs["Config"]["Env"])
    urls["hub api"] = env["JUPYTERHUB_API_URL"]
    # an HTTP answer of any status is a connection made (a socket probe waits for a banner the agent never sends)
    urls["node's store agent"] = f"http://{node.address}:{AGENT_PORT}/"
    code, out = container.exec_run(["python3", "-c", PROBE, json.dumps(urls), "{}"], user="1000")
    assert code == 0, out
    seen = json.loads(out.decode().strip().splitlines()[-1])
    print(json.dumps(seen, indent=1))
    for name in ("metadata", "campus", "node's store agent"):
        assert seen[name].startswith("closed"), f"{name} was reached: {seen}"
    assert seen["public"] == f"open {canary}", f"the test's internet is not reached (its routes): {seen}"
    assert seen["hub api"].startswith("open"), seen
    hub.stop_workspace(user, "w")
