"""A user's Dockerfile (#32), read with dockerfile-parse and turned into what the sandboxed builder runs.

The builder (images/builds.py) never runs `docker build`: a build is a container of the base image that
runs a script of ours, committed at its end. A Dockerfile is translated into that: its one `FROM` is the
base (an image the user may build from), and its other instructions become the build's script, in order:

- `RUN` (shell or exec form) runs as the current `USER` in the current `WORKDIR`, with the `ENV` and `ARG`
  values so far exported;
- `COPY` and `ADD` copy from the build's context (files the user sent, `CONTEXT` in the container; never
  above it), `--chown` honoured; `ADD` unpacks a local tar archive and fetches an http(s) URL (through the
  build network, which reaches the internet only);
- `ENV` values are kept in the image too; `LABEL`s become its labels (not `workspace.*`, ours);
- `WORKDIR`, `USER`, `EXPOSE`, `CMD` and `ENTRYPOINT` shape the build and are recorded as labels; the
  image still starts as a workspace (JupyterLab, as uid 1000), so they do not change its start.

Anything else (`VOLUME`, `HEALTHCHECK`, `ONBUILD`, `SHELL`, `STOPSIGNAL`, a second `FROM`, `COPY --from`)
is refused with its line and a sentence. The context is sanitised on the service's side
(`sanitize_context`): read as a stream, never unpacked there, kept as a new archive of regular files and
folders only, bounded in size and count.
"""

from __future__ import annotations

import base64
import binascii
import io
import json
import posixpath
import re
import shlex
import tarfile
from dataclasses import dataclass, field

from dockerfile_parse import DockerfileParser

from workspace.errors import UserError

SUPPORTED = ("FROM", "RUN", "COPY", "ADD", "ENV", "ARG", "WORKDIR", "USER", "LABEL", "EXPOSE", "CMD", "ENTRYPOINT")
CONTEXT = "/tmp/workspace-build/context"  # where the build finds the context's files
MAX_DOCKERFILE = 64 * 1024  # bytes
MAX_CONTEXT_BYTES = 64_000_000  # in base64 within the service's request bound (100 MB)
MAX_CONTEXT_FILES = 10_000
URL = re.compile(r"^https?://", re.IGNORECASE)
STEPS = "@@WORKSPACE_STEPS@@"  # the count of steps, known once the whole Dockerfile is read
NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass
class Translation:
    """What the builder runs and keeps for a Dockerfile."""

    base: str  # the FROM, as the user named it
    script: str  # the build's steps, run by bash -e in the build container as root
    env: dict[str, str] = field(default_factory=dict)  # ENV: kept in the image
    labels: dict[str, str] = field(default_factory=dict)  # LABEL, and what the start does not use
    steps: int = 0


def _quote(path: str) -> str:
    """A path for the script: its `$NAME`s expanded by the shell (as Docker expands ENV and ARG), nothing
    else interpreted."""
    return '"' + re.sub(r'(["\\`])', r"\\\1", path) + '"'


def _pairs(value: str, line: int, what: str) -> dict[str, str]:
    """ENV or LABEL's `a=1 b="two words"` (or the old `ENV A value` form)."""
    try:
        words = shlex.split(value)
    except ValueError as e:
        raise UserError(
            400, "Line {line} of the Dockerfile: {what} cannot be read ({error}).", line=line, what=what, error=str(e)
        ) from e
    if words and "=" not in words[0] and what == "ENV":
        return {words[0]: value.split(None, 1)[1] if len(words) > 1 else ""}
    out = {}
    for word in words:
        key, sep, val = word.partition("=")
        if not sep or not key:
            raise UserError(
                400,
                "Line {line} of the Dockerfile: {what} takes name=value pairs, not “{word}”.",
                line=line,
                what=what,
                word=word,
            )
        out[key] = val
    return out


def _exec_or_shell(value: str) -> str:
    """RUN's command: the exec form (a JSON list) quoted as one shell command, the shell form as it is."""
    if value.lstrip().startswith("["):
        try:
            words = json.loads(value)
        except ValueError:
            return value
        if isinstance(words, list) and all(isinstance(w, str) for w in words):
            return shlex.join(words)
    return value


