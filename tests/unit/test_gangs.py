"""Jobs over several nodes (#31): a job's ranks admitted all together or not at all (never one node's GPUs
held while the job waits for another's), spread over distinct nodes when the type says so, their
placements counted as executions' are; what each rank is told. On real databases."""

import pytest

from workspace import jobs
from workspace.errors import UserError
from workspace.executions import Execution, get_or_create_workspace, new_execution
from workspace.limits import fit
from workspace.limits.queue import admit
from workspace.limits.resource_types import ResourceType

NODES = {"n1": ["0", "1"], "n2": ["0", "1"], "n3": ["0"]}
GPU1 = ResourceType(name="gpu1", gpus=1, spread=True, per_user=None)


@pytest.fixture
def db(database):
    return database


def job(db, owner: str, rtype: ResourceType, nodes: int) -> int:
    with db.session() as s:
        ex = new_execution(s, get_or_create_workspace(s, owner, "train"), None, None)
        ex.resource_type = rtype.name
        s.flush()
        jobs.add_ranks(s, ex.id, jobs.JobSpec(nodes))
        return ex.id


def single(db, owner: str, rtype: ResourceType) -> int:
    return job(db, owner, rtype, 1)


def try_admit(db, execution_id: int, rtype: ResourceType, inventories=NODES):
    with db.session() as s:
        ex = s.get(Execution, execution_id)
        a = admit(s, ex, rtype, inventories)
        if a.admitted:
            ex.to(s, "preparing")
        placed = [(ex.node, list(ex.gpu_ids or []))] + [(r.node, r.gpu_ids) for r in jobs.ranks_of(s, ex.id)]
        return a, placed


def test_a_job_is_admitted_whole_on_distinct_nodes_and_its_ranks_hold_their_gpus(db):
    a, placed = try_admit(db, job(db, "ana", GPU1, 3), GPU1)
    assert a.admitted and len({node for node, _ in placed}) == 3, placed
    with db.session() as s:  # every rank's GPU is held, and each rank counts on its node
        assert {n: len(ids) for n, ids in fit.used_gpus(s).items()} == {"n1": 1, "n2": 1, "n3": 1}
        assert fit.executions_per_node(s) == {"n1": 1, "n2": 1, "n3": 1}
        assert fit.type_per_node(s, GPU1) == {"n1": 1, "n2": 1, "n3": 1}


def test_a_waiting_job_holds_nothing_and_says_what_it_needs(db):
    # one GPU of n3 is taken: a 3-node job of one GPU each cannot be placed on distinct nodes
    taken, _ = try_admit(db, single(db, "bo", GPU1), GPU1, {"n3": ["0"]})
    assert taken.admitted
    waiting, placed = try_admit(db, job(db, "ana", GPU1, 3), GPU1)
    assert not waiting.admitted and placed == [(None, [])] + [(None, None)] * 2, placed
    assert waiting.nodes == 3 and "waits for 3 nodes of “gpu1” at once (1 GPU(s) each)" in waiting.describe(GPU1)
    with db.session() as s:  # nothing of the waiting job is held: n1 and n2 keep their GPUs free
        assert {n: len(ids) for n, ids in fit.used_gpus(s).items()} == {"n3": 1}


def test_a_job_of_a_type_that_packs_may_share_a_node(db):
    packed = ResourceType(name="cpu", capacity=2)
    a, placed = try_admit(db, job(db, "ana", packed, 4), packed, {"n1": [], "n2": []})
    assert a.admitted and sorted(n for n, _ in placed) == ["n1", "n1", "n2", "n2"], placed
    # the type's capacity per node is full on both nodes now: the next start waits
    b, _ = try_admit(db, single(db, "bo", packed), packed, {"n1": [], "n2": []})
    assert not b.admitted


def test_the_best_fit_keeps_whole_nodes_free_for_a_job_that_needs_them(db):
    two = ResourceType(name="two", gpus=2, spread=True)
    one, _ = try_admit(db, single(db, "bo", GPU1), GPU1)
    assert one.admitted
    with db.session() as s:
        assert fit.used_gpus(s) == {"n3": {"0"}}  # the smallest node that fits, not half of n1
    a, placed = try_admit(db, job(db, "ana", two, 2), two)
    assert a.admitted and sorted(n for n, _ in placed) == ["n1", "n2"] and all(len(g) == 2 for _, g in placed)


def test_a_jobs_shape_is_checked_and_each_rank_is_told_what_the_frameworks_expect():
    spec = jobs.parse_job({"nodes": 2, "processes": 5}, max_nodes=4)
    assert spec == jobs.JobSpec(2, 5) and spec.slots == 3
    hosts = ["job-r0", "job-r1"]
    assert jobs.hostfile(hosts, spec) == "job-r0 slots=3\njob-r1 slots=3\n"
    env = jobs.rank_environment(1, hosts, spec)
    assert (env["MASTER_ADDR"], env["MASTER_PORT"], env["WORLD_SIZE"], env["NODE_RANK"], env["NNODES"]) == (
        "job-r0",
        "29500",
        "2",
        "1",
        "2",
    )
    assert env["NCCL_SOCKET_IFNAME"] == env["GLOO_SOCKET_IFNAME"] == "eth0"
    assert env["OMPI_MCA_oob_tcp_if_include"] == env["OMPI_MCA_btl_tcp_if_include"] == "eth0"
    assert jobs.parse_job(None, max_nodes=4) is None
    for value, max_nodes, says in [
        ({"nodes": 1}, 4, "2 nodes or more"),
        ({"nodes": 5}, 4, "at most 4 nodes"),
        ({"nodes": 2}, 1, "runs no job over several nodes"),
        ({"nodes": 2, "processes": 1}, 4, "from 2 to 512"),
        ({"nodes": True}, 4, "2 nodes or more"),
        ({"nodes": 2, "gpus": 1}, 4, "nothing else"),
        ([2], 4, "nothing else"),
    ]:
        with pytest.raises(UserError) as e:
            jobs.parse_job(value, max_nodes)
        assert e.value.status_code == 400 and says in e.value.message, (value, e.value.message)
