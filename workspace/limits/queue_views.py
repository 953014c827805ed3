"""What the queue looks like, for the pages: each waiting start's place in its type's line, every
unfinished execution with its newest usage sample (the admin's page), the nodes with their free GPUs.
Read-only views of the records; admission itself is workspace/limits/queue.py."""

from __future__ import annotations

from sqlalchemy import select

from workspace.db import Database
from workspace.executions import UNFINISHED, Execution, latest_sample
from workspace.limits.fit import executions_per_node, used_gpus


def queue_positions(session) -> dict[int, tuple[int, int]]:
    """{execution id: (1-based position, how many wait)} of every queued execution, in its type's queue
    (the order `admit` serves: first requested, first admitted)."""
    queued = session.scalars(
        select(Execution).where(Execution.state == "queued").order_by(Execution.created, Execution.id)
    ).all()
    by_type: dict[str | None, list[int]] = {}
    for e in queued:
        by_type.setdefault(e.resource_type, []).append(e.id)
    return {eid: (i + 1, len(ids)) for ids in by_type.values() for i, eid in enumerate(ids)}


def overview(db: Database) -> list[dict]:
    """Every unfinished execution (waiting, running or saving), oldest first, with its place in the queue
    and its newest usage sample, for the admin page (blocking)."""
    with db.session() as s:
        active = s.scalars(
            select(Execution).where(Execution.state.in_(UNFINISHED)).order_by(Execution.created, Execution.id)
        ).all()
        positions = queue_positions(s)
        rows = []
        for ex in active:
            sample = latest_sample(s, ex.id)
            rows.append(
                {
                    "owner": ex.workspace.owner,
                    "workspace": ex.workspace.name,
                    "execution": ex.as_dict(),
                    "usage": sample.as_dict() if sample else None,
                    "queue": positions.get(ex.id),
                }
            )
        return rows


def node_overview(db: Database, nodes: list) -> list[dict]:
    """The nodes (workspace/store/nodes.py) with their free GPU IDs and how many executions hold a place on each,
    for the admin page (blocking)."""
    with db.session() as s:
        used, counts = used_gpus(s), executions_per_node(s)
    return [
        {
            "name": n.name,
            "state": n.state,
            "address": n.address,
            "gpu_model": n.gpu_model,
            "gpus": list(n.gpus),
            "free_gpus": [g for g in n.gpus if g not in used.get(n.name, ())],
            "executions": counts.get(n.name, 0),
        }
        for n in nodes
    ]


def by_gpu_model(rows: list[dict]) -> list[dict]:
    """node_overview's rows summed per GPU model (of the nodes that are up): total, free, and the most free
    on one node, which is what decides whether a multi-GPU start waits."""
    models: dict[str, dict] = {}
    for row in rows:
        if not row["gpus"] or row["state"] == "down":
            continue
        m = models.setdefault(
            row["gpu_model"] or "", {"model": row["gpu_model"] or "", "total": 0, "free": 0, "most": 0}
        )
        free = len(row["free_gpus"]) if row["state"] == "up" else 0  # a paused node takes nothing new
        m["total"] += len(row["gpus"])
        m["free"] += free
        m["most"] = max(m["most"], free)
    return sorted(models.values(), key=lambda m: m["model"])
