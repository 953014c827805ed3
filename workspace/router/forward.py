"""A request to `/serve/OWNER/NAME/PATH`: who may make it, and its forwarding to a ready replica.

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

The request goes to the next ready replica in turn; a replica that refuses the connection (it has just
died) is skipped for the next one, so a replica's death costs no request. The app sees its own path
(`/PATH`), with `X-Forwarded-Prefix: /serve/OWNER/NAME` for links it makes.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import re
import time
from urllib.parse import quote

import aiohttp
import yarl
from jupyterhub.services.auth import HubOAuthenticated, UserNotAllowed
from multidict import CIMultiDict
from tornado import web
from tornado.iostream import StreamClosedError

from workspace import i18n
from workspace.db import utcnow
from workspace.i18n import N_
from workspace.router import handoff
from workspace.router.hosts import ELSEWHERE, HUB, ONE, OWNER
from workspace.router.upstream import unreached

log = logging.getLogger("workspace.router")

# hop-by-hop headers (RFC 9110 7.6.1) and what the router sets itself
HOP = {"connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade", "host"}
HOP |= {"content-length", "x-api-key"}
COOKIE_PAIR = re.compile(r"\s*([^=;\s]+)=([^;]*)")
KEY_HEADER = re.compile(r"^\s*bearer\s+(wsk_[A-Za-z0-9_-]{43})\s*$", re.I)
HUB_TOKEN = re.compile(r"^\s*(token|bearer)\s+\S+\s*$", re.I)
READ_ONLY = {"GET", "HEAD", "OPTIONS"}
SANDBOX = "sandbox allow-scripts allow-forms allow-popups allow-downloads allow-modals"
CONNECT_TIMEOUT = 2.0  # s: a replica that does not take the connection by then is passed over
FLUSH_BYTES = 64 * 1024  # a large answer goes out in parts this big; a small one whole, with its length


class Unreachable(Exception):
    """A replica that gave no answer to a request that may go to another."""


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


class ServeHandler(handoff.RouterAuth, HubOAuthenticated, web.RequestHandler):
    SUPPORTED_METHODS = ("GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS")

    def initialize(self, table, counts, policy, wake, upstream, hosts, identities):
        self.table, self.counts, self.policy, self.wake, self.upstream = table, counts, policy, wake, upstream
        self.hosts, self.identities = hosts, identities
        self.place = ONE
        self.sent_headers = False

    # -- who asks -------------------------------------------------------------------------

    def check_xsrf_cookie(self):
        """A cookie-authenticated request that changes state comes from a page of the same origin (Fetch
        metadata, set by the browser), else its cookie does not count."""
        if self.request.method in READ_ONLY:
            return
        if self.request.headers.get("Sec-Fetch-Site", "") != "same-origin":
            raise web.HTTPError(403, "cross-site request with the login cookie")

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

    # -- the request ----------------------------------------------------------------------

    async def serve(self, owner: str, name: str, path: str):
        started = time.monotonic()
        self.place = self.hosts.place(self.request.host_name, owner)
        if self.place == ELSEWHERE:  # another user's origin: only their own deployments are there
            return self.refuse(
                404, N_("There is no deployment {owner}/{name} that you may use."), owner=owner, name=name
            )
        if self.place == HUB and self.request.method in READ_ONLY and not self.carries_credential():
            return self.redirect(self.hosts.owner_origin(owner) + self.request.uri)  # a browser: to its origin
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
                return
        if self.counts.in_flight[route.id] >= self.policy.max_concurrent_requests:
            self.set_header("Retry-After", "1")
            return self.refuse(503, N_("The deployment {name} is busy; try again in a moment."), name=name)
        failed = True
        self.counts.in_flight[route.id] += 1
        try:
            failed = await self.forward(route, path)
        finally:
            self.counts.in_flight[route.id] -= 1
            self.counts.add(route.id, time.monotonic() - started, failed, utcnow())

    get = post = put = delete = patch = options = head = serve

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

    async def forward(self, route, path: str) -> bool:
        """Send the request to the route's ready replicas in turn until one answers; whether it failed. A
        replica that could not be reached is passed over by the next requests for a few seconds (until the
        controller's checks take it out of the table)."""
        for address in self.table.usable(route.order()):
            try:
                return await self.send(route, address, path)
            except Unreachable:
                self.table.suspect(address)
                if self.sent_headers:
                    return True
                continue  # it died or stops: the next one
        if not self.sent_headers:
            self.refuse(502, N_("The deployment {name} did not answer; try again in a moment."), name=route.name)
        return True

    async def send(self, route, address: str, path: str) -> bool:
        """One try at one replica, the answer streamed back as it comes; whether it failed (5xx or cut)."""
        prefix = f"/serve/{quote(route.owner, safe='')}/{quote(route.name, safe='')}"
        url = f"http://{address}/{path}" + (f"?{self.request.query}" if self.request.query else "")
        method = self.request.method
        timeout = aiohttp.ClientTimeout(total=self.policy.request_timeout, sock_connect=CONNECT_TIMEOUT)
        try:
            async with self.upstream.session(method).request(
                method,
                yarl.URL(url, encoded=True),
                headers=self.outgoing_headers(prefix),
                data=self.request.body or None,
                allow_redirects=False,
                timeout=timeout,
            ) as response:
                self.start_response(response.status, response.reason or "", response.headers, prefix)
                streaming = "content-length" not in response.headers
                pending = 0
                async for chunk in response.content.iter_any():
                    if method == "HEAD":
                        continue
                    self.write(chunk)
                    pending += len(chunk)
                    if streaming or pending >= FLUSH_BYTES:  # an event stream's lines go at once
                        pending = 0
                        await self.flush()
                return response.status >= 500
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError, StreamClosedError) as error:
            if not self.sent_headers and unreached(error, method):
                raise Unreachable(address) from error
            if self.sent_headers:  # cut off in the middle: the client sees the end of a broken answer
                return True
            log.warning("%s/%s: %s gave no answer: %r", route.owner, route.name, address, error)
            if isinstance(error, asyncio.TimeoutError):
                self.refuse(504, N_("The deployment {name} took too long to answer."), name=route.name)
            else:
                self.refuse(502, N_("The deployment {name} did not answer; try again in a moment."), name=route.name)
            return True

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

    def start_response(self, code: int, reason: str, headers, prefix: str) -> None:
        self.set_status(code, reason=reason or None)
        self.clear_header("Content-Type")
        self.clear_header("Server")
        for name, value in headers.items():
            lower = name.lower()
            if lower in HOP:
                continue
            if lower == "set-cookie":
                value = contained_cookie(value, prefix, self.hub_auth.cookie_name)
                if value is None:
                    continue
            self.add_header(name, value)
        if self.place == HUB:
            # an opaque origin for whatever the app's pages run: not the hub's, whose pages and cookies
            # per-user origins keep from users' code (SECURITY.md, "Known gaps")
            self.add_header("Content-Security-Policy", SANDBOX)
        self.sent_headers = True

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

    def refuse(self, code: int, message: str, **params) -> None:
        locale = i18n.of_request(self.request)
        self.set_status(code)
        self.set_header("Content-Type", "text/plain; charset=utf-8")
        self.set_header("Cache-Control", "no-store")
        self.finish(i18n.translate(locale, message, **params) + "\n")
