"""Single-user images, built without a container registry.

An image definition is a folder under `images/`:

- `packages.txt`      Debian bookworm packages (one per line, `#` comments)
- `requirements.txt`  Python packages for `/opt/venv`; `jupyterhub` is pinned by
                      the builder to the hub's exact version
- `requirements-*.txt` more requirement files, for a `setup.sh` that makes a venv
                      of its own (the labelling image's Label Studio); copied to
                      /tmp beside requirements.txt
- `setup.sh`          runs inside the root filesystem (chroot) after debootstrap
                      (an image that extends another may leave it out: the
                      builder's `extends_setup.sh` adds its packages)
- `rootfs/`           files copied over the root filesystem last
- `Dockerfile`        the same image for sites with a registry; its USER, ENV,
                      WORKDIR and CMD lines are the image settings of both routes

The build has two stages, each cached by a hash of its inputs:

1. the system: `debootstrap --variant=minbase` → chroot `setup.sh` (venv +
   pip) → `tar | docker import` as `NAME-stage:<hash of packages,
   requirements, setup.sh>`. No `FROM` and no pull, so it works where no
   registry can be reached. This takes minutes and is rarely redone.
2. the files: `rootfs/` and the project's single-user extension
   (`workspace/singleuser`, see PROJECT_FILES) are put into a container of
   the stage image, which is committed as `NAME:<hash of all inputs>` and
   tagged `NAME:latest`. Seconds; redone when any of these files change.

An unchanged definition is not rebuilt.

A definition with a file `extends` (naming another folder, like `base`) is a
framework image built on that one: its system stage starts from the other's
stage (exported, not debootstrapped), its `setup.sh` adds its own Debian and
Python packages, and its files are the other's `rootfs/` then its own; its
image settings are the other's Dockerfile's, then its own. Every image is
labelled with what it holds (`workspace.versions`: Python, JupyterLab, and
numpy, pandas, torch, CUDA ... where present), which the spawn form and the
API show with its size.

The `Dockerfile` builds the same image where a registry can be reached
(docs/images.md); here only its image settings are read.
"""

from __future__ import annotations

import hashlib
import io
import os
import shlex
import shutil
import subprocess
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

import docker
import jupyterhub

from workspace.images.versions import VERSIONS
from workspace.setup.steps import ROOT, apt_install, run_logged, say, step

# Bump when the build procedure itself changes in a way that alters images.
BUILDER_VERSION = "2"
SUITE = "bookworm"
CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
PREFIX = "images"
# Dockerfile instructions that `docker import --change` accepts.
IMPORT_INSTRUCTIONS = {"CMD", "ENTRYPOINT", "ENV", "EXPOSE", "LABEL", "USER", "VOLUME", "WORKDIR"}

PROJECT = ROOT
EXTENDS_SETUP = Path(__file__).resolve().parent / "extends_setup.sh"
# What of the project goes into every image: the single-user extension and
# the usage readers it shares with the host (nothing else of the hub side).
# (source under the project, destination in the image)
EXTENSION_ROOT = "/opt/workspace"
LABEXTENSION_DIR = "/opt/venv/share/jupyter/labextensions/@workspace/lab"
SITE_PACKAGES = "/opt/venv/lib/python3.11/site-packages"  # bookworm's Python


def project_files() -> list[tuple[Path, str]]:
    """The project files copied into every image, as (source, destination)."""
    files = [
        (PROJECT / "workspace/__init__.py", f"{EXTENSION_ROOT}/workspace/__init__.py"),
        (PROJECT / "workspace/usage.py", f"{EXTENSION_ROOT}/workspace/usage.py"),
    ]
    ext = PROJECT / "workspace/singleuser"
    # puts EXTENSION_ROOT on the venv's path: `import workspace.singleuser`
    files.append((ext / "workspace.pth", f"{SITE_PACKAGES}/workspace-singleuser.pth"))
    for f in sorted(ext.rglob("*")):
        if not f.is_file() or "__pycache__" in f.parts:
            continue
        rel = f.relative_to(ext).as_posix()
        if rel.startswith("labextension/"):
            files.append((f, f"{LABEXTENSION_DIR}/{rel[len('labextension/') :]}"))
        elif f.suffix == ".py":
            files.append((f, f"{EXTENSION_ROOT}/workspace/singleuser/{rel}"))
    return files


