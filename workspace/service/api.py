"""REST API of the workspace service, under /services/workspace/api/.

    GET /api/workspaces                                  the caller's workspaces
    GET /api/workspaces/{name}/executions                every execution of one
    GET /api/workspaces/{name}/executions/{number}       one execution (live save progress)

Courses (instructors: read their students', set a course up) are in courses_api.py. The records are
read by workspace/executions.py; the handlers check who asks, call it and answer.

Authentication is JupyterHub's (a token or the hub's login cookie through
OAuth). A user sees their own workspaces; an admin may add `?user=NAME` to
see anyone's, and a holder of the custom scope `custom:workspaces:read` (an
instructor, filtered to their course's group) may read those it covers.
Errors are JSON: {"status": ..., "message": "<a sentence>"}.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from functools import partial
from pathlib import Path
from urllib.parse import quote

from jupyterhub.scopes import Scope, parse_scopes
from jupyterhub.services.auth import HubOAuthenticated
from tornado import web
from tornado.httpclient import AsyncHTTPClient, HTTPRequest
from tornado.ioloop import IOLoop
from tornado.iostream import StreamClosedError

from workspace import courses, errors, executions, i18n, jobs
from workspace.caller import Caller
from workspace.errors import UserError
from workspace.executions import number_of
from workspace.service import streams

# JupyterHub RBAC: read (never change) other users' workspaces, executions, usage, storage and
# accounting. Defined in jupyterhub_config.py; instructors hold it filtered to their course's group
# (`custom:workspaces:read!group=cs101`).
READ_SCOPE = "custom:workspaces:read"
# a log's reader that takes nothing for this long is cut off (a stalled stream holds nothing for long)
STALL_SECONDS = 300


class APIHandler(HubOAuthenticated, web.RequestHandler):
    """JSON in, JSON out, with errors as sentences."""

    @property
    def db(self):
        return self.settings["workspace_db"]

    # XSRF: JupyterHub's check (HubAuth.check_xsrf_cookie) applies: requests
    # authenticated by a token pass, cookie-authenticated ones (the pages' own
    # scripts) must send the `_xsrf` cookie's value as X-XSRFToken.

    async def blocking(self, fn, *args, **kwargs):
        return await IOLoop.current().run_in_executor(None, partial(fn, *args, **kwargs))

    async def engine_nodes(self) -> list:
        """The nodes starts are placed on (workspace/store/nodes.py); none when the engine does not answer (a
        swarm's manager down), which the pages show as nothing free rather than as an error."""
        try:
            return await self.blocking(self.settings["engine_nodes"])
        except Exception as e:
            logging.getLogger("workspace.service").warning("Could not list the nodes: %s", e)
            return []

    def caller(self) -> dict:
        user = self.get_current_user()
        if not user:
            if "Authorization" not in self.request.headers and self.request.method not in ("GET", "HEAD"):
                if self.hub_auth.cookie_name in self.request.cookies:
                    # logged in, but a cross-site request cannot know the XSRF token
                    raise UserError(
                        403,
                        "A request with the login cookie must send the “_xsrf” cookie's "
                        "value in the X-XSRFToken header; scripts use a token instead.",
                    )
            raise UserError(403, "Log in to JupyterHub, or send a token in the Authorization header.")
        return user

    def who(self) -> Caller:
        """Who calls: their name, groups and whether an administrator (the hub's user model, `caller`)."""
        return Caller.of(self.caller())

    def body(self) -> dict:
        """The request's JSON object (empty when there is no body); the user's 400 otherwise."""
        try:
            data = json.loads(self.request.body or b"{}")
        except ValueError:
            raise UserError(400, "The request body must be JSON.")
        if not isinstance(data, dict):
            raise UserError(400, "The request body must be a JSON object.")
        return data

    async def service_hub(self, path: str) -> dict | None:
        """GET from the hub's REST API with the service's own token; None unless the hub answers 200."""
        code, data = await self.service_hub_call("GET", path)
        return data if code == 200 else None

    async def service_hub_call(self, method: str, path: str, body=None) -> tuple[int, dict | list | None]:
        """Call the hub's REST API with the service's own token (its role: read users and groups; create
        users and groups, and set a group's members, for a course set-up); (status, JSON body)."""
        return await self.hub_fetch(self.hub_auth.api_token, method, path, body)

    async def hub_fetch(self, token: str, method: str, path: str, body=None) -> tuple[int, dict | list | None]:
        """One call of the hub's REST API with `token`; (status, JSON body or None). A hub that does not
        answer is the caller's 502."""
        req = HTTPRequest(
            self.settings["hub_api_url"].rstrip("/") + path,
            method=method,
            # the user's language on to the hub: a start's progress is said in it
            headers={
                "Authorization": f"token {token}",
                "Content-Type": "application/json",
                "Accept-Language": i18n.TAGS[self.lang],
            },
            body=None if body is None else json.dumps(body),
            allow_nonstandard_methods=True,
            request_timeout=60,
        )
        resp = await AsyncHTTPClient().fetch(req, raise_error=False)
        if resp.code == 599:
            raise web.HTTPError(502, "The hub does not answer; try again in a moment.")
        try:
            return resp.code, json.loads(resp.body) if resp.body else None
        except ValueError:
            return resp.code, None

    async def groups_of(self, name: str) -> set[str]:
        """A user's JupyterHub groups (the caller's from their login; another's from the hub)."""
        user = self.caller()
        if name == user["name"]:
            return set(user.get("groups") or [])
        return set((await self.service_hub(f"/users/{quote(name, safe='')}") or {}).get("groups") or [])

    async def owner(self) -> str:
        """Whose objects: the caller's, or `?user=`'s for an admin, or (reading only) for a holder of
        READ_SCOPE that covers that user."""
        user = self.caller()
        wanted = self.get_argument("user", None)
        if not wanted or wanted == user["name"] or user.get("admin"):
            return wanted or user["name"]
        if self.request.method in ("GET", "HEAD") and await self.may_read(user, wanted):
            return wanted
        raise UserError(
            403,
            "Only administrators may see other users' workspaces, and instructors "
            "(read-only) those of their course's students.",
        )

    async def may_read(self, user: dict, other: str) -> bool:
        """Whether the caller's token holds READ_SCOPE for `other` (all users, that user, or a group of theirs).

        An instructor's reach never extends to an administrator or to anyone
        holding a role beyond the default (another instructor, a TA), even
        when one was put into the course's group.
        """
        granted = parse_scopes(user.get("scopes") or []).get(READ_SCOPE)
        if granted is Scope.ALL:
            return True
        if not granted:
            return False
        if other in granted.get("user", ()):
            return True
        if not granted.get("group"):
            return False
        model = await self.service_hub(f"/users/{quote(other, safe='')}")  # its groups and its roles at once
        if not set(granted["group"]) & set((model or {}).get("groups") or []):
            return False
        return courses.why_privileged(other, model, self.settings.get("courses", {})) is None

    async def privileged(self, names: list[str]) -> dict[str, str]:
        """Of `names`, those who are no students, with why (a roster may not name them)."""

        async def why(name: str) -> str | None:
            model = await self.service_hub(f"/users/{quote(name, safe='')}")
            return courses.why_privileged(name, model, self.settings.get("courses", {}), self.lang)

        found = {}
        for start in range(0, len(names), 32):  # a few at a time: a roster may have hundreds
            chunk = names[start : start + 32]
            for name, reason in zip(chunk, await asyncio.gather(*(why(n) for n in chunk))):
                if reason:
                    found[name] = reason
        return found

    def write_json(self, data, status: int = 200) -> None:
        self.set_status(status)
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps(data))

    closed = False

    def on_connection_close(self):
        self.closed = True

    def gone(self) -> bool:
        """Whether the client has gone (a stream it asked for ends)."""
        return self.closed

    async def relay(self, chunks) -> None:
        """Pass the chunks of a blocking iterable (each read in the shared pool, none held between two
        reads) or of an async iterator (streams.follow) on as they come, until its end or until the
        client has gone (it left, or took nothing for STALL_SECONDS: then it is cut off)."""
        source = chunks if hasattr(chunks, "__aiter__") else streams.chunks_of(chunks, self.blocking)
        try:
            async with contextlib.aclosing(source):
                async for chunk in source:
                    if self.closed:
                        return
                    self.write(chunk)
                    flushed = self.flush()
                    try:
                        await asyncio.wait_for(asyncio.shield(flushed), STALL_SECONDS)
                    except asyncio.TimeoutError:
                        flushed.add_done_callback(lambda f: f.cancelled() or f.exception())  # retrieved
                        self.closed = True
                        self.request.connection.close()
                        return
        except StreamClosedError:
            self.closed = True

    @property
    def lang(self) -> str:
        """The locale the user reads (the header's switch, else their browser's Accept-Language)."""
        return i18n.of_request(self.request)

    def write_error(self, status_code, **kwargs):
        exc = kwargs.get("exc_info", (None, None, None))[1]
        bare = exc is None or (isinstance(exc, web.HTTPError) and not errors.sentence_of(exc))
        if bare and status_code == 405:
            message = i18n.translate(
                self.lang,
                "{method} is not allowed at {path}; see api/openapi.yaml.",
                method=self.request.method,
                path=self.request.path,
            )
        elif bare:
            message = self._reason
        else:
            message = errors.sentence(exc, self.lang)
        self.set_header("Content-Type", "application/json")
        self.set_header("Content-Language", i18n.TAGS[self.lang])
        self.finish(json.dumps({"status": status_code, "message": message}))


