"""Workspaces, executions and snapshots: the records, the state machine, the lineage.

Every start of a workspace is a new execution, numbered #1, #2 ... per workspace. An execution
continues from a parent (or starts fresh), restores the nearest output in the parent's lineage, and
leaves a snapshot (its output) when it stops.

    queued -> preparing -> pulling -> restoring -> running -> saving -> stopped
                                                             saving -> save_failed -> saving
    any state before running -> failed (nothing ran) or stopped (cancelled); a deployment's replica
    (#33) saves nothing: running -> stopped

Every transition is stored with its time (`Transition`).
"""

from __future__ import annotations

import datetime as dt
import re
import secrets
import uuid

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Integer,
    String,
    Text,
    UniqueConstraint,
    select,
    update,
)
from sqlalchemy.orm import Mapped, Session, mapped_column, relationship

from workspace.db import Base, Database, iso, utcnow
from workspace.errors import UserError
from workspace.i18n import N_
from workspace.vault import Sealed

STATES = ("queued", "preparing", "pulling", "restoring", "running", "saving", "save_failed", "stopped", "failed")
ACTIVE = ("queued", "preparing", "pulling", "restoring", "running")
FINAL = ("stopped", "failed")
# not finished: it runs, waits, or its home is not saved yet
UNFINISHED = ACTIVE + ("saving", "save_failed")
# `completed`: a task whose command ended by itself (its exit code says how)
STOP_REASONS = ("user", "idle", "max_runtime", "admin", "error", "lost", "completed")
# The words the pages show for a state (an execution's, or a workspace's: new, starting, stopping) and a
# stop reason, to be translated there; the records and the API keep the codes.
WORDS = {
    "new": N_("new"),
    "starting": N_("starting"),
    "stopping": N_("stopping"),
    "queued": N_("queued"),
    "preparing": N_("preparing"),
    "pulling": N_("pulling"),
    "restoring": N_("restoring"),
    "running": N_("running"),
    "saving": N_("saving"),
    "save_failed": N_("save failed"),
    "stopped": N_("stopped"),
    "failed": N_("failed"),
    "user": N_("user"),
    "idle": N_("idle"),
    "max_runtime": N_("maximum run time"),
    "admin": N_("admin"),
    "error": N_("error"),
    "lost": N_("lost"),
    "completed": N_("completed"),
}


def word(code: str | None) -> str:
    """The English word for a state or stop reason (what `_()` translates); an unknown code as it is."""
    return WORDS.get(code, code or "")


# a workspace's name is its JupyterHub server name: what `get_or_create_spawner` and the proxy accept
WORKSPACE_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,62}$")
# a run beside a workspace (#31): a JupyterHub server of its own, named so (Execution.server); no workspace is
RUN_SERVER = re.compile(r"^run-[0-9a-f]{12}$")
# the hidden workspace of a deployment (#33), whose executions its replicas are; and the names no user gives
DEPLOY_WORKSPACE = re.compile(r"^deploy-[0-9a-f]{12}$")
RESERVED_NAME = re.compile(r"^(run|serve|deploy)-[0-9a-f]{12}$")


def new_run_server() -> str:
    """A fresh name for a run's own JupyterHub server."""
    return f"run-{secrets.token_hex(6)}"


TRANSITIONS: dict[str, set[str]] = {
    "queued": {"preparing", "failed", "stopped"},
    "preparing": {"pulling", "restoring", "failed", "stopped"},
    "pulling": {"restoring", "failed", "stopped"},
    "restoring": {"running", "failed", "stopped", "saving"},
    "running": {"saving", "failed", "stopped"},
    "saving": {"stopped", "save_failed", "saving"},
    "save_failed": {"saving"},
    "stopped": set(),
    "failed": set(),
}


class InvalidTransition(Exception):
    pass


