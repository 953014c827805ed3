"""REST API: resource types.

    GET    /api/resource-types                            the types I may choose, with what is free now

The types are workspace/resource_types.py's; what is free now is counted by spawnform.type_choices, as the
spawn form shows it.
"""

from __future__ import annotations

from .. import queue, resource_types, spawnform
from .api import APIHandler


class ResourceTypesHandler(APIHandler):
    async def get(self):
        _, groups, _ = self.who()
        types = self.settings["resource_types"]
        inventory = queue.gpu_inventory(self.settings["gpu_inventory"])
        choices = await self.blocking(spawnform.type_choices, self.db, types, groups, inventory) if types else []
        default = resource_types.default_name(types, self.settings["default_resource_type"])
        self.write_json({"default": default, "types": choices})


def handlers(prefix: str) -> list:
    return [(rf"{prefix}api/resource-types/?", ResourceTypesHandler)]
