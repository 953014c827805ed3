"""A course's Label Studio at /services/workspace/labelling/KEY/… (#36): the hub's login, the course's
roles, then the request forwarded to the project's container (workspace/labelling/team.py).

Who asks is the hub's (the service's login cookie, or a token); what they are in the project is decided
here at each request (workspace/labelling/projects.py role_of) and sent to Label Studio with the
project's secret, the only thing it trusts a name from (X-Workspace-User, X-Workspace-Role,
X-Workspace-Proxy-Secret); what the client sent under those names never passes. Nothing of the
platform's reaches Label Studio: not the Authorization header, not the hub's or the service's cookies
(only Label Studio's own, under its own path); what comes back may set only its own cookies.

Label Studio's scripts do not know the service's XSRF token: a cookie-authenticated request that changes
state must come from a page of this origin (Fetch metadata), else its cookie does not count. A body is
bounded by role: a manager imports files, everyone else sends annotations.
"""

from __future__ import annotations

import asyncio
import logging
import re

import aiohttp
import yarl
from tornado import web
from tornado.iostream import StreamClosedError

from workspace.errors import UserError
from workspace.labelling import projects
from workspace.service.courses_api import CourseActions
from workspace.service.pages import PageHandler

log = logging.getLogger("workspace.service")

READ_ONLY = {"GET", "HEAD", "OPTIONS"}
HOP = {"connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade"}
HOP |= {"content-length", "host", "authorization", "x-api-key", "cookie"}
# Label Studio's own cookies (its settings name them; their path is the project's)
OWN_COOKIE = re.compile(r"^label_studio_[a-z]+$")
COOKIE_PAIR = re.compile(r"\s*([^=;\s]+)=([^;]*)")
MAX_BODY = {"manager": 100 * 1024 * 1024, "reviewer": 2 * 1024 * 1024, "annotator": 2 * 1024 * 1024}
REFUSED_BODY = 64 * 1024  # what a refused request may send before the connection is cut
TIMEOUT = aiohttp.ClientTimeout(total=600, sock_connect=5)
FLUSH_BYTES = 64 * 1024