class WorkspacesHandler(APIHandler):
    async def get(self):
        owner = await self.owner()
        self.write_json(await self.blocking(executions.workspaces_of, self.db, owner))


class ExecutionsHandler(APIHandler):
    async def get(self, name: str, number: str | None = None):
        owner = await self.owner()
        if number is not None:
            return self.write_json(await self.blocking(jobs.execution_of, self.db, owner, name, number_of(number)))
        history = await self.blocking(jobs.history, self.db, owner, name)
        if history is None:
            raise executions.no_such_workspace(name)
        self.write_json(history)


class UsageHandler(APIHandler):
    """The usage samples of one execution (one a minute while it ran), oldest first."""

    async def get(self, name: str, number: str):
        owner = await self.owner()
        self.write_json(await self.blocking(executions.usage_of, self.db, owner, name, number_of(number)))


class OpenAPIHandler(web.RequestHandler):
    """This API's description (OpenAPI 3), for clients and the fuzz test."""

    def get(self):
        self.set_header("Content-Type", "application/yaml")
        self.finish(OPENAPI.read_bytes())


OPENAPI = Path(__file__).resolve().parent / "openapi.yaml"


def handlers(prefix: str) -> list:
    return [
        (rf"{prefix}api/openapi.yaml", OpenAPIHandler),
        (rf"{prefix}api/workspaces/([^/]+)/executions/(\d+)/usage/?", UsageHandler),
        (rf"{prefix}api/workspaces/?", WorkspacesHandler),
        (rf"{prefix}api/workspaces/([^/]+)/executions/?", ExecutionsHandler),
        (rf"{prefix}api/workspaces/([^/]+)/executions/(\d+)/?", ExecutionsHandler),
    ]
