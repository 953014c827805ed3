"""A request to `/serve/OWNER/NAME/PATH` that may use its deployment (router/access.py), forwarded to a
ready replica.

The request goes to the next ready replica in turn; a replica that refuses the connection (it has just
died) is skipped for the next one, so a replica's death costs no request. The app sees its own path
(`/PATH`), with `X-Forwarded-Prefix: /serve/OWNER/NAME` for links it makes. With per-user origins, the
answers of a program's request on the hub's host carry a CSP sandbox (an opaque origin, never the hub's).
"""

from __future__ import annotations

import asyncio
import logging
import time
from urllib.parse import quote

import aiohttp
import yarl
from tornado import web
from tornado.iostream import StreamClosedError

from workspace.db import utcnow
from workspace.i18n import N_
from workspace.router.access import HOP, READ_ONLY, Access, contained_cookie
from workspace.router.hosts import HUB
from workspace.router.upstream import unreached

log = logging.getLogger("workspace.router")

SANDBOX = "sandbox allow-scripts allow-forms allow-popups allow-downloads allow-modals"
CONNECT_TIMEOUT = 2.0  # s: a replica that does not take the connection by then is passed over
FLUSH_BYTES = 64 * 1024  # a large answer goes out in parts this big; a small one whole, with its length


class Unreachable(Exception):
    """A replica that gave no answer to a request that may go to another."""


class ServeHandler(Access, web.RequestHandler):
    SUPPORTED_METHODS = ("GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS")

    def initialize(self, **kwargs):
        super().initialize(**kwargs)
        self.sent_headers = False

    def check_xsrf_cookie(self):
        """A cookie-authenticated request that changes state comes from a page of the same origin (Fetch
        metadata, set by the browser), else its cookie does not count."""
        if self.request.method in READ_ONLY:
            return
        if self.request.headers.get("Sec-Fetch-Site", "") != "same-origin":
            raise web.HTTPError(403, "cross-site request with the login cookie")

    # -- the request ----------------------------------------------------------------------

    async def serve(self, owner: str, name: str, path: str):
        started = time.monotonic()
        route = await self.admit(owner, name)
        if route is None:
            return
        failed = True
        self.counts.in_flight[route.id] += 1
        try:
            failed = await self.forward(route, path)
        finally:
            self.counts.in_flight[route.id] -= 1
            self.counts.add(route.id, time.monotonic() - started, failed, utcnow())

    get = post = put = delete = patch = options = head = serve

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