def _flags(value: str, line: int, allowed: tuple[str, ...]) -> tuple[dict[str, str], list[str]]:
    """COPY/ADD's `--name=value` flags and its other words."""
    try:
        words = shlex.split(value)
    except ValueError as e:
        raise UserError(
            400, "Line {line} of the Dockerfile: it cannot be read ({error}).", line=line, error=str(e)
        ) from e
    flags = {}
    while words and words[0].startswith("--"):
        name, _, val = words.pop(0)[2:].partition("=")
        if name not in allowed:
            raise UserError(
                400,
                "Line {line} of the Dockerfile: --{flag} is not supported here (a build has one stage; {allowed}).",
                line=line,
                flag=name,
                allowed=", ".join(f"--{a}" for a in allowed),
            )
        flags[name] = val
    return flags, words


def _source(src: str, line: int, context: set[str]) -> str:
    """A COPY/ADD source as a path in the context, never above it."""
    path = posixpath.normpath(src.lstrip("/")) if src not in (".", "./") else "."
    if path == ".." or path.startswith("../"):
        raise UserError(
            400, "Line {line} of the Dockerfile: “{src}” is outside the build's context.", line=line, src=src
        )
    if (
        path != "."
        and not any(ch in path for ch in "*?[")
        and not (path in context or any(name.startswith(path + "/") for name in context))
    ):
        raise UserError(
            400,
            "Line {line} of the Dockerfile: “{src}” is not in the build's context; send it with the Dockerfile.",
            line=line,
            src=src,
        )
    return path


def _copy(flags: dict[str, str], words: list[str], line: int, context: set[str], add: bool) -> list[str]:
    if len(words) < 2:
        raise UserError(
            400, "Line {line} of the Dockerfile: COPY and ADD take one or more sources and a destination.", line=line
        )
    *sources, dest = words
    out = []
    many = len(sources) > 1 or dest.endswith("/")
    target = _quote(dest)
    out.append(f"mkdir -p {target}" if many else f'mkdir -p "$(dirname {target})"')
    for src in sources:
        if add and URL.match(src):
            out.append(f"workspace_fetch {shlex.quote(src)} {target}")
            continue
        path = _source(src, line, context)
        here = f"{CONTEXT}/{path}" if path != "." else CONTEXT
        if add and re.search(r"\.(tar|tar\.gz|tgz|tar\.bz2|tar\.xz|txz)$", path):
            out.append(f"mkdir -p {target} && tar -x --no-same-owner -f {shlex.quote(here)} -C {target}")
        elif any(ch in path for ch in "*?["):
            out.append(f"cp -a {here} {target}{'/' if many else ''}")
        else:
            out.append(
                f"if [ -d {shlex.quote(here)} ]; then mkdir -p {target} && cp -a {shlex.quote(here)}/. {target}/; "
                f"else cp -a {shlex.quote(here)} {target}; fi"
            )
    owner = flags.get("chown")
    if owner:
        if not re.fullmatch(r"[A-Za-z0-9_.-]+(:[A-Za-z0-9_.-]+)?", owner):
            raise UserError(
                400,
                "Line {line} of the Dockerfile: --chown takes user or user:group, not “{owner}”.",
                line=line,
                owner=owner,
            )
        out.append(f"chown -R {shlex.quote(owner)} {target}")
    mode = flags.get("chmod")
    if mode:
        if not re.fullmatch(r"[0-7]{3,4}", mode):
            raise UserError(
                400,
                "Line {line} of the Dockerfile: --chmod takes an octal mode such as 755, not “{mode}”.",
                line=line,
                mode=mode,
            )
        out.append(f"chmod -R {mode} {target}")
    return out


