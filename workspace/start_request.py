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

Every check of a start is here, in the order `check` asks them: the
spawner hands it who asks (`Asker`, what the hub knows of the user) and the
site's rules (`Rules`, its options) once. The checks block (database, the
storage quota's measure) and run in the spawner's thread pool.
"""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field

from sqlalchemy import func, select

from workspace import courses, datasets, i18n, jobs, tasks
from workspace.caller import Caller
from workspace.db import Database
from workspace.deployments import replica as deployment_replica
from workspace.errors import UserError
from workspace.executions import (
    RUN_SERVER,
    UNFINISHED,
    Execution,
    Workspace,
    check_workspace_name,
    execution_by_number,
    find_workspace,
    get_or_create_workspace,
    not_open,
    parse_continue_from,
    plan_continuation,
)
from workspace.images import user as user_images
from workspace.limits import queue, quotas, resource_types
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
    options: Mapping = field(default_factory=dict)  # the options checked, with the course's defaults under them
    job: jobs.JobSpec | None = None  # a run over several nodes (#31; workspace/jobs.py); None: one container
    serve: deployment_replica.ReplicaSpec | None = None  # a deployment's replica (#33): what it serves

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
    checkpoint: str | None = None  # a run from `now`: its snapshot of the open home, until removed
    job: object = None  # a job's JobSpec (#31), its ranks' homes and containers: spawner/jobs.py's JobState
    root: bool = False  # its type gives root inside (a user-namespaced node; spawner/privileges.py)
    serve: object = None  # a deployment's replica (#33): its ReplicaSpec


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


def resolve_datasets(db: Database, refs, caller: Caller) -> list[dict]:
    """The dataset mount plan for a start, or the user's 400/403."""
    with db.session() as s:
        return datasets.resolve(s, refs, caller)


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


def within_per_user_limit(db: Database, owner: str, name: str, rtype: ResourceType, server: str | None = None) -> None:
    """The type's per-user limit (queue.check_per_user), asked early for a prompt answer; the start's
    record checks it again in the same transaction (queue.entering), where two starts at once are
    told apart."""
    if not rtype.per_user:
        return
    with db.session() as s:
        queue.check_per_user(s, owner, name, rtype, server)


# -- who asks, under which rules ---------------------------------------------------


@dataclass(frozen=True)
class Asker:
    """Who asks for a start, as the hub knows them (read on the hub's loop, before the checks run)."""

    owner: str
    name: str  # the workspace ('' for the default server)
    groups: set[str]
    admin: bool
    locale: str  # the language the start was asked in (its errors are said in it)
    running: tuple[str, ...] = ()  # the owner's other servers that run or start now ('': the default one)
    method: str | None = None  # the spawn request's HTTP method; None: a start asked without one
    server: str | None = None  # a run beside workspace `name` (#31): its own JupyterHub server's name

    @property
    def caller(self) -> Caller:
        """The owner as the permission checks read them (their name, groups, whether an administrator)."""
        return Caller(self.owner, self.groups, self.admin)


@dataclass(frozen=True)
class Rules:
    """The site's rules a start is checked against: the spawner's options."""

    resource_types: tuple[ResourceType, ...]
    default_resource_type: str | None
    default_limits: Mapping  # cpu, memory, pids, home_files where a type sets none
    max_running_per_user: int  # 0: no limit
    storage_quota: quotas.StorageQuota
    home_store: object  # the store the user's storage is measured in
    storage_page: str  # the storage page's address, which a refusal over the quota names
    user_images: bool = False  # whether users' images may be started (DockerWorkspaceSpawner.offers_user_images)
    max_runs_per_user: int = 0  # runs beside workspaces (#31) one user may have waiting or running; 0: no limit
    runs_jobs: bool = False  # whether the engine runs jobs over several nodes (spawner/jobs.py)


