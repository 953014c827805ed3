"""The router's process (#33):

    python -m workspace.router --hub-config=jupyterhub_config.py     (started by the hub: jupyterhub_config.py)

It listens where the proxy's `/serve/` route sends (JUPYTERHUB_SERVICE_URL), finishes its own OAuth login
at `/serve/oauth_callback` (its cookie is scoped to `/serve/`), reads the routing table twice a second
and writes the traffic it counted every `FLUSH` seconds. With per-user origins it also keeps the proxy's
route to it on each owner's host (router/proxy_routes.py) and hands its login over to those hosts
(router/handoff.py). It holds no state of its own but logins being handed over: a restarted router serves
at once from the records (a browser's session on an owner's host is handed over again by itself).
"""

from __future__ import annotations

import asyncio
import collections
import logging
import os
import signal
import sys
from functools import partial
from urllib.parse import urlparse

from jupyterhub.services.auth import HubOAuth
from sqlalchemy import update
from tornado import web
from tornado.httpserver import HTTPServer
from tornado.routing import Rule

from workspace import config
from workspace.db import database, utcnow
from workspace.deployments import traffic
from workspace.deployments.policy import DeploymentPolicy
from workspace.deployments.records import DeploymentKey
from workspace.process import die_with_the_hub
from workspace.router import handoff
from workspace.router.forward import ServeHandler
from workspace.router.hosts import Hosts
from workspace.router.identities import Identities
from workspace.router.proxy_routes import ProxyRoutes
from workspace.router.sockets import SocketHandler, UpgradeMatches
from workspace.router.table import Table
from workspace.router.upstream import Upstream
from workspace.spawner.options import SpawnerOptions

log = logging.getLogger("workspace.router")

PREFIX = "/serve/"
FLUSH = 5.0  # s between two writes of the traffic counted


class Traffic:
    """What the router counted since its last write: per deployment, and the keys that were used."""

    def __init__(self):
        self.counts: dict[int, traffic.Counts] = {}
        self.keys: set[str] = set()
        self.in_flight: collections.Counter = collections.Counter()  # requests being answered, per deployment

    def add(self, dep_id: int, seconds: float, failed: bool, at) -> None:
        self.counts.setdefault(dep_id, traffic.Counts()).add(seconds, failed, at)

    def key_used(self, digest: str) -> None:
        self.keys.add(digest)

    def take(self) -> tuple[dict[int, traffic.Counts], set[str]]:
        counts, keys, self.counts, self.keys = self.counts, self.keys, {}, set()
        return counts, keys


def write(db, counts: dict, keys: set[str]) -> None:
    if counts:
        traffic.record(db, counts)
    if keys:
        with db.session() as s:
            s.execute(update(DeploymentKey).where(DeploymentKey.digest.in_(keys)).values(last_used=utcnow()))


async def flush_forever(db, counts: Traffic) -> None:
    loop = asyncio.get_running_loop()
    while True:
        await asyncio.sleep(FLUSH)
        taken = counts.take()
        try:
            await loop.run_in_executor(None, write, db, *taken)
        except Exception:
            log.exception("writing the traffic counts failed; they are added to the next write")
            for dep_id, c in taken[0].items():
                counts.counts.setdefault(dep_id, traffic.Counts()).merge(c)


class Router(config.HubService):
    name = "workspace-router"
    description = "The address of every deployment: /serve/OWNER/NAME/."
    classes = [DeploymentPolicy]
    aliases = {"hub-config": "Router.hub_config"}

    def initialize(self, argv=None):
        config.load(self, argv)
        self.policy = DeploymentPolicy(parent=self)
        spawner = SpawnerOptions(self.config)
        self.db = database(spawner.db_url, spawner.secret_key_file)

    @property
    def hosts(self) -> Hosts:
        return Hosts(self.config.JupyterHub.get("subdomain_host") or None)

    def make_app(self, table: Table, counts: Traffic, upstream: Upstream, identities: Identities) -> web.Application:
        hub_auth = HubOAuth(
            api_token=self.api_token,
            api_url=self.hub_api_url,
            base_url=PREFIX,  # its cookie and its OAuth state: under /serve/ only
            # the hub's registered one (jupyterhub_config.py): JupyterHub's environment names another
            oauth_redirect_uri=self.hosts.hub_origin + PREFIX + "oauth_callback",
            cache_max_age=60,
            # a ?token= is the app's query, never a login: a hub token put there would reach the app
            allow_token_in_url=False,
        )
        hosts, tickets = self.hosts, handoff.Tickets()
        route = dict(table=table, counts=counts, policy=self.policy, wake=table.wake, upstream=upstream)
        route.update(hosts=hosts, identities=identities)
        return web.Application(
            [
                (PREFIX + "oauth_callback", handoff.CallbackHandler),
                (PREFIX + "_handoff", handoff.HandoffHandler, dict(hosts=hosts, tickets=tickets)),
                (PREFIX + "_login", handoff.LoginHandler, dict(hosts=hosts, tickets=tickets)),
                Rule(UpgradeMatches(PREFIX + r"([^/]+)/([^/]+)/?(.*)"), SocketHandler, route),  # a WebSocket
                (PREFIX + r"([^/]+)/([^/]+)/?(.*)", ServeHandler, route),
            ],
            hub_auth=hub_auth,
            cookie_secret=os.urandom(32),
        )

    def proxy_routes(self, url: str) -> ProxyRoutes | None:
        """The keeper of the proxy's routes on the owners' hosts, with per-user origins on."""
        token = os.environ.get("CONFIGPROXY_AUTH_TOKEN")
        if not self.hosts.per_user:
            return None
        if not token:
            log.error("per-user origins are on but the router has no proxy token: deployments only on the hub's host")
            return None
        api = self.config.ConfigurableHTTPProxy.get("api_url") or "http://127.0.0.1:8001"
        return ProxyRoutes(api, token, url, self.hosts)


async def serve(router: Router) -> None:
    table, counts = Table(router.db), Traffic()
    upstream = Upstream(limit=4 * router.policy.max_concurrent_requests)
    identities = Identities(router.hub_api_url, router.api_token)
    await table.refresh()
    app = router.make_app(table, counts, upstream, identities)
    url = urlparse(os.environ.get("JUPYTERHUB_SERVICE_URL", "http://127.0.0.1:8083"))
    server = HTTPServer(app, xheaders=True, max_body_size=router.policy.max_request_body)
    server.listen(url.port, url.hostname)
    log.info("router listening on %s", url.geturl())
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    tasks = [asyncio.ensure_future(table.keep_fresh()), asyncio.ensure_future(flush_forever(router.db, counts))]
    routes = router.proxy_routes(f"{url.scheme}://{url.netloc}")
    if routes is not None:
        tasks.append(asyncio.ensure_future(routes.keep(table.owners)))
    await stop.wait()
    server.stop()
    for t in tasks:
        t.cancel()
    for client in (upstream, identities, routes):
        if client is not None:
            await client.close()
    await loop.run_in_executor(None, partial(write, router.db, *counts.take()))


def main(argv=None) -> None:
    die_with_the_hub()
    logging.basicConfig(level=logging.INFO, format="[%(levelname)1.1s %(asctime)s %(name)s] %(message)s")
    router = Router()
    router.initialize(sys.argv[1:] if argv is None else argv)
    asyncio.run(serve(router))


if __name__ == "__main__":
    main()
