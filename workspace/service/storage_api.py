"""REST API: storage against the quota, deleting outputs, accounting, resource types.

    GET    /api/storage                                   my footprint against my quota, what takes the space
    POST   /api/storage/cleanup        {"keep": 1}        delete every workspace's old outputs, keeping the newest
    DELETE /api/workspaces/{name}/executions/{n}/output   delete one output (refused while something depends on it)
    GET    /api/accounting?since=&until=                  CPU-hours and GPU-hours per execution and in total
    GET    /api/resource-types                            the types I may choose, with what is free now

An admin may add `?user=NAME` to act on anyone's; `GET /api/accounting?all=true`
reports every user.
"""

from __future__ import annotations

from tornado import web

from .. import accounting, outputs, queue, quotas, spawnform
from .api import APIHandler


class StorageHandler(APIHandler):
    @property
    def store(self):
        return self.settings["workspace_store"]

    @property
    def policy(self) -> quotas.StorageQuota:
        return self.settings["storage_quota"]

    async def status(self, owner: str) -> dict:
        groups = await self.groups_of(owner)
        status = await self.blocking(quotas.status, self.db, self.store, self.policy, owner, groups)
        return {"user": owner, **status.as_dict()}


class StorageStatusHandler(StorageHandler):
    async def get(self):
        self.write_json(await self.status(await self.owner()))


class CleanupHandler(StorageHandler):
    async def post(self):
        owner = await self.owner()
        keep = self.body().get("keep", 1)
        result = await self.blocking(outputs.cleanup, self.db, self.store, owner, keep)
        result["storage"] = await self.status(owner)
        self.write_json(result)


class OutputHandler(StorageHandler):
    async def delete(self, name: str, number: str):
        owner = await self.owner()
        deleted = await self.blocking(outputs.delete_output, self.db, self.store, owner, name, int(number))
        quotas.measure_soon(self.db, self.store, owner)
        self.write_json({"deleted": deleted})


class AccountingHandler(APIHandler):
    async def get(self):
        user, _, admin = self.who()
        everyone = self.get_argument("all", "").lower() in ("1", "true", "yes")
        if everyone and not admin:
            raise web.HTTPError(403, "Only administrators may see everyone's accounting.")
        owners = None if everyone else [await self.owner()]
        since = accounting.parse_time(self.get_argument("since", None), "since")
        until = accounting.parse_time(self.get_argument("until", None), "until")

        def load():
            with self.db.session() as s:
                return accounting.report(s, owners, since, until)

        self.write_json(await self.blocking(load))


class ResourceTypesHandler(APIHandler):
    async def get(self):
        _, groups, _ = self.who()
        types = self.settings["resource_types"]
        inventory = queue.gpu_inventory(self.settings["gpu_inventory"])
        choices = await self.blocking(spawnform.type_choices, self.db, types, groups, inventory) if types else []
        self.write_json(
            {"default": self.settings["default_resource_type"] or (types[0].name if types else None), "types": choices}
        )


def handlers(prefix: str) -> list:
    return [
        (rf"{prefix}api/storage/?", StorageStatusHandler),
        (rf"{prefix}api/storage/cleanup/?", CleanupHandler),
        (rf"{prefix}api/workspaces/([^/]+)/executions/(\d+)/output/?", OutputHandler),
        (rf"{prefix}api/accounting/?", AccountingHandler),
        (rf"{prefix}api/resource-types/?", ResourceTypesHandler),
    ]
