"""Who may use a deployment (`/serve/OWNER/NAME/…`), for a request and a WebSocket alike.

Access, decided before any byte reaches the deployment:

- public: anyone;
- an API key of the deployment (`Authorization: Bearer wsk_…` or `X-API-Key`), for any access;
- private: its owner, by their JupyterHub token or their login (the router's OAuth cookie);
- course: the members of its course (a JupyterHub group) and its owner.

A browser without a login is sent to the hub's login; anything else gets 401. A known user who may not
use it, and a deployment that does not exist, get the same 404, so that names do not leak.

The deployment is the owner's code, so what reaches it carries nothing of the platform's: the
Authorization header when it was a platform credential (a hub token or a key), the router's and the
hub's cookies, and `X-API-Key`. What comes back may not set the platform's cookies, nor any cookie
outside the deployment's own path. Cookie-authenticated requests that change state must come from the
deployment's own pages (Fetch metadata: `Sec-Fetch-Site: same-origin`), so another site cannot make a
signed-in visitor's browser call a private deployment. With per-user origins on, a deployment is served on
its owner's host (router/hosts.py) and nowhere else but the hub's host, where a browser is sent on to the
owner's and a program's answers carry a CSP sandbox (an opaque origin, never the hub's).
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import time

from jupyterhub.services.auth import HubOAuthenticated, UserNotAllowed
from multidict import CIMultiDict

from workspace.i18n import N_
from workspace.router import handoff
from workspace.router.hosts import ELSEWHERE, HUB, ONE, OWNER

# hop-by-hop headers (RFC 9110 7.6.1) and what the router sets itself
HOP = {"connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade", "host"}
HOP |= {"content-length", "x-api-key"}
COOKIE_PAIR = re.compile(r"\s*([^=;\s]+)=([^;]*)")
KEY_HEADER = re.compile(r"^\s*bearer\s+(wsk_[A-Za-z0-9_-]{43})\s*$", re.I)
HUB_TOKEN = re.compile(r"^\s*(token|bearer)\s+\S+\s*$", re.I)
READ_ONLY = {"GET", "HEAD", "OPTIONS"}


def platform_cookie(name: str, own: str) -> bool:
    """Whether a cookie is the platform's (the hub's, the router's own and its login's, the XSRF token):
    never the app's."""
    return name.startswith((own, "jupyterhub-", "__Host-jupyterhub")) or name == "_xsrf"


def contained_cookie(value: str, prefix: str, own: str) -> str | None:
    """A cookie the app sets (a Set-Cookie value), kept to its own path: never one of the platform's
    cookies, never another path or a domain; None: dropped."""
    name = value.split("=", 1)[0].strip()
    if not name or platform_cookie(name, own):
        return None
    kept = [p for p in value.split(";") if p.strip().split("=", 1)[0].strip().lower() not in ("path", "domain")]
    return "; ".join(p.strip() for p in kept) + f"; Path={prefix}/"


def without_platform_cookies(header: str, own: str) -> str:
    """A Cookie header with the platform's cookies taken out (what the app may see)."""
    return "; ".join(f"{k}={v}" for k, v in COOKIE_PAIR.findall(header) if not platform_cookie(k, own))


