"""The queue of starts and GPU allocation, per resource type.

**Admission**: an execution of a type waits in state `queued` until it is
first in line for its type (first come, first served), fewer than `capacity`
executions of the type are active, and enough GPUs are free on the node.
Then it is admitted (state `preparing`) and given specific GPU device IDs.
Admission reads and writes the workspace database in one transaction under a
lock, so two starts never take the same GPU: a thread lock in the process and,
on PostgreSQL, where several hub processes share the database, an advisory
lock held until the transaction ends (SQLite refuses the write of a transaction
whose reads another process's commit made stale). The allocation is the set of GPU
IDs of the executions that are active, so a stop, a crash or a hub restart
(whose reconciliation ends vanished executions) frees them without
bookkeeping of its own.

Pure logic here; the spawner (workspace/spawner/mixin.py) waits and reports.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import statistics
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

from sqlalchemy import func, select, text

from workspace import i18n
from workspace.db import Database, utcnow
from workspace.errors import UserError
from workspace.executions import UNFINISHED, Execution, Workspace, latest_sample
from workspace.limits.resource_types import ResourceType

# Executions holding a place (and their GPUs) of their type: admitted and not ended.
HOLDING = ("preparing", "pulling", "restoring", "running", "saving")
# A waiting start renews its heartbeat (the execution's lease) every poll; one
# not renewed for this long lost its hub (a restart) and leaves the queue.
QUEUE_HEARTBEAT = dt.timedelta(seconds=30)
STALE_MESSAGE = i18n.N_(
    "The hub restarted while this start waited in the queue; nothing ran, so nothing is lost. "
    "Start the workspace again."
)


@dataclass
class Admission:
    admitted: bool
    position: int  # 1-based place in its type's queue (0 when admitted)
    waiting: int  # how many wait for the type
    gpu_ids: list[str] = field(default_factory=list)
    estimate_s: float | None = None  # expected wait
    node: str | None = None  # where it was placed

    def describe(self, rtype: ResourceType, locale: str = i18n.DEFAULT) -> str:
        """The progress stream's sentence about the wait, in `locale`."""
        if rtype.capacity is not None and rtype.gpus:
            limits = i18n.translate(
                locale, "{capacity} may run at once, {gpus} GPU(s) each", capacity=rtype.capacity, gpus=rtype.gpus
            )
        elif rtype.capacity is not None:
            limits = i18n.translate(locale, "{capacity} may run at once", capacity=rtype.capacity)
        elif rtype.gpus:
            limits = i18n.translate(locale, "{gpus} GPU(s) each", gpus=rtype.gpus)
        else:
            limits = ""
        if self.estimate_s:
            return i18n.translate(
                locale,
                "Waiting for a free “{type}” ({limits}): position {position} of {waiting} in the queue; "
                "about {wait} to wait (from recent run lengths)",
                type=rtype.name,
                limits=limits,
                position=self.position,
                waiting=self.waiting,
                wait=_minutes(self.estimate_s, locale),
            )
        return i18n.translate(
            locale,
            "Waiting for a free “{type}” ({limits}): position {position} of {waiting} in the queue",
            type=rtype.name,
            limits=limits,
            position=self.position,
            waiting=self.waiting,
        )


def _minutes(seconds: float, locale: str = i18n.DEFAULT) -> str:
    m = max(1, round(seconds / 60))
    if m < 120:
        return i18n.translate(locale, "{minutes} min", minutes=m)
    return i18n.translate(locale, "{hours:.1f} h", hours=m / 60)


_admit_lock = threading.Lock()
ADMISSION_LOCK_KEY = 0x77736164  # PostgreSQL advisory lock key of admission ("wsad")


def lock_admission(session) -> None:
    """Serialize admission over processes on PostgreSQL: an advisory lock held until the session's
    transaction ends (re-entrant; taken before the thread lock, so the two never deadlock)."""
    if session.get_bind().dialect.name == "postgresql":
        session.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": ADMISSION_LOCK_KEY})


def check_per_user(session, owner: str, name: str, rtype: ResourceType) -> None:
    """A user holds (or waits for) at most `rtype.per_user` starts of a type at once: one student cannot
    take every GPU of a type. The user's 403 beyond it."""
    if not rtype.per_user:
        return
    held = [
        ex.workspace.name
        for ex in session.scalars(
            select(Execution)
            .join(Workspace, Execution.workspace_id == Workspace.id)
            .where(
                Workspace.owner == owner,
                Workspace.name != name,
                Execution.resource_type == rtype.name,
                Execution.state.in_(("queued", *HOLDING)),
            )
        )
    ]
    if len(held) >= rtype.per_user:
        raise UserError(
            403,
            "You already run {count} “{resource_type}” workspace(s) ({workspaces}), "
            "the most one person may at once; stop one first, or choose another type.",
            count=len(held),
            resource_type=rtype.name,
            workspaces=", ".join(sorted(held)),
        )


