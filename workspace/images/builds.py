"""Building the images users define (#18), in a sandbox, one at a time, in the workspace service.

A build is a container of the base image that runs a script of ours
(`build.sh`): apt-get install of the listed packages, pip install of the
requirements into the image's venv, the owner's post-build script, then the
image's versions. It runs as the container's root (apt needs it), but:

- nothing of the host is mounted: its input (the lists, the script, the host's
  CA bundle for pip behind a TLS-inspecting proxy) is copied in with
  `put_archive`, and no hub credential exists in it;
- every capability is dropped but the few dpkg needs to own and set up files,
  with `no-new-privileges`; memory, CPUs, processes and time are limited; its
  log rotates in the engine;
- its disk is limited: apt and pip need a writable root, and the engine's
  writable layer has no size on ext4, so the layer's size (`SizeRw`) is
  measured every `disk_interval` seconds and a build past `disk` is killed
  and fails with a sentence (it may overshoot by what it writes in one
  interval);
- its network reaches the internet only (workspace/images/network.py): not the
  hub, the proxy, the other containers or the site's networks.

When the script succeeds the container is committed as
`<deployment>-user-<id>:<build>`, with the base image's user, command and
entrypoint restored and its versions as the `workspace.versions` label (as the
images `make images` builds), and removed. Its log is kept as a task's is
(`tasks.keep`), and the record says where the build is (`[image] step 2/3: pip`).
"""

from __future__ import annotations

import io
import json
import os
import re
import secrets
import shlex
import tarfile
import threading
from pathlib import Path

import docker
from traitlets import Float, Int, List, Unicode
from traitlets.config import LoggingConfigurable

from workspace import egress, i18n, tasks
from workspace.errors import UserError
from workspace.images import dockerfiles
from workspace.images import network as build_network
from workspace.images import user as user_images
from workspace.images.versions import VERSIONS
from workspace.sizes import parse_bytes

