"""Jobs over several nodes (#31) on one engine: a run whose command runs in N containers (ranks), admitted
together, each told what torchrun and mpirun expect, with SSH between them; rank 0's home is the output;
one rank failing ends the job with that reason; a cancel ends every rank. A real hub, real containers.
(The same over a swarm's distinct nodes: tests/cluster/test_swarm_jobs.py.)

The torch.distributed test needs the PyTorch image, which a site builds by choice; where it is absent it
skips (CI too). To run it: `WORKSPACE_BUILD_IMAGES=base,scientific,pytorch make images`, then
`.venv/bin/python -m pytest tests/integration/test_jobs.py -k gloo`."""

from __future__ import annotations

import json
import os
import subprocess
import time

import pytest

from .hub import Hub
from .test_framework_images import PYTORCH, SCIENTIFIC
from .test_runs import output_file, record, run_task_to_end, wait_ended
from .test_tasks import WORKSPACE

TYPES = [{"name": "standard", "description": "no limit"}]
# each process's line in one write (mpirun forwards both processes' output into one stream: a line written
# in pieces can be interleaved with the other's)
MPI_ALLREDUCE = (
    'python -c "import sys; from mpi4py import MPI; c = MPI.COMM_WORLD; '
    "sys.stdout.write(' '.join(map(str, ('allreduce', c.rank, c.size, c.allreduce(c.rank + 1), "
    'MPI.Get_processor_name()))) + chr(10)); sys.stdout.flush()"'
)


@pytest.fixture(scope="module")
def jobs_hub(start_hub, docker_client) -> Hub:
    import docker

    try:
        docker_client.images.get(SCIENTIFIC)
    except docker.errors.ImageNotFound:
        pytest.fail(f"{SCIENTIFIC} is not built: run `make images` (make test builds it)")
    return start_hub(WORKSPACE_CULL_INTERVAL="1", WORKSPACE_RESOURCE_TYPES=json.dumps(TYPES))


def job(hub: Hub, token: str, name: str, command: str, job: dict, status: int = 202, **body) -> dict:
    r = hub.service_call(
        "POST", f"/workspaces/{name}/runs", token, json={"command": command, "job": job, "image": SCIENTIFIC, **body}
    )
    assert r.status_code == status, r.text
    return r.json()


def rank_containers(docker_client, server: str) -> list:
    """The containers of a job's run server: rank 0's and its other ranks'."""
    return docker_client.containers.list(all=True, filters={"label": f"workspace.server={server}"})


def test_mpirun_over_the_hostfile_reduces_across_two_ranks_and_rank_0s_home_is_the_output(jobs_hub: Hub, docker_client):
    hub, user, name = jobs_hub, "jana", "mpi"
    token = hub.user_token(user)
    run_task_to_end(hub, token, user, name, "echo same-start > start.txt")
    command = (
        "cat $WORKSPACE_HOSTFILE; env | grep -E '^(MASTER_ADDR|WORLD_SIZE|NODE_RANK|NNODES)=' | sort; "
        f"mpirun -np 2 --hostfile $WORKSPACE_HOSTFILE {MPI_ALLREDUCE} | tee reduced.txt; "
        "ssh -o BatchMode=yes $(sed -n 2p $WORKSPACE_HOSTFILE | cut -d' ' -f1) cat start.txt"
    )
    started = job(hub, token, name, command, {"nodes": 2, "processes": 2})
    number, server = started["execution"]["number"], started["server"]
    ended = wait_ended(hub, user, name, number, timeout=240)
    log = hub.service_call("GET", f"/workspaces/{name}/executions/{number}/logs", token).text
    assert ended["exit_code"] == 0, log
    assert f"{server} slots=1\n" in log and f"{server}-r1 slots=1\n" in log, log
    assert f"MASTER_ADDR={server}" in log and "WORLD_SIZE=2" in log and "NODE_RANK=0" in log, log
    reduced = output_file(hub, token, name, number, "reduced.txt")
    lines = sorted(line.split()[:5] for line in reduced.splitlines() if line.startswith("allreduce"))
    # both processes summed 1 + 2, one on each rank's container
    assert lines == [["allreduce", "0", "2", "3", server], ["allreduce", "1", "2", "3", f"{server}-r1"]], reduced
    assert log.rstrip().splitlines()[-2].endswith("same-start"), log  # rank 1's home began as rank 0's
    # every rank's container is gone, and its home with it
    deadline = time.monotonic() + 30
    while rank_containers(docker_client, server):
        assert time.monotonic() < deadline
        time.sleep(0.5)


