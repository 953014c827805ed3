"""Where a start runs: the node chosen by the queue's admission.

Every start waits in the queue (state `queued`) until a node has room for it: a
start-up turn (a node brings up only so many at once, `startup_slots`), and for
a type that may wait its capacity and GPUs. Its progress shows its position and
the expected wait. Nodes that hold the home's snapshot are preferred, so that
the home need not travel; of those, the node a course's pre-warm chose for it.

A start waits on `TURNS`, a nudge within the hub's process, as well as its own
timer: a start-up that ends (ready, failed, stopped) wakes the first few in
line at once, and the rest look again every few seconds, less often the further
back they are, so that a hundred waiting starts cost the hub a few queries a
second, not a hundred.
"""

from __future__ import annotations

import asyncio
import os
import time

from traitlets import Dict, Float, List, Unicode
from traitlets.config import LoggingConfigurable

from workspace import lifecycle
from workspace.deployments import replica as deployment_replica
from workspace.errors import UserError
from workspace.images import cuda
from workspace.limits import queue, resource_types
from workspace.prewarm import assignment
from workspace.store import nodes
from workspace.store.nodes import Node

# the farthest one looks again between two nudges; well within the queue's heartbeat (queue.QUEUE_HEARTBEAT)
LONGEST_LOOK = 10.0


class Turns:
    """The nudge of the starts waiting in this process: a start-up slot freed or a start admitted."""

    def __init__(self):
        self._waiting: list[tuple[int, asyncio.Future]] = []

    def notify(self) -> None:
        for near_front, waiter in self._waiting:
            if near_front and not waiter.done():
                waiter.set_result(None)

    async def wait(self, near_front: bool, timeout: float) -> None:
        """Until the next nudge (if `near_front`: among the first in line; the others only look again
        on their timer) or `timeout` seconds."""
        waiter = asyncio.get_running_loop().create_future()
        entry = (near_front, waiter)
        self._waiting.append(entry)
        try:
            await asyncio.wait({waiter}, timeout=timeout)
        finally:
            self._waiting.remove(entry)


TURNS = Turns()


