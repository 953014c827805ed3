"""What a request to build an image says, checked (#18, #32): its name, its base, apt packages, pip
requirements and script, or a Dockerfile with its context (images/dockerfiles.py), and whom it is shared
with. The records and the rules of who may see and start an image are in images/user.py.
"""

from __future__ import annotations

import json
import re

from workspace.errors import UserError
from workspace.images import dockerfiles

NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,62}$")
# a Debian package name (policy 5.6.1), optionally =version or /release
APT_NAME = re.compile(r"^[a-z0-9][a-z0-9+.-]{1,62}(?:=[A-Za-z0-9.+:~-]{1,64}|/[a-z0-9-]{1,32})?$")
TEXT_MAX = 64 * 1024
APT_MAX = 200


def check_name(name) -> str:
    if not isinstance(name, str) or not NAME.match(name):
        raise UserError(
            400,
            "An image needs a “name” of 1–63 lower-case letters, digits, “-”, “_” or “.”, starting with a "
            "letter or digit (like “nlp-course” or “thesis”).",
        )
    return name


def parse_apt(value) -> list[str]:
    """Debian package names (a list, or text with one or more per line, # comments), or the user's 400."""
    if value is None or value == "":
        return []
    if isinstance(value, str):
        value = [w for line in value.splitlines() for w in line.split("#", 1)[0].split()]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise UserError(400, "“apt” must be a list of Debian package names, or text with one per line.")
    if len(value) > APT_MAX:
        raise UserError(
            400, "“apt” names {count} packages; at most {max_count} are allowed.", count=len(value), max_count=APT_MAX
        )
    bad = [v for v in value if not APT_NAME.match(v)]
    if bad:
        shown = ", ".join(json.dumps(b)[:40] for b in bad[:3])
        if len(bad) == 1:
            raise UserError(
                400,
                "{names} is not a Debian package name: use names like “graphviz” or “libsndfile1” (lower case; a "
                "version as “name=1.2-3”).",
                names=shown,
            )
        raise UserError(
            400,
            "{names} are not Debian package names: use names like “graphviz” or “libsndfile1” (lower case; a "
            "version as “name=1.2-3”).",
            names=shown,
        )
    return list(dict.fromkeys(value))


def parse_text(value, field: str) -> str:
    """`pip` (a requirements file) or `script` (a post-build script): text of at most TEXT_MAX bytes, no NUL."""
    if value is None:
        return ""
    if not isinstance(value, str):
        if field == "pip":
            raise UserError(400, "“pip” must be text: a requirements file.")
        raise UserError(400, "“script” must be text: a post-build script.")
    if "\0" in value:
        raise UserError(400, "“{field}” must not contain a NUL character.", field=field)
    if len(value.encode()) > TEXT_MAX:
        if field == "pip":
            raise UserError(
                400, "“pip” is longer than {kib} KiB; a requirements file must be shorter.", kib=TEXT_MAX // 1024
            )
        raise UserError(
            400, "“script” is longer than {kib} KiB; a post-build script must be shorter.", kib=TEXT_MAX // 1024
        )
    return value


def parse_visibility(value, shareable: set[str] | None) -> str:
    """`private`, `public` or `group:NAME`; `shareable` are the groups the caller may share with (None: any, an
    administrator). Another group is the user's 403; anything else their 400."""
    if value is None or value == "private":
        return "private"
    if value == "public":
        return "public"
    if isinstance(value, str) and value.startswith("group:") and len(value) <= 300:
        group = value[len("group:") :]
        if not group:
            raise UserError(400, "Name the course to share with: “group:cs101”.")
        if shareable is not None and group not in shareable:
            raise UserError(
                403,
                "You can share an image only with a course (group) you belong to or teach; “{group}” is not one.",
                group=group,
            )
        return value
    raise UserError(400, "“visibility” is “private”, “public”, or “group:NAME” to share with one course.")


def parse_definition(body: dict, bases: dict[str, str], shareable: set[str] | None) -> dict:
    """A build request's fields checked: {name, base, base_ref, apt, pip, script, visibility}, or the user's
    400/403. `bases`: what the caller may build from ({name shown: engine ref})."""
    unknown = set(body) - {"name", "from", "apt", "pip", "script", "visibility", "dockerfile", "context"}
    if unknown:
        raise UserError(
            400,
            "Unknown field(s) {fields}; an image takes name, from, apt, pip, script, visibility (or name, "
            "dockerfile, context, visibility).",
            fields=", ".join(sorted(unknown)),
        )
    if body.get("dockerfile") is not None:
        return parse_dockerfile(body, bases, shareable)
    name = check_name(body.get("name"))
    base = body.get("from")
    if not isinstance(base, str) or base not in bases:
        if not bases:
            raise UserError(400, "“from” must be an image you may use: none.")
        raise UserError(400, "“from” must be an image you may use: {offered}.", offered=", ".join(sorted(bases)))
    apt = parse_apt(body.get("apt"))
    pip = parse_text(body.get("pip"), "pip")
    script = parse_text(body.get("script"), "script")
    if not apt and not pip.strip() and not script.strip():
        raise UserError(400, "Say what to add to the base image: apt packages, pip requirements or a script.")
    return {
        "name": name,
        "base": base,
        "base_ref": bases[base],
        "apt": apt,
        "pip": pip,
        "script": script,
        "visibility": parse_visibility(body.get("visibility"), shareable),
        "dockerfile": None,
        "config": None,
    }


def parse_dockerfile(body: dict, bases: dict[str, str], shareable: set[str] | None) -> dict:
    """A build request of a Dockerfile (#32): {name, dockerfile, context, visibility} checked and translated
    (images/dockerfiles.py): the definition with its script, its image config and its context's sanitised
    archive (`context_tar`, for the caller to keep until the build), or the user's 400/403 (blocking)."""
    extra = {"from", "apt", "pip", "script"} & set(body)
    if extra:
        raise UserError(
            400, "A Dockerfile says what the image is: send it without {fields}.", fields=", ".join(sorted(extra))
        )
    name = check_name(body.get("name"))
    translation, context_tar = dockerfiles.read_request(body.get("dockerfile"), body.get("context"), bases)
    return {
        "name": name,
        "base": translation.base,
        "base_ref": bases[translation.base],
        "apt": [],
        "pip": "",
        "script": translation.script,
        "visibility": parse_visibility(body.get("visibility"), shareable),
        "dockerfile": body["dockerfile"],
        "config": {"env": translation.env, "labels": translation.labels},
        "context_tar": context_tar,
    }
