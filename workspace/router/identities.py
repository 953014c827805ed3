"""Who a session on an owner's host names, as the hub has them now (router/handoff.py): their user
model (name and groups, for a course's deployment), asked of the hub's API with the router's own token
(its role: `read:users:name`, `read:users:groups`) and kept `MAX_AGE` seconds, as the hub's OAuth
logins are. A user the hub no longer has is nobody."""

from __future__ import annotations

import logging
import time
from urllib.parse import quote

import aiohttp

log = logging.getLogger("workspace.router")
MAX_AGE = 60.0
MAX_KEPT = 10_000  # a bound on what the cache holds


class Identities:
    def __init__(self, hub_api_url: str, token: str):
        self.url, self.token = hub_api_url.rstrip("/"), token
        self.kept: dict[str, tuple[float, dict | None]] = {}
        self._session: aiohttp.ClientSession | None = None

    async def get(self, name: str) -> dict | None:
        now = time.monotonic()
        hit = self.kept.get(name)
        if hit is not None and hit[0] > now:
            return hit[1]
        model = await self._ask(name)
        if len(self.kept) >= MAX_KEPT:
            self.kept = {k: v for k, v in self.kept.items() if v[0] > now}
            while len(self.kept) >= MAX_KEPT:
                del self.kept[next(iter(self.kept))]
        self.kept[name] = (now + MAX_AGE, model)
        return model

    async def _ask(self, name: str) -> dict | None:
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10))
        url = f"{self.url}/users/{quote(name, safe='')}"
        async with self._session.get(url, headers={"Authorization": f"token {self.token}"}) as r:
            if r.status == 404:
                return None
            if r.status != 200:
                log.error("the hub answered %s for %s: the router's role may lack read:users:groups", r.status, url)
                raise RuntimeError(f"the hub answered {r.status}")
            model = await r.json()
        return {"name": model.get("name"), "groups": model.get("groups") or []}

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
