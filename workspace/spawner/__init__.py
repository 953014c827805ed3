"""Spawners: a workspace is a named JupyterHub server run in a container.

mixin: `WorkspaceMixin`, what does not depend on the engine (executions,
homes, the queue, progress). docker_spawner: `DockerWorkspaceSpawner`, the
Docker engine's. swarm_spawner: `SwarmWorkspaceSpawner`, a Docker Swarm's (a service per
execution on a chosen node). `c.JupyterHub.spawner_class = "workspace.spawner.DockerWorkspaceSpawner"`.
"""

from .docker_spawner import DockerWorkspaceSpawner
from .mixin import WorkspaceMixin
from .swarm_spawner import SwarmWorkspaceSpawner

__all__ = ["DockerWorkspaceSpawner", "SwarmWorkspaceSpawner", "WorkspaceMixin"]
