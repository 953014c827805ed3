"""Where a start runs: the node chosen by the queue's admission, or the least busy one.

A start of a type that may wait is queued (state `queued`) until a node has room
for it; its progress shows its position. Nodes that hold the home's snapshot are
preferred, so that the home need not travel.
"""

from __future__ import annotations

import asyncio
import time

from workspace import lifecycle
from workspace.errors import UserError
from workspace.limits import queue, resource_types
from workspace.store import nodes
from workspace.store.nodes import Node


class PlacementMixin:
    """The node of a start, and its wait in the queue (mixed into WorkspaceMixin)."""

    async def _choose_node(self, plan, rtype: resource_types.ResourceType | None, queued: bool) -> str:
        """The node this start runs on, chosen before its home is restored (the home is restored into
        that node's store): by admission for a type that may wait, else the least busy node; nodes
        that hold the home's snapshot first."""
        inventories = await self.run_blocking(self.gpu_inventories, rtype)
        prefer = await self.run_blocking(self.nodes_holding, plan.restore_snapshot, list(inventories))
        if queued:
            return await self._wait_in_queue(plan, rtype, inventories, prefer)
        # a start without GPUs: CPU-only nodes first, so that GPU nodes stay free for GPU work
        names = sorted(inventories, key=lambda n: (bool(inventories[n]), n))
        return await self.run_blocking(queue.spread, self.db, plan.execution_id, names, prefer)

    def nodes_holding(self, snapshot: str | None, names: list[str]) -> list[str]:
        """Of the nodes `names`, those whose store holds `snapshot` (blocking)."""
        if not snapshot:
            return []
        return [n for n in names if self.store_of(n).has_snapshot(snapshot)]

    async def _wait_in_queue(
        self, plan, rtype: resource_types.ResourceType, inventories: dict[str, list[str]], prefer: list[str]
    ) -> str:
        """Wait (state `queued`) until admitted; report the position when it changes; the node."""
        largest = max((len(ids) for ids in inventories.values()), default=0)
        if rtype.gpus > largest:
            await self.run_blocking(
                lifecycle.discard,
                self.db,
                self.home_store,
                plan.execution_id,
                "failed",
                self.localized("not enough GPUs on any node"),
                "error",
            )
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
        while True:
            admission = await self.run_blocking(
                queue.admit_execution, self.db, plan.execution_id, rtype, inventories, prefer
            )
            if admission.admitted:
                self.current.gpu_ids = gpus = admission.gpu_ids
                self.emit_progress(8, self._admitted(rtype.name, admission.node, len(inventories) > 1, gpus))
                return admission.node
            text = admission.describe(rtype, self.locale)
            if text != shown:
                self.emit_progress(3, text, queue_position=admission.position)
                shown = text
            if time.monotonic() > deadline:
                await self.run_blocking(
                    lifecycle.discard,
                    self.db,
                    self.home_store,
                    plan.execution_id,
                    "stopped",
                    self.localized("waited too long in the queue"),
                    "user",
                )
                raise UserError(
                    503,
                    "No “{name}” became free in {hours:g} h; please try again later.",
                    name=rtype.name,
                    hours=self.queue_timeout / 3600,
                )
            await asyncio.sleep(self.queue_poll_interval)

    def _admitted(self, name: str, node: str, several_nodes: bool, gpus: list[str]) -> str:
        """The progress event of an admission: the type, the node where there are several, the GPUs."""
        ids = ", ".join(gpus)
        if several_nodes and gpus:
            return self.localized("Admitted as “{name}” on {node}, GPU(s) {gpus}", name=name, node=node, gpus=ids)
        if several_nodes:
            return self.localized("Admitted as “{name}” on {node}", name=name, node=node)
        if gpus:
            return self.localized("Admitted as “{name}”, GPU(s) {gpus}", name=name, gpus=ids)
        return self.localized("Admitted as “{name}”", name=name)

    @classmethod
    def engine_nodes(cls, options) -> list[Node]:
        """The nodes this engine places starts on (blocking): here, this host with its GPUs.
        `options`: a spawner, or the `SpawnerOptions` of a process that only shows them."""
        return [Node(queue.node_name(), gpus=queue.gpu_inventory(options.gpu_inventory))]

    def cluster_nodes(self) -> list[Node]:
        return self.engine_nodes(self)

    def gpu_inventories(self, rtype: resource_types.ResourceType | None = None) -> dict[str, list[str]]:
        """{node: GPU IDs} of the nodes that take a start of `rtype` now (blocking)."""
        return nodes.inventories(self.cluster_nodes(), rtype.gpu_model if rtype is not None and rtype.gpus else None)

    async def receive_inputs(self, plan, mounts: list[dict]) -> None:
        """Bring what the start needs (the snapshot it restores, its dataset versions) into the store of
        its node; with one store (here) everything is there already."""
