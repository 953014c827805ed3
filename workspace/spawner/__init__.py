"""Spawners: a workspace is a named JupyterHub server run in a container.

mixin: `WorkspaceMixin`, what does not depend on the engine (executions, homes, the
queue, progress), made of progress, start_options, placement, home_stores,
execution_logs and environment. docker_spawner: `DockerWorkspaceSpawner`, the Docker
engine's. swarm_spawner: `SwarmWorkspaceSpawner`, a Docker Swarm's (a service per execution
on a chosen node; node_inputs: what a node lacks, sent to it). Pure builders beside them:
form (the start form's fields), networks (one per owner), scratch (read-only root, sized
tmpfs), kubernetes and kubernetes_names (the designed Kubernetes path). options:
`SpawnerOptions`, the spawner's options as the processes that do not spawn read them.
`c.JupyterHub.spawner_class = "workspace.spawner.DockerWorkspaceSpawner"`.

May import: what is below it (the flows: lifecycle, start_request; limits, images, store,
the records, the ground). Never imports the culler, the service or the gateway, which may
import it (docs/architecture.md, layer 3).
"""

from workspace.spawner.docker_spawner import DockerWorkspaceSpawner
from workspace.spawner.mixin import WorkspaceMixin
from workspace.spawner.swarm_spawner import SwarmWorkspaceSpawner

__all__ = ["DockerWorkspaceSpawner", "SwarmWorkspaceSpawner", "WorkspaceMixin"]