class PlacementMixin(LoggingConfigurable):
    """The node of a start, its GPUs and its wait in the queue (mixed into WorkspaceMixin)."""

    gpu_inventory = List(
        Unicode(),
        config=True,
        help="""GPU device IDs of this node, when NVML cannot list them (e.g.
        ["0", "1"]). Empty (the default): NVML's devices, or none.""",
    )
    gpu_driver = Dict(
        config=True,
        help="""This node's NVIDIA driver, when NVML cannot be read here (the hub in
        a container): {"version": "535.104.05", "cuda": "12.2"}. Empty (the
        default): NVML's. A GPU start whose image needs a newer driver is
        refused before its restore (workspace/images/cuda.py).""",
    )
    gpu_device_mode = Unicode(
        "device_requests",
        config=True,
        help="""How a container gets its GPUs: `device_requests` (Docker's
        --gpus with the allocated device IDs; needs the NVIDIA container
        toolkit) or `env` (only NVIDIA_VISIBLE_DEVICES, for a default nvidia
        runtime that reads it).""",
    )
    queue_poll_interval = Float(2.0, config=True, help="Seconds between two looks at the queue while a start waits.")
    queue_timeout = Float(
        24 * 3600,
        config=True,
        help="""The longest a start may wait in the queue (seconds). The wait
        does not count against start_timeout, which bounds the start once
        admitted.""",
    )

    async def _choose_node(self, plan, rtype: resource_types.ResourceType | None) -> str:
        """The node this start runs on, chosen by admission before its home is restored (the home is
        restored into that node's store); nodes that hold the home's snapshot first."""
        cluster = await self.run_blocking(self.cluster_nodes)
        root = rtype is not None and rtype.root
        inventories = nodes.inventories(cluster, rtype.gpu_model if rtype is not None and rtype.gpus else None, root)
        if root and not inventories:
            await self._leave_queue(plan, "failed", self.localized("no node runs root-allowed types"), "error")
            raise UserError(
                409,
                "“{name}” gives root inside the workspace, which runs only on a node whose engine keeps "
                "workspaces in a user namespace, and no such node takes work now; choose another resource type, "
                "or ask your administrator.",
                name=rtype.name,
            )
        if not inventories and not (rtype is not None and rtype.gpus):  # a GPU start says which GPUs are missing
            await self._leave_queue(plan, "failed", self.localized("no node takes work"), "error")
            raise UserError(503, "No node of this server can run a workspace now; please try again in a minute.")
        prefer = await self.run_blocking(self.nodes_holding, plan.restore_snapshot, list(inventories))
        if self.current.serve is not None:  # a deployment's replica (#33): on a node none of its others is on
            spread = deployment_replica.spread_over
            prefer = await self.run_blocking(
                spread, self.db, self.user.name, self.workspace_name, self.name, list(inventories)
            )
        return await self._wait_in_queue(plan, rtype, inventories, prefer, self.startup_limit(cluster))

    def nodes_holding(self, snapshot: str | None, names: list[str]) -> list[str]:
        """Of the nodes `names`, those whose store holds `snapshot` (blocking); first the one a course's
        pre-warm brought it to for this workspace, so that a lecture's burst spreads as it planned
        (workspace/prewarm/: the students of a starter all hold the same snapshot, on several nodes)."""
        if not snapshot:
            return []
        held = [n for n in names if self.store_of(n).has_snapshot(snapshot)]
        noted = assignment.noted_node(self.db, self.user.name, self.workspace_name, snapshot) if len(held) > 1 else None
        return sorted(held, key=lambda n: n != noted)

    async def _leave_queue(self, plan, state: str, detail: str, reason: str) -> None:
        await self.run_blocking(lifecycle.discard, self.db, self.home_store, plan.execution_id, state, detail, reason)

    async def _wait_in_queue(
        self,
        plan,
        rtype: resource_types.ResourceType | None,
        inventories: dict[str, list[str]],
        prefer: list[str],
        startup: queue.StartupLimit,
    ) -> str:
        """Wait (state `queued`) until admitted; report the position when it changes; the node."""
        largest = max((len(ids) for ids in inventories.values()), default=0)
        if rtype is not None and rtype.gpus > largest:
            await self._leave_queue(plan, "failed", self.localized("not enough GPUs on any node"), "error")
            raise UserError(
                503,
                "“{name}” needs {gpus} GPU(s) but no node of this server has more than {largest}; "
                "choose another resource type, or ask your administrator.",
                name=rtype.name,
                gpus=rtype.gpus,
                largest=largest,
            )
        shown = None
        deadline = time.monotonic() + self.queue_timeout
        depth = 2 * startup.total(inventories)  # how many of the first in line a nudge wakes
        # what one person may hold: a run (#31) waits for it; every start's place passes such waiting runs
        # (a deployment's replica, #33, is not one of the workspaces one person may run at once)
        running = None if self.current.serve is not None else self.max_running_per_user or None
        own = queue.OwnLimits(running, exempt=bool(self.user.admin))
        while True:
            admission = await self.run_blocking(
                queue.admit_execution, self.db, plan.execution_id, rtype, inventories, prefer, startup, own
            )
            if admission.admitted:
                TURNS.notify()  # the next in line moved up
                self.current.gpu_ids = gpus = admission.gpu_ids
                name = rtype.name if rtype is not None else None
                self.emit_progress(8, self._admitted(name, admission.node, len(inventories) > 1, gpus))
                return admission.node
            text = admission.describe(rtype, self.locale)
            if text != shown:
                self.emit_progress(3, text, queue_position=admission.position)
                shown = text
            if time.monotonic() > deadline:
                await self._leave_queue(plan, "stopped", self.localized("waited too long in the queue"), "user")
                raise UserError(
                    503,
                    "No “{name}” became free in {hours:g} h; please try again later.",
                    name=rtype.name if rtype is not None else "",
                    hours=self.queue_timeout / 3600,
                )
            look = min(LONGEST_LOOK, self.queue_poll_interval * (1 + (admission.position - 1) // 8))
            await TURNS.wait(admission.position <= depth, look)

    def _admitted(self, name: str | None, node: str, several_nodes: bool, gpus: list[str]) -> str:
        """The progress event of an admission: the type, the node where there are several, the GPUs."""
        ids = ", ".join(gpus)
        if name is None:  # no types configured
            if several_nodes:
                return self.localized("Your turn: starting on {node}", node=node)
            return self.localized("Your turn: starting")
        if several_nodes and gpus:
            return self.localized("Admitted as “{name}” on {node}, GPU(s) {gpus}", name=name, node=node, gpus=ids)
        if several_nodes:
            return self.localized("Admitted as “{name}” on {node}", name=name, node=node)
        if gpus:
            return self.localized("Admitted as “{name}”, GPU(s) {gpus}", name=name, gpus=ids)
        return self.localized("Admitted as “{name}”", name=name)

    @classmethod
    def engine_nodes(cls, options) -> list[Node]:
        """The nodes this engine places starts on (blocking): here, this host with its GPUs and their
        driver. `options`: a spawner, or the `SpawnerOptions` of a process that only shows them."""
        gpus = queue.gpu_inventory(options.gpu_inventory)
        configured = options.gpu_driver or {}
        found = cuda.local_driver() if gpus and not configured else None
        driver = configured.get("version", found.version if found else "")
        supported = configured.get("cuda", found.cuda if found else "")
        return [Node(queue.node_name(), gpus=gpus, cpus=os.cpu_count() or 1, driver=driver, cuda=supported)]

    async def check_driver(self, plan) -> None:
        """A GPU start (each rank of a job) is refused, before anything is restored, when a node it was
        placed on has an NVIDIA driver too old for the image's CUDA runtime (images/cuda.py)."""
        if not self.current.gpu_ids:
            return
        (info,) = await self.run_blocking(self.describe_images, self, [self.image_refs().get(self.image, self.image)])
        image_cuda = (info.get("versions") or {}).get("cuda")
        if not image_cuda:
            return
        known = {n.name: n for n in await self.run_blocking(self.cluster_nodes)}
        ranks = await self.run_blocking(self._placed_ranks, plan.execution_id)
        for name in dict.fromkeys([self.node, *(node for _, node, gpus in ranks if gpus)]):
            node = known.get(name)
            driver = cuda.Driver(node.driver, node.cuda) if node is not None and node.cuda else None
            cuda.check(self.image, image_cuda, name, driver)  # the start fails with its 409, nothing restored

    def cluster_nodes(self) -> list[Node]:
        return self.engine_nodes(self)

    async def receive_inputs(self, plan, mounts: list[dict]) -> None:
        """Bring what the start needs (the snapshot it restores, its dataset versions) into the store of
        its node; with one store (here) everything is there already."""
