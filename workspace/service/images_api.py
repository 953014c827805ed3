"""The images a user may choose, with what each holds (#18).

GET /api/images      [{name, default, available, size, created, versions: {python, cuda, torch, ...}}]
"""

from __future__ import annotations

from .api import APIHandler


class ImagesHandler(APIHandler):
    async def get(self):
        self.caller()
        images = self.settings["images"]
        described = await self.blocking(self.settings["describe_images"], images)
        for info in described:
            info["default"] = info["name"] == self.settings["image"]
        self.write_json(described)


def handlers(prefix: str) -> list:
    return [(rf"{prefix}api/images/?", ImagesHandler)]
