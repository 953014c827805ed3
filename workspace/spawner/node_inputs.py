"""What a start needs on its swarm node: the home it restores and the dataset versions it mounts, brought
into that node's store before the restore.

A node that lacks the snapshot a start restores receives it (`btrfs send -p`:
only the delta from the nearest snapshot of its lineage the node holds) from
the store of record or the node that saved it, with bytes, speed and time left
in the progress stream; dataset versions are sent to a node on first use and
kept there read-only.
"""

from __future__ import annotations

import asyncio
import threading

from workspace import replicas
from workspace.errors import UserError
from workspace.executions import Snapshot
from workspace.store import replication
from workspace.store.homes import HomeStore, HomeStoreError


class NodeInputsMixin:
    """The home and datasets of a start, brought to its node (mixed into SwarmWorkspaceSpawner, whose
    `central_store`, `record_store` and `node_stores` it uses)."""

    _receive_locks: dict[tuple[str, str], threading.Lock] = {}
    _receive_locks_guard = threading.Lock()

    def _receive_lock(self, store: HomeStore, key: str) -> threading.Lock:
        # one replication of a key into a store at a time (replication.py); two starts may want it
        with self._receive_locks_guard:
            return self._receive_locks.setdefault((str(store.root), key), threading.Lock())

    async def receive_inputs(self, plan, mounts: list[dict]) -> None:
        store, node = self.execution_store, self.node
        loop = asyncio.get_running_loop()

        def reporter(percent: int, say):
            """A transfer's progress events: `say(transfer)` is the sentence of its figures."""

            def report(t) -> None:
                loop.call_soon_threadsafe(self.emit_progress, percent, say(t.describe(self.locale)))

            return report

        key = plan.restore_snapshot
        if key and not await self.run_blocking(store.has_snapshot, key):
            await self._receive_home(plan, store, node, reporter)
        await self._receive_datasets(mounts, store, node, reporter)

    async def _receive_home(self, plan, store: HomeStore, node: str, reporter) -> None:
        """Bring the snapshot the start restores into `store` (the node's), from the store of record or the
        node that saved it; the user's 503 when none can send it."""
        key = plan.restore_snapshot
        sources = [self.record_store] + [self.store_of(n) for n in await self.run_blocking(self._holders, key)]
        number = plan.restore_from

        def sending(transfer: str) -> str:
            if number:
                return self.localized(
                    "Sending the home of #{number} to {node}: {transfer}",
                    number=number,
                    node=node,
                    transfer=transfer,
                )
            return self.localized(
                "Sending the home of the course's starter to {node}: {transfer}", node=node, transfer=transfer
            )

        def receive():
            with self._receive_lock(store, key):
                if store.has_snapshot(key):
                    return None
                return replicas.receive(self.db, key, store, sources, reporter(12, sending))

        try:
            stats = await self.run_blocking(receive)
        except HomeStoreError as e:
            raise self._not_received(number, node, e) from e
        if stats is not None:
            self.emit_progress(14, self._received(number, node, stats))

    def _not_received(self, number: int | None, node: str, e: HomeStoreError) -> UserError:
        """The user's 503 for a home that could not be brought to `node` (from #`number`; None: the course's
        starter)."""
        if number:
            return UserError(
                503,
                "The saved home of #{number} could not be brought to {node} ({error}). If the node that "
                "saved it is down, its copy reaches the central store once it is back; try again later, "
                "or continue from an earlier execution.",
                number=number,
                node=node,
                error=str(e),
            )
        return UserError(
            503,
            "The saved home of the course's starter could not be brought to {node} ({error}). If the node "
            "that saved it is down, its copy reaches the central store once it is back; try again later, "
            "or continue from an earlier execution.",
            node=node,
            error=str(e),
        )

    async def _receive_datasets(self, mounts: list[dict], store: HomeStore, node: str, reporter) -> None:
        """Bring the dataset versions the start mounts into `store` (the node's) from the central store."""
        for m in mounts:
            version = m["key"]
            if m.get("source") == "output":  # a deployment's replica (#33) mounts a saved output
                await self._receive_output(m, store, node, reporter)
                continue
            if await self.run_blocking(store.has_dataset, version):
                continue

            def send(version=version, ref=m["ref"]):
                with self._receive_lock(store, version):
                    if not store.has_dataset(version):
                        say = self._sending_dataset(ref, node)
                        replication.replicate_dataset(self.central_store, version, store, progress=reporter(13, say))

            await self.run_blocking(send)

    async def _receive_output(self, mount: dict, store: HomeStore, node: str, reporter) -> None:
        """Bring the saved output a replica mounts into `store` (the node's), as a start's home is brought."""
        key = mount["key"]
        sources = [self.record_store] + [self.store_of(n) for n in await self.run_blocking(self._holders, key)]

        def sending(transfer: str) -> str:
            return self.localized(
                "Sending output {output} to {node}: {transfer}", output=mount["ref"], node=node, transfer=transfer
            )

        def receive():
            with self._receive_lock(store, key):
                if not store.has_snapshot(key):
                    replicas.receive(self.db, key, store, sources, reporter(13, sending))

        try:
            await self.run_blocking(receive)
        except HomeStoreError as e:
            raise UserError(
                503,
                "The output {output} could not be brought to {node} ({error}); try again later.",
                output=mount["ref"],
                node=node,
                error=str(e),
            ) from e

    def _received(self, number: int | None, node: str, stats) -> str:
        """The progress event of a home received on `node`: from #`number` (None: the course's starter),
        what was sent (the changes since a parent snapshot, or the whole home)."""
        figures = {"node": node, "mb": stats.bytes / 1e6, "seconds": stats.seconds}
        if number and stats.parent:
            return self.localized(
                "The home of #{number} is on {node}: {mb:,.1f} MB sent in {seconds:.1f} s (changes since {parent})",
                number=number,
                parent=stats.parent,
                **figures,
            )
        if number:
            return self.localized(
                "The home of #{number} is on {node}: {mb:,.1f} MB sent in {seconds:.1f} s (whole home)",
                number=number,
                **figures,
            )
        if stats.parent:
            return self.localized(
                "The home of the course's starter is on {node}: {mb:,.1f} MB sent in {seconds:.1f} s "
                "(changes since {parent})",
                parent=stats.parent,
                **figures,
            )
        return self.localized(
            "The home of the course's starter is on {node}: {mb:,.1f} MB sent in {seconds:.1f} s (whole home)",
            **figures,
        )

    def _sending_dataset(self, ref: str, node: str):
        """The sentence of a dataset version's transfer to `node`, from its figures."""
        return lambda transfer: self.localized(
            "Sending dataset {dataset} to {node}: {transfer}", dataset=ref, node=node, transfer=transfer
        )

    def _holders(self, key: str) -> list[str]:
        """The nodes whose stores may hold output `key` (the one that saved it)."""
        with self.db.session() as s:
            node = s.query(Snapshot.node).filter(Snapshot.key == key).scalar()
        return [node] if node and self.node_stores.known(node) else []
