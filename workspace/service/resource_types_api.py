"""REST API: resource types.

    GET    /api/resource-types                            the types I may choose, with what is free now

The types are workspace/limits/resource_types.py's; what is free now is counted by spawnform.type_choices, as the
spawn form shows it.
"""

from __future__ import annotations

from workspace.limits import resource_types
from workspace.service.api import APIHandler
from workspace.spawner import form as spawnform


class ResourceTypesHandler(APIHandler):
    async def get(self):
        groups = self.who().groups
        types = self.settings["resource_types"]
        nodes = await self.engine_nodes() if types else []
        choices = (
            await self.blocking(spawnform.type_choices, self.db, types, groups, nodes, locale=self.lang)
            if types
            else []
        )
        default = resource_types.default_name(types, self.settings["default_resource_type"])
        self.write_json({"default": default, "types": choices})


def handlers(prefix: str) -> list:
    return [(rf"{prefix}api/resource-types/?", ResourceTypesHandler)]