def test_one_rank_failing_ends_the_job_with_that_reason(jobs_hub: Hub):
    hub, user, name = jobs_hub, "jody", "fail"
    token = hub.user_token(user)
    run_task_to_end(hub, token, user, name, "true")
    started = job(
        hub,
        token,
        name,
        'echo "I am rank $NODE_RANK"; if [ "$NODE_RANK" = 1 ]; then exit 7; fi; sleep 300',
        {"nodes": 2},
    )
    number = started["execution"]["number"]
    ended = wait_ended(hub, user, name, number, timeout=120)
    assert ended["stop_reason"] == "error" and "Rank 1 of the job failed (exit code 7)" in ended["stop_detail"], ended
    assert ended["has_output"], ended  # rank 0's home is saved all the same
    # each rank's log is kept: rank 1's says what it wrote and how it ended
    logs = f"/workspaces/{name}/executions/{number}/logs"
    rank1 = hub.service_call("GET", f"{logs}?rank=1", token)
    assert rank1.status_code == 200 and "I am rank 1" in rank1.text and "exit=7" in rank1.text, rank1.text
    assert "I am rank 0" in hub.service_call("GET", logs, token).text
    assert hub.service_call("GET", f"{logs}?rank=2", token).status_code == 404
    assert hub.service_call("GET", f"{logs}?rank=x", token).status_code == 400
    # the API and the workspace page say where each rank ran and how it ended, with a link to its log
    (rank1_view,) = hub.service_call("GET", f"/workspaces/{name}/executions/{number}", token).json()["ranks"]
    assert rank1_view["rank"] == 1 and rank1_view["exit_code"] == 7 and rank1_view["ended"], rank1_view
    page = hub.browser_login(user).get(f"{hub.url}/services/workspace/workspaces/{name}").text
    card = page[page.index(f'id="execution-{number}"') :]
    assert "A job over 2 nodes." in card and "home is its output" in card, card[:3000]
    assert "exit code 7" in card and f"executions/{number}/logs?rank=1" in card, card[:3000]


def test_cancel_stops_every_rank_and_bad_jobs_are_refused(jobs_hub: Hub, docker_client):
    hub, user, name = jobs_hub, "joel", "cancel"
    token = hub.user_token(user)
    run_task_to_end(hub, token, user, name, "true")
    for body, words in [
        ({"nodes": 1}, "2 nodes or more"),
        ({"nodes": 9}, "at most 4 nodes"),
        ({"nodes": 2, "processes": 1}, "from 2 to"),
        ({"nodes": 2, "gpus": 1}, "nothing else"),
    ]:
        r = hub.service_call("POST", f"/workspaces/{name}/runs", token, json={"command": "true", "job": body})
        assert r.status_code == 400 and words in r.json()["message"], (body, r.text)
    r = hub.service_call("POST", f"/workspaces/{name}/tasks", token, json={"command": "true", "job": {"nodes": 2}})
    assert r.status_code == 400, r.text  # a workspace's own task is no job
    started = job(hub, token, name, "sleep 600", {"nodes": 3})
    number = started["execution"]["number"]
    deadline = time.monotonic() + 120
    while record(hub, user, name, number)["state"] != "running":
        assert time.monotonic() < deadline
        time.sleep(0.5)
    server = started["server"]
    assert len(rank_containers(docker_client, server)) == 3
    r = hub.service_call("POST", f"/workspaces/{name}/executions/{number}/cancel", token)
    assert r.status_code == 202, r.text
    ended = wait_ended(hub, user, name, number)
    assert ended["stop_reason"] == "user", ended
    assert rank_containers(docker_client, server) == []


def test_the_cli_runs_a_job_and_prints_rank_0s_log(jobs_hub: Hub):
    hub, user, name = jobs_hub, "jules", "cli"
    token = hub.user_token(user)
    run_task_to_end(hub, token, user, name, "true")
    env = dict(os.environ, WORKSPACE_URL=hub.url, WORKSPACE_TOKEN=token)
    command = [
        WORKSPACE,
        "run",
        name,
        "--nodes",
        "2",
        "--image",
        SCIENTIFIC,
        "--",
        "sh",
        "-c",
        "echo rank-$NODE_RANK-of-$NNODES",
    ]
    p = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0 and "rank-0-of-2" in p.stdout, (p.stdout, p.stderr)
    p = subprocess.run([WORKSPACE, "run", name, "--nodes", "1", "--", "true"], capture_output=True, text=True, env=env)
    assert p.returncode == 1 and "2 nodes or more" in p.stderr, p.stderr


