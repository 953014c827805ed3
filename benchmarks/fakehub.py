"""A fake JupyterHub REST API and fake workspaces, for the culler's benchmark and unit tests.

One tornado app on 127.0.0.1 answers as the hub (`/hub/api/users`,
`/hub/api/proxy`, server deletion) and as every workspace's extension
(`/user/NAME/ws/api/workspace/...`). The workspace database gets a running
execution per server, and a fake cgroup tree on disk holds their CPU
counters (`cpu_ns`, which a test moves).
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

from tornado import web
from tornado.httpserver import HTTPServer
from tornado.netutil import bind_sockets

from workspace.db import Database
from workspace.executions import get_or_create_workspace, new_execution


class FakeHub:
    def __init__(self, n: int, tmp: Path, subdomains: bool = False):
        self.n, self.tmp = n, tmp
        # users' servers on their own subdomains (JupyterHub's subdomain_host): absolute server URLs
        # and host-based proxy routes
        self.subdomains = subdomains
        self.users = [f"u{i:04d}" for i in range(n)]
        self.reports = {
            u: {"kernel_connections": 0, "terminal_connections": 0, "busy_kernels": 0, "last_browser_request": None}
            for u in self.users
        }
        self.notices: dict[str, dict] = {u: {} for u in self.users}
        self.deleted: list[str] = []
        self.cgroup_root = tmp / "cgroup"
        self.db_url = f"sqlite:///{tmp / 'workspace.sqlite'}"
        self.key_file = tmp / "secrets" / "workspace.key"  # seals the report keys (workspace/vault.py)
        self.db = Database(self.db_url, key_file=self.key_file)
        self.cpu_ns = {u: 0 for u in self.users}
        self.keys: dict[str, str] = {}
        # every Authorization header a workspace was sent (a hub token must never be among them)
        self.workspace_auth: list[str] = []
        with self.db.session() as s:
            for u in self.users:
                ex = new_execution(s, get_or_create_workspace(s, u, "ws"), None, None)
                for state in ("preparing", "restoring", "running"):
                    ex.to(s, state)
                ex.container_id = f"c{u}"
                self.keys[u] = ex.report_key
        self.write_cgroups()

    def write_cgroups(self) -> None:
        for u in self.users:
            d = self.cgroup_root / "cpuacct/docker" / f"c{u}"
            d.mkdir(parents=True, exist_ok=True)
            (d / "cpuacct.usage").write_text(f"{self.cpu_ns[u]}\n")
            m = self.cgroup_root / "memory/docker" / f"c{u}"
            m.mkdir(parents=True, exist_ok=True)
            (m / "memory.usage_in_bytes").write_text("104857600\n")
            (m / "memory.stat").write_text("total_inactive_file 0\n")

    def server_url(self, user: str) -> str:
        return f"http://{user}.localhost:8000/user/{user}/ws/" if self.subdomains else f"/user/{user}/ws/"

    def routespec(self, user: str) -> str:
        return f"{user}.localhost/user/{user}/ws/" if self.subdomains else f"/user/{user}/ws/"

    def start(self) -> str:
        hub = self

        class Users(web.RequestHandler):
            def get(self):
                offset, limit = int(self.get_argument("offset", 0)), int(self.get_argument("limit", 200))
                now = dt.datetime.now(dt.timezone.utc).isoformat()
                page = [
                    {
                        "name": u,
                        "groups": [],
                        "servers": {
                            "ws": {
                                "name": "ws",
                                "ready": True,
                                "pending": None,
                                "url": hub.server_url(u),
                                "last_activity": now,
                            }
                        },
                    }
                    for u in hub.users[offset : offset + limit]
                    if u not in hub.deleted
                ]
                nxt = {"offset": offset + limit, "limit": limit} if offset + limit < len(hub.users) else None
                self.finish(
                    {
                        "items": page,
                        "_pagination": {"offset": offset, "limit": limit, "total": len(hub.users), "next": nxt},
                    }
                )

        class Proxy(web.RequestHandler):
            def get(self):
                self.finish(
                    {"items": {hub.routespec(u): {"target": hub.url} for u in hub.users}, "_pagination": {"next": None}}
                )

        class Server(web.RequestHandler):
            def delete(self, user):
                hub.deleted.append(user)
                self.set_status(204)

        class Workspace(web.RequestHandler):
            def prepare(self):
                auth = self.request.headers.get("Authorization", "")
                hub.workspace_auth.append(auth)
                if auth != f"workspace-report {hub.keys[self.path_args[0]]}":
                    raise web.HTTPError(403)

        class Activity(Workspace):
            def get(self, user):
                report = hub.reports[user]
                if isinstance(report, dict):
                    report = {**report, "usage": {"cpu_percent": None, "gpu": {"available": False}}}
                self.finish(json.dumps(report))

        class Notices(Workspace):
            def post(self, user):
                body = json.loads(self.request.body)
                hub.notices[user][body["id"]] = body
                self.set_status(201)

            def delete(self, user):
                hub.notices[user].pop(self.get_argument("id"), None)
                self.set_status(204)

        app = web.Application(
            [
                (r"/hub/api/users", Users),
                (r"/hub/api/proxy", Proxy),
                (r"/hub/api/users/([^/]+)/servers/ws", Server),
                (r"/user/([^/]+)/ws/api/workspace/activity", Activity),
                (r"/user/([^/]+)/ws/api/workspace/report/notices", Notices),
            ]
        )
        sockets = bind_sockets(0, "127.0.0.1")
        self.server = HTTPServer(app)
        self.server.add_sockets(sockets)
        self.url = f"http://127.0.0.1:{sockets[0].getsockname()[1]}"
        return self.url

    def culler(self, **traits):
        from traitlets.config import Config

        from workspace.culler.app import Culler

        app = Culler(
            config=Config(
                {
                    "Culler": {
                        "hub_api_url": f"{self.url}/hub/api",
                        "api_token": "fake",
                        "db_url": self.db_url,
                        "cgroup_root": str(self.cgroup_root),
                        **traits.pop("culler", {}),
                    },
                    "IdlePolicy": traits,
                    "WorkspaceMixin": {"secret_key_file": str(self.key_file)},
                }
            )
        )
        app.initialize([])
        return app
