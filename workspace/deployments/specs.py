"""What a user may ask of a deployment (#33), checked once: each bad value is the user's 400 with a
sentence, and nothing is recorded.

`parse_new` reads a new deployment (`POST /api/deployments`), `parse_version` a new version of one
(`POST /api/deployments/NAME/versions`: what it does not name stays as the serving version has it), and
`parse_settings` a change of its settings (replicas, access, scale to zero). `resolve_source` turns
"mnist#3" (an execution's saved output) or a dataset reference into what is mounted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sqlalchemy.orm import Session

from workspace import datasets, tasks
from workspace.caller import Caller
from workspace.errors import UserError
from workspace.executions import (
    WORKSPACE_NAME,
    execution_by_number,
    find_workspace,
    latest_with_output,
)

from .records import ACCESS, DEPLOY_WORKSPACE

RESERVED_PORTS = (8888, 2222)  # the server's own port (its runner answers there) and sshd's
READY_PATH = re.compile(r"^/[\x21-\x7e]{0,511}$")  # printable ASCII, no spaces
SOURCE = re.compile(r"^(?P<workspace>[a-z0-9][a-z0-9._-]{0,62})(?:#(?P<number>\d{1,9}))?$")
MIN_IDLE = 60  # s: scaling to zero sooner would stop replicas between two clicks
FIELDS_VERSION = {"from", "dataset", "image", "command", "port", "ready"}
FIELDS_SETTINGS = {"replicas", "access", "course", "idle_seconds"}
FIELDS_NEW = FIELDS_SETTINGS | {"name", "from", "dataset", "image", "command", "port", "resource_type", "ready"}


@dataclass(frozen=True)
class Source:
    """What a version mounts read-only at /openbayes/output, resolved."""

    label: str  # as the user named it ("mnist#3", "alice/digits:2")
    kind: str  # "output" or "dataset"
    key: str  # the store's snapshot or dataset key
    execution_id: int | None = None
    dataset_version_id: int | None = None


def check_fields(body: dict, allowed: set[str]) -> None:
    unknown = set(body) - allowed
    if unknown:
        raise UserError(
            400,
            "Unknown field(s) {unknown}; a deployment takes {fields}.",
            unknown=", ".join(sorted(unknown)),
            fields=", ".join(sorted(allowed)),
        )


def parse_name(value) -> str:
    if not isinstance(value, str) or not WORKSPACE_NAME.fullmatch(value) or DEPLOY_WORKSPACE.match(value):
        raise UserError(
            400,
            "A deployment's name is 1–63 lower-case letters, digits, “-”, “_” or “.”, starting with a letter "
            "or digit (like “digits-api”).",
        )
    return value


def parse_port(value) -> int:
    if isinstance(value, str) and value.isdigit():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool) or not 1024 <= value <= 65535 or value in RESERVED_PORTS:
        raise UserError(
            400,
            "“port” is the port your command listens on: a number from 1024 to 65535, other than 8888 and 2222 "
            "(the platform's own), e.g. 8080.",
        )
    return value


def parse_replicas(value, most: int) -> int:
    if isinstance(value, str) and value.isdigit():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= most:
        raise UserError(400, "“replicas” is how many copies serve it: from 1 to {most}.", most=most)
    return value


def parse_ready(value) -> str:
    if value is None:
        return "/"
    if not isinstance(value, str) or not READY_PATH.fullmatch(value):
        raise UserError(
            400,
            "“ready” is the path your app answers once it is ready, starting with “/” (like “/health”), "
            "without spaces.",
        )
    return value


def parse_access(value, course, caller: Caller) -> tuple[str, str | None]:
    """(access, its course): private, public, or course with a group the owner belongs to."""
    value = value or "private"
    if value not in ACCESS:
        raise UserError(400, "“access” is private (only you), course (a course's members) or public (anyone).")
    if value != "course":
        if course:
            raise UserError(400, "“course” is for access “course”; leave it out for private or public.")
        return value, None
    if not isinstance(course, str) or not course:
        raise UserError(400, "Access “course” needs “course”: the name of the course whose members may use it.")
    if course not in caller.groups and not caller.admin:
        raise UserError(403, "You are not a member of the course “{course}”; choose one of yours.", course=course)
    return value, course


def parse_idle(value) -> int | None:
    """Seconds without a request after which the replicas stop (scale to zero); None or 0: never."""
    if value in (None, 0, "0", ""):
        return None
    if isinstance(value, str) and value.isdigit():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool) or not MIN_IDLE <= value <= 30 * 86400:
        raise UserError(
            400,
            "“idle_seconds” is how long a deployment may get no request before it is scaled to zero: from "
            "{least} seconds to 30 days, or 0 for never.",
            least=MIN_IDLE,
        )
    return value


def parse_image(value, images: dict[str, str]) -> str:
    """The image a user names, as the engine knows it: one of the site's (`images`: name → reference), or a
    user's image ("owner/name", checked at each start as any start's)."""
    if isinstance(value, str) and value in images:
        return value
    if isinstance(value, str) and "/" in value and len(value) <= 255:
        return value
    raise UserError(400, "“image” must be one of this server's images: {images}.", images=", ".join(images))


def source_of(body: dict, current: str | None = None) -> tuple[str | None, str | None]:
    """(output, dataset) a body names (exactly one of them; or neither when a version keeps `current`)."""
    output, dataset = body.get("from"), body.get("dataset")
    if output is not None and dataset is not None:
        raise UserError(400, "Give either “from” (a workspace's output, like “mnist#3”) or “dataset”, not both.")
    if output is None and dataset is None and current is None:
        raise UserError(
            400,
            "A deployment serves a saved output: give “from” (like “mnist#3”, or “mnist” for its latest) or "
            "“dataset” (like “alice/digits:2”).",
        )
    return output, dataset


def resolve_source(session: Session, owner: str, caller: Caller, output, dataset) -> Source:
    """The output or dataset version a version mounts; the user's 400/403/404."""
    if dataset is not None:
        refs = datasets.parse_refs([dataset] if isinstance(dataset, str) else dataset)
        if len(refs) != 1:
            raise UserError(400, "“dataset” names one dataset version, like “alice/digits:2”.")
        plan = datasets.resolve(session, refs, caller)[0]
        return Source(plan["ref"], "dataset", plan["key"], dataset_version_id=plan["version_id"])
    match = SOURCE.fullmatch(output) if isinstance(output, str) else None
    if match is None:
        raise UserError(400, "“from” names a workspace's saved output, like “mnist#3” (or “mnist” for its latest).")
    name, number = match["workspace"], match["number"]
    ws = find_workspace(session, owner, name)
    if ws is None:
        raise UserError(404, "There is no workspace “{name}”.", name=name)
    ex = execution_by_number(session, ws, int(number)) if number else latest_with_output(session, ws)
    if ex is None or not ex.has_output:
        raise UserError(
            400,
            "“{source}” has no saved output to serve; choose an execution that was saved (its page lists them).",
            source=output,
        )
    return Source(f"{name}#{ex.number}", "output", ex.snapshot.key, execution_id=ex.id)


def parse_command(value) -> str:
    """The command that serves (run with `bash -lc`, as a task's); the user's 400 when there is none."""
    if not value or (isinstance(value, str) and not value.strip()):
        raise UserError(
            400,
            "A deployment needs a “command” that serves HTTP on its port, e.g. “python -m http.server 8080”.",
        )
    return tasks.parse_command(value)
