"""The life of an execution's home: plan and restore at start, save at stop.

These functions block (database, file system) and are run in a thread pool
by the spawner, or by the workspace service for saves it finishes after a
crash. Rules they keep:

- A live home is removed only after its snapshot is durable and recorded.
- A save that fails (a full disk) leaves the live home and marks the
  execution `save_failed` with a sentence; `finish_pending_saves()` retries it.
- One process at a time works on an execution's home (a lease in the record).
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Callable

from sqlalchemy import select

from workspace import courses, i18n, process, replicas
from workspace.db import Database, utcnow
from workspace.executions import (
    Execution,
    Snapshot,
    claim,
    find_workspace,
    get_or_create_workspace,
    nearest_output,
    new_execution,
    not_open,
    plan_continuation,
    release_claim,
)
from workspace.limits import queue
from workspace.limits.home_size import HomeLimit, home_limit
from workspace.store.copier import Transfer
from workspace.store.homes import HomeStore, HomeStoreError, StoreFullError

log = logging.getLogger("workspace.lifecycle")

# what an execution's record says of a failed save (its page shows it)
SAVE_FAILED_FULL = i18n.N_(
    "The home could not be saved because the storage is full. Nothing is lost: the home is kept "
    "and the save is retried automatically; an administrator may need to free space."
)
SAVE_FAILED = i18n.N_(
    "The home could not be saved. Nothing is lost: the home is kept and the save is retried automatically."
)
SAVING = i18n.N_("Saving the home")

LEASE = dt.timedelta(minutes=10)
PROCESS = process.identity()
NODE = process.HOST  # where this process's store is: the node of the outputs it saves


@dataclass
class StartPlan:
    execution_id: int
    number: int
    live_key: str
    parent: int | None  # execution numbers
    restore_from: int | None
    restore_snapshot: str | None
    restore_bytes: int | None
    restore_files: int | None
    home_limit: int | None = None  # the resource type's home size limit (bytes)
    cleanup_slack: int | None = None  # cleanup mode: the home may grow by at most this
    quota_room: int | None = None  # bytes left in the owner's storage quota: the home grows by at most this
    starter: str | None = None  # a course's starter restored instead: "course (owner/workspace #n)"
    report_key: str | None = None  # the workspace's secret for the culler's calls
    now: bool = False  # a run beside the open workspace, from its home as it was at the request (#31)

    def describe(self, locale: str = i18n.DEFAULT) -> str:
        """The sentence the progress stream shows about what is restored, in `locale`."""
        if self.now:
            return i18n.translate(
                locale,
                "Run #{number} starts from the home of #{parent} as it was at the request",
                number=self.number,
                parent=self.parent,
            )
        if self.starter:
            return i18n.translate(
                locale,
                "Execution #{number} starts from the starter of the course {starter}",
                number=self.number,
                starter=self.starter,
            )
        if self.restore_from is None and self.parent is None:
            return i18n.translate(locale, "Execution #{number} starts with an empty home", number=self.number)
        if self.restore_from is None:
            return i18n.translate(
                locale,
                "Execution #{number} continues from #{parent}, which has no saved output "
                "and no earlier output in its lineage: starting with an empty home",
                number=self.number,
                parent=self.parent,
            )
        if self.restore_from != self.parent:
            return i18n.translate(
                locale,
                "Execution #{number} continues from #{parent}, which has no saved output "
                "(it was closed while preparing, or its save failed): restoring #{restored}, "
                "its nearest earlier execution with output",
                number=self.number,
                parent=self.parent,
                restored=self.restore_from,
            )
        return i18n.translate(
            locale, "Execution #{number} continues from #{parent}", number=self.number, parent=self.parent
        )


def begin(
    db: Database,
    owner: str,
    name: str,
    choice,
    image: str | None,
    mounts: list[dict] | None = None,
    resource_type=None,
    cleanup_slack: int | None = None,
    home_files: int | None = None,
    task: str | None = None,
    locale: str | None = None,
    quota_room: int | None = None,
    queued: bool = False,
    server: str | None = None,
    checkpoint: str | None = None,
    serve: bool = False,
) -> StartPlan:
    """Record a new execution and decide what it restores.

    It is `queued` when `queued` (the spawner's starts: every one waits for its node's start-up turn)
    or when its resource type may have to wait (capacity, GPUs), and `admit()` lets it in; else it is
    `preparing` at once. A type's per-user limit is counted in the same
    transaction (queue.entering).

    A run beside the workspace (#31) has its own JupyterHub `server`; from `now` it restores `checkpoint`,
    the snapshot `checkpoint()` took of the open workspace's home. A deployment's replica (#33, `serve`)
    runs `task` as a server that serves, with no maximum run time; its home is never saved (`end_replica`).
    """
    with db.session() as s, queue.entering(s, owner, name, resource_type, server):
        ws = get_or_create_workspace(s, owner, name)
        parent, source, starter = _what_to_restore(s, ws, choice, checkpoint)
        ex = new_execution(s, ws, parent, source, image=image)
        ex.server, ex.datasets, ex.home_files, ex.locale = server, mounts or [], home_files, locale
        _take_type(ex, resource_type)
        _take_kind(ex, task, serve, cleanup_slack is not None)
        if not queued and (resource_type is None or not resource_type.limited):
            ex.to(s, "preparing")
        snap = s.scalar(select(Snapshot).where(Snapshot.key == checkpoint)) if checkpoint else None
        snap = snap or (source.snapshot if source else None)
        return StartPlan(
            execution_id=ex.id,
            number=ex.number,
            live_key=ex.live_key,
            parent=parent.number if parent else None,
            restore_from=source.number if source and starter is None else None,
            now=checkpoint is not None,
            restore_snapshot=snap.key if snap else None,
            restore_bytes=snap.bytes if snap else None,
            restore_files=snap.files if snap else None,
            home_limit=ex.home_limit,
            cleanup_slack=cleanup_slack,
            quota_room=quota_room,
            report_key=ex.report_key,
            starter=(
                f"{ws.course} ({starter.workspace.owner}/{starter.workspace.name} #{starter.number})"
                if starter
                else None
            ),
        )


def _what_to_restore(session, ws, choice, checkpoint: str | None) -> tuple:
    """(parent, the execution whose output is restored, the course's starter if that is it) of a new
    execution of `ws`; a run from `now` restores its checkpoint, no execution's output."""
    parent, source = plan_continuation(session, ws, choice)
    if checkpoint is not None:
        source = None
    starter = courses.starter_for(session, ws) if source is None and choice not in ("fresh", "now") else None
    return parent, starter or source, starter


def _take_kind(ex: Execution, task: str | None, serve: bool, cleanup: bool) -> None:
    """A task's command (workspace/tasks.py) instead of the server; a deployment's replica (#33) serves with
    it, with no maximum run time; cleanup mode."""
    ex.cleanup = cleanup
    if task is not None:
        ex.kind, ex.command = "serve" if serve else "task", task
    if serve:
        ex.max_runtime = None


def _take_type(ex: Execution, resource_type) -> None:
    """What an execution takes from its resource type (None: none): its name, run time, cores, home size."""
    if resource_type is not None:
        ex.resource_type, ex.max_runtime = resource_type.name, resource_type.max_runtime
        ex.cpu, ex.home_limit = resource_type.cpu, resource_type.home_size


def checkpoint(db: Database, store_of: Callable[[str | None], HomeStore], owner: str, name: str) -> str:
    """A read-only snapshot of the open workspace's home as it is now, for a run beside it (#31): saved
    from its live home (a btrfs snapshot: atomic and instant; the copy store copies it), which the
    workspace goes on using undisturbed. Recorded as a snapshot of the workspace's node, no execution's
    output; `discard_checkpoint` removes it once the run's home is restored. Its key; the user's 409
    when the workspace is not open."""
    with db.session() as s:
        ws = find_workspace(s, owner, name)
        open_ex = ws.latest if ws is not None else None
        if open_ex is None or open_ex.state != "running":
            raise not_open(name)
        live, node = open_ex.live_key, open_ex.node
        source = nearest_output(open_ex)
        parent = source.snapshot.key if source is not None and source.snapshot is not None else None
    store = store_of(node)
    key = f"c{uuid.uuid4().hex}"
    store.save(live, key, parent)
    with db.session() as s:
        s.add(Snapshot(key=key, backend=store.kind, node=node or NODE))
    return key


def discard_checkpoint(
    db: Database, store_of: Callable[[str | None], HomeStore], key: str, run_store: HomeStore
) -> None:
    """The snapshot `checkpoint` took, once the run's home holds it (or the run failed before): from the
    workspace's node's store, and from the run's, where a run placed on another node received it."""
    with db.session() as s:
        snap = s.scalar(select(Snapshot).where(Snapshot.key == key))
        if snap is None:
            return
        snap.deleted = snap.deleted or utcnow()
        node = snap.node
    for store in {id(st): st for st in (store_of(node), run_store)}.values():
        store.delete(key)


def transition(db: Database, execution_id: int, state: str, message: str | None = None, **fields) -> None:
    with db.session() as s:
        ex = s.get(Execution, execution_id)
        for key, value in fields.items():
            setattr(ex, key, value)
        if ex.state != state:
            ex.to(s, state, message)


def record_stop_reason(
    db: Database,
    owner: str,
    name: str,
    reason: str,
    detail: str | None,
    execution_id: int | None = None,
    server: str | None = None,
) -> int | None:
    """Say why the running execution of a workspace is about to be stopped (an admin, the culler).

    Recorded before the stop is asked for, so the save keeps it; returns the
    execution's id (None: nothing runs). With `reason=None` it is taken back
    (the stop was refused).
    """
    with db.session() as s:
        if execution_id is None:
            ws = find_workspace(s, owner, name)
            # the workspace's own server (`name`), or a run's beside it (`server`, #31)
            running = [e for e in ws.executions if e.state == "running" and e.server == server] if ws else []
            if not running:
                return None
            ex = running[-1]
        else:
            ex = s.get(Execution, execution_id)
        if ex is None or ex.state != "running":
            return None
        ex.stop_reason, ex.stop_detail = reason, detail
        return ex.id


def record_log(db: Database, execution_id: int, exit_code: int | None, log_bytes: int, log_kept: int) -> None:
    """An execution's exit code and log figures, recorded before its home is saved."""
    with db.session() as s:
        ex = s.get(Execution, execution_id)
        if ex is not None:
            ex.exit_code, ex.log_bytes, ex.log_kept = exit_code, log_bytes, log_kept


def log_kept(db: Database, execution_id: int) -> bool:
    """Whether an execution's log and exit code are recorded (its container may be removed by two paths)."""
    with db.session() as s:
        ex = s.get(Execution, execution_id)
        return ex is not None and ex.log_kept is not None


def task_ending(db: Database, execution_id: int) -> str:
    """The stop detail of a task whose command ended: its exit code and how long it ran."""
    from workspace.tasks import describe_end

    with db.session() as s:
        ex = s.get(Execution, execution_id)
        seconds = (utcnow() - ex.started).total_seconds() if ex is not None and ex.started else None
        return describe_end(ex.exit_code if ex is not None else None, seconds)


def kind_of(db: Database, execution_id: int) -> tuple[str, dt.datetime | None]:
    """(kind, started) of an execution."""
    with db.session() as s:
        ex = s.get(Execution, execution_id)
        return (ex.kind or "workspace", ex.started) if ex is not None else ("workspace", None)


def state_of(db: Database, execution_id: int) -> str:
    with db.session() as s:
        return s.get(Execution, execution_id).state


def restore(db: Database, store: HomeStore, plan: StartPlan, progress: Callable[[Transfer], None] | None) -> Transfer:
    transition(db, plan.execution_id, "restoring", plan.describe())
    stats = store.restore(plan.restore_snapshot, plan.live_key, progress)
    if plan.restore_snapshot and not stats.files and plan.restore_files is not None:
        # a snapshotting backend shares everything: report the home's size
        stats.files, stats.bytes, stats.shared_files = plan.restore_files, plan.restore_bytes or 0, plan.restore_files
    with db.session() as s:
        ex = s.get(Execution, plan.execution_id)
        ex.restore_bytes, ex.restore_files, ex.restore_seconds = stats.bytes, stats.files, round(stats.seconds, 3)
    return stats


def limit_home(db: Database, store: HomeStore, plan: StartPlan) -> HomeLimit:
    """Set and record the restored home's size limit: the resource type's, or its size now plus what the
    owner's storage quota has left when that is less (a running home never grows past the quota, so one
    student cannot fill the store), or in cleanup mode its size now (plus slack). A home already larger
    than its type's limit may not grow (it is never cut).
    """
    limit = home_limit(store, plan)
    with db.session() as s:
        s.get(Execution, plan.execution_id).home_limit = limit.bytes
    return limit


def discard(
    db: Database,
    store: HomeStore,
    execution_id: int,
    state: str,
    message: str,
    stop_reason: str | None = None,
    error: str | None = None,
) -> None:
    """End an execution that never ran: its live home (if restored) is dropped, nothing is saved."""
    with db.session() as s:
        ex = s.get(Execution, execution_id)
        live_key = ex.live_key
        if ex.state in ("stopped", "failed"):
            return
        ex.stop_reason, ex.stop_detail, ex.error = stop_reason, message, error
        ex.to(s, state, message)
    store.release(live_key)


def end_replica(db: Database, store: HomeStore, execution_id: int, reason: str, detail: str | None) -> None:
    """End a deployment's replica (#33): nothing of its home is saved (what it serves is mounted read-only,
    what it wrote is scratch), so its live home is dropped and the execution is stopped."""
    with db.session() as s:
        ex = s.get(Execution, execution_id)
        if ex.state in ("stopped", "failed"):
            return
        live_key = ex.live_key
        ex.stop_reason, ex.stop_detail = reason, detail
        ex.to(s, "stopped", detail)
    store.release(live_key)


class _SaveProgress:
    """Writes a save's figures into the execution record, at most twice a second,
    and renews the lease, so that a save longer than the lease is not taken over."""

    def __init__(self, db: Database, execution_id: int, owner: str):
        self.db, self.execution_id, self.owner, self.last = db, execution_id, owner, 0.0
        self.lock = threading.Lock()

    def __call__(self, t: Transfer) -> None:
        now = time.monotonic()
        if now - self.last < 0.5 and t.files != t.files_total:
            return
        self.last = now
        figures = {
            "files": t.files,
            "files_total": t.files_total,
            "bytes": t.bytes,
            "bytes_total": t.bytes_total,
            "files_per_s": round(t.files_per_s, 1),
            "mb_per_s": round(t.mb_per_s, 2),
            "eta_s": None if t.eta_s is None else round(t.eta_s, 1),
            "text": t.describe(),
        }
        with self.lock, self.db.session() as s:
            s.get(Execution, self.execution_id).save_progress = figures
            claim(s, self.execution_id, self.owner, LEASE)


def save(
    db: Database, store: HomeStore, execution_id: int, stop_reason: str | None, detail: str | None, owner: str = PROCESS
) -> str:
    """Save an execution's live home as its output and end it; returns the final state.

    Idempotent: called again after a crash or a failed save, it finishes the job.
    """
    with db.session() as s:
        _forget_dead_owner(s, execution_id)
        if not claim(s, execution_id, owner, LEASE):
            log.info("execution %s is being saved by another process", execution_id)
            return s.get(Execution, execution_id).state
        ex = s.get(Execution, execution_id)
        if ex.state in ("stopped", "failed"):
            release_claim(s, execution_id, owner)
            return ex.state
        live_key, snapshot_key = ex.live_key, ex.snapshot_key
        parent = ex.restored_from.snapshot.key if ex.restored_from and ex.restored_from.has_output else None
        if stop_reason and not ex.stop_reason:
            ex.stop_reason, ex.stop_detail = stop_reason, detail
        label = f"#{ex.number}"
        ex.error = None
        ex.to(s, "saving", SAVING)
    try:
        if store.has_snapshot(snapshot_key):
            stats = Transfer()  # saved before a crash, not yet recorded
        elif not store.has_live(live_key):
            raise HomeStoreError(f"the live home of {label} is missing")
        else:
            stats = store.save(live_key, snapshot_key, parent, _SaveProgress(db, execution_id, owner))
    except (HomeStoreError, OSError) as e:
        message = SAVE_FAILED_FULL if isinstance(e, StoreFullError) else SAVE_FAILED
        log.error("save of execution %s failed: %s", execution_id, e)
        with db.session() as s:
            ex = s.get(Execution, execution_id)
            ex.error = message
            ex.to(s, "save_failed", str(e))
            release_claim(s, execution_id, owner)
        return "save_failed"

    with db.session() as s:
        ex = s.get(Execution, execution_id)
        ex.snapshot = s.scalar(select(Snapshot).where(Snapshot.key == snapshot_key)) or Snapshot(
            key=snapshot_key, backend=store.kind, node=ex.node or NODE
        )
        ex.save_bytes, ex.save_files, ex.save_seconds = stats.bytes, stats.files, round(stats.seconds, 3)
        ex.save_progress = None
        ex.to(s, "stopped", ex.stop_detail)
        release_claim(s, execution_id, owner)
    # the snapshot is durable and recorded: the live home may go
    store.release(live_key)
    return "stopped"


def _forget_dead_owner(session, execution_id: int) -> None:
    """Drop a lease held by a process of this host that no longer exists (a crashed hub)."""
    ex = session.get(Execution, execution_id)
    if process.gone(ex.lease_owner):
        log.warning("taking over execution %s from %s, which is gone", execution_id, ex.lease_owner)
        ex.lease_owner, ex.lease_until = None, None
        session.flush()


def record_snapshot_size(db: Database, store: HomeStore, execution_id: int) -> None:
    """Measure an execution's snapshot (bytes, files) for the record; a walk, so run it after the stop."""
    with db.session() as s:
        ex = s.get(Execution, execution_id)
        if not ex.has_output or ex.snapshot.files is not None:
            return
        key = ex.snapshot.key
    size, files = store.measure(key)
    with db.session() as s:
        snap = s.scalar(select(Snapshot).where(Snapshot.key == key))
        snap.bytes, snap.files = size, files


def finish_pending_saves(
    db: Database,
    store: HomeStore,
    owner: str | None = None,
    name: str | None = None,
    store_of: Callable[[str | None], HomeStore] | None = None,
    record: HomeStore | None = None,
) -> list[int]:
    """Retry the saves that failed or were interrupted (a crash, a full disk); return their ids.

    `store_of(node)`: the store of an execution's node, where homes are on several (a cluster); `record`:
    the store of record, where each output saved here is sent at once (as a stop's save sends its own)."""
    with db.session() as s:
        q = select(Execution.id, Execution.node).where(Execution.state.in_(("saving", "save_failed")))
        if owner is not None:
            ws = find_workspace(s, owner, name)
            if ws is None:
                return []
            q = q.where(Execution.workspace_id == ws.id)
        pending = list(s.execute(q))
    done = []
    for execution_id, node in pending:
        where = store_of(node) if store_of is not None else store
        if save(db, where, execution_id, None, None) == "stopped":
            record_snapshot_size(db, where, execution_id)
            # sent at once, as a stop's save sends its own (found by the chaos test: a save retried after
            # a store agent's fault stayed on one node until the service's next round)
            key = snapshot_key_of(db, execution_id)
            if record is not None and key:
                replicas.replicate(db, where, record, key)
            done.append(execution_id)
    return done


def snapshot_key_of(db: Database, execution_id: int) -> str | None:
    with db.session() as s:
        ex = s.get(Execution, execution_id)
        return ex.snapshot.key if ex is not None and ex.has_output else None