class Workspace(Base):
    __tablename__ = "workspaces"
    __table_args__ = (UniqueConstraint("owner", "name"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    owner: Mapped[str] = mapped_column(String(255), index=True)
    name: Mapped[str] = mapped_column(String(255))
    created: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow)
    # the course (JupyterHub group) it was provisioned for: its first start restores the course's starter
    course: Mapped[str | None] = mapped_column(String(255), nullable=True)

    executions: Mapped[list["Execution"]] = relationship(
        back_populates="workspace", order_by="Execution.number", foreign_keys="Execution.workspace_id"
    )

    @property
    def latest(self) -> "Execution | None":
        """The newest execution of the workspace's own server (None: never started); runs beside it (#31)
        are branches: they never make it look running, and "latest" never continues from one."""
        return max((e for e in self.executions if e.server is None), key=lambda e: e.number, default=None)

    def summary(self) -> dict:
        current = self.latest
        return {
            "name": self.name,
            "owner": self.owner,
            "created": iso(self.created),
            "executions": len(self.executions),
            "current": {"number": current.number, "state": current.state} if current else None,
        }


class Snapshot(Base):
    """An immutable saved home (the output of one execution)."""

    __tablename__ = "snapshots"

    id: Mapped[int] = mapped_column(primary_key=True)
    key: Mapped[str] = mapped_column(String(64), unique=True)
    backend: Mapped[str] = mapped_column(String(32))
    bytes: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    files: Mapped[int | None] = mapped_column(Integer, nullable=True)
    created: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow)
    deleted: Mapped[dt.datetime | None] = mapped_column(DateTime, nullable=True)
    # where the output lives (the node whose store saved it) and its copy in the store of record
    node: Mapped[str | None] = mapped_column(String(255), nullable=True)
    replicated_at: Mapped[dt.datetime | None] = mapped_column(DateTime, nullable=True, index=True)
    replica_bytes: Mapped[int | None] = mapped_column(BigInteger, nullable=True)  # what the send carried
    replica_seconds: Mapped[float | None] = mapped_column(Float, nullable=True)  # how long it took
    replica_error: Mapped[str | None] = mapped_column(Text, nullable=True)  # the last failure, until one succeeds
    # the send in progress: who (host:pid) and until when its lease holds (workspace/replicas.py)
    replica_sender: Mapped[str | None] = mapped_column(String(255), nullable=True)
    replica_until: Mapped[dt.datetime | None] = mapped_column(DateTime, nullable=True)


