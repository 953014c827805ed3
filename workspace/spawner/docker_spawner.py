"""`DockerWorkspaceSpawner`: a workspace in a Docker container on this host
(dockerspawner's `DockerSpawner` with `WorkspaceMixin`).

What only Docker knows lives here: CPU, memory and process limits, GPUs as
device requests, bind mounts of the live home and the dataset versions, the
owner's own network, the container's exit status, the local image.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import docker
from docker.utils import kwargs_from_env
from dockerspawner import DockerSpawner
from traitlets import Bool, Dict, Float, Int, Unicode, default

import workspace.spawner.networks as networks
import workspace.spawner.scratch as scratch
from workspace import egress
from workspace.errors import UserError
from workspace.i18n import N_
from workspace.images import catalog as image_catalog
from workspace.images import user as user_images
from workspace.spawner.mixin import WorkspaceMixin

EGRESS_UNAVAILABLE = N_(
    "Workspaces cannot start on this server now: their network cannot be kept off the site's own. "
    "Please tell your administrator."
)


def engine_client(options) -> docker.APIClient:
    """A Docker API client to the engine a spawner's options name (`client_kwargs`, else DOCKER_HOST),
    for a process that acts without a spawner; the caller closes it."""
    return docker.APIClient(**{"version": "auto", **kwargs_from_env(), **(options.client_kwargs or {})})


def engine_docker(options) -> docker.DockerClient:
    """The high-level client (containers, networks) to the same engine as `engine_client`."""
    return docker.DockerClient(**{"version": "auto", **kwargs_from_env(), **(options.client_kwargs or {})})


def guard_egress_at_hub_start(config, hub_api_url: str) -> None:
    """The workspaces' egress rules as the hub starts, from its config (no spawner exists yet); a failure is
    said in the hub's log and every start then fails with it (blocking)."""
    site = egress.Egress(config=config)
    if not site.enabled:
        return
    spawner = DockerWorkspaceSpawner.class_traits()
    section = config.DockerWorkspaceSpawner

    def option(name: str):
        return section[name] if name in section else spawner[name].default()

    client = docker.APIClient(**{"version": "auto", **kwargs_from_env(), **(option("client_kwargs") or {})})
    try:
        networks.guard(
            client,
            option("deployment"),
            option("owner_networks"),
            option("network_name"),
            egress.hub_address(hub_api_url),
            list(site.allowed),
        )
    except (egress.EgressError, ValueError, OSError, docker.errors.DockerException) as e:
        logging.getLogger("JupyterHub").error("The workspaces' egress rules could not be made: %s", e)
    finally:
        client.close()


# A stop that cannot remove its owner's network yet goes on trying in the background: every 5 s for
# NETWORK_RETRY_S, then once a minute until it goes (a swarm lets go of a dead node's task only once it has
# written the node off, which took longer than 3 min under the chaos test's faults: a retry that gave up
# left the network, a /27 of a finite pool, for good). One retry per owner's network, kept until done (the
# loop holds tasks only weakly).
NETWORK_RETRY_S = 180.0
NETWORK_RETRY_LATER_S = 60.0
_network_retries: dict[str, asyncio.Task] = {}


