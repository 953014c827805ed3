"""REST API for datasets, under /services/workspace/api/datasets.

    GET    /api/datasets                                  {"mine", "shared", "public"}
    POST   /api/datasets                                  {"name", "description", "visibility"}
    GET    /api/datasets/{owner}/{name}
    POST   /api/datasets/{owner}/{name}/versions          {"from_execution": {"workspace", "number", "path"}}
                                                          or {"from_path": "/host/dir"} (admins)
    DELETE /api/datasets/{owner}/{name}/versions/{n}      refused while a running execution mounts it
    POST   /api/datasets/{owner}/{name}/shares            {"user": NAME} or {"group": NAME}
    DELETE /api/datasets/{owner}/{name}/shares/{user|group}/{NAME}

Owners change their datasets (admins any); readers see them. The rules are workspace/datasets.py's (who
sees and changes what, sharing) and workspace/dataset_versions.py's (where a version comes from, its
number, deleting one); the handlers parse the request and answer.
"""

from __future__ import annotations

from workspace import dataset_versions, datasets
from workspace.errors import UserError
from workspace.executions import number_of
from workspace.service.api import APIHandler


class DatasetHandler(APIHandler):
    @property
    def store(self):
        return self.settings["workspace_store"]

    @property
    def rules(self):
        return self.settings["dataset_rules"]


class DatasetsHandler(DatasetHandler):
    async def get(self):
        who = self.who()
        self.write_json(await self.blocking(datasets.listing, self.db, who.name, who.groups))

    async def post(self):
        user = self.who().name
        data = self.body()
        name, description, visibility = (
            data.get("name"),
            data.get("description") or "",
            data.get("visibility", "private"),
        )
        self.write_json(await self.blocking(datasets.create, self.db, user, name, description, visibility), status=201)


class OneDatasetHandler(DatasetHandler):
    async def get(self, owner, name):
        self.write_json(await self.blocking(datasets.describe, self.db, owner, name, self.who()))


class VersionsHandler(DatasetHandler):
    async def post(self, owner, name):
        who = self.who()
        data = self.body()
        version = await self.blocking(dataset_versions.add, self.db, self.store, self.rules, owner, name, data, who)
        self.write_json(version, status=201)


class VersionHandler(DatasetHandler):
    async def delete(self, owner, name, number):
        await self.blocking(dataset_versions.delete, self.db, self.store, owner, name, number_of(number), self.who())
        self.set_status(204)
        self.finish()


class SharesHandler(DatasetHandler):
    async def post(self, owner, name):
        data = self.body()
        kinds = [k for k in ("user", "group") if k in data]
        if len(kinds) != 1 or not isinstance(data[kinds[0]], str) or not data[kinds[0]]:
            raise UserError(400, 'Share with one user or one group: {"user": NAME} or {"group": NAME}.')
        kind, principal = kinds[0], data[kinds[0]]
        shared = await self.blocking(datasets.add_share, self.db, owner, name, kind, principal, self.who())
        self.write_json(shared, status=201)


class ShareHandler(DatasetHandler):
    async def delete(self, owner, name, kind, principal):
        await self.blocking(datasets.remove_share, self.db, owner, name, kind, principal, self.who())
        self.set_status(204)
        self.finish()


def handlers(prefix: str) -> list:
    ds = rf"{prefix}api/datasets/([^/]+)/([^/]+)"
    return [
        (rf"{prefix}api/datasets/?", DatasetsHandler),
        (rf"{ds}/?", OneDatasetHandler),
        (rf"{ds}/versions/?", VersionsHandler),
        (rf"{ds}/versions/(\d+)/?", VersionHandler),
        (rf"{ds}/shares/?", SharesHandler),
        (rf"{ds}/shares/(user|group)/([^/]+)/?", ShareHandler),
    ]
