"""Personal environments as kernels (#32): each venv the student makes under `~/envs/` (`python -m venv
~/envs/nlp`) is a kernel of the launcher by itself, "Python (nlp)", and stays one across restarts (the
home is restored with it).

The venv need not install ipykernel: the kernel runs the venv's own Python, with the venv's packages
first, and finds what it lacks to be a kernel (ipykernel and its dependencies) after them, in this
server's own environment (the same Python version: the image's). A venv that installs its own ipykernel
uses that one. It all runs in the student's own container, as the student: nothing here crosses a
boundary, and the hub never looks.
"""

from __future__ import annotations

import os
import re
import sysconfig

from jupyter_client.kernelspec import KernelSpecManager

ENVS = "envs"  # ~/envs/<name>
PREFIX = "venv-"  # kernel names: venv-<name>
MAX_ENVS = 64  # a listing is bounded, whatever the home holds
# the kernel's start: the venv's packages first, this server's (ipykernel, zmq ...) after them
LAUNCH = "import sys; sys.path.append({fallback!r}); from ipykernel import kernelapp; kernelapp.launch_new_instance()"


def venvs(home: str) -> dict[str, str]:
    """{kernel name: venv directory} of the venvs directly under `home`/envs (those with a pyvenv.cfg and
    an executable bin/python), at most MAX_ENVS, by name."""
    root = os.path.join(home, ENVS)
    try:
        entries = sorted(os.listdir(root))[:MAX_ENVS]
    except OSError:
        return {}
    found: dict[str, str] = {}
    for entry in entries:
        path = os.path.join(root, entry)
        python = os.path.join(path, "bin", "python")
        if os.path.isfile(os.path.join(path, "pyvenv.cfg")) and os.access(python, os.X_OK):
            found.setdefault(PREFIX + re.sub(r"[^a-z0-9._-]+", "-", entry.lower()), path)
    return found


class WorkspaceKernelSpecManager(KernelSpecManager):
    """The image's kernels, and one for each venv under ~/envs (module docstring)."""

    def _venvs(self) -> dict[str, str]:
        return venvs(os.path.expanduser("~"))

    def find_kernel_specs(self) -> dict[str, str]:
        specs = super().find_kernel_specs()
        for name, path in self._venvs().items():
            specs.setdefault(name, path)
        return specs

    def get_kernel_spec(self, kernel_name: str):
        path = self._venvs().get(kernel_name.lower())
        if path is None:
            return super().get_kernel_spec(kernel_name)
        from ipykernel.kernelspec import RESOURCES  # the Python logo

        launch = LAUNCH.format(fallback=sysconfig.get_path("purelib"))
        return self.kernel_spec_class(
            resource_dir=RESOURCES,
            argv=[os.path.join(path, "bin", "python"), "-c", launch, "-f", "{connection_file}"],
            display_name=f"Python ({os.path.basename(path)})",
            language="python",
            env={"VIRTUAL_ENV": path, "PATH": f"{path}/bin:{os.environ.get('PATH', '/usr/bin:/bin')}"},
            metadata={"debugger": True},
        )
