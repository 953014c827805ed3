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
    """The home with the mounted datasets beside its files, read-only (module docstring). A path under a
    dataset's folder is answered by a contents manager rooted at its mount (so nothing is ever looked up
    above it), its models' paths put back under the folder's name."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self._datasets: dict[str, AsyncLargeFileManager] = {}  # a manager per mount, made on first use

    def _dataset(self, path: str) -> tuple[AsyncLargeFileManager, str, str] | None:
        """(the manager of the dataset `path` is under, its folder's name, the path inside it); None for the
        home's own paths."""
        found = dataset_of(self.root_dir, path)
        if found is None:
            return None
        mount, rest = found
        manager = self._datasets.get(mount)
        if manager is None:
            manager = self._datasets[mount] = AsyncLargeFileManager(parent=self, root_dir=mount)
        return manager, mount.lstrip("/"), rest

    async def get(self, path, content=True, type=None, format=None, require_hash=False):
        found = self._dataset(path)
        if found is None:
            model = await super().get(path, content=content, type=type, format=format, require_hash=require_hash)
            if content and model["type"] == "directory" and not path.strip("/"):
                listed = {entry["name"] for entry in model["content"]}
                for name in DATASETS:  # the home's top: the mounted datasets beside its files
                    if name not in listed and dataset_of(self.root_dir, name):
                        model["content"].append(await self.get(name, content=False))
            return model
        manager, name, rest = found
        model = await manager.get(rest, content=content, type=type, format=format, require_hash=require_hash)
        return _under(model, name)

    async def dir_exists(self, path):
        found = self._dataset(path)
        return await (found[0].dir_exists(found[2]) if found else super().dir_exists(path))

    async def file_exists(self, path=""):
        found = self._dataset(path)
        return await (found[0].file_exists(found[2]) if found else super().file_exists(path))

    async def is_hidden(self, path):
        found = self._dataset(path)
        return await (found[0].is_hidden(found[2]) if found else super().is_hidden(path))

    def exists(self, path):
        found = self._dataset(path)
        return found[0].exists(found[2]) if found else super().exists(path)

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


def _under(model: dict, name: str) -> dict:
    """A dataset manager's model with its paths under the dataset's folder `name`; read-only."""
    model["path"] = f"{name}/{model['path']}".rstrip("/")
    if not model.get("name"):
        model["name"] = name
    model["writable"] = False
    if model.get("type") == "directory" and isinstance(model.get("content"), list):
        for entry in model["content"]:
            _under(entry, name)
    return model
