"""The file browser's view of the workspace: the home, and beside its files the datasets mounted at
/input0../input4, read-only (#32).

JupyterLab shows only what is under the server's root (the home), and the datasets are mounted outside
it. Rather than links in the home (which would be saved with it, and dangle at the next start), this
contents manager shows each mounted dataset as a folder `input0`..`input4` at the top of the home's
listing and maps those API paths to the mount, never above it. Everything under them is read-only here as
it is on disk: saving, deleting or renaming there answers 403 with a sentence; copying a file from a
dataset into the home works. A file or folder of the home with the same name wins (the dataset is then
reached only in a terminal). All of this runs in the workspace's own server: nothing on the hub side
reads a home through it.
"""

from __future__ import annotations

import os

from jupyter_server.services.contents.largefilemanager import AsyncLargeFileManager
from jupyter_server.utils import ApiPath, to_os_path
from tornado.web import HTTPError

DATASETS = tuple(f"input{i}" for i in range(5))  # the mount points, /input0../input4 (workspace/datasets.py)
READ_ONLY = "The datasets in {name} are read-only; copy what you want to change into your home first."


def dataset_of(root_dir: str, path: str) -> tuple[str, str] | None:
    """(the mount, the path inside it) of an API path under a mounted dataset's folder; None for the home's
    own paths (a home entry of the same name wins)."""
    name, _, rest = path.strip("/").partition("/")
    if name not in DATASETS or os.path.lexists(os.path.join(root_dir, name)):
        return None
    mount = "/" + name
    return (mount, rest) if os.path.isdir(mount) else None


class WorkspaceContentsManager(AsyncLargeFileManager):
    """The home with the mounted datasets beside its files, read-only (module docstring)."""

    def _get_os_path(self, path):
        found = dataset_of(self.root_dir, path)
        if found is None:
            return super()._get_os_path(path)
        mount, rest = found
        os_path = to_os_path(ApiPath(rest), mount)
        if not (os.path.abspath(os_path) + os.sep).startswith(mount + os.sep):
            raise HTTPError(404, f"{path} is outside the dataset")
        return os_path

    async def _dir_model(self, path, content=True):
        model = await super()._dir_model(path, content)
        if content and not path.strip("/"):  # the home's top: the mounted datasets beside its files
            listed = {entry["name"] for entry in model["content"]}
            for name in DATASETS:
                if name not in listed and dataset_of(self.root_dir, name):
                    model["content"].append(await self.get(name, content=False))
        return model

    def _refuse_in_dataset(self, *paths: str) -> None:
        for path in paths:
            if dataset_of(self.root_dir, path):
                name = path.strip("/").partition("/")[0]
                raise HTTPError(403, READ_ONLY.format(name=name), reason="Read-only dataset")

    async def save(self, model, path=""):
        self._refuse_in_dataset(path)
        return await super().save(model, path)

    async def delete_file(self, path):
        self._refuse_in_dataset(path)
        return await super().delete_file(path)

    async def rename_file(self, old_path, new_path):
        self._refuse_in_dataset(old_path, new_path)
        return await super().rename_file(old_path, new_path)
