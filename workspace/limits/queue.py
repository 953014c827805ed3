"""The queue of starts: start-up turns per node, and per resource type its capacity and GPUs.

**Admission**: every execution waits in state `queued` until it is first in
line for its type (first come, first served) and a node has room: fewer than
the node's start-up slots are coming up there (#30: a node brings up only as
many workspaces at once as its cores can, so a class of 100 clicking "start"
together all start, in turn, instead of all timing out together), fewer than
`capacity` executions of the type are active, and enough GPUs are free. Then
it is admitted (state `preparing`), placed on that node and given specific GPU
device IDs. It holds its start-up slot until it is ready (its server answers)
or ends.
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

from sqlalchemy import and_, func, or_, select, text

from workspace import i18n, jobs
from workspace.db import Database, utcnow
from workspace.errors import UserError
from workspace.executions import Execution, Workspace
from workspace.limits.fit import HOLDING, of_type, place_gang, type_per_node
from workspace.limits.resource_types import ResourceType

# Executions coming up: admitted, not yet running (and those running whose server has not answered yet)
STARTING = ("preparing", "pulling", "restoring")
# A waiting start renews its heartbeat (the execution's lease) at its looks; one
# not renewed for this long lost its hub (a restart) and leaves the queue. A look
# writes the renewal only once RENEW_AFTER has passed since the last: a class
# waiting in line looks often (the first few at every freed slot), and a look
# that writes nothing is a read, not a synchronous commit that every other
# writer of the database waits behind. Looks come at most 10 s apart
# (placement.LONGEST_LOOK), so a lease is renewed with 35 s or more to spare.
QUEUE_HEARTBEAT = dt.timedelta(seconds=60)
RENEW_AFTER = dt.timedelta(seconds=15)
STALE_MESSAGE = i18n.N_(
    "The hub restarted while this start waited in the queue; nothing ran, so nothing is lost. "
    "Start the workspace again."
)


@dataclass(frozen=True)
class StartupLimit:
    """How many start-ups each node brings up at once, and how long one may hold its slot.

    `slots`: {node: start-ups at once} (every node placed on is named). A start-up admitted longer than
    `bound_s` ago and still not ready is taken for stuck (a hub that died in it): its slot is free again,
    so a lost start-up never blocks a node for good.
    """

    slots: dict[str, int]
    bound_s: float = 600.0

    def total(self, nodes) -> int:
        return sum(self.slots.get(n, 1) for n in nodes) or 1


@dataclass(frozen=True)
class OwnLimits:
    """How much one person may hold at once, which a run beside a workspace (#31) waits for instead of
    being refused: a sweep's runs start as its owner's earlier ones end. The type's own per-user limit
    (`ResourceType.per_user`), and `running`: the spawner's `max_running_per_user` (None: no limit).
    `exempt`: this start's owner is an administrator (not limited; others' runs still wait aside)."""

    running: int | None = None
    exempt: bool = False


@dataclass
class Admission:
    admitted: bool
    position: int  # 1-based place in its type's queue (0 when admitted)
    waiting: int  # how many wait for the type
    gpu_ids: list[str] = field(default_factory=list)
    estimate_s: float | None = None  # expected wait
    node: str | None = None  # where it was placed
    # what it waits for: "type" (the type's capacity or GPUs), "startup" (a node's start-up turn), "own"
    # (its owner's other start-up: one at a time per owner) or "own_limit" (a run: its owner holds as much as
    # one person may; position and waiting are then among the owner's own waiting runs)
    reason: str = "type"
    limit: int | None = None  # "own_limit": how many one person may hold
    nodes: int = 1  # a job's ranks (#31), admitted all together or not at all

    def describe(self, rtype: ResourceType | None, locale: str = i18n.DEFAULT) -> str:
        """The progress stream's sentence about the wait, in `locale`."""
        if self.reason == "own_limit":
            return i18n.translate(
                locale,
                "This run waits for one of your running workspaces or runs to end (one person may run {limit} "
                "at once); it is {position} of your {waiting} waiting runs",
                limit=self.limit,
                position=self.position,
                waiting=self.waiting,
            )
        if self.reason == "own":
            return i18n.translate(
                locale,
                "Your other workspace is starting; this one starts next, at position {position} of {waiting}",
                position=self.position,
                waiting=self.waiting,
            )
        if self.reason == "startup" or rtype is None:
            return self._describe_turn(locale)
        if self.nodes > 1:
            return i18n.translate(
                locale,
                "This job waits for {nodes} nodes of “{type}” at once ({each} GPU(s) each), all together so that "
                "none is held while it waits: position {position} of {waiting} in the queue",
                nodes=self.nodes,
                type=rtype.name,
                each=rtype.gpus,
                position=self.position,
                waiting=self.waiting,
            )
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

    def _describe_turn(self, locale: str) -> str:
        """A start waiting for its turn to be brought up (the nodes are busy starting others)."""
        if self.estimate_s:
            return i18n.translate(
                locale,
                "Many workspaces are starting at once; yours starts in turn: position {position} of {waiting}, "
                "about {wait} (from how long recent starts took)",
                position=self.position,
                waiting=self.waiting,
                wait=_minutes(self.estimate_s, locale),
            )
        return i18n.translate(
            locale,
            "Many workspaces are starting at once; yours starts in turn: position {position} of {waiting}",
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


def check_per_user(session, owner: str, name: str, rtype: ResourceType, server: str | None = None) -> None:
    """A user holds (or waits for) at most `rtype.per_user` starts of a type at once: one student cannot
    take every GPU of a type. The user's 403 beyond it. The start's own server's executions (a workspace's
    earlier one, still saving) do not count. A run beside a workspace (`server`, #31) is never refused: it
    waits in the queue until its owner holds less (`OwnLimits`)."""
    if not rtype.per_user or server is not None:
        return
    same = (Workspace.name == name) & (func.coalesce(Execution.server, "") == (server or ""))
    held = [
        ex.workspace.name
        for ex in session.scalars(
            select(Execution)
            .join(Workspace, Execution.workspace_id == Workspace.id)
            .where(
                Workspace.owner == owner,
                ~same,
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
def entering(session, owner: str, name: str, rtype: ResourceType | None, server: str | None = None):
    """Around the record of a new execution of a type with a per-user limit (lifecycle.begin): the
    user's count and the record in one transaction, serialized as admission is (`lock_admission`, then
    the thread lock, held until the commit), so that two starts at once never both pass the limit."""
    if rtype is None or not rtype.per_user or server is not None:  # a run waits instead (OwnLimits)
        yield
        return
    lock_admission(session)
    with _admit_lock:
        check_per_user(session, owner, name, rtype, server)
        yield
        session.commit()  # before the lock is let go: the next start counts this one


def admit(
    session,
    execution: Execution,
    rtype: ResourceType | None,
    inventories: dict[str, list[str]],
    prefer: Sequence[str] = (),
    startup: StartupLimit | None = None,
    own: OwnLimits | None = None,
) -> Admission:
    """Admit `execution` (queued) if it is first in line and a node has room for it; else its place.

    `rtype`: its resource type (None: no types configured, one line for all); `inventories`: the nodes'
    GPU IDs ({node: [id, ...]}; one node on a single host); `startup`: the nodes' start-up slots (None: no
    limit); `own`: what one person may hold, which a run waits for (its owner's other runs at that limit
    wait aside, never ahead of anyone). The node is chosen by `place`. Call inside one session (one
    transaction); counts, not rows, so that a hundred waiting starts cost little. Each call is also the
    waiting start's heartbeat.
    """
    lock_admission(session)
    with _admit_lock:
        now = utcnow()
        if execution.lease_until is None or execution.lease_until - now < QUEUE_HEARTBEAT - RENEW_AFTER:
            execution.lease_owner, execution.lease_until = "queue", now + QUEUE_HEARTBEAT
        expire_stale(session, now)
        # one start-up per owner at a time: a student whose start script never lets the server answer holds
        # one slot, not every slot of the node (their next start waits; the others' go past it)
        busy = _busy_owners(now, startup) if startup is not None else None
        full = _owners_at_limit(rtype, own)
        if execution.server is not None and full is not None and not own.exempt:
            limited = _own_limit(session, execution, rtype, own)
            if limited is not None:
                return limited
        position, waiting = place_in_line(session, execution, rtype, busy, full)
        on_type = type_per_node(session, rtype)
        starting = startups_per_node(session, now, startup) if startup is not None else {}
        own_busy = busy is not None and _has_startup(session, execution.workspace.owner, now, startup)
        ranks = jobs.ranks_of(session, execution.id)  # a job's ranks beyond rank 0 (#31): admitted all at once
        if position == 1 and not own_busy:
            gang = place_gang(session, rtype, inventories, on_type, 1 + len(ranks), prefer, startup, starting)
            if gang is not None:
                (execution.node, execution.gpu_ids), *others = gang
                for rank, (node, ids) in zip(ranks, others):
                    rank.node, rank.gpu_ids = node, ids
                execution.lease_owner, execution.lease_until = None, None
                return Admission(True, 0, waiting - 1, list(execution.gpu_ids), node=execution.node)
        if (rtype is not None and rtype.limited or ranks) and not place_gang(
            session, rtype, inventories, on_type, 1 + len(ranks)
        ):
            holding = holding_of(session, rtype) if rtype is not None else []
            slots = ((rtype.capacity or 0) * len(inventories) or None) if rtype is not None else None
            estimate = estimate_wait(session, rtype, holding, position, now, slots) if rtype is not None else None
            return Admission(False, position, waiting, estimate_s=estimate, nodes=1 + len(ranks))
        turns = startup.total(inventories) if startup is not None else 1
        estimate = estimate_turn(session, position, turns)
        return Admission(False, position, waiting, estimate_s=estimate, reason="own" if own_busy else "startup")


def place_in_line(session, execution: Execution, rtype: ResourceType | None, busy=None, full=None) -> tuple[int, int]:
    """(1-based position, how many wait) of a queued execution in its type's line: first requested,
    first served; the starts of owners in `busy` (a query of owners with a start-up under way) and the
    runs of owners in `full` (who hold as much as one person may) wait aside, not ahead of anyone."""
    line = select(func.count()).select_from(Execution).where(of_type(rtype), Execution.state == "queued")
    ahead = line.where(
        or_(
            Execution.created < execution.created,
            and_(Execution.created == execution.created, Execution.id < execution.id),
        )
    )
    if busy is not None or full is not None:
        ahead = ahead.join(Workspace, Execution.workspace_id == Workspace.id)
    if busy is not None:
        ahead = ahead.where(Workspace.owner.not_in(busy))
    if full is not None:
        ahead = ahead.where(or_(Execution.server.is_(None), Workspace.owner.not_in(full)))
    return session.scalar(ahead) + 1, session.scalar(line)


def _held(rtype: ResourceType | None = None):
    """The owners' executions holding a place (of `rtype`'s type, when given), per owner (a query)."""
    q = select(Workspace.owner).join(Execution, Execution.workspace_id == Workspace.id)
    q = q.where(Execution.state.in_(HOLDING))
    return q.where(of_type(rtype)) if rtype is not None else q


def _running():
    """What counts against `OwnLimits.running` (what one person may run at once): not a deployment's
    replicas (#33), whose number the deployments' own rules bound (their type's per-user limit still holds)."""
    return _held().where(Execution.kind != "serve")


def _owners_at_limit(rtype: ResourceType | None, own: OwnLimits | None):
    """The owners who hold as much as one person may (a query, for `not in`); None: no limit applies."""
    parts = []
    if own is not None and rtype is not None and rtype.per_user:
        parts.append(_held(rtype).group_by(Workspace.owner).having(func.count() >= rtype.per_user))
    if own is not None and own.running:
        parts.append(_running().group_by(Workspace.owner).having(func.count() >= own.running))
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else parts[0].union(parts[1])


def _own_limit(session, execution: Execution, rtype: ResourceType | None, own: OwnLimits) -> Admission | None:
    """A run's wait for its owner to hold less (None: they hold less than they may): its place among
    the owner's own waiting runs."""
    owner = execution.workspace.owner
    mine = _held().where(Workspace.owner == owner)
    running = _running().where(Workspace.owner == owner)
    limit = None
    if own.running and session.scalar(select(func.count()).select_from(running.subquery())) >= own.running:
        limit = own.running
    elif rtype is not None and rtype.per_user:
        same_type = select(func.count()).select_from(mine.where(of_type(rtype)).subquery())
        limit = rtype.per_user if session.scalar(same_type) >= rtype.per_user else None
    if limit is None:
        return None
    waiting = (
        select(func.count())
        .select_from(Execution)
        .join(Workspace, Execution.workspace_id == Workspace.id)
        .where(Workspace.owner == owner, Execution.state == "queued", Execution.server.is_not(None))
    )
    ahead = waiting.where(
        or_(
            Execution.created < execution.created,
            and_(Execution.created == execution.created, Execution.id < execution.id),
        )
    )
    return Admission(False, session.scalar(ahead) + 1, session.scalar(waiting), reason="own_limit", limit=limit)


def _coming_up(now: dt.datetime, startup: StartupLimit):
    """The executions holding a start-up slot: admitted within the bound, not ready, not ended."""
    since = now - dt.timedelta(seconds=startup.bound_s)
    return and_(
        or_(Execution.state.in_(STARTING), and_(Execution.state == "running", Execution.ready.is_(None))),
        or_(Execution.admitted.is_(None), Execution.admitted > since),
    )


def _busy_owners(now: dt.datetime, startup: StartupLimit):
    """The owners with a start-up under way (a query, for `not in`)."""
    return (
        select(Workspace.owner).join(Execution, Execution.workspace_id == Workspace.id).where(_coming_up(now, startup))
    )


def _has_startup(session, owner: str, now: dt.datetime, startup: StartupLimit) -> bool:
    own = select(func.count()).select_from(Execution).join(Workspace, Execution.workspace_id == Workspace.id)
    return bool(session.scalar(own.where(Workspace.owner == owner, _coming_up(now, startup))))


def holding_of(session, rtype: ResourceType) -> list[Execution]:
    return list(session.scalars(select(Execution).where(of_type(rtype), Execution.state.in_(HOLDING))))


def startups_per_node(session, now: dt.datetime, startup: StartupLimit) -> dict[str, int]:
    """{node: start-ups holding a slot there}: admitted, not ready, not ended, admitted within the bound."""
    rows = session.execute(
        select(Execution.node, func.count()).where(_coming_up(now, startup)).group_by(Execution.node)
    )
    return dict(rows.all())


def expire_stale(session, now: dt.datetime | None = None) -> list[Execution]:
    """End the queued executions whose waiting start is gone (no heartbeat: a hub restart)."""
    now = now or utcnow()
    ended = []
    # none renewed yet: as if from its creation (the filter in SQL: a hundred waiting starts read none)
    late = or_(
        Execution.lease_until < now, and_(Execution.lease_until.is_(None), Execution.created < now - QUEUE_HEARTBEAT)
    )
    for e in session.scalars(select(Execution).where(Execution.state == "queued", late)):
        heartbeat = e.lease_until or (e.created + QUEUE_HEARTBEAT)
        if heartbeat < now and e.lease_owner in (None, "queue"):
            e.stop_reason, e.stop_detail = "lost", STALE_MESSAGE
            e.lease_owner, e.lease_until = None, None
            e.to(session, "stopped", STALE_MESSAGE)
            ended.append(e)
    return ended


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


def estimate_turn(session, position: int, turns: int) -> float | None:
    """Expected wait for `position` in the start-up line, from the last start-ups that finished: the pace
    at which they became ready (a burst's own pace, which a node's load sets), else as many rounds of
    `turns` at once as are ahead, each as long as they took; None before any start-up finished."""
    recent = session.execute(
        select(Execution.admitted, Execution.ready)
        .where(Execution.admitted.is_not(None), Execution.ready.is_not(None))
        .order_by(Execution.ready.desc())
        .limit(20)
    ).all()
    if not recent:
        return None
    typical = statistics.median(max(0.0, (ready - admitted).total_seconds()) for admitted, ready in recent)
    by_turns = typical * position / max(1, turns)
    span = (recent[0].ready - recent[-1].ready).total_seconds()
    if len(recent) >= 5 and span > 0 and (utcnow() - recent[0].ready).total_seconds() < 2 * typical + 10:
        return max(by_turns, position * span / (len(recent) - 1))  # a burst under way: its measured pace
    return by_turns


def mark_ready(db: Database, execution_id: int) -> None:
    """The execution's start-up is over (its server answered; a task: its container runs): its node's
    start-up slot is free for the next in line."""
    with db.session() as s:
        ex = s.get(Execution, execution_id)
        if ex is not None and ex.ready is None:
            ex.ready = utcnow()


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
    db: Database,
    execution_id: int,
    rtype: ResourceType | None,
    inventories: dict[str, list[str]],
    prefer: Sequence[str] = (),
    startup: StartupLimit | None = None,
    own: OwnLimits | None = None,
) -> "Admission":
    """Let a queued execution in if a node has room for it (`admit`, in one transaction); its Admission."""
    with db.session() as s:
        lock_admission(s)  # before reading the execution, which another hub may end meanwhile
        ex = s.get(Execution, execution_id)
        if ex.state in HOLDING:
            return Admission(True, 0, 0, list(ex.gpu_ids or []), node=ex.node)
        if ex.state != "queued":  # ended while it waited (taken for gone: no heartbeat in time)
            if ex.stop_detail == STALE_MESSAGE:
                raise UserError(503, STALE_MESSAGE)
            raise UserError(503, "This start left the queue; start the workspace again.", detail=ex.stop_detail)
        admission = admit(s, ex, rtype, inventories, prefer, startup, own)
        if admission.admitted and rtype is None:
            ex.to(s, "preparing", i18n.N_("Admitted"))
        elif admission.admitted and admission.gpu_ids:
            message = i18n.N_("Admitted as “{type}” with GPU(s) {gpus}")
            ex.to(s, "preparing", message.format(type=rtype.name, gpus=", ".join(admission.gpu_ids)))
        elif admission.admitted:
            ex.to(s, "preparing", i18n.N_("Admitted as “{type}”").format(type=rtype.name))
        return admission


def expire_stale_queue(db: Database) -> int:
    """End queued executions whose waiting start is gone (see expire_stale); how many."""
    with db.session() as s:
        return len(expire_stale(s))