WORK = "/tmp/workspace-build"
STEP = re.compile(rb"^\[image\] (step \d+/\d+: .{1,200})$")
RESULT = re.compile(rb"^\[image\] versions (\{.{0,4000}\})$")
# dpkg and apt's own set-up: owning and moving files, dropping to the _apt user, file capabilities
CAPABILITIES = ["CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "SETUID", "SETGID", "SETFCAP", "KILL"]


class ImageBuilder(LoggingConfigurable):
    """Configured as `c.ImageBuilder.*` in jupyterhub_config.py (the service applies it)."""

    memory = Unicode("4g", config=True, help="Memory limit of a build (pip compiling a package needs some).")
    cpus = Float(2.0, config=True, help="CPUs a build may use.")
    pids = Int(2048, config=True, help="Process limit of a build.")
    timeout = Float(3600, config=True, help="Seconds a build may run before it is stopped and fails.")
    disk = Unicode(
        "10G",
        config=True,
        help="""Disk a build may write (its container's writable layer, /tmp included): past it, the build is
        stopped and fails. The layer is measured every `disk_interval` seconds; empty for no limit.""",
    )
    disk_interval = Float(2.0, config=True, help="Seconds between two measurements of a build's disk.")
    max_images = Int(10, config=True, help="Images one user may have (built or not).")
    max_queued = Int(
        2,
        config=True,
        help="""Builds one user may have queued or under way at once (one more is refused with a 429); the
        builder takes the users' builds in turn (user_images.build_order). 0: no limit.""",
    )
    log_limit = Int(4 << 20, config=True, help="Bytes of a build's log kept after it ended (its tail).")
    network = Unicode("workspace-build", config=True, help="The Docker network builds run on (made if missing).")
    bridge = Unicode(
        "ws-build0",
        config=True,
        help="Its bridge interface's name (the iptables rules that keep builds off the site's networks name it).",
    )
    allowed_networks = List(
        Unicode(),
        config=True,
        help="""Private networks builds may reach besides the internet (a campus package
        mirror, like "10.20.0.0/24"), besides `Egress.allowed` (which workspaces may
        reach too); every other non-global address is refused.""",
    )
    ca_bundle = Unicode(
        "/etc/ssl/certs/ca-certificates.crt",
        config=True,
        help="""The CA bundle pip and apt trust inside a build (copied in): the host's,
        so a site behind a TLS-inspecting proxy builds as its hosts download. Empty: the image's own.""",
    )
    deployment = Unicode("workspace", help="The deployment (names of build containers and images).")
    log_root = Unicode("", help="Where finished builds' logs are kept (set by the service).")
    _current = None  # the container of the build under way

    # -- names ------------------------------------------------------------------------------

    def image_ref(self, image_id: int, build: int) -> str:
        return f"{self.deployment}-user-{int(image_id)}:{int(build)}"

    def container_name(self, image_id: int, build: int) -> str:
        return f"{self.deployment}-build-{int(image_id)}-{int(build)}"

    def log_path(self, image_id: int) -> Path:
        return Path(self.log_root) / "images" / f"{int(image_id)}.log"

    def keep_context(self, archive: bytes) -> str:
        """Keep a Dockerfile's sanitised context (dockerfiles.sanitize_context) until its build runs; its path."""
        folder = Path(self.log_root) / "images" / "contexts"
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        path = folder / f"{secrets.token_hex(16)}.tar"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(archive)
        return str(path)

    def drop_context(self, config: dict | None) -> None:
        """Remove a kept context (its build ran, or was never recorded)."""
        path = (config or {}).get("context")
        if path and Path(path).parent == Path(self.log_root) / "images" / "contexts":
            Path(path).unlink(missing_ok=True)

    # -- a build (blocking) -----------------------------------------------------------------

    def build(self, job: dict, db) -> dict:
        """Build `job` (user_images.next_queued's); {ok, ref, bytes, versions, error, log_total, log_kept}.
        Never raises for the build's own failure: that is the result."""
        client = docker.from_env(timeout=120)
        name = self.container_name(job["id"], job["build"])
        try:
            return self._build(client, job, name, db)
        except UserError as e:
            self.log.warning("build of %s: %s %s", job["name"], e.log_message, getattr(e, "detail", ""))
            return {"ok": False, "error": e.kept()}  # the sentence (its detail is for the log above)
        except Exception as e:
            self.log.exception("build of %s failed", job["name"])
            why = i18n.kept(
                "The build could not be run ({error}); please tell your administrator.", error=type(e).__name__
            )
            return {"ok": False, "error": why}
        finally:
            self._current = None
            self.drop_context(job.get("config"))
            try:
                client.containers.get(name).remove(force=True)
            except docker.errors.DockerException:
                pass
            client.close()

    def _build(self, client, job: dict, name: str, db) -> dict:
        try:
            base = client.images.get(job["base_ref"])
        except docker.errors.ImageNotFound:
            return {
                "ok": False,
                "error": i18n.kept("The base image {image} is not installed any more.", image=job["base_ref"]),
            }
        config = base.attrs.get("Config") or {}
        container = self._container(client, base.id, config, name)
        container.put_archive("/", self.inputs(job))
        context = (job.get("config") or {}).get("context")
        if context:  # a Dockerfile's files, where its COPY and ADD find them
            container.put_archive(dockerfiles.CONTEXT, Path(context).read_bytes())
        self._current = container
        state, killed, too_large = self._run(client, container, job, db)
        kept = tasks.keep(
            client.api.logs(container.id, stdout=True, stderr=True, stream=True, follow=False, timestamps=True),
            self.log_path(job["id"]),
            self.log_limit,
        )
        result = {"log_total": kept.total, "log_kept": kept.kept}
        versions = self._versions(self.log_path(job["id"]))
        why = self._failure(state, versions, killed, too_large)
        if why is not None:
            return {**result, "ok": False, "error": why}
        return {**result, **self._commit(container, base, config, versions, job)}

    def _container(self, client, base_id: str, config: dict, name: str):
        """The build's container (created, not started): confined as the module says, on the builds' network."""
        site = egress.Egress(parent=self)
        allowed = [*self.allowed_networks, *site.allowed]
        network = build_network.ensure(client, self.network, self.bridge, allowed, enforce=site.enabled)
        size = max(1 << 20, self.log_limit)
        command = ["/bin/bash", f"{WORK}/build.sh"]
        return client.containers.create(
            base_id,
            command,
            # a base with an entrypoint of its own would run it around our script
            entrypoint=command if config.get("Entrypoint") else None,
            name=name,
            user="0:0",
            network=network,
            cap_drop=["ALL"],
            cap_add=CAPABILITIES,
            security_opt=["no-new-privileges"],
            pids_limit=self.pids,
            mem_limit=self.memory,
            memswap_limit=self.memory,
            nano_cpus=int(self.cpus * 1e9),
            log_config=docker.types.LogConfig(type="json-file", config={"max-size": str(size), "max-file": "2"}),
            # no labels: a commit keeps the container's, and every workspace of the image would carry them
        )

    def _run(self, client, container, job: dict, db) -> tuple[dict, threading.Event, threading.Event]:
        """Start the build and follow it to its end, killed past `timeout` or past `disk`: (its final state,
        set if it was killed for its time, set if for its disk)."""
        container.start()
        killed, too_large, done = threading.Event(), threading.Event(), threading.Event()
        timer = threading.Timer(self.timeout, self._kill, (container, killed))
        timer.start()
        limit = parse_bytes(self.disk)
        watcher = threading.Thread(
            target=self._watch_disk, args=(client, container, limit, too_large, done), daemon=True
        )
        if limit:
            watcher.start()
        try:
            self._watch(container, job, db)
            container.wait(timeout=60)
            state = client.api.inspect_container(container.id)["State"]
        finally:
            timer.cancel()
            done.set()
        return state, killed, too_large

    def _failure(
        self, state: dict, versions: dict | None, killed: threading.Event, too_large: threading.Event
    ) -> str | None:
        """Why the build failed (a kept sentence), None if it succeeded."""
        code = state.get("ExitCode")
        if state.get("OOMKilled"):
            return i18n.kept("The build ran out of memory ({memory}); read its log.", memory=str(self.memory))
        if too_large.is_set():
            return i18n.kept(
                "The build wrote more than {size} to its disk and was stopped; install less, or remove "
                "what the build only needs on the way (downloads, caches).",
                size=str(self.disk),
            )
        if code != 0 or versions is None:
            if killed.is_set():
                return i18n.kept(
                    "The build took longer than {minutes:.0f} minutes and was stopped.", minutes=self.timeout / 60
                )
            return i18n.kept("The build failed (exit code {code}); read its log to see which step.", code=code)
        return None

    def _commit(self, container, base, config: dict, versions: dict, job: dict) -> dict:
        """The built container committed as the user's image (the base's user, command and entrypoint
        restored, its versions labelled): {ok, ref, bytes (its own layer), versions}."""
        ref = self.image_ref(job["id"], job["build"])
        repository, tag = ref.split(":")
        changes = self.restore(config, versions, job["name"], ref, job.get("config"))
        image = container.commit(repository=repository, tag=tag, changes=changes)
        image.reload()
        return {
            "ok": True,
            "ref": ref,
            "bytes": max(0, int(image.attrs.get("Size") or 0) - int(base.attrs.get("Size") or 0)),
            "versions": versions,
        }

    def abort(self) -> None:
        """Stop the build under way (the service is stopping)."""
        container, self._current = self._current, None
        if container is not None:
            self._kill(container, threading.Event())

    def _kill(self, container, killed: threading.Event) -> None:
        killed.set()
        try:
            container.kill()
        except docker.errors.DockerException:
            pass

    def _watch_disk(self, client, container, limit: int, too_large: threading.Event, done: threading.Event) -> None:
        """Kill the build once its writable layer is larger than `limit` bytes (until `done`)."""
        while not done.wait(self.disk_interval):
            try:
                # the engine sums the layer's files for `size`: a walk, so not more often than this
                (found,) = client.api.containers(all=True, size=True, filters={"id": container.id}) or [{}]
            except (docker.errors.DockerException, ValueError):
                continue
            if int(found.get("SizeRw") or 0) > limit:
                too_large.set()
                self._kill(container, threading.Event())
                return

    def _watch(self, container, job: dict, db) -> None:
        """Follow the build's output until it ends, recording each step it announces (the progress)."""
        buf = b""
        for chunk in container.logs(stdout=True, stderr=True, stream=True, follow=True):
            buf += chunk
            *lines, buf = buf.split(b"\n")
            buf = buf[-4096:]
            for line in lines:
                m = STEP.match(line.rstrip(b"\r"))
                if m:
                    user_images.set_progress(db, job["id"], job["build"], m.group(1).decode(errors="replace"))

    @staticmethod
    def _versions(log: Path) -> dict | None:
        """The versions our script printed last (None: it did not get there). The owner's script could print
        such a line too; it can only lie about its own image, which it controls anyway."""
        found = None
        for line in tasks.read_after(log, None):
            body = line.split(b" ", 1)[-1].rstrip(b"\r\n")  # after the engine's time
            m = RESULT.match(body)
            if m:
                found = m.group(1)
        if found is None:
            return None
        try:
            data = json.loads(found)
        except ValueError:
            return None
        if not isinstance(data, dict):
            return None
        return {str(k)[:40]: str(v)[:40] for k, v in list(data.items())[:20] if isinstance(v, str)}

    @staticmethod
    def restore(config: dict, versions: dict, full_name: str, ref: str, dockerfile: dict | None = None) -> list[str]:
        """`docker commit` changes: the base image's user, command and entrypoint (the build ran as root with
        our script as its command), a Dockerfile's ENV and LABEL values, and our labels."""
        changes = [f"USER {config.get('User') or 'root'}"]
        for key, value in ((dockerfile or {}).get("env") or {}).items():
            changes.append(f"ENV {key}={json.dumps(value)}")
        for key, value in ((dockerfile or {}).get("labels") or {}).items():
            changes.append(f"LABEL {json.dumps(key)}={json.dumps(value)}")
        if config.get("Entrypoint"):
            changes.append(f"ENTRYPOINT {json.dumps(config['Entrypoint'])}")
        if config.get("Cmd"):
            changes.append(f"CMD {json.dumps(config['Cmd'])}")
        label = json.dumps(json.dumps(versions, separators=(",", ":")))
        changes.append(
            f"LABEL workspace.versions={label} workspace.user-image={json.dumps(full_name)} workspace.image={ref}"
        )
        return changes

    def inputs(self, job: dict) -> bytes:
        """The build's input as a tar archive for put_archive: our script, the lists, the owner's script and
        the CA bundle (owned by root, readable by root only)."""
        files = {
            "build.sh": script(job).encode(),
            "apt.txt": "".join(f"{p}\n" for p in job["apt"]).encode(),
            "requirements.txt": job["pip"].encode(),
            "post-build.sh": job["script"].encode(),
        }
        if self.ca_bundle:
            try:
                files["ca.crt"] = Path(self.ca_bundle).read_bytes()
            except OSError as e:
                self.log.warning("CA bundle %s not readable (%s): builds use the image's own", self.ca_bundle, e)
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            for folder in (WORK, dockerfiles.CONTEXT):  # the context's folder: put_archive needs it to exist
                info = tarfile.TarInfo(folder.strip("/"))
                info.type, info.mode = tarfile.DIRTYPE, 0o700
                tar.addfile(info)
            for fname, data in files.items():
                info = tarfile.TarInfo(f"{WORK.strip('/')}/{fname}")
                info.size, info.mode = len(data), 0o600
                tar.addfile(info, io.BytesIO(data))
        return buf.getvalue()

    # -- the service's start and the logs ------------------------------------------------

    def clean_up(self, db) -> None:
        """After a restart: builds left running are failed, their containers removed (blocking)."""
        gone = user_images.interrupted(db)
        client = docker.from_env()
        try:
            for c in client.containers.list(all=True, filters={"name": f"{self.deployment}-build-"}):
                if c.name.startswith(f"{self.deployment}-build-"):
                    c.remove(force=True)
        finally:
            client.close()
        if gone:
            self.log.info("%d image build(s) were interrupted by a restart", gone)

    def engine_log(self, name: str, since: float | None = None):
        """A running build's log so far (never a follow; tasks.follow asks again)."""
        client = docker.from_env()
        try:
            yield from client.api.logs(
                name, stdout=True, stderr=True, stream=True, follow=False, timestamps=True, since=since
            )
        except docker.errors.NotFound:
            return
        finally:
            client.close()

    def remove_image(self, ref: str | None) -> None:
        if not ref:
            return
        client = docker.from_env()
        try:
            client.images.remove(ref, noprune=False)
        except docker.errors.ImageNotFound:
            pass
        except docker.errors.APIError as e:  # a container of it still exists (a running workspace)
            self.log.warning("image %s not removed: %s", ref, e)
        finally:
            client.close()


def script(job: dict) -> str:
    """build.sh: each step announced (`[image] step 2/3: ...`), each one's failure the build's."""
    steps = []
    if job["apt"]:
        steps.append(
            (
                f"apt-get install {len(job['apt'])} package(s): {' '.join(job['apt'])[:150]}",
                "apt-get update\n"
                f"xargs -a {WORK}/apt.txt apt-get install -y --no-install-recommends\n"
                "apt-get clean\nrm -rf /var/lib/apt/lists/*",
            )
        )
    if job["pip"].strip():
        lines = [ln for ln in job["pip"].splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
        steps.append(
            (
                f"pip install {len(lines)} requirement(s)",
                'PIP=/opt/venv/bin/pip; [ -x "$PIP" ] || PIP="python3 -m pip"\n'
                f"$PIP install --no-cache-dir --progress-bar off -r {WORK}/requirements.txt",
            )
        )
    if job["script"].strip():
        steps.append(("the post-build script", f"(cd /tmp && bash -e {WORK}/post-build.sh)"))
    out = [
        "set -euo pipefail",
        "export DEBIAN_FRONTEND=noninteractive HOME=/root",
        # the CA bundle of the host, for pip and apt behind a TLS-inspecting proxy; only in this script's
        # environment, which the committed image does not keep
        f"if [ -s {WORK}/ca.crt ]; then export PIP_CERT={WORK}/ca.crt SSL_CERT_FILE={WORK}/ca.crt "
        f"REQUESTS_CA_BUNDLE={WORK}/ca.crt; fi",
    ]
    for n, (title, body) in enumerate(steps, 1):
        out.append(f"echo {shlex.quote(f'[image] step {n}/{len(steps)}: {title}')}")
        out.append(body)
    out.append(f"rm -rf {WORK}")
    out.append('PY=/opt/venv/bin/python; [ -x "$PY" ] || PY=python3')
    out.append(f'echo "[image] versions $("$PY" -I -c {shlex.quote(VERSIONS)})"')
    return "\n".join(out) + "\n"