def check(db: Database, who: Asker, rules: Rules, options: Mapping | None) -> StartRequest:
    """A start's options (`user_options`), checked once, in this order (blocking): the user's 400/403/409 on
    bad input, and nothing recorded. A course's workspace gets the course's resource type, image and
    datasets unless the start chose its own (`StartRequest.options`)."""
    refuse_start_by_link(who.method)
    if who.server is not None and (options or {}).get("serve") is not None:
        return check_replica(db, who, rules, options)
    # a course's workspace: the course's resource type, image and datasets unless this start chose
    defaults = courses.start_defaults(db, who.owner, who.name)
    if defaults:
        options = {**defaults, **(options or {})}
    options = options or {}
    choice = parse_continue_from(options.get("continue_from"))
    cleanup = parse_cleanup(options.get("cleanup", False))
    task = parse_task(options.get("task"), cleanup)
    check_run(db, who, choice, task, rules.max_runs_per_user)
    check_continuation(db, who.owner, who.name, choice)
    refs = datasets.parse_refs(options.get("datasets"))
    mounts = resolve_datasets(db, refs, who.caller) if refs else []
    rtype = chosen_resource_type(rules, cleanup, options.get("resource_type"), who.groups)
    job = check_job(who, options.get("job"), task, rtype, rules.runs_jobs)
    limits = limits_of(rtype, rules.default_limits)
    if not cleanup:
        check_home_files(db, who.owner, who.name, choice, limits["home_files"])
    within_per_user_limits(db, who, rules.max_running_per_user, rtype)
    warning, room = check_storage(db, who, rules, cleanup)
    request = StartRequest(
        choice, rtype, cleanup, tuple(mounts), limits, warning, task, quota_room=room, options=dict(options), job=job
    )
    if request.queued and who.server is None:  # runs wait as many as the runs' bound lets them
        one_queued_per_user(db, who.owner, who.name, rtype)
    if rules.user_images:
        check_user_image(db, who, options.get("image"))
    return request


def check_replica(db: Database, who: Asker, rules: Rules, options: Mapping) -> StartRequest:
    """A deployment's replica (#33): its version's command, image and output (read-only), the deployment's
    resource type, an empty home that is never saved; admitted and queued as a run is (its owner's limits
    make it wait, never refuse it). The user's 400/403/404/409."""
    if set(options) - {"serve"}:
        raise UserError(400, "A deployment's replica takes its settings from the deployment, not from its options.")
    spec = deployment_replica.spec_of(db, who.owner, who.server, options)
    rtype = chosen_resource_type(rules, False, spec.resource_type, who.groups)
    if rtype is not None and rtype.root:
        raise UserError(400, "A deployment runs as an ordinary user; choose a resource type without root.")
    if rules.user_images:
        check_user_image(db, who, spec.image)
    limits = limits_of(rtype, rules.default_limits)
    return StartRequest(
        "fresh", rtype, False, (spec.mount,), limits, task=spec.command, options={"image": spec.image}, serve=spec
    )


def workspace_of(server: str, options: Mapping | None) -> tuple[str, str | None]:
    """(the workspace, the run's server or None) a JupyterHub server starts as: a run beside a workspace
    (#31) is a server named `run-<12 hex>` whose options name the workspace (`beside`); a deployment's
    replica (#33) a server named `serve-<12 hex>`, of its deployment's hidden workspace; any other server
    is its workspace. The user's 400 on a `beside` that names no workspace, or one given elsewhere."""
    hidden = deployment_replica.workspace_of(server, options)
    if hidden is not None:
        return hidden, server
    beside = (options or {}).get("beside")
    if not RUN_SERVER.match(server or ""):
        if beside is not None:
            raise UserError(400, "“beside” is for a run beside a workspace; start the workspace itself without it.")
        return server, None
    if not isinstance(beside, str):
        raise UserError(400, "A run's server needs “beside”: the name of the workspace it runs beside.")
    return check_workspace_name(beside), server


def check_run(db: Database, who: Asker, choice, task: str | None, max_runs: int = 0) -> None:
    """A run beside a workspace (#31) runs a command, beside a workspace the owner has; `now` (the
    workspace's home as it is now) is a run's choice only, and needs the workspace open; the owner has
    fewer than `max_runs` runs waiting or running (0: no bound), the bound of what a sweep may queue.
    The user's 400/404/409/429."""
    if who.server is None:
        if choice == "now":
            raise UserError(
                400,
                "“now” (the open workspace's home as it is now) is for runs beside a workspace; "
                "start it from “latest”.",
            )
        return
    if task is None:
        raise UserError(400, "A run beside a workspace runs a command: give its “task”.")
    with db.session() as s:
        ws = find_workspace(s, who.owner, who.name)
        if ws is None:
            raise UserError(404, "You have no workspace “{name}” to run beside.", name=who.name)
        if choice == "now" and (ws.latest is None or ws.latest.state != "running"):
            raise not_open(who.name)
    if max_runs and not who.admin:
        runs_within(db, who.owner, 1, max_runs)


def runs_within(db: Database, owner: str, more: int, max_runs: int) -> None:
    """`more` new runs keep the owner's runs waiting or running within `max_runs`: else the user's 429
    (blocking). Every waiting run is a start the hub holds open, so a user's sweeps are bounded."""
    have = unfinished_runs(db, owner)
    if have + more > max_runs:
        raise UserError(
            429,
            "You have {count} runs waiting or running and may have {limit} at once; this would add {more}. "
            "Wait for some to end, or cancel them.",
            count=have,
            limit=max_runs,
            more=more,
        )