@contextlib.contextmanager
def entering(session, owner: str, name: str, rtype: ResourceType | None):
    """Around the record of a new execution of a type with a per-user limit (lifecycle.begin): the
    user's count and the record in one transaction, serialized as admission is (`lock_admission`, then
    the thread lock, held until the commit), so that two starts at once never both pass the limit."""
    if rtype is None or not rtype.per_user:
        yield
        return
    lock_admission(session)
    with _admit_lock:
        check_per_user(session, owner, name, rtype)
        yield
        session.commit()  # before the lock is let go: the next start counts this one


def admit(
    session, execution: Execution, rtype: ResourceType, inventories: dict[str, list[str]], prefer: Sequence[str] = ()
) -> Admission:
    """Admit `execution` (queued) if it is first in line and a node has room for its type; else its place.

    `inventories` are the nodes' GPU IDs ({node: [id, ...]}; one node on a single
    host); the execution is placed by `place`. Call inside one session (one
    transaction). Each call is also the waiting start's heartbeat.
    """
    lock_admission(session)
    with _admit_lock:
        same_type = list(
            session.scalars(
                select(Execution)
                .where(Execution.resource_type == rtype.name, Execution.state.in_(HOLDING + ("queued",)))
                .order_by(Execution.created, Execution.id)
            )
        )
        now = utcnow()
        execution.lease_owner, execution.lease_until = "queue", now + QUEUE_HEARTBEAT
        stale = {e.id for e in expire_stale(session, now)}
        queue = [e for e in same_type if e.state == "queued" and e.id not in stale]
        holding = [e for e in same_type if e.state in HOLDING]
        position = next((i for i, e in enumerate(queue) if e.id == execution.id), 0) + 1
        placement = place(session, rtype, inventories, holding, prefer) if position == 1 else None
        if placement is not None:
            execution.node, execution.gpu_ids = placement
            execution.lease_owner, execution.lease_until = None, None
            return Admission(True, 0, len(queue) - 1, list(execution.gpu_ids), node=execution.node)
        slots = (rtype.capacity or 0) * len(inventories) or None
        return Admission(
            False, position, len(queue), estimate_s=estimate_wait(session, rtype, holding, position, now, slots)
        )


def place(
    session,
    rtype: ResourceType,
    inventories: dict[str, list[str]],
    holding: list[Execution],
    prefer: Sequence[str] = (),
) -> tuple[str, list[str]] | None:
    """The node and GPU IDs for a start of `rtype`, or None while no node has room.

    A node has room when fewer than `rtype.capacity` executions of the type
    run there and `rtype.gpus` of its GPUs are free: a start is never split
    over nodes. Of the nodes with room, those in `prefer` come first (they
    hold the home's snapshot: no transfer), then the best fit, the node with
    the fewest free GPUs that suffice, so that whole nodes stay free for
    large starts (the fragmentation BitaHub's users meet).
    """
    used = used_gpus(session)
    candidates = []
    for node in sorted(inventories):
        on_node = sum(1 for e in holding if e.node == node)
        if rtype.capacity is not None and on_node >= rtype.capacity:
            continue
        free = [g for g in inventories[node] if g not in used.get(node, ())]
        if len(free) < rtype.gpus:
            continue
        rank = prefer.index(node) if node in prefer else len(prefer)
        candidates.append((rank, len(free) if rtype.gpus else 0, node, free[: rtype.gpus]))
    if not candidates:
        return None
    _, _, node, gpus = min(candidates)
    return node, gpus


def spread(db: Database, execution_id: int, nodes: Sequence[str], prefer: Sequence[str] = ()) -> str:
    """Place a start whose type never waits (no capacity, no GPUs) on one of `nodes`; its node.

    Of the nodes in `prefer` (they hold the home's snapshot: no transfer), else
    of all, the one running the fewest executions, so that a class's starts
    spread over the cluster (a tie: the first in `nodes`). Under the admission lock, so that fifty
    simultaneous starts do not all count the same idle node.
    """
    if not nodes:
        raise UserError(503, "No node of this server can run a workspace now; please try again in a minute.")
    with db.session() as s:
        lock_admission(s)
        with _admit_lock:
            counts = executions_per_node(s)
            preferred = [n for n in nodes if n in prefer]
            node = min(preferred or nodes, key=lambda n: (counts.get(n, 0), nodes.index(n)))
            s.get(Execution, execution_id).node = node
            return node


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


