"""Jobs over several nodes (#31) on a real three-node swarm: each rank a service on the node admission placed
it on, on its owner's overlay, its home received on that node; mpirun between the nodes over SSH; a GPU job
admitted whole or not at all; a rank's node dying ends the job as `lost`, rank 0's home its output.
(The same on one engine: tests/integration/test_jobs.py.)"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import pytest

from tests.cluster.conftest import bring_back, running_swarm_hub
from tests.cluster.test_swarm_workspaces import latest, overlay_address
from tests.integration.hub import Hub
from tests.integration.test_framework_images import SCIENTIFIC
from tests.integration.test_jobs import MPI_ALLREDUCE
from tests.integration.test_runs import output_file, record, run_task_to_end, wait_ended
from workspace.setup.cluster import Cluster

TYPES = [
    {"name": "cpu", "description": "CPU only"},
    {"name": "apart", "description": "a node per rank", "spread": True},
    {"name": "gpu1", "description": "one GPU a node", "gpus": 1, "spread": True},
    {"name": "gpu2", "description": "two GPUs", "gpus": 2},
]


@pytest.fixture(scope="module")
def jobs_hub(cluster: Cluster, tmp_path_factory):
    # the scientific image (Open MPI, mpi4py) on every node, as `docker save | docker load` brings any image
    # (begun when the cluster came up: conftest.cluster)
    cluster.more_images[SCIENTIFIC].result()
    cluster.copy_image(SCIENTIFIC)  # a node brought back since lacks it
    with running_swarm_hub(
        cluster,
        tmp_path_factory.mktemp("jobs-hub"),
        WORKSPACE_RESOURCE_TYPES=json.dumps(TYPES),
        WORKSPACE_GPU_DEVICE_MODE="env",
    ) as hub:
        yield hub


def placed(hub: Hub, token: str, name: str, number: int) -> dict[int, tuple[str | None, list[str]]]:
    """{rank: (node, GPUs)} of a job as the API says: rank 0's its execution's, the others' its `ranks`."""
    ex = hub.service_call("GET", f"/workspaces/{name}/executions/{number}", token).json()
    others = {r["rank"]: (r["node"], r["gpu_ids"]) for r in ex["ranks"]}
    return {0: (ex["node"], ex["gpu_ids"]), **others}


def saved_file(hub: Hub, token: str, name: str, number: int, path: str) -> str | None:
    """A file of an output, once it reached the store of record (read before: a 409 that says so)."""
    deadline = time.monotonic() + 90
    while True:
        r = hub.service_call("GET", f"/workspaces/{name}/executions/{number}/files/{path}?inline=1", token)
        if r.status_code != 409 or time.monotonic() > deadline:
            break
        time.sleep(1)
    return output_file(hub, token, name, number, path)


def rank_services(cluster: Cluster, hub: Hub, server: str) -> list:
    label = [f"workspace.deployment={hub.deployment}", f"workspace.server={server}"]
    return cluster.manager.client().services.list(filters={"label": label})


def start_job(hub: Hub, token: str, name: str, command: str, job: dict, **body) -> dict:
    r = hub.service_call("POST", f"/workspaces/{name}/runs", token, json={"command": command, "job": job, **body})
    assert r.status_code == 202, r.text
    return r.json()


def test_mpirun_reduces_across_two_nodes_and_a_rank_reaches_no_other_owner(cluster, jobs_hub):
    hub, user, name = jobs_hub, "swmpi", "mpi"
    token, other = hub.user_token(user), hub.user_token("swother")
    hub.start_workspace("swother", "open", other, resource_type="cpu")
    address = overlay_address(cluster, hub, "swother", "open")
    run_task_to_end(hub, token, user, name, "echo same-start > start.txt")
    probe = (
        'python3 -c "import socket\n'
        "try:\n"
        f"    socket.create_connection(('{address}', 8888), 3).close(); print('REACHED other')\n"
        "except OSError:\n"
        "    print('BLOCKED other')\""
    )
    command = (
        f"{probe}; mpirun -np 2 --hostfile $WORKSPACE_HOSTFILE {MPI_ALLREDUCE} | tee reduced.txt; "
        "ssh -o BatchMode=yes $(sed -n 2p $WORKSPACE_HOSTFILE | cut -d' ' -f1) cat start.txt"
    )
    started = start_job(
        hub, token, name, command, {"nodes": 2, "processes": 2}, image=SCIENTIFIC, resource_type="apart"
    )
    number, server = started["execution"]["number"], started["server"]
    ended = wait_ended(hub, user, name, number, timeout=300)
    log = hub.service_call("GET", f"/workspaces/{name}/executions/{number}/logs", token).text
    assert ended["exit_code"] == 0, log
    where = placed(hub, token, name, number)
    assert len({node for node, _ in where.values()}) == 2, where  # a node per rank (the type's `spread`)
    reduced = saved_file(hub, token, name, number, "reduced.txt")
    lines = sorted(line.split()[:5] for line in reduced.splitlines() if line.startswith("allreduce"))
    # one process on each node's rank, their sum reduced over the owner's overlay
    assert lines == [["allreduce", "0", "2", "3", server], ["allreduce", "1", "2", "3", f"{server}-r1"]], reduced
    assert log.rstrip().splitlines()[-2].endswith("same-start"), log  # rank 1's home, received on its node
    said = [line.rsplit(" ", 2)[-2:] for line in log.splitlines()]
    assert ["BLOCKED", "other"] in said and ["REACHED", "other"] not in said, log  # rank 0 reaches no other owner
    # rank 1's log is kept (it waited for mpirun's SSH)
    assert hub.service_call("GET", f"/workspaces/{name}/executions/{number}/logs?rank=1", token).status_code == 200
    deadline = time.monotonic() + 60
    while rank_services(cluster, hub, server):  # every rank's service is gone
        assert time.monotonic() < deadline, rank_services(cluster, hub, server)
        time.sleep(1)
    hub.stop_workspace("swother", "open")