def test_attack_a_rank_reaches_its_own_job_and_never_another_owners_container(jobs_hub: Hub, docker_client):
    hub, victim, attacker = jobs_hub, "vera", "mal"
    vtoken, token = hub.user_token(victim), hub.user_token(attacker)
    hub.start_workspace(victim, "open", vtoken)
    (theirs,) = docker_client.containers.list(filters={"label": [f"workspace.user={victim}", "workspace.server=open"]})
    address = next(iter(theirs.attrs["NetworkSettings"]["Networks"].values()))["IPAddress"]
    run_task_to_end(hub, token, attacker, "probe", "true")
    # its own job's rank 0 (whose sshd may still be starting: a few tries), then the other owner's server
    probe = (
        'python3 -c "import socket, time\n'
        "for host, port, tries in (('$MASTER_ADDR', 2222, 30), ('{address}', 8888, 1)):\n"
        "    for _ in range(tries):\n"
        "        try:\n"
        "            socket.create_connection((host, port), 3).close(); print('REACHED', host); break\n"
        "        except OSError:\n"
        "            time.sleep(0.5)\n"
        "    else:\n"
        "        print('BLOCKED', host)\""
    ).replace("{address}", address)
    started = job(hub, token, "probe", f"{probe}; sleep 5", {"nodes": 2})
    number = started["execution"]["number"]
    wait_ended(hub, attacker, "probe", number, timeout=120)
    for rank in (0, 1):
        text = hub.service_call("GET", f"/workspaces/probe/executions/{number}/logs?rank={rank}", token).text
        assert f"REACHED {started['server']}" in text, text  # its own job's rank 0 answers: the probe works
        assert f"BLOCKED {address}" in text and f"REACHED {address}" not in text, text
    # nor is another's job theirs to read
    r = hub.service_call("GET", f"/workspaces/probe/executions/{number}/logs?rank=1&user={attacker}", vtoken)
    assert r.status_code == 403, r.text
    hub.stop_workspace(victim, "open", vtoken)


TORCHRUN_ALLREDUCE = """cat > allreduce.py <<'EOF'
import socket
import torch
import torch.distributed as dist

dist.init_process_group("gloo")  # env:// from what torchrun sets (MASTER_ADDR/PORT from the job)
t = torch.tensor([float(dist.get_rank() + 1)])
dist.all_reduce(t)
print("gloo", dist.get_rank(), dist.get_world_size(), t.item(), socket.gethostname(), flush=True)
dist.destroy_process_group()
EOF
torchrun --nnodes $NNODES --node_rank $NODE_RANK --nproc_per_node 1 \\
    --master_addr $MASTER_ADDR --master_port $MASTER_PORT allreduce.py"""


@pytest.mark.optional_image
def test_torchrun_over_two_ranks_reduces_with_gloo_on_the_cpu(start_hub, docker_client):
    import docker

    try:
        docker_client.images.get(PYTORCH)
    except docker.errors.ImageNotFound:
        pytest.skip(f"{PYTORCH} is not built here (WORKSPACE_BUILD_IMAGES=base,scientific,pytorch make images)")
    hub = start_hub(
        WORKSPACE_RESOURCE_TYPES=json.dumps(TYPES),
        WORKSPACE_IMAGES=f"workspace-base:latest,{PYTORCH}",
    )
    user, name = "gloria", "gloo"
    token = hub.user_token(user)
    run_task_to_end(hub, token, user, name, "true")
    r = hub.service_call(
        "POST",
        f"/workspaces/{name}/runs",
        token,
        json={"command": TORCHRUN_ALLREDUCE, "job": {"nodes": 2}, "image": PYTORCH},
    )
    assert r.status_code == 202, r.text
    number, server = r.json()["execution"]["number"], r.json()["server"]
    ended = wait_ended(hub, user, name, number, timeout=300)
    logs = f"/workspaces/{name}/executions/{number}/logs"
    texts = [hub.service_call("GET", f"{logs}?rank={rank}", token).text for rank in (0, 1)]
    assert ended["exit_code"] == 0, texts
    # each rank's one process summed 1 + 2 with the other's, over the owner's network
    assert f"gloo 0 2 3.0 {server}" in texts[0], texts[0]
    assert f"gloo 1 2 3.0 {server}-r1" in texts[1], texts[1]
