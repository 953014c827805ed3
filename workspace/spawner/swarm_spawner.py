"""`SwarmWorkspaceSpawner`: a workspace as a Docker Swarm service on one of the swarm's nodes.

A cluster is a setting, not a fork: this is `DockerWorkspaceSpawner` (so every
`c.DockerWorkspaceSpawner.*` option applies, and so does what only Docker
knows: binds, labels, limits) over dockerspawner's `SwarmSpawner` (a service
per server, created through the manager's API). What differs:

- **A node for every start, before the restore**: the home is restored into
  the store of the node the execution will run on, so the node is chosen
  first (`WorkspaceMixin._choose_node`): GPU types by admission over every
  node's GPUs (`workspace.gpus` labels), the others on the least busy node,
  in both cases the nodes that hold the home's snapshot first.
- **A home store per node** (`workspace.store` label): restores and saves
  stay constant-time where the execution runs. A start on a node that lacks
  the snapshot it restores receives it first (`btrfs send -p`: only the delta
  from the nearest snapshot of its lineage the node holds), with bytes, speed
  and time left in the progress stream; dataset versions are sent to a node
  on first use and kept there read-only (node_inputs.py). Every saved output is then sent to
  the store of record (`record_store_root`, else the hub's own `store_root`),
  so losing a node loses no saved output.
- **The service**: constrained to `node.hostname`, endpoint mode `dnsrr` with
  a host-mode published port (no IPVS is needed), the image by ID (the nodes
  load images, no registry), tini as PID 1, no capability, no restart (a dead
  server ends its execution as `lost`, as on Docker). The hub reaches it at
  its node's address and the task's published port.
- **Exit status from the task**, and a node that stopped answering ends its
  executions as `lost`.

A node labelled with its store agent (`workspace.store-agent`) is reached
only through it, as on separate machines (`make cluster-up`'s nodes have
one too); a node without one has its store reached as a mount of the hub's
(docs/swarm.md).
"""

from __future__ import annotations

import asyncio
import time

import docker
from docker.types import (
    ContainerSpec,
    DriverConfig,
    EndpointSpec,
    NetworkAttachmentConfig,
    Placement,
    Resources,
    RestartPolicy,
    ServiceMode,
    TaskTemplate,
)
from dockerspawner import SwarmSpawner
from traitlets import Float, List, Unicode, default

import workspace.spawner.networks as networks
import workspace.spawner.privileges as privileges
import workspace.spawner.scratch as scratch
from workspace import ssh_identities
from workspace.errors import UserError
from workspace.spawner.docker_spawner import DockerWorkspaceSpawner, engine_client
from workspace.spawner.node_inputs import NodeInputsMixin
from workspace.store.agent_store import read_token
from workspace.store.homes import HomeStore
from workspace.store.nodes import STORE_LABEL, Node, NodeStores, parse_swarm

# task states on the way to running (docker's TaskState)
PENDING_STATES = {"new", "pending", "assigned", "accepted", "ready", "preparing", "starting"}


def published_port(task: dict, target: int) -> int | None:
    """The host port a task publishes `target` on (host mode: the task's own PortStatus)."""
    for port in (task.get("Status", {}).get("PortStatus") or {}).get("Ports") or []:
        if port.get("TargetPort") == target and port.get("PublishedPort"):
            return port["PublishedPort"]
    return None


