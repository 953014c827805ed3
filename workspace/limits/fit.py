"""Which node a start fits on, and a job's ranks all at once (#31): GPUs free, a type's capacity per node,
start-up turns, the home's node preferred. Counts of what holds a place per node, a job's ranks included
(`jobs.JobRank`: ranks 1..N-1 of a job hold their node and GPUs as its execution holds rank 0's).
Pure reads of the records; admission (workspace/limits/queue.py) decides and writes."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import and_, func, select

from workspace.executions import Execution
from workspace.jobs import JobRank
from workspace.limits.resource_types import ResourceType

# Executions holding a place (and their GPUs) of their type: admitted and not ended.
HOLDING = ("preparing", "pulling", "restoring", "running", "saving")


def of_type(rtype: ResourceType | None):
    return Execution.resource_type.is_(None) if rtype is None else Execution.resource_type == rtype.name


def type_per_node(session, rtype: ResourceType | None) -> dict[str, int]:
    """{node: containers of executions of the type holding a place there} (a job's ranks each count)."""
    holding = and_(of_type(rtype), Execution.state.in_(HOLDING))
    rows = session.execute(select(Execution.node, func.count()).where(holding).group_by(Execution.node))
    return _plus_ranks(session, dict(rows.all()), holding)


def place(
    session,
    rtype: ResourceType | None,
    inventories: dict[str, list[str]],
    on_type: dict[str, int],
    prefer: Sequence[str] = (),
    startup=None,
    starting: dict[str, int] | None = None,
) -> tuple[str, list[str]] | None:
    """The node and GPU IDs for a start of `rtype`, or None while no node has room (`place_gang` of one)."""
    gang = place_gang(session, rtype, inventories, on_type, 1, prefer, startup, starting)
    return gang[0] if gang else None


def place_gang(
    session,
    rtype: ResourceType | None,
    inventories: dict[str, list[str]],
    on_type: dict[str, int],
    ranks: int,
    prefer: Sequence[str] = (),
    startup=None,
    starting: dict[str, int] | None = None,
) -> list[tuple[str, list[str]]] | None:
    """A node and GPU IDs for each of `ranks` containers of a start of `rtype` (a job's, #31; one for any
    other start), all of them or None: nothing is held while a gang waits.

    A node has room for one more when fewer than its start-up slots are coming up there (`startup`, a
    queue.StartupLimit; None: not counted), fewer than `rtype.capacity` of the type run there
    (`on_type`) and `rtype.gpus` of its GPUs are free: a container is never split over nodes; a type
    that `spread`s puts each rank on a node of its own. Of the nodes with room, those in `prefer` come
    first for rank 0 (they hold the home's snapshot: no transfer); then for a GPU start the best fit,
    the node with the fewest free GPUs that suffice, so that whole nodes stay free for large starts (the
    fragmentation BitaHub's users meet), and for a start without GPUs the nodes without GPUs; then the
    node running the fewest, so that a class's starts spread over the cluster.
    """
    gpus = rtype.gpus if rtype is not None else 0
    capacity = rtype.capacity if rtype is not None else None
    spread = rtype is not None and rtype.spread
    load, used = executions_per_node(session), used_gpus(session) if gpus else {}
    free = {node: [g for g in inv if g not in used.get(node, ())] for node, inv in inventories.items()}
    on_type, starting = dict(on_type), dict(starting or {})
    chosen: list[tuple[str, list[str]]] = []
    for rank in range(ranks):
        candidates = []
        for node in sorted(inventories):
            if spread and any(node == n for n, _ in chosen):
                continue
            if startup is not None and starting.get(node, 0) >= startup.slots.get(node, 1):
                continue
            if capacity is not None and on_type.get(node, 0) >= capacity:
                continue
            if len(free[node]) < gpus:
                continue
            first = prefer.index(node) if rank == 0 and node in prefer else len(prefer)
            fit = len(free[node]) if gpus else bool(inventories[node])
            candidates.append((first, fit, load.get(node, 0), node))
        if not candidates:
            return None
        *_, node = min(candidates)
        chosen.append((node, free[node][:gpus]))
        free[node] = free[node][gpus:]
        for counts in (on_type, starting, load):
            counts[node] = counts.get(node, 0) + 1
    return chosen


def executions_per_node(session) -> dict[str, int]:
    """{node: how many containers of executions hold a place there} (a job's ranks each count)."""
    rows = session.execute(
        select(Execution.node, func.count()).where(Execution.state.in_(HOLDING)).group_by(Execution.node)
    )
    return _plus_ranks(session, dict(rows.all()), Execution.state.in_(HOLDING))


def _plus_ranks(session, counts: dict[str, int], where) -> dict[str, int]:
    """`counts` with the placed ranks of the executions `where` selects, per node."""
    rows = session.execute(
        select(JobRank.node, func.count())
        .join(Execution, JobRank.execution_id == Execution.id)
        .where(where, JobRank.node.is_not(None))
        .group_by(JobRank.node)
    )
    for node, n in rows:
        counts[node] = counts.get(node, 0) + n
    return counts


def used_gpus(session) -> dict[str, set[str]]:
    """{node: GPU IDs held by its active executions and their jobs' ranks} (two queries for every node)."""
    used: dict[str, set[str]] = {}
    for node, ids in session.execute(select(Execution.node, Execution.gpu_ids).where(Execution.state.in_(HOLDING))):
        used.setdefault(node, set()).update(ids or [])
    ranks = select(JobRank.node, JobRank.gpu_ids).join(Execution, JobRank.execution_id == Execution.id)
    for node, ids in session.execute(ranks.where(Execution.state.in_(HOLDING), JobRank.node.is_not(None))):
        used.setdefault(node, set()).update(ids or [])
    return used


def free_gpus(session, inventory: list[str], node: str) -> list[str]:
    """GPU IDs of the node's inventory that no active execution holds, in inventory order."""
    used = used_gpus(session).get(node, set())
    return [g for g in inventory if g not in used]
