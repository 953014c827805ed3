"""A running home against its limits: the culler measures it into the usage samples and warns near a limit.

Every `files_interval` it counts a home's files (up to the limit); it reads its bytes at every usage
sample where the store counts them (btrfs, which also enforces the limit) and walks the home for them
once per `files_interval` where it does not (the copy store, which only warns). The notices are
`quotas.home_notice` and `quotas.home_files_notice`, withdrawn once the home is back under.

`HomeWatch` is mixed into the Culler (workspace/culler/app.py), which gives it `store_dir`, `tracked`,
`clock`, `files_interval`, `home_warn_fraction`, `_engine_nodes`, `_agent_token` and `show_notice`.
"""

from __future__ import annotations

import asyncio
import logging

from workspace import i18n
from workspace.culler.hub_api import Server
from workspace.executions import UsageSample
from workspace.i18n import N_
from workspace.limits.quotas import home_files_notice, home_notice
from workspace.store.homes import store_for
from workspace.store.nodes import NodeStores

log = logging.getLogger("workspace.culler")

# what a workspace's notice says when its home is back under a limit
FILES_BACK = N_("Your home is back under its file limit.")
SIZE_BACK = N_("Your home is back under its size limit.")


class HomeWatch:
    """Measuring and warning the limited homes of the running workspaces."""

    @property
    def store(self):
        if getattr(self, "_store", None) is None:
            self._store = store_for(self.store_dir, clean=False)
        return self._store

    def store_of(self, server: Server):
        """The store holding the server's live home: its node's (a swarm's node has its own)."""
        if getattr(self, "_stores", None) is None:
            nodes = getattr(self, "_engine_nodes", None) or list
            self._stores = NodeStores(self.store, nodes, getattr(self, "_agent_token", ""))
        return self._stores.of(server.node)

    async def _watch_home(self, server: Server, sample: UsageSample) -> None:
        """Measure a limited home into its sample; show, change or withdraw its notices."""
        if server.home_files:
            await self._count_files(server)
        if server.home_limit:
            await self._measure_bytes(server, sample)

    async def _count_files(self, server: Server) -> None:
        """Every `files_interval`: count the home's files (up to the limit) and warn near or over it."""
        tracked = self.tracked.get(server.execution_id)
        now = self.clock()
        if tracked is None or now - tracked.files_counted < self.files_interval:
            return
        tracked.files_counted = now
        store = self.store_of(server)
        try:  # in its node's store (through its agent, on another machine)
            files = await asyncio.get_running_loop().run_in_executor(
                None, store.count_files, server.live_key, server.home_files
            )
        except Exception as e:  # its live home went (a stop under way)
            log.info("%s: the home's files could not be counted: %s", server.label, e)
            return
        message = home_files_notice(files, server.home_files, self.home_warn_fraction, server.locale)
        back = i18n.translate(server.locale, FILES_BACK)
        if message != tracked.files_notice and await self.show_notice(server, "home-files", message, back):
            log.info(
                "%s #%s: home has %s%d files (limit %d)",
                server.label,
                server.number,
                "more than " if files > server.home_files else "",
                files,
                server.home_files,
            )
            tracked.files_notice = message

    async def _measure_bytes(self, server: Server, sample: UsageSample) -> None:
        loop = asyncio.get_running_loop()
        tracked = self.tracked.get(server.execution_id)
        store = self.store_of(server)
        enforced = store.kind == "btrfs"  # its qgroup counts the bytes: reading them costs nothing
        if not enforced and tracked is not None and self.clock() - tracked.bytes_walked < self.files_interval:
            # a store that keeps no count is walked: every home has a limit (the quota's rest, #28), and a
            # walk of each one at every sample would read every file of every running home each minute
            sample.home_bytes = tracked.home_bytes
            return
        try:
            used = await loop.run_in_executor(None, store.home_usage, server.live_key)
        except Exception as e:  # its live home went (a stop under way)
            log.info("%s: the home could not be measured: %s", server.label, e)
            return
        sample.home_bytes = used
        if tracked is not None and not enforced:
            tracked.bytes_walked, tracked.home_bytes = self.clock(), used
        message = home_notice(used, server.home_limit, enforced, self.home_warn_fraction, server.locale)
        if tracked is None or message == tracked.home_notice:
            return
        if not await self.show_notice(server, "home-limit", message, i18n.translate(server.locale, SIZE_BACK)):
            return
        log.info(
            "%s #%s: home %d of %d bytes: %s",
            server.label,
            server.number,
            used,
            server.home_limit,
            message or "back under the warning",
        )
        tracked.home_notice = message
