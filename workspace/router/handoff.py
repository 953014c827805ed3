"""The router's login on its owners' origins (per-user origins, router/hosts.py).

The hub's OAuth gives the router a login on one host, the hub's (one OAuth client, one redirect URI).
A browser that opens a private or course deployment on its owner's host (`ada.localhost`) without a login
there is handed one:

1. on `ada.localhost` the router sets a random `-handoff` cookie and sends the browser to
   `HUB/serve/_handoff?to=/serve/ada/digits/…&state=SHA256(cookie)`;
2. on the hub's host the router's ordinary OAuth login says who the visitor is; it makes a ticket
   (random, used once, for 60 s) that names the visitor, the owner's host, `state` and `to`, and sends
   the browser to `http://ada.localhost/serve/_login?ticket=T` (the host comes from `to`'s owner,
   never from the request: no open redirect);
3. on `ada.localhost` the ticket is taken (gone for anyone else), its host must be this one and
   SHA256 of this browser's `-handoff` cookie its state (a ticket another browser started is worth
   nothing here: no login CSRF); the router sets its session cookie for this host and sends the
   browser on to `to`.

The session cookie is signed by the router and names the visitor and the host it was made for, nothing
more: no hub token ever sits on an owner's origin, where the owner's scripts run (they cannot read the
HttpOnly cookie, and the router takes it out of what reaches the app). What the visitor may use is asked
of the hub (their groups, router/identities.py) as for any other login.
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
import time
from dataclasses import dataclass
from urllib.parse import unquote, urlencode

from jupyterhub.services.auth import HubOAuthCallbackHandler, HubOAuthenticated
from tornado import web

from workspace import i18n
from workspace.i18n import N_
from workspace.router.hosts import Hosts

TICKET_SECONDS = 60.0
MAX_TICKETS = 1000  # a bound on what logins being handed over hold, whatever anyone asks
TICKETS_PER_USER = 10
SESSION_DAYS = 1  # a session cookie older than this is not taken (a new handoff happens by itself)
STATE = re.compile(r"[0-9a-f]{64}")
TARGET = re.compile(r"/serve/[^/?#\\\s]+/[^?#\\\s]*(\?[^#\s]*)?")  # a path of /serve/ on the owner's host


def session_cookie(hub_auth) -> str:
    return hub_auth.cookie_name + "-session"


def handoff_cookie(hub_auth) -> str:
    return hub_auth.cookie_name + "-handoff"


def digest(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


@dataclass(frozen=True)
class Ticket:
    user: str
    host: str
    state: str
    to: str
    expires: float


class Tickets:
    """Logins being handed to an owner's host: each taken once, within `TICKET_SECONDS`."""

    def __init__(self):
        self.items: dict[str, Ticket] = {}  # in the order they were made

    def issue(self, user: str, host: str, state: str, to: str) -> str:
        now = time.monotonic()
        self.items = {k: t for k, t in self.items.items() if t.expires > now}
        mine = [k for k, t in self.items.items() if t.user == user]
        for k in mine[: max(0, len(mine) - TICKETS_PER_USER + 1)]:
            del self.items[k]
        while len(self.items) >= MAX_TICKETS:
            del self.items[next(iter(self.items))]
        key = secrets.token_urlsafe(32)
        self.items[key] = Ticket(user, host, state, to, now + TICKET_SECONDS)
        return key

    def take(self, key: str) -> Ticket | None:
        ticket = self.items.pop(key, None)
        return ticket if ticket is not None and ticket.expires > time.monotonic() else None


def begin(handler: web.RequestHandler, hosts: Hosts) -> None:
    """Send a browser without a login on an owner's host to the router's login on the hub's host."""
    state = secrets.token_urlsafe(32)
    secure = handler.request.protocol == "https"
    cookie = handoff_cookie(handler.hub_auth)
    handler.set_cookie(cookie, state, path="/serve/", httponly=True, secure=secure, samesite="Lax", expires_days=1)
    query = urlencode({"to": handler.request.uri, "state": digest(state)})
    handler.redirect(f"{hosts.hub_origin}/serve/_handoff?{query}")


