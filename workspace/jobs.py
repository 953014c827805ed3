"""Jobs over several nodes (#31): one run beside the workspace whose command runs in N containers at once,
one per node (a *rank*), as `torchrun` or `mpirun` expect.

A job is one execution of the workspace (a run: its own JupyterHub server); rank 0 is that execution's
own container, and its home is the job's output. Ranks 1..N-1 are rows here (`JobRank`): where each was
placed (its node and GPUs), its container and how it ended; their homes start from the same state as
rank 0's and are dropped at the end (what they wrote is kept as their logs only).

Admission is a gang's (limits/queue.py `place_gang`): every rank is placed in one transaction or none
is, so a waiting job never holds one node's GPUs while it waits for another's. A type says how many
nodes a job of it may span (`max_nodes`) and whether its ranks must be on distinct nodes (`spread`).

What each rank is told (`rank_environment`): MASTER_ADDR and MASTER_PORT (rank 0's), WORLD_SIZE and
NNODES (the ranks), NODE_RANK and RANK (its own), the network interface NCCL and Gloo are to use, and
the hostfile `mpirun` reads (`HOSTFILE`: one line per rank, `host slots=K`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from sqlalchemy import JSON, DateTime, ForeignKey, Integer, String, UniqueConstraint, select
from sqlalchemy.orm import Mapped, mapped_column

from workspace import executions
from workspace.db import Base, Database, iso, utcnow
from workspace.errors import UserError

HOSTFILE = "/tmp/workspace-hostfile"  # in every rank's container (its writable /tmp)
MASTER_PORT = 29500  # torch.distributed's usual port, on rank 0
MAX_PROCESSES_PER_NODE = 256
DEFAULT_MAX_NODES = 4  # where no resource types are configured
INTERFACE = "eth0"  # the owner's network inside a container (the engine's first interface)


class JobRank(Base):
    """A rank (1..N-1) of a job: where it runs and how it ended. Rank 0 is the execution itself."""

    __tablename__ = "job_ranks"
    __table_args__ = (UniqueConstraint("execution_id", "rank"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    execution_id: Mapped[int] = mapped_column(ForeignKey("executions.id"), index=True)
    rank: Mapped[int] = mapped_column(Integer)
    node: Mapped[str | None] = mapped_column(String(255), nullable=True)  # placed by admission
    gpu_ids: Mapped[list | None] = mapped_column(JSON, nullable=True)
    container_id: Mapped[str | None] = mapped_column(String(128), nullable=True)
    exit_code: Mapped[int | None] = mapped_column(Integer, nullable=True)
    ended: Mapped[object | None] = mapped_column(DateTime, nullable=True)


@dataclass(frozen=True)
class JobSpec:
    """A job's shape: `nodes` ranks, and for `mpirun` `processes` in all (None: one per rank)."""

    nodes: int
    processes: int | None = None

    @property
    def slots(self) -> int:
        """Processes per rank in the hostfile."""
        return math.ceil((self.processes or self.nodes) / self.nodes)


def parse_job(value, max_nodes: int) -> JobSpec | None:
    """A start's `job` option ({"nodes": N, "processes": P}), or None; the user's 400 when it is not a job
    this type may run (`max_nodes`: how many nodes a job of the type may span)."""
    if value is None:
        return None
    if not isinstance(value, dict) or set(value) - {"nodes", "processes"}:
        raise UserError(400, 'A job is {{"nodes": N}} (and "processes" for mpirun), nothing else.')
    nodes, processes = value.get("nodes"), value.get("processes")
    if isinstance(nodes, bool) or not isinstance(nodes, int) or nodes < 2:
        raise UserError(400, "A job runs on 2 nodes or more: give “nodes” as a whole number from 2.")
    if nodes > max_nodes:
        if max_nodes <= 1:
            raise UserError(400, "This resource type runs no job over several nodes; choose one that does.")
        raise UserError(
            400, "A job of this resource type spans at most {max} nodes, not {nodes}.", max=max_nodes, nodes=nodes
        )
    if processes is not None and (
        isinstance(processes, bool)
        or not isinstance(processes, int)
        or not nodes <= processes <= nodes * MAX_PROCESSES_PER_NODE
    ):
        raise UserError(
            400,
            "“processes” is how many mpirun starts in all: a whole number from {least} to {most}.",
            least=nodes,
            most=nodes * MAX_PROCESSES_PER_NODE,
        )
    return JobSpec(nodes, processes)


def hostfile(hosts: list[str], spec: JobSpec) -> str:
    """The hostfile `mpirun --hostfile` reads: each rank's host with its slots."""
    return "".join(f"{h} slots={spec.slots}\n" for h in hosts)


