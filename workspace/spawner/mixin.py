"""What a workspace server is, whatever engine runs its container.

`WorkspaceMixin` (mixed in before an engine's spawner class) makes every
start a new execution: its options checked once (workspace/start_request.py),
its place in the queue (placement.py), its home restored from the chosen
earlier execution and saved at its stop (home_stores.py, workspace/lifecycle.py),
the environment that makes installs land in the home (environment.py), and the
replayable progress stream (progress.py). It keeps every option (traitlets config is read
by class name: `c.DockerWorkspaceSpawner.x`, `c.WorkspaceMixin.x`); the parts
it is made of are mixins without options of their own.
"""

from __future__ import annotations

import asyncio
import inspect
import time

from traitlets import Dict, Float, Instance, Int, List, Unicode, default
from traitlets.config import LoggingConfigurable

import workspace.spawner.form as spawnform
from workspace import lifecycle, start_request
from workspace.deployments import replica as deployment_replica
from workspace.deployments.records import SERVE_SERVER
from workspace.errors import UserError
from workspace.limits import quotas, resource_types
from workspace.spawner.environment import EnvironmentMixin
from workspace.spawner.execution_logs import ExecutionLogsMixin
from workspace.spawner.home_stores import HomeStoresMixin
from workspace.spawner.jobs import JobsMixin
from workspace.spawner.placement import TURNS, PlacementMixin
from workspace.spawner.progress import ProgressMixin, ready_in_users_language
from workspace.spawner.runs import RunsMixin
from workspace.spawner.start_options import StartOptionsMixin
from workspace.spawner.startup import INTERRUPTED, StartupMixin
from workspace.start_request import StartRequest, StartState


