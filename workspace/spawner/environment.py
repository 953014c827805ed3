"""What an execution's container is given: its environment (the home as HOME, where installs land),
its SSH identity, and its command (a task's runner).

What a user installs (pip --user, conda environments, model caches) lands in the
home, so it survives into later executions; a task's command runs after the
image's own set-up.
"""

from __future__ import annotations

import workspace.spawner.privileges as privileges
from workspace import i18n, ssh_identities
from workspace.executions import get_or_create_workspace

# what a replica of a deployment (#33) is not given: the server's hub token under its names
HUB_CREDENTIALS = ("JUPYTERHUB_API_TOKEN", "JPY_API_TOKEN", "JUPYTERHUB_CLIENT_ID")
# where the images keep a labconfig per language (images/base/rootfs/etc/workspace/lang/<locale>/)
LAB_LANGUAGES = "/etc/workspace/lang"


class EnvironmentMixin:
    """The container's environment and command (mixed into WorkspaceMixin, whose `home_mount` and
    `ssh_gateway_key` it reads)."""

    def workspace_env(self) -> dict[str, str]:
        home = self.home_mount
        return {
            "HOME": home,
            "SHELL": "/bin/bash",
            "PYTHONUSERBASE": f"{home}/.local",
            "CONDA_ENVS_PATH": f"{home}/.conda/envs",
            "CONDA_PKGS_DIRS": f"{home}/.conda/pkgs",
            "TORCH_HOME": f"{home}/.cache/torch",
            "WORKSPACE_NAME": self.workspace_name or "",
            "WORKSPACE_EXECUTION": str(self.current.number or ""),
            # the home's size limit in bytes (empty: none), for the workspace's own display
            "WORKSPACE_HOME_LIMIT": str(getattr(self.current.home_limit, "bytes", None) or ""),
            # what the culler shows the workspace extension instead of a hub token
            "WORKSPACE_REPORT_KEY": self.current.report_key,
            # the home's start script must end before the hub stops waiting for the server
            "WORKSPACE_START_TIMEOUT": str(int(max(10, self.http_timeout - 30))),
        }

    def ssh_environment(self, gateway_from: str | None, by_name: bool) -> dict[str, str]:
        """The execution's SSH identity (blocking; ssh_identities.execution_env), or none without a gateway."""
        if not self.ssh_gateway_key:
            return {}
        with self.db.session() as s:
            workspace = get_or_create_workspace(s, self.user.name, self.workspace_name)
            return ssh_identities.execution_env(s, workspace, self.ssh_gateway_key, gateway_from, by_name)

    async def ssh_address(self, ip_and_port) -> str | None:
        """Where the SSH gateway reaches this execution's sshd (`host:port`), from the server's address
        (`start`'s result); None without sshd."""
        if not self.current.ssh_env:
            return None
        return f"{ip_and_port[0]}:{ssh_identities.WORKSPACE_PORT}"

    def get_env(self):
        env = super().get_env()
        env.update(self.workspace_env())
        env.update(self.current.ssh_env)
        if self.current.task is not None:
            env["WORKSPACE_TASK_COMMAND"] = self.current.task
            base = self.hub.base_url[: -len("hub/")] if self.hub and self.hub.base_url.endswith("hub/") else "/"
            env["WORKSPACE_TASK_PAGE"] = f"{base}services/workspace/workspaces/{self.workspace_name}"
        if self.current.serve is not None:
            self.serve_env(env, self.current.serve)
        if self.current.root:
            env[privileges.ROOT_ENV] = "1"
        gpus = self.current.gpu_ids
        if gpus is not None and self.parsed_resource_types():
            # also with device_requests: CUDA programs see exactly these, by the same IDs
            env["NVIDIA_VISIBLE_DEVICES"] = ",".join(gpus) if gpus else "void"
        if self.locale != i18n.DEFAULT:
            # JupyterLab in the user's language: the image's language pack, chosen by a labconfig
            # default there (images/base/rootfs/etc/workspace/lang/); the user's own choice in JupyterLab's
            # settings is kept in their home and wins
            env["JUPYTER_CONFIG_PATH"] = f"{LAB_LANGUAGES}/{self.locale}"
        return self.job_env(env)  # a job's rank: what it is told (spawner/jobs.py)

    def serve_env(self, env: dict, spec) -> None:
        """A deployment's replica (#33): the port its command listens on and the page its server's own
        address sends to; no hub credential (the app answers anyone its deployment lets through)."""
        for name in [n for n in env if n in HUB_CREDENTIALS or n.startswith("JUPYTERHUB_OAUTH")]:
            del env[name]
        env["PORT"] = str(spec.port)
        env["WORKSPACE_DEPLOYMENT"] = spec.deployment
        env["WORKSPACE_DEPLOYMENT_VERSION"] = str(spec.version)
        base = self.hub.base_url[: -len("hub/")] if self.hub and self.hub.base_url.endswith("hub/") else "/"
        env["WORKSPACE_TASK_PAGE"] = f"{base}services/workspace/deployments/{spec.deployment}"

    async def get_command(self):
        if self.current.task is not None:
            # the image's runner (workspace-task) runs the command, after workspace-start's set-up
            return ["workspace-start", "workspace-task"]
        return await super().get_command()