def translate(text: str, bases: dict[str, str], context: set[str] | None = None) -> Translation:
    """The builder's script for `text` (a Dockerfile), or the user's 400 naming the line. `bases`: the images
    the caller may build from ({name: engine ref}); `context`: the names in the build's context."""
    if len(text.encode()) > MAX_DOCKERFILE:
        raise UserError(400, "The Dockerfile is larger than {kb} KB.", kb=MAX_DOCKERFILE // 1024)
    reader = _Reader(bases, context or set())
    for ins in DockerfileParser(fileobj=io.BytesIO(text.encode())).structure:
        if ins["instruction"] != "COMMENT":
            reader.read(ins["instruction"], ins["value"], ins["startline"] + 1)
    return reader.translation()


class _Reader:
    """The Dockerfile's instructions in order, each appended to the script (translate)."""

    def __init__(self, bases: dict[str, str], context: set[str]):
        self.bases, self.context = bases, context
        self.base: str | None = None
        self.lines: list[str] = []
        self.env: dict[str, str] = {}
        self.labels: dict[str, str] = {}
        self.user: tuple[str, str] = ("root", "")  # USER's user and group, for the RUNs after it
        self.steps = 0

    def read(self, kind: str, value: str, line: int) -> None:
        if kind not in SUPPORTED:
            raise UserError(
                400,
                "Line {line} of the Dockerfile: {instruction} is not supported here; a Dockerfile may use {supported}.",
                line=line,
                instruction=kind,
                supported=", ".join(SUPPORTED),
            )
        if kind == "FROM":
            return self.from_(value, line)
        if self.base is None and kind != "ARG":
            raise UserError(
                400,
                "Line {line} of the Dockerfile: a Dockerfile begins with FROM (an ARG may come before it).",
                line=line,
            )
        if kind == "RUN":
            self.run(value, line)
        elif kind in ("COPY", "ADD"):
            flags, words = _flags(value, line, ("chown", "chmod"))
            self.steps += 1
            self.lines.append(f"echo {shlex.quote(f'[image] step {self.steps}/{STEPS}: {kind} (line {line})')}")
            self.lines.extend(_copy(flags, words, line, self.context, add=kind == "ADD"))
        elif kind in ("ENV", "ARG"):
            self.variables(kind, value, line)
        elif kind == "WORKDIR":
            self.lines.append(f"mkdir -p {_quote(value)} && cd {_quote(value)}")
            self.labels["workspace.dockerfile.workdir"] = value
        elif kind == "USER":
            self.user_(value, line)
        elif kind == "LABEL":
            self.label(value, line)
        else:  # EXPOSE, CMD, ENTRYPOINT: recorded; the image starts as a workspace
            self.labels[f"workspace.dockerfile.{kind.lower()}"] = value

    def from_(self, value: str, line: int) -> None:
        if self.base is not None:
            raise UserError(
                400,
                "Line {line} of the Dockerfile: a second FROM (a build of several stages) is not supported here.",
                line=line,
            )
        name = value.split()[0] if value.split() else ""
        if name not in self.bases:
            raise UserError(
                400,
                "Line {line} of the Dockerfile: FROM {image} is not an image you may build from: {offered}.",
                line=line,
                image=name or "(nothing)",
                offered=", ".join(sorted(self.bases)) or "none",
            )
        self.base = name

    def run(self, value: str, line: int) -> None:
        command = _exec_or_shell(value)
        self.steps += 1
        self.lines.append(
            f"echo {shlex.quote(f'[image] step {self.steps}/{STEPS}: RUN (line {line}): {command[:120]}')}"
        )
        run = f"bash -euo pipefail -c {shlex.quote(command)}"
        user, group = self.user
        if user in ("root", "0"):
            self.lines.append(run)
        elif user.isdigit():  # a uid the image may not name: its own group unless USER named one
            self.lines.append(f"setpriv --reuid={user} --regid={group or user} --clear-groups -- {run}")
        else:
            self.lines.append(f"runuser -u {user}{f' -g {group}' if group else ''} -- {run}")

    def variables(self, kind: str, value: str, line: int) -> None:
        if kind == "ARG":
            name, sep, default = value.strip().partition("=")
            pairs = {name: default} if sep else {name: ""}
        else:
            pairs = _pairs(value, line, "ENV")
        for key, val in pairs.items():
            if not NAME.match(key):
                raise UserError(
                    400, "Line {line} of the Dockerfile: “{name}” is not a variable name.", line=line, name=key
                )
            self.lines.append(f"export {key}={_quote(val)}")
            if kind == "ENV":
                self.env[key] = val

    def user_(self, value: str, line: int) -> None:
        user, _, group = value.strip().partition(":")
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", user or "root") or not re.fullmatch(r"[A-Za-z0-9_.-]*", group):
            raise UserError(
                400,
                "Line {line} of the Dockerfile: USER takes a user name or number, not “{user}”.",
                line=line,
                user=value,
            )
        self.user = (user or "root", group)
        self.labels["workspace.dockerfile.user"] = value

    def label(self, value: str, line: int) -> None:
        for key, val in _pairs(value, line, "LABEL").items():
            if key.startswith("workspace."):
                raise UserError(
                    400, "Line {line} of the Dockerfile: labels named workspace.* are the platform's own.", line=line
                )
            self.labels[key] = val

    def translation(self) -> Translation:
        if self.base is None:
            raise UserError(400, "The Dockerfile has no FROM line: name the image to build from.")
        if not self.steps:
            raise UserError(400, "The Dockerfile adds nothing to {image}: give it a RUN, COPY or ADD.", image=self.base)
        # each step says where the build is, as the builder's own steps do (the record's progress)
        script = "\n".join([FETCH, *self.lines]).replace(STEPS, str(self.steps)) + "\n"
        return Translation(base=self.base, script=script, env=self.env, labels=self.labels, steps=self.steps)


# ADD's URLs, fetched in the build container (curl if the image has it, else its Python)
FETCH = """workspace_fetch() {
  local url="$1" dest="$2"
  case "$dest" in */) mkdir -p "$dest"; dest="$dest$(basename "${url%%\\?*}")";; esac
  if command -v curl >/dev/null; then curl -fsSL --max-filesize 2147483648 -o "$dest" "$url"
  else python3 -c 'import shutil, sys, urllib.request as u
shutil.copyfileobj(u.urlopen(sys.argv[1]), open(sys.argv[2], "wb"))' "$url" "$dest"
  fi
}"""


def sanitize_context(upload: bytes) -> tuple[bytes, set[str]]:
    """A build context the user sent (a tar archive, compressed or not) as a new archive of its regular files
    and folders (names normalised, modes 0644/0755, owned by root), and their names; the user's 400 for a
    link, a device, a name above the context or a context past the bounds. Read as a stream: nothing of it is
    ever written to the service's disk."""
    out = io.BytesIO()
    names: set[str] = set()
    total = 0
    try:
        source = tarfile.open(fileobj=io.BytesIO(upload), mode="r:*")
    except tarfile.TarError as e:
        raise UserError(400, "The build's context is not a tar archive ({error}).", error=str(e)) from e
    with source, tarfile.open(fileobj=out, mode="w") as clean:
        for member in source:
            name = posixpath.normpath(member.name.lstrip("/"))
            if name in (".", ""):
                continue
            if name == ".." or name.startswith("../"):
                raise UserError(400, "“{name}” in the build's context is outside it.", name=member.name)
            if not (member.isfile() or member.isdir()):
                raise UserError(
                    400,
                    "“{name}” in the build's context is a link or a device; a context holds files and folders.",
                    name=member.name,
                )
            total += member.size
            if len(names) >= MAX_CONTEXT_FILES or total > MAX_CONTEXT_BYTES:
                raise UserError(
                    400,
                    "The build's context is larger than {files} files or {mb} MB.",
                    files=MAX_CONTEXT_FILES,
                    mb=MAX_CONTEXT_BYTES // 1_000_000,
                )
            info = tarfile.TarInfo(name)
            info.uid = info.gid = 0
            info.mtime = member.mtime
            if member.isdir():
                info.type, info.mode = tarfile.DIRTYPE, 0o755
                clean.addfile(info)
            else:
                info.size, info.mode = member.size, 0o755 if member.mode & 0o111 else 0o644
                clean.addfile(info, source.extractfile(member))
            names.add(name)
    return out.getvalue(), names


def read_request(text, context, bases: dict[str, str]) -> tuple[Translation, bytes]:
    """A build request's `dockerfile` (its text) and `context` (a tar archive in base64, optional): the
    translation and the context's sanitised archive, or the user's 400 (blocking: the context is read)."""
    if not isinstance(text, str) or not text.strip():
        raise UserError(400, "“dockerfile” must be the text of a Dockerfile.")
    archive, names = b"", set()
    if context is not None:
        limit = MAX_CONTEXT_BYTES // 1_000_000
        if not isinstance(context, str) or len(context) > MAX_CONTEXT_BYTES * 4 // 3 + 4:
            raise UserError(400, "“context” must be a tar archive in base64, at most {mb} MB.", mb=limit)
        try:
            raw = base64.b64decode(context, validate=True)
        except (ValueError, binascii.Error) as e:
            raise UserError(400, "“context” must be a tar archive in base64, at most {mb} MB.", mb=limit) from e
        archive, names = sanitize_context(raw)
    return translate(text, bases, names), archive
