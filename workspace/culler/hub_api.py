"""The hub's REST API as the culler reads it: the ready servers, with their addresses from the proxy's table.

`HubApi` is mixed into the Culler (workspace/culler/app.py), which gives it `hub_api_url`, `api_token`
(its service's), `request_timeout`, `concurrency` and `_http` (None until the loop runs).
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass

from tornado.httpclient import AsyncHTTPClient, HTTPRequest

from workspace import i18n, origins
from workspace.culler.report import MAX_REPORT, epoch


@dataclass
class Server:
    """A ready workspace server, as the hub and the workspace database know it."""

    user: str
    name: str
    groups: list[str]
    last_activity: float | None
    url: str | None  # the single-user server's base URL, reached directly (None: not in the proxy)
    execution_id: int | None = None
    number: int | None = None
    container_id: str | None = None
    started: float | None = None
    resource_type: str | None = None
    max_runtime: float | None = None  # the resource type's, recorded on the execution
    live_key: str | None = None
    node: str | None = None  # where it runs (whose store holds its live home)
    home_limit: int | None = None  # bytes
    home_files: int | None = None  # files its home may hold
    report_key: str | None = None  # the execution's own secret for its extension
    task: bool = False  # a task (#17): never idle, no extension to ask; its maximum run time applies
    serve: bool = False  # a deployment's replica (#33): never culled (scaled to zero by its deployment)
    locale: str = i18n.DEFAULT  # the language it was started in: its warnings and stop's evidence are said in it

    @property
    def label(self) -> str:
        return f"{self.user}:{self.name}" if self.name else self.user


class HubApi:
    """Calls of the hub's REST API with the culler's own token (its role's scopes: jupyterhub_config.py)."""

    @property
    def http(self) -> AsyncHTTPClient:
        if self._http is None:  # made on the running loop
            self._http = AsyncHTTPClient(
                force_instance=True, max_clients=max(self.concurrency, 2), max_body_size=MAX_REPORT
            )
        return self._http

    async def hub(self, method: str, path: str, body=None, paginated: bool = False, timeout: float | None = None):
        headers = {"Authorization": f"token {self.api_token}"}
        if paginated:
            headers["Accept"] = "application/jupyterhub-pagination+json"
        req = HTTPRequest(
            self.hub_api_url.rstrip("/") + path,
            method=method,
            headers=headers,
            body=None if body is None else json.dumps(body),
            request_timeout=timeout or self.request_timeout,
            allow_nonstandard_methods=True,
        )
        resp = await self.http.fetch(req)
        return json.loads(resp.body) if resp.body else None

    async def _paged(self, path: str) -> list:
        """Every item of a paginated hub list (users), following `_pagination.next`."""
        items, offset = [], 0
        while True:
            sep = "&" if "?" in path else "?"
            page = await self.hub("GET", f"{path}{sep}offset={offset}&limit=200", paginated=True)
            if isinstance(page, list):  # an older hub: no pagination
                return page
            items.extend(page["items"])
            nxt = (page.get("_pagination") or {}).get("next")
            if not nxt:
                return items
            offset = nxt["offset"]

    async def _routes(self) -> dict:
        page = await self.hub("GET", "/proxy?offset=0&limit=100000", paginated=True)
        return page.get("items", page) if isinstance(page, dict) and "_pagination" in page else page

    async def servers(self) -> list[Server]:
        users, routes = await asyncio.gather(self._paged("/users?state=ready"), self._routes())
        out = []
        for user in users:
            for name, s in (user.get("servers") or {}).items():
                if not s.get("ready") or s.get("pending"):
                    continue
                # its public URL is a path, or a URL on the user's subdomain
                url = origins.server_address(s.get("url") or "", routes)
                out.append(
                    Server(
                        user=user["name"],
                        name=name,
                        groups=list(user.get("groups") or []),
                        last_activity=epoch(s.get("last_activity")),
                        url=url,
                    )
                )
        return out