def expire_stale(session, now: dt.datetime | None = None) -> list[Execution]:
    """End the queued executions whose waiting start is gone (no heartbeat: a hub restart)."""
    now = now or utcnow()
    ended = []
    for e in session.scalars(select(Execution).where(Execution.state == "queued")):
        heartbeat = e.lease_until or (e.created + QUEUE_HEARTBEAT)  # none yet: as if from its creation
        if heartbeat < now and e.lease_owner in (None, "queue"):
            e.stop_reason, e.stop_detail = "lost", STALE_MESSAGE
            e.lease_owner, e.lease_until = None, None
            e.to(session, "stopped", STALE_MESSAGE)
            ended.append(e)
    return ended


def executions_per_node(session) -> dict[str, int]:
    """{node: how many executions hold a place there} (one GROUP BY)."""
    rows = session.execute(
        select(Execution.node, func.count()).where(Execution.state.in_(HOLDING)).group_by(Execution.node)
    )
    return dict(rows.all())


def used_gpus(session) -> dict[str, set[str]]:
    """{node: GPU IDs held by its active executions} (one query for every node)."""
    used: dict[str, set[str]] = {}
    for node, ids in session.execute(select(Execution.node, Execution.gpu_ids).where(Execution.state.in_(HOLDING))):
        used.setdefault(node, set()).update(ids or [])
    return used


def free_gpus(session, inventory: list[str], node: str) -> list[str]:
    """GPU IDs of the node's inventory that no active execution holds, in inventory order."""
    used = used_gpus(session).get(node, set())
    return [g for g in inventory if g not in used]


def estimate_wait(
    session, rtype: ResourceType, holding: list[Execution], position: int, now: dt.datetime, slots: int | None = None
) -> float | None:
    """Expected wait for `position`: when the running ones end, judged by how long recent ones ran."""
    recent = list(
        session.scalars(
            select(Execution)
            .where(
                Execution.resource_type == rtype.name,
                Execution.state == "stopped",
                Execution.started.is_not(None),
                Execution.stopped.is_not(None),
            )
            .order_by(Execution.stopped.desc())
            .limit(20)
        )
    )
    if not recent:
        return None
    typical = statistics.median((e.stopped - e.started).total_seconds() for e in recent)
    slots = max(1, slots or rtype.capacity or len(holding) or 1)
    remaining = sorted(max(0.0, typical - ((now - e.started).total_seconds() if e.started else 0.0)) for e in holding)
    remaining += [0.0] * (slots - len(remaining))
    k = position - 1
    return remaining[k % slots] + (k // slots) * typical


def node_name() -> str:
    """This node's name, as executions record it."""
    import socket

    return socket.gethostname()


def gpu_inventory(static: list[str] | None, nvml=None) -> list[str]:
    """The GPUs of this node: the configured list, else NVML's device indexes, else none."""
    if static:
        return [str(g) for g in static]
    try:
        if nvml is None:
            import pynvml as nvml
        nvml.nvmlInit()
    except Exception:
        return []
    try:
        return [str(i) for i in range(nvml.nvmlDeviceGetCount())]
    finally:
        nvml.nvmlShutdown()


# -- the same, each in a transaction of its own (blocking; the spawner runs them in threads) --


def admit_execution(
    db: Database, execution_id: int, rtype: ResourceType, inventories: dict[str, list[str]], prefer: Sequence[str] = ()
) -> "Admission":
    """Let a queued execution in if its type has room (`admit`, in one transaction); its Admission."""
    with db.session() as s:
        lock_admission(s)  # before reading the execution, which another hub may end meanwhile
        ex = s.get(Execution, execution_id)
        if ex.state in HOLDING:
            return Admission(True, 0, 0, list(ex.gpu_ids or []), node=ex.node)
        if ex.state != "queued":  # ended while it waited (taken for gone: no heartbeat in time)
            if ex.stop_detail == STALE_MESSAGE:
                raise UserError(503, STALE_MESSAGE)
            raise UserError(503, "This start left the queue; start the workspace again.", detail=ex.stop_detail)
        admission = admit(s, ex, rtype, inventories, prefer)
        if admission.admitted and admission.gpu_ids:
            message = i18n.N_("Admitted as “{type}” with GPU(s) {gpus}")
            ex.to(s, "preparing", message.format(type=rtype.name, gpus=", ".join(admission.gpu_ids)))
        elif admission.admitted:
            ex.to(s, "preparing", i18n.N_("Admitted as “{type}”").format(type=rtype.name))
        return admission


def expire_stale_queue(db: Database) -> int:
    """End queued executions whose waiting start is gone (see expire_stale); how many."""
    with db.session() as s:
        return len(expire_stale(s))