class SwarmWorkspaceSpawner(NodeInputsMixin, DockerWorkspaceSpawner, SwarmSpawner):
    """A workspace as a Swarm service on one of the swarm's nodes; every `c.DockerWorkspaceSpawner`
    option applies too, and `client_kwargs` names the manager (WORKSPACE_SWARM_MANAGER sets both the
    class and it). A job's other ranks are services too, each on the node admission placed it on.

    See docs/swarm.md: nodes are labelled `workspace.store` (required), `workspace.gpus` and
    `workspace.gpu-model`.
    """

    # the service builds users' images on the hub's own engine; the nodes do not have them (docs/images.md)
    offers_user_images = False
    network_release_wait = 10.0  # a removed service's task leaves its overlay on its node a moment later

    node_refresh = Float(
        5.0,
        config=True,
        help="""Seconds the list of the swarm's nodes (their addresses, stores,
        GPUs and whether they are up) is reused before it is asked again.""",
    )
    task_appear_timeout = Float(
        30.0,
        config=True,
        help="""Seconds a new service may be without a task (the manager makes
        it a moment after the service; longer when busy) before its start fails.""",
    )
    service_networks = List(
        Unicode(),
        config=True,
        help="""More networks (attachable overlays) every workspace's service
        joins, besides its owner's own overlay (`owner_networks`). Empty (the
        default): none; the hub reaches each workspace on its node's address.""",
    )

    gateway_sources = List(
        Unicode(),
        config=True,
        help="""The addresses the SSH gateway's connections reach a workspace's
        sshd from (its port is published on the node, so they come from the
        hub's machine as the node sees it): the gateway's key is accepted from
        these only (`from=` in authorized_keys). Empty (the default): the
        address this machine sends from towards the workspace's node (its
        route's source), right where nothing translates addresses between
        the hub and the nodes; name them where something does (a NAT, a load
        balancer). Addresses or patterns as sshd's `from=` takes them.""",
    )

    nodes_have_own_stores = True
    store_agent_url = Unicode(
        "",
        config=True,
        help="""The URL of the store agent (workspace/store/agent.py) serving
        the hub's own store (`store_root`), for swarms of separate machines:
        nodes whose `workspace.store-agent` label names their agent are
        reached only through it, and snapshots move between agents, node to
        node. Empty (the default): every node's store is a mount the hub
        reaches itself (one machine).""",
    )
    store_agent_token_file = Unicode(
        "",
        config=True,
        help="""A file holding the store agents' shared token (a Docker secret
        on a swarm); needed with store agents.""",
    )

    _nodes: tuple[float, list[Node]] | None = None
    _node_stores: NodeStores | None = None

    @default("use_internal_ip")
    def _default_use_internal_ip(self):
        return False  # the hub reaches the node's address and the task's published port

    # -- the nodes ----------------------------------------------------------------------

    @classmethod
    def engine_nodes(cls, options) -> list[Node]:
        """The swarm's nodes that have a home store, asked of the manager `options.client_kwargs` names
        (blocking; for the processes that show them, such as the workspace service)."""
        client = engine_client(options)
        try:
            return [n for n in parse_swarm(client.nodes()) if n.store]
        finally:
            client.close()

    def cluster_nodes(self) -> list[Node]:
        """The swarm's nodes that have a home store (blocking; cached `node_refresh` seconds)."""
        cls = SwarmWorkspaceSpawner
        cached = cls._nodes
        if cached is None or time.monotonic() - cached[0] > self.node_refresh:
            nodes = [n for n in parse_swarm(self.client.nodes()) if n.store]
            cls._nodes = (time.monotonic(), nodes)
            return nodes
        return cached[1]

    def cluster_node(self, name: str) -> Node | None:
        return next((n for n in self.cluster_nodes() if n.name == name), None)

    @property
    def node_stores(self) -> NodeStores:
        """Every node's store (through its agent where it has one), for this hub process."""
        cls = SwarmWorkspaceSpawner
        if cls._node_stores is None:
            central = self.home_store
            token = read_token(self.store_agent_token_file)
            # the hub is the process that saves: it cleans a mounted store's partial saves, once
            cls._node_stores = NodeStores(
                central, self.cluster_nodes, token, clean=True, uid=self.home_uid, gid=self.home_gid
            )
        return cls._node_stores

    def store_of(self, node: str | None) -> HomeStore:
        """The store of `node` (its `workspace.store`, through its `workspace.store-agent`); no node: the hub's."""
        if not node:
            return self.home_store
        stores = self.node_stores
        if not stores.known(node):
            stores.nodes()
        if not stores.known(node):
            raise UserError(
                500,
                "The node {node} has no home store (label {label}); please tell your administrator.",
                node=node,
                label=STORE_LABEL,
            )
        return stores.of(node)

    @property
    def cleans_home_store(self) -> bool:
        return not self.store_agent_url  # with an agent, the agent receives into it (and cleans at its start)

    @property
    def central_store(self):
        """The hub's own store as the nodes reach it: through its agent where the nodes have agents."""
        if self.store_agent_url:
            return self.node_stores.store(self.store_root, self.store_agent_url)
        return self.home_store

    @property
    def replicates(self) -> bool:
        return True  # a node's store is never the only copy of a saved output

    @property
    def record_store(self) -> HomeStore:
        """The store of record: `record_store_root`, else the hub's own store."""
        return super().record_store if self.record_store_root else self.central_store

    # -- the service -------------------------------------------------------------------------

    async def prepare_image(self) -> None:
        await super().prepare_image()
        # by ID: the nodes hold the same image (loaded, no registry) and ask no registry for an ID
        self.current.image_id = (await self.docker("inspect_image", self.image))["Id"]

    async def create_object(self):
        node = self.node
        if self._as_rank is None:
            said = self.localized("Creating the workspace's service on {node}", node=node)
        else:
            said = self.localized("Creating the service of rank {rank} on {node}", rank=self._as_rank.rank, node=node)
        self.emit_progress(70, said)
        # sshd's port is published on the node (host mode, as the server's): the gateway's connections come
        # from the hub's machine as the node sees it, and its key is accepted from there only
        gateway_from = await self.run_blocking(self.gateway_from, node)
        self.current.ssh_env = await self.run_blocking(self.ssh_environment, gateway_from, self.owner_networks)
        alias = self.job_alias()
        container = dict(
            image=self.current.image_id or self.image,
            env=self.get_env(),
            args=await self.get_command(),
            mounts=[*self.mounts, *self._scratch_mounts()],
            # the writable layer has no size limit on the nodes' ext4: nothing is written there at all (but by a
            # root-allowed type, on its user-namespaced node's own data root)
            read_only=self._read_only_root,
            labels=self.container_labels(),
            init=True,  # tini as PID 1 reaps terminals' and kernels' zombies
            **privileges.swarm_container(self.current.root),  # no capability; a root type's, namespaced
            **self.extra_container_spec,
        )
        if self.current.job is not None:  # a job's rank is its name to itself too (mpirun tells hosts by name)
            container["hostname"] = alias
        resources = Resources(
            cpu_limit=int(self.cpu_limit * 1e9) if self.cpu_limit else None,
            mem_limit=self.mem_limit,
            **self.extra_resources_spec,
        )
        if self.pids_limit:  # API 1.41: tasks' process limit (a fork bomb stays inside)
            resources.setdefault("Limits", {})["Pids"] = self.pids_limit
        task = TaskTemplate(
            container_spec=ContainerSpec(**container),
            resources=resources,
            # a dead server ends its execution (saved, `lost`); the swarm must not start another
            restart_policy=RestartPolicy(condition="none"),
            placement=Placement(constraints=[f"node.hostname=={node}"], **self.extra_placement_spec),
            networks=await self._networks(alias),
            # the log is read from the engine: bounded while it runs (the hub keeps its tail at the end)
            log_driver=DriverConfig(
                "json-file", {"max-size": str(max(1 << 20, self.execution_log_limit)), "max-file": "2"}
            ),
            **self.extra_task_spec,
        )
        endpoint = EndpointSpec(mode="dnsrr", ports=self._published_ports(), **self.extra_endpoint_spec)
        return await self.docker(
            "create_service",
            task_template=task,
            endpoint_spec=endpoint,
            name=self.container_name,  # the service's name, with `-rK` for a job's rank K
            labels=self.container_labels(),
            **self.extra_create_kwargs,
        )

    def _published_ports(self) -> list[dict]:
        """The server's port and sshd's, published on the node (host mode); none for a job's other ranks,
        which are reached on the owner's overlay only."""
        if self._as_rank is not None:
            return []
        ports = [{"Protocol": "tcp", "TargetPort": self.port, "PublishMode": "host"}]
        if self.current.ssh_env:
            ports.append({"Protocol": "tcp", "TargetPort": ssh_identities.WORKSPACE_PORT, "PublishMode": "host"})
        if self.current.serve is not None:  # a deployment's replica (#33): its app, for the router
            ports.append({"Protocol": "tcp", "TargetPort": self.current.serve.port, "PublishMode": "host"})
        return ports

    @property
    def _read_only_root(self) -> bool:
        """A root-allowed type's root filesystem is writable (apt-get writes /usr and /var), bounded by its
        node's data root, a filesystem of its own (workspace/setup/userns.py)."""
        return self.read_only_root and not self.current.root

    def _scratch_mounts(self) -> list:
        """The scratch tmpfs volumes of a read-only root (see DockerWorkspaceSpawner.read_only_root)."""
        if not self._read_only_root:
            return []
        return scratch.swarm_mounts(self.scratch_plan(), self.home_uid, self.home_gid)

    @default("extra_create_kwargs")
    def _default_extra_create_kwargs(self):
        return {}  # a service's (the Docker spawner's default is a container's networking)

    async def _networks(self, alias: str) -> list:
        """The owner's overlay (their workspaces reach each other on any node, nobody else's: the tasks
        would otherwise share their node's default bridge with every other owner's), where `alias` (the
        workspace's name, a job's rank's `name-rK`) is its address (`ssh thesis`), and `service_networks`."""
        nets: list = list(self.service_networks)
        if self.owner_networks:
            own = await self.run_blocking(
                networks.ensure,
                self.client,
                self.deployment,
                self.user.name,
                self.owner_network_pool,
                self.owner_network_prefix,
                "overlay",
            )
            nets.insert(0, NetworkAttachmentConfig(own, aliases=[alias] if self.name else None))
        return nets

    def gateway_from(self, node: str) -> str:
        """`from=` of the gateway's key for a workspace on `node` (blocking): `gateway_sources`, else the
        address this machine sends from towards the node; never none (a key accepted from anywhere)."""
        if self.gateway_sources:
            return ",".join(self.gateway_sources)
        found = self.cluster_node(node)
        source = networks.source_towards(found.address) if found is not None and found.address else None
        if source is None:
            raise RuntimeError(
                f"No address of this machine towards {node} is known: the SSH gateway's key could not be "
                "limited to it (set SwarmWorkspaceSpawner.gateway_sources)"
            )
        return source

    async def start_object(self):
        """Wait until the service's task runs on its node, or fail with the task's own error."""
        self.emit_progress(80, self.localized("Starting the workspace on {node}", node=self.node))
        await self._task_running(self.get_task, self.service_name)

    async def _task_running(self, find_task, service: str) -> None:
        """Wait until the task `find_task()` says runs (dockerspawner backs off to 11 s; a start waits for
        it, so look often), or fail with the task's own error."""
        delay, made = 0.2, time.monotonic()
        while True:
            task = await find_task()
            if task is None:
                # the manager makes a new service's task a moment after the service (longer when busy)
                if time.monotonic() - made < self.task_appear_timeout:
                    await asyncio.sleep(delay)
                    delay = min(delay * 1.5, 1.0)
                    continue
                raise RuntimeError(f"The service {service} got no task in {self.task_appear_timeout:g} s.")
            status = task["Status"]
            state = status["State"]
            if state == "running":
                return
            if state not in PENDING_STATES:
                raise RuntimeError(f"The task of {service} on {self.node} is {state}: {status.get('Err') or status}")
            await asyncio.sleep(delay)
            delay = min(delay * 1.5, 1.0)

    # -- a job's ranks (#31, spawner/jobs.py): a service each, on the node admission placed it on ----------

    async def start_rank_object(self) -> str:
        service = (await self.create_object())["ID"]
        await self._task_running(lambda: self._service_task(service), self.container_name)
        return service

    async def _service_task(self, service_id: str) -> dict | None:
        """The task of a rank's service (it has one: no restarts); None before the manager made it or once
        the service is gone."""
        try:
            tasks = await self.docker("tasks", filters={"service": service_id})
        except docker.errors.NotFound:
            return None
        return max(tasks, key=lambda t: t.get("CreatedAt", ""), default=None)

    async def rank_object_state(self, container_id: str) -> tuple[bool, int | None]:
        try:
            task = await self._service_task(container_id)
        except docker.errors.DockerException as e:
            self.log.warning("Could not ask the manager about a rank of %s: %s", self._log_name, e)
            return True, None  # a manager that does not answer is no proof the rank ended
        if task is None:
            return False, None
        status = task["Status"]
        if status["State"] == "running" or status["State"] in PENDING_STATES:
            return await self._node_up(task), None  # its node stopped answering: the rank is lost
        return False, (status.get("ContainerStatus") or {}).get("ExitCode")

    async def remove_rank_object(self, container_id: str) -> None:
        await self._scale_to_zero(container_id)
        try:
            await self.docker("remove_service", container_id)
        except docker.errors.NotFound:
            pass

    async def get_ip_and_port(self):
        node = await self.run_blocking(self.cluster_node, self.node)
        if node is None or not node.address:
            raise RuntimeError(f"The node {self.node} is not in the swarm.")
        for _ in range(50):  # the port is in the task's status once it runs
            port = published_port(await self.get_task() or {}, self.port)
            if port:
                return node.address, port
            await asyncio.sleep(0.1)
        raise RuntimeError(f"The task of {self.service_name} publishes no port for {self.port}.")

    async def serve_address(self, ip_and_port, port: int) -> str:
        """The node's address and the port the task publishes the replica's app on (#33)."""
        published = published_port(await self.get_task() or {}, port)
        if not published:
            raise RuntimeError(f"The task of {self.service_name} publishes no port for {port}.")
        return f"{ip_and_port[0]}:{published}"

    async def ssh_address(self, ip_and_port) -> str | None:
        """The node's address and the port the task publishes sshd's on."""
        if not self.current.ssh_env:
            return None
        port = published_port(await self.get_task() or {}, ssh_identities.WORKSPACE_PORT)
        return f"{ip_and_port[0]}:{port}" if port else None

    async def _node_up(self, task: dict) -> bool:
        def ready() -> bool:
            return next((n.ready for n in self.cluster_nodes() if n.id == task.get("NodeID")), False)

        def ask():
            # every poll of every workspace asks: the cached list says "up"; a "down" that would end an
            # execution is confirmed by a fresh look
            if ready():
                return True
            SwarmWorkspaceSpawner._nodes = None
            return ready()

        try:
            return await self.run_blocking(ask)
        except docker.errors.DockerException:
            return True  # the manager did not answer: no verdict on the node

    async def poll(self):
        if await self.start_interrupted():
            return 1  # as WorkspaceMixin.poll, which this one (the engine's) comes before
        try:
            task = await self.get_task()
        except docker.errors.DockerException as e:
            self.log.warning("Could not ask the manager about %s: %s", self._log_name, e)
            return None  # a manager that does not answer is no proof the workspace ended
        if task is None:
            return 0
        state = task["Status"]["State"]
        if state == "running" or state in PENDING_STATES:
            if not await self._node_up(task):
                return f"node {self.node} lost"
            return await self.job_poll()  # a rank of its job that failed or was lost ends it
        return state

    @staticmethod
    def _log_stream(client, record_id: str, since: float | None, tail: int | None = None):
        # the manager gathers the service's log from the node its task ran on
        return client.service_logs(
            record_id, stdout=True, stderr=True, timestamps=True, since=since or 0, tail=tail or "all"
        )

    async def container_exit_code(self) -> int | None:
        try:
            task = await self.get_task()
        except docker.errors.DockerException:
            return None
        return ((task or {}).get("Status", {}).get("ContainerStatus") or {}).get("ExitCode")

    async def _container_exit(self, task: bool = False) -> tuple[str, str | None]:
        try:
            task = await self.get_task()
        except docker.errors.DockerException as e:
            self.log.warning("Could not inspect the task of %s: %s", self._log_name, e)
            return "user", None
        if task is None:
            return (
                ("lost", self.localized("The workspace's service disappeared.")) if self.object_id else ("user", None)
            )
        status = task["Status"]
        state = status["State"]
        if state == "running" or state in PENDING_STATES:
            if await self._node_up(task):
                return "user", None
            return "lost", self.localized("The node {node} stopped answering.", node=self.node)
        code = (status.get("ContainerStatus") or {}).get("ExitCode")
        if task and (code is not None or state == "complete"):
            return "completed", None  # the exit code is recorded with the log (keep_log)
        if state == "complete" or code == 0:
            return "user", self.localized("Shut down from inside the workspace.")
        error = (status.get("Err") or "").rstrip(": ")
        if code is None and error:
            return "lost", self.localized("The workspace's task ended as {state}: {error}", state=state, error=error)
        if code is None:
            return "lost", self.localized("The workspace's task ended as {state}", state=state)
        if code == 137:
            return "lost", self.localized(
                "The container exited with status {code} (killed, perhaps out of memory).", code=code
            )
        return "lost", self.localized("The container exited with status {code}.", code=code)

    async def stop_object(self):
        """Stop the task before its service is removed, so that its home is saved after the last write
        (removing a service stops its container later, on its node): scale to 0 and wait."""
        if self.object_id:
            await self._scale_to_zero(self.object_id)

    async def _scale_to_zero(self, service_id: str) -> None:
        """Stop a service's task and wait (at most 30 s) until it no longer runs: its last write is in its
        home before the home is saved, its last line in its log."""
        try:
            task = await self._service_task(service_id)
            if task is None or task["Status"]["State"] not in PENDING_STATES | {"running"}:
                return
            if not await self._node_up(task):
                return  # nothing answers there; its home is saved as it is
            service = await self.docker("inspect_service", service_id)
            await self.docker(
                "update_service",
                service_id,
                service["Version"]["Index"],
                mode=ServiceMode("replicated", replicas=0),
                fetch_current_spec=True,
            )
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                tasks = await self.docker("tasks", filters={"service": service_id})
                if all(t["Status"]["State"] not in PENDING_STATES | {"running"} for t in tasks):
                    return
                await asyncio.sleep(0.2)
            self.log.warning("A task of %s did not stop in 30 s; removing its service", self._log_name)
        except docker.errors.NotFound:
            return

    def container_record_id(self) -> str:
        return self.object_id or ""