def test_a_gpu_job_waits_whole_and_its_rank_node_dying_ends_it_lost(cluster, jobs_hub):
    hub, user, name = jobs_hub, "swgang", "train"
    token, holder, solo = hub.user_token(user), hub.user_token("swholder"), hub.user_token("swsolo")
    run_task_to_end(hub, token, user, name, "true")
    # node2's two GPUs held: a job of a GPU on each of two nodes has only node3 left, and waits
    hub.start_workspace("swholder", "w", holder, resource_type="gpu2")
    assert latest(hub, "swholder", "w")["node"] == "node2"
    started = start_job(
        hub, token, name, "echo from-rank-$NODE_RANK > mark.txt; sleep 600", {"nodes": 2}, resource_type="gpu1"
    )
    number = started["execution"]["number"]
    deadline = time.monotonic() + 30
    while record(hub, user, name, number)["state"] != "queued":
        assert time.monotonic() < deadline, record(hub, user, name, number)
        time.sleep(0.3)
    time.sleep(3)
    waiting = placed(hub, token, name, number)
    assert all(not gpus for _, gpus in waiting.values()), waiting  # a waiting job holds no GPU anywhere
    # so node3's GPUs stay free for others: a start of two goes there at once
    hub.start_workspace("swsolo", "w", solo, resource_type="gpu2")
    assert latest(hub, "swsolo", "w")["node"] == "node3"
    assert record(hub, user, name, number)["state"] == "queued"
    hub.stop_workspace("swholder", "w")  # node2 free: the job is admitted, a GPU on each node
    deadline = time.monotonic() + 120
    while record(hub, user, name, number)["state"] != "running":
        assert time.monotonic() < deadline, record(hub, user, name, number)
        time.sleep(0.5)
    where = placed(hub, token, name, number)
    assert sorted(node for node, _ in where.values()) == ["node2", "node3"], where
    assert all(len(gpus) == 1 for _, gpus in where.values()), where
    dying = next(n for n in cluster.nodes if n.name == where[1][0])
    try:
        # rank 1's machine dies (its engine, its agent, the rank's processes at once)
        deadline = time.monotonic() + 60
        while "from-rank-0" not in (rank0_mark(cluster, hub, user, started["server"]) or ""):
            assert time.monotonic() < deadline, "rank 0 never wrote its mark"
            time.sleep(1)
        for pid in subprocess.run(["ip", "netns", "pids", dying.name], capture_output=True, text=True).stdout.split():
            os.kill(int(pid), signal.SIGKILL)
        ended = wait_ended(hub, user, name, number, timeout=180)
        assert ended["stop_reason"] == "lost" and "Rank 1 of the job was lost" in (ended["stop_detail"] or ""), ended
        # rank 0's home is the job's output, saved on its own (living) node
        assert ended["has_output"] and saved_file(hub, token, name, number, "mark.txt") == "from-rank-0\n", ended
    finally:
        bring_back(cluster)
    hub.stop_workspace("swsolo", "w")


def rank0_mark(cluster: Cluster, hub: Hub, user: str, server: str) -> str | None:
    """What rank 0 of a running job wrote to mark.txt (None before it did)."""
    label = [f"workspace.deployment={hub.deployment}", f"workspace.user={user}", f"workspace.server={server}"]
    for node in cluster.nodes:
        for c in node.client().containers.list(filters={"label": label, "status": "running"}):
            if "workspace.rank" not in c.labels:  # rank 0's own, not another rank's
                code, out = c.exec_run(["cat", "/openbayes/home/mark.txt"], user="1000")
                return out.decode(errors="replace") if code == 0 else None
    return None
