"""The proxy's route to the router on each owner's host (per-user origins, router/hosts.py):
`ada.localhost/serve/` for each user with a deployment, added and removed by the router itself on the
proxy's own API (configurable-http-proxy), because they change with the deployments, not with the hub's
configuration (`Proxy.extra_routes` is read once).

The routes carry no mark of the hub's (`jupyterhub` in their data), so the hub's route check leaves them
alone, and they carry one of the router's, so the router removes only its own. They are compared with the
proxy's table every `CHECK` seconds, so a proxy that restarted (its keeper starts a new one with no
routes) has them back within that time, and at once when the set of owners changes.
"""

from __future__ import annotations

import asyncio
import logging
import time

import aiohttp

from workspace.router.hosts import Hosts

log = logging.getLogger("workspace.router")
MARK = "workspace-router"
CHECK = 10.0  # s between two comparisons with the proxy's table


class ProxyRoutes:
    def __init__(self, api_url: str, token: str, target: str, hosts: Hosts):
        self.api, self.token, self.target, self.hosts = api_url.rstrip("/") + "/api/routes", token, target, hosts
        self._session: aiohttp.ClientSession | None = None

    def wanted(self, owners: set[str]) -> set[str]:
        """The proxy's paths (host routing: `/HOST/PATH`) of the owners' `/serve/` routes."""
        return {f"/{self.hosts.owner_host(owner)}/serve" for owner in owners}

    async def sync(self, owners: set[str]) -> None:
        if self._session is None:
            self._session = aiohttp.ClientSession(
                headers={"Authorization": f"token {self.token}"}, timeout=aiohttp.ClientTimeout(total=10)
            )
        async with self._session.get(self.api) as r:
            r.raise_for_status()
            table = await r.json()
        have = {path for path, data in table.items() if isinstance(data, dict) and data.get(MARK)}
        want = self.wanted(owners)
        for path in sorted(want - have):
            async with self._session.post(self.api + path, json={"target": self.target, MARK: True}) as r:
                r.raise_for_status()
            log.info("proxy route %s -> %s added", path, self.target)
        for path in sorted(have - want):
            async with self._session.delete(self.api + path) as r:
                if r.status != 404:
                    r.raise_for_status()
            log.info("proxy route %s removed: its owner has no deployment", path)

    async def keep(self, owners_now) -> None:
        """Keep the routes right for `owners_now()` (the owners in the router's table), forever."""
        last, checked = None, 0.0
        while True:
            owners = owners_now()
            if owners != last or time.monotonic() - checked > CHECK:
                try:
                    await self.sync(owners)
                    last, checked = owners, time.monotonic()
                except Exception as error:  # the proxy restarting: tried again in a second
                    log.warning("the proxy's routes to the router could not be set: %r", error)
            await asyncio.sleep(0.5)

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