class DockerWorkspaceSpawner(WorkspaceMixin, DockerSpawner):
    """A workspace in a Docker container on this host."""

    blocking_threads = Int(
        16,
        config=True,
        help="""Threads for blocking Docker calls and file work, shared by all
        spawners. dockerspawner's default is one thread, so one slow call
        (a large save, a stuck daemon) would stall every other user's start.""",
    )

    owner_networks = Bool(
        True,
        config=True,
        help="""Put each user's workspaces on a network of their own: they
        reach each other, nobody else's (Docker isolates bridges from each
        other), and the hub's API on the host. Off: `network_name` for all.
        On a swarm the network is an attachable overlay across the nodes.""",
    )
    owner_network_pool = Unicode(
        "10.213.0.0/16",
        config=True,
        help="""Addresses the owners' networks are carved from (a range this
        site does not route elsewhere).""",
    )
    owner_network_prefix = Int(
        27,
        config=True,
        help="Size of one owner's network (a /27 holds 29 workspaces).",
    )

    read_only_root = Bool(
        True,
        config=True,
        help="""Make the container's root filesystem read-only, so that its
        writable layer (on the engine's disk, with no size limit on ext4)
        cannot fill the host: the student writes to the home (bounded by the
        quota) and to `scratch_space`. Off only for images whose programs
        must write elsewhere (the disk is then unbounded).""",
    )
    scratch_space = Dict(
        scratch.DEFAULT,
        config=True,
        help="""Where a workspace may write besides its home (with
        `read_only_root`): a tmpfs per path with its size, "1G" (shared, mode
        1777, like /tmp) or {"size": "16M", "private": true} (the image user's
        alone, mode 0700: /run/workspace holds sshd's files). A tmpfs is
        memory: it counts against the container's memory limit, so together
        they are at most `scratch_memory_fraction` of it (each scaled down
        alike).""",
    )
    scratch_memory_fraction = Float(
        0.5,
        config=True,
        help="""The largest share of a workspace's memory limit the scratch
        tmpfs mounts may take together (what is written there is memory of
        the container: past the limit, it is killed).""",
    )

    _pool = None
    _made = threading.Lock()  # the shared pool and engine client are made once, whichever thread asks first
    pids_limit: int | None = None  # of the current start (apply_limits)

    @property
    def executor(self):
        cls = DockerWorkspaceSpawner
        with cls._made:
            if cls._pool is None:
                cls._pool = ThreadPoolExecutor(self.blocking_threads, thread_name_prefix="workspace-docker")
        return cls._pool

    @property
    def client(self):
        # DockerSpawner makes its one client lazily without a lock, meant for its single thread; our pool's
        # threads asked at once as a restarted hub polled its servers, each made one, and the one replaced
        # was closed (its pool's finalizer) under the thread still using it: the hub died of a segmentation
        # fault in test_hub_restart_reconciles
        with DockerWorkspaceSpawner._made:
            return super().client

    @default("use_internal_ip")
    def _default_use_internal_ip(self):
        # The proxy reaches the container on the bridge; no host port is published.
        return True

    @default("remove")
    def _default_remove(self):
        # Every start is a new execution with a new container.
        return True

    @default("pull_policy")
    def _default_pull_policy(self):
        # Images are built locally (no registry); a missing image is an admin error.
        return "never"

    @default("prefix")
    def _default_prefix(self):
        return self.deployment

    @default("extra_create_kwargs")
    def _default_extra_create_kwargs(self):
        return DockerWorkspaceSpawner._create_kwargs

    @default("extra_host_config")
    def _default_extra_host_config(self):
        # a callable (dockerspawner evaluates it at each create): the GPUs differ per start
        return DockerWorkspaceSpawner._host_config

    def _host_config(self) -> dict:
        config = {
            # tini as PID 1 reaps the zombies of terminals and kernels.
            "init": True,
            # Keep a dead container until stop() removes it, so its logs and
            # exit status can be read (dockerspawner would auto-remove it).
            "auto_remove": False,
            # The student runs any code here: no capability, no setuid way back to one.
            "cap_drop": ["ALL"],
            "security_opt": ["no-new-privileges"],
        }
        # the log is read from the engine: bounded while it runs (the hub keeps its tail at the end)
        size = max(1 << 20, self.execution_log_limit)
        config["log_config"] = docker.types.LogConfig(type="json-file", config={"max-size": str(size), "max-file": "2"})
        pids = self.pids_limit
        if pids:
            config["pids_limit"] = pids
        if self.read_only_root:
            # the writable layer has no size limit on the engine's ext4: nothing is written there at all
            config["read_only"] = True
            config["tmpfs"] = scratch.docker_tmpfs(self.scratch_plan(), self.home_uid, self.home_gid)
        gpus = self.current.gpu_ids
        if gpus and self.gpu_device_mode == "device_requests":
            config["device_requests"] = [docker.types.DeviceRequest(device_ids=list(gpus), capabilities=[["gpu"]])]
        return config

    @property
    def volume_binds(self):
        binds = super().volume_binds
        if self.live_key:  # an execution's home; a spawner used without one (DockerSpawner's own ways) has none
            binds[str(self.home_dir)] = {"bind": self.home_mount, "mode": "rw"}
        for source, mount in self.current.mounts:
            binds[source] = {"bind": mount, "mode": "ro"}
        return binds

    def scratch_plan(self) -> list[scratch.Scratch]:
        """The tmpfs mounts of this start (sized by its memory limit)."""
        return scratch.plan(self.scratch_space, self.mem_limit, self.scratch_memory_fraction)

    def apply_limits(self, limits: dict) -> None:
        self.cpu_limit = limits["cpu"]
        self.mem_limit = limits["memory"]
        self.pids_limit = limits["pids"]

    def container_labels(self) -> dict[str, str]:
        labels = {
            "workspace.deployment": self.deployment,
            "workspace.user": self.user.name,
            "workspace.server": self.name or "",
            "workspace.execution": str(self.execution_id or ""),
        }
        if self._as_rank is not None:  # a rank of a job over several nodes (spawner/jobs.py)
            labels["workspace.rank"] = str(self._as_rank.rank)
        return labels

    @property
    def container_name(self):
        base = super().container_name
        return f"{base}-r{self._as_rank.rank}" if self._as_rank is not None else base

    # -- a job's ranks (#31, spawner/jobs.py): containers made as the server's own is, on this host ------

    runs_jobs = True

    async def start_rank_object(self) -> str:
        obj = await self.create_object()
        await self.docker("start", obj["Id"])
        return obj["Id"]

    async def rank_object_state(self, container_id: str) -> tuple[bool, int | None]:
        try:
            state = (await self.docker("inspect_container", container_id))["State"]
        except docker.errors.NotFound:
            return False, None
        return state.get("Running", False), None if state.get("Running") else state.get("ExitCode")

    async def remove_rank_object(self, container_id: str) -> None:
        try:
            await self.docker("remove_container", container_id, force=True)
        except docker.errors.NotFound:
            pass

    # the images users defined (#18) that this user may start, {owner/name: engine image}: read before each
    # form and start (load_user_images), as dockerspawner asks for the allowed images synchronously. Another
    # user's image is among them only once its current build is approved for this user (#28)
    _user_images: dict[str, str] = {}
    _user_image_origins: dict[str, str] = {}  # {owner/name: “built by alice, approved by root”} for the form
    # the service builds them on its own engine; a swarm's nodes do not have them (docs/images.md)
    offers_user_images = True

    async def load_user_images(self) -> None:
        if self.offers_user_images:
            groups = {g.name for g in self.user.groups}
            found = await self.run_blocking(user_images.startable, self.db, self.user.name, groups)
            self._user_images = {i["name"]: i["ref"] for i in found}
            self._user_image_origins = {i["name"]: user_images.origin(i, self.user.name, self.locale) for i in found}

    def image_labels(self, images: list[str], drivers=None) -> dict[str, str]:
        labels = super().image_labels(images, drivers)
        for name, said in self._user_image_origins.items():
            if name in labels:
                labels[name] = f"{labels[name]} · {said}"
        return labels

    def _get_allowed_images(self):
        allowed = super()._get_allowed_images()
        if not self._user_images or allowed == "*":
            return allowed
        site = dict(allowed) if isinstance(allowed, dict) and allowed else {self.image: self.image}
        return {**site, **self._user_images}

    def image_choices(self) -> list[str]:
        allowed = self._get_allowed_images()
        return list(allowed) if isinstance(allowed, dict) and allowed else [self.image]

    def image_refs(self) -> dict[str, str]:
        allowed = self._get_allowed_images()
        return dict(allowed) if isinstance(allowed, dict) else {}

    @classmethod
    def describe_images(cls, options, names: list[str]) -> list[dict]:
        client = engine_client(options)
        try:
            return image_catalog.describe(client, names)
        finally:
            client.close()

    def container_record_id(self) -> str:
        return self.container_id

    async def prepare_image(self) -> None:
        self.current.image_checked = None
        image_option = self.user_options.get("image")
        if image_option:
            await self.load_user_images()
            self.image = await self.check_allowed(image_option)
        try:
            await self.pull_image(self.image)
        except docker.errors.NotFound as e:
            raise UserError(
                500,
                "The image {image} is not installed on this server. "
                "Please tell your administrator (they can build it with `make images`).",
                detail=str(e),
                image=self.image,
            ) from e
        self.current.image_checked = self.image

    async def remove_dead_container(self) -> None:
        if not self.container_id and self._interrupted:
            # a start-up its hub died during (startup.py) may have made its container, its id unrecorded
            try:
                await self.get_object()  # by its name: the server's one container (or service)
            except docker.errors.DockerException as e:
                self.log.warning("Could not look for the container of %s: %s", self._log_name, e)
        if self.container_id:
            try:
                await self.remove_object()
            except docker.errors.DockerException as e:
                self.log.warning("Could not remove the container of %s: %s", self._log_name, e)
        # a container that ended by itself (a task's command, a lost node, a crash) is stopped by this path
        # alone, not by stop(): its owner's network goes here too, or it stayed for good (found by
        # tests/cluster/test_chaos.py)
        await self._drop_owner_network(wait=self.network_release_wait)

    @classmethod
    def engine_log(cls, options, record_id: str, since: float | None = None, tail: int | None = None):
        client = engine_client(options)
        try:
            yield from cls._log_stream(client, record_id, since, tail)
        except docker.errors.NotFound:
            return
        finally:
            client.close()

    @staticmethod
    def _log_stream(client, record_id: str, since: float | None, tail: int | None = None):
        # never `follow`: a followed stream may outlive its container (a swarm's does), and nothing could
        # end a read blocked on it; tasks.follow asks again for what is new instead
        # follow=False said: the SDK's default follows whenever it streams
        return client.logs(
            record_id,
            stdout=True,
            stderr=True,
            stream=True,
            follow=False,
            timestamps=True,
            since=since,
            tail=tail or "all",
        )

    async def container_exit_code(self) -> int | None:
        try:
            obj = await self.get_object()
        except docker.errors.DockerException:
            return None
        return obj["State"].get("ExitCode") if obj else None

    async def remove_object(self):
        # a task's log and exit code go with its container (the swarm's service, too: it inherits this)
        await self.keep_log()
        return await super().remove_object()

    async def _container_exit(self, task: bool = False) -> tuple[str, str | None]:
        try:
            obj = await self.get_object()
        except docker.errors.DockerException as e:
            self.log.warning("Could not inspect the container of %s: %s", self._log_name, e)
            return "user", None
        if obj is None:
            return "lost", self.localized("The container disappeared.")
        st = obj["State"]
        if st.get("Running"):
            return "user", None
        if st.get("OOMKilled"):
            return "lost", self.localized("The container ran out of memory and was killed.")
        code = st.get("ExitCode")
        if task:
            return "completed", None  # the exit code is recorded with the log (keep_log)
        if code == 0:
            return "user", self.localized("Shut down from inside the workspace.")
        if code == 137:
            return "lost", self.localized("The container exited with status {code} (killed).", code=code)
        return "lost", self.localized("The container exited with status {code}.", code=code)

    async def docker(self, method, *args, **kwargs):
        if method == "create_container":
            kwargs.setdefault("labels", {}).update(self.container_labels())
        return await super().docker(method, *args, **kwargs)

    async def pull_image(self, image):
        if self.current.image_checked == image:
            return
        self.emit_progress(10, self.localized("Checking image {image}", image=image))
        # DockerSpawner's exceptions (docker.errors.NotFound for a missing image), which its callers
        # catch; a start's sentence for the user is prepare_image's
        await super().pull_image(image)

    async def create_object(self):
        self.emit_progress(70, self.localized("Creating the container"))
        if self.owner_networks:
            self.network_name = await self.run_blocking(
                networks.ensure,
                self.client_for_networks(),
                self.deployment,
                self.user.name,
                self.owner_network_pool,
                self.owner_network_prefix,
            )
        await self.guard_egress()
        # the gateway reaches the container from the host: on the container's network, from its gateway address
        gateway_from = await self.run_blocking(networks.gateway_address, self.client_for_networks(), self.network_name)
        if gateway_from is None:  # never a gateway key accepted from anywhere: the start fails instead
            raise RuntimeError(
                f"network {self.network_name} has no IPv4 address for the host: the SSH gateway's key could not "
                "be limited to it (networks.gateway_address)"
            )
        self.current.ssh_env = await self.run_blocking(self.ssh_environment, gateway_from, self.owner_networks)
        return await super().create_object()

    async def guard_egress(self) -> None:
        """The egress rules of the deployment's workspaces in place before this one runs (re-made at every
        start: a new network, a firewall reloaded, a changed allow-list); the user's 503 when they cannot
        be made (workspace/egress.py)."""
        options = egress.Egress(parent=self)
        if not options.enabled:
            return
        try:
            await self.run_blocking(
                networks.guard,
                self.client_for_networks(),
                self.deployment,
                self.owner_networks,
                self.network_name,
                egress.hub_address(self.hub.api_url),
                list(options.allowed),
            )
        except (egress.EgressError, ValueError, OSError, docker.errors.DockerException) as e:
            raise UserError(503, EGRESS_UNAVAILABLE, detail=str(e)) from e

    def _create_kwargs(self) -> dict:
        if not self.owner_networks:
            return {}
        # the workspace's name is its address on the owner's network (`ssh thesis`, `curl thesis:8888`);
        # the network is the owner's alone, so no other owner's name can collide or resolve there
        alias = self.job_alias() if self.name else ""
        endpoint = self.client.create_endpoint_config(aliases=[alias] if alias else [])
        kwargs = {"networking_config": self.client.create_networking_config({self.network_name: endpoint})}
        if self.current.job is not None:  # a job's rank is its name to itself too (mpirun tells hosts by name)
            kwargs["hostname"] = alias
        return kwargs

    def client_for_networks(self):
        return self.client  # dockerspawner's API client

    async def stop(self, now=False):
        await super().stop(now)
        await self._drop_owner_network()

    # how long a stop waits for a container just removed to leave its owner's network (a swarm's: its
    # task leaves the overlay on its node a moment after its service is removed)
    network_release_wait = 0.0

    async def _drop_owner_network(self, wait: float = 0.0) -> None:
        """Remove the owner's network once none of their workspaces runs (a /27 each is finite); while it
        is still in use, try again for `wait` seconds, then go on trying in the background (a swarm task on
        a node that died leaves the overlay only once the swarm has written the node off)."""
        if await self._try_dropping_owner_network(wait):
            return
        name = networks.name_for(self.deployment, self.user.name)
        if name not in _network_retries:  # else one goes on already
            _network_retries[name] = asyncio.ensure_future(self._retry_dropping_owner_network())
            _network_retries[name].add_done_callback(lambda _: _network_retries.pop(name, None))

    async def _retry_dropping_owner_network(self) -> None:
        every = 5.0
        while not await self._try_dropping_owner_network(NETWORK_RETRY_S, every=every, later=True):
            every = NETWORK_RETRY_LATER_S

    async def _try_dropping_owner_network(self, wait: float, every: float = 1.0, later: bool = False) -> bool:
        """Whether the owner's network is gone, or is not this stop's to remove (another of their
        workspaces is starting or running: it needs it; `later`: this one started again), within `wait`
        seconds."""
        deadline = time.monotonic() + wait
        while True:
            if not self.owner_networks or any(sp is not self and sp.active for sp in self.user.spawners.values()):
                return True
            if later and self.active:  # this server starts again: the network is its own again
                return True
            try:
                if await self.run_blocking(
                    networks.remove_if_unused, self.client_for_networks(), self.deployment, self.user.name
                ):
                    return True
            except docker.errors.DockerException as e:
                self.log.warning("Could not remove the network of %s: %s", self.user.name, e)
                if not later:
                    return False  # the stop goes on; the background retry tries again (the engine may be back)
            if time.monotonic() >= deadline:
                return False
            await asyncio.sleep(every)

    async def start_object(self):
        self.emit_progress(80, self.localized("Starting container {name}", name=self.container_name))
        return await super().start_object()
