"""WebSockets to a deployment (a Gradio or Streamlit app, a chat model's stream, a live chart): the same
access as any request (router/access.py), then the messages relayed both ways between the visitor and one
ready replica, each direction waiting for the other side to take a message before it reads the next (so
neither side can fill the router's memory).

A handshake from another site's page is refused before anything reaches the app: browsers send a
WebSocket with the visitor's cookies whatever the page (cross-site WebSocket hijacking), and the app's own
cookies would otherwise open a session of the visitor's to another site's scripts. Programs (no `Origin`)
and the deployment's own pages (`Sec-Fetch-Site: same-origin`) pass.

An open WebSocket counts as one of the deployment's requests in flight, for as long as it is open, so the
deployment's bound (`DeploymentPolicy.max_concurrent_requests`) bounds them too. A replica that stops
closes its sockets; the client opens a new one, which goes to a ready replica.
"""

from __future__ import annotations

import asyncio
import logging
import time
from urllib.parse import quote, urlparse

import aiohttp
import yarl
from tornado.routing import PathMatches
from tornado.websocket import WebSocketClosedError, WebSocketHandler

from workspace.db import utcnow
from workspace.i18n import N_
from workspace.router.access import Access

log = logging.getLogger("workspace.router")
HANDSHAKE_TIMEOUT = 10.0  # s a replica has to take a WebSocket
# what the router's own handshake with the replica sets (aiohttp), never the visitor's values
HANDSHAKE = {"sec-websocket-key", "sec-websocket-version", "sec-websocket-extensions", "sec-websocket-protocol"}
UNSENDABLE = {1004, 1005, 1006, 1015}  # close codes that may not be sent in a close frame (RFC 6455 7.4.1)


class UpgradeMatches(PathMatches):
    """A route's path, for a WebSocket handshake only (other requests go to the next rule)."""

    def match(self, request):
        if request.headers.get("Upgrade", "").lower() != "websocket":
            return None
        return super().match(request)


def close_code(code: int | None) -> int:
    """The code to close the visitor's side with when the replica's side closed with `code`."""
    if code is None or code in UNSENDABLE or not 1000 <= code < 5000:
        return 1011
    return code


class SocketHandler(Access, WebSocketHandler):
    def initialize(self, **kwargs):
        super().initialize(**kwargs)
        self.replica: aiohttp.ClientWebSocketResponse | None = None
        self.relay: asyncio.Future | None = None
        self.route = None

    def cross_site(self) -> bool:
        """Whether the handshake comes from another origin's page (Fetch metadata, else `Origin`)."""
        site = self.request.headers.get("Sec-Fetch-Site")
        if site is not None:
            return site not in ("same-origin", "none")
        origin = self.request.headers.get("Origin")
        return origin is not None and urlparse(origin).netloc.lower() != self.request.host.lower()

    async def get(self, owner: str, name: str, path: str):
        started = time.monotonic()
        if self.cross_site():
            return self.refuse(403, N_("A WebSocket from another site's page is refused."))
        route = await self.admit(owner, name)
        if route is None:
            return
        self.replica = await self.connect(route, path)
        self.counts.add(route.id, time.monotonic() - started, self.replica is None, utcnow())
        if self.replica is None:
            return self.refuse(502, N_("The deployment {name} did not answer; try again in a moment."), name=name)
        self.route = route
        self.counts.in_flight[route.id] += 1
        try:
            await super().get(owner, name, path)
        finally:
            if self.get_status() != 101:  # tornado refused the handshake: nothing will be relayed
                self.on_close()

    async def connect(self, route, path: str) -> aiohttp.ClientWebSocketResponse | None:
        """A WebSocket to the first ready replica that takes one, or None."""
        prefix = f"/serve/{quote(route.owner, safe='')}/{quote(route.name, safe='')}"
        query = f"?{self.request.query}" if self.request.query else ""
        headers = self.outgoing_headers(prefix)
        for header in HANDSHAKE:
            headers.popall(header, None)
        asked = self.request.headers.get("Sec-WebSocket-Protocol", "")
        protocols = [p.strip() for p in asked.split(",") if p.strip()]
        for address in self.table.usable(route.order()):
            try:
                return await asyncio.wait_for(
                    self.upstream.sockets().ws_connect(
                        yarl.URL(f"http://{address}/{path}{query}", encoded=True),
                        headers=headers,
                        protocols=protocols,
                        max_msg_size=self.max_message_size,
                        autoclose=False,
                    ),
                    HANDSHAKE_TIMEOUT,
                )
            except (aiohttp.ClientConnectorError, aiohttp.ConnectionTimeoutError, asyncio.TimeoutError):
                self.table.suspect(address)  # dead or stopping: the next one
            except (aiohttp.ClientError, OSError) as error:
                log.warning("%s/%s: %s refused a WebSocket: %r", route.owner, route.name, address, error)
                return None
        return None

    @property
    def max_message_size(self) -> int:
        return self.policy.max_request_body

    def select_subprotocol(self, subprotocols: list[str]) -> str | None:
        return self.replica.protocol if self.replica is not None else None

    def open(self, *args):
        self.relay = asyncio.ensure_future(self.from_replica())

    async def on_message(self, message):
        """The visitor's message to the replica (tornado reads the next one once this returns)."""
        try:
            if isinstance(message, bytes):
                await self.replica.send_bytes(message)
            else:
                await self.replica.send_str(message)
        except (aiohttp.ClientError, ConnectionError, RuntimeError):
            self.close(1011)

    async def from_replica(self) -> None:
        replica = self.replica
        try:
            while True:
                msg = await replica.receive()
                if msg.type == aiohttp.WSMsgType.TEXT:
                    await self.write_message(msg.data)
                elif msg.type == aiohttp.WSMsgType.BINARY:
                    await self.write_message(msg.data, binary=True)
                else:  # closed, closing, or an error
                    break
        except (WebSocketClosedError, aiohttp.ClientError, ConnectionError):
            pass
        finally:
            self.close(close_code(replica.close_code))

    def on_close(self):
        if self.route is not None:
            self.counts.in_flight[self.route.id] -= 1
            self.route = None
        if self.replica is not None and not self.replica.closed:
            asyncio.ensure_future(self.replica.close())
