"""Spawners: a workspace is a named JupyterHub server run in a container.

mixin: `WorkspaceMixin`, what does not depend on the engine (executions,
homes, the queue, progress). docker_spawner: `DockerWorkspaceSpawner`, the
Docker engine's. `c.JupyterHub.spawner_class = "workspace.spawner.DockerWorkspaceSpawner"`.
"""

from .docker_spawner import DockerWorkspaceSpawner
from .mixin import WorkspaceMixin

__all__ = ["DockerWorkspaceSpawner", "WorkspaceMixin"]
