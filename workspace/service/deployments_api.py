"""REST API of deployments (#33), under /services/workspace/api/deployments.

    GET    /api/deployments                          the caller's deployments
    POST   /api/deployments                          {"name", "from" | "dataset", "image", "command", "port",
                                                      "replicas", "resource_type", "ready", "access",
                                                      "course", "idle_seconds"}           201
    GET    /api/deployments/{name}                   its versions, replicas (each with its log) and keys
    POST   /api/deployments/{name}/versions          {"from" | "dataset", "image", "command", "port", "ready"}:
                                                      a new version, rolled out without downtime  202
    POST   /api/deployments/{name}/settings          {"replicas", "access", "course", "idle_seconds"}
    POST   /api/deployments/{name}/stop              its replicas stop; its address says it is stopped
    POST   /api/deployments/{name}/start
    DELETE /api/deployments/{name}                   204
    POST   /api/deployments/{name}/keys              {"label"}: a new API key, shown once  201
    DELETE /api/deployments/{name}/keys/{id}         revoked at once  204
    GET    /api/deployments/{name}/traffic           its last hour, a point a minute: requests, failures, p50, p99

A replica's log is its execution's: `/api/workspaces/{workspace}/executions/{n}/logs?follow=1`, with the
workspace and number the deployment's page lists. The rules are workspace/deployments/'s; the handlers
parse, call and answer. The address itself (`/serve/OWNER/NAME/`) is the router's (workspace/router/).
"""

from __future__ import annotations

from urllib.parse import quote

from workspace import origins
from workspace.caller import Caller
from workspace.deployments import deployment, keys, traffic
from workspace.executions import number_of
from workspace.service.api import APIHandler


class DeploymentHandler(APIHandler):
    @property
    def policy(self):
        return self.settings["deployment_policy"]

    def located(self, data):
        """`data` with each deployment's address on its owner's origin when users have their own."""
        if isinstance(data, list):
            return [self.located(d) for d in data]
        if isinstance(data, dict) and isinstance(data.get("address"), str):
            return {**data, "address": origins.serve_url(self.settings.get("subdomain_host"), data["address"])}
        return data

    def write_json(self, data, status: int = 200) -> None:
        super().write_json(self.located(data), status)

    async def asker(self, body: dict) -> Caller:
        """Who asks; for a course's access with their groups as the hub has them now (the login's are those
        of when the token was first seen, and a course's roster changes)."""
        who = self.who()
        if "course" not in body:
            return who
        model = await self.service_hub(f"/users/{quote(who.name, safe='')}") or {}
        return Caller(who.name, model.get("groups") or who.groups, who.admin)


class DeploymentsHandler(DeploymentHandler):
    async def get(self):
        owner = await self.owner()
        self.write_json(await self.blocking(deployment.list_of, self.db, owner, self.lang))

    async def post(self):
        body = self.body()
        made = await self.blocking(
            deployment.create, self.db, await self.asker(body), body, self.settings["image_refs"], self.policy
        )
        self.write_json(made, status=201)


class OneHandler(DeploymentHandler):
    async def get(self, name: str):
        owner = await self.owner()
        self.write_json(await self.blocking(deployment.describe, self.db, owner, name, self.lang))

    async def delete(self, name: str):
        owner = await self.owner()
        await self.blocking(deployment.delete, self.db, owner, name)
        self.set_status(204)
        self.finish()


class VersionsHandler(DeploymentHandler):
    async def post(self, name: str):
        owner = await self.owner()
        body = self.body()
        version = await self.blocking(
            deployment.add_version, self.db, self.who(), owner, name, body, self.settings["image_refs"]
        )
        self.write_json(version, status=202)


class SettingsHandler(DeploymentHandler):
    async def post(self, name: str):
        owner = await self.owner()
        body = self.body()
        self.write_json(
            await self.blocking(deployment.change, self.db, await self.asker(body), owner, name, body, self.policy)
        )


class RunningHandler(DeploymentHandler):
    async def post(self, name: str, action: str):
        owner = await self.owner()
        self.write_json(await self.blocking(deployment.set_running, self.db, owner, name, action == "start"))


class KeysHandler(DeploymentHandler):
    async def post(self, name: str):
        owner = await self.owner()
        label = self.body().get("label")
        self.write_json(await self.blocking(keys.make, self.db, owner, name, label, self.policy), status=201)


class KeyHandler(DeploymentHandler):
    async def delete(self, name: str, key_id: str):
        owner = await self.owner()
        await self.blocking(keys.revoke, self.db, owner, name, number_of(key_id))
        self.set_status(204)
        self.finish()


class TrafficHandler(DeploymentHandler):
    async def get(self, name: str):
        owner = await self.owner()
        self.write_json(await self.blocking(traffic.series, self.db, owner, name))


def handlers(prefix: str) -> list:
    one = rf"{prefix}api/deployments/([^/]+)"
    return [
        (rf"{prefix}api/deployments/?", DeploymentsHandler),
        (rf"{one}/?", OneHandler),
        (rf"{one}/versions/?", VersionsHandler),
        (rf"{one}/settings/?", SettingsHandler),
        (rf"{one}/(stop|start)/?", RunningHandler),
        (rf"{one}/keys/?", KeysHandler),
        (rf"{one}/keys/(\d+)/?", KeyHandler),
        (rf"{one}/traffic/?", TrafficHandler),
    ]
