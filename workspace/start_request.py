"""What one start asks for, checked once; and what that start has set up.

A start's options (`user_options`: `continue_from`, `datasets`,
`resource_type`, `image`, `cleanup`, with a course's defaults under them) are
checked in the spawn request itself (the spawner's pre-spawn hook), so bad
input is that request's 400/403 and nothing is recorded. The result is one
`StartRequest`, and `start()` acts on exactly it: the dataset versions that
were checked are the ones mounted, even when a newer version is published in
between, and the resource type is the one whose limits were checked.

`StartState` is what the running start has set up (its execution's number
and report key, its GPUs, mounts, home limit), read by the engine when it
creates the container; a new start begins with a new one.

The checks here block (database, no file system) and run in the spawner's
thread pool.
"""

from __future__ import annotations

from concurrent.futures import Future
from dataclasses import dataclass, field

from sqlalchemy import select

from workspace import datasets, tasks
from workspace.db import Database
from workspace.errors import UserError
from workspace.executions import (
    Execution,
    execution_by_number,
    find_workspace,
    get_or_create_workspace,
    plan_continuation,
)
from workspace.limits import queue
from workspace.limits.resource_types import ResourceType


@dataclass(frozen=True)
class StartRequest:
    """A start's options, checked: what `start()` does."""

    continue_from: str | int  # "latest", "fresh" or an execution number
    resource_type: ResourceType | None  # None: no types configured
    cleanup: bool  # cleanup mode (over quota: only deleting)
    mounts: tuple[dict, ...]  # the dataset versions to mount (datasets.resolve's plan)
    limits: dict  # cpu, memory, pids, home_files of this start (None: no limit)
    storage_warning: str | None = None  # the user's storage is near their quota
    task: str | None = None  # a task's command (workspace/tasks.py); None: a Jupyter server
    quota_room: int | None = None  # bytes left in the owner's storage quota (None: no limit): the home's bound

    @property
    def queued(self) -> bool:
        """Whether the start may have to wait in its type's queue."""
        return self.resource_type is not None and self.resource_type.limited


@dataclass
class StartState:
    """What the current start has set up, for the engine creating its container."""

    number: int | None = None  # the execution's number in its workspace
    report_key: str = ""  # the workspace's secret for the culler's calls
    gpu_ids: list[str] | None = None  # allocated GPUs; None where no types are configured
    mounts: list[tuple[str, str]] = field(default_factory=list)  # (host path, container path), read-only
    home_limit: object = None  # lifecycle.HomeLimit of the live home, once restored
    restore: Future | None = None  # the restore running in a thread
    image_checked: str | None = None  # the image found present (so it is looked up once)
    image_id: str | None = None  # its ID, where an engine runs images by ID (a swarm's nodes)
    ssh_env: dict[str, str] = field(default_factory=dict)  # WORKSPACE_SSH_* (the spawner's ssh_environment)
    task: str | None = None  # the command of a task (None: a server)


def parse_cleanup(value) -> bool:
    """`user_options["cleanup"]`: true or false (a form's "on"), anything else the user's 400."""
    if value in (True, False, None, "", "on", "true", "false", "off"):
        return value in (True, "on", "true")
    raise UserError(400, "“cleanup” must be true or false.")


def parse_task(value, cleanup: bool) -> str | None:
    """`user_options["task"]`: {"command": ...} for a task, absent for a server; else the user's 400."""
    if value is None:
        return None
    if not isinstance(value, dict) or set(value) - {"command"}:
        raise UserError(400, '“task” must be an object with a “command”, e.g. {"command": "python train.py"}.')
    if cleanup:
        raise UserError(400, "Cleanup mode is for deleting files by hand; a task cannot run in it.")
    return tasks.parse_command(value.get("command"))


def parse_resource_type_name(value) -> str | None:
    if value is not None and not isinstance(value, str):
        raise UserError(400, "“resource_type” must be the name of a resource type.")
    return value


# -- checks against the records (blocking) ------------------------------------------


def check_continuation(db: Database, owner: str, name: str, choice) -> None:
    """Raise the user's 400 now if `choice` names no execution of this workspace."""
    if isinstance(choice, int):
        with db.session() as s:
            ws = find_workspace(s, owner, name)
            if ws is None or execution_by_number(s, ws, choice) is None:
                # plan_continuation words the error with the numbers that exist
                plan_continuation(s, ws or get_or_create_workspace(s, owner, name), choice)


def files_to_restore(db: Database, owner: str, name: str, choice) -> int | None:
    """How many files the home a start would restore holds (as measured after its save; None: unknown)."""
    with db.session() as s:
        ws = find_workspace(s, owner, name)
        if ws is None:
            return None
        _, source = plan_continuation(s, ws, choice)
        return source.snapshot.files if source is not None and source.snapshot is not None else None


def check_home_files(db: Database, owner: str, name: str, choice, limit: int | None) -> None:
    """A home saved with more files than its limit starts only in cleanup mode (the user's 403).

    Neither store can stop a running home from making files, so the limit is
    watched while it runs (the culler warns) and enforced here, at the next
    start; nothing saved is ever cut.
    """
    files = files_to_restore(db, owner, name, choice) if limit else None
    if files is not None and files > limit:
        raise UserError(
            403,
            "The home of “{name}” holds {files:,} files, more than the {limit:,} a home may "
            "have. Start it in cleanup mode to delete files, or pack small files into a few "
            "archives (tar, zip, HDF5).",
            name=name,
            files=files,
            limit=limit,
        )


def resolve_datasets(db: Database, refs, user: str, groups: set[str], admin: bool) -> list[dict]:
    """The dataset mount plan for a start, or the user's 400/403."""
    with db.session() as s:
        return datasets.resolve(s, refs, user, groups, admin)


def one_queued_per_user(db: Database, owner: str, name: str, rtype: ResourceType) -> None:
    """A user waits at most once per resource type: a second queued start is the user's 409."""
    with db.session() as s:
        for ex in s.scalars(
            select(Execution).where(Execution.state == "queued", Execution.resource_type == rtype.name)
        ):
            if ex.workspace.owner == owner and ex.workspace.name != name:
                raise UserError(
                    409,
                    "You already wait for a “{resource_type}” with workspace “{workspace}”; "
                    "stop that one, or wait until it starts.",
                    resource_type=rtype.name,
                    workspace=ex.workspace.name,
                )


def within_per_user_limit(db: Database, owner: str, name: str, rtype: ResourceType) -> None:
    """The type's per-user limit (queue.check_per_user), asked early for a prompt answer; the start's
    record checks it again in the same transaction (queue.entering), where two starts at once are
    told apart."""
    if not rtype.per_user:
        return
    with db.session() as s:
        queue.check_per_user(s, owner, name, rtype)
