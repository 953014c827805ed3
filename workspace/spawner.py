"""Spawners: a workspace is a named JupyterHub server run in a container.

`WorkspaceMixin` holds what does not depend on the container engine: the
persistent home, the environment that makes installs land in it, and the
replayable progress stream. `DockerWorkspaceSpawner` combines it with
dockerspawner's `DockerSpawner`.
"""

from __future__ import annotations

import asyncio
import os
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import docker
from dockerspawner import DockerSpawner
from traitlets import Int, Unicode, default
from traitlets.config import LoggingConfigurable

from .errors import UserError


class WorkspaceMixin(LoggingConfigurable):
    """Engine-independent behaviour of a workspace server.

    Mix in before the engine's spawner class:
    `class MySpawner(WorkspaceMixin, SomeEngineSpawner)`.
    """

    home_root = Unicode(
        "/var/lib/workspace/homes",
        config=True,
        help="""Host directory that holds the live homes, one per user and
        workspace: `<home_root>/<user>/<workspace>`. Each is created and
        chowned to `home_uid` before its container starts.""",
    )

    home_mount = Unicode(
        "/openbayes/home",
        config=True,
        help="""Where the home is mounted in the container (read-write). It is
        also HOME, the notebook directory, and the root of PYTHONUSERBASE,
        CONDA_ENVS_PATH and TORCH_HOME, so what a user installs survives into
        later executions.""",
    )

    home_uid = Int(1000, config=True, help="uid that owns the home (the image's user).")
    home_gid = Int(1000, config=True, help="gid that owns the home (the image's group).")

    deployment = Unicode(
        "workspace",
        config=True,
        help="""Name of this deployment. Containers are labelled with it, so
        that `make down` and the tests find and clean up only their own.""",
    )

    @default("notebook_dir")
    def _default_notebook_dir(self):
        return self.home_mount

    # -- the home ---------------------------------------------------------

    @property
    def home_dir(self) -> Path:
        """The host directory of this workspace's live home."""
        return Path(self.home_root) / self._path_safe(self.user.name) / self._path_safe(self.name or "default")

    @staticmethod
    def _path_safe(name: str) -> str:
        # JupyterHub names never contain '/', but may be '.'-only or odd.
        safe = name.replace("/", "_")
        return f"_{safe}" if safe.startswith(".") else safe

    def _prepare_home(self) -> Path:
        """Create the live home and give it to the container user (blocking)."""
        home = self.home_dir
        home.mkdir(parents=True, exist_ok=True)
        os.chown(home, self.home_uid, self.home_gid)
        return home

    def workspace_env(self) -> dict[str, str]:
        home = self.home_mount
        return {
            "HOME": home,
            "SHELL": "/bin/bash",
            "PYTHONUSERBASE": f"{home}/.local",
            "CONDA_ENVS_PATH": f"{home}/.conda/envs",
            "CONDA_PKGS_DIRS": f"{home}/.conda/pkgs",
            "TORCH_HOME": f"{home}/.cache/torch",
            "WORKSPACE_NAME": self.name or "",
        }

    def get_env(self):
        env = super().get_env()
        env.update(self.workspace_env())
        return env

    # -- progress -----------------------------------------------------------
    # JupyterHub calls progress() anew on every page load of the spawn page,
    # so events are kept in a list and every call replays it from the start.

    def _reset_progress(self):
        self._progress_events = []
        self._progress_changed = asyncio.Event()

    def emit_progress(self, progress: int, message: str, **extra) -> None:
        """Record a progress event (0-100) and wake up the listeners."""
        if not hasattr(self, "_progress_events"):
            self._reset_progress()
        event = {"progress": progress, "message": message, **extra}
        self._progress_events.append(event)
        self.log.info("%s: %s", self._log_name, message)
        self._progress_changed.set()

    async def progress(self):
        if not hasattr(self, "_progress_events"):
            self._reset_progress()
        sent = 0
        while True:
            while sent < len(self._progress_events):
                yield self._progress_events[sent]
                sent += 1
            # JupyterHub stops iterating once the spawn future is done.
            self._progress_changed.clear()
            await self._progress_changed.wait()

    # -- start ----------------------------------------------------------------

    async def start(self):
        self._reset_progress()
        started = time.monotonic()
        self.emit_progress(5, "Preparing the home directory")
        await self.run_blocking(self._prepare_home)
        result = await super().start()
        self.emit_progress(
            90, f"Container started in {time.monotonic() - started:.1f} s; waiting for JupyterLab to answer"
        )
        return result

    async def run_blocking(self, fn, *args):
        """Run blocking work in the spawner's thread pool, off the event loop."""
        return await asyncio.get_running_loop().run_in_executor(self.executor, fn, *args)


class DockerWorkspaceSpawner(WorkspaceMixin, DockerSpawner):
    """A workspace in a Docker container on this host."""

    blocking_threads = Int(
        16,
        config=True,
        help="""Threads for blocking Docker calls and file work, shared by all
        spawners. dockerspawner's default is one thread, so one slow call
        (a large save, a stuck daemon) would stall every other user's start.""",
    )

    _pool = None

    @property
    def executor(self):
        cls = DockerWorkspaceSpawner
        if cls._pool is None:
            cls._pool = ThreadPoolExecutor(self.blocking_threads, thread_name_prefix="workspace-docker")
        return cls._pool

    @default("use_internal_ip")
    def _default_use_internal_ip(self):
        # The proxy reaches the container on the bridge; no host port is published.
        return True

    @default("remove")
    def _default_remove(self):
        # Every start is a new execution with a new container.
        return True

    @default("pull_policy")
    def _default_pull_policy(self):
        # Images are built locally (no registry); a missing image is an admin error.
        return "never"

    @default("prefix")
    def _default_prefix(self):
        return self.deployment

    @default("extra_host_config")
    def _default_extra_host_config(self):
        return {
            # tini as PID 1 reaps the zombies of terminals and kernels.
            "init": True,
            # Keep a dead container until stop() removes it, so its logs and
            # exit status can be read (dockerspawner would auto-remove it).
            "auto_remove": False,
        }

    @property
    def volume_binds(self):
        binds = super().volume_binds
        binds[str(self.home_dir)] = {"bind": self.home_mount, "mode": "rw"}
        return binds

    def container_labels(self) -> dict[str, str]:
        return {
            "workspace.deployment": self.deployment,
            "workspace.user": self.user.name,
            "workspace.server": self.name or "",
        }

    async def docker(self, method, *args, **kwargs):
        if method == "create_container":
            kwargs.setdefault("labels", {}).update(self.container_labels())
        return await super().docker(method, *args, **kwargs)

    async def pull_image(self, image):
        self.emit_progress(15, f"Checking image {image}")
        try:
            await super().pull_image(image)
        except docker.errors.NotFound as e:
            raise UserError(
                500,
                f"The image {image} is not installed on this server. "
                "Please tell your administrator (they can build it with `make images`).",
                detail=str(e),
            ) from e

    async def create_object(self):
        self.emit_progress(30, "Creating the container")
        return await super().create_object()

    async def start_object(self):
        self.emit_progress(50, f"Starting container {self.container_name}")
        return await super().start_object()