class Access(handoff.RouterAuth, handoff.Refusal, HubOAuthenticated):
    """The part of a handler of `/serve/OWNER/NAME/…` that decides who asks and whether they may."""

    def initialize(self, table, counts, policy, wake, upstream, hosts, identities):
        self.table, self.counts, self.policy, self.wake, self.upstream = table, counts, policy, wake, upstream
        self.hosts, self.identities = hosts, identities
        self.place = ONE

    async def admit(self, owner: str, name: str):
        """The route of `owner`'s deployment `name` if this request may use it now (woken and a ready replica
        waited for, within the deployment's bound on requests in flight), else None (answered)."""
        self.place = self.hosts.place(self.request.host_name, owner)
        route = None
        if self.place == ELSEWHERE:  # another user's origin: only their own deployments are there
            verdict = False
        elif self.place == HUB and self.request.method in READ_ONLY and not self.carries_credential():
            return self.redirect(self.hosts.owner_origin(owner) + self.request.uri)  # a browser: to its origin
        else:
            route = self.table.get(owner, name)
            verdict = await self.allowed(route)
        if verdict is None:
            return self.log_in()
        if not verdict:
            return self.refuse(
                404, N_("There is no deployment {owner}/{name} that you may use."), owner=owner, name=name
            )
        if route.status in ("stopped", "failed", "deleting"):
            return self.refuse(503, N_("The deployment {name} is stopped; its owner can start it again."), name=name)
        if route.asleep or not route.replicas:
            route = await self.until_ready(route)
            if route is None:
                return None
        if self.counts.in_flight[route.id] >= self.policy.max_concurrent_requests:
            self.set_header("Retry-After", "1")
            return self.refuse(503, N_("The deployment {name} is busy; try again in a moment."), name=name)
        return route

    async def until_ready(self, route):
        """A deployment without a ready replica (asleep, or starting): woken, and the request waits for a
        replica (a browser gets a page that reloads itself instead)."""
        if route.asleep:
            await asyncio.get_running_loop().run_in_executor(None, self.wake, route.id)
        if "text/html" in self.request.headers.get("Accept", ""):
            self.set_header("Refresh", "5")
            self.refuse(
                503,
                N_("The deployment {name} is starting; this page reloads itself when it is ready."),
                name=route.name,
            )
            return None
        deadline = time.monotonic() + self.policy.wake_timeout
        while time.monotonic() < deadline:
            try:
                await asyncio.wait_for(self.table.changed.wait(), timeout=1.0)
            except asyncio.TimeoutError:
                pass
            fresh = self.table.get(route.owner, route.name)
            if fresh is None:
                break
            if fresh.replicas:
                return fresh
        self.set_header("Retry-After", "10")
        self.refuse(503, N_("The deployment {name} has no replica ready yet; try again in a moment."), name=route.name)
        return None

    def carries_credential(self) -> bool:
        return "Authorization" in self.request.headers or "X-API-Key" in self.request.headers

    def api_key(self) -> str | None:
        header = self.request.headers.get("X-API-Key")
        if header is not None:
            return header.strip()
        match = KEY_HEADER.match(self.request.headers.get("Authorization", ""))
        return match.group(1) if match else None

    async def allowed(self, route) -> bool | None:
        """True: this request may use `route`; False: it may not (a known user, or a wrong key); None: it
        names nobody (log in)."""
        key = self.api_key()
        if key is not None:
            used = hashlib.sha256(key.encode()).hexdigest()
            if route is not None and used in route.keys:
                self.counts.key_used(used)
                return True
            return False
        if route is not None and route.access == "public":
            if HUB_TOKEN.match(self.request.headers.get("Authorization", "")):
                await self.user()  # only to know whether it is a hub token, which the app must not see
            return True
        user = await self.user()
        if user is None:
            return None
        if route is None:
            return False
        if user["name"] == route.owner:
            return True
        return route.access == "course" and route.course in (user.get("groups") or [])

    async def user(self) -> dict | None:
        """The hub's user model of the caller (their token, or the router's login cookie), or None; asked
        of the hub without blocking the loop (the hub's answer is cached a few minutes)."""
        if not hasattr(self, "_hub_auth_user_cache"):
            model = await self.hub_auth.get_user(self, sync=False)
            try:
                self._hub_auth_user_cache = self.check_hub_user(model) if model else None
            except UserNotAllowed:
                self._hub_auth_user_cache = None
            if self._hub_auth_user_cache is None and self.place == OWNER:
                name = handoff.session_user(self)  # the router's own login on this owner's host
                self._hub_auth_user_cache = await self.identities.get(name) if name else None
        return self._hub_auth_user_cache

    def outgoing_headers(self, prefix: str) -> CIMultiDict:
        out = CIMultiDict()
        own = self.hub_auth.cookie_name
        for name, value in self.request.headers.get_all():
            lower = name.lower()
            if lower in HOP:
                continue
            if lower == "authorization" and self.platform_credential(value):
                continue
            if lower == "cookie":
                value = without_platform_cookies(value, own)
                if not value:
                    continue
            out.add(name, value)
        out["X-Forwarded-For"] = self.request.remote_ip or ""
        out["X-Forwarded-Proto"] = self.request.protocol
        out["X-Forwarded-Host"] = self.request.host
        out["X-Forwarded-Prefix"] = prefix
        return out

    def platform_credential(self, value: str) -> bool:
        """Whether an Authorization header was the platform's: a key, or the token the caller was known by."""
        if KEY_HEADER.match(value):
            return True
        return bool(HUB_TOKEN.match(value)) and getattr(self, "_token_authenticated", False)

    # -- answers of the router's own -------------------------------------------------------

    def log_in(self):
        if self.request.method in READ_ONLY and "text/html" in self.request.headers.get("Accept", ""):
            if self.place == OWNER:
                return handoff.begin(self, self.hosts)  # the login is the hub's host's: handed over
            return self.redirect(self.get_login_url())
        self.set_header("WWW-Authenticate", 'Bearer realm="workspace"')
        return self.refuse(
            401, N_("Log in, or send a token or an API key of this deployment in the Authorization header.")
        )