def default_mirror(apt_dir: Path = Path("/etc/apt")) -> str:
    """The Debian mirror the host's apt uses, so the build reaches what apt reaches."""
    sources = sorted(apt_dir.glob("sources.list")) + sorted(apt_dir.glob("sources.list.d/*"))
    for source in sources:
        if not source.is_file():
            continue
        for line in source.read_text(errors="replace").splitlines():
            words = line.split()
            if words[:1] == ["URIs:"] and len(words) > 1 and "security" not in words[1]:
                return words[1]
            if words[:1] == ["deb"] and len(words) > 2:
                uri = next((w for w in words[1:] if not w.startswith("[")), "")
                if "://" in uri and "security" not in uri:
                    return uri
    return "http://deb.debian.org/debian"


@dataclass
class ImageDefinition:
    """One image folder under `images/`."""

    path: Path
    name: str
    parent: "ImageDefinition | None" = None  # the image it extends (its `extends` file)

    @property
    def packages(self) -> list[str]:
        lines = (self.path / "packages.txt").read_text().splitlines()
        return [w for line in lines if (w := line.split("#", 1)[0].strip())]

    def requirements(self) -> str:
        """requirements.txt with jupyterhub pinned to the hub's own version."""
        text = (self.path / "requirements.txt").read_text()
        return f"{text.rstrip()}\njupyterhub=={jupyterhub.__version__}\n"

    def stage_hash(self) -> str:
        """A hash of what goes into the system stage (Debian packages, Python packages, the parent's)."""
        h = hashlib.sha256()
        h.update(f"builder={BUILDER_VERSION} suite={SUITE}\n".encode())
        if self.parent is not None:
            h.update(f"parent={self.parent.stage_hash()}\n".encode())
        h.update(self.requirements().encode())
        h.update(b"packages.txt\n" + (self.path / "packages.txt").read_bytes())
        h.update(b"setup.sh\n" + self.setup_script.read_bytes())
        for extra in self.extra_requirements:
            h.update(f"{extra.name}\n".encode() + extra.read_bytes())
        return h.hexdigest()[:12]

    @property
    def extra_requirements(self) -> list[Path]:
        """Requirement files of venvs of the image's own (`requirements-*.txt`), which its setup.sh reads."""
        return sorted(self.path.glob("requirements-*.txt"))

    @property
    def setup_script(self) -> Path:
        """What runs in the chroot: its own setup.sh, else (a framework image) the builder's, which adds
        its packages.txt and requirements.txt to its parent's."""
        own = self.path / "setup.sh"
        return own if own.is_file() or self.parent is None else EXTENDS_SETUP

    def files(self) -> list[tuple[Path, str]]:
        """The files of the second stage, as (source, destination in the image): the parent's, then its own."""
        root = self.path / "rootfs"
        own = [(f, "/" + f.relative_to(root).as_posix()) for f in sorted(root.rglob("*")) if f.is_file()]
        if self.parent is not None:
            mine = {dest for _, dest in own}
            inherited = [(f, d) for f, d in self.parent.files() if d not in mine]
            return inherited + own
        return own + project_files()

    def inputs_hash(self) -> str:
        """A hash of everything that goes into the image."""
        h = hashlib.sha256()
        h.update(f"stage={self.stage_hash()}\n".encode())
        h.update(VERSIONS.encode())  # the label it gets
        h.update((self.path / "Dockerfile").read_bytes())
        for source, dest in self.files():
            h.update(f"{dest} {source.stat().st_mode & 0o777:o}\n".encode())
            h.update(source.read_bytes())
        return h.hexdigest()[:12]

    def files_tar(self) -> bytes:
        """The second stage's files as a tar archive (owned by root), for put_archive."""
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            dirs: set[str] = set()
            for source, dest in self.files():
                parts = dest.strip("/").split("/")
                for i in range(1, len(parts)):
                    d = "/".join(parts[:i])
                    if d not in dirs:
                        dirs.add(d)
                        info = tarfile.TarInfo(d)
                        info.type, info.mode = tarfile.DIRTYPE, 0o755
                        tar.addfile(info)
                data = source.read_bytes()
                info = tarfile.TarInfo(dest.strip("/"))
                info.size, info.mode = len(data), source.stat().st_mode & 0o777
                tar.addfile(info, io.BytesIO(data))
        return buf.getvalue()

    def image_config(self) -> list[str]:
        """The image settings (USER, WORKDIR, ENV, CMD ...) of the definition's Dockerfile.

        The Dockerfile is the one place they are written; `docker import -c`
        takes the same instructions.
        """
        text = (self.path / "Dockerfile").read_text().replace("\\\n", " ")
        changes = self.parent.image_config() if self.parent is not None else []
        for line in text.splitlines():
            words = line.split(None, 1)
            if len(words) == 2 and words[0].upper() in IMPORT_INSTRUCTIONS:
                changes.append(f"{words[0].upper()} {' '.join(words[1].split())}")
        return changes

    @property
    def tag(self) -> str:
        return f"{self.name}:{self.inputs_hash()}"

    @property
    def stage_tag(self) -> str:
        return f"{self.name}-stage:{self.stage_hash()}"