class Execution(Base):
    __tablename__ = "executions"
    __table_args__ = (UniqueConstraint("workspace_id", "number"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    workspace_id: Mapped[int] = mapped_column(ForeignKey("workspaces.id"), index=True)
    number: Mapped[int] = mapped_column(Integer)
    # what the user asked to continue from, and what was actually restored
    parent_id: Mapped[int | None] = mapped_column(ForeignKey("executions.id"), nullable=True)
    restored_from_id: Mapped[int | None] = mapped_column(ForeignKey("executions.id"), nullable=True)
    state: Mapped[str] = mapped_column(String(32), default="queued", index=True)
    stop_reason: Mapped[str | None] = mapped_column(String(32), nullable=True)
    stop_detail: Mapped[str | None] = mapped_column(Text, nullable=True)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    image: Mapped[str | None] = mapped_column(String(512), nullable=True)
    container_id: Mapped[str | None] = mapped_column(String(128), nullable=True)
    node: Mapped[str | None] = mapped_column(String(255), nullable=True)
    live_key: Mapped[str] = mapped_column(String(64), unique=True)
    # the secret the culler shows the workspace's extension (never a hub token):
    # it is the workspace's own, in its environment; never in an API answer
    report_key: Mapped[str | None] = mapped_column(Sealed, nullable=True)  # sealed at rest (workspace/vault.py)
    # where its sshd answers the SSH gateway (host:port; the spawner's record, never the workspace's word)
    ssh_address: Mapped[str | None] = mapped_column(String(255), nullable=True)
    snapshot_key: Mapped[str] = mapped_column(String(64), unique=True)
    snapshot_id: Mapped[int | None] = mapped_column(ForeignKey("snapshots.id"), nullable=True)
    restore_bytes: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    restore_files: Mapped[int | None] = mapped_column(Integer, nullable=True)
    restore_seconds: Mapped[float | None] = mapped_column(Float, nullable=True)
    save_bytes: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    save_files: Mapped[int | None] = mapped_column(Integer, nullable=True)
    save_seconds: Mapped[float | None] = mapped_column(Float, nullable=True)
    # dataset versions mounted: [{"slot", "mount", "ref", "version_id", "key"}]
    datasets: Mapped[list | None] = mapped_column(JSON, nullable=True)
    # the resource type it runs as, the GPU device IDs it holds (on `node`), its maximum run time (s)
    resource_type: Mapped[str | None] = mapped_column(String(64), nullable=True, index=True)
    gpu_ids: Mapped[list | None] = mapped_column(JSON, nullable=True)
    max_runtime: Mapped[float | None] = mapped_column(Float, nullable=True)
    # the CPU cores it was given, its home size limit (bytes), and whether it runs in cleanup mode
    cpu: Mapped[float | None] = mapped_column(Float, nullable=True)
    home_limit: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    # how many files (and other entries) its home may hold; the culler counts, the next start enforces
    home_files: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    cleanup: Mapped[bool | None] = mapped_column(Boolean, nullable=True)
    # the language it was started in: what the culler says to it and records of its stop are said in it
    locale: Mapped[str | None] = mapped_column(String(16), nullable=True)
    # live figures of a save in progress (files, bytes, rates, ETA)
    save_progress: Mapped[dict | None] = mapped_column(JSON, nullable=True)
    # who is working on the execution's home (a save may be finished by another process)
    lease_owner: Mapped[str | None] = mapped_column(String(128), nullable=True)
    lease_until: Mapped[dt.datetime | None] = mapped_column(DateTime, nullable=True)
    # kind: workspace, task (#17: runs `command` to completion, tasks.py) or serve (a deployment's replica, #33);
    # a command's exit code, and how many bytes of log it wrote and the hub kept
    kind: Mapped[str] = mapped_column(String(16), default="workspace", server_default="workspace")
    command: Mapped[str | None] = mapped_column(Text, nullable=True)
    exit_code: Mapped[int | None] = mapped_column(Integer, nullable=True)
    log_bytes: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    log_kept: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    # a run beside the workspace (#31): its own JupyterHub server's name (RUN_SERVER); None: the workspace's
    server: Mapped[str | None] = mapped_column(String(64), nullable=True, index=True)
    server_gone: Mapped[dt.datetime | None] = mapped_column(DateTime, nullable=True)  # its hub record removed
    # when a task's end was told to its owner's workspaces and webhook (workspace/task_news.py)
    news_told: Mapped[dt.datetime | None] = mapped_column(DateTime, nullable=True)
    created: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow)
    started: Mapped[dt.datetime | None] = mapped_column(DateTime, nullable=True)
    stopped: Mapped[dt.datetime | None] = mapped_column(DateTime, nullable=True)
    # its start-up (#30): admitted (left the queue) and ready (its server answered; a task: its container
    # ran). Between the two it holds one of its node's start-up slots (workspace/limits/queue.py).
    admitted: Mapped[dt.datetime | None] = mapped_column(DateTime, nullable=True)
    ready: Mapped[dt.datetime | None] = mapped_column(DateTime, nullable=True, index=True)

    workspace: Mapped[Workspace] = relationship(back_populates="executions", foreign_keys=[workspace_id])
    parent: Mapped["Execution | None"] = relationship(remote_side=[id], foreign_keys=[parent_id])
    restored_from: Mapped["Execution | None"] = relationship(remote_side=[id], foreign_keys=[restored_from_id])
    snapshot: Mapped[Snapshot | None] = relationship(foreign_keys=[snapshot_id])
    transitions: Mapped[list["Transition"]] = relationship(back_populates="execution", order_by="Transition.id")

    @property
    def from_starter(self) -> bool:
        """Whether what it restored is another workspace's output (a course's starter)."""
        return self.restored_from is not None and self.restored_from.workspace_id != self.workspace_id

    @property
    def has_output(self) -> bool:
        return self.snapshot is not None and self.snapshot.deleted is None

    def to(self, session: Session, state: str, message: str | None = None) -> None:
        """Move to `state`, storing the transition with its time."""
        if state not in TRANSITIONS.get(self.state, set()):
            raise InvalidTransition(f"execution #{self.number}: {self.state} -> {state} is not allowed")
        now = utcnow()
        self.state = state
        if state == "running" and self.started is None:
            self.started = now
        if state == "preparing" and self.admitted is None:
            self.admitted = now
        if state in FINAL:
            self.stopped = now
        session.add(Transition(execution=self, state=state, at=now, message=message))

    def as_dict(self) -> dict:
        def stats(prefix):
            b, f, s = (getattr(self, f"{prefix}_{k}") for k in ("bytes", "files", "seconds"))
            return None if b is None and f is None and s is None else {"bytes": b, "files": f, "seconds": s}

        return {
            "number": self.number,
            "kind": self.kind or "workspace",
            "beside": self.server is not None,  # a run beside its workspace (#31): a branch of its lineage
            "server": self.server,  # a run's own JupyterHub server (None: the workspace's)
            "state": self.state,
            "parent": self.parent.number if self.parent else None,
            "restored_from": self.restored_from.number if self.restored_from and not self.from_starter else None,
            # a course's starter (another user's output) restored into a first start
            "starter": (
                f"{self.restored_from.workspace.owner}/{self.restored_from.workspace.name} #{self.restored_from.number}"
            )
            if self.from_starter
            else None,
            "command": self.command,
            "exit_code": self.exit_code,
            "log": {"bytes": self.log_bytes, "kept": self.log_kept} if self.log_kept is not None else None,
            "stop_reason": self.stop_reason,
            "stop_detail": self.stop_detail,
            "error": self.error,
            "image": self.image,
            "resource_type": self.resource_type,
            "gpu_ids": self.gpu_ids or [],
            "node": self.node,  # where it runs (ran)
            "cpu": self.cpu,
            "home_limit": self.home_limit,
            "cleanup": bool(self.cleanup),
            "datasets": [{"mount": d["mount"], "ref": d["ref"]} for d in self.datasets or []],
            "started": iso(self.started),
            "ready": iso(self.ready),
            "stopped": iso(self.stopped),
            "created": iso(self.created),
            "has_output": self.has_output,
            "snapshot_bytes": self.snapshot.bytes if self.has_output else None,
            "snapshot_files": self.snapshot.files if self.has_output else None,
            # where the output lives, and when it reached the store of record (None: not yet, or none configured)
            "output_node": self.snapshot.node if self.has_output else None,
            "replicated": iso(self.snapshot.replicated_at) if self.has_output else None,
            "restore": stats("restore"),
            "save": stats("save"),
            "save_progress": self.save_progress if self.state == "saving" else None,
            "transitions": [{"state": t.state, "at": iso(t.at), "message": t.message} for t in self.transitions],
        }


class UsageSample(Base):
    """CPU, memory and GPU use of a running execution at one moment (the culler takes one a minute)."""

    __tablename__ = "usage_samples"

    id: Mapped[int] = mapped_column(primary_key=True)
    execution_id: Mapped[int] = mapped_column(ForeignKey("executions.id"), index=True)
    at: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow)
    # average since the previous sample, percent of one core
    cpu_percent: Mapped[float | None] = mapped_column(Float, nullable=True)
    memory_bytes: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    gpu_percent: Mapped[float | None] = mapped_column(Float, nullable=True)
    gpu_memory_bytes: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    # was a browser attached
    browser: Mapped[bool | None] = mapped_column(Boolean, nullable=True)
    # bytes the live home takes (against the execution's home_limit)
    home_bytes: Mapped[int | None] = mapped_column(BigInteger, nullable=True)

    def as_dict(self) -> dict:
        return {
            "at": iso(self.at),
            "cpu_percent": self.cpu_percent,
            "memory_bytes": self.memory_bytes,
            "gpu_percent": self.gpu_percent,
            "gpu_memory_bytes": self.gpu_memory_bytes,
            "browser": self.browser,
            "home_bytes": self.home_bytes,
        }