class WorkspaceMixin(
    RunsMixin,
    ProgressMixin,
    StartOptionsMixin,
    PlacementMixin,
    StartupMixin,
    JobsMixin,
    HomeStoresMixin,
    ExecutionLogsMixin,
    EnvironmentMixin,
    LoggingConfigurable,
):
    """Engine-independent behaviour of a workspace server.

    Mix in before the engine's spawner class:
    `class MySpawner(WorkspaceMixin, SomeEngineSpawner)`. The engine class
    provides `_container_exit()` (see DockerWorkspaceSpawner).

    Every start is a new execution (a record in the workspace database)
    whose home is restored from the chosen earlier execution, and every stop
    saves the home as that execution's output (workspace/lifecycle.py).
    """

    db_url = Unicode(
        "sqlite:////var/lib/workspace/workspace.sqlite",
        config=True,
        help="""SQLAlchemy URL of the workspace database (executions, snapshots).
        A SQLite file by default; `postgresql://...` in production.""",
    )

    secret_key_file = Unicode(
        "/var/lib/workspace/secrets/workspace.key",
        config=True,
        help="""The key that seals the secrets kept in the workspace database (SSH
        private keys, webhook secrets; workspace/vault.py), made there (0600) at
        the first start. Keep it apart from the database and its backups: whoever
        holds both reads every student's keys (WORKSPACE_SECRET_KEY_FILE).""",
    )

    store_root = Unicode(
        "/var/lib/workspace/store",
        config=True,
        help="""Directory of the home store: live homes and snapshots. On btrfs
        (a subvolume-capable filesystem) restores and saves take constant time;
        elsewhere homes are copied (see workspace/store/homes.py). `make up` mounts a
        btrfs image there when the data directory is not on btrfs.""",
    )

    store_backend = Unicode(
        "auto",
        config=True,
        help="""Home store backend: `btrfs`, `copy`, or `auto` (btrfs when
        `store_root` is on btrfs, else copy).""",
    )

    home_mount = Unicode(
        "/openbayes/home",
        config=True,
        help="""Where the home is mounted in the container (read-write). It is
        also HOME, the notebook directory, and the root of PYTHONUSERBASE,
        CONDA_ENVS_PATH and TORCH_HOME, so what a user installs survives into
        later executions.""",
    )

    ssh_gateway_key = Unicode(
        "",
        config=True,
        help="""The SSH gateway's public key (workspace/gateway_keys.py; the hub's
        configuration reads it from the gateway's directory). Set: every
        execution starts sshd with the workspace's host key, this key
        authorized from the gateway's address, and the owner's own key pair
        (#16, docs/ssh.md). Empty: no sshd.""",
    )

    home_uid = Int(1000, config=True, help="uid that owns a fresh home (the image's user).")
    home_gid = Int(1000, config=True, help="gid that owns a fresh home (the image's group).")

    deployment = Unicode(
        "workspace",
        config=True,
        help="""Name of this deployment. Containers are labelled with it, so
        that `make down` and the tests find and clean up only their own.""",
    )

    resource_types = List(
        Dict(),
        config=True,
        help="""The resource types users choose from (`user_options["resource_type"]`).
        Each is a dict: `name`, `description`, `cpu` (cores), `memory` ("8G"),
        `gpus` (count), `gpu_model`, `home_size` ("20G"), `max_runtime`
        (seconds), `groups` (who may use it; empty: everyone), `capacity`
        (how many may run at once on a node), `per_user` (how many one user
        may hold at once; GPU types default to 1), `pids` and `home_files`
        (over `default_limits`). A start of a full type waits in a queue,
        first come first served, and its progress shows the position.
        Empty (the default): no types, only `default_limits`.""",
    )
    default_resource_type = Unicode(
        None,
        allow_none=True,
        config=True,
        help="The resource type of a start that names none (default: the first).",
    )
    default_limits = Dict(
        {"cpu": 2, "memory": "4G", "pids": 1024, "home_files": 1_000_000},
        config=True,
        help="""Limits of every start for what its resource type does not set
        (and of every start where no types are configured): `cpu` (cores),
        `memory` ("4G"), `pids` (processes and threads, so a fork bomb
        stays inside its workspace) and `home_files` (files a home may hold:
        the culler warns while it runs, and a home saved over it starts only
        in cleanup mode). A type's own value wins; 0 there means no limit.""",
    )
    max_running_per_user = Int(
        3,
        config=True,
        help="""How many workspaces one user may run (or start) at once; 0 for
        no limit. Administrators are not limited.""",
    )
    max_runs_per_user = Int(
        24,
        config=True,
        help="""How many runs beside workspaces (and a sweep's runs, #31) one user may have waiting or
        running at once; 0 for no limit. Runs past `max_running_per_user` or a type's per-user limit wait
        in the queue; this bounds how many wait. Administrators are not limited.""",
    )
    startup_slots = Int(
        0,
        config=True,
        help="""How many workspaces a node brings up at once (#30); the next starts wait in the queue for
        their turn, so a class's burst all starts instead of timing out together. 0 (the default): four per
        core of the node. `node_startup_slots` sets single nodes.""",
    )
    node_startup_slots = Dict(
        {}, config=True, help="""Start-ups at once of single nodes, {"node name": n}, over `startup_slots`."""
    )

    execution_log_root = Unicode(
        "/var/lib/workspace/logs",
        config=True,
        help="""Directory where the hub keeps the log of every ended execution
        (`<execution id>.log`, the last `execution_log_limit` bytes): a task's
        output, a server's log with its start script's output. The workspace
        service reads it there too.""",
    )
    execution_log_limit = Int(
        8 << 20,
        config=True,
        help="""How many bytes of an execution's log are kept (the tail, with a
        line saying how much was dropped). The engine holds at most about twice
        as much while it runs (log rotation, two files).""",
    )
    webhook_networks = List(
        Unicode(),
        [],
        config=True,
        help="""Networks of private addresses (CIDR, like `10.0.0.0/8`) that
        users' webhooks may call (#17). Empty (the default): only public
        addresses; the hub never calls its own networks for a user.""",
    )
    task_poll_interval = Float(
        2.0,
        config=True,
        help="""Seconds between two looks at a running task's container, so that
        its home is saved soon after its command ends (a server's is
        `poll_interval`).""",
    )

    record_store_root = Unicode(
        "",
        config=True,
        help="""A second btrfs home store, the store of record (another disk, or a
        mount of another machine's), which receives every saved output
        incrementally (`btrfs send -p`) after its save, so losing this node's
        store loses no saved output. Empty (the default): none. Both stores
        must be btrfs, each mounted at its filesystem's top level.""",
    )

    # whether the engine's nodes keep homes in stores of their own (a swarm's), which the service then
    # replicates from and cleans
    nodes_have_own_stores = False
    # whether users' images may be started here (the engine builds them: DockerWorkspaceSpawner; #28)
    offers_user_images = False

    execution_id = Int(None, allow_none=True, help="Record id of the current execution (spawner state).")
    live_key = Unicode("", help="Store key of the current execution's live home.")
    node = Unicode("", help="The node the current execution was placed on (spawner state).")
    # the current start: its checked options (set in the spawn request) and what it set up
    start_request = Instance(StartRequest, allow_none=True, help="This start's checked options (check_start).")
    current = Instance(StartState, help="What the current start has set up (reset by every start).")

    @default("current")
    def _default_current(self):
        return StartState()

    @default("notebook_dir")
    def _default_notebook_dir(self):
        return self.home_mount

    @default("disable_user_config")
    def _default_disable_user_config(self):
        # the home is the student's: a ~/.jupyter config there must not reconfigure
        # the server (its auth, its extensions) for the next start
        return True

    @default("options_form")
    def _default_workspace_options_form(self):
        # not named _default_options_form: that stays DockerSpawner's method (the image
        # choice as HTML), which code written for DockerSpawner may call
        return self._render_options_form

    @default("options_from_form")
    def _default_options_from_form(self):
        return spawnform.options_from_form

    @default("progress_ready_hook")
    def _default_progress_ready_hook(self):
        return ready_in_users_language

    storage_quota = Instance(quotas.StorageQuota, help="The storage quota policy (configured as `c.StorageQuota`).")

    @default("storage_quota")
    def _default_storage_quota(self):
        return quotas.StorageQuota(parent=self)

    def storage_page_url(self) -> str:
        base = self.hub.base_url[: -len("hub/")] if self.hub.base_url.endswith("hub/") else "/"
        return f"{base}services/workspace/storage"

    def get_state(self):
        state = super().get_state()
        if self.execution_id is not None:
            state["execution_id"] = self.execution_id
            state["live_key"] = self.live_key
            state["node"] = self.node
        if self.run_beside:
            state["run_beside"] = self.run_beside
        return state

    def load_state(self, state):
        super().load_state(state)
        self.execution_id = self._loaded_execution = state.get("execution_id")
        self.live_key = state.get("live_key", "")
        self.node = state.get("node", "")
        self.run_beside = state.get("run_beside", "")

    def clear_state(self):
        super().clear_state()
        self._loaded_execution, self._interrupted = None, False
        self.execution_id = None
        self.live_key = ""
        self.node = ""

    # -- starts: only by a POST that says what it wants (SECURITY.md, "Starts") -------

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # options a hub before this rule kept (a link's image, "fresh") are not a later start's
        self.forget_start_options()

    async def run_pre_spawn_hook(self):
        # Runs inside the spawn request (within slow_spawn_timeout), so a
        # UserError here is the request's 400 and nothing is recorded.
        self._reset_progress()  # a progress page opened from now on shows this start's, not the last one's
        # JupyterHub has just stored this start's options as the next one's defaults: the next start
        # names its own (a rejected value, a task, "continue from #3", an image must not stick)
        self.forget_start_options()
        self.image = self.site_image  # a start that names no image runs the configured one, not the last start's
        self.start_request = None
        try:
            self.start_request = await self.check_start(self.spawn_method())
        except UserError as e:
            self.in_user_language(e)
            raise
        if not hasattr(self, "_base_start_timeout"):
            self._base_start_timeout, self._base_poll_interval = self.start_timeout, self.poll_interval
        # a task is looked at often, so that its home is saved soon after its command ends
        self.poll_interval = self._base_poll_interval if self.start_request.task is None else self.task_poll_interval
        # JupyterHub bounds start() by start_timeout, but a start waits in the queue for its turn first and
        # then for its server to answer (_until_ready): each bounds itself (placement.startup_limit)
        self.start_timeout = self._base_start_timeout + self.queue_timeout + self.http_timeout
        result = super().run_pre_spawn_hook()
        if inspect.isawaitable(result):
            await result

    async def check_start(self, method: str | None = None) -> StartRequest:
        """This start's options, checked once (start_request.check: the user's 400/403/409 on bad input;
        nothing recorded); `method`: the spawn request's, whose start only a POST may ask. The options
        get the course's defaults under them."""
        workspace, server = start_request.workspace_of(self.name, self.user_options)
        self.run_beside = workspace if server else ""
        who = self.asker(method)
        request = await self.run_blocking(lambda: start_request.check(self.db, who, self.rules(), self.user_options))
        self.user_options = dict(request.options)
        return request

    def asker(self, method: str | None = None) -> start_request.Asker:
        """Who asks for this start, read from the hub's records of the user (on the hub's loop)."""
        return start_request.Asker(
            owner=self.user.name,
            name=self.workspace_name,
            server=self.run_server,
            groups={g.name for g in self.user.groups},
            admin=bool(self.user.admin),
            locale=self.locale,
            # a deployment's replicas (#33) are bounded by the deployments' own rules, not as workspaces
            running=tuple(
                f"{sp.run_beside} (run)" if getattr(sp, "run_beside", "") else name
                for name, sp in self.user.spawners.items()
                if sp is not self and sp.active and not SERVE_SERVER.match(name or "")
            ),
            method=method,
        )

    def rules(self) -> start_request.Rules:
        """The site's rules a start is checked against: this spawner's options (blocking: the store)."""
        return start_request.Rules(
            resource_types=tuple(self.parsed_resource_types()),
            default_resource_type=self.default_resource_type,
            default_limits=self.default_limits,
            max_running_per_user=self.max_running_per_user,
            storage_quota=self.storage_quota,
            home_store=self.home_store,
            storage_page=self.storage_page_url(),
            user_images=self.offers_user_images,
            max_runs_per_user=self.max_runs_per_user,
            runs_jobs=self.runs_jobs,
        )

    def limits(self, rtype: resource_types.ResourceType | None) -> dict:
        """cpu (cores), memory (bytes), pids and home_files of a start: its type's, else `default_limits`
        (None: no limit)."""
        return start_request.limits_of(rtype, self.default_limits)

    def parsed_resource_types(self) -> list[resource_types.ResourceType]:
        return [resource_types.ResourceType.from_config(d) for d in self.resource_types]

    # -- start ----------------------------------------------------------------

    async def start(self):
        try:
            return await self._start_execution()
        except Exception as e:
            self.say_start_failure(e)
            raise

    async def _start_execution(self):
        """A start (see `start`): a new execution, from its place in the queue to its running container."""
        self._reset_progress()
        self._start_script = None  # the follower of this start's start script (_announce_container)
        started = time.monotonic()
        # checked in the spawn request (run_pre_spawn_hook); only a start called without it checks here
        request, self.start_request = self.start_request or await self.check_start(), None
        self.current = StartState()
        plan = await self._begin_execution(request)
        await self._announce(request, plan)
        self.node = await self._choose_node(plan, request.resource_type)
        try:
            result = await self._bounded(self._run_container(plan, list(request.mounts)))
            self._announce_container(request, time.monotonic() - started)
            await self._until_ready(plan, result, request.task is not None)
        except asyncio.CancelledError:
            # closed while preparing: stop() ends the execution without output
            raise
        except Exception as e:
            await self._fail_execution(plan, e)
            raise
        finally:
            TURNS.notify()  # its start-up slot is free (ready, failed or closed): the next in line's turn
        return result

    async def _begin_execution(self, request: StartRequest):
        """The execution's record (lifecycle.begin: its number, its home's keys) and what the start sets up
        from it; the plan."""
        db, store = self.db, await self.run_blocking(lambda: self.home_store)
        # A save that failed earlier is retried first, so "latest" can include it.
        await self.run_blocking(
            lambda: lifecycle.finish_pending_saves(
                db,
                store,
                self.user.name,
                self.workspace_name,
                self.store_of,
                self.record_store if self.replicates else None,
            )
        )
        cleanup = self.storage_quota.slack if request.cleanup else None
        checkpoint = await self._checkpoint(request.continue_from)
        try:
            plan = await self._record_execution(request, cleanup, checkpoint)
        except BaseException:  # refused at its record (a per-user limit): its snapshot goes too
            await self._drop_checkpoint()
            raise
        current = self.current
        self.execution_id, self.live_key, self.node = plan.execution_id, plan.live_key, ""
        current.number, current.report_key = plan.number, plan.report_key or ""
        current.task, current.serve = request.task, request.serve
        current.gpu_ids = []
        current.root = request.resource_type is not None and request.resource_type.root
        await self._record_ranks(plan, request.job)  # a job over several nodes: admitted all at once
        self.apply_limits(request.limits)
        self.record_start()  # a hub that dies during the start finds it (startup.py)
        return plan

    async def _record_execution(self, request: StartRequest, cleanup: int | None, checkpoint: str | None):
        """The new execution of this start (lifecycle.begin), queued for its node's start-up turn; its plan."""
        db = self.db
        return await self.run_blocking(
            lambda: lifecycle.begin(
                db,
                self.user.name,
                self.workspace_name,
                request.continue_from,
                self.image,
                list(request.mounts),
                request.resource_type,
                cleanup,
                home_files=request.limits["home_files"],
                task=request.task,
                quota_room=request.quota_room,
                locale=self.locale,
                queued=True,  # every start waits for its node's start-up turn (placement.py)
                server=self.run_server,
                checkpoint=checkpoint,
                serve=request.serve is not None,
            )
        )

    async def _run_container(self, plan, mounts: list[dict]):
        """On the chosen node: the image, the inputs, the restored home, then the engine's start; the
        execution runs (the engine's start's result: the server's address)."""
        db, current = self.db, self.current
        await self.run_blocking(lifecycle.transition, db, plan.execution_id, "pulling")
        await self.prepare_image()
        await self.check_driver(plan)  # a GPU start's image and its nodes' NVIDIA drivers, before any restore
        await self.receive_inputs(plan, mounts)
        current.mounts = self.dataset_mounts(mounts)
        await self._restore(plan)
        await self._start_ranks(plan, mounts)  # a job's other ranks first: rank 0's command finds them
        await self._drop_checkpoint()  # a run from `now`: its home holds it now
        result = await super().start()
        ssh_address = await self.ssh_address(result)
        await self.run_blocking(
            lambda: lifecycle.transition(
                db,
                plan.execution_id,
                "running",
                container_id=self.container_record_id(),
                node=self.node,
                image=self.image,
                ssh_address=ssh_address,
            )
        )
        if current.serve is not None:  # a deployment's replica (#33): where the router reaches its app
            address = await self.serve_address(result, current.serve.port)
            await self.run_blocking(deployment_replica.running, db, self.name, address, self.node)
        return result

    async def serve_address(self, ip_and_port, port: int) -> str:
        """Where a replica's app answers (`host:port`), from the server's address (`start`'s result): the
        container's own address on its owner's network (engine-specific: a swarm's nodes publish it)."""
        return f"{ip_and_port[0]}:{port}"

    async def _fail_execution(self, plan, e: Exception) -> None:
        """A start that failed once its execution was recorded: the execution fails, its home dropped, with
        the reason said in the user's language."""
        if isinstance(e, UserError):
            message = e.in_locale(self.locale)
        else:
            message = getattr(e, "jupyterhub_message", None) or self.localized("The workspace could not be started.")
        await self._wait_restore()
        await self._drop_checkpoint()
        await self._end_ranks(plan.execution_id)
        await self.run_blocking(
            lifecycle.discard,
            self.db,
            self.execution_store,
            plan.execution_id,
            "failed",
            str(e),
            "error",
            message,
        )

    def apply_limits(self, limits: dict) -> None:
        """CPU, memory and process limits of this start (engine-specific: see DockerWorkspaceSpawner)."""

    async def prepare_image(self) -> None:
        """Check that the image is there (engine-specific; see DockerWorkspaceSpawner)."""

    # -- stop ---------------------------------------------------------------------

    async def _container_exit(self, task: bool = False) -> tuple[str, str | None]:
        """(reason, detail) from the container's state before it is stopped; engine-specific.
        For a task whose command ended by itself: ("completed", None)."""
        return "user", None

    async def _is_task(self, execution_id: int | None) -> bool:
        if execution_id is None:
            return False
        kind, _ = await self.run_blocking(lifecycle.kind_of, self.db, execution_id)
        return kind in ("task", "serve")  # a replica's command ends as a task's does (#33)

    async def _ending(self, execution_id: int | None) -> tuple[str, str | None]:
        """Why the current execution ends, read before its container is stopped."""
        if self._job_failure is not None:  # a rank of its job failed or was lost (spawner/jobs.py)
            return self._job_failure
        task = await self._is_task(execution_id)
        reason, detail = await self._container_exit(task=task)
        if task and (reason, detail) == ("user", None):
            detail = self.localized("The task was cancelled; its home was saved as it was.")
        return reason, detail

    async def poll(self):
        if await self.start_interrupted():
            return 1  # its hub died during its start-up: the hub stops it (run_post_stop_hook ends it)
        return await super().poll()

    async def stop(self, now=False):
        execution_id, node = self.execution_id, self.node  # the engine's stop clears the state
        reason, detail = await self._ending(execution_id)
        await self._wait_restore()
        await super().stop(now)  # the container is stopped and removed (keep_log first)
        await self._end_execution(execution_id, reason, detail, node)
        await self._drop_checkpoint()  # a run from `now` stopped before its home was restored

    async def run_post_stop_hook(self):
        # JupyterHub calls stop() only while poll() says the server runs; for a
        # container that died, or a start closed before its container existed,
        # only this hook runs. End the execution here too (idempotent).
        if self.execution_id is not None:
            execution_id = self.execution_id
            if self._interrupted:
                reason, detail = "lost", self.localized(INTERRUPTED)
            else:
                reason, detail = await self._ending(execution_id)
            await self._wait_restore()
            await self.remove_dead_container()
            await self._end_execution(execution_id, reason, detail, self.node)
            await self._drop_checkpoint()
            TURNS.notify()  # a place of its type is free
        result = super().run_post_stop_hook()
        if inspect.isawaitable(result):
            await result

    async def remove_dead_container(self) -> None:
        """Remove the container of an execution that died (engine-specific)."""

    async def run_blocking(self, fn, *args, **kwargs):
        """Run blocking work in the spawner's thread pool, off the event loop."""
        return await asyncio.wrap_future(self.executor.submit(fn, *args, **kwargs))