# An image's files are everyone's to read and run, as in any image: its system stage is built under umask
# 022, not the setup commands' 077 (which keeps the data directory root's alone, #28); under 077 debootstrap
# and pip made /opt/venv/bin 0700 root, and the image's user could not run its own Python.
IMAGE_UMASK = 0o022


class ImageBuilder:
    """Builds image definitions into the local Docker engine."""

    def __init__(self, log: Path, mirror: str | None = None, workdir: Path | None = None):
        self.log = log
        self.mirror = mirror or default_mirror()
        self.workdir = workdir or Path("/var/tmp")
        self.client = docker.from_env()

    def exists(self, tag: str) -> bool:
        try:
            self.client.images.get(tag)
            return True
        except docker.errors.ImageNotFound:
            return False

    def build(self, definition: ImageDefinition, force: bool = False) -> str:
        """Build `definition` unless an image of the same inputs exists; return its tag."""
        tag = definition.tag
        if not force and self.exists(tag):
            self.client.images.get(tag).tag(definition.name, "latest")
            say(PREFIX, f"{tag} is up to date (inputs unchanged), not rebuilt")
            return tag
        stage = definition.stage_tag
        if force or not self.exists(stage):
            self._build_stage(definition, stage)
        else:
            say(PREFIX, f"system stage {stage} is up to date, not rebuilt")
        with step(PREFIX, f"add the image files and the workspace extension, commit {tag}"):
            self._add_files(definition, stage, tag)
        self.client.images.get(tag).tag(definition.name, "latest")
        size = self.client.images.get(tag).attrs["Size"]
        say(PREFIX, f"{tag} built, {size / 1e6:.0f} MB")
        return tag

    def _build_stage(self, definition: ImageDefinition, stage: str) -> None:
        """The system stage: debootstrap, or (a framework image) its parent's stage, built first if missing
        and exported; then its packages in a chroot; then imported."""
        parent = definition.parent
        if parent is not None and not self.exists(parent.stage_tag):
            self._build_stage(parent, parent.stage_tag)
        on = f" on {parent.stage_tag}" if parent is not None else ""
        say(PREFIX, f"building the system stage {stage}{on} (log: {self.log})")
        build_dir = Path(tempfile.mkdtemp(prefix="workspace-image-", dir=self.workdir))
        rootfs = build_dir / "rootfs"
        umask = os.umask(IMAGE_UMASK)
        try:
            if parent is None:
                self._debootstrap(definition, rootfs)
            else:
                with step(PREFIX, f"export {parent.stage_tag}"):
                    self._export(parent.stage_tag, rootfs)
            with step(PREFIX, "packages in the chroot (venv, pip)"):
                self._setup(definition, rootfs)
            with step(PREFIX, f"docker import as {stage}"):
                self._import(rootfs, stage)
        finally:
            os.umask(umask)
            self._unmount(rootfs)
            shutil.rmtree(build_dir, ignore_errors=True)

    def _debootstrap(self, definition: ImageDefinition, rootfs: Path) -> None:
        if shutil.which("debootstrap") is None:
            with step(PREFIX, "install debootstrap (Debian)"):
                apt_install(["debootstrap"], self.log, "Building images")
        with step(PREFIX, f"debootstrap {SUITE} from {self.mirror}"):
            run_logged(
                [
                    "debootstrap",
                    "--variant=minbase",
                    f"--include={','.join(definition.packages)}",
                    SUITE,
                    str(rootfs),
                    self.mirror,
                ],
                self.log,
                "Installing the Debian base system failed (is the Debian mirror reachable?)",
            )

    def _export(self, image: str, rootfs: Path) -> None:
        """Unpack `image`'s file system into `rootfs` (our own image: unpacked as root, as it is)."""
        rootfs.mkdir()
        container = self.client.containers.create(image, command=["/bin/true"])
        try:
            untar = subprocess.Popen(["tar", "--numeric-owner", "-x", "-C", str(rootfs)], stdin=subprocess.PIPE)
            for chunk in container.export():
                untar.stdin.write(chunk)
            untar.stdin.close()
            if untar.wait() != 0:
                raise RuntimeError(f"unpacking {image} failed")
        finally:
            container.remove(force=True)

    def versions(self, stage: str) -> str:
        """What an image holds (Python, JupyterLab, the frameworks, CUDA), as JSON, read from its packages'
        metadata (nothing is imported: torch alone would take seconds)."""
        out = self.client.containers.run(stage, ["/opt/venv/bin/python", "-c", VERSIONS], remove=True, user="0")
        return out.decode().strip()

    def _add_files(self, definition: ImageDefinition, stage: str, tag: str) -> None:
        repository, _, version = tag.rpartition(":")
        versions = self.versions(stage)
        container = self.client.containers.create(stage, command=["/bin/true"])
        try:
            if not container.put_archive("/", definition.files_tar()):
                raise RuntimeError(f"copying the image files into {stage} failed")
            changes = definition.image_config() + [
                f"LABEL workspace.image={tag}",
                f"LABEL workspace.versions={shlex.quote(versions)}",
            ]
            container.commit(repository=repository, tag=version, changes=changes)
        finally:
            container.remove(force=True)

    def _setup(self, definition: ImageDefinition, rootfs: Path) -> None:
        # pip in the chroot needs DNS and the host's CA bundle, and a clean
        # environment so that host pip settings (constraints, local wheels) stay out.
        shutil.copy2("/etc/resolv.conf", rootfs / "etc/resolv.conf")
        shutil.copy2(CA_BUNDLE, rootfs / "tmp/ca-certificates.crt")
        (rootfs / "tmp/requirements.txt").write_text(definition.requirements())
        (rootfs / "tmp/packages.txt").write_text("\n".join(definition.packages) + "\n")
        shutil.copy2(definition.setup_script, rootfs / "tmp/setup.sh")
        extras = [f"tmp/{extra.name}" for extra in definition.extra_requirements]
        for extra in definition.extra_requirements:
            shutil.copy2(extra, rootfs / "tmp" / extra.name)
        for target, args in (("proc", ["-t", "proc", "proc"]), ("dev", ["--bind", "/dev"])):
            run_logged(["mount", *args, str(rootfs / target)], self.log, f"Mounting /{target} in the chroot failed")
        run_logged(
            [
                "env",
                "-i",
                "PATH=/usr/sbin:/usr/bin:/sbin:/bin",
                "HOME=/root",
                "PIP_CERT=/tmp/ca-certificates.crt",
                "chroot",
                str(rootfs),
                "/bin/bash",
                "/tmp/setup.sh",
            ],
            self.log,
            "Installing the image's Python packages failed (is PyPI reachable?)",
        )
        self._unmount(rootfs)
        for leftover in (
            "tmp/setup.sh",
            "tmp/ca-certificates.crt",
            "tmp/packages.txt",
            "tmp/requirements.txt",
            *extras,
        ):
            (rootfs / leftover).unlink(missing_ok=True)
        # The containers get their DNS from Docker; do not ship the build host's.
        (rootfs / "etc/resolv.conf").write_text("")

    def _unmount(self, rootfs: Path) -> None:
        for target in ("dev", "proc"):
            path = rootfs / target
            if os.path.ismount(path):
                subprocess.run(["umount", "-l", str(path)], check=False)

    def _import(self, rootfs: Path, tag: str) -> None:
        cmd = "tar --numeric-owner -C {root} -c . | docker import - {tag}".format(
            root=shlex.quote(str(rootfs)),
            tag=shlex.quote(tag),
        )
        run_logged(
            ["bash", "-o", "pipefail", "-c", cmd],
            self.log,
            "Importing the image into Docker failed (is the Docker engine running?)",
        )


def definitions(root: Path, only: list[str] | None = None) -> list[ImageDefinition]:
    """The image definitions under `root` (a folder per image, named workspace-<folder>), each after the
    one it extends; `only`: those folders (and what they extend)."""
    found: dict[str, ImageDefinition] = {}

    def load(folder: str, seen: tuple = ()) -> ImageDefinition:
        if folder in found:
            return found[folder]
        path = root / folder
        if not (path / "packages.txt").is_file() or folder in seen:
            raise SystemExit(f"images/{folder}: no such image definition (or one that extends itself)")
        extends = path / "extends"
        parent = load(extends.read_text().strip(), (*seen, folder)) if extends.is_file() else None
        found[folder] = ImageDefinition(path=path, name=f"workspace-{folder}", parent=parent)
        return found[folder]

    for p in sorted(root.iterdir()):
        if (p / "packages.txt").is_file() and (only is None or p.name in only):
            load(p.name)
    return list(found.values())
