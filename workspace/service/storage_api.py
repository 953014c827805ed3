"""REST API: storage against the quota, deleting outputs.

    GET    /api/storage                                   my footprint against my quota, what takes the space
    POST   /api/storage/cleanup        {"keep": 1}        delete every workspace's old outputs, keeping the newest
    DELETE /api/workspaces/{name}/executions/{n}/output   delete one output (refused while something depends on it)

An admin may add `?user=NAME` to act on anyone's. Accounting is accounting_api.py, the resource types
resource_types_api.py.
"""

from __future__ import annotations

from workspace.executions import number_of
from workspace.limits import quotas
from workspace.outputs import saved as outputs
from workspace.service.api import APIHandler


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
        result = await self.blocking(outputs.cleanup, self.db, self.store, owner, keep, locale=self.lang)
        result["storage"] = await self.status(owner)
        self.write_json(result)


class OutputHandler(StorageHandler):
    async def delete(self, name: str, number: str):
        owner = await self.owner()
        deleted = await self.blocking(outputs.delete_output, self.db, self.store, owner, name, number_of(number))
        quotas.measure_soon(self.db, self.store, owner)
        self.write_json({"deleted": deleted})


def handlers(prefix: str) -> list:
    return [
        (rf"{prefix}api/storage/?", StorageStatusHandler),
        (rf"{prefix}api/storage/cleanup/?", CleanupHandler),
        (rf"{prefix}api/workspaces/([^/]+)/executions/(\d+)/output/?", OutputHandler),
    ]