class Transition(Base):
    __tablename__ = "transitions"

    id: Mapped[int] = mapped_column(primary_key=True)
    execution_id: Mapped[int] = mapped_column(ForeignKey("executions.id"), index=True)
    state: Mapped[str] = mapped_column(String(32))
    at: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow)
    message: Mapped[str | None] = mapped_column(Text, nullable=True)

    execution: Mapped[Execution] = relationship(back_populates="transitions")


# -- queries ------------------------------------------------------------------------


def get_or_create_workspace(session: Session, owner: str, name: str) -> Workspace:
    ws = session.scalar(select(Workspace).where(Workspace.owner == owner, Workspace.name == name))
    if ws is None:
        ws = Workspace(owner=owner, name=name)
        session.add(ws)
        session.flush()
    return ws


def find_workspace(session: Session, owner: str, name: str) -> Workspace | None:
    return session.scalar(select(Workspace).where(Workspace.owner == owner, Workspace.name == name))


def execution_by_number(session: Session, ws: Workspace, number: int) -> Execution | None:
    if not 0 < number < 2**31:  # no such execution; and past the column's range the database would raise
        return None
    return session.scalar(select(Execution).where(Execution.workspace_id == ws.id, Execution.number == number))


def workspaces_of(db: Database, owner: str, latest_in_full: bool = False) -> list[dict]:
    """The owner's workspaces by name, each its `summary()`; with `latest_in_full` also "latest", the newest
    execution's `as_dict()` (None: never started) (blocking)."""
    with db.session() as s:
        out = []
        for ws in s.scalars(select(Workspace).where(Workspace.owner == owner).order_by(Workspace.name)):
            if DEPLOY_WORKSPACE.match(ws.name):
                continue  # a deployment's (#33): its page shows its replicas
            out.append(ws.summary())
            if latest_in_full:
                out[-1]["latest"] = ws.latest.as_dict() if ws.latest else None
        return out


