"""The spawner's options as the hub applies them, read by the processes that do not spawn.

The workspace service, the culler and the SSH gateway show or act on what the spawner enforces
(resource types, images, the stores, the database) from the same configuration file the hub
loads (workspace/config.py), without making a spawner.
"""

from __future__ import annotations

from traitlets.config import Config
from traitlets.utils.importstring import import_item

from workspace.limits.resource_types import ResourceType
from workspace.spawner.docker_spawner import DockerWorkspaceSpawner
from workspace.spawner.mixin import WorkspaceMixin


class SpawnerOptions:
    """The spawner's options as the hub applies them (resource types, images, the store, the
    database), for the processes that show or act on them without spawning.

    A spawner cannot be made without a user, so this reads the config as traitlets
    would for it: `c.<class>.<option>` of every class of the spawner's, the most
    derived winning, else the option's default.
    """

    def __init__(self, config: Config):
        cls = config.JupyterHub.get("spawner_class", DockerWorkspaceSpawner)
        if isinstance(cls, str):
            try:
                cls = import_item(cls)
            except ImportError:
                cls = DockerWorkspaceSpawner
        if not (isinstance(cls, type) and issubclass(cls, WorkspaceMixin)):
            cls = DockerWorkspaceSpawner
        self.spawner_class = cls
        self._traits = cls.class_traits(config=True)
        self._values = Config()
        for section in cls.section_names():  # base classes first: the most derived wins
            if section in config:
                self._values.merge(config[section])

    def __getattr__(self, name: str):
        if name.startswith("_") or name not in self._traits:
            raise AttributeError(name)
        return self._values[name] if name in self._values else self._traits[name].default()

    def parsed_resource_types(self):
        return [ResourceType.from_config(d) for d in self.resource_types]