def rank_environment(rank: int, hosts: list[str], spec: JobSpec) -> dict[str, str]:
    """What rank `rank` of a job on `hosts` (rank 0's first) is told, as torchrun, torch.distributed's
    env:// and mpirun expect: rank 0 is the master; one process per rank unless mpirun starts more."""
    return {
        "MASTER_ADDR": hosts[0],
        "MASTER_PORT": str(MASTER_PORT),
        "WORLD_SIZE": str(spec.nodes),
        "NNODES": str(spec.nodes),
        "NODE_RANK": str(rank),
        "RANK": str(rank),
        "NCCL_SOCKET_IFNAME": INTERFACE,
        "GLOO_SOCKET_IFNAME": INTERFACE,
        # Open MPI's daemons and messages on the same network (a swarm's task also has docker_gwbridge,
        # which reaches no other node)
        "OMPI_MCA_oob_tcp_if_include": INTERFACE,
        "OMPI_MCA_btl_tcp_if_include": INTERFACE,
        "WORKSPACE_JOB_HOSTS": " ".join(hosts),
        "WORKSPACE_HOSTFILE": HOSTFILE,
        "WORKSPACE_JOB_SLOTS": str(spec.slots),
        # mpirun's job: rank 0 runs it, once every other rank's sshd answers (the image's workspace-task)
        "WORKSPACE_JOB_MPI": "1" if spec.processes else "0",
    }


# -- the records ----------------------------------------------------------------------------------------


def add_ranks(session, execution_id: int, spec: JobSpec) -> None:
    """Record ranks 1..N-1 of a new job (not placed yet)."""
    for rank in range(1, spec.nodes):
        session.add(JobRank(execution_id=execution_id, rank=rank))


def rank_live_key(live_key: str, rank: int) -> str:
    """The store key of rank `rank`'s live home, beside rank 0's `live_key`."""
    return f"{live_key}-r{rank}"


def rank_of(session, execution_id: int, rank: int) -> JobRank | None:
    """Rank `rank` (from 1) of the job that is execution `execution_id`, or None."""
    return session.scalar(select(JobRank).where(JobRank.execution_id == execution_id, JobRank.rank == rank))


def note_container(session, execution_id: int, rank: int, container_id: str | None) -> None:
    """Record the container rank `rank` of a job runs in."""
    found = rank_of(session, execution_id, rank)
    if found is not None:
        found.container_id = container_id


def note_end(session, execution_id: int, rank: int, exit_code: int | None) -> None:
    """Record how rank `rank` of a job ended (its exit code; None: unknown, it was lost or stopped)."""
    found = rank_of(session, execution_id, rank)
    if found is not None and found.ended is None:
        found.exit_code, found.ended = exit_code, utcnow()


def ranks_of(session, execution_id: int) -> list[JobRank]:
    """A job's ranks beyond rank 0, in order ([]: not a job)."""
    return list(session.scalars(select(JobRank).where(JobRank.execution_id == execution_id).order_by(JobRank.rank)))


# -- what the user reads --------------------------------------------------------------------------------


def rank_view(rank: JobRank) -> dict:
    """A rank beyond 0 as the API and the workspace page show it."""
    return {
        "rank": rank.rank,
        "node": rank.node,
        "gpu_ids": list(rank.gpu_ids or []),
        "exit_code": rank.exit_code,
        "ended": iso(rank.ended),
    }


def with_ranks(session, ws, views: list[dict]) -> list[dict]:
    """`views` (executions' `as_dict()`, of workspace `ws`) each with `ranks`: a job's ranks beyond rank 0
    ([]: no job)."""
    ids = {e.number: e.id for e in ws.executions}
    rows = session.scalars(
        select(JobRank).where(JobRank.execution_id.in_(list(ids.values()))).order_by(JobRank.rank)
    ).all()
    by_execution: dict[int, list[dict]] = {}
    for r in rows:
        by_execution.setdefault(r.execution_id, []).append(rank_view(r))
    for view in views:
        view["ranks"] = by_execution.get(ids.get(view["number"]), [])
    return views


def history(db: Database, owner: str, name: str) -> list[dict] | None:
    """executions.history, each execution with its job's ranks (`with_ranks`); None: no such workspace
    (blocking)."""
    views = executions.history(db, owner, name)
    if views is None:
        return None
    with db.session() as s:
        return with_ranks(s, executions.find_workspace(s, owner, name), views)


def execution_of(db: Database, owner: str, name: str, number: int) -> dict:
    """executions.execution_of with its job's ranks; the user's 404 (blocking)."""
    view = executions.execution_of(db, owner, name, number)
    with db.session() as s:
        return with_ranks(s, executions.find_workspace(s, owner, name), [view])[0]