def history(db: Database, owner: str, name: str) -> list[dict] | None:
    """Every execution of a workspace, oldest first, as `as_dict()`; None when there is no such workspace
    (blocking)."""
    with db.session() as s:
        ws = find_workspace(s, owner, name)
        return None if ws is None else [e.as_dict() for e in sorted(ws.executions, key=lambda e: e.number)]


def not_open(name: str) -> UserError:  # the user's 409 for a run from `now` (#31) beside a closed workspace
    return UserError(
        409,
        "“{name}” is not open, so it has no home “as it is now”; run from “latest” or an execution's number.",
        name=name,
    )


def no_such_workspace(name: str) -> UserError:
    return UserError(404, "There is no workspace “{name}”.", name=name)


def _numbered(session: Session, ws: Workspace | None, name: str, number: int) -> Execution:
    ex = execution_by_number(session, ws, number) if ws is not None else None
    if ex is None:
        raise UserError(404, "Workspace “{name}” has no execution #{number}.", name=name, number=number)
    return ex


def execution_of(db: Database, owner: str, name: str, number: int) -> dict:
    """One execution as `as_dict()` (its live save progress too); the user's 404 (blocking)."""
    with db.session() as s:
        ws = find_workspace(s, owner, name)
        if ws is None:
            raise no_such_workspace(name)
        return _numbered(s, ws, name, number).as_dict()


def usage_of(db: Database, owner: str, name: str, number: int) -> dict:
    """The usage samples of one execution (one a minute while it ran), oldest first; the user's 404 (blocking)."""
    with db.session() as s:
        ex = _numbered(s, find_workspace(s, owner, name), name, number)
        rows = s.scalars(select(UsageSample).where(UsageSample.execution_id == ex.id).order_by(UsageSample.at))
        return {"number": ex.number, "state": ex.state, "samples": [r.as_dict() for r in rows]}


def latest_sample(session: Session, execution_id: int) -> UsageSample | None:
    """An execution's newest usage sample (None: none taken yet)."""
    return session.scalars(
        select(UsageSample).where(UsageSample.execution_id == execution_id).order_by(UsageSample.at.desc()).limit(1)
    ).first()


def number_of(text: str) -> int:
    """An execution's (or version's) number from a URL's `\\d+`: 0, which none has (the user's 404), when it
    is too long to be one, rather than Python's error on a 4,300-digit int."""
    return int(text) if len(text) <= 10 else 0


def check_workspace_name(name: str) -> str:
    """A workspace's name, or the user's 400 saying what a name may be."""
    if RESERVED_NAME.match(name):
        raise UserError(400, "“{name}” is a name the platform gives its own servers; choose another name.", name=name)
    if not WORKSPACE_NAME.fullmatch(name):
        raise UserError(
            400,
            "“{name}” cannot be a workspace name: use 1–63 lower-case letters, digits, “-”, “_” "
            "or “.”, starting with a letter or digit (like “thesis” or “cs101-lab2”).",
            name=name,
        )
    return name


def latest_with_output(session: Session, ws: Workspace) -> Execution | None:
    """The newest of the workspace's own executions with output (never a run beside it: see `latest`)."""
    for ex in sorted(ws.executions, key=lambda e: e.number, reverse=True):
        if ex.has_output and ex.server is None:
            return ex
    return None