def unfinished_runs(db: Database, owner: str) -> int:
    """How many runs beside workspaces (#31) the owner has waiting, starting, running or saving."""
    with db.session() as s:
        return s.scalar(
            select(func.count())
            .select_from(Execution)
            .join(Workspace, Execution.workspace_id == Workspace.id)
            .where(Workspace.owner == owner, Execution.server.is_not(None), Execution.state.in_(UNFINISHED))
        )


def check_job(
    who: Asker, value, task: str | None, rtype: ResourceType | None, engine_runs_jobs: bool = True
) -> jobs.JobSpec | None:
    """A run over several nodes (#31): its shape (jobs.parse_job, within its type's `max_nodes`); only a
    run beside a workspace that runs a command is one, on an engine that runs jobs. The user's 400."""
    if value is None:
        return None
    if not engine_runs_jobs:
        raise UserError(400, "This server's engine does not run jobs over several nodes yet; run it as one run.")
    if who.server is None or task is None:
        raise UserError(400, "A job over several nodes is a run beside a workspace: start it as a run with a command.")
    return jobs.parse_job(value, rtype.max_nodes if rtype is not None else jobs.DEFAULT_MAX_NODES)


def refuse_start_by_link(method: str | None) -> None:
    """A start asked by anything but a POST (a page the user was sent to) is the user's 400: a start
    changes state, and only a POST carries the XSRF token (or is an API call with a token)."""
    if method is not None and method != "POST":
        raise UserError(400, "A link cannot start a workspace: open it on your workspaces page and press Start.")


def limits_of(rtype: ResourceType | None, default_limits: Mapping) -> dict:
    """cpu (cores), memory (bytes), pids and home_files of a start: its type's, else `default_limits`
    (None: no limit)."""
    default = resource_types.ResourceType.from_config({"name": "default", **default_limits})
    out = {}
    for part in ("cpu", "memory", "pids", "home_files"):
        value = getattr(rtype, part) if rtype is not None else None
        if value is None:
            value = getattr(default, part)
        out[part] = value or None  # 0: no limit
    return out


def chosen_resource_type(rules: Rules, cleanup: bool, wanted, groups) -> ResourceType | None:
    """The resource type of a start (`user_options["resource_type"]`), or the user's 400/403."""
    if cleanup:
        return rules.storage_quota.cleanup_resource_type()
    wanted = parse_resource_type_name(wanted)
    return resource_types.choose(list(rules.resource_types), wanted, rules.default_resource_type, groups)


def within_per_user_limits(db: Database, who: Asker, max_running: int, rtype: ResourceType | None) -> None:
    """How much one user may run at once: at most `max_running` workspaces of any type (administrators are
    not limited; 0: no limit), then the type's own per-user limit (`within_per_user_limit`). A run beside a
    workspace (#31) is refused by neither: it waits in the queue until its owner holds less (queue.OwnLimits)."""
    if who.server is not None:
        return
    within_running_limit(who, max_running)
    if rtype is not None:
        within_per_user_limit(db, who.owner, who.name, rtype, who.server)


def within_running_limit(who: Asker, max_running: int) -> None:
    """At most `max_running` workspaces at once (the user's 403 beyond)."""
    if not max_running or who.admin:
        return
    unnamed = i18n.translate(who.locale, "(default)")  # the server without a name
    others = sorted(name or unnamed for name in who.running)
    if len(others) >= max_running:
        raise UserError(
            403,
            "You already run {count} workspaces ({names}), the most one "
            "person may run at once; stop one of them first.",
            count=len(others),
            names=", ".join(others),
        )


def check_storage(db: Database, who: Asker, rules: Rules, cleanup: bool) -> tuple[str | None, int | None]:
    """The user's storage against their quota: over it, a start is refused (but in cleanup mode);
    (a warning or None, the bytes the quota has left: what the live home may grow by; None: no limit)."""
    status = quotas.status(db, rules.home_store, rules.storage_quota, who.owner, who.groups)
    if status.over and not cleanup:
        raise status.refusal(rules.storage_page)
    return status.warning(who.locale), status.room()[0]


def check_user_image(db: Database, who: Asker, image) -> None:
    """A user's image names its owner's code, run here as this user: only one they may start (their own,
    or another's build approved for them), refused with a sentence before anything is recorded (#28).
    The start itself (the engine's prepare_image) offers the approved builds only, so a rebuild meanwhile
    is refused too."""
    if isinstance(image, str) and "/" in image:
        user_images.check_startable(db, image, who.owner, who.groups)
