"""Which host a request to `/serve/` came to, with per-user origins on (JupyterHub's `subdomain_host`).

A deployment runs its owner's code. On one origin (no subdomains) it is served on the hub's host like
everything else. With per-user origins its address is on its owner's own origin
(`http://ada.localhost:8000/serve/ada/digits/`), the origin of their servers, whose scripts cannot read
the hub's pages: the router answers there for that owner's deployments only, and the proxy has a route
`ada.localhost/serve/` for each owner with a deployment (router/proxy_routes.py).

The hub's host keeps `/serve/` for the router's own login (router/handoff.py) and for old links: a
browser's request there is sent to the owner's origin; a request with a token or a key (a program) is
answered there, every answer sandboxed (an opaque origin, never the hub's).
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlparse

from workspace import origins

ONE = "one"  # one origin for everything: no subdomains
HUB = "hub"  # the hub's own host, with per-user origins on
OWNER = "owner"  # the deployment's owner's own host
ELSEWHERE = "elsewhere"  # another user's host: nothing of this deployment is served there


@dataclass(frozen=True)
class Hosts:
    subdomain_host: str | None  # JupyterHub's subdomain_host ("http://localhost:8000"), or None

    @property
    def per_user(self) -> bool:
        return bool(self.subdomain_host)

    @property
    def hub_host(self) -> str | None:
        return urlparse(self.subdomain_host).hostname if self.subdomain_host else None

    @property
    def hub_origin(self) -> str:
        return self.subdomain_host.rstrip("/") if self.subdomain_host else ""

    def owner_host(self, owner: str) -> str:
        return origins.user_host(self.subdomain_host, owner)

    def owner_origin(self, owner: str) -> str:
        return origins.user_origin(self.subdomain_host, owner)

    def place(self, host: str, owner: str) -> str:
        """Where a request for `owner`'s deployment came (`host`: its Host header's name, no port)."""
        if not self.per_user:
            return ONE
        host = host.lower()
        if host == self.hub_host:
            return HUB
        return OWNER if host == self.owner_host(owner) else ELSEWHERE

    def is_owners(self, host: str) -> bool:
        """Whether `host` is a subdomain of the hub's host (some user's own origin)."""
        return self.per_user and host.lower().endswith("." + self.hub_host)