@web.stream_request_body
class LabellingProxy(CourseActions, PageHandler):
    SUPPORTED_METHODS = ("GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS")

    def check_xsrf_cookie(self):
        """Asked by the hub's login for a cookie-authenticated request that changes state."""
        if self.request.method in READ_ONLY:
            return
        if self.request.headers.get("Sec-Fetch-Site", "") != "same-origin":
            raise web.HTTPError(403, "cross-site request with the login cookie")

    def compute_etag(self):
        return None  # Label Studio's answers carry their own

    async def prepare(self):
        """Who asks and what they are in the project, before any byte of the body is read. A refusal is
        answered once the request is read whole (`forward`): an answer before it would close the
        connection, which the proxy in front may be sending the next request on."""
        self.body_parts, self.body_size, self.sent_headers, self.refusal = [], 0, False, None
        self.role = None
        try:
            await self.admit(self.path_kwargs["key"])
        except UserError as e:
            self.refusal = e
        self.request.connection.set_max_body_size(MAX_BODY.get(self.role, REFUSED_BODY))

    async def admit(self, key: str) -> None:
        user = self.get_current_user()
        if not user:
            raise UserError(403, "Log in to JupyterHub, or send a token in the Authorization header.")
        caller = self.who()
        project = await self.blocking(projects.find, self.db, key)
        role = None if project is None else projects.role_of(project, caller, self.may_manage(project.course))
        if role is None:  # the same answer whether it exists or not: names and keys do not leak
            raise UserError(404, "There is no labelling project here, or it is not one of your courses'.")
        self.project, self.role, self.caller_name = project, role, caller.name

    def data_received(self, chunk: bytes):
        if self.refusal is not None:
            return  # read and dropped (bounded by REFUSED_BODY)
        self.body_size += len(chunk)
        if self.body_size > MAX_BODY[self.role]:
            self.refusal, self.body_parts = UserError(413, "This request is too large for Label Studio."), []
            return
        self.body_parts.append(chunk)

    async def forward(self, key: str, path: str):
        if self.refusal is not None:
            anonymous = self.role is None and not self.get_current_user()
            if anonymous and self.request.method == "GET" and "text/html" in self.request.headers.get("Accept", ""):
                return self.redirect(self.get_login_url())
            raise self.refusal
        address = await self.blocking(self.settings["labelling_addresses"].get, key)
        if address is None:
            self.set_header("Retry-After", "10")
            raise UserError(
                503,
                "The Label Studio of “{title}” is starting or stopped; try again in a minute.",
                title=self.project.title,
            )
        url = f"{address}/{path}" + (f"?{self.request.query}" if self.request.query else "")
        method = self.request.method
        try:
            async with _session(self.application).request(
                method,
                yarl.URL(url, encoded=True),
                headers=self.outgoing_headers(),
                data=b"".join(self.body_parts) or None,
                allow_redirects=False,
                timeout=TIMEOUT,
            ) as response:
                self.start_response(response)
                pending = 0
                async for chunk in response.content.iter_any():
                    if method == "HEAD":
                        continue
                    self.write(chunk)
                    pending += len(chunk)
                    if pending >= FLUSH_BYTES:
                        pending = 0
                        await self.flush()
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError, StreamClosedError) as error:
            if self.sent_headers:  # cut off in the middle: the client sees the end of a broken answer
                return
            log.warning("labelling %s: no answer: %r", key, error)
            raise UserError(502, "Label Studio did not answer; try again in a moment.")

    get = post = put = delete = patch = head = options = forward

    def outgoing_headers(self) -> dict:
        out = {}
        for name, value in self.request.headers.get_all():
            lower = name.lower()
            if lower in HOP or lower.startswith("x-workspace-"):
                continue
            out[name] = value
        own = "; ".join(
            f"{n}={v}" for n, v in COOKIE_PAIR.findall(self.request.headers.get("Cookie", "")) if OWN_COOKIE.match(n)
        )
        if own:
            out["Cookie"] = own
        out["Host"] = self.request.host
        out["X-Forwarded-Proto"] = self.request.protocol
        out["X-Workspace-Proxy-Secret"] = self.project.secret
        out["X-Workspace-User"] = self.caller_name
        out["X-Workspace-Role"] = self.role
        return out

    def start_response(self, response) -> None:
        self.set_status(response.status, reason=response.reason or None)
        self.clear_header("Content-Type")
        self.clear_header("Server")
        path = self.settings["labelling_team"].path(self.project.key)
        for name, value in response.headers.items():
            lower = name.lower()
            if lower in HOP:
                continue
            if lower == "set-cookie" and not _own_cookie(value, path):
                continue
            self.add_header(name, value)
        self.sent_headers = True


def _own_cookie(header: str, path: str) -> bool:
    """A cookie Label Studio may set: one of its own names, under the project's path."""
    name = header.split("=", 1)[0].strip()
    where = re.search(r";\s*path=([^;]*)", header, re.I)
    scope = where.group(1).strip() if where else ""
    return bool(OWN_COOKIE.match(name)) and (scope.rstrip("/") == path or scope.startswith(path + "/"))


def _session(app) -> aiohttp.ClientSession:
    """One connection pool for the process; answers passed on as they came (compressed or not)."""
    session = getattr(app, "labelling_session", None)
    if session is None or session.closed:
        session = app.labelling_session = aiohttp.ClientSession(
            auto_decompress=False, cookie_jar=aiohttp.DummyCookieJar()
        )
    return session


def handlers(prefix: str) -> list:
    return [(rf"{prefix}labelling/(?P<key>[0-9a-f]{{12}})/(?P<path>.*)", LabellingProxy)]