def session_user(handler: web.RequestHandler) -> str | None:
    """Who the router's session cookie on this host names; None without one, or one made for another host."""
    raw = handler.get_signed_cookie(session_cookie(handler.hub_auth), max_age_days=SESSION_DAYS)
    try:
        session = json.loads(raw) if raw else {}
    except ValueError:
        return None
    if not isinstance(session, dict) or session.get("host") != handler.request.host_name.lower():
        return None  # a cookie of another user's host, tossed onto this one
    user = session.get("user")
    return user if isinstance(user, str) else None


class RouterAuth:
    """The router's own HubOAuth (app.py: its redirect URI, no token in a URL) for its handlers, which
    would otherwise each make JupyterHub's default one from the environment (`HubOAuth.instance()`)."""

    @property
    def hub_auth(self):
        return self.settings["hub_auth"]

    @hub_auth.setter
    def hub_auth(self, auth):
        raise AttributeError("the router's hub_auth is its application's")


class CallbackHandler(RouterAuth, HubOAuthCallbackHandler):
    """`/serve/oauth_callback` on the hub's host: the end of the hub's OAuth login."""


class Refusal:
    """The router's own answers (a refusal, a page that reloads itself): one sentence in the reader's
    language, never cached."""

    def refuse(self, code: int, message: str, **params) -> None:
        self.set_status(code)
        self.set_header("Content-Type", "text/plain; charset=utf-8")
        self.set_header("Cache-Control", "no-store")
        self.finish(i18n.translate(i18n.of_request(self.request), message, **params) + "\n")


class HandoffHandler(RouterAuth, Refusal, HubOAuthenticated, web.RequestHandler):
    """`/serve/_handoff` on the hub's host: who the visitor is, handed to the owner's host in a ticket."""

    def initialize(self, hosts: Hosts, tickets: Tickets):
        self.hosts, self.tickets = hosts, tickets

    async def get(self):
        to, state = self.get_argument("to", ""), self.get_argument("state", "")
        if not self.hosts.per_user or self.request.host_name.lower() != self.hosts.hub_host:
            raise web.HTTPError(404)
        if not TARGET.fullmatch(to) or not STATE.fullmatch(state):
            return self.refuse(400, N_("This login link is broken; open the deployment's address again."))
        model = await self.hub_auth.get_user(self, sync=False)
        if not model:
            return self.redirect(self.get_login_url())
        user = self.check_hub_user(model)["name"]
        owner = unquote(to.split("/")[2])
        ticket = self.tickets.issue(user, self.hosts.owner_host(owner), state, to)
        self.set_header("Cache-Control", "no-store")
        self.set_header("Referrer-Policy", "no-referrer")
        self.redirect(f"{self.hosts.owner_origin(owner)}/serve/_login?{urlencode({'ticket': ticket})}")


class LoginHandler(RouterAuth, Refusal, web.RequestHandler):
    """`/serve/_login?ticket=T` on an owner's host: the ticket taken, the router's session for this host."""

    def initialize(self, hosts: Hosts, tickets: Tickets):
        self.hosts, self.tickets = hosts, tickets

    def get(self):
        host = self.request.host_name.lower()
        if not self.hosts.is_owners(host):
            raise web.HTTPError(404)
        ticket = self.tickets.take(self.get_argument("ticket", ""))
        state = self.get_cookie(handoff_cookie(self.hub_auth)) or ""
        if ticket is None or ticket.host != host or not secrets.compare_digest(ticket.state, digest(state)):
            return self.refuse(
                403,
                N_(
                    "This login link is used up, expired, or was made for another browser; "
                    "open the deployment's address again."
                ),
            )
        secure = self.request.protocol == "https"
        self.clear_cookie(handoff_cookie(self.hub_auth), path="/serve/")
        value = json.dumps({"user": ticket.user, "host": host})
        self.set_signed_cookie(
            session_cookie(self.hub_auth),
            value,
            path="/serve/",
            httponly=True,
            secure=secure,
            samesite="Lax",
            expires_days=SESSION_DAYS,
        )
        self.set_header("Cache-Control", "no-store")
        self.redirect(ticket.to)