def nearest_output(execution: Execution | None) -> Execution | None:
    """The execution itself if it has output, else its nearest ancestor with output."""
    seen = set()
    while execution is not None and execution.id not in seen:
        if execution.has_output:
            return execution
        seen.add(execution.id)
        execution = execution.parent
    return None


def parse_continue_from(value) -> str | int:
    """`latest` (default), `fresh`, `now` (a run beside an open workspace: its home as it is now, #31), or an
    execution number; anything else is a 400."""
    if value is None or value == "":
        return "latest"
    if isinstance(value, bool):
        raise _bad_continue(value)
    if isinstance(value, int):
        if value < 1:
            raise _bad_continue(value)
        return value
    if isinstance(value, str):
        v = value.strip().lower().lstrip("#")
        if v in ("latest", "fresh", "now"):
            return v
        if v.isdigit() and int(v) >= 1:
            return int(v)
    raise _bad_continue(value)


def _bad_continue(value) -> UserError:
    return UserError(
        400,
        "“Continue from” must be “latest”, “fresh” or the number of an earlier execution "
        "of this workspace (like 3), not {value!r}.",
        value=value,
    )


def plan_continuation(session: Session, ws: Workspace, choice: str | int) -> tuple[Execution | None, Execution | None]:
    """(parent, restore_from) for a new execution of `ws`.

    `parent` is what the user chose; `restore_from` the execution whose output
    is restored (the parent or its nearest ancestor with output), or None for
    an empty home.
    """
    if choice == "fresh":
        return None, None
    if choice == "now":  # a run from the open workspace's home: its record's parent (the home: a checkpoint)
        return ws.latest, nearest_output(ws.latest)
    if choice == "latest":
        latest = latest_with_output(session, ws)
        if latest is None:
            # no output yet: continue the lineage of the newest execution, if any
            return ws.latest, nearest_output(ws.latest)
        return latest, latest
    parent = execution_by_number(session, ws, choice)
    if parent is None:
        numbers = sorted(e.number for e in ws.executions)
        if numbers:
            raise UserError(
                400,
                "Workspace “{name}” has no execution #{number}. It has executions {numbers}.",
                name=ws.name,
                number=choice,
                numbers=_ranges(numbers),
            )
        raise UserError(
            400, "Workspace “{name}” has no execution #{number}. It has no executions yet.", name=ws.name, number=choice
        )
    return parent, nearest_output(parent)


def _ranges(numbers: list[int]) -> str:
    parts, start = [], None
    for i, n in enumerate(numbers):
        if start is None:
            start = n
        if i + 1 == len(numbers) or numbers[i + 1] != n + 1:
            parts.append(f"#{start}" if start == n else f"#{start}–#{n}")
            start = None
    return ", ".join(parts)


def new_execution(
    session: Session, ws: Workspace, parent: Execution | None, restore_from: Execution | None, image: str | None = None
) -> Execution:
    number = (max((e.number for e in ws.executions), default=0)) + 1
    token = uuid.uuid4().hex
    ex = Execution(
        workspace=ws,
        number=number,
        parent=parent,
        restored_from=restore_from,
        image=image,
        state="queued",
        live_key=f"x{token}",
        snapshot_key=f"s{token}",
        report_key=secrets.token_urlsafe(32),
    )
    session.add(ex)
    session.add(Transition(execution=ex, state="queued", at=utcnow()))
    session.flush()
    return ex


# -- leases: one process at a time works on an execution's home ------------------


def claim(session: Session, execution_id: int, owner: str, ttl: dt.timedelta) -> bool:
    """Take (or renew) the lease on an execution; False if another owner holds it."""
    now = utcnow()
    result = session.execute(
        update(Execution)
        .where(Execution.id == execution_id)
        .where((Execution.lease_until.is_(None)) | (Execution.lease_until < now) | (Execution.lease_owner == owner))
        .values(lease_owner=owner, lease_until=now + ttl)
    )
    session.flush()
    return result.rowcount == 1


def release_claim(session: Session, execution_id: int, owner: str) -> None:
    session.execute(
        update(Execution)
        .where(Execution.id == execution_id, Execution.lease_owner == owner)
        .values(lease_owner=None, lease_until=None)
    )
