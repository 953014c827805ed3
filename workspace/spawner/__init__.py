"""Spawners: a workspace is a named JupyterHub server run in a container.

mixin: `WorkspaceMixin`, what does not depend on the engine (executions,
homes, the queue, progress), made of progress, start_options, placement,
home_stores, execution_logs and environment. docker_spawner: `DockerWorkspaceSpawner`, the
Docker engine's. swarm_spawner: `SwarmWorkspaceSpawner`, a Docker Swarm's (a service per
execution on a chosen node). `c.JupyterHub.spawner_class = "workspace.spawner.DockerWorkspaceSpawner"`.
"""

from workspace.spawner.docker_spawner import DockerWorkspaceSpawner
from workspace.spawner.mixin import WorkspaceMixin
from workspace.spawner.swarm_spawner import SwarmWorkspaceSpawner

__all__ = ["DockerWorkspaceSpawner", "SwarmWorkspaceSpawner", "WorkspaceMixin"]
