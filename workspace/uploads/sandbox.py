"""Unprivileged throwaway containers for work on users' files that must not run as root.

Unpacking an uploaded archive is the first: the hub's processes run as root
on the host, and a parser fooled by a hostile archive (the long-name link
chain of CVE-2025-4517 fools `tarfile`'s "data" filter) would write
wherever root may. In a sandbox it cannot: the container sees only the
archive (read-only) and the empty target directory, runs as uid 1000 with
no network, every capability dropped, `no-new-privileges`, a read-only root,
a small /tmp and limits on memory, processes and time. The unpacker itself
(workspace/uploads/unpacker.py, standard library only, so it runs with the image's
Python whatever its patch level) bounds the expanded size and file count.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import docker
from traitlets import Float, Int, Unicode
from traitlets.config import LoggingConfigurable

from workspace.errors import UserError

UNPACKER = (Path(__file__).parent / "unpacker.py").read_text()
# a placeholder of a template the unpacker says (a name, a simple format spec: no attribute or index)
_PLACEHOLDER = re.compile(r"\{(\w+)(?::[<>^=+\- #0-9,._a-z%]*)?\}")


class Refusal(UserError):
    """The unpacker's refusal of an archive (its 400). Where it prints its sentence's template and params
    (`{"error": sentence, "message": template, "params": {...}}`, the template marked `N_()` in
    workspace/uploads/unpacker.py), the sentence is looked up with the template, so it reads in the user's
    language; else it is the sentence as printed, in English."""

    def __init__(self, result: dict):
        template, params = _template_of(result)
        super().__init__(400, template, **params)


def _template_of(result: dict) -> tuple[str, dict]:
    """(template, params) of the unpacker's refusal, when what it printed fills to its sentence exactly;
    else (its sentence, {})."""
    sentence, template, params = result["error"], result.get("message"), result.get("params")
    if not (isinstance(template, str) and isinstance(params, dict) and params):
        return sentence, {}
    if not all(isinstance(v, (str, int, float)) and not isinstance(v, bool) for v in params.values()):
        return sentence, {}
    if set(_PLACEHOLDER.findall(template)) != set(params) or "{" in _PLACEHOLDER.sub("", template.replace("{{", "")):
        return sentence, {}
    try:
        filled = template.format(**params)
    except (KeyError, IndexError, ValueError):
        return sentence, {}
    return (template, params) if filled == sentence else (sentence, {})


class Sandbox(LoggingConfigurable):
    image = Unicode("workspace-base:latest", config=True, help="The image sandboxes run (has a Python 3).")
    python = Unicode("/opt/venv/bin/python", config=True, help="The Python of that image.")
    uid = Int(1000, config=True, help="The unprivileged user sandboxes run as (the image's user).")
    memory = Unicode("512m", config=True, help="Memory limit of a sandbox.")
    pids = Int(64, config=True, help="Process limit of a sandbox.")
    timeout = Float(1800, config=True, help="Seconds a sandbox may run before it is killed.")
    deployment = Unicode("workspace", config=True, help="Label of this deployment's containers (make down).")

    def unpack(self, archive: Path, kind: str, target: Path, label: str, max_bytes: int, max_files: int) -> dict:
        """Unpack `archive` into the empty directory `target`; {"bytes", "files"} or the user's 400 (blocking)."""
        os.chown(target, self.uid, self.uid)
        os.chmod(target, 0o755)
        # the sandbox's user reads the archive through its own mount (the hub's umask made it 0600); the
        # store's directories above it stay root's and 0700 (workspace/data_dir.py)
        os.chmod(archive, 0o644)
        code, out = self._run(
            [self.python, "-I", "-c", UNPACKER, kind, "/in/archive", str(max_bytes), str(max_files), label],
            {str(archive): {"bind": "/in/archive", "mode": "ro"}, str(target): {"bind": "/out", "mode": "rw"}},
            workdir="/out",
        )
        try:
            result = json.loads(out.strip().splitlines()[-1]) if out.strip() else {}
        except ValueError:
            result = {}
        if code == 0 and "bytes" in result:
            return result
        if code == 2 and isinstance(result.get("error"), str):
            raise Refusal(result)
        raise UserError(
            500,
            "{label} could not be unpacked; please tell your administrator.",
            detail=f"sandbox exit {code}: {out[-2000:]}",
            label=label,
        )

    def _run(self, command: list[str], volumes: dict, workdir: str) -> tuple[int, str]:
        client = docker.from_env()  # one per call: calls come from several threads
        try:
            return self._run_in(client, command, volumes, workdir)
        finally:
            client.close()

    def _run_in(self, client, command: list[str], volumes: dict, workdir: str) -> tuple[int, str]:
        try:
            container = client.containers.create(
                self.image,
                command,
                user=f"{self.uid}:{self.uid}",
                working_dir=workdir,
                network_disabled=True,
                network_mode="none",
                read_only=True,
                cap_drop=["ALL"],
                security_opt=["no-new-privileges"],
                pids_limit=self.pids,
                mem_limit=self.memory,
                memswap_limit=self.memory,
                nano_cpus=1_000_000_000,
                tmpfs={"/tmp": "size=64m,mode=1777"},
                volumes=volumes,
                environment={"HOME": "/tmp"},
                labels={"workspace.deployment": self.deployment, "workspace.sandbox": "unpack"},
                entrypoint=[],
            )
        except docker.errors.ImageNotFound:
            raise UserError(
                500,
                "Archives cannot be unpacked: the sandbox image is not installed; please tell "
                "your administrator (make images).",
                detail=self.image,
            )
        try:
            container.start()
            try:
                code = container.wait(timeout=self.timeout).get("StatusCode", 1)
            except Exception:  # the timeout (requests' ReadTimeout / ConnectionError)
                container.kill()
                raise UserError(
                    400, "Unpacking took too long and was stopped; upload a smaller archive or its parts one by one."
                )
            out = container.logs(stdout=True, stderr=True).decode(errors="replace")
            return code, out
        finally:
            try:
                container.remove(force=True)
            except docker.errors.DockerException as e:
                self.log.warning("Could not remove sandbox %s: %s", container.id[:12], e)
