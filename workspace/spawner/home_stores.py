"""The home stores a spawner uses: which store holds a node's homes, and a home's restore and save.

Every start restores its home from the chosen earlier execution into the store of
its node; every stop saves the home as that execution's output, then (off the stop
path) measures it and sends it to the store of record (`record_store_root`).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from pathlib import Path

from workspace import lifecycle, replicas
from workspace.db import database
from workspace.limits import quotas
from workspace.store.copier import Transfer
from workspace.store.homes import HomeStore, store_for


class HomeStoresMixin:
    """The stores of homes and a home's restore and save (mixed into WorkspaceMixin, whose traits
    `store_root`, `store_backend`, `record_store_root` and `home_uid`/`home_gid` they read)."""

    # one store per (root, backend) in a hub process, shared by all its spawners
    _stores: dict = {}
    _stores_lock = threading.Lock()

    @property
    def db(self):
        return database(self.db_url, self.secret_key_file)

    @property
    def home_store(self) -> HomeStore:
        """The store of this hub process, set up (and cleaned of partial saves) once."""
        key = (self.store_root, self.store_backend)
        # Setting up cleans partial saves: it must happen once, never while
        # another thread of this hub is saving.
        with HomeStoresMixin._stores_lock:
            return self._home_store(key)

    def _home_store(self, key) -> HomeStore:
        if key not in HomeStoresMixin._stores:
            kwargs = {"uid": self.home_uid, "gid": self.home_gid, "parent": self}
            clean = self.cleans_home_store
            store = store_for(self.store_root, clean=clean, backend=self.store_backend, **kwargs)
            self.log.info("Home store: %s at %s", store.kind, self.store_root)
            # workspace.* loggers (lifecycle, homes) write to the hub's log
            logging.getLogger("workspace").parent = self.log
            HomeStoresMixin._stores[key] = store
        return HomeStoresMixin._stores[key]

    @property
    def cleans_home_store(self) -> bool:
        """Whether this hub removes its store's partial saves at its start: it does when it is the one
        that writes them."""
        return True

    def store_of(self, node: str | None) -> HomeStore:
        """The store where executions placed on `node` keep their homes (one store here: `home_store`)."""
        return self.home_store

    @property
    def execution_store(self) -> HomeStore:
        """The store of the current execution's node."""
        return self.store_of(self.node or None)

    @property
    def home_dir(self) -> Path:
        """The host directory of the current execution's live home."""
        return self.execution_store.live_path(self.live_key)

    def dataset_mounts(self, mounts: list[dict]) -> list[tuple[str, str]]:
        """(source, mount point) of each dataset version a start mounts, in its node's store."""
        store = self.execution_store
        # a deployment's replica (#33) mounts a saved output (a snapshot) where others mount a dataset version
        return [
            (
                str(store.snapshot_path(m["key"]) if m.get("source") == "output" else store.dataset_path(m["key"])),
                m["mount"],
            )
            for m in mounts
        ]

    @property
    def record_store(self) -> HomeStore:
        """The store of record (`record_store_root`), set up once per hub process."""
        with HomeStoresMixin._stores_lock:
            key = (self.record_store_root, "record")
            if key not in HomeStoresMixin._stores:
                HomeStoresMixin._stores[key] = store_for(
                    self.record_store_root, backend="btrfs", uid=self.home_uid, gid=self.home_gid
                )
            return HomeStoresMixin._stores[key]

    @property
    def replicates(self) -> bool:
        """Whether saved outputs are sent to a store of record (`record_store_root`)."""
        return bool(self.record_store_root)

    async def _restore(self, plan) -> None:
        if plan.restore_snapshot:
            self.emit_progress(
                15, self.localized("Restoring the home of #{number}", number=plan.restore_from or plan.parent)
            )
        loop = asyncio.get_running_loop()

        def report(t: Transfer) -> None:
            done = t.bytes / t.bytes_total if t.bytes_total else 1
            text = self.localized("Restoring the home: {transfer}", transfer=t.describe(self.locale))
            loop.call_soon_threadsafe(self.emit_progress, 15 + int(45 * done), text)

        store = self.execution_store
        self.current.restore = self.executor.submit(
            lifecycle.restore, self.db, store, plan, report if plan.restore_snapshot else None
        )
        stats = await asyncio.wrap_future(self.current.restore)
        if plan.restore_snapshot and stats.shared_files:
            self.emit_progress(
                60,
                self.localized(
                    "Restored #{number}'s home: {files:,} files, {mb:,.1f} MB in {seconds:.2f} s, "
                    "sharing {shared:,} files (snapshot)",
                    number=plan.restore_from or plan.parent,
                    files=stats.files,
                    mb=stats.bytes / 1e6,
                    seconds=stats.seconds,
                    shared=stats.shared_files,
                ),
            )
        elif plan.restore_snapshot:
            self.emit_progress(
                60,
                self.localized(
                    "Restored #{number}'s home: {files:,} files, {mb:,.1f} MB in {seconds:.2f} s",
                    number=plan.restore_from or plan.parent,
                    files=stats.files,
                    mb=stats.bytes / 1e6,
                    seconds=stats.seconds,
                ),
            )
        else:
            self.emit_progress(60, self.localized("Created an empty home"))
        self.current.home_limit = limit = await self.run_blocking(lifecycle.limit_home, self.db, store, plan)
        if limit.describe(self.locale):
            self.emit_progress(62, limit.describe(self.locale))

    async def _wait_restore(self) -> None:
        """Wait for a restore still running in a thread (its awaiter may have been cancelled)."""
        future = self.current.restore
        if future is not None and not future.done():
            try:
                await asyncio.wrap_future(future)
            except Exception:
                pass

    async def _end_execution(self, execution_id: int | None, reason: str, detail: str | None, node: str) -> None:
        """Save the home of an execution that ran on `node`; drop the home of one that never did."""
        if execution_id is None:
            return
        db = self.db
        store = await self.run_blocking(self.store_of, node or None)
        state = await self.run_blocking(lifecycle.state_of, db, execution_id)
        if state in ("stopped", "failed"):
            return
        if state in ("queued", "preparing", "pulling", "restoring"):
            message = (
                self.localized("Left the queue: nothing ran, so there is no output to save.")
                if state == "queued"
                else self.localized("Closed while preparing: nothing ran, so there is no output to save.")
            )
            if getattr(self, "_interrupted", False):  # nobody closed it: its hub died (startup.py), `detail` says so
                reason, message = "lost", detail
            else:
                reason = "user"
            await self.run_blocking(lifecycle.discard, db, store, execution_id, "stopped", message, reason)
            return
        if reason == "completed":  # a task's command ended: say how, from its recorded exit code
            detail = await self.run_blocking(lifecycle.task_ending, db, execution_id)
        if (await self.run_blocking(lifecycle.kind_of, db, execution_id))[0] == "serve":
            # a deployment's replica (#33): nothing of its home is saved
            await self.run_blocking(lifecycle.end_replica, db, store, execution_id, reason, detail)
            return
        final = await self.run_blocking(lifecycle.save, db, store, execution_id, reason, detail)
        if final == "stopped":
            # the size of the snapshot is for the record; measure it off the stop path
            self.executor.submit(self._after_save, execution_id, store)

    def _after_save(self, execution_id: int, store: HomeStore) -> None:
        """Off the stop path: record the output's size, replicate the output, measure the owner's storage."""
        try:
            lifecycle.record_snapshot_size(self.db, store, execution_id)
        except Exception:
            self.log.exception("Measuring the snapshot of execution %s failed", execution_id)
        if self.replicates:
            try:  # off the stop path too; a failure is recorded and retried
                key = lifecycle.snapshot_key_of(self.db, execution_id)
                if key:
                    replicas.replicate(self.db, store, self.record_store, key)
            except Exception:
                self.log.exception("Replicating the output of execution %s failed", execution_id)
        try:
            # the user's storage changed: measure it now, so that the next start need not wait for it
            quotas.measure(self.db, self.home_store, self.user.name)
        except Exception:
            self.log.exception("Measuring the storage of %s failed", self.user.name)
